/*
 * preload.c - the interposition layer of librshare.so.
 *
 * Thin on purpose: it keeps a table from descriptor to rshare socket, and
 * for a descriptor that is not an rshare socket every call goes straight
 * to the next definition (libc) after one bounds check and one load.
 *
 * Every AF_INET/AF_INET6 stream socket starts as a real kernel socket:
 * bind() is the kernel's (address reuse, EADDRINUSE), listen() keeps a
 * kernel listener (plain TCP clients still reach a preloaded server) and
 * registers an rshare one with the hub, connect() asks the hub first and
 * falls back to the kernel when the other node has no rshare listener.
 * An rshare connection keeps its kernel socket as the descriptor the
 * application sees (fstat, getsockopt of options rshare does not answer).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "sys.h"

enum { FD_NONE = 0, FD_TCP, FD_RS, FD_LISTEN };

struct pfd {
	uint8_t kind;
	uint8_t family;
	uint8_t pending;         /* FD_RS: a nonblocking connect under way (to dst);
				    FD_TCP: 2, that connect given to kernel TCP */
	uint32_t slot, gen;
	uint32_t rxsize, txsize; /* SO_RCVBUF / SO_SNDBUF asked before connect or listen */
	int evfd;                /* listener: the hub's wake-up */
	union sockaddr_any dst;
};

static struct pfd *pfds;
static unsigned pfd_max;

/* real_NAME: the next definition of NAME (libc's); R(NAME) finds it at
 * first use too, as another library's constructor may call in before ours
 * has run. */
static void *next_sym(const char *n);
#define REAL(name)                                                                \
	static __typeof__(name) *real_##name;                                     \
	static inline __typeof__(name) *get_##name(void)                          \
	{                                                                         \
		if (__builtin_expect(!real_##name, 0))                            \
			real_##name = (__typeof__(name) *)next_sym(#name);        \
		return real_##name;                                               \
	}
#define R(name) (get_##name())
static void exec_adopt(void);
static void ep_forget(uint32_t slot, int pf, int gone);
REAL(socket);
REAL(listen);
REAL(accept);
REAL(accept4);
REAL(connect);
REAL(read);
REAL(write);
REAL(recv);
REAL(send);
REAL(recvfrom);
REAL(sendto);
REAL(recvmsg);
REAL(sendmsg);
REAL(readv);
REAL(writev);
REAL(close);
REAL(shutdown);
REAL(getsockname);
REAL(getpeername);
REAL(setsockopt);
REAL(getsockopt);
REAL(fcntl);
REAL(ioctl);
REAL(bind);
REAL(dup);
REAL(dup2);
REAL(dup3);
REAL(poll);
REAL(ppoll);
REAL(select);
REAL(pselect);
REAL(epoll_ctl);
REAL(epoll_wait);
REAL(epoll_pwait);
REAL(sendfile);
REAL(execve);
REAL(execvpe);
REAL(fexecve);

static void *next_sym(const char *n)
{
	return dlsym(RTLD_NEXT, n);
}

__attribute__((constructor)) static void preload_init(void)
{
	struct rlimit rl;
	unsigned max = 65536;
	void *m;
#define LOAD(name) real_##name = next_sym(#name)
	LOAD(socket); LOAD(listen); LOAD(accept); LOAD(accept4); LOAD(connect);
	LOAD(read); LOAD(write); LOAD(recv); LOAD(send); LOAD(recvfrom); LOAD(sendto);
	LOAD(recvmsg); LOAD(sendmsg); LOAD(readv); LOAD(writev); LOAD(close);
	LOAD(shutdown); LOAD(getsockname); LOAD(getpeername); LOAD(setsockopt);
	LOAD(getsockopt); LOAD(fcntl); LOAD(ioctl); LOAD(dup); LOAD(dup2); LOAD(dup3); LOAD(bind);
	LOAD(poll); LOAD(ppoll); LOAD(select); LOAD(pselect); LOAD(epoll_ctl); LOAD(sendfile);
	LOAD(epoll_wait); LOAD(epoll_pwait);
	LOAD(execve); LOAD(execvpe); LOAD(fexecve);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > max)
		max = rl.rlim_max > (1u << 20) ? (1u << 20) : (unsigned)rl.rlim_max;
	/* untouched pages of the table cost nothing */
	m = mmap(NULL, (size_t)max * sizeof(struct pfd), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m != MAP_FAILED) {
		pfds = m;
		pfd_max = max;
	}
	cl_init();
	vs_poll_forget = ep_forget;
	exec_adopt();
}

__attribute__((destructor)) static void preload_fini(void)
{
	/* a process that exits closes its sockets as the kernel does, once it
	 * is gone: its other threads may still use them until then */
	vs_exiting(1);
}

static inline struct pfd *pfd_get(int fd)
{
	return (unsigned)fd < pfd_max ? &pfds[fd] : NULL;
}

/* The rshare socket behind fd (or one being connected), or NULL: the
 * fast check, before the pending check of rs_of(). */
static inline struct pfd *rs_peek(int fd)
{
	struct pfd *p = pfd_get(fd);
	return p && __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE) >= FD_RS ? p : NULL;
}

/* The rshare socket behind fd, or NULL: the fast check on every call. */
static __attribute__((noinline)) int rs_settle(int fd, struct pfd *p);
static inline struct pfd *rs_of(int fd)
{
	struct pfd *p = pfd_get(fd);
	if (!p || __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE) < FD_RS)
		return NULL;
	/* a nonblocking connect given to kernel TCP: the kernel's from now */
	return __builtin_expect(p->pending, 0) && rs_settle(fd, p) ? NULL : p;
}

/* An entry changes hands when the kernel gives its number out again: the
 * thread that closed it and the one that got the number are ordered by
 * the kernel only, so kind is written last (release) and read first
 * (acquire), which orders them for the compiler and for ThreadSanitizer. */
