/*
 * resize.c - rings that change size, as the kernel's socket buffers do:
 * receive rings that grow with a fast reader or when the credit is what
 * holds a connection back, back to their home size when the connection
 * idles (send rings: resize_tx.c), the exchange that makes the sender's
 * credit follow the receiver's ring, and the timers of both.  A ring's home size is the
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
/* an idle connection: nothing moved for this long, its rings go back */
#define RESIZE_IDLE_MS 1000

/* s onto the list that the ring timers walk (hub_ring_timers): a ring
 * above its home size, or a move or watch under way (resized_keep) */
void hsock_resized_add(struct hub *h, struct hsock *s)
{
	if (!s->on_resized && sid_push(&h->resized, &h->nresized, &h->resized_cap, s->sid) == 0)
		s->on_resized = 1;
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
		hsock_resized_add(h, s);
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
	    s->early || s->rx_offered || s->rx_switch || s->rx_next_off || hsock_drops_data(s) || s->rx_fin || size == s->rx_size)
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
	now = sys_now_ns();
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
		hsock_resized_add(h, s);
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
		hsock_resized_add(h, s);
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
	hsock_tx_watch_end(the_hub, s);
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
		hsock_resized_add(h, s);
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
	hsock_tx_shrink(h, s);
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
			hsock_tx_watch_look(h, s, now);
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
