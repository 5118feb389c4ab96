/*
 * soft_conn.c - the links of the `soft` transport: the listening socket
 * on the hub's peer port, accepted and outgoing TCP connections, and the
 * events of a link's socket.
 *
 * Either side sends its HELLO first thing (queued until an outgoing
 * connection completes); the link is up when the peer's HELLO arrives
 * (soft_rx.c).  TCP keepalive and a user timeout (the hub's link
 * timeout, rshare.conf's link_timeout: 10 s unless set) make a vanished
 * peer noticed within that time, idle or not; a shorter outage is
 * ridden out by TCP itself, every byte kept.
 *
 * A link is one TCP flow for all the connections between two nodes, where
 * kernel TCP would make a flow of each.  An algorithm that paces its flow
 * (bbr: without an fq qdisc the kernel paces each flow with a timer) holds
 * them all to what one paced flow carries, about half of what an unpaced
 * one does over a veth pair here.  So a link whose algorithm (the node's
 * default) is bbr runs cubic instead, or reno where cubic is not to be had;
 * any other is kept.  rshare.conf's link_congestion names one to use
 * instead (bbr among them), or auto, this choice.  The listening socket
 * takes it too, so that an accepted link has it from its first packet: one
 * that finished its handshake under bbr keeps bbr's pacing in the kernel
 * (bbr turns it on at its start, and a switch afterwards leaves it on), and
 * paced so, the direction away from the accepting hub carried half as much.
 *
 * The link is a FIFO for every connection between the two nodes, so what
 * one connection's bulk queues on it, any other's message waits behind:
 * the link's socket keeps at most SOFT_NOTSENT_LOWAT bytes unsent and
 * receives into SOFT_RCVBUF (no autotuning to megabytes), as the hub's own
 * queue holds at most SOFT_OUT_MAX (soft.h).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "soft.h"
#include "err.h"
#include "log.h"

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
			fail_errno(sl, err);
			return;
		}
		sl->connecting = 0;
		getsockname(sl->fd, &sl->l->local_addr.sa, &al);
		wire_addr_unmap(&sl->l->local_addr);
		soft_flush(sl); /* the HELLO queued at connect */
		return;
	}
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		soft_on_readable(sl);
	if (!sl->closed && (events & EPOLLOUT))
		soft_flush(sl);
}

static int set_cc(int fd, const char *name)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name));
}

int soft_congestion(int fd, char name[16])
{
	socklen_t len = 15;
	memset(name, 0, 16);
	return getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) < 0 ? -1 : 0;
}

static void link_congestion(struct soft *sx, int fd)
{
	const char *want = hub_link_congestion(sx->h);
	char now[16];
	if (*want && strcmp(want, "auto")) {
		if (set_cc(fd, want) < 0)
			log_warn("soft link: congestion control '%s' refused (%s): the node's default stays",
				 want, strerror(errno));
		return;
	}
	if (soft_congestion(fd, now) == 0 && !strncmp(now, "bbr", 3) && set_cc(fd, "cubic") < 0)
		set_cc(fd, "reno"); /* permitted to everyone */
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
	/* what bulk may queue ahead of other connections' frames (soft.h) */
	setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &(int){SOFT_NOTSENT_LOWAT}, sizeof(int));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){SOFT_RCVBUF}, sizeof(int));
	link_congestion(sx, fd);
	/* a peer node that vanishes (its hub killed, its network cut) is
	 * noticed within the link timeout, idle or not (the user timeout
	 * decides for keepalive too): the link is lost (resume.c) */
	{
		unsigned tmo = hub_link_timeout_ms(sx->h);
		int idle = tmo >= 10000 ? 5 : tmo >= 2000 ? (int)(tmo / 2000) : 1, intvl = 1, cnt = 3;
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

int soft_link_connect(struct xport *xp, struct xlink *l, const union sockaddr_any *peer)
{
	struct soft *sx = xp->priv;
	socklen_t len = peer->sa.sa_family == AF_INET6 ? sizeof(peer->in6) : sizeof(peer->in);
	int fd = socket(peer->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct soft_link *sl;
	if (fd < 0)
		return err_neg();
	sl = sl_new(sx, l, fd);
	if (!sl) {
		int r = err_neg();
		close(fd);
		return r;
	}
	if (hub_bind_addr(sx->h)->sa.sa_family == peer->sa.sa_family) {
		union sockaddr_any b = *hub_bind_addr(sx->h); /* port 0: any */
		bind(fd, &b.sa, b.sa.sa_family == AF_INET6 ? sizeof(b.in6) : sizeof(b.in));
	}
	sl->connecting = 1;
	sl->events = EPOLLOUT;
	if (hub_watch(sx->h, fd, EPOLLOUT, &sl->ev) < 0)
		return err_neg();
	if (connect(fd, &peer->sa, len) < 0 && errno != EINPROGRESS)
		return err_neg();
	soft_send_hello(sl);
	return 0;
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
		soft_send_hello(sl);
	}
}

int soft_init(struct xport *xp, struct hub *h, uint16_t port)
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
	if ((sx->lfd = hub_kept_listener(h)) >= 0)
		goto watch; /* a restarted hub: the one before it listened already */
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
watch:
	link_congestion(sx, sx->lfd); /* what accepted links start with */
	sx->lev.fn = soft_accept;
	return hub_watch(h, sx->lfd, EPOLLIN, &sx->lev);
}
