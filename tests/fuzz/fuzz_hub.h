/*
 * fuzz_hub.h - shared harness of the hub fuzzers (fuzz-hub-requests.c,
 * fuzz-arena.c): a socketless hub (hub_test_*), two fake transports and the
 * checks every fake post makes.
 *
 * The hub is made once per process (hub_test_new), with RSHARE_ARENA_MB=128.
 * Each input starts from the same state and leaves it behind: fh_begin()
 * makes a fresh pool with its processes, fh_end() lets every process die,
 * fails every link and settles, and then no socket may be left (a socket
 * record that outlives every process and every link is a leak: abort).
 * Socket ids and generations restart at 1 for every input, so a crash
 * input reproduces on its own.
 *
 * Fake transports, in h->soft and h->verbs:
 *   fake_soft   XP_POSITIONAL, like xport_soft.c: raddr is a stream position
 *   fake_verbs  flags 0, like xport_verbs.c: raddr is the peer ring's address,
 *               keys come from reg_mr (always succeeds unless faulted)
 * post_write_imm / post_send record a completion in one queue (fh_poll()
 * routes them through hub_route), link_close flushes the link's completions
 * as both real transports do.  Every post is checked:
 *   post_write_imm: the wr_id names a live, established socket on that link;
 *     every iov lies inside that socket's tx ring and inside the pool's tx
 *     half of the arena; the write is 1..WIRE_MAX_WRITE bytes, within the
 *     peer's credit; imm is the peer socket; on fake_verbs raddr+len stays
 *     inside the peer's ring.
 *   post_send: 64 bytes that wire_ctl_decode() accepts (the hub never sends
 *     what a peer hub would drop the link for).
 *   hub_rx_target: every iov inside the socket's rx ring and the pool's rx half.
 * Any violation prints what and calls abort(), which libFuzzer reports as a
 * crash with the input.
 */
#ifndef RSHARE_FUZZ_HUB_H
#define RSHARE_FUZZ_HUB_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "frame.h"
#include "hub.h"
#include "log.h"
#include "msg.h"
#include "tag.h"

#define FH_MAX_PROCS 8
#define FH_CQ_CAP 8192
#define FH_SENT_CAP 64

#define FH_CHECK(cond, ...)                                                                 \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz invariant broken: %s (%s:%d): ", #cond, __FILE__, \
				__LINE__);                                                  \
			fprintf(stderr, __VA_ARGS__);                                       \
			fprintf(stderr, "\n");                                              \
			abort();                                                            \
		}                                                                           \
	} while (0)

enum fh_fault { FH_OK = 0, FH_EAGAIN, FH_EIO, FH_NOCONNECT, FH_NOREG, FH_NFAULT };

static struct fh {
	struct hub *h;
	struct pool *pool;           /* this input's pool */
	uint64_t rx_lo, rx_hi;       /* the pool's rx and tx halves, as the hub made them */
	uint64_t tx_lo, tx_hi;
	uint64_t slots_off;          /* where the hub put the slots (the header may be scribbled) */
	struct proc *anchor;         /* keeps the pool alive for the whole input */
	struct proc *procs[FH_MAX_PROCS];
	int nprocs;
	struct xwc cq[FH_CQ_CAP];
	uint32_t cq_n;
	struct wire_ctl sent[FH_SENT_CAP]; /* control messages the hub posted, newest last */
	struct link *sent_link[FH_SENT_CAP];
	uint32_t nsent;
	int fault;
	int heavy;                   /* STAT/PORTCHECK/link scans left in this input */
	uint64_t writes, sends;
} fh;

/* ---- fake transports ---- */

static inline int fake_init(struct xport *xp, struct hub *h, uint16_t port)
{
	(void)xp;
	(void)h;
	(void)port;
	return 0;
}
static inline void fake_fini(struct xport *xp) { (void)xp; }

static inline int fake_link_connect(struct xport *xp, struct xlink *l, const union sockaddr_any *peer)
{
	(void)xp;
	(void)peer;
	l->local_addr.in.sin_family = AF_INET;
	l->local_addr.in.sin_addr.s_addr = htonl(0x0a000001);
	return fh.fault == FH_NOCONNECT ? -1 : 0;
}

