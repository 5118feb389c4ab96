/*
 * cell.c - requests that come through the arena: each process's request
 * cell.
 *
 * A process asks once for a cell of its pool (MSG_CELL, proc_cell_give).
 * From then on it writes the requests that carry no descriptor (the ops
 * request.c's table marks) into the cell instead of its unix connection,
 * sets CELL_POSTED, rings the cell's bell and kicks the pool's eventfd
 * only when the hub sleeps (arena.h); then it spins on the cell's state
 * and sleeps on it as on a slot's futex word (core/proc/cell.c).  Each
 * turn of its loop the hub takes the cells whose bells rang:
 *  - the cell is the process's the hub gave it to (the pool's cell_proc),
 *    whatever the cell holds; a bell of a cell nobody has costs a look;
 *  - the hub sets CELL_TAKEN, copies the request out (the process could
 *    go on writing it: only the copy counts), answers it with request.c's
 *    table (proc_answer_cell), writes the reply and sets CELL_DONE;
 *  - it makes the wake-up system call only when the process sleeps;
 *  - a process's end (its connection's, ctl.c) takes its cell's request
 *    first, as one written on the connection before the end would be.
 * So a connection's set-up and close cost no unix-socket round trip, and
 * no system call at all while the hub polls.  A process's requests are
 * answered in its order whichever way they come: it never sends one while
 * another of its is in its cell.  A hub that died in a request (a cell
 * TAKEN) is succeeded by one that answers it EINTR, as a request read from
 * a connection (warden.c); cells whose bells it had taken and not looked
 * at are rung again.
 */
#include "hub.h"

#include <limits.h>
#include <string.h>

#include "sys.h"

void hub_cell_take(struct hub *h, struct proc *pr)
{
	struct arena_cell *c = &((struct arena_hdr *)pr->pool->base)->cells[pr->cell - 1];
	uint32_t posted = CELL_POSTED;
	struct msg_req q;
	struct msg_rep rep;
	if (!atomic_compare_exchange_strong(&c->state, &posted, CELL_TAKEN))
		return;
	memcpy(&q, &c->req, sizeof(q)); /* the process may go on writing it: only the copy counts */
	h->req_cell = c; /* a hub that dies before the reply: warden.c answers */
	hub_wake_later_begin(h);
	proc_answer_cell(h, pr, &q, &rep);
	h->cell_requests++;
	memcpy(&c->rep, &rep, sizeof(rep));
	atomic_store(&c->state, CELL_DONE);
	h->req_cell = NULL;
	if (atomic_load(&c->waiters))
		sys_futex(&c->state, FUTEX_WAKE, INT_MAX, NULL);
	hub_wake_later_end(h); /* the listeners it woke, now that the answer is out */
}

int hub_cells(struct hub *h, struct pool *p)
{
	struct arena_hdr *ah = p->base;
	uint64_t sum;
	if (!atomic_load_explicit(&ah->cell_summary, memory_order_relaxed))
		return 0;
	sum = atomic_exchange(&ah->cell_summary, 0) & ((1ull << ARENA_CELL_WORDS) - 1);
	while (sum) {
		uint32_t w = (uint32_t)__builtin_ctzll(sum);
		uint64_t bits = atomic_exchange(&ah->cell_bell[w], 0);
		sum &= sum - 1;
		while (bits) {
			struct proc *pr = p->cell_proc[w * 64 + (uint32_t)__builtin_ctzll(bits)];
			if (pr) /* else a cell nobody has: nothing to do */
				hub_cell_take(h, pr);
			bits &= bits - 1;
		}
	}
	return 1;
}

/* After a hub died: its request in hand (TAKEN) answered EINTR, and every
 * request still POSTED rung again. */
void hub_cells_succeed(struct hub *h)
{
	for (struct pool *p = h->pools; p; p = p->next) {
		struct arena_hdr *ah = p->base;
		for (uint32_t i = 0; i < ARENA_CELLS; i++) {
			struct arena_cell *c = &ah->cells[i];
			uint32_t st;
			if (!p->cell_proc[i])
				continue;
			st = atomic_load(&c->state);
			if (st == CELL_TAKEN) {
				memset(&c->rep, 0, sizeof(c->rep));
				c->rep.status = -EINTR;
				atomic_store(&c->state, CELL_DONE);
				h->succession_eintr++;
				sys_futex(&c->state, FUTEX_WAKE, INT_MAX, NULL);
			} else if (st == CELL_POSTED) {
				arena_ring_cell(ah, i);
			}
		}
	}
	h->req_cell = NULL;
}
