/*
 * close.c - a hub socket released by its last holder.
 *
 * A listener resets the connections it queued and refuses the ones that
 * wait for room.  An established connection sends what is left, then FIN
 * (or RESET when unread data would be lost, under SO_LINGER 0, or when
 * the holder died: after the data the program wrote, as the kernel had
 * sent it by then; a connection waiting for a lost link keeps those bytes
 * and sends them, then the RESET, once it goes on), and lingers until the
 * peer's word (sock.c); a same-node one tells the other socket at once.
 * A connect under way waits for the ACCEPT that may be on its way, to
 * answer it with RESET.
 */
#include "hub.h"

#include "log.h"
#include "tag.h"

/* A listener stops: as the kernel's, it resets the connections it queued
 * and refuses the ones that wait for room, and new ones find no listener
 * (released, or shut down: shutdown(2) with SHUT_RD or SHUT_RDWR, after
 * which the program's socket stays, and its accept fails, EINVAL) */
void hsock_listener_stop(struct hub *h, struct hsock *s)
{
	for (uint32_t i = 0; i < s->qlen; i++) {
		struct hsock *q = h->socks[s->q[i]];
		if (q) {
			q->queued = 0;
			hsock_send_reset(q);
			hsock_linger(h, q);
		}
	}
	s->qlen = 0;
	for (uint32_t i = 0; i < s->npend; i++) {
		struct wire_ctl r = {.op = CTL_REFUSE, .dst = s->pend[i].ctl.src,
				     .reason = REFUSE_NO_LISTENER};
		struct hsock *c = s->pend[i].link ? NULL : hsock_by_imm(h, r.dst);
		if (c && c->state == HS_CONNECTING)
			hsock_set_closed(c, ECONNREFUSED); /* same node: no listener any more */
		else if (s->pend[i].link && s->pend[i].link->state == LINK_UP)
			link_send_ctl(s->pend[i].link, &r, 0);
	}
	s->npend = 0;
	hub_listener_forget(h, s);
	s->state = HS_CLOSED;
	if (s->as) {
		atomic_store(&s->as->acceptq, 0);
		atomic_store(&s->as->state, SLOT_CLOSED);
	}
}

static void release_established(struct hub *h, struct hsock *s, int abort)
{
	uint64_t head, seen, placed;
	if (s->lp) {
		struct ring *r = hsock_ring(s, 0);
		/* unread data is lost: the kernel resets then, too */
		if (abort || ring_load(&r->head) != ring_load(&r->tail))
			hsock_send_reset(s);
		else
			hsock_local_fin(h, s);
		hsock_free(h, s);
		return;
	}
	head = hsock_rx_head(s, &seen);
	/* on verbs a placed tail shows the reader bytes whose completion has
	 * not reached us yet: past what it has seen, they are unread data */
	placed = placed_end(s->as, s->rx_tail, hsock_rx_room(s));
	if (seen != head) {
		/* the reader took what a placed tail showed: unread data only
		 * if the tail says more came; else the writes that land up to
		 * where it read are no data after the close (data.c) */
		if (placed == seen)
			s->rx_read_ahead = seen;
		else
			head = seen;
	}
	if (abort || head != s->rx_tail || s->rx_expect != s->rx_tail || placed > seen ||
	    (!s->link && !s->suspended)) {
		log_debug("socket %u: %s: reset", s->sid, abort ? "SO_LINGER 0, or its holder died" : "unread data");
		/* what the program wrote before its close goes first, as the
		 * kernel had sent it by then; the reset follows once it has
		 * (hsock_finish_close) */
		if (s->link && !s->reset_sent) {
			hsock_tx(h, s);
			if (s->state == HS_ESTABLISHED && s->as && s->tx_done != s->tx_posted) {
				s->closing = 1;
				s->reset_after_tx = 1;
				return;
			}
		} else if (s->suspended && !s->reset_sent && s->as &&
			   (ring_load(&s->as->tx.tail) != s->tx_done || s->tx_posted != s->tx_done)) {
			/* no link now: those bytes go once the connection goes
			 * on, then the reset (resume.c, resumed); given up on
			 * as any unacknowledged data is (give_up_at) */
			s->closing = 1;
			s->reset_after_tx = 1;
			return;
		}
		hsock_send_reset(s);
		hsock_linger(h, s);
		return;
	}
	s->closing = 1;
	if (!s->fin_pending)
		hsock_shutdown_wr(h, s);
	hsock_finish_close(h, s);
}

void hsock_release(struct hub *h, struct hsock *s, int abort)
{
	switch (s->state) {
	case HS_LISTENING:
		hsock_listener_stop(h, s);
		hsock_free(h, s);
		return;
	case HS_ESTABLISHED:
		release_established(h, s, abort);
		return;
	case HS_CONNECTING:
		/* an ACCEPT may be on its way: wait for it, answer RESET, then go */
		if (s->connect_sent && s->link && s->link->state == LINK_UP) {
			hsock_uncount(s);
			hsock_slot_release(h, s);
			s->state = HS_LINGER;
			return;
		}
		hsock_free(h, s);
		return;
	case HS_CLOSED:
		/* reset already: the peer said so, or will not hear from us again */
		if (s->reset_sent && s->peer && s->link && s->link->state == LINK_UP) {
			hsock_linger(h, s);
			return;
		}
		hsock_free(h, s);
		return;
	default:
		hsock_free(h, s);
	}
}
