/*
 * loop.c - the hub's event loop and its main: options, set-up, the loop.
 *
 * One thread, one epoll set: the unix socket processes attach through, one
 * connection per process, one eventfd per pool (the doorbell kick), and the
 * transports' own descriptors.  Each turn answers every pool's request
 * cells that rang (cell.c), drains every pool's doorbell bitmap, reaps every transport's completion queue (the single poller: each
 * completion is routed by its owner tag in hub_route()), then sleeps in
 * epoll_wait with hub_sleeping set in every arena so that processes know to
 * kick.  Between batches of events: link timers, links that failed mid-work,
 * pools and pair segments that are gone, deferred frees (hub_batch_end).
 */
#include "hub.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "crash.h"
#include "log.h"
#include "msg.h"
#include "tag.h"

/* The bells of one word of the bitmap. */
static void doorbell_word(struct hub *h, struct pool *p, uint32_t w, uint64_t bits)
{
	while (bits) {
		uint32_t slot = w * 64 + (uint32_t)__builtin_ctzll(bits);
		uint32_t sid = p->slot_sid[slot];
		struct hsock *s;
		uint32_t ops;
		bits &= bits - 1;
		if (!sid)
			continue; /* a bell on a free slot: ignore */
		s = h->socks[sid];
		ops = atomic_exchange_explicit(&s->as->pending_ops, 0, memory_order_acquire);
		if (ops & SLOTOP_TX) {
			uint32_t gen = s->gen;
			uint64_t posted = s->tx_posted, t0 = sys_now_ns();
			hsock_tx(h, s);
			s = h->socks[sid]; /* an abort may have ended it */
			if (!s || s->gen != gen || !s->as)
				continue;
			if (s->tx_posted != posted) { /* the hub's own cost of posting */
				h->posts++;
				h->post_ns += sys_now_ns() - t0;
			}
		}
		if (ops & SLOTOP_CREDIT)
			hsock_credit(h, s);
		if ((ops & SLOTOP_POLL) && (s->poll_ends & 2)) {
			hpoll_reflect(s);
			hsock_tx_watch(h, s);
		}
	}
}

/* Drain the doorbell bitmap of one pool: only the words its summary names
 * (arena_ring sets the word's bit, then the summary's), up to the highest
 * slot the pool ever used.  Returns whether any bell rang. */
int hub_doorbells(struct hub *h, struct pool *p)
{
	struct arena_hdr *ah = p->base;
	uint32_t nsum = (p->slot_hi + 4095) / 4096;
	int rang = 0;
	for (uint32_t g = 0; g < nsum; g++) {
		uint64_t sum;
		if (!atomic_load_explicit(&ah->summary[g], memory_order_relaxed))
			continue;
		sum = atomic_exchange_explicit(&ah->summary[g], 0, memory_order_acquire);
		while (sum) {
			uint32_t w = g * 64 + (uint32_t)__builtin_ctzll(sum);
			uint64_t bits;
			sum &= sum - 1;
			if (!atomic_load_explicit(&ah->doorbell[w], memory_order_relaxed))
				continue;
			bits = atomic_exchange_explicit(&ah->doorbell[w], 0, memory_order_acquire);
			rang |= bits != 0;
			doorbell_word(h, p, w, bits);
		}
	}
	return rang;
}

/* Every socket's bell rung for every op, as if its process had just rung
 * it: what a hub that died had taken from the bells and not done is done
 * by the next (warden.c).  A bell with nothing behind it costs a look,
 * but for a same-node socket's TX, which wakes the peer's readers: only
 * with bytes in its send ring (a reader woken for nothing could miss a
 * signal: rshare(7), BUGS). */
void hub_ring_all(struct hub *h)
{
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		uint32_t ops = SLOTOP_TX | SLOTOP_CREDIT | SLOTOP_POLL;
		if (!s || !s->as || !s->pool)
			continue;
		if (s->lp && ring_load(&hpair_ring(s, 1)->tail) == ring_load(&hpair_ring(s, 1)->head))
			ops &= ~(uint32_t)SLOTOP_TX;
		arena_ring(s->pool->base, s->slot, ops);
	}
}

