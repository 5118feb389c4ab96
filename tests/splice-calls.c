/*
 * splice-calls.c - splice(2) between pipes and a connection, and what each
 * call answered, as a transcript to compare between kernel TCP and rshare.
 *
 *   splice-calls -s PORT          the server: prints "ready", then a line
 *                                 per call it made
 *   splice-calls -c HOST PORT     the client
 *
 * Connection 1: the server echoes through a pipe (splice from the
 * connection into the pipe, asking for more than the pipe holds, and from
 * the pipe back) until EOF; the client writes 4 MiB from a thread while it
 * reads the echo, and checks every byte.
 * Connection 2: the server's calls that fail (an O_NONBLOCK connection
 * with nothing to read, an offset in either, a pipe's end the wrong way
 * round, no pipe at either end, a listener at either end, a
 * full pipe, a pipe with no reader), then 100 bytes from the client
 * through a pipe, 5 bytes to it through one, a pipe with no writer (0)
 * and an empty one (EAGAIN), and EOF.  Only what the kernel decides alike
 * every time is printed (how much one call moved is not).
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ECHO_BYTES (4u << 20)
#define ECHO_SEED 7 /* the echoed stream's bytes: t_stream_byte */

static const char *ename(int e)
{
	static const struct {
		int e;
		const char *n;
	} t[] = {{EAGAIN, "EAGAIN"}, {ESPIPE, "ESPIPE"}, {EINVAL, "EINVAL"}, {ENOTCONN, "ENOTCONN"},
		 {EPIPE, "EPIPE"}, {EBADF, "EBADF"}, {ECONNRESET, "ECONNRESET"}, {EINTR, "EINTR"}};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].e == e)
			return t[i].n;
	return strerror(e);
}

/* one call's answer: "ok N" or its errno's name */
static void say(const char *step, ssize_t r)
{
	if (r < 0)
		printf("server %s %s\n", step, ename(errno));
	else
		printf("server %s ok %zd\n", step, r);
}

static void echo_through_pipe(int c)
{
	int p[2];
	size_t total = 0;
	if (pipe(p) < 0)
		t_die("splice-calls: pipe: %s", strerror(errno));
	for (;;) {
		ssize_t n = splice(c, NULL, p[1], NULL, 1u << 20, SPLICE_F_MOVE), left;
		if (n < 0)
			t_die("splice-calls: splice in: %s", strerror(errno));
		if (n == 0)
			break;
		total += (size_t)n;
		for (left = n; left > 0;) {
			ssize_t m = splice(p[0], NULL, c, NULL, (size_t)left, SPLICE_F_MORE);
			if (m <= 0)
				t_die("splice-calls: splice out: %s", strerror(errno));
			left -= m;
		}
	}
	printf("server echo spliced %zu bytes, then EOF\n", total);
	close(p[0]);
	close(p[1]);
	close(c);
}

static void fill(int fd)
{
	static char junk[4096];
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
	fcntl(fd, F_SETFL, fl);
}

static void drain(int fd)
{
	char junk[4096];
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (read(fd, junk, sizeof(junk)) > 0)
		;
	fcntl(fd, F_SETFL, fl);
}

