/*
 * verbs.c - the `verbs` transport: one RC queue pair per peer node,
 * driven through libibverbs and librdmacm.
 *
 * One protection domain, one completion queue with a completion channel
 * (the hub sleeps on its descriptor) and one shared receive queue serve
 * every link.  A link is set up by rdma_cm on the hub's service port
 * (RDMA_PS_TCP), the HELLO of each side riding in the connection's private
 * data.  Writes with immediate go from the sender's send ring straight
 * into the peer socket's receive ring (registered remote-writable by the
 * peer hub, its address and key exchanged in CONNECT/ACCEPT); the hub
 * never copies payload.  After a socket's writes, an inline RDMA WRITE of
 * where they end goes to the peer socket's placed-tail word, so that a
 * reader that polls sees them before its hub reaps the completion
 * (arena.h).  Control messages are inline sends.
 *
 * Within one pass of the hub over its doorbells and completions, each
 * link's work requests wait in its batch and go in one ibv_post_send at
 * the pass's end (the transport's batch op).
 *
 * Selective signalling: every write is signalled (its completion frees
 * send-ring space); control sends are signalled only every SIGNAL_EVERY
 * or when the hub waits for them (FIN, CONNECT).  Each posted work request
 * is remembered in order, and a signalled completion completes every
 * request before it, as RC guarantees.  The send queue keeps CTRL_RESERVE
 * entries for control messages; the shared receive queue is refilled on
 * every completion and, past it, the RNR retry of the connection (7:
 * forever) holds the sender back: nothing is dropped.  The peer's side
 * may be established, and send, before ours is: a control message that
 * comes before the hub posted the link's receives waits for them.  Any error
 * completion means the QP is lost: the link is dropped (its connections
 * reset) and the next connection builds a new one.
 *
 * This file holds the device, protection domain, completion queue and
 * shared receive queue, posting, polling and the ops table; the links'
 * set-up and tear-down through rdma_cm are in verbs_cm.c (verbs.h between).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "verbs.h"
#include "xqueue.h"
#include "err.h"
#include "log.h"

static void q_push(struct vx *vx, const struct xwc *wc)
{
	if (vx->q_head + vx->q_n == vx->q_cap) {
		if (vx->q_head) {
			memmove(vx->q, vx->q + vx->q_head, vx->q_n * sizeof(*vx->q));
			vx->q_head = 0;
		} else {
			uint32_t cap = vx->q_cap ? vx->q_cap * 2 : 1024;
			struct xwc *n = realloc(vx->q, cap * sizeof(*n));
			if (!n)
				abort(); /* a lost completion would corrupt a stream */
			vx->q = n;
			vx->q_cap = cap;
		}
	}
	vx->q[vx->q_head + vx->q_n++] = *wc;
}

static int post_srq(struct vx *vx, uint32_t i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(vx->rbufs + (size_t)i * WIRE_CTL_LEN),
			      .length = WIRE_CTL_LEN, .lkey = vx->rmr[i / SRQ_BLOCK]->lkey};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV_BIT | i, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_srq_recv(vx->srq, &wr, &bad);
}

/* The shared receive queue holds SRQ_BLOCK receives for each live link,
 * up to SRQ_DEPTH: their buffers are registered memory, which a node with
 * one peer should not pay for sixteen.  Blocks are added, never taken back
 * (a link that comes back finds its block). */
int verbs_srq_fit(struct vx *vx)
{
	uint32_t live = 0, b = vx->nblocks;
	uint8_t *buf = vx->rbufs + (size_t)b * SRQ_BLOCK * WIRE_CTL_LEN;
	for (struct vlink *vl = vx->links; vl; vl = vl->next)
		live += !vl->closed;
	if (b >= SRQ_DEPTH / SRQ_BLOCK || (b && live <= b))
		return 0;
	vx->rmr[b] = ibv_reg_mr(vx->pd, buf, (size_t)SRQ_BLOCK * WIRE_CTL_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!vx->rmr[b])
		return -1;
	for (uint32_t i = b * SRQ_BLOCK; i < (b + 1) * SRQ_BLOCK; i++)
		if (post_srq(vx, i))
			return -1;
	vx->nblocks++;
	return 0;
}

