/*
 * hub.h - the hub: one process per node that owns every link, every pool's
 * arena and the single completion poller.  The hub's private header.
 *
 * Its files, from the top of the calls down:
 *   loop.c     hub_main (options, set-up) and the event loop: doorbells,
 *              completion queues, sleeping, the end of each batch
 *   test.c     a hub without sockets, for unit tests and fuzzers
 *   ctl.c      processes' unix connections: accepted, read, ended
 *   cell.c     requests that come through the arena's request cells
 *   request.c  processes' requests: one table by op
 *   proc.c     process records: sockets held, replies, tokens, death
 *   pass.c     sockets in flight between processes (SCM_RIGHTS)
 *   stat.c     the `rshare stat` report
 *   route.c    completions and control messages from the transports
 *   link.c     links to peer hubs: made, accepted, up, failed, timers
 *   conn.c     connection set-up: connect, listen, accept, backlog
 *   close.c    a socket released by its last holder
 *   data.c     data and credit out, checks of the peer's writes in
 *   resize.c   rings that grow and shrink, and the credit that follows them
 *   sock.c     socket records: make, find, wake, reset, linger, free
 *   pair.c     same-node connections' pair segments
 *   ready.c    readiness descriptors for poll, select and epoll
 *   keep.c     keepers: readiness descriptors beyond the hub's own budget
 *   pool.c     pools and their arenas, memory keys
 *   arena_alloc.c  the ring allocator of an arena
 *   ev.c       epoll helpers, deferred frees, clocks, facts
 *   crash.c    a backtrace in the log on a fatal signal
 *   warden.c   rshared's main process: a hub that dies is succeeded
 *   restart.c  `rshare hub restart`: a new hub in the same process
 *   image.c    ... the records it hands over, as bytes
 * Lower files never call higher ones but for two pairs: a connect with no
 * link yet makes one (conn.c -> link.c, hub_link_new_outgoing) and a link
 * that comes up sends the CONNECTs that waited for it (link.c -> conn.c,
 * hsock_connect); a control message that breaks the protocol drops its
 * link (route.c -> link.c, hub_link_fail, as the transports do).
 * Transports call only the hub functions declared in xport_hub.h.
 */
#ifndef RSHARE_HUB_H
#define RSHARE_HUB_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "arena_alloc.h"
#include "frame.h"
#include "sys.h" /* sys_now_ns */
#include "xport.h"
#include "xport_hub.h"

#define HUB_DEFAULT_PORT 18515
#define HUB_LINK_CONNECT_MS 3000
#define HUB_LIS_INO_BUCKETS 4096 /* buckets of listeners by kernel inode */
#define HUB_BY_SRC_BUCKETS 4096  /* buckets of accepted sockets by their peer's socket (early.c) */
#define HUB_WAKE_LATER 16       /* listeners one request may wake after its answer */
#define HUB_KEEPALIVE_MS 2000 /* an idle verbs link sends a PING this often */
#define HUB_LINK_TIMEOUT_S 10 /* a link unanswered this long is dropped (rshare.conf: link_timeout) */
#define HUB_LINK_OUTAGE_S 900 /* its connections with bytes unacknowledged wait this long (link_outage), as
			       * kernel TCP retransmits for about 15 minutes (tcp_retries2) */
#define HUB_RELINK_MS 1000    /* a lost link's peer is tried again this often */
#define HUB_RELINK_REFUSED_GRACE_MS 5000 /* verbs: refusals this soon after the loss are a restart's */
#define HUB_RELINK_QUICK_MS 100 /* ... and the peer is tried again this soon */
#define HUB_RELINK_REFUSED_HOLD_MS 2000 /* verbs: a refusal means no hub once it went on this long */
#define HUB_HANDOVER_DRAIN_MS 500 /* a soft link let go by a restart or a successor is read until its peer's end this long */

enum { HUB_AUTO = 0, HUB_VERBS, HUB_SOFT };

struct hub;
struct msg_req;
struct msg_rep;
struct keep_msg;
struct punch;

#define HUB_UID_POOLS 1024      /* default uid_pools */
#define HUB_UID_SOCKETS (1u << 20) /* default uid_sockets: as many as the hub has ids */
#define POOL_CHUNK (4u << 20) /* receive rings below such a boundary, send rings above */

/* What one uid holds on this hub (pool.c), against the limits of
 * rshare.conf(5); kept while the hub runs (there are few uids). */
struct uid_use {
	uid_t uid;
	uint32_t pools, socks;
	uint64_t bytes;               /* ring bytes its pools have allocated */
	struct uid_use *next;
};

struct pool_mr {                  /* one ring registered on its own (verbs) */
	uint64_t off, len;            /* 0: an empty entry */
	struct xmr mr;
	int idle;                     /* its ring is free, kept registered for the next */
};

struct pool {
	uint64_t id;
	struct uid_use *use;          /* its uid's account */
	int memfd, evfd;
	struct hub_ev ev;
	void *base;
	uint64_t bytes;
	struct arena_slot *slots;     /* the slot array, as the hub laid it out (never re-read) */
	struct arena_alloc *rx_alloc; /* receive rings: the only remotely writable part */
	struct arena_alloc *tx_alloc; /* send rings */
	struct pool_mr *mrs;          /* verbs: the registered rings, by offset (pool.c) */
	uint32_t mr_cap, nmr;
	uint64_t mr_idle_bytes;       /* of registrations kept for free rings */
	uint64_t allocs_seen[2];      /* rx_alloc's and tx_alloc's arena_allocs at the last look (pools_cool) */
	uint32_t nprocs, nsocks;
	uint32_t slot_hi;             /* slots at or above it were never used */
	uint32_t *slot_free, nfree;   /* slots below slot_hi free again, a stack */
	uint32_t slot_sid[ARENA_MAX_SLOTS]; /* slot -> hub socket id, 0 when free */
	uint32_t slot_gen[ARENA_MAX_SLOTS]; /* slot -> the generation of its last socket */
	struct proc *cell_proc[ARENA_CELLS]; /* request cell -> the process given it (proc.c), or NULL;
					      * never in an image: made again from each process's cell */
	struct pool *next;
};

