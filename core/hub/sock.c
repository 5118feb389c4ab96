/*
 * sock.c - the hub's socket records and the states they end in.
 *
 * A hub socket (struct hsock) is the hub's private truth about one rshare
 * socket: its slot in a pool's arena, its ring geometry, its link and peer,
 * its credit window.  This file makes and finds them (hsock_new, hsock_get,
 * hsock_by_imm: by the tag a peer or a completion names), wakes the
 * processes waiting on them, and ends them: closed with an error, reset,
 * lingering, freed, or all those on a link that is gone.  Connection set-up
 * is conn.c, data and credit data.c, the last holder's release close.c,
 * control messages and completions from the transports route.c.
 *
 * The slot and its send ring go back to the pool once the socket is
 * released and its FIN completed.  The record and its receive ring linger
 * until the peer says it will write no more (its FIN, or its RESET: a RESET
 * is always answered with one unless one was sent already), because on
 * verbs the peer's NIC may still be writing into that ring: it must not be
 * given to another socket before.  A lost link ends every socket on it at
 * once.  A same-node connection (no link, pair.c) carries FIN and RESET
 * here, straight to the other socket.
 */
#include "hub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sys.h"
#include "tag.h"

/* ---- allocation ---- */

static uint32_t sid_alloc(struct hub *h)
{
	for (uint32_t n = 0; n < TAG_MAX_SOCKS; n++) {
		uint32_t sid = h->next_sid + 1 + n;
		sid %= TAG_MAX_SOCKS;
		if (sid && !h->socks[sid]) {
			h->next_sid = sid;
			if (sid >= h->sid_hi)
				h->sid_hi = sid + 1;
			return sid;
		}
	}
	return 0;
}

/* A free slot: one given back (the last first), else the next never used;
 * the processes learn the high mark from the arena header. */
