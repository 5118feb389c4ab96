/*
 * route.c - what comes in from the transports: control messages from peer
 * hubs, and completions.
 *
 * Every completion comes back through hub_route(), which finds its owner
 * by the tag in wr_id (our writes and sends) or imm (the peer's writes)
 * and drops it when the generation has moved on: a completion for a socket
 * that is gone is stale, never misdelivered.  A control message is decoded
 * (a malformed one drops its link), then goes to the socket it names
 * (hub_ctl_in); CONNECT names a listener's port instead (conn.c), and
 * UNLISTEN a port that no listener of the peer's takes any more (early.c).
 */
#include "hub.h"

#include <errno.h>
#include <string.h>

#include "tag.h"

static void on_reset(struct hub *h, struct hsock *s)
{
	/* answer, so that the peer may reuse its ring; then it writes no more */
	hsock_send_reset(s);
	s->peer = 0;
	if (s->state == HS_LINGER || (!s->nholders && !s->queued)) {
		hsock_free(h, s);
		return;
	}
	if (s->state == HS_ESTABLISHED || s->state == HS_CONNECTING)
		hsock_set_closed(s, s->state == HS_CONNECTING ? ECONNREFUSED : s->rx_fin ? EPIPE : ECONNRESET);
}

static void on_fin(struct hub *h, struct hsock *s)
{
	s->rx_fin = 1;
	if (s->state == HS_LINGER) {
		/* the peer writes no more (its FIN follows its last write):
		 * the ring may go, even where our RESET is not answered yet
		 * (a peer that had both FINs freed its side, and a RESET for
		 * a socket it does not know is dropped, never answered) */
		hsock_free(h, s);
		return;
	}
	/* the reader takes FIN for the end of the bytes it sees: while a
	 * receive ring's switch waits (verbs), the last bytes' tail is held
	 * back, and FIN is shown with it (rx_switch, resize.c) */
	if (s->as && !s->rx_switch)
		atomic_fetch_or(&s->as->flags, SLOTF_RX_FIN);
	hsock_wake(s);
	hsock_finish_close(h, s);
}

static void on_credit(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	if (c->val < s->peer_head || c->val > s->tx_posted) {
		h->malformed++;
		hub_link_fail(&l->x, "credit beyond what was sent");
		return;
	}
	s->peer_head = c->val;
	hsock_peer_switch(s);
	hsock_tx(h, s);
}

void hub_ctl_in(struct hub *h, struct link *l, const uint8_t *buf, uint32_t len)
{
	struct wire_ctl c;
	const char *why;
	struct hsock *s;
	if (wire_ctl_decode(buf, len, &c, &why) < 0) {
		h->malformed++;
		hub_link_fail(&l->x, why);
		return;
	}
	l->msgs_rx++;
	if (c.op == CTL_CONNECT) {
		hsock_on_connect(h, l, &c);
		return;
	}
	if (c.op == CTL_PING)
		return; /* its arrival was the point */
	if (c.op == CTL_UNLISTEN) {
		hub_early_forget(l, c.port);
		return;
	}
	if (c.op == CTL_RESUME) {
		hub_on_resume(h, l, &c); /* names a socket of another link */
		return;
	}
	if (c.op == CTL_REKEY) {
		hub_on_rekey(h, &c); /* ... and so does the REKEY before it */
		return;
	}
	s = hsock_by_imm(h, c.dst);
	if (!s || s->link != l) {
		h->stale_dropped++;
		if (c.op == CTL_ACCEPT)
			link_send_simple(l, CTL_RESET, c.src, 0, 0);
		return;
	}
	switch (c.op) {
	case CTL_ACCEPT:
		hsock_on_accept(h, l, s, &c);
		break;
	case CTL_REFUSE:
		hub_early_forget(l, addr_port(&s->peer_addr));
		hsock_on_refuse(h, s);
		break;
	case CTL_FIN:
		on_fin(h, s);
		break;
	case CTL_RESET:
		on_reset(h, s);
		break;
	case CTL_CREDIT:
		on_credit(h, l, s, &c);
		break;
	case CTL_RING:
		hsock_on_ring(h, l, s, &c);
		break;
	case CTL_RING_ACK:
		hsock_on_ring_ack(h, l, s, &c);
		break;
	case CTL_PLACED:
		hsock_on_placed(h, l, s, &c);
		break;
	}
}

