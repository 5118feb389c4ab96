/*
 * rekey.c - the keys of verbs rings that change under a connection.
 *
 * A hub that opened the RDMA device again (a restart's execve, or the
 * successor of a hub that died) registers every ring of its verbs
 * connections again, with new keys and, after an execve, new addresses
 * (hub_rekey); the peer learns them as the connection goes on over a new
 * link (resume.c): every RESUME on verbs carries the address and key of
 * the receive ring the peer writes to.
 *
 * While that receive ring changes size (resize.c) the peer may write to
 * either of two rings: the old one, or the one offered in a RING that it
 * may have switched to, and for bytes sent again below the switch the old
 * one again (hsock_ring_changing).  Then a REKEY goes right before the
 * RESUME with both rings, each named by its size (the two differ), and
 * the peer takes each for the ring of that size that it writes to now or
 * wrote to before its last switch (hsock_rekey_apply), whichever way the
 * RESUMEs then settle the change.
 */
#include "hub.h"

#include "log.h"
#include "tag.h"

/* Whether the peer may write to two receive rings of s (verbs: a RESUME
 * goes with a REKEY then): a RING offered and not answered (the peer may
 * have switched to it), or bytes below the position of a switch not yet
 * placed (sent again, they go to the old ring).  A switch answered, with
 * every byte before it placed, is not: the peer writes to the new ring
 * only.  (The peer's own ring changes do not matter: its keys stay.) */
int hsock_ring_changing(const struct hsock *s)
{
	return s->rx_offered || s->rx_tail < s->rx_switch_at;
}

/* A hub that opened the RDMA device again (an execve, or a successor of a
 * dead hub) has new keys for every ring, and after an execve new
 * addresses: the rings of the sockets that went over verbs are registered
 * again (both receive rings of one that changes size), the receive ring of
 * a lingering one too (its peer may write until it hears our FIN or
 * RESET); their RESUME (and REKEY) tells the peers (send_resume).  A
 * socket whose rings cannot be registered is reset. */
void hub_rekey(struct hub *h)
{
	uint32_t n = 0, changing = 0, unused;
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (!s || !s->peer_raddr || !s->suspended)
			continue;
		if (hsock_ring_keys(h, s) < 0 ||
		    (s->rx_next_off && pool_keys(h, s->pool, s->rx_next_off, s->rx_next_size, 1, &unused, &s->rx_next_rkey) < 0)) {
			log_warn("socket %u: its rings cannot be registered again as its hub ended: reset", s->sid);
			hsock_waiting_reset(h, s);
			continue;
		}
		if (hsock_ring_changing(s)) {
			log_info("socket %u: its receive ring was changing size as its hub ended (ring offered %d, placed %llu, switch at %llu): both rings' keys go to the peer",
				 s->sid, s->rx_offered, (unsigned long long)s->rx_tail, (unsigned long long)s->rx_switch_at);
			changing++;
		}
		n++;
	}
	if (n)
		log_info("verbs: %u connections' rings registered again (%u of them changing size)", n, changing);
}

uint64_t hsock_ring_addr(const struct hsock *s, uint64_t off)
{
	return (uint64_t)(uintptr_t)arena_bytes(s->pool->base, off);
}

/* verbs: both receive rings the peer may write to, new and old */
void hsock_send_rekey(struct hsock *s)
{
	struct wire_ctl c = {.op = CTL_REKEY, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
	const struct wire_ring r[2] = {
		{.raddr = hsock_ring_addr(s, s->rx_next_off), .rkey = s->rx_next_rkey, .size = (uint32_t)s->rx_next_size},
		{.raddr = hsock_ring_addr(s, s->rx_off), .rkey = s->rx_rkey, .size = (uint32_t)s->rx_size},
	};
	wire_rekey_put(&c, r);
	link_send_ctl(s->link, &c, 0);
}

/* The peer's REKEY, before its RESUME: its two receive rings, each named
 * by its size, for the ring of that size we write to, and the one we
 * wrote to before our last switch (resends below that switch go there).
 * The ring we write to must be one of them; so must the old one while
 * resends still go to it.  0, or -1. */
int hsock_rekey_apply(struct hsock *s)
{
	int cur = 0, old = 0;
	for (int i = 0; i < 2; i++) {
		const struct wire_ring *r = &s->peer_rekey[i];
		if (r->size == s->peer_ring) {
			s->peer_raddr = r->raddr;
			s->peer_rkey = r->rkey;
			cur = 1;
		} else if (r->size == s->peer_old_ring) {
			s->peer_old_raddr = r->raddr;
			s->peer_old_rkey = r->rkey;
			old = 1;
		}
	}
	return cur && (old || s->tx_posted >= s->peer_switch_at) ? 0 : -1;
}

/* A REKEY (verbs): kept for the RESUME that follows it on the same link,
 * which may name a socket of another link too; one for a socket we do not
 * know is dropped (its RESUME is answered with RESET). */
void hub_on_rekey(struct hub *h, const struct wire_ctl *c)
{
	struct hsock *s = hsock_by_imm(h, c->dst);
	if (!s || s->peer != c->src || s->lp) {
		h->stale_dropped++;
		return;
	}
	wire_rekey_get(c, s->peer_rekey);
	s->peer_rekeyed = 1;
}
