/*
 * cmd_hub.c - rshare hub start|stop|restart|status, and starting the hub
 * for rshare run.
 *
 * The hub is started by the process side's spawner (hub_spawn.h: a daemon in
 * its own session that is no child of ours); until it answers, its stderr
 * comes to us through a pipe, so that a hub that fails says why.  Stopping
 * is SIGTERM to the pid its STAT answer names, then waiting for it to go.
 * Restarting is SIGUSR2 to it, then waiting for its STAT answer to count
 * one more restart (the same pid: the new hub took over in its process,
 * core/hub/restart.c) or one more refusal, whose reason it prints.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "cmd.h"
#include "json.h"
#include "hub_spawn.h"
#include "procstat.h"

struct hub_info {
	long pid;
	char node[32];
	unsigned port;
};

static int hub_info(struct hub_info *hi)
{
	struct jv root;
	size_t len;
	char *raw = hub_query(1, &len);
	int ret = -1;
	if (!raw)
		return -1;
	if (json_parse(raw, len, &root) == 0) {
		hi->pid = (long)jnum(&root, "pid");
		snprintf(hi->node, sizeof(hi->node), "%s", jstr(&root, "node"));
		hi->port = (unsigned)jnum(&root, "port");
		ret = hi->pid > 0 ? 0 : -1;
	}
	free(raw);
	return ret;
}

static void print_hub(const struct hub_info *hi)
{
	printf("hub: pid %ld node %s port %u\n", hi->pid, hi->node, hi->port);
}

static int pid_gone(pid_t pid)
{
	char st;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	/* a zombie nobody has reaped yet is gone too */
	return procstat_read(pid, &st, NULL) < 0 || st == 'Z' || st == 'X';
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* in the hub's process, when it could not be run: its stderr is our pipe */
static void exec_failed(const char *path, int err)
{
	fprintf(stderr, "rshare: cannot run the hub %s: %s\n", path, strerror(err));
}

/* Wait for the hub (pid HUB, its stderr on ERRFD) to answer: 0, or -1
 * after printing what it said (unless QUIET) and that it did not start. */
static int hub_wait(const char *path, int errfd, pid_t hub, int quiet)
{
	char out[4096];
	size_t outlen = 0;
	for (int t = 0, eof = 0; t < 100; t++) { /* 10 s */
		struct pollfd pf = {.fd = errfd, .events = POLLIN};
		char *ans;
		/* at end of file (the hub's stderr went to a log, or it closed it)
		 * the pipe no longer paces the wait: sleep instead */
		if (eof) {
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
		} else if (poll(&pf, 1, 100) > 0) {
			ssize_t n = read(errfd, out + outlen, sizeof(out) - 1 - outlen);
			if (n > 0)
				outlen += n;
			else
				eof = 1;
		}
		/* up is when it answers STAT: its links' port is open by then */
		if ((ans = hub_query(1, NULL))) {
			free(ans);
			close(errfd);
			return 0;
		}
		if (hub <= 0 || pid_gone(hub)) {
			/* collect the last words */
			ssize_t n;
			while (outlen < sizeof(out) - 1 && (n = read(errfd, out + outlen, sizeof(out) - 1 - outlen)) > 0)
				outlen += n;
			break;
		}
	}
	close(errfd);
	if (!quiet) {
		out[outlen] = 0;
		if (outlen)
			fputs(out, stderr);
		if (outlen && out[outlen - 1] != '\n')
			fputc('\n', stderr);
	}
	fprintf(stderr, "rshare: the hub (%s) did not start\n", path);
	return -1;
}

/*
 * Start PATH as this namespace's hub, a daemon in its own session that is
 * no child of ours (the program `rshare run` becomes never sees it) and
 * holds none of our descriptors (a pipe it kept open would keep a reader
 * of our output, a shell's $(...), waiting for as long as it runs), and
 * wait until it answers.  Until then its stderr comes to us through a
 * pipe, so that a hub that fails says why; RSHARE_HUB_LOG names a file for
 * its log instead.  FRESH (rshare run's, not asked for): the hub takes none
 * of our scheduling or lowered limits and stays in our session; else it
 * leads a session of its own (hub_spawn.c).  0, or -1 after
 * printing what went wrong.
 */
int hub_spawn(const char *path, int port, int quiet, int fresh)
{
	int errp[2], pidp[2], logfd = -1, ret;
	const char *log = getenv("RSHARE_HUB_LOG");
	char portstr[16];
	pid_t hub = -1;
	char *argv[] = {(char *)"rshared", (char *)"--daemon", NULL, NULL, NULL};
	struct spawn_opt o = {.path = path, .argv = argv, .exec_failed = exec_failed, .close_fds = 1,
			      .fresh = fresh};
	if (port > 0) {
		snprintf(portstr, sizeof(portstr), "%d", port);
		argv[2] = (char *)"--port";
		argv[3] = portstr;
	}
	if (log && *log && (logfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "rshare: %s: %s\n", log, strerror(errno));
		return -1;
	}
	if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(pidp, O_CLOEXEC) < 0) {
		fprintf(stderr, "rshare: pipe: %s\n", strerror(errno));
		return -1;
	}
	o.err_fd = logfd >= 0 ? logfd : errp[1];
	o.pid_fd = pidp[1];
	fflush(NULL);
	if ((ret = spawn_hub(&o)) < 0) {
		fprintf(stderr, "rshare: fork: %s\n", strerror(-ret));
		return -1;
	}
	close(errp[1]);
	close(pidp[1]);
	if (logfd >= 0)
		close(logfd);
	if (read(pidp[0], &hub, sizeof(hub)) != sizeof(hub))
		hub = -1;
	close(pidp[0]);
	return hub_wait(path, errp[0], hub, quiet);
}

