/*
 * punch.c - the pages of idle rings back to the system, in batches.
 *
 * A look of the hub (resize.c) finds the connections idle with their rings
 * empty; their pages are punched out of the memory file (the pool's arena,
 * or on one node the pair segment; the rings keep their place and size),
 * with the reader and writer kept out as for a ring move (the gate words).
 * Punching a range out of a memfd makes the kernel flush the TLB of every
 * CPU that runs a process mapping it, a cost per call far above the pages'
 * own (0.3 ms a call on some virtual machines).  So the idle rings a look
 * finds are not punched one by one: each is checked and its gate taken,
 * up to PUNCH_BATCH of them, then the ranges are sorted and adjacent ones
 * punched in one call (rings made one after the other lie one after the
 * other), then the gates are given back.  A look that fills a batch goes
 * on at the next round of the hub's loop: 100,000 idle connections
 * neither hold the hub for seconds nor cost 200,000 flushes.  Rings a NIC
 * may write (pinned: verbs) keep their pages.
 */
#include "hub.h"

#include <fcntl.h>
#include <stdlib.h>

#include "pair.h"

#define PUNCH_BATCH 256

enum { PUNCH_RX, PUNCH_TX, PUNCH_PAIR };

int punch_full(const struct hub *h)
{
	return h->npunch + 2 > PUNCH_BATCH; /* room for a socket's two rings */
}

struct punch {
	struct hsock *s;
	int fd;                    /* the memfd */
	uint64_t off, size;
	_Atomic uint32_t *hold[2]; /* the gates held for it (the second: NULL, or a pair's reader) */
	uint64_t tail;             /* same node: the tail its direction was idle at */
	uint8_t kind, ok;
};

static struct punch *punch_add(struct hub *h, struct hsock *s, int kind, int fd, uint64_t off, uint64_t size)
{
	struct punch *e;
	if (!h->punches && !(h->punches = calloc(PUNCH_BATCH, sizeof(*h->punches))))
		return NULL;
	e = &h->punches[h->npunch++];
	*e = (struct punch){.s = s, .fd = fd, .off = off, .size = size, .kind = (uint8_t)kind};
	return e;
}

static int punch_cmp(const void *a, const void *b)
{
	const struct punch *x = *(struct punch *const *)a, *y = *(struct punch *const *)b;
	if (x->fd != y->fd)
		return x->fd < y->fd ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Punch the batch, adjacent ranges in one call, then give the gates back. */
void punch_flush(struct hub *h)
{
	struct punch *ord[PUNCH_BATCH], *e;
	uint32_t n = h->npunch, i, j;
	if (!n)
		return;
	for (i = 0; i < n; i++)
		ord[i] = &h->punches[i];
	qsort(ord, n, sizeof(ord[0]), punch_cmp);
	for (i = 0; i < n; i = j) {
		uint64_t end = ord[i]->off + ord[i]->size;
		int ok;
		for (j = i + 1; j < n && ord[j]->fd == ord[i]->fd && ord[j]->off == end; j++)
			end += ord[j]->size;
		ok = fallocate(ord[i]->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)ord[i]->off,
			       (off_t)(end - ord[i]->off)) == 0;
		for (uint32_t k = i; k < j; k++)
			ord[k]->ok = (uint8_t)ok;
	}
	for (i = 0; i < n; i++) {
		e = &h->punches[i];
		if (e->kind == PUNCH_PAIR && e->ok) {
			e->s->punch_tail = e->tail;
			h->rings_punched++;
		} else if (e->kind == PUNCH_RX && e->ok && i + 1 < n && h->punches[i + 1].kind == PUNCH_TX &&
			   h->punches[i + 1].s == e->s && h->punches[i + 1].ok) {
			e->s->touched = 0;
			h->rings_punched++;
		}
		gate_give(e->hold[0]);
		if (e->hold[1])
			gate_give(e->hold[1]);
	}
	h->npunch = 0;
}

/* One ring of s to the batch, its gate held, if it can be punched. */
static void ring_punch(struct hub *h, struct hsock *s, int kind, uint64_t off, uint64_t size,
		       _Atomic uint32_t *hold)
{
	struct punch *e;
	if (!off || pool_ring_pinned(s->pool, off) || !(e = punch_add(h, s, kind, s->pool->memfd, off, size))) {
		gate_give(hold);
		return;
	}
	e->hold[0] = hold;
}

void punch_rings(struct hub *h, struct hsock *s)
{
	struct arena_slot *as = s->as;
	/* nothing placed and not yet completed either (rx_expect): a soft
	 * link places a write's bytes before its completion is reaped */
	if (!s->rx_switch && !s->rx_offered && s->rx_expect == s->rx_tail &&
	    ring_load(&as->rx.head) == s->rx_tail && gate_take(&as->rx_in, &as->rx_hold)) {
		if (ring_load(&as->rx.head) == s->rx_tail)
			ring_punch(h, s, PUNCH_RX, s->rx_off, s->rx_size, &as->rx_hold);
		else
			gate_give(&as->rx_hold);
	}
	if (!s->tx_old_size && !s->fin_pending && s->tx_posted == s->tx_done &&
	    ring_load(&as->tx.tail) == s->tx_done && gate_take(&as->tx_in, &as->tx_hold)) {
		if (ring_load(&as->tx.tail) == s->tx_done)
			ring_punch(h, s, PUNCH_TX, s->tx_off, s->tx_size, &as->tx_hold);
		else
			gate_give(&as->tx_hold);
	}
}

/* The direction s writes on, on the same node, idle and empty: its pages
 * go back, once for each tail (the hub does not see the bytes move). */
void punch_pair(struct hub *h, struct hsock *s)
{
	struct lpair *lp = s->lp;
	struct hsock *r = h->socks[lp->sid[!s->lside]];
	struct ring *c = hpair_ring(s, 1);
	uint64_t tail = ring_load(&c->tail);
	struct punch *e;
	if (tail == s->punch_tail || !r || r->lp != lp || !r->as || ring_load(&c->head) != tail ||
	    !gate_take(&s->as->tx_in, &s->as->tx_hold))
		return;
	if (gate_take(&r->as->rx_in, &r->as->rx_hold)) {
		if (ring_load(&c->head) == tail && ring_load(&c->tail) == tail &&
		    (e = punch_add(h, s, PUNCH_PAIR, lp->seg->memfd, lp->off[s->lside], lp->size[s->lside]))) {
			e->hold[0] = &s->as->tx_hold;
			e->hold[1] = &r->as->rx_hold;
			e->tail = tail;
			return;
		}
		gate_give(&r->as->rx_hold);
	}
	gate_give(&s->as->tx_hold);
}