static void pfd_set(struct pfd *p, const struct pfd *v)
{
	(void)__atomic_load_n(&p->kind, __ATOMIC_ACQUIRE);
	p->family = v->family;
	p->slot = v->slot;
	p->gen = v->gen;
	p->rxsize = v->rxsize;
	p->txsize = v->txsize;
	p->evfd = v->evfd;
	p->pending = v->pending;
	p->dst = v->dst;
	__atomic_store_n(&p->kind, v->kind, __ATOMIC_RELEASE);
}

static void pfd_clear(int fd)
{
	struct pfd *p = pfd_get(fd);
	if (p)
		pfd_set(p, &(struct pfd){0});
}

static ssize_t ret_err(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

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

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	int reuse = 0;
	socklen_t rl = sizeof(reuse);
	union sockaddr_any a;
	int r = R(bind)(fd, addr, len);
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

int listen(int fd, int backlog)
{
	struct pfd *p = pfd_get(fd);
	union sockaddr_any a;
	socklen_t al = sizeof(a);
	if (p && p->kind == FD_TCP && !cfg_use_rshare(CFG_LISTEN, fd, NULL, 0, &p->rxsize, &p->txsize))
		return R(listen)(fd, backlog);
	int ret = R(listen)(fd, backlog), fl;
	if (ret < 0 || !p || p->kind != FD_TCP)
		return ret;
	if (R(getsockname)(fd, &a.sa, &al) < 0)
		return ret;
	/* accept waits on the kernel listener and the hub at once: the kernel
	 * side must never block, the application's O_NONBLOCK is kept apart */
	fl = R(fcntl)(fd, F_GETFL);
	if (vs_listen(&a, backlog, p->rxsize, p->txsize, &p->evfd, &p->slot, &p->gen) == 0) {
		__atomic_store_n(&p->kind, FD_LISTEN, __ATOMIC_RELEASE);
		if (fl & O_NONBLOCK)
			atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
		R(fcntl)(fd, F_SETFL, fl | O_NONBLOCK);
	}
	return ret;
}

static int new_rs_fd(struct pfd *lp, uint32_t slot, uint32_t gen, int flags)
{
	int fd = R(socket)(lp->family, SOCK_STREAM | (flags & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0);
	struct pfd *p = pfd_get(fd);
	if (fd < 0 || !p) {
		int e = fd < 0 ? errno : EMFILE;
		if (fd >= 0)
			R(close)(fd);
		vs_unref(slot, gen);
		errno = e;
		return -1;
	}
	pfd_set(p, &(struct pfd){.kind = FD_RS, .family = lp->family, .slot = slot, .gen = gen, .evfd = -1});
	if (flags & SOCK_NONBLOCK)
		atomic_fetch_or(&cl_slot(slot)->flags, SLOTF_NONBLOCK);
	return fd;
}

static void fill_addr(const union sockaddr_any *a, struct sockaddr *out, socklen_t *len)
{
	socklen_t n = a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
	if (!out || !len)
		return;
	memcpy(out, a, *len < n ? *len : n);
	*len = n;
}

static int rs_accept(int fd, struct pfd *p, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct arena_slot *ls = cl_slot(p->slot);
	for (;;) {
		uint32_t ns, ng;
		uint64_t junk;
		struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = p->evfd, .events = POLLIN}};
		int r, nfd;
		while (sys_read(p->evfd, &junk, sizeof(junk)) > 0)
			;
		r = vs_accept(p->slot, p->gen, &ns, &ng);
		if (r == 0) {
			/* more waiting: the wake-up stays readable for pollers */
			if (atomic_load(&ls->acceptq)) {
				uint64_t one = 1;
				if (sys_write(p->evfd, &one, sizeof(one)) < 0) {
					/* saturated: readable anyway */
				}
			}
			nfd = new_rs_fd(p, ns, ng, flags);
			if (nfd >= 0)
				fill_addr(&cl_slot(ns)->peer, addr, len);
			return nfd;
		}
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
		r = R(poll)(pf, 2, -1);
		if (r < 0 && errno == EINTR && !vs_restartable())
			return -1;
	}
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
	return rs_accept(fd, p, addr, len, flags);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return accept4(fd, addr, len, 0);
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	union sockaddr_any dst, local;
	socklen_t ll = sizeof(local);
	int r;
	if (p && p->kind == FD_TCP &&
	    (p->pending || !cfg_use_rshare(CFG_CONNECT, fd, addr, len, &p->rxsize, &p->txsize)))
		return R(connect)(fd, addr, len);
	if (p && p->kind == FD_RS) {
		/* connect again: as the kernel answers it */
		uint32_t st;
		int e;
		if (!rs_of(fd))
			return R(connect)(fd, addr, len); /* now a kernel socket */
		st = atomic_load(&cl_slot(p->slot)->state);
		if (st == SLOT_CONNECTING) {
			errno = EALREADY;
			return -1;
		}
		e = st == SLOT_CLOSED ? vs_take_error(p->slot) : 0;
		errno = e ? e : EISCONN;
		return -1;
	}
	if (!p || p->kind != FD_TCP || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)))
		return R(connect)(fd, addr, len);
	memset(&dst, 0, sizeof(dst));
	memcpy(&dst, addr, addr->sa_family == AF_INET ? sizeof(dst.in) : sizeof(dst.in6));
	/* reserve a local port in the kernel, as connect would */
	if (R(getsockname)(fd, &local.sa, &ll) < 0)
		return R(connect)(fd, addr, len);
	if ((local.sa.sa_family == AF_INET && !local.in.sin_port) ||
	    (local.sa.sa_family == AF_INET6 && !local.in6.sin6_port)) {
		union sockaddr_any any;
		memset(&any, 0, sizeof(any));
		any.sa.sa_family = local.sa.sa_family;
		if (bind(fd, &any.sa, local.sa.sa_family == AF_INET ? sizeof(any.in) : sizeof(any.in6)) < 0)
			return R(connect)(fd, addr, len);
		ll = sizeof(local);
		R(getsockname)(fd, &local.sa, &ll);
	}
	if (R(fcntl)(fd, F_GETFL) & O_NONBLOCK) {
		/* nonblocking: the CONNECT goes, the answer comes later */
		uint32_t slot, gen;
		r = vs_connect_start(&dst, &local, p->rxsize, p->txsize, &slot, &gen);
		if (r == 1)
			return R(connect)(fd, addr, len);
		if (r < 0) {
			errno = -r;
			return -1;
		}
		pfd_set(p, &(struct pfd){.kind = FD_RS, .family = p->family, .pending = 1, .slot = slot,
					 .gen = gen, .evfd = -1, .dst = dst});
		atomic_fetch_or(&cl_slot(slot)->flags, SLOTF_NONBLOCK);
		errno = EINPROGRESS;
		return -1;
	}
	r = vs_connect(&dst, &local, p->rxsize, p->txsize, &p->slot, &p->gen);
	if (r == 1)
		return R(connect)(fd, addr, len);
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