static void set_sleeping(struct hub *h, uint32_t v)
{
	for (struct pool *p = h->pools; p; p = p->next)
		atomic_store_explicit(&((struct arena_hdr *)p->base)->hub_sleeping, v, memory_order_seq_cst);
}

/* Reap a transport's completions and route each to its owner; the time
 * from the poll to the owner woken (data arrived, or send ring space freed)
 * is the hand-off, the price of one poller for all processes. */
static int reap(struct hub *h, struct xport *xp)
{
	struct xwc wc[64];
	int n, any = 0;
	while ((n = xp->ops->poll_cq(xp, wc, 64)) > 0) {
		uint64_t t0 = sys_now_ns(), t1 = t0, t2;
		h->reflect_defer = 1;
		for (int i = 0; i < n; i++) {
			uint64_t woke = h->wake_ns;
			hub_route(h, &wc[i]);
			if (wc[i].op == XWC_RECV_IMM || wc[i].op == XWC_WRITE) {
				/* from the poll (the batch's), and its own routing,
				 * with the system calls of its wake-up apart */
				t2 = sys_now_ns();
				h->handoffs++;
				h->handoff_ns += t2 - t0;
				h->route_ns += t2 - t1;
				h->route_wake_ns += h->wake_ns - woke;
				t1 = t2;
			} else {
				t1 = sys_now_ns();
			}
		}
		/* the readiness descriptors of the batch, once each: wake-ups too */
		hpoll_reflect_queued(h);
		h->wake_ns += sys_now_ns() - t1;
		any = 1;
	}
	return any;
}

/* ---- the loop ---- */

/* Between batches of events: what may free records that events use. */
void hub_batch_end(struct hub *h)
{
	hub_reap_doomed(h);
	pools_sweep(h);
	if (h->segs_dirty) {
		h->segs_dirty = 0;
		hpair_sweep(h);
	}
	hub_free_deferred(h);
}

/* on: only a transport that is up; off: whatever was turned on */
static int xp_batch(struct xport *xp, int on)
{
	return (xp->up || !on) && xp->ops && xp->ops->batch ? xp->ops->batch(xp, on) : 0;
}

/* Doorbells, completions and links with room again, until none has work
 * or HUB_DRAIN_ROUNDS went by (so that a process ringing in a loop never
 * keeps the hub from its requests and links); returns when it last found
 * some.  What a pass posts leaves at its end, together (xport batch). */
#define HUB_DRAIN_ROUNDS 64
static uint64_t hub_drain(struct hub *h, uint64_t last_work, int *more)
{
	int busy, rounds = 0;
	do {
		busy = 0;
		xp_batch(&h->soft, 1);
		xp_batch(&h->verbs, 1);
		for (struct pool *p = h->pools; p; p = p->next)
			busy |= hub_cells(h, p) | hub_doorbells(h, p);
		busy |= reap(h, &h->soft);
		if (h->verbs.up)
			busy |= reap(h, &h->verbs);
		busy |= hub_run_writable(h);
		busy |= xp_batch(&h->soft, 0);
		busy |= xp_batch(&h->verbs, 0);
		if (busy)
			last_work = sys_now_ns();
	} while (busy && ++rounds < HUB_DRAIN_ROUNDS);
	*more = busy; /* stopped with work left: look at the events, never sleep */
	return last_work;
}

/* Sleeping: processes are told to kick; a bell that rang before they knew
 * says not to sleep at all. */
static int rang_before_sleep(struct hub *h)
{
	int rang = 0;
	set_sleeping(h, 1);
	for (struct pool *p = h->pools; p && !rang; p = p->next) {
		struct arena_hdr *ah = p->base;
		rang = atomic_load(&ah->cell_summary) != 0;
		for (uint32_t g = 0; g < (p->slot_hi + 4095) / 4096 && !rang; g++)
			rang = atomic_load(&ah->summary[g]) != 0;
	}
	return rang;
}

/* epoll_wait for up to MS; while soft completions wait for the peer's
 * acknowledgement, which no event announces, for as long as soft says */
