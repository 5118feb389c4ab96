/*
 * tag.h - owner tags and immediate data.
 *
 * Every send a hub posts on a link carries an owner tag in its wr_id: the
 * hub-wide socket id and the generation of the slot behind it.  Every write
 * with immediate names its destination socket in imm_data: the peer's socket
 * id and the low bits of its generation.  A completion is routed by that tag;
 * a tag whose generation no longer matches (the slot was released and reused
 * since) is stale, counted, and dropped, never delivered to the new owner.
 */
#ifndef RSHARE_TAG_H
#define RSHARE_TAG_H

#include <stdint.h>

#define TAG_SOCK_BITS 20                 /* hub-wide socket ids: 1..2^20-1 */
#define TAG_MAX_SOCKS (1u << TAG_SOCK_BITS)
#define TAG_IMM_GEN_BITS (32 - TAG_SOCK_BITS)
#define TAG_IMM_GEN_MASK ((1u << TAG_IMM_GEN_BITS) - 1)

static inline uint64_t tag_make(uint32_t sid, uint32_t gen)
{
	return ((uint64_t)sid << 32) | gen;
}
static inline uint32_t tag_sid(uint64_t tag) { return (uint32_t)(tag >> 32); }
static inline uint32_t tag_gen(uint64_t tag) { return (uint32_t)tag; }

/* imm_data: socket id in the high 20 bits, generation's low 12 bits below. */
static inline uint32_t tag_imm(uint32_t sid, uint32_t gen)
{
	return (sid << TAG_IMM_GEN_BITS) | (gen & TAG_IMM_GEN_MASK);
}
static inline uint32_t tag_imm_sid(uint32_t imm) { return imm >> TAG_IMM_GEN_BITS; }
static inline uint32_t tag_imm_gen(uint32_t imm) { return imm & TAG_IMM_GEN_MASK; }

/* Does a tag still name the slot whose current generation is cur_gen? */
static inline int tag_live(uint64_t tag, uint32_t cur_gen)
{
	return tag_gen(tag) == cur_gen;
}
static inline int tag_imm_live(uint32_t imm, uint32_t cur_gen)
{
	return tag_imm_gen(imm) == (cur_gen & TAG_IMM_GEN_MASK);
}

#endif
