/*
 * sockopt.c - socket options, fcntl and ioctl on rshare sockets.
 *
 * The kernel socket behind every descriptor checks the arguments and
 * answers what rshare does not: setsockopt is always the kernel's (the
 * buffer sizes asked before connect or listen are kept for the rings),
 * getsockopt answers SO_ERROR, SO_RCVBUF/SO_SNDBUF (the rings' sizes,
 * unless the program set them: then the kernel's answer, as on Linux) and
 * SO_ACCEPTCONN itself.  O_NONBLOCK (fcntl F_SETFL, ioctl FIONBIO) is kept
 * in the slot's flags; a kernel listener stays nonblocking whatever the
 * application asks, and F_GETFL tells it what it asked.  FIONREAD is the
 * bytes waiting in the receive ring.
 */
#include "preload.h"

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	int r = R(setsockopt)(fd, level, name, val, len);
	/* the kernel checks the arguments; its answer stands */
	if (r == 0 && p && p->kind == FD_TCP && level == SOL_SOCKET && val && len >= sizeof(int) &&
	    (name == SO_RCVBUF || name == SO_SNDBUF)) {
		int v = *(const int *)val;
		uint32_t sz = arena_ring_size(v > 0 ? (uint64_t)v * 2 : 1);
		if (name == SO_RCVBUF)
			p->rxsize = sz;
		else
			p->txsize = sz;
		p->flags |= name == SO_RCVBUF ? PFD_RCVBUF_SET : PFD_SNDBUF_SET;
	}
	return r;
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct pfd *p = rs_of(fd);
	if (p && level == SOL_SOCKET && val && len && *len >= sizeof(int)) {
		struct arena_slot *as = cl_slot(p->slot);
		switch (name) {
		case SO_ERROR:
			*(int *)val = vs_take_error(p->slot);
			*len = sizeof(int);
			return 0;
		case SO_RCVBUF:
		case SO_SNDBUF:
			/* set by the program: the kernel's answer, twice what was
			 * asked, as Linux reports it; else the ring's size now */
			if (p->kind == FD_RS && !(p->flags & (name == SO_RCVBUF ? PFD_RCVBUF_SET : PFD_SNDBUF_SET))) {
				*(int *)val = (int)(name == SO_RCVBUF ? as->rx.size : as->tx.size);
				*len = sizeof(int);
				return 0;
			}
			break;
		case SO_ACCEPTCONN:
			*(int *)val = p->kind == FD_LISTEN;
			*len = sizeof(int);
			return 0;
		}
	}
	return R(getsockopt)(fd, level, name, val, len);
}

static int rs_fcntl(int fd, struct pfd *p, int cmd, long arg)
{
	struct arena_slot *as = cl_slot(p->slot);
	int r;
	switch (cmd) {
	case F_GETFL:
		r = R(fcntl)(fd, F_GETFL);
		if (r >= 0 && p->kind == FD_LISTEN)
			r = (r & ~O_NONBLOCK) | ((atomic_load(&as->flags) & SLOTF_NONBLOCK) ? O_NONBLOCK : 0);
		return r;
	case F_SETFL:
		r = R(fcntl)(fd, F_SETFL, p->kind == FD_LISTEN ? arg | O_NONBLOCK : arg);
		if (r == 0) {
			if (arg & O_NONBLOCK)
				atomic_fetch_or(&as->flags, SLOTF_NONBLOCK);
			else
				atomic_fetch_and(&as->flags, ~SLOTF_NONBLOCK);
		}
		return r;
	default:
		return R(fcntl)(fd, cmd, arg);
	}
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	struct pfd *p;
	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	p = rs_of(fd);
	if (p && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		return pfd_dup(fd, R(fcntl)(fd, cmd, arg));
	if (!p || (cmd != F_GETFL && cmd != F_SETFL))
		return R(fcntl)(fd, cmd, arg);
	return rs_fcntl(fd, p, cmd, arg);
}

int fcntl64(int fd, int cmd, ...);
int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	struct pfd *p;
	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	p = rs_of(fd);
	if (p && p->kind == FD_RS && req == FIONREAD && arg) {
		*(int *)arg = vs_nread(p->slot);
		return 0;
	}
	if (p && req == FIONBIO && arg) {
		if (*(int *)arg)
			atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
		else
			atomic_fetch_and(&cl_slot(p->slot)->flags, ~SLOTF_NONBLOCK);
		if (p->kind == FD_LISTEN)
			return 0; /* the kernel listener stays nonblocking */
	}
	return R(ioctl)(fd, req, arg);
}
