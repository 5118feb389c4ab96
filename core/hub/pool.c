/*
 * pool.c - pools: one arena per process tree, the memory its sockets' slots
 * and rings live in.
 *
 * A pool is made by a process's HELLO and shared by its forked children;
 * its arena is a sparse memfd mapped by the hub and by every process of
 * the pool, laid out by arena_format() (arena_alloc.c).  Receive rings are
 * allocated below a POOL_CHUNK boundary, send rings above it.  On verbs
 * each ring of a link's socket is registered on its own, while it is that
 * socket's (pool_keys, pool_ring_freed): receive rings remote-writable,
 * send rings for local access only, and nothing else of the arena, plus a
 * few freed rings kept registered for the next connections; the pool finds
 * a ring's registration by its offset in a small open-addressing table, so
 * registered memory is what the sockets' rings hold now, not what the
 * arena ever held.  The pool's eventfd is
 * the doorbell kick; the doorbells themselves are drained by the loop
 * (loop.c).  A pool without processes or sockets is swept between event
 * batches, never under a doorbell scan.
 */
#include "hub.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

static uint64_t arena_bytes_cfg(void)
{
	const char *s = getenv("RSHARE_ARENA_MB");
	long mb = s ? atol(s) : 0;
	if (mb < 128 || mb > 65536)
		return ARENA_DEFAULT_BYTES;
	return (uint64_t)mb << 20;
}

void hub_pool_kick(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct pool *p = (struct pool *)((char *)ev - offsetof(struct pool, ev));
	uint64_t v;
	(void)h;
	(void)events;
	while (read(p->evfd, &v, sizeof(v)) == sizeof(v))
		;
	/* the doorbells themselves are drained by the main loop */
}

static void *shm_map(const char *name, uint64_t bytes, int *fd)
{
	void *base;
	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0)
		return NULL;
	if (ftruncate(*fd, (off_t)bytes) == 0 &&
	    (base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0)) != MAP_FAILED)
		return base;
	close(*fd);
	*fd = -1;
	return NULL;
}

void *hub_shm_new(const char *name, uint64_t *bytes, int *fd)
{
	void *base = shm_map(name, *bytes, fd);
	/* an address space that cannot map it all (a tool's, a limit's):
	 * the largest that maps, down to 1 GiB */
	while (!base && *bytes > (1ull << 30) && (errno == ENOMEM || errno == EINVAL)) {
		*bytes >>= 1;
		base = shm_map(name, *bytes, fd);
	}
	return base;
}

