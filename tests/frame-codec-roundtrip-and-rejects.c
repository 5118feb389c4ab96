/*
 * Frame headers, HELLOs and control messages survive encode/decode with
 * every field intact and in big-endian order on the wire; every malformed
 * input is rejected with a reason: wrong lengths, unknown types and ops,
 * reserved bits, bad magic/version/node id, impossible ring sizes, unknown
 * families and reasons, missing socket ids.  Random and mutated bytes (1e5
 * each) never crash a decoder, which either accepts (reason NULL, and the
 * bytes are the canonical encoding of what it returned) or rejects (-1 and
 * a reason).
 */
#include "helpers.h"
#include "frame.h"

#include <arpa/inet.h>
#include <sys/socket.h>

static uint64_t rng = 11;

#define REJECT(call)                                                             \
	do {                                                                     \
		const char *_why = NULL;                                         \
		int _r = call(&_why);                                            \
		if (_r != -1 || !_why) {                                         \
			fprintf(stderr, "%s:%d: accepted malformed input (%s)\n",\
				__FILE__, __LINE__, #call);                      \
			exit(T_FAIL);                                            \
		}                                                                \
	} while (0)

/* ---- frame headers ---- */

static uint8_t fb[WIRE_FRAME_LEN];
static struct wire_frame fo;
static int dec_frame(const char **why) { return wire_frame_decode(fb, &fo, why); }

static void frame_with(uint8_t type, uint32_t len)
{
	struct wire_frame f = {.type = type, .len = len, .imm = 0x01020304,
			       .rkey = 0x0a0b0c0d, .raddr = 0x1122334455667788ull};
	wire_frame_encode(&f, fb);
}

static void frame_cases(void)
{
	const char *why = "x";
	struct wire_frame f = {.type = FR_WRITE_IMM, .flags = 0, .len = 0x1234,
			       .imm = 0xdeadbeef, .rkey = 0xcafef00d,
			       .raddr = 0x0102030405060708ull};
	uint8_t want[WIRE_FRAME_LEN] = {2, 0, 0, 0, 0, 0, 0x12, 0x34,
					0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xf0, 0x0d,
					1, 2, 3, 4, 5, 6, 7, 8};
	wire_frame_encode(&f, fb);
	CHECK(memcmp(fb, want, sizeof(want)) == 0);
	memset(&fo, 0x55, sizeof(fo));
	CHECK_EQ(wire_frame_decode(fb, &fo, &why), 0);
	CHECK(why == NULL);
	CHECK_EQ(fo.type, f.type);
	CHECK_EQ(fo.flags, 0);
	CHECK_EQ(fo.len, f.len);
	CHECK_EQ(fo.imm, f.imm);
	CHECK_EQ(fo.rkey, f.rkey);
	CHECK_EQ(fo.raddr, f.raddr);

	/* every valid shape */
	frame_with(FR_HELLO, WIRE_HELLO_LEN);
	CHECK_EQ(dec_frame(&why), 0);
	frame_with(FR_SEND, WIRE_CTL_LEN);
	CHECK_EQ(dec_frame(&why), 0);
	frame_with(FR_WRITE_IMM, 1);
	CHECK_EQ(dec_frame(&why), 0);
	frame_with(FR_WRITE_IMM, WIRE_MAX_WRITE);
	CHECK_EQ(dec_frame(&why), 0);

	/* wrong lengths */
	frame_with(FR_HELLO, WIRE_HELLO_LEN - 1); REJECT(dec_frame);
	frame_with(FR_HELLO, WIRE_HELLO_LEN + 1); REJECT(dec_frame);
	frame_with(FR_HELLO, 0); REJECT(dec_frame);
	frame_with(FR_SEND, WIRE_CTL_LEN - 1); REJECT(dec_frame);
	frame_with(FR_SEND, WIRE_CTL_LEN + 1); REJECT(dec_frame);
	frame_with(FR_SEND, 0); REJECT(dec_frame);
	frame_with(FR_WRITE_IMM, 0); REJECT(dec_frame);
	frame_with(FR_WRITE_IMM, WIRE_MAX_WRITE + 1); REJECT(dec_frame);
	frame_with(FR_WRITE_IMM, UINT32_MAX); REJECT(dec_frame);
	/* unknown types, whatever the length */
	for (unsigned t = 0; t < 256; t++) {
		if (t >= FR_HELLO && t <= FR_SEND)
			continue;
		frame_with((uint8_t)t, 24); REJECT(dec_frame);
		frame_with((uint8_t)t, 64); REJECT(dec_frame);
		frame_with((uint8_t)t, 1); REJECT(dec_frame);
	}
	/* reserved bits: flags byte and bytes 2..3, each bit */
	for (int byte = 1; byte <= 3; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			frame_with(FR_SEND, WIRE_CTL_LEN);
			fb[byte] |= (uint8_t)(1u << bit);
			REJECT(dec_frame);
		}
	}
}

