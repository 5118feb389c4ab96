/*
 * zerocopy - MSG_ZEROCOPY sends and their completion notifications on a
 * stream socket (Documentation/networking/msg_zerocopy.rst).
 *
 *   zerocopy -s PORT          the reader: prints "ready", then a child per
 *                             connection reads the client's stream to its
 *                             end and answers "got N intact|NOT intact"
 *   zerocopy -c ADDR PORT     the sender: one line of what it saw per case
 *
 * The client writes the stream of t_stream_fill (seed 9) in sends of
 * 10000 bytes with MSG_ZEROCOPY (each from its own buffer, at most 10
 * a connection), shuts its side and reads the answer.
 * The cases:
 *   plain   without SO_ZEROCOPY the flag does nothing: no notification
 *           (poll reports no POLLERR, MSG_ERRQUEUE gives EAGAIN)
 *   notify  with SO_ZEROCOPY (it reads back 1), 8 sends: poll with no
 *           events wakes with POLLERR, and recvmsg(MSG_ERRQUEUE) hands out
 *           notifications (0 bytes, MSG_ERRQUEUE in msg_flags, one
 *           IP_RECVERR cmsg of a sock_extended_err, origin ZEROCOPY, errno
 *           0, the range of send numbers in ee_info..ee_data) until the
 *           sends 0..7 are all covered, each once; then EAGAIN and no
 *           POLLERR; the sends' numbers go on from 8
 *   epoll   an epoll set that waits for EPOLLIN only reports EPOLLERR
 *           for the notifications of 3 sends, and nothing once they are
 *           taken
 *   trunc   a notification taken with no room for its cmsg: 0 bytes,
 *           MSG_ERRQUEUE|MSG_CTRUNC, and it is gone (EAGAIN after); the
 *           same with recv(MSG_ERRQUEUE), which has no room for one
 * Notifications come when the kernel is done with the bytes (on a kernel
 * socket, once they were acknowledged), so the client waits for them (at
 * most 5 s) and prints what they covered, never how they were split.
 * Every line is the same on kernel TCP and on rshare
 * (tests/msg-zerocopy-notifies-as-on-kernel-tcp.bats).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define SEED 9
#define CHUNK 10000

static void serve(int fd)
{
	static uint8_t buf[65536];
	uint64_t pos = 0;
	int bad = 0;
	char line[64];
	ssize_t r;
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		bad |= t_stream_check(SEED, pos, buf, (size_t)r) >= 0;
		pos += (uint64_t)r;
	}
	snprintf(line, sizeof(line), "got %llu %s\n", (unsigned long long)pos, bad ? "NOT intact" : "intact");
	t_write_full(fd, line, strlen(line));
	_exit(0);
}

static int server(int port)
{
	t_serve_forked(t_listen4(port), serve);
}

static struct sockaddr_in peer;

static int open_conn(int zc)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		t_die("socket: %s", strerror(errno));
	if (zc && setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &zc, sizeof(zc)) < 0)
		t_die("SO_ZEROCOPY: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&peer, sizeof(peer)) < 0)
		t_die("connect: %s", strerror(errno));
	return fd;
}

static const char *ret(ssize_t r)
{
	static char b[32];
	if (r < 0)
		return errno == EAGAIN ? "EAGAIN" : strerror(errno);
	snprintf(b, sizeof(b), "%zd", r);
	return b;
}

/* N sends of CHUNK with MSG_ZEROCOPY from stream position *POS, each
 * from a buffer of its own (one the kernel may still read until its
 * notification: a program must not write it before that) */
static void sends(int fd, int n, uint64_t *pos)
{
	static uint8_t buf[10][CHUNK];
	for (int i = 0; i < n; i++) {
		uint8_t *b = buf[(*pos / CHUNK) % 10];
		ssize_t r;
		t_stream_fill(SEED, *pos, b, CHUNK);
		r = send(fd, b, CHUNK, MSG_ZEROCOPY);
		if (r != CHUNK)
			t_die("send %d: %s", i, ret(r));
		*pos += CHUNK;
	}
}

/* the writer's side shut, the reader's answer */
static void finish(int fd)
{
	char line[64];
	ssize_t r;
	shutdown(fd, SHUT_WR);
	r = t_read_full(fd, line, sizeof(line) - 1);
	line[r > 0 ? r : 0] = 0;
	line[strcspn(line, "\n")] = 0;
	printf(", reader %s\n", line);
	close(fd);
}

static short poll_now(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = 0};
	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

static void case_plain(void)
{
	uint64_t pos = 0;
	char c;
	int fd = open_conn(0);
	struct iovec v = {.iov_base = &c, .iov_len = 1};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	sends(fd, 4, &pos);
	printf("plain: 4 sends, poll %s", poll_now(fd, 300) & POLLERR ? "POLLERR" : "no POLLERR");
	printf(", MSG_ERRQUEUE %s", ret(recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT)));
	finish(fd);
}

/* one notification, taken; returns 1, 0 when none came (EAGAIN), -1
 * when it was not one of a zerocopy send */
