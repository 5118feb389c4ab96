/*
 * pair.c - same-node connections: pair segments and their rings.
 *
 * A connect() to an address of this node, where one of this hub's
 * listeners answers, needs no link: conn.c makes both sockets at once
 * and calls hpair_join(), which gives the pair two directions in the pair
 * segment of its two pools (see pair.h for the layout and the protocol).
 * From then on the two processes move the bytes themselves; the hub only
 * wakes sleepers (data.c turns SLOTOP_TX and SLOTOP_CREDIT of such a
 * socket into a wake-up of the other one), carries FIN and RESET, and
 * reads the counters for readiness and `rshare stat`.
 *
 * One segment serves every connection between the same two pools: the
 * processes of those two pools map it (MSG_PAIRFD) once, and no other
 * process can.  The directions and ring bytes of a connection are given
 * back when both of its sockets are gone, never earlier, so a process still
 * copying into a ring whose reader vanished cannot reach another
 * connection's bytes.  A segment goes when it carries no connection and
 * one of its pools is gone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hub.h"
#include "log.h"
#include "pair.h"


_Static_assert(sizeof(((struct pairseg *)0)->used) * 8 == PAIR_MAX_DIRS, "one bit per direction");

/* ---- is an address this node's? ---- */

static void addrs_load(struct hub *h)
{
	struct ifaddrs *ifa, *i;
	uint32_t n = 0;
	union sockaddr_any *v;
	h->addrs_ms = hub_now_ms();
	if (getifaddrs(&ifa) < 0)
		return;
	for (i = ifa; i; i = i->ifa_next)
		n += i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6);
	v = calloc(n ? n : 1, sizeof(*v));
	if (v) {
		n = 0;
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr)
				continue;
			if (i->ifa_addr->sa_family == AF_INET)
				memcpy(&v[n++], i->ifa_addr, sizeof(struct sockaddr_in));
			else if (i->ifa_addr->sa_family == AF_INET6)
				memcpy(&v[n++], i->ifa_addr, sizeof(struct sockaddr_in6));
		}
		free(h->addrs);
		h->addrs = v;
		h->naddrs = n;
	}
	freeifaddrs(ifa);
}

int hpair_is_local(struct hub *h, const union sockaddr_any *dst)
{
	static const uint8_t lo6[16] = {[15] = 1};
	/* a hub bound to one address (several hubs in one namespace, a node
	 * each) is that address's node only */
	if (h->bind_addr.sa.sa_family == AF_INET && h->bind_addr.in.sin_addr.s_addr)
		return addr_same_ip(&h->bind_addr, dst);
	if (h->bind_addr.sa.sa_family == AF_INET6 && memcmp(&h->bind_addr.in6.sin6_addr, &in6addr_any, 16))
		return addr_same_ip(&h->bind_addr, dst);
	if (dst->sa.sa_family == AF_INET && (ntohl(dst->in.sin_addr.s_addr) >> 24) == 127)
		return 1;
	if (dst->sa.sa_family == AF_INET6 && !memcmp(&dst->in6.sin6_addr, lo6, 16))
		return 1;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < h->naddrs; i++)
			if (addr_same_ip(&h->addrs[i], dst))
				return 1;
		/* addresses come and go: look again, at most every 100 ms on a miss */
		if (pass || hub_now_ms() - h->addrs_ms < 100)
			break;
		addrs_load(h);
	}
	return 0;
}

/* ---- segments ---- */

static struct pairseg *seg_new(struct hub *h, uint64_t a, uint64_t b)
{
	struct pairseg *g = calloc(1, sizeof(*g));
	struct pair_hdr *ph;
	if (!g)
		return NULL;
	g->id = ++h->next_seg_id ? h->next_seg_id : ++h->next_seg_id;
	g->pool_a = a;
	g->pool_b = b;
	g->bytes = PAIR_DEFAULT_BYTES;
	g->base = hub_shm_new("rshare-pair", &g->bytes, &g->memfd);
	if (!g->base)
		goto fail;
	g->alloc = arena_alloc_new(pair_data_off(), g->bytes);
	if (!g->alloc)
		goto fail;
	ph = g->base;
	ph->magic = PAIR_MAGIC;
	ph->version = PAIR_VERSION;
	ph->ndirs = PAIR_MAX_DIRS;
	ph->bytes = g->bytes;
	ph->data_off = pair_data_off();
	ph->id = g->id;
	g->next = h->segs;
	h->segs = g;
	log_info("pair segment %u for pools %llu and %llu", g->id, (unsigned long long)a,
		 (unsigned long long)b);
	return g;
fail:
	log_error("pair segment: %s", strerror(errno));
	if (g->base)
		munmap(g->base, g->bytes);
	if (g->memfd >= 0)
		close(g->memfd);
	free(g);
	return NULL;
}

