/*
 * request.c - what the hub answers to a process's requests (msg.h).
 *
 * One table, indexed by the request's op: whether the op works before the
 * process is attached to a pool (HELLO, FORK, CHILD, STAT, PORTCHECK), and
 * its handler.  Any other op from a process without a pool is answered
 * -EPROTO; an op without a handler (unknown) -EINVAL.  The table also says
 * which ops may come through a process's request cell (cell.c): those
 * that carry no descriptor either way.  A handler fills in the reply
 * (struct req): its status, the descriptors it carries, whether it goes
 * out at all, and the socket the process is to hold from now on (LISTEN,
 * CONNECT, ACCEPT: its slot and generation go in the reply).  A descriptor
 * that came with the request is closed afterwards unless a handler kept
 * it.  The connections themselves: ctl.c.
 */
#include "hub.h"
#include "procstat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "msg.h"
#include "tag.h"

/* A request being answered. */
struct req {
	struct msg_rep rep;
	int fds[4], nfds;
	int closefd; /* a descriptor of the reply's that is the hub's no more: closed once sent */
	int reply; /* 0: no reply goes out */
	int rfd;   /* the descriptor that came with it; -1 once kept */
	struct hsock *hold; /* the process holds it from now on */
	int cell;  /* it came through a request cell: no descriptor goes back */
};

typedef void req_fn(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r);

/* What HELLO and EXECED answer: the pool's arena and eventfd. */
static int pool_reply(const struct proc *pr, struct msg_rep *rep, int fds[2])
{
	rep->pool_id = pr->pool->id;
	rep->arena_bytes = pr->pool->bytes;
	rep->token = pr->token;
	fds[0] = pr->pool->memfd;
	fds[1] = pr->pool->evfd;
	return 2;
}

/* What is left of a stat reply goes out as the reader takes it: the hub
 * never waits on a reader, one that never reads only keeps its text. */
void proc_stat_flush(struct hub *h, struct proc *pr)
{
	while (pr->out_off < pr->out_len) {
		size_t n = pr->out_len - pr->out_off > 32768 ? 32768 : pr->out_len - pr->out_off;
		ssize_t w = send(pr->fd, pr->out + pr->out_off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			hub_rewatch(h, pr->fd, EPOLLIN | EPOLLRDHUP | EPOLLOUT, &pr->ev);
			return;
		}
		if (w < 0)
			break;
		pr->out_off += (size_t)w;
	}
	free(pr->out);
	pr->out = NULL;
	pr->out_len = pr->out_off = 0;
	hub_rewatch(h, pr->fd, EPOLLIN | EPOLLRDHUP, &pr->ev);
	shutdown(pr->fd, SHUT_WR); /* the reader stops at end of file */
}

static void do_stat(struct hub *h, struct proc *pr, int json)
{
	free(pr->out);
	pr->out = hub_stat(h, json, &pr->out_len);
	pr->out_off = 0;
	if (!pr->out)
		pr->out_len = 0;
	proc_stat_flush(h, pr);
}

/* a process turned away because the hub has no descriptor left: counted,
 * and logged once a second at most */
void hub_refused(struct hub *h)
{
	h->procs_refused++;
	if (hub_log_due(&h->refused_ms))
		log_warn("a process turned away: the hub has no descriptor left");
}

static void req_hello(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	if (pr->pool) {
		r->rep.status = -EISCONN;
		return;
	}
	pr->pool = pool_new(h, pr->uid);
	if (!pr->pool) {
		if (errno == EMFILE || errno == ENFILE)
			hub_refused(h); /* accepted, but no descriptor for its pool */
		r->rep.status = errno == EUSERS ? -EUSERS : -ENOMEM;
		return;
	}
	pr->pool->nprocs++;
	pr->pid = q->pid > 0 ? q->pid : pr->pid;
	pr->token = proc_token();
	r->nfds = pool_reply(pr, &r->rep, r->fds);
	log_info("process %d: new pool %llu", (int)pr->pid, (unsigned long long)pr->pool->id);
}

