/*
 * resize.c - rings that change size, as the kernel's socket buffers do:
 * send rings that grow under a writer whose reader stalled (blocked in
 * send, or waiting in poll for room) or with a fast flow on a link,
 * receive rings that grow with a fast reader or when the credit is what
 * holds a connection back, both back to their home size when the
 * connection idles, and the exchange that makes the
 * sender's credit follow the receiver's ring.  A ring's home size is the
 * kernel's default buffer, except on verbs, where rings are registered
 * memory: there a ring starts small and goes to the default at its first
 * need, full or out of credit, stalled reader or not (hsock_ring_home).
 *
 * A ring keeps its stream positions when it moves: the bytes still in it
 * are copied to the new ring at the same positions, and only its place
 * (the slot's off and size, the size stored last) changes.  A move the
 * process did not ask for waits until the process is not using the ring:
 * the process sets rx_in or tx_in while it does (vsock_data.c), the hub
 * sets rx_hold or tx_hold and moves only when the other word is clear,
 * else it tries again soon.  A process that never steps out only keeps
 * its own rings as they are.
 *
 * A receive ring on a link changes in two steps, so that the peer never
 * writes where we do not expect it.  We offer the new ring (RING: size,
 * and on verbs its address and key).  The peer's hub answers RING_ACK
 * with the stream position Q from which it writes to the new ring, once
 * the bytes it has in flight fit in the new size (at once when it grows);
 * until then it holds to the smaller of the two windows.  When RING_ACK
 * comes, every write before Q has arrived (the link keeps order), so we
 * move [head, Q) into the new ring and let the reader see it; on verbs
 * the writes from Q on landed in the new ring already, so their tail is
 * not shown before the move.  On soft, where the hub places each write
 * itself, a ring that grows moves at once, before it is offered.
 * Credit is checked against the larger ring while one is in the making.
 */
#include "hub.h"

#include "log.h"
#include "tag.h"

/* a receive ring's growth: credits an epoch, and how many of them must
 * find the ring what held the connection back (hsock_rx_credited) */
#define RX_EPOCH 16
#define RX_GROW_HITS 4
/* ... or the time of its flow that a ring should hold (both directions) */
#define RING_HOLD_MS 1
/* an idle connection: nothing moved for this long, its rings go back */
#define RESIZE_IDLE_MS 1000

/* s onto the list that the ring timers walk (hub_ring_timers): a ring
 * above its home size, or a move or watch under way (resized_keep) */
static void resized_add(struct hub *h, struct hsock *s)
{
	if (!s->on_resized && sid_push(&h->resized, &h->nresized, &h->resized_cap, s->sid) == 0)
		s->on_resized = 1;
}

/* ---- a send ring that grows ----
 * A writer that finds its send ring full and its reader stalled asks for
 * one twice the size (MSG_TXGROW), up to tcp_wmem's maximum.  The bytes
 * not yet completed move to the new ring; the writes already posted read
 * the old ring until they complete, so it stays until then.  The writer
 * holds the ring's lock and waits for the reply: nobody writes meanwhile. */

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

int hsock_tx_grow(struct hub *h, struct hsock *s)
{
	uint64_t size = s->tx_size < ARENA_DEFAULT_RING ? ARENA_DEFAULT_RING : s->tx_size * 2, off, tail;
	uint32_t lkey = s->tx_lkey;
	int r;
	if (s->state == HS_ESTABLISHED && s->lp && s->as && !s->tx_fixed && !s->fin_pending) {
		r = hpair_grow(h, s); /* same node: the one ring both sides use */
		if (r > 0) {
			h->tx_grown++;
			resized_add(h, s);
		}
		return r;
	}
	if (s->state != HS_ESTABLISHED || s->lp || !s->as || !s->link || s->tx_fixed || s->fin_pending)
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
	resized_add(h, s);
	h->tx_grown++;
	return (int)size;
}

/* An idle send ring back to its first size: only when empty, nothing in
 * flight, and no writer in it. */
static void tx_shrink(struct hub *h, struct hsock *s)
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
	now = hub_now_ns();
	if (s->tx_ep_t0 && s->tx_full_seen && now - s->tx_ep_t0 < RING_HOLD_MS * 1000000ull && !s->lp &&
	    !s->tx_fixed && s->tx_size < h->tx_max && !s->tx_old_size && gate_take(&s->as->tx_in, &s->as->tx_hold)) {
		hsock_tx_grow(h, s);
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

static void watch_end(struct hub *h, struct hsock *s)
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
	resized_add(h, s);
}

