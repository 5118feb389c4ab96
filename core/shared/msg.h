/*
 * msg.h - requests from a process to its hub.
 *
 * Each process holds one SOCK_SEQPACKET connection to the hub of its
 * network namespace (abstract unix name "rshare-hub").  It carries requests
 * that need the hub's answer (set up, accept, release a socket); data never
 * crosses it.  The connection's end tells the hub the process is gone.
 * Data-path requests go through the arena's doorbell instead, and the
 * requests that carry no descriptor (CONNECT, ACCEPT, RELEASE, SHUTDOWN,
 * TXGROW) through the process's request cell in the arena when it has one
 * (MSG_CELL, arena.h): the same struct msg_req and struct msg_rep.
 */
#ifndef RSHARE_MSG_H
#define RSHARE_MSG_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

#define HUB_SOCK_NAME "rshare-hub"

/* RSHARE_HUB_NAME picks another hub of the same network namespace (a hub
 * per address, for tests of several nodes in one namespace). */
static inline const char *hub_sock_name(void)
{
	const char *n = getenv("RSHARE_HUB_NAME");
	return n && *n && strlen(n) < 100 ? n : HUB_SOCK_NAME;
}

enum msg_op {
	MSG_HELLO = 1,  /* new pool: reply carries the arena memfd and pool eventfd */
	MSG_FORK,       /* sent on a fresh connection by a process about to fork:
			   the connection becomes the child's, holding the parent's sockets */
	MSG_CHILD,      /* first message of the child on that connection: its pid */
	MSG_LISTEN,     /* addr = bound address, arg = backlog; fd: listener eventfd */
	MSG_CONNECT,    /* addr = destination, local = reserved local address;
			   arg MSG_CONNECT_POLLFD (over the unix connection
			   only): the reply carries the new socket's
			   readiness descriptor, where one could be made */
	MSG_ACCEPT,     /* slot = listener; reply: the new slot; arg
			   MSG_ACCEPT_POLLFD (over the unix connection only):
			   it carries the new socket's readiness descriptor
			   too, where one could be made */
	MSG_RELEASE,    /* this process drops its reference (last close here);
			   arg bit 1: a last release resets (SO_LINGER 0);
			   bit MSG_RELEASE_NOREPLY: no reply; else the reply's
			   gen is 1 when no process holds the socket any more */
	MSG_SHUTDOWN,   /* arg = SHUT_RD/SHUT_WR/SHUT_RDWR */
	MSG_STAT,       /* arg 1: JSON, 0: text; reply: text until the hub closes */
	MSG_PORTCHECK,  /* addr: -EADDRINUSE while an accepted connection holds its port */
	MSG_POLLFD,     /* slot: reply carries the socket's readiness descriptor */
	MSG_EXECED,     /* first message of a program after exec, on a connection
			   made by MSG_FORK before it: its pid; the reply is
			   HELLO's (the pool's arena memfd and eventfd) */
	MSG_EXITING,    /* not sent any more (a process's end closes its sockets
			   as close() does, proc.c); its number stays taken for
			   processes whose library is older than their hub,
			   which the hub answers -EINVAL */
	MSG_PAIRFD,     /* slot: a same-node connection; the reply carries the
			   memfd of its pair segment (pair.h), pool_id = the
			   segment's id, arena_bytes = its size */
	MSG_TXGROW,     /* slot: the send ring is full; reply: rep.gen = its new
			   size, or -ENOSPC (largest), -EPERM (fixed by SO_SNDBUF,
			   same node), -EBUSY (an old ring still in use), -ENOBUFS */
	MSG_PASS,       /* slot: a socket about to go to another process over a
			   unix socket (SCM_RIGHTS), its descriptor along; the
			   reply carries the token to send in its place */
	MSG_ADOPT,      /* slot = a token's pass id, token = its secret (arg 0),
			   or a kernel listener along (arg 1): this process takes
			   the socket, the listener registered for it (works
			   before it has a pool: it joins the socket's); the
			   reply carries the passed
			   descriptor, a listener's eventfd when rep.flags has
			   MSG_ADOPT_LISTENER, and the pool's arena memfd and
			   eventfd (as HELLO's) when it has MSG_ADOPT_JOINED;
			   -EXDEV with pool_id = the socket's pool when this
			   connection's process is in another pool */
	MSG_CELL,       /* a request cell in the pool of the connection: reply
			   slot = its index + 1, or status -ENOSPC (none free) */
	MSG_MAX = MSG_CELL
};

#define MSG_ADOPT_LISTENER 1
#define MSG_ADOPT_JOINED 2
#define MSG_ACCEPT_POLLFD 1
#define MSG_CONNECT_POLLFD 1

/* The first message a token holds (core/hub/pass.c): which pass it is,
 * and the secret that proves its holder had it.  Read with MSG_PEEK. */
#define MSG_PASS_MAGIC "rshare-p"
struct msg_pass_name {
	char magic[8];
	uint32_t id;
	uint32_t family;  /* the socket's, for a receiver that cannot have it */
	uint64_t secret;
};

#define MSG_RELEASE_NOREPLY 2
#define MSG_LISTEN_V6ONLY 1 /* an IPv6 listener with IPV6_V6ONLY: no IPv4 connection */

struct msg_req {
	uint32_t op;
	uint32_t slot;
	uint32_t gen;
	int32_t pid;
	int32_t arg;
	uint32_t rxsize;
	uint32_t txsize;
	uint32_t flags;     /* MSG_LISTEN: MSG_LISTEN_V6ONLY */
	uint64_t token;     /* MSG_FORK: the parent's token */
	union sockaddr_any addr;
	union sockaddr_any local;
};

struct msg_rep {
	int32_t status;     /* 0 or -errno */
	uint32_t slot;
	uint32_t gen;
	uint32_t flags;     /* ADOPT: MSG_ADOPT_* */
	uint64_t pool_id;
	uint64_t arena_bytes;
	uint64_t token;     /* HELLO: this process's; FORK: the child's */
};

#endif