static void seg_free(struct pairseg *g)
{
	log_info("pair segment %u: gone", g->id);
	munmap(g->base, g->bytes);
	close(g->memfd);
	arena_alloc_free_all(g->alloc);
	free(g);
}

static struct pairseg *seg_for(struct hub *h, uint64_t a, uint64_t b)
{
	if (a > b) {
		uint64_t t = a;
		a = b;
		b = t;
	}
	for (struct pairseg *g = h->segs; g; g = g->next)
		if (g->pool_a == a && g->pool_b == b)
			return g;
	return seg_new(h, a, b);
}

/* A free direction: looked for from the word the last one came from, so
 * that taking one costs the same however many are taken. */
static int dir_alloc(struct pairseg *g)
{
	for (uint32_t n = 0; n < PAIR_MAX_DIRS / 64; n++) {
		uint32_t w = (g->used_hint + n) % (PAIR_MAX_DIRS / 64);
		if (~g->used[w]) {
			int b = __builtin_ctzll(~g->used[w]);
			g->used[w] |= 1ull << b;
			g->used_hint = w;
			return (int)(w * 64 + (uint32_t)b);
		}
	}
	return -ENOSPC;
}

static void dir_free(struct pairseg *g, uint32_t d)
{
	struct pair_dir *pd = &((struct pair_hdr *)g->base)->dir[d];
	memset(pd, 0, sizeof(*pd));
	g->used[d / 64] &= ~(1ull << (d % 64));
}

static void bytes_free(struct pairseg *g, uint64_t off, uint64_t size)
{
	if (!off)
		return;
	if (!arena_release_warm(g->alloc, off, size))
		fallocate(g->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)size);
}

static void rings_free(struct pairseg *g, struct lpair *lp)
{
	for (int i = 0; i < 2; i++) {
		bytes_free(g, lp->off[i], lp->size[i]);
		for (int k = 0; k < lp->nold[i]; k++)
			bytes_free(g, lp->old_off[i][k], lp->old_size[i][k]);
		lp->nold[i] = 0;
		if (lp->dir[i] != UINT32_MAX)
			dir_free(g, lp->dir[i]);
	}
}

/* ---- connections ---- */

static void slot_side(struct hsock *s, struct lpair *lp, int side)
{
	struct arena_slot *as = s->as;
	int tx = side, rx = !side;
	s->lp = lp;
	s->lside = side;
	s->tx_size = lp->size[tx];
	s->rx_size = lp->size[rx];
	as->tx.off = lp->off[tx];
	as->tx.size = lp->size[tx];
	as->rx.off = lp->off[rx];
	as->rx.size = lp->size[rx];
	as->pair_tx = lp->dir[tx];
	as->pair_rx = lp->dir[rx];
	as->pair_seg = lp->seg->id;
}

