/*
 * hub.c - the hub's event loop, its processes and its pools.
 *
 * One thread, one epoll set: the unix socket processes attach through, one
 * connection per process, one eventfd per pool (the doorbell kick), and the
 * transports' own descriptors.  Each turn drains every pool's doorbell
 * bitmap, reaps every transport's completion queue (the single poller: each
 * completion is routed by its owner tag in hub_route()), then sleeps in
 * epoll_wait with hub_sleeping set in every arena so that processes know to
 * kick.  A process's connection closing is its death: its references are
 * dropped and the sockets only it held are reset.
 */
#include "hub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sched.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "crash.h"
#include "log.h"
#include "msg.h"
#include "sys.h"
#include "tag.h"

struct hub *the_hub;

void hub_defer_free(struct hub *h, void *p)
{
	if (h->ngarbage == h->garbage_cap) {
		uint32_t cap = h->garbage_cap ? h->garbage_cap * 2 : 64;
		void **n = realloc(h->garbage, cap * sizeof(*n));
		if (!n)
			return; /* leak rather than free under a live event */
		h->garbage = n;
		h->garbage_cap = cap;
	}
	h->garbage[h->ngarbage++] = p;
}

uint64_t hub_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int hub_watch(struct hub *h, int fd, uint32_t events, struct hub_ev *ev)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};
	return epoll_ctl(h->epfd, EPOLL_CTL_ADD, fd, &e);
}

int hub_rewatch(struct hub *h, int fd, uint32_t events, struct hub_ev *ev)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};
	return epoll_ctl(h->epfd, EPOLL_CTL_MOD, fd, &e);
}

void hub_unwatch(struct hub *h, int fd)
{
	epoll_ctl(h->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- pools ---- */

static uint64_t arena_bytes_cfg(void)
{
	const char *s = getenv("RSHARE_ARENA_MB");
	long mb = s ? atol(s) : 0;
	if (mb < 16 || mb > 65536)
		return ARENA_DEFAULT_BYTES;
	return (uint64_t)mb << 20;
}

static void pool_kick(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct pool *p = (struct pool *)((char *)ev - offsetof(struct pool, ev));
	uint64_t v;
	(void)h;
	(void)events;
	while (read(p->evfd, &v, sizeof(v)) == sizeof(v))
		;
	/* the doorbells themselves are drained by the main loop */
}

void *hub_shm_new(const char *name, uint64_t bytes, int *fd)
{
	void *base;
	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0)
		return NULL;
	if (ftruncate(*fd, (off_t)bytes) == 0 &&
	    (base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0)) != MAP_FAILED)
		return base;
	close(*fd);
	*fd = -1;
	return NULL;
}

static struct pool *pool_new(struct hub *h)
{
	struct pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->id = ++h->next_pool_id;
	p->bytes = arena_bytes_cfg();
	p->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	p->base = hub_shm_new("rshare-arena", p->bytes, &p->memfd);
	if (p->evfd < 0 || !p->base)
		goto fail;
	if (arena_format(p->base, p->bytes, p->id) < 0)
		goto fail;
	p->slots = (struct arena_slot *)((uint8_t *)p->base + ((struct arena_hdr *)p->base)->slots_off);
	{
		/* receive rings below, send rings above a chunk boundary, so that
		 * only receive rings are ever registered remote-writable */
		uint64_t data = ((struct arena_hdr *)p->base)->data_off;
		uint64_t mid = (data + (p->bytes - data) / 2) & ~(uint64_t)(POOL_CHUNK - 1);
		if (mid <= data)
			goto fail;
		p->rx_alloc = arena_alloc_new(data, mid);
		p->tx_alloc = arena_alloc_new(mid, p->bytes);
		p->nchunks = (uint32_t)(p->bytes / POOL_CHUNK);
		p->mrs = calloc(p->nchunks, sizeof(*p->mrs));
		p->mr_ok = calloc(p->nchunks, 1);
		if (!p->rx_alloc || !p->tx_alloc || !p->mrs || !p->mr_ok)
			goto fail;
	}
	p->ev.fn = pool_kick;
	if (hub_watch(h, p->evfd, EPOLLIN, &p->ev) < 0)
		goto fail;
	p->next = h->pools;
	h->pools = p;
	log_info("pool %llu: arena of %llu MiB", (unsigned long long)p->id,
		 (unsigned long long)(p->bytes >> 20));
	return p;
fail:
	log_error("pool: cannot create an arena: %s", strerror(errno));
	if (p->base)
		munmap(p->base, p->bytes);
	if (p->memfd >= 0)
		close(p->memfd);
	if (p->evfd >= 0)
		close(p->evfd);
	arena_alloc_free_all(p->rx_alloc);
	arena_alloc_free_all(p->tx_alloc);
	free(p->mrs);
	free(p->mr_ok);
	free(p);
	return NULL;
}

