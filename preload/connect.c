/*
 * connect.c - connect: the hub first, kernel TCP when the other side has
 * no rshare listener, and a nonblocking connect settled later.
 *
 * A blocking connect asks the hub and waits for its answer: an rshare
 * connection (FD_RS) or "fall back", and then the kernel's connect.  A
 * nonblocking one sends the CONNECT and returns EINPROGRESS; the entry is
 * FD_RS with pending set (and the destination kept) until the answer
 * comes.  Whoever looks at it next (rs_of) settles it: an rshare
 * connection from then on, or a kernel socket whose own connect starts
 * then (rs_settle), its epoll registrations moved over (epoll.c).
 */
#include "preload.h"

/* SO_SNDTIMEO of fd's kernel socket, where a connect's waiting time is
 * set as the kernel's, in microseconds (0: none) */
static int64_t conn_tmo_us(int fd)
{
	struct timeval tv = {0, 0};
	socklen_t l = sizeof(tv);
	if (R(getsockopt)(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) < 0)
		return 0;
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* connect again on an rshare socket: as the kernel answers it */
/* A blocking connect again, on a connect under way (one a signal
 * interrupted): it waits, as the kernel's, and reports how it ended. */
static int rs_connect_wait(int fd, struct pfd *p, const struct sockaddr *addr, socklen_t len)
{
	int r = vs_connect_wait(p->slot, conn_tmo_us(fd)), e;
	uint32_t st;
	if (r < 0) {
		/* the time passed: the kernel's connect again says EALREADY */
		errno = r == -EINTR ? EINTR : r == -EINPROGRESS ? EALREADY : ECONNRESET;
		return -1;
	}
	if (rs_settle(fd, p))
		return R(connect)(fd, addr, len) < 0 && errno == EISCONN ? 0 : -1; /* kernel TCP now */
	st = atomic_load(&cl_slot(p->slot)->state);
	p->pending = 0;
	p->flags &= (uint8_t)~PFD_CONNECT_UNTOLD;
	if (st == SLOT_ESTABLISHED)
		return 0;
	e = vs_take_error(p->slot);
	errno = e ? e : ECONNREFUSED;
	return -1;
}

static int rs_connect_again(int fd, struct pfd *p, const struct sockaddr *addr, socklen_t len)
{
	uint32_t st;
	int e;
	if (!rs_of(fd))
		return R(connect)(fd, addr, len); /* now a kernel socket */
	st = atomic_load(&cl_slot(p->slot)->state);
	if (st == SLOT_CONNECTING && !(R(fcntl)(fd, F_GETFL) & O_NONBLOCK) && p->pending)
		return rs_connect_wait(fd, p, addr, len);
	if (st == SLOT_CONNECTING) {
		errno = EALREADY;
		return -1;
	}
	e = st == SLOT_CLOSED ? vs_take_error(p->slot) : 0;
	/* as the kernel: the first connect after the end of one under way
	 * reports that end (0 when established), later ones EISCONN */
	if (p->flags & PFD_CONNECT_UNTOLD) {
		p->flags &= (uint8_t)~PFD_CONNECT_UNTOLD;
		if (!e && st == SLOT_ESTABLISHED)
			return 0;
	}
	errno = e ? e : EISCONN;
	return -1;
}

/* The socket's local address: a port the program bound stays its own; an
 * unbound socket (port 0) gets one from the hub, shared across
 * destinations as the kernel's connect shares it (core/hub/ports.c), and
 * the kernel socket stays unbound (its own connect, on a fall back to
 * kernel TCP, picks its own).  -1 when it cannot be read (then the kernel
 * connects). */
static int conn_local(int fd, union sockaddr_any *local)
{
	socklen_t ll = sizeof(*local);
	memset(local, 0, sizeof(*local));
	return R(getsockname)(fd, &local->sa, &ll) < 0 ? -1 : 0;
}

/* nonblocking: the CONNECT goes, the answer comes later */
static int conn_start(int fd, struct pfd *p, const union sockaddr_any *dst, const union sockaddr_any *local,
		      const struct sockaddr *addr, socklen_t len)
{
	uint32_t slot, gen;
	int r = vs_connect_start(dst, local, p->rxsize, p->txsize, 1, &slot, &gen);
	if (r == 1)
		return R(connect)(fd, addr, len);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	pfd_set(p, &(struct pfd){.kind = FD_RS, .family = p->family, .pending = 1,
				 .flags = p->flags | PFD_CONNECT_UNTOLD, .optmask = p->optmask,
				 .slot = slot, .gen = gen, .evfd = -1, .dst = *dst});
	atomic_fetch_or(&cl_slot(slot)->flags, SLOTF_NONBLOCK);
	errno = EINPROGRESS;
	return -1;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	union sockaddr_any dst, local;
	int r;
	if (p && p->kind == FD_TCP &&
	    (p->pending || !cfg_use_rshare(CFG_CONNECT, fd, addr, len, &p->rxsize, &p->txsize)))
		return R(connect)(fd, addr, len);
	if (p && p->kind == FD_RS)
		return rs_connect_again(fd, p, addr, len);
	if (!p || p->kind != FD_TCP || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)))
		return R(connect)(fd, addr, len);
	memset(&dst, 0, sizeof(dst));
	memcpy(&dst, addr, addr->sa_family == AF_INET ? sizeof(dst.in) : sizeof(dst.in6));
	if (conn_local(fd, &local) < 0)
		return R(connect)(fd, addr, len);
	if (R(fcntl)(fd, F_GETFL) & O_NONBLOCK)
		return conn_start(fd, p, &dst, &local, addr, len);
	r = vs_connect(&dst, &local, p->rxsize, p->txsize, conn_tmo_us(fd), &p->slot, &p->gen);
	if (r == 1)
		return R(connect)(fd, addr, len);
	if (r == -EINTR || r == -EINPROGRESS) {
		/* interrupted, or SO_SNDTIMEO passed: from now on as a
		 * nonblocking connect under way (connect again waits for it,
		 * or EALREADY when nonblocking; poll and SO_ERROR tell the end) */
		pfd_set(p, &(struct pfd){.kind = FD_RS, .family = p->family, .pending = 1,
				 .flags = p->flags | PFD_CONNECT_UNTOLD, .optmask = p->optmask,
				 .slot = p->slot, .gen = p->gen, .evfd = -1, .dst = dst});
		errno = -r;
		return -1;
	}
	if (r < 0) {
		errno = -r;
		return -1;
	}
	p->evfd = -1;
	__atomic_store_n(&p->kind, FD_RS, __ATOMIC_RELEASE);
	if (R(fcntl)(fd, F_GETFL) & O_NONBLOCK)
		atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
	return 0;
}