/* the parent of process pid, as /proc says; 0 when it cannot be read */
static pid_t ppid_of(pid_t pid)
{
	pid_t ppid = 0;
	return procstat_read(pid, NULL, &ppid) == 0 ? ppid : 0;
}

static void req_fork(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct proc *parent = proc_by_token(h, q->token);
	/* only the parent itself may hand its pool on: its token (the
	 * pool's secret), its pid and its uid, as the kernel saw them; or a
	 * child of it that shares its memory (vfork), about to exec */
	if (pr->pool || !parent || parent->uid != pr->uid ||
	    (parent->pid && parent->pid != pr->pid && ppid_of(pr->pid) != parent->pid)) {
		r->rep.status = -EPERM;
		return;
	}
	pr->pool = parent->pool;
	pr->pool->nprocs++;
	pr->pid = 0; /* the child tells */
	pr->token = proc_token();
	for (uint32_t i = 0; i < parent->nsocks; i++) {
		struct hsock *hs = h->socks[parent->socks[i]];
		if (hs && proc_hold(pr, hs->sid) == 0)
			hsock_holders_add(hs, 1);
	}
	r->rep.token = pr->token;
}

static void req_child(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	(void)h;
	r->reply = 0;
	if (pr->pool && !pr->pid && q->pid > 0)
		pr->pid = q->pid;
}

/* the same process, after exec: it maps the pool again */
static void req_execed(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	(void)h;
	if (!pr->pool || pr->pid || q->pid <= 0) {
		r->rep.status = -EPERM;
		return;
	}
	pr->pid = q->pid;
	r->nfds = pool_reply(pr, &r->rep, r->fds);
}

static void req_listen(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s;
	/* a kernel listener the pool registered already (its inode): shared,
	 * as processes that got it by fork, or over a unix socket, share it */
	s = pr->pool ? hub_listener_by_ino(h, q->token, pr->pool) : NULL;
	if (s) {
		if (!proc_holds(pr, s->sid))
			r->hold = s;
		r->rep.slot = s->slot;
		r->rep.gen = s->gen;
		r->rep.flags = MSG_ADOPT_LISTENER;
		r->fds[0] = s->evfd;
		r->nfds = 1;
		return;
	}
	s = hsock_new(h, pr->pool, 0, 0);
	if (!s) {
		r->rep.status = -ENOBUFS;
		return;
	}
	s->local = q->addr;
	s->v6only = q->addr.sa.sa_family == AF_INET6 && (q->flags & MSG_LISTEN_V6ONLY);
	r->rep.status = hub_listen(h, s, &q->addr, q->arg, r->rfd, q->token);
	if (r->rep.status) {
		hsock_release(h, s, 1);
		return;
	}
	r->rfd = -1; /* the listener keeps it */
	s->rx_size = arena_ring_size(q->rxsize);
	/* SO_SNDBUF or sndbuf fix it, as the kernel's; else it grows when
	 * its reader stalls (vsock_data.c) */
	s->tx_size = arena_ring_size(q->txsize);
	s->tx_fixed = q->txsize != 0;
	s->rx_fixed = q->rxsize != 0;
	r->hold = s;
}

/* A nonblocking connect's or accept's socket is polled next (an event
 * loop's): its readiness descriptor goes with the reply (BIT in the
 * request's arg, over the unix connection), not in a request of its own;
 * none where it cannot be made (the process asks later, as for any). */
static void want_pollfd(struct hub *h, const struct msg_req *q, struct req *r, struct hsock *s, int bit)
{
	if ((q->arg & bit) && !r->cell && (r->fds[0] = hpoll_get(s)) >= 0) {
		r->nfds = 1;
		h->ready_with_answer++;
	}
}

/* the rings come when hsock_connect() knows where: this arena for a link,
 * a pair segment for the same node */
