/*
 * vsock_grow.c - when a blocked writer asks the hub for a send ring twice
 * the size (MSG_TXGROW), as the kernel's socket buffers grow.
 *
 * Two reasons, both only for a writer that found its ring full and waits
 * (a nonblocking one is told EAGAIN and woken through its readiness
 * descriptor, which a growth would not track), and never once SO_SNDBUF
 * fixed the ring:
 *
 * - its reader stalled: the ring's head stayed where it was for
 *   VS_STALL_NS (a program that writes before it reads, its peer doing
 *   the same), so that what the kernel's grown buffers would hold fits,
 *   up to tcp_wmem's maximum; a ring below the kernel's default (verbs
 *   starts small) grows the first time it is full;
 * - on one node, a fast flow: the ring was found full VS_FLOW_HITS times
 *   within VS_FLOW_NS, its reader draining it between, as loopback's
 *   buffers grow under a fast reader (autotuning).  The writer and its
 *   reader then take turns less often, and the copies into and out of
 *   the ring overlap more.  The hub grows such a direction up to its own
 *   limit, and not when the reader fixed SO_RCVBUF (hsock_tx_flow_grow);
 *   a link's ring grows with its flow in the hub (resize_tx.c).
 *
 * An idle ring goes back to its home size in the hub (resize.c).
 */
#include "vsock_int.h"

#define VS_STALL_NS (10 * 1000000ull)
#define VS_FLOW_HITS 8
#define VS_FLOW_NS (100 * 1000000ull)

/* per slot: the generation + 1 whose send ring the hub will not grow, or
 * will not grow with its flow */
static uint32_t vs_tx_nogrow[CL_SLOTS], vs_flow_nogrow[CL_SLOTS];
/* the head (+ 1) when the ring was found full, and since when */
static uint64_t vs_stall_head[CL_SLOTS], vs_stall_t0[CL_SLOTS];
/* how often it was found full with its head moved, since when */
static uint32_t vs_flow_hits[CL_SLOTS];
static uint64_t vs_flow_t0[CL_SLOTS];

int vs_tx_may_grow(uint32_t slot, uint32_t gen, uint64_t size)
{
	return size < ARENA_MAX_RING && vs_tx_nogrow[slot] != gen + 1;
}

/* 1 when it grew.  The caller holds the ring's lock, so no other writer
 * sees the move. */
int vs_tx_grow(uint32_t slot, uint32_t gen, int flow)
{
	struct msg_req q = {.op = MSG_TXGROW, .slot = slot, .gen = gen, .arg = flow};
	struct msg_rep r = {.status = 0};
	if (cl_rpc(&q, &r, -1) < 0)
		return 0;
	if (r.status) {
		if (r.status != -EBUSY) /* else: once the old ring's writes completed */
			(flow ? vs_flow_nogrow : vs_tx_nogrow)[slot] = gen + 1;
		return 0;
	}
	vs_flow_hits[slot] = 0;
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

/* The same-node ring is found full at HEAD: 1 when that makes a fast
 * flow.  Called before vs_tx_stall_left, whose record of the head it
 * reads: a head that did not move since the ring was last found full
 * is a slow reader's, and counts nothing. */
int vs_tx_flow_fast(uint32_t slot, uint32_t gen, uint64_t head)
{
	uint64_t now;
	if (vs_flow_nogrow[slot] == gen + 1 || vs_stall_head[slot] == head + 1)
		return 0;
	now = sys_now_ns();
	if (!vs_flow_hits[slot] || now - vs_flow_t0[slot] > VS_FLOW_NS) {
		vs_flow_hits[slot] = 1;
		vs_flow_t0[slot] = now;
		return 0;
	}
	return ++vs_flow_hits[slot] >= VS_FLOW_HITS;
}
