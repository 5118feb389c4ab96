/*
 * rcvlowat - SO_RCVLOWAT: when a connection reads as readable, and how
 * much a blocking read waits for.
 *
 *   rcvlowat -s PORT          the writer: prints "ready", then a child per
 *                             connection writes what its client asks
 *   rcvlowat -c ADDR PORT     the reader: one connection per case below,
 *                             one line each of what it saw
 *
 * The client asks with lines: "w N [MS M]" writes N bytes, then after MS
 * milliseconds M more; "s" shuts the connection down for writing.  The
 * cases, each with SO_RCVLOWAT 1000 unless it says otherwise:
 *   opt       what getsockopt gives back: the default, after 0, after
 *             1000, and what an accepted connection took from its listener
 *   below     400 bytes waiting: poll, select, epoll (level) with a
 *             timeout, FIONREAD, then a nonblocking recv (takes the 400)
 *   reach     400 waiting, then 700 more: poll says readable
 *   block     a blocking recv of 4096 while 400 come, then 1100: it
 *             returns once 1000 are there (">=1000"), not with the first
 *             400 (1100, not 700: a kernel reader that took the 400 in
 *             already is woken only by the mark's worth more)
 *   short     a blocking recv of 200 with 400 there: 200 (the smaller of
 *             the length and the mark); then a nonblocking one takes the
 *             other 200
 *   timeo     SO_RCVLOWAT 2000 and SO_RCVTIMEO 300 ms, 1100 come: the
 *             recv returns them when the time is up
 *   peek      a blocking recv with MSG_PEEK waits for the mark as a read
 *             does, and takes the bytes after those it saw (">=1000", the
 *             stream's bytes), which a recv then reads; with MSG_WAITALL
 *             (and the mark at 1) it waits for its whole length
 *   eof       400 then end of stream: readable, 400, then 0
 *   edge      an edge-triggered epoll set: 400 raise nothing, 700 more do
 * Every line names outcomes, never times, and is the same on kernel TCP
 * and on rshare (tests/rcvlowat-readiness-and-reads-as-on-kernel-tcp.bats).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define MARK 1000
#define SEED 11

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the writer ---- */

/* the connection's next N bytes of its stream (t_stream_fill, SEED) */
static void write_n(int fd, size_t n)
{
	static uint8_t buf[65536];
	static uint64_t pos;
	while (n) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);
		t_stream_fill(SEED, pos, buf, k);
		if (t_write_full(fd, buf, k) < 0)
			t_die("write: %s", strerror(errno));
		n -= k;
		pos += k;
	}
}

static void serve(int fd)
{
	char line[128];
	size_t n = 0;
	while (n < sizeof(line) - 1 && read(fd, line + n, 1) == 1) {
		unsigned a, ms, b;
		if (line[n] != '\n') {
			n++;
			continue;
		}
		line[n] = 0;
		n = 0;
		if (line[0] == 's') {
			shutdown(fd, SHUT_WR);
		} else if (line[0] == 'w') {
			int k = sscanf(line + 1, "%u %u %u", &a, &ms, &b);
			write_n(fd, a);
			if (k == 3) {
				msleep((int)ms);
				write_n(fd, b);
			}
		}
	}
	_exit(0);
}

/* a connection's first line: the mark it took from its listener; then
 * its own reads of commands are woken by every byte (the kernel wakes a
 * reader only once the mark is reached, whatever the length it reads) */
static void serve_conn(int fd)
{
	int v = -1, one = 1;
	socklen_t l = sizeof(v);
	char got[32];
	getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &l);
	snprintf(got, sizeof(got), "%d\n", v);
	setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
	if (t_write_full(fd, got, strlen(got)) < 0)
		_exit(1);
	serve(fd);
}

static int server(int port)
{
	int mark = 700, lfd = t_listen4(port);
	/* what an accepted connection takes from its listener */
	setsockopt(lfd, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof(mark));
	t_serve_forked(lfd, serve_conn);
}

/* ---- the reader ---- */

static struct sockaddr_in peer;

static void ask(int fd, const char *cmd)
{
	if (t_write_full(fd, cmd, strlen(cmd)) < 0)
		t_die("ask: %s", strerror(errno));
}