static inline void fake_link_close(struct xlink *xl)
{
	struct link *l = link_of(xl);
	uint32_t k = 0;
	for (uint32_t i = 0; i < fh.cq_n; i++)
		if (fh.cq[i].link != xl)
			fh.cq[k++] = fh.cq[i];
	fh.cq_n = k;
	k = 0;
	for (uint32_t i = 0; i < fh.nsent; i++)
		if (fh.sent_link[i] != l) {
			fh.sent[k] = fh.sent[i];
			fh.sent_link[k++] = fh.sent_link[i];
		}
	fh.nsent = k;
}

static inline struct pool *pool_of_ptr(const void *p)
{
	for (struct pool *x = fh.h->pools; x; x = x->next)
		if ((const uint8_t *)p >= (uint8_t *)x->base && (const uint8_t *)p < (uint8_t *)x->base + x->bytes)
			return x;
	return NULL;
}

static inline int fake_reg_mr(struct xport *xp, void *addr, size_t len, int remote, struct xmr *mr)
{
	(void)xp;
	(void)remote;
	if (fh.fault == FH_NOREG)
		return -1;
	struct pool *p = pool_of_ptr(addr);
	FH_CHECK(p && (uint8_t *)addr + len <= (uint8_t *)p->base + p->bytes,
		 "reg_mr of %p+%zu outside every arena", addr, len);
	mr->handle = NULL;
	mr->lkey = mr->rkey = 0x1000 + (uint32_t)(((uint8_t *)addr - (uint8_t *)p->base) / POOL_CHUNK);
	return 0;
}
static inline void fake_dereg_mr(struct xport *xp, struct xmr *mr)
{
	(void)xp;
	(void)mr;
}

static inline void cq_add(const struct xwc *wc)
{
	if (fh.cq_n < FH_CQ_CAP)
		fh.cq[fh.cq_n++] = *wc;
}

static inline int fake_post_write_imm(struct xlink *xl, uint64_t wr_id, const struct iovec *iov, int iovcnt,
			       uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct hub *h = fh.h;
	uint32_t sid = tag_sid(wr_id);
	struct hsock *s = sid < TAG_MAX_SOCKS ? h->socks[sid] : NULL;
	uint64_t len = 0;
	uint8_t *ring, *base;
	struct link *l = link_of(xl);
	struct xwc wc = {.wr_id = wr_id, .op = XWC_WRITE, .link = xl};
	(void)lkey;
	(void)rkey;
	if (fh.fault == FH_EAGAIN)
		return -EAGAIN;
	if (fh.fault == FH_EIO)
		return -EIO;
	FH_CHECK(s && tag_live(wr_id, s->gen), "write for no live socket (sid %u)", sid);
	FH_CHECK(s->link == l && s->as && s->state == HS_ESTABLISHED, "write of socket %u in state %d",
		 sid, s->state);
	FH_CHECK(iovcnt >= 1 && iovcnt <= 2, "iovcnt %d", iovcnt);
	base = s->pool->base;
	ring = base + s->tx_off;
	for (int i = 0; i < iovcnt; i++) {
		uint8_t *b = iov[i].iov_base;
		uint64_t off = (uint64_t)(b - base);
		FH_CHECK(iov[i].iov_len > 0, "empty iov %d", i);
		FH_CHECK(b >= ring && b + iov[i].iov_len <= ring + s->tx_size,
			 "iov %d [%p,+%zu) outside socket %u's tx ring [%p,+%llu)", i, (void *)b,
			 iov[i].iov_len, sid, (void *)ring, (unsigned long long)s->tx_size);
		if (s->pool == fh.pool)
			FH_CHECK(off >= fh.tx_lo && off + iov[i].iov_len <= fh.tx_hi,
				 "iov %d outside the pool's tx rings", i);
		len += iov[i].iov_len;
	}
	FH_CHECK(len <= WIRE_MAX_WRITE, "write of %llu bytes", (unsigned long long)len);
	FH_CHECK(s->tx_posted + len <= s->peer_head + s->peer_ring, "write beyond the peer's credit");
	FH_CHECK(imm == s->peer && imm, "write imm %x, peer %x", imm, s->peer);
	if (l->x.xp->ops->flags & XP_POSITIONAL)
		FH_CHECK(raddr == s->tx_posted, "positional raddr %llu, posted %llu",
			 (unsigned long long)raddr, (unsigned long long)s->tx_posted);
	else
		FH_CHECK(raddr >= s->peer_raddr && raddr + len <= s->peer_raddr + s->peer_ring,
			 "raddr outside the peer's ring");
	/* touch every byte: a wild iov faults here, not silently later */
	{
		volatile uint8_t sink = 0;
		for (int i = 0; i < iovcnt; i++)
			for (size_t k = 0; k < iov[i].iov_len; k += 4096)
				sink ^= ((uint8_t *)iov[i].iov_base)[k];
		(void)sink;
	}
	wc.byte_len = (uint32_t)len;
	fh.writes++;
	cq_add(&wc);
	return 0;
}