/* ---- data ---- */

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(sendmsg)(fd, m, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_send(p->slot, m->msg_iov, (int)m->msg_iovlen, flags));
}

/* send and recv on an rshare socket, out of line: what other descriptors
 * pay is rs_of() and a tail call to libc */
/* before libc's read and write are known (another library's constructor) */
static __attribute__((noinline)) ssize_t plain_write(int fd, const void *buf, size_t len)
{
	return R(write)(fd, buf, len);
}

static __attribute__((noinline)) ssize_t plain_read(int fd, void *buf, size_t len)
{
	return R(read)(fd, buf, len);
}

static __attribute__((noinline)) ssize_t rs_send(int fd, struct pfd *p, const void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
	if (!p || (p->pending && rs_settle(fd, p)))
		return R(send)(fd, buf, len, flags); /* not rshare, or kernel TCP from now */
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_send(p->slot, &v, 1, flags));
}

static __attribute__((noinline)) ssize_t rs_recv(int fd, struct pfd *p, void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	if (!p || (p->pending && rs_settle(fd, p)))
		return R(recv)(fd, buf, len, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_recv(p->slot, &v, 1, flags));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_send, 1))
		return real_send(fd, buf, len, flags); /* a tail call, no frame */
	return rs_send(fd, p, buf, len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a, socklen_t al)
{
	if (!rs_of(fd))
		return R(sendto)(fd, buf, len, flags, a, al);
	(void)a; /* as Linux TCP: a connected stream socket ignores the address */
	(void)al;
	return send(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_write, 1))
		return real_write(fd, buf, len); /* a tail call, no frame */
	if (!p)
		return plain_write(fd, buf, len);
	return rs_send(fd, p, buf, len, 0);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(writev)(fd, iov, n);
	if (p->kind != FD_RS || n < 0 || n > IOV_MAX) {
		errno = p->kind != FD_RS ? ENOTCONN : EINVAL;
		return -1;
	}
	return ret_err(vs_send(p->slot, iov, n, 0));
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct pfd *p = rs_of(fd);
	ssize_t r;
	if (!p)
		return R(recvmsg)(fd, m, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	r = vs_recv(p->slot, m->msg_iov, (int)m->msg_iovlen, flags);
	if (r >= 0) {
		if (m->msg_name)
			fill_addr(&cl_slot(p->slot)->peer, m->msg_name, &m->msg_namelen);
		m->msg_controllen = 0;
		m->msg_flags = 0;
	}
	return ret_err(r);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_recv, 1))
		return real_recv(fd, buf, len, flags); /* a tail call, no frame */
	return rs_recv(fd, p, buf, len, flags);
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *a, socklen_t *al)
{
	struct pfd *p = rs_of(fd);
	ssize_t r;
	if (!p)
		return R(recvfrom)(fd, buf, len, flags, a, al);
	r = recv(fd, buf, len, flags);
	if (r >= 0 && a && al)
		fill_addr(&cl_slot(p->slot)->peer, a, al);
	return r;
}

ssize_t read(int fd, void *buf, size_t len)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_read, 1))
		return real_read(fd, buf, len); /* a tail call, no frame */
	if (!p)
		return plain_read(fd, buf, len);
	return rs_recv(fd, p, buf, len, 0);
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(readv)(fd, iov, n);
	if (p->kind != FD_RS || n < 0 || n > IOV_MAX) {
		errno = p->kind != FD_RS ? ENOTCONN : EINVAL;
		return -1;
	}
	return ret_err(vs_recv(p->slot, iov, n, 0));
}

/* _FORTIFY_SOURCE builds call these instead */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	(void)buflen;
	return read(fd, buf, len);
}
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	(void)buflen;
	return recv(fd, buf, len, flags);
}
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *a,
		       socklen_t *al);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *a,
		       socklen_t *al)
{
	(void)buflen;
	return recvfrom(fd, buf, len, flags, a, al);
}

/* ---- the rest ---- */

/* fd stops naming what it named: drop this process's reference to an
 * rshare socket behind it (the last one releases it at the hub). */
static void pfd_forget(int fd)
{
	struct pfd *p = rs_of(fd);
	if (p) {
		uint32_t slot = p->slot, gen = p->gen;
		int evfd = p->kind == FD_LISTEN ? p->evfd : -1, abort = 0;
		struct linger l;
		socklen_t ll = sizeof(l);
		/* SO_LINGER on with a zero time: close resets, as on kernel TCP */
		if (p->kind == FD_RS && R(getsockopt)(fd, SOL_SOCKET, SO_LINGER, &l, &ll) == 0)
			abort = l.l_onoff && !l.l_linger;
		pfd_clear(fd);
		if ((abort ? vs_unref_abort(slot, gen) : vs_unref(slot, gen)) != 0 && evfd >= 0)
			sys_close(evfd);
	} else {
		struct pfd *q = pfd_get(fd);
		if (q && q->kind)
			pfd_clear(fd);
	}
}

int close(int fd)
{
	pfd_forget(fd);
	return R(close)(fd);
}

/* newfd now names what oldfd names. */
static int dup_done(int oldfd, int newfd)
{
	struct pfd *o = pfd_get(oldfd), *n = pfd_get(newfd);
	if (newfd < 0 || !n)
		return newfd;
	pfd_set(n, o ? o : &(struct pfd){0});
	if (n->kind >= FD_RS)
		vs_ref(n->slot);
	return newfd;
}