/* ---- HELLO ---- */

static uint8_t hb[WIRE_HELLO_LEN + 8];
static size_t hlen = WIRE_HELLO_LEN;
static struct wire_hello ho;
static int dec_hello(const char **why) { return wire_hello_decode(hb, hlen, &ho, why); }

static void hello_valid(void)
{
	struct wire_hello h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION,
			       .node_id = 0x0123456789abcdefull, .max_write = WIRE_MAX_WRITE};
	memset(hb, 0, sizeof(hb));
	wire_hello_encode(&h, hb);
	hlen = WIRE_HELLO_LEN;
}

static void hello_cases(void)
{
	const char *why = "x";
	hello_valid();
	uint8_t want[WIRE_HELLO_LEN] = {'R', 'S', 'H', 'R', 0, WIRE_VERSION, 0, 0,
					0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
					0, 1, 0, 0, 0, 0, 0, 0};
	CHECK(memcmp(hb, want, WIRE_HELLO_LEN) == 0);
	CHECK_EQ(wire_hello_decode(hb, WIRE_HELLO_LEN, &ho, &why), 0);
	CHECK(why == NULL);
	CHECK_EQ(ho.magic, WIRE_MAGIC);
	CHECK_EQ(ho.version, WIRE_VERSION);
	CHECK_EQ(ho.flags, 0);
	CHECK_EQ(ho.node_id, 0x0123456789abcdefull);
	CHECK_EQ(ho.max_write, WIRE_MAX_WRITE);
	/* smallest max_write allowed */
	struct wire_hello h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .node_id = 1, .max_write = 4096};
	wire_hello_encode(&h, hb);
	CHECK_EQ(wire_hello_decode(hb, WIRE_HELLO_LEN, &ho, &why), 0);

	/* wrong lengths */
	size_t lens[] = {0, 1, WIRE_HELLO_LEN - 1, WIRE_HELLO_LEN + 1, WIRE_HELLO_LEN + 8};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		hello_valid();
		hlen = lens[i];
		REJECT(dec_hello);
	}
	/* bad magic: any single bit */
	for (int bit = 0; bit < 32; bit++) {
		hello_valid();
		hb[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		REJECT(dec_hello);
	}
	/* versions other than ours */
	uint16_t vers[] = {0, WIRE_VERSION + 1, 0x0100, 0xffff};
	for (size_t i = 0; i < sizeof(vers) / sizeof(vers[0]); i++) {
		hello_valid();
		hb[4] = (uint8_t)(vers[i] >> 8);
		hb[5] = (uint8_t)vers[i];
		REJECT(dec_hello);
	}
	/* node id 0 */
	hello_valid();
	memset(hb + 8, 0, 8);
	REJECT(dec_hello);
	/* max write below 4096 */
	hello_valid();
	hb[16] = 0; hb[17] = 0; hb[18] = 0x0f; hb[19] = 0xff;
	REJECT(dec_hello);
	hello_valid();
	memset(hb + 16, 0, 4);
	REJECT(dec_hello);
}

/* reserved fields of HELLO (rsvd) and of control messages (bytes 60..63,
 * after reason) are not part of any documented layout */
static void reserved_cases(void)
{
	for (int byte = 20; byte < 24; byte++) {
		hello_valid();
		hb[byte] = 0x80;
		REJECT(dec_hello);
	}
}

/* ---- control messages ---- */

static uint8_t cb[WIRE_CTL_LEN + 8];
static size_t clen = WIRE_CTL_LEN;
static struct wire_ctl co;
static int dec_ctl(const char **why) { return wire_ctl_decode(cb, clen, &co, why); }