static void req_connect(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s = hsock_new(h, pr->pool, 0, 0);
	if (!s) {
		r->rep.status = -ENOBUFS;
		return;
	}
	s->rx_size = arena_ring_size(q->rxsize);
	s->tx_size = arena_ring_size(q->txsize);
	s->tx_fixed = q->txsize != 0;
	s->rx_fixed = q->rxsize != 0;
	s->local = q->local;
	r->rep.status = hsock_connect(h, s, &q->addr);
	if (r->rep.status) {
		hsock_release(h, s, 1);
		return;
	}
	r->hold = s;
	want_pollfd(h, q, r, s, MSG_CONNECT_POLLFD);
}

static void req_accept(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *ls = hsock_get(h, pr->pool, q->slot, q->gen), *s;
	if (!ls || !proc_holds(pr, ls->sid)) {
		r->rep.status = -EBADF;
		return;
	}
	if (ls->state != HS_LISTENING) {
		r->rep.status = -EINVAL; /* as the kernel's accept on a socket that does not listen */
		return;
	}
	r->rep.status = hsock_accept(h, ls, &s);
	if (r->rep.status)
		return;
	r->hold = s;
	want_pollfd(h, q, r, s, MSG_ACCEPT_POLLFD);
}

static void req_pollfd(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s = hsock_get(h, pr->pool, q->slot, q->gen);
	if (!s || !proc_holds(pr, s->sid)) {
		r->rep.status = -EBADF;
		return;
	}
	r->rep.status = hpoll_get(s);
	if (r->rep.status >= 0) {
		r->fds[0] = r->rep.status;
		r->nfds = 1;
		r->rep.status = 0;
		h->ready_asked++;
	}
}

static void req_pairfd(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	uint64_t id, bytes;
	struct hsock *s = hsock_get(h, pr->pool, q->slot, q->gen);
	if (!s || !proc_holds(pr, s->sid) || !s->lp) {
		r->rep.status = -EBADF;
		return;
	}
	r->fds[0] = hpair_fd(h, s, &id, &bytes);
	r->nfds = 1;
	r->rep.pool_id = id;
	r->rep.arena_bytes = bytes;
}

static void req_release(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s;
	if (q->arg & MSG_RELEASE_NOREPLY)
		r->reply = 0;
	s = hsock_get(h, pr->pool, q->slot, q->gen);
	if (!s || !proc_drop(pr, s->sid)) {
		r->rep.status = -EBADF;
		return;
	}
	/* arg bit 1: SO_LINGER with a zero time, the connection is
	 * reset; gen 1 in the reply: that was the last holder.  The bit
	 * is kept: the holders' releases come on their own channels, so a
	 * close that came first in the program (the parent's, before its
	 * child set SO_LINGER and closed too) may come last here, and the
	 * kernel resets on the last close of a socket so set. */
	s->abort_asked |= q->arg & 1;
	if (hsock_holders_add(s, -1) == 0) {
		r->rep.gen = 1;
		hsock_release(h, s, s->abort_asked);
	}
}

/* a socket's descriptor is about to go to another process: the token
 * that goes in its place (pass.c) */
static void req_pass(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s = hsock_get(h, pr->pool, q->slot, q->gen);
	int t;
	if (!s || !proc_holds(pr, s->sid) || r->rfd < 0) {
		r->rep.status = -EBADF;
		return;
	}
	t = hpass_new(h, s, pr->uid, r->rfd);
	if (t < 0) {
		r->rep.status = t;
		return;
	}
	r->rfd = -1; /* the pass keeps it */
	r->fds[0] = r->closefd = t;
	r->nfds = 1;
}

/* the listener registered for the kernel listener fd (its inode) */
static struct hsock *listener_of(struct hub *h, int fd)
{
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !st.st_ino)
		return NULL;
	return hub_listener_by_ino(h, (uint64_t)st.st_ino, NULL);
}

