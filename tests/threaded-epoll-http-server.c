/*
 * threaded-epoll-http-server [-t THREADS] PORT
 *
 * A multi-threaded event-driven HTTP/1.0 server built the way HAProxy's
 * threads work: one accepting thread holds the nonblocking listener in its
 * epoll set and deals each accepted connection to the next of THREADS
 * (default 2) serving threads through that thread's pipe.  A serving
 * thread has its own epoll set; it reads a new connection at once (the
 * request is often there already) and only when that finds nothing adds
 * it with EPOLLIN|EPOLLRDHUP, level-triggered.  Once it has the request
 * (up to the blank line) it answers "200 ok" and closes the connection,
 * without taking it out of its set first (the close does that).  So one
 * thread closes connections while another accepts new ones and a third
 * polls them: the socket a close lets go of may come back at once as the
 * next accepted connection.
 *
 * Prints "ready"; at SIGTERM prints
 *   served=S open=O errors=E
 * (connections answered, still open, ended before a whole request: ab
 * opens a few more connections than it makes requests, and closes those
 * at its end) and exits 0.  The accepting thread takes the signal and
 * first gives the serving threads up to 3 s to see the ends of what is
 * still open, since a client that has just exited has closed its last
 * connections a moment before: without that wait, kernel TCP too would
 * sometimes leave one open.
 */
#include "helpers.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#define MAXT 16
#define MAXFD 65536

struct worker {
	pthread_t th;
	int ep, pipe[2];
};
static struct worker w[MAXT];
static int nthreads = 2;
static atomic_long served, opened, errors;
static char req[MAXFD][8]; /* the last bytes of each connection's request */

static const char answer[] = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";

/* 1: answered and closed, 0: more to read, -1: ended by an error */
static int serve(int fd)
{
	char b[4096];
	for (;;) {
		ssize_t n = recv(fd, b, sizeof(b), 0);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			close(fd);
			atomic_fetch_add(&errors, 1);
			return -1;
		}
		for (ssize_t i = 0; i < n; i++) {
			memmove(req[fd], req[fd] + 1, 3);
			req[fd][3] = b[i];
			if (!memcmp(req[fd], "\r\n\r\n", 4)) {
				int ok = t_write_full(fd, answer, sizeof(answer) - 1) == 0;
				close(fd);
				atomic_fetch_add(ok ? &served : &errors, 1);
				return ok ? 1 : -1;
			}
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	struct epoll_event ev[64];
	for (;;) {
		int n = epoll_wait(me->ep, ev, 64, -1);
		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			if (fd == me->pipe[0]) {
				int got;
				while (read(me->pipe[0], &got, sizeof(got)) == sizeof(got)) {
					struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = got};
					memset(req[got], 0, sizeof(req[got]));
					if (serve(got) == 0 && epoll_ctl(me->ep, EPOLL_CTL_ADD, got, &e) < 0)
						t_die("epoll_ctl ADD %d: %s", got, strerror(errno));
				}
				continue;
			}
			serve(fd);
		}
	}
	return NULL;
}

static void on_term(int sig)
{
	struct timespec tick = {0, 10 * 1000 * 1000};
	(void)sig;
	for (int i = 0; i < 300; i++) {
		if (atomic_load(&opened) - atomic_load(&served) - atomic_load(&errors) == 0)
			break;
		nanosleep(&tick, NULL);
	}
	printf("served=%ld open=%ld errors=%ld\n", atomic_load(&served),
	       atomic_load(&opened) - atomic_load(&served) - atomic_load(&errors), atomic_load(&errors));
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct epoll_event e = {.events = EPOLLIN};
	int opt, lfd, ep, one = 1, next = 0;
	while ((opt = getopt(argc, argv, "t:")) != -1) {
		if (opt != 't')
			t_die("usage: threaded-epoll-http-server [-t THREADS] PORT");
		nthreads = atoi(optarg);
	}
	if (optind != argc - 1 || nthreads < 1 || nthreads > MAXT)
		t_die("usage: threaded-epoll-http-server [-t THREADS] PORT");
	a.sin_port = htons((uint16_t)atoi(argv[optind]));
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	/* the serving threads are made with SIGTERM blocked, so the
	 * accepting thread takes it and they go on closing while it waits */
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 128) < 0)
		t_die("listen: %s", strerror(errno));
	for (int i = 0; i < nthreads; i++) {
		struct epoll_event pe = {.events = EPOLLIN};
		if ((w[i].ep = epoll_create1(0)) < 0 || pipe2(w[i].pipe, O_NONBLOCK) < 0)
			t_die("epoll/pipe: %s", strerror(errno));
		pe.data.fd = w[i].pipe[0];
		if (epoll_ctl(w[i].ep, EPOLL_CTL_ADD, w[i].pipe[0], &pe) < 0 ||
		    pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
			t_die("worker %d: %s", i, strerror(errno));
	}
	pthread_sigmask(SIG_UNBLOCK, &term, NULL);
	ep = epoll_create1(0);
	e.data.fd = lfd;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e) < 0)
		t_die("epoll: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		struct epoll_event ev;
		if (epoll_wait(ep, &ev, 1, -1) < 1)
			continue;
		for (;;) {
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
			if (fd < 0)
				break;
			if (fd >= MAXFD)
				t_die("descriptor %d beyond %d", fd, MAXFD);
			atomic_fetch_add(&opened, 1);
			if (write(w[next].pipe[1], &fd, sizeof(fd)) != sizeof(fd))
				t_die("pipe: %s", strerror(errno));
			next = (next + 1) % nthreads;
		}
	}
}
