/*
 * xport_soft.c - the `soft` transport: verbs semantics over one TCP
 * connection per pair of nodes.
 *
 * Every posted work request becomes a frame on the link's stream (frame.h):
 * a write with immediate carries its payload, a send one control message.
 * A send completion is reported once the frame has been handed whole to
 * the kernel; frames leave in the order posted.  The receiving side plays
 * the NIC: it decodes each frame, asks the hub where a write's payload
 * belongs (hub_rx_target: socket, generation, ring window), places it
 * there and queues a receive completion with the immediate; a send
 * consumes the oldest posted receive and, like a receiver-not-ready NAK,
 * waits when none is posted.  All completions of all links go to one
 * completion queue that the hub polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xport_hub.h"
#include "frame.h"
#include "log.h"

#define SOFT_OUT_MAX (4u << 20)   /* queued bytes before writes get -EAGAIN */
#define SOFT_IN_CHUNK (256u << 10)
#define SOFT_PEER_TIMEOUT_MS 10000 /* unacknowledged data this long: the peer is gone */

struct soft_recv {
	uint64_t wr_id;
	void *buf;
	uint32_t len;
};

struct soft_pend { /* a send completion waiting for its frame to leave */
	uint64_t end;
	struct xwc wc;
};

struct soft_link {
	struct hub_ev ev; /* first: epoll data points here */
	struct soft *sx;
	struct xlink *l;
	int fd;
	int closed, connecting, hello_in, stalled, need_parse;
	uint32_t events;
	uint8_t *out;
	size_t olen, ooff, ocap;
	uint64_t queued, written;
	struct soft_pend *pw;
	uint32_t pw_head, pw_n, pw_cap;
	uint8_t *in;
	size_t ilen, icap;
	struct soft_recv *rq;
	uint32_t rq_head, rq_n, rq_cap;
	struct soft_link *next;
};

struct soft {
	struct hub *h;
	struct xport *xp;
	int lfd;
	struct hub_ev lev;
	struct xwc *cq;
	uint32_t cq_head, cq_n, cq_cap;
	struct soft_link *links;
};

static struct soft_link *SL(struct xlink *l) { return l->xpriv; }

static void cq_push(struct soft *sx, const struct xwc *wc)
{
	if (sx->cq_head + sx->cq_n == sx->cq_cap) {
		if (sx->cq_head) {
			memmove(sx->cq, sx->cq + sx->cq_head, sx->cq_n * sizeof(*sx->cq));
			sx->cq_head = 0;
		} else {
			uint32_t cap = sx->cq_cap ? sx->cq_cap * 2 : 1024;
			struct xwc *n = realloc(sx->cq, cap * sizeof(*n));
			if (!n)
				abort(); /* a lost completion would corrupt a stream */
			sx->cq = n;
			sx->cq_cap = cap;
		}
	}
	sx->cq[sx->cq_head + sx->cq_n++] = *wc;
}

static void set_events(struct soft_link *sl)
{
	uint32_t ev = 0;
	if (sl->closed)
		return;
	if (sl->connecting || sl->olen > sl->ooff)
		ev |= EPOLLOUT;
	if (!sl->connecting && !sl->stalled)
		ev |= EPOLLIN | EPOLLRDHUP;
	if (ev != sl->events) {
		sl->events = ev;
		hub_rewatch(sl->sx->h, sl->fd, ev, &sl->ev);
	}
}

static void fail(struct soft_link *sl, const char *why)
{
	if (!sl->closed)
		hub_link_fail(sl->l, why);
}

/* Completions for every frame that has left whole. */
static void reap_sent(struct soft_link *sl)
{
	while (sl->pw_n && sl->pw[sl->pw_head].end <= sl->written) {
		cq_push(sl->sx, &sl->pw[sl->pw_head].wc);
		sl->pw_head = (sl->pw_head + 1) % sl->pw_cap;
		sl->pw_n--;
	}
}