/* ---- completions ---- */

/* one of our writes landed: its bytes of the send ring are free again */
static void route_write(struct hub *h, struct link *wl, const struct xwc *wc)
{
	struct hsock *s = h->socks[tag_sid(wc->wr_id)];
	int full;
	if (!s || !tag_live(wc->wr_id, s->gen) || !s->as) {
		h->stale_dropped++;
		return;
	}
	if (wc->status) {
		hsock_abort(h, s, "write failed");
		return;
	}
	full = ring_load(&s->as->tx.tail) - s->tx_done >= s->tx_size;
	s->tx_done += wc->byte_len;
	ring_store(&s->as->tx.head, s->tx_done);
	if (s->tx_old_size)
		hsock_tx_old_done(s);
	hsock_tx_completed(h, s, full);
	s->bytes_tx += wc->byte_len;
	s->cq_send++;
	wl->cq_send++;
	wl->bytes_tx += wc->byte_len;
	hsock_wake_for(s, ARENA_WAKE_TX);
	hsock_finish_close(h, s);
}

/* one of our control sends: only a FIN's matters */
static void route_send(struct hub *h, const struct xwc *wc)
{
	struct hsock *s;
	if (!(wc->wr_id & ~WR_CTL))
		return;
	s = h->socks[tag_sid(wc->wr_id & ~WR_CTL)];
	if (!s || !tag_live(wc->wr_id & ~WR_CTL, s->gen))
		return;
	if (s->fin_sent && !s->fin_done) {
		s->fin_done = s->tx_posted == s->fin_at;
		hsock_finish_close(h, s);
	}
}

/* the peer's write landed in our receive ring */
static void route_recv_imm(struct hub *h, struct link *wl, const struct xwc *wc)
{
	struct hsock *s = hsock_by_imm(h, wc->imm);
	if (!s || !s->as || s->state != HS_ESTABLISHED) {
		h->stale_dropped++;
		return;
	}
	s->rx_tail += wc->byte_len;
	/* verbs, a receive ring about to move: what landed in the new one
	 * shows once the reader is there too (resize.c) */
	if (!s->rx_switch || (wl->x.xp->ops->flags & XP_POSITIONAL))
		ring_store(&s->as->rx.tail, s->rx_tail);
	if (s->credit_later) {
		/* the reader asked credit for bytes read by a placed tail */
		s->credit_later = 0;
		hsock_credit(h, s);
	}
	s->bytes_rx += wc->byte_len;
	s->cq_recv++;
	hsock_touched(h, s);
	wl->cq_recv++;
	wl->bytes_rx += wc->byte_len;
	wl->msgs_rx++;
	hsock_wake_for(s, ARENA_WAKE_RX);
}

/* a control message in one of the link's posted receives: post it again */
static void route_recv(struct hub *h, struct link *l, const struct xwc *wc)
{
	uint32_t i = (uint32_t)wc->wr_id;
	uint8_t buf[WIRE_CTL_LEN];
	if (i >= HUB_CTL_RECVS)
		return;
	memcpy(buf, l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, WIRE_CTL_LEN);
	l->x.xp->ops->post_recv(&l->x, i, l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, WIRE_CTL_LEN);
	hub_ctl_in(h, l, buf, wc->byte_len);
}

void hub_route(struct hub *h, const struct xwc *wc)
{
	struct link *wl = wc->link ? link_of(wc->link) : NULL;
	if (wl && wl->state == LINK_DOWN)
		return;
	switch (wc->op) {
	case XWC_WRITE:
		route_write(h, wl, wc);
		return;
	case XWC_SEND:
		route_send(h, wc);
		return;
	case XWC_RECV_IMM:
		route_recv_imm(h, wl, wc);
		return;
	case XWC_RECV:
		route_recv(h, wl, wc);
		return;
	}
}
