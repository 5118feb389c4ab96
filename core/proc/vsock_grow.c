/*
 * vsock_grow.c - when a writer asks the hub for a larger send ring
 * (MSG_TXGROW), as the kernel's socket buffers grow.
 *
 * Two reasons, never once SO_SNDBUF fixed the ring:
 *
 * - on one node, a write that does not fit: loopback's send buffer is
 *   tcp_wmem's maximum (4 MiB) from the start, so kernel TCP takes a write
 *   of up to that much whole, blocking writer or not, with its reader
 *   reading or not.  The writer asks for a ring that holds what is unread
 *   and its write (arg 1, txsize), once a call; the hub gives the power of
 *   two that holds them, up to that maximum, and none when the reader
 *   fixed SO_RCVBUF (hsock_tx_fit); none for now (asked again after
 *   VS_FIT_AGAIN_NS) while the node's same-node rings hold more than
 *   tcp_mem's pressure value, as the kernel's buffers then stop growing.
 *   So a nonblocking writer has its write taken whole as often as there (a
 *   program that drops what it did not write once its peer's EOF comes
 *   works there), a blocking one does not wait for its reader to make
 *   room, and a fast stream's writer and reader take turns less often.  A
 *   refusal is kept for the ring's size (a SO_RCVBUF, a lower tcp_wmem),
 *   so that it costs one request;
 * - its reader stalled (a blocked writer only, on a link or on one node
 *   where the write fitted: a nonblocking one is told EAGAIN and waits on
 *   its readiness descriptor, and the hub grows its ring when it watches
 *   it stall, resize_tx.c): the ring's head stayed where it was for
 *   VS_STALL_NS (a program that writes before it reads, its peer doing
 *   the same), so that what the kernel's grown buffers would hold fits,
 *   up to tcp_wmem's maximum; a ring below the kernel's default (verbs
 *   starts small) grows the first time it is full.
 *
 * An idle ring goes back to its home size in the hub (resize.c).
 */
#include "vsock_int.h"

#define VS_STALL_NS (10 * 1000000ull)

/* per slot: the generation + 1 whose send ring the hub will not grow for
 * a stall; and whose ring it did not grow to fit a write, with that size
 * and, when only for now (the node's rings under memory pressure), until
 * when not to ask again */
static uint32_t vs_tx_nogrow[CL_SLOTS], vs_fit_gen[CL_SLOTS];
static uint64_t vs_fit_size[CL_SLOTS], vs_fit_until[CL_SLOTS];
#define VS_FIT_AGAIN_NS (100 * 1000000ull)
/* the head (+ 1) when the ring was found full, and since when */
static uint64_t vs_stall_head[CL_SLOTS], vs_stall_t0[CL_SLOTS];

int vs_tx_may_grow(uint32_t slot, uint32_t gen, uint64_t size)
{
	return size < ARENA_MAX_RING && vs_tx_nogrow[slot] != gen + 1;
}

/* 1 when it grew.  The caller holds the ring's lock, so no other writer
 * sees the move. */
int vs_tx_grow(uint32_t slot, uint32_t gen)
{
	struct msg_req q = {.op = MSG_TXGROW, .slot = slot, .gen = gen};
	struct msg_rep r = {.status = 0};
	if (cl_rpc(&q, &r, -1) < 0)
		return 0;
	if (r.status) {
		if (r.status != -EBUSY) /* else: once the old ring's writes completed */
			vs_tx_nogrow[slot] = gen + 1;
		return 0;
	}
	return 1;
}

int vs_tx_may_fit(uint32_t slot, uint32_t gen, uint64_t size)
{
	return size < ARENA_MAX_RING && (vs_fit_gen[slot] != gen + 1 || vs_fit_size[slot] != size ||
					 (vs_fit_until[slot] && sys_now_ns() >= vs_fit_until[slot]));
}

/* The same-node ring of SIZE to hold NEED bytes: 1 when it grew. */
int vs_tx_fit(uint32_t slot, uint32_t gen, uint64_t size, uint64_t need)
{
	struct msg_req q = {.op = MSG_TXGROW, .slot = slot, .gen = gen, .arg = 1,
			    .txsize = need > ARENA_MAX_RING ? ARENA_MAX_RING : (uint32_t)need};
	struct msg_rep r = {.status = 0};
	if (cl_rpc(&q, &r, -1) < 0)
		return 0;
	if (r.status) {
		vs_fit_gen[slot] = gen + 1;
		vs_fit_size[slot] = size;
		vs_fit_until[slot] = r.status == -EBUSY ? sys_now_ns() + VS_FIT_AGAIN_NS : 0;
		return 0;
	}
	return 1;
}

/* Nanoseconds left before the full ring counts as stalled; 0: it is. */
uint64_t vs_tx_stall_left(uint32_t slot, uint64_t head)
{
	uint64_t now = sys_now_ns(), el;
	if (vs_stall_head[slot] != head + 1) {
		vs_stall_head[slot] = head + 1;
		vs_stall_t0[slot] = now;
		return VS_STALL_NS;
	}
	el = now - vs_stall_t0[slot];
	return el >= VS_STALL_NS ? 0 : VS_STALL_NS - el;
}
