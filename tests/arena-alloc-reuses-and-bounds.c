/*
 * arena_format lays out header, slots and data inside the region (and
 * refuses a region too small); the ring allocator hands out naturally
 * aligned, non-overlapping blocks inside [data_off, bytes), returns 0 when
 * full or for sizes that are not ring sizes, reuses released blocks, and
 * keeps arena_in_use exact; released blocks written to stay warm (not to
 * be punched) while the warm blocks and those in use stay within the most
 * the allocator had in use over its last two looks (at least
 * ARENA_WARM_BYTES), and come back the last freed first; arena_cool
 * punches out of the memory file (pages gone, bytes zero again) every
 * warm block of a quiet allocator, and those beyond that bound of a busy
 * one, so that a spike's blocks go at its second look; arena_allocs counts
 * the blocks handed out; arena_ring_size rounds up to a power of two and
 * clamps to [ARENA_MIN_RING, ARENA_MAX_RING].
 */
#include "helpers.h"
#include "arena_alloc.h"

#include <sys/mman.h>
#include <unistd.h>

#include <sys/mman.h>

struct blk {
	uint64_t off, size;
};

static void no_overlap(const struct blk *b, int n, uint64_t lo, uint64_t hi)
{
	for (int i = 0; i < n; i++) {
		CHECK(b[i].off >= lo);
		CHECK(b[i].off + b[i].size <= hi);
		CHECK_EQ(b[i].off & (b[i].size - 1), 0);
		for (int j = 0; j < i; j++)
			CHECK(b[i].off + b[i].size <= b[j].off || b[j].off + b[j].size <= b[i].off);
	}
}

static void format_cases(void)
{
	uint64_t bytes = 128ull << 20;
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	memset(m, 0xa5, 4096);
	CHECK_EQ(arena_format(m, bytes, 77), 0);
	struct arena_hdr *h = m;
	CHECK_EQ(h->magic, ARENA_MAGIC);
	CHECK_EQ(h->version, ARENA_VERSION);
	CHECK_EQ(h->nslots, ARENA_MAX_SLOTS);
	CHECK_EQ(h->bytes, bytes);
	CHECK_EQ(h->pool_id, 77);
	CHECK_EQ(h->hub_sleeping, 0);
	for (unsigned i = 0; i < ARENA_DOORBELL_WORDS; i++)
		CHECK_EQ(h->doorbell[i], 0);
	CHECK(h->slots_off >= sizeof(*h));
	CHECK_EQ(h->slots_off % 4096, 0);
	CHECK(h->data_off >= h->slots_off + (uint64_t)ARENA_MAX_SLOTS * sizeof(struct arena_slot));
	CHECK_EQ(h->data_off % 4096, 0);
	CHECK(h->data_off + ARENA_MAX_RING <= bytes);
	/* slot i lies inside the slot array */
	CHECK((uint8_t *)arena_slot(m, 0) == (uint8_t *)m + h->slots_off);
	CHECK((uint8_t *)(arena_slot(m, ARENA_MAX_SLOTS - 1) + 1) <= (uint8_t *)m + h->data_off);
	uint64_t data_off = h->data_off;
	munmap(m, bytes);

	/* too small for the slots plus one largest ring: refused */
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	CHECK(arena_format(m, data_off + ARENA_MAX_RING - 1, 1) != 0);
	CHECK(arena_format(m, 4096, 1) != 0);
	CHECK_EQ(arena_format(m, data_off + ARENA_MAX_RING, 1), 0);
	munmap(m, bytes);
}

static void ring_size_cases(void)
{
	CHECK_EQ(arena_ring_size(0), ARENA_DEFAULT_RING);
	CHECK_EQ(arena_ring_size(1), ARENA_MIN_RING);
	CHECK_EQ(arena_ring_size(ARENA_MIN_RING - 1), ARENA_MIN_RING);
	CHECK_EQ(arena_ring_size(ARENA_MIN_RING), ARENA_MIN_RING);
	CHECK_EQ(arena_ring_size(ARENA_MIN_RING + 1), 2 * ARENA_MIN_RING);
	CHECK_EQ(arena_ring_size(100000), 131072);
	CHECK_EQ(arena_ring_size(131072), 131072);
	CHECK_EQ(arena_ring_size(ARENA_MAX_RING), ARENA_MAX_RING);
	CHECK_EQ(arena_ring_size(ARENA_MAX_RING + 1), ARENA_MAX_RING);
	CHECK_EQ(arena_ring_size(1ull << 40), ARENA_MAX_RING);
	CHECK_EQ(arena_ring_size(UINT64_MAX), ARENA_MAX_RING);
	for (uint64_t a = 1; a < (16u << 20); a = a * 3 + 1) {
		uint32_t s = arena_ring_size(a);
		CHECK((s & (s - 1)) == 0);
		CHECK(s >= ARENA_MIN_RING && s <= ARENA_MAX_RING);
		CHECK(s >= a || s == ARENA_MAX_RING);
		CHECK(s == ARENA_MIN_RING || s / 2 < a);
	}
}

