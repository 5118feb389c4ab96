/*
 * resume.c - connections that outlive a lost link.
 *
 * A link is lost when it ends for any reason but a broken protocol: the
 * queue pair's retries run out or the peer disconnects (verbs), the
 * link's TCP connection times out or ends (soft).  Its connections are
 * not reset then, as kernel TCP does not reset a connection whose peer is
 * silent: they are suspended (hsock_suspend).  Whether the peer hub is
 * still there the next link tells: a node that refuses it has no hub
 * (hub_relink_refused; on verbs only after HUB_RELINK_REFUSED_GRACE_MS
 * from the loss, tried every HUB_RELINK_QUICK_MS meanwhile: a hub that
 * restarts on verbs cannot keep its device's listener, and listens again
 * once its successor opened the device; and then only once it refused
 * for HUB_RELINK_REFUSED_HOLD_MS: a node that comes back from an outage
 * may reject a request for a moment), a hub that does not know a
 * connection answers its RESUME with RESET.
 * Their slots stay established; writes fill the send ring and then block,
 * reads wait.  Both hubs connect to the peer again, at once and then
 * every HUB_RELINK_MS (hub_relink_note, hub_resume_timers; every
 * HUB_RELINK_SLOW_MS after the first minute), as a port
 * that was down may answer one way before the other; any new link to the
 * peer node will do (a process's connect() makes one too), and of two
 * that come up at once both keep the same one (link.c).  With transport
 * auto, a verbs link that stayed down for RELINK_SOFT_MS (30 s: an outage
 * of the whole network ends sooner, most often, and verbs comes back
 * first; tries that did not reach the peer's address, the network down,
 * do not count: hub_relink_unreached) is tried as soft too: a verbs connection goes on over soft (its
 * writes land by stream position there), and stays there; not the other
 * way round.
 *
 * When a link to the node comes up, each side attaches its suspended
 * connections to it and sends RESUME for each: its receive tail (the bytes
 * it has placed), its send ring's completed position and its receive ring's
 * head (the credit), and whether it has the peer's FIN.  From the peer's
 * RESUME a side learns where to go on: its stream goes on from the bytes
 * the peer placed; on verbs (XP_PLACED), a write that completed here is in
 * the peer's ring even if the peer's hub never saw its completion, so the
 * later of the two positions is taken on both sides.  What follows that
 * position is sent again from the send ring, which still holds it (bytes
 * leave the ring only when their write completed).  A side whose peer
 * placed less than it had completed (soft: bytes in the kernel's buffers
 * went with the connection) cannot go on and resets.  A FIN the peer does
 * not have goes again.  A RESUME for a socket the peer no longer knows
 * (its hub restarted, or it closed meanwhile) is answered with RESET.
 *
 * Two new links at once (each hub connected to the other) are settled by
 * one rule both sides see alike: the link that the smaller node id opened.
 * A waiting connection gives up when kernel TCP's would (give_up_at): with
 * bytes the peer did not take, after link_outage (HUB_LINK_OUTAGE_S, as
 * kernel TCP gives up retransmitting) or the program's TCP_USER_TIMEOUT;
 * idle, never, unless the program asked for keepalives; then it is closed
 * with ETIMEDOUT.
 *
 * A hub that restarted, or took over from a dead one, on verbs (restart.c,
 * warden.c) registered every ring again: the keys and, after an execve,
 * the addresses its peers write to are new (hub_rekey).  On verbs every
 * RESUME carries the receive ring's address and key (the new ring's, when
 * the peer switched to it already), which the peer writes to from then
 * on.  While the receive ring changes size the peer may write to either
 * of two rings (hsock_ring_changing): a REKEY goes right before the
 * RESUME with both, each named by its size, and the peer takes each for
 * the ring of that size it writes to now or wrote to before its last
 * switch (hsock_rekey_apply; rekey.c).
 *
 * A receive ring change under way (resize.c) is settled by the RESUME too:
 * each side says which of the receiver's rings it writes to and from which
 * position (peer_switch_at); the receiver ends its offer as a RING_ACK at
 * that position would, or withdraws it when the sender never switched.
 * Bytes sent again below that position go to the old ring, which the
 * receiver keeps until they all landed.
 */
#include "hub.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "tag.h"