int hpair_join(struct hub *h, struct hsock *c, struct hsock *a)
{
	struct pairseg *g = seg_for(h, c->pool->id, a->pool->id);
	struct lpair *lp;
	/* the connecting side's receive ring and the listener's, as for a link */
	uint64_t want[2] = {a->rx_size ? a->rx_size : ARENA_DEFAULT_RING, c->rx_size ? c->rx_size : ARENA_DEFAULT_RING};
	if (!g || !(lp = calloc(1, sizeof(*lp))))
		return -ENOMEM;
	lp->seg = g;
	lp->dir[0] = lp->dir[1] = UINT32_MAX;
	for (int i = 0; i < 2; i++) {
		int d = dir_alloc(g);
		lp->size[i] = arena_ring_size(want[i]);
		lp->off[i] = arena_alloc(g->alloc, lp->size[i]);
		if (d < 0 || !lp->off[i]) {
			if (d >= 0)
				lp->dir[i] = (uint32_t)d;
			rings_free(g, lp);
			free(lp);
			return -ENOBUFS;
		}
		lp->dir[i] = (uint32_t)d;
		((struct pair_hdr *)g->base)->dir[d].r.off = lp->off[i];
		((struct pair_hdr *)g->base)->dir[d].r.size = lp->size[i];
	}
	lp->refs = 2;
	lp->sid[0] = c->sid;
	lp->sid[1] = a->sid;
	g->npairs++;
	log_debug("pair: sockets %u and %u: directions %u and %u at %llu and %llu in segment %u", c->sid, a->sid,
		  lp->dir[0], lp->dir[1], (unsigned long long)lp->off[0], (unsigned long long)lp->off[1], g->id);
	slot_side(c, lp, 0);
	slot_side(a, lp, 1);
	return 0;
}

struct pair_dir *hpair_dir(struct hsock *s, int tx)
{
	struct lpair *lp = s->lp;
	uint32_t d = lp->dir[tx ? s->lside : !s->lside];
	return &((struct pair_hdr *)lp->seg->base)->dir[d];
}

struct ring *hpair_ring(struct hsock *s, int tx)
{
	return &hpair_dir(s, tx)->r;
}

/* ---- rings that grow ----
 * A writer asks for a larger ring (MSG_TXGROW, up to tcp_wmem's maximum,
 * and none while the node's same-node rings hold more than tcp_mem's
 * pressure value):
 * twice the size when it finds its ring full and its reader stalled, as
 * for a link, or one that takes its write whole (resize_tx.c).  The hub copies
 * the unread bytes into a new ring at the same stream positions, gives
 * both slots the new geometry, and answers; the writer, which holds the
 * ring's lock and waits, writes into the new ring only.  The reader may
 * still be copying out of the old one: it checks its geometry after it
 * loaded the tail (a tail past the old bytes comes with the new geometry),
 * and the old rings stay until the pair goes, or until the direction idles
 * and goes back to its first size (hpair_move, with neither side in it):
 * at most as much again as the ring the direction has now. */

static void set_geometry(struct hub *h, struct lpair *lp, int d)
{
	struct hsock *w = h->socks[lp->sid[d]], *r = h->socks[lp->sid[!d]];
	struct pair_dir *pd = &((struct pair_hdr *)lp->seg->base)->dir[lp->dir[d]];
	/* the reader's first: the writer learns of the new ring last */
	/* the place first, then (release) the size, which a reader loads
	 * first (acquire): a new size comes with its place */
	if (r && r->lp == lp && r->as) {
		r->rx_size = lp->size[d];
		r->as->rx.off = lp->off[d];
		__atomic_store_n(&r->as->rx.size, lp->size[d], __ATOMIC_RELEASE);
	}
	pd->r.off = lp->off[d];
	__atomic_store_n(&pd->r.size, lp->size[d], __ATOMIC_RELEASE);
	if (w && w->lp == lp && w->as) {
		w->tx_size = lp->size[d];
		w->as->tx.off = lp->off[d];
		__atomic_store_n(&w->as->tx.size, lp->size[d], __ATOMIC_RELEASE);
	}
}

/* The direction s writes on into a new ring of SIZE, its unread bytes at
 * the same positions.  The old ring joins the ones it grew out of (KEEP:
 * a reader may be copying out of it), or goes with them (the caller holds
 * both sides out of it).  The new size, or -errno. */
