/*
 * xport.h - the transport interface between hubs.
 *
 * Shaped like verbs, so that one hub drives every transport the same way:
 * a link is one reliable connection to one peer node (an RC QP on verbs, a
 * TCP connection on soft); on it the hub posts writes with immediate
 * (payload into the peer socket's receive ring, imm names that socket),
 * sends (64-byte control messages into receives the peer posted), and reaps
 * completions from one completion queue per transport.  Each transport is
 * one file that fills in struct xport_ops (xport_soft.c, ...); the hub never
 * knows which one runs.
 *
 * Transports call back into the hub (hub.h): hub_link_accepted() for a link
 * a peer opened, hub_link_up()/hub_link_down(), hub_rx_target() to learn
 * where the payload of an incoming write belongs (the hub checks the
 * destination socket, its generation and the ring window, like a NIC checks
 * a memory key), and hub_link_writable() when posting may resume.
 */
#ifndef RSHARE_XPORT_H
#define RSHARE_XPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "arena.h"

struct hub;
struct link;
struct xport;

enum xwc_op { XWC_SEND = 1, XWC_WRITE, XWC_RECV, XWC_RECV_IMM };

struct xwc {
	uint64_t wr_id;      /* owner tag of the send, or the receive's wr_id */
	int status;          /* 0, or an errno-like failure (flush, ...) */
	enum xwc_op op;
	uint32_t byte_len;
	uint32_t imm;        /* XWC_RECV_IMM */
	struct link *link;
};

/* How a transport names the target of a write with immediate. */
#define XP_POSITIONAL 0x1 /* raddr = stream position; the receiving hub places it (soft) */

struct xmr {          /* a registered region */
	void *handle;
	uint32_t lkey, rkey;
};

struct xport_ops {
	const char *name;
	unsigned flags;
	int (*init)(struct xport *xp, struct hub *hub, uint16_t port);
	void (*fini)(struct xport *xp);
	/* Start a link; the transport calls hub_link_up() or hub_link_down(). */
	int (*link_connect)(struct xport *xp, struct link *l, const union sockaddr_any *peer);
	void (*link_close)(struct link *l);
	/* remote: the peer may write there (receive rings only) */
	int (*reg_mr)(struct xport *xp, void *addr, size_t len, int remote, struct xmr *mr);
	void (*dereg_mr)(struct xport *xp, struct xmr *mr);
	/* 0, or -EAGAIN when the link has no room now (hub_link_writable follows) */
	int (*post_write_imm)(struct link *l, uint64_t wr_id, const struct iovec *iov, int iovcnt,
			      uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm);
	int (*post_send)(struct link *l, uint64_t wr_id, const void *buf, uint32_t len);
	int (*post_recv)(struct link *l, uint64_t wr_id, void *buf, uint32_t len);
	int (*poll_cq)(struct xport *xp, struct xwc *wc, int max);
};

struct xport {
	const struct xport_ops *ops;
	struct hub *hub;
	void *priv;
	int up;               /* initialized and listening */
};

extern const struct xport_ops xport_soft_ops;
extern const struct xport_ops xport_verbs_ops;

#endif
