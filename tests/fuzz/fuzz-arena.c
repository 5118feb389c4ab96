/*
 * fuzz-arena - libFuzzer target for what a process can do to its hub
 * through the shared arena: scribble over slot headers, ring counters,
 * doorbell bits, pending_ops and the arena header, then ring.  The hub must
 * trust none of it (core/arena.h): no crash, no sanitizer report, and no
 * post that reaches outside the socket's own ring.
 *
 * Every input starts from the same hub state (tests/fuzz/fuzz_hub.h): one
 * pool, process A listening on 0.0.0.0:80 with two accepted connections
 * (one on a fake soft link from 10.0.0.2, one on a fake verbs link from
 * 10.0.0.3), and process B with two connections it opened to those peers
 * (answered by an ACCEPT from the peer); all rings 16 KiB.  Then the input
 * runs, 16-byte steps: op, idx, a, b, x (u32), v (u64), host order:
 *   op % 21:
 *   0/1  write v (8 bytes) / x (4 bytes) into the slot of socket[idx] at
 *        offset (a | b << 8) mod the slot size
 *   2    write v into the arena header at offset (a | b << 8) mod its size
 *        (nslots, slots_off, data_off, doorbell words, hub_sleeping, the
 *        first request cells: each process has one, and its requests are
 *        answered with the doorbells);
 *        with FUZZ_ARENA_KEEP_LAYOUT set in the environment, the layout
 *        fields (magic .. data_off) are left alone, to look past a known bug
 *        there (tests/fuzz/crashes/fuzz-arena-slots-off)
 *   3    ring counter a % 4 (tx.tail, tx.head, rx.head, rx.tail) of
 *        socket[idx] := v, or (a & 4) its value + (int32)x
 *   4    doorbell word a % 64 |= v, then hub_test_doorbells()
 *   5    pending_ops |= x and the doorbell bit of slot b (a & 1: of
 *        socket[idx]), then hub_test_doorbells()
 *   6    hsock_tx (a & 1: hsock_credit) of socket[idx] directly
 *   7    the peer returns credit: tx_posted (a & 1), peer_head + x (a & 2), or v
 *   8    deliver x % 16 + 1 completions
 *   9    the peer writes 1 + x % 8192 bytes to socket[idx] at rx_expect (a & 1: at v)
 *   10   fault mode a % 5 (ok, EAGAIN, EIO, link_connect fails, reg_mr fails)
 *   11   link[idx] writable
 *   12   process[b] asks RELEASE / SHUTDOWN(SHUT_WR) / ACCEPT (a % 3) of socket[idx]
 *   13   the peer sends FIN (a & 1: RESET) to socket[idx]
 *   14   the peer connects to the listener on link[idx] (a new slot)
 *   15   a well-behaved process writes x % 40000 bytes / reads (a & 1), rings
 *   16   process[b] asks LISTEN (a & 1) or CONNECT to 10.0.0.(2 + b % 2):80
 *   17   process[b] is gone   18 link[idx] fails   19 settle
 *   20   the peer accepts the CONNECT the hub sent last (idx picks)
 * Checks: the fake posts (every iov inside the socket's tx ring and the
 * pool's tx half; raddr inside the peer's ring; writes within credit; valid
 * control messages), hub_rx_target's iovs inside the socket's rx ring, every
 * slot pointer inside the slot array the hub laid out, holder counts, and
 * no socket left once every process and link is gone.
 *
 * Seeds: tests/fuzz/corpus/fuzz-arena/.
 */
#include "fuzz_hub.h"

#define STEP 16

static int keep_layout;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	keep_layout = getenv("FUZZ_ARENA_KEEP_LAYOUT") != NULL;
	fh_init();
	return 0;
}

static struct hsock *last_sock(struct proc *pr)
{
	return pr->nsocks ? fh.h->socks[pr->socks[pr->nsocks - 1]] : NULL;
}

static void req(struct proc *pr, uint32_t op, struct hsock *s, int arg, uint32_t ip, uint16_t port)
{
	struct msg_req q = {.op = op, .arg = arg, .rxsize = 16384, .txsize = 16384};
	if (s) {
		q.slot = s->slot;
		q.gen = s->gen;
	}
	q.addr.in.sin_family = AF_INET;
	q.addr.in.sin_port = htons(port);
	q.addr.in.sin_addr.s_addr = htonl(ip);
	hub_test_request(fh.h, pr, &q);
}

