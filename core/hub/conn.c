/*
 * conn.c - connection set-up in the hub: connect, listen, accept.
 *
 * Connection set-up is one round trip on an existing link: CONNECT (the
 * connecting socket, its ring and, on verbs, the ring's address and key)
 * -> ACCEPT (the same of the accepted socket) or REFUSE (no listener: the
 * process gets ECONNREFUSED from kernel TCP; no room: it falls back to
 * kernel TCP).  A connect with no link to its node yet starts one and waits
 * for it (hub_link_up comes back to hsock_connect).  As the kernel, a
 * listener completes connections before accept(), up to backlog + 1; more
 * wait on its pending list, as dropped SYNs.  A connect to an address of
 * this node needs no link: both sockets are made at once and share a pair
 * segment's rings (local_connect, local_admit; pair.c).
 */
#include "hub.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tag.h"

/* ---- connect ---- */

/* The link a connect to dst goes over: a verbs link up to its node, else
 * one that is up (a soft one may stand beside a verbs link that is being
 * tried, link_upgrade), else one on its way, else a new one. */
static struct link *link_for(struct hub *h, const union sockaddr_any *dst)
{
	union sockaddr_any hub_addr = *dst;
	struct link *any = NULL;
	for (struct link *l = h->links; l; l = l->next) {
		if (l->state == LINK_DOWN || !addr_same_ip(&l->x.peer_addr, dst))
			continue;
		if (l->state == LINK_UP && l->x.xp == &h->verbs)
			return l;
		if (!any || (any->state != LINK_UP && l->state == LINK_UP))
			any = l;
	}
	if (any)
		return any;
	addr_set_port(&hub_addr, h->port);
	return hub_link_new_outgoing(h, &hub_addr);
}

/* Memory keys for the rings of s (verbs): its receive ring's, and its
 * send ring's while it has a slot; 0 or -errno. */
int hsock_ring_keys(struct hub *h, struct hsock *s)
{
	uint32_t unused;
	int r = pool_keys(h, s->pool, s->rx_off, s->rx_size, 1, &unused, &s->rx_rkey);
	if (r < 0 || !s->as)
		return r;
	return pool_keys(h, s->pool, s->tx_off, s->tx_size, 0, &s->tx_lkey, &unused);
}

/* ... on its link's transport */
static int ring_keys(struct hub *h, struct hsock *s)
{
	if (hsock_positional(s))
		return 0;
	return hsock_ring_keys(h, s);
}

static uint64_t rx_addr(struct hsock *s)
{
	if (hsock_positional(s))
		return 0;
	return hsock_ring_addr(s, s->rx_off);
}

/* The CONNECT that a link would carry for s, to d (its source address
 * filled in from s's bound port, or one of the node's ephemeral ports
 * (ports.c), and the link's, or d's, address), and what getsockname()
 * shows from now on; -EADDRNOTAVAIL when no port is free towards d. */
static int connect_ctl(struct hub *h, struct hsock *s, const union sockaddr_any *via, struct wire_ctl *c)
{
	union sockaddr_any src, d = s->peer_addr;
	int r;
	wire_addr_unmap(&d);
	wire_addr_put(c->addr_a, &c->family, &c->port, &d);
	src = s->local;
	wire_addr_unmap(&src);
	if (addr_is_any(&src) || src.sa.sa_family != c->family) {
		uint16_t port = addr_port(&s->local);
		src = *via;
		addr_set_port(&src, port);
	}
	/* what getsockname() shows: the link's address and the port */
	if (s->local.sa.sa_family == AF_INET6 && src.sa.sa_family == AF_INET) {
		s->as->local.in6.sin6_family = AF_INET6;
		s->as->local.in6.sin6_port = src.in.sin_port;
		s->as->local.in6.sin6_addr.s6_addr[10] = 0xff;
		s->as->local.in6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&s->as->local.in6.sin6_addr.s6_addr[12], &src.in.sin_addr, 4);
	} else {
		s->as->local = src;
	}
	s->local = s->as->local;
	if (!s->port_claimed && (r = ports_claim(h, s)) < 0)
		return r;
	s->as->local = s->local;
	src = s->local;
	wire_addr_unmap(&src);
	{
		uint8_t fam;
		wire_addr_put(c->addr_b, &fam, &c->src_port, &src);
		if (fam != c->family) {
			/* mixed families on one link cannot name the source: leave it empty */
			memset(c->addr_b, 0, sizeof(c->addr_b));
		}
	}
	s->as->peer = s->peer_addr;
	c->src = tag_imm(s->sid, s->gen);
	return 0;
}