/* Pools without processes or sockets are swept between event batches, so
 * that nothing frees an arena while a doorbell scan walks it. */
void pool_maybe_free(struct hub *h, struct pool *p)
{
	(void)h;
	(void)p;
}

static void pools_sweep(struct hub *h)
{
	struct pool **pp = &h->pools;
	while (*pp) {
		struct pool *p = *pp;
		if (p->nprocs || p->nsocks) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		hub_unwatch(h, p->evfd);
		close(p->evfd);
		for (uint32_t c = 0; c < p->nchunks; c++)
			if (p->mr_ok[c])
				h->verbs.ops->dereg_mr(&h->verbs, &p->mrs[c]);
		close(p->memfd);
		munmap(p->base, p->bytes);
		arena_alloc_free_all(p->rx_alloc);
		arena_alloc_free_all(p->tx_alloc);
		free(p->mrs);
		free(p->mr_ok);
		log_info("pool %llu: gone", (unsigned long long)p->id);
		free(p);
		h->segs_dirty = 1;
	}
	if (h->segs_dirty) {
		h->segs_dirty = 0;
		hpair_sweep(h);
	}
}

int pool_chunk_pinned(struct pool *p, uint64_t off)
{
	uint64_t c = off / POOL_CHUNK;
	return c < p->nchunks && p->mr_ok[c];
}

int pool_keys(struct hub *h, struct pool *p, uint64_t off, uint64_t len, int remote, uint32_t *lkey,
	      uint32_t *rkey)
{
	uint64_t c = off / POOL_CHUNK;
	if (!len) {
		*lkey = *rkey = 0;
		return 0;
	}
	if (c >= p->nchunks || (off + len - 1) / POOL_CHUNK != c || !h->verbs.up)
		return -1;
	if (!p->mr_ok[c]) {
		if (h->verbs.ops->reg_mr(&h->verbs, arena_bytes(p->base, c * POOL_CHUNK), POOL_CHUNK, remote,
					 &p->mrs[c]) < 0)
			return -1;
		p->mr_ok[c] = 1;
	}
	*lkey = p->mrs[c].lkey;
	*rkey = p->mrs[c].rkey;
	return 0;
}

/* Drain the doorbell bitmap of one pool.  Returns whether any bell rang. */
static int pool_doorbells(struct hub *h, struct pool *p)
{
	struct arena_hdr *ah = p->base;
	int rang = 0;
	for (uint32_t w = 0; w < ARENA_DOORBELL_WORDS; w++) {
		uint64_t bits;
		if (!atomic_load_explicit(&ah->doorbell[w], memory_order_relaxed))
			continue;
		bits = atomic_exchange_explicit(&ah->doorbell[w], 0, memory_order_acquire);
		while (bits) {
			uint32_t slot = w * 64 + (uint32_t)__builtin_ctzll(bits);
			uint32_t sid = p->slot_sid[slot];
			struct hsock *s;
			uint32_t ops;
			bits &= bits - 1;
			rang = 1;
			if (!sid)
				continue; /* a bell on a free slot: ignore */
			s = h->socks[sid];
			ops = atomic_exchange_explicit(&s->as->pending_ops, 0, memory_order_acquire);
			if (ops & SLOTOP_TX) {
				uint32_t gen = s->gen;
				hsock_tx(h, s);
				s = h->socks[sid]; /* an abort may have ended it */
				if (!s || s->gen != gen || !s->as)
					continue;
			}
			if (ops & SLOTOP_CREDIT)
				hsock_credit(h, s);
			if ((ops & SLOTOP_POLL) && s->poll_h >= 0)
				hpoll_reflect(s);
		}
	}
	return rang;
}

static void set_sleeping(struct hub *h, uint32_t v)
{
	for (struct pool *p = h->pools; p; p = p->next)
		atomic_store_explicit(&((struct arena_hdr *)p->base)->hub_sleeping, v, memory_order_seq_cst);
}

/* ---- processes ---- */

static int proc_hold(struct proc *pr, uint32_t sid)
{
	return sid_push(&pr->socks, &pr->nsocks, &pr->cap, sid);
}

static int proc_holds(struct proc *pr, uint32_t sid)
{
	for (uint32_t i = 0; i < pr->nsocks; i++)
		if (pr->socks[i] == sid)
			return 1;
	return 0;
}

static int proc_drop(struct proc *pr, uint32_t sid)
{
	for (uint32_t i = 0; i < pr->nsocks; i++)
		if (pr->socks[i] == sid) {
			pr->socks[i] = pr->socks[--pr->nsocks];
			return 1;
		}
	return 0;
}

