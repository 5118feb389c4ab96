/*
 * arena.h - the shared-memory region of a pool of processes.
 *
 * A pool is a process tree that inherited one arena through fork.  The hub
 * creates the arena (a memfd), hands it to the pool's first process, and is
 * the only allocator of what lies in it: socket slots and the bytes of their
 * rings.  Layout: header (with the doorbell bitmap, the ring from the pool
 * to the hub, and the request cells), the slot array, then ring bytes.
 *
 * Who writes what (everything else in a slot is plain data written once by
 * the hub before the slot is handed out):
 *   process: tx.tail, rx.head, pending_ops, doorbell bits, waiters, flags
 *            bits SLOTF_NONBLOCK, rx_credit_mark, the two locks, opts
 *   both:    rx_sig, tx_blk (readiness hints, see core/hub/ready.c)
 *   hub:     tx.head, rx.tail, state, error, wake_seq, acceptq, the other
 *            flags bits, addresses, ring geometry, pair_*, gen, rx_placed_tag
 *   the peer's hub (verbs, an RDMA WRITE): rx_placed, alone in its line
 * A request cell (struct arena_cell) is one process's way to the hub for
 * the requests that carry no descriptor: the process writes the request
 * and sets CELL_POSTED, the hub sets CELL_TAKEN, answers, and sets
 * CELL_DONE (core/hub/cell.c, core/proc/cell.c).
 * The hub never trusts a value a process writes: counters are checked with
 * ring_sane(), indices against nslots, geometry is taken from the hub's
 * own records, not read back, and a cell's owner is the hub's record of
 * which process it gave the cell to, never anything read from the cell.
 */
#ifndef RSHARE_ARENA_H
#define RSHARE_ARENA_H

#include <endian.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "addr.h"
#include "msg.h"
#include "ring.h"
#include "sys.h"

#define ARENA_MAGIC 0x31414e4552414852ULL  /* "RHARENA1" */
#define ARENA_VERSION 11
/* Slots and ring bytes are laid out for the most a pool can hold; the
 * memfd is sparse, so only the pages a socket touches cost memory. */
#define ARENA_MAX_SLOTS (1u << 18)
#define ARENA_DOORBELL_WORDS (ARENA_MAX_SLOTS / 64)
#define ARENA_SUMMARY_WORDS (ARENA_DOORBELL_WORDS / 64)
#define ARENA_DEFAULT_BYTES (64ull << 30)
#define ARENA_MIN_RING 4096u
#define ARENA_MAX_RING (4u << 20)
#define ARENA_DEFAULT_RING (128u << 10)
/* request cells: one a process, for the first ARENA_CELLS processes of a
 * pool at a time (the others ask over their unix connection only) */
#define ARENA_CELLS 1024u
#define ARENA_CELL_WORDS (ARENA_CELLS / 64)

enum slot_state {
	SLOT_FREE = 0,
	SLOT_CONNECTING,   /* CONNECT sent, waiting for ACCEPT/REFUSE */
	SLOT_ESTABLISHED,
	SLOT_LISTENING,
	SLOT_FALLBACK,     /* no rshare peer: the process uses kernel TCP */
	SLOT_CLOSED,       /* reset, refused, or the link was lost: see error */
};

/* flags */
#define SLOTF_RX_FIN   0x1u  /* peer sent FIN: EOF after the ring drains */
#define SLOTF_TX_SHUT  0x2u  /* shutdown(SHUT_WR) done here */
#define SLOTF_RX_SHUT  0x4u  /* shutdown(SHUT_RD) done here */
#define SLOTF_NONBLOCK 0x8u  /* O_NONBLOCK on the shared open file */
#define SLOTF_RESET    0x20u  /* the connection was reset (readable, as the kernel's) */
#define SLOTF_SMALL    0x40u  /* its rings start below ARENA_DEFAULT_RING and grow to it
				* when used (verbs): SO_RCVBUF/SO_SNDBUF report that */
#define SLOTF_PAIR_POOL 0x80u /* same node, the other end's slot in this pool too: its
				* last close waits for the hub, which marks that end first */

/* pending_ops: what a process asks of the hub through the doorbell */
#define SLOTOP_TX     0x1u   /* tx.tail moved: send */
#define SLOTOP_CREDIT 0x2u   /* rx.head moved: return credit */
#define SLOTOP_POLL   0x4u   /* readiness descriptor: look again (see rx_sig) */

/* The socket options a program set on a connection, as the kernel would
 * answer them back (preload/sockopt.c: its table says which bit and which
 * value each option has).  Written and read by processes only; the hub
 * clears them when it hands the slot out. */
#define SLOT_OPT_INTS 12
/* the places of the options the hub reads (core/hub/resume.c: when a
 * connection without a link gives up) */