int hsock_suspend(struct hub *h, struct hsock *s, struct link *l)
{
	if (!l->lost || !s->peer || !h->link_outage_ms || s->reset_sent)
		return 0;
	if (s->state != HS_ESTABLISHED && s->state != HS_LINGER)
		return 0;
	hsock_uncount(s);
	s->link = NULL;
	s->on_txwait = 0; /* the link's list goes with it */
	s->suspended = 1;
	s->resuming = 0;
	s->susp_node = l->x.peer_node;
	s->susp_placed = (l->x.xp->ops->flags & XP_PLACED) != 0;
	if (!s->susp_ms)
		s->susp_ms = hub_now_ms();
	s->peer_next = 0; /* the peer's RING not yet switched to: it never will be */
	/* no placed tails after a lost link: the peer's hub, or its word's
	 * registration, may be another by then (what a reader took by one
	 * comes again, the same bytes, and counts then) */
	s->peer_placed_rkey = 0;
	s->peer_rekeyed = 0; /* a REKEY whose RESUME went with the link */
	if (s->rx_expect > s->rx_tail && s->as) {
		/* placed, their completions gone with the link: count them */
		s->rx_tail = s->rx_expect;
		if (!s->rx_switch)
			ring_store(&s->as->rx.tail, s->rx_tail);
		hsock_wake(s);
	}
	if (s->tx_old_size) {
		/* a send ring that grew: its bytes were copied to the new one */
		s->tx_old_until = s->tx_done;
		hsock_tx_old_done(s);
	}
	h->nsuspended++;
	return 1;
}

void hsock_resume_forget(struct hsock *s)
{
	if (s->redial)
		the_hub->nredial--;
	s->redial = 0;
	if (s->suspended)
		the_hub->nsuspended--;
	s->suspended = s->resuming = 0;
	s->susp_ms = s->unacked_ms = 0;
}

/* A lost link's peer is connected to again, from either side (an incoming
 * link's peer listens on the hub port too). */
void hub_relink_note(struct hub *h, struct link *l)
{
	struct relink *r;
	if (!l->lost)
		return;
	struct link *o = link_up_to(h, l->x.peer_node, l, NULL);
	if (o) {
		hub_resume_link_up(h, o); /* another link to the peer is up */
		return;
	}
	for (uint32_t i = 0; i < h->nrelinks; i++)
		if (h->relinks[i].node == l->x.peer_node)
			return;
	if (h->nrelinks == h->relinks_cap) {
		uint32_t cap = h->relinks_cap ? h->relinks_cap * 2 : 4;
		struct relink *n = realloc(h->relinks, cap * sizeof(*n));
		if (!n)
			return; /* the peer's own attempts, or a connect(), still may */
		h->relinks = n;
		h->relinks_cap = cap;
	}
	r = &h->relinks[h->nrelinks++];
	r->addr = l->x.peer_addr;
	addr_set_port(&r->addr, h->port);
	r->node = l->x.peer_node;
	r->next_ms = r->since_ms = r->soft_ms = hub_now_ms(); /* at once: a refusal says soon that no hub is there */
	r->tries = 0;
	r->refused_ms = 0;
}

/* A waiting connection ends with ECONNRESET, forgotten by the peer side:
 * a RESUME for it is answered with RESET. */
void hsock_waiting_reset(struct hub *h, struct hsock *s)
{
	hsock_resume_forget(s);
	s->peer = 0;
	if (s->state == HS_LINGER || (s->closing && !s->nholders))
		hsock_free(h, s);
	else
		hsock_set_closed(s, ECONNRESET);
}

/* The node of a lost link refused a new one: it has no hub (it stopped,
 * or died and nothing started it again).  Its connections are reset, as
 * a rebooted host answers with RST. */