static int fifo_push(struct vlink *vl, uint64_t wr_id, uint32_t len, enum xwc_op op)
{
	struct vpost *f = xq_room(vl->fifo, &vl->f_head, vl->f_n, &vl->f_cap, 1, sizeof(*f), SQ_DEPTH);
	if (!f)
		return -ENOMEM;
	vl->fifo = f;
	vl->fifo[(vl->f_head + vl->f_n) % vl->f_cap] =
		(struct vpost){.seq = vl->seq, .wr_id = wr_id, .len = len, .op = op};
	vl->f_n++;
	return 0;
}

/* The link's held-back requests, in order, in one post: 0 or -errno. */
int verbs_batch_post(struct vlink *vl)
{
	struct vbatch *b = vl->b;
	struct ibv_send_wr *bad;
	uint32_t n = b ? b->n : 0;
	if (!n)
		return 0;
	b->n = 0;
	if (vl->closed || !vl->id || !vl->id->qp)
		return 0; /* its queue pair is gone with the link */
	for (uint32_t i = 0; i + 1 < n; i++)
		b->wr[i].next = &b->wr[i + 1];
	b->wr[n - 1].next = NULL;
	return -ibv_post_send(vl->id->qp, b->wr, &bad);
}

/* ... and a post that fails ends the link, as one posted alone would have */
static int batch_flush(struct vlink *vl)
{
	int r = verbs_batch_post(vl);
	if (r)
		fail(vl, "cannot post the pass's work requests");
	return r;
}

/* WR into the link's batch, its inline data copied; all sent when full */
static int batch_add(struct vlink *vl, const struct ibv_send_wr *wr, uint32_t len)
{
	struct vbatch *b = vl->b;
	uint32_t i = b->n++;
	b->wr[i] = *wr;
	b->wr[i].sg_list = b->sge[i];
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint32_t off = 0;
		for (int k = 0; k < wr->num_sge; k++) {
			memcpy(b->inl[i] + off, (const void *)(uintptr_t)wr->sg_list[k].addr, wr->sg_list[k].length);
			off += wr->sg_list[k].length;
		}
		b->sge[i][0] = (struct ibv_sge){.addr = (uintptr_t)b->inl[i], .length = len};
		b->wr[i].num_sge = 1;
	} else {
		memcpy(b->sge[i], wr->sg_list, (size_t)wr->num_sge * sizeof(*wr->sg_list));
	}
	return b->n == VB_MAX ? batch_flush(vl) : 0;
}

static int post(struct vlink *vl, struct ibv_send_wr *wr, uint64_t wr_id, uint32_t len, int must_signal)
{
	struct ibv_send_wr *bad;
	int r;
	vl->seq++;
	wr->wr_id = vl->seq;
	if (must_signal || vl->seq % SIGNAL_EVERY == 0) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		vl->sig = vl->seq;
	}
	if (len <= vl->max_inline)
		wr->send_flags |= IBV_SEND_INLINE;
	/* a placed tail is remembered as a send without owner: its
	 * completion tells the hub nothing */
	if (fifo_push(vl, wr_id, len, wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? XWC_WRITE : XWC_SEND) < 0) {
		vl->seq--;
		return -ENOMEM;
	}
	if (vl->vx->batch && wr->num_sge <= 2 && (!(wr->send_flags & IBV_SEND_INLINE) || len <= VB_INLINE) &&
	    (vl->b || (vl->b = calloc(1, sizeof(*vl->b)))))
		return batch_add(vl, wr, len);
	r = batch_flush(vl); /* what waits goes first */
	if (!r)
		r = -ibv_post_send(vl->id->qp, wr, &bad);
	if (r) {
		if (vl->sig == vl->seq)
			vl->sig = vl->done; /* it never went */
		vl->seq--;
		vl->f_n--;
		return r;
	}
	return 0;
}

