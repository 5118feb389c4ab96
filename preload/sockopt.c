/*
 * sockopt.c - socket options, fcntl and ioctl on rshare sockets.
 *
 * A kernel socket checks the arguments of every setsockopt and answers
 * what rshare does not.  For a connection that is still its kernel socket
 * that is the socket itself; for one whose descriptor became its readiness
 * descriptor (PFD_SELF, ready.c) it is a TCP socket of the same family
 * that this process keeps for the purpose (the scratch one, which is set,
 * and the pristine one, which answers what nobody set).  The options of
 * the table below that a program sets on a connection are kept in its
 * slot as the kernel reads them back (so twice SO_RCVBUF's value, a time
 * rounded to the kernel's tick), shared by every process that holds the
 * socket as the kernel's are, and answered from there; those set on a
 * socket before it connected are carried there when its descriptor
 * changes (so_carry), and those set on a listener go to the connections
 * it accepts (so_inherit).  getsockopt answers SO_ERROR, SO_ACCEPTCONN and
 * SO_RCVBUF/SO_SNDBUF (the rings' sizes, unless the program set them)
 * itself, TCP_INFO's state from the connection's, and SO_PEEK_OFF (state
 * that recv moves, kept in the slot: the kernel only says whether it has
 * the option).  O_NONBLOCK (fcntl
 * F_SETFL, ioctl FIONBIO) is kept in the slot's flags; a kernel listener
 * and a readiness descriptor stay nonblocking whatever the application
 * asks, and F_GETFL tells it what it asked.  FIONREAD is the bytes waiting
 * in the receive ring, SIOCOUTQ those in the send ring (vs_nunsent: none
 * on the same node, where the send ring is the peer's receive ring and
 * what is in it has arrived, as loopback acknowledges at once).
 */
#include <linux/sockios.h>

#include "preload.h"

enum { OPT_BOOL, OPT_INT, OPT_LINGER, OPT_TMO };

/* the options kept in the slot: bit i of slot_opts.set is so_tab[i] */
static const struct so_ent {
	int level, name;
	uint8_t type, idx; /* OPT_BOOL: bit of bools; OPT_INT: ival[]; OPT_TMO: tmo_us[] */
} so_tab[] = {
	{SOL_SOCKET, SO_KEEPALIVE, OPT_BOOL, SLOT_OPTB_KEEPALIVE},
	{SOL_SOCKET, SO_OOBINLINE, OPT_BOOL, 1},
	{SOL_SOCKET, SO_REUSEADDR, OPT_BOOL, 2},
	{SOL_SOCKET, SO_REUSEPORT, OPT_BOOL, 3},
	{SOL_SOCKET, SO_DONTROUTE, OPT_BOOL, 4},
	{IPPROTO_TCP, TCP_NODELAY, OPT_BOOL, 5},
	{IPPROTO_TCP, TCP_CORK, OPT_BOOL, 6},
	{SOL_SOCKET, SO_ZEROCOPY, OPT_BOOL, SLOT_OPTB_ZEROCOPY},
	{SOL_SOCKET, SO_RCVBUF, OPT_INT, 0},
	{SOL_SOCKET, SO_SNDBUF, OPT_INT, 1},
	{SOL_SOCKET, SO_PRIORITY, OPT_INT, 2},
	{SOL_SOCKET, SO_RCVLOWAT, OPT_INT, SLOT_OPTI_RCVLOWAT},
	{IPPROTO_TCP, TCP_KEEPIDLE, OPT_INT, SLOT_OPTI_KEEPIDLE},
	{IPPROTO_TCP, TCP_KEEPINTVL, OPT_INT, SLOT_OPTI_KEEPINTVL},
	{IPPROTO_TCP, TCP_KEEPCNT, OPT_INT, SLOT_OPTI_KEEPCNT},
	{IPPROTO_TCP, TCP_USER_TIMEOUT, OPT_INT, SLOT_OPTI_USER_TIMEOUT},
	{IPPROTO_TCP, TCP_NOTSENT_LOWAT, OPT_INT, 8},
	{IPPROTO_TCP, TCP_MAXSEG, OPT_INT, 9},
	{IPPROTO_IP, IP_TOS, OPT_INT, 10},
	{IPPROTO_IPV6, IPV6_TCLASS, OPT_INT, 11},
	{SOL_SOCKET, SO_LINGER, OPT_LINGER, 0},
	{SOL_SOCKET, SO_RCVTIMEO, OPT_TMO, 0},
	{SOL_SOCKET, SO_SNDTIMEO, OPT_TMO, 1},
};
#define SO_N (int)(sizeof(so_tab) / sizeof(so_tab[0]))
_Static_assert(SO_N <= 32, "one bit of slot_opts.set each");

