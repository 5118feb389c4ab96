/*
 * resize_tx.c - send rings that change size (resize.c has the receive
 * rings, the idle rings and the timers that walk them).
 *
 * A send ring grows to twice its size, up to tcp_wmem's maximum, in three
 * cases: a blocked writer whose reader stalled asks (MSG_TXGROW); the hub
 * watches the full ring of a nonblocking writer that waits in poll and
 * grows it once its reader took nothing for TX_STALL_MS; and a link's ring
 * grows with a fast flow, as the kernel's send buffer grows with the
 * connection's window.  The bytes not yet completed move to the new ring
 * at the same stream positions; writes already posted read the old ring
 * until they complete, so it stays until then.  An idle ring goes back to
 * its home size, only when empty with nothing in flight.
 */
#include "hub.h"

#include "log.h"

/* ---- a growth asked for ----
 * A blocked writer holds the ring's lock while it waits for the reply to
 * MSG_TXGROW: nobody writes meanwhile. */

void hsock_tx_old_done(struct hsock *s)
{
	if (s->tx_done < s->tx_old_until)
		return;
	hsock_ring_free(s->pool, s->pool->tx_alloc, s->tx_old_off, s->tx_old_size);
	s->tx_old_off = s->tx_old_size = 0;
}

/* A new send ring of SIZE for s at *off (and its key on verbs): 0 or -errno. */
static int tx_alloc(struct hub *h, struct hsock *s, uint64_t size, uint64_t *off, uint32_t *lkey)
{
	uint32_t unused;
	if (!(*off = arena_alloc(s->pool->tx_alloc, size)))
		return -ENOBUFS;
	if (!hsock_positional(s)) {
		int r = pool_keys(h, s->pool, *off, size, 0, lkey, &unused);
		if (r < 0) {
			arena_release(s->pool->tx_alloc, *off, size);
			return r;
		}
	}
	return 0;
}

static void tx_place(struct hsock *s, uint64_t off, uint64_t size, uint32_t lkey)
{
	s->tx_off = off;
	s->tx_size = size;
	s->tx_lkey = lkey;
	s->as->tx.off = off;
	__atomic_store_n(&s->as->tx.size, size, __ATOMIC_RELEASE);
}

/* Same node: the one ring both sides use, to SIZE (0: twice its size). */
static int pair_tx_grow(struct hub *h, struct hsock *s, uint64_t size)
{
	int r;
	if (s->state != HS_ESTABLISHED || !s->as || s->tx_fixed || s->fin_pending)
		return -EPERM;
	if ((r = hpair_grow(h, s, size)) > 0) {
		h->tx_grown++;
		hsock_resized_add(h, s);
	}
	return r;
}

int hsock_tx_grow(struct hub *h, struct hsock *s)
{
	uint64_t size = s->tx_size < ARENA_DEFAULT_RING ? ARENA_DEFAULT_RING : s->tx_size * 2, off, tail;
	uint32_t lkey = s->tx_lkey;
	int r;
	if (s->lp)
		return pair_tx_grow(h, s, 0);
	if (s->state != HS_ESTABLISHED || !s->as || !s->link || s->tx_fixed || s->fin_pending)
		return -EPERM;
	if (size > h->tx_max)
		return -ENOSPC;
	if (s->tx_old_size)
		return -EBUSY; /* the last one's old ring is still read */
	tail = ring_load(&s->as->tx.tail);
	if (!ring_sane(s->tx_done, tail, s->tx_size))
		return -EINVAL;
	if ((r = tx_alloc(h, s, size, &off, &lkey)) < 0)
		return r;
	ring_move(arena_bytes(s->pool->base, s->tx_off), s->tx_size, arena_bytes(s->pool->base, off), size,
		  s->tx_done, tail);
	if (s->tx_posted > s->tx_done) {
		s->tx_old_off = s->tx_off;
		s->tx_old_size = s->tx_size;
		s->tx_old_until = s->tx_posted;
	} else {
		hsock_ring_free(s->pool, s->pool->tx_alloc, s->tx_off, s->tx_size);
	}
	tx_place(s, off, size, lkey);
	hsock_resized_add(h, s);
	h->tx_grown++;
	return (int)size;
}

/* A same-node direction too small for the write its writer is making
 * (MSG_TXGROW with arg 1, txsize NEED: the bytes unread plus the write's,
 * vsock_grow.c) grows to the power of two that holds them, at least twice
 * its size and at most tcp_wmem's maximum: loopback's send buffer is that
 * maximum from the start, and kernel TCP takes such a write whole.  Not
 * when the writer fixed SO_SNDBUF, or the reader SO_RCVBUF. */
int hsock_tx_fit(struct hub *h, struct hsock *s, uint64_t need)
{
	struct hsock *r = s->lp ? h->socks[s->lp->sid[!s->lside]] : NULL;
	uint64_t size = arena_ring_size(need);
	int n;
	if (!r || r->lp != s->lp || r->rx_fixed)
		return -EPERM;
	if ((n = pair_tx_grow(h, s, size < h->tx_max ? size : h->tx_max)) > 0)
		h->tx_fit_grown++;
	return n;
}

