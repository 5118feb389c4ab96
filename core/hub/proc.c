/*
 * proc.c - the processes attached to the hub.
 *
 * Every process of an rshare application has one SEQPACKET connection to
 * the hub (accepted and read by ctl.c, with the kernel's word on its pid
 * and uid; request.c answers its requests), and may have a request cell
 * in its pool's arena (cell.c), given here.  A process holds references
 * to hub sockets (the ones it made, accepted, or inherited by fork); a
 * process's connection closing is its end (an exit, an _exit, a kill):
 * its references are dropped, its cell is free again, and the sockets only
 * it held close as the kernel closes a dead process's: as by close(), a
 * RESET only for unread data or under SO_LINGER 0 (which its slot keeps).
 */
#include "hub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "msg.h"

/* The sockets a process holds: a dense array (for walks) and an index
 * from socket id to place in it, open addressing with linear probing and
 * backward-shift deletion, at most half full; so holding, asking and
 * dropping cost the same with ten sockets or twenty thousand. */
static uint32_t idx_home(const struct proc *pr, uint32_t sid)
{
	return (sid * 2654435761u) & (pr->idx_cap - 1);
}

/* the index slot of sid, or the empty one where it would go */
static uint32_t idx_find(const struct proc *pr, uint32_t sid)
{
	uint32_t i = idx_home(pr, sid);
	while (pr->idx[i].sid && pr->idx[i].sid != sid)
		i = (i + 1) & (pr->idx_cap - 1);
	return i;
}

static int idx_grow(struct proc *pr)
{
	uint32_t cap = pr->idx_cap ? pr->idx_cap * 2 : 16;
	struct proc_idx *n = calloc(cap, sizeof(*n)), *old = pr->idx;
	if (!n)
		return -ENOMEM;
	pr->idx = n;
	pr->idx_cap = cap;
	for (uint32_t i = 0; i < pr->nsocks; i++)
		pr->idx[idx_find(pr, pr->socks[i])] = (struct proc_idx){pr->socks[i], i};
	free(old);
	return 0;
}

int proc_hold(struct proc *pr, uint32_t sid)
{
	if ((pr->nsocks + 1) * 2 > pr->idx_cap && idx_grow(pr) < 0)
		return -ENOMEM;
	if (sid_push(&pr->socks, &pr->nsocks, &pr->cap, sid) < 0)
		return -ENOMEM;
	pr->idx[idx_find(pr, sid)] = (struct proc_idx){sid, pr->nsocks - 1};
	return 0;
}

int proc_holds(struct proc *pr, uint32_t sid)
{
	return sid && pr->idx_cap && pr->idx[idx_find(pr, sid)].sid == sid;
}

int proc_drop(struct proc *pr, uint32_t sid)
{
	uint32_t i, j, at, last;
	if (!proc_holds(pr, sid))
		return 0;
	i = idx_find(pr, sid);
	at = pr->idx[i].pos;
	last = pr->socks[--pr->nsocks];
	if (last != sid) {
		pr->socks[at] = last;
		pr->idx[idx_find(pr, last)].pos = at;
	}
	/* backward shift: entries after the hole that could sit in it move up */
	for (j = (i + 1) & (pr->idx_cap - 1); pr->idx[j].sid; j = (j + 1) & (pr->idx_cap - 1)) {
		uint32_t home = idx_home(pr, pr->idx[j].sid);
		if (((j - home) & (pr->idx_cap - 1)) >= ((j - i) & (pr->idx_cap - 1))) {
			pr->idx[i] = pr->idx[j];
			i = j;
		}
	}
	pr->idx[i] = (struct proc_idx){0, 0};
	return 1;
}

/* The program set SO_LINGER on with a zero time: its close resets */
static int linger0(const struct hsock *s)
{
	return s->as && s->as->opts.linger[0] && !s->as->opts.linger[1];
}

/* Cell i's process ended: if it was asleep in an accept (its cell names
 * the listener), the listener's count of sleepers goes down by it.  The
 * process wrote both: the slot is bounded by the pool's, and the count
 * never goes below 0 (it is the pool's own business, core/shared/arena.h) */
static int cell_acc_forget(struct pool *p, uint32_t i)
{
	struct arena_cell *c = &((struct arena_hdr *)p->base)->cells[i];
	uint32_t v = atomic_exchange(&c->acc_sleep, 0);
	if (!v || v - 1 >= p->slot_hi)
		return 0;
	count_down(&p->slots[v - 1].acc_sleepers);
	return 1;
}

void proc_free(struct hub *h, struct proc *pr)
{
	if (h->req_pr == pr)
		h->req_pr = NULL;
	struct proc **pp;
	for (pp = &h->procs; *pp; pp = &(*pp)->next)
		if (*pp == pr) {
			*pp = pr->next;
			break;
		}
	hub_unwatch(h, pr->fd);
	close(pr->fd);
	if (pr->nsocks)
		log_info("process %d gone holding %u sockets", (int)pr->pid, pr->nsocks);
	for (uint32_t i = 0; i < pr->nsocks; i++) {
		struct hsock *s = h->socks[pr->socks[i]];
		if (s && s->nholders && hsock_holders_add(s, -1) == 0)
			hsock_release(h, s, linger0(s));
	}
	if (pr->pool && pr->cell) {
		if (cell_acc_forget(pr->pool, pr->cell - 1))
			log_debug("process %d ended asleep in accept", (int)pr->pid);
		pr->pool->cell_proc[pr->cell - 1] = NULL;
	}
	if (pr->pool) {
		pr->pool->nprocs--;
		pool_maybe_free(h, pr->pool);
	}
	free(pr->socks);
	free(pr->idx);
	free(pr->out);
	hub_defer_free(h, pr);
}

int proc_send_reply(int fd, const struct msg_rep *rep, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)rep, .iov_len = sizeof(*rep)};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	ssize_t n;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		struct cmsghdr *c;
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	n = sendmsg(fd, &m, MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof(*rep))
		return 0;
	return n < 0 ? -errno : -EMSGSIZE;
}

/* A request cell of its pool for PR (cell.c), made idle and quiet: a
 * process that had it before may have left it in any state. */
int proc_cell_give(struct proc *pr)
{
	struct pool *p = pr->pool;
	struct arena_hdr *ah = p->base;
	if (pr->cell)
		return (int)pr->cell;
	for (uint32_t i = 0; i < ARENA_CELLS; i++) {
		if (p->cell_proc[i])
			continue;
		atomic_store(&ah->cells[i].state, CELL_IDLE);
		atomic_store(&ah->cells[i].waiters, 0);
		atomic_store(&ah->cells[i].acc_sleep, 0);
		atomic_fetch_and(&ah->cell_bell[i / 64], ~(1ull << (i % 64)));
		p->cell_proc[i] = pr;
		pr->cell = i + 1;
		return (int)pr->cell;
	}
	return -ENOSPC;
}

uint64_t proc_token(void)
{
	uint64_t t = 0;
	while (!t && getrandom(&t, sizeof(t), 0) != sizeof(t))
		;
	return t ? t : 1;
}

struct proc *proc_by_token(struct hub *h, uint64_t token)
{
	for (struct proc *p = h->procs; p; p = p->next)
		if (p->token == token && p->pool)
			return p;
	return NULL;
}