static int local_connect(struct hub *h, struct hsock *s, const union sockaddr_any *d);

int hsock_connect(struct hub *h, struct hsock *s, const union sockaddr_any *dst)
{
	struct wire_ctl c = {.op = CTL_CONNECT};
	struct early_port *e;
	int r;
	if (dst) {
		union sockaddr_any d = *dst;
		wire_addr_unmap(&d);
		if (d.sa.sa_family != AF_INET && d.sa.sa_family != AF_INET6)
			return -EAFNOSUPPORT;
		s->peer_addr = *dst;
		s->state = HS_CONNECTING;
		atomic_store(&s->as->state, SLOT_CONNECTING);
		if (hpair_is_local(h, &d))
			return local_connect(h, s, &d); /* its rings are in a pair segment */
		s->link = link_for(h, &d);
		s->rx_size = link_first_ring(s->link, s->rx_size, s->rx_fixed);
		s->tx_size = link_first_ring(s->link, s->tx_size, s->tx_fixed);
		if (hsock_rings_alloc(s) < 0)
			return -ENOBUFS;
		if (link_pins(s->link))
			atomic_fetch_or(&s->as->flags, SLOTF_SMALL);
		if (!s->link) {
			/* no way to reach a hub there: the process uses kernel TCP */
			s->state = HS_FALLBACK;
			atomic_store(&s->as->state, SLOT_FALLBACK);
			h->fallback_connects++;
			return 0;
		}
		if (s->link->state != LINK_UP)
			return 0; /* hub_link_up() comes back here */
	}
	if ((r = connect_ctl(h, s, &s->link->x.local_addr, &c)) < 0)
		return r;
	c.ring = (uint32_t)s->rx_size;
	if (ring_keys(h, s) < 0) {
		s->state = HS_FALLBACK; /* cannot register: let the kernel carry it */
		atomic_store(&s->as->state, SLOT_FALLBACK);
		h->fallback_connects++;
		hsock_wake(s);
		return 0;
	}
	c.val = rx_addr(s);
	c.rkey = s->rx_rkey;
	s->connect_sent = 1;
	if ((e = hub_early_port(s)))
		c.reason = CONNECT_EARLY;
	link_send_ctl(s->link, &c, tag_make(s->sid, s->gen));
	if (e)
		hub_early_answer(h, s, e);
	return 0;
}

/* A connect whose CONNECT went with a lost link, sent again over a link to
 * the node (hub_link_up sends it once the link is up), or given to kernel
 * TCP when no link can be made. */
void hsock_redial(struct hub *h, struct hsock *s)
{
	union sockaddr_any d = s->peer_addr;
	if (s->state != HS_CONNECTING || !s->as)
		return;
	wire_addr_unmap(&d);
	s->link = link_for(h, &d);
	if (!s->link) {
		s->state = HS_FALLBACK;
		atomic_store(&s->as->state, SLOT_FALLBACK);
		h->fallback_connects++;
		hsock_wake(s);
	} else if (s->link->state == LINK_UP && hsock_connect(h, s, NULL) < 0) {
		hsock_set_closed(s, EADDRNOTAVAIL);
	}
}

/* ---- listen, and CONNECTs for a listener ---- */

static uint32_t *ino_head(struct hub *h, uint64_t ino)
{
	return &h->lis_ino[(ino * 0x9e3779b97f4a7c15ull) >> 52 & (HUB_LIS_INO_BUCKETS - 1)];
}

