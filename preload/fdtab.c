/*
 * fdtab.c - the descriptor table: which descriptor names which rshare
 * socket, and the references this process holds on them.
 *
 * One struct pfd per descriptor number, in one mapping as large as the
 * descriptor limit allows (untouched pages cost nothing).  An entry that
 * names an rshare socket holds one reference on its slot (vs_ref): dup
 * takes another, close and dup2/dup3 over it give it back (vs_unref), and
 * the last one releases the socket at the hub.  close, close_range and
 * closefrom leave the library's own descriptors (its hub connection,
 * readiness descriptors at its own numbers) open.  A vfork child shares
 * the table with its parent: it changes nothing in it (pfd_forget).
 */
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "preload.h"

struct pfd *pfd_tab;
unsigned pfd_max;

void pfd_table_init(void)
{
	struct rlimit rl;
	unsigned max = 65536;
	void *m;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max > max)
		max = rl.rlim_max > (1u << 20) ? (1u << 20) : (unsigned)rl.rlim_max;
	/* untouched pages of the table cost nothing */
	m = mmap(NULL, (size_t)max * sizeof(struct pfd), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m != MAP_FAILED) {
		pfd_tab = m;
		pfd_max = max;
	}
}

/* An entry changes hands when the kernel gives its number out again: the
 * thread that closed it and the one that got the number are ordered by
 * the kernel only, so kind is written last (release) and read first
 * (acquire), which orders them for the compiler and for ThreadSanitizer. */
void pfd_set(struct pfd *p, const struct pfd *v)
{
	(void)__atomic_load_n(&p->kind, __ATOMIC_ACQUIRE);
	p->family = v->family;
	p->slot = v->slot;
	p->gen = v->gen;
	p->rxsize = v->rxsize;
	p->txsize = v->txsize;
	p->evfd = v->evfd;
	p->pending = v->pending;
	p->flags = v->flags;
	p->optmask = v->optmask;
	p->dst = v->dst;
	__atomic_store_n(&p->kind, v->kind, __ATOMIC_RELEASE);
	if (p - pfd_tab <= 2)
		std_follow((int)(p - pfd_tab));
}

void pfd_clear(int fd)
{
	struct pfd *p = pfd_get(fd);
	if (p)
		pfd_set(p, &(struct pfd){0});
}

/* fd stops naming what it named: drop this process's reference to an
 * rshare socket behind it (the last one releases it at the hub).  Not in
 * a vfork child, whose closes and dup2s before its exec are its own: the
 * table and the references are its parent's (pl_vfork_child). */
void pfd_forget(int fd)
{
	struct pfd *p = rs_of(fd);
	if (p && pl_vfork_child())
		return;
	/* a recv or send of this thread that a handler jumped out of holds
	 * its socket until it ends (client.h) */
	vs_waits_check((uintptr_t)__builtin_frame_address(0));
	if (p) {
		uint32_t slot = p->slot, gen = p->gen;
		int evfd = p->kind == FD_LISTEN ? p->evfd : -1;
		/* SO_LINGER on with a zero time: close resets, as on kernel
		 * TCP; with a time, the last close waits for the peer to have
		 * the bytes, at most that long */
		int lg = p->kind == FD_RS ? so_linger(fd, p) : 0, abort = lg < 0;
		if (lg > 0)
			vs_linger(slot, lg);
		rd_closing(fd, p);
		if (evfd >= 0)
			ep_listener_closing(fd);
		pfd_clear(fd);
		if ((abort ? vs_unref_abort(slot, gen) : vs_unref(slot, gen)) != 0 && evfd >= 0) {
			sys_close(evfd);
			vs_accept_forget(slot, gen);
		}
	} else {
		struct pfd *q = pfd_get(fd);
		if (q && q->kind)
			pfd_clear(fd);
	}
}

