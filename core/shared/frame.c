/*
 * frame.c - encoder and validating decoder for the hub-to-hub wire format.
 *
 * The decoders are the first code that sees bytes from another node, so
 * they accept exactly the documented layouts and nothing else: unknown
 * types and ops, wrong lengths, bad families and impossible sizes are
 * rejected with a reason the hub logs before it drops the link.
 */
#include "frame.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

void wire_frame_encode(const struct wire_frame *f, uint8_t out[WIRE_FRAME_LEN])
{
	out[0] = f->type;
	out[1] = f->flags;
	put16(out + 2, 0);
	put32(out + 4, f->len);
	put32(out + 8, f->imm);
	put32(out + 12, f->rkey);
	put64(out + 16, f->raddr);
}

int wire_frame_decode(const uint8_t in[WIRE_FRAME_LEN], struct wire_frame *f, const char **why)
{
	f->type = in[0];
	f->flags = in[1];
	f->len = get32(in + 4);
	f->imm = get32(in + 8);
	f->rkey = get32(in + 12);
	f->raddr = get64(in + 16);
	*why = NULL;
	if (f->flags || get16(in + 2))
		*why = "reserved frame bits set";
	else if (f->type == FR_HELLO && f->len != WIRE_HELLO_LEN)
		*why = "hello frame of wrong length";
	else if (f->type == FR_SEND && f->len != WIRE_CTL_LEN)
		*why = "control frame of wrong length";
	else if (f->type == FR_WRITE_IMM && (f->len == 0 || f->len > WIRE_MAX_WRITE))
		*why = "write frame of impossible length";
	else if (f->type < FR_HELLO || f->type > FR_SEND)
		*why = "unknown frame type";
	return *why ? -1 : 0;
}

void wire_hello_encode(const struct wire_hello *h, uint8_t out[WIRE_HELLO_LEN])
{
	memset(out, 0, WIRE_HELLO_LEN);
	put32(out, h->magic);
	put16(out + 4, h->version);
	put16(out + 6, h->flags);
	put64(out + 8, h->node_id);
	put32(out + 16, h->max_write);
}

int wire_hello_decode(const uint8_t *in, size_t len, struct wire_hello *h, const char **why)
{
	*why = NULL;
	if (len != WIRE_HELLO_LEN) {
		*why = "hello of wrong length";
		return -1;
	}
	h->magic = get32(in);
	h->version = get16(in + 4);
	h->flags = get16(in + 6);
	h->node_id = get64(in + 8);
	h->max_write = get32(in + 16);
	h->rsvd = get32(in + 20);
	if (h->magic != WIRE_MAGIC)
		*why = "bad magic: peer is not an rshare hub";
	else if (h->rsvd)
		*why = "reserved hello bits set";
	else if (h->version != WIRE_VERSION)
		*why = "unsupported protocol version";
	else if (h->node_id == 0)
		*why = "node id 0";
	else if (h->max_write < 4096)
		*why = "max write below 4096";
	return *why ? -1 : 0;
}

void wire_ctl_encode(const struct wire_ctl *c, uint8_t out[WIRE_CTL_LEN])
{
	memset(out, 0, WIRE_CTL_LEN);
	out[0] = c->op;
	out[1] = c->family;
	put16(out + 2, c->port);
	put32(out + 4, c->dst);
	put32(out + 8, c->src);
	put32(out + 12, c->ring);
	put64(out + 16, c->val);
	memcpy(out + 24, c->addr_a, 16);
	memcpy(out + 40, c->addr_b, 16);
	put16(out + 56, c->src_port);
	put16(out + 58, c->reason);
	put32(out + 60, c->rkey);
}

static int ring_size_ok(uint32_t r)
{
	return r >= ARENA_MIN_RING && r <= ARENA_MAX_RING && (r & (r - 1)) == 0;
}

/* ---- what each op must hold ---- */

static const char *connect_why(const struct wire_ctl *c)
{
	if (c->family != AF_INET && c->family != AF_INET6)
		return "CONNECT with unknown address family";
	return c->reason & ~CONNECT_EARLY ? "CONNECT with unknown flags" : NULL;
}