/* A well-formed message of each op. */
static struct wire_ctl ctl_of(uint8_t op)
{
	struct wire_ctl c;
	memset(&c, 0, sizeof(c));
	c.op = op;
	switch (op) {
	case CTL_CONNECT:
		c.family = AF_INET;
		c.port = 18515;
		c.src = 0x00123abc;
		c.ring = 128u << 10;
		c.addr_a[0] = 10; c.addr_a[1] = 199; c.addr_a[3] = 1;
		c.addr_b[0] = 10; c.addr_b[1] = 199; c.addr_b[3] = 2;
		c.src_port = 40000;
		break;
	case CTL_ACCEPT:
		c.family = AF_INET;
		c.dst = 0x00100001;
		c.src = 0x00200002;
		c.ring = ARENA_MIN_RING;
		c.reason = 129; /* the listener's room */
		break;
	case CTL_REFUSE:
		c.dst = 0x00100001;
		c.reason = REFUSE_NO_LISTENER;
		break;
	case CTL_CREDIT:
		c.dst = 0x00300003;
		c.val = 0xfedcba9876543210ull;
		break;
	case CTL_PING:
		break; /* nothing but the op */
	case CTL_RING:
		c.dst = 0x00500005;
		c.src = 0x00600006;
		c.ring = 1u << 20;
		c.val = 0x7f0012345000ull;
		c.rkey = 0x1234;
		break;
	case CTL_RING_ACK:
		c.dst = 0x00700007;
		c.val = 1u << 30;
		break;
	case CTL_RESUME:
		c.dst = 0x00800008;
		c.src = 0x00900009;
		c.ring = 256u << 10;
		c.val = 0x123456789ull;
		c.reason = RESUME_HAVE_FIN;
		wire_resume_put(&c, 0x1111222233334444ull, 0x5555666677778888ull, 0x99990000aaaabbbbull);
		break;
	case CTL_PLACED:
		c.dst = 0x00a0000a;
		c.src = 0x00b0000b;
		c.val = 0x7f0012345fc0ull;
		c.rkey = 0x4321;
		break;
	case CTL_REKEY: {
		const struct wire_ring r[2] = {{0x7f0012340000ull, 0x5678, 256u << 10}, {0x7f0099990000ull, 0x9abc, 4u << 10}};
		c.dst = 0x00c0000c;
		c.src = 0x00d0000d;
		wire_rekey_put(&c, r);
		break;
	}
	case CTL_UNLISTEN:
		c.port = 8080;
		break;
	default:
		c.dst = 0x00400004;
	}
	return c;
}

static void ctl_put(const struct wire_ctl *c)
{
	memset(cb, 0, sizeof(cb));
	wire_ctl_encode(c, cb);
	clen = WIRE_CTL_LEN;
}

static void ctl_same(const struct wire_ctl *a, const struct wire_ctl *b)
{
	CHECK_EQ(a->op, b->op);
	CHECK_EQ(a->family, b->family);
	CHECK_EQ(a->port, b->port);
	CHECK_EQ(a->dst, b->dst);
	CHECK_EQ(a->src, b->src);
	CHECK_EQ(a->ring, b->ring);
	CHECK_EQ(a->val, b->val);
	CHECK(memcmp(a->addr_a, b->addr_a, 16) == 0);
	CHECK(memcmp(a->addr_b, b->addr_b, 16) == 0);
	CHECK_EQ(a->src_port, b->src_port);
	CHECK_EQ(a->reason, b->reason);
}

