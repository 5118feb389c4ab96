/*
 * slot-reuse-forgets-the-placed-tail - on verbs the peer's hub writes the
 * end of its writes into the receiving socket's slot (rx_placed, under the
 * tag of rx_placed_tag: core/shared/arena.h), and a reader that polls
 * believes it (placed_end).  A socket made in a slot that such a socket
 * had before must not believe the old one's word: a socket that never
 * offers placed tails (a soft link's, beside verbs with transport auto; a
 * registration that failed) kept the old tag, and its reader took the old
 * stream's last position for bytes in its own ring, which were not there.
 *
 * A socketless hub (tests/fuzz/fuzz_hub.h's harness) makes the sockets;
 * the slot list is last in, first out, so the new socket takes the slot.
 */
#include <endian.h>

#include "fuzz/fuzz_hub.h"
#include "helpers.h"

int main(void)
{
	struct hsock *a, *b;
	uint32_t tag, slot;
	uint64_t end;
	int bad = 0;

	fh_init();
	fh_begin(HUB_SOFT, 0, 1);
	a = hsock_new(fh.h, fh.pool, 0, 0);
	if (!a) {
		printf("not ok - a socket could be made\n");
		return 1;
	}
	/* as the old socket's peer left it: a placed tail 1000 bytes on */
	slot = a->slot;
	tag = placed_tag(tag_imm(a->sid, a->gen), 1);
	atomic_store(&a->as->rx_placed_tag, tag);
	atomic_store(&a->as->rx_placed, htobe64((uint64_t)tag << PLACED_POS_BITS | 1000));
	end = placed_end(a->as, 0, 1u << 20);
	printf("%s - the old socket believes its peer's placed tail (%llu)\n", end == 1000 ? "ok" : "not ok",
	       (unsigned long long)end);
	bad |= end != 1000;
	hsock_free(fh.h, a);

	b = hsock_new(fh.h, fh.pool, 0, 0);
	if (!b || b->slot != slot) {
		printf("not ok - a new socket took the old one's slot\n");
		return 1;
	}
	end = placed_end(b->as, 0, 1u << 20);
	printf("%s - a new socket in the slot believes no placed tail (%llu bytes; want 0)\n", end ? "not ok" : "ok",
	       (unsigned long long)end);
	bad |= end != 0;
	hsock_free(fh.h, b);
	fh_end();
	return bad;
}