static void proc_free(struct hub *h, struct proc *pr)
{
	struct proc **pp;
	for (pp = &h->procs; *pp; pp = &(*pp)->next)
		if (*pp == pr) {
			*pp = pr->next;
			break;
		}
	hub_unwatch(h, pr->fd);
	close(pr->fd);
	if (pr->nsocks)
		log_info("process %d gone holding %u sockets", (int)pr->pid, pr->nsocks);
	for (uint32_t i = 0; i < pr->nsocks; i++) {
		struct hsock *s = h->socks[pr->socks[i]];
		if (s && s->nholders && --s->nholders == 0)
			hsock_release(h, s, !pr->exiting);
	}
	if (pr->pool) {
		pr->pool->nprocs--;
		pool_maybe_free(h, pr->pool);
	}
	free(pr->socks);
	hub_defer_free(h, pr);
}

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

static int send_reply(int fd, const struct msg_rep *rep, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)rep, .iov_len = sizeof(*rep)};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		struct cmsghdr *c;
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(fd, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(*rep) ? 0 : -1;
}

static uint64_t new_token(void)
{
	uint64_t t = 0;
	while (!t && getrandom(&t, sizeof(t), 0) != sizeof(t))
		;
	return t ? t : 1;
}

static struct proc *proc_by_token(struct hub *h, uint64_t token)
{
	for (struct proc *p = h->procs; p; p = p->next)
		if (p->token == token && p->pool)
			return p;
	return NULL;
}

static void do_stat(struct hub *h, struct proc *pr, int json)
{
	size_t len, off = 0;
	char *txt = hub_stat(h, json, &len);
	/* the reader drains as we write; a slow reader blocks the hub briefly */
	int fl = fcntl(pr->fd, F_GETFL);
	fcntl(pr->fd, F_SETFL, fl & ~O_NONBLOCK);
	while (txt && off < len) {
		size_t n = len - off > 32768 ? 32768 : len - off;
		if (send(pr->fd, txt + off, n, MSG_NOSIGNAL) < 0)
			break;
		off += n;
	}
	free(txt);
}

