/*
 * many-connections: one client holding thousands of connections, as kernel
 * TCP holds them.
 *
 *   many-connections server [-w WORKERS] PORT...
 *       Listens on every PORT (SO_REUSEADDR, nonblocking), forks WORKERS (1) workers
 *       that share the listeners; each accepts and echoes with one epoll
 *       set, level-triggered, nonblocking.  Prints "ready"; runs until
 *       killed (the workers die with it).
 *   many-connections client -n N [-t] [-H] HOST PORT...
 *       Opens N blocking connections, the i-th to PORT number i % count,
 *       and keeps them all open; then writes 16 bytes naming the
 *       connection on each, and reads each echo back (blocking reads, in
 *       order).  Prints one line: "open=O echoed=E errors=X first=ERRNO",
 *       ERRNO being the first failure's errno name ("none"; ENODATA: end
 *       of file before the echo, EPROTO: a wrong echo).  A failed
 *       connect stops the opening, as in a program that gives up.
 *       -t: the line also says how long the opening and the echoes took
 *       (open_ms=, echo_ms=); -H: then hold every connection until
 *       SIGTERM (the scale rows of tests/bench/scale.sh).
 *
 * Plain BSD sockets: knows nothing of rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define MAXPORTS 8

static int listen_on(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0)
		t_die("listen on %d: %s", port, strerror(errno));
	return fd;
}

static void worker(const int *lfd, int nl)
{
	int ep = epoll_create1(0);
	struct epoll_event ev[256];
	char buf[4096];
	if (ep < 0)
		t_die("epoll_create1: %s", strerror(errno));
	for (int i = 0; i < nl; i++) {
		struct epoll_event e = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = (uint64_t)i << 32 | 1};
		if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd[i], &e) < 0)
			t_die("epoll_ctl listener: %s", strerror(errno));
	}
	for (;;) {
		int n = epoll_wait(ep, ev, 256, -1);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u64 & 1) {
				int c = accept4(lfd[ev[i].data.u64 >> 32], NULL, NULL, SOCK_NONBLOCK);
				struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t)c << 32};
				if (c >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, c, &e) < 0)
					close(c);
				continue;
			}
			int fd = (int)(ev[i].data.u64 >> 32);
			ssize_t r = read(fd, buf, sizeof(buf));
			if (r > 0 && t_write_full(fd, buf, (size_t)r) == 0)
				continue;
			if (r < 0 && errno == EAGAIN)
				continue;
			close(fd);
		}
	}
}

static int server(int argc, char **argv)
{
	int workers = 1, lfd[MAXPORTS], nl = 0, opt;
	while ((opt = getopt(argc, argv, "w:")) != -1)
		workers = atoi(optarg);
	for (int i = optind; i < argc && nl < MAXPORTS; i++)
		lfd[nl++] = listen_on(atoi(argv[i]));
	setpgid(0, 0);
	for (int w = 0; w < workers; w++)
		if (fork() == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			worker(lfd, nl);
		}
	printf("ready\n");
	fflush(stdout);
	signal(SIGTERM, SIG_DFL);
	while (wait(NULL) > 0)
		;
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int client(int argc, char **argv)
{
	int n = 0, opt, nports = 0, open_ = 0, echoed = 0, errors = 0, first = 0, times = 0, hold = 0;
	struct sockaddr_in dst[MAXPORTS];
	double t0 = now_ms(), t1, t2;
	int *fds;
	while ((opt = getopt(argc, argv, "n:tH")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 't')
			times = 1;
		else if (opt == 'H')
			hold = 1;
	}
	if (optind + 1 >= argc || n <= 0)
		t_die("usage: many-connections client -n N HOST PORT...");
	for (int i = optind + 1; i < argc && nports < MAXPORTS; i++, nports++) {
		dst[nports] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[i]))};
		inet_pton(AF_INET, argv[optind], &dst[nports].sin_addr);
	}
	fds = calloc((size_t)n, sizeof(*fds));
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&dst[i % nports], sizeof(dst[0])) < 0) {
			first = errno;
			if (fd >= 0)
				close(fd);
			break;
		}
		fds[open_++] = fd;
	}
	t1 = now_ms();
	for (int i = 0; i < open_; i++) {
		char m[17];
		snprintf(m, sizeof(m), "conn%012d", i);
		if (t_write_full(fds[i], m, 16) < 0) {
			errors++;
			first = first ? first : errno;
		}
	}
	for (int i = 0; i < open_; i++) {
		char m[17], got[16];
		snprintf(m, sizeof(m), "conn%012d", i);
		ssize_t r;
		errno = 0;
		r = t_read_full(fds[i], got, 16);
		if (r == 16 && !memcmp(got, m, 16)) {
			echoed++;
		} else {
			errors++;
			/* end of file before the echo: ENODATA */
			first = first ? first : r < 0 && errno ? errno : r < 16 ? ENODATA : EPROTO;
		}
	}
	t2 = now_ms();
	printf("open=%d echoed=%d errors=%d first=%s", open_, echoed, errors, first ? strerrorname_np(first) : "none");
	if (times)
		printf(" open_ms=%.0f echo_ms=%.0f", t1 - t0, t2 - t1);
	printf("\n");
	fflush(stdout);
	while (hold)
		pause(); /* SIGTERM ends it */
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "server"))
		return server(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "client"))
		return client(argc - 1, argv + 1);
	t_die("usage: many-connections server|client ...");
	return 1;
}
