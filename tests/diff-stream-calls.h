/*
 * diff-stream-calls.h - how diff-stream's steps wait and move bytes
 * (tests/diff-stream.c): the ways to wait for readiness, and the calls
 * that -X reads and writes with, each behaving as read(2) or write(2)
 * would, so the transcript is the same whichever one a step draws.
 */
#ifndef DIFF_STREAM_CALLS_H
#define DIFF_STREAM_CALLS_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

enum { RD_BLOCK, RD_POLL, RD_SELECT, RD_EPOLL, RD_NMODES };
static const char *const rd_name[] = {"read", "poll", "select", "epoll"};
static void set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* Wait until fd is ready for ev (POLLIN or POLLOUT) the way mode says;
 * 10 s at most (a hang is a divergence, reported as ETIMEDOUT). */
static int wait_ready(int fd, int mode, short ev)
{
	if (mode == RD_SELECT) {
		fd_set s;
		struct timeval tv = {10, 0};
		FD_ZERO(&s);
		FD_SET(fd, &s);
		return select(fd + 1, ev == POLLIN ? &s : NULL, ev == POLLOUT ? &s : NULL, NULL, &tv) == 1 ? 0 : -1;
	}
	if (mode == RD_EPOLL) {
		struct epoll_event e = {.events = ev == POLLIN ? EPOLLIN : EPOLLOUT}, got;
		int ep = epoll_create1(0), n;
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
		n = epoll_wait(ep, &got, 1, 10000);
		close(ep);
		return n == 1 ? 0 : -1;
	}
	struct pollfd p = {.fd = fd, .events = ev};
	return poll(&p, 1, 10000) == 1 ? 0 : -1;
}

/* -X: how a step reads and writes */
enum { XR_READ, XR_PEEK, XR_WAITALL, XR_READV, XR_RECVMSG, XR_EPOLLET, XR_N };
enum { XW_WRITE, XW_WRITEV, XW_SENDMSG, XW_DONTWAIT, XW_N };
static const char *const xr_name[] = {"read", "peek", "waitall", "readv", "recvmsg", "epollet"};
static const char *const xw_name[] = {"write", "writev", "sendmsg", "dontwait"};

/* one write of the step's kind (-X); like write(2) */
static ssize_t write_x(int fd, const uint8_t *buf, uint32_t want, int xw)
{
	struct iovec v[3];
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
	uint32_t a = want / 3, b = want / 2;
	switch (xw) {
	case XW_WRITEV:
		v[0] = (struct iovec){(void *)buf, a};
		v[1] = (struct iovec){(void *)(buf + a), want - a - a};
		v[2] = (struct iovec){(void *)(buf + want - a), a};
		return writev(fd, v, 3);
	case XW_SENDMSG:
		v[0] = (struct iovec){(void *)buf, b};
		v[1] = (struct iovec){(void *)(buf + b), want - b};
		return sendmsg(fd, &m, 0);
	case XW_DONTWAIT:
		return send(fd, buf, want, MSG_DONTWAIT);
	}
	return write(fd, buf, want);
}

/* one read of the step's kind (-X); like read(2).  A peek must see the
 * bytes that the read after it takes. */
static ssize_t read_x(int fd, uint8_t *buf, uint32_t want, int xr)
{
	static __thread uint8_t pk[1 << 16];
	struct iovec v[2];
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 1};
	ssize_t r, r2;
	switch (xr) {
	case XR_PEEK:
		r = recv(fd, pk, want, MSG_PEEK);
		if (r <= 0)
			return r;
		r2 = read(fd, buf, (size_t)r);
		if (r2 != r || memcmp(pk, buf, (size_t)r)) {
			errno = EBADMSG;
			return -1;
		}
		return r;
	case XR_WAITALL:
		return recv(fd, buf, want, MSG_WAITALL);
	case XR_READV:
		v[0] = (struct iovec){buf, want / 2};
		v[1] = (struct iovec){buf + want / 2, want - want / 2};
		return readv(fd, v, 2);
	case XR_RECVMSG:
		v[0] = (struct iovec){buf, want};
		r = recvmsg(fd, &m, 0);
		if (r > 0 && m.msg_flags) {
			errno = EBADMSG;
			return -1;
		}
		return r;
	}
	return read(fd, buf, want);
}

/* Read n bytes (all of them checked); n, or the count before EOF as a
 * negative number - 1000000000, or -errno. */


/* the names of the poll bits in revents, appended to out (64 bytes) */
static inline void poll_names(short revents, char *out)
{
	static const struct { short bit; const char *name; } bits[] = {
		{POLLIN, "IN"}, {POLLOUT, "OUT"}, {POLLERR, "ERR"}, {POLLHUP, "HUP"}, {POLLRDHUP, "RDHUP"},
	};
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		if (revents & bits[i].bit) {
			strcat(out, " ");
			strcat(out, bits[i].name);
		}
}

#endif
