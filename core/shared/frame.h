/*
 * frame.h - the wire protocol between hubs (see rshare-protocol(7)).
 *
 * Transport independent part: a link starts with a HELLO each way (magic,
 * version, node id); after that every message is either a write with
 * immediate (payload placed in the destination socket's receive ring, imm =
 * destination socket id, raddr = ring position) or a SEND carrying one
 * 64-byte control message (CONNECT, ACCEPT, REFUSE, FIN, RESET, CREDIT),
 * each naming its destination socket.
 *
 * Soft transport framing: each message on the link's TCP stream is a
 * 24-byte frame header followed by len bytes of payload.
 * All integers are big-endian on the wire.
 */
#ifndef RSHARE_FRAME_H
#define RSHARE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"

#define WIRE_MAGIC 0x52534852u     /* "RSHR" */
#define WIRE_VERSION 6
#define WIRE_HELLO_LEN 24
#define WIRE_CTL_LEN 64
#define WIRE_FRAME_LEN 24
#define WIRE_MAX_WRITE (64u << 10) /* largest single write with immediate */
/* soft: a write's raddr with this bit names the writer's socket in imm, not
 * ours: one sent before our ACCEPT reached the writer (early.c) */
#define WIRE_BY_SRC (1ull << 63)

enum wire_type { FR_HELLO = 1, FR_WRITE_IMM = 2, FR_SEND = 3 };

struct wire_frame {
	uint8_t type;
	uint8_t flags;
	uint32_t len;    /* payload bytes after the header */
	uint32_t imm;    /* FR_WRITE_IMM: destination socket (tag_imm) */
	uint32_t rkey;   /* registered region key (0 on soft) */
	uint64_t raddr;  /* FR_WRITE_IMM: ring position of the first byte */
};

struct wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint64_t node_id;
	uint32_t max_write;
	uint32_t rsvd;
};

enum wire_op {
	CTL_CONNECT = 1, /* dst 0; port, addr_a = destination, addr_b/src_port = source;
			    reason: CONNECT_EARLY or 0 */
	CTL_ACCEPT = 2,  /* dst = connecting socket; src = accepted socket;
			    reason = connections the listener may still queue
			    (its backlog's room, at most 65535) */
	CTL_REFUSE = 3,  /* dst = connecting socket; reason */
	CTL_FIN = 4,     /* dst: no more data after what was written */
	CTL_RESET = 5,   /* dst: connection aborted */
	CTL_CREDIT = 6,  /* dst: val = receive ring head, bytes consumed */
	CTL_PING = 7,    /* dst 0: keepalive of an idle link, nothing to answer */
	CTL_RING = 8,    /* dst: the sender's receive ring changes: ring = new size,
			    val/rkey = its address and key (verbs) */
	CTL_RING_ACK = 9, /* dst: val = the stream position from which writes
			     went to the new ring (answers RING) */
	CTL_RESUME = 10, /* dst: a connection of a lost link goes on over this one:
			    val = the sender's receive tail (bytes placed),
			    addr_a = its send ring's completed position and its
			    receive ring's head, addr_b = the position from which
			    it writes to the receiver's ring of size ring
			    (wire_resume_put), reason = RESUME_HAVE_FIN when it
			    has the receiver's FIN; on verbs, from a hub that
			    restarted or took over from a dead one since the
			    link was lost, rkey and the end of addr_b = its
			    receive ring's key and address, which changed
			    (wire_resume_ring_put); else rkey 0 */
	CTL_PLACED = 11, /* dst (verbs): the sender's socket takes the end of each of
			    the receiver's writes at val (8 bytes, key rkey), as
			    a placed tail (arena.h) after the write's bytes */
	CTL_REKEY = 12,  /* dst (verbs): sent right before a RESUME while the
			    sender's receive ring changes size (a RING not
			    answered, or bytes before the switch not placed):
			    the two rings the receiver may write to, each as
			    its size, address and key: ring/val/rkey the new
			    one, addr_a the old one (wire_rekey_put) */
	CTL_UNLISTEN = 13, /* dst 0; port: a listener of that port stopped (the
			      receiver answers its next connect there only
			      when the ACCEPT comes: early.c) */
	CTL_MAX = CTL_UNLISTEN
};

enum { RESUME_HAVE_FIN = 1 };
/* CONNECT's reason: its hub answered the program already (early.c): the
 * listener queues it even with a full backlog, and writes that name the
 * connecting socket may follow it (WIRE_BY_SRC) */
enum { CONNECT_EARLY = 1 };

enum wire_refuse { REFUSE_NO_LISTENER = 1, REFUSE_NO_SPACE = 2 };

struct wire_ctl {
	uint8_t op;
	uint8_t family;    /* AF_INET or AF_INET6 for addr_a/addr_b */
	uint16_t port;     /* CONNECT: destination port */
	uint32_t dst;      /* destination socket (tag_imm form), 0 for CONNECT */
	uint32_t src;      /* sending socket (tag_imm form) */
	uint32_t ring;     /* CONNECT/ACCEPT/RING: sender's receive ring size */
	uint64_t val;      /* CREDIT: receive ring head; CONNECT/ACCEPT: the
			      sender's receive ring address (verbs; 0 on soft) */
	uint8_t addr_a[16];
	uint8_t addr_b[16];
	uint16_t src_port;
	uint16_t reason;
	uint32_t rkey;     /* CONNECT/ACCEPT/RING: key of the sender's receive ring (verbs) */
};

void wire_frame_encode(const struct wire_frame *f, uint8_t out[WIRE_FRAME_LEN]);
/* 0 when the header is well formed, -1 (with *why set) when not. */
int wire_frame_decode(const uint8_t in[WIRE_FRAME_LEN], struct wire_frame *f, const char **why);

void wire_hello_encode(const struct wire_hello *h, uint8_t out[WIRE_HELLO_LEN]);
int wire_hello_decode(const uint8_t *in, size_t len, struct wire_hello *h, const char **why);

void wire_ctl_encode(const struct wire_ctl *c, uint8_t out[WIRE_CTL_LEN]);
int wire_ctl_decode(const uint8_t *in, size_t len, struct wire_ctl *c, const char **why);

/* Helpers between wire addresses and socket addresses. */
void wire_addr_put(uint8_t out[16], uint8_t *family, uint16_t *port, const union sockaddr_any *sa);
void wire_addr_get(union sockaddr_any *sa, uint8_t family, const uint8_t in[16], uint16_t port);
/* An IPv4-mapped IPv6 address becomes plain IPv4, so that links match. */
void wire_addr_unmap(union sockaddr_any *a);
const char *wire_op_name(unsigned op);
/* RESUME's positions in addr_a and addr_b, big-endian. */
void wire_resume_put(struct wire_ctl *c, uint64_t tx_done, uint64_t rx_head, uint64_t switch_at);
void wire_resume_get(const struct wire_ctl *c, uint64_t *tx_done, uint64_t *rx_head, uint64_t *switch_at);
/* RESUME's new receive ring address (the end of addr_b) and key (rkey): the
 * key, 0 when the ring did not change. */
void wire_resume_ring_put(struct wire_ctl *c, uint64_t raddr, uint32_t rkey);
uint32_t wire_resume_ring_get(const struct wire_ctl *c, uint64_t *raddr);
/* REKEY's two rings: [0] the new one, [1] the old one. */
struct wire_ring {
	uint64_t raddr;
	uint32_t rkey, size;
};
void wire_rekey_put(struct wire_ctl *c, const struct wire_ring r[2]);
void wire_rekey_get(const struct wire_ctl *c, struct wire_ring r[2]);

#endif
