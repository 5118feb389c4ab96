/*
 * arena.c - formatting an arena and allocating ring bytes in it (arena_alloc.h).
 *
 * Ring sizes are powers of two from ARENA_MIN_RING to ARENA_MAX_RING; the
 * allocator keeps one free list per size class and carves new blocks from
 * the untouched end of the arena.  Its state lives in the hub's own memory,
 * never in the arena, so nothing a process writes can confuse it.
 *
 * Freed blocks stay warm: their pages are kept, and the next block of
 * their size is the one freed last.  A fresh page costs a fault in every
 * process that touches it and in the hub, each a trap that some virtual
 * machines make 7 to 14 us a page, and a punch flushes the TLB of every
 * CPU that runs a process mapping the file; kernel TCP reuses its buffers
 * instead.  So churn, even of thousands of connections at once, costs no
 * fault and no punch once the pool has its pages.  What stays warm is
 * bounded by what the pool itself held lately: a block released while the
 * blocks in use and the warm ones would pass the peak of the blocks in use
 * over this look and the one before (at least ARENA_WARM_BYTES) is cold,
 * its pages punched by the caller.  Once a second the hub looks
 * (arena_cool): an allocator that handed out nothing since lets every
 * warm block go, one that did keeps that many warm and punches the rest,
 * so a spike's pages go back two seconds after it and an idle pool keeps
 * nothing.  Adjacent blocks are punched in one call, and a look punches
 * at most COOL_BLOCKS blocks (the others wait for the next).
 */
#include "arena_alloc.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define NCLASS 11 /* 4 KiB .. 4 MiB */

struct free_blk {
	uint64_t off;
	int warm; /* not punched: its pages are still there */
	struct free_blk *next;
};

#define COOL_BLOCKS 4096 /* blocks punched in one look, at most */

struct arena_alloc {
	uint64_t next, end, in_use;
	uint64_t allocs; /* blocks handed out, ever */
	uint64_t warm; /* the bytes of the warm free blocks */
	uint64_t peak, peak_last; /* the most in use since the last look, and over the look before */
	uint64_t *charge, limit;
	struct free_blk *free[NCLASS];
};

static int size_class(uint64_t size)
{
	int c = 0;
	uint64_t s = ARENA_MIN_RING;
	while (s < size && c < NCLASS - 1) {
		s <<= 1;
		c++;
	}
	return s == size ? c : -1;
}

int arena_format(void *base, uint64_t bytes, uint64_t pool_id)
{
	struct arena_hdr *h = base;
	uint64_t slots_off = (sizeof(*h) + 4095) & ~4095ull;
	uint64_t data_off = slots_off + ((uint64_t)ARENA_MAX_SLOTS * sizeof(struct arena_slot) + 4095) / 4096 * 4096;
	if (data_off + ARENA_MAX_RING > bytes)
		return -1;
	memset(h, 0, sizeof(*h));
	h->magic = ARENA_MAGIC;
	h->version = ARENA_VERSION;
	h->nslots = ARENA_MAX_SLOTS;
	h->bytes = bytes;
	h->slots_off = slots_off;
	h->data_off = data_off;
	h->pool_id = pool_id;
	return 0;
}

struct arena_alloc *arena_alloc_new(uint64_t data_off, uint64_t bytes)
{
	struct arena_alloc *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->next = data_off;
	a->end = bytes;
	return a;
}

void arena_alloc_free_all(struct arena_alloc *a)
{
	if (!a)
		return;
	for (int c = 0; c < NCLASS; c++) {
		while (a->free[c]) {
			struct free_blk *b = a->free[c];
			a->free[c] = b->next;
			free(b);
		}
	}
	free(a);
}

uint64_t arena_alloc(struct arena_alloc *a, uint64_t size)
{
	int c = size_class(size);
	uint64_t off;
	if (c < 0 || (a->charge && a->limit && *a->charge + size > a->limit))
		return 0;
	if (a->free[c]) {
		struct free_blk *b = a->free[c];
		a->free[c] = b->next;
		off = b->off;
		if (b->warm)
			a->warm -= size;
		free(b);
	} else {
		/* natural alignment keeps every ring inside whole pages */
		uint64_t at = (a->next + size - 1) & ~(size - 1);
		if (at + size > a->end || at + size < at)
			return 0;
		off = at;
		a->next = at + size;
	}
	a->in_use += size;
	if (a->in_use > a->peak)
		a->peak = a->in_use;
	a->allocs++;
	if (a->charge)
		*a->charge += size;
	return off;
}

uint64_t arena_allocs(const struct arena_alloc *a)
{
	return a->allocs;
}