static const char *refuse_why(const struct wire_ctl *c)
{
	return c->reason != REFUSE_NO_LISTENER && c->reason != REFUSE_NO_SPACE ? "REFUSE with unknown reason" : NULL;
}

static const char *resume_why(const struct wire_ctl *c)
{
	return c->reason & ~RESUME_HAVE_FIN ? "RESUME with unknown flags" : NULL;
}

static const char *placed_why(const struct wire_ctl *c)
{
	return !c->val || !c->rkey ? "PLACED without an address" : NULL;
}

static const char *rekey_why(const struct wire_ctl *c)
{
	struct wire_ring r[2];
	wire_rekey_get(c, r);
	if (!ring_size_ok(r[0].size) || !ring_size_ok(r[1].size) || r[0].size == r[1].size)
		return "REKEY with impossible ring sizes";
	if (!r[0].raddr || !r[0].rkey || !r[1].raddr || !r[1].rkey)
		return "REKEY without an address";
	return NULL;
}

enum { IDS_DST = 1, IDS_SRC = 2, IDS_NO_DST = 4 };

/* Per op: the socket ids it needs (IDS_*: dst, src, a dst of 0) and what
 * it is called when they are wrong; what a bad ring size is called where
 * ring is one; whether it may carry a memory key (verbs); its own checks.
 * An op without ids_bad is unknown. */
static const struct op_rule {
	uint8_t ids, keyed;
	const char *ids_bad, *ring_bad;
	const char *(*more)(const struct wire_ctl *c);
} op_rules[CTL_MAX + 1] = {
	[CTL_CONNECT] = {IDS_NO_DST | IDS_SRC, 1, "CONNECT with bad socket ids", "CONNECT with impossible ring size", connect_why},
	[CTL_ACCEPT] = {IDS_DST | IDS_SRC, 1, "ACCEPT with bad socket ids", "ACCEPT with impossible ring size", NULL},
	[CTL_REFUSE] = {IDS_DST, 0, "REFUSE without destination", NULL, refuse_why},
	[CTL_FIN] = {IDS_DST, 0, "control message without destination", NULL, NULL},
	[CTL_RESET] = {IDS_DST, 0, "control message without destination", NULL, NULL},
	[CTL_CREDIT] = {IDS_DST, 0, "control message without destination", NULL, NULL},
	[CTL_PING] = {IDS_NO_DST, 0, "PING with a destination", NULL, NULL},
	[CTL_RING] = {IDS_DST | IDS_SRC, 1, "RING with bad socket ids", "RING with impossible ring size", NULL},
	[CTL_RING_ACK] = {IDS_DST, 0, "control message without destination", NULL, NULL},
	[CTL_RESUME] = {IDS_DST | IDS_SRC, 1, "RESUME with bad socket ids", "RESUME with impossible ring size", resume_why},
	[CTL_PLACED] = {IDS_DST | IDS_SRC, 1, "PLACED with bad socket ids", NULL, placed_why},
	[CTL_REKEY] = {IDS_DST | IDS_SRC, 1, "REKEY with bad socket ids", NULL, rekey_why},
	[CTL_UNLISTEN] = {IDS_NO_DST, 0, "UNLISTEN with a destination", NULL, NULL},
};

int wire_ctl_decode(const uint8_t *in, size_t len, struct wire_ctl *c, const char **why)
{
	const struct op_rule *r;
	*why = NULL;
	if (len != WIRE_CTL_LEN) {
		*why = "control message of wrong length";
		return -1;
	}
	c->op = in[0];
	c->family = in[1];
	c->port = get16(in + 2);
	c->dst = get32(in + 4);
	c->src = get32(in + 8);
	c->ring = get32(in + 12);
	c->val = get64(in + 16);
	memcpy(c->addr_a, in + 24, 16);
	memcpy(c->addr_b, in + 40, 16);
	c->src_port = get16(in + 56);
	c->reason = get16(in + 58);
	c->rkey = get32(in + 60);
	r = c->op <= CTL_MAX && op_rules[c->op].ids_bad ? &op_rules[c->op] : NULL;
	if (c->rkey && !(r && r->keyed))
		*why = "reserved control bits set";
	else if (!r)
		*why = "unknown control op";
	else if (((r->ids & IDS_DST) && !c->dst) || ((r->ids & IDS_SRC) && !c->src) || ((r->ids & IDS_NO_DST) && c->dst))
		*why = r->ids_bad;
	else if (r->ring_bad && !ring_size_ok(c->ring))
		*why = r->ring_bad;
	else if (r->more)
		*why = r->more(c);
	return *why ? -1 : 0;
}

