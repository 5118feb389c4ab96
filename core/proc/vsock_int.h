/*
 * vsock_int.h - what the three parts of the socket operations share:
 * vsock.c (the control path: listen, connect, accept, shutdown, release),
 * vsock_data.c (send, recv and waiting) and vsock_poll.c (readiness).
 * This process's tables per slot, and where a slot's rings are.  What
 * send and recv run on every call is static inline here, so that the split
 * costs them nothing; the rest is hidden, never seen outside librshare.so.
 */
#ifndef RSHARE_VSOCK_INT_H
#define RSHARE_VSOCK_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "client.h"
#include "pair.h"
#include "sys.h"

#define VS_HIDDEN __attribute__((visibility("hidden")))
/* a helper of send or recv: always folded into its one caller */
#define VS_INLINE static inline __attribute__((always_inline))

extern _Atomic uint32_t vs_proc_refs[CL_SLOTS] VS_HIDDEN; /* descriptors of this process per slot */
extern _Atomic int vs_poll_fds[CL_SLOTS] VS_HIDDEN; /* readiness descriptor + 1, 0 when none */
extern _Atomic uint8_t vs_poll_selfs[CL_SLOTS] VS_HIDDEN; /* 1: that descriptor is the program's */

/* SO_PEEK_OFF (arena.h: peek_off), under rx_lock: where a peek starts
 * past the reader; and its move after a call took N bytes: a peek moves
 * it on, a read back (not below 0), as sk_peek_offset_fwd and _bwd */
static inline uint64_t peek_off_skip(struct arena_slot *as)
{
	int32_t o = atomic_load(&as->peek_off);
	return o > 0 ? (uint64_t)o : 0;
}

static inline void peek_off_move(struct arena_slot *as, int peek, uint64_t n)
{
	int32_t o = atomic_load(&as->peek_off);
	if (o >= 0)
		atomic_store(&as->peek_off, peek ? (int32_t)(o + n) : (uint64_t)o > n ? (int32_t)(o - n) : 0);
}

/* the error queue of MSG_ZEROCOPY notifications (vsock_errq.c) */
void vs_errq_sent(uint32_t slot) VS_HIDDEN;
int vs_errq_take(struct arena_slot *as, uint32_t *lo, uint32_t *hi) VS_HIDDEN;

/* Per slot: this process's send and recv calls in progress, and at
 * VS_BUSY_GONE a release (the last descriptor closed) that waits for them.
 * The kernel keeps a socket while a call on it runs, whatever another
 * thread closes: so does this, and the slot cannot be given to another
 * socket under a blocked recv. */
#define VS_BUSY_GONE (1u << 31)
extern _Atomic uint32_t vs_busy[CL_SLOTS] VS_HIDDEN;
void vs_release_waited(uint32_t slot) VS_HIDDEN;

/* A wait that a signal handler left with siglongjmp (an old program's
 * timeout: alarm, and a jump out of a blocked read) never returns, and
 * its call's hold on the slot would keep the socket from being released
 * at close: no FIN, no RST, for ever.  The kernel ended its own call
 * before the handler ran.  So a send or recv notes the wait, per thread
 * (vs_wait_enter, vs_wait_leave: a handler that returns may wait again,
 * VS_WAIT_NOTES deep), with a frame address VS_WAIT_MARGIN below its
 * call's; the thread's next send or recv (vs_call_begin) or close
 * (vs_waits_check, from the preload's close) passes its own call's frame
 * to vs_waits_left, which ends the call of each noted wait whose frame
 * the stack has left (the call lies above the note: jumped out of).  A
 * call made by a handler while the wait is under way lies below the
 * signal's frame (over 1 KiB of saved state), so below the note; on an
 * alternate signal stack nothing is judged.  A call made after the jump
 * from a frame more than VS_WAIT_MARGIN deeper than the recv was is
 * taken for one inside a handler: the socket stays held (rshare(7),
 * BUGS).  A note also holds the sleepers' count its wait added itself to
 * while asleep (vs_wait_word), which ending the note takes back: a jump
 * out of the sleep would leave the hub making a wake-up system call for
 * every event of that socket. */
#define VS_WAIT_NOTES 8
#define VS_WAIT_MARGIN 768 /* below the signal frame's size (x86-64: 1 KiB and more, arm64: 4 KiB) */
struct vs_wait_note {
	uintptr_t frame;
	uint32_t slot;
	_Atomic uint32_t *asleep; /* the count it is in while asleep, or NULL */
};
extern __thread struct vs_wait_note vs_wait_notes[VS_WAIT_NOTES] __attribute__((tls_model("initial-exec"))) VS_HIDDEN;
extern __thread uint32_t vs_wait_depth __attribute__((tls_model("initial-exec"))) VS_HIDDEN;
void vs_waits_left(uintptr_t frame) VS_HIDDEN;
void vs_waits_end_above(uint32_t d) VS_HIDDEN;