static void proc_request(struct hub *h, struct proc *pr, struct msg_req *q, int rfd)
{
	struct msg_rep rep = {0};
	struct hsock *s = NULL;
	int fds[2], nfds = 0, reply = 1;

	if (q->op != MSG_HELLO && q->op != MSG_FORK && q->op != MSG_CHILD && q->op != MSG_STAT &&
	    q->op != MSG_PORTCHECK && !pr->pool) {
		rep.status = -EPROTO;
		goto out;
	}
	switch (q->op) {
	case MSG_HELLO:
		if (pr->pool) {
			rep.status = -EISCONN;
			break;
		}
		pr->pool = pool_new(h);
		if (!pr->pool) {
			rep.status = -ENOMEM;
			break;
		}
		pr->pool->nprocs++;
		pr->pid = q->pid > 0 ? q->pid : pr->pid;
		pr->token = new_token();
		nfds = pool_reply(pr, &rep, fds);
		log_info("process %d: new pool %llu", (int)pr->pid, (unsigned long long)pr->pool->id);
		break;
	case MSG_FORK: {
		struct proc *parent = proc_by_token(h, q->token);
		/* only the parent itself may hand its pool on: its token (the
		 * pool's secret), its pid and its uid, as the kernel saw them */
		if (pr->pool || !parent || (parent->pid && parent->pid != pr->pid) || parent->uid != pr->uid) {
			rep.status = -EPERM;
			break;
		}
		pr->pool = parent->pool;
		pr->pool->nprocs++;
		pr->pid = 0; /* the child tells */
		pr->token = new_token();
		for (uint32_t i = 0; i < parent->nsocks; i++) {
			struct hsock *hs = h->socks[parent->socks[i]];
			if (hs && proc_hold(pr, hs->sid) == 0)
				hs->nholders++;
		}
		rep.token = pr->token;
		break;
	}
	case MSG_CHILD:
		reply = 0;
		if (pr->pool && !pr->pid && q->pid > 0)
			pr->pid = q->pid;
		break;
	case MSG_EXITING:
		pr->exiting = q->arg == 1;
		break;
	case MSG_EXECED:
		/* the same process, after exec: it maps the pool again */
		if (!pr->pool || pr->pid || q->pid <= 0) {
			rep.status = -EPERM;
			break;
		}
		pr->pid = q->pid;
		nfds = pool_reply(pr, &rep, fds);
		break;
	case MSG_LISTEN:
		s = hsock_new(h, pr->pool, 0, 0);
		if (!s) {
			rep.status = -ENOBUFS;
			break;
		}
		s->local = q->addr;
		rep.status = hub_listen(h, s, &q->addr, q->arg, rfd);
		if (rep.status) {
			hsock_release(h, s, 1);
			break;
		}
		rfd = -1; /* the listener keeps it */
		s->rx_size = arena_ring_size(q->rxsize);
		s->tx_size = arena_ring_size(q->txsize);
		goto hold;
	case MSG_CONNECT:
		/* the rings come when hsock_connect() knows where: this arena
		 * for a link, a pair segment for the same node */
		s = hsock_new(h, pr->pool, 0, 0);
		if (!s) {
			rep.status = -ENOBUFS;
			break;
		}
		s->rx_size = arena_ring_size(q->rxsize);
		s->tx_size = arena_ring_size(q->txsize);
		s->local = q->local;
		rep.status = hsock_connect(h, s, &q->addr);
		if (rep.status) {
			hsock_release(h, s, 1);
			break;
		}
		goto hold;
	case MSG_ACCEPT: {
		struct hsock *ls = hsock_get(h, pr->pool, q->slot, q->gen);
		if (!ls || !proc_holds(pr, ls->sid) || ls->state != HS_LISTENING) {
			rep.status = -EBADF;
			break;
		}
		rep.status = hsock_accept(h, ls, &s);
		if (rep.status)
			break;
		goto hold;
	}
	case MSG_POLLFD:
		s = hsock_get(h, pr->pool, q->slot, q->gen);
		if (!s || !proc_holds(pr, s->sid) || s->state == HS_LISTENING) {
			rep.status = -EBADF;
			break;
		}
		rep.status = hpoll_get(s);
		if (rep.status >= 0) {
			fds[0] = rep.status;
			nfds = 1;
			rep.status = 0;
		}
		break;
	case MSG_PAIRFD: {
		uint64_t id, bytes;
		s = hsock_get(h, pr->pool, q->slot, q->gen);
		if (!s || !proc_holds(pr, s->sid) || !s->lp) {
			rep.status = -EBADF;
			break;
		}
		fds[0] = hpair_fd(h, s, &id, &bytes);
		nfds = 1;
		rep.pool_id = id;
		rep.arena_bytes = bytes;
		break;
	}
	case MSG_RELEASE:
		if (q->arg & MSG_RELEASE_NOREPLY)
			reply = 0;
		s = hsock_get(h, pr->pool, q->slot, q->gen);
		if (!s || !proc_drop(pr, s->sid)) {
			rep.status = -EBADF;
			break;
		}
		/* arg bit 1: SO_LINGER with a zero time, the connection is
		 * reset; gen 1 in the reply: that was the last holder */
		if (--s->nholders == 0) {
			rep.gen = 1;
			hsock_release(h, s, q->arg & 1);
		}
		break;
	case MSG_SHUTDOWN:
		s = hsock_get(h, pr->pool, q->slot, q->gen);
		if (!s || !proc_holds(pr, s->sid)) {
			rep.status = -EBADF;
			break;
		}
		if (s->state != HS_ESTABLISHED) {
			rep.status = -ENOTCONN;
			break;
		}
		if (q->arg == SHUT_WR || q->arg == SHUT_RDWR)
			hsock_shutdown_wr(h, s);
		break;
	case MSG_PORTCHECK: {
		/* as the kernel: an accepted connection keeps its port bound */
		union sockaddr_any a = q->addr;
		uint16_t port;
		wire_addr_unmap(&a);
		port = ntohs(a.sa.sa_family == AF_INET6 ? a.in6.sin6_port : a.in.sin_port);
		for (uint32_t sid = 1; port && sid < TAG_MAX_SOCKS; sid++) {
			struct hsock *x = h->socks[sid];
			union sockaddr_any l;
			if (!x || !x->accepted)
				continue;
			l = x->local;
			wire_addr_unmap(&l);
			if (ntohs(l.sa.sa_family == AF_INET6 ? l.in6.sin6_port : l.in.sin_port) == port) {
				rep.status = -EADDRINUSE;
				break;
			}
		}
		break;
	}
	case MSG_STAT:
		pr->stat_only = 1;
		do_stat(h, pr, q->arg);
		shutdown(pr->fd, SHUT_WR); /* the reader stops at end of file */
		reply = 0;
		break;
	default:
		rep.status = -EINVAL;
	}
	goto out;
hold:
	if (proc_hold(pr, s->sid) < 0) {
		hsock_release(h, s, 1);
		rep.status = -ENOMEM;
		goto out;
	}
	s->nholders++;
	rep.slot = s->slot;
	rep.gen = s->gen;
out:
	if (rfd >= 0)
		close(rfd);
	if (reply && send_reply(pr->fd, &rep, fds, nfds) < 0)
		log_debug("process %d: reply lost: %s", (int)pr->pid, strerror(errno));
}