static inline int fake_post_send(struct xlink *xl, uint64_t wr_id, const void *buf, uint32_t len)
{
	struct link *l = link_of(xl);
	struct wire_ctl c;
	const char *why;
	struct xwc wc = {.wr_id = wr_id, .op = XWC_SEND, .byte_len = len, .link = xl};
	FH_CHECK(len == WIRE_CTL_LEN, "control send of %u bytes", len);
	FH_CHECK(wire_ctl_decode(buf, len, &c, &why) == 0, "the hub sent a control message its peer rejects: %s (op %u)",
		 why, ((const uint8_t *)buf)[0]);
	FH_CHECK(l->state == LINK_UP, "control send on a link that is not up");
	if (fh.nsent == FH_SENT_CAP) {
		memmove(fh.sent, fh.sent + 1, (FH_SENT_CAP - 1) * sizeof(fh.sent[0]));
		memmove(fh.sent_link, fh.sent_link + 1, (FH_SENT_CAP - 1) * sizeof(fh.sent_link[0]));
		fh.nsent--;
	}
	fh.sent[fh.nsent] = c;
	fh.sent_link[fh.nsent++] = l;
	fh.sends++;
	cq_add(&wc);
	return 0;
}

static inline int fake_post_recv(struct xlink *xl, uint64_t wr_id, void *buf, uint32_t len)
{
	struct link *l = link_of(xl);
	FH_CHECK(wr_id < HUB_CTL_RECVS && len == WIRE_CTL_LEN &&
			 (uint8_t *)buf == l->ctl_bufs + wr_id * WIRE_CTL_LEN,
		 "odd receive buffer");
	return 0;
}

static inline int fake_poll_cq(struct xport *xp, struct xwc *wc, int max)
{
	(void)xp;
	(void)wc;
	(void)max;
	return 0;
}

static const struct xport_ops fake_soft_ops = {
	.name = "fake-soft", .flags = XP_POSITIONAL, .init = fake_init, .fini = fake_fini,
	.link_connect = fake_link_connect, .link_close = fake_link_close, .reg_mr = fake_reg_mr,
	.dereg_mr = fake_dereg_mr, .post_write_imm = fake_post_write_imm, .post_send = fake_post_send,
	.post_recv = fake_post_recv, .poll_cq = fake_poll_cq,
};
static const struct xport_ops fake_verbs_ops = {
	.name = "fake-verbs", .flags = 0, .init = fake_init, .fini = fake_fini,
	.link_connect = fake_link_connect, .link_close = fake_link_close, .reg_mr = fake_reg_mr,
	.dereg_mr = fake_dereg_mr, .post_write_imm = fake_post_write_imm, .post_send = fake_post_send,
	.post_recv = fake_post_recv, .poll_cq = fake_poll_cq,
};

/* ---- set-up and tear-down ---- */

static inline void fh_init(void)
{
	if (fh.h)
		return;
	setenv("RSHARE_ARENA_MB", "128", 1);
	log_level = getenv("RSHARE_LOG") ? LOG_LVL_DEBUG : -1; /* quiet unless asked */
	fh.h = hub_test_new();
	if (!fh.h)
		abort();
	fh.h->soft.ops = &fake_soft_ops;
	fh.h->soft.hub = fh.h;
	fh.h->soft.up = 1;
	fh.h->verbs.ops = &fake_verbs_ops;
	fh.h->verbs.hub = fh.h;
}