void hub_relink_refused(struct hub *h, struct link *l)
{
	uint64_t now = hub_now_ms();
	for (uint32_t i = 0; i < h->nrelinks;) {
		struct relink *r = &h->relinks[i];
		uint32_t n = 0;
		if (!addr_same_ip(&r->addr, &l->x.peer_addr)) {
			i++;
			continue;
		}
		if (!(l->x.xp->ops->flags & XP_POSITIONAL)) {
			/* a hub on verbs that restarts listens again only once
			 * its successor opened the device; and a node whose
			 * hub is there rejects now and then for a moment after
			 * an outage (its port's address not back yet, the lost
			 * link's connection still in its connection manager):
			 * the node has no hub once it refused for
			 * HUB_RELINK_REFUSED_HOLD_MS, tried every
			 * HUB_RELINK_QUICK_MS */
			if (now - r->since_ms >= HUB_RELINK_REFUSED_GRACE_MS && !r->refused_ms)
				r->refused_ms = now;
			if (!r->refused_ms || now - r->refused_ms < HUB_RELINK_REFUSED_HOLD_MS) {
				r->next_ms = now + HUB_RELINK_QUICK_MS;
				i++;
				continue;
			}
		}
		for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
			struct hsock *s = h->socks[sid];
			if (!s || !s->suspended || s->susp_node != r->node)
				continue;
			hsock_waiting_reset(h, s);
			n++;
		}
		log_info("node %016llx has no hub any more: %u connections reset", (unsigned long long)r->node, n);
		*r = h->relinks[--h->nrelinks];
	}
}

/* A new link to the node of a lost one ended otherwise than refused (it
 * timed out, say): the node's refusals, if it refuses again, are held
 * for HUB_RELINK_REFUSED_HOLD_MS afresh. */
void hub_relink_unrefused(struct hub *h, const struct link *l)
{
	for (uint32_t i = 0; i < h->nrelinks; i++)
		if (addr_same_ip(&h->relinks[i].addr, &l->x.peer_addr))
			h->relinks[i].refused_ms = 0;
}

/* A verbs try that did not get as far as the peer's address (our port
 * down, the peer's gone from the network): soft would not get through
 * either, and its time does not count towards trying soft (RELINK_SOFT_MS
 * counts verbs failing while the peer answers on IP: RoCE blocked). */
void hub_relink_unreached(struct hub *h, const struct link *l)
{
	uint64_t now = hub_now_ms();
	for (uint32_t i = 0; i < h->nrelinks; i++)
		if (addr_same_ip(&h->relinks[i].addr, &l->x.peer_addr))
			h->relinks[i].soft_ms = now;
}

static void send_resume(struct hsock *s)
{
	struct wire_ctl c = {.op = CTL_RESUME, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
	c.val = s->rx_tail;
	c.ring = s->peer_ring;
	c.reason = s->rx_fin ? RESUME_HAVE_FIN : 0;
	wire_resume_put(&c, s->tx_done, s->credit_sent, s->peer_switch_at);
	if (!hsock_positional(s)) {
		if (hsock_ring_changing(s) && s->rx_next_off)
			hsock_send_rekey(s);
		/* the ring the peer writes to: the new one once it switched */
		wire_resume_ring_put(&c, hsock_ring_addr(s, s->rx_switch ? s->rx_next_off : s->rx_off),
				     s->rx_switch ? s->rx_next_rkey : s->rx_rkey);
	}
	link_send_ctl(s->link, &c, 0);
}

/* s goes on over l: attached, and our RESUME sent; 0, or -1 when it cannot
 * (it was reset). */
static int attach(struct hub *h, struct hsock *s, struct link *l)
{
	uint64_t head;
	if (!(l->x.xp->ops->flags & XP_POSITIONAL) && (!s->peer_raddr || (s->as && !s->rx_rkey))) {
		/* a soft connection has no keys for a verbs link */
		hsock_abort(h, s, "its link came back on another transport");
		return -1;
	}
	if (s->suspended)
		h->nsuspended--;
	else
		hsock_uncount(s); /* resuming on another link */
	s->suspended = 0;
	s->resuming = 1;
	s->link = l;
	s->counted = 1;
	l->conns++;
	l->conns_total++;
	s->rx_expect = s->rx_tail;
	head = s->as ? hsock_rx_head(s, NULL) : s->rx_tail;
	if (ring_sane(head, s->rx_tail, s->rx_size) && head > s->credit_sent)
		s->credit_sent = head;
	send_resume(s);
	return 0;
}

void hub_resume_link_up(struct hub *h, struct link *l)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < h->nrelinks; i++)
		if (h->relinks[i].node == l->x.peer_node)
			h->relinks[i] = h->relinks[--h->nrelinks];
	/* (a send that fails loses the link at once: the rest wait on) */
	for (uint32_t sid = 1; h->nsuspended && sid < h->sid_hi && l->state == LINK_UP; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->suspended && s->susp_node == l->x.peer_node && attach(h, s, l) == 0)
			n++;
	}
	if (n)
		log_info("link %u: %u connections go on over it", l->x.id, n);
}