#define HUB_PASSES_SHIFT 12
#define HUB_PASSES_MAX (1u << HUB_PASSES_SHIFT)
struct hpass {        /* a descriptor of an rshare socket in flight (pass.c) */
	struct hub_ev ev;
	uint32_t id;      /* its place in h->passes, and above that a count */
	uint64_t secret;
	uint32_t sid, gen; /* the socket, which it holds a reference on */
	uid_t uid;        /* of the sender: only its uid may take it */
	int hfd, ofd;     /* the token's other end; the descriptor passed */
};

struct proc {
	struct hub_ev ev;
	int fd;
	pid_t pid;        /* 0 until a forked child says who it is */
	uid_t uid;
	uint64_t token;
	int stat_only;
	char *out;        /* a stat reply not yet taken (request.c) */
	size_t out_len, out_off;
	uint32_t cell;    /* its request cell in its pool's arena, + 1; 0: none (cell.c) */
	struct pool *pool;
	uint32_t *socks;  /* hub socket ids this process holds */
	uint32_t nsocks, cap;
	struct proc_idx {
		uint32_t sid, pos;
	} *idx;           /* socket id -> place in socks (proc.c) */
	uint32_t idx_cap;
	struct proc *next;
};

enum link_state { LINK_CONNECTING = 1, LINK_UP, LINK_DOWN };

#define LINK_EARLY_PORTS 8

struct link {
	struct xlink x;                /* what its transport sees: id, ends, peer node */
	enum link_state state;
	uint64_t deadline_ms;          /* connect deadline */
	uint64_t ping_ms;              /* when it last sent anything, for keepalives */
	uint64_t msgs_tx_seen;
	uint64_t await_tok, await_ms;  /* the transport's awaited token, and since when it stayed */
	int was_up;
	int lost;                      /* failed for want of an answer: its connections wait (resume.c) */
	int refused;                   /* set-up refused: the peer node has no hub */
	int relink;                    /* made to bring a lost link back */
	int probe;                     /* verbs, made beside a soft link to see whether verbs is back (link_upgrade) */
	uint64_t upgrade_ms, upgrade_gap; /* soft: when verbs is tried next beside it, and the wait after that */
	const char *doomed;            /* failed mid-work: dropped between event batches */
	int writable;                  /* the transport has room again: resume txwait */
	uint8_t *ctl_bufs;             /* HUB_CTL_RECVS x WIRE_CTL_LEN */
	uint32_t *txwait;              /* sockets waiting for room on the link */
	uint32_t ntxwait, txwait_cap;
	uint32_t conns;
	uint64_t conns_total, bytes_tx, bytes_rx, msgs_tx, msgs_rx, cq_send, cq_recv;
	/* ports the peer node accepted a connection to of late, and the
	 * room its listener had then: a connect there is answered at once
	 * (early.c) */
	struct early_port {
		uint16_t port;
		uint16_t room;      /* connections it may still queue, less those in flight */
		uint32_t inflight;  /* answered here, its ACCEPT not come yet */
	} early[LINK_EARLY_PORTS];
	uint32_t early_next;    /* the entry a new port takes */
	struct link *next;
};

enum hsock_state {
	HS_CONNECTING = 1,
	HS_ESTABLISHED,
	HS_LISTENING,
	HS_FALLBACK,
	HS_CLOSED,   /* reset or refused; waits for its holders to release it */
	HS_LINGER,   /* released with FIN sent; remembers its peer until the peer's FIN */
};

/* A same-node connection (pair.c): its two directions in the pair
 * segment of its two pools; shared by its two sockets, freed with the last. */
struct pairseg {
	struct pairseg *next;
	uint32_t id;
	uint64_t pool_a, pool_b;    /* pool ids, a <= b */
	int memfd;
	void *base;
	uint64_t bytes;
	struct arena_alloc *alloc;
	uint64_t allocs_seen;       /* alloc's arena_allocs at the last look (pools_cool) */
	uint64_t used[(1u << 19) / 64]; /* directions in use (PAIR_MAX_DIRS) */
	uint32_t used_hint;         /* the word to look at first */
	uint32_t npairs;
};
struct lpair {
	struct pairseg *seg;
	uint32_t dir[2];            /* 0: connecting side -> accepted side, 1: back */
	uint64_t off[2], size[2];   /* the rings' bytes in the segment */
	uint32_t sid[2];            /* its sockets: side 0 connected, side 1 accepted */
	/* a direction's rings before it grew: kept until the pair goes, as
	 * its reader may still be copying out of one (at most one a size) */
	uint64_t old_off[2][12], old_size[2][12];
	uint8_t nold[2];
	int refs;
};

struct pending_conn { /* a CONNECT waiting for backlog room */
	struct link *link;
	struct wire_ctl ctl;
};