static void proc_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct proc *pr = (struct proc *)ev;
	struct msg_req q;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &q, .iov_len = sizeof(q)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	int rfd = -1;
	(void)events;

	n = recvmsg(pr->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
	if (n <= 0 || pr->stat_only) {
		if (rfd >= 0)
			close(rfd);
		proc_free(h, pr);
		return;
	}
	if (n != sizeof(q) || q.op == 0 || q.op > MSG_MAX || (m.msg_flags & MSG_CTRUNC)) {
		log_warn("process %d: malformed request, dropping it", (int)pr->pid);
		if (rfd >= 0)
			close(rfd);
		proc_free(h, pr);
		return;
	}
	proc_request(h, pr, &q, rfd);
}

static void hub_accept_proc(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	(void)ev;
	(void)events;
	for (;;) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		struct proc *pr;
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		pr = calloc(1, sizeof(*pr));
		if (!pr || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			free(pr);
			close(fd);
			continue;
		}
		pr->fd = fd;
		pr->pid = cr.pid;
		pr->uid = cr.uid;
		pr->ev.fn = proc_event;
		if (hub_watch(h, fd, EPOLLIN | EPOLLRDHUP, &pr->ev) < 0) {
			close(fd);
			free(pr);
			continue;
		}
		pr->next = h->procs;
		h->procs = pr;
	}
}

/* ---- links, for the transports ---- */

static struct link *link_alloc(struct hub *h, struct xport *xp)
{
	struct link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->ctl_bufs = calloc(HUB_CTL_RECVS, WIRE_CTL_LEN);
	if (!l->ctl_bufs) {
		free(l);
		return NULL;
	}
	l->x.id = ++h->next_link_id;
	l->x.xp = xp;
	l->next = h->links;
	h->links = l;
	return l;
}

static struct link *link_start(struct hub *h, struct xport *xp, const union sockaddr_any *peer)
{
	struct link *l = link_alloc(h, xp);
	if (!l)
		return NULL;
	l->x.outgoing = 1;
	l->state = LINK_CONNECTING;
	l->x.peer_addr = *peer;
	l->deadline_ms = hub_now_ms() + HUB_LINK_CONNECT_MS;
	if (xp->ops->link_connect(xp, &l->x, peer) < 0) {
		hub_link_fail(&l->x, "cannot start the link");
		return NULL;
	}
	return l;
}

/* verbs when both nodes have an RDMA device on the route, else soft (the
 * verbs attempt failing moves its connections to a soft link), unless
 * RSHARE_TRANSPORT says otherwise. */
struct link *hub_link_new_outgoing(struct hub *h, const union sockaddr_any *peer)
{
	if (h->mode == HUB_VERBS && !h->verbs.up)
		return NULL;
	if (h->mode != HUB_SOFT && h->verbs.up) {
		struct link *l = link_start(h, &h->verbs, peer);
		if (l || h->mode == HUB_VERBS)
			return l;
	}
	return link_start(h, &h->soft, peer);
}

/* A verbs link that never came up: its connections try a soft one. */
static void fall_to_soft(struct hub *h, struct link *l)
{
	struct link *n;
	int moved = 0;
	if (l->was_up || !l->x.outgoing || l->x.xp != &h->verbs || h->mode != HUB_AUTO)
		return;
	for (uint32_t sid = 1; sid < TAG_MAX_SOCKS; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == l && s->state == HS_CONNECTING && !s->connect_sent)
			moved++;
	}
	if (!moved)
		return;
	n = link_start(h, &h->soft, &l->x.peer_addr);
	for (uint32_t sid = 1; n && sid < TAG_MAX_SOCKS; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == l && s->state == HS_CONNECTING && !s->connect_sent)
			s->link = n;
	}
	if (n)
		log_info("link %u: no verbs path to the peer, link %u tries soft", l->x.id, n->x.id);
}

struct xlink *hub_link_accepted(struct hub *h, struct xport *xp, const union sockaddr_any *peer,
				const union sockaddr_any *local)
{
	struct link *l = link_alloc(h, xp);
	if (!l)
		return NULL;
	l->state = LINK_CONNECTING;
	l->x.peer_addr = *peer;
	l->x.local_addr = *local;
	l->deadline_ms = hub_now_ms() + HUB_LINK_CONNECT_MS;
	return &l->x;
}