#define SLOT_OPTB_KEEPALIVE 0      /* bit of bools: SO_KEEPALIVE */
#define SLOT_OPTI_KEEPIDLE 4       /* ival[]: TCP_KEEPIDLE, seconds */
#define SLOT_OPTI_KEEPINTVL 5      /* TCP_KEEPINTVL, seconds */
#define SLOT_OPTI_KEEPCNT 6        /* TCP_KEEPCNT */
#define SLOT_OPTI_USER_TIMEOUT 7   /* TCP_USER_TIMEOUT, ms */
#define SLOT_OPTI_RCVLOWAT 3       /* SO_RCVLOWAT, bytes */
#define SLOT_OPTB_ZEROCOPY 7       /* bit of bools: SO_ZEROCOPY (core/proc/vsock_errq.c) */
struct slot_opts {
	_Atomic uint32_t set;      /* bit per option of the table: the program set it */
	_Atomic uint32_t bools;    /* the values of the on/off ones */
	int32_t ival[SLOT_OPT_INTS]; /* the values of the int ones */
	int32_t linger[2];         /* SO_LINGER: l_onoff, l_linger */
	int64_t tmo_us[2];         /* SO_RCVTIMEO, SO_SNDTIMEO, microseconds */
};

struct arena_slot {
	_Atomic uint32_t wake_seq;    /* futex word: bumped by the hub on every event (and rx_seq, tx_seq below) */
	_Atomic uint32_t waiters;     /* threads sleeping on wake_seq */
	/* A recv (send) sleeps on a word of its own, bumped by the hub with
	 * wake_seq for every event but room in the send ring (bytes that
	 * arrived): so a thread blocked reading is not woken by the
	 * completions of the writes of another, nor the other way round,
	 * as on kernel TCP.  rx_waiters (tx_waiters) count its sleepers. */
	_Atomic uint32_t rx_seq, rx_waiters;
	_Atomic uint32_t tx_seq, tx_waiters;
	_Atomic uint32_t state;       /* enum slot_state */
	_Atomic int32_t error;        /* pending SO_ERROR, consumed by the process */
	_Atomic uint32_t flags;       /* SLOTF_* */
	_Atomic uint32_t pending_ops; /* SLOTOP_* */
	_Atomic uint32_t acceptq;     /* listener: connections ready to accept */
	uint32_t gen;                 /* generation, bumped on every reuse */
	struct ring rx;               /* hub produces, process consumes */
	struct ring tx;               /* process produces, hub consumes */
	_Atomic uint64_t rx_credit_mark; /* rx.head when credit was last asked */
	/* the window the peer holds to while a smaller receive ring is in the
	 * making (core/hub/resize.c), 0 when it is the ring's size: credit
	 * goes by the quarter of the smaller one, or the peer could wait on
	 * bytes the reader took */
	_Atomic uint32_t rx_credit_size;
	/* readiness descriptor (core/hub/ready.c): rx_sig is 1 while a byte the hub
	 * wrote may sit in it; tx_blk is 1 while a process filled it because
	 * the send ring was full */
	_Atomic uint32_t rx_sig, tx_blk;
	/* same node (pair.h): the pair segment (0: none, the rings are in
	 * this arena) and the directions this socket sends and receives on;
	 * written by the hub before the state says ESTABLISHED */
	uint32_t pair_seg, pair_tx, pair_rx;
	union sockaddr_any local, peer;
	pthread_mutex_t rx_lock, tx_lock; /* robust, process-shared */
	/* a ring the hub moves of its own accord (core/hub/resize.c): the
	 * reader (writer) that holds rx_lock (tx_lock) sets rx_in (tx_in)
	 * while it uses the ring's geometry and bytes; the hub sets rx_hold
	 * (tx_hold), then moves the ring only if the process is not in */
	_Atomic uint32_t rx_in, rx_hold, tx_in, tx_hold;
	struct slot_opts opts;
	/* verbs: which ring the receive geometry is, as the tag the peer's
	 * placed tails for it carry (placed_tag()) */
	_Atomic uint32_t rx_placed_tag;
	/* verbs: where the peer's last write ended, written by the peer's hub
	 * with an RDMA WRITE after the write's bytes (RC places them in
	 * order), so that a reader that polls sees data before its own hub
	 * has looked: PLACED_POS_BITS of stream position under the ring's tag.
	 * The peer can write this line only (its own registration), and the
	 * reader believes it only within its ring's window past the hub's
	 * tail (core/proc/vsock_int.h: vring_tail) */
	_Atomic uint64_t rx_placed __attribute__((aligned(64)));
	/* The rest of rx_placed's line (the peer's registration is its 8
	 * bytes alone), so that the slot keeps its size: */
	/* MSG_ZEROCOPY (core/proc/vsock_errq.c): the number of the next send
	 * (high 32 bits) and how many of the sends before it have their
	 * notification waiting on the error queue (low 32); processes only */
	_Atomic uint64_t zc;
	/* the processes that hold the socket, as the hub counts them (it
	 * writes, processes read): a close with SO_LINGER waits only where
	 * it drops the last (core/proc/vsock.c: vs_linger) */
	_Atomic uint32_t holders;
	/* SO_PEEK_OFF (Linux 6.10 on): where the next MSG_PEEK starts past
	 * the reader, -1 when off (the hub's at hand-out); the readers move
	 * it, under rx_lock (core/proc/vsock_data.c: recv_call) */
	_Atomic int32_t peek_off;
	/* listener: the processes of its pool asleep in a blocking accept
	 * of it, as the processes count themselves (those with a request
	 * cell, whose acc_sleep names the listener meanwhile); a process
	 * back in accept leaves a connection they were woken for to them
	 * for a while (core/proc/vsock_accept.c: vs_accept_defer) */
	_Atomic uint32_t acc_sleepers;
} __attribute__((aligned(64)));
/* ARENA_MAX_SLOTS of them, a ring and the header fit in the least arena
 * (RSHARE_ARENA_MB 128, rshared(8)) */