/* s listens on addr's port; ino: its kernel listener's inode (0: none) */
int hub_listen(struct hub *h, struct hsock *s, const union sockaddr_any *addr, int backlog, int evfd,
	       uint64_t ino)
{
	s->lis_at = h->nlisteners;
	if (sid_push(&h->listeners, &h->nlisteners, &h->listeners_cap, s->sid) < 0)
		return -ENOMEM;
	if (backlog < 0)
		backlog = 0;
	if (backlog > 4096)
		backlog = 4096;
	s->backlog = backlog + 1; /* as the kernel: backlog + 1 complete connections */
	s->lport = addr_port(addr);
	h->port_listening[s->lport]++;
	s->lis_next_port = h->lis_port[s->lport];
	h->lis_port[s->lport] = s->sid;
	s->lino = ino;
	if (ino) {
		uint32_t *head = ino_head(h, ino);
		s->lis_next_ino = *head;
		*head = s->sid;
	}
	s->local = *addr;
	s->evfd = evfd;
	s->state = HS_LISTENING;
	atomic_store(&s->as->state, SLOT_LISTENING);
	s->as->local = *addr;
	log_debug("listener %u on port %u", s->sid, s->lport);
	return 0;
}

/* unlink sid from the chain that starts at *head and goes through the
 * field at offset off of each socket */
static void chain_unlink(struct hub *h, uint32_t *head, uint32_t sid, size_t off)
{
	for (uint32_t *at = head; *at; at = (uint32_t *)((char *)h->socks[*at] + off))
		if (*at == sid) {
			*at = *(uint32_t *)((char *)h->socks[sid] + off);
			return;
		}
}

void hub_listener_forget(struct hub *h, struct hsock *s)
{
	uint32_t last = h->listeners[--h->nlisteners];
	h->port_listening[s->lport]--;
	if (last != s->sid) {
		h->listeners[s->lis_at] = last;
		h->socks[last]->lis_at = s->lis_at;
	}
	chain_unlink(h, &h->lis_port[s->lport], s->sid, offsetof(struct hsock, lis_next_port));
	hub_early_unlisten(h, s->lport);
	if (s->lino)
		chain_unlink(h, ino_head(h, s->lino), s->sid, offsetof(struct hsock, lis_next_ino));
}

struct hsock *hub_listener_by_ino(struct hub *h, uint64_t ino, const struct pool *p)
{
	for (uint32_t sid = ino ? *ino_head(h, ino) : 0; sid; sid = h->socks[sid]->lis_next_ino) {
		struct hsock *s = h->socks[sid];
		if (s->lino == ino && s->state == HS_LISTENING && (!p || s->pool == p))
			return s;
	}
	return NULL;
}

/* How well listener ls matches a connection to dst (unmapped), as the
 * kernel scores: 0 not (another address or family: IPv6 to IPv4, IPv4 to
 * IPV6_V6ONLY), then bound to any, then to dst; of two bound alike, IPv4
 * to the IPv4 listener before the IPv6 one */
static int listener_score(const struct hsock *ls, const union sockaddr_any *dst)
{
	union sockaddr_any la = ls->local;
	int same = ls->local.sa.sa_family == dst->sa.sa_family, base;
	if (dst->sa.sa_family == AF_INET6 ? !same : ls->v6only)
		return 0;
	wire_addr_unmap(&la);
	base = addr_same_ip(&la, dst) ? 2 : addr_is_any(&la);
	return base ? base * 2 + same : 0;
}

/* The listener that a CONNECT to c's address and port reaches: the best
 * scored; of several alike (SO_REUSEPORT), the one a hash of its source
 * address and port picks, as the kernel spreads a reuseport group. */
static struct hsock *find_listener(struct hub *h, const struct wire_ctl *c)
{
	union sockaddr_any dst;
	uint64_t key = c->src_port;
	uint32_t n = 0, k;
	int best = 0;
	wire_addr_get(&dst, c->family, c->addr_a, c->port);
	for (uint32_t sid = h->lis_port[c->port]; sid; sid = h->socks[sid]->lis_next_port) {
		int sc = listener_score(h->socks[sid], &dst);
		if (sc > best)
			best = sc, n = 0;
		n += sc == best && sc > 0;
	}
	if (!n)
		return NULL;
	for (int i = 0; i < 16; i++)
		key = key * 131 + c->addr_b[i];
	k = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) % n;
	for (uint32_t sid = h->lis_port[c->port]; sid; sid = h->socks[sid]->lis_next_port)
		if (listener_score(h->socks[sid], &dst) == best && k-- == 0)
			return h->socks[sid];
	return NULL;
}