void hub_link_up(struct xlink *xl, uint64_t peer_node)
{
	struct hub *h = the_hub;
	struct link *l = link_of(xl);
	l->x.peer_node = peer_node;
	l->state = LINK_UP;
	l->was_up = 1;
	for (uint32_t i = 0; i < HUB_CTL_RECVS; i++)
		l->x.xp->ops->post_recv(&l->x, i, l->ctl_bufs + (size_t)i * WIRE_CTL_LEN, WIRE_CTL_LEN);
	log_info("link %u up: peer node %016llx (%s)", l->x.id, (unsigned long long)peer_node,
		 l->x.outgoing ? "outgoing" : "incoming");
	/* connections that waited for the link */
	for (uint32_t sid = 1; sid < TAG_MAX_SOCKS; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->link == l && s->state == HS_CONNECTING && !s->connect_sent)
			hsock_connect(h, s, NULL);
	}
}

void hub_link_fail(struct xlink *xl, const char *why)
{
	struct hub *h = the_hub;
	struct link *l = link_of(xl);
	struct link **pp;
	if (l->state == LINK_DOWN)
		return;
	if (l->state == LINK_UP) {
		log_warn("link %u to node %016llx dropped: %s", l->x.id, (unsigned long long)l->x.peer_node, why);
		h->links_dropped++;
	} else {
		log_info("link %u not established: %s", l->x.id, why);
	}
	l->x.xp->ops->link_close(&l->x);
	l->state = LINK_DOWN;
	fall_to_soft(h, l);
	hub_link_gone(h, l);
	l->state = LINK_DOWN;
	for (pp = &h->links; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	free(l->txwait);
	l->txwait = NULL;
	l->ntxwait = 0;
	hub_defer_free(h, l->ctl_bufs);
	hub_defer_free(h, l);
}

/* A transport says posting may resume.  Only noted here: the waiting
 * sockets are resumed from the main loop (hub_run_writable), never from
 * inside a post, where the socket being posted from may itself be waiting
 * and would post the same bytes twice. */
void hub_link_writable(struct xlink *xl)
{
	link_of(xl)->writable = 1;
}

int hub_link_waiting(const struct xlink *xl)
{
	return link_of((struct xlink *)xl)->ntxwait != 0;
}

uint64_t hub_node_id(const struct hub *h)
{
	return h->node_id;
}

const union sockaddr_any *hub_bind_addr(const struct hub *h)
{
	return &h->bind_addr;
}

void hub_count_malformed(struct hub *h)
{
	h->malformed++;
}

int hub_run_writable(struct hub *h)
{
	int ran = 0;
	for (struct link *l = h->links; l; l = l->next) {
		uint32_t n, *w;
		if (!l->writable || l->state != LINK_UP)
			continue;
		l->writable = 0;
		n = l->ntxwait;
		w = l->txwait;
		l->txwait = NULL;
		l->ntxwait = l->txwait_cap = 0;
		for (uint32_t i = 0; i < n; i++) {
			struct hsock *s = h->socks[w[i]];
			if (s && s->link == l) {
				s->on_txwait = 0;
				hsock_tx(h, s);
			}
		}
		free(w);
		ran |= n > 0;
	}
	return ran;
}

void hub_reap_doomed(struct hub *h)
{
	struct link *l;
again:
	for (l = h->links; l; l = l->next)
		if (l->doomed && l->state != LINK_DOWN) {
			hub_link_fail(&l->x, l->doomed);
			goto again;
		}
}

static void check_deadlines(struct hub *h)
{
	uint64_t now = hub_now_ms();
	struct link *l, *next;
	for (l = h->links; l; l = next) {
		next = l->next;
		if (l->state == LINK_CONNECTING && now > l->deadline_ms)
			hub_link_fail(&l->x, "connect timed out");
		/* verbs: a link that sent nothing lately sends a PING, whose
		 * failure (the queue pair's retries exhausted) drops it; soft
		 * links have TCP keepalive for that */
		if (l->state == LINK_UP && !(l->x.xp->ops->flags & XP_POSITIONAL)) {
			if (l->msgs_tx != l->msgs_tx_seen) {
				l->msgs_tx_seen = l->msgs_tx;
				l->ping_ms = now;
			} else if (now - l->ping_ms >= HUB_KEEPALIVE_MS) {
				l->ping_ms = now;
				hub_link_ping(l);
				l->msgs_tx_seen = l->msgs_tx;
			}
		}
	}
}

/* ---- main ---- */

static void on_signal(int sig)
{
	(void)sig;
	if (the_hub)
		the_hub->stop = 1;
}

static int hub_listen_unix(struct hub *h)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const char *name = hub_sock_name();
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
	memcpy(a.sun_path + 1, name, strlen(name));
	h->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->lfd < 0)
		return -1;
	if (bind(h->lfd, (struct sockaddr *)&a, len) < 0 || listen(h->lfd, 4096) < 0)
		return -1;
	h->lev.fn = hub_accept_proc;
	return hub_watch(h, h->lfd, EPOLLIN, &h->lev);
}

