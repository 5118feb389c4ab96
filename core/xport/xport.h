/*
 * xport.h - the transport interface between hubs.
 *
 * Shaped like verbs, so that one hub drives every transport the same way:
 * a link is one reliable connection to one peer node (an RC QP on verbs, a
 * TCP connection on soft); on it the hub posts writes with immediate
 * (payload into the peer socket's receive ring, imm names that socket),
 * sends (64-byte control messages into receives the peer posted), and reaps
 * completions from one completion queue per transport.  Each transport is
 * one file (or a few, named after it: verbs.c and verbs_cm.c, soft.c,
 * soft_rx.c and soft_conn.c, with a private verbs.h or soft.h between
 * them) that fills in struct xport_ops; the hub never knows which one
 * runs.  The ops follow core/'s error convention (err.h): 0 or -errno,
 * except init, which keeps 0 or -1 with errno set (the hub reports
 * strerror(errno)).
 *
 * A transport sees of a link only struct xlink, which the hub's own link
 * record begins with, and of the hub only the calls in xport_hub.h:
 * hub_link_accepted() for a link a peer opened, hub_link_up() and
 * hub_link_fail(), hub_rx_target() to learn where the payload of an
 * incoming write belongs (the hub checks the destination socket, its
 * generation and the ring window, like a NIC checks a memory key), and
 * hub_link_writable() when posting may resume.  What only one transport
 * knows of a link (a verbs device, port and queue pair number) stays in
 * its private record and reaches `rshare stat` through link_info.
 */
#ifndef RSHARE_XPORT_H
#define RSHARE_XPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "addr.h"

struct hub;
struct xport;

/* What a transport sees of a link (the hub's struct link begins with it). */
struct xlink {
	uint32_t id;
	struct xport *xp;
	void *xpriv;                   /* the transport's own record */
	int outgoing;                  /* we opened it */
	int reached;                   /* verbs: the peer's address resolved (it answers on IP) */
	uint64_t peer_node;
	union sockaddr_any peer_addr;  /* the peer hub's address */
	union sockaddr_any local_addr; /* our end of the link */
};

/* What `rshare stat` shows of a link beyond the hub's counters. */
struct xlink_info {
	char dev[32];  /* verbs: device and port */
	int dev_port;
	uint32_t qpn;  /* verbs: our queue pair number */
	uint64_t rx_direct; /* soft: payload bytes read from the link straight into rings */
	char congestion[16]; /* soft: the TCP congestion control of the link's connection */
};

enum xwc_op { XWC_SEND = 1, XWC_WRITE, XWC_RECV, XWC_RECV_IMM };

struct xwc {
	uint64_t wr_id;      /* owner tag of the send, or the receive's wr_id */
	int status;          /* 0, or an errno-like failure (flush, ...) */
	enum xwc_op op;
	uint32_t byte_len;
	uint32_t imm;        /* XWC_RECV_IMM */
	struct xlink *link;
};

/* How a transport names the target of a write with immediate. */
#define XP_POSITIONAL 0x1 /* raddr = stream position; the receiving hub places it (soft) */
#define XP_PLACED 0x2     /* a write's completion means its bytes are in the peer's memory (verbs) */

struct xmr {          /* a registered region */
	void *handle;
	uint32_t lkey, rkey;
};

struct xport_ops {
	const char *name;
	unsigned flags;
	/* 0, or -1 with errno set */
	int (*init)(struct xport *xp, struct hub *hub, uint16_t port);
	void (*fini)(struct xport *xp);
	/* Start a link; the transport calls hub_link_up() or hub_link_fail().
	 * 0, or -errno when it could not even start. */
	int (*link_connect)(struct xport *xp, struct xlink *l, const union sockaddr_any *peer);
	void (*link_close)(struct xlink *l);
	/* optional, before closing a lost link: place what the peer sent */
	void (*link_drain)(struct xlink *l, int wait_ms);
	/* remote: the peer may write there (receive rings only); 0 or -errno */
	int (*reg_mr)(struct xport *xp, void *addr, size_t len, int remote, struct xmr *mr);
	void (*dereg_mr)(struct xport *xp, struct xmr *mr);
	/* 0, or -EAGAIN when the link has no room now (hub_link_writable follows) */
	int (*post_write_imm)(struct xlink *l, uint64_t wr_id, const struct iovec *iov, int iovcnt,
			      uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm);
	int (*post_send)(struct xlink *l, uint64_t wr_id, const void *buf, uint32_t len);
	/* optional (XP_PLACED): write the 8 bytes VAL, big-endian, to
	 * raddr/rkey after every write posted before it, telling the hub
	 * nothing when it completes (a placed tail, arena.h); 0, or -errno
	 * (-EAGAIN: no room now) when it did not go, which costs only speed */
	int (*post_placed)(struct xlink *l, uint64_t raddr, uint32_t rkey, uint64_t val);
	int (*post_recv)(struct xlink *l, uint64_t wr_id, void *buf, uint32_t len);
	int (*poll_cq)(struct xport *xp, struct xwc *wc, int max);
	/* optional: fill what only this transport knows of the link */
	void (*link_info)(struct xlink *l, struct xlink_info *out);
	/* optional: 0 when the link awaits no completion, else a token that
	 * changes with every completion that comes while it awaits some (the
	 * hub drops a link whose token stays the same too long: link.c) */
	uint64_t (*awaited)(struct xlink *l);
	/* optional: its listener, which a restart keeps open for the next hub
	 * (init takes it up again: hub_kept_listener), -1: none */
	int (*listener)(struct xport *xp);
	/* optional: on 1, what is posted from now on may wait in the
	 * transport; on 0, it all leaves now (the hub brackets each pass over
	 * its doorbells and completions so; a lone post is never held past
	 * its pass).  Returns whether anything left. */
	int (*batch)(struct xport *xp, int on);
	/* optional: memory at [addr, addr + len) is about to go (a send ring
	 * whose writes had not all completed): posts that still read it
	 * must not from now on */
	void (*forget)(struct xport *xp, const void *addr, size_t len);
};

struct xport {
	const struct xport_ops *ops;
	struct hub *hub;
	void *priv;
	int up;               /* initialized and listening */
	int gone;             /* the process that opened it died: nothing of it is
			       * touched again (an execve closes it; warden.c) */
	int waiting;          /* completions wait on the peer, with no event to say
			       * when they come: the hub polls again within this
			       * many us (soft), 0: none wait */
};

extern const struct xport_ops xport_soft_ops;
extern const struct xport_ops xport_verbs_ops;

#endif
