/*
 * fuzz-hub-requests - libFuzzer target for the hub's request handling
 * (the request table in core/hub/request.c) and its socket state machine as driven by
 * processes and by a peer hub (core/hub/route.c, data.c: hub_ctl_in, hub_rx_target,
 * hsock_tx, completions through hub_route).
 *
 * One socketless hub for the whole run (hub_test_new, RSHARE_ARENA_MB=128),
 * with fake transports in h->soft and h->verbs (tests/fuzz/fuzz_hub.h:
 * their posts record completions and check what the hub posts; link_connect
 * succeeds without a socket, so MSG_CONNECT makes links).  Every input
 * starts with a fresh pool and 1-4 processes and ends with every process
 * gone and every link failed; then no socket may be left.
 *
 * Input: byte 0 = set-up (bit 0: transport mode auto instead of soft; bit 1:
 * the fake verbs transport is up; bits 2-3: processes - 1), then 100-byte
 * steps: 4 header bytes (action, index, flags, aux) and 96 bytes of body,
 * a struct msg_req in host order for requests (sizeof(struct msg_req) == 96).
 *   action % 15:
 *   0 request: body through hub_test_request() by process[index]; flags:
 *     1 slot/gen of a socket that process holds (else any live one, aux picks),
 *     4 token of process[aux], 8 op forced into 1..MSG_MAX,
 *     16 address 10.0.0.(2 + aux % 3):80 (LISTEN: 0.0.0.0:80)
 *   1 process[index] is gone       2 a new process (flags & 1: without a pool)
 *   3 settle (sweep pools, free deferred memory)
 *   4 control message from the peer on link[index]: body[0..63] as wire bytes;
 *     flags: 1 dst = a live socket (aux), 2 op forced valid, 4 CONNECT to a
 *     listener (aux), 8 through a posted receive and hub_route, 16 length aux % 80
 *   5 write from the peer on link[index]: flags: 1 imm = socket aux,
 *     2 position = where the socket expects it, 4 short length
 *   6 deliver aux % 16 + 1 completions      7 a new link (flags & 1: verbs)
 *   8 a connecting link comes up            9 link[index] fails
 *   10 link[index] writable                 11 fault mode = aux % 5 (ok, EAGAIN,
 *     EIO from writes, link_connect fails, reg_mr fails)
 *   12 a process writes/reads socket[aux] and rings the doorbell; doorbells
 *   13 the peer answers a CONNECT the hub sent (flags % 3: ACCEPT, REFUSE, RESET)
 *   14 the peer returns credit for socket[aux] (flags & 1: all it was sent)
 * Invariants: no sanitizer report; the fake transport's checks (fuzz_hub.h);
 * after every step each socket a process holds exists with the right
 * holder count; no socket outlives the input.
 *
 * Seeds: tests/fuzz/corpus/fuzz-hub-requests/ (LISTEN/CONNECT/ACCEPT/RELEASE,
 * a peer CONNECT, a connect answered by the peer, data both ways).
 */
#include "fuzz_hub.h"

#define STEP 100

_Static_assert(sizeof(struct msg_req) == 96, "steps carry one struct msg_req");

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fh_init();
	return 0;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static struct link *up_link(uint32_t k)
{
	struct link *l = fh_link(k);
	return l && l->state == LINK_UP ? l : NULL;
}

static void request(const uint8_t *hd, const uint8_t *body)
{
	struct msg_req q;
	struct proc *pr;
	if (!fh.nprocs)
		return;
	pr = fh.procs[hd[1] % fh.nprocs];
	memcpy(&q, body, sizeof(q));
	if (hd[2] & 8)
		q.op = 1 + q.op % MSG_MAX;
	if (hd[2] & 1) {
		struct hsock *s = pr->nsocks ? fh.h->socks[pr->socks[hd[3] % pr->nsocks]] : fh_sock(hd[3]);
		if (s) {
			q.slot = s->slot;
			q.gen = s->gen;
		}
	}
	if ((hd[2] & 4) && fh.nprocs)
		q.token = fh.procs[hd[3] % fh.nprocs]->token;
	if (hd[2] & 16) {
		memset(&q.addr, 0, sizeof(q.addr));
		q.addr.in.sin_family = AF_INET;
		q.addr.in.sin_port = htons(80);
		if (q.op != MSG_LISTEN)
			q.addr.in.sin_addr.s_addr = htonl(0x0a000002 + hd[3] % 3);
	}
	if (q.op == MSG_STAT || q.op == MSG_PORTCHECK) {
		if (fh.heavy <= 0)
			return;
		fh.heavy--; /* each scans every socket id */
	}
	if (q.op == MSG_CONNECT && fh.heavy <= 0)
		return; /* may start a link: hub_link_up scans every socket id */
	hub_test_request(fh.h, pr, &q);
}