static int so_find(int level, int name)
{
	for (int i = 0; i < SO_N; i++)
		if (so_tab[i].level == level && so_tab[i].name == name)
			return i;
	return -1;
}

/* the value of option i as getsockopt gives it, into o */
static void so_store(struct slot_opts *o, int i, const void *val)
{
	const struct so_ent *e = &so_tab[i];
	int v;
	switch (e->type) {
	case OPT_BOOL:
		memcpy(&v, val, sizeof(v));
		if (v)
			atomic_fetch_or(&o->bools, 1u << e->idx);
		else
			atomic_fetch_and(&o->bools, ~(1u << e->idx));
		break;
	case OPT_INT:
		memcpy(&o->ival[e->idx], val, sizeof(int));
		break;
	case OPT_LINGER:
		memcpy(o->linger, val, sizeof(struct linger));
		break;
	case OPT_TMO: {
		struct timeval tv;
		memcpy(&tv, val, sizeof(tv));
		o->tmo_us[e->idx] = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
		break;
	}
	}
	atomic_fetch_or(&o->set, 1u << i);
}

/* option i as kept in o, into val (at most *len bytes, as the kernel) */
static int so_answer(const struct slot_opts *o, int i, void *val, socklen_t *len)
{
	const struct so_ent *e = &so_tab[i];
	union {
		int v;
		struct linger l;
		struct timeval tv;
	} u;
	socklen_t n = sizeof(int);
	switch (e->type) {
	case OPT_BOOL:
		u.v = !!(atomic_load(&o->bools) & (1u << e->idx));
		break;
	case OPT_INT:
		u.v = o->ival[e->idx];
		break;
	case OPT_LINGER:
		memcpy(&u.l, o->linger, sizeof(u.l));
		n = sizeof(u.l);
		break;
	case OPT_TMO:
		u.tv.tv_sec = o->tmo_us[e->idx] / 1000000;
		u.tv.tv_usec = o->tmo_us[e->idx] % 1000000;
		n = sizeof(u.tv);
		break;
	}
	if ((int)*len < 0) {
		errno = EINVAL;
		return -1;
	}
	if (*len < n)
		n = *len;
	memcpy(val, &u, n);
	*len = n;
	return 0;
}

/* read option i back from kernel socket fd into the slot */
static void so_keep(int fd, struct arena_slot *as, int i)
{
	union {
		int v;
		struct linger l;
		struct timeval tv;
	} u;
	socklen_t n = sizeof(u);
	if (R(getsockopt)(fd, so_tab[i].level, so_tab[i].name, &u, &n) == 0)
		so_store(&as->opts, i, &u);
}

void so_carry(int fd, struct pfd *p)
{
	struct arena_slot *as = cl_slot(p->slot);
	uint32_t m = p->optmask & ~atomic_load(&as->opts.set);
	for (int i = 0; m; i++, m >>= 1)
		if (m & 1)
			so_keep(fd, as, i);
	p->optmask = 0;
}

/* An accepted connection takes the options set on its listener, as the
 * kernel's accepted sockets do (timeouts, keepalive, linger, TCP_NODELAY,
 * ...); its buffers follow the listener's rings already. */