/* Within one pass of the hub's, each link's work requests go in one
 * ibv_post_send at its end (one doorbell, where a provider rings it by a
 * system call); a lone request waits no longer than its pass. */
static int verbs_batch(struct xport *xp, int on)
{
	struct vx *vx = xp->priv;
	int any = 0;
	if (!vx)
		return 0;
	vx->batch = on && !xp->gone;
	if (on || xp->gone)
		return 0; /* (a dead hub's device: nothing of it is touched) */
	for (struct vlink *vl = vx->links; vl; vl = vl->next)
		if (vl->b && vl->b->n) {
			batch_flush(vl);
			any = 1;
		}
	return any;
}

static int verbs_post_write_imm(struct xlink *l, uint64_t wr_id, const struct iovec *iov, int iovcnt,
				uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct vlink *vl = VL(l);
	struct ibv_sge sge[2];
	struct ibv_send_wr wr = {.sg_list = sge, .num_sge = iovcnt,
				 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM};
	uint32_t len = 0;
	if (!vl || vl->closed || !vl->established)
		return -ENOTCONN;
	if (vl->seq - vl->done >= SQ_DEPTH - CTRL_RESERVE) {
		vl->want_room = 1;
		return -EAGAIN;
	}
	for (int i = 0; i < iovcnt && i < 2; i++) {
		sge[i].addr = (uintptr_t)iov[i].iov_base;
		sge[i].length = (uint32_t)iov[i].iov_len;
		sge[i].lkey = lkey;
		len += sge[i].length;
	}
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	/* every write is signalled: its completion frees send-ring space */
	return post(vl, &wr, wr_id, len, 1);
}

/* The end of the writes before it, into the peer socket's placed-tail
 * word: inline, so that it needs no key of ours, and unsignalled. */
static int verbs_post_placed(struct xlink *l, uint64_t raddr, uint32_t rkey, uint64_t val)
{
	struct vlink *vl = VL(l);
	uint64_t be = htobe64(val);
	struct ibv_sge sge = {.addr = (uintptr_t)&be, .length = sizeof(be)};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
	if (!vl || vl->closed || !vl->established)
		return -ENOTCONN;
	if (vl->max_inline < sizeof(be))
		return -EOPNOTSUPP; /* it would need a registered buffer of ours */
	if (vl->seq - vl->done >= SQ_DEPTH - CTRL_RESERVE)
		return -EAGAIN;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return post(vl, &wr, 0, sizeof(be), 0);
}

static int send_ctl_now(struct vlink *vl, uint64_t wr_id, const uint8_t *msg)
{
	struct ibv_sge sge = {.addr = (uintptr_t)msg, .length = WIRE_CTL_LEN};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
	/* inline: the message is copied at post time, no key needed */
	return post(vl, &wr, wr_id, WIRE_CTL_LEN, (wr_id & ~WR_CTL_BIT) != 0);
}

static void flush_pending(struct vlink *vl)
{
	uint32_t i = 0;
	while (i < vl->p_n && vl->seq - vl->done < SQ_DEPTH) {
		if (send_ctl_now(vl, vl->pend[i].wr_id, vl->pend[i].msg) < 0) {
			fail(vl, "cannot post a control message");
			return;
		}
		i++;
	}
	memmove(vl->pend, vl->pend + i, (vl->p_n - i) * sizeof(*vl->pend));
	vl->p_n -= i;
}

