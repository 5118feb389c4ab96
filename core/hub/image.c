/*
 * image.c - the hub's records as bytes, for the hub that follows it in the
 * same process (restart.c).
 *
 * The old hub writes its records into a memfd and the new one reads them
 * back.  Each record is written as its struct, followed by the arrays it
 * owns; a pointer is written as what names it (a pool's id, a pair
 * segment's id, a socket id) and made again by the reader; descriptors are
 * the same numbers (they stay open across the execve).  So only a hub
 * built with the same record layout can read an image: it starts with
 * the fingerprint of the headers that define the records (HUB_LAYOUT, a
 * checksum the Makefile takes), which the old hub compares with the new
 * binary's (`rshared --layout`) before it hands over.
 * What an image never holds (the old hub drops or refuses it first):
 * links and their transports, descriptors in flight, keepers, verbs
 * registrations, stat replies not yet taken, deferred frees, punches.
 * Function pointers, epoll registrations and mappings are the reader's.
 */
#include "hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "tag.h"

#ifndef HUB_LAYOUT
#define HUB_LAYOUT 0
#endif
#define IMAGE_MAGIC 0x314d494255485352ULL /* "RSHUBIM1" */

uint64_t hub_layout(void)
{
	return (uint64_t)HUB_LAYOUT ^ ((uint64_t)sizeof(struct hsock) << 32) ^ sizeof(struct hub);
}

/* ---- writing ---- */

static int put(void *c, const void *b, size_t n)
{
	return !n || fwrite(b, 1, n, c) == n ? 0 : -EIO;
}

static int put_u64(FILE *f, uint64_t v)
{
	return put(f, &v, sizeof(v));
}

static int put_pools(struct hub *h, FILE *f)
{
	uint64_t n = 0;
	int r;
	for (struct pool *p = h->pools; p; p = p->next)
		n++;
	r = put_u64(f, n);
	for (struct pool *p = h->pools; p && r == 0; p = p->next) {
		r = put(f, p, offsetof(struct pool, slot_sid));
		r = r ?: put(f, p->slot_sid, p->slot_hi * sizeof(uint32_t));
		r = r ?: put(f, p->slot_gen, p->slot_hi * sizeof(uint32_t));
		r = r ?: put(f, p->slot_free, p->nfree * sizeof(uint32_t));
		r = r ?: put_u64(f, p->use ? p->use->uid : 0);
		r = r ?: arena_alloc_save(p->rx_alloc, put, f);
		r = r ?: arena_alloc_save(p->tx_alloc, put, f);
	}
	return r;
}

static int put_segs(struct hub *h, FILE *f)
{
	uint64_t n = 0;
	int r;
	for (struct pairseg *g = h->segs; g; g = g->next)
		n++;
	r = put_u64(f, n);
	for (struct pairseg *g = h->segs; g && r == 0; g = g->next) {
		r = put(f, g, sizeof(*g));
		r = r ?: arena_alloc_save(g->alloc, put, f);
	}
	return r;
}

/* a socket: its struct, its pool, its accept queue, and its pair: 0 none,
 * 1 the pair follows (its first socket), 2 the pair of the socket named */
static int put_sock(struct hub *h, FILE *f, struct hsock *s)
{
	int r = put_u64(f, s->sid);
	uint32_t o;
	r = r ?: put(f, s, sizeof(*s));
	r = r ?: put_u64(f, s->pool ? s->pool->id : 0);
	r = r ?: put(f, s->q, s->qlen * sizeof(uint32_t));
	if (r || !s->lp)
		return r ?: put_u64(f, 0);
	o = s->lp->sid[!s->lside];
	if (o && o < s->sid && h->socks[o] && h->socks[o]->lp == s->lp)
		return put_u64(f, 2) ?: put_u64(f, o);
	r = put_u64(f, 1) ?: put(f, s->lp, sizeof(*s->lp));
	return r ?: put_u64(f, s->lp->seg ? s->lp->seg->id : 0);
}