static void usage(void)
{
	fprintf(stderr, "Usage: rshared [--port PORT] [--addr ADDRESS] [--transport auto|verbs|soft] [--syslog] [--daemon]\n");
}

static int parse_mode(const char *s)
{
	if (!s || !*s || !strcmp(s, "auto"))
		return HUB_AUTO;
	if (!strcmp(s, "verbs"))
		return HUB_VERBS;
	if (!strcmp(s, "soft"))
		return HUB_SOFT;
	return -1;
}

static int parse_addr(const char *s, union sockaddr_any *a)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, &a->in.sin_addr) == 1) {
		a->in.sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &a->in6.sin6_addr) == 1) {
		a->in6.sin6_family = AF_INET6;
		return 0;
	}
	return -1;
}

uint64_t hub_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reap a transport's completions and route each to its owner; the time
 * from the poll to the owner woken (data arrived, or send ring space freed)
 * is the hand-off, the price of one poller for all processes. */
static int reap(struct hub *h, struct xport *xp)
{
	struct xwc wc[64];
	int n, any = 0;
	while ((n = xp->ops->poll_cq(xp, wc, 64)) > 0) {
		uint64_t t0 = hub_now_ns(), t1 = t0, t2;
		for (int i = 0; i < n; i++) {
			hub_route(h, &wc[i]);
			if (wc[i].op == XWC_RECV_IMM || wc[i].op == XWC_WRITE) {
				/* from the poll (the batch's), and its own routing */
				t2 = hub_now_ns();
				h->handoffs++;
				h->handoff_ns += t2 - t0;
				h->route_ns += t2 - t1;
				t1 = t2;
			} else {
				t1 = hub_now_ns();
			}
		}
		any = 1;
	}
	return any;
}

int hub_main(int argc, char **argv)
{
	struct hub *h = calloc(1, sizeof(*h));
	uint64_t last_work;
	int daemon_mode = 0;
	long port;
	struct rlimit rl;
	struct sigaction sa = {.sa_handler = on_signal};
	static struct cfg cf;
	char err[CFG_LINE_MAX];

	/* the file, then RSHARE_* variables, then options */
	if (cfg_load(NULL, &cf, err, sizeof(err)) < 0 || cfg_env(&cf, err, sizeof(err)) < 0) {
		fprintf(stderr, "rshared: %s\n", err);
		return 2;
	}
	log_init("rshared", cf.log >= 0 ? cf.log : LOG_LVL_WARN);
	port = cf.port ? cf.port : HUB_DEFAULT_PORT;
	h->mode = parse_mode(cf.transport);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atol(argv[++i]);
		else if (!strcmp(argv[i], "--transport") && i + 1 < argc) {
			h->mode = parse_mode(argv[++i]);
			if (h->mode < 0) {
				usage();
				return 2;
			}
		} else if (!strcmp(argv[i], "--addr") && i + 1 < argc) {
			if (parse_addr(argv[++i], &h->bind_addr) < 0) {
				fprintf(stderr, "rshared: bad address %s\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--syslog"))
			log_to_syslog();
		else if (!strcmp(argv[i], "--daemon"))
			daemon_mode = 1;
		else {
			usage();
			return 2;
		}
	}
	if (port <= 0 || port > 65535) {
		fprintf(stderr, "rshared: bad port\n");
		return 2;
	}
	if (!h)
		return 1;
	the_hub = h;
	h->port = (uint16_t)port;
	h->socks = calloc(TAG_MAX_SOCKS, sizeof(*h->socks));
	h->gens = calloc(TAG_MAX_SOCKS, sizeof(*h->gens));
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!h->socks || !h->gens || h->epfd < 0)
		return 1;
	while (!h->node_id)
		if (getrandom(&h->node_id, sizeof(h->node_id), 0) < 0)
			return 1;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	crash_install();
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (hub_listen_unix(h) < 0) {
		if (errno == EADDRINUSE) {
			if (!daemon_mode)
				fprintf(stderr, "rshared: a hub already runs in this network namespace\n");
			return daemon_mode ? 0 : 1;
		}
		fprintf(stderr, "rshared: cannot listen for processes: %s\n", strerror(errno));
		return 1;
	}
	h->soft.ops = &xport_soft_ops;
	if (h->soft.ops->init(&h->soft, h, h->port) < 0) {
		fprintf(stderr, "rshared: cannot listen for peer hubs on port %u: %s\n", h->port,
			strerror(errno));
		return 1;
	}
	h->soft.up = 1;
	h->verbs.ops = &xport_verbs_ops;
	if (h->mode != HUB_SOFT) {
		if (h->verbs.ops->init(&h->verbs, h, h->port) == 0)
			h->verbs.up = 1;
		else if (h->mode == HUB_VERBS) {
			fprintf(stderr, "rshared: no usable RDMA device: %s\n", strerror(errno));
			return 1;
		} else
			log_info("verbs: not available (%s); links use soft", strerror(errno));
	}
	log_info("hub up: node %016llx, peer port %u", (unsigned long long)h->node_id, h->port);

	h->spin_ns = (uint64_t)(cf.spin_us >= 0 ? cf.spin_us : CFG_DEFAULT_SPIN_US) * 1000;
	last_work = hub_now_ns();
	while (!h->stop) {
		struct epoll_event evs[64];
		int n, rang = 0, busy, spin;
		do {
			busy = 0;
			for (struct pool *p = h->pools; p; p = p->next)
				busy |= pool_doorbells(h, p);
			busy |= reap(h, &h->soft);
			if (h->verbs.up)
				busy |= reap(h, &h->verbs);
			busy |= hub_run_writable(h);
			if (busy)
				last_work = hub_now_ns();
		} while (busy);
		/* adaptive: poll for a while after work (yielding the CPU to
		 * whoever else can run), then sleep with the processes told to kick */
		spin = h->spin_ns && hub_now_ns() - last_work < h->spin_ns;
		if (spin) {
			sched_yield();
		} else {
			set_sleeping(h, 1);
			for (struct pool *p = h->pools; p && !rang; p = p->next) {
				struct arena_hdr *ah = p->base;
				for (uint32_t w = 0; w < ARENA_DOORBELL_WORDS && !rang; w++)
					rang = atomic_load(&ah->doorbell[w]) != 0;
			}
		}
		n = rang ? 0 : epoll_wait(h->epfd, evs, 64, spin ? 0 : 500);
		if (!spin)
			set_sleeping(h, 0);
		if (n > 0)
			last_work = hub_now_ns();
		for (int i = 0; i < n; i++) {
			struct hub_ev *ev = evs[i].data.ptr;
			ev->fn(h, ev, evs[i].events);
		}
		check_deadlines(h);
		hub_reap_doomed(h);
		pools_sweep(h);
		for (uint32_t i = 0; i < h->ngarbage; i++)
			free(h->garbage[i]);
		h->ngarbage = 0;
	}
	log_info("hub stopping");
	return 0;
}

