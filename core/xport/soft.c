/*
 * soft.c - the `soft` transport: verbs semantics over one TCP
 * connection per pair of nodes.
 *
 * Every posted work request becomes a frame on the link's stream (frame.h):
 * a write with immediate carries its payload, a send one control message.
 * A completion is reported once the peer's kernel acknowledged the whole
 * frame (so a link that times out loses no completed write: resume.c);
 * frames leave in the order posted.  The receiving side plays
 * the NIC: it decodes each frame, asks the hub where a write's payload
 * belongs (hub_rx_target: socket, generation, ring window), places it
 * there and queues a receive completion with the immediate; a send
 * consumes the oldest posted receive and, like a receiver-not-ready NAK,
 * waits when none is posted.  All completions of all links go to one
 * completion queue that the hub polls.
 *
 * This file posts: frames are queued on the link's outgoing stream and
 * handed to the kernel as the socket takes them (soft_flush), at once, or
 * at the end of the hub's pass over its doorbells and completions when it
 * batches (soft_batch: one sendmsg a link for all the pass's frames).  The
 * queue is a list of pieces: headers and small payloads copied into the
 * link's own buffer, and a write's payload where it is in its send ring,
 * which stays until the write completes; a ring that goes before (a socket
 * reset or closed with writes in flight) has its pieces copied first
 * (soft_forget).  It keeps the completion queue and holds the ops table.  soft_rx.c reads and parses
 * the incoming stream, soft_conn.c sets links up (soft.h between).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "soft.h"
#include "sys.h"

void soft_cq_push(struct soft *sx, const struct xwc *wc)
{
	if (sx->cq_head + sx->cq_n == sx->cq_cap) {
		if (sx->cq_head) {
			memmove(sx->cq, sx->cq + sx->cq_head, sx->cq_n * sizeof(*sx->cq));
			sx->cq_head = 0;
		} else {
			uint32_t cap = sx->cq_cap ? sx->cq_cap * 2 : 1024;
			struct xwc *n = realloc(sx->cq, cap * sizeof(*n));
			if (!n)
				abort(); /* a lost completion would corrupt a stream */
			sx->cq = n;
			sx->cq_cap = cap;
		}
	}
	sx->cq[sx->cq_head + sx->cq_n++] = *wc;
	sx->cq_pushed++;
}

void soft_set_events(struct soft_link *sl)
{
	uint32_t ev = 0;
	if (sl->closed)
		return;
	if (sl->connecting || sl->oq)
		ev |= EPOLLOUT;
	if (!sl->connecting && !sl->stalled)
		ev |= EPOLLIN | EPOLLRDHUP;
	if (ev != sl->events) {
		sl->events = ev;
		hub_rewatch(sl->sx->h, sl->fd, ev, &sl->ev);
	}
}

/* Completions for every frame that the peer's kernel acknowledged whole:
 * bytes it took are read by the peer hub even if the link fails later,
 * while bytes in our socket's buffers go with it, and must stay in the
 * send ring for a lost link's connections to go on (resume.c).  The
 * kernel's send queue (SIOCOUTQ) holds what it has not had acknowledged. */
static void reap_sent(struct soft_link *sl)
{
	int outq;
	if (sl->pw_n && sl->pw[sl->pw_head].end > sl->acked && ioctl(sl->fd, SIOCOUTQ, &outq) == 0 &&
	    outq >= 0 && (uint64_t)outq <= sl->written - sl->acked)
		sl->acked = sl->written - (uint64_t)outq;
	while (sl->pw_n && sl->pw[sl->pw_head].end <= sl->acked) {
		soft_cq_push(sl->sx, &sl->pw[sl->pw_head].wc);
		sl->pw_head = (sl->pw_head + 1) % sl->pw_cap;
		sl->pw_n--;
	}
}