static int put_procs(struct hub *h, FILE *f)
{
	uint64_t n = 0;
	int r;
	for (struct proc *pr = h->procs; pr; pr = pr->next)
		n++;
	r = put_u64(f, n);
	for (struct proc *pr = h->procs; pr && r == 0; pr = pr->next) {
		r = put(f, pr, sizeof(*pr));
		r = r ?: put_u64(f, pr->pool ? pr->pool->id : 0);
		r = r ?: put(f, pr->socks, pr->nsocks * sizeof(uint32_t));
		r = r ?: put(f, pr->idx, pr->idx_cap * sizeof(*pr->idx));
	}
	return r;
}

int hub_image_write(struct hub *h, FILE *f)
{
	uint64_t n = 0;
	int r = put_u64(f, IMAGE_MAGIC) ?: put_u64(f, hub_layout());
	r = r ?: put(f, h, sizeof(*h));
	r = r ?: put(f, h->gens, h->sid_hi * sizeof(uint32_t));
	for (struct uid_use *u = h->uids; u; u = u->next)
		n++;
	r = r ?: put_u64(f, n);
	for (struct uid_use *u = h->uids; u && r == 0; u = u->next)
		r = put(f, u, sizeof(*u));
	r = r ?: put_pools(h, f);
	r = r ?: put_segs(h, f);
	r = r ?: put_u64(f, h->nsocks);
	for (uint32_t sid = 1; sid < h->sid_hi && r == 0; sid++)
		if (h->socks[sid])
			r = put_sock(h, f, h->socks[sid]);
	r = r ?: put_procs(h, f);
	r = r ?: put(f, h->ports, h->ports_cap * sizeof(uint32_t));
	r = r ?: put(f, h->listeners, h->nlisteners * sizeof(uint32_t));
	r = r ?: put(f, h->resized, h->nresized * sizeof(uint32_t));
	r = r ?: put(f, h->relinks, h->nrelinks * sizeof(*h->relinks));
	r = r ?: put_u64(f, IMAGE_MAGIC);
	return r ?: (fflush(f) ? -EIO : 0);
}

/* ---- reading ---- */

static int get(void *c, void *b, size_t n)
{
	return !n || fread(b, 1, n, c) == n ? 0 : -EIO;
}

/* an array of n entries of size sz, read (NULL: none, or *r set on failure) */
static void *get_array(FILE *f, size_t n, size_t sz, int *r)
{
	void *a;
	if (*r || !n)
		return NULL;
	a = calloc(n, sz);
	if (!a || get(f, a, n * sz) < 0) {
		free(a);
		*r = -EIO;
		return NULL;
	}
	return a;
}