/* a token came to this process (arg 0), or a kernel listener that a pool
 * registered (arg 1, the listener along): it holds the socket from now
 * on, in its pool, which it joins if it had none; a process of another
 * uid gets nothing, one of another pool is told which pool (it may ask
 * again on a connection of its own in that pool: core/proc/handover.c) */
static void req_adopt(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hpass *ps = q->arg ? NULL : hpass_find(h, q->slot, q->token);
	struct hsock *s = q->arg ? listener_of(h, r->rfd) : ps ? h->socks[ps->sid] : NULL;
	uid_t uid = ps ? ps->uid : s ? s->pool->use->uid : 0;
	if (!s || (ps && s->gen != ps->gen)) {
		r->rep.status = -ENOENT;
		return;
	}
	if (pr->uid != uid || (pr->pool && pr->pool != s->pool)) {
		r->rep.status = pr->uid != uid ? -EPERM : -EXDEV;
		r->rep.pool_id = pr->uid != uid ? 0 : s->pool->id;
		return;
	}
	if (!proc_holds(pr, s->sid)) {
		if (proc_hold(pr, s->sid) < 0) {
			r->rep.status = -ENOMEM;
			return;
		}
		hsock_holders_add(s, 1);
	}
	/* the descriptor passed; the pool's, if it joins it; a listener's wake-up */
	r->fds[r->nfds++] = ps ? ps->ofd : r->rfd;
	if (!ps) {
		r->closefd = r->rfd; /* once the reply carried it back */
		r->rfd = -1;
	}
	if (!pr->pool) {
		pr->pool = s->pool;
		pr->pool->nprocs++;
		pr->token = proc_token();
		r->rep.flags |= MSG_ADOPT_JOINED;
		r->nfds += pool_reply(pr, &r->rep, r->fds + 1);
		log_info("process %d: joins pool %llu for a socket passed to it", (int)pr->pid,
			 (unsigned long long)pr->pool->id);
	}
	if (s->state == HS_LISTENING && s->evfd >= 0) {
		r->rep.flags |= MSG_ADOPT_LISTENER;
		r->fds[r->nfds++] = s->evfd;
	}
	r->rep.slot = s->slot;
	r->rep.gen = s->gen;
	h->passes_taken += ps != NULL;
}

/* the send ring is full: a larger one (its size in rep.gen), or -errno */
static void req_txgrow(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s = hsock_get(h, pr->pool, q->slot, q->gen);
	int n;
	if (!s || !proc_holds(pr, s->sid)) {
		r->rep.status = -EBADF;
		return;
	}
	n = q->arg == 1 ? hsock_tx_fit(h, s, q->txsize) : hsock_tx_grow(h, s);
	if (n < 0)
		r->rep.status = n;
	else
		r->rep.gen = (uint32_t)n;
}

static void req_shutdown(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	struct hsock *s = hsock_get(h, pr->pool, q->slot, q->gen);
	if (!s || !proc_holds(pr, s->sid)) {
		r->rep.status = -EBADF;
		return;
	}
	if (s->state == HS_LISTENING) {
		hsock_listener_stop(h, s); /* the process sent it for SHUT_RD and SHUT_RDWR */
		return;
	}
	if (s->state != HS_ESTABLISHED) {
		r->rep.status = -ENOTCONN;
		return;
	}
	if (q->arg == SHUT_WR || q->arg == SHUT_RDWR)
		hsock_shutdown_wr(h, s);
}

static uint16_t unmapped_port(const union sockaddr_any *x)
{
	union sockaddr_any a = *x;
	wire_addr_unmap(&a);
	return ntohs(a.sa.sa_family == AF_INET6 ? a.in6.sin6_port : a.in.sin_port);
}

/* as the kernel: an accepted connection keeps its port bound */
static void req_portcheck(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	uint16_t port = unmapped_port(&q->addr);
	(void)pr;
	if (port && h->port_accepted[port])
		r->rep.status = -EADDRINUSE;
}