struct hsock {
	uint32_t sid, gen;
	enum hsock_state state;
	struct pool *pool;
	uint32_t slot;
	struct arena_slot *as;      /* NULL once the slot is given back (LINGER) */
	uint32_t nholders;
	struct link *link;
	uint32_t peer;              /* peer socket, imm form */
	uint64_t rx_off, rx_size, tx_off, tx_size;
	uint64_t rx_tail;           /* next byte position expected from the peer */
	uint64_t tx_posted, tx_done;
	uint64_t peer_head;         /* credit: peer's ring head as last reported */
	uint32_t peer_ring;
	uint64_t peer_raddr;        /* verbs: the peer ring's address and key */
	uint32_t peer_rkey;
	uint32_t rx_rkey, tx_lkey;  /* verbs: keys of our rings */
	/* a send ring that grew (resize.c): the old one, until the writes
	 * posted from it (up to tx_old_until) completed */
	uint64_t tx_old_off, tx_old_size, tx_old_until;
	/* whether it should grow with its flow (resize.c): where and when
	 * the send ring's last turn began */
	uint64_t tx_ep_t0, tx_ep_h0;
	/* a receive ring that changes size (resize.c): the new one offered
	 * to the peer (RING) or waiting to be moved in, the stream position
	 * from which the peer writes to it (RING_ACK), and the largest ring
	 * the peer may be writing to meanwhile (what the credit check allows) */
	uint64_t rx_next_off, rx_next_size, rx_switch_at, rx_room;
	uint32_t rx_next_rkey;
	/* whether it should grow (resize.c): the epoch's start, credits
	 * and hits */
	uint64_t rx_ep_t0, rx_ep_h0;
	uint32_t rx_ep_n, rx_hits;
	/* the peer's next receive ring, from its RING, until we switch */
	uint64_t peer_next_raddr;
	uint32_t peer_next_ring, peer_next_rkey;
	/* the ring it wrote to before the last switch, and the position from
	 * which it writes to the new one: resends below it after a lost link
	 * go to the old ring, which the peer keeps until then (resume.c) */
	uint64_t peer_old_raddr, peer_switch_at;
	uint32_t peer_old_ring, peer_old_rkey;
	/* verbs: the peer's new and old receive rings from its REKEY (its
	 * keys changed while that ring changed size), taken at its RESUME */
	struct wire_ring peer_rekey[2];
	/* verbs, placed tails (data.c): where the peer's socket takes the end
	 * of our writes (its CTL_PLACED; key 0: nowhere) and the number of the
	 * peer's ring we write to; ours: our word's key and our ring's number */
	uint64_t peer_placed_raddr;
	uint32_t peer_placed_rkey, peer_ring_no, placed_rkey, rx_ring_no;
	/* the reader's head when it read past rx_tail (a placed tail) and then
	 * closed: the writes that land up to it are no data after the close */
	uint64_t rx_read_ahead;
	uint64_t idle_rx, idle_tx;  /* rx_tail and tx_posted at the last idle look (resize.c) */
	uint64_t punch_tail;        /* same node: the tail its direction was last punched at */
	uint64_t tx_watch_head, tx_watch_ms; /* a nonblocking writer's full ring: since when, and where */
	uint64_t credit_sent;
	uint64_t fin_at;            /* tx position after which FIN goes out */
	uint64_t rx_expect;         /* next position a write may target (placed, not yet completed) */
	unsigned fin_pending : 1, fin_sent : 1, fin_done : 1, rx_fin : 1, closing : 1,
		on_txwait : 1, queued : 1, counted : 1, connect_sent : 1, reset_sent : 1, accepted : 1, port_held : 1, port_claimed : 1,
		reset_after_tx : 1, /* released with a reset: it goes once the posted data has */
		early : 1,          /* answered established before the peer's ACCEPT (early.c) */
		tx_fixed : 1,       /* the program chose the send ring's size: it never grows */
		rx_fixed : 1,       /* ... the receive ring's */
		rx_offered : 1,     /* a RING went out, its RING_ACK has not come */
		rx_switch : 1,      /* the RING_ACK came: the new ring waits for the reader to step out */
		rx_limited : 1,     /* the peer used all of its credit since the last one we sent */
		abort_asked : 1,    /* a holder closed it with SO_LINGER 0 (request.c) */
		peer_next : 1,      /* the peer's RING waits for our writes in flight to fit */
		on_resized : 1,     /* on h->resized: a ring above its first size, or a move waiting */
		touched : 1,        /* link: data went through its rings since they were last punched;
				     * same node: established (looked at while it lives) */
		idle_seen : 1,
		tx_watch : 1,       /* a nonblocking writer waits for room: the hub watches its ring */
		tx_full_seen : 1,   /* a completion found the send ring full in this turn */
		suspended : 1,      /* its link was lost: it waits for a new one (resume.c) */
		resuming : 1,       /* on the new link, the peer's RESUME not yet come */
		susp_placed : 1,    /* the lost link's completed writes are in the peer's ring (verbs) */
		redial : 1,         /* connecting: its CONNECT went with a lost link, sent again soon */
		torn : 1,           /* the hub that kept it died (warden.c): what it sent may be past tx_posted */
		credit_later : 1,   /* the reader was past rx_tail when it asked credit: ask again at the next write */
		peer_rekeyed : 1;   /* peer_rekey holds the peer's REKEY */
	uint64_t susp_node, susp_ms; /* suspended: the peer node, and since when */
	uint64_t unacked_ms;        /* ... since when it has had data the peer did not take */
	union sockaddr_any local, peer_addr;
	uint16_t lport;             /* listener: its port, backlog, wake-up, */
	uint16_t v6only;            /* ... IPV6_V6ONLY (an IPv6 one takes no IPv4), and */
	int backlog, evfd;
	uint64_t lino;              /* ... its kernel listener's inode, as its process said */
	uint32_t lis_at;            /* ... its index in h->listeners, and the next listener */
	uint32_t lis_next_port, lis_next_ino; /* on its port and in its inode's bucket (conn.c) */
	uint32_t by_src, by_src_next; /* accepted (soft): the peer's socket, as the writes
					 it sends before our ACCEPT name it; the next in its bucket */
	/* readiness descriptor (ready.c): a socketpair, poll_p handed to
	 * the processes, poll_h written and drained by the hub; the hub's
	 * copies, -1 when it holds none (a keeper may: keep.c) */
	int poll_p, poll_h;
	unsigned poll_fin : 1, poll_hup : 1,
		poll_lis : 1;    /* a listener's: a byte at each connection queued */
	unsigned poll_ends : 2,  /* the ends that exist: bit 0 P, bit 1 H */
		poll_sent : 1,   /* sent to keeper poll_k, not yet answered */
		poll_kept : 1,   /* ... held by it */
		on_lru : 1,
		reflect_queued : 1; /* on h->reflect: looked at once the reap ends */
	uint16_t poll_k;            /* keeper + 1, 0: none */
	uint32_t poll_place, poll_seq; /* its place there, and its put */
	uint32_t lru_prev, lru_next; /* sids, on the hub's list of copies by last use */
	uint64_t poll_rx_tail;      /* rx.tail when the last byte was written */
	uint32_t *q;                /* accepted, not yet accept()ed */
	uint32_t qlen, qcap;
	struct pending_conn *pend;
	uint32_t npend, pend_cap;
	uint32_t listener;          /* accepted socket: its listener while queued */
	/* same node (pair.c): no link; the rings are in a pair segment;
	 * side 0 connected (sends on dir[0]), side 1 was accepted */
	struct lpair *lp;
	unsigned lside : 1;
	uint64_t bytes_tx, bytes_rx, cq_send, cq_recv; /* stats */
};

/* A process that holds readiness descriptors for the hub (keep.c). */
#define HUB_KEEPERS_MAX 128
struct keeper {
	struct hub_ev ev;
	pid_t pid;
	int pidfd, ch;
	uint32_t idx, seq;
	uint32_t cap, hi;           /* places: at most cap, below hi used once */
	uint32_t *sid;              /* place -> socket id, 0: free */
	uint32_t *free, nfree;      /* places free again */
	struct keep_msg *q;         /* closes not yet sent */
	uint32_t nq, qcap;
	int dead;
};