/* the call of FRAME (its __builtin_frame_address) on SLOT begins a wait:
 * the note's depth, for vs_wait_leave */
static inline uint32_t vs_wait_enter(uint32_t slot, uintptr_t frame)
{
	uint32_t d = vs_wait_depth;
	if (d < VS_WAIT_NOTES) {
		vs_wait_notes[d].frame = frame - VS_WAIT_MARGIN;
		vs_wait_notes[d].slot = slot;
		vs_wait_notes[d].asleep = NULL;
	}
	vs_wait_depth = d + 1;
	return d;
}

/* ... and it ended (notes above it were left by jumps in handlers) */
static inline void vs_wait_leave(uint32_t d)
{
	if (__builtin_expect(vs_wait_depth != d + 1, 0))
		vs_waits_end_above(d);
	vs_wait_depth = d;
}

/* A call on the slot begins: 0, or -EBADF when it was released meanwhile. */
#define vs_call_begin(slot) vs_call_begin_at(slot, (uintptr_t)__builtin_frame_address(0))
static inline int vs_call_begin_at(uint32_t slot, uintptr_t frame)
{
	if (__builtin_expect(vs_wait_depth != 0, 0))
		vs_waits_left(frame);
	if (__builtin_expect(atomic_fetch_add(&vs_busy[slot], 1) & VS_BUSY_GONE, 0)) {
		if (atomic_fetch_sub(&vs_busy[slot], 1) - 1 == VS_BUSY_GONE)
			vs_release_waited(slot);
		return -EBADF;
	}
	return 0;
}

/* ... and ends; the last call of a released slot releases it. */
static inline void vs_call_end(uint32_t slot)
{
	if (__builtin_expect(atomic_fetch_sub(&vs_busy[slot], 1) - 1 == VS_BUSY_GONE, 0))
		vs_release_waited(slot);
}

/* the pair segment each slot used last (key: the slot's generation and
 * the segment's id); vs_pair_map maps one (vsock.c) */
struct vs_lmap_ent {
	_Atomic uint64_t key;
	uint8_t *base;
};
extern struct vs_lmap_ent vs_lmap[CL_SLOTS] VS_HIDDEN;
uint8_t *vs_pair_map(uint32_t slot, struct arena_slot *as, uint64_t key) VS_HIDDEN;

/* vsock_wait.c: wait for the slot's futex word to move past seq (0,
 * -EINTR, -ECONNRESET when the hub is gone), in a send's or recv's wait
 * note; a spin first */
int vs_wait_word(_Atomic uint32_t *w, _Atomic uint32_t *cnt, uint32_t seq, uint64_t ns) VS_HIDDEN;
int vs_spin_ring(_Atomic uint32_t *word, uint32_t seq, _Atomic uint64_t *ctr, uint64_t old,
		 _Atomic uint64_t *alt) VS_HIDDEN;
int vs_wait_seq(struct arena_slot *as, uint32_t seq) VS_HIDDEN;
int vs_wait_seq_for(struct arena_slot *as, uint32_t seq, uint64_t ns) VS_HIDDEN; /* or -ETIMEDOUT */
/* vsock_grow.c: a send ring that may grow twice as large, and asks to,
 * for a stalled reader; a same-node one that may grow to hold a write,
 * and asks to (1: grown); how long until a full ring counts as stalled */
int vs_tx_may_grow(uint32_t slot, uint32_t gen, uint64_t size) VS_HIDDEN;
int vs_tx_grow(uint32_t slot, uint32_t gen) VS_HIDDEN;
int vs_tx_may_fit(uint32_t slot, uint32_t gen, uint64_t size) VS_HIDDEN;
int vs_tx_fit(uint32_t slot, uint32_t gen, uint64_t size, uint64_t need) VS_HIDDEN;
uint64_t vs_tx_stall_left(uint32_t slot, uint64_t head) VS_HIDDEN;
/* vsock_poll.c: the readiness descriptor claimed more than is true */
void vs_rx_settle(uint32_t slot, struct arena_slot *as) VS_HIDDEN;
void vs_tx_settle(uint32_t slot, struct arena_slot *as) VS_HIDDEN;

/* The ring lock of a slot (IN: the word that says its holder uses the
 * ring, below).  Its owner died mid-copy: the counters were not moved,
 * and it is in the ring no longer. */
static inline void vs_lock(pthread_mutex_t *m, _Atomic uint32_t *in)
{
	if (pthread_mutex_lock(m) == EOWNERDEAD) {
		pthread_mutex_consistent(m);
		atomic_store(in, 0);
	}
}