static int take(int fd, uint32_t *lo, uint32_t *hi, char *what, size_t wn)
{
	union {
		char b[256];
		struct cmsghdr align;
	} ctl;
	char c;
	struct iovec v = {.iov_base = &c, .iov_len = 1};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *h;
	struct sock_extended_err *e;
	ssize_t r = recvmsg(fd, &m, MSG_ERRQUEUE);
	if (r < 0)
		return errno == EAGAIN ? 0 : (snprintf(what, wn, "%s", strerror(errno)), -1);
	h = CMSG_FIRSTHDR(&m);
	if (r != 0 || m.msg_flags != MSG_ERRQUEUE || !h || CMSG_NXTHDR(&m, h)) {
		snprintf(what, wn, "ret %zd flags %#x cmsg %s", r, m.msg_flags, h ? "several" : "none");
		return -1;
	}
	e = (struct sock_extended_err *)CMSG_DATA(h);
	snprintf(what, wn, "cmsg %s/%s len %zu, origin %s, errno %u, code %s",
		 h->cmsg_level == SOL_IP ? "SOL_IP" : "?", h->cmsg_type == IP_RECVERR ? "IP_RECVERR" : "?",
		 (size_t)h->cmsg_len, e->ee_origin == SO_EE_ORIGIN_ZEROCOPY ? "ZEROCOPY" : "?", e->ee_errno,
		 e->ee_code == SO_EE_CODE_ZEROCOPY_COPIED ? "COPIED" : e->ee_code ? "?" : "0");
	if (h->cmsg_level != SOL_IP || h->cmsg_type != IP_RECVERR || e->ee_origin != SO_EE_ORIGIN_ZEROCOPY)
		return -1;
	*lo = e->ee_info;
	*hi = e->ee_data;
	return 1;
}

/* notifications until FIRST..LAST are covered (5 s at most): prints what
 * they covered and what each said */
static void collect(int fd, uint32_t first, uint32_t last)
{
	uint8_t seen[64] = {0};
	char what[160] = "", w[160];
	uint32_t lo, hi, left = last - first + 1;
	int twice = 0, outside = 0, other = 0;
	for (int tries = 0; left && tries < 50;) {
		int k = take(fd, &lo, &hi, w, sizeof(w));
		if (k < 0) {
			printf(" [not a zerocopy notification: %s]", w);
			return;
		}
		if (k == 0) {
			tries++;
			poll_now(fd, 100);
			continue;
		}
		if (!*what)
			snprintf(what, sizeof(what), "%s", w);
		else
			other |= strcmp(what, w) != 0;
		for (uint32_t i = lo; i - lo <= hi - lo; i++) {
			if (i < first || i > last || i - first >= sizeof(seen)) {
				outside = 1;
				continue;
			}
			twice |= seen[i - first]++;
			left -= seen[i - first] == 1;
		}
	}
	printf(", notified %u..%u%s%s%s%s: %s", first, last, left ? " NOT all" : "", twice ? ", some twice" : "",
	       outside ? ", some outside" : "", other ? ", not all alike" : "", what);
}

static void case_notify(void)
{
	uint64_t pos = 0;
	int v = 0;
	socklen_t l = sizeof(v);
	int fd = open_conn(1);
	getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &v, &l);
	sends(fd, 8, &pos);
	printf("notify: SO_ZEROCOPY %d, 8 sends, poll %s", v, poll_now(fd, 5000) & POLLERR ? "POLLERR" : "no POLLERR");
	collect(fd, 0, 7);
	printf("; then MSG_ERRQUEUE %s", ret(recvmsg(fd, &(struct msghdr){0}, MSG_ERRQUEUE | MSG_DONTWAIT)));
	printf(", poll %s", poll_now(fd, 0) & POLLERR ? "POLLERR" : "no POLLERR");
	sends(fd, 2, &pos);
	collect(fd, 8, 9);
	finish(fd);
}

/* an epoll set waiting for input only: EPOLLERR comes for a notification
 * all the same, and goes once it is taken */
static void case_epoll(void)
{
	uint64_t pos = 0;
	struct epoll_event e = {.events = EPOLLIN}, out;
	int fd = open_conn(1), ep = epoll_create1(0), n;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
		t_die("epoll: %s", strerror(errno));
	printf("epoll: EPOLLIN only, before %d event(s)", epoll_wait(ep, &out, 1, 200));
	sends(fd, 3, &pos);
	n = epoll_wait(ep, &out, 1, 5000);
	printf(", after 3 sends %d: %s%s%s", n, n == 1 && (out.events & EPOLLIN) ? "IN," : "",
	       n == 1 && (out.events & EPOLLOUT) ? "OUT," : "", n == 1 && (out.events & EPOLLERR) ? "ERR" : "");
	collect(fd, 0, 2);
	printf(", then %d event(s)", epoll_wait(ep, &out, 1, 200));
	close(ep);
	finish(fd);
}

static void case_trunc(void)
{
	uint64_t pos = 0;
	char c;
	struct iovec v = {.iov_base = &c, .iov_len = 1};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	ssize_t r;
	int fd = open_conn(1);
	sends(fd, 1, &pos);
	poll_now(fd, 5000);
	r = recvmsg(fd, &m, MSG_ERRQUEUE);
	printf("trunc: MSG_ERRQUEUE without room for the cmsg %s, flags %s%s", ret(r),
	       m.msg_flags & MSG_ERRQUEUE ? "MSG_ERRQUEUE" : "-", m.msg_flags & MSG_CTRUNC ? "|MSG_CTRUNC" : "");
	printf(", then %s", ret(recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT)));
	sends(fd, 1, &pos);
	poll_now(fd, 5000);
	printf("; recv MSG_ERRQUEUE %s", ret(recv(fd, &c, 1, MSG_ERRQUEUE)));
	printf(", then %s", ret(recv(fd, &c, 1, MSG_ERRQUEUE | MSG_DONTWAIT)));
	finish(fd);
}

static int client(const char *addr, int port)
{
	peer = t_peer4(addr, port);
	case_plain();
	case_notify();
	case_epoll();
	case_trunc();
	return 0;
}

int main(int argc, char **argv)
{
	return t_serve_or_ask(argc, argv, "zerocopy -s PORT | zerocopy -c ADDR PORT", server, client);
}