/* what decodes: a CONNECT's bytes, every op, IPv6, REFUSE, every ring size */
static void ctl_accept_cases(void)
{
	const char *why = "x";
	struct wire_ctl c;

	/* byte layout of a CONNECT */
	c = ctl_of(CTL_CONNECT);
	ctl_put(&c);
	CHECK_EQ(cb[0], CTL_CONNECT);
	CHECK_EQ(cb[1], AF_INET);
	CHECK_EQ(cb[2] << 8 | cb[3], 18515);
	CHECK_EQ(cb[8] << 24 | cb[9] << 16 | cb[10] << 8 | cb[11], 0x00123abc);
	CHECK_EQ((uint32_t)cb[12] << 24 | cb[13] << 16 | cb[14] << 8 | cb[15], 128u << 10);
	CHECK_EQ(cb[24], 10);
	CHECK_EQ(cb[40 + 3], 2);
	CHECK_EQ(cb[56] << 8 | cb[57], 40000);

	/* round trip of every op */
	for (uint8_t op = 1; op <= CTL_MAX; op++) {
		c = ctl_of(op);
		ctl_put(&c);
		memset(&co, 0x5a, sizeof(co));
		why = "x";
		CHECK_EQ(wire_ctl_decode(cb, WIRE_CTL_LEN, &co, &why), 0);
		CHECK(why == NULL);
		ctl_same(&c, &co);
		CHECK(strcmp(wire_op_name(op), "?") != 0);
	}
	CHECK(strcmp(wire_op_name(0), "?") == 0);
	CHECK(strcmp(wire_op_name(CTL_MAX + 1), "?") == 0);
	CHECK(strcmp(wire_op_name(1000), "?") == 0);
	/* a CONNECT its hub answered early */
	c = ctl_of(CTL_CONNECT);
	c.reason = CONNECT_EARLY;
	ctl_put(&c);
	CHECK_EQ(dec_ctl(&why), 0);
	ctl_same(&c, &co);
	/* IPv6 CONNECT; REFUSE for lack of space; every valid ring size */
	c = ctl_of(CTL_CONNECT);
	c.family = AF_INET6;
	memset(c.addr_a, 0xfe, 16);
	ctl_put(&c);
	CHECK_EQ(dec_ctl(&why), 0);
	ctl_same(&c, &co);
	c = ctl_of(CTL_REFUSE);
	c.reason = REFUSE_NO_SPACE;
	ctl_put(&c);
	CHECK_EQ(dec_ctl(&why), 0);
	for (uint32_t r = ARENA_MIN_RING; r <= ARENA_MAX_RING; r <<= 1) {
		c = ctl_of(CTL_CONNECT); c.ring = r; ctl_put(&c);
		CHECK_EQ(dec_ctl(&why), 0);
		c = ctl_of(CTL_ACCEPT); c.ring = r; ctl_put(&c);
		CHECK_EQ(dec_ctl(&why), 0);
	}
}

/* what does not: wrong lengths, unknown ops, bad fields per op */
static void ctl_reject_cases(void)
{
	struct wire_ctl c;

	/* wrong lengths */
	size_t lens[] = {0, 1, WIRE_CTL_LEN - 1, WIRE_CTL_LEN + 1, WIRE_CTL_LEN + 8};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		c = ctl_of(CTL_FIN);
		ctl_put(&c);
		clen = lens[i];
		REJECT(dec_ctl);
	}
	/* unknown ops */
	for (unsigned op = 0; op < 256; op++) {
		if (op >= 1 && op <= CTL_MAX)
			continue;
		c = ctl_of(CTL_FIN);
		c.op = (uint8_t)op;
		ctl_put(&c);
		REJECT(dec_ctl);
	}
	/* CONNECT: bad family, a destination, no source, impossible rings */
	uint8_t fams[] = {0, AF_UNIX, AF_INET + 1, AF_INET6 + 1, 255};
	for (size_t i = 0; i < sizeof(fams); i++) {
		c = ctl_of(CTL_CONNECT); c.family = fams[i]; ctl_put(&c);
		REJECT(dec_ctl);
	}
	c = ctl_of(CTL_CONNECT); c.dst = 1; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_PING); c.dst = 1; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_UNLISTEN); c.dst = 1; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_CONNECT); c.reason = 2; ctl_put(&c); REJECT(dec_ctl); /* 1 only: CONNECT_EARLY */
	c = ctl_of(CTL_CONNECT); c.src = 0; ctl_put(&c); REJECT(dec_ctl);
	uint32_t bad_rings[] = {0, 1, ARENA_MIN_RING / 2, ARENA_MIN_RING - 1, ARENA_MIN_RING + 1,
				3 * ARENA_MIN_RING, 100000, ARENA_MAX_RING - 1, ARENA_MAX_RING + 1,
				2 * ARENA_MAX_RING, 0x80000000u, UINT32_MAX};
	for (size_t i = 0; i < sizeof(bad_rings) / sizeof(bad_rings[0]); i++) {
		c = ctl_of(CTL_CONNECT); c.ring = bad_rings[i]; ctl_put(&c);
		REJECT(dec_ctl);
		c = ctl_of(CTL_ACCEPT); c.ring = bad_rings[i]; ctl_put(&c);
		REJECT(dec_ctl);
		c = ctl_of(CTL_RING); c.ring = bad_rings[i]; ctl_put(&c);
		REJECT(dec_ctl);
	}
	/* RING: both ids needed; RING_ACK: no key */
	c = ctl_of(CTL_RING); c.dst = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_RING); c.src = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_RING_ACK); c.rkey = 1; ctl_put(&c); REJECT(dec_ctl);
	/* RESUME: both ids, a ring size, no flag but HAVE_FIN, no key; its
	 * positions come back as they went */
	c = ctl_of(CTL_RESUME); c.dst = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_RESUME); c.src = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_RESUME); c.ring = 3; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_RESUME); c.reason = 2; ctl_put(&c); REJECT(dec_ctl);
	/* (RESUME's positions and keys, REKEY's rings: resume-and-rekey-carry-ring-keys.c) */
	/* PLACED: both ids, an address and a key */
	c = ctl_of(CTL_PLACED); c.dst = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_PLACED); c.src = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_PLACED); c.val = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_PLACED); c.rkey = 0; ctl_put(&c); REJECT(dec_ctl);
	/* ACCEPT: both ids needed */
	c = ctl_of(CTL_ACCEPT); c.dst = 0; ctl_put(&c); REJECT(dec_ctl);
	c = ctl_of(CTL_ACCEPT); c.src = 0; ctl_put(&c); REJECT(dec_ctl);
	/* REFUSE: destination and a known reason */
	c = ctl_of(CTL_REFUSE); c.dst = 0; ctl_put(&c); REJECT(dec_ctl);
	uint16_t reasons[] = {0, REFUSE_NO_SPACE + 1, 0xffff};
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		c = ctl_of(CTL_REFUSE); c.reason = reasons[i]; ctl_put(&c);
		REJECT(dec_ctl);
	}
	/* FIN, RESET, CREDIT, RING_ACK: a destination */
	uint8_t need_dst[] = {CTL_FIN, CTL_RESET, CTL_CREDIT, CTL_RING_ACK};
	for (size_t i = 0; i < sizeof(need_dst); i++) {
		c = ctl_of(need_dst[i]); c.dst = 0; ctl_put(&c);
		REJECT(dec_ctl);
	}
}

