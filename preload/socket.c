/*
 * socket.c - socket, bind, listen, accept, shutdown and the socket's
 * names: where a kernel socket becomes (or stays) an rshare one.
 *
 * socket() marks every AF_INET/AF_INET6 stream socket FD_TCP; bind() is
 * the kernel's, and gives the port back when an rshare connection holds
 * it at the hub; listen() keeps the kernel listener and registers an
 * rshare one beside it (FD_LISTEN), so accept() takes from either: the
 * hub's accept queue first, then the kernel listener, waiting on both.
 * Listeners that systemd's socket activation hands the program become
 * rshare listeners the same way (sock_activated).
 * An accepted rshare connection gets a fresh kernel socket of the same
 * kind as its descriptor (FD_RS).
 */
#include "preload.h"

int socket(int domain, int type, int protocol)
{
	int fd = R(socket)(domain, type, protocol);
	struct pfd *p = pfd_get(fd);
	if (p) {
		int tcp = (domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
			  (protocol == 0 || protocol == IPPROTO_TCP);
		pfd_set(p, &(struct pfd){.kind = tcp ? FD_TCP : FD_NONE, .family = tcp ? (uint8_t)domain : 0});
	}
	return fd;
}

/* An rshare connection, made or under way: the kernel's socket is bound
 * already and past listening (EINVAL for bind and listen, as
 * inet_bind/inet_listen say), where the one behind the descriptor here is
 * a kernel socket that never connected and would take either. */
static int on_connection(struct pfd *p)
{
	if (!p || __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE) != FD_RS)
		return 0;
	errno = EINVAL;
	return 1;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	int reuse = 0;
	socklen_t rl = sizeof(reuse);
	union sockaddr_any a;
	int r;
	if (on_connection(p))
		return -1;
	r = R(bind)(fd, addr, len);
	if (r < 0 || !p || p->kind != FD_TCP || cl.attached <= 0 || !addr ||
	    len < sizeof(struct sockaddr_in))
		return r;
	/* an accepted rshare connection has no kernel socket on the port:
	 * ask the hub, as the kernel would refuse while one is open */
	if (R(getsockopt)(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, &rl) == 0 && reuse)
		return r;
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, len < sizeof(a) ? len : sizeof(a));
	if ((a.sa.sa_family == AF_INET && a.in.sin_port) || (a.sa.sa_family == AF_INET6 && a.in6.sin6_port)) {
		if (vs_port_in_use(&a)) {
			/* give the port back: a fresh socket of the same kind */
			int nfd = R(socket)(p->family, SOCK_STREAM, 0);
			if (nfd >= 0) {
				int fl = R(fcntl)(fd, F_GETFL), fdfl = R(fcntl)(fd, F_GETFD);
				R(dup3)(nfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
				R(close)(nfd);
				R(fcntl)(fd, F_SETFL, fl);
			}
			errno = EADDRINUSE;
			return -1;
		}
	}
	return r;
}

/* fd, a kernel listener now, gets an rshare listener beside it */
static void listen_rshare(int fd, struct pfd *p, int backlog)
{
	union sockaddr_any a;
	socklen_t al = sizeof(a);
	int fl;
	if (R(getsockname)(fd, &a.sa, &al) < 0)
		return;
	/* accept waits on the kernel listener and the hub at once: the kernel
	 * side must never block, the application's O_NONBLOCK is kept apart */
	fl = R(fcntl)(fd, F_GETFL);
	if (vs_listen(&a, backlog, p->rxsize, p->txsize, fd, &p->evfd, &p->slot, &p->gen) == 0) {
		__atomic_store_n(&p->kind, FD_LISTEN, __ATOMIC_RELEASE);
		if (fl & O_NONBLOCK)
			atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
		R(fcntl)(fd, F_SETFL, fl | O_NONBLOCK);
	}
}

int listen(int fd, int backlog)
{
	struct pfd *p = pfd_get(fd);
	if (on_connection(p))
		return -1;
	if (p && p->kind == FD_TCP && !cfg_use_rshare(CFG_LISTEN, fd, NULL, 0, &p->rxsize, &p->txsize))
		return R(listen)(fd, backlog);
	int ret = R(listen)(fd, backlog);
	if (ret == 0 && p && p->kind == FD_TCP)
		listen_rshare(fd, p, backlog);
	return ret;
}

int sock_tcp_family(int fd, int *listening)
{
	int v[4] = {-1, -1, -1, -1};
	socklen_t l = sizeof(int);
	if (R(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, &v[0], &l) < 0 || (v[0] != AF_INET && v[0] != AF_INET6) ||
	    R(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &v[1], &l) < 0 || v[1] != SOCK_STREAM ||
	    R(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &v[2], &l) < 0 || v[2] != IPPROTO_TCP)
		return 0;
	if (listening)
		*listening = R(getsockopt)(fd, SOL_SOCKET, SO_ACCEPTCONN, &v[3], &l) == 0 && v[3] == 1;
	return v[0];
}

/* systemd's socket activation (sd_listen_fds(3)): the TCP listeners it
 * made for this process (LISTEN_FDS of them from descriptor 3, LISTEN_PID
 * this pid) get rshare listeners beside them, as listen() would */