/* The iovec of what is queued, from the first unsent byte: how many. */
static int out_iov(const struct soft_link *sl, struct iovec *iov, int max)
{
	size_t own = sl->ooff;
	int n = 0;
	for (uint32_t i = 0; i < sl->os_n && n < max; i++) {
		const struct soft_oseg *g = &sl->os[(sl->os_head + i) % sl->os_cap];
		uint32_t skip = i ? 0 : sl->os_off;
		if (g->kind == SEG_OWN) {
			iov[n].iov_base = sl->out + own;
			own += g->len - skip;
		} else {
			iov[n].iov_base = (uint8_t *)g->p + skip;
		}
		iov[n++].iov_len = g->len - skip;
	}
	return n;
}

/* The first piece of the queue goes (sent, or the link closed). */
static void seg_pop(struct soft_link *sl)
{
	struct soft_oseg *g = &sl->os[sl->os_head];
	if (g->kind == SEG_HEAP)
		free((void *)g->p);
	sl->os_head = (sl->os_head + 1) % sl->os_cap;
	sl->os_n--;
	sl->os_off = 0;
}

/* N bytes of the queue went to the kernel. */
static void out_sent(struct soft_link *sl, size_t n)
{
	sl->oq -= n;
	sl->written += n;
	while (n) {
		struct soft_oseg *g = &sl->os[sl->os_head];
		size_t t = g->len - sl->os_off;
		if (t > n)
			t = n;
		if (g->kind == SEG_OWN)
			sl->ooff += t;
		sl->os_off += (uint32_t)t;
		n -= t;
		if (sl->os_off < g->len)
			break;
		seg_pop(sl);
	}
}

void soft_flush(struct soft_link *sl)
{
	size_t before = sl->oq;
	while (sl->oq) {
		struct iovec iov[SOFT_IOV];
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)out_iov(sl, iov, SOFT_IOV)};
		ssize_t n = sendmsg(sl->fd, &m, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				fail_errno(sl, errno);
			break;
		}
		out_sent(sl, (size_t)n);
	}
	if (sl->closed)
		return;
	if (!sl->oq)
		sl->ooff = sl->olen = 0;
	soft_set_events(sl);
	if (sl->oq < before && sl->oq < SOFT_OUT_MAX / 2 && hub_link_waiting(sl->l))
		hub_link_writable(sl->l);
}

static int reserve_out(struct soft_link *sl, size_t need)
{
	if (sl->olen + need <= sl->ocap)
		return 0;
	if (sl->ooff) {
		/* the owned bytes sent go; the rest keep their order */
		memmove(sl->out, sl->out + sl->ooff, sl->olen - sl->ooff);
		sl->olen -= sl->ooff;
		sl->ooff = 0;
	}
	if (sl->olen + need > sl->ocap) {
		size_t cap = sl->ocap ? sl->ocap : 65536;
		uint8_t *n;
		while (cap < sl->olen + need)
			cap *= 2;
		n = realloc(sl->out, cap);
		if (!n)
			return -ENOMEM;
		sl->out = n;
		sl->ocap = cap;
	}
	return 0;
}

/* The completion WC, once the stream's first END bytes are acknowledged. */
static int pend_push(struct soft_link *sl, uint64_t end, const struct xwc *wc)
{
	struct soft_pend *pw = xq_room(sl->pw, &sl->pw_head, sl->pw_n, &sl->pw_cap, 1, sizeof(*pw), 256);
	if (!pw)
		return -ENOMEM;
	sl->pw = pw;
	sl->pw[(sl->pw_head + sl->pw_n) % sl->pw_cap] = (struct soft_pend){.end = end, .wc = *wc};
	sl->pw_n++;
	return 0;
}

/* Room for N more pieces of the queue: 0 or -ENOMEM. */
static int seg_room(struct soft_link *sl, uint32_t n)
{
	struct soft_oseg *os = xq_room(sl->os, &sl->os_head, sl->os_n, &sl->os_cap, n, sizeof(*os), 256);
	if (!os)
		return -ENOMEM;
	sl->os = os;
	return 0;
}