static uint32_t slot_alloc(struct pool *p)
{
	if (p->nfree)
		return p->slot_free[--p->nfree];
	if (p->slot_hi >= ARENA_MAX_SLOTS)
		return UINT32_MAX;
	atomic_store(&((struct arena_hdr *)p->base)->slots_hi, p->slot_hi + 1);
	return p->slot_hi++;
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
 * geometry; -ENOBUFS when the pool has no room (nothing is kept then). */
int hsock_rings_alloc(struct hsock *s)
{
	struct pool *p = s->pool;
	struct hub *h = the_hub;
	if (h->lim_bytes && p->use->bytes + s->rx_size + s->tx_size > h->lim_bytes)
		return uid_limit(h, p->use, "memory");
	if (s->rx_size && !(s->rx_off = arena_alloc(p->rx_alloc, s->rx_size)))
		return -ENOBUFS;
	if (s->tx_size && !(s->tx_off = arena_alloc(p->tx_alloc, s->tx_size))) {
		arena_release(p->rx_alloc, s->rx_off, s->rx_size);
		s->rx_off = 0;
		return -ENOBUFS;
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
	uint32_t slot, sid;
	if (p->use->socks >= h->lim_socks) {
		uid_limit(h, p->use, "sockets");
		return NULL;
	}
	sid = sid_alloc(h);
	if (!sid || (slot = slot_alloc(p)) == UINT32_MAX)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		p->slot_free[p->nfree++] = slot;
		return NULL;
	}
	s->rx_size = rxsize;
	s->tx_size = txsize;
	s->sid = sid;
	/* a generation new to the socket id (the links' tags name it so) and
	 * to the slot (the processes name it by slot and generation): above
	 * the last of both, or a late request or a stale epoll record of the
	 * slot's last socket, under another id, would name this one */
	s->gen = h->gens[sid] + 1 > p->slot_gen[slot] ? h->gens[sid] + 1 : p->slot_gen[slot] + 1;
	h->gens[sid] = p->slot_gen[slot] = s->gen;
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
	atomic_store(&as->acc_sleepers, 0);
	atomic_store(&as->rx.head, 0);
	atomic_store(&as->rx.tail, 0);
	atomic_store(&as->tx.head, 0);
	atomic_store(&as->tx.tail, 0);
	atomic_store(&as->rx_credit_mark, 0);
	atomic_store(&as->rx_credit_size, 0);
	atomic_store(&as->rx_sig, 0);
	atomic_store(&as->tx_blk, 0);
	as->pair_seg = as->pair_tx = as->pair_rx = 0;
	memset(&as->opts, 0, sizeof(as->opts));
	atomic_store(&as->zc, 0);
	atomic_store(&as->holders, 0);
	atomic_store(&as->peek_off, -1);
	/* no placed tail until this socket offers one (conn.c): the last
	 * socket's tag and word would be believed by a reader of this one
	 * that never gets its own (soft, a failed registration) */
	atomic_store(&as->rx_placed_tag, 0);
	atomic_store(&as->rx_placed, 0);
	if (hsock_rings_alloc(s) < 0) {
		free(s); /* the socket id is not taken yet, the slot goes back */
		p->slot_free[p->nfree++] = slot;
		return NULL;
	}
	memset(&as->local, 0, sizeof(as->local));
	memset(&as->peer, 0, sizeof(as->peer));
	mutex_init_robust(&as->rx_lock);
	mutex_init_robust(&as->tx_lock);
	as->gen = s->gen;
	p->slot_sid[slot] = sid;
	p->nsocks++;
	p->use->socks++;
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

struct hsock *hsock_by_imm(struct hub *h, uint32_t imm)
{
	uint32_t sid = tag_imm_sid(imm);
	struct hsock *s = sid ? h->socks[sid] : NULL;
	return s && tag_imm_live(imm, s->gen) ? s : NULL;
}

void hsock_uncount(struct hsock *s)
{
	if (s->counted && s->link)
		s->link->conns--;
	s->counted = 0;
}

void hsock_ring_free(struct pool *p, struct arena_alloc *a, uint64_t off, uint64_t size)
{
	if (!off)
		return;
	/* its registration (verbs) goes first, then the pages go back;
	 * unless the pool keeps it for the next ring there (pool.c) */
	if (pool_ring_freed(the_hub, p, off))
		arena_release(a, off, size);
	else if (!arena_release_warm(a, off, size))
		fallocate(p->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, size);
}

/* A send ring goes: a transport that may still read it for writes not yet
 * given to the kernel (soft sends from the ring) copies them first. */
static void tx_forget(struct hub *h, struct pool *p, uint64_t off, uint64_t size)
{
	struct xport *xps[] = {&h->soft, &h->verbs};
	if (!off)
		return;
	for (size_t i = 0; i < sizeof(xps) / sizeof(xps[0]); i++)
		if (xps[i]->up && xps[i]->ops && xps[i]->ops->forget)
			xps[i]->ops->forget(xps[i], arena_bytes(p->base, off), size);
}

/* Give the slot and its send ring back to the pool; the record and the
 * receive ring may live on (LINGER). */
void hsock_slot_release(struct hub *h, struct hsock *s)
{
	struct pool *p = s->pool;
	hpoll_close(s);
	if (!s->as)
		return;
	tx_forget(h, p, s->tx_off, s->tx_size);
	tx_forget(h, p, s->tx_old_off, s->tx_old_size);
	hsock_ring_free(p, p->tx_alloc, s->tx_off, s->tx_size);
	s->tx_off = 0;
	hsock_ring_free(p, p->tx_alloc, s->tx_old_off, s->tx_old_size);
	s->tx_old_off = s->tx_old_size = 0;
	atomic_store(&s->as->state, SLOT_FREE);
	s->as->gen = s->gen + 1;
	p->slot_sid[s->slot] = 0;
	p->slot_free[p->nfree++] = s->slot;
	s->as = NULL;
}

/* As the kernel: an accepted connection keeps its local port bound, and a
 * bind to it fails (request.c asks); counted per port, never searched.
 * The port sits at the same place in both address families. */
void hsock_port_hold(struct hub *h, struct hsock *s)
{
	if (!s->port_held) {
		s->port_held = 1;
		h->port_accepted[ntohs(s->local.in.sin_port)]++;
	}
}

void hsock_free(struct hub *h, struct hsock *s)
{
	struct pool *p = s->pool;
	if (s->link && s->peer && !s->lp && s->fin_done && s->rx_fin && !s->reset_sent)
		hub_timewait_add(h, s); /* ended cleanly: its peer may ask again */
	if (s->port_held)
		h->port_accepted[ntohs(s->local.in.sin_port)]--;
	ports_release(h, s);
	hsock_uncount(s);
	hsock_resume_forget(s);
	hub_by_src_del(h, s);
	if (s->state == HS_LISTENING)
		hub_listener_forget(h, s);
	hsock_slot_release(h, s);
	hsock_ring_free(p, p->rx_alloc, s->rx_off, s->rx_size);
	hsock_rings_forget(s);
	p->nsocks--;
	p->use->socks--;
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
void hsock_linger(struct hub *h, struct hsock *s)
{
	hsock_uncount(s);
	hsock_slot_release(h, s);
	if (!s->link || !s->peer || s->link->state != LINK_UP)
		hsock_free(h, s);
	else
		s->state = HS_LINGER;
}

/* s->nholders moved by D (+1 or -1), and told in the slot (vs_linger of
 * core/proc reads it); the count now */
uint32_t hsock_holders_add(struct hsock *s, int d)
{
	s->nholders += (uint32_t)d;
	if (s->as)
		atomic_store(&s->as->holders, s->nholders);
	return s->nholders;
}

/* ---- waking processes, ending sockets ---- */

/* A listener woken while a request is answered (a connect's admission,
 * an accept that admitted one held pending) is woken once the answer is
 * out: the connecting process goes on while the hub writes the
 * listener's eventfd, which wakes every thread and process asleep in
 * poll on it (a pool of threads blocked in accept: 8 of them made a
 * connect on one node take 50 us).  Nothing else comes between: the
 * listener's acceptq already counts the connection, and the end of the
 * request makes the wake-ups, whatever it answered. */
static int wake_later(struct hub *h, struct hsock *s)
{
	uint32_t i;
	if (!h || !h->wake_later || s->state != HS_LISTENING)
		return 0;
	for (i = 0; i < h->nlater; i++)
		if (h->later[i] == s->sid)
			return 1;
	if (h->nlater == HUB_WAKE_LATER)
		return 0;
	h->later[h->nlater++] = s->sid;
	return 1;
}

void hub_wake_later_begin(struct hub *h)
{
	h->wake_later = 1;
}

void hub_wake_later_end(struct hub *h)
{
	uint32_t i, n = h->nlater;
	h->wake_later = 0;
	h->nlater = 0;
	for (i = 0; i < n; i++) {
		struct hsock *s = h->socks[h->later[i]];
		if (s && s->state == HS_LISTENING)
			hsock_wake(s);
	}
}

/* Wake the threads of s's processes that the event WHAT can help
 * (arena.h: arena_wake_words): the words of its class move, and the
 * system call is made only for a word a thread sleeps on. */
void hsock_wake_for(struct hsock *s, int what)
{
	struct arena_slot *as = s->as;
	_Atomic uint32_t *w[3], *n[3];
	int k, sleep = 0;
	if (!as || wake_later(the_hub, s))
		return;
	k = arena_wake_words(as, what, w, n);
	for (int i = 0; i < k; i++) {
		atomic_fetch_add_explicit(w[i], 1, memory_order_seq_cst);
		if (atomic_load_explicit(n[i], memory_order_seq_cst))
			sleep |= 1 << i;
	}
	if (sleep || s->evfd >= 0) {
		/* the kernel's part of a hand-off, counted apart (wake_ns) */
		uint64_t t0 = sys_now_ns();
		for (int i = 0; i < k; i++)
			if (sleep & (1 << i))
				sys_futex(w[i], FUTEX_WAKE, INT_MAX, NULL);
		if (s->evfd >= 0) {
			uint64_t one = 1;
			if (write(s->evfd, &one, sizeof(one)) < 0) {
				/* counter saturated: waiters are awake anyway */
			}
		}
		if (the_hub)
			the_hub->wake_ns += sys_now_ns() - t0;
	}
	if (s->poll_ends & 2)
		hpoll_reflect_soon(the_hub, s);
}

void hsock_wake(struct hsock *s)
{
	hsock_wake_for(s, ARENA_WAKE_ALL);
}

void hsock_set_closed(struct hsock *s, int err)
{
	hsock_uncount(s);
	hsock_resume_forget(s);
	s->state = HS_CLOSED;
	if (s->as) {
		atomic_store(&s->as->error, err);
		if (err == ECONNRESET)
			atomic_fetch_or(&s->as->flags, SLOTF_RESET);
		atomic_store(&s->as->state, SLOT_CLOSED);
	}
	hsock_wake(s);
}

/* ---- same node: the other socket of the pair ---- */

static struct hsock *local_partner(struct hub *h, struct hsock *s)
{
	struct hsock *p = s->peer ? hsock_by_imm(h, s->peer) : NULL;
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
		hsock_set_closed(s, s->rx_fin ? EPIPE : ECONNRESET);
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
void hsock_local_fin(struct hub *h, struct hsock *s)
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
void hsock_local_wake(struct hub *h, struct hsock *s, int credit)
{
	struct hsock *p = local_partner(h, s);
	if (p)
		hsock_wake_for(p, credit ? ARENA_WAKE_TX : ARENA_WAKE_RX);
	else if (!credit && s->state == HS_ESTABLISHED)
		local_reset_in(h, s);
}

/* ---- resets ---- */

void hsock_send_reset(struct hsock *s)
{
	if (s->early)
		return; /* it goes when the ACCEPT names the peer (early.c) */
	if (s->lp && s->peer && !s->reset_sent)
		local_reset(the_hub, s);
	else if (s->link && s->peer && !s->reset_sent)
		link_send_simple(s->link, CTL_RESET, s->peer, tag_imm(s->sid, s->gen), 0);
	s->reset_sent = 1;
}

void hsock_abort(struct hub *h, struct hsock *s, const char *why)
{
	log_warn("socket %u: %s: reset", s->sid, why);
	hsock_send_reset(s);
	if (s->nholders || s->queued)
		hsock_set_closed(s, ECONNRESET);
	else
		hsock_linger(h, s);
}

void hsock_finish_close(struct hub *h, struct hsock *s)
{
	if (s->reset_after_tx) {
		if (s->state == HS_ESTABLISHED && s->tx_done == s->tx_posted) {
			s->reset_after_tx = 0;
			hsock_send_reset(s);
			hsock_linger(h, s);
		}
		return;
	}
	if (!s->closing || !s->fin_done || s->tx_done != s->fin_at || s->state != HS_ESTABLISHED)
		return;
	if (s->rx_fin) {
		hsock_free(h, s);
		return;
	}
	hsock_linger(h, s);
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
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (!s || s->link != l)
			continue;
		hub_by_src_del(h, s);
		if (hsock_suspend(h, s, l))
			continue;
		s->peer = 0;
		switch (s->state) {
		case HS_CONNECTING:
			if (l->lost) {
				hsock_redial_later(h, s); /* as kernel TCP sends its SYN again */
			} else if (!s->connect_sent) {
				s->state = HS_FALLBACK;
				h->fallback_connects++;
				atomic_store(&s->as->state, SLOT_FALLBACK);
				hsock_wake(s);
			} else {
				hsock_set_closed(s, ECONNRESET);
			}
			break;
		case HS_ESTABLISHED:
			if (s->closing && !s->nholders) {
				hsock_free(h, s);
				continue;
			}
			hsock_set_closed(s, ECONNRESET);
			break;
		case HS_LINGER:
			hsock_free(h, s);
			continue;
		default:
			break;
		}
		hsock_uncount(s);
		s->link = NULL;
	}
}