/* verbs: s's placed-tail word (arena.h), registered for the peer's hub to
 * write the end of its writes to, and told to it (PLACED, which may go
 * before our ACCEPT); the rings of both directions are number 1 now.
 * Without it (soft; a registration that failed) the reader learns of data
 * from its hub alone, as before. */
static void placed_offer(struct hub *h, struct hsock *s)
{
	struct wire_ctl c = {.op = CTL_PLACED, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
	uint64_t off;
	uint32_t unused;
	s->rx_ring_no = s->peer_ring_no = 1;
	if (!(s->link->x.xp->ops->flags & XP_PLACED) || !s->as || !h->placed_tails)
		return;
	off = (uint64_t)((uint8_t *)&s->as->rx_placed - (uint8_t *)s->pool->base);
	if (pool_keys(h, s->pool, off, sizeof(s->as->rx_placed), 1, &unused, &s->placed_rkey) < 0) {
		s->placed_rkey = 0;
		return;
	}
	atomic_store(&s->as->rx_placed_tag, placed_tag(c.src, s->rx_ring_no));
	c.val = (uint64_t)(uintptr_t)&s->as->rx_placed;
	c.rkey = s->placed_rkey;
	link_send_ctl(s->link, &c, 0);
}

void hsock_on_placed(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	if (!(l->x.xp->ops->flags & XP_PLACED)) {
		h->malformed++;
		hub_link_fail(&l->x, "PLACED on a transport that places nothing");
		return;
	}
	s->peer_placed_raddr = c->val;
	s->peer_placed_rkey = c->rkey;
}

/* The connection of s is up on l, with the peer that CONNECT or ACCEPT c
 * named: its socket, its ring and (verbs) the ring's address and key. */
static void establish(struct hsock *s, struct link *l, const struct wire_ctl *c)
{
	s->state = HS_ESTABLISHED;
	s->link = l;
	s->peer = c->src;
	s->peer_ring = c->ring;
	s->peer_raddr = c->val;
	s->peer_rkey = c->rkey;
	s->counted = 1;
	l->conns++;
	l->conns_total++;
	placed_offer(the_hub, s);
}

static void accepted_addrs(struct hsock *s, struct hsock *ls, const struct wire_ctl *c);
static void local_admit(struct hub *h, struct hsock *ls, const struct wire_ctl *c);

/* A CONNECT for a listener with room: the connection is established now,
 * as the kernel completes the handshake before accept(). */
static void admit(struct hub *h, struct link *l, struct hsock *ls, const struct wire_ctl *c)
{
	struct wire_ctl a = {.op = CTL_ACCEPT, .dst = c->src};
	struct hsock *s = hsock_new(h, ls->pool, link_first_ring(l, ls->rx_size, ls->rx_fixed),
				    link_first_ring(l, ls->tx_size, ls->tx_fixed));
	if (s) {
		s->link = l;
		if (link_pins(l))
			atomic_fetch_or(&s->as->flags, SLOTF_SMALL);
		s->tx_fixed = ls->tx_fixed; /* the kernel's accepted sockets inherit SO_SNDBUF too */
		s->rx_fixed = ls->rx_fixed;
	}
	if (!s || ring_keys(h, s) < 0 || sid_push(&ls->q, &ls->qlen, &ls->qcap, s->sid) < 0) {
		struct wire_ctl r = {.op = CTL_REFUSE, .dst = c->src, .reason = REFUSE_NO_SPACE};
		if (s)
			hsock_free(h, s);
		log_warn("pool %llu is full (%u sockets): a connection to port %u falls back to kernel TCP",
			 (unsigned long long)ls->pool->id, ls->pool->nsocks, ls->lport);
		link_send_ctl(l, &r, 0);
		return;
	}
	establish(s, l, c);
	hub_by_src_add(h, s);
	accepted_addrs(s, ls, c);
	a.src = tag_imm(s->sid, s->gen);
	a.ring = (uint32_t)s->rx_size;
	a.val = rx_addr(s);
	a.rkey = s->rx_rkey;
	a.reason = (uint16_t)(ls->qlen >= (uint32_t)ls->backlog ? 0 : ls->backlog - ls->qlen);
	link_send_ctl(l, &a, 0);
	atomic_store(&ls->as->acceptq, ls->qlen);
	hsock_wake(ls);
}

/* An accepted socket, queued on its listener: the addresses of CONNECT c,
 * as accept() and getsockname() show them; then it is established. */
static void accepted_addrs(struct hsock *s, struct hsock *ls, const struct wire_ctl *c)
{
	s->queued = 1;
	s->accepted = 1;
	s->listener = ls->sid;
	wire_addr_get(&s->local, c->family, c->addr_a, c->port);
	wire_addr_get(&s->peer_addr, c->family, c->addr_b, c->src_port);
	hsock_port_hold(the_hub, s);
	if (ls->local.sa.sa_family == AF_INET6 && c->family == AF_INET) {
		/* an IPv6 listener shows IPv4 peers as mapped addresses */
		union sockaddr_any *v[2] = {&s->local, &s->peer_addr};
		for (int i = 0; i < 2; i++) {
			struct sockaddr_in in = v[i]->in;
			memset(v[i], 0, sizeof(*v[i]));
			v[i]->in6.sin6_family = AF_INET6;
			v[i]->in6.sin6_port = in.sin_port;
			v[i]->in6.sin6_addr.s6_addr[10] = 0xff;
			v[i]->in6.sin6_addr.s6_addr[11] = 0xff;
			memcpy(&v[i]->in6.sin6_addr.s6_addr[12], &in.sin_addr, 4);
		}
	}
	s->as->local = s->local;
	s->as->peer = s->peer_addr;
	atomic_store(&s->as->state, SLOT_ESTABLISHED);
}

/* Full backlog: the connecting side waits, as for a dropped SYN (l NULL:
 * a connection from this node). */
static void pend_push(struct hsock *ls, struct link *l, const struct wire_ctl *c)
{
	if (ls->npend == ls->pend_cap) {
		uint32_t cap = ls->pend_cap ? ls->pend_cap * 2 : 16;
		struct pending_conn *n = realloc(ls->pend, cap * sizeof(*n));
		if (!n)
			return;
		ls->pend = n;
		ls->pend_cap = cap;
	}
	ls->pend[ls->npend].link = l;
	ls->pend[ls->npend].ctl = *c;
	ls->npend++;
}

void hsock_on_connect(struct hub *h, struct link *l, const struct wire_ctl *c)
{
	struct hsock *ls = find_listener(h, c);
	int room = ls ? hub_early_room(ls, c) : -1;
	if (room < 0) {
		struct wire_ctl r = {.op = CTL_REFUSE, .dst = c->src,
				     .reason = ls ? REFUSE_NO_SPACE : REFUSE_NO_LISTENER};
		link_send_ctl(l, &r, 0);
	} else if (!room) {
		pend_push(ls, l, c);
	} else {
		admit(h, l, ls, c);
	}
}

/* ---- same node ---- */

/* A connect to an address of this node: straight to the listener here, if
 * any; else the kernel answers (a kernel listener, or a refusal). */
static int local_connect(struct hub *h, struct hsock *s, const union sockaddr_any *d)
{
	struct wire_ctl c = {.op = CTL_CONNECT};
	struct hsock *ls;
	int r;
	s->link = NULL;
	if ((r = connect_ctl(h, s, d, &c)) < 0)
		return r;
	ls = find_listener(h, &c);
	if (!ls) {
		s->state = HS_FALLBACK;
		atomic_store(&s->as->state, SLOT_FALLBACK);
		h->fallback_connects++;
		return 0;
	}
	if (ls->qlen >= (uint32_t)ls->backlog)
		pend_push(ls, NULL, &c);
	else
		local_admit(h, ls, &c);
	return 0;
}

static void local_admit(struct hub *h, struct hsock *ls, const struct wire_ctl *c)
{
	struct hsock *s = hsock_by_imm(h, c->src), *a;
	if (!s || s->state != HS_CONNECTING || !s->as)
		return; /* it gave up while it waited for room */
	a = hsock_new(h, ls->pool, 0, 0);
	if (a) {
		a->rx_size = ls->rx_size;
		a->tx_size = ls->tx_size;
		a->tx_fixed = ls->tx_fixed; /* inherited, as by admit()'s */
		a->rx_fixed = ls->rx_fixed;
	}
	if (!a || hpair_join(h, s, a) < 0 || sid_push(&ls->q, &ls->qlen, &ls->qcap, a->sid) < 0) {
		if (a)
			hsock_free(h, a);
		log_warn("no room for a same-node connection to port %u: it uses kernel TCP", ls->lport);
		s->state = HS_FALLBACK;
		atomic_store(&s->as->state, SLOT_FALLBACK);
		h->fallback_connects++;
		hsock_wake(s);
		return;
	}
	a->state = HS_ESTABLISHED;
	a->peer = c->src;
	if (a->pool == s->pool) { /* one pool holds both ends: a close waits (vsock.c) */
		atomic_fetch_or(&a->as->flags, SLOTF_PAIR_POOL);
		atomic_fetch_or(&s->as->flags, SLOTF_PAIR_POOL);
	}
	accepted_addrs(a, ls, c);
	s->state = HS_ESTABLISHED;
	s->peer = tag_imm(a->sid, a->gen);
	atomic_store(&s->as->state, SLOT_ESTABLISHED);
	h->local_connects++;
	/* the hub looks at their rings once a second: punched when idle */
	hsock_touched(h, s);
	hsock_touched(h, a);
	atomic_store(&ls->as->acceptq, ls->qlen);
	hsock_wake(ls);
	hsock_wake(s);
}

/* ---- accept, and the answers to a CONNECT ---- */

int hsock_accept(struct hub *h, struct hsock *ls, struct hsock **out)
{
	struct hsock *s;
	if (!ls->qlen)
		return -EAGAIN;
	s = h->socks[ls->q[0]];
	memmove(ls->q, ls->q + 1, (ls->qlen - 1) * sizeof(*ls->q));
	ls->qlen--;
	if (ls->npend && ls->qlen < (uint32_t)ls->backlog) {
		struct pending_conn pc = ls->pend[0];
		memmove(ls->pend, ls->pend + 1, (ls->npend - 1) * sizeof(*ls->pend));
		ls->npend--;
		if (pc.link)
			admit(h, pc.link, ls, &pc.ctl);
		else
			local_admit(h, ls, &pc.ctl);
	}
	atomic_store(&ls->as->acceptq, ls->qlen);
	if (!s)
		return -EAGAIN;
	s->queued = 0;
	s->listener = 0;
	*out = s;
	return 0;
}

void hsock_on_accept(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	hub_early_learn(l, s, c);
	if (s->early && s->state == HS_ESTABLISHED) {
		/* answered before: now its writes and FIN may go */
		s->early = 0;
		establish(s, l, c);
		hsock_tx(h, s);
		return;
	}
	if (s->state == HS_LINGER || s->early) {
		/* released while connecting, or answered before and reset
		 * (or released with a reset) meanwhile: refuse it now */
		s->early = 0;
		s->peer = c->src;
		hsock_send_reset(s);
		return;
	}
	if (s->state != HS_CONNECTING) {
		link_send_simple(l, CTL_RESET, c->src, 0, 0);
		return;
	}
	establish(s, l, c);
	atomic_store(&s->as->state, SLOT_ESTABLISHED);
	hsock_wake(s);
	hsock_tx(h, s);
}

/* REFUSE: no listener there, or no room: the process uses kernel TCP */
void hsock_on_refuse(struct hub *h, struct hsock *s)
{
	if (s->early) {
		hub_early_refused(h, s);
		return;
	}
	if (s->state == HS_LINGER) {
		hsock_free(h, s);
		return;
	}
	if (s->state != HS_CONNECTING)
		return;
	s->state = HS_FALLBACK;
	h->fallback_connects++;
	atomic_store(&s->as->state, SLOT_FALLBACK);
	hsock_wake(s);
}