static inline struct proc *fh_new_proc(struct pool *p)
{
	struct proc *pr;
	if (fh.nprocs == FH_MAX_PROCS)
		return NULL;
	pr = hub_test_proc(fh.h, p);
	if (pr) {
		struct msg_req q = {.op = MSG_CELL}; /* its request cell: the arena's scribbles reach it */
		hub_test_request(fh.h, pr, &q);
		fh.procs[fh.nprocs++] = pr;
	}
	return pr;
}

static inline void fh_proc_gone(int i)
{
	struct proc *pr = fh.procs[i];
	fh.procs[i] = fh.procs[--fh.nprocs];
	hub_test_proc_gone(fh.h, pr);
}

/* mode: HUB_SOFT or HUB_AUTO; verbs: whether the fake verbs transport is up */
static inline void fh_begin(int mode, int verbs, int nprocs)
{
	struct hub *h = fh.h;
	/* nothing is left from the last input: ids and generations restart */
	if (h->nsocks == 0) {
		memset(h->gens, 0, ((size_t)h->next_sid + 1) * sizeof(*h->gens));
		h->next_sid = 0;
	}
	h->mode = mode;
	h->verbs.up = verbs;
	fh.fault = FH_OK;
	fh.cq_n = 0;
	fh.nsent = 0;
	fh.heavy = 4;
	fh.pool = hub_test_pool(h);
	if (!fh.pool)
		abort();
	{
		uint64_t data = ((struct arena_hdr *)fh.pool->base)->data_off;
		uint64_t mid = (data + (fh.pool->bytes - data) / 2) & ~(uint64_t)(POOL_CHUNK - 1);
		fh.slots_off = ((struct arena_hdr *)fh.pool->base)->slots_off;
		fh.rx_lo = data;
		fh.rx_hi = fh.tx_lo = mid;
		fh.tx_hi = fh.pool->bytes;
	}
	fh.anchor = hub_test_proc(h, fh.pool);
	if (!fh.anchor)
		abort();
	for (int i = 0; i < nprocs; i++)
		fh_new_proc(fh.pool);
}

static inline void fh_end(void)
{
	struct hub *h = fh.h;
	fh.fault = FH_OK;
	while (fh.nprocs)
		fh_proc_gone(fh.nprocs - 1);
	hub_test_proc_gone(h, fh.anchor);
	fh.anchor = NULL;
	while (h->links)
		hub_link_fail(&h->links->x, "end of input");
	fh.cq_n = 0;
	fh.nsent = 0;
	hub_test_settle(h);
	if (h->nsocks) {
		for (uint32_t sid = 1; sid <= h->next_sid && sid < TAG_MAX_SOCKS; sid++) {
			struct hsock *s = h->socks[sid];
			if (s)
				fprintf(stderr, "left: socket %u state %d holders %u link %p queued %u closing %u\n",
					sid, s->state, s->nholders, (void *)s->link, s->queued, s->closing);
		}
		FH_CHECK(h->nsocks == 0, "%u sockets outlive every process and link", h->nsocks);
	}
	FH_CHECK(h->pools == NULL, "a pool without processes or sockets was not swept");
	fh.pool = NULL;
}

/* ---- views of the hub's state, for choosing targets ---- */

static inline uint32_t fh_nlive(void)
{
	uint32_t n = 0;
	for (uint32_t sid = 1; sid <= fh.h->next_sid && sid < TAG_MAX_SOCKS; sid++)
		n += fh.h->socks[sid] != NULL;
	return n;
}

/* the k-th live socket (mod their number), or NULL */
static inline struct hsock *fh_sock(uint32_t k)
{
	uint32_t n = fh_nlive(), i = 0;
	if (!n)
		return NULL;
	k %= n;
	for (uint32_t sid = 1; sid <= fh.h->next_sid && sid < TAG_MAX_SOCKS; sid++)
		if (fh.h->socks[sid] && i++ == k)
			return fh.h->socks[sid];
	return NULL;
}

static inline struct hsock *fh_listener(uint32_t k)
{
	struct hub *h = fh.h;
	if (!h->nlisteners)
		return NULL;
	return h->socks[h->listeners[k % h->nlisteners]];
}

static inline struct link *fh_link(uint32_t k)
{
	uint32_t n = 0;
	struct link *l;
	for (l = fh.h->links; l; l = l->next)
		n++;
	if (!n)
		return NULL;
	k %= n;
	for (l = fh.h->links; k; l = l->next)
		k--;
	return l;
}