static void calls(int c, int l)
{
	int p[2], q[2], e[2];
	loff_t off = 0;
	char buf[200], g = 'g';
	size_t got = 0;
	ssize_t n;
	if (pipe(p) < 0 || pipe(q) < 0 || pipe(e) < 0)
		t_die("splice-calls: pipe: %s", strerror(errno));
	fcntl(c, F_SETFL, O_NONBLOCK);
	say("nonblocking-nothing-to-read", splice(c, NULL, p[1], NULL, 100, 0));
	fcntl(c, F_SETFL, 0);
	say("offset-in-connection", splice(c, &off, p[1], NULL, 100, 0));
	say("offset-out-connection", splice(p[0], NULL, c, &off, 100, 0));
	say("offset-out-pipe", splice(c, NULL, p[1], &off, 100, 0));
	say("offset-in-pipe", splice(p[0], &off, c, NULL, 100, 0));
	say("into-read-end", splice(c, NULL, p[0], NULL, 100, 0));
	say("from-write-end", splice(p[1], NULL, c, NULL, 100, 0));
	say("no-pipe", splice(c, NULL, c, NULL, 100, 0));
	say("listener-in", splice(l, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	write(p[1], "x", 1);
	say("listener-out", splice(p[0], NULL, l, NULL, 1, SPLICE_F_NONBLOCK));
	drain(p[0]);
	say("length-0", splice(c, NULL, p[1], NULL, 0, 0));
	if (send(c, &g, 1, 0) != 1) /* the client sends its 100 bytes */
		t_die("splice-calls: send: %s", strerror(errno));
	fill(p[1]);
	say("full-pipe-nonblocking", splice(c, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	drain(p[0]);
	close(q[0]);
	say("pipe-without-reader", splice(c, NULL, q[1], NULL, 100, 0));
	while (got < 100) {
		n = splice(c, NULL, p[1], NULL, sizeof(buf), 0);
		if (n <= 0) {
			say("in", n);
			break;
		}
		got += (size_t)n;
	}
	memset(buf, 0, sizeof(buf));
	n = read(p[0], buf, sizeof(buf));
	printf("server 100 bytes through a pipe: %zu, read back %zd, %s\n", got, n,
	       memcmp(buf, "0123456789", 10) || memcmp(buf + 90, "0123456789", 10) ? "wrong" : "right");
	write(p[1], "hello", 5);
	say("to-connection", splice(p[0], NULL, c, NULL, 100, 0));
	close(p[1]);
	say("pipe-without-writer", splice(p[0], NULL, c, NULL, 100, 0));
	say("empty-pipe-nonblocking", splice(e[0], NULL, c, NULL, 100, SPLICE_F_NONBLOCK));
	if (pipe(p) < 0)
		t_die("splice-calls: pipe: %s", strerror(errno));
	say("eof", splice(c, NULL, p[1], NULL, 100, 0));
	close(c);
}

static int server(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), c;
	signal(SIGPIPE, SIG_IGN);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0)
		t_die("splice-calls: listen: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	if ((c = accept(l, NULL, NULL)) < 0)
		t_die("splice-calls: accept: %s", strerror(errno));
	echo_through_pipe(c);
	if ((c = accept(l, NULL, NULL)) < 0)
		t_die("splice-calls: accept: %s", strerror(errno));
	calls(c, l);
	return 0;
}

static void *writer(void *arg)
{
	int c = *(int *)arg;
	static unsigned char b[65536];
	for (size_t at = 0; at < ECHO_BYTES;) {
		size_t n = ECHO_BYTES - at < sizeof(b) ? ECHO_BYTES - at : sizeof(b);
		t_stream_fill(ECHO_SEED, at, b, n);
		if (t_write_full(c, b, n) < 0)
			t_die("splice-calls: write: %s", strerror(errno));
		at += n;
	}
	shutdown(c, SHUT_WR);
	return NULL;
}

static int dial(const char *host, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("splice-calls: connect: %s", strerror(errno));
	return c;
}

static int client(const char *host, int port)
{
	int c = dial(host, port);
	pthread_t t;
	static unsigned char b[65536];
	size_t got = 0, bad = 0; /* reads with a wrong byte */
	char g, h[6] = {0};
	ssize_t n;
	pthread_create(&t, NULL, writer, &c);
	while ((n = read(c, b, sizeof(b))) > 0) {
		bad += t_stream_check(ECHO_SEED, got, b, (size_t)n) >= 0;
		got += (size_t)n;
	}
	pthread_join(t, NULL);
	printf("client echo %zu bytes, %zu reads wrong, then %s\n", got, bad, n == 0 ? "EOF" : ename(errno));
	close(c);
	c = dial(host, port);
	if (read(c, &g, 1) != 1)
		t_die("splice-calls: read: %s", strerror(errno));
	for (int i = 0; i < 10; i++)
		if (write(c, "0123456789", 10) != 10)
			t_die("splice-calls: write: %s", strerror(errno));
	for (size_t at = 0; at < 5 && (n = read(c, h + at, 5 - at)) > 0;)
		at += (size_t)n;
	printf("client through a pipe: %s\n", h);
	shutdown(c, SHUT_WR);
	n = read(c, b, sizeof(b));
	printf("client then %s\n", n == 0 ? "EOF" : n < 0 ? ename(errno) : "bytes");
	return 0;
}

int main(int argc, char **argv)
{
	return t_serve_or_ask(argc, argv, "splice-calls -s PORT | -c HOST PORT", server, client);
}