/* The account of uid, made on its first pool. */
static struct uid_use *uid_use(struct hub *h, uid_t uid)
{
	struct uid_use *u;
	for (u = h->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (u) {
		u->uid = uid;
		u->next = h->uids;
		h->uids = u;
	}
	return u;
}

/* A uid reached a limit: said once per second at most, counted always. */
int uid_limit(struct hub *h, struct uid_use *u, const char *what)
{
	h->limit_refused++;
	if (hub_log_due(&h->limit_ms)) {
		log_warn("uid %u: at its limit of %s (rshare.conf uid_%s): refused", (unsigned)u->uid, what, what);
	}
	return -ENOBUFS;
}

struct pool *pool_new(struct hub *h, uid_t uid)
{
	struct uid_use *u = uid_use(h, uid);
	struct pool *p;
	int err;
	if (!u)
		return NULL;
	if (u->pools >= h->lim_pools) {
		uid_limit(h, u, "pools");
		errno = EUSERS;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->use = u;
	p->id = ++h->next_pool_id;
	p->bytes = arena_bytes_cfg();
	p->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	p->base = hub_shm_new("rshare-arena", &p->bytes, &p->memfd);
	if (p->evfd < 0 || !p->base)
		goto fail;
	if (arena_format(p->base, p->bytes, p->id) < 0)
		goto fail;
	p->slots = (struct arena_slot *)((uint8_t *)p->base + ((struct arena_hdr *)p->base)->slots_off);
	{
		/* receive rings below, send rings above a chunk boundary, so that
		 * only receive rings are ever registered remote-writable */
		uint64_t data = ((struct arena_hdr *)p->base)->data_off;
		uint64_t mid = (data + (p->bytes - data) / 2) & ~(uint64_t)(POOL_CHUNK - 1);
		if (mid <= data)
			goto fail;
		p->rx_alloc = arena_alloc_new(data, mid);
		p->tx_alloc = arena_alloc_new(mid, p->bytes);
		p->slot_free = calloc(ARENA_MAX_SLOTS, sizeof(*p->slot_free));
		if (!p->rx_alloc || !p->tx_alloc || !p->slot_free)
			goto fail;
		arena_alloc_charge(p->rx_alloc, &u->bytes, h->lim_bytes);
		arena_alloc_charge(p->tx_alloc, &u->bytes, h->lim_bytes);
	}
	p->ev.fn = hub_pool_kick;
	if (hub_watch(h, p->evfd, EPOLLIN, &p->ev) < 0)
		goto fail;
	p->next = h->pools;
	h->pools = p;
	u->pools++;
	log_info("pool %llu: arena of %llu MiB", (unsigned long long)p->id,
		 (unsigned long long)(p->bytes >> 20));
	return p;
fail:
	err = errno; /* the caller tells a hub out of descriptors by it */
	log_error("pool: cannot create an arena of %llu MiB: %s%s", (unsigned long long)(p->bytes >> 20),
		  strerror(err), err == EFBIG ? " (the hub's file size limit, RLIMIT_FSIZE, is under it)" : "");
	if (p->base)
		munmap(p->base, p->bytes);
	if (p->memfd >= 0)
		close(p->memfd);
	if (p->evfd >= 0)
		close(p->evfd);
	arena_alloc_free_all(p->rx_alloc);
	arena_alloc_free_all(p->tx_alloc);
	free(p->slot_free);
	free(p);
	errno = err;
	return NULL;
}

/* Pools without processes or sockets are swept between event batches, so
 * that nothing frees an arena while a doorbell scan walks it. */
void pool_maybe_free(struct hub *h, struct pool *p)
{
	(void)h;
	(void)p;
}

void pools_sweep(struct hub *h)
{
	struct pool **pp = &h->pools;
	while (*pp) {
		struct pool *p = *pp;
		if (p->nprocs || p->nsocks) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		p->use->pools--;
		hub_unwatch(h, p->evfd);
		close(p->evfd);
		for (uint32_t i = 0; i < p->mr_cap; i++)
			if (p->mrs[i].off) {
				h->verbs.ops->dereg_mr(&h->verbs, &p->mrs[i].mr);
				h->reg_bytes -= p->mrs[i].len;
			}
		close(p->memfd);
		munmap(p->base, p->bytes);
		arena_alloc_free_all(p->rx_alloc);
		arena_alloc_free_all(p->tx_alloc);
		free(p->mrs);
		free(p->slot_free);
		log_info("pool %llu: gone", (unsigned long long)p->id);
		free(p);
		h->segs_dirty = 1; /* the loop sweeps the pair segments next */
	}
}

/* A look at an allocator: busy when it handed out a ring since the last
 * (*seen); a quiet one lets all its warm free rings go, a busy one those
 * beyond its recent peak (arena_alloc.c). */
static void cool(struct hub *h, struct arena_alloc *a, int memfd, uint64_t *seen)
{
	uint64_t n = arena_allocs(a);
	h->rings_punched += arena_cool(a, memfd, n != *seen);
	*seen = n;
}

/* Once a second: the warm free rings (arena_alloc.c) of a pool's
 * receive and send rings and of a pair segment: churn keeps those it
 * reuses, a spike's go back after it, an idle pool keeps none. */
void pools_cool(struct hub *h)
{
	uint64_t now = hub_now_ms();
	if (now - h->cool_ms < 1000)
		return;
	h->cool_ms = now;
	for (struct pool *p = h->pools; p; p = p->next) {
		cool(h, p->rx_alloc, p->memfd, &p->allocs_seen[0]);
		cool(h, p->tx_alloc, p->memfd, &p->allocs_seen[1]);
	}
	for (struct pairseg *g = h->segs; g; g = g->next)
		cool(h, g->alloc, g->memfd, &g->allocs_seen);
}

/* ---- the registered rings of a pool ----
 * Open addressing on the ring's offset (never 0: the header comes first),
 * linear probing, at most half full; a removal shifts the entries after
 * it back, so that no search stops short. */

static uint32_t mr_home(const struct pool *p, uint64_t off)
{
	return (uint32_t)(((off >> 12) * 0x9e3779b97f4a7c15ull) >> 32) & (p->mr_cap - 1);
}

static struct pool_mr *mr_find(const struct pool *p, uint64_t off)
{
	if (!p->mr_cap)
		return NULL;
	for (uint32_t i = mr_home(p, off);; i = (i + 1) & (p->mr_cap - 1)) {
		if (p->mrs[i].off == off)
			return &p->mrs[i];
		if (!p->mrs[i].off)
			return NULL;
	}
}

/* The empty entry where OFF goes (the table has room). */
static struct pool_mr *mr_empty(struct pool *p, uint64_t off)
{
	uint32_t i = mr_home(p, off);
	while (p->mrs[i].off)
		i = (i + 1) & (p->mr_cap - 1);
	return &p->mrs[i];
}

/* A new entry for OFF, the table grown first when half full; NULL: no memory. */
static struct pool_mr *mr_put(struct pool *p, uint64_t off)
{
	struct pool_mr *e;
	if ((p->nmr + 1) * 2 > p->mr_cap) {
		struct pool_mr *old = p->mrs;
		uint32_t ocap = p->mr_cap, cap = ocap ? ocap * 2 : 64;
		struct pool_mr *t = calloc(cap, sizeof(*t));
		if (!t)
			return NULL;
		p->mrs = t;
		p->mr_cap = cap;
		for (uint32_t j = 0; j < ocap; j++)
			if (old[j].off)
				*mr_empty(p, old[j].off) = old[j];
		free(old);
	}
	e = mr_empty(p, off);
	e->off = off;
	p->nmr++;
	return e;
}

static void mr_remove(struct pool *p, struct pool_mr *e)
{
	uint32_t i = (uint32_t)(e - p->mrs), j = i, m = p->mr_cap - 1;
	p->nmr--;
	for (;;) {
		p->mrs[i].off = 0;
		for (;;) {
			uint32_t k;
			j = (j + 1) & m;
			if (!p->mrs[j].off)
				return;
			k = mr_home(p, p->mrs[j].off);
			/* j's entry may move to i unless its home lies in (i, j] */
			if (i <= j ? (k <= i || k > j) : (k <= i && k > j))
				break;
		}
		p->mrs[i] = p->mrs[j];
		i = j;
	}
}

int pool_ring_pinned(struct pool *p, uint64_t off)
{
	return mr_find(p, off) != NULL;
}

static void mr_drop(struct hub *h, struct pool *p, struct pool_mr *e)
{
	if (e->idle)
		p->mr_idle_bytes -= e->len;
	h->verbs.ops->dereg_mr(&h->verbs, &e->mr);
	h->reg_bytes -= e->len;
	mr_remove(p, e);
}

/* A ring of p at OFF is free again.  Its registration stays, idle, while
 * the pool's idle registrations take at most POOL_MR_IDLE bytes: the
 * allocator hands the same block out again for the next ring of that size
 * (a free list per size, blocks never split or merged), whose connection
 * then skips the registration, a system call that pins pages (the most
 * of a connection's set-up on verbs).  1 when it stayed (its pages too). */
int pool_ring_freed(struct hub *h, struct pool *p, uint64_t off)
{
	struct pool_mr *e = mr_find(p, off);
	if (!e)
		return 0;
	if (!e->idle && p->mr_idle_bytes + e->len <= POOL_MR_IDLE) {
		e->idle = 1;
		p->mr_idle_bytes += e->len;
		return 1;
	}
	mr_drop(h, p, e);
	return 0;
}

int pool_keys(struct hub *h, struct pool *p, uint64_t off, uint64_t len, int remote, uint32_t *lkey,
	      uint32_t *rkey)
{
	struct pool_mr *e;
	if (!len) {
		*lkey = *rkey = 0;
		return 0;
	}
	if (!off || off + len > p->bytes)
		return -EINVAL;
	if (!h->verbs.up)
		return -ENODEV;
	if ((e = mr_find(p, off)) && e->len != len) {
		mr_drop(h, p, e); /* cannot be (blocks keep their size): anew */
		e = NULL;
	}
	if (e && e->idle) {
		e->idle = 0;
		p->mr_idle_bytes -= e->len;
	}
	if (!e) {
		struct xmr mr;
		if (h->verbs.ops->reg_mr(&h->verbs, arena_bytes(p->base, off), len, remote, &mr) < 0)
			return -EIO;
		if (!(e = mr_put(p, off))) {
			h->verbs.ops->dereg_mr(&h->verbs, &mr);
			return -ENOMEM;
		}
		e->mr = mr;
		e->len = len;
		h->reg_bytes += len;
	}
	*lkey = e->mr.lkey;
	*rkey = e->mr.rkey;
	return 0;
}