static void watch_look(struct hub *h, struct hsock *s, uint64_t now)
{
	int r;
	uint64_t head = s->as ? tx_head(s) : 0;
	/* a ring below the kernel's default (verbs starts small) grows at
	 * once, stalled reader or not */
	int small = s->tx_size < ARENA_DEFAULT_RING;
	if (!s->as || s->state != HS_ESTABLISHED || !atomic_load(&s->as->tx_blk) ||
	    (!small && (head != s->tx_watch_head || ring_load(&hsock_ring(s, 1)->tail) - head < s->tx_size))) {
		watch_end(h, s); /* writable again, or its reader reads: not stalled */
		return;
	}
	if ((!small && now - s->tx_watch_ms < TX_STALL_MS) || !gate_take(&s->as->tx_in, &s->as->tx_hold))
		return;
	r = hsock_tx_grow(h, s); /* on the same node with the reader in or not (pair.c) */
	gate_give(&s->as->tx_hold);
	if (r == -EBUSY)
		return; /* the last growth's old ring is still read: later */
	watch_end(h, s);
	if (r > 0 && (s->poll_ends & 2))
		hpoll_reflect(s);
}

/* ---- a receive ring that changes size ---- */

/* Move the receive ring of s to the one waiting (rx_next_*), with the
 * unread bytes up to END; 1 done, 0 the reader is in (try again). */
static int rx_move(struct hub *h, struct hsock *s, uint64_t end)
{
	struct arena_slot *as = s->as;
	uint64_t unread;
	if (!gate_take(&as->rx_in, &as->rx_hold))
		return 0;
	if (s->rx_next_size > s->rx_size)
		h->rx_grown++;
	else
		h->rx_shrunk++;
	/* never more than the old ring holds (a head its process scribbled:
	 * nothing) nor the new one takes (more than a correct peer sends) */
	unread = end - ring_load(&as->rx.head);
	if (unread > s->rx_size)
		unread = 0;
	if (unread > s->rx_next_size)
		unread = s->rx_next_size;
	ring_move(arena_bytes(s->pool->base, s->rx_off), s->rx_size, arena_bytes(s->pool->base, s->rx_next_off),
		  s->rx_next_size, end - unread, end);
	hsock_ring_free(s->pool, s->pool->rx_alloc, s->rx_off, s->rx_size);
	s->rx_off = s->rx_next_off;
	s->rx_size = s->rx_next_size;
	s->rx_rkey = s->rx_next_rkey;
	s->rx_next_off = s->rx_next_size = 0;
	as->rx.off = s->rx_off;
	__atomic_store_n(&as->rx.size, s->rx_size, __ATOMIC_RELEASE);
	/* the placed tails the reader takes now are the new ring's */
	s->rx_ring_no++;
	if (s->placed_rkey)
		atomic_store(&as->rx_placed_tag, placed_tag(tag_imm(s->sid, s->gen), s->rx_ring_no));
	gate_give(&as->rx_hold);
	if (s->rx_size > hsock_ring_home(s))
		resized_add(h, s);
	log_debug("socket %u: receive ring now %llu bytes", s->sid, (unsigned long long)s->rx_size);
	return 1;
}

/* The switch that RING_ACK allowed, once the reader is out; its held tail
 * shown then.  1 when done. */
static int rx_switch(struct hub *h, struct hsock *s)
{
	uint64_t end;
	if (!s->link)
		return 0; /* its link was lost: once a new one is there (resume.c) */
	end = hsock_positional(s) ? s->rx_expect : s->rx_switch_at;
	/* verbs, after a lost link: the bytes before the switch, sent again,
	 * land in the old ring first (resume.c) */
	if (!hsock_positional(s) && s->rx_tail < s->rx_switch_at)
		return 0;
	if (!rx_move(h, s, end))
		return 0;
	s->rx_switch = 0;
	h->nswitch_waiting--;
	s->rx_room = s->rx_size;
	atomic_store(&s->as->rx_credit_size, 0);
	ring_store(&s->as->rx.tail, s->rx_tail);
	if (s->rx_fin) /* a FIN that came while the tail was held (route.c) */
		atomic_fetch_or(&s->as->flags, SLOTF_RX_FIN);
	/* what the reader took since the last quarter it asked credit for
	 * was a quarter of the old ring, maybe more than the new one holds:
	 * the peer learns it now, or it could wait on an empty ring */
	hsock_credit(h, s);
	hsock_wake(s);
	return 1;
}