/* A nonblocking connect that went on rshare: once answered it is an
 * rshare connection (or refused); given to kernel TCP, the descriptor
 * becomes a kernel socket: the kernel connect starts now, and the epoll
 * sets that waited on the readiness descriptor wait on the socket instead.
 * 1 when it became a kernel socket. */
int rs_settle(int fd, struct pfd *p)
{
	uint32_t slot = p->slot, gen = p->gen, st = atomic_load(&cl_slot(slot)->state);
	union sockaddr_any dst = p->dst;
	if (st == SLOT_CONNECTING)
		return 0;
	if (st != SLOT_FALLBACK) {
		p->pending = 0;
		if (st == SLOT_ESTABLISHED)
			rd_settled(fd, p);
		return 0;
	}
	if (!ep_hand_over(fd, p, slot))
		return p->kind == FD_TCP; /* another thread did it */
	vs_unref(slot, gen);
	if (R(connect)(fd, &dst.sa, dst.sa.sa_family == AF_INET6 ? sizeof(dst.in6) : sizeof(dst.in)) < 0 &&
	    errno == EINPROGRESS) {
		/* the program was told the connect is over (writable): let the
		 * kernel's answer come first, a round trip (at most 1 s) */
		struct pollfd w = {.fd = fd, .events = POLLOUT};
		R(poll)(&w, 1, 1000);
	}
	return 1;
}