/* What the pool may hold in warm blocks and blocks in use together. */
static uint64_t hold(const struct arena_alloc *a)
{
	uint64_t p = a->peak > a->peak_last ? a->peak : a->peak_last;
	return p > ARENA_WARM_BYTES ? p : ARENA_WARM_BYTES;
}

struct range {
	uint64_t off, size;
};

static int range_cmp(const void *x, const void *y)
{
	const struct range *a = x, *b = y;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* Punch the n ranges out of memfd, adjacent ones in one call. */
static void punch_ranges(int memfd, struct range *r, uint32_t n)
{
	qsort(r, n, sizeof(*r), range_cmp);
	for (uint32_t i = 0; i < n;) {
		uint64_t off = r[i].off, end = r[i].off + r[i].size;
		for (i++; i < n && r[i].off == end; i++)
			end += r[i].size;
		fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)(end - off));
	}
}

uint32_t arena_cool(struct arena_alloc *a, int memfd, int busy)
{
	struct range *r;
	uint32_t n = 0;
	uint64_t keep = 0, kept = 0, size = ARENA_MIN_RING;
	if (busy) {
		a->peak_last = a->peak;
		a->peak = a->in_use;
		keep = hold(a) - a->in_use; /* hold() >= peak >= in_use */
	} else {
		a->peak_last = a->peak = a->in_use;
	}
	if (a->warm <= keep || !(r = malloc(COOL_BLOCKS * sizeof(*r))))
		return 0; /* (without memory: they wait for the next look) */
	/* each list from the block freed last: those the next blocks are */
	for (int c = 0; c < NCLASS && a->warm > keep && n < COOL_BLOCKS; c++, size <<= 1)
		for (struct free_blk *b = a->free[c]; b && n < COOL_BLOCKS; b = b->next) {
			if (!b->warm)
				continue;
			if (kept + size <= keep) {
				kept += size;
				continue;
			}
			r[n++] = (struct range){b->off, size};
			b->warm = 0;
			a->warm -= size;
		}
	punch_ranges(memfd, r, n);
	free(r);
	return n;
}

static int release(struct arena_alloc *a, uint64_t off, uint64_t size, int warm)
{
	int c = size_class(size);
	struct free_blk *b;
	if (c < 0 || !off)
		return 0;
	b = malloc(sizeof(*b));
	if (!b)
		return 0; /* leaks arena space, never memory safety */
	b->off = off;
	a->in_use -= size;
	b->warm = warm && a->in_use + a->warm + size <= hold(a);
	if (b->warm)
		a->warm += size;
	b->next = a->free[c];
	a->free[c] = b;
	if (a->charge)
		*a->charge -= size;
	return b->warm;
}

void arena_release(struct arena_alloc *a, uint64_t off, uint64_t size)
{
	release(a, off, size, 0);
}

int arena_release_warm(struct arena_alloc *a, uint64_t off, uint64_t size)
{
	return release(a, off, size, 1);
}

int arena_alloc_save(const struct arena_alloc *a, int (*put)(void *c, const void *b, size_t n), void *c)
{
	uint64_t head[3] = {a->next, a->end, a->in_use};
	int r = put(c, head, sizeof(head));
	for (int k = 0; k < NCLASS && r == 0; k++) {
		uint64_t n = 0;
		for (const struct free_blk *b = a->free[k]; b; b = b->next)
			n++;
		r = put(c, &n, sizeof(n));
		for (const struct free_blk *b = a->free[k]; b && r == 0; b = b->next)
			r = put(c, &b->off, sizeof(b->off));
	}
	return r;
}

struct arena_alloc *arena_alloc_load(int (*get)(void *c, void *b, size_t n), void *c)
{
	uint64_t head[3];
	struct arena_alloc *a;
	if (get(c, head, sizeof(head)) < 0 || head[0] > head[1] || !(a = arena_alloc_new(head[0], head[1])))
		return NULL;
	a->in_use = a->peak = head[2];
	for (int k = 0; k < NCLASS; k++) {
		uint64_t n;
		if (get(c, &n, sizeof(n)) < 0 || n > (head[1] >> 12))
			goto bad;
		while (n--) {
			struct free_blk *b = malloc(sizeof(*b));
			if (!b || get(c, &b->off, sizeof(b->off)) < 0) {
				free(b);
				goto bad;
			}
			/* not counted warm: the image does not say which were */
			b->warm = 0;
			b->next = a->free[k];
			a->free[k] = b;
		}
	}
	return a;
bad:
	arena_alloc_free_all(a);
	return NULL;
}

void arena_alloc_charge(struct arena_alloc *a, uint64_t *charge, uint64_t limit)
{
	a->charge = charge;
	a->limit = limit;
}

uint64_t arena_in_use(const struct arena_alloc *a)
{
	return a->in_use;
}