/* a connection that ended cleanly on a link, kept for a while (timewait.c) */
#define HUB_TIMEWAIT 1024
#define HUB_TIMEWAIT_MS 60000 /* as kernel TCP's TIME_WAIT */
struct timewait {
	uint64_t node, rx_tail, tx_done, at_ms;
	uint32_t imm, peer, peer_ring, positional;
};

struct hub {
	int epfd, lfd;
	int spare_fd;               /* /dev/null, given up to turn a process away (request.c) */
	struct hub_ev lev;
	uint64_t node_id;
	uint16_t port;
	struct xport soft, verbs;
	int mode;                   /* HUB_AUTO, HUB_VERBS, HUB_SOFT */
	union sockaddr_any bind_addr;
	struct pool *pools;
	struct proc *procs;
	struct link *links;
	uint32_t next_link_id;
	uint64_t next_pool_id;
	struct hsock **socks;       /* TAG_MAX_SOCKS entries */
	uint32_t *gens;
	uint32_t next_sid, nsocks;
	uint32_t sid_hi;            /* no socket id at or above it was ever used */
	uint32_t port_accepted[65536]; /* accepted sockets holding each local port */
	uint32_t port_listening[65536]; /* listeners on each local port */
	uint32_t *ports, nports, ports_cap; /* four-tuples of connections made here (ports.c) */
	uint16_t port_lo, port_hi, port_next;
	uint64_t fallback_connects, stale_dropped, links_dropped, malformed;
	uint64_t procs_refused, limit_refused; /* request.c */
	uint64_t refused_ms;            /* when a turned-away process was last logged */
	uint64_t limit_ms;              /* ... a uid at its limit */
	uint64_t rings_punched;         /* idle rings whose pages went back (resize.c, pools_cool) */
	uint64_t cool_ms;               /* pools_cool's last look */
	uint32_t lim_pools, lim_socks;  /* per uid (rshare.conf: uid_pools, uid_sockets) */
	uint64_t lim_bytes;             /* per uid, ring bytes (uid_memory), 0: none */
	struct uid_use *uids;
	uint64_t local_connects;    /* connections that took the same-node path */
	uint64_t early_connects;    /* connects answered before the peer's ACCEPT (early.c) */
	uint64_t handoffs, handoff_ns; /* completions routed to their owner, and the time from their poll */
	uint64_t route_ns;          /* ... of which routing each one itself took */
	uint64_t wake_ns;           /* system calls that woke processes (hsock_wake), all of them */
	uint64_t route_wake_ns;     /* ... those made while routing: route_ns less it is the hub's own */
	uint64_t posts, post_ns;    /* bells of writes that posted, and the time posting them took */
	uint64_t spin_ns;           /* how long the loop spins after work before it sleeps */
	uint64_t sleeps;            /* times the loop went to sleep (told the processes to kick) */
	uint32_t link_timeout_ms;   /* a link unanswered this long is dropped (its connections wait) */
	uint32_t link_outage_ms;    /* ... and its connections wait this long for a new one (resume.c) */
	char link_cc[16];           /* soft links' congestion control: "" or auto (soft_conn.c), or a name */
	uint32_t nsuspended;        /* connections waiting for a new link */
	uint32_t nredial;           /* connects to make again (resume.c) */
	struct relink {             /* peers of lost links, connected to again (resume.c) */
		union sockaddr_any addr;
		uint64_t node, next_ms, since_ms;
		uint64_t soft_ms;       /* since when verbs failed with the peer's address reachable */
		uint64_t refused_ms;    /* verbs: its first refusal past the grace, 0: none */
		uint32_t tries, waiting; /* connections that wait for it (a timer's count) */
	} *relinks;
	uint32_t nrelinks, relinks_cap;
	uint64_t links_lost, conns_resumed, conns_expired;
	struct timewait timewait[HUB_TIMEWAIT]; /* the last connections that ended cleanly on a link */
	uint32_t timewait_next;
	uint64_t resume_look_ms;
	uint32_t ka_time_s, ka_intvl_s, ka_probes; /* net.ipv4.tcp_keepalive_*: a program's defaults */
	uint32_t tx_max;            /* the largest a send ring grows to: tcp_wmem's maximum */
	uint32_t rx_max;            /* ... a receive ring: tcp_rmem's maximum */
	uint64_t pair_pressure;     /* same-node rings grow no more past these bytes: tcp_mem's pressure */
	/* readiness descriptors to reflect once the reap ends, one look for
	 * all of a socket's completions in it (ready.c), while reflect_defer */
	uint32_t *reflect, nreflect, reflect_cap;
	int reflect_defer;
	uint32_t *resized;          /* sockets with a ring above its first size or a move waiting (resize.c) */
	uint32_t nresized, resized_cap;
	uint32_t nswitch_waiting;   /* of them, moves that wait for a process to step out */
	uint32_t ntx_watch;         /* ... and full send rings of nonblocking writers watched */
	uint64_t resize_ms;         /* the last idle look */
	uint32_t look_at;           /* where a look that ran out of its round goes on */
	int looking;                /* a look is under way (it takes several rounds) */
	struct punch *punches;      /* idle rings found, to be punched in one batch (resize.c) */
	uint32_t npunch;
	uint64_t rx_grown, rx_shrunk, tx_grown, tx_shrunk; /* rings moved to a larger or smaller one */
	uint64_t tx_fit_grown; /* ... of them, same-node directions grown to take a write whole */
	uint64_t reg_bytes;  /* verbs: ring bytes registered now (pool.c) */
	struct pairseg *segs;       /* pair segments (pair.c) */
	uint32_t next_seg_id;
	int segs_dirty;             /* a pool or a pair went: sweep the segments */
	union sockaddr_any *addrs;  /* this node's addresses, cached (pair.c) */
	uint32_t naddrs;
	uint64_t addrs_ms;
	uint32_t *listeners;        /* sids of listening sockets */
	uint32_t nlisteners, listeners_cap;
	/* the first listener (sid) on each port, and in each bucket of
	 * kernel listener inodes; chained through the sockets, so that a
	 * CONNECT, a LISTEN or an ADOPT finds its listener without a scan */
	uint32_t lis_port[65536];
	uint32_t lis_ino[HUB_LIS_INO_BUCKETS];
	uint32_t by_src[HUB_BY_SRC_BUCKETS]; /* soft: accepted sockets by their peer's (early.c) */
	/* readiness descriptors (keep.c): the hub's copies (at most the
	 * budget), and the sockets whose pairs keepers hold */
	uint32_t keep_budget, keep_hard, keep_local, keep_kept;
	uint32_t lru_head, lru_tail;
	struct keeper *keepers[HUB_KEEPERS_MAX];
	uint32_t nkeepers;
	int keep_off;               /* pidfd_getfd is not there: no keepers */
	struct hpass *passes[HUB_PASSES_MAX]; /* descriptors in flight (pass.c) */
	uint32_t npasses, pass_next, pass_seq, passes_taken; /* in flight; taken by receivers */
	void **garbage;             /* freed after the current batch of events */
	uint32_t ngarbage, garbage_cap;
	volatile int stop;
	volatile int restart;       /* SIGUSR2: hand the node to a new hub (restart.c) */
	uint32_t restarts, restarts_refused;
	const char *restart_refused; /* why the last one was refused, NULL: it was not */
	int kept_lfd;               /* the soft listener the hub before kept, -1: none */
	int handover_fd;            /* the image a restart left for the warden to execute on, -1: none */
	/* warden.c: rshared's pid and the hub process's (the same without a
	 * warden), the hubs that took over from one that died, the requests
	 * those answered EINTR, and the process whose request is being
	 * answered (NULL between requests) */
	pid_t warden_pid, hub_pid;
	uint32_t successions, succession_eintr;
	/* the last succession's time (CLOCK_MONOTONIC ms: it spans an execve
	 * on verbs) and how many came in a row each that soon after the one
	 * before (the crash loop) */
	uint64_t succession_ms;
	uint32_t succession_quick;
	struct proc *req_pr;
	/* cell.c: requests answered through request cells; the cell whose
	 * request is being answered (NULL between them), for the warden */
	uint64_t cell_requests;
	struct arena_cell *req_cell;
	/* sock.c: while a request is answered, the wake-ups of listeners it
	 * made (an admission's), made once its answer is out (sids) */
	uint32_t later[HUB_WAKE_LATER], nlater;
	int wake_later;
	/* request.c: readiness descriptors handed out with a connect's or an
	 * accept's answer, and in answer to a request of their own */
	uint64_t ready_with_answer, ready_asked;
	/* data.c: placed tails written to peers (verbs); on with RSHARE_PLACED=1 */
	uint64_t placed_sent;
	int placed_tails;
	int no_warden;              /* --no-warden */
	int handing_over;           /* links are let go by a restart or a successor: soft ones are read to their end */
};

