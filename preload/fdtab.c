/*
 * fdtab.c - the descriptor table: which descriptor names which rshare
 * socket, and the references this process holds on them.
 *
 * One struct pfd per descriptor number, in one mapping as large as the
 * descriptor limit allows (untouched pages cost nothing).  An entry that
 * names an rshare socket holds one reference on its slot (vs_ref): dup
 * takes another, close and dup2/dup3 over it give it back (vs_unref), and
 * the last one releases the socket at the hub.
 */
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
}

void pfd_clear(int fd)
{
	struct pfd *p = pfd_get(fd);
	if (p)
		pfd_set(p, &(struct pfd){0});
}

/* fd stops naming what it named: drop this process's reference to an
 * rshare socket behind it (the last one releases it at the hub). */
void pfd_forget(int fd)
{
	struct pfd *p = rs_of(fd);
	if (p) {
		uint32_t slot = p->slot, gen = p->gen;
		int evfd = p->kind == FD_LISTEN ? p->evfd : -1;
		/* SO_LINGER on with a zero time: close resets, as on kernel TCP */
		int abort = p->kind == FD_RS && so_abortive(fd, p);
		rd_closing(fd, p);
		pfd_clear(fd);
		if ((abort ? vs_unref_abort(slot, gen) : vs_unref(slot, gen)) != 0 && evfd >= 0)
			sys_close(evfd);
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
	if (newfd < 0 || !n)
		return newfd;
	pfd_set(n, o ? o : &(struct pfd){0});
	if (n->kind >= FD_RS)
		vs_ref(n->slot);
	return newfd;
}

int close(int fd)
{
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