/* The peer's positions, applied: NULL, or why the stream cannot go on. */
static const char *resume_apply(struct hub *h, struct hsock *s, const struct wire_ctl *c)
{
	uint64_t placed = c->val, done, head, at, pos, sent = s->tx_posted;
	wire_resume_get(c, &done, &head, &at);
	if (hsock_offer_settle(h, s, c->ring, at) < 0) {
		log_warn("socket %u: the peer switched to the ring of %u at %llu; our reader is at %llu, credit %llu",
			 s->sid, c->ring, (unsigned long long)at, (unsigned long long)(s->as ? ring_load(&s->as->rx.head) : 0),
			 (unsigned long long)s->credit_sent);
		return "its ring switch is at an impossible position";
	}
	pos = placed;
	if (s->susp_placed && s->tx_done > pos)
		pos = s->tx_done; /* our writes that completed are in its ring */
	if (s->torn && s->as) {
		/* a hub that died may have sent bytes it did not count: the
		 * peer may have them, up to what the process wrote */
		uint64_t t = ring_load(&s->as->tx.tail);
		if (t > sent && t - s->tx_done <= s->tx_size)
			sent = t;
	}
	if (placed > sent)
		return "it placed more than was sent";
	if (head > placed)
		return "its reader took more than it placed";
	if (pos < s->tx_done)
		return "it placed less than had completed here";
	s->tx_posted = pos;
	if (pos > s->tx_done) {
		s->bytes_tx += pos - s->tx_done;
		s->tx_done = pos;
		if (s->as)
			ring_store(&s->as->tx.head, pos);
	}
	if (head > s->peer_head)
		s->peer_head = head;
	if (!hsock_positional(s)) {
		uint64_t raddr;
		uint32_t rkey = wire_resume_ring_get(c, &raddr);
		if (rkey && !raddr)
			return "its ring has a key and no address";
		if (rkey) { /* the ring we write to (its hub may have registered it again) */
			s->peer_raddr = raddr;
			s->peer_rkey = rkey;
		}
		if (s->peer_rekeyed && hsock_rekey_apply(s) < 0)
			return "neither of its rings is the one written to";
	}
	if (s->susp_placed && done > s->rx_tail) {
		/* its writes that completed are in our ring: the tail moves
		 * over them, and what it writes next follows them */
		uint64_t d = done - s->rx_tail, rh = s->as ? hsock_rx_head(s, NULL) : s->rx_tail;
		if (done - rh > hsock_rx_room(s))
			return "its completed writes pass our ring's room";
		s->rx_tail += d;
		s->rx_expect += d;
		if (s->as && !s->rx_switch) /* else shown once the ring moved */
			ring_store(&s->as->rx.tail, s->rx_tail);
	}
	if (s->fin_sent && !(c->reason & RESUME_HAVE_FIN))
		s->fin_sent = s->fin_done = 0; /* it goes again, after the data */
	return NULL;
}

/* Woken only when the RESUME moved what a waiter looks at (or its FIN
 * goes again): a waiter woken for nothing spins before it sleeps again,
 * and a signal that lands in that spin is not seen as kernel TCP's
 * blocked call would see it (rshare(7), BUGS). */