/* Offer the peer a receive ring of SIZE for s: 1 when it went out. */
static int rx_offer(struct hub *h, struct hsock *s, uint64_t size)
{
	struct wire_ctl c = {.op = CTL_RING, .dst = s->peer, .src = tag_imm(s->sid, s->gen), .ring = (uint32_t)size};
	uint64_t off;
	uint32_t rkey = 0, unused;
	/* never over a ring still in the making (a RING_ACK for a socket
	 * closed since leaves it to the socket's end: hsock_on_ring_ack) */
	if (s->state != HS_ESTABLISHED || !s->as || s->lp || !s->link || s->link->state != LINK_UP || s->resuming || s->rx_fixed ||
	    s->rx_offered || s->rx_switch || s->rx_next_off || hsock_drops_data(s) || s->rx_fin || size == s->rx_size)
		return 0;
	if (!(off = arena_alloc(s->pool->rx_alloc, size)))
		return 0;
	if (!hsock_positional(s) && pool_keys(h, s->pool, off, size, 1, &unused, &rkey) < 0) {
		arena_release(s->pool->rx_alloc, off, size);
		return 0;
	}
	s->rx_next_off = off;
	s->rx_next_size = size;
	s->rx_next_rkey = rkey;
	if (hsock_positional(s) && size > s->rx_size) {
		/* soft, growing: the hub places every write itself, so the
		 * ring moves now, and the peer only learns of more credit */
		if (!rx_move(h, s, s->rx_expect)) {
			hsock_ring_free(s->pool, s->pool->rx_alloc, off, size);
			s->rx_next_off = s->rx_next_size = 0;
			return 0;
		}
	} else {
		c.val = hsock_positional(s) ? 0 : hsock_ring_addr(s, off);
		c.rkey = rkey;
	}
	s->rx_room = size > s->rx_size ? size : s->rx_size;
	s->rx_offered = 1;
	if (size < s->rx_size) /* the peer holds to the smaller window from now */
		atomic_store(&s->as->rx_credit_size, (uint32_t)size);
	/* the peer switches once what it has in flight fits: it must know
	 * all the reader took, not only up to its last quarter */
	if (s->rx_next_off)
		hsock_credit(h, s);
	link_send_ctl(s->link, &c, 0);
	return 1;
}

/* Whether a receive ring should grow, by epochs of RX_EPOCH credits, as
 * the kernel's receive buffer does under a fast reader: a ring doubles
 * after an epoch in which it held less than RING_HOLD_MS of the flow (the
 * reader took more than a ring in that time: so small a ring turns over
 * in a sliver of a time slice, and every quarter of it is one more
 * credit, one more wake-up of the writer's side), or in which,
 * RX_GROW_HITS times, the peer had used all of its credit and the
 * reader had taken half of it back before more could come (the ring,
 * not the reader, held the connection back: a slow link).  Up to
 * tcp_rmem's maximum; back to the home size when the connection idles. */
void hsock_rx_credited(struct hub *h, struct hsock *s)
{
	uint64_t head = hsock_rx_head(s, NULL), now, rate;
	if (s->rx_limited && s->rx_size < ARENA_DEFAULT_RING && ARENA_DEFAULT_RING <= h->rx_max) {
		/* a ring below the kernel's default (verbs: it starts small) goes
		 * there the first time the peer ran out of credit */
		s->rx_limited = 0;
		rx_offer(h, s, ARENA_DEFAULT_RING);
		return;
	}
	if (s->rx_limited && s->rx_tail - head <= s->rx_size / 2)
		s->rx_hits++;
	s->rx_limited = 0;
	if (++s->rx_ep_n < RX_EPOCH)
		return;
	now = hub_now_ns();
	rate = now > s->rx_ep_t0 ? (head - s->rx_ep_h0) * 1000000u / (now - s->rx_ep_t0) : 0; /* bytes a ms */
	if (s->rx_ep_t0 && s->rx_size < h->rx_max && (rate * RING_HOLD_MS > s->rx_size || s->rx_hits >= RX_GROW_HITS))
		rx_offer(h, s, s->rx_size * 2);
	s->rx_ep_t0 = now;
	s->rx_ep_h0 = head;
	s->rx_ep_n = s->rx_hits = 0;
}