static void flush(struct soft_link *sl)
{
	size_t before = sl->olen - sl->ooff;
	while (sl->olen > sl->ooff) {
		ssize_t n = send(sl->fd, sl->out + sl->ooff, sl->olen - sl->ooff, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				fail(sl, strerror(errno));
			break;
		}
		sl->ooff += n;
		sl->written += n;
	}
	if (sl->closed)
		return;
	if (sl->ooff == sl->olen)
		sl->ooff = sl->olen = 0;
	reap_sent(sl);
	set_events(sl);
	if (sl->olen - sl->ooff < before && sl->olen - sl->ooff < SOFT_OUT_MAX / 2 && hub_link_waiting(sl->l))
		hub_link_writable(sl->l);
}

static int reserve_out(struct soft_link *sl, size_t need)
{
	if (sl->olen + need <= sl->ocap)
		return 0;
	if (sl->ooff) {
		memmove(sl->out, sl->out + sl->ooff, sl->olen - sl->ooff);
		sl->olen -= sl->ooff;
		sl->ooff = 0;
	}
	if (sl->olen + need > sl->ocap) {
		size_t cap = sl->ocap ? sl->ocap : 65536;
		uint8_t *n;
		while (cap < sl->olen + need)
			cap *= 2;
		n = realloc(sl->out, cap);
		if (!n)
			return -ENOMEM;
		sl->out = n;
		sl->ocap = cap;
	}
	return 0;
}

static int pend_push(struct soft_link *sl, const struct xwc *wc)
{
	if (sl->pw_n == sl->pw_cap) {
		uint32_t cap = sl->pw_cap ? sl->pw_cap * 2 : 256;
		struct soft_pend *n = malloc(cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (uint32_t i = 0; i < sl->pw_n; i++)
			n[i] = sl->pw[(sl->pw_head + i) % sl->pw_cap];
		free(sl->pw);
		sl->pw = n;
		sl->pw_head = 0;
		sl->pw_cap = cap;
	}
	sl->pw[(sl->pw_head + sl->pw_n) % sl->pw_cap] = (struct soft_pend){.end = sl->queued, .wc = *wc};
	sl->pw_n++;
	return 0;
}

/* Queue one frame; a completion follows when it has left, if wc is given. */
static int post_frame(struct soft_link *sl, const struct wire_frame *f, const struct iovec *iov,
		      int iovcnt, const struct xwc *wc)
{
	size_t len = WIRE_FRAME_LEN + f->len;
	if (sl->closed)
		return -ENOTCONN;
	if (reserve_out(sl, len) < 0)
		return -ENOMEM;
	wire_frame_encode(f, sl->out + sl->olen);
	sl->olen += WIRE_FRAME_LEN;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(sl->out + sl->olen, iov[i].iov_base, iov[i].iov_len);
		sl->olen += iov[i].iov_len;
	}
	sl->queued += len;
	if (wc && pend_push(sl, wc) < 0)
		return -ENOMEM;
	if (!sl->connecting)
		flush(sl);
	return 0;
}

static int soft_post_write_imm(struct xlink *l, uint64_t wr_id, const struct iovec *iov, int iovcnt,
			       uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct soft_link *sl = SL(l);
	struct wire_frame f = {.type = FR_WRITE_IMM, .imm = imm, .rkey = rkey, .raddr = raddr};
	struct xwc wc = {.wr_id = wr_id, .op = XWC_WRITE, .link = l};
	(void)lkey;
	for (int i = 0; i < iovcnt; i++)
		f.len += iov[i].iov_len;
	if (sl->olen - sl->ooff + f.len > SOFT_OUT_MAX)
		return -EAGAIN;
	wc.byte_len = f.len;
	return post_frame(sl, &f, iov, iovcnt, &wc);
}

static int soft_post_send(struct xlink *l, uint64_t wr_id, const void *buf, uint32_t len)
{
	struct wire_frame f = {.type = FR_SEND, .len = len};
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct xwc wc = {.wr_id = wr_id, .op = XWC_SEND, .byte_len = len, .link = l};
	return post_frame(SL(l), &f, &iov, 1, &wc);
}

static void send_hello(struct soft_link *sl)
{
	struct wire_hello hh = {.magic = WIRE_MAGIC, .version = WIRE_VERSION,
				.node_id = hub_node_id(sl->sx->h), .max_write = WIRE_MAX_WRITE};
	uint8_t b[WIRE_HELLO_LEN];
	struct wire_frame f = {.type = FR_HELLO, .len = WIRE_HELLO_LEN};
	struct iovec iov = {.iov_base = b, .iov_len = sizeof(b)};
	wire_hello_encode(&hh, b);
	post_frame(sl, &f, &iov, 1, NULL);
}