static void resumed(struct hub *h, struct hsock *s, int moved)
{
	s->resuming = 0;
	s->torn = 0;
	s->susp_ms = s->unacked_ms = 0;
	h->conns_resumed++;
	if (s->state == HS_LINGER) {
		if (s->fin_pending && !s->fin_sent) {
			struct wire_ctl c = {.op = CTL_FIN, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
			s->fin_sent = 1;
			link_send_ctl(s->link, &c, tag_make(s->sid, s->gen));
		}
		return;
	}
	hsock_tx(h, s);
	hsock_credit(h, s);
	if (moved)
		hsock_wake(s);
	hsock_finish_close(h, s);
}

void hub_on_resume(struct hub *h, struct link *l, const struct wire_ctl *c)
{
	struct hsock *s = hsock_by_imm(h, c->dst);
	uint64_t rx0, tx0;
	const char *why;
	if (!s || s->peer != c->src || s->lp) {
		if (!s && hub_timewait_answer(h, l, c))
			return; /* it ended cleanly: the peer's successor lacks our FIN */
		h->stale_dropped++;
		link_send_simple(l, CTL_RESET, c->src, 0, 0);
		return;
	}
	if (s->link != l) {
		struct link *m = s->link;
		if (m && m->state == LINK_UP && !s->resuming) {
			/* the peer lost the link that we still hold: ours is gone too */
			m->lost = 1;
			hub_link_fail(&m->x, "the peer goes on over a new link");
			m = NULL;
		}
		if (m && s->resuming && link_opener(h, m) < link_opener(h, l))
			return; /* both links new: it goes on over the other one */
		if ((!s->suspended && !s->resuming) || (s->suspended && s->susp_node != l->x.peer_node) ||
		    attach(h, s, l) < 0) {
			link_send_simple(l, CTL_RESET, c->src, 0, 0);
			return;
		}
	}
	if (!s->resuming) {
		h->stale_dropped++; /* a second RESUME: nothing to do */
		return;
	}
	rx0 = s->rx_tail;
	tx0 = s->tx_done;
	why = resume_apply(h, s, c);
	s->peer_rekeyed = 0;
	if (why) {
		log_warn("socket %u: cannot go on: %s (it placed %llu, we sent %llu, %llu completed)", s->sid, why,
			 (unsigned long long)c->val, (unsigned long long)s->tx_posted, (unsigned long long)s->tx_done);
		s->resuming = 0;
		hsock_abort(h, s, "bytes lost with the link");
		return;
	}
	log_debug("socket %u: goes on over link %u at %llu sent, %llu received", s->sid, l->x.id,
		  (unsigned long long)s->tx_posted, (unsigned long long)s->rx_tail);
	resumed(h, s, s->rx_tail != rx0 || s->tx_done != tx0);
}

/* A connect whose CONNECT (or its answer) went with a lost link is made
 * again once that link is gone (the next timer's turn), over a new link to
 * the node: the peer may have accepted the first one, which it resets
 * when our side does not know it (its RESUME is answered with RESET). */
void hsock_redial_later(struct hub *h, struct hsock *s)
{
	s->connect_sent = 0;
	if (!s->redial)
		h->nredial++;
	s->redial = 1;
}

/* net.ipv4.tcp_keepalive_time, _intvl and _probes of the hub's namespace:
 * the keepalive a program asked for with SO_KEEPALIVE alone */
void hub_resume_init(struct hub *h)
{
	static const char *const names[3] = {"time", "intvl", "probes"};
	static const uint32_t defaults[3] = {7200, 75, 9};
	uint32_t *to[3] = {&h->ka_time_s, &h->ka_intvl_s, &h->ka_probes};
	for (int i = 0; i < 3; i++) {
		char path[64];
		unsigned v = 0;
		FILE *f;
		snprintf(path, sizeof(path), "/proc/sys/net/ipv4/tcp_keepalive_%s", names[i]);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%u", &v) != 1 || v == 0)
			v = defaults[i];
		if (f)
			fclose(f);
		*to[i] = v;
	}
}

/* Whether s has bytes or a FIN the peer has not taken: its clock runs. */
static int unacked(const struct hsock *s)
{
	if (s->state == HS_LINGER || s->tx_posted != s->tx_done || (s->fin_pending && !s->fin_done))
		return 1;
	return s->as && ring_load(&s->as->tx.tail) != s->tx_done; /* (the process's word: its own loss) */
}

/* an int option of s's slot within [1, max] (the kernel's bounds), or DEF */
static uint64_t opt_int(const struct hsock *s, int i, uint32_t def, int32_t max)
{
	int32_t v = s->as ? s->as->opts.ival[i] : 0;
	return v >= 1 && v <= max ? (uint64_t)v : def;
}

/* When a waiting connection gives up, as kernel TCP's would; 0: never.
 *   - data or a FIN not taken by the peer (or closed here): link_outage
 *     after that began (tcp_retries2), or TCP_USER_TIMEOUT where set;
 *   - idle: never (kernel TCP sends nothing then), unless the program
 *     asked for keepalives: after TCP_KEEPIDLE and TCP_KEEPCNT probes
 *     TCP_KEEPINTVL apart (or, with TCP_USER_TIMEOUT, the first probe
 *     past it), counted from the loss of the link. */
static uint64_t give_up_at(struct hub *h, struct hsock *s, uint64_t now, const char **why)
{
	uint64_t ut = opt_int(s, SLOT_OPTI_USER_TIMEOUT, 0, INT32_MAX), idle, intvl;
	if (!s->unacked_ms && unacked(s))
		s->unacked_ms = now;
	if (s->unacked_ms) {
		*why = ut ? "TCP_USER_TIMEOUT" : "link_outage";
		return s->unacked_ms + (ut ? ut : h->link_outage_ms);
	}
	if (!s->as || !(atomic_load(&s->as->opts.bools) & (1u << SLOT_OPTB_KEEPALIVE)))
		return 0;
	*why = "keepalive";
	idle = opt_int(s, SLOT_OPTI_KEEPIDLE, h->ka_time_s, 32767) * 1000;
	intvl = opt_int(s, SLOT_OPTI_KEEPINTVL, h->ka_intvl_s, 32767) * 1000;
	if (ut)
		return s->susp_ms + (ut > idle + intvl ? ut : idle + intvl);
	return s->susp_ms + idle + intvl * opt_int(s, SLOT_OPTI_KEEPCNT, h->ka_probes, 127);
}

/* A connection that waited too long: closed as kernel TCP's is when its
 * retransmissions or its keepalive probes run out. */
static void expire(struct hub *h, struct hsock *s, const char *why, uint64_t now)
{
	log_info("socket %u: no link to its peer for %llu ms (%s): closed", s->sid,
		 (unsigned long long)(now - s->susp_ms), why);
	hsock_resume_forget(s);
	h->conns_expired++;
	hsock_uncount(s);
	s->link = NULL;
	s->peer = 0;
	if (s->state == HS_LINGER || (s->closing && !s->nholders)) {
		hsock_free(h, s);
		return;
	}
	hsock_set_closed(s, ETIMEDOUT);
}

static int link_to(struct hub *h, const struct relink *r)
{
	for (struct link *l = h->links; l; l = l->next)
		if (l->state != LINK_DOWN && (l->x.peer_node == r->node || addr_same_ip(&l->x.peer_addr, &r->addr)))
			return 1;
	return 0;
}

#define RELINK_SOFT_MS 30000
#define RELINK_SLOW_AFTER_MS 60000 /* then a peer is tried every HUB_RELINK_SLOW_MS */
#define HUB_RELINK_SLOW_MS 10000

static void relink_try(struct hub *h, struct relink *r, uint64_t now)
{
	struct link *n = NULL;
	r->tries++;
	r->next_ms = now + (now - r->since_ms < RELINK_SLOW_AFTER_MS ? HUB_RELINK_MS : HUB_RELINK_SLOW_MS);
	log_debug("connecting again to node %016llx (try %u)", (unsigned long long)r->node, r->tries);
	/* transport auto: verbs first; once verbs stayed down for
	 * RELINK_SOFT_MS, every other try is soft */
	if (now - r->soft_ms >= RELINK_SOFT_MS && r->tries % 2)
		n = hub_link_new_soft(h, &r->addr);
	if (n || (n = hub_link_new_outgoing(h, &r->addr)))
		n->relink = 1;
}

/* Every 100 ms while connections wait: one pass over the sockets gives up
 * on those whose time came and counts the others by node; a node nobody
 * waits for any more is not tried again. */
void hub_resume_timers(struct hub *h)
{
	uint64_t now;
	if (!h->nsuspended && !h->nrelinks && !h->nredial)
		return;
	now = hub_now_ms();
	if (now - h->resume_look_ms < 100)
		return;
	h->resume_look_ms = now;
	for (uint32_t i = 0; i < h->nrelinks; i++)
		h->relinks[i].waiting = 0;
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		const char *why = NULL;
		uint64_t at;
		if (s && s->redial) {
			hsock_resume_forget(s);
			hsock_redial(h, s);
			continue;
		}
		if (!s || (!s->suspended && !s->resuming))
			continue;
		at = give_up_at(h, s, now, &why);
		if (at && now >= at) {
			expire(h, s, why, now);
			continue;
		}
		for (uint32_t i = 0; s->suspended && i < h->nrelinks; i++)
			if (h->relinks[i].node == s->susp_node)
				h->relinks[i].waiting++;
	}
	for (uint32_t i = 0; i < h->nrelinks;) {
		struct relink *r = &h->relinks[i];
		if (!r->waiting) {
			*r = h->relinks[--h->nrelinks];
			continue;
		}
		if (now >= r->next_ms && !link_to(h, r))
			relink_try(h, r, now);
		i++;
	}
}
