/*
 * eintr-recv server PORT
 * eintr-recv client [-R | -j] [-I] [-c | -C] [-a MS] [-w HOLDFILE] HOST PORT
 *
 * Does a signal interrupt a recv() that blocks on a connection?
 *
 * The server accepts one connection, sends nothing until it reads a byte
 * from the client, then sends BYTES (100000) bytes of the stream of
 * seed 42, reads until EOF, prints "server done" and exits.
 *
 * The client connects, installs a SIGALRM handler with sigaction (without
 * SA_RESTART, or with it under -R; with -I, with signal(2), which sets
 * SA_RESTART, then siginterrupt(3), which takes it off again, the old
 * way of a timeout that interrupts), arms alarm(1) (or, with -a, an
 * ITIMER_REAL of MS milliseconds) and blocks in recv() on the silent
 * connection.  It prints one line on how that recv() ended:
 *   outcome eintr after S s, handler ran N      (-1 with errno EINTR)
 *   outcome data after S s, handler ran N       (returned bytes)
 *   outcome jumped after S s, handler ran N     (-j: the handler left
 *                                                with siglongjmp)
 * Without -R the client sends the byte itself once recv() returned (or
 * the handler jumped out of it); with
 * -R a second thread (SIGALRM blocked) sends it 2 s after the start, so
 * that a restarted recv() ends with data.  Then the client reads all BYTES,
 * checks them, prints "received BYTES verified", keeps the connection open
 * until HOLDFILE exists (-w, at most 120 s), shuts down, expects EOF and
 * exits 0; with -c it closes the socket instead, prints "closed" and lives
 * on until HOLDFILE.exit exists, so that the server's EOF comes from the
 * close alone (a jump out of the recv must not keep the socket from being
 * released).  -C: as -c, but the close comes right after the first recv
 * (its outcome printed), before any other call on the socket, and the
 * server, whose first read then ends with EOF, prints "server done".
 * Exit 1 on any other error or a mismatch.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t alarms, jump;
static int cfd = -1;
static sigjmp_buf out;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
	if (jump)
		siglongjmp(out, 1); /* old programs' timeout of a blocking call */
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *poker(void *arg)
{
	(void)arg;
	usleep(2000000);
	if (send(cfd, "g", 1, MSG_NOSIGNAL) != 1)
		t_die("eintr-recv: poker: send: %s", strerror(errno));
	return NULL;
}

static int server(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	uint64_t nbytes = 100000;
	uint8_t buf[4096];
	char c;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("eintr-recv: server: listen on %d: %s", port, strerror(errno));
	printf("ready\n");
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		t_die("eintr-recv: server: accept: %s", strerror(errno));
	switch (t_read_full(fd, &c, 1)) {
	case 1: break;
	case 0: /* the client closed at once (-C) */
		printf("server done\n");
		return 0;
	default: t_die("eintr-recv: server: no byte from the client");
	}
	for (uint64_t pos = 0; pos < nbytes;) {
		size_t n = nbytes - pos < sizeof(buf) ? nbytes - pos : sizeof(buf);
		t_stream_fill(42, pos, buf, n);
		if (t_write_full(fd, buf, n) < 0)
			t_die("eintr-recv: server: write: %s", strerror(errno));
		pos += n;
	}
	if (t_read_to_eof(fd) < 0)
		t_die("eintr-recv: server: read: %s", strerror(errno));
	close(fd);
	printf("server done\n");
	return 0;
}

/* SIGALRM's handler, without SA_RESTART or (RESTART) with it and the
 * poker; INTERRUPT: by signal and siginterrupt */
static void install_alarm(int restart, int interrupt)
{
	struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0};
	sigemptyset(&sa.sa_mask);
	if (interrupt) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		if (signal(SIGALRM, on_alarm) == SIG_ERR || siginterrupt(SIGALRM, 1) < 0)
			t_die("eintr-recv: signal, siginterrupt: %s", strerror(errno));
#pragma GCC diagnostic pop
	} else if (sigaction(SIGALRM, &sa, NULL) < 0) {
		t_die("eintr-recv: sigaction: %s", strerror(errno));
	}
	if (restart) {
		sigset_t s, old;
		pthread_t t;
		sigemptyset(&s);
		sigaddset(&s, SIGALRM);
		pthread_sigmask(SIG_BLOCK, &s, &old);
		if (pthread_create(&t, NULL, poker, NULL))
			t_die("eintr-recv: pthread_create failed");
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_detach(t);
	}
}

/* an ITIMER_REAL of MS milliseconds, or alarm(1) */
static void arm_alarm(int ms)
{
	if (ms > 0) {
		struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000}};
		if (setitimer(ITIMER_REAL, &it, NULL) < 0)
			t_die("eintr-recv: setitimer: %s", strerror(errno));
	} else {
		alarm(1);
	}
}

/* The first recv, under the alarm: 1 when the handler jumped out of it
 * (-j), else the call's return and errno in R and E */