static int dir_move(struct hub *h, struct hsock *s, uint64_t size, int keep)
{
	struct lpair *lp = s->lp;
	int d = s->lside;
	struct pair_dir *pd = &((struct pair_hdr *)lp->seg->base)->dir[lp->dir[d]];
	uint8_t *base = lp->seg->base;
	uint64_t off, head = ring_load(&pd->r.head), tail = ring_load(&pd->r.tail);
	if (!ring_sane(head, tail, lp->size[d]) || tail - head > size)
		return -EINVAL;
	if (!(off = arena_alloc(lp->seg->alloc, size)))
		return -ENOBUFS;
	ring_move(base + lp->off[d], lp->size[d], base + off, size, head, tail);
	if (keep) {
		lp->old_off[d][lp->nold[d]] = lp->off[d];
		lp->old_size[d][lp->nold[d]++] = lp->size[d];
	} else {
		bytes_free(lp->seg, lp->off[d], lp->size[d]);
		for (int k = 0; k < lp->nold[d]; k++)
			bytes_free(lp->seg, lp->old_off[d][k], lp->old_size[d][k]);
		lp->nold[d] = 0;
	}
	lp->off[d] = off;
	lp->size[d] = size;
	set_geometry(h, lp, d);
	log_debug("pair: socket %u: its ring (direction %u) now %llu bytes at %llu, %llu unread moved", s->sid,
		  lp->dir[d], (unsigned long long)size, (unsigned long long)off,
		  (unsigned long long)(tail - ring_load(&pd->r.head)));
	return (int)size;
}

/* tcp_mem's second value (the kernel's TCP memory pressure) in bytes: the
 * same-node rings of the node together grow no further past it (pair.c),
 * as the kernel's buffers stop growing.  A network namespace other than
 * the first has no tcp_mem (it is the machine's): then what the kernel
 * sets it to at boot, a sixteenth of the memory. */
uint64_t hpair_pressure(void)
{
	unsigned long lo = 0, press = 0, hi = 0;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	long pages = sysconf(_SC_PHYS_PAGES);
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_mem", "r");
	int n = 0;
	if (f) {
		n = fscanf(f, "%lu %lu %lu", &lo, &press, &hi);
		fclose(f);
	}
	if (n == 3)
		return (uint64_t)press * page;
	return pages > 0 ? (uint64_t)pages / 16 * page : 0;
}

/* the bytes of the node's same-node rings, all segments together */
static uint64_t pair_bytes(const struct hub *h)
{
	uint64_t n = 0;
	for (const struct pairseg *g = h->segs; g; g = g->next)
		n += arena_in_use(g->alloc);
	return n;
}

int hpair_grow(struct hub *h, struct hsock *s, uint64_t size)
{
	struct lpair *lp = s->lp;
	if (size <= lp->size[s->lside])
		size = lp->size[s->lside] * 2;
	if (size > h->tx_max || lp->nold[s->lside] == 12)
		return -ENOSPC;
	/* as the kernel's buffers stop growing under TCP memory pressure */
	if (h->pair_pressure && pair_bytes(h) + size > h->pair_pressure)
		return -EBUSY; /* for now: the writer may ask again later */
	return dir_move(h, s, size, 1);
}

/* Move the direction s writes on to a ring of SIZE, with what is unread,
 * and let the rings it grew out of go: only while neither its writer nor
 * its reader is in it (the caller holds both, resize.c).  The new size,
 * or -errno. */
int hpair_move(struct hub *h, struct hsock *s, uint64_t size)
{
	return dir_move(h, s, size, 0);
}

void hpair_put(struct hub *h, struct hsock *s)
{
	struct lpair *lp = s->lp;
	if (!lp)
		return;
	/* whatever the other side writes from now on must reach the hub, so
	 * that it learns there is no reader (a write to a closed socket resets) */
	atomic_store(&hpair_dir(s, 0)->rx_want, 1);
	s->lp = NULL;
	if (--lp->refs)
		return;
	rings_free(lp->seg, lp);
	lp->seg->npairs--;
	h->segs_dirty = 1;
	free(lp);
}

int hpair_fd(struct hub *h, struct hsock *s, uint64_t *id, uint64_t *bytes)
{
	(void)h;
	if (!s->lp)
		return -EINVAL;
	*id = s->lp->seg->id;
	*bytes = s->lp->seg->bytes;
	return s->lp->seg->memfd;
}

void hpair_sweep(struct hub *h)
{
	struct pairseg **gp = &h->segs;
	while (*gp) {
		struct pairseg *g = *gp;
		int a = 0, b = 0;
		for (struct pool *p = h->pools; p; p = p->next) {
			a |= p->id == g->pool_a;
			b |= p->id == g->pool_b;
		}
		if (g->npairs || (a && b)) {
			gp = &g->next;
			continue;
		}
		*gp = g->next;
		seg_free(g);
	}
}
