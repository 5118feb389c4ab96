/*
 * link.c - links between this hub and peer hubs, for the transports.
 *
 * A link is made on demand by the first connect() to a node (outgoing:
 * verbs when both nodes have an RDMA device on the route, else soft), or
 * by a peer (accepted); it is up once its transport says the peer's HELLO
 * came, and then carries every connection between the two nodes.  A verbs
 * link that never came up moves its waiting connections to a soft one
 * (fall_to_soft).  With transport auto, a soft link that this hub opened
 * has verbs tried beside it now and then (link_upgrade: after
 * LINK_UPGRADE_FIRST_MS, the wait doubling to LINK_UPGRADE_MAX_MS): a
 * verbs path that was missing for a moment (a port coming back from an
 * outage, RoCE blocked for a while) is taken again by new connections
 * (conn.c prefers a verbs link), while those on soft stay there.  Links of
 * two transports to one node stand side by side; two of one transport are
 * settled by link_dedup.  A failed link resets its connections (hub_link_gone,
 * sock.c), unless it was lost (hub_link_lost: the peer went unanswered),
 * when they wait for a new one (resume.c); it is freed after the current
 * batch of events.  Timers between
 * batches: connect deadlines, and on verbs a PING on a link that sent
 * nothing for HUB_KEEPALIVE_MS, whose failure tells of a vanished peer,
 * and the loss of a link whose transport awaited a completion for
 * LINK_STUCK_TIMEOUTS link timeouts (link_stuck).
 * Sockets that found no room on a link wait on its txwait list until the
 * transport says it has room again (hub_run_writable, from the loop).
 */
#include "hub.h"

#include <errno.h>
#include <stdio.h>

#include <stdlib.h>

#include "log.h"
#include "tag.h"

struct link *hub_link_alloc(struct hub *h, struct xport *xp)
{
	struct link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->ctl_bufs = calloc(HUB_CTL_RECVS, WIRE_CTL_LEN);
	if (!l->ctl_bufs) {
		free(l);
		return NULL;
	}
	l->x.id = ++h->next_link_id;
	l->x.xp = xp;
	l->next = h->links;
	h->links = l;
	return l;
}

static struct link *link_start(struct hub *h, struct xport *xp, const union sockaddr_any *peer)
{
	struct link *l = hub_link_alloc(h, xp);
	int r;
	if (!l)
		return NULL;
	l->x.outgoing = 1;
	l->state = LINK_CONNECTING;
	l->x.peer_addr = *peer;
	l->deadline_ms = hub_now_ms() + HUB_LINK_CONNECT_MS;
	if ((r = xp->ops->link_connect(xp, &l->x, peer)) < 0) {
		log_info("link %u: cannot start it: %s", l->x.id, strerror(-r));
		if (xp == &h->verbs)
			hub_relink_unreached(h, l); /* our port is down, most often */
		hub_link_fail(&l->x, "cannot start the link");
		return NULL;
	}
	return l;
}

/* verbs when both nodes have an RDMA device on the route, else soft (the
 * verbs attempt failing moves its connections to a soft link), unless
 * RSHARE_TRANSPORT says otherwise. */
struct link *hub_link_new_soft(struct hub *h, const union sockaddr_any *peer)
{
	return h->mode == HUB_AUTO && h->soft.up ? link_start(h, &h->soft, peer) : NULL;
}

struct link *hub_link_new_outgoing(struct hub *h, const union sockaddr_any *peer)
{
	if (h->mode == HUB_VERBS && !h->verbs.up)
		return NULL;
	if (h->mode != HUB_SOFT && h->verbs.up) {
		struct link *l = link_start(h, &h->verbs, peer);
		if (l || h->mode == HUB_VERBS)
			return l;
	}
	return link_start(h, &h->soft, peer);
}

/* A verbs link that never came up: its connections try a soft one. */
static void fall_to_soft(struct hub *h, struct link *l)
{
	struct link *n;
	int moved = 0;
	if (l->was_up || !l->x.outgoing || l->x.xp != &h->verbs || h->mode != HUB_AUTO)
		return;
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == l && s->state == HS_CONNECTING && !s->connect_sent)
			moved++;
	}
	if (!moved)
		return;
	n = link_start(h, &h->soft, &l->x.peer_addr);
	for (uint32_t sid = 1; n && sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == l && s->state == HS_CONNECTING && !s->connect_sent)
			s->link = n;
	}
	if (n)
		log_info("link %u: no verbs path to the peer, link %u tries soft", l->x.id, n->x.id);
}

struct xlink *hub_link_accepted(struct hub *h, struct xport *xp, const union sockaddr_any *peer,
				const union sockaddr_any *local)
{
	struct link *l = hub_link_alloc(h, xp);
	if (!l)
		return NULL;
	l->state = LINK_CONNECTING;
	l->x.peer_addr = *peer;
	l->x.local_addr = *local;
	l->deadline_ms = hub_now_ms() + HUB_LINK_CONNECT_MS;
	return &l->x;
}