static int hub_wait(struct hub *h, struct epoll_event *evs, int ms)
{
	struct timespec ts = {0, (long)h->soft.waiting * 1000};
	struct pollfd p = {.fd = h->epfd, .events = POLLIN};
	int r;
	if (!ms || !h->soft.waiting || h->soft.waiting >= ms * 1000)
		return epoll_wait(h->epfd, evs, 64, ms);
	/* finer than epoll_wait's ms (epoll_pwait2 is newer than some tools) */
	r = ppoll(&p, 1, &ts, NULL);
	return r > 0 ? epoll_wait(h->epfd, evs, 64, 0) : r;
}

/* How long the loop polls after its last work: spin_ns, or, while work
 * comes back within HUB_FLOW_GAP_NS of the work before (traffic that
 * flows, but well slower than spin_ns: round trips through a slow machine
 * or NIC, a client that thinks between requests), twice the longest such
 * gap of late, so that the next message of the flow finds the hub awake
 * instead of asleep behind a kick.  GAP: from the end of the last burst of
 * work to the start of this one; WINDOW: the one so far, which every gap
 * shrinks by an eighth, one more than twice spin_ns stretches to twice
 * itself (gaps the plain poll nearly serves do not: there a longer poll
 * would only take the processor from the programs of a busy machine), and
 * one longer than HUB_FLOW_GAP_NS (no flow) ends at once. */
#define HUB_FLOW_GAP_NS 1000000ull
static uint64_t spin_window(const struct hub *h, uint64_t window, uint64_t gap)
{
	if (!h->spin_ns || gap > HUB_FLOW_GAP_NS)
		return h->spin_ns;
	window -= window / 8;
	if (gap > 2 * h->spin_ns && window < 2 * gap)
		window = 2 * gap;
	return window < h->spin_ns ? h->spin_ns : window;
}

void hub_loop(struct hub *h)
{
	uint64_t last_work = sys_now_ns(), window = h->spin_ns;
	int idle = 0;
	while (!h->stop) {
		struct epoll_event evs[64];
		int n, rang = 0, spin, more;
		uint64_t before = last_work;
		last_work = hub_drain(h, last_work, &more);
		if (last_work != before && idle)
			window = spin_window(h, window, last_work - before);
		/* adaptive: poll for a while after work (yielding the CPU to
		 * whoever else can run), then sleep with the processes told to kick */
		spin = more || (window && sys_now_ns() - last_work < window);
		if (spin) {
			sched_yield();
		} else {
			rang = rang_before_sleep(h);
			h->sleeps++;
		}
		/* a ring move that waits for a process to step out is tried
		 * again soon, a watched full ring looked at, and a look at
		 * idle rings that filled its batch goes on (resize.c) */
		n = rang ? 0 : hub_wait(h, evs, spin || h->looking ? 0 : h->nswitch_waiting ? 1 : h->ntx_watch ? 5 : 500);
		if (!spin)
			set_sleeping(h, 0);
		if (n > 0) {
			uint64_t now = sys_now_ns();
			if (last_work == before && idle)
				window = spin_window(h, window, now - before);
			last_work = now;
		}
		idle = last_work == before;
		for (int i = 0; i < n; i++) {
			struct hub_ev *ev = evs[i].data.ptr;
			ev->fn(h, ev, evs[i].events);
		}
		hub_link_timers(h);
		hub_resume_timers(h);
		hub_ring_timers(h);
		pools_cool(h);
		hub_batch_end(h);
		if (h->restart)
			hub_restart(h);
	}
}

/* ---- main ---- */

static void on_signal(int sig)
{
	(void)sig;
	if (the_hub)
		the_hub->stop = 1;
}

/* 0 or -errno */
static int hub_listen_unix(struct hub *h)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const char *name = hub_sock_name();
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
	memcpy(a.sun_path + 1, name, strlen(name));
	if (h->lfd >= 0) {
		fcntl(h->lfd, F_SETFD, FD_CLOEXEC); /* the hub before made it (restart.c) */
	} else {
		h->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (h->lfd < 0)
			return -errno;
		if (bind(h->lfd, (struct sockaddr *)&a, len) < 0 || listen(h->lfd, 4096) < 0)
			return -errno;
	}
	h->lev.fn = hub_accept_proc;
	return hub_watch(h, h->lfd, EPOLLIN, &h->lev) < 0 ? -errno : 0;
}

static void usage(void)
{
	fprintf(stderr, "Usage: rshared [--port PORT] [--addr ADDRESS] [--transport auto|verbs|soft] [--syslog] [--daemon] [--no-warden]\n");
}