static void peer_connect(struct link *l, uint32_t src, uint64_t raddr)
{
	struct wire_ctl c = {.op = CTL_CONNECT, .family = AF_INET, .port = 80, .src = src,
			     .ring = 16384, .val = raddr, .src_port = 5000};
	if (!l || l->state != LINK_UP)
		return;
	c.addr_a[0] = 10, c.addr_a[3] = 1;
	c.addr_b[0] = 10, c.addr_b[3] = (uint8_t)(l->x.peer_addr.in.sin_addr.s_addr >> 24);
	c.rkey = raddr ? 9 : 0;
	fh_ctl(l, &c);
}

/* the peer accepts the k-th newest CONNECT the hub sent */
static void peer_accept(uint32_t k, uint32_t src)
{
	int i = fh_sent_idx(NULL, CTL_CONNECT, k);
	struct wire_ctl c = {.op = CTL_ACCEPT, .src = src, .ring = 16384};
	struct link *l;
	if (i < 0)
		return;
	l = fh.sent_link[i];
	c.dst = fh.sent[i].src;
	if (!(l->x.xp->ops->flags & XP_POSITIONAL)) {
		c.val = 0x7f0000200000ull + (uint64_t)src * 0x10000;
		c.rkey = 10;
	}
	memmove(fh.sent + i, fh.sent + i + 1, (fh.nsent - i - 1) * sizeof(fh.sent[0]));
	memmove(fh.sent_link + i, fh.sent_link + i + 1, (fh.nsent - i - 1) * sizeof(fh.sent_link[0]));
	fh.nsent--;
	if (l->state == LINK_UP)
		fh_ctl(l, &c);
}

static void setup(void)
{
	struct proc *a, *b;
	struct hsock *ls;
	struct link *l1, *l2;
	fh_begin(HUB_SOFT, 1, 2);
	fh.heavy = 1000;
	a = fh.procs[0];
	b = fh.procs[1];
	l1 = fh_new_link(0, 2);
	l2 = fh_new_link(1, 3);
	req(a, MSG_LISTEN, NULL, 16, 0, 80);
	ls = last_sock(a);
	peer_connect(l1, tag_imm(0x100, 1), 0);
	peer_connect(l2, tag_imm(0x101, 1), 0x7f0000000000ull);
	req(a, MSG_ACCEPT, ls, 0, 0, 0);
	req(a, MSG_ACCEPT, ls, 0, 0, 0);
	req(b, MSG_CONNECT, NULL, 0, 0x0a000002, 80);
	peer_accept(0, tag_imm(0x102, 1));
	req(b, MSG_CONNECT, NULL, 0, 0x0a000003, 80);
	peer_accept(0, tag_imm(0x103, 1));
	fh_poll(FH_CQ_CAP);
	fh.heavy = 8;
}