_Static_assert(sizeof(struct arena_slot) <= 448, "the slots outgrow a 128 MiB arena");

/* The bytes a receive ring of SIZE holds before it reads as readable:
 * SO_RCVLOWAT (1 unless set), but at most seven eighths of the ring, which
 * is readable whatever the mark, as a kernel socket whose receive memory
 * is that full.  The process writes the mark; the hub only bounds it. */
static inline uint64_t slot_rcvlowat(const struct arena_slot *as, uint64_t size)
{
	int32_t v = __atomic_load_n(&as->opts.ival[SLOT_OPTI_RCVLOWAT], __ATOMIC_RELAXED);
	uint64_t cap = size - size / 8;
	if (v <= 1 || cap <= 1)
		return 1;
	return (uint64_t)v < cap ? (uint64_t)v : cap;
}

/* A MSG_ZEROCOPY notification waits on the error queue of slot AS
 * (core/proc/vsock_errq.c): POLLERR, and the readiness descriptor reads
 * as readable so that epoll reports it (core/hub/ready.c). */
static inline int slot_errq_waiting(struct arena_slot *as)
{
	return (uint32_t)atomic_load_explicit(&as->zc, memory_order_acquire) != 0;
}

/* A placed tail: the low PLACED_POS_BITS of the position, the ring's tag
 * above them.  The tag names the connection's receiving socket and its
 * ring's number (1 at the start, one more at every switch of the ring), so
 * that a tail for a ring the reader has not moved to yet, or a late one
 * for an earlier connection of the slot, is not taken for this ring's. */
#define PLACED_POS_BITS 48
#define PLACED_POS_MASK ((1ull << PLACED_POS_BITS) - 1)
static inline uint32_t placed_tag(uint32_t imm, uint32_t ring_no)
{
	return ((imm * 2654435761u) >> 16 ^ ring_no) & 0xffffu;
}

/* Where the placed tail of slot AS ends, for a ring of SIZE whose bytes up
 * to BASE are known to be there: at most SIZE past BASE, and BASE when the
 * word is another ring's, older, or nonsense. */
static inline uint64_t placed_end(struct arena_slot *as, uint64_t base, uint64_t size)
{
	uint32_t tag = atomic_load_explicit(&as->rx_placed_tag, memory_order_relaxed);
	uint64_t w, d;
	if (!tag)
		return base; /* none (soft, same node, or off) */
	w = be64toh(atomic_load_explicit(&as->rx_placed, memory_order_acquire));
	if ((uint32_t)(w >> PLACED_POS_BITS) != tag)
		return base;
	d = (w - base) & PLACED_POS_MASK;
	return d <= size ? base + d : base;
}

/* A request cell: the futex word `state` goes IDLE (or DONE) -> POSTED
 * (the process, once req is written) -> TAKEN (the hub, before it reads
 * req) -> DONE (the hub, once rep is written; also for a request that asks
 * no answer).  A process waits for DONE in `waiters` only while asleep. */
enum cell_state { CELL_IDLE = 0, CELL_POSTED, CELL_TAKEN, CELL_DONE };
struct arena_cell {
	_Atomic uint32_t state;
	_Atomic uint32_t waiters;
	/* the listener (its slot + 1) in whose accept the process sleeps,
	 * counted in its acc_sleepers, 0: none; the hub takes the count back
	 * for a process that ends asleep (core/hub/proc.c) */
	_Atomic uint32_t acc_sleep;
	struct msg_req req;
	struct msg_rep rep;
} __attribute__((aligned(64)));

