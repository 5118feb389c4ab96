/*
 * verbs_cm.c - the links of the `verbs` transport: set up and taken down
 * through rdma_cm on the hub's service port (RDMA_PS_TCP).
 *
 * The connecting hub resolves the peer's address and route, creates its
 * queue pair and connects, its HELLO in the connection's private data;
 * the peer hub checks that HELLO (on_request), creates its own queue pair
 * and accepts with its HELLO; ESTABLISHED brings the link up on both
 * sides.  Every other event fails the link.  A REJ of our own request
 * tells that the peer node has no hub; one that reaches an incoming link,
 * or says REJ_TIMEOUT, does not: a peer that gave up on its request while
 * our answers were lost destroys its cm id, which sends REJ_TIMEOUT.  A
 * closed link's record and cm id are destroyed only once the current cm
 * event is acked (verbs_destroy_dead).  A link whose address resolved is
 * marked reached (the hub tries soft only after verbs failed so for a
 * while).  What the hub asks of a link ends here too: its device and
 * queue pair (link_info), and whether it awaits a completion (awaited).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"
#include "err.h"
#include "log.h"

/* the IB CM's reject reason of a peer that gave up on its request */
#define VX_REJ_TIMEOUT 4

/* Is the device's port up?  While it is down (its network interface
 * went down), the connection manager must send nothing: on Soft-RoCE a
 * node whose connection manager sent while its port was down drops every
 * connection request it gets afterwards, a restarted hub's and rping's
 * too (tests/vm/link-cut.sh).  A cm id that is disconnected or destroyed
 * sends a DREQ or a REJ: both wait for the port to come back. */
static int port_up(struct vx *vx)
{
	struct ibv_port_attr a;
	return ibv_query_port(vx->ctx, vx->port ? vx->port : 1, &a) < 0 || a.state == IBV_PORT_ACTIVE;
}

void verbs_destroy_dead(struct vx *vx)
{
	if (vx->xp->gone || (vx->ndead && !port_up(vx)))
		return;
	for (uint32_t i = 0; i < vx->ndead; i++) {
		struct vlink *vl = vx->dead[i];
		if (vl->id && vl->established && !vl->disconnected)
			rdma_disconnect(vl->id);
		if (vl->id) {
			if (vl->id->qp)
				rdma_destroy_qp(vl->id);
			rdma_destroy_id(vl->id);
		}
		free(vl->fifo);
		free(vl->b);
		free(vl->pend);
		free(vl->rq);
		free(vl->early);
		free(vl);
	}
	vx->ndead = 0;
}

static void hello_param(struct vx *vx, struct rdma_conn_param *p, uint8_t *buf)
{
	struct wire_hello hh = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .node_id = hub_node_id(vx->h),
				.max_write = WIRE_MAX_WRITE};
	wire_hello_encode(&hh, buf);
	memset(p, 0, sizeof(*p));
	p->private_data = buf;
	p->private_data_len = WIRE_HELLO_LEN;
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->retry_count = 6; /* 7 would retry for ever (on rxe, at least) */
	p->rnr_retry_count = 7; /* forever: a full receive queue delays, never drops */
}

/* The queue pair's ack timeout, as the exponent the verbs take (4.096 us
 * times 2 to it): an unanswered send goes 7 times (hello_param: 6
 * retries), so each try gets a seventh of the hub's link timeout, to the
 * nearest power of two.  A shorter outage is ridden out by the retries,
 * every byte kept; after it the link is dropped.  With the idle link's
 * PING every 2 s a vanished peer is noticed as soon (without a timeout
 * the queue pair may wait for ever). */
static uint8_t ack_exponent(uint32_t timeout_ms)
{
	double try_us = timeout_ms * 1000.0 / 7 / 4.096;
	uint8_t e = 12;
	while (e < 31 && (double)(1u << e) * 1.4142 < try_us)
		e++;
	return e;
}

static int make_qp(struct vx *vx, struct vlink *vl)
{
	struct ibv_qp_init_attr a = {.send_cq = vx->cq, .recv_cq = vx->cq, .srq = vx->srq,
				     .qp_type = IBV_QPT_RC, .sq_sig_all = 0};
	uint8_t ack_timeout = ack_exponent(hub_link_timeout_ms(vx->h));
	if (rdma_set_option(vl->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
			    sizeof(ack_timeout)) < 0)
		log_info("verbs: cannot set the ack timeout: %s", strerror(errno));
	a.cap.max_send_wr = SQ_DEPTH;
	a.cap.max_send_sge = 2;
	a.cap.max_inline_data = 256;
	if (rdma_create_qp(vl->id, vx->pd, &a) < 0) {
		a.cap.max_inline_data = WIRE_CTL_LEN;
		if (rdma_create_qp(vl->id, vx->pd, &a) < 0)
			return err_neg();
	}
	vl->max_inline = a.cap.max_inline_data;
	if (verbs_srq_fit(vx) < 0)
		log_warn("verbs: cannot add receives for another link: %s", strerror(errno));
	vl->info.qpn = vl->id->qp->qp_num;
	vl->info.dev_port = vl->id->port_num;
	vx->port = vl->id->port_num;
	snprintf(vl->info.dev, sizeof(vl->info.dev), "%s", ibv_get_device_name(vx->ctx->device));
	return 0;
}

