/*
 * slot-reuse-gets-a-new-generation - a process names its sockets by slot
 * and generation (requests, its epoll records, the slot's gen word), and
 * the links name them by socket id and generation: neither name may ever
 * come back.  Sockets made and freed at random in one pool, thousands of
 * times, never give a (slot, generation) pair twice, nor a (socket id,
 * generation) pair.
 *
 * A generation counted per socket id alone gave a slot's next socket,
 * under another id, the generation of the one before (both 1, say): a
 * late request or a stale epoll record of the old socket then named the
 * new one.
 *
 * A socketless hub (tests/fuzz/fuzz_hub.h's harness) makes the sockets.
 */
#include "fuzz/fuzz_hub.h"
#include "helpers.h"

#define LIVE 64
#define ROUNDS 20000

static uint64_t seen_slot[ROUNDS + LIVE], seen_sid[ROUNDS + LIVE];
static unsigned nseen;

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static unsigned repeats(uint64_t *v, unsigned n)
{
	unsigned r = 0;
	qsort(v, n, sizeof(*v), cmp);
	for (unsigned i = 1; i < n; i++)
		r += v[i] == v[i - 1];
	return r;
}

int main(void)
{
	struct hsock *live[LIVE] = {0};
	uint64_t rng = 7;
	unsigned rs, ri;

	fh_init();
	fh_begin(HUB_SOFT, 0, 1);
	for (unsigned i = 0; i < ROUNDS; i++) {
		unsigned k = (unsigned)(t_splitmix(&rng) % LIVE);
		if (live[k]) {
			hsock_free(fh.h, live[k]);
			live[k] = NULL;
		}
		live[k] = hsock_new(fh.h, fh.pool, 0, 0);
		if (!live[k]) {
			printf("not ok - a socket could be made (round %u)\n", i);
			return 1;
		}
		seen_slot[nseen] = (uint64_t)live[k]->slot << 32 | live[k]->gen;
		seen_sid[nseen++] = (uint64_t)live[k]->sid << 32 | live[k]->gen;
	}
	for (unsigned k = 0; k < LIVE; k++)
		if (live[k])
			hsock_free(fh.h, live[k]);
	rs = repeats(seen_slot, nseen);
	ri = repeats(seen_sid, nseen);
	printf("%s - %u sockets in %u slots: no (slot, generation) twice (%u repeats)\n", rs ? "not ok" : "ok",
	       nseen, fh.pool->slot_hi, rs);
	printf("%s - no (socket id, generation) twice (%u repeats)\n", ri ? "not ok" : "ok", ri);
	fh_end();
	return rs || ri;
}
