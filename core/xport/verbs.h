/*
 * verbs.h - what the two files of the `verbs` transport share (private to
 * core/xport/): the queue depths, the per-link record (struct vlink) and
 * the transport's record (struct vx), and the calls one file makes into
 * the other.  verbs.c posts and reaps work requests; verbs_cm.c sets
 * links up and takes them down through rdma_cm.
 */
#ifndef RSHARE_VERBS_H
#define RSHARE_VERBS_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>

#include "xport_hub.h"
#include "frame.h"

#define SQ_DEPTH 512
#define CTRL_RESERVE 32
#define SIGNAL_EVERY 16
#define SRQ_DEPTH 4096
#define SRQ_BLOCK 512 /* receives posted (and buffers registered) per live link */
#define CQ_DEPTH 32768
#define WR_CTL_BIT (1ull << 63)
/* the work request id of a receive of the shared queue: this bit and its
 * buffer's index (a send's is its sequence number, far below), so that a
 * flushed receive, whose opcode is undefined, is known by it */
#define WR_RECV_BIT (1ull << 62)

struct vpost {           /* a posted send, until a signalled one covers it */
	uint64_t seq, wr_id;
	uint32_t len;
	enum xwc_op op;
};

struct vctl {            /* a control message waiting for send queue room */
	uint64_t wr_id;
	uint8_t msg[WIRE_CTL_LEN];
};

/* The work requests a link holds back within one pass of the hub (the
 * transport's batch op), posted in one ibv_post_send at its end; inline
 * data is copied in, as the caller's buffer may be gone by then. */
#define VB_MAX 32
#define VB_INLINE 256 /* the most a link asks to inline (verbs_cm.c) */
struct vbatch {
	struct ibv_send_wr wr[VB_MAX];
	struct ibv_sge sge[VB_MAX][2];
	uint8_t inl[VB_MAX][VB_INLINE];
	uint32_t n;
};

struct vrecv {
	uint64_t wr_id;
	void *buf;
	uint32_t len;
};

struct vlink {
	struct vx *vx;
	struct xlink *l;
	struct rdma_cm_id *id;
	int closed, established, disconnected;
	uint64_t seq, done;    /* posted / completed send sequence */
	uint64_t sig;          /* the last signalled one posted: awaited while past done */
	struct vpost *fifo;
	uint32_t f_head, f_n, f_cap;
	struct vctl *pend;
	uint32_t p_n, p_cap;
	struct vrecv *rq;
	uint32_t rq_head, rq_n, rq_cap;
	/* control messages that came before the hub posted its receives (the
	 * peer's side was established first): kept, in order, for them */
	struct vctl *early;
	uint32_t e_head, e_n;
	uint32_t max_inline;
	int want_room;
	struct vbatch *b;        /* held back in this pass (NULL until a pass needs it) */
	struct xlink_info info;  /* device, port, queue pair number */
	struct vlink *next;
};

struct vx {
	struct hub *h;
	struct xport *xp;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	uint8_t *rbufs;          /* SRQ_DEPTH control buffers, SRQ_BLOCK at a time in use */
	struct ibv_mr *rmr[SRQ_DEPTH / SRQ_BLOCK];
	uint32_t nblocks;
	struct hub_ev cm_ev, cq_ev;
	struct xwc *q;
	uint32_t q_head, q_n, q_cap;
	struct vlink *links;
	struct vlink **dead;      /* closed: destroyed at the next chance, the port up */
	uint32_t ndead, dead_cap;
	uint8_t port;             /* the device port the links use (0: not known yet) */
	int batch;                /* within a pass of the hub: posts wait for its end */
	unsigned unacked;
};

static inline struct vlink *VL(struct xlink *l) { return l->xpriv; }

static inline void fail(struct vlink *vl, const char *why)
{
	if (!vl->closed)
		hub_link_fail(vl->l, why);
}

/* verbs_cm.c: the connection manager's events, links started and closed */
void verbs_cm_event(struct hub *h, struct hub_ev *ev, uint32_t events);
int verbs_link_connect(struct xport *xp, struct xlink *l, const union sockaddr_any *peer);
void verbs_link_close(struct xlink *l);
void verbs_link_info(struct xlink *l, struct xlink_info *out); /* device, port, queue pair */
uint64_t verbs_awaited(struct xlink *l); /* the ops' awaited: a signalled request not completed */
/* one more block of receives for a new link, up to SRQ_DEPTH: 0 or -1 */
int verbs_srq_fit(struct vx *vx);
/* verbs.c: post what the link's batch holds (0 or -errno; nothing else done) */
int verbs_batch_post(struct vlink *vl);
/* free the records of closed links (not under a cm event) */
void verbs_destroy_dead(struct vx *vx);

#endif
