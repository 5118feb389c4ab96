/*
 * cell.c - this process's requests through its request cells in the
 * arenas (arena.h; the hub's side is core/hub/cell.c).
 *
 * The first request that may go through a cell (cl_cell_op: CONNECT,
 * ACCEPT, RELEASE, SHUTDOWN, TXGROW, the ones that carry no descriptor)
 * asks the hub for a cell of that pool over the unix connection
 * (MSG_CELL), once; a process that gets none (a pool's cells are all
 * taken) goes on over its connection.  A request then is written into
 * the cell, CELL_POSTED is set and the cell's bell rung, with a kick of
 * the pool's eventfd only when the hub sleeps.  The answer is waited for
 * as data is: a spin of spin_us, yielding the CPU, then a sleep on the
 * cell's state (counted in `waiters`, so that the hub makes the wake-up
 * system call only then), looking every CELL_LOOK_MS at whether the hub
 * died.  A release that asks no answer does not wait: the next request
 * of this process, through the cell or the connection, waits until the
 * hub took it (cl_cells_quiet), so the hub sees them in this process's
 * order.  All of it under cl_rpc_lock, as the connection's requests.
 * A forked child asks for a cell of its own (cl_cells_forget).  A
 * process asleep in a blocking accept names the listener in its cell
 * (acc_sleep, core/proc/vsock_accept.c), so that the hub can count it out
 * if it ends there; such a process asks for its cell first (cl_cell).
 */
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "client_int.h"
#include "sys.h"

#define CELL_LOOK_MS 20

int cl_cell_op(uint32_t op)
{
	return op == MSG_CONNECT || op == MSG_ACCEPT || op == MSG_RELEASE || op == MSG_SHUTDOWN ||
	       op == MSG_TXGROW;
}

/* Until the cell holds no request of ours: 0, or -ECONNRESET when the hub
 * died. */
static int cell_wait(struct arena_cell *c)
{
	struct timespec look = {0, CELL_LOOK_MS * 1000000L};
	uint64_t end = 0;
	for (unsigned i = 1;; i++) {
		uint32_t st = atomic_load(&c->state);
		if (st != CELL_POSTED && st != CELL_TAKEN)
			return 0;
		if (i & 63) {
			cpu_relax();
			continue;
		}
		if (!end)
			end = sys_now_ns() + cl.spin_ns;
		if (cl_hub_dead())
			return -ECONNRESET;
		if (sys_now_ns() < end) {
			sched_yield();
			continue;
		}
		atomic_fetch_add(&c->waiters, 1);
		sys_futex(&c->state, FUTEX_WAIT, st, &look);
		atomic_fetch_sub(&c->waiters, 1);
	}
}

static struct arena_cell *cell_of(uint32_t k)
{
	struct cl_pool *p = &cl.p[k];
	return p->cell > 0 ? &((struct arena_hdr *)p->arena)->cells[p->cell - 1] : NULL;
}

void cl_cells_quiet(void)
{
	for (uint32_t k = 0; k < CL_POOLS; k++)
		if (cl.p[k].arena && cl.p[k].cell > 0)
			cell_wait(cell_of(k));
}

void cl_cells_forget(void)
{
	for (uint32_t k = 0; k < CL_POOLS; k++)
		cl.p[k].cell = 0;
}

/* Pool K's cell for this process: asked of the hub the first time. */
static struct arena_cell *cell_get(uint32_t k)
{
	struct cl_pool *p = &cl.p[k];
	struct msg_req q = {.op = MSG_CELL};
	struct msg_rep r;
	if (p->cell == 0) {
		p->cell = -1;
		if (cl_rpc_on(p->ctl_fd, &q, &r, -1, NULL, 0) == 0 && !r.status && r.slot >= 1 &&
		    r.slot <= ARENA_CELLS)
			p->cell = (int)r.slot;
	}
	return cell_of(k);
}

struct arena_cell *cl_cell(uint32_t k)
{
	struct arena_cell *c = NULL;
	if (k >= CL_POOLS || cl.sandboxed)
		return NULL;
	vs_sig_hold_begin();
	pthread_mutex_lock(&cl_rpc_lock);
	if (cl.p[k].arena && cl.p[k].ctl_fd >= 0)
		c = cell_get(k);
	pthread_mutex_unlock(&cl_rpc_lock);
	vs_sig_hold_end();
	return c;
}

int cl_cell_rpc(uint32_t k, const struct msg_req *q, struct msg_rep *r)
{
	struct arena_cell *c;
	int ret;
	if (cl.sandboxed || !cl.p[k].arena || cl.p[k].ctl_fd < 0 || !(c = cell_get(k)))
		return -ENOSYS;
	ret = cell_wait(c);
	if (ret < 0)
		return ret;
	memcpy(&c->req, q, sizeof(*q));
	atomic_store(&c->state, CELL_POSTED);
	if (arena_ring_cell(cl.p[k].arena, (uint32_t)cl.p[k].cell - 1))
		cl_kick(k);
	if (!r)
		return 0; /* a release that asks no answer */
	ret = cell_wait(c);
	if (ret == 0)
		memcpy(r, &c->rep, sizeof(*r));
	return ret;
}
