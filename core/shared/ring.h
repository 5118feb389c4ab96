/*
 * ring.h - single-producer/single-consumer byte rings in shared memory.
 *
 * A ring is a power-of-two byte area plus two free-running 64-bit positions:
 * the producer only writes tail, the consumer only writes head, each with a
 * release store after touching the bytes and an acquire load of the other
 * side's counter, in the style of io_uring.  used = tail - head, never more
 * than size.  Where the layout is shared with a less trusted side (a process
 * and its hub), the reader of a counter it did not write checks it with
 * ring_sane() before it believes it.
 */
#ifndef RSHARE_RING_H
#define RSHARE_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

struct ring {
	_Atomic uint64_t head;  /* consumer position */
	_Atomic uint64_t tail;  /* producer position */
	uint64_t off;           /* offset of the bytes in the arena */
	uint64_t size;          /* power of two, 0 when the ring has no bytes */
};

static inline uint64_t ring_load(const _Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_acquire);
}
static inline void ring_store(_Atomic uint64_t *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_release);
}

/* A head/tail pair is sane when tail is not behind head by any amount and
 * at most size ahead of it. */
static inline int ring_sane(uint64_t head, uint64_t tail, uint64_t size)
{
	return tail - head <= size;
}

/* Up to two iovecs covering [pos, pos+len) of a ring of size at base. */
static inline int ring_iov(uint8_t *base, uint64_t size, uint64_t pos, uint64_t len,
			   struct iovec iov[2])
{
	uint64_t at = pos & (size - 1), first = size - at;
	if (len <= first) {
		iov[0].iov_base = base + at;
		iov[0].iov_len = len;
		return len ? 1 : 0;
	}
	iov[0].iov_base = base + at;
	iov[0].iov_len = first;
	iov[1].iov_base = base;
	iov[1].iov_len = len - first;
	return 2;
}

static inline void ring_copy_in(uint8_t *base, uint64_t size, uint64_t pos,
				const void *src, uint64_t len)
{
	struct iovec v[2];
	int n = ring_iov(base, size, pos, len, v);
	const uint8_t *s = src;
	for (int i = 0; i < n; i++) {
		memcpy(v[i].iov_base, s, v[i].iov_len);
		s += v[i].iov_len;
	}
}

static inline void ring_copy_out(const uint8_t *base, uint64_t size, uint64_t pos,
				 void *dst, uint64_t len)
{
	struct iovec v[2];
	int n = ring_iov((uint8_t *)base, size, pos, len, v);
	uint8_t *d = dst;
	for (int i = 0; i < n; i++) {
		memcpy(d, v[i].iov_base, v[i].iov_len);
		d += v[i].iov_len;
	}
}

/* Copy stream positions [pos, end) of a ring of size fsize at from into
 * a ring of size tsize at to, at the same positions (a ring that changes
 * size keeps its counters). */
static inline void ring_move(const uint8_t *from, uint64_t fsize, uint8_t *to, uint64_t tsize, uint64_t pos,
			     uint64_t end)
{
	struct iovec v[2];
	int n = ring_iov((uint8_t *)from, fsize, pos, end - pos, v);
	for (int i = 0; i < n; i++) {
		ring_copy_in(to, tsize, pos, v[i].iov_base, v[i].iov_len);
		pos += v[i].iov_len;
	}
}

#endif