static int get_mark(int fd)
{
	int v = -1;
	socklen_t l = sizeof(v);
	getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &l);
	return v;
}

static void set_mark(int fd, int v)
{
	if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) < 0)
		t_die("SO_RCVLOWAT: %s", strerror(errno));
}

/* a connection, with the writer's first line (its inherited mark) read */
static int open_conn(int *inherited)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), v = 0;
	char c;
	if (fd < 0 || connect(fd, (struct sockaddr *)&peer, sizeof(peer)) < 0)
		t_die("connect: %s", strerror(errno));
	while (read(fd, &c, 1) == 1 && c != '\n')
		v = v * 10 + (c - '0');
	if (inherited)
		*inherited = v;
	return fd;
}

/* until N bytes wait (FIONREAD), 10 s at most: 0, or -1 */
static int await_bytes(int fd, int n)
{
	for (int i = 0; i < 1000; i++) {
		int k = 0;
		if (ioctl(fd, FIONREAD, &k) == 0 && k >= n)
			return k == n ? 0 : -1;
		msleep(10);
	}
	return -1;
}

static const char *pev(short r)
{
	static char b[64];
	b[0] = 0;
	if (!r)
		return "none";
	if (r & POLLIN)
		strcat(b, "IN,");
	if (r & POLLOUT)
		strcat(b, "OUT,");
	if (r & POLLRDHUP)
		strcat(b, "RDHUP,");
	if (r & POLLHUP)
		strcat(b, "HUP,");
	if (r & POLLERR)
		strcat(b, "ERR,");
	b[strlen(b) - 1] = 0;
	return b;
}

