/*
 * ring-shrink-credits-what-the-reader-took - a receive ring on a link
 * that shrinks while the peer's bytes are in flight never leaves the peer
 * waiting on bytes the reader took.
 *
 * The peer may have up to the old, larger ring in flight when the offer of
 * the smaller one reaches it; it holds to the smaller window until it
 * switches.  A reader that asked credit by the quarter of the old ring may
 * have taken everything without asking: the peer, out of window, would
 * wait for ever on an empty ring (seen over verbs, 2 of 4 echo clients of
 * pre-forked epoll workers hung).  So the hub tells the reader the smaller
 * ring's size to count quarters by (rx_credit_size in the slot), and
 * credits all the reader took when it moves the ring.
 *
 * A socketless hub with the fuzzers' fake verbs transport
 * (tests/fuzz/fuzz_hub.h) is one side; this test plays the peer hub and a
 * reader that asks no credit: it grows the ring to 128 KiB, lets the
 * connection idle until the hub offers 4 KiB, writes the 4 KiB that were
 * in flight, takes them, answers RING_ACK, and looks for the CREDIT.
 */
#include <unistd.h>

#include "fuzz/fuzz_hub.h"

static int failed;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	failed |= !ok;
}

/* the newest control message of kind op the hub sent, or NULL */
static const struct wire_ctl *last_sent(uint8_t op)
{
	int i = fh_sent_idx(NULL, op, 0);
	return i < 0 ? NULL : &fh.sent[i];
}

/* the peer's writes landed; the reader takes them (and asks credit when ask) */
static void arrive_and_take(struct link *l, struct hsock *s, uint64_t pos, uint32_t len, int ask)
{
	fh_rx_write(l, tag_imm(s->sid, s->gen), pos, len);
	fh_poll(FH_CQ_CAP);
	ring_store(&s->as->rx.head, ring_load(&s->as->rx.tail));
	if (ask) {
		arena_ring(s->pool->base, s->slot, SLOTOP_CREDIT);
		hub_test_doorbells(fh.h, s->pool);
	}
}

int main(void)
{
	struct msg_req q = {.op = MSG_CONNECT};
	struct wire_ctl c;
	const struct wire_ctl *m;
	struct hsock *s;
	struct link *l;
	uint32_t peer = tag_imm(0x800, 1);
	int i;

	fh_init();
	fh_begin(HUB_AUTO, 1, 1);
	q.addr.in.sin_family = AF_INET;
	q.addr.in.sin_port = htons(80);
	q.addr.in.sin_addr.s_addr = htonl(0x0a000002);
	hub_test_request(fh.h, fh.procs[0], &q);
	s = fh_sock(0);
	if (!s || !s->link || s->link->x.xp != &fh.h->verbs) {
		printf("not ok - a connection over the fake verbs transport\n");
		return 1;
	}
	l = s->link;
	hub_link_up(&l->x, 2);
	i = fh_sent_idx(l, CTL_CONNECT, 0);
	if (i < 0) {
		printf("not ok - the hub sent CONNECT once the link was up\n");
		return 1;
	}
	c = (struct wire_ctl){.op = CTL_ACCEPT, .dst = fh.sent[i].src, .src = peer, .ring = 131072,
			      .val = 0x100000, .rkey = 7};
	fh_ctl(l, &c);
	check(s->state == HS_ESTABLISHED && s->rx_size == 4096, "established, its receive ring 4 KiB (verbs starts small)");

	/* the peer fills the ring: it grows to the default at its first need */
	arrive_and_take(l, s, 0, 4096, 1);
	m = last_sent(CTL_RING);
	check(m && m->ring == 131072, "the peer used all its credit: a ring of 128 KiB offered");
	c = (struct wire_ctl){.op = CTL_RING_ACK, .dst = tag_imm(s->sid, s->gen), .src = peer, .val = 4096};
	fh_ctl(l, &c);
	check(s->rx_size == 131072 && ring_load(&s->as->rx.tail) == 4096, "RING_ACK at 4096: the ring is 128 KiB");

	/* idle: the ring goes back, offered as 4 KiB */
	fh.nsent = 0;
	for (i = 0; i < 100 && !((m = last_sent(CTL_RING)) && m->ring == 4096); i++) {
		hub_ring_timers(fh.h);
		usleep(50000);
	}
	check(m && m->ring == 4096, "the connection idled: the ring offered back at 4 KiB");
	check(atomic_load(&s->as->rx_credit_size) == 4096,
	      "meanwhile the reader counts its credit by the quarter of 4 KiB");

	/* 4 KiB the peer had in flight, taken by a reader that asked nothing
	 * (a quarter of 128 KiB is more) */
	arrive_and_take(l, s, 4096, 4096, 0);
	c = (struct wire_ctl){.op = CTL_RING_ACK, .dst = tag_imm(s->sid, s->gen), .src = peer, .val = 8192};
	fh.nsent = 0;
	fh_ctl(l, &c);
	m = last_sent(CTL_CREDIT);
	check(s->rx_size == 4096 && !s->rx_switch, "RING_ACK at 8192: the ring is 4 KiB");
	check(m && m->val == 8192, "the move credits all the reader took (8192): the peer has its window back");
	check(atomic_load(&s->as->rx_credit_size) == 0, "the reader counts by its ring again");

	fh_end();
	return failed;
}
