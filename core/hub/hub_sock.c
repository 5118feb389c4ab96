/*
 * hub_sock.c - the socket state machine in the hub, and completion routing.
 *
 * A hub socket (struct hsock) is the hub's private truth about one rshare
 * socket: its slot in a pool's arena, its ring geometry, its link and peer,
 * its credit window.  Connection set-up is one round trip on an existing
 * link (CONNECT -> ACCEPT or REFUSE); data is posted as writes with
 * immediate straight from the tx ring, within the peer's credit; every
 * completion comes back through hub_route(), which finds the owner by the
 * tag in wr_id or imm and drops it when the generation has moved on.
 *
 * Close: the last holder's release sends what is left, then FIN (or RESET
 * when unread data would be lost, or when the holder died); the slot and
 * its send ring go back to the pool once the FIN completed.  The record
 * and its receive ring linger until the peer says it will write no more
 * (its FIN, or its RESET: a RESET is always answered with one unless one
 * was sent already), because on verbs the peer's NIC may still be writing
 * into that ring: it must not be given to another socket before.  A lost
 * link ends every socket on it at once.
 */
#include "hub.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sys.h"
#include "tag.h"

#define WR_CTL (1ull << 63) /* wr_id bit: a control send */

/* ---- allocation ---- */

static uint32_t sid_alloc(struct hub *h)
{
	for (uint32_t n = 0; n < TAG_MAX_SOCKS; n++) {
		uint32_t sid = h->next_sid + 1 + n;
		sid %= TAG_MAX_SOCKS;
		if (sid && !h->socks[sid]) {
			h->next_sid = sid;
			return sid;
		}
	}
	return 0;
}

static uint32_t slot_alloc(struct pool *p)
{
	for (uint32_t i = 0; i < ARENA_MAX_SLOTS; i++)
		if (!p->slot_sid[i])
			return i;
	return UINT32_MAX;
}