static int verbs_post_send(struct xlink *l, uint64_t wr_id, const void *buf, uint32_t len)
{
	struct vlink *vl = VL(l);
	if (!vl || vl->closed || !vl->established || len != WIRE_CTL_LEN)
		return -ENOTCONN;
	if (vl->p_n || vl->seq - vl->done >= SQ_DEPTH) {
		if (vl->p_n == vl->p_cap) {
			uint32_t cap = vl->p_cap ? vl->p_cap * 2 : 64;
			struct vctl *n = realloc(vl->pend, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			vl->pend = n;
			vl->p_cap = cap;
		}
		vl->pend[vl->p_n].wr_id = wr_id;
		memcpy(vl->pend[vl->p_n].msg, buf, WIRE_CTL_LEN);
		vl->p_n++;
		return 0;
	}
	return send_ctl_now(vl, wr_id, buf);
}

/* A control message into the link's oldest posted receive, and its
 * completion to the hub's queue. */
static void deliver_recv(struct vlink *vl, const uint8_t *msg, uint32_t byte_len)
{
	struct vrecv *r = &vl->rq[vl->rq_head];
	struct xwc wc = {.op = XWC_RECV, .byte_len = byte_len, .link = vl->l, .wr_id = r->wr_id};
	uint32_t len = byte_len < WIRE_CTL_LEN ? byte_len : WIRE_CTL_LEN;
	vl->rq_head = (vl->rq_head + 1) % vl->rq_cap;
	vl->rq_n--;
	memcpy(r->buf, msg, len < r->len ? len : r->len);
	q_push(vl->vx, &wc);
}

static int verbs_post_recv(struct xlink *l, uint64_t wr_id, void *buf, uint32_t len)
{
	struct vlink *vl = VL(l);
	struct vrecv *rq;
	if (!vl || vl->closed)
		return -ENOTCONN;
	rq = xq_room(vl->rq, &vl->rq_head, vl->rq_n, &vl->rq_cap, 1, sizeof(*rq), HUB_CTL_RECVS);
	if (!rq)
		return -ENOMEM;
	vl->rq = rq;
	vl->rq[(vl->rq_head + vl->rq_n) % vl->rq_cap] = (struct vrecv){wr_id, buf, len};
	vl->rq_n++;
	if (vl->e_n) {
		/* a message that came early takes this receive at once */
		struct vctl *m = &vl->early[vl->e_head];
		vl->e_head = (vl->e_head + 1) % HUB_CTL_RECVS;
		vl->e_n--;
		deliver_recv(vl, m->msg, (uint32_t)m->wr_id);
	}
	return 0;
}

static struct vlink *by_qpn(struct vx *vx, uint32_t qpn)
{
	for (struct vlink *vl = vx->links; vl; vl = vl->next)
		if (vl->id && vl->id->qp && vl->id->qp->qp_num == qpn)
			return vl;
	return NULL;
}

/* A signalled completion completes every request posted before it. */
static void complete_upto(struct vlink *vl, uint64_t seq)
{
	while (vl->f_n && vl->fifo[vl->f_head].seq <= seq) {
		struct vpost *p = &vl->fifo[vl->f_head];
		struct xwc wc = {.wr_id = p->wr_id, .op = p->op, .byte_len = p->len, .link = vl->l};
		if (p->op == XWC_WRITE || (p->wr_id & ~WR_CTL_BIT))
			q_push(vl->vx, &wc);
		vl->f_head = (vl->f_head + 1) % vl->f_cap;
		vl->f_n--;
	}
	vl->done = seq;
	flush_pending(vl);
	if (!vl->closed && vl->want_room && vl->seq - vl->done < SQ_DEPTH / 2) {
		vl->want_room = 0;
		hub_link_writable(vl->l);
	}
}

/* An error completion that tells of an outage (the peer unanswered, our
 * port down: the link's connections wait for a new one), not of a request
 * that was wrong (a key, a length, an access: the link ends), nor a flush
 * (what moved the queue pair to error decides). */
static int outage(enum ibv_wc_status st)
{
	return st == IBV_WC_RETRY_EXC_ERR || st == IBV_WC_RNR_RETRY_EXC_ERR || st == IBV_WC_LOC_QP_OP_ERR;
}

static void wc_take(struct vx *vx, struct ibv_wc *w)
{
	struct vlink *vl = by_qpn(vx, w->qp_num);
	if (!vl || vl->closed)
		return; /* left over from a link already gone */
	if (w->status != IBV_WC_SUCCESS) {
		char why[96];
		snprintf(why, sizeof(why), "completion error: %s", ibv_wc_status_str(w->status));
		if (outage(w->status) && !vl->closed)
			hub_link_lost(vl->l, why);
		else
			fail(vl, why);
		return;
	}
	if (w->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		uint32_t imm = ntohl(w->imm_data);
		int r = hub_rx_written(vl->l, imm, w->byte_len);
		if (r < 0) {
			hub_count_malformed(vx->h);
			fail(vl, "write outside its socket's ring window");
			return;
		}
		if (r > 0) {
			struct xwc wc = {.op = XWC_RECV_IMM, .imm = imm, .byte_len = w->byte_len, .link = vl->l};
			q_push(vx, &wc);
		}
	} else if (w->opcode == IBV_WC_RECV) {
		const uint8_t *msg = vx->rbufs + (size_t)(w->wr_id & ~WR_RECV_BIT) * WIRE_CTL_LEN;
		if (vl->rq_n) {
			deliver_recv(vl, msg, w->byte_len);
		} else if (!vl->established && (vl->early || (vl->early = calloc(HUB_CTL_RECVS, sizeof(*vl->early)))) &&
			   vl->e_n < HUB_CTL_RECVS) {
			/* the peer's side was up first and sent: ours is not yet
			 * (its ESTABLISHED event comes after this completion) */
			struct vctl *m = &vl->early[(vl->e_head + vl->e_n++) % HUB_CTL_RECVS];
			memcpy(m->msg, msg, w->byte_len < WIRE_CTL_LEN ? w->byte_len : WIRE_CTL_LEN);
			m->wr_id = w->byte_len;
		} else {
			fail(vl, "control messages overran the receives posted");
		}
	} else {
		complete_upto(vl, w->wr_id);
	}
}

/* A completion, then its receive buffer back to the shared receive
 * queue: only once a control message in it was copied out, or the next
 * message could land in it first.  A flushed receive too (known by its
 * id: the opcode of a completion in error is undefined). */
static void on_wc(struct vx *vx, struct ibv_wc *w)
{
	uint64_t i = w->wr_id & ~WR_RECV_BIT;
	wc_take(vx, w);
	if ((w->wr_id & WR_RECV_BIT) && i < (uint64_t)vx->nblocks * SRQ_BLOCK && post_srq(vx, (uint32_t)i))
		log_error("verbs: cannot refill the shared receive queue");
}

static int verbs_poll_cq(struct xport *xp, struct xwc *wc, int max)
{
	struct vx *vx = xp->priv;
	struct ibv_wc w[32];
	int n;
	verbs_destroy_dead(vx);
	while (vx->q_n < (uint32_t)max && (n = ibv_poll_cq(vx->cq, 32, w)) > 0)
		for (int i = 0; i < n; i++)
			on_wc(vx, &w[i]);
	n = 0;
	while (n < max && vx->q_n) {
		wc[n++] = vx->q[vx->q_head++];
		vx->q_n--;
	}
	if (!vx->q_n)
		vx->q_head = 0;
	return n;
}

static void cq_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct vx *vx = (struct vx *)((char *)ev - offsetof(struct vx, cq_ev));
	struct ibv_cq *cq;
	void *ctx;
	(void)h;
	(void)events;
	while (ibv_get_cq_event(vx->cc, &cq, &ctx) == 0)
		vx->unacked++;
	if (vx->unacked >= 64) {
		ibv_ack_cq_events(vx->cq, vx->unacked);
		vx->unacked = 0;
	}
	/* armed again before the hub polls: nothing slips between */
	ibv_req_notify_cq(vx->cq, 0);
}

