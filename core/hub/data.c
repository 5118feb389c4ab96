/*
 * data.c - data and credit: what the hub posts for a socket, and the checks
 * of what its peer writes.
 *
 * Data is posted as writes with immediate straight from the tx ring, within
 * the peer's credit (the peer's ring head as it last reported, CREDIT), at
 * most WIRE_MAX_WRITE bytes each, never across the end of the peer's ring;
 * a link without room puts the socket on its txwait list.  FIN follows the
 * last byte.  An incoming write must be the next bytes of the stream and
 * within the credit this side gave (rx_check), else the link is dropped.
 * On verbs, the end of each pass's writes follows them as a placed tail
 * (arena.h), so that a reader that polls need not wait for its hub.
 * A same-node socket's data moves without the hub: a doorbell of its is a
 * wake-up of the other socket.
 */
#include "hub.h"

#include <string.h>

#include "tag.h"

static void txwait(struct hsock *s)
{
	struct link *l = s->link;
	if (s->on_txwait)
		return;
	if (sid_push(&l->txwait, &l->ntxwait, &l->txwait_cap, s->sid) == 0)
		s->on_txwait = 1;
}

/* Where a write of n bytes at stream position pos lands at the peer, and
 * its key; a write never crosses the end of the peer's ring, nor the
 * position where the peer's ring changed (a resend below it, after a lost
 * link, goes to the old ring: resume.c). */
static uint64_t target(struct hsock *s, uint64_t pos, uint64_t *n, uint32_t *rkey)
{
	uint64_t at, raddr = s->peer_raddr;
	uint32_t ring = s->peer_ring;
	*rkey = s->peer_rkey;
	if (hsock_positional(s))
		return pos;
	if (pos < s->peer_switch_at) {
		raddr = s->peer_old_raddr;
		ring = s->peer_old_ring;
		*rkey = s->peer_old_rkey;
		if (*n > s->peer_switch_at - pos)
			*n = s->peer_switch_at - pos;
	}
	at = pos & (ring - 1);
	if (*n > ring - at)
		*n = ring - at;
	return raddr + at;
}

/* verbs: where the writes of s now end, into the peer socket's placed-tail
 * word, after them on the link, tagged with the number of the peer's ring
 * the last byte went to (the one before the switch for a byte below it). */
static void placed_post(struct hub *h, struct hsock *s)
{
	struct link *l = s->link;
	uint32_t no = s->peer_ring_no - (s->tx_posted <= s->peer_switch_at);
	uint64_t v = (uint64_t)placed_tag(s->peer, no) << PLACED_POS_BITS | (s->tx_posted & PLACED_POS_MASK);
	if (l->x.xp->ops->post_placed &&
	    l->x.xp->ops->post_placed(&l->x, s->peer_placed_raddr, s->peer_placed_rkey, v) == 0)
		h->placed_sent++;
}

