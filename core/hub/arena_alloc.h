/*
 * arena_alloc.h - the hub's side of an arena: laying out a fresh one, and
 * allocating ring bytes in it.  The layout itself (arena.h) is shared with
 * the processes; this allocator's state lives in the hub's memory only.
 */
#ifndef RSHARE_ARENA_ALLOC_H
#define RSHARE_ARENA_ALLOC_H

#include "arena.h"

struct arena_alloc;
int arena_format(void *base, uint64_t bytes, uint64_t pool_id);
struct arena_alloc *arena_alloc_new(uint64_t data_off, uint64_t bytes);
void arena_alloc_free_all(struct arena_alloc *a);
/* Returns the offset of size bytes (a power of two) or 0 when full. */
uint64_t arena_alloc(struct arena_alloc *a, uint64_t size);
/* A block never written to (the caller has nothing to punch)... */
void arena_release(struct arena_alloc *a, uint64_t off, uint64_t size);
/* ...or one that was: 1 when it stays warm (its pages are kept for the
 * next block of its size, while the warm blocks and those in use stay
 * within the most the allocator had in use over its last two looks, or
 * ARENA_WARM_BYTES), 0 when the caller punches its pages out. */
#define ARENA_WARM_BYTES (4u << 20)
int arena_release_warm(struct arena_alloc *a, uint64_t off, uint64_t size);
/* The blocks it ever handed out.  A look, once a second: arena_cool
 * punches out of MEMFD the warm blocks (they stay free) of one that
 * handed out none since the last look (BUSY 0), or those beyond what
 * the bound above keeps (BUSY 1), and says how many. */
uint64_t arena_allocs(const struct arena_alloc *a);
uint32_t arena_cool(struct arena_alloc *a, int memfd, int busy);
uint64_t arena_in_use(const struct arena_alloc *a);
/* Charge what it hands out to *charge too, and refuse (0) what would
 * take *charge past limit (0: no limit). */
void arena_alloc_charge(struct arena_alloc *a, uint64_t *charge, uint64_t limit);
/* Its state, as put() takes bytes (0 or -errno, from put), and made again
 * from them as get() gives them (NULL: short or not sane); the charge is
 * set again by the caller. */
int arena_alloc_save(const struct arena_alloc *a, int (*put)(void *c, const void *b, size_t n), void *c);
struct arena_alloc *arena_alloc_load(int (*get)(void *c, void *b, size_t n), void *c);

#endif