static void parse(struct soft_link *sl)
{
	size_t off = 0;
	struct hub *h = sl->sx->h;
	sl->need_parse = 0;
	while (!sl->closed && sl->ilen - off >= WIRE_FRAME_LEN) {
		struct wire_frame f;
		const char *why;
		const uint8_t *p = sl->in + off, *pay;
		if (wire_frame_decode(p, &f, &why) < 0) {
			hub_count_malformed(h);
			fail(sl, why);
			return;
		}
		if (sl->ilen - off < WIRE_FRAME_LEN + (size_t)f.len)
			break;
		pay = p + WIRE_FRAME_LEN;
		if (!sl->hello_in) {
			struct wire_hello hh;
			if (f.type != FR_HELLO) {
				hub_count_malformed(h);
				fail(sl, "first frame is not HELLO");
				return;
			}
			if (wire_hello_decode(pay, f.len, &hh, &why) < 0) {
				hub_count_malformed(h);
				fail(sl, why);
				return;
			}
			sl->hello_in = 1;
			hub_link_up(sl->l, hh.node_id);
		} else if (f.type == FR_HELLO) {
			hub_count_malformed(h);
			fail(sl, "second HELLO");
			return;
		} else if (f.type == FR_WRITE_IMM) {
			struct iovec iov[2];
			int n = hub_rx_target(sl->l, f.imm, f.raddr, f.len, iov);
			if (sl->closed)
				return;
			if (n < 0) {
				hub_count_malformed(h);
				fail(sl, "write outside its socket's ring window");
				return;
			}
			if (n > 0) {
				const uint8_t *src = pay;
				struct xwc wc = {.op = XWC_RECV_IMM, .imm = f.imm, .byte_len = f.len,
						 .link = sl->l};
				for (int i = 0; i < n; i++) {
					memcpy(iov[i].iov_base, src, iov[i].iov_len);
					src += iov[i].iov_len;
				}
				cq_push(sl->sx, &wc);
			}
		} else { /* FR_SEND */
			struct soft_recv *r;
			struct xwc wc = {.op = XWC_RECV, .byte_len = f.len, .link = sl->l};
			if (!sl->rq_n) {
				sl->stalled = 1; /* receiver not ready: wait for post_recv */
				break;
			}
			r = &sl->rq[sl->rq_head];
			sl->rq_head = (sl->rq_head + 1) % sl->rq_cap;
			sl->rq_n--;
			memcpy(r->buf, pay, f.len < r->len ? f.len : r->len);
			wc.wr_id = r->wr_id;
			cq_push(sl->sx, &wc);
		}
		off += WIRE_FRAME_LEN + f.len;
	}
	if (sl->closed)
		return;
	if (off) {
		memmove(sl->in, sl->in + off, sl->ilen - off);
		sl->ilen -= off;
	}
	set_events(sl);
}

static void on_readable(struct soft_link *sl)
{
	ssize_t n;
	if (sl->icap - sl->ilen < SOFT_IN_CHUNK) {
		size_t cap = sl->ilen + SOFT_IN_CHUNK + WIRE_FRAME_LEN + WIRE_MAX_WRITE;
		uint8_t *b = realloc(sl->in, cap);
		if (!b)
			return;
		sl->in = b;
		sl->icap = cap;
	}
	n = recv(sl->fd, sl->in + sl->ilen, sl->icap - sl->ilen, MSG_DONTWAIT);
	if (n == 0) {
		fail(sl, "peer closed the link");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			fail(sl, strerror(errno));
		return;
	}
	sl->ilen += n;
	parse(sl);
}

static void link_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct soft_link *sl = (struct soft_link *)ev;
	(void)h;
	if (sl->closed)
		return;
	if (sl->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t el = sizeof(err);
		socklen_t al = sizeof(sl->l->local_addr);
		getsockopt(sl->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			fail(sl, strerror(err));
			return;
		}
		sl->connecting = 0;
		getsockname(sl->fd, &sl->l->local_addr.sa, &al);
		wire_addr_unmap(&sl->l->local_addr);
		flush(sl); /* the HELLO queued at connect */
		return;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		on_readable(sl);
	if (!sl->closed && (events & EPOLLOUT))
		flush(sl);
}

