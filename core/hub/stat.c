/*
 * stat.c - what `rshare stat` prints: the hub's links, pools,
 * processes and sockets, as text for people or as JSON for scripts.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hub.h"
#include "tag.h"

struct sb {
	char *b;
	size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sb *s, const char *fmt, ...)
{
	va_list ap;
	int n;
	for (;;) {
		size_t room = s->cap - s->len;
		va_start(ap, fmt);
		n = vsnprintf(s->b ? s->b + s->len : NULL, s->b ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (s->b && (size_t)n < room) {
			s->len += n;
			return;
		}
		{
			size_t cap = s->cap ? s->cap * 2 : 4096;
			char *nb;
			while (cap < s->len + n + 1)
				cap *= 2;
			nb = realloc(s->b, cap);
			if (!nb)
				return;
			s->b = nb;
			s->cap = cap;
		}
	}
}

static const char *addr_str(const union sockaddr_any *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (a->sa.sa_family == AF_INET) {
		inet_ntop(AF_INET, &a->in.sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->in.sin_port));
	} else if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
	} else {
		snprintf(buf, len, "-");
	}
	return buf;
}

static uint32_t keepers_alive(const struct hub *h)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < h->nkeepers; i++)
		n += !h->keepers[i]->dead;
	return n;
}

static const char *state_str(enum hsock_state s)
{
	switch (s) {
	case HS_CONNECTING: return "connecting";
	case HS_ESTABLISHED: return "established";
	case HS_LISTENING: return "listening";
	case HS_FALLBACK: return "fallback";
	case HS_CLOSED: return "closed";
	case HS_LINGER: return "linger";
	}
	return "?";
}

static const char *link_state(enum link_state s)
{
	return s == LINK_UP ? "up" : s == LINK_CONNECTING ? "connecting" : "down";
}

static uint32_t nsegs(struct hub *h)
{
	uint32_t n = 0;
	for (struct pairseg *g = h->segs; g; g = g->next)
		n++;
	return n;
}

/* Bytes sent (tx 1) or received: a same-node connection's are its rings'
 * positions (the processes' counters: figures, not facts the hub relies on). */
static uint64_t sock_bytes(struct hsock *x, int tx)
{
	if (x->lp)
		return ring_load(&hsock_ring(x, tx)->tail);
	return tx ? x->bytes_tx : x->bytes_rx;
}

/* registered bytes of free rings, kept for the next ones (pool.c) */
static uint64_t reg_idle(const struct hub *h)
{
	uint64_t n = 0;
	for (const struct pool *p = h->pools; p; p = p->next)
		n += p->mr_idle_bytes;
	return n;
}

/* rshared's pid: the warden's (warden.c), else the hub's own */
static pid_t rshared_pid(const struct hub *h)
{
	return h->warden_pid ? h->warden_pid : getpid();
}