struct arena_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t nslots;
	uint64_t bytes;
	uint64_t slots_off;
	uint64_t data_off;
	uint64_t pool_id;
	_Atomic uint32_t hub_sleeping;  /* processes kick the pool eventfd only then */
	_Atomic uint32_t hub_dead;      /* set by a process that saw the hub die */
	_Atomic uint32_t slots_hi;      /* hub: no slot at or above it was ever used */
	/* a bell is a bit per slot, and a bit per word of bells in the
	 * summary, so that the hub reads only the words that rang */
	_Atomic uint64_t summary[ARENA_SUMMARY_WORDS] __attribute__((aligned(64)));
	_Atomic uint64_t doorbell[ARENA_DOORBELL_WORDS] __attribute__((aligned(64)));
	/* the cells' bells: a bit per cell, and a bit per word of them */
	_Atomic uint64_t cell_summary __attribute__((aligned(64)));
	_Atomic uint64_t cell_bell[ARENA_CELL_WORDS];
	struct arena_cell cells[ARENA_CELLS];
};

static inline struct arena_slot *arena_slot(void *base, uint32_t i)
{
	struct arena_hdr *h = base;
	return (struct arena_slot *)((uint8_t *)base + h->slots_off) + i;
}

static inline uint8_t *arena_bytes(void *base, uint64_t off)
{
	return (uint8_t *)base + off;
}

/* What an event of slot AS can help: every waiter (ARENA_WAKE_ALL), or
 * all but those asleep in a send (ARENA_WAKE_RX: bytes arrived) or in a
 * recv (ARENA_WAKE_TX: room in the send ring).  Fills W with the futex
 * words to move and N with their sleepers' counts; returns how many. */
enum { ARENA_WAKE_ALL, ARENA_WAKE_RX, ARENA_WAKE_TX };
static inline int arena_wake_words(struct arena_slot *as, int what, _Atomic uint32_t *w[3],
				   _Atomic uint32_t *n[3])
{
	int k = 0;
	w[k] = &as->wake_seq, n[k++] = &as->waiters;
	if (what != ARENA_WAKE_TX)
		w[k] = &as->rx_seq, n[k++] = &as->rx_waiters;
	if (what != ARENA_WAKE_RX)
		w[k] = &as->tx_seq, n[k++] = &as->tx_waiters;
	return k;
}

/* Every thread asleep on slot AS woken (all three of its futex words
 * move): for what a process itself does to a socket (a shutdown), and
 * the hub's death, which every waiter must see. */
static inline void arena_wake_all(struct arena_slot *as)
{
	_Atomic uint32_t *w[3], *n[3];
	int k = arena_wake_words(as, ARENA_WAKE_ALL, w, n);
	for (int i = 0; i < k; i++) {
		atomic_fetch_add(w[i], 1);
		sys_futex(w[i], FUTEX_WAKE, INT_MAX, NULL);
	}
}

/* Ring a slot's doorbell; returns nonzero when the hub sleeps and needs a kick. */
static inline int arena_ring(void *base, uint32_t i, uint32_t op)
{
	struct arena_hdr *h = base;
	struct arena_slot *s = arena_slot(base, i);
	atomic_fetch_or_explicit(&s->pending_ops, op, memory_order_release);
	atomic_fetch_or_explicit(&h->doorbell[i / 64], 1ull << (i % 64), memory_order_seq_cst);
	atomic_fetch_or_explicit(&h->summary[i / 4096], 1ull << (i / 64 % 64), memory_order_seq_cst);
	return atomic_load_explicit(&h->hub_sleeping, memory_order_seq_cst) != 0;
}

/* Ring cell I's bell; returns nonzero when the hub sleeps and needs a kick. */
static inline int arena_ring_cell(void *base, uint32_t i)
{
	struct arena_hdr *h = base;
	atomic_fetch_or_explicit(&h->cell_bell[i / 64], 1ull << (i % 64), memory_order_seq_cst);
	atomic_fetch_or_explicit(&h->cell_summary, 1ull << (i / 64), memory_order_seq_cst);
	return atomic_load_explicit(&h->hub_sleeping, memory_order_seq_cst) != 0;
}

/* The ring size for ASKED bytes: a power of two within
 * [ARENA_MIN_RING, ARENA_MAX_RING], ARENA_DEFAULT_RING for 0. */
static inline uint32_t arena_ring_size(uint64_t asked)
{
	uint64_t s = ARENA_MIN_RING;
	if (asked == 0)
		return ARENA_DEFAULT_RING;
	while (s < asked && s < ARENA_MAX_RING)
		s <<= 1;
	return (uint32_t)s;
}

#endif
