/*
 * pass.c - rshare sockets in flight from one process to another over a
 * unix socket (SCM_RIGHTS).
 *
 * A process about to pass a descriptor of an rshare socket asks its hub
 * first (MSG_PASS, the descriptor along).  The hub keeps that descriptor,
 * takes a reference on the socket for the copy in flight, and answers with
 * a token: one end of a unix socketpair whose one message names the pass
 * (its id and a random secret, struct msg_pass_name); the other end stays
 * here.  The process sends the token in its descriptor's place.  The
 * receiving process finds the token among the descriptors it got, reads
 * the name with MSG_PEEK and asks for the socket (MSG_ADOPT, request.c):
 * it holds the socket from then on, and puts the descriptor the sender
 * passed in the token's place.  Whatever becomes of the token (received,
 * never received, dropped with the unix socket it was queued on), the
 * kernel closes its last copy in the end, and the hub's end sees it: the
 * reference of the copy in flight goes then, and a socket that no process
 * took is closed as the kernel closes one whose last descriptor was lost
 * in flight.  So the kernel counts the copies, as it does for its own.
 */
#include "hub.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "msg.h"

/* its copy in flight is gone: the reference goes, the record too */
static void pass_end(struct hub *h, struct hpass *ps)
{
	struct hsock *s = h->socks[ps->sid];
	h->passes[ps->id & (HUB_PASSES_MAX - 1)] = NULL;
	h->npasses--;
	hub_unwatch(h, ps->hfd);
	close(ps->hfd);
	close(ps->ofd);
	if (s && s->gen == ps->gen && s->nholders && hsock_holders_add(s, -1) == 0)
		hsock_release(h, s, s->abort_asked);
	hub_defer_free(h, ps);
}

static void pass_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct hpass *ps = (struct hpass *)ev;
	char b[64];
	/* the token's end writes nothing: whatever comes is its last close */
	if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR) || recv(ps->hfd, b, sizeof(b), MSG_DONTWAIT) >= 0)
		pass_end(h, ps);
}

int hpass_new(struct hub *h, struct hsock *s, uid_t uid, int ofd)
{
	struct hpass *ps;
	struct msg_pass_name n = {.magic = MSG_PASS_MAGIC};
	uint32_t at = h->pass_next;
	int sv[2];
	if (h->npasses >= HUB_PASSES_MAX)
		return -ENOBUFS;
	while (h->passes[at & (HUB_PASSES_MAX - 1)])
		at++;
	at &= HUB_PASSES_MAX - 1;
	h->pass_next = at + 1;
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
		int e = errno;
		free(ps);
		return -e;
	}
	/* its place in the table, and in the bits above how often it was used */
	ps->id = (++h->pass_seq << HUB_PASSES_SHIFT) | at;
	ps->secret = proc_token();
	ps->sid = s->sid;
	ps->gen = s->gen;
	ps->uid = uid;
	ps->hfd = sv[0];
	ps->ofd = ofd;
	ps->ev.fn = pass_event;
	n.id = ps->id;
	n.family = s->local.sa.sa_family == AF_INET6 ? AF_INET6 : AF_INET;
	n.secret = ps->secret;
	if (send(sv[0], &n, sizeof(n), MSG_NOSIGNAL) != (ssize_t)sizeof(n) ||
	    hub_watch(h, sv[0], EPOLLRDHUP, &ps->ev) < 0) {
		close(sv[0]);
		close(sv[1]);
		free(ps);
		return -ENOBUFS;
	}
	hsock_holders_add(s, 1); /* the copy in flight */
	h->passes[at] = ps;
	h->npasses++;
	return sv[1];
}

struct hpass *hpass_find(struct hub *h, uint32_t id, uint64_t secret)
{
	struct hpass *ps = h->passes[id & (HUB_PASSES_MAX - 1)];
	return ps && ps->id == id && ps->secret == secret ? ps : NULL;
}