static void req_stat(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	pr->stat_only = 1;
	do_stat(h, pr, q->arg);
	r->reply = 0;
}

static void req_cell(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	(void)q;
	(void)h;
	r->rep.status = proc_cell_give(pr);
	if (r->rep.status > 0) {
		r->rep.slot = (uint32_t)r->rep.status;
		r->rep.status = 0;
	}
}

/* no_pool: works before the process is attached to a pool; cell: may come
 * through the process's request cell (cell.c): it carries no descriptor
 * either way */
static const struct {
	int no_pool, cell;
	req_fn *fn;
} req_ops[] = {
	[MSG_HELLO] = {1, 0, req_hello},
	[MSG_FORK] = {1, 0, req_fork},
	[MSG_CHILD] = {1, 0, req_child},
	[MSG_LISTEN] = {0, 0, req_listen},
	[MSG_CONNECT] = {0, 1, req_connect},
	[MSG_ACCEPT] = {0, 1, req_accept},
	[MSG_RELEASE] = {0, 1, req_release},
	[MSG_SHUTDOWN] = {0, 1, req_shutdown},
	[MSG_STAT] = {1, 0, req_stat},
	[MSG_PORTCHECK] = {1, 0, req_portcheck},
	[MSG_POLLFD] = {0, 0, req_pollfd},
	[MSG_EXECED] = {0, 0, req_execed},
	[MSG_PAIRFD] = {0, 0, req_pairfd},
	[MSG_TXGROW] = {0, 1, req_txgrow},
	[MSG_PASS] = {0, 0, req_pass},
	[MSG_ADOPT] = {1, 0, req_adopt},
	[MSG_CELL] = {0, 0, req_cell},
};

/* The request done, its reply in r; the socket it hands out held. */
static void answer(struct hub *h, struct proc *pr, const struct msg_req *q, struct req *r)
{
	int known = q->op < sizeof(req_ops) / sizeof(req_ops[0]);
	if (!pr->pool && !(known && req_ops[q->op].no_pool))
		r->rep.status = -EPROTO;
	else if (!known || !req_ops[q->op].fn)
		r->rep.status = -EINVAL;
	else
		req_ops[q->op].fn(h, pr, q, r);
	if (r->hold) {
		if (proc_hold(pr, r->hold->sid) < 0) {
			hsock_release(h, r->hold, 1);
			r->rep.status = -ENOMEM;
		} else {
			hsock_holders_add(r->hold, 1);
			r->rep.slot = r->hold->slot;
			r->rep.gen = r->hold->gen;
		}
	}
}

void proc_request(struct hub *h, struct proc *pr, struct msg_req *q, int rfd)
{
	struct req r = {.reply = 1, .rfd = rfd, .closefd = -1};
	int e;
	h->req_pr = pr; /* a hub that dies before the reply: warden.c answers */
	hub_wake_later_begin(h);
	answer(h, pr, q, &r);
	if (r.rfd >= 0)
		close(r.rfd);
	if (r.reply && (e = proc_send_reply(pr->fd, &r.rep, r.fds, r.nfds)) < 0)
		log_debug("process %d: reply lost: %s", (int)pr->pid, strerror(-e));
	h->req_pr = NULL;
	hub_wake_later_end(h);
	if (r.closefd >= 0)
		close(r.closefd);
}

/* A request that came through a request cell (cell.c): only the ops the
 * table lets come that way (else -EINVAL), its reply into *rep. */
void proc_answer_cell(struct hub *h, struct proc *pr, const struct msg_req *q, struct msg_rep *rep)
{
	struct req r = {.reply = 1, .rfd = -1, .closefd = -1, .cell = 1};
	if (q->op < sizeof(req_ops) / sizeof(req_ops[0]) && req_ops[q->op].cell)
		answer(h, pr, q, &r);
	else
		r.rep.status = -EINVAL;
	if (r.closefd >= 0)
		close(r.closefd); /* (none of those ops has one) */
	*rep = r.rep;
}