void hsock_on_ring_ack(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	/* every write before the position came before this (the link
	 * keeps order), and none after it; but a socket closed meanwhile
	 * (its holder died, say) drops what arrives (data.c, rx_check), so
	 * its position tells nothing, and the link stays */
	int dropping = hsock_drops_data(s) || !s->as;
	const char *why = !s->rx_offered ? "RING_ACK without RING"
			  : dropping     ? NULL
			  : c->val != s->rx_tail ? "RING_ACK at another position"
			  : s->rx_next_off && c->val > s->credit_sent + s->rx_next_size ? "RING_ACK beyond the new ring"
											 : NULL;
	if (why) {
		h->malformed++;
		hub_link_fail(&l->x, why);
		return;
	}
	s->rx_offered = 0;
	if (!s->rx_next_off) { /* it moved already */
		s->rx_room = s->rx_size;
		return;
	}
	/* nobody reads: the new ring goes with the socket (hsock_rings_forget),
	 * once the peer writes no more (on verbs it may be writing there now,
	 * and a ring no longer registered would cost the link) */
	if (dropping)
		return;
	s->rx_switch_at = c->val;
	s->rx_switch = 1;
	h->nswitch_waiting++;
	if (!rx_switch(h, s))
		resized_add(h, s);
}

/* A lost link took the RING_ACK of our offer, or the peer never had it:
 * the peer's RESUME says which ring it writes to (RING's size: it
 * switched, at position AT) and the offer ends as its RING_ACK would, or
 * is withdrawn.  On verbs the writes after AT went to the new ring, so
 * the reader cannot be past AT; soft places every write by position in
 * the ring it has, so writes after AT whose completions went with the
 * link, as the RING_ACK's did, were counted (hsock_suspend) and may have
 * been read there: the move takes what is unread.  0, or -1 when AT
 * cannot be. */
int hsock_offer_settle(struct hub *h, struct hsock *s, uint32_t ring, uint64_t at)
{
	if (!s->rx_offered)
		return 0;
	s->rx_offered = 0;
	if (!s->rx_next_off) { /* soft, grown: it moved already */
		s->rx_room = s->rx_size;
		return 0;
	}
	if (ring == s->rx_next_size) {
		if (s->as && ((!hsock_positional(s) && at < ring_load(&s->as->rx.head)) || at > s->credit_sent + s->rx_next_size))
			return -1;
		s->rx_switch_at = at;
		s->rx_switch = 1;
		h->nswitch_waiting++;
		resized_add(h, s);
		return 0;
	}
	hsock_ring_free(s->pool, s->pool->rx_alloc, s->rx_next_off, s->rx_next_size);
	s->rx_next_off = s->rx_next_size = 0;
	s->rx_room = s->rx_size;
	if (s->as)
		atomic_store(&s->as->rx_credit_size, 0);
	return 0;
}

/* ---- the peer's receive ring ---- */

void hsock_on_ring(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	if (s->peer_next || (!(l->x.xp->ops->flags & XP_POSITIONAL) && !c->val)) {
		h->malformed++;
		hub_link_fail(&l->x, s->peer_next ? "RING while one is under way" : "RING without an address");
		return;
	}
	s->peer_next_ring = c->ring;
	s->peer_next_raddr = c->val;
	s->peer_next_rkey = c->rkey;
	s->peer_next = 1;
	hsock_peer_switch(s);
	hsock_tx(h, s);
}