/* One more piece of the queue, in the room seg_room made: owned bytes (the
 * next LEN of out, joined to an owned piece before it) or bytes of a ring
 * at P. */
static void seg_push(struct soft_link *sl, uint8_t kind, const uint8_t *p, uint32_t len)
{
	struct soft_oseg *last = sl->os_n ? &sl->os[(sl->os_head + sl->os_n - 1) % sl->os_cap] : NULL;
	if (kind == SEG_OWN && last && last->kind == SEG_OWN)
		last->len += len;
	else
		sl->os[(sl->os_head + sl->os_n++) % sl->os_cap] = (struct soft_oseg){.p = p, .len = len, .kind = kind};
}

/* Queue one frame; a completion follows when it has left, if wc is given.
 * RING: the payload is a send ring's, which stays until the write
 * completes or soft_forget copies it, so that it is given to the kernel
 * from where it is (SOFT_ZC_MIN bytes or more), not copied first. */
static int post_frame(struct soft_link *sl, const struct wire_frame *f, const struct iovec *iov,
		      int iovcnt, const struct xwc *wc, int ring)
{
	size_t len = WIRE_FRAME_LEN + f->len, own = WIRE_FRAME_LEN;
	if (!sl || sl->closed)
		return -ENOTCONN;
	for (int i = 0; i < iovcnt; i++)
		if (!ring || iov[i].iov_len < SOFT_ZC_MIN)
			own += iov[i].iov_len;
	if (reserve_out(sl, own) < 0 || seg_room(sl, 1 + (uint32_t)iovcnt) < 0 ||
	    (wc && pend_push(sl, sl->queued + len, wc) < 0))
		return -ENOMEM; /* nothing queued */
	wire_frame_encode(f, sl->out + sl->olen);
	sl->olen += WIRE_FRAME_LEN;
	seg_push(sl, SEG_OWN, NULL, WIRE_FRAME_LEN);
	for (int i = 0; i < iovcnt; i++) {
		uint32_t l = (uint32_t)iov[i].iov_len;
		if (ring && l >= SOFT_ZC_MIN) {
			seg_push(sl, SEG_EXT, iov[i].iov_base, l);
			continue;
		}
		memcpy(sl->out + sl->olen, iov[i].iov_base, l);
		sl->olen += l;
		seg_push(sl, SEG_OWN, NULL, l);
	}
	sl->queued += len;
	sl->oq += len;
	if (!sl->connecting && !sl->sx->batch)
		soft_flush(sl);
	return 0;
}

/* Within one pass of the hub's, the frames of all its posts leave in one
 * send a link (and one look at what the kernel acknowledged) at its end. */
static int soft_batch(struct xport *xp, int on)
{
	struct soft *sx = xp->priv;
	int any = 0;
	sx->batch = on;
	if (on)
		return 0;
	for (struct soft_link *sl = sx->links, *next; sl; sl = next) {
		next = sl->next;
		if (!sl->closed && !sl->connecting && sl->oq) {
			soft_flush(sl);
			any = 1;
		}
	}
	return any;
}

static int soft_post_write_imm(struct xlink *l, uint64_t wr_id, const struct iovec *iov, int iovcnt,
			       uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct soft_link *sl = SL(l);
	struct wire_frame f = {.type = FR_WRITE_IMM, .imm = imm, .rkey = rkey, .raddr = raddr};
	struct xwc wc = {.wr_id = wr_id, .op = XWC_WRITE, .link = l};
	(void)lkey;
	if (!sl || sl->closed)
		return -ENOTCONN;
	for (int i = 0; i < iovcnt; i++)
		f.len += iov[i].iov_len;
	if (sl->oq + f.len > SOFT_OUT_MAX)
		return -EAGAIN;
	wc.byte_len = f.len;
	return post_frame(sl, &f, iov, iovcnt, &wc, 1);
}

