/*
 * The messages that carry a connection's rings across a lost link keep
 * them whole: RESUME's three stream positions, and the address and key of
 * the receive ring it adds on verbs; REKEY's two rings (new and old: size,
 * address and key each).  A REKEY whose ring sizes are impossible or
 * alike, or that lacks an address, a key or a socket id, is rejected.
 * A peer takes a REKEY's rings by size (hsock_rekey_apply): the ring it
 * writes to, and the one before its last switch while resends go there;
 * a REKEY that names neither the ring it writes to, nor the old one that
 * resends below the switch need, is refused.
 * A RESUME that says the peer switched to our offered ring at a position
 * our reader has passed settles the offer on soft, which placed the writes
 * after it in the ring it had (their completions and the RING_ACK's went
 * with the link), and is refused on verbs, where they went to the new ring.
 */
#include "helpers.h"
#include "frame.h"
#include "hub.h"

static uint8_t buf[WIRE_CTL_LEN];

/* C through the wire and back: 0 and *out, or -1 */
static int through(const struct wire_ctl *c, struct wire_ctl *out)
{
	const char *why = NULL;
	wire_ctl_encode(c, buf);
	return wire_ctl_decode(buf, WIRE_CTL_LEN, out, &why);
}

static void resume_positions_and_ring(void)
{
	struct wire_ctl c = {.op = CTL_RESUME, .dst = 0x00800008, .src = 0x00900009, .ring = 256u << 10}, co;
	uint64_t done, head, at, raddr;
	wire_resume_put(&c, 0x1111222233334444ull, 0x5555666677778888ull, 0x99990000aaaabbbbull);
	CHECK_EQ(through(&c, &co), 0);
	wire_resume_get(&co, &done, &head, &at);
	CHECK(done == 0x1111222233334444ull && head == 0x5555666677778888ull && at == 0x99990000aaaabbbbull);
	CHECK_EQ(wire_resume_ring_get(&co, &raddr), 0u); /* soft: no key */
	wire_resume_ring_put(&c, 0x7fff12345000ull, 0xabcd);
	CHECK_EQ(through(&c, &co), 0);
	CHECK_EQ(wire_resume_ring_get(&co, &raddr), 0xabcdu);
	CHECK(raddr == 0x7fff12345000ull);
	wire_resume_get(&co, &done, &head, &at);
	CHECK(at == 0x99990000aaaabbbbull);
}

static struct wire_ctl rekey_of(const struct wire_ring r[2])
{
	struct wire_ctl c = {.op = CTL_REKEY, .dst = 0x00c0000c, .src = 0x00d0000d};
	wire_rekey_put(&c, r);
	return c;
}

static void rekey_rings(void)
{
	static const struct wire_ring bad[] = {{0, 1, 8192}, {1, 0, 8192}, {1, 1, 3}, {1, 1, 0}, {1, 1, 2u * ARENA_MAX_RING}};
	const struct wire_ring r[2] = {{0x7f0012340000ull, 0x5678, 256u << 10}, {0x7f0099990000ull, 0x9abc, 4u << 10}};
	struct wire_ring got[2], b[2];
	struct wire_ctl c = rekey_of(r), co;
	CHECK_EQ(through(&c, &co), 0);
	CHECK_EQ(co.op, CTL_REKEY);
	wire_rekey_get(&co, got);
	for (int i = 0; i < 2; i++)
		CHECK(got[i].raddr == r[i].raddr && got[i].rkey == r[i].rkey && got[i].size == r[i].size);
	for (size_t k = 0; k < 2 * sizeof(bad) / sizeof(bad[0]); k++) {
		b[0] = r[0], b[1] = r[1], b[k & 1] = bad[k / 2];
		c = rekey_of(b);
		CHECK_EQ(through(&c, &co), -1);
	}
	b[0] = r[0], b[1] = r[1], b[1].size = r[0].size; /* which is which? */
	c = rekey_of(b);
	CHECK_EQ(through(&c, &co), -1);
	c = rekey_of(r), c.dst = 0;
	CHECK_EQ(through(&c, &co), -1);
	c = rekey_of(r), c.src = 0;
	CHECK_EQ(through(&c, &co), -1);
}

