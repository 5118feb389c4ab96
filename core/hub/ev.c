/*
 * ev.c - the hub's event-loop primitives, shared by every other file and
 * by the transports (xport_hub.h): the epoll set (watch, rewatch, unwatch),
 * frees deferred to the end of the current batch of events (a record freed
 * under a live event would be read again by its next callback), the clocks,
 * and the few facts of this hub a transport may ask for.
 */
#include "hub.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>

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

void hub_free_deferred(struct hub *h)
{
	for (uint32_t i = 0; i < h->ngarbage; i++)
		free(h->garbage[i]);
	h->ngarbage = 0;
}

uint64_t hub_now_ms(void)
{
	return sys_now_ns() / 1000000;
}

int hub_log_due(uint64_t *stamp)
{
	uint64_t now = hub_now_ms();
	if (*stamp && now - *stamp < 1000)
		return 0;
	*stamp = now;
	return 1;
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

uint64_t hub_node_id(const struct hub *h)
{
	return h->node_id;
}

uint32_t hub_link_timeout_ms(const struct hub *h)
{
	return h->link_timeout_ms ? h->link_timeout_ms : HUB_LINK_TIMEOUT_S * 1000u;
}

const char *hub_link_congestion(const struct hub *h)
{
	return h->link_cc;
}

const union sockaddr_any *hub_bind_addr(const struct hub *h)
{
	return &h->bind_addr;
}

int hub_kept_listener(struct hub *h)
{
	int fd = h->kept_lfd;
	h->kept_lfd = -1;
	if (fd >= 0)
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

void hub_count_malformed(struct hub *h)
{
	h->malformed++;
}
