/*
 * restart.c - `rshare hub restart`: a new hub in the same process, with
 * every connection kept.
 *
 * On SIGUSR2 (what `rshare hub restart` sends) the hub hands the node to a
 * new hub: the program it was started from, which may be a newer build,
 * executed in its own process (execve).  The pid, every process's
 * connection to the hub (and so its watch of the hub), every arena and
 * pair segment stay as they are; processes see a pause, and their blocked
 * calls wait through it.  In order:
 *   1. what cannot be carried says no, and the hub goes on as it was, the
 *      reason in the log and in `rshare stat` (restart_refused): a new
 *      binary whose records differ (`rshared --layout`: image.c), sockets
 *      in flight between processes, keepers, a verbs connection whose
 *      receive ring changes size (its peer may write to two of its rings,
 *      whose keys the new hub changes);
 *   2. every link is dropped as lost, a soft link drained first: its
 *      connections wait (resume.c) as for any lost link, and each peer hub
 *      connects again, finding the same port listening (the listener is
 *      kept); a connect under way is reset, as on a lost link;
 *   3. its records go into a memfd (image.c) and the loop ends; the
 *      warden (warden.c; the hub's own process without one) clears
 *      close-on-exec on the descriptors the new hub needs and executes
 *      rshared as `rshared --adopt FD` with its own options
 *      (hub_handover_exec).  The new hub reads the records
 *      back (hub_adopt), maps the arenas and pair segments again, watches
 *      the same descriptors (hub_adopt_watch), takes up its settings from
 *      rshare.conf again, and connects to the peers of the waiting
 *      connections, which go on (RESUME) as after an outage.  On verbs
 *      the new hub opens the device and registers the rings again
 *      (hub_rekey): the RESUME tells each peer the new key and address.
 * An execve that fails leaves a hub running on the records, its
 * connections waiting for their links as after an outage.  Same-node
 * connections have no link: they simply go on.
 */
#include "hub.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

static char self_path[PATH_MAX];
static char **self_argv; /* the options, without an --adopt */
static int self_argc;

/* Takes --layout (prints the record layout and exits: 0) and --adopt FD
 * (*adopt_fd) out of argv: the arguments left, or -1 to exit with *status. */
int hub_restart_args(int *argc, char **argv, int *adopt_fd, int *status)
{
	int n = 1;
	ssize_t l = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	self_path[l > 0 ? l : 0] = 0;
	*adopt_fd = -1;
	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--layout")) {
			printf("%016llx\n", (unsigned long long)hub_layout());
			*status = 0;
			return -1;
		}
		if (!strcmp(argv[i], "--adopt") && i + 1 < *argc)
			*adopt_fd = atoi(argv[++i]);
		else
			argv[n++] = argv[i];
	}
	argv[n] = NULL;
	*argc = n;
	self_argv = argv;
	self_argc = n;
	return 0;
}

void hub_restart_signal(int sig)
{
	(void)sig;
	if (the_hub)
		the_hub->restart = 1;
}