int dup(int fd)
{
	return dup_done(fd, R(dup)(fd));
}

int dup2(int oldfd, int newfd)
{
	int r;
	if (oldfd == newfd)
		return R(dup2)(oldfd, newfd);
	r = R(dup2)(oldfd, newfd);
	if (r >= 0) {
		pfd_forget(newfd);
		dup_done(oldfd, r);
	}
	return r;
}

int dup3(int oldfd, int newfd, int flags)
{
	int r = R(dup3)(oldfd, newfd, flags);
	if (r >= 0) {
		pfd_forget(newfd);
		dup_done(oldfd, r);
	}
	return r;
}

int shutdown(int fd, int how)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(shutdown)(fd, how);
	if (p->kind == FD_LISTEN)
		return R(shutdown)(fd, how);
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
	fill_addr(&cl_slot(p->slot)->local, a, len);
	return 0;
}

int getpeername(int fd, struct sockaddr *a, socklen_t *len)
{
	struct pfd *p = rs_of(fd);
	if (!p || p->kind != FD_RS)
		return R(getpeername)(fd, a, len);
	if (!a || !len) {
		errno = EFAULT;
		return -1;
	}
	if (atomic_load(&cl_slot(p->slot)->state) != SLOT_ESTABLISHED) {
		errno = ENOTCONN;
		return -1;
	}
	fill_addr(&cl_slot(p->slot)->peer, a, len);
	return 0;
}

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
			if (p->kind == FD_RS) {
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
		return dup_done(fd, R(fcntl)(fd, cmd, arg));
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

/* ---- readiness: poll, select, epoll (core/hub_poll.c tells how) ----
 *
 * An rshare connection is waited on through its readiness descriptor,
 * put in place of the application's descriptor; a listener through the
 * kernel listener and the hub's wake-up side by side.  poll and select
 * check what the descriptors report against the socket's true state, so
 * they never report more than is true; epoll_wait is the kernel's own. */

/* end: now (CLOCK_MONOTONIC) plus t */
static void deadline(const struct timespec *t, struct timespec *end)
{
	clock_gettime(CLOCK_MONOTONIC, end);
	end->tv_sec += t->tv_sec;
	end->tv_nsec += t->tv_nsec;
	if (end->tv_nsec >= 1000000000) {
		end->tv_sec++;
		end->tv_nsec -= 1000000000;
	}
}

static long ms_left(const struct timespec *end)
{
	struct timespec now;
	long ms;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (end->tv_sec - now.tv_sec) * 1000 + (end->tv_nsec - now.tv_nsec + 999999) / 1000000;
	return ms < 0 ? 0 : ms;
}

static int rs_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	struct pollfd stack[64], *k = stack;
	struct timespec end = {0, 0}, t;
	nfds_t nl = 0, nk, i;
	int r, ready, redo;
	for (i = 0; i < n; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		if (p && p->kind == FD_LISTEN)
			nl++;
	}
	nk = n + nl;
	if (nk > 64 && !(k = malloc(nk * sizeof(*k)))) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0, nl = n; i < n; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		k[i] = fds[i];
		k[i].revents = 0;
		if (!p)
			continue;
		if (p->kind == FD_LISTEN) {
			k[nl++] = (struct pollfd){.fd = p->evfd, .events = POLLIN};
		} else {
			int pf = vs_poll_fd(p->slot, p->gen);
			k[i].fd = pf >= 0 ? pf : -1; /* without one, the true state alone */
		}
	}
	if (tmo) {
		deadline(tmo, &end);
	}
	for (;;) {
		/* what is true already needs no waiting */
		int now = 0;
		for (i = 0; i < n && !now; i++) {
			struct pfd *p = rs_of(fds[i].fd);
			if (!p)
				continue;
			if (p->kind == FD_LISTEN)
				now = (fds[i].events & POLLIN) && atomic_load(&cl_slot(p->slot)->acceptq);
			else
				now = (vs_poll_mask(p->slot) & (fds[i].events | POLLERR | POLLHUP)) != 0;
		}
		if (now) {
			t = (struct timespec){0, 0};
		} else if (tmo) {
			long ms = ms_left(&end);
			t.tv_sec = ms / 1000;
			t.tv_nsec = (ms % 1000) * 1000000;
		}
		r = R(ppoll)(k, nk, now || tmo ? &t : NULL, mask);
		if (r < 0)
			break;
		ready = 0;
		redo = 0;
		for (i = 0; i < n; i++) {
			struct pfd *p = rs_of(fds[i].fd);
			short ev = fds[i].events;
			fds[i].revents = k[i].revents;
			if (!p && k[i].fd != fds[i].fd && fds[i].fd >= 0) {
				/* a nonblocking connect given to kernel TCP meanwhile:
				 * from now on the socket itself is polled */
				k[i].fd = fds[i].fd;
				fds[i].revents = 0;
				redo = 1;
				continue;
			}
			if (p && p->kind == FD_RS) {
				unsigned m = vs_poll_mask(p->slot);
				if (k[i].revents & ~m & (POLLIN | POLLOUT))
					vs_poll_settle(p->slot, (unsigned)k[i].revents);
				fds[i].revents = (short)(m & ((unsigned)ev | POLLERR | POLLHUP));
			}
			ready += fds[i].revents != 0;
		}
		nl = n;
		for (i = 0; i < n; i++) {
			struct pfd *p = rs_of(fds[i].fd);
			if (!p || p->kind != FD_LISTEN)
				continue;
			if (k[nl].revents & POLLIN) {
				uint64_t junk;
				if (!atomic_load(&cl_slot(p->slot)->acceptq))
					while (sys_read(p->evfd, &junk, sizeof(junk)) > 0)
						;
			}
			nl++;
			if ((fds[i].events & POLLIN) && atomic_load(&cl_slot(p->slot)->acceptq)) {
				ready += fds[i].revents == 0;
				fds[i].revents |= POLLIN;
			}
		}
		r = ready;
		if (redo && !ready) {
			/* ask the kernel about the converted sockets at once */
			r = R(ppoll)(k, nk, &(struct timespec){0, 0}, mask);
			if (r < 0)
				break;
			for (i = 0; i < n; i++)
				if (!rs_of(fds[i].fd)) {
					fds[i].revents = k[i].revents;
					ready += fds[i].revents != 0;
				}
			r = ready;
		}
		if (ready || (tmo && ms_left(&end) == 0))
			break;
	}
	if (k != stack)
		free(k);
	return r;
}