/* ---- entry points for unit tests and fuzzers: a hub without sockets ---- */

struct hub *hub_test_new(void)
{
	struct hub *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->socks = calloc(TAG_MAX_SOCKS, sizeof(*h->socks));
	h->gens = calloc(TAG_MAX_SOCKS, sizeof(*h->gens));
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	h->node_id = 1;
	h->port = HUB_DEFAULT_PORT;
	h->mode = HUB_SOFT;
	h->lfd = -1;
	the_hub = h;
	return h;
}

struct pool *hub_test_pool(struct hub *h)
{
	return pool_new(h);
}

struct proc *hub_test_proc(struct hub *h, struct pool *p)
{
	struct proc *pr = calloc(1, sizeof(*pr));
	int sv[2];
	if (!pr || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
		free(pr);
		return NULL;
	}
	close(sv[1]); /* replies go nowhere */
	pr->fd = sv[0];
	pr->pid = getpid();
	pr->uid = getuid();
	pr->ev.fn = proc_event;
	pr->pool = p;
	pr->token = new_token();
	if (p)
		p->nprocs++;
	pr->next = h->procs;
	h->procs = pr;
	return pr;
}

void hub_test_request(struct hub *h, struct proc *pr, const struct msg_req *q)
{
	struct msg_req c = *q;
	proc_request(h, pr, &c, -1);
}

int hub_test_doorbells(struct hub *h, struct pool *p)
{
	return pool_doorbells(h, p);
}

struct link *hub_test_link(struct hub *h, struct xport *xp)
{
	struct link *l = link_alloc(h, xp);
	if (l)
		hub_link_up(&l->x, 2);
	return l;
}

void hub_test_proc_gone(struct hub *h, struct proc *pr)
{
	proc_free(h, pr);
}

void hub_test_settle(struct hub *h)
{
	hub_run_writable(h);
	hub_reap_doomed(h);
	pools_sweep(h);
	for (uint32_t i = 0; i < h->ngarbage; i++)
		free(h->garbage[i]);
	h->ngarbage = 0;
}
