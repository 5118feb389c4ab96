/*
 * pair.h - the shared segment of same-node connections between two pools.
 *
 * When both ends of a connection are on one node, its bytes go through
 * shared memory straight from the writer's process to the reader's, with no
 * hub and no system call on the way.  The hub keeps one pair segment (a
 * memfd) for each two pools that talk on the node (a pool talking to itself
 * has one too), maps it into the processes of those two pools only, and
 * allocates each such connection two directions in it: a ring's counters
 * (struct pair_dir) and its bytes.  The writer of a direction copies into
 * its ring and publishes the tail; the reader copies out and publishes the
 * head: the two sockets' slots name the direction they send on and the one
 * they receive on (arena_slot.pair_tx, pair_rx), with the ring's geometry
 * in the slot's own tx and rx (hub-written, never taken from the segment).
 *
 * The hub is needed only to wake sleepers.  A reader about to sleep (or a
 * poller whose readiness descriptor is empty) sets rx_want; a writer that
 * published a tail takes rx_want and, when it was set, rings its doorbell
 * (SLOTOP_TX), and the hub wakes the other socket.  Full rings work the same
 * way with tx_want and SLOTOP_CREDIT.  A reader or writer that is awake pays
 * no system call, a sleeping one costs the hub one wake-up, as a kernel
 * socket's would.
 *
 * Who writes what: a direction's writer writes tail, its reader head; both
 * sides write the want words.  A process can thus break only the
 * connections it is a party to; the hub reads the counters as hints only
 * (readiness, statistics, unread data at close) and every position a
 * process uses is masked by a ring size it got from the hub.
 */
#ifndef RSHARE_PAIR_H
#define RSHARE_PAIR_H

#include <stdatomic.h>
#include <stdint.h>

#include "ring.h"

#define PAIR_MAGIC 0x3152494150485352ULL /* "RSHPAIR1" */
#define PAIR_VERSION 2
/* as many connections between two pools as a pool has slots; sparse, as
 * the arena: only the directions and rings in use cost memory */
#define PAIR_MAX_DIRS (1u << 19)
#define PAIR_DEFAULT_BYTES (64ull << 30)

struct pair_dir {
	struct ring r;                /* head, tail (off and size: the hub's, for reading only) */
	_Atomic uint32_t rx_want;     /* the reader wants a wake-up at the next tail */
	_Atomic uint32_t tx_want;     /* the writer wants one at the next head */
} __attribute__((aligned(64)));

struct pair_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t ndirs;
	uint64_t bytes;
	uint64_t data_off;
	uint64_t id;
	struct pair_dir dir[PAIR_MAX_DIRS];
};

static inline uint64_t pair_data_off(void)
{
	return (sizeof(struct pair_hdr) + 4095) & ~4095ull;
}

#endif
