/*
 * Owner tags and immediates carry socket id and generation and give them
 * back; a tag taken before a slot was reused (generation bumped) is not live
 * for the new owner, in both the 64-bit tag and the 12-bit-generation
 * immediate form.
 */
#include "helpers.h"
#include "tag.h"

int main(void)
{
	uint64_t rng = 3;

	CHECK_EQ(TAG_SOCK_BITS + TAG_IMM_GEN_BITS, 32);
	CHECK_EQ(TAG_IMM_GEN_MASK, (1u << TAG_IMM_GEN_BITS) - 1);

	/* round trips */
	for (int i = 0; i < 100000; i++) {
		uint32_t sid = 1 + (uint32_t)(t_splitmix(&rng) % (TAG_MAX_SOCKS - 1));
		uint32_t gen = (uint32_t)t_splitmix(&rng);
		uint64_t t = tag_make(sid, gen);
		CHECK_EQ(tag_sid(t), sid);
		CHECK_EQ(tag_gen(t), gen);
		CHECK(tag_live(t, gen));
		uint32_t imm = tag_imm(sid, gen);
		CHECK_EQ(tag_imm_sid(imm), sid);
		CHECK_EQ(tag_imm_gen(imm), gen & TAG_IMM_GEN_MASK);
		CHECK(tag_imm_live(imm, gen));
	}
	/* extremes */
	CHECK_EQ(tag_sid(tag_make(TAG_MAX_SOCKS - 1, UINT32_MAX)), TAG_MAX_SOCKS - 1);
	CHECK_EQ(tag_gen(tag_make(TAG_MAX_SOCKS - 1, UINT32_MAX)), UINT32_MAX);
	CHECK_EQ(tag_imm_sid(tag_imm(TAG_MAX_SOCKS - 1, UINT32_MAX)), TAG_MAX_SOCKS - 1);
	CHECK_EQ(tag_imm_gen(tag_imm(TAG_MAX_SOCKS - 1, UINT32_MAX)), TAG_IMM_GEN_MASK);
	CHECK_EQ(tag_imm_sid(tag_imm(1, 0)), 1);
	/* distinct sockets never share an immediate, at any generation */
	CHECK(tag_imm(5, 7) != tag_imm(6, 7));
	CHECK(tag_make(5, 7) != tag_make(6, 7));

	/* A slot reused: every old tag is stale for the new generation, for
	 * up to 2^12 - 1 reuses in the immediate form and always in the
	 * 64-bit form. */
	uint32_t sid = 4242, gen = 0xfffffff0u;
	uint64_t old_tag = tag_make(sid, gen);
	uint32_t old_imm = tag_imm(sid, gen);
	uint32_t cur = gen;
	for (uint32_t reuse = 1; reuse < (1u << TAG_IMM_GEN_BITS); reuse++) {
		cur++; /* wraps through 0 on the way */
		CHECK(!tag_live(old_tag, cur));
		CHECK(!tag_imm_live(old_imm, cur));
		/* the new owner's own tags are live */
		CHECK(tag_live(tag_make(sid, cur), cur));
		CHECK(tag_imm_live(tag_imm(sid, cur), cur));
	}
	/* ... and the 64-bit tag stays stale long after the immediate wraps */
	for (uint32_t reuse = 0; reuse < 100000; reuse++) {
		cur++;
		if (cur != gen)
			CHECK(!tag_live(old_tag, cur));
	}
	/* a tag with the right generation but another socket's id still
	 * decodes to that other socket: routing is by sid, liveness by gen */
	CHECK_EQ(tag_sid(tag_make(sid + 1, cur)), sid + 1);
	printf("ok\n");
	return T_PASS;
}