static int first_recv(int ms, uint8_t *buf, size_t len, ssize_t *r, int *e)
{
	if (sigsetjmp(out, 1)) {
		jump = 0;
		return 1;
	}
	arm_alarm(ms);
	*r = recv(cfd, buf, len, 0);
	*e = errno;
	jump = 0;
	return 0;
}

/* the stream from GOT to NBYTES, checked; returns the bytes received in all */
static uint64_t read_rest(uint64_t got, uint64_t nbytes, uint8_t *buf, size_t bufsz)
{
	while (got < nbytes) {
		size_t want = nbytes - got < bufsz ? nbytes - got : bufsz;
		ssize_t r = recv(cfd, buf, want, 0);
		if (r < 0 && errno == EINTR)
			t_die("eintr-recv: a second EINTR with no alarm armed");
		if (r <= 0)
			t_die("eintr-recv: recv after %llu bytes: %s", (unsigned long long)got,
			      r ? strerror(errno) : "EOF");
		long long bad = t_stream_check(42, got, buf, (size_t)r);
		if (bad >= 0)
			t_die("eintr-recv: mismatch at byte %llu", (unsigned long long)(got + (uint64_t)bad));
		got += (uint64_t)r;
	}
	return got;
}

/* wait for HOLD (if any), then our FIN and the server's EOF; with -c
 * (CLOSE) a close() instead, whose FIN the server must see while this
 * process lives on, until HOLD.exit */
static void finish(const char *hold, uint8_t *buf, int close_only)
{
	ssize_t r;
	static char path[4096];
	if (hold)
		t_wait_file(hold, 120);
	if (close_only) {
		close(cfd);
		printf("closed\n");
		fflush(stdout);
		snprintf(path, sizeof(path), "%s.exit", hold ? hold : "");
		if (hold)
			t_wait_file(path, 120);
		return;
	}
	if (shutdown(cfd, SHUT_WR) < 0)
		t_die("eintr-recv: shutdown: %s", strerror(errno));
	r = recv(cfd, buf, 1, 0);
	if (r != 0)
		t_die("eintr-recv: %s at end", r < 0 ? strerror(errno) : "extra byte");
	close(cfd);
}

static int client(int argc, char **argv)
{
	int restart = 0, interrupt = 0, opt, ms = 0, close_only = 0;
	uint64_t nbytes = 100000, got = 0;
	const char *hold = NULL;
	uint8_t buf[8192];
	optind = 2;
	while ((opt = getopt(argc, argv, "RIjcCa:w:")) != -1) {
		switch (opt) {
		case 'R': restart = 1; break;
		case 'I': interrupt = 1; break;
		case 'c': close_only = 1; break;
		case 'C': close_only = 2; break;
		case 'j': jump = 1; break;
		case 'a': ms = atoi(optarg); break;
		case 'w': hold = optarg; break;
		default: return 2;
		}
	}
	if (optind != argc - 2)
		return 2;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[optind + 1]))};
	if (inet_pton(AF_INET, argv[optind], &a.sin_addr) != 1)
		t_die("eintr-recv: %s: not an IPv4 address", argv[optind]);
	signal(SIGPIPE, SIG_IGN);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("eintr-recv: connect: %s", strerror(errno));

	install_alarm(restart, interrupt);
	double t0 = now();
	ssize_t r = 0;
	int e = 0, jumped = first_recv(ms, buf, sizeof(buf), &r, &e);
	double dt = now() - t0;
	alarm(0);
	if (!alarms)
		t_die("eintr-recv: recv returned %zd (%s) after %.2f s, before the alarm", r,
		      r < 0 ? strerror(e) : "-", dt);
	if (jumped) {
		printf("outcome jumped after %.2f s, handler ran %d\n", dt, (int)alarms);
	} else if (r < 0 && e == EINTR) {
		printf("outcome eintr after %.2f s, handler ran %d\n", dt, (int)alarms);
	} else if (r > 0) {
		printf("outcome data after %.2f s, handler ran %d\n", dt, (int)alarms);
		long long bad = t_stream_check(42, 0, buf, (size_t)r);
		if (bad >= 0)
			t_die("eintr-recv: mismatch at byte %lld", bad);
		got = (uint64_t)r;
	} else {
		t_die("eintr-recv: recv returned %zd (%s) after %.1f s", r, r < 0 ? strerror(e) : "EOF", dt);
	}
	fflush(stdout);
	if (close_only > 1) { /* -C: the close is the next call on the socket */
		finish(hold, buf, 1);
		return 0;
	}
	if (!restart && send(cfd, "g", 1, MSG_NOSIGNAL) != 1)
		t_die("eintr-recv: send: %s", strerror(errno));
	got = read_rest(got, nbytes, buf, sizeof(buf));
	printf("received %llu verified\n", (unsigned long long)got);
	fflush(stdout);
	finish(hold, buf, close_only);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "client")) {
		int r = client(argc, argv);
		if (r != 2)
			return r;
	}
	fprintf(stderr, "usage: eintr-recv server PORT\n"
			"       eintr-recv client [-R | -j] [-a MS] [-w HOLDFILE] HOST PORT\n");
	return 2;
}