/* The layout of the records of the binary at self_path: 0 when it does not say. */
static uint64_t next_layout(void)
{
	int pfd[2], st;
	char buf[64] = "";
	pid_t pid;
	ssize_t n;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return 0;
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		execl(self_path, self_path, "--layout", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	n = pid > 0 ? read(pfd[0], buf, sizeof(buf) - 1) : -1;
	close(pfd[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strtoull(buf, NULL, 16);
}

/* Why the node cannot be handed over now (NULL: it can). */
static const char *cannot(struct hub *h)
{
	if (!self_path[0])
		return "the hub's program is not known";
	if (h->npasses)
		return "sockets are in flight between processes";
	if (h->nkeepers)
		return "keepers hold readiness descriptors";
	return hub_layout_differs();
}

const char *hub_layout_differs(void)
{
	if (next_layout() != hub_layout())
		return "the new rshared keeps its records otherwise (rshared --layout)";
	return NULL;
}

static void no_cloexec(int fd)
{
	int fl = fd >= 0 ? fcntl(fd, F_GETFD) : -1;
	if (fl >= 0)
		fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}

/* The descriptors the new hub goes on with lose close-on-exec. */
static void keep_fds(struct hub *h)
{
	no_cloexec(h->lfd);
	no_cloexec(h->kept_lfd);
	for (struct pool *p = h->pools; p; p = p->next) {
		no_cloexec(p->memfd);
		no_cloexec(p->evfd);
	}
	for (struct pairseg *g = h->segs; g; g = g->next)
		no_cloexec(g->memfd);
	for (struct proc *pr = h->procs; pr; pr = pr->next)
		no_cloexec(pr->fd);
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s) {
			no_cloexec(s->poll_p);
			no_cloexec(s->poll_h);
			no_cloexec(s->evfd);
		}
	}
}

void hub_links_let_go(struct hub *h, const char *why)
{
	h->handing_over = 1;
	while (h->links) {
		struct link *l = h->links;
		l->lost = 1;
		hub_link_fail(&l->x, why);
	}
	h->handing_over = 0;
}

/* Links dropped (their connections wait), stat readers let go, batches
 * ended: what is left is only records. */
static void quiesce(struct hub *h, const char *why)
{
	hub_links_let_go(h, why);
	for (struct proc *pr = h->procs, *next; pr; pr = next) {
		next = pr->next;
		if (pr->stat_only || pr->out)
			proc_free(h, pr);
	}
	if (h->npunch)
		punch_flush(h);
	hub_free_deferred(h);
}

void hub_restart(struct hub *h)
{
	const char *why = cannot(h);
	int r;
	h->restart = 0;
	if (why) {
		log_warn("restart refused: %s", why);
		h->restart_refused = why;
		h->restarts_refused++;
		return;
	}
	log_info("restarting: %s takes over", self_path);
	h->restarts++;
	h->restart_refused = NULL;
	if ((r = hub_image_handover(h, "the hub restarts")) < 0) {
		/* the hub goes on, its connections waiting for links */
		log_error("restart failed: %s; this hub goes on", strerror(-r));
		h->restarts--;
		return;
	}
	/* the loop ends; whoever runs it executes the next hub (warden.c) */
	h->stop = 1;
}

/* Links let go, records written into a memfd (handover_fd) for the next
 * hub: 0, or -errno (the records as they were, the links gone). */
int hub_image_handover(struct hub *h, const char *why)
{
	FILE *f;
	int fd, r;
	h->kept_lfd = h->soft.ops && h->soft.ops->listener ? h->soft.ops->listener(&h->soft) : -1;
	quiesce(h, why);
	fd = memfd_create("rshare-hub-image", 0);
	f = fd >= 0 ? fdopen(dup(fd), "w") : NULL;
	r = f ? hub_image_write(h, f) : -errno;
	if (f)
		fclose(f);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	h->handover_fd = fd;
	return 0;
}

int hub_handover_exec(struct hub *h)
{
	char fdbuf[16], **av = calloc((size_t)self_argc + 3, sizeof(*av));
	int r = -ENOMEM;
	if (av) {
		snprintf(fdbuf, sizeof(fdbuf), "%d", h->handover_fd);
		av[0] = self_path;
		av[1] = "--adopt";
		av[2] = fdbuf;
		for (int i = 1; i < self_argc; i++)
			av[i + 2] = self_argv[i];
		keep_fds(h);
		lseek(h->handover_fd, 0, SEEK_SET);
		execv(self_path, av);
		r = -errno;
	}
	/* still here: the caller goes on (a restart: this hub, its
	 * connections waiting for links) */
	log_error("cannot execute %s: %s", self_path, strerror(-r));
	free(av);
	close(h->handover_fd);
	h->handover_fd = -1;
	return r;
}

/* The records of the hub before, from the image in fd: 0, or -errno. */
int hub_adopt(struct hub *h, int fd)
{
	FILE *f = fdopen(fd, "r");
	int r = f ? hub_image_read(h, f) : -errno;
	if (f)
		fclose(f);
	the_hub = h;
	return r;
}

/* The adopted hub watches what the hub before it watched. */
int hub_adopt_watch(struct hub *h)
{
	uint32_t npools = 0, nprocs = 0;
	for (struct pool *p = h->pools; p; p = p->next, npools++) {
		fcntl(p->memfd, F_SETFD, FD_CLOEXEC);
		fcntl(p->evfd, F_SETFD, FD_CLOEXEC);
		p->ev.fn = hub_pool_kick;
		if (hub_watch(h, p->evfd, EPOLLIN, &p->ev) < 0)
			return -errno;
	}
	for (struct pairseg *g = h->segs; g; g = g->next)
		fcntl(g->memfd, F_SETFD, FD_CLOEXEC);
	for (struct proc *pr = h->procs; pr; pr = pr->next, nprocs++) {
		fcntl(pr->fd, F_SETFD, FD_CLOEXEC);
		pr->ev.fn = proc_event;
		if (hub_watch(h, pr->fd, EPOLLIN | EPOLLRDHUP, &pr->ev) < 0)
			return -errno;
	}
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->poll_p >= 0)
			fcntl(s->poll_p, F_SETFD, FD_CLOEXEC);
		if (s && s->poll_h >= 0)
			fcntl(s->poll_h, F_SETFD, FD_CLOEXEC);
		if (s && s->evfd >= 0)
			fcntl(s->evfd, F_SETFD, FD_CLOEXEC);
	}
	log_info("hub restarted (%u): %u pools, %u processes, %u sockets, %u waiting for a link", h->restarts, npools,
		 nprocs, h->nsocks, h->nsuspended);
	return 0;
}
