/*
 * timewait.c - connections that ended cleanly on a link, remembered for a
 * while, as kernel TCP keeps a closed connection in TIME_WAIT to answer
 * its peer's last segments again.
 *
 * Our side frees a connection once both FINs are done: ours completed
 * (on soft, the peer's kernel acknowledged it; on verbs, it landed) and
 * the peer's came.  The peer's hub may still die before it took our FIN
 * (on soft it was in its kernel's buffer or its own, and a successor's
 * drain passes control messages over: resume.c); its successor then asks
 * for the connection again with a RESUME that lacks our FIN.  A hub that
 * no longer knew the connection answered RESET, and the peer's reader saw
 * ECONNRESET where kernel TCP gives it every byte and EOF.  So the last
 * HUB_TIMEWAIT such connections are kept for HUB_TIMEWAIT_MS (their ids,
 * node and last positions, not their rings), and a RESUME for one of them
 * is answered as the connection would have: our RESUME, with everything
 * sent and placed and the peer's FIN had, then our FIN again where the
 * peer lacks it.  A RESUME that says the peer lacks bytes we sent, which
 * we no longer hold, is answered with RESET, as before.
 */
#include "hub.h"

#include "tag.h"

void hub_timewait_add(struct hub *h, const struct hsock *s)
{
	struct timewait *t = &h->timewait[h->timewait_next++ % HUB_TIMEWAIT];
	*t = (struct timewait){
		.node = s->link->x.peer_node,
		.rx_tail = s->rx_tail,
		.tx_done = s->tx_done,
		.at_ms = hub_now_ms(),
		.imm = tag_imm(s->sid, s->gen),
		.peer = s->peer,
		.peer_ring = s->peer_ring,
		.positional = hsock_positional(s),
	};
}

int hub_timewait_answer(struct hub *h, struct link *l, const struct wire_ctl *c)
{
	uint64_t now = hub_now_ms();
	for (uint32_t i = 0; i < HUB_TIMEWAIT; i++) {
		struct timewait *t = &h->timewait[i];
		struct wire_ctl r;
		if (!t->imm || t->imm != c->dst || t->peer != c->src || t->node != l->x.peer_node ||
		    now - t->at_ms > HUB_TIMEWAIT_MS)
			continue;
		t->imm = 0;
		/* on soft the peer placed what its kernel acknowledged: all of
		 * it; on verbs our completed writes are in its ring anyway */
		if (c->val > t->tx_done || (t->positional && c->val != t->tx_done))
			return 0;
		r = (struct wire_ctl){.op = CTL_RESUME, .dst = c->src, .src = c->dst, .reason = RESUME_HAVE_FIN,
				      .val = t->rx_tail, .ring = t->peer_ring};
		wire_resume_put(&r, t->tx_done, t->rx_tail, 0);
		link_send_ctl(l, &r, 0);
		if (!(c->reason & RESUME_HAVE_FIN))
			link_send_simple(l, CTL_FIN, c->src, c->dst, 0);
		h->conns_resumed++;
		return 1;
	}
	return 0;
}