/* release everything, then every block is reusable again */
static void reuse_all(struct arena_alloc *a, struct blk *b, int n, uint64_t data_off, uint64_t end)
{
	for (int i = 0; i < n; i++)
		arena_release(a, b[i].off, b[i].size);
	CHECK_EQ(arena_in_use(a), 0);
	uint64_t sum2 = 0;
	for (int i = 0; i < n; i++) {
		uint64_t off = arena_alloc(a, b[i].size);
		CHECK(off != 0);
		b[i].off = off;
		sum2 += b[i].size;
	}
	CHECK_EQ(arena_in_use(a), sum2);
	no_overlap(b, n, data_off, end);

	/* releases of nothing change nothing */
	arena_release(a, 0, ARENA_MIN_RING);
	arena_release(a, b[0].off, 3 * ARENA_MIN_RING);
	CHECK_EQ(arena_in_use(a), sum2);
}

/* only 4 MiB blocks: exactly as many as fit after alignment */
static void max_ring_only(uint64_t data_off, uint64_t end)
{
	struct arena_alloc *a = arena_alloc_new(data_off, end);
	CHECK(a);
	uint64_t first = (data_off + ARENA_MAX_RING - 1) & ~((uint64_t)ARENA_MAX_RING - 1);
	uint64_t want = (end - first) / ARENA_MAX_RING, got = 0;
	while (arena_alloc(a, ARENA_MAX_RING))
		got++;
	CHECK_EQ(got, want);
	CHECK_EQ(arena_in_use(a), want * ARENA_MAX_RING);
	arena_alloc_free_all(a);
	arena_alloc_free_all(NULL);
}

static void alloc_cases(void)
{
	/* bookkeeping only: the allocator never touches the arena */
	const uint64_t data_off = (1ull << 20) + 12288, end = 64ull << 20;
	struct arena_alloc *a = arena_alloc_new(data_off, end);
	CHECK(a);
	CHECK_EQ(arena_in_use(a), 0);

	/* sizes that are not ring sizes */
	CHECK_EQ(arena_alloc(a, 0), 0);
	CHECK_EQ(arena_alloc(a, 1), 0);
	CHECK_EQ(arena_alloc(a, ARENA_MIN_RING / 2), 0);
	CHECK_EQ(arena_alloc(a, ARENA_MIN_RING + 1), 0);
	CHECK_EQ(arena_alloc(a, 3 * ARENA_MIN_RING), 0);
	CHECK_EQ(arena_alloc(a, 2ull * ARENA_MAX_RING), 0);
	CHECK_EQ(arena_in_use(a), 0);

	/* allocate mixed sizes until full */
	static struct blk b[100000];
	int n = 0;
	uint64_t sum = 0, rng = 9;
	for (;;) {
		uint64_t size = (uint64_t)ARENA_MIN_RING << (t_splitmix(&rng) % 11);
		uint64_t off = arena_alloc(a, size);
		if (!off) {
			/* full for this size; the smallest must end it too, eventually */
			if (size == ARENA_MIN_RING)
				break;
			continue;
		}
		CHECK(n < (int)(sizeof(b) / sizeof(b[0])));
		b[n].off = off;
		b[n].size = size;
		n++;
		sum += size;
		CHECK_EQ(arena_in_use(a), sum);
	}
	CHECK(n > 10);
	no_overlap(b, n, data_off, end);
	CHECK_EQ(arena_alloc(a, ARENA_MAX_RING), 0);
	CHECK_EQ(arena_alloc(a, ARENA_MIN_RING), 0);
	CHECK_EQ(arena_in_use(a), sum);
	/* full: in use can not exceed the data area */
	CHECK(sum <= end - data_off);

	/* release one block: the same size comes back at the same place */
	int k = n / 2;
	arena_release(a, b[k].off, b[k].size);
	CHECK_EQ(arena_in_use(a), sum - b[k].size);
	uint64_t again = arena_alloc(a, b[k].size);
	CHECK_EQ(again, b[k].off);
	CHECK_EQ(arena_in_use(a), sum);

	reuse_all(a, b, n, data_off, end);
	arena_alloc_free_all(a);
	max_ring_only(data_off, end);
}