static int any_rs(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (rs_of(fds[i].fd))
			return 1;
	return 0;
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	if (!any_rs(fds, n))
		return R(ppoll)(fds, n, tmo, mask);
	return rs_ppoll(fds, n, tmo, mask);
}

int poll(struct pollfd *fds, nfds_t n, int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	if (!any_rs(fds, n))
		return R(poll)(fds, n, ms);
	return rs_ppoll(fds, n, ms < 0 ? NULL : &t, NULL);
}

int __poll_chk(struct pollfd *fds, nfds_t n, int ms, size_t len);
int __poll_chk(struct pollfd *fds, nfds_t n, int ms, size_t len)
{
	(void)len;
	return poll(fds, n, ms);
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask, size_t len);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask, size_t len)
{
	(void)len;
	return ppoll(fds, n, tmo, mask);
}

/* select and pselect through ppoll, when an rshare socket is in a set */
static int rs_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timespec *tmo,
		     const sigset_t *mask)
{
	struct pollfd stack[64], *pf = stack;
	int n = 0, r, cnt = 0;
	for (int fd = 0; fd < nfds; fd++)
		n += (rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex));
	if (n > 64 && !(pf = malloc((size_t)n * sizeof(*pf)))) {
		errno = ENOMEM;
		return -1;
	}
	n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) | (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
		if (ev)
			pf[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	r = rs_ppoll(pf, (nfds_t)n, tmo, mask);
	if (r >= 0) {
		for (int i = 0; i < n; i++)
			if (pf[i].revents & POLLNVAL) {
				errno = EBADF;
				r = -1;
				goto out;
			}
		for (int i = 0; i < n; i++) {
			int fd = pf[i].fd;
			short re = pf[i].revents;
			if (rd && FD_ISSET(fd, rd) && !(re & (POLLIN | POLLHUP | POLLERR)))
				FD_CLR(fd, rd);
			if (wr && FD_ISSET(fd, wr) && !(re & (POLLOUT | POLLERR)))
				FD_CLR(fd, wr);
			if (ex && FD_ISSET(fd, ex) && !(re & POLLPRI))
				FD_CLR(fd, ex);
			cnt += (rd && FD_ISSET(fd, rd)) + (wr && FD_ISSET(fd, wr)) + (ex && FD_ISSET(fd, ex));
		}
		r = cnt;
	}
out:
	if (pf != stack)
		free(pf);
	return r;
}

static int sets_have_rs(int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	if (nfds > FD_SETSIZE)
		return 0;
	for (int fd = 0; fd < nfds; fd++)
		if (((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex))) &&
		    rs_of(fd))
			return 1;
	return 0;
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct timespec t, end, now;
	int r;
	if (!sets_have_rs(nfds, rd, wr, ex))
		return R(select)(nfds, rd, wr, ex, tv);
	if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0)) {
		errno = EINVAL;
		return -1;
	}
	if (tv) {
		t.tv_sec = tv->tv_sec + tv->tv_usec / 1000000;
		t.tv_nsec = (tv->tv_usec % 1000000) * 1000;
		deadline(&t, &end);
	}
	r = rs_select(nfds, rd, wr, ex, tv ? &t : NULL, NULL);
	if (tv) {
		/* as Linux: the time not slept */
		long long left;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (end.tv_sec - now.tv_sec) * 1000000LL + (end.tv_nsec - now.tv_nsec) / 1000;
		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000000;
		tv->tv_usec = left % 1000000;
	}
	return r;
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo, const sigset_t *mask)
{
	struct timespec t;
	if (!sets_have_rs(nfds, rd, wr, ex))
		return R(pselect)(nfds, rd, wr, ex, tmo, mask);
	if (tmo)
		t = *tmo;
	return rs_select(nfds, rd, wr, ex, tmo ? &t : NULL, mask);
}

/* epoll: an rshare connection is registered as its readiness descriptor
 * under a tag of ours (the record's index, above a per-process magic), and
 * epoll_wait checks each tagged event against the socket's true state
 * before it hands it on with the program's own data: like poll, it never
 * reports more than is true (a byte of the hub's can land just after the
 * program read the data it announced, and some programs count a read that
 * finds nothing as an error).  A record lives until the program deletes
 * it or this process closes its last descriptor of the socket; when no
 * process holds the socket any more its registrations are deleted too, as
 * the kernel forgets a closed socket.  Events of the program's other
 * descriptors pass untouched. */
struct ep_rec {
	int epfd, pf;
	uint32_t slot, gen, events, used;
	uint32_t rgen;              /* bumped at each reuse: in the tag */
	uint64_t data;
	int next;                   /* next record of the slot (or free) + 1, 0: none */
};
static struct ep_rec *ep_recs;
static int ep_n, ep_cap, ep_free, ep_live; /* ep_free: first free record + 1 */
static int ep_head[ARENA_MAX_SLOTS];    /* first record of a slot + 1 */
static uint64_t ep_magic;
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;

#define EP_IDX_BITS 20
static uint64_t ep_tag(int i)
{
	return ep_magic | (uint64_t)(ep_recs[i].rgen & 0xfff) << EP_IDX_BITS | (uint32_t)i;
}

/* the record for (epfd, pf), or -1; under ep_lock */
static int ep_find(int epfd, int pf, uint32_t slot)
{
	for (int i = ep_head[slot] - 1; i >= 0; i = ep_recs[i].next - 1)
		if (ep_recs[i].epfd == epfd && ep_recs[i].pf == pf)
			return i;
	return -1;
}

