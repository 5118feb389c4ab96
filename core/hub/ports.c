/*
 * ports.c - local ports of the connections made here, shared across
 * destinations as the kernel shares them.
 *
 * A socket that connects without a bound port gets one from the hub, not
 * from the kernel: a port of the node's ephemeral range (its
 * ip_local_port_range) that no other connection of this hub uses towards
 * the same destination, so one port serves many destinations and a
 * client holds as many connections as kernel TCP would.  A socket the
 * program bound keeps its own port (the kernel reserved it); a second
 * connection with the same four addresses is refused, EADDRNOTAVAIL, as
 * the kernel refuses it, unless the program closed the first (the kernel
 * gave its port out again: a closed connection lingering in the hub does
 * not hold it).  The four-tuples in use are a hash set of socket
 * ids (open addressing, linear probing, backward-shift deletion, at most
 * half full), so a pick costs the same whatever the number of
 * connections; the candidates start after the last port given, skipping
 * the ports of listeners and accepted connections of this hub.
 */
#include "hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

/* the four addresses of s, unmapped, as a key */
struct tuple {
	uint8_t fam;
	uint8_t a[16], b[16];
	uint16_t pa, pb;
};

static void tuple_of(const struct hsock *s, struct tuple *t)
{
	union sockaddr_any l = s->local, p = s->peer_addr;
	wire_addr_unmap(&l);
	wire_addr_unmap(&p);
	memset(t, 0, sizeof(*t));
	t->fam = (uint8_t)p.sa.sa_family;
	if (p.sa.sa_family == AF_INET6) {
		memcpy(t->a, &l.in6.sin6_addr, 16);
		memcpy(t->b, &p.in6.sin6_addr, 16);
	} else {
		memcpy(t->a, &l.in.sin_addr, 4);
		memcpy(t->b, &p.in.sin_addr, 4);
	}
	t->pa = addr_port(&l);
	t->pb = addr_port(&p);
}

static uint32_t tuple_hash(const struct tuple *t)
{
	const uint8_t *b = (const uint8_t *)t;
	uint32_t x = 2166136261u;
	for (size_t i = 0; i < sizeof(*t); i++)
		x = (x ^ b[i]) * 16777619u;
	return x;
}

/* the set's index of t: where it is, or the empty place where it goes */
static uint32_t ports_find(struct hub *h, const struct tuple *t)
{
	uint32_t m = h->ports_cap - 1, i = tuple_hash(t) & m;
	struct tuple u;
	for (; h->ports[i]; i = (i + 1) & m) {
		tuple_of(h->socks[h->ports[i]], &u);
		if (!memcmp(&u, t, sizeof(u)))
			break;
	}
	return i;
}

static int ports_grow(struct hub *h)
{
	uint32_t cap = h->ports_cap ? h->ports_cap * 2 : 1024, *old = h->ports, ocap = h->ports_cap;
	uint32_t *n = calloc(cap, sizeof(*n));
	struct tuple t;
	if (!n)
		return -ENOMEM;
	h->ports = n;
	h->ports_cap = cap;
	for (uint32_t i = 0; i < ocap; i++)
		if (old[i]) {
			tuple_of(h->socks[old[i]], &t);
			h->ports[ports_find(h, &t)] = old[i];
		}
	free(old);
	return 0;
}

/* The ephemeral range of the hub's network namespace, read once. */
static void ports_range(struct hub *h)
{
	FILE *f;
	unsigned lo = 32768, hi = 60999;
	if (h->port_lo)
		return;
	f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2 || lo < 1 || hi > 65535 || lo > hi)
			lo = 32768, hi = 60999;
		fclose(f);
	}
	h->port_lo = (uint16_t)lo;
	h->port_hi = (uint16_t)hi;
	h->port_next = (uint16_t)lo;
}

static int port_taken_here(struct hub *h, uint16_t port)
{
	return h->port_accepted[port] || h->port_listening[port];
}

/* s has its source address and its destination: give it a port if it has
 * none, and record its four addresses.  -EADDRNOTAVAIL when every port
 * (or its own) is in use towards that destination. */
int ports_claim(struct hub *h, struct hsock *s)
{
	struct tuple t;
	uint32_t n, i;
	if ((h->nports + 1) * 2 > h->ports_cap && ports_grow(h) < 0)
		return -ENOMEM;
	if (addr_port(&s->local)) {
		tuple_of(s, &t);
		i = ports_find(h, &t);
		if (h->ports[i]) {
			struct hsock *o = h->socks[h->ports[i]];
			if (o && o->nholders)
				return -EADDRNOTAVAIL;
			/* the kernel gave the port out again, so the program
			 * closed the connection that had it (its kernel socket
			 * held the port); the hub only waits for the peer's last
			 * word on it: the four addresses are the new one's */
			if (o)
				o->port_claimed = 0;
			h->ports[i] = s->sid;
			s->port_claimed = 1;
			return 0;
		}
	} else {
		ports_range(h);
		n = (uint32_t)(h->port_hi - h->port_lo) + 1;
		for (;; n--) {
			uint16_t p = h->port_next;
			if (!n)
				return -EADDRNOTAVAIL;
			h->port_next = p >= h->port_hi ? h->port_lo : (uint16_t)(p + 1);
			if (port_taken_here(h, p))
				continue;
			addr_set_port(&s->local, p);
			tuple_of(s, &t);
			i = ports_find(h, &t);
			if (!h->ports[i])
				break;
		}
	}
	h->ports[i] = s->sid;
	h->nports++;
	s->port_claimed = 1;
	return 0;
}

/* s goes: its four addresses are free again. */
void ports_release(struct hub *h, struct hsock *s)
{
	uint32_t m = h->ports_cap - 1, i, j;
	struct tuple t;
	if (!s->port_claimed)
		return;
	s->port_claimed = 0;
	tuple_of(s, &t);
	i = ports_find(h, &t);
	if (h->ports[i] != s->sid)
		return;
	for (j = (i + 1) & m; h->ports[j]; j = (j + 1) & m) {
		struct tuple u;
		uint32_t home;
		tuple_of(h->socks[h->ports[j]], &u);
		home = tuple_hash(&u) & m;
		if (((j - home) & m) >= ((j - i) & m)) {
			h->ports[i] = h->ports[j];
			i = j;
		}
	}
	h->ports[i] = 0;
	h->nports--;
}