static int verbs_reg_mr(struct xport *xp, void *addr, size_t len, int remote, struct xmr *mr)
{
	struct vx *vx = xp->priv;
	int acc = IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE : 0);
	struct ibv_mr *m = ibv_reg_mr(vx->pd, addr, len, acc);
	if (!m) {
		int r = err_neg();
		log_error("verbs: cannot register %zu bytes: %s", len, strerror(errno));
		return r;
	}
	mr->handle = m;
	mr->lkey = m->lkey;
	mr->rkey = remote ? m->rkey : 0;
	return 0;
}

static void verbs_dereg_mr(struct xport *xp, struct xmr *mr)
{
	if (mr->handle && !xp->gone)
		ibv_dereg_mr(mr->handle);
	mr->handle = NULL;
}

static int verbs_init(struct xport *xp, struct hub *h, uint16_t port)
{
	struct vx *vx = calloc(1, sizeof(*vx));
	struct ibv_context **devs;
	int ndev = 0;
	union sockaddr_any any;
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = SRQ_DEPTH, .max_sge = 1}};
	if (!vx)
		return -1;
	xp->priv = vx;
	xp->hub = h;
	vx->h = h;
	vx->xp = xp;
	devs = rdma_get_devices(&ndev);
	if (!devs || ndev == 0) {
		if (devs)
			rdma_free_devices(devs);
		errno = ENODEV;
		return -1;
	}
	vx->ctx = devs[0];
	rdma_free_devices(devs);
	vx->pd = ibv_alloc_pd(vx->ctx);
	vx->cc = vx->pd ? ibv_create_comp_channel(vx->ctx) : NULL;
	vx->cq = vx->cc ? ibv_create_cq(vx->ctx, CQ_DEPTH, NULL, vx->cc, 0) : NULL;
	if (!vx->cq && vx->cc)
		vx->cq = ibv_create_cq(vx->ctx, 4096, NULL, vx->cc, 0);
	vx->srq = vx->pd ? ibv_create_srq(vx->pd, &sa) : NULL;
	vx->rbufs = calloc(SRQ_DEPTH, WIRE_CTL_LEN);
	if (!vx->cq || !vx->srq || !vx->rbufs)
		return -1;
	if (verbs_srq_fit(vx) < 0)
		return -1;
	vx->ch = rdma_create_event_channel();
	if (!vx->ch)
		return -1;
	fcntl(vx->ch->fd, F_SETFL, fcntl(vx->ch->fd, F_GETFL) | O_NONBLOCK);
	fcntl(vx->cc->fd, F_SETFL, fcntl(vx->cc->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(vx->ch, &vx->lid, NULL, RDMA_PS_TCP) < 0)
		return -1;
	any = *hub_bind_addr(h);
	if (!any.sa.sa_family) {
		memset(&any, 0, sizeof(any));
		any.in.sin_family = AF_INET;
	}
	if (any.sa.sa_family == AF_INET)
		any.in.sin_port = htons(port);
	else
		any.in6.sin6_port = htons(port);
	if (rdma_bind_addr(vx->lid, &any.sa) < 0 || rdma_listen(vx->lid, 512) < 0)
		return -1;
	if (ibv_req_notify_cq(vx->cq, 0))
		return -1;
	vx->cm_ev.fn = verbs_cm_event;
	vx->cq_ev.fn = cq_event;
	if (hub_watch(h, vx->ch->fd, EPOLLIN, &vx->cm_ev) < 0 ||
	    hub_watch(h, vx->cc->fd, EPOLLIN, &vx->cq_ev) < 0)
		return -1;
	log_info("verbs: device %s, service port %u", ibv_get_device_name(vx->ctx->device), port);
	return 0;
}

static void verbs_fini(struct xport *xp)
{
	struct vx *vx = xp->priv;
	if (!vx)
		return;
	verbs_destroy_dead(vx);
	if (vx->lid)
		rdma_destroy_id(vx->lid);
	if (vx->ch)
		rdma_destroy_event_channel(vx->ch);
}

const struct xport_ops xport_verbs_ops = {
	.name = "verbs",
	.flags = XP_PLACED,
	.init = verbs_init,
	.fini = verbs_fini,
	.link_connect = verbs_link_connect,
	.link_close = verbs_link_close,
	.reg_mr = verbs_reg_mr,
	.dereg_mr = verbs_dereg_mr,
	.post_write_imm = verbs_post_write_imm,
	.post_send = verbs_post_send,
	.post_placed = verbs_post_placed,
	.post_recv = verbs_post_recv,
	.poll_cq = verbs_poll_cq,
	.link_info = verbs_link_info,
	.awaited = verbs_awaited,
	.batch = verbs_batch,
};