void so_inherit(int lfd, const struct pfd *lp, uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint32_t m = lp->optmask;
	for (int i = 0; m; i++, m >>= 1)
		if ((m & 1) && !(so_tab[i].level == SOL_SOCKET &&
				 (so_tab[i].name == SO_RCVBUF || so_tab[i].name == SO_SNDBUF)))
			so_keep(lfd, as, i);
}

/* This process's TCP sockets that stand in for a readiness descriptor:
 * [family][0] never set (it answers defaults), [family][1] set (it checks
 * what is set, and reads it back).  -1 when none can be made. */
static _Atomic int so_stand[2][2] = {{-1, -1}, {-1, -1}};

static int so_stand_in(int family, int scratch)
{
	_Atomic int *s = &so_stand[family == AF_INET6][scratch];
	int fd = atomic_load(s), none = -1;
	if (fd >= 0)
		return fd;
	fd = cl_hi_fd(R(socket)(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (fd < 0)
		return -1;
	if (!atomic_compare_exchange_strong(s, &none, fd)) {
		R(close)(fd);
		return none;
	}
	return fd;
}

int so_linger(int fd, const struct pfd *p)
{
	struct linger l = {0, 0};
	socklen_t ll = sizeof(l);
	struct arena_slot *as = cl_slot(p->slot);
	int i = so_find(SOL_SOCKET, SO_LINGER);
	if ((p->flags & PFD_SELF) || (atomic_load(&as->opts.set) & (1u << i)))
		memcpy(&l, as->opts.linger, sizeof(l));
	else if (R(getsockopt)(fd, SOL_SOCKET, SO_LINGER, &l, &ll) < 0)
		return 0;
	return !l.l_onoff ? 0 : l.l_linger > 0 ? l.l_linger : -1;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	int self = p && p->kind == FD_RS && (p->flags & PFD_SELF), i, k, r;
	k = self ? so_stand_in(p->family, 1) : fd;
	if (self && k < 0) {
		errno = ENOBUFS;
		return -1;
	}
	/* the kernel checks the arguments; its answer stands */
	r = R(setsockopt)(k, level, name, val, len);
	if (r == 0 && p && p->kind == FD_RS && level == SOL_SOCKET && name == SO_PEEK_OFF && len >= sizeof(int))
		atomic_store(&cl_slot(p->slot)->peek_off, *(const int *)val); /* state: the readers move it */
	if (r < 0 || !p || (i = so_find(level, name)) < 0)
		return r;
	if (p->kind == FD_RS) {
		so_keep(k, cl_slot(p->slot), i);
	} else if (p->kind == FD_LISTEN) {
		p->optmask |= 1u << i; /* for the connections it accepts (so_inherit) */
	} else if (p->kind == FD_TCP) {
		p->optmask |= 1u << i;
		if (level == SOL_SOCKET && len >= sizeof(int) && (name == SO_RCVBUF || name == SO_SNDBUF)) {
			int v = *(const int *)val;
			uint32_t sz = arena_ring_size(v > 0 ? (uint64_t)v * 2 : 1);
			if (name == SO_RCVBUF)
				p->rxsize = sz;
			else
				p->txsize = sz;
			p->flags |= name == SO_RCVBUF ? PFD_RCVBUF_SET : PFD_SNDBUF_SET;
		}
	}
	return r;
}

/* The TCP state of an rshare connection, as its kernel socket would be in:
 * each end's FIN is as good as acknowledged once sent (the bytes before
 * it left the send ring), so a connection shut down both ways is closed,
 * as one in TIME_WAIT or past LAST_ACK is, and names no peer. */
int so_tcp_state(uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint32_t st = atomic_load(&as->state), fl = atomic_load(&as->flags);
	int fin_out = (fl & SLOTF_TX_SHUT) && !vs_nunsent(slot);
	if (st == SLOT_CONNECTING)
		return TCP_SYN_SENT;
	if (st != SLOT_ESTABLISHED)
		return TCP_CLOSE;
	if (fl & SLOTF_RX_FIN)
		return fin_out ? TCP_CLOSE : (fl & SLOTF_TX_SHUT) ? TCP_LAST_ACK : TCP_CLOSE_WAIT;
	return fin_out ? TCP_FIN_WAIT2 : (fl & SLOTF_TX_SHUT) ? TCP_FIN_WAIT1 : TCP_ESTABLISHED;
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct pfd *p = rs_of(fd);
	struct arena_slot *as;
	int i, r, k = fd;
	if (!p || !val || !len)
		return R(getsockopt)(fd, level, name, val, len);
	as = cl_slot(p->slot);
	if (level == SOL_SOCKET && *len >= sizeof(int)) {
		switch (name) {
		case SO_ERROR:
			*(int *)val = vs_take_error(p->slot);
			*len = sizeof(int);
			return 0;
		case SO_ACCEPTCONN:
			*(int *)val = p->kind == FD_LISTEN;
			*len = sizeof(int);
			return 0;
		}
	}
	if (p->kind != FD_RS)
		return R(getsockopt)(fd, level, name, val, len);
	if ((i = so_find(level, name)) >= 0 && (atomic_load(&as->opts.set) & (1u << i)))
		return so_answer(&as->opts, i, val, len);
	/* the rings' sizes, unless the program set them (then the kernel's
	 * answer, twice what was asked, as Linux reports it) */
	if (level == SOL_SOCKET && *len >= sizeof(int) && (name == SO_RCVBUF || name == SO_SNDBUF) &&
	    !(p->flags & (name == SO_RCVBUF ? PFD_RCVBUF_SET : PFD_SNDBUF_SET))) {
		uint32_t v = name == SO_RCVBUF ? as->rx.size : as->tx.size;
		/* a ring that starts small where it is pinned (verbs) stands for
		 * the kernel's default buffer it grows to at the first need */
		if ((atomic_load(&as->flags) & SLOTF_SMALL) && v < ARENA_DEFAULT_RING)
			v = ARENA_DEFAULT_RING;
		*(int *)val = (int)v;
		*len = sizeof(int);
		return 0;
	}
	if ((p->flags & PFD_SELF) && (k = so_stand_in(p->family, 0)) < 0) {
		errno = ENOBUFS;
		return -1;
	}
	r = R(getsockopt)(k, level, name, val, len);
	if (r == 0 && level == IPPROTO_TCP && name == TCP_INFO && *len >= 1)
		((struct tcp_info *)val)->tcpi_state = (uint8_t)so_tcp_state(p->slot);
	/* the kernel says whether it has the option; the slot where it is */
	if (r == 0 && level == SOL_SOCKET && name == SO_PEEK_OFF && *len >= sizeof(int))
		*(int *)val = atomic_load(&as->peek_off);
	return r;
}

/* a descriptor whose kernel file stays nonblocking: a kernel listener (accept
 * waits on it and the hub at once), a readiness descriptor (shared with the
 * hub and the library's own reads) */
static int stays_nonblocking(const struct pfd *p)
{
	return p->kind == FD_LISTEN || (p->flags & PFD_SELF);
}

void so_async_get(int fd, struct so_async *a)
{
	int fl = R(fcntl)(fd, F_GETFL);
	a->on = fl >= 0 ? fl & O_ASYNC : 0;
	a->sig = R(fcntl)(fd, F_GETSIG);
	if (a->sig < 0)
		a->sig = 0;
	if (R(fcntl)(fd, F_GETOWN_EX, &a->own) < 0)
		a->own = (struct f_owner_ex){.type = F_OWNER_PID, .pid = 0};
}

void so_async_put(int fd, const struct so_async *a)
{
	int fl = R(fcntl)(fd, F_GETFL);
	R(fcntl)(fd, F_SETOWN_EX, &a->own);
	R(fcntl)(fd, F_SETSIG, a->sig);
	if (fl >= 0 && (fl & O_ASYNC) != a->on)
		R(fcntl)(fd, F_SETFL, (fl & ~O_ASYNC) | a->on);
}

/* a descriptor whose signal-driven I/O is rs_async's: a connection's or a listener's */
static int async_kind(const struct pfd *p)
{
	return p->kind == FD_RS || p->kind == FD_LISTEN;
}

/* Signal-driven I/O on a connection: the kernel signals for the readiness
 * descriptor (core/hub/ready.c), readable at each arrival, writable again
 * after a full ring, closed at a reset, as for a TCP socket.  So O_ASYNC
 * makes the connection's readiness descriptor first, and what the program
 * sets goes to fd (which reads it back) and to a readiness descriptor
 * beside it; one that takes fd's place gets fd's settings (ready.c). */
static int rs_async(int fd, struct pfd *p, int cmd, long arg)
{
	int r, pf;
	p->flags |= PFD_ASYNC;
	if (cmd == F_SETFL && (arg & O_ASYNC) && (pf = rd_fd(fd, p)) < 0) {
		errno = -pf;
		return -1;
	}
	r = R(fcntl)(fd, cmd, cmd == F_SETFL && stays_nonblocking(p) ? arg | O_NONBLOCK : arg);
	if (r < 0)
		return r;
	if ((pf = vs_poll_fd_cached(p->slot)) >= 0 && pf != fd) {
		struct so_async a;
		so_async_get(fd, &a);
		so_async_put(pf, &a);
	}
	return r;
}

static int rs_fcntl(int fd, struct pfd *p, int cmd, long arg)
{
	struct arena_slot *as = cl_slot(p->slot);
	int r, rs = async_kind(p);
	switch (cmd) {
	case F_GETFL:
		r = R(fcntl)(fd, F_GETFL);
		if (r >= 0 && stays_nonblocking(p))
			r = (r & ~O_NONBLOCK) | ((atomic_load(&as->flags) & SLOTF_NONBLOCK) ? O_NONBLOCK : 0);
		return r;
	case F_SETFL:
		if (rs && ((arg & O_ASYNC) || (p->flags & PFD_ASYNC)))
			r = rs_async(fd, p, cmd, arg);
		else
			r = R(fcntl)(fd, F_SETFL, stays_nonblocking(p) ? arg | O_NONBLOCK : arg);
		if (r == 0) {
			if (arg & O_NONBLOCK)
				atomic_fetch_or(&as->flags, SLOTF_NONBLOCK);
			else
				atomic_fetch_and(&as->flags, ~SLOTF_NONBLOCK);
		}
		return r;
	case F_SETOWN:
	case F_SETOWN_EX:
	case F_SETSIG:
		return rs ? rs_async(fd, p, cmd, arg) : R(fcntl)(fd, cmd, arg);
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
	if (!p || (cmd != F_GETFL && cmd != F_SETFL && cmd != F_SETOWN && cmd != F_SETOWN_EX && cmd != F_SETSIG))
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
	if (p && p->kind == FD_RS && (req == FIONREAD || req == SIOCOUTQ) && arg) {
		*(int *)arg = req == FIONREAD ? vs_nread(p->slot) : vs_nunsent(p->slot);
		return 0;
	}
	/* signal-driven I/O's ioctls on a connection or listener: as fcntl's (rs_async) */
	if (p && async_kind(p) && (req == FIOASYNC || req == FIOSETOWN || req == SIOCSPGRP) && arg) {
		int fl;
		if (req != FIOASYNC)
			return rs_async(fd, p, F_SETOWN, *(int *)arg);
		if ((fl = R(fcntl)(fd, F_GETFL)) < 0)
			return -1;
		fl = *(int *)arg ? fl | O_ASYNC : fl & ~O_ASYNC;
		return rs_async(fd, p, F_SETFL, fl);
	}
	if (p && req == FIONBIO && arg) {
		if (*(int *)arg)
			atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
		else
			atomic_fetch_and(&cl_slot(p->slot)->flags, ~SLOTF_NONBLOCK);
		if (stays_nonblocking(p))
			return 0;
	}
	return R(ioctl)(fd, req, arg);
}
