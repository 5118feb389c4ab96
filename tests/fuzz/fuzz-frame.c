/*
 * fuzz-frame - libFuzzer target for the hub-to-hub wire decoders (core/frame.c).
 *
 * The decoders are the first code that sees bytes from another node.  Every
 * input is offered to all three of them:
 *   wire_frame_decode  its first 24 bytes (a soft transport frame header)
 *   wire_hello_decode  the whole input (accepts only 24 bytes)
 *   wire_ctl_decode    the whole input (accepts only 64 bytes)
 * plus, from byte 24 on, each 24- and 64-byte window, so that a long input
 * exercises several well-formed messages.  Whenever a decoder accepts, the
 * message is encoded again and must come out byte for byte identical to
 * the input, and decoding that must give the same fields; otherwise abort().
 * The address helpers (wire_addr_get/put/unmap) get a round trip too.
 *
 * Seeds: tests/fuzz/corpus/fuzz-frame/ (a HELLO, frames of each type, each
 * control op).  Build and run: make fuzz (build/fuzz/fuzz-frame).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "frame.h"

#define CHECK(c, what)                                                          \
	do {                                                                    \
		if (!(c)) {                                                     \
			fprintf(stderr, "fuzz-frame: %s: %s\n", what, #c);      \
			abort();                                                \
		}                                                               \
	} while (0)

static void frame(const uint8_t *in)
{
	struct wire_frame f, g;
	const char *why;
	uint8_t out[WIRE_FRAME_LEN];
	if (wire_frame_decode(in, &f, &why) < 0) {
		CHECK(why != NULL, "frame rejected without a reason");
		return;
	}
	CHECK(why == NULL, "frame accepted with a reason");
	CHECK(f.type >= FR_HELLO && f.type <= FR_SEND, "frame type");
	CHECK(f.type != FR_WRITE_IMM || (f.len > 0 && f.len <= WIRE_MAX_WRITE), "write length");
	wire_frame_encode(&f, out);
	CHECK(memcmp(out, in, WIRE_FRAME_LEN) == 0, "frame round trip");
	CHECK(wire_frame_decode(out, &g, &why) == 0, "re-encoded frame rejected");
	CHECK(f.type == g.type && f.flags == g.flags && f.len == g.len && f.imm == g.imm &&
		      f.rkey == g.rkey && f.raddr == g.raddr,
	      "frame fields");
}

static void hello(const uint8_t *in, size_t len)
{
	struct wire_hello a, b;
	const char *why;
	uint8_t out[WIRE_HELLO_LEN];
	if (wire_hello_decode(in, len, &a, &why) < 0) {
		CHECK(why != NULL, "hello rejected without a reason");
		return;
	}
	CHECK(len == WIRE_HELLO_LEN && why == NULL, "hello accepted");
	CHECK(a.magic == WIRE_MAGIC && a.version == WIRE_VERSION && a.node_id && a.max_write >= 4096,
	      "hello fields");
	wire_hello_encode(&a, out);
	CHECK(memcmp(out, in, WIRE_HELLO_LEN) == 0, "hello round trip");
	CHECK(wire_hello_decode(out, sizeof(out), &b, &why) == 0, "re-encoded hello rejected");
	CHECK(memcmp(&a, &b, sizeof(a)) == 0, "hello fields");
}

static void ctl(const uint8_t *in, size_t len)
{
	struct wire_ctl a, b;
	const char *why;
	uint8_t out[WIRE_CTL_LEN];
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (wire_ctl_decode(in, len, &a, &why) < 0) {
		CHECK(why != NULL, "control message rejected without a reason");
		return;
	}
	CHECK(len == WIRE_CTL_LEN && why == NULL, "control message accepted");
	CHECK(a.op >= CTL_CONNECT && a.op <= CTL_MAX, "control op");
	CHECK(a.op == CTL_CONNECT ? a.dst == 0 && a.src != 0
	      : a.op == CTL_PING || a.op == CTL_UNLISTEN ? a.dst == 0 : a.dst != 0,
	      "control socket ids");
	CHECK(strcmp(wire_op_name(a.op), "?") != 0, "op name");
	wire_ctl_encode(&a, out);
	CHECK(memcmp(out, in, WIRE_CTL_LEN) == 0, "control round trip");
	CHECK(wire_ctl_decode(out, sizeof(out), &b, &why) == 0, "re-encoded control message rejected");
	CHECK(memcmp(&a, &b, sizeof(a)) == 0, "control fields");
	if (a.op == CTL_CONNECT) {
		/* the addresses of a CONNECT go through wire_addr_get/put as in the hub */
		union sockaddr_any sa;
		uint8_t back[16], fam;
		uint16_t port;
		wire_addr_get(&sa, a.family, a.addr_a, a.port);
		wire_addr_put(back, &fam, &port, &sa);
		CHECK(fam == a.family && port == a.port, "address family/port round trip");
		CHECK(memcmp(back, a.addr_a, fam == AF_INET6 ? 16 : 4) == 0, "address round trip");
		wire_addr_unmap(&sa);
		CHECK(sa.sa.sa_family == AF_INET || sa.sa.sa_family == AF_INET6, "unmapped family");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= WIRE_FRAME_LEN)
		frame(data);
	hello(data, size);
	ctl(data, size);
	/* a stream of messages: every window after the first frame header */
	for (size_t off = WIRE_FRAME_LEN; off < size && off < 4096; off += 8) {
		if (size - off >= WIRE_FRAME_LEN) {
			frame(data + off);
			hello(data + off, WIRE_HELLO_LEN);
		}
		if (size - off >= WIRE_CTL_LEN)
			ctl(data + off, WIRE_CTL_LEN);
	}
	return 0;
}