void hsock_peer_switch(struct hsock *s)
{
	struct wire_ctl c = {.op = CTL_RING_ACK, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
	if (!s->peer_next || !s->link || s->link->state != LINK_UP || s->tx_posted - s->peer_head > s->peer_next_ring)
		return;
	s->peer_next = 0;
	s->peer_old_raddr = s->peer_raddr;
	s->peer_old_ring = s->peer_ring;
	s->peer_old_rkey = s->peer_rkey;
	s->peer_switch_at = s->tx_posted;
	s->peer_ring_no++;
	s->peer_ring = s->peer_next_ring;
	s->peer_raddr = s->peer_next_raddr;
	s->peer_rkey = s->peer_next_rkey;
	c.val = s->tx_posted; /* before any write to the new ring, after every one to the old */
	link_send_ctl(s->link, &c, 0);
}

void hsock_rings_forget(struct hsock *s)
{
	watch_end(the_hub, s);
	if (s->rx_next_off)
		hsock_ring_free(s->pool, s->pool->rx_alloc, s->rx_next_off, s->rx_next_size);
	s->rx_next_off = s->rx_next_size = 0;
	if (s->rx_switch)
		the_hub->nswitch_waiting--;
	s->rx_switch = 0;
}

/* An idle same-node direction (the one s writes on) back to its first
 * size: empty, and neither its writer nor its reader in it. */
static void pair_shrink(struct hub *h, struct hsock *s)
{
	struct lpair *lp = s->lp;
	struct hsock *r = h->socks[lp->sid[!s->lside]];
	struct ring *c = hpair_ring(s, 1);
	if (lp->size[s->lside] <= ARENA_DEFAULT_RING || !r || r->lp != lp || !r->as ||
	    ring_load(&c->head) != ring_load(&c->tail) || !gate_take(&s->as->tx_in, &s->as->tx_hold))
		return;
	if (gate_take(&r->as->rx_in, &r->as->rx_hold)) {
		if (ring_load(&c->head) == ring_load(&c->tail) && hpair_move(h, s, ARENA_DEFAULT_RING) > 0)
			h->tx_shrunk++;
		gate_give(&r->as->rx_hold);
	}
	gate_give(&s->as->tx_hold);
}

/* ---- the memory of idle rings ----
 * A connection whose data moved has pages in its rings; once it idles with
 * both rings empty, the pages go back to the system (punched out of the
 * arena's memfd; the rings keep their place and size, and the next byte
 * touches a page again), so an idle connection costs its slot and not its
 * rings.  Not for rings a NIC may write (pinned: verbs).  The reader and
 * the writer are kept out as for a move (the gate words).  On the same
 * node the hub does not see bytes move: it looks at every connection once
 * a second, and punches a direction idle at a new tail (punch.c). */
void hsock_touched(struct hub *h, struct hsock *s)
{
	if (!s->touched) {
		s->touched = 1;
		resized_add(h, s);
	}
}

/* ---- timers ---- */

/* An idle connection's rings back to their first size. */
static void idle_look(struct hub *h, struct hsock *s)
{
	uint64_t tx = s->lp ? ring_load(&hpair_ring(s, 1)->tail) : s->tx_posted;
	if (s->rx_tail != s->idle_rx || tx != s->idle_tx || !s->idle_seen) {
		s->idle_rx = s->rx_tail;
		s->idle_tx = tx;
		s->idle_seen = 1;
		return;
	}
	if (s->lp) {
		pair_shrink(h, s);
		if (s->lp->size[s->lside] <= ARENA_DEFAULT_RING)
			punch_pair(h, s);
		return;
	}
	if (s->rx_size > hsock_ring_home(s) && ring_load(&s->as->rx.head) == s->rx_tail)
		rx_offer(h, s, hsock_ring_home(s));
	tx_shrink(h, s);
	if (s->touched && s->rx_size <= ARENA_DEFAULT_RING && s->tx_size <= ARENA_DEFAULT_RING)
		punch_rings(h, s);
}

/* Does s stay on h->resized: a ring above its first size, or a move or
 * watch under way? */
static int resized_keep(const struct hsock *s)
{
	if (!s->as)
		return 0;
	if (s->tx_watch)
		return 1;
	if (s->lp)
		return (s->touched || s->lp->size[s->lside] > ARENA_DEFAULT_RING) && s->state == HS_ESTABLISHED;
	return s->rx_switch || s->rx_offered || s->rx_size > hsock_ring_home(s) || (s->touched && s->link) ||
	       (s->tx_size > hsock_ring_home(s) && !s->tx_fixed);
}

void hub_ring_timers(struct hub *h)
{
	uint64_t now;
	int look = 0;
	if (!h->nresized)
		return;
	now = hub_now_ms();
	if (!h->looking && now - h->resize_ms >= RESIZE_IDLE_MS) {
		h->resize_ms = now;
		h->looking = 1;
		h->look_at = 0;
	}
	look = h->looking;
	if (!look && !h->nswitch_waiting && !h->ntx_watch)
		return;
	for (uint32_t i = 0; i < h->nresized;) {
		struct hsock *s = h->socks[h->resized[i]];
		if (s && s->rx_switch) {
			if (s->as)
				rx_switch(h, s);
			else
				hsock_rings_forget(s); /* closed meanwhile: nobody reads */
		}
		if (s && s->tx_watch)
			watch_look(h, s, now);
		if (s && look && i >= h->look_at && s->state == HS_ESTABLISHED && s->as && (s->link || s->lp)) {
			idle_look(h, s);
			if (punch_full(h)) {
				/* this round's batch: the look goes on at the next */
				punch_flush(h);
				h->look_at = i + 1;
				look = 0;
			}
		}
		if (s && resized_keep(s)) {
			i++;
			continue;
		}
		if (s)
			s->on_resized = 0;
		h->resized[i] = h->resized[--h->nresized];
	}
	if (look) {
		punch_flush(h);
		h->looking = 0;
	}
}