static int soft_post_send(struct xlink *l, uint64_t wr_id, const void *buf, uint32_t len)
{
	struct wire_frame f = {.type = FR_SEND, .len = len};
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct xwc wc = {.wr_id = wr_id, .op = XWC_SEND, .byte_len = len, .link = l};
	return post_frame(SL(l), &f, &iov, 1, &wc, 0);
}

void soft_send_hello(struct soft_link *sl)
{
	struct wire_hello hh = {.magic = WIRE_MAGIC, .version = WIRE_VERSION,
				.node_id = hub_node_id(sl->sx->h), .max_write = WIRE_MAX_WRITE};
	uint8_t b[WIRE_HELLO_LEN];
	struct wire_frame f = {.type = FR_HELLO, .len = WIRE_HELLO_LEN};
	struct iovec iov = {.iov_base = b, .iov_len = sizeof(b)};
	wire_hello_encode(&hh, b);
	post_frame(sl, &f, &iov, 1, NULL, 0);
}

static void soft_link_close(struct xlink *l)
{
	struct soft_link *sl = SL(l), **pp;
	struct soft *sx;
	uint32_t k = 0;
	if (!sl || sl->closed)
		return;
	sx = sl->sx;
	sl->closed = 1;
	hub_unwatch(sx->h, sl->fd);
	close(sl->fd);
	for (pp = &sx->links; *pp; pp = &(*pp)->next)
		if (*pp == sl) {
			*pp = sl->next;
			break;
		}
	/* completions of a closed link are flushed, as verbs flushes a QP */
	for (uint32_t i = 0; i < sx->cq_n; i++)
		if (sx->cq[sx->cq_head + i].link != l)
			sx->cq[sx->cq_head + k++] = sx->cq[sx->cq_head + i];
	sx->cq_n = k;
	while (sl->os_n)
		seg_pop(sl);
	free(sl->os);
	free(sl->out);
	free(sl->in);
	free(sl->pw);
	free(sl->rq);
	hub_defer_free(sx->h, sl);
	l->xpriv = NULL;
}

/* Memory at [addr, addr + len) goes (a send ring freed before its writes
 * completed: a socket closed or reset): what the queues still read there
 * is copied first.  A copy that fails fails the link, whose connections
 * go on on the next one from their rings (resume.c), as after any loss. */
static void soft_forget(struct xport *xp, const void *addr, size_t len)
{
	struct soft *sx = xp->priv;
	const uint8_t *lo = addr, *hi = lo + len;
	if (!sx)
		return;
	for (struct soft_link *sl = sx->links; sl; sl = sl->next)
		for (uint32_t i = 0; i < sl->os_n && !sl->closed; i++) {
			struct soft_oseg *g = &sl->os[(sl->os_head + i) % sl->os_cap];
			uint8_t *c;
			if (g->kind != SEG_EXT || g->p + g->len <= lo || g->p >= hi)
				continue;
			if (!(c = malloc(g->len))) {
				fail(sl, "out of memory");
				break;
			}
			memcpy(c, g->p, g->len);
			g->p = c;
			g->kind = SEG_HEAP;
		}
}

static int soft_post_recv(struct xlink *l, uint64_t wr_id, void *buf, uint32_t len)
{
	struct soft_link *sl = SL(l);
	struct soft_recv *rq;
	if (!sl || sl->closed)
		return -ENOTCONN;
	rq = xq_room(sl->rq, &sl->rq_head, sl->rq_n, &sl->rq_cap, 1, sizeof(*rq), HUB_CTL_RECVS);
	if (!rq)
		return -ENOMEM;
	sl->rq = rq;
	sl->rq[(sl->rq_head + sl->rq_n) % sl->rq_cap] = (struct soft_recv){wr_id, buf, len};
	sl->rq_n++;
	if (sl->stalled) {
		sl->stalled = 0;
		sl->need_parse = 1;
	}
	return 0;
}

