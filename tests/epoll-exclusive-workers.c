/*
 * epoll-exclusive-workers [-w WORKERS] PORT
 *
 * An event-driven pre-forked echo server, the way nginx-like servers are
 * built: the master binds one nonblocking listener on 0.0.0.0:PORT and
 * forks WORKERS (default 32) workers.  Each worker makes its own epoll
 * instance and adds the shared listener with EPOLLIN|EPOLLEXCLUSIVE; when
 * woken it accepts (accept4 SOCK_NONBLOCK) until EAGAIN and adds each new
 * connection with EPOLLIN|EPOLLET.  On a connection's event it reads until
 * EAGAIN and echoes every byte back; when the peer's window is full it
 * keeps the rest, waits for EPOLLOUT (EPOLL_CTL_MOD) and reads no more
 * meanwhile; at EOF it closes the connection.
 *
 * Prints "master PID", then "worker PID" for each worker, then "ready".
 * SIGTERM (or SIGINT) to the master ends the workers; each prints
 *   worker PID accepted=A closed=C errors=E open=O waits=T
 * (connections accepted, closed at EOF after every byte was echoed, ended
 * by an error, still open; times a write found the peer's window full and
 * the worker waited for EPOLLOUT) and reports the same to the master,
 * which then prints
 *   total workers=W reported=R accepted=A closed=C errors=E open=O served_by=S waits=T
 * (S: workers that accepted at least one connection) and exits 0 when every
 * worker reported and none saw an error, 1 otherwise.  A worker that ends
 * before the SIGTERM is reported on stderr and fails the run.  Before its
 * summary, a worker prints one line for each connection still open: what
 * it waits for (EPOLLIN or EPOLLOUT), the bytes it has yet to echo, and
 * what FIONREAD, poll() and a new level-triggered epoll set say of the
 * connection now.
 */
#include "helpers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define LISTENER_TAG UINT64_MAX
#define BUFSZ (64 << 10)

struct report {
	int32_t pid;
	uint32_t accepted, closed, errors, open, waits;
};

struct wconn {
	int open, waiting_out;
	uint8_t *pend; /* bytes read but not yet echoed */
	size_t off, len;
};

static volatile sig_atomic_t stop;
static int lfd, report_w;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	/* one write(), so lines of concurrent workers never mix */
	char b[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(b) - 1)
		n = (int)sizeof(b) - 1;
	if (n > 0 && write(1, b, (size_t)n) < 0)
		_exit(1);
}

static struct wconn *conns;
static int nconns_max;
static struct report rep;

static void conn_close(int ep, int fd, int err)
{
	struct wconn *c = &conns[fd];
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	free(c->pend);
	*c = (struct wconn){0};
	rep.open--;
	if (err) {
		rep.errors++;
		fprintf(stderr, "epoll-exclusive-workers %d: connection fd %d: %s\n", getpid(), fd, strerror(err));
	} else {
		rep.closed++;
	}
}