static void ctl_cases(void)
{
	ctl_accept_cases();
	ctl_reject_cases();
}

static void ctl_reserved_cases(void)
{
	for (int byte = 60; byte < 64; byte++) {
		struct wire_ctl c = ctl_of(CTL_FIN);
		ctl_put(&c);
		cb[byte] = 0x01;
		REJECT(dec_ctl);
	}
}

/* ---- addresses ---- */

static void addr_cases(void)
{
	union sockaddr_any sa, back;
	uint8_t raw[16], fam = 0;
	uint16_t port = 0;

	memset(&sa, 0, sizeof(sa));
	sa.in.sin_family = AF_INET;
	sa.in.sin_port = htons(18515);
	sa.in.sin_addr.s_addr = htonl(0x0ac70002);
	wire_addr_put(raw, &fam, &port, &sa);
	CHECK_EQ(fam, AF_INET);
	CHECK_EQ(port, 18515);
	CHECK(raw[0] == 10 && raw[1] == 199 && raw[2] == 0 && raw[3] == 2);
	for (int i = 4; i < 16; i++)
		CHECK_EQ(raw[i], 0);
	wire_addr_get(&back, fam, raw, port);
	CHECK_EQ(back.in.sin_family, AF_INET);
	CHECK_EQ(back.in.sin_port, sa.in.sin_port);
	CHECK_EQ(back.in.sin_addr.s_addr, sa.in.sin_addr.s_addr);

	memset(&sa, 0, sizeof(sa));
	sa.in6.sin6_family = AF_INET6;
	sa.in6.sin6_port = htons(1);
	for (int i = 0; i < 16; i++)
		sa.in6.sin6_addr.s6_addr[i] = (uint8_t)(0xf0 + i);
	wire_addr_put(raw, &fam, &port, &sa);
	CHECK_EQ(fam, AF_INET6);
	CHECK_EQ(port, 1);
	wire_addr_get(&back, fam, raw, port);
	CHECK_EQ(back.in6.sin6_family, AF_INET6);
	CHECK_EQ(back.in6.sin6_port, htons(1));
	CHECK(memcmp(&back.in6.sin6_addr, &sa.in6.sin6_addr, 16) == 0);
}

/* ---- random and mutated bytes ---- */

