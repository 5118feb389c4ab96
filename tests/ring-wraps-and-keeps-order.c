/*
 * A ring's iovecs split exactly at the wrap point, copy_in/copy_out across
 * the wrap keep byte order, positions keep working past 2^64, and
 * ring_sane() accepts exactly 0 <= tail - head <= size.
 */
#include "helpers.h"
#include "ring.h"

#include <stdint.h>

#define SZ 64u

static void iov_cases(void)
{
	uint8_t base[SZ];
	struct iovec v[2];

	/* empty range: no iovec */
	CHECK_EQ(ring_iov(base, SZ, 10, 0, v), 0);

	/* inside: one iovec at pos & (size-1) */
	CHECK_EQ(ring_iov(base, SZ, SZ * 3 + 5, 20, v), 1);
	CHECK(v[0].iov_base == base + 5);
	CHECK_EQ(v[0].iov_len, 20);

	/* ends exactly at the end: still one */
	CHECK_EQ(ring_iov(base, SZ, 40, SZ - 40, v), 1);
	CHECK(v[0].iov_base == base + 40);
	CHECK_EQ(v[0].iov_len, SZ - 40);

	/* whole ring from 0 */
	CHECK_EQ(ring_iov(base, SZ, SZ * 7, SZ, v), 1);
	CHECK(v[0].iov_base == base);
	CHECK_EQ(v[0].iov_len, SZ);

	/* crosses the end: two, the second from base */
	CHECK_EQ(ring_iov(base, SZ, 60, 10, v), 2);
	CHECK(v[0].iov_base == base + 60);
	CHECK_EQ(v[0].iov_len, 4);
	CHECK(v[1].iov_base == base);
	CHECK_EQ(v[1].iov_len, 6);

	/* whole ring from the middle */
	CHECK_EQ(ring_iov(base, SZ, 33, SZ, v), 2);
	CHECK_EQ(v[0].iov_len + v[1].iov_len, SZ);
	CHECK(v[0].iov_base == base + 33);
	CHECK_EQ(v[1].iov_len, 33);

	/* free-running position just below 2^64 */
	CHECK_EQ(ring_iov(base, SZ, UINT64_MAX - 2, 8, v), 2);
	CHECK(v[0].iov_base == base + SZ - 3);
	CHECK_EQ(v[0].iov_len, 3);
	CHECK_EQ(v[1].iov_len, 5);
}

static void copy_cases(void)
{
	uint8_t base[SZ], in[SZ], out[SZ];
	uint64_t seed = 42;

	/* Every start position and length: bytes come back in order, and
	 * land where the ring's layout says. */
	for (uint64_t pos = 0; pos < 2 * SZ; pos++) {
		for (uint64_t len = 0; len <= SZ; len++) {
			for (unsigned i = 0; i < SZ; i++)
				in[i] = (uint8_t)t_splitmix(&seed);
			memset(base, 0xee, sizeof(base));
			memset(out, 0, sizeof(out));
			ring_copy_in(base, SZ, pos, in, len);
			for (uint64_t i = 0; i < len; i++)
				CHECK_EQ(base[(pos + i) % SZ], in[i]);
			/* nothing outside the range was touched */
			if (len < SZ)
				for (uint64_t i = len; i < SZ; i++)
					CHECK_EQ(base[(pos + i) % SZ], 0xee);
			ring_copy_out(base, SZ, pos, out, len);
			CHECK(memcmp(in, out, len) == 0);
		}
	}

	/* A producer/consumer sequence with odd chunk sizes, positions
	 * starting near 2^64 so they overflow on the way. */
	uint64_t head = UINT64_MAX - 100, tail = head, wpos = 0, rpos = 0;
	uint8_t chunk[SZ];
	for (int step = 0; step < 20000; step++) {
		uint64_t room = SZ - (tail - head);
		uint64_t w = t_splitmix(&seed) % (room + 1);
		t_stream_fill(7, wpos, chunk, w);
		ring_copy_in(base, SZ, tail, chunk, w);
		tail += w;
		wpos += w;
		CHECK(ring_sane(head, tail, SZ));
		uint64_t used = tail - head;
		uint64_t r = t_splitmix(&seed) % (used + 1);
		ring_copy_out(base, SZ, head, chunk, r);
		CHECK(t_stream_check(7, rpos, chunk, r) < 0);
		head += r;
		rpos += r;
	}
	CHECK(wpos > 100000);
}

static void sane_cases(void)
{
	CHECK(ring_sane(0, 0, SZ));
	CHECK(ring_sane(0, SZ, SZ));
	CHECK(!ring_sane(0, SZ + 1, SZ));
	CHECK(!ring_sane(1, 0, SZ));          /* tail behind head */
	CHECK(!ring_sane(1000, 999, SZ));
	CHECK(ring_sane(UINT64_MAX - 3, 4, SZ)); /* wrapped: 8 used */
	CHECK(ring_sane(UINT64_MAX, UINT64_MAX + SZ, SZ));
	CHECK(!ring_sane(UINT64_MAX - 3, SZ, SZ)); /* wrapped: 68 used */
	CHECK(!ring_sane(5, UINT64_MAX, SZ));
	CHECK(ring_sane(7, 7, 0));            /* a ring with no bytes: only empty */
	CHECK(!ring_sane(7, 8, 0));
}

int main(void)
{
	iov_cases();
	copy_cases();
	sane_cases();
	printf("ok\n");
	return T_PASS;
}