static short poll_in(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

static const char *ret(ssize_t r)
{
	static char b[32];
	if (r < 0)
		return errno == EAGAIN ? "EAGAIN" : strerror(errno);
	snprintf(b, sizeof(b), "%zd", r);
	return b;
}

static void case_opt(void)
{
	int inh, fd = open_conn(&inh), a, b, c;
	a = get_mark(fd);
	set_mark(fd, 0);
	b = get_mark(fd);
	set_mark(fd, MARK);
	c = get_mark(fd);
	printf("opt: default %d, set 0 reads %d, set %d reads %d, accepted from a listener's 700: %d\n", a, b, MARK,
	       c, inh);
	close(fd);
}

static void case_below(void)
{
	static char buf[4096];
	int fd = open_conn(NULL), ep = epoll_create1(0), k = -1;
	struct epoll_event ev = {.events = EPOLLIN}, out;
	struct timeval tv = {0, 200000};
	fd_set rd;
	set_mark(fd, MARK);
	ask(fd, "w 400\n");
	if (await_bytes(fd, 400) < 0)
		t_die("below: the 400 bytes did not come");
	printf("below: poll %s", pev(poll_in(fd, 200)));
	FD_ZERO(&rd);
	FD_SET(fd, &rd);
	printf(", select %d", select(fd + 1, &rd, NULL, NULL, &tv));
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	printf(", epoll %d", epoll_wait(ep, &out, 1, 200));
	ioctl(fd, FIONREAD, &k);
	printf(", FIONREAD %d", k);
	printf(", recv MSG_DONTWAIT %s\n", ret(recv(fd, buf, sizeof(buf), MSG_DONTWAIT)));
	close(ep);
	close(fd);
}

static void case_reach(void)
{
	int fd = open_conn(NULL);
	set_mark(fd, MARK);
	ask(fd, "w 400\n");
	if (await_bytes(fd, 400) < 0)
		t_die("reach: the 400 bytes did not come");
	ask(fd, "w 700\n");
	printf("reach: poll %s\n", pev(poll_in(fd, 10000)));
	close(fd);
}

static void case_block(void)
{
	static char buf[4096];
	int fd = open_conn(NULL);
	ssize_t r;
	set_mark(fd, MARK);
	ask(fd, "w 400 300 1100\n");
	r = recv(fd, buf, sizeof(buf), 0);
	printf("block: recv %s\n", r < 0 ? ret(r) : r >= MARK ? ">=1000" : "<1000");
	close(fd);
}

static void case_short(void)
{
	static char buf[4096];
	int fd = open_conn(NULL);
	set_mark(fd, MARK);
	ask(fd, "w 400\n");
	/* there before the call: a reader that blocks is woken at the mark
	 * only, on kernel TCP, whatever its length */
	if (await_bytes(fd, 400) < 0)
		t_die("short: the 400 bytes did not come");
	printf("short: recv of 200 %s", ret(recv(fd, buf, 200, 0)));
	printf(", then MSG_DONTWAIT %s\n", ret(recv(fd, buf, sizeof(buf), MSG_DONTWAIT)));
	close(fd);
}

static void case_timeo(void)
{
	static char buf[4096];
	int fd = open_conn(NULL);
	struct timeval tv = {0, 300000};
	set_mark(fd, 2000);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ask(fd, "w 400 50 700\n");
	printf("timeo: recv %s\n", ret(recv(fd, buf, sizeof(buf), 0)));
	close(fd);
}

/* whether the R bytes of BUF are the stream's from POS on */
static const char *intact(const uint8_t *buf, ssize_t r, uint64_t pos)
{
	return r > 0 && t_stream_check(SEED, pos, buf, (size_t)r) >= 0 ? " NOT intact" : "";
}

static void case_peek(void)
{
	static uint8_t buf[4096], got[4096];
	int fd = open_conn(NULL);
	ssize_t r;
	set_mark(fd, MARK);
	ask(fd, "w 400 300 1100\n");
	r = recv(fd, buf, sizeof(buf), MSG_PEEK);
	printf("peek: recv MSG_PEEK %s%s", r < 0 ? ret(r) : r >= MARK ? ">=1000" : "<1000", intact(buf, r, 0));
	if (await_bytes(fd, 1500) < 0)
		t_die("peek: the 1500 bytes did not come");
	r = recv(fd, got, sizeof(got), MSG_DONTWAIT);
	printf(", then recv %s%s", ret(r), intact(got, r, 0));
	set_mark(fd, 1);
	ask(fd, "w 400 300 1100\n");
	r = recv(fd, buf, 1500, MSG_PEEK | MSG_WAITALL);
	printf("; mark 1, MSG_PEEK|MSG_WAITALL of 1500 %s%s", ret(r), intact(buf, r, 1500));
	r = recv(fd, got, sizeof(got), MSG_DONTWAIT);
	printf(", then recv %s%s\n", ret(r), intact(got, r, 1500));
	close(fd);
}

static void case_eof(void)
{
	static char buf[4096];
	int fd = open_conn(NULL);
	set_mark(fd, MARK);
	ask(fd, "w 400\ns\n");
	printf("eof: poll %s", pev(poll_in(fd, 10000)));
	printf(", recv %s", ret(recv(fd, buf, sizeof(buf), 0)));
	printf(", recv %s\n", ret(recv(fd, buf, sizeof(buf), 0)));
	close(fd);
}

static void case_edge(void)
{
	static char buf[4096];
	int fd = open_conn(NULL), ep = epoll_create1(0), n1, n2;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET}, out;
	set_mark(fd, MARK);
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	ask(fd, "w 400\n");
	if (await_bytes(fd, 400) < 0)
		t_die("edge: the 400 bytes did not come");
	n1 = epoll_wait(ep, &out, 1, 200);
	ask(fd, "w 700\n");
	n2 = epoll_wait(ep, &out, 1, 10000);
	printf("edge: with 400 %d event(s), with 1100 %d", n1, n2);
	printf(", recv %s\n", ret(recv(fd, buf, sizeof(buf), 0)));
	close(ep);
	close(fd);
}

static int client(const char *addr, int port)
{
	peer = t_peer4(addr, port);
	case_opt();
	case_below();
	case_reach();
	case_block();
	case_short();
	case_timeo();
	case_peek();
	case_eof();
	case_edge();
	return 0;
}

int main(int argc, char **argv)
{
	return t_serve_or_ask(argc, argv, "rcvlowat -s PORT | -c ADDR PORT", server, client);
}
