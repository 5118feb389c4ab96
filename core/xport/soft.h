/*
 * soft.h - what the files of the `soft` transport share (private to
 * core/xport/): the per-link record (struct soft_link), the transport's
 * record (struct soft) and the calls between the files.  soft.c posts
 * frames and reports completions, soft_rx.c reads and parses the stream,
 * soft_conn.c listens, accepts and connects.
 */
#ifndef RSHARE_SOFT_H
#define RSHARE_SOFT_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "xport_hub.h"
#include "xqueue.h"
#include "frame.h"

/* What one connection's bulk can put ahead of another's message on a link,
 * a FIFO for all of them: the hub's queue (SOFT_OUT_MAX), the kernel's
 * unsent bytes (SOFT_NOTSENT_LOWAT) and the receiver's buffer
 * (SOFT_RCVBUF; the kernel doubles it), each bounded instead of grown to
 * megabytes (soft_conn.c) */
#define SOFT_OUT_MAX (256u << 10) /* queued bytes before writes get -EAGAIN */
#define SOFT_NOTSENT_LOWAT (64 << 10)
#define SOFT_RCVBUF (256 << 10)
#define SOFT_IN_CHUNK (256u << 10)
#define SOFT_ZC_MIN 256u          /* a ring's payload this long is sent from the ring */
#define SOFT_IOV 256              /* pieces of the queue a sendmsg takes */
#define SOFT_DIRECT_MIN (8u << 10) /* this much of a write's payload still to come is read straight into its ring */

/* A piece of the outgoing queue: bytes of out (owned, in order), of a
 * send ring (until its write completes), or a copy of them (soft_forget). */
enum { SEG_OWN, SEG_EXT, SEG_HEAP };
struct soft_oseg {
	const uint8_t *p;
	uint32_t len;
	uint8_t kind;
};

struct soft_recv {
	uint64_t wr_id;
	void *buf;
	uint32_t len;
};

struct soft_pend { /* a completion waiting for its frame to be acknowledged */
	uint64_t end;
	struct xwc wc;
};

/* The incoming buffer: BASE bytes of the link's stream came before in[0];
 * in holds LEN bytes, OFF of them parsed.  With DIRECT, the frame at OFF
 * is a write whose payload is read from the link straight into its ring
 * (soft_rx.c): PUT bytes of it are there (those in the buffer among
 * them), and the next bytes of the link are the rest of it.  Stored after
 * each frame and each read, so that a successor of a hub killed in the
 * middle of a parse goes on after the last frame it finished (the frame
 * it died in is placed again: hub_rx_target), and the bytes of a read it
 * did not count are found (soft_in_recover). */
struct soft_inpos {
	uint64_t base;
	uint32_t len, off;
	uint32_t put, direct;
};

struct soft_link {
	struct hub_ev ev; /* first: epoll data points here */
	struct soft *sx;
	struct xlink *l;
	int fd;
	int closed, connecting, hello_in, stalled, need_parse;
	/* a write that names its writer (WIRE_BY_SRC) and no socket here yet:
	 * the parse waits until the completions before it (its CONNECT among
	 * them) reach the hub, cq_taken past by_src_mark (frame_decode) */
	int by_src_wait;
	uint64_t by_src_mark;
	int draining;     /* lost, read to its end before it is closed (soft_link_drain) */
	uint32_t events;
	/* the outgoing queue: its pieces (os_off bytes of the first sent),
	 * and the owned bytes in out ([ooff, olen) not yet sent); oq bytes */
	struct soft_oseg *os;
	uint32_t os_head, os_n, os_cap, os_off;
	uint8_t *out;
	size_t olen, ooff, ocap, oq;
	uint64_t queued, written, acked; /* bytes of the stream: queued, given to the kernel, acknowledged */
	uint32_t ack_poll_us;            /* how soon to look for acknowledgements again */
	uint64_t ack_look_ns;            /* when it last looked (SIOCOUTQ) */
	uint64_t rcvd, rcvd_looked;      /* bytes read from the link, ever, and at that look */
	struct soft_pend *pw;
	uint32_t pw_head, pw_n, pw_cap;
	uint8_t *in;
	size_t icap;
	uint32_t next_read; /* 0, or the most the next read takes: up to the next header while large writes come */
	struct iovec dv[2]; /* where a write read straight into its ring goes (soft_rx.c) */
	int dn;
	uint64_t rx_direct; /* payload bytes read so, ever (link_info) */
	/* what in holds (struct soft_inpos), in two copies: the one ipi
	 * names is current; a change fills the other, then names it, so that
	 * a successor of a hub killed at any point (warden.c) finds one whole */
	struct soft_inpos ip[2];
	_Atomic uint32_t ipi;
	struct soft_recv *rq;
	uint32_t rq_head, rq_n, rq_cap;
	struct soft_link *next;
};

static inline struct soft_inpos soft_in(const struct soft_link *sl)
{
	return sl->ip[atomic_load_explicit(&sl->ipi, memory_order_acquire) & 1];
}
/* after what it says is done (release: the placement before it) */
static inline void soft_in_store(struct soft_link *sl, struct soft_inpos ip)
{
	uint32_t k = (atomic_load_explicit(&sl->ipi, memory_order_relaxed) & 1) ^ 1;
	sl->ip[k] = ip;
	atomic_store_explicit(&sl->ipi, k, memory_order_release);
}
static inline void soft_in_set(struct soft_link *sl, uint64_t base, uint32_t len, uint32_t off)
{
	soft_in_store(sl, (struct soft_inpos){.base = base, .len = len, .off = off});
}

struct soft {
	struct hub *h;
	struct xport *xp;
	int lfd;
	struct hub_ev lev;
	struct xwc *cq;
	uint32_t cq_head, cq_n, cq_cap;
	uint64_t cq_pushed, cq_taken; /* completions ever pushed, and handed to the hub */
	struct soft_link *links;
	int batch;        /* frames queue until the hub's pass ends (soft_batch) */
};

static inline struct soft_link *SL(struct xlink *l) { return l->xpriv; }

static inline void fail(struct soft_link *sl, const char *why)
{
	if (!sl->closed)
		hub_link_fail(sl->l, why);
}

/* A failed call on the link's socket: the link is lost and its
 * connections wait for a new one (resume.c), which tells whether the
 * peer hub is still there; a refused connect says that the node has no
 * hub. */
static inline void fail_errno(struct soft_link *sl, int err)
{
	if (sl->closed)
		return;
	if (err == ECONNREFUSED)
		hub_link_refused(sl->l, strerror(err));
	else
		hub_link_lost(sl->l, strerror(err));
}

/* soft.c: the completion queue, the epoll interest, the outgoing stream */
void soft_cq_push(struct soft *sx, const struct xwc *wc);
void soft_set_events(struct soft_link *sl);
void soft_flush(struct soft_link *sl);   /* hand queued frames to the kernel */
void soft_send_hello(struct soft_link *sl);
/* soft_rx.c: the incoming stream */
void soft_on_readable(struct soft_link *sl);
void soft_parse(struct soft_link *sl);   /* every whole frame received so far */
void soft_link_drain(struct xlink *l, int wait_ms); /* a lost link: all its peer sent, placed */
/* soft_conn.c: listening, accepting, connecting */
int soft_init(struct xport *xp, struct hub *h, uint16_t port);
int soft_link_connect(struct xport *xp, struct xlink *l, const union sockaddr_any *peer);
/* the TCP congestion control of link socket fd, NUL-ended, in NAME; 0 or -1 */
int soft_congestion(int fd, char name[16]);

#endif