static int set_events(int ep, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = (uint64_t)fd};
	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0) {
		fprintf(stderr, "epoll-exclusive-workers %d: EPOLL_CTL_MOD fd %d: %s\n", getpid(), fd,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* Write what is pending: 1 all written, 0 the peer's window is full, -1 error */
static int flush(int fd, struct wconn *c)
{
	while (c->off < c->len) {
		ssize_t n = write(fd, c->pend + c->off, c->len - c->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -1;
		c->off += (size_t)n;
	}
	c->off = c->len = 0;
	return 1;
}

static void serve(int ep, int fd)
{
	static uint8_t buf[BUFSZ];
	struct wconn *c = &conns[fd];
	if (c->len) {
		int f = flush(fd, c);
		if (f < 0) {
			conn_close(ep, fd, errno);
			return;
		}
		if (!f)
			return; /* still full: EPOLLOUT comes back */
		if (set_events(ep, fd, EPOLLIN | EPOLLET) < 0) {
			conn_close(ep, fd, errno);
			return;
		}
		c->waiting_out = 0;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			conn_close(ep, fd, errno);
			return;
		}
		if (n == 0) {
			conn_close(ep, fd, 0);
			return;
		}
		if (!c->pend && !(c->pend = malloc(BUFSZ)))
			t_die("epoll-exclusive-workers: out of memory");
		memcpy(c->pend, buf, (size_t)n);
		c->off = 0;
		c->len = (size_t)n;
		int f = flush(fd, c);
		if (f < 0) {
			conn_close(ep, fd, errno);
			return;
		}
		if (!f) {
			/* wait until the peer makes room, reading nothing more */
			if (set_events(ep, fd, EPOLLOUT | EPOLLET) < 0)
				conn_close(ep, fd, errno);
			else {
				c->waiting_out = 1;
				rep.waits++;
			}
			return;
		}
	}
}

static void accept_all(int ep)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN) {
				rep.errors++;
				fprintf(stderr, "epoll-exclusive-workers %d: accept4: %s\n", getpid(), strerror(errno));
			}
			return;
		}
		if (fd >= nconns_max) {
			rep.errors++;
			fprintf(stderr, "epoll-exclusive-workers %d: fd %d beyond the table\n", getpid(), fd);
			close(fd);
			continue;
		}
		rep.accepted++;
		rep.open++;
		conns[fd] = (struct wconn){.open = 1};
		struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = (uint64_t)fd};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			conn_close(ep, fd, errno);
			continue;
		}
		/* bytes may have come before the registration: EPOLLET reports
		 * them anyway (the kernel checks at EPOLL_CTL_ADD) */
	}
}

static void worker(sigset_t *waitmask)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		t_die("epoll-exclusive-workers %d: epoll_create1: %s", getpid(), strerror(errno));
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = LISTENER_TAG}, out[64];
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		t_die("epoll-exclusive-workers %d: EPOLL_CTL_ADD listener EPOLLEXCLUSIVE: %s", getpid(),
		      strerror(errno));
	rep.pid = getpid();
	while (!stop) {
		int n = epoll_pwait(ep, out, 64, -1, waitmask);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			t_die("epoll-exclusive-workers %d: epoll_pwait: %s", getpid(), strerror(errno));
		}
		for (int i = 0; i < n; i++) {
			if (out[i].data.u64 == LISTENER_TAG)
				accept_all(ep);
			else if (conns[out[i].data.u64].open)
				serve(ep, (int)out[i].data.u64);
		}
	}
	/* what a connection still open waits for, and what is true of it */
	for (int fd = 0; fd < nconns_max; fd++) {
		struct wconn *c = &conns[fd];
		if (!c->open)
			continue;
		int nread = -1;
		struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP};
		ioctl(fd, FIONREAD, &nread);
		int pr = poll(&p, 1, 0);
		/* and a level-triggered epoll set of its own */
		int ep2 = epoll_create1(0), er;
		struct epoll_event e2 = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u64 = 0};
		epoll_ctl(ep2, EPOLL_CTL_ADD, fd, &e2);
		er = epoll_wait(ep2, &e2, 1, 0);
		close(ep2);
		say("worker %d open fd %d: waits for %s, %zu bytes unechoed, FIONREAD %d, poll %d revents 0x%x, "
		    "new level-triggered epoll set %d events 0x%x\n",
		    rep.pid, fd, c->waiting_out ? "EPOLLOUT" : "EPOLLIN", c->len - c->off, nread, pr,
		    (unsigned)p.revents, er, er > 0 ? e2.events : 0);
	}
	say("worker %d accepted=%u closed=%u errors=%u open=%u waits=%u\n", rep.pid, rep.accepted, rep.closed,
	    rep.errors, rep.open, rep.waits);
	if (write(report_w, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		_exit(1);
	_exit(0);
}

/* a worker may hold many connections */
static void alloc_conns(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	nconns_max = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
	conns = calloc((size_t)nconns_max, sizeof(*conns));
	if (!conns)
		t_die("epoll-exclusive-workers: out of memory");
}

/* the shared nonblocking listener on 0.0.0.0:PORT, into lfd */
static void open_listener(int port)
{
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0)
		t_die("epoll-exclusive-workers: socket: %s", strerror(errno));
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("epoll-exclusive-workers: bind port %d: %s", port, strerror(errno));
	if (listen(lfd, 4096) < 0)
		t_die("epoll-exclusive-workers: listen: %s", strerror(errno));
}