static struct vlink *vl_new(struct vx *vx, struct xlink *l, struct rdma_cm_id *id)
{
	struct vlink *vl = calloc(1, sizeof(*vl));
	if (!vl)
		return NULL;
	vl->vx = vx;
	vl->l = l;
	vl->id = id;
	if (id)
		id->context = vl;
	l->xpriv = vl;
	vl->next = vx->links;
	vx->links = vl;
	return vl;
}

/* A REJ of our request: a refusal, unless it says the peer timed out */
static void on_rejected(struct vlink *vl, int reason)
{
	char why[64];
	if (vl->l->outgoing && reason != VX_REJ_TIMEOUT) {
		snprintf(why, sizeof(why), "rejected (reason %d): no rshare hub there", reason);
		hub_link_refused(vl->l, why);
		return;
	}
	snprintf(why, sizeof(why), "rejected (reason %d)", reason);
	fail(vl, why);
}

static void on_request(struct vx *vx, struct rdma_cm_event *e)
{
	struct rdma_cm_id *id = e->id;
	struct wire_hello hh;
	const char *why;
	union sockaddr_any peer, local;
	struct xlink *l;
	struct vlink *vl;
	struct rdma_conn_param p;
	uint8_t buf[WIRE_HELLO_LEN];
	if (!e->param.conn.private_data ||
	    wire_hello_decode(e->param.conn.private_data, e->param.conn.private_data_len < WIRE_HELLO_LEN
			      ? e->param.conn.private_data_len : WIRE_HELLO_LEN, &hh, &why) < 0) {
		hub_count_malformed(vx->h);
		log_warn("verbs: connection request refused: %s", e->param.conn.private_data ? why : "no hello");
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	if (id->verbs != vx->ctx) {
		log_warn("verbs: connection request on another device refused");
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	memset(&peer, 0, sizeof(peer));
	memset(&local, 0, sizeof(local));
	memcpy(&peer, rdma_get_peer_addr(id), sizeof(struct sockaddr_in6));
	memcpy(&local, rdma_get_local_addr(id), sizeof(struct sockaddr_in6));
	wire_addr_unmap(&peer);
	wire_addr_unmap(&local);
	l = hub_link_accepted(vx->h, vx->xp, &peer, &local);
	if (!l) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	l->peer_node = hh.node_id;
	vl = vl_new(vx, l, id);
	if (!vl || make_qp(vx, vl) < 0) {
		if (vl)
			vl->id = NULL;
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		hub_link_fail(l, "cannot create a queue pair");
		return;
	}
	hello_param(vx, &p, buf);
	if (rdma_accept(id, &p) < 0)
		fail(vl, "rdma_accept failed");
}

static void on_cm(struct vx *vx, struct rdma_cm_event *e)
{
	struct vlink *vl = e->id->context;
	struct rdma_conn_param p;
	uint8_t buf[WIRE_HELLO_LEN];
	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		on_request(vx, e);
		return;
	}
	if (!vl || vl->closed)
		return;
	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		log_debug("verbs: link %u: address resolved", vl->l->id);
		vl->l->reached = 1;
		if (e->id->verbs != vx->ctx) {
			fail(vl, "peer not reachable through our RDMA device");
			break;
		}
		if (rdma_resolve_route(e->id, 2000) < 0)
			fail(vl, "rdma_resolve_route failed");
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		log_debug("verbs: link %u: route resolved, connecting", vl->l->id);
		if (make_qp(vx, vl) < 0) {
			fail(vl, "cannot create a queue pair");
			break;
		}
		hello_param(vx, &p, buf);
		if (rdma_connect(e->id, &p) < 0)
			fail(vl, "rdma_connect failed");
		break;
	case RDMA_CM_EVENT_ESTABLISHED: {
		struct wire_hello hh;
		const char *why = NULL;
		if (vl->l->outgoing) {
			if (!e->param.conn.private_data ||
			    wire_hello_decode(e->param.conn.private_data, WIRE_HELLO_LEN, &hh, &why) < 0) {
				hub_count_malformed(vx->h);
				fail(vl, why ? why : "no hello from the peer");
				break;
			}
		} else {
			hh.node_id = vl->l->peer_node;
		}
		if (!vl->l->local_addr.sa.sa_family) {
			memcpy(&vl->l->local_addr, rdma_get_local_addr(e->id), sizeof(struct sockaddr_in6));
			wire_addr_unmap(&vl->l->local_addr);
		}
		vl->established = 1;
		hub_link_up(vl->l, hh.node_id);
		break;
	}
	case RDMA_CM_EVENT_ADDR_ERROR:
		fail(vl, "address resolution failed");
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		fail(vl, "route resolution failed");
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		fail(vl, "peer unreachable");
		break;
	case RDMA_CM_EVENT_REJECTED:
		on_rejected(vl, e->status);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		fail(vl, "connect error");
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* its hub stopped, or it lost the link first (an outage): which,
		 * the next link tells (resume.c) */
		hub_link_lost(vl->l, "peer disconnected");
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		fail(vl, "device removed");
		break;
	default:
		break;
	}
}