static void fuzz_one(uint8_t *buf, size_t len)
{
	const char *why;
	struct wire_frame f;
	struct wire_hello h;
	struct wire_ctl c;
	uint8_t re[WIRE_CTL_LEN];
	int r;

	if (len >= WIRE_FRAME_LEN) {
		why = (const char *)1;
		r = wire_frame_decode(buf, &f, &why);
		CHECK(r == 0 || r == -1);
		CHECK((r == 0) == (why == NULL));
		if (r == 0) {
			wire_frame_encode(&f, re);
			CHECK(memcmp(re, buf, WIRE_FRAME_LEN) == 0);
		}
	}
	why = (const char *)1;
	r = wire_hello_decode(buf, len, &h, &why);
	CHECK(r == 0 || r == -1);
	CHECK((r == 0) == (why == NULL));
	if (r == 0) {
		CHECK_EQ(len, WIRE_HELLO_LEN);
		CHECK_EQ(h.magic, WIRE_MAGIC);
		CHECK_EQ(h.version, WIRE_VERSION);
		CHECK(h.node_id != 0);
	}
	why = (const char *)1;
	r = wire_ctl_decode(buf, len, &c, &why);
	CHECK(r == 0 || r == -1);
	CHECK((r == 0) == (why == NULL));
	if (r == 0) {
		CHECK_EQ(len, WIRE_CTL_LEN);
		CHECK(c.op >= 1 && c.op <= CTL_MAX);
		if (c.op == CTL_CONNECT || c.op == CTL_ACCEPT)
			CHECK(c.ring >= ARENA_MIN_RING && c.ring <= ARENA_MAX_RING &&
			      (c.ring & (c.ring - 1)) == 0);
		if (c.op == CTL_CONNECT || c.op == CTL_PING || c.op == CTL_UNLISTEN)
			CHECK(c.op != CTL_CONNECT ? c.dst == 0 : 1);
		else
			CHECK(c.dst != 0);
	}
}

static void fuzz_cases(void)
{
	uint8_t buf[WIRE_CTL_LEN + 8];
	/* pure random bytes and lengths */
	for (int i = 0; i < 100000; i++) {
		size_t len = (size_t)(t_splitmix(&rng) % sizeof(buf));
		if (i % 3 == 0)
			len = WIRE_HELLO_LEN;
		else if (i % 3 == 1)
			len = WIRE_CTL_LEN;
		for (size_t k = 0; k < sizeof(buf); k++)
			buf[k] = (uint8_t)t_splitmix(&rng);
		/* random bytes almost never hit a valid type or op: help them */
		if (i & 1) {
			buf[0] = (uint8_t)(t_splitmix(&rng) % 8);
			buf[1] = (i & 2) ? 0 : buf[1];
			buf[2] = buf[3] = (i & 4) ? 0 : buf[2];
		}
		fuzz_one(buf, len);
	}
	/* valid encodings with a few bits flipped */
	for (int i = 0; i < 100000; i++) {
		struct wire_ctl c = ctl_of((uint8_t)(1 + t_splitmix(&rng) % CTL_MAX));
		struct wire_hello h = {.magic = WIRE_MAGIC, .version = WIRE_VERSION,
				       .node_id = t_splitmix(&rng), .max_write = WIRE_MAX_WRITE};
		struct wire_frame f = {.type = (uint8_t)(1 + i % 3), .len = 24};
		size_t len;
		memset(buf, 0, sizeof(buf));
		switch (i % 3) {
		case 0:
			wire_hello_encode(&h, buf);
			len = WIRE_HELLO_LEN;
			break;
		case 1:
			wire_ctl_encode(&c, buf);
			len = WIRE_CTL_LEN;
			break;
		default:
			f.len = f.type == FR_SEND ? WIRE_CTL_LEN : f.type == FR_HELLO ? WIRE_HELLO_LEN : 1000;
			wire_frame_encode(&f, buf);
			len = WIRE_FRAME_LEN;
		}
		int flips = 1 + (int)(t_splitmix(&rng) % 3);
		for (int k = 0; k < flips; k++) {
			uint64_t bit = t_splitmix(&rng) % (len * 8);
			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		fuzz_one(buf, len);
	}
}

int main(void)
{
	frame_cases();
	hello_cases();
	reserved_cases();
	ctl_cases();
	ctl_reserved_cases();
	addr_cases();
	fuzz_cases();
	printf("ok\n");
	return T_PASS;
}