/* An idle send ring back to its first size: only when empty, nothing in
 * flight, and no writer in it. */
void hsock_tx_shrink(struct hub *h, struct hsock *s)
{
	uint64_t off, size = hsock_ring_home(s);
	uint32_t lkey = s->tx_lkey;
	if (s->tx_size <= size || s->tx_fixed || s->tx_old_size || s->fin_pending ||
	    s->tx_posted != s->tx_done || ring_load(&s->as->tx.tail) != s->tx_done)
		return;
	if (!gate_take(&s->as->tx_in, &s->as->tx_hold))
		return;
	if (ring_load(&s->as->tx.tail) == s->tx_done && tx_alloc(h, s, size, &off, &lkey) == 0) {
		hsock_ring_free(s->pool, s->pool->tx_alloc, s->tx_off, s->tx_size);
		tx_place(s, off, size, lkey);
		h->tx_shrunk++;
		log_debug("socket %u: idle send ring back to %llu bytes", s->sid, (unsigned long long)size);
	}
	gate_give(&s->as->tx_hold);
}

/* A link's send ring also grows with its flow, as the kernel's send
 * buffer grows with the connection's window: it doubles, up to
 * tcp_wmem's maximum, after a turn (its size in completed bytes) that
 * took less than RING_HOLD_MS while a completion found it full: the
 * writer waited for completions, not for its reader.  The hub moves it
 * while the writer is out (it waits for room); else after the next turn. */
void hsock_tx_completed(struct hub *h, struct hsock *s, int full)
{
	uint64_t now;
	s->tx_full_seen |= full;
	if (s->tx_done - s->tx_ep_h0 < s->tx_size)
		return;
	now = sys_now_ns();
	if (s->tx_ep_t0 && s->tx_full_seen && now - s->tx_ep_t0 < RING_HOLD_MS * 1000000ull &&
	    gate_take(&s->as->tx_in, &s->as->tx_hold)) {
		hsock_tx_grow(h, s); /* or not: fixed, at the maximum, the old ring still read */
		gate_give(&s->as->tx_hold);
	}
	s->tx_ep_t0 = now;
	s->tx_ep_h0 = s->tx_done;
	s->tx_full_seen = 0;
}

/* A nonblocking writer that found its send ring full waits in poll or
 * epoll on its readiness descriptor, not in a call that could ask for a
 * larger ring: it says so (tx_blk, and a POLL bell), and the hub watches
 * the ring.  When its reader has taken nothing for TX_STALL_MS, the hub
 * grows it as for a blocked writer (the writer is out of the ring: it
 * waits) and makes the descriptor writable: the writer's next edge. */
#define TX_STALL_MS 10

void hsock_tx_watch_end(struct hub *h, struct hsock *s)
{
	if (!s->tx_watch)
		return;
	s->tx_watch = 0;
	h->ntx_watch--;
}

/* The head of s's send ring as its hub sees it: a link's completed
 * writes, or the same-node reader's head. */
static uint64_t tx_head(struct hsock *s)
{
	return s->lp ? ring_load(&hpair_ring(s, 1)->head) : s->tx_done;
}

void hsock_tx_watch(struct hub *h, struct hsock *s)
{
	if (s->tx_watch || (!s->lp && !s->link) || s->tx_fixed || s->fin_pending || s->tx_size >= h->tx_max ||
	    s->state != HS_ESTABLISHED || !s->as || !atomic_load(&s->as->tx_blk))
		return;
	s->tx_watch = 1;
	s->tx_watch_head = tx_head(s);
	s->tx_watch_ms = hub_now_ms();
	h->ntx_watch++;
	hsock_resized_add(h, s);
}

void hsock_tx_watch_look(struct hub *h, struct hsock *s, uint64_t now)
{
	int r;
	uint64_t head = s->as ? tx_head(s) : 0;
	/* a ring below the kernel's default (verbs starts small) grows at
	 * once, stalled reader or not */
	int small = s->tx_size < ARENA_DEFAULT_RING;
	if (!s->as || s->state != HS_ESTABLISHED || !atomic_load(&s->as->tx_blk) ||
	    (!small && (head != s->tx_watch_head || ring_load(&hsock_ring(s, 1)->tail) - head < s->tx_size))) {
		hsock_tx_watch_end(h, s); /* writable again, or its reader reads: not stalled */
		return;
	}
	if ((!small && now - s->tx_watch_ms < TX_STALL_MS) || !gate_take(&s->as->tx_in, &s->as->tx_hold))
		return;
	r = hsock_tx_grow(h, s); /* on the same node with the reader in or not (pair.c) */
	gate_give(&s->as->tx_hold);
	if (r == -EBUSY)
		return; /* the last growth's old ring is still read: later */
	hsock_tx_watch_end(h, s);
	if (r > 0 && (s->poll_ends & 2))
		hpoll_reflect(s);
}