/* A ring may be moved by the hub of its own accord (a link's receive
 * ring that grows or shrinks, an idle send ring, an idle same-node ring,
 * the full ring of a nonblocking writer): the lock's holder says it is in
 * the ring while it uses its geometry and bytes, and steps out before it
 * waits.  The hub moves only while nobody is in (on the same node: nobody
 * on either side); while it moves, which takes one copy, the holder waits
 * for it (core/hub/resize.c). */
static inline void vs_ring_enter(_Atomic uint32_t *in, _Atomic uint32_t *hold)
{
	for (;;) {
		atomic_store(in, 1); /* seq_cst: before the load, as the hub's store before its load */
		if (__builtin_expect(!atomic_load(hold), 1))
			return;
		atomic_store_explicit(in, 0, memory_order_release);
		while (atomic_load_explicit(hold, memory_order_acquire))
			sched_yield();
	}
}

static inline void vs_ring_leave(_Atomic uint32_t *in)
{
	atomic_store_explicit(in, 0, memory_order_release);
}

static inline void vs_ring_bell(uint32_t slot, uint32_t op)
{
	if (arena_ring(cl_arena(slot), slot & CL_SLOT_MASK, op))
		cl_kick(slot >> CL_POOL_SHIFT);
}

static inline void vs_poll_bell(uint32_t slot)
{
	vs_ring_bell(slot, SLOTOP_POLL);
}

struct vring {
	struct ring *c;       /* head and tail */
	struct ring *g;       /* the slot's geometry (off, size: the hub's) */
	uint8_t *base;        /* the bytes */
	uint64_t size;
	struct pair_dir *d;   /* same node: the wake-up words; else NULL */
	struct arena_slot *as;
};

/* The receive (tx 0) or send ring of a slot; -1 when a same-node
 * connection's segment cannot be had (its hub is gone). */
static inline int vring_of(uint32_t slot, struct arena_slot *as, int tx, struct vring *v)
{
	struct ring *r = tx ? &as->tx : &as->rx;
	uint32_t seg = as->pair_seg;
	uint64_t key;
	uint8_t *b;
	v->g = r;
	v->as = as;
	v->size = __atomic_load_n(&r->size, __ATOMIC_ACQUIRE); /* then its place (pair.c) */
	if (!seg) {
		v->c = r;
		v->base = arena_bytes(cl_arena(slot), r->off);
		v->d = NULL;
		return 0;
	}
	key = (uint64_t)as->gen << 32 | seg;
	if (atomic_load_explicit(&vs_lmap[slot].key, memory_order_acquire) == key)
		b = vs_lmap[slot].base;
	else if (!(b = vs_pair_map(slot, as, key)))
		return -1;
	v->d = &((struct pair_hdr *)b)->dir[(tx ? as->pair_tx : as->pair_rx) % PAIR_MAX_DIRS];
	v->c = &v->d->r;
	v->base = b + r->off;
	return 0;
}

/* The tail of v as its reader may take it, its head at HEAD: the counter,
 * or, on a link's receive ring (verbs), the placed tail past it (arena.h)
 * when that is within the ring past HEAD. */
static inline uint64_t vring_tail(const struct vring *v, uint64_t head)
{
	uint64_t t = ring_load(&v->c->tail), p;
	if (v->d || v->c != &v->as->rx)
		return t;
	p = placed_end(v->as, t, v->size);
	return p - head <= v->size ? p : t;
}

/* Bytes in a ring, as its reader sees them: 0 for impossible counters
 * (only the other side of a same-node connection could write those).  A
 * same-node ring may have grown since v was taken: its size is read again
 * after the counters, so a tail past the old size is not taken for one. */
static inline uint64_t vring_used(const struct vring *v)
{
	uint64_t head = ring_load(&v->c->head), used = vring_tail(v, head) - head;
	uint64_t size = v->d ? __atomic_load_n(&v->g->size, __ATOMIC_ACQUIRE) : v->size;
	return used > size ? 0 : used;
}

/* After a store the other side may be waiting for: if it said so, take its
 * word back and have the hub wake it. */
static inline void vs_other_bell(uint32_t slot, _Atomic uint64_t *ctr, uint64_t v, _Atomic uint32_t *want,
				 uint32_t op)
{
	/* both sides' store-then-load in one total order (seq_cst): either
	 * the sleeper sees the new counter or this sees its word */
	atomic_store(ctr, v);
	if (atomic_load(want) && atomic_exchange(want, 0))
		vs_ring_bell(slot, op);
}

/* Before sleeping: say so, then look once more (the other side looks at
 * the word after its store).  1 when the counter moved meanwhile. */
static inline int vs_want_wake(_Atomic uint32_t *want, _Atomic uint64_t *ctr, uint64_t old)
{
	atomic_store(want, 1);
	return atomic_load(ctr) != old;
}

#endif