void sock_activated(void)
{
	const char *n = getenv("LISTEN_FDS"), *pid = getenv("LISTEN_PID");
	int k = n ? atoi(n) : 0;
	if (k <= 0 || !pid || atol(pid) != (long)getpid())
		return;
	for (int fd = 3; fd < 3 + k; fd++) {
		struct pfd *p = pfd_get(fd);
		int fam, lis = 0;
		if (!p || p->kind || !(fam = sock_tcp_family(fd, &lis)) || !lis)
			continue;
		pfd_set(p, &(struct pfd){.kind = FD_TCP, .family = (uint8_t)fam, .evfd = -1});
		if (cfg_use_rshare(CFG_LISTEN, fd, NULL, 0, &p->rxsize, &p->txsize))
			listen_rshare(fd, p, SOMAXCONN);
	}
}

/* The program's descriptor of an accepted connection: a kernel socket that
 * never connects, or, where PF (>= 0) came with the connection, that
 * readiness descriptor, the program's from the start (as ready.c makes it
 * at the first poll): no kernel socket made and closed, no request more.
 * PF came close-on-exec; it keeps that only where FLAGS asks for it. */
static int new_rs_fd(struct pfd *lp, uint32_t slot, uint32_t gen, int flags, int pf)
{
	int fd;
	struct pfd *p;
	if (pf >= 0 && (!pfd_get(pf) || (!(flags & SOCK_CLOEXEC) && R(fcntl)(pf, F_SETFD, 0) < 0) ||
			vs_poll_is(slot, pf) < 0)) {
		sys_close(pf); /* the hub keeps its copy: a poll asks for it again */
		pf = -1;
	}
	fd = pf >= 0 ? pf : R(socket)(lp->family, SOCK_STREAM | (flags & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0);
	p = pfd_get(fd);
	if (fd < 0 || !p) {
		int e = fd < 0 ? errno : EMFILE;
		if (fd >= 0)
			R(close)(fd);
		vs_unref(slot, gen);
		errno = e;
		return -1;
	}
	pfd_set(p, &(struct pfd){.kind = FD_RS, .family = lp->family, .slot = slot, .gen = gen, .evfd = -1,
				 .flags = pf >= 0 ? PFD_SELF : 0});
	if (flags & SOCK_NONBLOCK)
		atomic_fetch_or(&cl_slot(slot)->flags, SLOTF_NONBLOCK);
	return fd;
}

void sock_fill_addr(const union sockaddr_any *a, struct sockaddr *out, socklen_t *len)
{
	socklen_t n = a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
	if (!out || !len)
		return;
	memcpy(out, a, *len < n ? *len : n);
	*len = n;
}

/* The listener's SO_RCVTIMEO (the kernel listener holds it): 1 and its
 * deadline in end, or 0 when it has none */
static int accept_deadline(int fd, struct timespec *end)
{
	struct timeval tv = {0, 0};
	socklen_t l = sizeof(tv);
	if (R(getsockopt)(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) < 0 || (!tv.tv_sec && !tv.tv_usec))
		return 0;
	tmo_deadline(&(struct timespec){tv.tv_sec, tv.tv_usec * 1000}, end);
	return 1;
}

static void accept_leave(void *arg)
{
	(void)arg;
	vs_accept_leave();
}

/* rs_accept's end with connection ns (generation ng; nf: its readiness
 * descriptor, nonblocking accepts) from listener p.  The hub's wake-up
 * for it may have come after rs_accept's drain (a thread that polled the
 * listener asks as soon as it sees the connection, and the hub answers
 * that after its eventfd write): drained again, or an epoll set would see
 * an empty listener readable; then, more waiting, the wake-up stays
 * readable for pollers (acceptq counts a connection before its wake-up is
 * written). */
static int accept_took(int fd, struct pfd *p, struct arena_slot *ls, uint32_t ns, uint32_t ng, int nf, int flags,
		       struct sockaddr *addr, socklen_t *len)
{
	int nfd;
	lis_drain(p);
	if (atomic_load(&ls->acceptq)) {
		uint64_t one = 1;
		if (sys_write(p->evfd, &one, sizeof(one)) < 0) {
			/* saturated: readable anyway */
		}
	}
	nfd = new_rs_fd(p, ns, ng, flags, nf);
	if (nfd >= 0) {
		so_inherit(fd, p, ns);
		sock_fill_addr(&cl_slot(ns)->peer, addr, len);
	}
	return nfd;
}

static int rs_accept(int fd, struct pfd *p, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct arena_slot *ls = cl_slot(p->slot);
	struct timespec end;
	int tmo = -1, slept = 0; /* not looked at yet; not asleep yet */
	/* a process back in a blocking accept of a pool's listener leaves
	 * the connection whose wake-up went to another to it, as the
	 * kernel's queue of waiters hands it (core/proc/vsock_accept.c) */
	if (!(atomic_load(&ls->flags) & SLOTF_NONBLOCK))
		vs_accept_defer(p->slot);
	for (;;) {
		long ms = -1;
		uint32_t ns, ng, mark[2];
		struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = p->evfd, .events = POLLIN}};
		int r, nfd, nf = -1;
		uint32_t seq = atomic_load(&ls->wake_seq);
		lis_drain(p);
		/* a connection accepted nonblocking, or from a nonblocking
		 * listener (asyncio, Java's NIO: accept, then O_NONBLOCK), is
		 * one an event loop polls next */
		r = vs_accept(p->slot, p->gen, &ns, &ng,
			      (flags & SOCK_NONBLOCK) || (atomic_load(&ls->flags) & SLOTF_NONBLOCK) ? &nf : NULL);
		if (r == 0)
			return accept_took(fd, p, ls, ns, ng, nf, flags, addr, len);
		if (r != -EAGAIN && !cl_hub_dead()) {
			errno = -r;
			return -1;
		}
		nfd = R(accept4)(fd, addr, len, flags);
		if (nfd >= 0 || errno != EAGAIN)
			return nfd;
		if (atomic_load(&ls->flags) & SLOTF_NONBLOCK) {
			errno = EAGAIN;
			return -1;
		}
		/* SO_RCVTIMEO on the listener, as the kernel's accept: EAGAIN,
		 * and a signal ends the wait with EINTR, SA_RESTART or not */
		if (tmo < 0)
			tmo = accept_deadline(fd, &end);
		if (tmo && !(ms = tmo_ms_left(&end))) {
			errno = EAGAIN;
			return -1;
		}
		vs_sig_mark(mark);
		/* a thread back for its next connection polls first; one that
		 * a wake-up found too late (another took the connection) goes
		 * back to sleep */
		if (!slept) {
			int moved = vs_accept_spin(p->slot, p->gen, seq);
			/* a handler that ran meanwhile ends it as it ends the poll */
			if (vs_sig_since(mark, tmo)) {
				errno = EINTR;
				return -1;
			}
			if (moved)
				continue;
		}
		slept = 1;
		/* one thread of the process polls the listener, the others
		 * sleep until it hands them the lead (vsock_accept.c) */
		r = vs_accept_follow(p->slot, p->gen, ms);
		if (r == 1) {
			/* where other processes hold it, one of them woken a
			 * connection (core/proc/vsock_accept.c) */
			int wms = ms > INT_MAX ? INT_MAX : (int)ms;
			r = vs_accept_wait(p->slot, fd, p->evfd, wms);
			if (r == -ENOSYS)
				r = R(poll)(pf, 2, wms);
			else if (r < 0)
				errno = -r, r = -1;
		} else if (r == -EINTR) {
			r = -1, errno = EINTR;
		}
		if (r < 0 && errno == EINTR && (tmo || !vs_sig_restarts(mark)))
			return -1;
	}
}