/* ev.c: the_hub is the one hub of this process (transport callbacks find it there) */
extern struct hub *the_hub;
void hub_free_deferred(struct hub *h); /* the frees hub_defer_free() put off */
uint64_t hub_now_ms(void);
int hub_log_due(uint64_t *stamp); /* 1 at most once a second: a repeated warning's turn */

/* loop.c */
int hub_main(int argc, char **argv);
/* tcp_wmem's (tx 1) or tcp_rmem's maximum in this namespace, as a ring size */
uint32_t hub_mem_max(int tx);
int hub_doorbells(struct hub *h, struct pool *p); /* drain one pool's; whether any rang */
void hub_batch_end(struct hub *h);                /* between batches of events */

/* The gate of a ring (arena.h: rx_in/rx_hold, tx_in/tx_hold): the hub
 * holds it to move or punch the ring, only while the process is not in. */
static inline int gate_take(_Atomic uint32_t *in, _Atomic uint32_t *hold)
{
	atomic_store(hold, 1); /* seq_cst: before the load, as the process's store before its load */
	if (!atomic_load(in))
		return 1;
	atomic_store_explicit(hold, 0, memory_order_release);
	return 0;
}

static inline void gate_give(_Atomic uint32_t *hold)
{
	atomic_store_explicit(hold, 0, memory_order_release);
}

/* Append v to the growing array *a of *n entries (capacity *cap):
 * 0, or -ENOMEM (nothing changed then). */
static inline int sid_push(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t v)
{
	if (*n == *cap) {
		uint32_t c = *cap ? *cap * 2 : 16;
		uint32_t *m = realloc(*a, c * sizeof(*m));
		if (!m)
			return -ENOMEM;
		*a = m;
		*cap = c;
	}
	(*a)[(*n)++] = v;
	return 0;
}

/* pool.c */
/* A memfd of *BYTES (sparse) named NAME, mapped shared; where the address
 * space cannot map that much, the largest that maps (*BYTES halved, down to
 * 1 GiB).  NULL (errno set) on failure. */
void *hub_shm_new(const char *name, uint64_t *bytes, int *fd);
struct pool *pool_new(struct hub *h, uid_t uid); /* NULL, errno EUSERS: the uid is at its limit */
int uid_limit(struct hub *h, struct uid_use *u, const char *what); /* log, count: -ENOBUFS */
void pool_maybe_free(struct hub *h, struct pool *p);
void pools_sweep(struct hub *h); /* pools without processes or sockets */
void pools_cool(struct hub *h);  /* once a second: the warm free rings of quiet allocators punched */
/* Keys for the ring [off, off+len) of a pool, registered on its own at the
 * first call (remote: the peer may write it); 0 or -errno. */
int pool_keys(struct hub *h, struct pool *p, uint64_t off, uint64_t len, int remote, uint32_t *lkey,
	      uint32_t *rkey);
int pool_ring_pinned(struct pool *p, uint64_t off);     /* registered for a NIC */
#define POOL_MR_IDLE (128u << 10) /* bytes of free rings a pool keeps registered */
int pool_ring_freed(struct hub *h, struct pool *p, uint64_t off); /* 1: still registered */

/* proc.c */
int proc_hold(struct proc *pr, uint32_t sid);  /* 0 or -ENOMEM */
int proc_holds(struct proc *pr, uint32_t sid); /* does it? */
int proc_drop(struct proc *pr, uint32_t sid);  /* 1: it did hold it */
void proc_free(struct hub *h, struct proc *pr); /* its connection closed: it is gone */
uint64_t proc_token(void);                      /* a new pool secret, never 0 */
struct proc *proc_by_token(struct hub *h, uint64_t token);
int proc_send_reply(int fd, const struct msg_rep *rep, const int *fds, int nfds); /* 0 or -errno */
int proc_cell_give(struct proc *pr);            /* its request cell's index + 1, or -ENOSPC */
/* pass.c: a token for S's descriptor OFD (kept on success), sent by a
 * process of UID, or -errno; the pass a token names, or NULL */