static int ep_new(void)
{
	int i;
	if (ep_free) {
		i = ep_free - 1;
		ep_free = ep_recs[i].next;
		return i;
	}
	if (ep_n == 1 << EP_IDX_BITS)
		return -1;
	if (ep_n == ep_cap) {
		int c = ep_cap ? ep_cap * 2 : 64;
		struct ep_rec *m = realloc(ep_recs, (size_t)c * sizeof(*m));
		if (!m)
			return -1;
		ep_recs = m;
		ep_cap = c;
	}
	ep_recs[ep_n].rgen = 0;
	return ep_n++;
}

static void ep_unlink(int i)
{
	struct ep_rec *r = &ep_recs[i];
	for (int *pp = &ep_head[r->slot]; *pp; pp = &ep_recs[*pp - 1].next)
		if (*pp - 1 == i) {
			*pp = r->next;
			break;
		}
	r->used = 0;
	r->rgen++;
	r->next = ep_free;
	ep_free = i + 1;
	__atomic_store_n(&ep_live, ep_live - 1, __ATOMIC_RELAXED);
}

static void ep_forget(uint32_t slot, int pf, int gone)
{
	pthread_mutex_lock(&ep_lock);
	while (ep_head[slot]) {
		int i = ep_head[slot] - 1;
		if (gone && ep_recs[i].pf == pf)
			R(epoll_ctl)(ep_recs[i].epfd, EPOLL_CTL_DEL, pf, NULL);
		ep_unlink(i);
	}
	pthread_mutex_unlock(&ep_lock);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct pfd *p = rs_of(fd);
	struct epoll_event e2;
	int r, pf, i;
	if (!p)
		return R(epoll_ctl)(epfd, op, fd, ev);
	if (p->kind == FD_LISTEN) {
		/* both the kernel listener and the hub's wake-up, same data */
		r = R(epoll_ctl)(epfd, op, fd, ev);
		if (r < 0)
			return r;
		if (ev) {
			e2 = *ev;
			e2.events &= ~(uint32_t)(EPOLLOUT | EPOLLPRI);
		}
		if (R(epoll_ctl)(epfd, op, p->evfd, ev ? &e2 : NULL) < 0 && op == EPOLL_CTL_ADD) {
			int e = errno;
			R(epoll_ctl)(epfd, EPOLL_CTL_DEL, fd, NULL);
			errno = e;
			return -1;
		}
		return 0;
	}
	pf = vs_poll_fd(p->slot, p->gen);
	if (pf < 0) {
		errno = -pf == EBADF ? EPERM : -pf;
		return -1;
	}
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev) {
		errno = EFAULT;
		return -1;
	}
	pthread_mutex_lock(&ep_lock);
	while (!ep_magic) {
		uint32_t m = 0;
		if (getrandom(&m, sizeof(m), 0) == sizeof(m))
			ep_magic = (uint64_t)(m | 0x80000000u) << 32;
	}
	i = ep_find(epfd, pf, p->slot);
	switch (op) {
	case EPOLL_CTL_ADD:
		if (i >= 0) {
			pthread_mutex_unlock(&ep_lock);
			errno = EEXIST;
			return -1;
		}
		if ((i = ep_new()) < 0) {
			pthread_mutex_unlock(&ep_lock);
			errno = ENOMEM;
			return -1;
		}
		e2 = (struct epoll_event){.events = ev->events, .data.u64 = ep_tag(i)};
		r = R(epoll_ctl)(epfd, op, pf, &e2);
		if (r < 0) {
			int e = errno;
			ep_recs[i].next = ep_free;
			ep_recs[i].used = 0;
			ep_recs[i].rgen++;
			ep_free = i + 1;
			errno = e;
			break;
		}
		ep_recs[i] = (struct ep_rec){.epfd = epfd, .pf = pf, .slot = p->slot, .gen = p->gen,
					     .events = ev->events, .used = 1, .data = ev->data.u64,
					     .next = ep_head[p->slot], .rgen = ep_recs[i].rgen};
		ep_head[p->slot] = i + 1;
		__atomic_store_n(&ep_live, ep_live + 1, __ATOMIC_RELAXED);
		break;
	case EPOLL_CTL_MOD:
		if (i < 0) {
			/* registered before this process knew of it (an exec): as is */
			r = R(epoll_ctl)(epfd, op, pf, ev);
			break;
		}
		e2 = (struct epoll_event){.events = ev->events, .data.u64 = ep_tag(i)};
		r = R(epoll_ctl)(epfd, op, pf, &e2);
		if (r == 0) {
			ep_recs[i].events = ev->events;
			ep_recs[i].data = ev->data.u64;
		}
		break;
	case EPOLL_CTL_DEL:
		r = R(epoll_ctl)(epfd, op, pf, ev);
		if (r == 0 && i >= 0)
			ep_unlink(i);
		break;
	default:
		errno = EINVAL;
		r = -1;
	}
	pthread_mutex_unlock(&ep_lock);
	return r;
}

/* Our events into the program's: checked, its data put back; what is not
 * true is dropped (a one-shot registration armed again). */
static int ep_filter(int epfd, struct epoll_event *ev, int n)
{
	int out = 0;
	pthread_mutex_lock(&ep_lock);
	for (int k = 0; k < n; k++) {
		uint64_t d = ev[k].data.u64;
		struct ep_rec *r;
		unsigned m;
		uint32_t idx = (uint32_t)d & ((1u << EP_IDX_BITS) - 1);
		if ((d & 0xffffffff00000000ull) != ep_magic || idx >= (uint32_t)ep_n) {
			ev[out++] = ev[k];
			continue;
		}
		r = &ep_recs[idx];
		if (!r->used || d != ep_tag((int)idx) || cl_slot(r->slot)->gen != r->gen)
			continue; /* a socket this process let go of */
		m = vs_poll_mask(r->slot);
		if (ev[k].events & ~m & (EPOLLIN | EPOLLOUT))
			vs_poll_settle(r->slot, ev[k].events);
		m &= r->events | EPOLLERR | EPOLLHUP;
		if (!m) {
			if (r->events & EPOLLONESHOT) {
				struct epoll_event e2 = {.events = r->events, .data.u64 = d};
				R(epoll_ctl)(epfd, EPOLL_CTL_MOD, r->pf, &e2);
			}
			continue;
		}
		ev[out].events = m;
		ev[out++].data.u64 = r->data;
	}
	pthread_mutex_unlock(&ep_lock);
	return out;
}