static void put(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

/* one 16-byte step, decoded */
struct step {
	struct hub *h;
	uint8_t idx, a, b;
	uint32_t x;
	uint64_t v;
	uint32_t where;
	struct hsock *s;
	struct arena_hdr *ah;
};

/* ops 0-5: scribble over the arena and ring */
static void step_arena(uint8_t op, const struct step *st)
{
	struct hub *h = st->h;
	uint8_t a = st->a, b = st->b;
	uint32_t x = st->x, where = st->where;
	uint64_t v = st->v;
	struct hsock *s = st->s;
	struct arena_hdr *ah = st->ah;
	switch (op) {
	case 0:
		if (s && s->as)
			put((uint8_t *)s->as + ((where % (sizeof(struct arena_slot) - 8)) & ~7u), &v, 8);
		break;
	case 1:
		if (s && s->as)
			put((uint8_t *)s->as + ((where % (sizeof(struct arena_slot) - 4)) & ~3u), &x, 4);
		break;
	case 2: {
		size_t at = (where % (sizeof(struct arena_hdr) - 8)) & ~7u;
		if (keep_layout && at < offsetof(struct arena_hdr, pool_id))
			break;
		put((uint8_t *)ah + at, &v, 8);
		break;
	}
	case 3:
		if (s && s->as) {
			_Atomic uint64_t *c[4] = {&s->as->tx.tail, &s->as->tx.head, &s->as->rx.head,
						  &s->as->rx.tail};
			_Atomic uint64_t *t = c[a % 4];
			ring_store(t, a & 4 ? ring_load(t) + (uint64_t)(int64_t)(int32_t)x : v);
		}
		break;
	case 4:
		atomic_fetch_or(&ah->doorbell[a % ARENA_DOORBELL_WORDS], v);
		atomic_fetch_or(&ah->summary[a % ARENA_DOORBELL_WORDS / 64], x & 1 ? v : 1ull << (a % 64));
		hub_test_doorbells(h, fh.pool);
		break;
	case 5: {
		uint32_t slot = (a & 1) && s && s->as ? s->slot : b;
		atomic_fetch_or(&((struct arena_slot *)((uint8_t *)fh.pool->base + fh.slots_off))[slot].pending_ops, x);
		atomic_fetch_or(&ah->doorbell[slot / 64], 1ull << (slot % 64));
		atomic_fetch_or(&ah->summary[slot / 4096], 1ull << (slot / 64 % 64));
		hub_test_doorbells(h, fh.pool);
		break;
	}
	}
}

/* ops 6-11: the hub's socket work, the peer, completions, faults, links */
static void step_peer(uint8_t op, const struct step *st)
{
	struct hub *h = st->h;
	uint8_t idx = st->idx, a = st->a;
	uint32_t x = st->x;
	uint64_t v = st->v;
	struct hsock *s = st->s;
	switch (op) {
	case 6:
		if (s) {
			if (a & 1)
				hsock_credit(h, s);
			else
				hsock_tx(h, s);
		}
		break;
	case 7:
		if (s && s->link && s->link->state == LINK_UP) {
			struct wire_ctl c = {.op = CTL_CREDIT, .dst = tag_imm(s->sid, s->gen), .src = s->peer};
			c.val = a & 1 ? s->tx_posted : a & 2 ? s->peer_head + x : v;
			fh_ctl(s->link, &c);
		}
		break;
	case 8:
		fh_poll(x % 16 + 1);
		break;
	case 9:
		if (s && s->link && s->link->state == LINK_UP)
			fh_rx_write(s->link, tag_imm(s->sid, s->gen), a & 1 ? v : s->rx_expect, 1 + x % 8192);
		break;
	case 10:
		fh.fault = a % FH_NFAULT;
		break;
	case 11: {
		struct link *l = fh_link(idx);
		if (l && l->state == LINK_UP)
			hub_link_writable(&l->x);
		break;
	}
	}
}

/* ops 12-20: processes' requests, the peer's FIN, RESET, CONNECT and ACCEPT, failures */
static void step_procs(uint8_t op, const struct step *st)
{
	struct hub *h = st->h;
	uint8_t idx = st->idx, a = st->a, b = st->b;
	uint32_t x = st->x;
	struct hsock *s = st->s;
	switch (op) {
	case 12:
		if (fh.nprocs && s) {
			static const uint32_t ops[3] = {MSG_RELEASE, MSG_SHUTDOWN, MSG_ACCEPT};
			req(fh.procs[b % fh.nprocs], ops[a % 3], s, SHUT_WR, 0, 0);
		}
		break;
	case 13:
		if (s && s->link && s->link->state == LINK_UP) {
			struct wire_ctl c = {.op = a & 1 ? CTL_RESET : CTL_FIN, .dst = tag_imm(s->sid, s->gen),
					     .src = s->peer};
			fh_ctl(s->link, &c);
		}
		break;
	case 14:
		peer_connect(fh_link(idx), tag_imm(0x200 + (x & 0xff), 1), a & 1 ? 0x7f0000400000ull : 0);
		break;
	case 15:
		if (s) {
			fh_proc_io(s, x % 40000, a & 1);
			hub_test_doorbells(h, fh.pool);
		}
		break;
	case 16:
		if (fh.nprocs && fh.heavy-- > 0)
			req(fh.procs[b % fh.nprocs], a & 1 ? MSG_LISTEN : MSG_CONNECT, NULL, 4,
			    a & 1 ? 0 : 0x0a000002 + b % 2, (uint16_t)(a & 1 ? 81 + (x & 1) : 80));
		break;
	case 17:
		if (fh.nprocs)
			fh_proc_gone(b % fh.nprocs);
		break;
	case 18: {
		struct link *l = fh_link(idx);
		if (l && fh.heavy-- > 0)
			hub_link_fail(&l->x, "fuzz");
		break;
	}
	case 19:
		hub_test_settle(h);
		break;
	case 20:
		peer_accept(idx, tag_imm(0x300 + (x & 0xff), 1));
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hub *h = fh.h;
	setup();
	for (size_t off = 0; off + STEP <= size; off += STEP) {
		const uint8_t *p = data + off;
		uint8_t op = p[0] % 21, idx = p[1], a = p[2], b = p[3];
		struct step st = {.h = h, .idx = idx, .a = a, .b = b};
		st.where = a | (uint32_t)b << 8;
		st.s = fh_sock(idx);
		st.ah = fh.pool->base;
		memcpy(&st.x, p + 4, 4);
		memcpy(&st.v, p + 8, 8);
		if (op <= 5)
			step_arena(op, &st);
		else if (op <= 11)
			step_peer(op, &st);
		else
			step_procs(op, &st);
		fh_check_holders();
		fh_check_slots();
	}
	fh_end();
	return 0;
}
