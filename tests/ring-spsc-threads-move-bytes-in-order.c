/*
 * One producer thread and one consumer thread move ~100 MB through a 64 KiB
 * ring using only ring_load()/ring_store() on head and tail (acquire and
 * release), with odd chunk sizes; the consumer checks every byte, and
 * neither side ever sees an insane head/tail pair.
 */
#include "helpers.h"
#include "ring.h"

#include <pthread.h>
#include <sched.h>

#define RSZ (64u << 10)
#define TOTAL (100ull << 20)
#define SEED 0x5eedULL

static uint8_t bytes[RSZ];
static struct ring r = {.size = RSZ};
static _Atomic int failed;

static void *producer(void *arg)
{
	(void)arg;
	uint64_t pos = 0, rng = 1;
	uint8_t chunk[9000];
	while (pos < TOTAL && !failed) {
		uint64_t head = ring_load(&r.head);
		uint64_t tail = atomic_load_explicit(&r.tail, memory_order_relaxed);
		if (!ring_sane(head, tail, RSZ)) {
			fprintf(stderr, "producer: insane head %llu tail %llu\n",
				(unsigned long long)head, (unsigned long long)tail);
			failed = 1;
			break;
		}
		uint64_t room = RSZ - (tail - head);
		if (!room) {
			sched_yield();
			continue;
		}
		uint64_t n = 1 + t_splitmix(&rng) % sizeof(chunk);
		if (n > room)
			n = room;
		if (n > TOTAL - pos)
			n = TOTAL - pos;
		t_stream_fill(SEED, pos, chunk, n);
		ring_copy_in(bytes, RSZ, tail, chunk, n);
		ring_store(&r.tail, tail + n);
		pos += n;
	}
	return NULL;
}

static void *consumer(void *arg)
{
	uint64_t *out = arg;
	uint64_t pos = 0, rng = 2;
	uint8_t chunk[7777];
	while (pos < TOTAL && !failed) {
		uint64_t tail = ring_load(&r.tail);
		uint64_t head = atomic_load_explicit(&r.head, memory_order_relaxed);
		if (!ring_sane(head, tail, RSZ)) {
			fprintf(stderr, "consumer: insane head %llu tail %llu\n",
				(unsigned long long)head, (unsigned long long)tail);
			failed = 1;
			break;
		}
		uint64_t used = tail - head;
		if (!used) {
			sched_yield();
			continue;
		}
		uint64_t n = 1 + t_splitmix(&rng) % sizeof(chunk);
		if (n > used)
			n = used;
		ring_copy_out(bytes, RSZ, head, chunk, n);
		long long bad = t_stream_check(SEED, pos, chunk, n);
		if (bad >= 0) {
			fprintf(stderr, "consumer: byte %llu differs\n",
				(unsigned long long)(pos + (uint64_t)bad));
			failed = 1;
			break;
		}
		ring_store(&r.head, head + n);
		pos += n;
	}
	*out = pos;
	return NULL;
}

int main(void)
{
	pthread_t p, c;
	uint64_t got = 0;
	/* start near 2^64 so the free-running counters overflow mid-run */
	r.head = r.tail = UINT64_MAX - (10u << 20);
	CHECK(pthread_create(&c, NULL, consumer, &got) == 0);
	CHECK(pthread_create(&p, NULL, producer, NULL) == 0);
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	CHECK(!failed);
	CHECK_EQ(got, TOTAL);
	CHECK_EQ(r.tail - r.head, 0);
	printf("ok: %llu bytes checked\n", (unsigned long long)got);
	return T_PASS;
}