int hpass_new(struct hub *h, struct hsock *s, uid_t uid, int ofd);
struct hpass *hpass_find(struct hub *h, uint32_t id, uint64_t secret);
/* request.c */
void proc_request(struct hub *h, struct proc *pr, struct msg_req *q, int rfd);
void proc_answer_cell(struct hub *h, struct proc *pr, const struct msg_req *q, struct msg_rep *rep);
void proc_stat_flush(struct hub *h, struct proc *pr); /* what is left of a stat reply, as the reader takes it */
void hub_refused(struct hub *h);                      /* a process turned away: no descriptor left */
/* cell.c: one pool's request cells that rang, answered (whether any
 * rang); the request posted in PR's cell, answered; a succession's look
 * at every cell (warden.c) */
int hub_cells(struct hub *h, struct pool *p);
void hub_cell_take(struct hub *h, struct proc *pr);
void hub_cells_succeed(struct hub *h);
/* ctl.c: a process's connection readable (a request, or the end); new processes */
void proc_event(struct hub *h, struct hub_ev *ev, uint32_t events);
void hub_accept_proc(struct hub *h, struct hub_ev *ev, uint32_t events);

/* The hub's link record of what its transport sees. */
static inline struct link *link_of(struct xlink *x)
{
	return (struct link *)((char *)x - offsetof(struct link, x));
}

/* link.c */
struct link *hub_link_alloc(struct hub *h, struct xport *xp);
struct link *hub_link_new_outgoing(struct hub *h, const union sockaddr_any *peer);
/* transport auto: a soft link, when verbs does not come back (resume.c); NULL otherwise */
struct link *hub_link_new_soft(struct hub *h, const union sockaddr_any *peer);
/* Drop links that failed in the middle of other work (hsock_tx). */
void hub_reap_doomed(struct hub *h);
/* Resume the sockets that waited for room on links that have it again. */
int hub_run_writable(struct hub *h);
void hub_link_timers(struct hub *h); /* connect deadlines, keepalives */
void hub_link_ping(struct link *l);
struct link *link_up_to(struct hub *h, uint64_t node, const struct link *except,
			 const struct xport *xp); /* an UP link to NODE (on XP, or any) */

/* The node id of the side that opened l: of two links between the same
 * nodes, both keep the one the smaller id opened. */
static inline uint64_t link_opener(const struct hub *h, const struct link *l)
{
	return l->x.outgoing ? h->node_id : l->x.peer_node;
}

/* resume.c: connections that outlive a lost link */
int hsock_suspend(struct hub *h, struct hsock *s, struct link *l); /* 1: it waits */
int hsock_ring_keys(struct hub *h, struct hsock *s); /* conn.c: verbs keys of its rings, 0 or -errno */
int hsock_ring_changing(const struct hsock *s); /* verbs: the peer may write to two of its rings (rekey.c) */
void hub_rekey(struct hub *h);              /* verbs: keys again for the rings of adopted sockets */
void hsock_resume_forget(struct hsock *s); /* closed or freed: it waits no more */
void hsock_redial_later(struct hub *h, struct hsock *s); /* its CONNECT went with a lost link */
void hub_relink_note(struct hub *h, struct link *l);
void hub_relink_refused(struct hub *h, struct link *l); /* the peer node has no hub: reset */
void hub_relink_unrefused(struct hub *h, const struct link *l);
void hub_relink_unreached(struct hub *h, const struct link *l); /* verbs: its peer's address did not resolve */
void hub_resume_link_up(struct hub *h, struct link *l);
void hub_on_resume(struct hub *h, struct link *l, const struct wire_ctl *c);
void hub_on_rekey(struct hub *h, const struct wire_ctl *c);
/* timewait.c: a connection that ended cleanly on a link is remembered;
 * a RESUME for it is answered with its last positions and FIN (1) */
void hub_timewait_add(struct hub *h, const struct hsock *s);
int hub_timewait_answer(struct hub *h, struct link *l, const struct wire_ctl *c);
/* rekey.c: a ring's address as the peer writes it; the REKEY that goes
 * before a RESUME, and the peer's, taken at its RESUME (0, or -1) */
uint64_t hsock_ring_addr(const struct hsock *s, uint64_t off);
void hsock_send_rekey(struct hsock *s);
int hsock_rekey_apply(struct hsock *s);
void hsock_waiting_reset(struct hub *h, struct hsock *s); /* resume.c: ends with ECONNRESET, forgotten */
void hub_resume_timers(struct hub *h);
void hub_resume_init(struct hub *h); /* the kernel's keepalive settings */

/* Control messages out on a link (wr_id bit WR_CTL: a control send). */
#define WR_CTL (1ull << 63)
static inline int link_send_ctl(struct link *l, struct wire_ctl *c, uint64_t wr_id)
{
	uint8_t buf[WIRE_CTL_LEN];
	wire_ctl_encode(c, buf);
	l->msgs_tx++;
	return l->x.xp->ops->post_send(&l->x, wr_id | WR_CTL, buf, WIRE_CTL_LEN);
}
static inline void link_send_simple(struct link *l, uint8_t op, uint32_t dst, uint32_t src, uint64_t wr_id)
{
	struct wire_ctl c = {.op = op, .dst = dst, .src = src};
	if (l && l->state == LINK_UP)
		link_send_ctl(l, &c, wr_id);
}

