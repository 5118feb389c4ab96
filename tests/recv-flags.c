/*
 * recv-flags - recv's MSG_TRUNC, MSG_OOB and MSG_ERRQUEUE on a stream socket.
 *
 *   recv-flags -s PORT          the writer: prints "ready", then a child per
 *                               connection writes what its client asks
 *   recv-flags -c ADDR PORT     the reader: one line of what it saw per case
 *
 * The client asks with a line "w N": the writer writes the next N bytes of
 * its stream (t_stream_fill, seed 7), so that every byte says where it
 * was.  The cases:
 *   drain  1000 bytes waiting: recv(NULL, INT_MAX, MSG_DONTWAIT |
 *          MSG_NOSIGNAL | MSG_TRUNC), HAProxy's way to drain a connection
 *          before it closes: the count, the buffer never touched; then
 *          EAGAIN
 *   part   3000 waiting: MSG_TRUNC | MSG_PEEK of 1000 (counted, left),
 *          MSG_TRUNC of 500 (discarded), then a read of the rest: 2500,
 *          the bytes from position 500 on
 *   oob    recv MSG_OOB with no urgent data: EINVAL, and the 200 bytes
 *          waiting stay for the next read
 *   errq   recvmsg MSG_ERRQUEUE with nothing on the error queue: EAGAIN,
 *          and the 200 bytes waiting stay for the next read
 *   name   4 bytes waiting, one read each way: recvmsg with no address
 *          buffer (msg_namelen 77 stays), recvmsg with one (a stream gives
 *          no source address: the length 0, the buffer untouched), then
 *          recvfrom both ways the same
 *   peekoff SO_PEEK_OFF (Linux 6.10 on, for TCP): 3000 waiting, the
 *          offset set to 0; each MSG_PEEK starts at it and moves it on,
 *          each read moves it back by what it took; -1 turns it off.
 *          Where each call's bytes start in the stream, and the offset
 *          after it ("peekoff: not here" where the kernel refuses it)
 * Every line names outcomes, never times, and is the same on kernel TCP
 * and on rshare (tests/recv-msg-trunc-and-msg-oob-as-on-kernel-tcp.bats).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define SEED 7

static void serve(int fd)
{
	static uint8_t buf[65536];
	uint64_t pos = 0;
	char line[64];
	size_t n = 0;
	while (n < sizeof(line) - 1 && read(fd, line + n, 1) == 1) {
		unsigned k;
		if (line[n] != '\n') {
			n++;
			continue;
		}
		line[n] = 0;
		n = 0;
		if (sscanf(line, "w %u", &k) != 1 || k > sizeof(buf))
			continue;
		t_stream_fill(SEED, pos, buf, k);
		if (t_write_full(fd, buf, k) < 0)
			_exit(1);
		pos += k;
	}
	_exit(0);
}

static int server(int port)
{
	t_serve_forked(t_listen4(port), serve);
}

static struct sockaddr_in peer;

static int open_conn(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&peer, sizeof(peer)) < 0)
		t_die("connect: %s", strerror(errno));
	return fd;
}

/* the writer's next N bytes, waited for until they are all there (10 s) */
static void want(int fd, unsigned n)
{
	char cmd[32];
	int k = 0;
	snprintf(cmd, sizeof(cmd), "w %u\n", n);
	if (t_write_full(fd, cmd, strlen(cmd)) < 0)
		t_die("ask: %s", strerror(errno));
	for (int i = 0; i < 1000; i++) {
		struct timespec ts = {0, 10000000};
		if (ioctl(fd, FIONREAD, &k) == 0 && k >= (int)n)
			return;
		nanosleep(&ts, NULL);
	}
	t_die("%u bytes asked for, %d came", n, k);
}

static const char *ret(ssize_t r)
{
	static char b[32];
	if (r < 0)
		return errno == EAGAIN ? "EAGAIN" : errno == EINVAL ? "EINVAL" : errno == EFAULT ? "EFAULT" : strerror(errno);
	snprintf(b, sizeof(b), "%zd", r);
	return b;
}

/* one read of what waits, and whether it is the stream from POS on */
static void read_rest(int fd, uint64_t pos)
{
	static uint8_t buf[8192];
	ssize_t r = recv(fd, buf, sizeof(buf), 0);
	printf(", then read %s", ret(r));
	if (r > 0)
		printf(" %sfrom %llu on\n", t_stream_check(SEED, pos, buf, (size_t)r) < 0 ? "" : "NOT ",
		       (unsigned long long)pos);
	else
		printf("\n");
}