/* HUB_AUTO, HUB_VERBS, HUB_SOFT, or -EINVAL */
static int parse_mode(const char *s)
{
	if (!s || !*s || !strcmp(s, "auto"))
		return HUB_AUTO;
	if (!strcmp(s, "verbs"))
		return HUB_VERBS;
	if (!strcmp(s, "soft"))
		return HUB_SOFT;
	return -EINVAL;
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
	return -EINVAL;
}

/* The options, over the file's and RSHARE_* settings already in h, *port
 * and cf: 0, or the exit status. */
static int hub_options(struct hub *h, int argc, char **argv, long *port, int *daemon_mode)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			*port = atol(argv[++i]);
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
			*daemon_mode = 1;
		else if (!strcmp(argv[i], "--no-warden"))
			h->no_warden = 1;
		else {
			usage();
			return 2;
		}
	}
	if (*port <= 0 || *port > 65535) {
		fprintf(stderr, "rshared: bad port\n");
		return 2;
	}
	return 0;
}

/* The hub's own state, limits and signals: 0 or -errno */
static int hub_setup(struct hub *h)
{
	struct rlimit rl;
	if (!h->socks) /* (an adopted hub has them) */
		h->socks = calloc(TAG_MAX_SOCKS, sizeof(*h->socks));
	if (!h->gens)
		h->gens = calloc(TAG_MAX_SOCKS, sizeof(*h->gens));
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!h->socks || !h->gens)
		return -ENOMEM;
	if (h->epfd < 0)
		return -errno;
	while (!h->node_id)
		if (getrandom(&h->node_id, sizeof(h->node_id), 0) < 0)
			return -errno;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	keep_init(h);
	/* kept for a process that comes when every descriptor is taken */
	h->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* The signals of the process that runs the hub's loop. */
void hub_signals(struct hub *h)
{
	struct sigaction sa = {.sa_handler = on_signal};
	struct sigaction su = {.sa_handler = hub_restart_signal};
	(void)h;
	signal(SIGPIPE, SIG_IGN);
	/* a file size limit under an arena's size (one inherited from the
	 * program that started the hub, which it may not raise): the memfd's
	 * ftruncate fails with EFBIG and the process is turned away, where the
	 * signal would kill every successor in turn */
	signal(SIGXFSZ, SIG_IGN);
	crash_install();
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR2, &su, NULL);
}

/* The unix socket processes attach through, then the transports:
 * -1 to go on, else the exit status. */