static void ctl_in(const uint8_t *hd, const uint8_t *body)
{
	struct link *l = up_link(hd[1]);
	uint8_t b[WIRE_CTL_LEN];
	uint32_t len = WIRE_CTL_LEN;
	if (!l)
		return;
	memcpy(b, body, sizeof(b));
	if (hd[2] & 2) {
		b[0] = 1 + b[0] % CTL_MAX;
		if (b[0] != CTL_CONNECT && b[0] != CTL_ACCEPT)
			memset(b + 60, 0, 4);
	}
	if (hd[2] & 1) {
		struct hsock *s = fh_sock(hd[3]);
		if (s)
			fh_put32(b + 4, tag_imm(s->sid, s->gen));
	}
	if (hd[2] & 4) {
		struct hsock *ls = fh_listener(hd[3]);
		b[0] = CTL_CONNECT;
		b[1] = AF_INET;
		fh_put16(b + 2, ls ? ls->lport : 80);
		fh_put32(b + 4, 0);
		if (!get32(b + 8))
			fh_put32(b + 8, 0x7000 + hd[3]);
		fh_put32(b + 12, ARENA_MIN_RING << (b[12] % 11));
	}
	if (hd[2] & 16)
		len = hd[3] % 80;
	fh_ctl_in(l, b, len, hd[2] & 8, hd[3]);
}

static void rx_write(const uint8_t *hd, const uint8_t *body)
{
	struct link *l = up_link(hd[1]);
	struct hsock *s = fh_sock(hd[3]);
	uint32_t imm = get32(body);
	uint64_t pos = get64(body + 8);
	uint32_t len = 1 + get32(body + 16) % WIRE_MAX_WRITE;
	if (!l)
		return;
	if ((hd[2] & 1) && s)
		imm = tag_imm(s->sid, s->gen);
	if ((hd[2] & 2) && s)
		pos = s->rx_expect;
	if (hd[2] & 4)
		len = 1 + len % 4096;
	fh_rx_write(l, imm, pos, len);
}

static void answer(const uint8_t *hd, const uint8_t *body)
{
	int i = fh_sent_idx(NULL, CTL_CONNECT, hd[3]);
	struct wire_ctl c = {0}, req;
	struct link *l;
	if (i < 0)
		return;
	req = fh.sent[i];
	l = fh.sent_link[i];
	/* answered once: drop it from the record */
	memmove(fh.sent + i, fh.sent + i + 1, (fh.nsent - i - 1) * sizeof(fh.sent[0]));
	memmove(fh.sent_link + i, fh.sent_link + i + 1, (fh.nsent - i - 1) * sizeof(fh.sent_link[0]));
	fh.nsent--;
	if (l->state != LINK_UP)
		return;
	c.dst = req.src;
	switch (hd[2] % 3) {
	case 0:
		c.op = CTL_ACCEPT;
		c.src = get32(body) ? get32(body) : tag_imm(0x800 + hd[1], 1);
		c.ring = ARENA_MIN_RING << (body[4] % 11);
		c.val = get64(body + 8);
		c.rkey = get32(body + 16);
		break;
	case 1:
		c.op = CTL_REFUSE;
		c.reason = 1 + body[0] % 2;
		break;
	default:
		c.op = CTL_RESET;
		c.src = get32(body);
	}
	fh_ctl(l, &c);
}

static void credit(const uint8_t *hd, const uint8_t *body)
{
	struct hsock *s = fh_sock(hd[3]);
	struct wire_ctl c = {.op = CTL_CREDIT};
	if (!s || !s->link || s->link->state != LINK_UP)
		return;
	c.dst = tag_imm(s->sid, s->gen);
	c.src = s->peer;
	c.val = (hd[2] & 1) ? s->tx_posted : get64(body);
	fh_ctl(s->link, &c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	fh_begin(data[0] & 1 ? HUB_AUTO : HUB_SOFT, !!(data[0] & 2), 1 + ((data[0] >> 2) & 3));
	for (size_t off = 1; off + STEP <= size; off += STEP) {
		const uint8_t *hd = data + off, *body = data + off + 4;
		switch (hd[0] % 15) {
		case 0:
			request(hd, body);
			break;
		case 1:
			if (fh.nprocs)
				fh_proc_gone(hd[1] % fh.nprocs);
			break;
		case 2:
			fh_new_proc(hd[2] & 1 ? NULL : fh.pool);
			break;
		case 3:
			hub_test_settle(fh.h);
			break;
		case 4:
			ctl_in(hd, body);
			break;
		case 5:
			rx_write(hd, body);
			break;
		case 6:
			fh_poll(hd[3] % 16 + 1);
			break;
		case 7:
			fh_new_link(hd[2] & 1, 2 + hd[3] % 3);
			break;
		case 8: {
			struct link *l = fh_link(hd[1]);
			if (l && l->state == LINK_CONNECTING && fh.heavy-- > 0)
				hub_link_up(&l->x, 2 + hd[3]);
			break;
		}
		case 9: {
			struct link *l = fh_link(hd[1]);
			if (l && fh.heavy-- > 0)
				hub_link_fail(&l->x, "fuzz");
			break;
		}
		case 10: {
			struct link *l = up_link(hd[1]);
			if (l)
				hub_link_writable(&l->x);
			break;
		}
		case 11:
			fh.fault = hd[3] % FH_NFAULT;
			break;
		case 12: {
			struct hsock *s = fh_sock(hd[3]);
			if (s) {
				fh_proc_io(s, get32(body) % (2 * WIRE_MAX_WRITE), hd[2] & 1);
				hub_test_doorbells(fh.h, s->pool);
			}
			break;
		}
		case 13:
			answer(hd, body);
			break;
		case 14:
			credit(hd, body);
			break;
		}
		fh_check_holders();
	}
	fh_end();
	return 0;
}
