/*
 * socket-timeouts - SO_RCVTIMEO and SO_SNDTIMEO on accept, recv and send,
 * and the options an accepted connection takes from its listener.
 *
 *   socket-timeouts -s PORT
 *       sets on its listener SO_RCVTIMEO and SO_SNDTIMEO (150 ms),
 *       SO_KEEPALIVE, TCP_NODELAY, TCP_KEEPIDLE 77 and SO_LINGER (1, 5);
 *       accepts once with no client coming (EAGAIN), prints "ready",
 *       accepts the client (again after each EAGAIN), reads the options
 *       of the accepted connection, reads from it with nothing coming
 *       (the timeout it took: EAGAIN), and sends the client one line of
 *       what it saw; then it waits for a second connection, the client's
 *       "done", and ends without reading anything.
 *   socket-timeouts -c ADDR PORT
 *       connects under SO_SNDTIMEO, prints the server's line, then sends
 *       to a server that never reads, under SO_SNDTIMEO 200 ms: one
 *       write of 64 MiB (some bytes go: "partial"; how many, and what a
 *       second write gets, depend on the kernel's autotuning); a read
 *       under SO_RCVTIMEO 100 ms (EAGAIN); then
 *       connects again to say it is done.
 *
 * What the client prints is the same on kernel TCP and on rshare; it
 * names outcomes, never times.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "helpers.h"

static const char *ename(int e)
{
	return e == EAGAIN ? "EAGAIN" : e == EINTR ? "EINTR" : e == ECONNRESET ? "ECONNRESET" : strerror(e);
}

static void set_tmo(int fd, int name, long ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	if (setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv)) < 0)
		t_die("setsockopt: %s", strerror(errno));
}

static long get_tmo_ms(int fd, int name)
{
	struct timeval tv = {0, 0};
	socklen_t l = sizeof(tv);
	getsockopt(fd, SOL_SOCKET, name, &tv, &l);
	return tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int get_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	getsockopt(fd, level, name, &v, &l);
	return v;
}

static int accept_retry(int lfd)
{
	int fd;
	while ((fd = accept(lfd, NULL, NULL)) < 0 && (errno == EAGAIN || errno == EINTR))
		;
	return fd;
}

static int server(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, idle = 77, lfd = socket(AF_INET, SOCK_STREAM, 0), fd, first, first_err;
	struct linger lg = {1, 5}, got_lg = {0, 0};
	socklen_t ll = sizeof(got_lg);
	char line[512], b;
	ssize_t r;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("server: %s", strerror(errno));
	set_tmo(lfd, SO_RCVTIMEO, 150);
	set_tmo(lfd, SO_SNDTIMEO, 150);
	setsockopt(lfd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(lfd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(lfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	first = accept(lfd, NULL, NULL);
	first_err = errno;
	printf("ready\n");
	fflush(stdout);
	if ((fd = accept_retry(lfd)) < 0)
		t_die("accept: %s", strerror(errno));
	getsockopt(fd, SOL_SOCKET, SO_LINGER, &got_lg, &ll);
	r = read(fd, &b, 1);
	snprintf(line, sizeof(line),
		 "server: accept alone %s; accepted: rcvtimeo %ld sndtimeo %ld keepalive %d nodelay %d keepidle %d "
		 "linger %d,%d; read %s\n",
		 first < 0 ? ename(first_err) : "a connection", get_tmo_ms(fd, SO_RCVTIMEO),
		 get_tmo_ms(fd, SO_SNDTIMEO), get_int(fd, SOL_SOCKET, SO_KEEPALIVE),
		 get_int(fd, IPPROTO_TCP, TCP_NODELAY), get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), got_lg.l_onoff,
		 got_lg.l_linger, r < 0 ? ename(errno) : "data");
	if (write(fd, line, strlen(line)) < 0)
		t_die("write: %s", strerror(errno));
	/* the client's "done": a second connection */
	if (accept_retry(lfd) < 0)
		t_die("accept: %s", strerror(errno));
	return 0;
}

static int client(const char *addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	size_t big = 64u << 20;
	char *buf = calloc(1, big), line[512];
	int fd = socket(AF_INET, SOCK_STREAM, 0), done;
	ssize_t r, n = 0;
	if (!buf || fd < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		t_die("client: %s", strerror(errno));
	set_tmo(fd, SO_SNDTIMEO, 2000);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	printf("connect under SO_SNDTIMEO: %s\n", r < 0 ? ename(errno) : "ok");
	/* the server's line */
	while (n < (ssize_t)sizeof(line) - 1 && (r = read(fd, line + n, 1)) == 1 && line[n] != '\n')
		n++;
	line[n] = 0;
	printf("%s\n", line);
	set_tmo(fd, SO_SNDTIMEO, 200);
	r = write(fd, buf, big);
	printf("write 64 MiB to a reader that never reads: %s\n",
	       r < 0 ? ename(errno) : r > 0 && (size_t)r < big ? "partial" : "all");
	set_tmo(fd, SO_RCVTIMEO, 100);
	r = read(fd, buf, 1);
	printf("read with nothing coming: %s\n", r < 0 ? ename(errno) : r == 0 ? "EOF" : "data");
	done = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(done, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("connect: %s", strerror(errno));
	close(done);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	return t_serve_or_ask(argc, argv, "socket-timeouts -s PORT | -c ADDR PORT", server, client);
}