/* Acknowledgements come without an event: the hub looks again within
 * xp->waiting us, 50 at first, twice as long each time nothing came, up
 * to 10 ms (a peer that went silent costs no busy loop).  A hub that
 * spins passes here every few microseconds, and each look is a system
 * call: it looks when bytes came from the peer since the last (an
 * acknowledgement rides with them), else at most every ACK_LOOK_NS. */
#define ACK_LOOK_NS 20000

static void ack_look(struct xport *xp, struct soft_link *sl)
{
	uint64_t before = sl->acked, now = sys_now_ns();
	uint32_t us;
	if (sl->rcvd == sl->rcvd_looked && now - sl->ack_look_ns < ACK_LOOK_NS) {
		/* looked just now: again once the gap is over, not after the
		 * back-off of a look that found nothing */
		us = (uint32_t)((ACK_LOOK_NS - (now - sl->ack_look_ns)) / 1000) + 1;
	} else {
		sl->rcvd_looked = sl->rcvd;
		sl->ack_look_ns = now;
		reap_sent(sl);
		if (!sl->pw_n)
			return;
		if (sl->acked != before || !sl->ack_poll_us)
			sl->ack_poll_us = 50;
		else if (sl->ack_poll_us < 10000)
			sl->ack_poll_us *= 2;
		us = sl->ack_poll_us;
	}
	if (!xp->waiting || us < (uint32_t)xp->waiting)
		xp->waiting = (int)us;
}

static int soft_poll_cq(struct xport *xp, struct xwc *wc, int max)
{
	struct soft *sx = xp->priv;
	int n = 0;
	xp->waiting = 0;
	for (struct soft_link *sl = sx->links, *next; sl; sl = next) {
		next = sl->next;
		if (sl->need_parse && !sl->closed)
			soft_parse(sl);
		if (sl->pw_n && !sl->closed && !sl->connecting)
			ack_look(xp, sl);
	}
	while (n < max && sx->cq_n) {
		wc[n++] = sx->cq[sx->cq_head++];
		sx->cq_n--;
		sx->cq_taken++;
	}
	if (!sx->cq_n)
		sx->cq_head = 0;
	return n;
}

static void soft_fini(struct xport *xp)
{
	struct soft *sx = xp->priv;
	if (sx) {
		close(sx->lfd);
		free(sx->cq);
		free(sx);
	}
}

static int soft_reg_mr(struct xport *xp, void *addr, size_t len, int remote, struct xmr *mr)
{
	/* nothing to pin: the hub checks every placement itself (hub_rx_target) */
	(void)xp;
	(void)addr;
	(void)len;
	(void)remote;
	mr->handle = NULL;
	mr->lkey = mr->rkey = 0;
	return 0;
}

static void soft_dereg_mr(struct xport *xp, struct xmr *mr)
{
	(void)xp;
	(void)mr;
}

static int soft_listener(struct xport *xp)
{
	struct soft *sx = xp->priv;
	return sx ? sx->lfd : -1;
}

static void soft_link_info(struct xlink *l, struct xlink_info *out)
{
	struct soft_link *sl = SL(l);
	if (!sl)
		return;
	out->rx_direct = sl->rx_direct;
	soft_congestion(sl->fd, out->congestion); /* empty where it cannot be read */
}

const struct xport_ops xport_soft_ops = {
	.name = "soft",
	.flags = XP_POSITIONAL,
	.init = soft_init,
	.fini = soft_fini,
	.link_connect = soft_link_connect,
	.link_close = soft_link_close,
	.link_drain = soft_link_drain,
	.reg_mr = soft_reg_mr,
	.dereg_mr = soft_dereg_mr,
	.post_write_imm = soft_post_write_imm,
	.post_send = soft_post_send,
	.post_recv = soft_post_recv,
	.poll_cq = soft_poll_cq,
	.listener = soft_listener,
	.link_info = soft_link_info,
	.batch = soft_batch,
	.forget = soft_forget,
};