static inline uint32_t fh_nlinks(void)
{
	uint32_t n = 0;
	for (struct link *l = fh.h->links; l; l = l->next)
		n++;
	return n;
}

/* A link as a transport makes one for a peer that connected to us. */
static inline struct link *fh_new_link(int verbs, uint8_t peer_host)
{
	struct xport *xp = verbs ? &fh.h->verbs : &fh.h->soft;
	struct link *l;
	if (fh_nlinks() >= 4 || fh.heavy <= 0)
		return NULL;
	fh.heavy--; /* hub_link_up scans every socket id */
	l = hub_test_link(fh.h, xp);
	if (!l)
		return NULL;
	l->x.peer_addr.in.sin_family = AF_INET;
	l->x.peer_addr.in.sin_addr.s_addr = htonl(0x0a000000 | peer_host);
	l->x.local_addr.in.sin_family = AF_INET;
	l->x.local_addr.in.sin_addr.s_addr = htonl(0x0a000001);
	return l;
}

/* Every socket a process holds exists and counts it among its holders. */
static inline void fh_check_holders(void)
{
	struct hub *h = fh.h;
	for (struct proc *pr = h->procs; pr; pr = pr->next)
		for (uint32_t i = 0; i < pr->nsocks; i++) {
			uint32_t sid = pr->socks[i], n = 0;
			struct hsock *s = sid && sid < TAG_MAX_SOCKS ? h->socks[sid] : NULL;
			FH_CHECK(s, "process %d holds socket %u, which is gone", (int)pr->pid, sid);
			for (struct proc *q = h->procs; q; q = q->next)
				for (uint32_t j = 0; j < q->nsocks; j++)
					n += q->socks[j] == sid;
			FH_CHECK(s->nholders == n, "socket %u: %u holders counted, %u hold it", sid,
				 s->nholders, n);
		}
}

/* Every live socket's slot pointer lies in its pool's slot array, as the
 * hub laid it out (not as the arena header says now). */
static inline void fh_check_slots(void)
{
	struct hub *h = fh.h;
	for (uint32_t sid = 1; sid <= h->next_sid && sid < TAG_MAX_SOCKS; sid++) {
		struct hsock *s = h->socks[sid];
		uint8_t *lo;
		if (!s || !s->as || s->pool != fh.pool)
			continue;
		lo = (uint8_t *)fh.pool->base + fh.slots_off;
		FH_CHECK((uint8_t *)s->as == lo + (size_t)s->slot * sizeof(struct arena_slot),
			 "socket %u: slot %u at %p, not in the slot array at %p", sid, s->slot,
			 (void *)s->as, (void *)lo);
	}
}

/* ---- the peer hub's side ---- */

static inline void fh_put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static inline void fh_put32(uint8_t *p, uint32_t v) { fh_put16(p, v >> 16); fh_put16(p + 2, (uint16_t)v); }

/* A control message from the peer on l, directly (hub_ctl_in) or through a
 * posted receive and its completion (hub_route), as the transports do. */
static inline void fh_ctl_in(struct link *l, const uint8_t buf[WIRE_CTL_LEN], uint32_t len, int via_recv,
		      uint32_t slot)
{
	if (!via_recv) {
		hub_ctl_in(fh.h, l, buf, len);
		return;
	}
	{
		uint32_t i = slot % HUB_CTL_RECVS;
		struct xwc wc = {.wr_id = i, .op = XWC_RECV, .byte_len = len, .link = &l->x};
		memcpy(l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, buf, WIRE_CTL_LEN);
		hub_route(fh.h, &wc);
	}
}

static inline void fh_ctl(struct link *l, const struct wire_ctl *c)
{
	uint8_t b[WIRE_CTL_LEN];
	wire_ctl_encode(c, b);
	hub_ctl_in(fh.h, l, b, WIRE_CTL_LEN);
}

/* Index of the k-th (mod their number, newest first) control message of
 * kind op the hub sent on l (any link when NULL), or -1. */
static inline int fh_sent_idx(struct link *l, uint8_t op, uint32_t k)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < fh.nsent; i++)
		n += fh.sent[i].op == op && (!l || fh.sent_link[i] == l);
	if (!n)
		return -1;
	k %= n;
	for (uint32_t i = fh.nsent; i-- > 0;)
		if (fh.sent[i].op == op && (!l || fh.sent_link[i] == l) && k-- == 0)
			return (int)i;
	return -1;
}