/* the sender's side of a switch from a 4 KiB ring to a 256 KiB one */
static struct hsock sender(int switched, uint64_t posted)
{
	struct hsock s;
	memset(&s, 0, sizeof(s));
	s.peer_raddr = 0x1000, s.peer_rkey = 1, s.peer_ring = 4096;
	if (switched) {
		s.peer_old_raddr = s.peer_raddr, s.peer_old_rkey = 1, s.peer_old_ring = 4096;
		s.peer_raddr = 0x2000, s.peer_rkey = 2, s.peer_ring = 256u << 10;
		s.peer_switch_at = 5000;
	}
	s.tx_posted = posted;
	return s;
}

static void rekey_taken(void)
{
	const struct wire_ring r[2] = {{0x9000, 0x99, 256u << 10}, {0x8000, 0x88, 4096}};
	struct hsock s = sender(1, 4000); /* switched; resends below the switch to come */
	memcpy(s.peer_rekey, r, sizeof(r));
	CHECK_EQ(hsock_rekey_apply(&s), 0);
	CHECK(s.peer_raddr == 0x9000 && s.peer_rkey == 0x99 && s.peer_old_raddr == 0x8000 && s.peer_old_rkey == 0x88);
	s = sender(0, 4000); /* never switched: the old ring is the one it writes to */
	memcpy(s.peer_rekey, r, sizeof(r));
	CHECK_EQ(hsock_rekey_apply(&s), 0);
	CHECK(s.peer_raddr == 0x8000 && s.peer_rkey == 0x88);
	s = sender(1, 4000); /* resends below the switch, the old ring not named */
	s.peer_rekey[0] = r[0];
	s.peer_rekey[1] = (struct wire_ring){0x7000, 0x77, 8192};
	CHECK_EQ(hsock_rekey_apply(&s), -1);
	s.tx_posted = 6000; /* past the switch: the old ring no longer matters */
	CHECK_EQ(hsock_rekey_apply(&s), 0);
	CHECK(s.peer_raddr == 0x9000 && s.peer_old_raddr == 0x1000);
	s = sender(0, 0); /* neither is the ring it writes to */
	s.peer_rekey[0] = r[0];
	s.peer_rekey[1] = (struct wire_ring){0x7000, 0x77, 8192};
	CHECK_EQ(hsock_rekey_apply(&s), -1);
}

/* We offered a 512 KiB ring for our 1 MiB one; the peer switched at
 * 1000000 and a lost link took its RING_ACK and the completions of the
 * 600000 bytes after it, placed and read: the peer's RESUME settles it. */
static int settle(const struct xport_ops *ops, uint32_t ring, uint64_t at, struct hsock *s)
{
	static struct xport xp;
	static struct link l;
	static struct arena_slot as;
	static struct hub h;
	memset(s, 0, sizeof(*s));
	xp.ops = ops;
	l.x.xp = &xp;
	ring_store(&as.rx.head, 1600000);
	s->link = &l, s->as = &as, s->sid = 1;
	s->rx_size = 1u << 20, s->rx_off = 1u << 20;
	s->rx_offered = 1, s->rx_next_off = 4u << 20, s->rx_next_size = 512u << 10;
	s->rx_tail = s->rx_expect = s->credit_sent = 1600000;
	return hsock_offer_settle(&h, s, ring, at);
}

static void offer_settled(void)
{
	static const struct xport_ops verbs_like = {.name = "verbs-like"};
	struct hsock s;
	CHECK_EQ(settle(&xport_soft_ops, 512u << 10, 1000000, &s), 0);
	CHECK(!s.rx_offered && s.rx_switch && s.rx_switch_at == 1000000);
	CHECK_EQ(settle(&verbs_like, 512u << 10, 1000000, &s), -1);
	/* beyond what our credit and the new ring allow: on either */
	CHECK_EQ(settle(&xport_soft_ops, 512u << 10, 1600000 + (512u << 10) + 1, &s), -1);
	CHECK_EQ(settle(&verbs_like, 512u << 10, 1600000 + (512u << 10) + 1, &s), -1);
	CHECK_EQ(settle(&verbs_like, 512u << 10, 1600000, &s), 0);
}

int main(void)
{
	resume_positions_and_ring();
	rekey_rings();
	rekey_taken();
	offer_settled();
	printf("ok\n");
	return T_PASS;
}
