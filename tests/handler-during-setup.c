/*
 * handler-during-setup server PORT
 * handler-during-setup client ADDR PORT dial|epoll|fork K MS
 *
 * A signal handler that closes connections (close(2) is
 * async-signal-safe; a server's handler of SIGTERM that tidies up does
 * it) while the program's own thread sets up others, registers one with
 * epoll, or forks: does every call finish, as on kernel TCP?
 *
 * The server prints "ready" and accepts and closes connections until it
 * is killed.  The client opens K connections, installs a SIGALRM handler
 * that closes the next of them each time it runs, arms an ITIMER_REAL
 * every 200 us and, until the handler has closed all K (or MS
 * milliseconds passed), does one of these at a time: dial, connect and
 * close one more connection; epoll, add one more connection to an epoll
 * set and delete it (the K are in another set, which their closes
 * leave); fork, fork a child that exits at once, and wait for
 * it.  Then it prints "client: the handler closed C of K" and exits 0.
 */
#include "helpers.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/time.h>
#include <time.h>

static int *held, nheld;
static volatile sig_atomic_t nclosed;

static void on_alarm(int sig)
{
	int e = errno;
	(void)sig;
	if (nclosed < nheld)
		close(held[nclosed++]);
	errno = e;
}

static int server(int port)
{
	int lfd = t_listen4(port);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0 && errno != EINTR && errno != ECONNABORTED)
			t_die("handler-during-setup: accept: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
	}
}

/* A connection to A; a connect that a handler interrupted goes on in the
 * background (connect(2)): its outcome comes through poll and SO_ERROR. */
static int dial(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (fd < 0)
		t_die("handler-during-setup: socket: %s", strerror(errno));
	if (!connect(fd, (const struct sockaddr *)a, sizeof(*a)) || errno == EISCONN)
		return fd;
	if (errno != EINTR && errno != EALREADY && errno != EINPROGRESS)
		t_die("handler-during-setup: connect: %s", strerror(errno));
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			t_die("handler-during-setup: poll: %s", strerror(errno));
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		t_die("handler-during-setup: connect: %s", strerror(err ? err : errno));
	return fd;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* one step of MODE's work; extra: the connection epoll's steps use */
static void step(const struct sockaddr_in *a, char mode, int epfd, int extra)
{
	struct epoll_event ev = {.events = EPOLLIN};
	pid_t pid;
	switch (mode) {
	case 'd':
		close(dial(a));
		break;
	case 'e':
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, extra, &ev) < 0 ||
		    epoll_ctl(epfd, EPOLL_CTL_DEL, extra, NULL) < 0)
			t_die("handler-during-setup: epoll_ctl: %s", strerror(errno));
		break;
	case 'f':
		if ((pid = fork()) < 0)
			t_die("handler-during-setup: fork: %s", strerror(errno));
		if (!pid)
			_exit(0);
		while (waitpid(pid, NULL, 0) < 0)
			if (errno != EINTR)
				t_die("handler-during-setup: waitpid: %s", strerror(errno));
		break;
	}
}

static int client(const char *addr, int port, const char *mode, int k, int ms)
{
	struct sockaddr_in a = t_peer4(addr, port);
	struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
	struct itimerval it = {.it_interval = {.tv_usec = 200}, .it_value = {.tv_usec = 200}};
	struct itimerval off = {{0, 0}, {0, 0}};
	double end;
	int epfd = epoll_create1(0), extra;
	if (k < 1 || !(held = calloc((size_t)k, sizeof(*held))) || epfd < 0)
		t_die("handler-during-setup: K must be at least 1");
	for (int i = 0; i < k; i++)
		held[i] = dial(&a);
	extra = dial(&a);
	if (mode[0] == 'e') { /* each held one in a set too, which its close leaves */
		int all = epoll_create1(0);
		for (int i = 0; i < k; i++) {
			struct epoll_event ev = {.events = EPOLLIN};
			if (all < 0 || epoll_ctl(all, EPOLL_CTL_ADD, held[i], &ev) < 0)
				t_die("handler-during-setup: epoll_ctl: %s", strerror(errno));
		}
	}
	nheld = k;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		t_die("handler-during-setup: setitimer: %s", strerror(errno));
	end = now_ms() + ms;
	while (nclosed < k && now_ms() < end)
		step(&a, mode[0], epfd, extra);
	setitimer(ITIMER_REAL, &off, NULL);
	printf("client: the handler closed %d of %d\n", (int)nclosed, k);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 7 && !strcmp(argv[1], "client") &&
	    (!strcmp(argv[4], "dial") || !strcmp(argv[4], "epoll") || !strcmp(argv[4], "fork")))
		return client(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]), atoi(argv[6]));
	fprintf(stderr, "usage: handler-during-setup server PORT | client ADDR PORT dial|epoll|fork K MS\n");
	return 2;
}