/* keep.c: readiness descriptors beyond the hub's budget, in keepers */
void keep_init(struct hub *h);
void keep_add(struct hub *h, struct hsock *s);          /* s's new pair, both ends the hub's */
int keep_fd(struct hub *h, struct hsock *s, int end);   /* P (0) or H (1) in the hub, or -1 */
void keep_close_end(struct hub *h, struct hsock *s, int end); /* gone for good, keeper's too */
void keep_trim(struct hub *h);                          /* let go of the oldest over the budget */
/* ready.c */
int hpoll_get(struct hsock *s);          /* the process end, or -errno */
void hpoll_reflect(struct hsock *s);     /* bring it in line with the socket */
void hpoll_reflect_soon(struct hub *h, struct hsock *s); /* ... now, or once the reap ends */
void hpoll_reflect_queued(struct hub *h); /* the reap ended */
void hpoll_close(struct hsock *s);
/* same-node connections (pair.c) */
int hpair_is_local(struct hub *h, const union sockaddr_any *dst); /* an address of this node? */
int hpair_join(struct hub *h, struct hsock *c, struct hsock *a);  /* 0, or -errno: no room */
void hpair_put(struct hub *h, struct hsock *s);   /* s is freed: its half of the pair goes */
struct ring *hpair_ring(struct hsock *s, int tx); /* its counters: the one it sends on, or receives on */
struct pair_dir *hpair_dir(struct hsock *s, int tx);
int hpair_fd(struct hub *h, struct hsock *s, uint64_t *id, uint64_t *bytes); /* the segment's memfd */
void hpair_sweep(struct hub *h);                  /* segments of pools that are gone */
int hpair_grow(struct hub *h, struct hsock *s, uint64_t size); /* s's send ring to SIZE (at most twice: 0): its size, or -errno */
uint64_t hpair_pressure(void); /* tcp_mem's pressure value in bytes: same-node rings grow no more past it */
int hpair_move(struct hub *h, struct hsock *s, uint64_t size); /* ... to SIZE, nobody in it */
/* The counters of s's receive (tx 0) or send (tx 1) ring, wherever they are. */
static inline struct ring *hsock_ring(struct hsock *s, int tx)
{
	if (s->lp)
		return hpair_ring(s, tx);
	return tx ? &s->as->tx : &s->as->rx;
}
/* Whether s's link places writes by stream position (soft), not at the
 * addresses they name (verbs). */
static inline int hsock_positional(const struct hsock *s)
{
	return (s->link->x.xp->ops->flags & XP_POSITIONAL) != 0;
}

/* sock.c */
struct hsock *hsock_new(struct hub *h, struct pool *p, uint32_t rxsize, uint32_t txsize);
struct hsock *hsock_get(struct hub *h, struct pool *p, uint32_t slot, uint32_t gen);
struct hsock *hsock_by_imm(struct hub *h, uint32_t imm); /* the live socket a tag names */
int hsock_rings_alloc(struct hsock *s); /* 0 or -ENOBUFS */
/* Give ring bytes back to the pool (their pages too, unless pinned). */
void hsock_ring_free(struct pool *p, struct arena_alloc *a, uint64_t off, uint64_t size);
void hsock_uncount(struct hsock *s);    /* no longer one of its link's connections */
void hsock_slot_release(struct hub *h, struct hsock *s);
/* ports.c: local ports of the connections made here */
int ports_claim(struct hub *h, struct hsock *s);
void ports_release(struct hub *h, struct hsock *s);
void hsock_port_hold(struct hub *h, struct hsock *s); /* accepted: its port stays bound */
void hsock_free(struct hub *h, struct hsock *s);
void hsock_linger(struct hub *h, struct hsock *s);
void hsock_wake(struct hsock *s);
uint32_t hsock_holders_add(struct hsock *s, int d);
void hsock_wake_for(struct hsock *s, int what); /* what: ARENA_WAKE_* */
/* a request's answer goes out before the listeners it woke are (sock.c) */
void hub_wake_later_begin(struct hub *h);
void hub_wake_later_end(struct hub *h);
void hsock_set_closed(struct hsock *s, int err);
void hsock_local_fin(struct hub *h, struct hsock *s);
void hsock_local_wake(struct hub *h, struct hsock *s, int credit);
void hsock_send_reset(struct hsock *s);
void hsock_abort(struct hub *h, struct hsock *s, const char *why);
void hsock_finish_close(struct hub *h, struct hsock *s);
void hub_link_gone(struct hub *h, struct link *l);
/* conn.c */
int hsock_connect(struct hub *h, struct hsock *s, const union sockaddr_any *dst);
int hub_listen(struct hub *h, struct hsock *s, const union sockaddr_any *addr, int backlog, int evfd,
	       uint64_t ino);
/* the listener of a kernel listener inode, of pool p (NULL: any); forget */
struct hsock *hub_listener_by_ino(struct hub *h, uint64_t ino, const struct pool *p);
void hub_listener_forget(struct hub *h, struct hsock *s);
int hsock_accept(struct hub *h, struct hsock *ls, struct hsock **out);
void hsock_redial(struct hub *h, struct hsock *s); /* its CONNECT again, on a new link */
void hsock_on_connect(struct hub *h, struct link *l, const struct wire_ctl *c);
void hsock_on_accept(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c);
void hsock_on_refuse(struct hub *h, struct hsock *s);
/* early.c */
struct early_port *hub_early_port(struct hsock *s);
void hub_early_answer(struct hub *h, struct hsock *s, struct early_port *e);
void hub_early_learn(struct link *l, struct hsock *s, const struct wire_ctl *c);
void hub_early_forget(struct link *l, uint16_t port);
void hub_early_unlisten(struct hub *h, uint16_t port);
void hub_early_refused(struct hub *h, struct hsock *s);
int hub_early_room(const struct hsock *ls, const struct wire_ctl *c);
void hub_by_src_add(struct hub *h, struct hsock *s);
void hub_by_src_del(struct hub *h, struct hsock *s);
void hsock_on_placed(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c);
/* close.c */
void hsock_release(struct hub *h, struct hsock *s, int abort);
void hsock_listener_stop(struct hub *h, struct hsock *s); /* close.c: it listens no more */
/* data.c */
void hsock_tx(struct hub *h, struct hsock *s);
void hsock_credit(struct hub *h, struct hsock *s);
void hsock_shutdown_wr(struct hub *h, struct hsock *s);
/* resize.c */
/* A ring that a NIC uses is registered memory: on such a link (verbs) a
 * ring the program did not size starts at RING_PINNED_HOME, its size when
 * idle too, and grows to what the kernel's buffer would be the first time
 * it is what holds the connection back; elsewhere a ring's home size is the
 * kernel's default buffer (unused pages cost nothing there). */