static void mutex_init_robust(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* The arena rings of s, of the sizes it records (0: none), and the slot's
 * geometry; -1 when the pool has no room (nothing is kept then). */
static int rings_alloc(struct hsock *s)
{
	struct pool *p = s->pool;
	if (s->rx_size && !(s->rx_off = arena_alloc(p->rx_alloc, s->rx_size)))
		return -1;
	if (s->tx_size && !(s->tx_off = arena_alloc(p->tx_alloc, s->tx_size))) {
		arena_release(p->rx_alloc, s->rx_off, s->rx_size);
		s->rx_off = 0;
		return -1;
	}
	s->as->rx.off = s->rx_off;
	s->as->rx.size = s->rx_size;
	s->as->tx.off = s->tx_off;
	s->as->tx.size = s->tx_size;
	return 0;
}

struct hsock *hsock_new(struct hub *h, struct pool *p, uint32_t rxsize, uint32_t txsize)
{
	struct hsock *s;
	struct arena_slot *as;
	uint32_t slot = slot_alloc(p), sid;
	if (slot == UINT32_MAX)
		return NULL;
	sid = sid_alloc(h);
	if (!sid)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->rx_size = rxsize;
	s->tx_size = txsize;
	s->sid = sid;
	s->gen = ++h->gens[sid];
	s->pool = p;
	s->slot = slot;
	s->evfd = -1;
	s->poll_p = s->poll_h = -1;
	s->as = as = p->slots + slot;
	/* the slot is free: no process maps it as a socket, so plain stores do */
	atomic_store(&as->state, SLOT_FREE);
	atomic_store(&as->error, 0);
	atomic_store(&as->flags, 0);
	atomic_store(&as->pending_ops, 0);
	atomic_store(&as->acceptq, 0);
	atomic_store(&as->rx.head, 0);
	atomic_store(&as->rx.tail, 0);
	atomic_store(&as->tx.head, 0);
	atomic_store(&as->tx.tail, 0);
	atomic_store(&as->rx_credit_mark, 0);
	atomic_store(&as->rx_sig, 0);
	atomic_store(&as->tx_blk, 0);
	as->pair_seg = as->pair_tx = as->pair_rx = 0;
	if (rings_alloc(s) < 0) {
		free(s); /* the slot and the socket id are not taken yet */
		return NULL;
	}
	memset(&as->local, 0, sizeof(as->local));
	memset(&as->peer, 0, sizeof(as->peer));
	mutex_init_robust(&as->rx_lock);
	mutex_init_robust(&as->tx_lock);
	as->gen = s->gen;
	p->slot_sid[slot] = sid;
	p->nsocks++;
	h->socks[sid] = s;
	h->nsocks++;
	return s;
}

struct hsock *hsock_get(struct hub *h, struct pool *p, uint32_t slot, uint32_t gen)
{
	struct hsock *s;
	if (!p || slot >= ARENA_MAX_SLOTS || !p->slot_sid[slot])
		return NULL;
	s = h->socks[p->slot_sid[slot]];
	return s && s->gen == gen ? s : NULL;
}

static struct hsock *by_imm(struct hub *h, uint32_t imm)
{
	uint32_t sid = tag_imm_sid(imm);
	struct hsock *s = sid ? h->socks[sid] : NULL;
	return s && tag_imm_live(imm, s->gen) ? s : NULL;
}

static void uncount(struct hsock *s)
{
	if (s->counted && s->link)
		s->link->conns--;
	s->counted = 0;
}

static void ring_free(struct pool *p, struct arena_alloc *a, uint64_t off, uint64_t size)
{
	if (!off)
		return;
	/* the pages go back to the system, unless pinned for a NIC */
	if (!pool_chunk_pinned(p, off))
		fallocate(p->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, size);
	arena_release(a, off, size);
}

/* Give the slot and its send ring back to the pool; the record and the
 * receive ring may live on (LINGER). */
static void slot_release(struct hub *h, struct hsock *s)
{
	struct pool *p = s->pool;
	(void)h;
	hpoll_close(s);
	if (!s->as)
		return;
	ring_free(p, p->tx_alloc, s->tx_off, s->tx_size);
	s->tx_off = 0;
	atomic_store(&s->as->state, SLOT_FREE);
	s->as->gen = s->gen + 1;
	p->slot_sid[s->slot] = 0;
	s->as = NULL;
}

static void listener_forget(struct hub *h, struct hsock *s)
{
	for (uint32_t i = 0; i < h->nlisteners; i++)
		if (h->listeners[i] == s->sid) {
			h->listeners[i] = h->listeners[--h->nlisteners];
			break;
		}
}

static void hsock_free(struct hub *h, struct hsock *s)
{
	struct pool *p = s->pool;
	uncount(s);
	if (s->state == HS_LISTENING)
		listener_forget(h, s);
	slot_release(h, s);
	ring_free(p, p->rx_alloc, s->rx_off, s->rx_size);
	p->nsocks--;
	if (s->evfd >= 0)
		close(s->evfd);
	hpoll_close(s);
	hpair_put(h, s);
	free(s->q);
	free(s->pend);
	h->socks[s->sid] = NULL;
	h->nsocks--;
	free(s);
}

/* Released by every holder: wait for the peer's word before the receive
 * ring can be reused, unless there is no peer to hear from. */
static void linger(struct hub *h, struct hsock *s)
{
	uncount(s);
	slot_release(h, s);
	if (!s->link || !s->peer || s->link->state != LINK_UP)
		hsock_free(h, s);
	else
		s->state = HS_LINGER;
}

/* ---- waking processes ---- */

void hsock_wake(struct hsock *s)
{
	struct arena_slot *as = s->as;
	if (!as)
		return;
	atomic_fetch_add_explicit(&as->wake_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&as->waiters, memory_order_seq_cst))
		sys_futex(&as->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
	if (s->evfd >= 0) {
		uint64_t one = 1;
		if (write(s->evfd, &one, sizeof(one)) < 0) {
			/* counter saturated: waiters are awake anyway */
		}
	}
	if (s->poll_h >= 0)
		hpoll_reflect(s);
}

static void set_closed(struct hsock *s, int err)
{
	uncount(s);
	s->state = HS_CLOSED;
	if (s->as) {
		atomic_store(&s->as->error, err);
		if (err == ECONNRESET)
			atomic_fetch_or(&s->as->flags, SLOTF_RESET);
		atomic_store(&s->as->state, SLOT_CLOSED);
	}
	hsock_wake(s);
}

/* ---- control messages out ---- */

static int send_ctl(struct link *l, struct wire_ctl *c, uint64_t wr_id)
{
	uint8_t buf[WIRE_CTL_LEN];
	wire_ctl_encode(c, buf);
	l->msgs_tx++;
	return l->x.xp->ops->post_send(&l->x, wr_id | WR_CTL, buf, WIRE_CTL_LEN);
}

static void send_simple(struct link *l, uint8_t op, uint32_t dst, uint32_t src, uint64_t wr_id)
{
	struct wire_ctl c = {.op = op, .dst = dst, .src = src};
	if (l && l->state == LINK_UP)
		send_ctl(l, &c, wr_id);
}

static void local_reset(struct hub *h, struct hsock *s);

static void send_reset(struct hsock *s)
{
	if (s->lp && s->peer && !s->reset_sent)
		local_reset(the_hub, s);
	else if (s->link && s->peer && !s->reset_sent)
		send_simple(s->link, CTL_RESET, s->peer, tag_imm(s->sid, s->gen), 0);
	s->reset_sent = 1;
}

/* ---- connect / listen / accept ---- */

static struct link *link_for(struct hub *h, const union sockaddr_any *dst)
{
	union sockaddr_any hub_addr = *dst;
	for (struct link *l = h->links; l; l = l->next)
		if (l->state != LINK_DOWN && addr_same_ip(&l->x.peer_addr, dst))
			return l;
	addr_set_port(&hub_addr, h->port);
	return hub_link_new_outgoing(h, &hub_addr);
}

/* Memory keys for the rings of s on its link's transport (verbs). */
static int ring_keys(struct hub *h, struct hsock *s)
{
	uint32_t unused;
	if (s->link->x.xp->ops->flags & XP_POSITIONAL)
		return 0;
	if (pool_keys(h, s->pool, s->rx_off, s->rx_size, 1, &unused, &s->rx_rkey) < 0 ||
	    pool_keys(h, s->pool, s->tx_off, s->tx_size, 0, &s->tx_lkey, &unused) < 0)
		return -1;
	return 0;
}

static uint64_t rx_addr(struct hsock *s)
{
	if (s->link->x.xp->ops->flags & XP_POSITIONAL)
		return 0;
	return (uint64_t)(uintptr_t)arena_bytes(s->pool->base, s->rx_off);
}

/* The CONNECT that a link would carry for s, to d (its source address
 * filled in from s's reserved port and the link's, or d's, address), and
 * what getsockname() shows from now on. */
static void connect_ctl(struct hsock *s, const union sockaddr_any *via, struct wire_ctl *c)
{
	union sockaddr_any src, d = s->peer_addr;
	wire_addr_unmap(&d);
	wire_addr_put(c->addr_a, &c->family, &c->port, &d);
	src = s->local;
	wire_addr_unmap(&src);
	if (addr_is_any(&src) || src.sa.sa_family != c->family) {
		uint16_t port = addr_port(&s->local);
		src = *via;
		addr_set_port(&src, port);
	}
	{
		uint8_t fam;
		wire_addr_put(c->addr_b, &fam, &c->src_port, &src);
		if (fam != c->family) {
			/* mixed families on one link cannot name the source: leave it empty */
			memset(c->addr_b, 0, sizeof(c->addr_b));
		}
	}
	/* what getsockname() shows: the link's address and the reserved port */
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
	s->as->peer = s->peer_addr;
	c->src = tag_imm(s->sid, s->gen);
}

static int local_connect(struct hub *h, struct hsock *s, const union sockaddr_any *d);

int hsock_connect(struct hub *h, struct hsock *s, const union sockaddr_any *dst)
{
	struct wire_ctl c = {.op = CTL_CONNECT};
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
		if (rings_alloc(s) < 0)
			return -ENOBUFS;
		s->link = link_for(h, &d);
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
	connect_ctl(s, &s->link->x.local_addr, &c);
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
	send_ctl(s->link, &c, tag_make(s->sid, s->gen));
	return 0;
}

int hub_listen(struct hub *h, struct hsock *s, const union sockaddr_any *addr, int backlog, int evfd)
{
	if (sid_push(&h->listeners, &h->nlisteners, &h->listeners_cap, s->sid) < 0)
		return -ENOMEM;
	if (backlog < 0)
		backlog = 0;
	if (backlog > 4096)
		backlog = 4096;
	s->backlog = backlog + 1; /* as the kernel: backlog + 1 complete connections */
	s->lport = addr_port(addr);
	s->local = *addr;
	s->evfd = evfd;
	s->state = HS_LISTENING;
	atomic_store(&s->as->state, SLOT_LISTENING);
	s->as->local = *addr;
	log_debug("listener %u on port %u", s->sid, s->lport);
	return 0;
}

static struct hsock *find_listener(struct hub *h, const struct wire_ctl *c)
{
	union sockaddr_any dst;
	wire_addr_get(&dst, c->family, c->addr_a, c->port);
	for (uint32_t i = 0; i < h->nlisteners; i++) {
		struct hsock *ls = h->socks[h->listeners[i]];
		union sockaddr_any la;
		if (!ls || ls->lport != c->port)
			continue;
		la = ls->local;
		wire_addr_unmap(&la);
		if (addr_is_any(&la) || addr_same_ip(&la, &dst))
			return ls;
	}
	return NULL;
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
}

static void accepted_addrs(struct hsock *s, struct hsock *ls, const struct wire_ctl *c);
static void local_admit(struct hub *h, struct hsock *ls, const struct wire_ctl *c);

/* A CONNECT for a listener with room: the connection is established now,
 * as the kernel completes the handshake before accept(). */
static void admit(struct hub *h, struct link *l, struct hsock *ls, const struct wire_ctl *c)
{
	struct wire_ctl a = {.op = CTL_ACCEPT, .dst = c->src};
	struct hsock *s = hsock_new(h, ls->pool, ls->rx_size, ls->tx_size);
	if (s)
		s->link = l;
	if (!s || ring_keys(h, s) < 0 || sid_push(&ls->q, &ls->qlen, &ls->qcap, s->sid) < 0) {
		struct wire_ctl r = {.op = CTL_REFUSE, .dst = c->src, .reason = REFUSE_NO_SPACE};
		if (s)
			hsock_free(h, s);
		log_warn("pool %llu is full (%u sockets): a connection to port %u falls back to kernel TCP",
			 (unsigned long long)ls->pool->id, ls->pool->nsocks, ls->lport);
		send_ctl(l, &r, 0);
		return;
	}
	establish(s, l, c);
	accepted_addrs(s, ls, c);
	a.src = tag_imm(s->sid, s->gen);
	a.ring = (uint32_t)s->rx_size;
	a.val = rx_addr(s);
	a.rkey = s->rx_rkey;
	send_ctl(l, &a, 0);
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

static void on_connect(struct hub *h, struct link *l, const struct wire_ctl *c)
{
	struct hsock *ls = find_listener(h, c);
	if (!ls) {
		struct wire_ctl r = {.op = CTL_REFUSE, .dst = c->src, .reason = REFUSE_NO_LISTENER};
		send_ctl(l, &r, 0);
		return;
	}
	if (ls->qlen >= (uint32_t)ls->backlog) {
		pend_push(ls, l, c);
		return;
	}
	admit(h, l, ls, c);
}

/* ---- same node (the segment and its rings: hub_pair.c) ---- */

static struct hsock *local_partner(struct hub *h, struct hsock *s)
{
	struct hsock *p = s->peer ? by_imm(h, s->peer) : NULL;
	return p && p->lp && p->lp == s->lp ? p : NULL;
}

/* The other end of s went away without a FIN, or s wrote to an end that
 * is gone: what a RESET from a link does. */
static void local_reset_in(struct hub *h, struct hsock *s)
{
	s->peer = 0;
	s->reset_sent = 1; /* nobody to answer */
	if (!s->nholders && !s->queued) {
		hsock_free(h, s);
		return;
	}
	if (s->state == HS_ESTABLISHED)
		set_closed(s, s->rx_fin ? EPIPE : ECONNRESET);
}

static void local_reset(struct hub *h, struct hsock *s)
{
	struct hsock *p = local_partner(h, s);
	s->peer = 0;
	if (p)
		local_reset_in(h, p);
}

/* s will send no more: its bytes are all in the ring already (the
 * process published them before it asked), so the other end sees FIN now. */
static void local_fin(struct hub *h, struct hsock *s)
{
	struct hsock *p = local_partner(h, s);
	s->fin_pending = s->fin_sent = s->fin_done = 1;
	if (!p)
		return;
	p->rx_fin = 1;
	if (p->as)
		atomic_fetch_or(&p->as->flags, SLOTF_RX_FIN);
	hsock_wake(p);
}

/* A process of s's rang: it wrote (credit 0) or read (1) while the other
 * end waits for that.  Writing to an end that is gone resets, as the
 * kernel answers data for a closed socket with RST. */
static void local_wake(struct hub *h, struct hsock *s, int credit)
{
	struct hsock *p = local_partner(h, s);
	if (p)
		hsock_wake(p);
	else if (!credit && s->state == HS_ESTABLISHED)
		local_reset_in(h, s);
}

/* A connect to an address of this node: straight to the listener here, if
 * any; else the kernel answers (a kernel listener, or a refusal). */
static int local_connect(struct hub *h, struct hsock *s, const union sockaddr_any *d)
{
	struct wire_ctl c = {.op = CTL_CONNECT};
	struct hsock *ls;
	s->link = NULL;
	connect_ctl(s, d, &c);
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
	struct hsock *s = by_imm(h, c->src), *a;
	if (!s || s->state != HS_CONNECTING || !s->as)
		return; /* it gave up while it waited for room */
	a = hsock_new(h, ls->pool, 0, 0);
	if (a) {
		a->rx_size = ls->rx_size;
		a->tx_size = ls->tx_size;
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
	accepted_addrs(a, ls, c);
	s->state = HS_ESTABLISHED;
	s->peer = tag_imm(a->sid, a->gen);
	atomic_store(&s->as->state, SLOT_ESTABLISHED);
	h->local_connects++;
	atomic_store(&ls->as->acceptq, ls->qlen);
	hsock_wake(ls);
	hsock_wake(s);
}

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

/* ---- data ---- */

static void txwait(struct hsock *s)
{
	struct link *l = s->link;
	if (s->on_txwait)
		return;
	if (sid_push(&l->txwait, &l->ntxwait, &l->txwait_cap, s->sid) == 0)
		s->on_txwait = 1;
}

static void abort_sock(struct hub *h, struct hsock *s, const char *why)
{
	log_warn("socket %u: %s: reset", s->sid, why);
	send_reset(s);
	if (s->nholders || s->queued)
		set_closed(s, ECONNRESET);
	else
		linger(h, s);
}

static void maybe_finish_close(struct hub *h, struct hsock *s)
{
	if (!s->closing || !s->fin_done || s->tx_done != s->fin_at || s->state != HS_ESTABLISHED)
		return;
	if (s->rx_fin) {
		hsock_free(h, s);
		return;
	}
	linger(h, s);
}

/* Where a write of n bytes at stream position pos lands at the peer; a
 * write never crosses the end of the peer's ring. */
static uint64_t target(struct hsock *s, uint64_t pos, uint64_t *n)
{
	uint64_t at;
	if (s->link->x.xp->ops->flags & XP_POSITIONAL)
		return pos;
	at = pos & (s->peer_ring - 1);
	if (*n > s->peer_ring - at)
		*n = s->peer_ring - at;
	return s->peer_raddr + at;
}

void hsock_tx(struct hub *h, struct hsock *s)
{
	struct link *l = s->link;
	uint64_t tail;
	uint8_t *base;
	if (s->lp) {
		local_wake(h, s, 0);
		return;
	}
	if (s->state != HS_ESTABLISHED || !l || l->state != LINK_UP || l->doomed || !s->as)
		return;
	tail = s->fin_pending ? s->fin_at : ring_load(&s->as->tx.tail);
	if (!ring_sane(s->tx_done, tail, s->tx_size) || tail - s->tx_done < s->tx_posted - s->tx_done) {
		abort_sock(h, s, "process wrote an impossible tx tail");
		return;
	}
	base = arena_bytes(s->pool->base, s->tx_off);
	while (s->tx_posted < tail) {
		uint64_t win = s->peer_head + s->peer_ring - s->tx_posted;
		uint64_t n = tail - s->tx_posted, raddr;
		struct iovec iov[2];
		int c, r;
		if (!win)
			break; /* CREDIT resumes */
		if (n > win)
			n = win;
		if (n > WIRE_MAX_WRITE)
			n = WIRE_MAX_WRITE;
		raddr = target(s, s->tx_posted, &n);
		c = ring_iov(base, s->tx_size, s->tx_posted, n, iov);
		r = l->x.xp->ops->post_write_imm(&l->x, tag_make(s->sid, s->gen), iov, c, s->tx_lkey, raddr,
					       s->peer_rkey, s->peer);
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
	if (s->fin_pending && !s->fin_sent && s->tx_posted == s->fin_at) {
		struct wire_ctl c = {.op = CTL_FIN, .dst = s->peer, .src = tag_imm(s->sid, s->gen)};
		s->fin_sent = 1;
		send_ctl(l, &c, tag_make(s->sid, s->gen));
	}
}

void hsock_credit(struct hub *h, struct hsock *s)
{
	uint64_t head;
	struct wire_ctl c = {.op = CTL_CREDIT};
	if (s->lp) {
		local_wake(h, s, 1);
		return;
	}
	if (s->state != HS_ESTABLISHED || !s->as || !s->link || s->link->state != LINK_UP)
		return;
	head = ring_load(&s->as->rx.head);
	if (!ring_sane(head, s->rx_tail, s->rx_size) || head <= s->credit_sent)
		return; /* nothing new, or a process scribbling on its own ring */
	s->credit_sent = head;
	c.dst = s->peer;
	c.src = tag_imm(s->sid, s->gen);
	c.val = head;
	send_ctl(s->link, &c, 0);
}

void hsock_shutdown_wr(struct hub *h, struct hsock *s)
{
	uint64_t tail;
	if (s->fin_pending)
		return;
	if (s->lp) {
		local_fin(h, s);
		return;
	}
	tail = ring_load(&s->as->tx.tail);
	if (!ring_sane(s->tx_done, tail, s->tx_size) || tail < s->tx_posted)
		tail = s->tx_posted;
	s->fin_pending = 1;
	s->fin_at = tail;
	hsock_tx(h, s);
}

void hsock_release(struct hub *h, struct hsock *s, int abort)
{
	switch (s->state) {
	case HS_LISTENING:
		for (uint32_t i = 0; i < s->qlen; i++) {
			struct hsock *q = h->socks[s->q[i]];
			if (q) {
				q->queued = 0;
				send_reset(q);
				linger(h, q);
			}
		}
		s->qlen = 0;
		for (uint32_t i = 0; i < s->npend; i++) {
			struct wire_ctl r = {.op = CTL_REFUSE, .dst = s->pend[i].ctl.src,
					     .reason = REFUSE_NO_LISTENER};
			struct hsock *c = s->pend[i].link ? NULL : by_imm(h, r.dst);
			if (c && c->state == HS_CONNECTING)
				set_closed(c, ECONNREFUSED); /* same node: no listener any more */
			else if (s->pend[i].link && s->pend[i].link->state == LINK_UP)
				send_ctl(s->pend[i].link, &r, 0);
		}
		s->npend = 0;
		hsock_free(h, s);
		return;
	case HS_ESTABLISHED: {
		uint64_t head;
		if (s->lp) {
			struct ring *r = hsock_ring(s, 0);
			/* unread data is lost: the kernel resets then, too */
			if (abort || ring_load(&r->head) != ring_load(&r->tail))
				send_reset(s);
			else
				local_fin(h, s);
			hsock_free(h, s);
			return;
		}
		head = ring_load(&s->as->rx.head);
		if (abort || head != s->rx_tail || s->rx_expect != s->rx_tail || !s->link) {
			log_debug("socket %u: %s: reset", s->sid, abort ? "holder died" : "unread data");
			send_reset(s);
			linger(h, s);
			return;
		}
		s->closing = 1;
		if (!s->fin_pending)
			hsock_shutdown_wr(h, s);
		maybe_finish_close(h, s);
		return;
	}
	case HS_CONNECTING:
		/* an ACCEPT may be on its way: wait for it, answer RESET, then go */
		if (s->connect_sent && s->link && s->link->state == LINK_UP) {
			uncount(s);
			slot_release(h, s);
			s->state = HS_LINGER;
			return;
		}
		hsock_free(h, s);
		return;
	case HS_CLOSED:
		/* reset already: the peer said so, or will not hear from us again */
		if (s->reset_sent && s->peer && s->link && s->link->state == LINK_UP) {
			linger(h, s);
			return;
		}
		hsock_free(h, s);
		return;
	default:
		hsock_free(h, s);
	}
}

/* ---- incoming ---- */

/* The checks of an incoming write with immediate before (soft) or after
 * (verbs) its payload lands; moves the expected position on success. */
static struct hsock *rx_check(struct hub *h, struct link *l, uint32_t imm, uint64_t pos, uint32_t len,
			      int *ret)
{
	struct hsock *s = by_imm(h, imm);
	*ret = 0;
	if (!s) {
		h->stale_dropped++;
		return NULL;
	}
	if (s->link != l) {
		*ret = -1;
		return NULL;
	}
	if (s->state == HS_LINGER || s->closing || s->state == HS_CLOSED) {
		/* data after our close: the kernel answers with RST */
		if (s->state != HS_CLOSED)
			send_reset(s);
		return NULL;
	}
	/* A write for a socket still connecting: the peer accepted, and its
	 * ACCEPT came before this write on the link but waits in the
	 * completion queue still (soft parses a whole read at once, verbs
	 * reaps a batch).  Placed now; the completion, routed after the
	 * ACCEPT's, finds the socket established. */
	if (!s->as || (s->state != HS_ESTABLISHED && !(s->state == HS_CONNECTING && s->connect_sent)))
		return NULL;
	if (pos != s->rx_expect || pos + len > s->credit_sent + s->rx_size) {
		*ret = -1; /* out of order or beyond the credit we gave */
		return NULL;
	}
	s->rx_expect += len;
	*ret = 1;
	return s;
}

int hub_rx_target(struct xlink *xl, uint32_t imm, uint64_t raddr, uint32_t len, struct iovec iov[2])
{
	int ret;
	struct hsock *s = rx_check(the_hub, link_of(xl), imm, raddr, len, &ret);
	if (!s)
		return ret;
	return ring_iov(arena_bytes(s->pool->base, s->rx_off), s->rx_size, raddr, len, iov);
}

int hub_rx_written(struct xlink *xl, uint32_t imm, uint32_t len)
{
	struct hsock *s = by_imm(the_hub, imm);
	int ret;
	rx_check(the_hub, link_of(xl), imm, s ? s->rx_expect : 0, len, &ret);
	return ret;
}

static void on_accept(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c)
{
	if (s->state == HS_LINGER) {
		/* released while connecting: refuse it now */
		s->peer = c->src;
		send_reset(s);
		return;
	}
	if (s->state != HS_CONNECTING) {
		send_simple(l, CTL_RESET, c->src, 0, 0);
		return;
	}
	establish(s, l, c);
	atomic_store(&s->as->state, SLOT_ESTABLISHED);
	hsock_wake(s);
	hsock_tx(h, s);
}

static void on_reset(struct hub *h, struct hsock *s)
{
	/* answer, so that the peer may reuse its ring; then it writes no more */
	send_reset(s);
	s->peer = 0;
	if (s->state == HS_LINGER || (!s->nholders && !s->queued)) {
		hsock_free(h, s);
		return;
	}
	if (s->state == HS_ESTABLISHED || s->state == HS_CONNECTING)
		set_closed(s, s->state == HS_CONNECTING ? ECONNREFUSED : s->rx_fin ? EPIPE : ECONNRESET);
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
		on_connect(h, l, &c);
		return;
	}
	if (c.op == CTL_PING)
		return; /* its arrival was the point */
	s = by_imm(h, c.dst);
	if (!s || s->link != l) {
		h->stale_dropped++;
		if (c.op == CTL_ACCEPT)
			send_simple(l, CTL_RESET, c.src, 0, 0);
		return;
	}
	switch (c.op) {
	case CTL_ACCEPT:
		on_accept(h, l, s, &c);
		break;
	case CTL_REFUSE:
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
		break;
	case CTL_FIN:
		s->rx_fin = 1;
		if (s->state == HS_LINGER) {
			if (!s->reset_sent)
				hsock_free(h, s); /* else its answer to our RESET is coming */
			return;
		}
		if (s->as)
			atomic_fetch_or(&s->as->flags, SLOTF_RX_FIN);
		hsock_wake(s);
		maybe_finish_close(h, s);
		break;
	case CTL_RESET:
		on_reset(h, s);
		break;
	case CTL_CREDIT:
		if (c.val < s->peer_head || c.val > s->tx_posted) {
			h->malformed++;
			hub_link_fail(&l->x, "credit beyond what was sent");
			return;
		}
		s->peer_head = c.val;
		hsock_tx(h, s);
		break;
	}
}

/* A keepalive on a link that sent nothing for a while: on verbs it is the
 * only way to learn that the peer vanished while the link idles (the send
 * fails after the queue pair's retries, and the link is dropped). */
void hub_link_ping(struct link *l)
{
	send_simple(l, CTL_PING, 0, 0, 0);
}

void hub_link_gone(struct hub *h, struct link *l)
{
	for (uint32_t i = 0; i < h->nlisteners; i++) {
		struct hsock *ls = h->socks[h->listeners[i]];
		uint32_t k = 0;
		for (uint32_t j = 0; ls && j < ls->npend; j++)
			if (ls->pend[j].link != l)
				ls->pend[k++] = ls->pend[j];
		if (ls)
			ls->npend = k;
	}
	for (uint32_t sid = 1; sid < TAG_MAX_SOCKS; sid++) {
		struct hsock *s = h->socks[sid];
		if (!s || s->link != l)
			continue;
		s->peer = 0;
		switch (s->state) {
		case HS_CONNECTING:
			if (!s->connect_sent) {
				s->state = HS_FALLBACK;
				h->fallback_connects++;
				atomic_store(&s->as->state, SLOT_FALLBACK);
				hsock_wake(s);
			} else {
				set_closed(s, ECONNRESET);
			}
			break;
		case HS_ESTABLISHED:
			if (s->closing && !s->nholders) {
				hsock_free(h, s);
				continue;
			}
			set_closed(s, ECONNRESET);
			break;
		case HS_LINGER:
			hsock_free(h, s);
			continue;
		default:
			break;
		}
		uncount(s);
		s->link = NULL;
	}
}

/* ---- completions ---- */

void hub_route(struct hub *h, const struct xwc *wc)
{
	struct hsock *s;
	struct link *wl = wc->link ? link_of(wc->link) : NULL;
	if (wl && wl->state == LINK_DOWN)
		return;
	switch (wc->op) {
	case XWC_WRITE:
		s = h->socks[tag_sid(wc->wr_id)];
		if (!s || !tag_live(wc->wr_id, s->gen) || !s->as) {
			h->stale_dropped++;
			return;
		}
		if (wc->status) {
			abort_sock(h, s, "write failed");
			return;
		}
		s->tx_done += wc->byte_len;
		ring_store(&s->as->tx.head, s->tx_done);
		s->bytes_tx += wc->byte_len;
		s->cq_send++;
		wl->cq_send++;
		wl->bytes_tx += wc->byte_len;
		hsock_wake(s);
		maybe_finish_close(h, s);
		return;
	case XWC_SEND:
		if (!(wc->wr_id & ~WR_CTL))
			return;
		s = h->socks[tag_sid(wc->wr_id & ~WR_CTL)];
		if (!s || !tag_live(wc->wr_id & ~WR_CTL, s->gen))
			return;
		if (s->fin_sent && !s->fin_done) {
			s->fin_done = s->tx_posted == s->fin_at;
			maybe_finish_close(h, s);
		}
		return;
	case XWC_RECV_IMM:
		s = by_imm(h, wc->imm);
		if (!s || !s->as || s->state != HS_ESTABLISHED) {
			h->stale_dropped++;
			return;
		}
		s->rx_tail += wc->byte_len;
		ring_store(&s->as->rx.tail, s->rx_tail);
		s->bytes_rx += wc->byte_len;
		s->cq_recv++;
		wl->cq_recv++;
		wl->bytes_rx += wc->byte_len;
		wl->msgs_rx++;
		hsock_wake(s);
		return;
	case XWC_RECV: {
		struct link *l = wl;
		uint32_t i = (uint32_t)wc->wr_id;
		uint8_t buf[WIRE_CTL_LEN];
		if (i >= HUB_CTL_RECVS)
			return;
		memcpy(buf, l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, WIRE_CTL_LEN);
		l->x.xp->ops->post_recv(&l->x, i, l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, WIRE_CTL_LEN);
		hub_ctl_in(h, l, buf, wc->byte_len);
		return;
	}
	}
}
