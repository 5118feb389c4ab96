/*
 * connect-interrupted - a blocking connect that a signal interrupts.
 *
 *   connect-interrupted -s PORT        a listener with backlog 1 that never
 *                                      accepts (prints "ready")
 *   connect-interrupted -n ADDR PORT   a nonblocking connect, poll for
 *                                      POLLOUT, then connect twice more:
 *                                      EINPROGRESS, 0 (the kernel reports the
 *                                      end once), EISCONN
 *   connect-interrupted -c N ADDR PORT N blocking connects, each under a
 *                                      SIGALRM 300 ms later (a handler
 *                                      without SA_RESTART)
 *   connect-interrupted -j N ADDR PORT the same, the handler leaving each
 *                                      connect with siglongjmp ("jumped");
 *                                      then every socket is closed
 *                                      ("closed")
 *
 * The listener completes backlog + 1 connections; the connects after them
 * wait (a dropped SYN on kernel TCP, the hub's queue on rshare), the
 * signal ends them with EINTR, and a second (blocking) connect on such a
 * socket waits on for the same connect, until the next signal.  The client prints one word a connect
 * (and the second connect's error after an EINTR), the same on kernel TCP
 * and on rshare.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

static const char *ename(int e)
{
	return e == EINTR ? "EINTR" : e == EALREADY ? "EALREADY" : e == EISCONN ? "EISCONN" :
	       e == ECONNREFUSED ? "ECONNREFUSED" : e == ETIMEDOUT ? "ETIMEDOUT" : "EOTHER";
}

static sigjmp_buf out;
static volatile sig_atomic_t jump; /* -j */

static void on_alarm(int sig)
{
	(void)sig;
	if (jump)
		siglongjmp(out, 1);
}

/* connect under a SIGALRM 300 ms later: 0, -1 (errno), or -2 when the
 * handler jumped out of it */
static int alarmed_connect(int fd, const struct sockaddr_in *a)
{
	struct itimerval it = {.it_value = {0, 300000}}, off = {{0, 0}, {0, 0}};
	int r;
	if (jump && sigsetjmp(out, 1))
		return -2;
	setitimer(ITIMER_REAL, &it, NULL);
	r = connect(fd, (const struct sockaddr *)a, sizeof(*a));
	setitimer(ITIMER_REAL, &off, NULL);
	return r;
}

static const char *outcome(int r, int e)
{
	return r == 0 ? "ok" : r == -2 ? "jumped" : ename(e);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	if (argc == 3 && !strcmp(argv[1], "-s")) {
		int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_port = htons((uint16_t)atoi(argv[2]));
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0)
			t_die("listen: %s", strerror(errno));
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (argc == 4 && !strcmp(argv[1], "-n") && inet_pton(AF_INET, argv[2], &a.sin_addr) == 1) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		a.sin_port = htons((uint16_t)atoi(argv[3]));
		printf("%s", connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? "0" :
			     errno == EINPROGRESS ? "EINPROGRESS" : "EOTHER");
		poll(&p, 1, 5000);
		for (int i = 0; i < 2; i++) {
			int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
			printf(" %s", r == 0 ? "0" : ename(errno));
		}
		printf("\n");
		return 0;
	}
	if (argc != 5 || (strcmp(argv[1], "-c") && strcmp(argv[1], "-j")) || inet_pton(AF_INET, argv[3], &a.sin_addr) != 1)
		t_die("usage: connect-interrupted -s PORT | -c|-j N ADDR PORT | -n ADDR PORT");
	a.sin_port = htons((uint16_t)atoi(argv[4]));
	jump = argv[1][1] == 'j';
	sigaction(SIGALRM, &sa, NULL);
	int n = atoi(argv[2]), fds[16];
	for (int i = 0; i < n && i < 16; i++) {
		int fd = fds[i] = socket(AF_INET, SOCK_STREAM, 0), r, e;
		r = alarmed_connect(fd, &a);
		e = errno;
		printf("%s%s", i ? " " : "", outcome(r, e));
		if (r == -2 || (r < 0 && e == EINTR)) {
			/* again: it waits on for the same connect, until the next signal */
			r = alarmed_connect(fd, &a);
			e = errno;
			printf("/%s", outcome(r, e));
		}
	}
	if (jump) {
		for (int i = 0; i < n && i < 16; i++)
			close(fds[i]);
		printf(" closed");
	}
	printf("\n");
	return 0;
}