/* newfd now names what oldfd names. */
int pfd_dup(int oldfd, int newfd)
{
	struct pfd *o = pfd_get(oldfd), *n = pfd_get(newfd);
	if (newfd < 0 || !n || ((n->kind || (o && o->kind)) && pl_vfork_child()))
		return newfd;
	pfd_set(n, o ? o : &(struct pfd){0});
	if (n->kind >= FD_RS)
		vs_ref(n->slot);
	return newfd;
}

/* one of the library's own descriptors, which live at high numbers */
static int fd_own(int fd)
{
	int own[512], n;
	struct pfd *p = pfd_get(fd);
	/* the program's sockets are in the table: only others are looked for */
	if (!cl.hi_fd || fd < cl.hi_fd || cl.attached <= 0 || (p && p->kind))
		return 0;
	n = cl_own_fds(own, 512);
	for (int i = 0; i < n; i++)
		if (own[i] == fd)
			return 1;
	return 0;
}

int close(int fd)
{
	/* a program that closes every number (a daemon's start) leaves the
	 * library's own open: as if closed, the number stays taken */
	if (fd_own(fd))
		return 0;
	pfd_forget(fd);
	return R(close)(fd);
}

int dup(int fd)
{
	return pfd_dup(fd, R(dup)(fd));
}

/* newfd is about to name what oldfd names: what it named is let go of
 * first, while it still names it (its options, its readiness descriptor),
 * once the kernel could not refuse for want of oldfd */
static void dup_over(int oldfd, int newfd)
{
	if (oldfd != newfd && R(fcntl)(oldfd, F_GETFD) >= 0)
		pfd_forget(newfd);
}

int dup2(int oldfd, int newfd)
{
	int r;
	if (oldfd == newfd)
		return R(dup2)(oldfd, newfd);
	dup_over(oldfd, newfd);
	r = R(dup2)(oldfd, newfd);
	if (r >= 0)
		pfd_dup(oldfd, r);
	return r;
}

int dup3(int oldfd, int newfd, int flags)
{
	int r;
	if (oldfd != newfd && !(flags & ~O_CLOEXEC))
		dup_over(oldfd, newfd);
	r = R(dup3)(oldfd, newfd, flags);
	if (r >= 0)
		pfd_dup(oldfd, r);
	return r;
}

static int int_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* close_range(2) and closefrom(3) close what the program named, never the
 * library's own descriptors (its hub connection among them: closing that
 * would be taken for this process's death, and its sockets reset); the
 * rshare sockets in the range are let go of as close() does.  With
 * CLOSE_RANGE_CLOEXEC nothing closes now: the kernel's, as it is. */
static int fd_close_range(unsigned first, unsigned last, int flags)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int own[512], n, r = 0;
	unsigned at = first;
	if (flags & CLOSE_RANGE_CLOEXEC)
		return (int)syscall(SYS_close_range, first, last, flags);
	pthread_mutex_lock(&lock);
	for (unsigned fd = first; fd <= last && fd < pfd_max; fd++)
		if (pfd_tab[fd].kind)
			pfd_forget((int)fd);
	n = cl_own_fds(own, 448);
	for (unsigned fd = 0; fd < pfd_max && n < 512; fd++)
		if (pfd_tab[fd].kind == FD_LISTEN && pfd_tab[fd].evfd >= 0)
			own[n++] = pfd_tab[fd].evfd;
	qsort(own, (size_t)n, sizeof(int), int_cmp);
	for (int i = 0; i < n && r == 0; i++) {
		unsigned o = (unsigned)own[i];
		if (o < at || o > last)
			continue;
		if (o > at)
			r = (int)syscall(SYS_close_range, at, o - 1, flags);
		at = o + 1;
	}
	if (r == 0 && at <= last && at != 0)
		r = (int)syscall(SYS_close_range, at, last, flags);
	pthread_mutex_unlock(&lock);
	return r;
}

int close_range(unsigned first, unsigned last, int flags)
{
	if (first > last) {
		errno = EINVAL;
		return -1;
	}
	return fd_close_range(first, last, flags);
}

void closefrom(int lowfd)
{
	if (lowfd >= 0)
		fd_close_range((unsigned)lowfd, ~0u, 0);
}
