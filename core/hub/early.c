/*
 * early.c - a connect across a link answered before the peer hub's ACCEPT.
 *
 * Kernel TCP's connect returns once the peer's kernel answered the SYN,
 * without the server program; an rshare connect to another node waits for
 * the peer hub's ACCEPT, a round trip over the link through both hubs.  So
 * each link remembers the ports of the peer node that it saw accept of
 * late (LINK_EARLY_PORTS of them), with the room that the listener's
 * backlog had (ACCEPT's reason), less the connects answered since.  A
 * connect to such a port with room is answered at once: its CONNECT goes
 * marked CONNECT_EARLY (the peer queues it even with a full backlog), the
 * socket shows established, and its FIN and a reset wait until the ACCEPT
 * names the peer's socket (hsock_tx, hsock_send_reset); on soft its first
 * bytes go before, as writes that name our socket (WIRE_BY_SRC), which the
 * peer hub maps to the socket it accepted (hub_rx_by_src), on verbs none.
 * Where the port has no room the connect waits, as the kernel's for a full
 * backlog.  A REFUSE for such a socket
 * (its listener stopped in between) resets it, as the kernel resets the
 * connections a closed listener held; it and UNLISTEN, which the peer hub
 * sends over every link when a listener stops, forget the port, so that a
 * connect to a port with no listener is refused in connect as before.
 */
#include "hub.h"

#include <errno.h>

#include "log.h"
#include "tag.h"

static struct early_port *port_find(struct link *l, uint16_t port)
{
	for (uint32_t i = 0; i < LINK_EARLY_PORTS; i++)
		if (l->early[i].port == port)
			return &l->early[i];
	return NULL;
}

/* The entry by which s's connect may be answered now (its port known,
 * with room), else NULL */
struct early_port *hub_early_port(struct hsock *s)
{
	struct early_port *e;
	uint16_t port = addr_port(&s->peer_addr);
	if (!port || !s->link || s->link->state != LINK_UP || !(e = port_find(s->link, port)))
		return NULL;
	return e->room ? e : NULL;
}

/* ... its CONNECT went, marked CONNECT_EARLY: answer it */
void hub_early_answer(struct hub *h, struct hsock *s, struct early_port *e)
{
	e->room--;
	e->inflight++;
	s->early = 1;
	s->state = HS_ESTABLISHED;
	atomic_store(&s->as->state, SLOT_ESTABLISHED);
	h->early_connects++;
	hsock_wake(s);
}

/* An ACCEPT for s came (before it is established): its port is known to
 * take connections, with the room the ACCEPT gives less those in flight */
void hub_early_learn(struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	uint16_t port = addr_port(&s->peer_addr);
	struct early_port *e;
	if (!port)
		return;
	if (!(e = port_find(l, port))) {
		e = &l->early[l->early_next++ % LINK_EARLY_PORTS];
		e->port = port;
		e->inflight = 0;
	}
	if (s->early && e->inflight)
		e->inflight--;
	e->room = c->reason > e->inflight ? (uint16_t)(c->reason - e->inflight) : 0;
}

/* No listener takes connections to port at the peer any more (its
 * UNLISTEN, or a REFUSE) */
void hub_early_forget(struct link *l, uint16_t port)
{
	struct early_port *e = port_find(l, port);
	if (e)
		*e = (struct early_port){0};
}

/* A listener here stopped: the nodes linked to us forget its port */
void hub_early_unlisten(struct hub *h, uint16_t port)
{
	struct wire_ctl c = {.op = CTL_UNLISTEN, .port = port};
	for (struct link *l = h->links; l; l = l->next)
		if (l->state == LINK_UP)
			link_send_ctl(l, &c, 0);
}

/* REFUSE for an early socket: reset, as a listener that stopped with the
 * connection in its queue resets it */
void hub_early_refused(struct hub *h, struct hsock *s)
{
	s->early = 0;
	if (s->state == HS_LINGER || (s->state == HS_ESTABLISHED && s->closing && !s->nholders)) {
		hsock_free(h, s);
		return;
	}
	if (s->state == HS_ESTABLISHED)
		hsock_set_closed(s, ECONNRESET);
}

/* Where a CONNECT for listener ls goes: 1 queued now, 0 pending until an
 * accept makes room (a full backlog: as a dropped SYN), -1 refused for
 * want of room.  One answered early (CONNECT_EARLY) may have sent bytes
 * already: it is queued past a full backlog, up to twice it and
 * EARLY_OVER more, which only a peer that ignores the room its ACCEPTs
 * gave reaches (beyond, its connection is reset: hub_early_refused). */
#define EARLY_OVER 64
int hub_early_room(const struct hsock *ls, const struct wire_ctl *c)
{
	if (ls->qlen < (uint32_t)ls->backlog)
		return 1;
	if (!(c->reason & CONNECT_EARLY))
		return 0;
	return ls->qlen < 2u * (uint32_t)ls->backlog + EARLY_OVER ? 1 : -1;
}

/* ---- writes before our ACCEPT (soft) ---- */

static uint32_t *by_src_head(struct hub *h, const struct link *l, uint32_t src)
{
	uint64_t k = ((uint64_t)l->x.id << 32 | src) * 0x9e3779b97f4a7c15ull;
	return &h->by_src[k >> 52 & (HUB_BY_SRC_BUCKETS - 1)];
}

/* s, just accepted on a soft link: the writes that its peer sends before
 * our ACCEPT reaches it name the peer's socket (WIRE_BY_SRC) */
void hub_by_src_add(struct hub *h, struct hsock *s)
{
	uint32_t *head;
	if (!s->link || !hsock_positional(s) || !s->peer)
		return;
	head = by_src_head(h, s->link, s->peer);
	s->by_src = s->peer;
	s->by_src_next = *head;
	*head = s->sid;
}

void hub_by_src_del(struct hub *h, struct hsock *s)
{
	if (!s->by_src || !s->link)
		return;
	uint32_t *at = by_src_head(h, s->link, s->by_src);
	for (; *at && h->socks[*at]; at = &h->socks[*at]->by_src_next)
		if (*at == s->sid) {
			*at = s->by_src_next;
			break;
		}
	s->by_src = 0;
}

uint32_t hub_rx_by_src(struct xlink *xl, uint32_t src)
{
	struct hub *h = the_hub;
	struct link *l = link_of(xl);
	struct hsock *s;
	for (uint32_t sid = src ? *by_src_head(h, l, src) : 0; sid && (s = h->socks[sid]); sid = s->by_src_next)
		if (s->by_src == src && s->link == l)
			return tag_imm(s->sid, s->gen);
	return 0;
}
