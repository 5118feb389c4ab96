/*
 * xport_hub.h - the hub calls meant for transports, and nothing else of
 * the hub: its event loop (watch a descriptor, free memory after the
 * current batch), a few facts (node id, bind address), and the link and
 * data callbacks.  A transport includes this and xport.h, never hub.h;
 * the hub implements every call here (hub/).
 */
#ifndef RSHARE_XPORT_HUB_H
#define RSHARE_XPORT_HUB_H

#include <stdint.h>
#include <sys/uio.h>

#include "xport.h"

struct hub;

#define HUB_CTL_RECVS 256 /* control receives the hub posts on each link */

/* An epoll registration: data.ptr of every event points at one of these. */
struct hub_ev {
	void (*fn)(struct hub *h, struct hub_ev *ev, uint32_t events);
};

/* the event loop; 0 or -1 (errno set) */
int hub_watch(struct hub *h, int fd, uint32_t events, struct hub_ev *ev);
int hub_rewatch(struct hub *h, int fd, uint32_t events, struct hub_ev *ev);
void hub_unwatch(struct hub *h, int fd);
void hub_defer_free(struct hub *h, void *p); /* free(p) after the current batch of events */

/* facts of this hub */
uint64_t hub_node_id(const struct hub *h);
/* how long a link may go unanswered, its peer silent or the wire cut,
 * before the transport gives it up (rshare.conf: link_timeout) */
uint32_t hub_link_timeout_ms(const struct hub *h);
/* the TCP congestion control of soft links (rshare.conf: link_congestion):
 * "" or "auto" for the transport's choice, else a name */
const char *hub_link_congestion(const struct hub *h);
const union sockaddr_any *hub_bind_addr(const struct hub *h); /* family 0: any */
void hub_count_malformed(struct hub *h); /* a peer broke the protocol */
/* the listener the hub before this one kept open (a restart): init goes on
 * with it instead of making one; -1: none (given once) */
int hub_kept_listener(struct hub *h);

/* links: a link a peer opened (NULL when it cannot be had), its HELLO
 * came (up), it failed (the hub drops it and resets its connections: a
 * protocol broken, a wrong request) */
struct xlink *hub_link_accepted(struct hub *h, struct xport *xp, const union sockaddr_any *peer,
				const union sockaddr_any *local);
void hub_link_up(struct xlink *l, uint64_t peer_node);
void hub_link_fail(struct xlink *l, const char *why);
/* The peer went unanswered (retries exhausted, a timeout): the link is
 * dropped, its connections wait for a new one (resume.c). */
void hub_link_lost(struct xlink *l, const char *why);
/* A link being set up was refused: the peer node answers, and has no hub
 * there.  Connections that wait for a link to it are reset (resume.c). */
void hub_link_refused(struct xlink *l, const char *why);
/* posting may resume; hub_link_waiting: sockets wait for that room */
void hub_link_writable(struct xlink *l);
int hub_link_waiting(const struct xlink *l);

/* Where does the payload of an incoming write go?  iov count, 0 to discard,
 * -1 when the write breaks the protocol (the link is then dropped).
 * *AGAIN is set when it is the write counted last, read again from a link
 * being drained (the hub that placed it died before it was done): placed
 * again, and not completed a second time. */
int hub_rx_target(struct xlink *l, uint32_t imm, uint64_t raddr, uint32_t len, struct iovec iov[2], int *again);
/* Where the payload of such a write would go now, when it is the next
 * its socket expects (established, in order, within credit), without
 * counting it: iov count, 0 when not (hub_rx_target decides).  A transport
 * that reads a payload from its link straight into the ring places it
 * there, then counts it with hub_rx_target, which gives the same iov. */
int hub_rx_peek(struct xlink *l, uint32_t imm, uint64_t raddr, uint32_t len, struct iovec iov[2]);
/* The same check for a transport whose NIC already placed the payload
 * (verbs): 1 when the write was in order and within credit, 0 when its
 * socket is gone, -1 when it breaks the protocol. */
int hub_rx_written(struct xlink *l, uint32_t imm, uint32_t len);
/* A write that names its writer's socket (soft: WIRE_BY_SRC, sent before
 * our ACCEPT reached the writer's hub): the imm of our socket it goes to,
 * 0 when none (then it is dropped, as one for a socket that is gone). */
uint32_t hub_rx_by_src(struct xlink *l, uint32_t src);

#endif