/* the hub and its counters */
static void json_head(struct sb *s, struct hub *h)
{
	sb_printf(s, "{\"node\":\"%016llx\",\"pid\":%d,\"hub_pid\":%d,\"port\":%u,", (unsigned long long)h->node_id,
		  (int)rshared_pid(h), (int)getpid(), h->port);
	sb_printf(s, "\"counters\":{\"fallback_connects\":%llu,\"stale_dropped\":%llu,"
		  "\"links_dropped\":%llu,\"malformed\":%llu,\"local_connects\":%llu,\"early_connects\":%llu,"
		  "\"handoffs\":%llu,\"handoff_ns\":%llu,\"route_ns\":%llu,\"route_wake_ns\":%llu,\"wake_ns\":%llu,"
		  "\"posts\":%llu,\"post_ns\":%llu,\"pair_segments\":%u,\"spin_us\":%llu,"
		  "\"rx_rings_grown\":%llu,\"rx_rings_shrunk\":%llu,\"tx_rings_grown\":%llu,\"tx_rings_grown_to_fit\":%llu,\"tx_rings_shrunk\":%llu,"
		  "\"procs_refused\":%llu,\"limit_refused\":%llu,\"rings_punched\":%llu,\"registered_bytes\":%llu,\"registered_idle_bytes\":%llu,"
		  "\"readiness_held\":%u,\"readiness_kept\":%u,\"keepers\":%u,\"passes_in_flight\":%u,\"passes_taken\":%u,"
		  "\"links_lost\":%llu,\"conns_resumed\":%llu,\"conns_expired\":%llu,\"conns_waiting\":%u,"
		  "\"restarts\":%u,\"restarts_refused\":%u,\"restart_refused\":\"%s\","
		  "\"successions\":%u,\"succession_eintr\":%u,\"cell_requests\":%llu,\"readiness_with_answer\":%llu,"
		  "\"readiness_asked\":%llu,\"placed_tails\":%llu,"
		  "\"sleeps\":%llu},",
		  (unsigned long long)h->fallback_connects, (unsigned long long)h->stale_dropped,
		  (unsigned long long)h->links_dropped, (unsigned long long)h->malformed,
		  (unsigned long long)h->local_connects, (unsigned long long)h->early_connects,
		  (unsigned long long)h->handoffs,
		  (unsigned long long)h->handoff_ns, (unsigned long long)h->route_ns,
		  (unsigned long long)h->route_wake_ns, (unsigned long long)h->wake_ns, (unsigned long long)h->posts,
		  (unsigned long long)h->post_ns, nsegs(h),
		  (unsigned long long)(h->spin_ns / 1000), (unsigned long long)h->rx_grown,
		  (unsigned long long)h->rx_shrunk, (unsigned long long)h->tx_grown,
		  (unsigned long long)h->tx_fit_grown, (unsigned long long)h->tx_shrunk,
		  (unsigned long long)h->procs_refused, (unsigned long long)h->limit_refused,
		  (unsigned long long)h->rings_punched, (unsigned long long)h->reg_bytes,
		  (unsigned long long)reg_idle(h), h->keep_local, h->keep_kept, keepers_alive(h), h->npasses,
		  h->passes_taken, (unsigned long long)h->links_lost, (unsigned long long)h->conns_resumed,
		  (unsigned long long)h->conns_expired, h->nsuspended, h->restarts, h->restarts_refused,
		  h->restart_refused ? h->restart_refused : "", h->successions, h->succession_eintr,
		  (unsigned long long)h->cell_requests, (unsigned long long)h->ready_with_answer,
		  (unsigned long long)h->ready_asked, (unsigned long long)h->placed_sent,
		  (unsigned long long)h->sleeps);
}

/* "links": one object each */
static void json_links(struct sb *s, struct hub *h)
{
	char a[80], b[80];
	int first;
	sb_printf(s, "\"links\":[");
	first = 1;
	for (struct link *l = h->links; l; l = l->next, first = 0) {
		struct xlink_info xi;
		memset(&xi, 0, sizeof(xi));
		if (l->x.xp->ops->link_info)
			l->x.xp->ops->link_info(&l->x, &xi);
		sb_printf(s, "%s{\"id\":%u,\"peer_node\":\"%016llx\",\"peer\":\"%s\",\"local\":\"%s\","
			  "\"transport\":\"%s\",\"state\":\"%s\",\"direction\":\"%s\",\"connections\":%u,"
			  "\"connections_total\":%llu,\"bytes_tx\":%llu,\"bytes_rx\":%llu,"
			  "\"msgs_tx\":%llu,\"msgs_rx\":%llu,\"cq_send\":%llu,\"cq_recv\":%llu,"
			  "\"device\":\"%s\",\"device_port\":%d,\"qpn\":%u,\"bytes_rx_direct\":%llu,"
			  "\"congestion\":\"%s\"}",
			  first ? "" : ",", l->x.id, (unsigned long long)l->x.peer_node,
			  addr_str(&l->x.peer_addr, a, sizeof(a)), addr_str(&l->x.local_addr, b, sizeof(b)),
			  l->x.xp->ops->name, link_state(l->state), l->x.outgoing ? "out" : "in", l->conns,
			  (unsigned long long)l->conns_total, (unsigned long long)l->bytes_tx,
			  (unsigned long long)l->bytes_rx, (unsigned long long)l->msgs_tx,
			  (unsigned long long)l->msgs_rx, (unsigned long long)l->cq_send,
			  (unsigned long long)l->cq_recv, xi.dev, xi.dev_port, xi.qpn, (unsigned long long)xi.rx_direct,
			  xi.congestion);
	}
}

