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
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "sys.h"

enum { FD_NONE = 0, FD_TCP, FD_RS, FD_LISTEN };

struct pfd {
	uint8_t kind;
	uint8_t family;
	uint32_t slot, gen;
	uint32_t rxsize, txsize; /* SO_RCVBUF / SO_SNDBUF asked before connect or listen */
	int evfd;                /* listener: the hub's wake-up */
};

static struct pfd *pfds;
static unsigned pfd_max;

#define REAL(name) static __typeof__(name) *real_##name
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
}

__attribute__((destructor)) static void preload_fini(void)
{
	/* a process that exits closes its sockets in order, as the kernel does */
	vs_release_all();
}

static inline struct pfd *pfd_get(int fd)
{
	return (unsigned)fd < pfd_max ? &pfds[fd] : NULL;
}

/* The rshare socket behind fd, or NULL: the fast check on every call. */
static inline struct pfd *rs_of(int fd)
{
	struct pfd *p = pfd_get(fd);
	return p && p->kind >= FD_RS ? p : NULL;
}

static void pfd_clear(int fd)
{
	struct pfd *p = pfd_get(fd);
	if (p)
		memset(p, 0, sizeof(*p));
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
	int fd = real_socket(domain, type, protocol);
	struct pfd *p = pfd_get(fd);
	if (p) {
		memset(p, 0, sizeof(*p));
		if ((domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
		    (protocol == 0 || protocol == IPPROTO_TCP)) {
			p->kind = FD_TCP;
			p->family = (uint8_t)domain;
		}
	}
	return fd;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct pfd *p = pfd_get(fd);
	int reuse = 0;
	socklen_t rl = sizeof(reuse);
	union sockaddr_any a;
	int r = real_bind(fd, addr, len);
	if (r < 0 || !p || p->kind != FD_TCP || cl.attached <= 0 || !addr ||
	    len < sizeof(struct sockaddr_in))
		return r;
	/* an accepted rshare connection has no kernel socket on the port:
	 * ask the hub, as the kernel would refuse while one is open */
	if (real_getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, &rl) == 0 && reuse)
		return r;
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, len < sizeof(a) ? len : sizeof(a));
	if ((a.sa.sa_family == AF_INET && a.in.sin_port) || (a.sa.sa_family == AF_INET6 && a.in6.sin6_port)) {
		if (vs_port_in_use(&a)) {
			/* give the port back: a fresh socket of the same kind */
			int nfd = real_socket(p->family, SOCK_STREAM, 0);
			if (nfd >= 0) {
				int fl = real_fcntl(fd, F_GETFL), fdfl = real_fcntl(fd, F_GETFD);
				real_dup3(nfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
				real_close(nfd);
				real_fcntl(fd, F_SETFL, fl);
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
		return real_listen(fd, backlog);
	int ret = real_listen(fd, backlog), fl;
	if (ret < 0 || !p || p->kind != FD_TCP)
		return ret;
	if (real_getsockname(fd, &a.sa, &al) < 0)
		return ret;
	/* accept waits on the kernel listener and the hub at once: the kernel
	 * side must never block, the application's O_NONBLOCK is kept apart */
	fl = real_fcntl(fd, F_GETFL);
	if (vs_listen(&a, backlog, p->rxsize, p->txsize, &p->evfd, &p->slot, &p->gen) == 0) {
		p->kind = FD_LISTEN;
		if (fl & O_NONBLOCK)
			atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
		real_fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	}
	return ret;
}

static int new_rs_fd(struct pfd *lp, uint32_t slot, uint32_t gen, int flags)
{
	int fd = real_socket(lp->family, SOCK_STREAM | (flags & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0);
	struct pfd *p = pfd_get(fd);
	if (fd < 0 || !p) {
		int e = fd < 0 ? errno : EMFILE;
		if (fd >= 0)
			real_close(fd);
		vs_unref(slot, gen);
		errno = e;
		return -1;
	}
	memset(p, 0, sizeof(*p));
	p->kind = FD_RS;
	p->family = lp->family;
	p->slot = slot;
	p->gen = gen;
	p->evfd = -1;
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
			nfd = new_rs_fd(p, ns, ng, flags);
			if (nfd >= 0)
				fill_addr(&cl_slot(ns)->peer, addr, len);
			return nfd;
		}
		if (r != -EAGAIN && !cl_hub_dead()) {
			errno = -r;
			return -1;
		}
		nfd = real_accept4(fd, addr, len, flags);
		if (nfd >= 0 || errno != EAGAIN)
			return nfd;
		if (atomic_load(&ls->flags) & SLOTF_NONBLOCK) {
			errno = EAGAIN;
			return -1;
		}
		r = poll(pf, 2, -1);
		if (r < 0 && errno == EINTR && !vs_restartable())
			return -1;
	}
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct pfd *p = rs_of(fd);
	int nfd;
	if (!p || p->kind != FD_LISTEN) {
		nfd = real_accept4(fd, addr, len, flags);
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
	if (p && p->kind == FD_TCP && !cfg_use_rshare(CFG_CONNECT, fd, addr, len, &p->rxsize, &p->txsize))
		return real_connect(fd, addr, len);
	if (!p || p->kind != FD_TCP || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)))
		return real_connect(fd, addr, len);
	memset(&dst, 0, sizeof(dst));
	memcpy(&dst, addr, addr->sa_family == AF_INET ? sizeof(dst.in) : sizeof(dst.in6));
	/* reserve a local port in the kernel, as connect would */
	if (real_getsockname(fd, &local.sa, &ll) < 0)
		return real_connect(fd, addr, len);
	if ((local.sa.sa_family == AF_INET && !local.in.sin_port) ||
	    (local.sa.sa_family == AF_INET6 && !local.in6.sin6_port)) {
		union sockaddr_any any;
		memset(&any, 0, sizeof(any));
		any.sa.sa_family = local.sa.sa_family;
		if (bind(fd, &any.sa, local.sa.sa_family == AF_INET ? sizeof(any.in) : sizeof(any.in6)) < 0)
			return real_connect(fd, addr, len);
		ll = sizeof(local);
		real_getsockname(fd, &local.sa, &ll);
	}
	r = vs_connect(&dst, &local, p->rxsize, p->txsize, &p->slot, &p->gen);
	if (r == 1)
		return real_connect(fd, addr, len);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	p->kind = FD_RS;
	p->evfd = -1;
	if (real_fcntl(fd, F_GETFL) & O_NONBLOCK)
		atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
	return 0;
}

/* ---- data ---- */

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return real_sendmsg(fd, m, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_send(p->slot, m->msg_iov, (int)m->msg_iovlen, flags));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct pfd *p = rs_of(fd);
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
	if (!p)
		return real_send(fd, buf, len, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_send(p->slot, &v, 1, flags));
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a, socklen_t al)
{
	if (!rs_of(fd))
		return real_sendto(fd, buf, len, flags, a, al);
	if (a) {
		errno = EISCONN;
		return -1;
	}
	return send(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	if (!rs_of(fd))
		return real_write(fd, buf, len);
	return send(fd, buf, len, 0);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return real_writev(fd, iov, n);
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
		return real_recvmsg(fd, m, flags);
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
	struct pfd *p = rs_of(fd);
	struct iovec v = {.iov_base = buf, .iov_len = len};
	if (!p)
		return real_recv(fd, buf, len, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_recv(p->slot, &v, 1, flags));
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *a, socklen_t *al)
{
	struct pfd *p = rs_of(fd);
	ssize_t r;
	if (!p)
		return real_recvfrom(fd, buf, len, flags, a, al);
	r = recv(fd, buf, len, flags);
	if (r >= 0 && a && al)
		fill_addr(&cl_slot(p->slot)->peer, a, al);
	return r;
}

ssize_t read(int fd, void *buf, size_t len)
{
	if (!rs_of(fd))
		return real_read(fd, buf, len);
	return recv(fd, buf, len, 0);
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return real_readv(fd, iov, n);
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
		int evfd = p->kind == FD_LISTEN ? p->evfd : -1;
		pfd_clear(fd);
		if (vs_unref(slot, gen) != 0 && evfd >= 0)
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
	return real_close(fd);
}

/* newfd now names what oldfd names. */
static int dup_done(int oldfd, int newfd)
{
	struct pfd *o = pfd_get(oldfd), *n = pfd_get(newfd);
	if (newfd < 0 || !n)
		return newfd;
	*n = o ? *o : (struct pfd){0};
	if (n->kind >= FD_RS)
		vs_ref(n->slot);
	return newfd;
}

int dup(int fd)
{
	return dup_done(fd, real_dup(fd));
}

int dup2(int oldfd, int newfd)
{
	int r;
	if (oldfd == newfd)
		return real_dup2(oldfd, newfd);
	r = real_dup2(oldfd, newfd);
	if (r >= 0) {
		pfd_forget(newfd);
		dup_done(oldfd, r);
	}
	return r;
}

int dup3(int oldfd, int newfd, int flags)
{
	int r = real_dup3(oldfd, newfd, flags);
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
		return real_shutdown(fd, how);
	if (p->kind == FD_LISTEN)
		return real_shutdown(fd, how);
	return (int)ret_err(vs_shutdown(p->slot, p->gen, how));
}

int getsockname(int fd, struct sockaddr *a, socklen_t *len)
{
	struct pfd *p = rs_of(fd);
	if (!p || p->kind != FD_RS)
		return real_getsockname(fd, a, len);
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
		return real_getpeername(fd, a, len);
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
	int r = real_setsockopt(fd, level, name, val, len);
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
	return real_getsockopt(fd, level, name, val, len);
}

static int rs_fcntl(int fd, struct pfd *p, int cmd, long arg)
{
	struct arena_slot *as = cl_slot(p->slot);
	int r;
	switch (cmd) {
	case F_GETFL:
		r = real_fcntl(fd, F_GETFL);
		if (r >= 0 && p->kind == FD_LISTEN)
			r = (r & ~O_NONBLOCK) | ((atomic_load(&as->flags) & SLOTF_NONBLOCK) ? O_NONBLOCK : 0);
		return r;
	case F_SETFL:
		r = real_fcntl(fd, F_SETFL, p->kind == FD_LISTEN ? arg | O_NONBLOCK : arg);
		if (r == 0) {
			if (arg & O_NONBLOCK)
				atomic_fetch_or(&as->flags, SLOTF_NONBLOCK);
			else
				atomic_fetch_and(&as->flags, ~SLOTF_NONBLOCK);
		}
		return r;
	default:
		return real_fcntl(fd, cmd, arg);
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
		return dup_done(fd, real_fcntl(fd, cmd, arg));
	if (!p || (cmd != F_GETFL && cmd != F_SETFL))
		return real_fcntl(fd, cmd, arg);
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
	if (p && p->kind == FD_RS && req == FIONBIO && arg) {
		if (*(int *)arg)
			atomic_fetch_or(&cl_slot(p->slot)->flags, SLOTF_NONBLOCK);
		else
			atomic_fetch_and(&cl_slot(p->slot)->flags, ~SLOTF_NONBLOCK);
	}
	return real_ioctl(fd, req, arg);
}