/* A link up to NODE other than EXCEPT, on transport XP (NULL: any). */
struct link *link_up_to(struct hub *h, uint64_t node, const struct link *except, const struct xport *xp)
{
	for (struct link *o = h->links; o; o = o->next)
		if (o != except && o->state == LINK_UP && o->x.peer_node == node && (!xp || o->x.xp == xp))
			return o;
	return NULL;
}

/* Two links of one transport up between the same nodes (each hub
 * connected to the other at once, bringing a lost link back): both sides
 * drop the one the larger node id opened, as lost, so that its connections
 * go on over the other (resume.c); the link that stays, l itself or the
 * other one (NULL: it went and the other is not up).  A verbs link beside
 * a soft one (link_upgrade) stays: each keeps its own connections. */
static struct link *link_dedup(struct hub *h, struct link *l)
{
	struct link *o = link_up_to(h, l->x.peer_node, l, l->x.xp), *drop, *keep;
	if (!o)
		return l;
	drop = link_opener(h, l) < link_opener(h, o) ? o : link_opener(h, o) < link_opener(h, l) ? l : NULL;
	if (!drop)
		return l; /* both opened by one side: both stay */
	keep = drop == l ? o : l;
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == drop && s->state == HS_CONNECTING && !s->connect_sent)
			s->link = keep; /* connects that waited for it: connected below */
	}
	drop->lost = 1;
	hub_link_fail(&drop->x, "a second link to the node");
	return keep->state == LINK_UP ? keep : NULL;
}

void hub_link_up(struct xlink *xl, uint64_t peer_node)
{
	struct hub *h = the_hub;
	struct link *l = link_of(xl);
	l->x.peer_node = peer_node;
	l->state = LINK_UP;
	l->was_up = 1;
	for (uint32_t i = 0; i < HUB_CTL_RECVS; i++)
		l->x.xp->ops->post_recv(&l->x, i, l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, WIRE_CTL_LEN);
	log_info("link %u up: peer node %016llx (%s%s)", l->x.id, (unsigned long long)peer_node,
		 l->x.outgoing ? "outgoing" : "incoming", l->probe ? "; verbs is back beside soft, new connections take it" : "");
	/* of two, the connects that waited for the one that went go over the other */
	if (!(l = link_dedup(h, l)))
		return;
	/* connections that waited for the link */
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == l && s->state == HS_CONNECTING && !s->connect_sent &&
		    hsock_connect(h, s, NULL) < 0)
			hsock_set_closed(s, EADDRNOTAVAIL);
	}
	hub_resume_link_up(h, l);
}

