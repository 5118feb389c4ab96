/*
 * pool.c - pools: one arena per process tree, the memory its sockets' slots
 * and rings live in.
 *
 * A pool is made by a process's HELLO and shared by its forked children;
 * its arena is a sparse memfd mapped by the hub and by every process of
 * the pool, laid out by arena_format() (arena_alloc.c).  Receive rings are
 * allocated below a POOL_CHUNK boundary, send rings above it, so that only
 * receive rings are ever registered remote-writable (verbs registers the
 * arena chunk by chunk, on first use: pool_keys).  The pool's eventfd is
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

static void pool_kick(struct hub *h, struct hub_ev *ev, uint32_t events)
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
		p->nchunks = (uint32_t)(p->bytes / POOL_CHUNK);
		p->mrs = calloc(p->nchunks, sizeof(*p->mrs));
		p->mr_ok = calloc(p->nchunks, 1);
		p->slot_free = calloc(ARENA_MAX_SLOTS, sizeof(*p->slot_free));
		if (!p->rx_alloc || !p->tx_alloc || !p->mrs || !p->mr_ok || !p->slot_free)
			goto fail;
		arena_alloc_charge(p->rx_alloc, &u->bytes, h->lim_bytes);
		arena_alloc_charge(p->tx_alloc, &u->bytes, h->lim_bytes);
	}
	p->ev.fn = pool_kick;
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
	log_error("pool: cannot create an arena: %s", strerror(err));
	if (p->base)
		munmap(p->base, p->bytes);
	if (p->memfd >= 0)
		close(p->memfd);
	if (p->evfd >= 0)
		close(p->evfd);
	arena_alloc_free_all(p->rx_alloc);
	arena_alloc_free_all(p->tx_alloc);
	free(p->mrs);
	free(p->mr_ok);
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
		for (uint32_t c = 0; c < p->nchunks; c++)
			if (p->mr_ok[c])
				h->verbs.ops->dereg_mr(&h->verbs, &p->mrs[c]);
		close(p->memfd);
		munmap(p->base, p->bytes);
		arena_alloc_free_all(p->rx_alloc);
		arena_alloc_free_all(p->tx_alloc);
		free(p->mrs);
		free(p->mr_ok);
		free(p->slot_free);
		log_info("pool %llu: gone", (unsigned long long)p->id);
		free(p);
		h->segs_dirty = 1; /* the loop sweeps the pair segments next */
	}
}

int pool_chunk_pinned(struct pool *p, uint64_t off)
{
	uint64_t c = off / POOL_CHUNK;
	return c < p->nchunks && p->mr_ok[c];
}

int pool_keys(struct hub *h, struct pool *p, uint64_t off, uint64_t len, int remote, uint32_t *lkey,
	      uint32_t *rkey)
{
	uint64_t c = off / POOL_CHUNK;
	if (!len) {
		*lkey = *rkey = 0;
		return 0;
	}
	if (c >= p->nchunks || (off + len - 1) / POOL_CHUNK != c)
		return -EINVAL;
	if (!h->verbs.up)
		return -ENODEV;
	if (!p->mr_ok[c]) {
		if (h->verbs.ops->reg_mr(&h->verbs, arena_bytes(p->base, c * POOL_CHUNK), POOL_CHUNK, remote,
					 &p->mrs[c]) < 0)
			return -EIO;
		p->mr_ok[c] = 1;
	}
	*lkey = p->mrs[c].lkey;
	*rkey = p->mrs[c].rkey;
	return 0;
}