static void case_drain(void)
{
	int fd = open_conn();
	want(fd, 1000);
	printf("drain: MSG_TRUNC into no buffer %s", ret(recv(fd, NULL, INT_MAX, MSG_DONTWAIT | MSG_NOSIGNAL | MSG_TRUNC)));
	printf(", then %s\n", ret(recv(fd, NULL, INT_MAX, MSG_DONTWAIT | MSG_NOSIGNAL | MSG_TRUNC)));
	close(fd);
}

static void case_part(void)
{
	static uint8_t buf[8192];
	int fd = open_conn();
	want(fd, 3000);
	printf("part: MSG_TRUNC|MSG_PEEK of 1000 %s", ret(recv(fd, buf, 1000, MSG_TRUNC | MSG_PEEK)));
	printf(", MSG_TRUNC of 500 %s", ret(recv(fd, buf, 500, MSG_TRUNC)));
	read_rest(fd, 500);
	close(fd);
}

static void case_oob(void)
{
	static uint8_t buf[8192];
	int fd = open_conn();
	want(fd, 200);
	printf("oob: MSG_OOB %s", ret(recv(fd, buf, 1, MSG_OOB)));
	printf(", MSG_OOB|MSG_DONTWAIT %s", ret(recv(fd, buf, 1, MSG_OOB | MSG_DONTWAIT)));
	read_rest(fd, 0);
	close(fd);
}

static void case_errq(void)
{
	static uint8_t buf[8192];
	struct iovec v = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	int fd = open_conn();
	want(fd, 200);
	printf("errq: MSG_ERRQUEUE %s", ret(recvmsg(fd, &m, MSG_ERRQUEUE)));
	read_rest(fd, 0);
	close(fd);
}

static void case_name(void)
{
	uint8_t b;
	struct sockaddr_in x;
	struct iovec v = {.iov_base = &b, .iov_len = 1};
	struct msghdr m = {.msg_namelen = 77, .msg_iov = &v, .msg_iovlen = 1};
	socklen_t al = 33;
	int fd = open_conn();
	want(fd, 4);
	memset(&x, 0x55, sizeof(x));
	printf("name: recvmsg without a buffer %s", ret(recvmsg(fd, &m, 0)));
	printf(" namelen %u", (unsigned)m.msg_namelen);
	m.msg_name = &x;
	m.msg_namelen = sizeof(x);
	printf(", with one %s", ret(recvmsg(fd, &m, 0)));
	printf(" namelen %u untouched %d", (unsigned)m.msg_namelen, ((uint8_t *)&x)[0] == 0x55);
	printf(", recvfrom without %s", ret(recvfrom(fd, &b, 1, 0, NULL, &al)));
	printf(" len %u", (unsigned)al);
	al = sizeof(x);
	printf(", with one %s", ret(recvfrom(fd, &b, 1, 0, (struct sockaddr *)&x, &al)));
	printf(" len %u untouched %d\n", (unsigned)al, ((uint8_t *)&x)[0] == 0x55);
	close(fd);
}

#ifndef SO_PEEK_OFF
#define SO_PEEK_OFF 42
#endif

/* a call's bytes: where they start in the stream (the writer's bytes
 * say), and SO_PEEK_OFF after it */
static void peek_step(int fd, const char *what, size_t n, int flags)
{
	static uint8_t buf[4096];
	int off = -2;
	socklen_t l = sizeof(off);
	ssize_t r = recv(fd, buf, n, flags);
	long long at = -1;
	for (uint64_t p = 0; r > 0 && p < 3000; p++)
		if (t_stream_check(SEED, p, buf, (size_t)r) < 0) {
			at = (long long)p;
			break;
		}
	getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, &l);
	printf(", %s %s from %lld, off %d", what, ret(r), at, off);
}

static void case_peekoff(void)
{
	int fd = open_conn(), zero = 0, off = -2, none = -1;
	socklen_t l = sizeof(off);
	want(fd, 3000);
	if (setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero)) < 0) {
		printf("peekoff: not here (%s)\n", strerror(errno));
		close(fd);
		return;
	}
	getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, &l);
	printf("peekoff: set 0 reads %d", off);
	peek_step(fd, "peek 1000", 1000, MSG_PEEK);
	peek_step(fd, "peek 1000", 1000, MSG_PEEK);
	peek_step(fd, "read 1500", 1500, 0);
	peek_step(fd, "peek 300", 300, MSG_PEEK);
	setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &none, sizeof(none));
	peek_step(fd, "off -1, peek 200", 200, MSG_PEEK);
	peek_step(fd, "read 1500", 1500, 0);
	printf("\n");
	close(fd);
}

static int client(const char *addr, int port)
{
	peer = t_peer4(addr, port);
	case_drain();
	case_part();
	case_oob();
	case_errq();
	case_name();
	case_peekoff();
	return 0;
}

int main(int argc, char **argv)
{
	return t_serve_or_ask(argc, argv, "recv-flags -s PORT | -c ADDR PORT", server, client);
}