static int ep_wait(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
		   const sigset_t *mask)
{
	struct timespec end = {0, 0};
	if (tmo) {
		deadline(tmo, &end);
	}
	for (;;) {
		long ms = tmo ? ms_left(&end) : -1;
		int n = R(epoll_pwait)(epfd, ev, max, ms > INT_MAX ? INT_MAX : (int)ms, mask);
		if (n <= 0)
			return n;
		n = ep_filter(epfd, ev, n);
		if (n || (tmo && ms_left(&end) == 0))
			return n;
	}
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	if (!__atomic_load_n(&ep_live, __ATOMIC_RELAXED) || max <= 0)
		return R(epoll_wait)(epfd, ev, max, ms);
	return ep_wait(epfd, ev, max, ms < 0 ? NULL : &t, NULL);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int ms, const sigset_t *mask)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	if (!__atomic_load_n(&ep_live, __ATOMIC_RELAXED) || max <= 0)
		return R(epoll_pwait)(epfd, ev, max, ms, mask);
	return ep_wait(epfd, ev, max, ms < 0 ? NULL : &t, mask);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
		 const sigset_t *mask)
{
	if (!__atomic_load_n(&ep_live, __ATOMIC_RELAXED) || max <= 0 || (tmo && (tmo->tv_sec < 0 || tmo->tv_nsec < 0 || tmo->tv_nsec >= 1000000000)))
		return (int)syscall(SYS_epoll_pwait2, epfd, ev, max, tmo, mask, 8);
	return ep_wait(epfd, ev, max, tmo, mask);
}

/* A nonblocking connect that went on rshare: once answered it is an
 * rshare connection (or refused); given to kernel TCP, the descriptor
 * becomes a kernel socket: the kernel connect starts now, and the epoll
 * sets that waited on the readiness descriptor wait on the socket instead.
 * 1 when it became a kernel socket. */
static int rs_settle(int fd, struct pfd *p)
{
	uint32_t slot = p->slot, gen = p->gen, st = atomic_load(&cl_slot(slot)->state);
	union sockaddr_any dst = p->dst;
	int pf;
	if (st == SLOT_CONNECTING)
		return 0;
	if (st != SLOT_FALLBACK) {
		p->pending = 0;
		return 0;
	}
	pthread_mutex_lock(&ep_lock);
	if (!p->pending || p->slot != slot) {
		pthread_mutex_unlock(&ep_lock); /* another thread did it */
		return p->kind == FD_TCP;
	}
	pf = vs_poll_fd_cached(slot);
	while (ep_head[slot]) {
		int i = ep_head[slot] - 1;
		struct epoll_event e = {.events = ep_recs[i].events, .data.u64 = ep_recs[i].data};
		if (pf >= 0)
			R(epoll_ctl)(ep_recs[i].epfd, EPOLL_CTL_DEL, pf, NULL);
		R(epoll_ctl)(ep_recs[i].epfd, EPOLL_CTL_ADD, fd, &e);
		ep_unlink(i);
	}
	/* pending 2: its kernel connect is under way, later connects are the kernel's */
	pfd_set(p, &(struct pfd){.kind = FD_TCP, .family = p->family, .pending = 2});
	pthread_mutex_unlock(&ep_lock);
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

ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct pfd *p = rs_of(out);
	static __thread char *buf;
	size_t done = 0;
	ssize_t ret = 0;
	if (!p)
		return R(sendfile)(out, in, off, count);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	if (!buf && !(buf = malloc(1 << 16))) {
		errno = ENOMEM;
		return -1;
	}
	while (done < count) {
		size_t want = count - done < (1 << 16) ? count - done : (1 << 16);
		ssize_t r = off ? pread(in, buf, want, *off + (off_t)done) : sys_read(in, buf, want);
		struct iovec v;
		ssize_t w;
		if (r <= 0) {
			if (r < 0 && !done)
				ret = -1;
			break;
		}
		v = (struct iovec){.iov_base = buf, .iov_len = (size_t)r};
		w = vs_send(p->slot, &v, 1, 0);
		if (w < 0) {
			if (!off)
				lseek(in, -r, SEEK_CUR);
			if (!done) {
				errno = (int)-w;
				ret = -1;
			}
			break;
		}
		done += (size_t)w;
		if (w < r) {
			if (!off)
				lseek(in, -(r - w), SEEK_CUR); /* what was read but not sent */
			break;
		}
	}
	if (ret < 0)
		return -1;
	if (off)
		*off += (off_t)done;
	return (ssize_t)done;
}

ssize_t sendfile64(int out, int in, off_t *off, size_t count);
ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}

/* ---- exec ----
 * An rshare socket without close-on-exec survives exec into a program
 * that is preloaded too: the hub is told first (cl_exec_begin), and the
 * new program finds its sockets in RSHARE_EXEC (preload_init).  A program
 * that is not preloaded sees plain kernel sockets that never connected:
 * every call on them fails (ENOTCONN), nothing passes unseen. */

extern char **environ;

struct exec_undo {
	int ctl;
	char **env;
	int nev, ev[64];
};