static int hub_open(struct hub *h, int daemon_mode)
{
	int r = hub_listen_unix(h);
	if (r < 0) {
		if (r == -EADDRINUSE) {
			if (!daemon_mode)
				fprintf(stderr, "rshared: a hub already runs in this network namespace\n");
			return daemon_mode ? 0 : 1;
		}
		fprintf(stderr, "rshared: cannot listen for processes: %s\n", strerror(-r));
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
	/* with a warden, the hub process opens the device (warden.c) */
	if (!hub_warden_wanted(h) && hub_open_verbs(h) < 0)
		return 1;
	return -1;
}

/* The RDMA device, by the process that runs the hub's loop (the kernel
 * takes its commands only from the opener): 0, or -1 when the hub cannot
 * go on (--transport verbs, and no device); an adopted hub's rings are
 * registered again (hub_rekey). */
int hub_open_verbs(struct hub *h)
{
	if (h->mode == HUB_SOFT || h->verbs.up || h->verbs.priv)
		return 0; /* (tried once) */
	if (h->verbs.ops->init(&h->verbs, h, h->port) == 0)
		h->verbs.up = 1;
	else if (h->mode == HUB_VERBS) {
		fprintf(stderr, "rshared: no usable RDMA device: %s\n", strerror(errno));
		return -1;
	} else
		log_info("verbs: not available (%s); links use soft", strerror(errno));
	if (h->verbs.up)
		hub_rekey(h);
	return 0;
}

/* tcp_wmem's (tx) or tcp_rmem's maximum in this network namespace, as
 * the largest ring size not above it (at most 4 MiB): a send or receive
 * ring grows up to it, as the kernel's buffers.  Without the file: 128
 * KiB, no growth. */
uint32_t hub_mem_max(int tx)
{
	unsigned long lo = 0, def = 0, top = 0;
	uint32_t m = ARENA_MIN_RING;
	FILE *f = fopen(tx ? "/proc/sys/net/ipv4/tcp_wmem" : "/proc/sys/net/ipv4/tcp_rmem", "r");
	int n = 0;
	if (f) {
		n = fscanf(f, "%lu %lu %lu", &lo, &def, &top);
		fclose(f);
	}
	if (n != 3)
		return ARENA_DEFAULT_RING;
	while (m < ARENA_MAX_RING && (unsigned long)m * 2 <= top)
		m *= 2;
	return m < ARENA_DEFAULT_RING ? ARENA_DEFAULT_RING : m;
}

/* A daemon keeps no directory of its starter's busy: it changes to /,
 * after its configuration was read, and with a relative RSHARE_CONF made
 * absolute for the hub a restart executes. */
static void daemon_dir(void)
{
	const char *conf = getenv("RSHARE_CONF");
	char *abs;
	if (conf && *conf && *conf != '/' && (abs = realpath(conf, NULL))) {
		setenv("RSHARE_CONF", abs, 1);
		free(abs);
	}
	if (chdir("/") < 0)
		log_warn("cannot change to /: %s", strerror(errno));
}

int hub_main(int argc, char **argv)
{
	struct hub *h;
	int daemon_mode = 0, r, adopt_fd, status;
	long port;
	static struct cfg cf;
	char err[CFG_LINE_MAX];

	if (hub_restart_args(&argc, argv, &adopt_fd, &status) < 0)
		return status;

	/* the file, then RSHARE_* variables, then options */
	if (cfg_load(NULL, &cf, err, sizeof(err)) < 0 || cfg_env(&cf, err, sizeof(err)) < 0) {
		fprintf(stderr, "rshared: %s\n", err);
		return 2;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return 1;
	h->lfd = h->kept_lfd = -1;
	log_init("rshared", cf.log >= 0 ? cf.log : LOG_LVL_WARN);
	if (adopt_fd >= 0 && (r = hub_adopt(h, adopt_fd)) < 0) {
		log_error("cannot take over from the hub before: %s", strerror(-r));
		return 1;
	}
	port = cf.port ? cf.port : HUB_DEFAULT_PORT;
	h->mode = parse_mode(cf.transport);
	h->lim_pools = cf.uid_pools ? cf.uid_pools : HUB_UID_POOLS;
	h->lim_socks = cf.uid_sockets ? cf.uid_sockets : HUB_UID_SOCKETS;
	h->lim_bytes = cf.uid_memory;
	/* off unless asked: under Soft-RoCE the extra write costs more than it saves */
	h->placed_tails = getenv("RSHARE_PLACED") && !strcmp(getenv("RSHARE_PLACED"), "1");
	the_hub = h;
	r = hub_options(h, argc, argv, &port, &daemon_mode);
	if (r)
		return r;
	if (daemon_mode)
		daemon_dir();
	h->link_timeout_ms = (uint32_t)(cf.link_timeout > 0 ? cf.link_timeout : HUB_LINK_TIMEOUT_S) * 1000u;
	h->link_outage_ms = (uint32_t)(cf.link_outage > 0 ? cf.link_outage : HUB_LINK_OUTAGE_S) * 1000u;
	memcpy(h->link_cc, cf.link_congestion, sizeof(h->link_cc));
	hub_resume_init(h);
	h->port = (uint16_t)port;
	if (hub_setup(h) < 0)
		return 1;
	r = hub_open(h, daemon_mode);
	if (r >= 0)
		return r;
	if (adopt_fd >= 0 && hub_adopt_watch(h) < 0)
		return 1;
	log_info("hub up: node %016llx, peer port %u", (unsigned long long)h->node_id, h->port);
	h->spin_ns = (uint64_t)(cf.spin_us >= 0 ? cf.spin_us : CFG_DEFAULT_SPIN_US) * 1000;
	h->tx_max = hub_mem_max(1);
	h->rx_max = hub_mem_max(0);
	h->pair_pressure = hpair_pressure();
	r = hub_warden(h, !h->no_warden);
	log_info("hub stopping");
	return r;
}