static struct soft_link *sl_new(struct soft *sx, struct xlink *l, int fd)
{
	struct soft_link *sl = calloc(1, sizeof(*sl));
	int one = 1;
	if (!sl)
		return NULL;
	sl->sx = sx;
	sl->l = l;
	sl->fd = fd;
	sl->ev.fn = link_event;
	l->xpriv = sl;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a peer node that vanishes (its hub killed, its network cut) is
	 * noticed within about 10 s, idle or not: its connections are reset */
	{
		int idle = 5, intvl = 1, cnt = 3;
		unsigned tmo = SOFT_PEER_TIMEOUT_MS;
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &tmo, sizeof(tmo));
	}
	sl->next = sx->links;
	sx->links = sl;
	return sl;
}

static int soft_link_connect(struct xport *xp, struct xlink *l, const union sockaddr_any *peer)
{
	struct soft *sx = xp->priv;
	socklen_t len = peer->sa.sa_family == AF_INET6 ? sizeof(peer->in6) : sizeof(peer->in);
	int fd = socket(peer->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct soft_link *sl;
	if (fd < 0)
		return -1;
	sl = sl_new(sx, l, fd);
	if (!sl) {
		close(fd);
		return -1;
	}
	if (hub_bind_addr(sx->h)->sa.sa_family == peer->sa.sa_family) {
		union sockaddr_any b = *hub_bind_addr(sx->h); /* port 0: any */
		bind(fd, &b.sa, b.sa.sa_family == AF_INET6 ? sizeof(b.in6) : sizeof(b.in));
	}
	sl->connecting = 1;
	sl->events = EPOLLOUT;
	if (hub_watch(sx->h, fd, EPOLLOUT, &sl->ev) < 0)
		return -1;
	if (connect(fd, &peer->sa, len) < 0 && errno != EINPROGRESS)
		return -1;
	send_hello(sl);
	return 0;
}

static void soft_link_close(struct xlink *l)
{
	struct soft_link *sl = SL(l), **pp;
	struct soft *sx;
	uint32_t k = 0;
	if (!sl || sl->closed)
		return;
	sx = sl->sx;
	sl->closed = 1;
	hub_unwatch(sx->h, sl->fd);
	close(sl->fd);
	for (pp = &sx->links; *pp; pp = &(*pp)->next)
		if (*pp == sl) {
			*pp = sl->next;
			break;
		}
	/* completions of a closed link are flushed, as verbs flushes a QP */
	for (uint32_t i = 0; i < sx->cq_n; i++)
		if (sx->cq[sx->cq_head + i].link != l)
			sx->cq[sx->cq_head + k++] = sx->cq[sx->cq_head + i];
	sx->cq_n = k;
	free(sl->out);
	free(sl->in);
	free(sl->pw);
	free(sl->rq);
	hub_defer_free(sx->h, sl);
	l->xpriv = NULL;
}

static int soft_post_recv(struct xlink *l, uint64_t wr_id, void *buf, uint32_t len)
{
	struct soft_link *sl = SL(l);
	if (!sl || sl->closed)
		return -ENOTCONN;
	if (sl->rq_n == sl->rq_cap) {
		uint32_t cap = sl->rq_cap ? sl->rq_cap * 2 : HUB_CTL_RECVS;
		struct soft_recv *n = malloc(cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (uint32_t i = 0; i < sl->rq_n; i++)
			n[i] = sl->rq[(sl->rq_head + i) % sl->rq_cap];
		free(sl->rq);
		sl->rq = n;
		sl->rq_head = 0;
		sl->rq_cap = cap;
	}
	sl->rq[(sl->rq_head + sl->rq_n) % sl->rq_cap] = (struct soft_recv){wr_id, buf, len};
	sl->rq_n++;
	if (sl->stalled) {
		sl->stalled = 0;
		sl->need_parse = 1;
	}
	return 0;
}

static int soft_poll_cq(struct xport *xp, struct xwc *wc, int max)
{
	struct soft *sx = xp->priv;
	int n = 0;
	for (struct soft_link *sl = sx->links, *next; sl; sl = next) {
		next = sl->next;
		if (sl->need_parse && !sl->closed)
			parse(sl);
	}
	while (n < max && sx->cq_n) {
		wc[n++] = sx->cq[sx->cq_head++];
		sx->cq_n--;
	}
	if (!sx->cq_n)
		sx->cq_head = 0;
	return n;
}

static void soft_accept(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct soft *sx = (struct soft *)((char *)ev - offsetof(struct soft, lev));
	(void)events;
	for (;;) {
		union sockaddr_any peer, local;
		socklen_t pl = sizeof(peer), ll = sizeof(local);
		struct soft_link *sl;
		struct xlink *l;
		int fd = accept4(sx->lfd, &peer.sa, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		getsockname(fd, &local.sa, &ll);
		wire_addr_unmap(&peer);
		wire_addr_unmap(&local);
		l = hub_link_accepted(h, sx->xp, &peer, &local);
		if (!l) {
			close(fd);
			continue;
		}
		sl = sl_new(sx, l, fd);
		if (!sl) {
			close(fd);
			hub_link_fail(l, "out of memory");
			continue;
		}
		sl->events = EPOLLIN | EPOLLRDHUP;
		hub_watch(h, fd, sl->events, &sl->ev);
		send_hello(sl);
	}
}

static int soft_init(struct xport *xp, struct hub *h, uint16_t port)
{
	struct soft *sx = calloc(1, sizeof(*sx));
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
	int one = 1, zero = 0;
	if (!sx)
		return -1;
	xp->priv = sx;
	xp->hub = h;
	sx->h = h;
	sx->xp = xp;
	if (hub_bind_addr(h)->sa.sa_family) {
		/* one address only: several hubs may share a namespace */
		union sockaddr_any b = *hub_bind_addr(h);
		socklen_t bl = b.sa.sa_family == AF_INET6 ? sizeof(b.in6) : sizeof(b.in);
		if (b.sa.sa_family == AF_INET6)
			b.in6.sin6_port = htons(port);
		else
			b.in.sin_port = htons(port);
		sx->lfd = socket(b.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (sx->lfd < 0)
			return -1;
		setsockopt(sx->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(sx->lfd, &b.sa, bl) < 0)
			return -1;
	} else {
		sx->lfd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	}
	if (sx->lfd >= 0 && !hub_bind_addr(h)->sa.sa_family) {
		setsockopt(sx->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(sx->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(sx->lfd, (struct sockaddr *)&a6, sizeof(a6)) < 0) {
			close(sx->lfd);
			sx->lfd = -1;
		}
	}
	if (sx->lfd < 0) {
		sx->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (sx->lfd < 0)
			return -1;
		setsockopt(sx->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(sx->lfd, (struct sockaddr *)&a4, sizeof(a4)) < 0)
			return -1;
	}
	if (listen(sx->lfd, 512) < 0)
		return -1;
	sx->lev.fn = soft_accept;
	return hub_watch(h, sx->lfd, EPOLLIN, &sx->lev);
}

static void soft_fini(struct xport *xp)
{
	struct soft *sx = xp->priv;
	if (sx) {
		close(sx->lfd);
		free(sx->cq);
		free(sx);
	}
}

static int soft_reg_mr(struct xport *xp, void *addr, size_t len, int remote, struct xmr *mr)
{
	/* nothing to pin: the hub checks every placement itself (hub_rx_target) */
	(void)xp;
	(void)addr;
	(void)len;
	(void)remote;
	mr->handle = NULL;
	mr->lkey = mr->rkey = 0;
	return 0;
}

static void soft_dereg_mr(struct xport *xp, struct xmr *mr)
{
	(void)xp;
	(void)mr;
}

const struct xport_ops xport_soft_ops = {
	.name = "soft",
	.flags = XP_POSITIONAL,
	.init = soft_init,
	.fini = soft_fini,
	.link_connect = soft_link_connect,
	.link_close = soft_link_close,
	.reg_mr = soft_reg_mr,
	.dereg_mr = soft_dereg_mr,
	.post_write_imm = soft_post_write_imm,
	.post_send = soft_post_send,
	.post_recv = soft_post_recv,
	.poll_cq = soft_poll_cq,
};