static char **exec_prepare(char *const envp[], struct exec_undo *u)
{
	struct rlimit rl;
	unsigned max = pfd_max, nkeep = 0, ndrop = 0, n = 0;
	static uint32_t dslot[ARENA_MAX_SLOTS], dgen[ARENA_MAX_SLOTS];
	static uint8_t keep[ARENA_MAX_SLOTS];
	size_t len, cap;
	char *s;
	u->ctl = -1;
	u->env = NULL;
	u->nev = 0;
	if (cl.attached <= 0 || !pfds)
		return NULL;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < max)
		max = (unsigned)rl.rlim_cur;
	memset(keep, 0, sizeof(keep));
	for (unsigned fd = 0; fd < max; fd++)
		if (pfds[fd].kind >= FD_RS) {
			n++;
			if (!(R(fcntl)((int)fd, F_GETFD) & FD_CLOEXEC))
				keep[pfds[fd].slot] = 1, nkeep++;
		}
	if (!n)
		return NULL;
	/* every socket of this process that no surviving descriptor names */
	for (uint32_t sl = 0; sl < ARENA_MAX_SLOTS; sl++) {
		struct arena_slot *as = cl_slot(sl);
		if (!keep[sl] && vs_held(sl)) {
			dslot[ndrop] = sl;
			dgen[ndrop++] = as->gen;
		}
	}
	if (!nkeep || (u->ctl = cl_exec_begin(dslot, dgen, (int)ndrop)) < 0)
		return NULL;
	vs_exiting(1); /* close-on-exec sockets close as close() would */
	cap = 64 + (size_t)nkeep * 64;
	s = malloc(cap);
	if (!s)
		goto fail;
	len = (size_t)snprintf(s, cap, "RSHARE_EXEC=%d", u->ctl);
	for (unsigned fd = 0; fd < max; fd++) {
		struct pfd *p = &pfds[fd];
		if (p->kind < FD_RS || (R(fcntl)((int)fd, F_GETFD) & FD_CLOEXEC))
			continue;
		if (p->kind == FD_LISTEN && p->evfd >= 0 && u->nev < 64 &&
		    sys_fcntl(p->evfd, F_SETFD, 0) == 0)
			u->ev[u->nev++] = p->evfd;
		len += (size_t)snprintf(s + len, cap - len, ";%u,%u,%u,%u,%u,%d", fd, p->kind, p->family,
					p->slot, p->gen, p->evfd);
		if (len >= cap)
			goto fail;
	}
	n = 0;
	while (envp && envp[n])
		n++;
	u->env = malloc((n + 2) * sizeof(char *));
	if (!u->env)
		goto fail;
	n = 0;
	for (unsigned i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], "RSHARE_EXEC=", 12))
			u->env[n++] = envp[i];
	u->env[n++] = s;
	u->env[n] = NULL;
	return u->env;
fail:
	free(s);
	free(u->env);
	u->env = NULL;
	for (int i = 0; i < u->nev; i++)
		sys_fcntl(u->ev[i], F_SETFD, FD_CLOEXEC);
	sys_close(u->ctl);
	u->ctl = -1;
	return NULL;
}

/* exec failed: the connection goes, and with it what it held */
static void exec_undo(struct exec_undo *u)
{
	int e = errno;
	if (u->ctl >= 0) {
		sys_close(u->ctl);
		vs_exiting(0);
	}
	for (int i = 0; i < u->nev; i++)
		sys_fcntl(u->ev[i], F_SETFD, FD_CLOEXEC);
	if (u->env) {
		for (unsigned i = 0; u->env[i]; i++)
			if (!strncmp(u->env[i], "RSHARE_EXEC=", 12))
				free(u->env[i]);
		free(u->env);
	}
	errno = e;
}

/* In the new program: take up the sockets the old one kept. */
static void exec_adopt(void)
{
	const char *v = getenv("RSHARE_EXEC");
	char *end;
	long ctl;
	if (!v)
		return;
	ctl = strtol(v, &end, 10);
	if (end == v || ctl < 0 || !pfds || cl_exec_adopt((int)ctl) < 0) {
		unsetenv("RSHARE_EXEC");
		return;
	}
	while (*end == ';') {
		unsigned fd, kind, family, slot, gen;
		int evfd, used = 0;
		if (sscanf(end + 1, "%u,%u,%u,%u,%u,%d%n", &fd, &kind, &family, &slot, &gen, &evfd, &used) != 6 ||
		    fd >= pfd_max || slot >= ARENA_MAX_SLOTS || (kind != FD_RS && kind != FD_LISTEN))
			break;
		end += 1 + used;
		pfd_set(&pfds[fd], &(struct pfd){.kind = (uint8_t)kind, .family = (uint8_t)family,
						 .slot = slot, .gen = gen, .evfd = evfd});
		if (kind == FD_LISTEN && evfd >= 0)
			sys_fcntl(evfd, F_SETFD, FD_CLOEXEC);
		vs_ref(slot);
	}
	unsetenv("RSHARE_EXEC");
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u);
	int r = R(execve)(path, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u);
	int r = R(execvpe)(file, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u);
	int r = R(fexecve)(fd, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* execl, execle, execlp: the arguments into an array, then as above */
static char **va_argv(const char *arg0, va_list ap, char ***envp)
{
	size_t n = 1, cap = 16;
	char **v = malloc(cap * sizeof(char *)), *a;
	if (!v)
		return NULL;
	v[0] = (char *)arg0;
	do {
		a = va_arg(ap, char *);
		if (n + 1 >= cap) {
			char **m = realloc(v, (cap *= 2) * sizeof(char *));
			if (!m) {
				free(v);
				return NULL;
			}
			v = m;
		}
		v[n++] = a;
	} while (a);
	if (envp)
		*envp = va_arg(ap, char **);
	return v;
}

/* exec the array va_argv made (NULL: out of memory), then free it;
 * search: execlp's path search (execvpe) */
static int exec_made(const char *file, char **v, char **env, int search)
{
	int r;
	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	r = search ? execvpe(file, v, env) : execve(file, v, env);
	free(v);
	return r;
}

int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v;
	va_start(ap, arg);
	v = va_argv(arg, ap, NULL);
	va_end(ap);
	return exec_made(path, v, environ, 0);
}

int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v, **env = NULL;
	va_start(ap, arg);
	v = va_argv(arg, ap, &env);
	va_end(ap);
	return exec_made(path, v, env, 0);
}

int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **v;
	va_start(ap, arg);
	v = va_argv(arg, ap, NULL);
	va_end(ap);
	return exec_made(file, v, environ, 1);
}