/* "pools" */
static void json_pools(struct sb *s, struct hub *h)
{
	int first;
	sb_printf(s, "],\"pools\":[");
	first = 1;
	for (struct pool *p = h->pools; p; p = p->next, first = 0)
		sb_printf(s, "%s{\"id\":%llu,\"processes\":%u,\"sockets\":%u,\"ring_bytes\":%llu}",
			  first ? "" : ",", (unsigned long long)p->id, p->nprocs, p->nsocks,
			  (unsigned long long)arena_in_use(p->rx_alloc) + arena_in_use(p->tx_alloc));
}

/* "processes": those attached, with the sockets they hold */
static void json_procs(struct sb *s, struct hub *h)
{
	int first;
	sb_printf(s, "],\"processes\":[");
	first = 1;
	for (struct proc *pr = h->procs; pr; pr = pr->next) {
		if (!pr->pool)
			continue;
		sb_printf(s, "%s{\"pid\":%d,\"pool\":%llu,\"sockets\":[", first ? "" : ",", (int)pr->pid,
			  (unsigned long long)pr->pool->id);
		for (uint32_t i = 0; i < pr->nsocks; i++)
			sb_printf(s, "%s%u", i ? "," : "", pr->socks[i]);
		sb_printf(s, "]}");
		first = 0;
	}
}

/* a socket's stream positions and the flags of its flow, for a stall:
 * where each ring stands, what the credit allows, what is under way */
static void json_flow(struct sb *s, const struct hsock *x)
{
	const struct arena_slot *as = x->as;
	sb_printf(s, "\"flow\":{\"nholders\":%u,\"queued\":%u,\"closing\":%u,\"fin\":\"%u%u%u%u\","
		  "\"tx_posted\":%llu,\"tx_done\":%llu,\"peer_head\":%llu,\"peer_ring\":%u,"
		  "\"peer_next\":%u,\"peer_next_ring\":%u,\"rx_tail\":%llu,\"rx_expect\":%llu,"
		  "\"credit_sent\":%llu,\"rx_offered\":%u,\"rx_switch\":%u,\"rx_limited\":%u,"
		  "\"rx_next_size\":%llu,\"rx_switch_at\":%llu,\"rx_room\":%llu,\"on_txwait\":%u,"
		  "\"tx_watch\":%u,\"reset_after_tx\":%u,\"suspended\":%u,\"resuming\":%u",
		  x->nholders, x->queued, x->closing, x->fin_pending, x->fin_sent, x->fin_done, x->rx_fin,
		  (unsigned long long)x->tx_posted, (unsigned long long)x->tx_done,
		  (unsigned long long)x->peer_head, x->peer_ring, x->peer_next, x->peer_next_ring,
		  (unsigned long long)x->rx_tail, (unsigned long long)x->rx_expect,
		  (unsigned long long)x->credit_sent, x->rx_offered, x->rx_switch, x->rx_limited,
		  (unsigned long long)x->rx_next_size, (unsigned long long)x->rx_switch_at,
		  (unsigned long long)x->rx_room, x->on_txwait, x->tx_watch, x->reset_after_tx, x->suspended,
		  x->resuming);
	if (as)
		sb_printf(s, ",\"slot_state\":%u,\"slot_flags\":%u,\"rx_head\":%llu,\"rx_tail_pub\":%llu,"
			  "\"rx_size\":%llu,\"tx_head\":%llu,\"tx_tail\":%llu,\"tx_size\":%llu,"
			  "\"rx_sig\":%u,\"tx_blk\":%u,\"in_hold\":\"%u%u%u%u\",\"sleepers\":[%u,%u,%u]",
			  atomic_load(&as->state), atomic_load(&as->flags),
			  (unsigned long long)ring_load(&as->rx.head), (unsigned long long)ring_load(&as->rx.tail),
			  (unsigned long long)as->rx.size, (unsigned long long)ring_load(&as->tx.head),
			  (unsigned long long)ring_load(&as->tx.tail), (unsigned long long)as->tx.size,
			  atomic_load(&as->rx_sig), atomic_load(&as->tx_blk), atomic_load(&as->rx_in),
			  atomic_load(&as->rx_hold), atomic_load(&as->tx_in), atomic_load(&as->tx_hold),
			  atomic_load(&as->waiters), atomic_load(&as->rx_waiters), atomic_load(&as->tx_waiters));
	sb_printf(s, "},");
}