/* warm releases: every block of a churn within its own peak stays warm
 * and comes back the last freed first; one that would take the warm and
 * used blocks past that peak is cold; a plain release is never warm */
static void warm_cases(void)
{
	const uint64_t size = 131072, n = 2 * ARENA_WARM_BYTES / size;
	struct arena_alloc *a = arena_alloc_new(1ull << 20, 64ull << 20);
	uint64_t off[64], small;
	CHECK(a && n <= 64);
	for (uint64_t i = 0; i < n; i++)
		CHECK((off[i] = arena_alloc(a, size)) != 0);
	for (uint64_t i = 0; i < n; i++)
		CHECK_EQ(arena_release_warm(a, off[i], size), 1);
	CHECK_EQ(arena_in_use(a), 0);
	for (uint64_t i = n; i-- > 0;)
		CHECK_EQ(arena_alloc(a, size), off[i]);
	for (uint64_t i = 0; i < n; i++)
		CHECK_EQ(arena_release_warm(a, off[i], size), 1);
	/* the peak's worth is warm: a fresh block of another size goes cold */
	CHECK((small = arena_alloc(a, 4096)) != 0);
	CHECK_EQ(arena_release_warm(a, small, 4096), 0);
	CHECK_EQ(arena_release_warm(a, 0, size), 0);
	/* a plain release is cold and takes none of the bound */
	CHECK_EQ(arena_alloc(a, size), off[n - 1]);
	arena_release(a, off[n - 1], size);
	CHECK((small = arena_alloc(a, 8192)) != 0);
	CHECK_EQ(arena_release_warm(a, small, 8192), 1);
	arena_alloc_free_all(a);
}

/* arena_cool: a quiet allocator's warm blocks punched out of the file; a
 * busy one keeps those within its peak of the last two looks; a cold
 * block's page is not the allocator's to punch */
static void cool_cases(void)
{
	const uint64_t size = 8192, bytes = 1ull << 20;
	int fd = memfd_create("arena-cool", 0);
	uint8_t *m;
	uint64_t off[3];
	struct arena_alloc *a = arena_alloc_new(4096, bytes);
	CHECK(a && fd >= 0 && ftruncate(fd, (off_t)bytes) == 0);
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	for (int i = 0; i < 3; i++) {
		CHECK((off[i] = arena_alloc(a, size)) != 0);
		memset(m + off[i], 0xab, size);
	}
	CHECK_EQ(arena_allocs(a), 3u);
	CHECK_EQ(arena_cool(a, fd, 0), 0u); /* nothing warm */
	CHECK_EQ(arena_release_warm(a, off[0], size), 1);
	CHECK_EQ(arena_release_warm(a, off[1], size), 1);
	arena_release(a, off[2], size);
	CHECK_EQ(arena_cool(a, fd, 1), 0u); /* busy: within ARENA_WARM_BYTES */
	CHECK(m[off[0]] == 0xab);
	CHECK_EQ(arena_cool(a, fd, 0), 2u); /* adjacent: one punch */
	CHECK(m[off[0]] == 0 && m[off[1] + size - 1] == 0 && m[off[2]] == 0xab);
	CHECK_EQ(arena_cool(a, fd, 0), 0u);
	arena_alloc_free_all(a);
	/* a spike of 8 MiB: kept at the look after it, back to
	 * ARENA_WARM_BYTES at the next, none once quiet */
	const uint64_t big = 131072, nb = 2 * ARENA_WARM_BYTES / big;
	uint64_t b[64];
	a = arena_alloc_new(1ull << 20, 64ull << 20);
	CHECK(a && nb <= 64);
	for (uint64_t i = 0; i < nb; i++)
		CHECK((b[i] = arena_alloc(a, big)) != 0);
	for (uint64_t i = 0; i < nb; i++)
		CHECK_EQ(arena_release_warm(a, b[i], big), 1);
	CHECK_EQ(arena_cool(a, -1, 1), 0u);
	CHECK_EQ(arena_cool(a, -1, 1), nb / 2); /* (a bad descriptor punches nothing, the count goes) */
	CHECK_EQ(arena_alloc(a, big), b[nb - 1]); /* a kept one: freed last */
	CHECK_EQ(arena_release_warm(a, b[nb - 1], big), 1);
	CHECK_EQ(arena_cool(a, -1, 0), nb / 2);
	CHECK_EQ(arena_cool(a, -1, 0), 0u);
	CHECK_EQ(arena_allocs(a), nb + 1);
	arena_alloc_free_all(a);
	munmap(m, bytes);
	close(fd);
}

int main(void)
{
	format_cases();
	ring_size_cases();
	alloc_cases();
	warm_cases();
	cool_cases();
	printf("ok\n");
	return T_PASS;
}