void wire_addr_put(uint8_t out[16], uint8_t *family, uint16_t *port, const union sockaddr_any *sa)
{
	memset(out, 0, 16);
	if (sa->sa.sa_family == AF_INET6) {
		memcpy(out, &sa->in6.sin6_addr, 16);
		*family = AF_INET6;
		*port = ntohs(sa->in6.sin6_port);
	} else {
		memcpy(out, &sa->in.sin_addr, 4);
		*family = AF_INET;
		*port = ntohs(sa->in.sin_port);
	}
}

void wire_addr_get(union sockaddr_any *sa, uint8_t family, const uint8_t in[16], uint16_t port)
{
	memset(sa, 0, sizeof(*sa));
	if (family == AF_INET6) {
		sa->in6.sin6_family = AF_INET6;
		memcpy(&sa->in6.sin6_addr, in, 16);
		sa->in6.sin6_port = htons(port);
	} else {
		sa->in.sin_family = AF_INET;
		memcpy(&sa->in.sin_addr, in, 4);
		sa->in.sin_port = htons(port);
	}
}

void wire_addr_unmap(union sockaddr_any *a)
{
	if (a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr)) {
		struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = a->in6.sin6_port};
		memcpy(&in.sin_addr, (uint8_t *)&a->in6.sin6_addr + 12, 4);
		memset(a, 0, sizeof(*a));
		a->in = in;
	}
}

const char *wire_op_name(unsigned op)
{
	static const char *n[] = {"?", "CONNECT", "ACCEPT", "REFUSE", "FIN", "RESET", "CREDIT", "PING", "RING", "RING_ACK", "RESUME", "PLACED", "REKEY", "UNLISTEN"};
	return op <= CTL_MAX ? n[op] : "?";
}

void wire_resume_put(struct wire_ctl *c, uint64_t tx_done, uint64_t rx_head, uint64_t switch_at)
{
	put64(c->addr_a, tx_done);
	put64(c->addr_a + 8, rx_head);
	put64(c->addr_b, switch_at);
}

void wire_resume_get(const struct wire_ctl *c, uint64_t *tx_done, uint64_t *rx_head, uint64_t *switch_at)
{
	*tx_done = get64(c->addr_a);
	*rx_head = get64(c->addr_a + 8);
	*switch_at = get64(c->addr_b);
}

void wire_resume_ring_put(struct wire_ctl *c, uint64_t raddr, uint32_t rkey)
{
	put64(c->addr_b + 8, raddr);
	c->rkey = rkey;
}

uint32_t wire_resume_ring_get(const struct wire_ctl *c, uint64_t *raddr)
{
	*raddr = get64(c->addr_b + 8);
	return c->rkey;
}

void wire_rekey_put(struct wire_ctl *c, const struct wire_ring r[2])
{
	c->ring = r[0].size;
	c->val = r[0].raddr;
	c->rkey = r[0].rkey;
	put64(c->addr_a, r[1].raddr);
	put32(c->addr_a + 8, r[1].rkey);
	put32(c->addr_a + 12, r[1].size);
}

void wire_rekey_get(const struct wire_ctl *c, struct wire_ring r[2])
{
	r[0] = (struct wire_ring){.raddr = c->val, .rkey = c->rkey, .size = c->ring};
	r[1] = (struct wire_ring){.raddr = get64(c->addr_a), .rkey = get32(c->addr_a + 8), .size = get32(c->addr_a + 12)};
}