/* the hub's restarts and refusals so far (its pid in *pid, the last
 * refusal's reason in why): 0, or -1 when it does not answer */
static int hub_restarts(long *pid, unsigned long long *done, unsigned long long *refused, char *why, size_t n)
{
	struct jv root;
	size_t len;
	char *raw = hub_query(1, &len);
	int ret = -1;
	if (raw && json_parse(raw, len, &root) == 0 && jget(&root, "counters")) {
		const struct jv *c = jget(&root, "counters");
		*pid = (long)jnum(&root, "pid");
		*done = jnum(c, "restarts");
		*refused = jnum(c, "restarts_refused");
		snprintf(why, n, "%s", jstr(c, "restart_refused"));
		ret = 0;
	}
	free(raw);
	return ret;
}

/* rshare hub restart: a new hub takes over the node, every connection kept */
static int hub_restart(void)
{
	long pid, p2;
	unsigned long long done, refused, d2, r2;
	char why[256];
	if (hub_restarts(&pid, &done, &refused, why, sizeof(why)) < 0) {
		fprintf(stderr, "rshare: no hub runs in this network namespace\n");
		return 1;
	}
	if (kill((pid_t)pid, SIGUSR2) < 0) {
		fprintf(stderr, "rshare: cannot restart the hub (pid %ld): %s\n", pid, strerror(errno));
		return 1;
	}
	for (int t = 0; t < 200; t++) { /* 10 s */
		sleep_ms(50);
		if (hub_restarts(&p2, &d2, &r2, why, sizeof(why)) < 0)
			continue; /* between the two hubs */
		if (d2 > done) {
			printf("hub restarted: pid %ld, restart %llu\n", p2, d2);
			return 0;
		}
		if (r2 > refused) {
			fprintf(stderr, "rshare: the hub (pid %ld) did not restart: %s; it goes on\n", p2, why);
			return 1;
		}
	}
	fprintf(stderr, "rshare: the hub (pid %ld) did not restart within 10 s\n", pid);
	return 1;
}

int cmd_hub(int argc, char **argv)
{
	struct hub_info hi;
	if (argc < 1)
		return bad_usage(USAGE_HUB);
	if (!strcmp(argv[0], "help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
		printf("Usage: %s\n", USAGE_HUB);
		return 0;
	}
	if (!strcmp(argv[0], "status")) {
		if (argc > 1)
			return bad_usage(USAGE_HUB);
		if (hub_info(&hi) < 0) {
			printf("no hub\n");
			return 1;
		}
		print_hub(&hi);
		return 0;
	}
	if (!strcmp(argv[0], "stop")) {
		if (argc > 1)
			return bad_usage(USAGE_HUB);
		if (hub_info(&hi) < 0) {
			fprintf(stderr, "rshare: no hub runs in this network namespace\n");
			return 1;
		}
		if (kill((pid_t)hi.pid, SIGTERM) < 0 && errno != ESRCH) {
			fprintf(stderr, "rshare: cannot stop the hub (pid %ld): %s\n", hi.pid, strerror(errno));
			return 1;
		}
		for (int t = 0; t < 200; t++) { /* 10 s */
			int fd = cl_hub_connect();
			if (fd >= 0)
				close(fd);
			else if (pid_gone((pid_t)hi.pid))
				return 0;
			sleep_ms(50);
		}
		fprintf(stderr, "rshare: the hub (pid %ld) did not stop within 10 s\n", hi.pid);
		return 1;
	}
	if (!strcmp(argv[0], "restart")) {
		if (argc > 1)
			return bad_usage(USAGE_HUB);
		return hub_restart();
	}
	if (!strcmp(argv[0], "start")) {
		struct cfg c;
		char buf[PATH_MAX];
		for (int i = 1; i < argc; i++) {
			int handled, r;
			/* ring sizes are the library's business, not the hub's */
			if (!strncmp(argv[i], "--rcvbuf", 8) || !strncmp(argv[i], "--sndbuf", 8))
				return bad_usage(USAGE_HUB);
			if ((r = common_opt(argc, argv, &i, &handled, USAGE_HUB)))
				return r;
			if (!handled)
				return bad_usage(USAGE_HUB);
		}
		if (load_config(&c) < 0)
			return 1;
		if (hub_info(&hi) == 0) {
			print_hub(&hi);
			return 0;
		}
		export_config(&c);
		if (hub_spawn(find_hub(&c, buf, sizeof(buf)), c.port, 0, 0) < 0)
			return 1;
		if (hub_info(&hi) < 0) {
			fprintf(stderr, "rshare: the hub started but does not answer\n");
			return 1;
		}
		print_hub(&hi);
		return 0;
	}
	fprintf(stderr, "Command \"%s\" is unknown, try \"rshare help\".\n", argv[0]);
	return 2;
}