/* "sockets", with the pids of their holders */
static void json_socks(struct sb *s, struct hub *h)
{
	char a[80], b[80];
	int first;
	sb_printf(s, "],\"sockets\":[");
	first = 1;
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *x = h->socks[sid];
		int f2 = 1;
		if (!x)
			continue;
		sb_printf(s, "%s{\"sid\":%u,\"gen\":%u,\"pool\":%llu,\"slot\":%u,\"state\":\"%s\","
			  "\"link\":%u,\"peer_sid\":%u,\"local\":\"%s\",\"peer\":\"%s\","
			  "\"bytes_tx\":%llu,\"bytes_rx\":%llu,\"cq_send\":%llu,\"cq_recv\":%llu,"
			  "\"rx_ring\":%llu,\"tx_ring\":%llu,\"same_node\":%s,",
			  first ? "" : ",", sid, x->gen, x->pool ? (unsigned long long)x->pool->id : 0ull,
			  x->slot, state_str(x->state), x->link ? x->link->x.id : 0,
			  x->peer ? tag_imm_sid(x->peer) : 0, addr_str(&x->local, a, sizeof(a)),
			  addr_str(&x->peer_addr, b, sizeof(b)), (unsigned long long)sock_bytes(x, 1),
			  (unsigned long long)sock_bytes(x, 0), (unsigned long long)x->cq_send,
			  (unsigned long long)x->cq_recv, (unsigned long long)x->rx_size,
			  (unsigned long long)x->tx_size, x->lp ? "true" : "false");
		json_flow(s, x);
		sb_printf(s, "\"holders\":[");
		for (struct proc *pr = h->procs; pr; pr = pr->next)
			if (proc_holds(pr, sid)) {
				sb_printf(s, "%s%d", f2 ? "" : ",", (int)pr->pid);
				f2 = 0;
			}
		sb_printf(s, "]}");
		first = 0;
	}
}

/* the hub, its counters and the hand-off times */
static void text_head(struct sb *s, struct hub *h)
{
	sb_printf(s, "hub: node %016llx pid %d (hub process %d) port %u\n", (unsigned long long)h->node_id,
		  (int)rshared_pid(h), (int)getpid(), h->port);
	sb_printf(s, "counters: fallback_connects %llu stale_dropped %llu links_dropped %llu "
		  "malformed %llu local_connects %llu early_connects %llu pair_segments %u\n",
		  (unsigned long long)h->fallback_connects, (unsigned long long)h->stale_dropped,
		  (unsigned long long)h->links_dropped, (unsigned long long)h->malformed,
		  (unsigned long long)h->local_connects, (unsigned long long)h->early_connects, nsegs(h));
	sb_printf(s, "outages: links lost %llu, connections resumed %llu, expired %llu, waiting %u\n",
		  (unsigned long long)h->links_lost, (unsigned long long)h->conns_resumed,
		  (unsigned long long)h->conns_expired, h->nsuspended);
	sb_printf(s, "restarts: %u, refused %u%s%s; hubs that took over from one that died: %u\n", h->restarts,
		  h->restarts_refused, h->restart_refused ? ": " : "", h->restart_refused ? h->restart_refused : "",
		  h->successions);
	sb_printf(s, "rings: receive grown %llu shrunk %llu, send grown %llu (%llu of them same-node, to take a write whole) "
		  "shrunk %llu, %llu bytes registered (%llu of them kept for free rings)\n",
		  (unsigned long long)h->rx_grown, (unsigned long long)h->rx_shrunk, (unsigned long long)h->tx_grown,
		  (unsigned long long)h->tx_fit_grown, (unsigned long long)h->tx_shrunk, (unsigned long long)h->reg_bytes,
		  (unsigned long long)reg_idle(h));
	sb_printf(s, "refused: %llu processes (no descriptor left), %llu requests over a limit\n",
		  (unsigned long long)h->procs_refused, (unsigned long long)h->limit_refused);
	sb_printf(s, "requests: %llu answered through request cells\n", (unsigned long long)h->cell_requests);
	sb_printf(s, "readiness descriptors: %llu with a connect's or accept's answer, %llu asked for\n",
		  (unsigned long long)h->ready_with_answer, (unsigned long long)h->ready_asked);
	sb_printf(s, "placed tails: %llu written to peers' readers\n", (unsigned long long)h->placed_sent);
	sb_printf(s, "hand-off: %llu completions routed to their owner, mean %llu ns from poll to wake-up, "
		  "%llu ns of routing each (%llu ns of it system calls that woke the owner)\n",
		  (unsigned long long)h->handoffs, (unsigned long long)(h->handoffs ? h->handoff_ns / h->handoffs : 0),
		  (unsigned long long)(h->handoffs ? h->route_ns / h->handoffs : 0),
		  (unsigned long long)(h->handoffs ? h->route_wake_ns / h->handoffs : 0));
	sb_printf(s, "posting: %llu bells of writes posted, mean %llu ns each\n", (unsigned long long)h->posts,
		  (unsigned long long)(h->posts ? h->post_ns / h->posts : 0));
}