void hsock_tx(struct hub *h, struct hsock *s)
{
	struct link *l = s->link;
	uint64_t tail, ring = s->peer_ring, posted0 = s->tx_posted;
	uint8_t *base;
	if (s->lp) {
		hsock_local_wake(h, s, 0);
		return;
	}
	uint32_t dst = s->peer;
	uint64_t by_src = 0;
	/* early (early.c): the peer's socket is not known before its ACCEPT;
	 * on soft the first bytes go anyway, named by ours, as many as the
	 * smallest ring takes */
	if (s->state != HS_ESTABLISHED || !l || l->state != LINK_UP || l->doomed || !s->as || s->resuming ||
	    (s->early && !hsock_positional(s)))
		return;
	if (s->early) {
		ring = ARENA_MIN_RING;
		dst = tag_imm(s->sid, s->gen);
		by_src = WIRE_BY_SRC;
	}
	tail = s->fin_pending ? s->fin_at : ring_load(&s->as->tx.tail);
	if (!ring_sane(s->tx_done, tail, s->tx_size) || tail - s->tx_done < s->tx_posted - s->tx_done) {
		hsock_abort(h, s, "process wrote an impossible tx tail");
		return;
	}
	if (tail != s->tx_posted)
		hsock_touched(h, s);
	base = arena_bytes(s->pool->base, s->tx_off);
	/* the peer's ring changes: until we switch (hsock_peer_switch, when
	 * a RING or CREDIT comes), the smaller of the two windows */
	if (s->peer_next && s->peer_next_ring < ring)
		ring = s->peer_next_ring;
	while (s->tx_posted < tail) {
		uint64_t limit = s->peer_head + ring;
		uint64_t win = limit > s->tx_posted ? limit - s->tx_posted : 0;
		uint64_t n = tail - s->tx_posted, raddr;
		uint32_t rkey;
		struct iovec iov[2];
		int c, r;
		if (!win)
			break; /* CREDIT resumes */
		if (n > win)
			n = win;
		if (n > WIRE_MAX_WRITE)
			n = WIRE_MAX_WRITE;
		raddr = target(s, s->tx_posted, &n, &rkey);
		c = ring_iov(base, s->tx_size, s->tx_posted, n, iov);
		r = l->x.xp->ops->post_write_imm(&l->x, tag_make(s->sid, s->gen), iov, c, s->tx_lkey, raddr | by_src,
					       rkey, dst);
		if (r == -EAGAIN) {
			txwait(s);
			return;
		}
		if (r < 0) {
			/* dropped between event batches: callers still hold s */
			l->doomed = "post failed";
			return;
		}
		s->tx_posted += n;
		l->msgs_tx++;
	}
	if (s->tx_posted != posted0 && s->peer_placed_rkey)
		placed_post(h, s);
	if (s->fin_pending && !s->fin_sent && s->tx_posted == s->fin_at && !s->early) {
		struct wire_ctl c = {.op = CTL_FIN, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
		s->fin_sent = 1;
		link_send_ctl(l, &c, tag_make(s->sid, s->gen));
	}
}

void hsock_credit(struct hub *h, struct hsock *s)
{
	uint64_t head, seen;
	struct wire_ctl c = {.op = CTL_CREDIT};
	if (s->lp) {
		hsock_local_wake(h, s, 1);
		return;
	}
	if (s->state != HS_ESTABLISHED || !s->as || !s->link || s->link->state != LINK_UP || s->resuming ||
	    s->early)
		return;
	head = hsock_rx_head(s, &seen);
	if (seen != head)
		s->credit_later = 1; /* read past rx_tail: the rest when it moves (route.c) */
	if (!ring_sane(head, s->rx_tail, hsock_rx_room(s)) || head <= s->credit_sent)
		return; /* nothing new, or a process scribbling on its own ring */
	s->credit_sent = head;
	c.dst = s->peer;
	c.src = tag_imm(s->sid, s->gen);
	c.val = head;
	link_send_ctl(s->link, &c, 0);
	hsock_rx_credited(h, s);
}

void hsock_shutdown_wr(struct hub *h, struct hsock *s)
{
	uint64_t tail;
	if (s->fin_pending)
		return;
	if (s->lp) {
		hsock_local_fin(h, s);
		return;
	}
	tail = ring_load(&s->as->tx.tail);
	if (!ring_sane(s->tx_done, tail, s->tx_size) || tail < s->tx_posted)
		tail = s->tx_posted;
	s->fin_pending = 1;
	s->fin_at = tail;
	hsock_tx(h, s);
}

/* ---- incoming ---- */

/* A write at POS of LEN bytes is the next one s expects, within the
 * credit given */
static int rx_fits(const struct hsock *s, uint64_t pos, uint32_t len)
{
	return pos == s->rx_expect && pos + len <= s->credit_sent + hsock_rx_room(s);
}

/* The checks of an incoming write with immediate before (soft) or after
 * (verbs) its payload lands; moves the expected position on success. */
static struct hsock *rx_check(struct hub *h, struct link *l, uint32_t imm, uint64_t pos, uint32_t len,
			      int *ret)
{
	struct hsock *s = hsock_by_imm(h, imm);
	*ret = 0;
	if (!s) {
		h->stale_dropped++;
		return NULL;
	}
	if (s->link != l) {
		*ret = -1;
		return NULL;
	}
	if (hsock_drops_data(s)) {
		/* data after our close: the kernel answers with RST; but not
		 * bytes the reader took by a placed tail before it closed */
		if (pos == s->rx_expect && pos + len <= s->rx_read_ahead) {
			s->rx_expect += len;
			return NULL;
		}
		if (s->state != HS_CLOSED)
			hsock_send_reset(s);
		return NULL;
	}
	/* A write for a socket still connecting: the peer accepted, and its
	 * ACCEPT came before this write on the link but waits in the
	 * completion queue still (soft parses a whole read at once, verbs
	 * reaps a batch).  Placed now; the completion, routed after the
	 * ACCEPT's, finds the socket established. */
	if (!s->as || (s->state != HS_ESTABLISHED && !(s->state == HS_CONNECTING && s->connect_sent)))
		return NULL;
	if (!rx_fits(s, pos, len)) {
		if (l->state == LINK_DOWN && len && pos + len == s->rx_expect) {
			*ret = 2; /* the last write counted, read again (hub_rx_target) */
			return s;
		}
		*ret = -1; /* out of order or beyond the credit we gave */
		return NULL;
	}
	s->rx_expect += len;
	if (s->rx_expect - s->credit_sent >= s->rx_size)
		s->rx_limited = 1; /* the peer used all its credit (resize.c) */
	*ret = 1;
	return s;
}

int hub_rx_target(struct xlink *xl, uint32_t imm, uint64_t raddr, uint32_t len, struct iovec iov[2], int *again)
{
	int ret;
	struct hsock *s = rx_check(the_hub, link_of(xl), imm, raddr, len, &ret);
	if (!s)
		return ret;
	*again = ret == 2;
	return ring_iov(arena_bytes(s->pool->base, s->rx_off), s->rx_size, raddr, len, iov);
}

int hub_rx_peek(struct xlink *xl, uint32_t imm, uint64_t raddr, uint32_t len, struct iovec iov[2])
{
	struct hsock *s = hsock_by_imm(the_hub, imm);
	if (!s || s->link != link_of(xl) || hsock_drops_data(s) || !s->as || s->state != HS_ESTABLISHED ||
	    !rx_fits(s, raddr, len))
		return 0;
	return ring_iov(arena_bytes(s->pool->base, s->rx_off), s->rx_size, raddr, len, iov);
}

int hub_rx_written(struct xlink *xl, uint32_t imm, uint32_t len)
{
	struct hsock *s = hsock_by_imm(the_hub, imm);
	int ret;
	rx_check(the_hub, link_of(xl), imm, s ? s->rx_expect : 0, len, &ret);
	return ret;
}