/* rs_accept, and then the lead of the listener's waiters given on, if
 * this thread had it (core/proc/vsock_accept.c), also when the thread is
 * cancelled in it (accept is a cancellation point) */
static int rs_accept_led(int fd, struct pfd *p, struct sockaddr *addr, socklen_t *len, int flags)
{
	int nfd, e;
	pthread_cleanup_push(accept_leave, NULL);
	nfd = rs_accept(fd, p, addr, len, flags);
	e = errno;
	pthread_cleanup_pop(1);
	errno = e;
	return nfd;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct pfd *p = rs_of(fd);
	int nfd;
	if (!p || p->kind != FD_LISTEN) {
		nfd = R(accept4)(fd, addr, len, flags);
		if (nfd >= 0 && pfd_get(nfd))
			pfd_clear(nfd);
		return nfd;
	}
	return rs_accept_led(fd, p, addr, len, flags);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return accept4(fd, addr, len, 0);
}

int shutdown(int fd, int how)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(shutdown)(fd, how);
	if (p->kind == FD_LISTEN) {
		/* as the kernel: SHUT_RD or SHUT_RDWR closes a listener (its
		 * accept fails, EINVAL, and connections are refused), SHUT_WR
		 * does nothing to it */
		int r = R(shutdown)(fd, how);
		if (r == 0 && how != SHUT_WR)
			vs_listen_stop(p->slot, p->gen);
		return r;
	}
	return (int)ret_err(vs_shutdown(p->slot, p->gen, how));
}

int getsockname(int fd, struct sockaddr *a, socklen_t *len)
{
	struct pfd *p = rs_of(fd);
	if (!p || p->kind != FD_RS)
		return R(getsockname)(fd, a, len);
	if (!a || !len) {
		errno = EFAULT;
		return -1;
	}
	sock_fill_addr(&cl_slot(p->slot)->local, a, len);
	return 0;
}

int getpeername(int fd, struct sockaddr *a, socklen_t *len)
{
	struct pfd *p = rs_of(fd);
	int ts;
	if (!p || p->kind != FD_RS)
		return R(getpeername)(fd, a, len);
	if (!a || !len) {
		errno = EFAULT;
		return -1;
	}
	ts = so_tcp_state(p->slot);
	if (ts == TCP_CLOSE || ts == TCP_SYN_SENT) {
		errno = ENOTCONN;
		return -1;
	}
	sock_fill_addr(&cl_slot(p->slot)->peer, a, len);
	return 0;
}