/* The peer writes len bytes for its socket imm at position pos. */
static inline void fh_rx_write(struct link *l, uint32_t imm, uint64_t pos, uint32_t len)
{
	struct iovec iov[2];
	int n, again = 0;
	if (!(l->x.xp->ops->flags & XP_POSITIONAL)) {
		/* verbs: the NIC placed it already; the hub checks afterwards */
		n = hub_rx_written(&l->x, imm, len);
		if (n < 0) {
			hub_link_fail(&l->x, "write outside its socket's ring window");
			return;
		}
		if (n > 0) {
			struct xwc wc = {.op = XWC_RECV_IMM, .imm = imm, .byte_len = len, .link = &l->x};
			cq_add(&wc);
		}
		return;
	}
	n = hub_rx_target(&l->x, imm, pos, len, iov, &again);
	if (n < 0) {
		hub_link_fail(&l->x, "write outside its socket's ring window");
		return;
	}
	if (n > 0) {
		struct hsock *s = fh.h->socks[tag_imm_sid(imm)];
		uint64_t tot = 0;
		struct xwc wc = {.op = XWC_RECV_IMM, .imm = imm, .byte_len = len, .link = &l->x};
		FH_CHECK(n <= 2 && s, "hub_rx_target gave %d iovs", n);
		for (int i = 0; i < n; i++) {
			uint8_t *b = iov[i].iov_base, *ring = (uint8_t *)s->pool->base + s->rx_off;
			uint64_t off = (uint64_t)(b - (uint8_t *)s->pool->base);
			FH_CHECK(b >= ring && b + iov[i].iov_len <= ring + s->rx_size,
				 "rx iov %d outside socket %u's rx ring", i, s->sid);
			if (s->pool == fh.pool)
				FH_CHECK(off >= fh.rx_lo && off + iov[i].iov_len <= fh.rx_hi,
					 "rx iov %d outside the pool's rx rings", i);
			memset(b, 0xa5, iov[i].iov_len);
			tot += iov[i].iov_len;
		}
		FH_CHECK(tot == len, "rx iovs cover %llu of %u bytes", (unsigned long long)tot, len);
		if (!again)
			cq_add(&wc);
	}
}

/* Deliver up to n queued completions, oldest first. */
static inline void fh_poll(uint32_t n)
{
	while (n-- && fh.cq_n) {
		struct xwc wc = fh.cq[0];
		memmove(fh.cq, fh.cq + 1, (fh.cq_n - 1) * sizeof(fh.cq[0]));
		fh.cq_n--;
		hub_route(fh.h, &wc);
	}
}

/* A well-behaved process: writes n bytes into its tx ring (within room),
 * reads what arrived, rings the doorbell. */
static inline void fh_proc_io(struct hsock *s, uint32_t n, int consume)
{
	struct arena_slot *as = s->as;
	uint32_t ops = 0;
	if (!as)
		return;
	if (s->tx_size) {
		uint64_t tail = ring_load(&as->tx.tail), head = ring_load(&as->tx.head);
		uint64_t room = s->tx_size - (tail - head);
		if (tail - head <= s->tx_size && n) {
			if (n > room)
				n = (uint32_t)room;
			ring_copy_in(arena_bytes(s->pool->base, s->tx_off), s->tx_size, tail, "x", n ? 1 : 0);
			ring_store(&as->tx.tail, tail + n);
			ops |= SLOTOP_TX;
		}
	}
	if (consume && s->rx_size) {
		ring_store(&as->rx.head, ring_load(&as->rx.tail));
		ops |= SLOTOP_CREDIT;
	}
	if (ops) {
		/* arena_ring, but through the slot the hub laid out: a step
		 * may have scribbled over the header's slots_off (fuzz-arena op
		 * 2), which would hurt only the process that did it */
		struct arena_hdr *h = s->pool->base;
		atomic_fetch_or(&as->pending_ops, ops);
		atomic_fetch_or(&h->doorbell[s->slot / 64], 1ull << (s->slot % 64));
		atomic_fetch_or(&h->summary[s->slot / 4096], 1ull << (s->slot / 64 % 64));
	}
}

#endif