/* the links table */
static void text_links(struct sb *s, struct hub *h)
{
	char a[80];
	sb_printf(s, "\nLinks\n%-4s %-16s %-22s %-5s %-10s %6s %7s %12s %12s %10s %10s %10s %10s\n", "id",
		  "peer-node", "peer", "xport", "state", "conns", "total", "bytes-tx", "bytes-rx",
		  "msgs-tx", "msgs-rx", "cq-send", "cq-recv");
	for (struct link *l = h->links; l; l = l->next)
		sb_printf(s, "%-4u %016llx %-22s %-5s %-10s %6u %7llu %12llu %12llu %10llu %10llu %10llu %10llu\n",
			  l->x.id, (unsigned long long)l->x.peer_node, addr_str(&l->x.peer_addr, a, sizeof(a)),
			  l->x.xp->ops->name, link_state(l->state), l->conns,
			  (unsigned long long)l->conns_total, (unsigned long long)l->bytes_tx,
			  (unsigned long long)l->bytes_rx, (unsigned long long)l->msgs_tx,
			  (unsigned long long)l->msgs_rx, (unsigned long long)l->cq_send,
			  (unsigned long long)l->cq_recv);
}

/* the pools table */
static void text_pools(struct sb *s, struct hub *h)
{
	sb_printf(s, "\nPools\n%-6s %9s %8s %12s\n", "id", "processes", "sockets", "ring-bytes");
	for (struct pool *p = h->pools; p; p = p->next)
		sb_printf(s, "%-6llu %9u %8u %12llu\n", (unsigned long long)p->id, p->nprocs, p->nsocks,
			  (unsigned long long)arena_in_use(p->rx_alloc) + arena_in_use(p->tx_alloc));
}

/* the processes attached */
static void text_procs(struct sb *s, struct hub *h)
{
	uint32_t nprocs = 0;
	for (struct proc *pr = h->procs; pr; pr = pr->next)
		nprocs += pr->pool != NULL;
	sb_printf(s, "\nProcesses: %u\n%-8s %-6s %s\n", nprocs, "pid", "pool", "sockets");
	for (struct proc *pr = h->procs; pr; pr = pr->next)
		if (pr->pool)
			sb_printf(s, "%-8d %-6llu %u\n", (int)pr->pid, (unsigned long long)pr->pool->id,
				  pr->nsocks);
}

/* the sockets table */
static void text_socks(struct sb *s, struct hub *h)
{
	char a[80], b[80];
	sb_printf(s, "\nSockets\n%-6s %-5s %-12s %-4s %-24s %-24s %12s %12s\n", "sid", "pool", "state",
		  "link", "local", "peer", "bytes-tx", "bytes-rx");
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *x = h->socks[sid];
		if (!x)
			continue;
		char lk[12];
		if (x->lp)
			strcpy(lk, "same");
		else
			snprintf(lk, sizeof(lk), "%u", x->link ? x->link->x.id : 0);
		sb_printf(s, "%-6u %-5llu %-12s %-4s %-24s %-24s %12llu %12llu\n", sid,
			  x->pool ? (unsigned long long)x->pool->id : 0ull, state_str(x->state), lk,
			  addr_str(&x->local, a, sizeof(a)), addr_str(&x->peer_addr, b, sizeof(b)),
			  (unsigned long long)sock_bytes(x, 1), (unsigned long long)sock_bytes(x, 0));
	}
}

char *hub_stat(struct hub *h, int json, size_t *len)
{
	struct sb s = {0};
	if (json) {
		json_head(&s, h);
		json_links(&s, h);
		json_pools(&s, h);
		json_procs(&s, h);
		json_socks(&s, h);
		sb_printf(&s, "]}\n");
	} else {
		text_head(&s, h);
		text_links(&s, h);
		text_pools(&s, h);
		text_procs(&s, h);
		text_socks(&s, h);
	}
	*len = s.len;
	return s.b;
}