static struct pool *pool_of(struct hub *h, uint64_t id)
{
	for (struct pool *p = h->pools; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

static void *map_again(int fd, uint64_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

static int get_pool(struct hub *h, FILE *f)
{
	struct pool *p = calloc(1, sizeof(*p));
	uint64_t uid;
	int r = p ? get(f, p, offsetof(struct pool, slot_sid)) : -ENOMEM;
	if (r || p->slot_hi > ARENA_MAX_SLOTS || p->nfree > ARENA_MAX_SLOTS) {
		free(p);
		return r ?: -EIO;
	}
	p->next = h->pools; /* from here on, freed with the hub if it fails */
	h->pools = p;
	memset(&p->ev, 0, sizeof(p->ev));
	p->mrs = NULL;
	p->mr_cap = p->nmr = 0;
	p->mr_idle_bytes = 0;
	p->slot_free = calloc(ARENA_MAX_SLOTS, sizeof(*p->slot_free));
	if (!p->slot_free || get(f, p->slot_sid, p->slot_hi * 4) || get(f, p->slot_gen, p->slot_hi * 4) ||
	    get(f, p->slot_free, p->nfree * 4) || get(f, &uid, sizeof(uid)))
		return -EIO;
	for (p->use = h->uids; p->use && p->use->uid != (uid_t)uid; p->use = p->use->next)
		;
	p->rx_alloc = arena_alloc_load(get, f);
	p->tx_alloc = p->rx_alloc ? arena_alloc_load(get, f) : NULL;
	p->base = map_again(p->memfd, p->bytes);
	if (!p->use || !p->tx_alloc || !p->base)
		return -EIO;
	p->slots = (struct arena_slot *)((uint8_t *)p->base + ((struct arena_hdr *)p->base)->slots_off);
	arena_alloc_charge(p->rx_alloc, &p->use->bytes, h->lim_bytes);
	arena_alloc_charge(p->tx_alloc, &p->use->bytes, h->lim_bytes);
	return 0;
}

static int get_seg(struct hub *h, FILE *f)
{
	struct pairseg *g = calloc(1, sizeof(*g));
	if (!g || get(f, g, sizeof(*g))) {
		free(g);
		return -EIO;
	}
	g->next = h->segs;
	h->segs = g;
	g->alloc = arena_alloc_load(get, f);
	g->base = map_again(g->memfd, g->bytes);
	return g->alloc && g->base ? 0 : -EIO;
}

static struct pairseg *seg_of(struct hub *h, uint32_t id)
{
	for (struct pairseg *g = h->segs; g; g = g->next)
		if (g->id == id)
			return g;
	return NULL;
}

static int get_pair(struct hub *h, FILE *f, struct hsock *s)
{
	uint64_t how, v;
	if (get(f, &how, sizeof(how)))
		return -EIO;
	if (how == 0)
		return 0;
	if (how == 2) {
		if (get(f, &v, sizeof(v)) || !v || v >= s->sid || !h->socks[v] || !h->socks[v]->lp)
			return -EIO;
		s->lp = h->socks[v]->lp;
		return 0;
	}
	s->lp = malloc(sizeof(*s->lp));
	if (how != 1 || !s->lp || get(f, s->lp, sizeof(*s->lp)) || get(f, &v, sizeof(v)))
		return -EIO;
	s->lp->seg = seg_of(h, (uint32_t)v);
	return s->lp->seg ? 0 : -EIO;
}

static int get_sock(struct hub *h, FILE *f)
{
	struct hsock *s = calloc(1, sizeof(*s));
	uint64_t sid, pool;
	int r = 0;
	if (!s || get(f, &sid, sizeof(sid)) || get(f, s, sizeof(*s)) || get(f, &pool, sizeof(pool)) ||
	    sid != s->sid || !sid || sid >= h->sid_hi || h->socks[sid]) {
		free(s);
		return -EIO;
	}
	h->socks[sid] = s;
	s->pool = pool ? pool_of(h, pool) : NULL;
	s->as = s->as && s->pool ? &s->pool->slots[s->slot] : NULL;
	s->link = NULL;
	s->pend = NULL;
	s->npend = s->pend_cap = 0;
	s->lp = NULL;
	s->reflect_queued = 0;
	s->q = get_array(f, s->qlen, sizeof(uint32_t), &r);
	s->qcap = s->qlen;
	if (r || (pool && !s->pool))
		return -EIO;
	return get_pair(h, f, s);
}

static int get_proc(struct hub *h, FILE *f)
{
	struct proc *pr = calloc(1, sizeof(*pr));
	uint64_t pool;
	int r = 0;
	if (!pr || get(f, pr, sizeof(*pr)) || get(f, &pool, sizeof(pool))) {
		free(pr);
		return -EIO;
	}
	pr->next = h->procs;
	h->procs = pr;
	memset(&pr->ev, 0, sizeof(pr->ev));
	pr->out = NULL;
	pr->out_len = pr->out_off = 0;
	pr->pool = pool ? pool_of(h, pool) : NULL;
	if (pr->cell > ARENA_CELLS || (pr->cell && (!pr->pool || pr->pool->cell_proc[pr->cell - 1])))
		pr->cell = 0; /* (never so in an image the hub wrote) */
	if (pr->cell)
		pr->pool->cell_proc[pr->cell - 1] = pr;
	pr->socks = get_array(f, pr->nsocks, sizeof(uint32_t), &r);
	pr->cap = pr->nsocks;
	pr->idx = get_array(f, pr->idx_cap, sizeof(*pr->idx), &r);
	return r ?: (pool && !pr->pool ? -EIO : 0);
}

/* The old hub's struct, with what it pointed to gone: made safe to free. */
static void hub_forget_pointers(struct hub *h)
{
	h->epfd = h->lfd = h->spare_fd = -1;
	memset(&h->lev, 0, sizeof(h->lev));
	memset(&h->soft, 0, sizeof(h->soft));
	memset(&h->verbs, 0, sizeof(h->verbs));
	h->pools = NULL;
	h->procs = NULL;
	h->links = NULL;
	h->uids = NULL;
	h->segs = NULL;
	h->punches = NULL;
	h->npunch = 0;
	h->addrs = NULL;
	h->naddrs = 0;
	h->addrs_ms = 0;
	h->garbage = NULL;
	h->ngarbage = h->garbage_cap = 0;
	h->reflect = NULL;
	h->nreflect = h->reflect_cap = 0;
	h->reflect_defer = 0;
	memset(h->keepers, 0, sizeof(h->keepers));
	h->nkeepers = 0;
	memset(h->passes, 0, sizeof(h->passes));
	h->npasses = 0;
	h->stop = 0;
	h->restart = 0;
	h->restart_refused = NULL;
	h->handover_fd = -1;
	h->req_pr = NULL;
	h->req_cell = NULL;
}

int hub_image_read(struct hub *h, FILE *f)
{
	uint64_t magic, layout, n;
	int lfd, r = 0;
	if (get(f, &magic, 8) || get(f, &layout, 8) || magic != IMAGE_MAGIC || layout != hub_layout())
		return -EPROTO;
	if (get(f, h, sizeof(*h)) || h->sid_hi > TAG_MAX_SOCKS)
		return -EIO;
	lfd = h->lfd;
	hub_forget_pointers(h);
	h->lfd = lfd;
	h->socks = calloc(TAG_MAX_SOCKS, sizeof(*h->socks));
	h->gens = calloc(TAG_MAX_SOCKS, sizeof(*h->gens));
	if (!h->socks || !h->gens || get(f, h->gens, h->sid_hi * sizeof(uint32_t)) || get(f, &n, 8))
		return -EIO;
	while (n-- && r == 0) {
		struct uid_use *u = get_array(f, 1, sizeof(*u), &r);
		if (u) {
			u->next = h->uids;
			h->uids = u;
		}
	}
	if (r || get(f, &n, 8))
		return -EIO;
	while (n-- && r == 0)
		r = get_pool(h, f);
	if (r || get(f, &n, 8))
		return -EIO;
	while (n-- && r == 0)
		r = get_seg(h, f);
	if (r || get(f, &n, 8) || n != h->nsocks)
		return -EIO;
	while (n-- && r == 0)
		r = get_sock(h, f);
	if (r || get(f, &n, 8))
		return -EIO;
	while (n-- && r == 0)
		r = get_proc(h, f);
	h->ports = get_array(f, h->ports_cap, sizeof(uint32_t), &r);
	h->listeners = get_array(f, h->nlisteners, sizeof(uint32_t), &r);
	h->listeners_cap = h->nlisteners;
	h->resized = get_array(f, h->nresized, sizeof(uint32_t), &r);
	h->resized_cap = h->nresized;
	h->relinks = get_array(f, h->nrelinks, sizeof(*h->relinks), &r);
	h->relinks_cap = h->nrelinks;
	if (r || get(f, &magic, 8) || magic != IMAGE_MAGIC)
		return -EIO;
	return 0;
}