/* wait for SIGTERM; a worker that ends before it fails the run (returns 1) */
static int wait_term(const sigset_t *term, pid_t *pids, int workers)
{
	int fail = 0;
	for (;;) {
		int sig = sigwaitinfo(term, NULL), st;
		if (sig == SIGTERM || sig == SIGINT)
			break;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			fprintf(stderr, "epoll-exclusive-workers: worker %d ended early (status 0x%x)\n", p, st);
			for (int i = 0; i < workers; i++)
				if (pids[i] == p)
					pids[i] = 0;
			fail = 1;
		}
	}
	return fail;
}

/* SIGTERM to every worker left, and reap them; 1 when one did not exit 0 */
static int end_workers(const pid_t *pids, int workers)
{
	int fail = 0;
	for (int i = 0; i < workers; i++)
		if (pids[i])
			kill(pids[i], SIGTERM);
	for (int i = 0; i < workers; i++) {
		int st;
		if (!pids[i])
			continue;
		if (waitpid(pids[i], &st, 0) == pids[i] && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			fprintf(stderr, "epoll-exclusive-workers: worker %d ended with status 0x%x\n", pids[i], st);
			fail = 1;
		}
	}
	return fail;
}

/* the workers' reports from FD summed and printed; main's exit status */
static int total(int fd, int workers, int fail)
{
	struct report r;
	unsigned reported = 0, served_by = 0;
	unsigned long long accepted = 0, closed = 0, errors = 0, open = 0, waits = 0;
	while (read(fd, &r, sizeof(r)) == (ssize_t)sizeof(r)) {
		reported++;
		accepted += r.accepted;
		closed += r.closed;
		errors += r.errors;
		open += r.open;
		waits += r.waits;
		served_by += r.accepted > 0;
	}
	say("total workers=%d reported=%u accepted=%llu closed=%llu errors=%llu open=%llu served_by=%u waits=%llu\n",
	    workers, reported, accepted, closed, errors, open, served_by, waits);
	return fail || reported != (unsigned)workers || errors ? 1 : 0;
}

int main(int argc, char **argv)
{
	int workers = 32, opt, fail = 0;
	while ((opt = getopt(argc, argv, "w:")) != -1) {
		if (opt != 'w')
			goto usage;
		workers = atoi(optarg);
	}
	if (optind != argc - 1 || workers < 1 || workers > 256)
		goto usage;
	int port = atoi(argv[optind]);

	alloc_conns();

	signal(SIGPIPE, SIG_IGN);
	sigset_t term, waitmask;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGINT);
	sigaddset(&term, SIGCHLD);
	/* workers take SIGTERM only in epoll_pwait; the master in sigwaitinfo */
	sigprocmask(SIG_BLOCK, &term, &waitmask);
	struct sigaction sa = {.sa_handler = on_term}; /* no SA_RESTART */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	open_listener(port);

	int pr[2];
	if (pipe(pr) < 0)
		t_die("epoll-exclusive-workers: pipe: %s", strerror(errno));
	report_w = pr[1];
	pid_t master = getpid(), *pids = calloc((size_t)workers, sizeof(pid_t));
	if (!pids)
		t_die("epoll-exclusive-workers: out of memory");
	say("master %d\n", master);
	for (int i = 0; i < workers; i++) {
		pid_t p = fork();
		if (p < 0)
			t_die("epoll-exclusive-workers: fork: %s", strerror(errno));
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != master)
				_exit(1);
			close(pr[0]);
			worker(&waitmask);
		}
		pids[i] = p;
		say("worker %d\n", p);
	}
	close(pr[1]);
	say("ready\n");

	fail |= wait_term(&term, pids, workers);
	fail |= end_workers(pids, workers);
	return total(pr[0], workers, fail);
usage:
	fprintf(stderr, "usage: epoll-exclusive-workers [-w WORKERS] PORT\n");
	return 2;
}