void verbs_cm_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct vx *vx = (struct vx *)((char *)ev - offsetof(struct vx, cm_ev));
	struct rdma_cm_event *e;
	(void)h;
	(void)events;
	while (rdma_get_cm_event(vx->ch, &e) == 0) {
		struct rdma_cm_event copy = *e;
		uint8_t pd[64];
		/* work on a copy: the id of a refused request is destroyed, and
		 * an event must be acked before its id goes */
		if (copy.param.conn.private_data && copy.param.conn.private_data_len) {
			size_t n = copy.param.conn.private_data_len;
			memcpy(pd, copy.param.conn.private_data, n < sizeof(pd) ? n : sizeof(pd));
			copy.param.conn.private_data = pd;
		}
		rdma_ack_cm_event(e);
		on_cm(vx, &copy);
	}
	verbs_destroy_dead(vx);
}

int verbs_link_connect(struct xport *xp, struct xlink *l, const union sockaddr_any *peer)
{
	struct vx *vx = xp->priv;
	struct vlink *vl = vl_new(vx, l, NULL);
	union sockaddr_any src = *hub_bind_addr(vx->h);
	if (!vl)
		return err_neg();
	if (rdma_create_id(vx->ch, &vl->id, vl, RDMA_PS_TCP) < 0) {
		vl->id = NULL;
		return err_neg();
	}
	if (rdma_resolve_addr(vl->id, src.sa.sa_family ? &src.sa : NULL, (struct sockaddr *)&peer->sa,
			      2000) < 0)
		return err_neg();
	return 0;
}

void verbs_link_close(struct xlink *l)
{
	struct vlink *vl = VL(l), **pp;
	struct vx *vx;
	uint32_t k = 0;
	if (!vl || vl->closed)
		return;
	vx = vl->vx;
	/* what the hub posted before it closed the link goes, as it would
	 * have without the pass's batch (verbs.c) */
	if (vl->established && !vx->xp->gone && verbs_batch_post(vl) < 0)
		log_debug("verbs: link %u: its last work requests could not be posted", l->id);
	vl->closed = 1;
	if (vl->id && vl->established && !vx->xp->gone && port_up(vx)) {
		rdma_disconnect(vl->id);
		vl->disconnected = 1;
	}
	for (pp = &vx->links; *pp; pp = &(*pp)->next)
		if (*pp == vl) {
			*pp = vl->next;
			break;
		}
	for (uint32_t i = 0; i < vx->q_n; i++)
		if (vx->q[vx->q_head + i].link != l)
			vx->q[vx->q_head + k++] = vx->q[vx->q_head + i];
	vx->q_n = k;
	l->xpriv = NULL;
	if (vl->id)
		vl->id->context = NULL;
	/* destroyed once the current cm event is acked */
	if (vx->ndead == vx->dead_cap) {
		uint32_t cap = vx->dead_cap ? vx->dead_cap * 2 : 16;
		struct vlink **n = realloc(vx->dead, cap * sizeof(*n));
		if (!n)
			return; /* leak the id rather than destroy it under an event */
		vx->dead = n;
		vx->dead_cap = cap;
	}
	vx->dead[vx->ndead++] = vl;
}

void verbs_link_info(struct xlink *l, struct xlink_info *out)
{
	*out = VL(l)->info;
}

/* A signalled request not completed yet: the completed sequence, which
 * moves at every completion (a queue pair that neither completes nor fails
 * what it was given is stuck, as a Soft-RoCE one was seen to be for
 * minutes once its peer had dropped the link). */
uint64_t verbs_awaited(struct xlink *l)
{
	struct vlink *vl = VL(l);
	return !vl->closed && vl->sig > vl->done ? vl->done + 1 : 0;
}