void hub_link_fail(struct xlink *xl, const char *why)
{
	struct hub *h = the_hub;
	struct link *l = link_of(xl);
	struct link **pp;
	int was_up = l->state == LINK_UP;
	if (l->state == LINK_DOWN)
		return;
	if (was_up) {
		log_warn("link %u to node %016llx dropped: %s", l->x.id, (unsigned long long)l->x.peer_node, why);
		h->links_dropped++;
	} else if (l->relink || l->probe) {
		log_debug("link %u not established: %s", l->x.id, why);
	} else {
		log_info("link %u not established: %s", l->x.id, why);
	}
	if (l->lost && l->state == LINK_UP && l->x.xp->ops->link_drain) {
		l->state = LINK_DOWN; /* what comes in now is placed, nothing else */
		l->x.xp->ops->link_drain(&l->x, h->handing_over ? HUB_HANDOVER_DRAIN_MS : 0);
	}
	l->x.xp->ops->link_close(&l->x);
	l->state = LINK_DOWN;
	fall_to_soft(h, l);
	hub_link_gone(h, l);
	hub_relink_note(h, l);
	if (l->refused)
		hub_relink_refused(h, l);
	else if (l->relink && !was_up)
		hub_relink_unrefused(h, l);
	if (l->relink && !was_up && l->x.xp == &h->verbs && !l->x.reached)
		hub_relink_unreached(h, l);
	l->state = LINK_DOWN;
	for (pp = &h->links; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	free(l->txwait);
	l->txwait = NULL;
	l->ntxwait = 0;
	hub_defer_free(h, l->ctl_bufs);
	hub_defer_free(h, l);
}

void hub_link_refused(struct xlink *xl, const char *why)
{
	struct link *l = link_of(xl);
	if (l->state == LINK_CONNECTING)
		l->refused = 1;
	hub_link_fail(xl, why);
}

void hub_link_lost(struct xlink *xl, const char *why)
{
	struct link *l = link_of(xl);
	if (l->state == LINK_UP && !l->lost) {
		l->lost = 1;
		the_hub->links_lost++;
	}
	hub_link_fail(xl, why);
}

/* A transport says posting may resume.  Only noted here: the waiting
 * sockets are resumed from the main loop (hub_run_writable), never from
 * inside a post, where the socket being posted from may itself be waiting
 * and would post the same bytes twice. */
void hub_link_writable(struct xlink *xl)
{
	link_of(xl)->writable = 1;
}

int hub_link_waiting(const struct xlink *xl)
{
	return link_of((struct xlink *)xl)->ntxwait != 0;
}

int hub_run_writable(struct hub *h)
{
	int ran = 0;
	for (struct link *l = h->links; l; l = l->next) {
		uint32_t n, *w;
		if (!l->writable || l->state != LINK_UP)
			continue;
		l->writable = 0;
		n = l->ntxwait;
		w = l->txwait;
		l->txwait = NULL;
		l->ntxwait = l->txwait_cap = 0;
		for (uint32_t i = 0; i < n; i++) {
			struct hsock *s = h->socks[w[i]];
			if (s && s->link == l) {
				s->on_txwait = 0;
				hsock_tx(h, s);
			}
		}
		free(w);
		ran |= n > 0;
	}
	return ran;
}

void hub_reap_doomed(struct hub *h)
{
	struct link *l;
again:
	for (l = h->links; l; l = l->next)
		if (l->doomed && l->state != LINK_DOWN) {
			hub_link_fail(&l->x, l->doomed);
			goto again;
		}
}

/* A link whose transport awaits a completion that has not come for twice
 * the link timeout (the queue pair's retries end within it, with an error
 * if the peer is gone) is lost, as if the retries had run out: a queue
 * pair that neither completes nor fails would hold its connections for
 * ever.  1 when it went. */
#define LINK_STUCK_TIMEOUTS 2
static int link_stuck(struct hub *h, struct link *l, uint64_t now)
{
	uint64_t tok;
	char why[64];
	if (!l->x.xp->ops->awaited)
		return 0;
	tok = l->x.xp->ops->awaited(&l->x);
	if (!tok || tok != l->await_tok) {
		l->await_tok = tok;
		l->await_ms = now;
		return 0;
	}
	if (now - l->await_ms < (uint64_t)LINK_STUCK_TIMEOUTS * h->link_timeout_ms)
		return 0;
	snprintf(why, sizeof(why), "no completion for %llu ms", (unsigned long long)(now - l->await_ms));
	hub_link_lost(&l->x, why);
	return 1;
}

/* Transport auto: a soft link this hub opened to a node with no verbs
 * link has verbs tried beside it, LINK_UPGRADE_FIRST_MS after it came up
 * and then at doubling waits up to LINK_UPGRADE_MAX_MS (a node without
 * an RDMA device, or RoCE blocked for good, costs a connect request that
 * times out now and then).  The probe carries no connection; once up, new
 * connections to the node take it (link_for, conn.c). */
#define LINK_UPGRADE_FIRST_MS 10000
#define LINK_UPGRADE_MAX_MS 300000
static void link_upgrade(struct hub *h, struct link *l, uint64_t now)
{
	union sockaddr_any a;
	struct link *v;
	if (h->mode != HUB_AUTO || !h->verbs.up || l->x.xp != &h->soft || !l->x.outgoing || l->state != LINK_UP)
		return;
	if (!l->upgrade_gap) {
		l->upgrade_gap = LINK_UPGRADE_FIRST_MS;
		l->upgrade_ms = now + l->upgrade_gap;
	}
	if (now < l->upgrade_ms)
		return;
	for (v = h->links; v; v = v->next)
		if (v->x.xp == &h->verbs && v->state != LINK_DOWN &&
		    (v->x.peer_node == l->x.peer_node || addr_same_ip(&v->x.peer_addr, &l->x.peer_addr)))
			return; /* up, or on its way */
	l->upgrade_gap = l->upgrade_gap * 2 > LINK_UPGRADE_MAX_MS ? LINK_UPGRADE_MAX_MS : l->upgrade_gap * 2;
	l->upgrade_ms = now + l->upgrade_gap;
	a = l->x.peer_addr;
	addr_set_port(&a, h->port);
	log_debug("link %u: trying verbs to node %016llx beside it", l->x.id, (unsigned long long)l->x.peer_node);
	if ((v = link_start(h, &h->verbs, &a)))
		v->probe = 1;
}

void hub_link_timers(struct hub *h)
{
	uint64_t now = hub_now_ms();
	struct link *l, *next;
	for (l = h->links; l; l = next) {
		next = l->next;
		if (l->state == LINK_CONNECTING && now > l->deadline_ms) {
			hub_link_fail(&l->x, "connect timed out");
			continue;
		}
		if (l->state == LINK_UP && link_stuck(h, l, now))
			continue;
		link_upgrade(h, l, now);
		/* verbs: a link that sent nothing lately sends a PING, whose
		 * failure (the queue pair's retries exhausted) drops it; soft
		 * links have TCP keepalive for that */
		if (l->state == LINK_UP && !(l->x.xp->ops->flags & XP_POSITIONAL)) {
			if (l->msgs_tx != l->msgs_tx_seen) {
				l->msgs_tx_seen = l->msgs_tx;
				l->ping_ms = now;
			} else if (now - l->ping_ms >= HUB_KEEPALIVE_MS) {
				l->ping_ms = now;
				hub_link_ping(l);
				l->msgs_tx_seen = l->msgs_tx;
			}
		}
	}
}

/* A keepalive on a link that sent nothing for a while: on verbs it is the
 * only way to learn that the peer vanished while the link idles (the send
 * fails after the queue pair's retries, and the link is dropped). */
void hub_link_ping(struct link *l)
{
	link_send_simple(l, CTL_PING, 0, 0, 0);
}