#define RING_PINNED_HOME ARENA_MIN_RING
static inline int link_pins(const struct link *l)
{
	return l && !(l->x.xp->ops->flags & XP_POSITIONAL);
}
/* the size a ring of SIZE starts at on link L (FIXED: the program's) */
static inline uint64_t link_first_ring(const struct link *l, uint64_t size, int fixed)
{
	return link_pins(l) && !fixed && size > RING_PINNED_HOME ? RING_PINNED_HOME : size;
}
/* the size s's rings go back to when idle */
static inline uint64_t hsock_ring_home(const struct hsock *s)
{
	return link_pins(s->link) ? RING_PINNED_HOME : ARENA_DEFAULT_RING;
}
/* Grow s's send ring (to the home's default, then double): the new size, or -errno. */
int hsock_tx_grow(struct hub *h, struct hsock *s);
int hsock_tx_fit(struct hub *h, struct hsock *s, uint64_t need);
/* The old send ring goes once the writes posted from it completed. */
void hsock_tx_old_done(struct hsock *s);
/* Writes of s completed (FULL: its send ring was full before): grow it? */
void hsock_tx_completed(struct hub *h, struct hsock *s, int full);
void hsock_tx_shrink(struct hub *h, struct hsock *s);                   /* idle: back home */
void hsock_tx_watch_look(struct hub *h, struct hsock *s, uint64_t now); /* a watched full ring */
void hsock_tx_watch_end(struct hub *h, struct hsock *s);
void hsock_resized_add(struct hub *h, struct hsock *s); /* onto the list the ring timers walk */
/* A ring on a link grows when it holds less than this much of its flow */
#define RING_HOLD_MS 1
/* The credit check's ring: the largest the peer may be writing to. */
static inline uint64_t hsock_rx_room(const struct hsock *s)
{
	return s->rx_room > s->rx_size ? s->rx_room : s->rx_size;
}
void hsock_rx_credited(struct hub *h, struct hsock *s); /* a CREDIT went out: grow? */
/* The reader's head as the hub counts it: never past rx_tail.  On verbs a
 * reader may be past it, having read what a placed tail (arena.h) showed
 * before the write's completion came here; those bytes count when it
 * does.  *SEEN (if not NULL): the head as the reader left it. */
static inline uint64_t hsock_rx_head(const struct hsock *s, uint64_t *seen)
{
	uint64_t head = ring_load(&s->as->rx.head);
	if (seen)
		*seen = head;
	if (head > s->rx_tail && head - s->rx_tail <= hsock_rx_room(s))
		return s->rx_tail;
	return head;
}
void hsock_on_ring(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c);
void hsock_on_ring_ack(struct hub *h, struct link *l, struct hsock *s, const struct wire_ctl *c);
void hsock_peer_switch(struct hsock *s); /* the peer's new ring, once our writes in flight fit */
/* our offer as the peer's RESUME settles it (resume.c): 0, or -1 */
int hsock_offer_settle(struct hub *h, struct hsock *s, uint32_t ring, uint64_t at);
void hsock_rings_forget(struct hsock *s); /* s is freed: its rings in the making go too */
/* Closed by us (closing, lingering) or reset: what the peer still writes
 * lands (verbs) but is dropped, and answered with RESET (data.c). */
static inline int hsock_drops_data(const struct hsock *s)
{
	return s->state == HS_LINGER || s->closing || s->state == HS_CLOSED;
}
void hsock_tx_watch(struct hub *h, struct hsock *s); /* a nonblocking writer found its ring full */
void hsock_touched(struct hub *h, struct hsock *s); /* data moved: punch its rings once idle */
/* punch.c: idle rings' pages back, batched (called by resize.c's look) */
void punch_rings(struct hub *h, struct hsock *s); /* s's two rings to the batch */
void punch_pair(struct hub *h, struct hsock *s);  /* its same-node direction to the batch */
int punch_full(const struct hub *h);              /* a batch to punch before more */
void punch_flush(struct hub *h);                  /* punch the batch, give the gates back */
void hub_ring_timers(struct hub *h);      /* moves that waited, rings of idle connections */
/* route.c */
void hub_route(struct hub *h, const struct xwc *wc);
void hub_ctl_in(struct hub *h, struct link *l, const uint8_t *buf, uint32_t len);

/* test.c: a hub without sockets, driven directly by unit tests and fuzzers */
struct hub *hub_test_new(void);
struct pool *hub_test_pool(struct hub *h);
struct proc *hub_test_proc(struct hub *h, struct pool *p);
void hub_test_request(struct hub *h, struct proc *pr, const struct msg_req *q);
int hub_test_doorbells(struct hub *h, struct pool *p); /* its request cells too */
struct link *hub_test_link(struct hub *h, struct xport *xp);
void hub_test_proc_gone(struct hub *h, struct proc *pr);
void hub_test_settle(struct hub *h);

/* stat.c */
char *hub_stat(struct hub *h, int json, size_t *len);

/* restart.c, image.c: `rshare hub restart`, a new hub in the same process */
struct _IO_FILE;
int hub_restart_args(int *argc, char **argv, int *adopt_fd, int *status); /* -1: exit with *status */
void hub_restart_signal(int sig);
void hub_restart(struct hub *h);         /* hand over, or say why not and go on */
int hub_adopt(struct hub *h, int fd);     /* the records of the hub before: 0 or -errno */
int hub_adopt_watch(struct hub *h);       /* ... watched again, once the hub is set up */
uint64_t hub_layout(void);                /* the fingerprint of the records' layout */
int hub_image_write(struct hub *h, struct _IO_FILE *f);
int hub_image_read(struct hub *h, struct _IO_FILE *f);
/* every link dropped as lost, soft ones read to their peer's end: their
 * connections wait for new links (a restart, a successor) */
void hub_links_let_go(struct hub *h, const char *why);
int hub_open_verbs(struct hub *h);        /* the RDMA device, in the hub's process: -1 fatal */
int hub_warden_wanted(const struct hub *h); /* whether a warden runs (warden.c) */
int hub_image_handover(struct hub *h, const char *why); /* links let go (why), records into handover_fd: 0 or -errno */
const char *hub_layout_differs(void);     /* why the program on disk cannot read our records, or NULL */
int hub_handover_exec(struct hub *h);     /* execute the next hub on handover_fd: returns -errno when it failed */
void hub_pool_kick(struct hub *h, struct hub_ev *ev, uint32_t events); /* pool.c */

/* loop.c, warden.c: the loop (until stop), every socket's bell rung, the
 * signals of the process that runs the loop, and rshared's main process
 * (ON: with a warden): the exit status */
void hub_loop(struct hub *h);
void hub_ring_all(struct hub *h);
void hub_signals(struct hub *h);
int hub_warden(struct hub *h, int on);

#endif
