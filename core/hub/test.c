/*
 * test.c - entry points for unit tests and fuzzers: a hub without sockets.
 *
 * hub_test_new() makes a hub with an epoll set but no unix socket and no
 * transport; the tests give it pools, processes (whose replies go nowhere),
 * links over their own fake transports, and drive it through the same
 * functions the loop calls: requests, doorbells, and the end of a batch.
 */
#include "hub.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "msg.h"
#include "tag.h"

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
	h->tx_max = ARENA_MAX_RING;
	h->rx_max = ARENA_MAX_RING;
	h->lfd = -1;
	h->spare_fd = -1;
	h->lim_pools = HUB_UID_POOLS;
	h->lim_socks = HUB_UID_SOCKETS;
	the_hub = h;
	return h;
}

struct pool *hub_test_pool(struct hub *h)
{
	return pool_new(h, getuid());
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
	pr->token = proc_token();
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
	return hub_cells(h, p) | hub_doorbells(h, p);
}

struct link *hub_test_link(struct hub *h, struct xport *xp)
{
	struct link *l = hub_link_alloc(h, xp);
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
	hub_batch_end(h);
}
