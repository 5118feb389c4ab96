/*
 * vsock.c - socket operations on arena slots, in the calling process.
 *
 * Data never goes through the hub's connection: send copies into the
 * slot's tx ring, publishes the tail and rings the doorbell (kicking the
 * hub only when it sleeps); recv copies out of the rx ring, publishes the
 * head and, once a quarter of the ring has been consumed, asks the hub to
 * return credit to the sender.  A thread that must wait sleeps on the
 * slot's futex word, which the hub bumps on every event.  Concurrent readers
 * (or writers) of one socket, in any processes of the pool, serialize on
 * the slot's robust mutex, so each byte goes to exactly one reader.
 *
 * A same-node connection (pair.h) has its rings in the pair segment of the
 * two pools instead: send and recv work on them the same way, but nothing
 * needs the hub unless the other side sleeps (rx_want, tx_want).  Before a
 * thread sleeps it spins for a while (spin_us of rshare.conf(5)) on the
 * counter it waits for, so that a quick answer costs no system call.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include "client.h"
#include "pair.h"
#include "sys.h"

static uint8_t proc_refs[ARENA_MAX_SLOTS]; /* descriptors of this process per slot */
static _Atomic int poll_fds[ARENA_MAX_SLOTS]; /* readiness descriptor + 1, 0 when none */
static void poll_bell(uint32_t slot);
void (*vs_poll_forget)(uint32_t slot, int pollfd, int gone);

static void lock(pthread_mutex_t *m)
{
	if (pthread_mutex_lock(m) == EOWNERDEAD)
		pthread_mutex_consistent(m); /* its owner died mid-copy: the counters were not moved */
}

int vs_restartable(void)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} ks;
	for (int sig = 1; sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || sig == 32 || sig == 33)
			continue;
		if (syscall(SYS_rt_sigaction, sig, NULL, &ks, 8) < 0)
			continue;
		if (ks.handler != SIG_DFL && ks.handler != SIG_IGN && !(ks.flags & SA_RESTART))
			return 0;
	}
	return 1;
}

/* Wait for the slot's futex word to move past seq.  Without a timeout,
 * so that the kernel itself restarts the wait after a handler installed
 * with SA_RESTART and reports EINTR after any other, exactly as for a
 * blocked recv on kernel TCP. */
static int wait_seq(struct arena_slot *as, uint32_t seq)
{
	long r;
	cl_watch();
	if (cl_hub_dead())
		return -ECONNRESET;
	r = sys_futex(&as->wake_seq, FUTEX_WAIT, seq, NULL);
	if (r < 0 && errno == EINTR)
		return -EINTR;
	return cl_hub_dead() ? -ECONNRESET : 0;
}

static void ring_bell(uint32_t slot, uint32_t op)
{
	if (arena_ring(cl.arena, slot, op))
		cl_kick();
}

/* ---- where a slot's rings are ---- */

/* the pair segments this process maps, and per slot the last one used
 * (key: the slot's generation and the segment's id) */
static struct {
	_Atomic uint64_t key;
	uint8_t *base;
} lmap[ARENA_MAX_SLOTS];
static struct seg_map {
	uint32_t id;
	uint8_t *base;
} *segs;
static uint32_t nsegs, segs_cap;
static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;

static uint8_t *pair_map(uint32_t slot, struct arena_slot *as, uint64_t key)
{
	struct msg_req q = {.op = MSG_PAIRFD, .slot = slot, .gen = as->gen};
	struct msg_rep r;
	uint8_t *base = NULL;
	int fd = -1;
	pthread_mutex_lock(&seg_lock);
	for (uint32_t i = 0; i < nsegs && !base; i++)
		if (segs[i].id == as->pair_seg)
			base = segs[i].base;
	if (!base && cl_rpc_fd(&q, &r, &fd) == 0 && !r.status && fd >= 0) {
		void *m = mmap(NULL, r.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		struct pair_hdr *ph = m;
		if (m != MAP_FAILED && (ph->magic != PAIR_MAGIC || ph->version != PAIR_VERSION ||
					ph->id != r.pool_id || ph->bytes != r.arena_bytes)) {
			munmap(m, r.arena_bytes);
			m = MAP_FAILED;
		}
		if (m != MAP_FAILED && nsegs == segs_cap) {
			uint32_t cap = segs_cap ? segs_cap * 2 : 8;
			struct seg_map *n = realloc(segs, cap * sizeof(*n));
			if (!n) {
				munmap(m, r.arena_bytes);
				m = MAP_FAILED;
			} else {
				segs = n;
				segs_cap = cap;
			}
		}
		if (m != MAP_FAILED) {
			segs[nsegs].id = (uint32_t)r.pool_id;
			segs[nsegs++].base = base = m;
		}
	}
	if (fd >= 0)
		sys_close(fd);
	if (base && (uint32_t)key == as->pair_seg) {
		lmap[slot].base = base;
		atomic_store_explicit(&lmap[slot].key, key, memory_order_release);
	}
	pthread_mutex_unlock(&seg_lock);
	return base;
}

struct vring {
	struct ring *c;       /* head and tail */
	uint8_t *base;        /* the bytes */
	uint64_t size;
	struct pair_dir *d;   /* same node: the wake-up words; else NULL */
};

/* The receive (tx 0) or send ring of a slot; -1 when a same-node
 * connection's segment cannot be had (its hub is gone). */
static int vring_of(uint32_t slot, struct arena_slot *as, int tx, struct vring *v)
{
	struct ring *r = tx ? &as->tx : &as->rx;
	uint32_t seg = as->pair_seg;
	uint64_t key;
	uint8_t *b;
	v->size = r->size;
	if (!seg) {
		v->c = r;
		v->base = arena_bytes(cl.arena, r->off);
		v->d = NULL;
		return 0;
	}
	key = (uint64_t)as->gen << 32 | seg;
	if (atomic_load_explicit(&lmap[slot].key, memory_order_acquire) == key)
		b = lmap[slot].base;
	else if (!(b = pair_map(slot, as, key)))
		return -1;
	v->d = &((struct pair_hdr *)b)->dir[(tx ? as->pair_tx : as->pair_rx) % PAIR_MAX_DIRS];
	v->c = &v->d->r;
	v->base = b + r->off;
	return 0;
}

/* Bytes in a ring, as its reader sees them: 0 for impossible counters
 * (only the other side of a same-node connection could write those). */
static uint64_t vring_used(const struct vring *v)
{
	uint64_t used = ring_load(&v->c->tail) - ring_load(&v->c->head);
	return used > v->size ? 0 : used;
}

/* After a store the other side may be waiting for: if it said so, take its
 * word back and have the hub wake it. */
static void other_bell(uint32_t slot, _Atomic uint64_t *ctr, uint64_t v, _Atomic uint32_t *want,
		       uint32_t op)
{
	/* both sides' store-then-load in one total order (seq_cst): either
	 * the sleeper sees the new counter or this sees its word */
	atomic_store(ctr, v);
	if (atomic_load(want) && atomic_exchange(want, 0))
		ring_bell(slot, op);
}

/* Before sleeping: say so, then look once more (the other side looks at
 * the word after its store).  1 when the counter moved meanwhile. */
static int want_wake(_Atomic uint32_t *want, _Atomic uint64_t *ctr, uint64_t old)
{
	atomic_store(want, 1);
	return atomic_load(ctr) != old;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Adaptive waiting: spin for the counter to leave old (or the hub to
 * signal anything), giving the CPU to others now and then; 1 when
 * something moved, 0 when it is time to sleep.  How long: up to cl.spin_ns,
 * per thread halved by every spin that waited in vain and doubled by every
 * one that did not, so that a busy machine, where the other side is
 * seldom running, stops burning what its other threads need; every 16th
 * wait spins the whole time, so that the budget grows back. */
static __thread uint64_t spin_budget;
static __thread unsigned spin_waits;

static int spin_ring(struct arena_slot *as, uint32_t seq, _Atomic uint64_t *ctr, uint64_t old)
{
	uint64_t end = 0, floor = cl.spin_ns / 16, b;
	if (!cl.spin_ns)
		return 0;
	if (spin_budget < floor || spin_budget > cl.spin_ns)
		spin_budget = cl.spin_ns;
	/* every 16th wait tries the whole time: the other side may be quick again */
	b = ++spin_waits % 16 ? spin_budget : cl.spin_ns;
	for (unsigned i = 1;; i++) {
		if (ring_load(ctr) != old || atomic_load(&as->wake_seq) != seq) {
			spin_budget = b * 2 > cl.spin_ns ? cl.spin_ns : b * 2;
			return 1;
		}
		if (!(i & 63)) {
			uint64_t now = now_ns();
			if (!end) {
				end = now + b;
			} else if (now >= end || cl_hub_dead()) {
				spin_budget = spin_budget / 2 < floor ? floor : spin_budget / 2;
				return 0;
			}
			sched_yield();
		}
		cpu_relax();
	}
}

int vs_take_error(uint32_t slot)
{
	return atomic_exchange(&cl_slot(slot)->error, 0);
}

void vs_ref(uint32_t slot)
{
	if (proc_refs[slot] < UINT8_MAX)
		proc_refs[slot]++;
}

static int unref(uint32_t slot, uint32_t gen, int abort)
{
	struct msg_req q = {.op = MSG_RELEASE, .slot = slot, .gen = gen, .arg = abort};
	struct msg_rep r;
	int ret, pf;
	if (proc_refs[slot] && --proc_refs[slot])
		return 0;
	if (!atomic_load(&poll_fds[slot])) {
		/* nothing to learn from the answer: ask for none (the hub handles
		 * this process's requests in order, so later ones see it done) */
		q.arg |= MSG_RELEASE_NOREPLY;
		return cl_rpc(&q, NULL, -1) < 0 ? -ECONNRESET : 1;
	}
	ret = cl_rpc(&q, &r, -1) < 0 ? -ECONNRESET : r.status ? r.status : 1;
	pf = atomic_exchange(&poll_fds[slot], 0);
	if (pf) {
		/* gen 1 in the reply: no process holds the socket any more */
		if (vs_poll_forget)
			vs_poll_forget(slot, pf - 1, ret == 1 && r.gen == 1);
		sys_close(pf - 1);
	}
	return ret;
}

int vs_unref(uint32_t slot, uint32_t gen)
{
	return unref(slot, gen, 0);
}

int vs_unref_abort(uint32_t slot, uint32_t gen)
{
	return unref(slot, gen, 1);
}

int vs_held(uint32_t slot)
{
	return slot < ARENA_MAX_SLOTS && proc_refs[slot];
}

void vs_exiting(int yes)
{
	struct msg_req q = {.op = MSG_EXITING, .arg = yes};
	struct msg_rep r;
	if (cl.attached > 0 && !cl_hub_dead())
		cl_rpc(&q, &r, -1);
}

int vs_listen(const union sockaddr_any *bound, int backlog, uint32_t rxsize, uint32_t txsize,
	      int *evfd, uint32_t *slot, uint32_t *gen)
{
	struct msg_req q = {.op = MSG_LISTEN, .arg = backlog, .rxsize = rxsize, .txsize = txsize};
	struct msg_rep r;
	int efd, ret;
	if (cl_attach() < 0)
		return -ENOTCONN;
	efd = (int)syscall(SYS_eventfd2, 0, 04000 /* EFD_NONBLOCK */ | 02000000 /* EFD_CLOEXEC */);
	if (efd < 0)
		return -errno;
	efd = cl_hi_fd(efd);
	q.addr = *bound;
	ret = cl_rpc(&q, &r, efd);
	if (ret < 0 || r.status) {
		sys_close(efd);
		return ret < 0 ? ret : r.status;
	}
	*evfd = efd;
	*slot = r.slot;
	*gen = r.gen;
	proc_refs[r.slot] = 1;
	return 0;
}

int vs_port_in_use(const union sockaddr_any *addr)
{
	struct msg_req q = {.op = MSG_PORTCHECK};
	struct msg_rep r;
	q.addr = *addr;
	if (cl_attach() < 0 || cl_rpc(&q, &r, -1) < 0)
		return 0;
	return r.status == -EADDRINUSE;
}

int vs_connect_start(const union sockaddr_any *dst, const union sockaddr_any *local, uint32_t rxsize,
		     uint32_t txsize, uint32_t *slot, uint32_t *gen)
{
	struct msg_req q = {.op = MSG_CONNECT, .rxsize = rxsize, .txsize = txsize};
	struct msg_rep r;
	int ret;
	if (cl_attach() < 0)
		return 1;
	q.addr = *dst;
	q.local = *local;
	ret = cl_rpc(&q, &r, -1);
	if (ret < 0)
		return 1; /* no hub: kernel TCP */
	if (r.status)
		return r.status == -EAFNOSUPPORT ? 1 : r.status;
	proc_refs[r.slot] = 1;
	*slot = r.slot;
	*gen = r.gen;
	return 0;
}

int vs_connect(const union sockaddr_any *dst, const union sockaddr_any *local, uint32_t rxsize,
	       uint32_t txsize, uint32_t *slot, uint32_t *gen)
{
	struct msg_rep r;
	struct arena_slot *as;
	int ret = vs_connect_start(dst, local, rxsize, txsize, &r.slot, &r.gen);
	if (ret)
		return ret;
	as = cl_slot(r.slot);
	atomic_fetch_add(&as->waiters, 1);
	for (;;) {
		uint32_t seq = atomic_load(&as->wake_seq);
		uint32_t st = atomic_load(&as->state);
		if (st != SLOT_CONNECTING)
			break;
		/* connect(2) keeps going in the background on a signal; so does this */
		if (wait_seq(as, seq) == -ECONNRESET) {
			/* the hub died under us: kernel TCP carries this one */
			atomic_fetch_sub(&as->waiters, 1);
			proc_refs[r.slot] = 0;
			return 1;
		}
	}
	atomic_fetch_sub(&as->waiters, 1);
	switch (atomic_load(&as->state)) {
	case SLOT_ESTABLISHED:
		*slot = r.slot;
		*gen = r.gen;
		return 0;
	case SLOT_FALLBACK:
		vs_unref(r.slot, r.gen);
		return 1;
	default:
		ret = vs_take_error(r.slot);
		vs_unref(r.slot, r.gen);
		return -(ret ? ret : ECONNREFUSED);
	}
}

int vs_accept(uint32_t slot, uint32_t gen, uint32_t *nslot, uint32_t *ngen)
{
	struct msg_req q = {.op = MSG_ACCEPT, .slot = slot, .gen = gen};
	struct msg_rep r;
	int ret;
	if (!atomic_load(&cl_slot(slot)->acceptq))
		return -EAGAIN;
	ret = cl_rpc(&q, &r, -1);
	if (ret < 0)
		return ret;
	if (r.status)
		return r.status;
	*nslot = r.slot;
	*ngen = r.gen;
	proc_refs[r.slot] = 1;
	return 0;
}

int vs_shutdown(uint32_t slot, uint32_t gen, int how)
{
	struct msg_req q = {.op = MSG_SHUTDOWN, .slot = slot, .gen = gen, .arg = how};
	struct msg_rep r;
	struct arena_slot *as = cl_slot(slot);
	uint32_t st = atomic_load(&as->state);
	int ret;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (st != SLOT_ESTABLISHED)
		return -ENOTCONN; /* as the kernel's TCP_CLOSE: reset or closed */
	if (how != SHUT_WR)
		atomic_fetch_or(&as->flags, SLOTF_RX_SHUT);
	if (how != SHUT_RD) {
		if (atomic_fetch_or(&as->flags, SLOTF_TX_SHUT) & SLOTF_TX_SHUT)
			return 0;
		lock(&as->tx_lock); /* a writer in the middle of a copy finishes first */
		pthread_mutex_unlock(&as->tx_lock);
	}
	ret = cl_rpc(&q, &r, -1);
	if (poll_fds[slot])
		poll_bell(slot); /* pollers see it too */
	/* wake this pool's own sleepers so they see the shutdown */
	atomic_fetch_add(&as->wake_seq, 1);
	sys_futex(&as->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
	return ret < 0 ? ret : r.status;
}

/* ---- readiness (hub_poll.c has the whole story) ---- */

int vs_poll_fd(uint32_t slot, uint32_t gen)
{
	struct msg_req q = {.op = MSG_POLLFD, .slot = slot, .gen = gen};
	struct msg_rep r;
	int fd, ret, none = 0;
	if ((fd = atomic_load(&poll_fds[slot])))
		return fd - 1;
	ret = cl_rpc_fd(&q, &r, &fd);
	if (ret < 0 || r.status || fd < 0) {
		if (fd >= 0)
			sys_close(fd);
		return ret < 0 ? ret : r.status ? r.status : -EBADF;
	}
	fd = cl_hi_fd(fd);
	/* two threads may have asked at once: the first one's stays */
	if (!atomic_compare_exchange_strong(&poll_fds[slot], &none, fd + 1)) {
		sys_close(fd);
		return none - 1;
	}
	return fd;
}

int vs_poll_fd_cached(uint32_t slot)
{
	return atomic_load(&poll_fds[slot]) - 1;
}

static uint64_t tx_space(uint32_t slot, struct arena_slot *as)
{
	struct vring v;
	uint64_t used;
	if (vring_of(slot, as, 1, &v) < 0)
		return 0;
	used = ring_load(&v.c->tail) - ring_load(&v.c->head);
	return used > v.size ? 0 : v.size - used;
}

unsigned vs_poll_mask(uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint32_t fl = atomic_load(&as->flags), st = atomic_load(&as->state);
	uint64_t avail = 0;
	unsigned m = 0;
	struct vring v;
	if (cl_hub_dead() || st == SLOT_CLOSED)
		return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLRDHUP | POLLHUP |
		       (atomic_load(&as->error) ? POLLERR : 0);
	if (st == SLOT_CONNECTING)
		return 0;
	if (st == SLOT_FALLBACK)
		return POLLOUT | POLLWRNORM; /* the waiter comes, and learns it */
	if (st != SLOT_ESTABLISHED)
		return POLLOUT | POLLHUP; /* as the kernel for a socket that is not connected */
	if (vring_of(slot, as, 0, &v) == 0) {
		avail = vring_used(&v);
		/* same node: whoever polls has seen this; the next arrival must
		 * reach the hub, which marks the readiness descriptor again */
		if (avail && v.d && !atomic_load_explicit(&v.d->rx_want, memory_order_relaxed))
			atomic_store(&v.d->rx_want, 1);
	}
	if (avail || (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT)))
		m |= POLLIN | POLLRDNORM;
	if (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT))
		m |= POLLRDHUP;
	/* writable with a quarter of the ring free, as the hub then drains */
	if ((fl & SLOTF_TX_SHUT) || tx_space(slot, as) >= as->tx.size / 4)
		m |= POLLOUT | POLLWRNORM;
	if ((fl & SLOTF_TX_SHUT) && (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT)))
		m |= POLLHUP; /* both directions shut */
	if (atomic_load(&as->error))
		m |= POLLERR;
	return m;
}

static void poll_bell(uint32_t slot)
{
	if (arena_ring(cl.arena, slot, SLOTOP_POLL))
		cl_kick();
}

/* The receive ring was found empty: take the hub's byte out of the
 * readiness descriptor, and ask for it again if data came meanwhile. */
static void rx_settle(uint32_t slot, struct arena_slot *as)
{
	char b[64];
	int fd = poll_fds[slot] - 1;
	if (fd < 0 || !atomic_load(&as->rx_sig))
		return;
	atomic_store(&as->rx_sig, 0);
	while (sys_read(fd, b, sizeof(b)) == sizeof(b))
		;
	if (as->pair_seg) {
		struct vring v;
		if (vring_of(slot, as, 0, &v) == 0)
			atomic_store(&v.d->rx_want, 1);
	}
	if (vs_poll_mask(slot) & POLLIN) {
		atomic_store(&as->rx_sig, 0);
		poll_bell(slot);
	}
}

/* The send ring was found full: fill the descriptor so it stops being
 * writable (every time: a drain of the hub's may have come between), then
 * say so; the hub drains it when room comes back, and a drain that raced
 * with this fill only wakes a waiter early, which finds the ring full and
 * comes here again. */
static void tx_settle(uint32_t slot, struct arena_slot *as)
{
	static const char junk[16384];
	int fd = poll_fds[slot] - 1;
	if (fd < 0)
		return;
	while (sys_write(fd, junk, sizeof(junk)) > 0)
		;
	atomic_store(&as->tx_blk, 1);
	if (as->pair_seg) {
		struct vring v;
		if (vring_of(slot, as, 1, &v) == 0)
			atomic_store(&v.d->tx_want, 1);
	}
	if (tx_space(slot, as) >= as->tx.size / 4 || atomic_load(&as->state) != SLOT_ESTABLISHED)
		poll_bell(slot);
}

void vs_poll_settle(uint32_t slot, unsigned claimed)
{
	struct arena_slot *as = cl_slot(slot);
	unsigned m = vs_poll_mask(slot);
	if ((claimed & POLLIN) && !(m & POLLIN))
		rx_settle(slot, as);
	if ((claimed & POLLOUT) && !(m & POLLOUT))
		tx_settle(slot, as);
}

static void raise_sigpipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGPIPE);
}

ssize_t vs_send(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	struct arena_slot *as = cl_slot(slot);
	struct vring v;
	size_t total = 0, want = 0;
	int vi = 0, nonblock = (flags & MSG_DONTWAIT) || (atomic_load(&as->flags) & SLOTF_NONBLOCK);
	size_t voff = 0;
	ssize_t ret = 0;

	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (want == 0 && atomic_load(&as->state) == SLOT_ESTABLISHED)
		return 0;
	lock(&as->tx_lock);
	atomic_fetch_add(&as->waiters, 1);
	while (total < want) {
		uint32_t seq = atomic_load(&as->wake_seq);
		uint32_t st = atomic_load(&as->state);
		uint64_t tail, head, space;
		int err;
		if (cl_hub_dead()) {
			/* the hub that carried this connection is gone */
			if (!total)
				raise_sigpipe(flags);
			ret = total ? 0 : -EPIPE;
			break;
		}
		if (st == SLOT_CONNECTING) {
			ret = total ? 0 : -EAGAIN; /* a nonblocking connect under way */
			break;
		}
		if (st != SLOT_ESTABLISHED || (atomic_load(&as->flags) & SLOTF_TX_SHUT)) {
			err = st == SLOT_CLOSED ? vs_take_error(slot) : 0;
			if (total)
				break;
			if (!err || err == EPIPE) {
				raise_sigpipe(flags);
				err = EPIPE;
			}
			ret = -err;
			break;
		}
		if (vring_of(slot, as, 1, &v) < 0) {
			ret = total ? 0 : -EPIPE;
			break;
		}
		tail = atomic_load_explicit(&v.c->tail, memory_order_relaxed);
		head = ring_load(&v.c->head);
		space = tail - head >= v.size ? 0 : v.size - (tail - head);
		if (space == 0) {
			if (nonblock) {
				ret = total ? 0 : -EAGAIN;
				if (poll_fds[slot])
					tx_settle(slot, as);
				break;
			}
			if (spin_ring(as, seq, &v.c->head, head) ||
			    (v.d && want_wake(&v.d->tx_want, &v.c->head, head)))
				continue;
			pthread_mutex_unlock(&as->tx_lock);
			err = wait_seq(as, seq);
			lock(&as->tx_lock);
			if (err) {
				if (err == -ECONNRESET)
					raise_sigpipe(flags);
				ret = total ? 0 : (err == -ECONNRESET ? -EPIPE : err);
				break;
			}
			continue;
		}
		while (space && vi < iovcnt) {
			size_t n = iov[vi].iov_len - voff;
			if (n > space)
				n = space;
			ring_copy_in(v.base, v.size, tail, (const uint8_t *)iov[vi].iov_base + voff, n);
			tail += n;
			space -= n;
			total += n;
			voff += n;
			if (voff == iov[vi].iov_len) {
				vi++;
				voff = 0;
			}
		}
		if (v.d) {
			other_bell(slot, &v.c->tail, tail, &v.d->rx_want, SLOTOP_TX);
		} else {
			ring_store(&v.c->tail, tail);
			ring_bell(slot, SLOTOP_TX);
		}
	}
	atomic_fetch_sub(&as->waiters, 1);
	pthread_mutex_unlock(&as->tx_lock);
	return total ? (ssize_t)total : ret;
}

ssize_t vs_recv(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	struct arena_slot *as = cl_slot(slot);
	struct vring v;
	size_t total = 0, want = 0;
	int vi = 0, nonblock = (flags & MSG_DONTWAIT) || (atomic_load(&as->flags) & SLOTF_NONBLOCK);
	int peek = flags & MSG_PEEK, waitall = (flags & MSG_WAITALL) && !peek;
	size_t voff = 0;
	ssize_t ret = 0;

	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	if (want == 0)
		return 0;
	lock(&as->rx_lock);
	atomic_fetch_add(&as->waiters, 1);
	for (;;) {
		uint32_t seq = atomic_load(&as->wake_seq);
		/* the flags before the tail: the hub publishes the last bytes'
		 * tail before it sets FIN, so a FIN seen here comes with them */
		uint32_t fl = atomic_load(&as->flags), st;
		uint64_t head, tail, avail;
		int err;
		if (vring_of(slot, as, 0, &v) < 0) {
			if (!total)
				ret = -ECONNRESET;
			break;
		}
		head = atomic_load_explicit(&v.c->head, memory_order_relaxed);
		tail = ring_load(&v.c->tail);
		avail = tail - head;
		if (avail > v.size)
			avail = 0; /* a corrupt counter (only the writer could): give nothing */
		if (avail) {
			uint64_t pos = head;
			while (avail && vi < iovcnt) {
				size_t n = iov[vi].iov_len - voff;
				if (n > avail)
					n = avail;
				ring_copy_out(v.base, v.size, pos, (uint8_t *)iov[vi].iov_base + voff, n);
				pos += n;
				avail -= n;
				total += n;
				voff += n;
				if (voff == iov[vi].iov_len) {
					vi++;
					voff = 0;
				}
			}
			if (!peek) {
				if (v.d) {
					/* a writer waiting for room gets it by the quarter */
					if (v.size - (tail - pos) >= v.size / 4)
						other_bell(slot, &v.c->head, pos, &v.d->tx_want, SLOTOP_CREDIT);
					else
						ring_store(&v.c->head, pos);
				} else {
					ring_store(&v.c->head, pos);
					if (pos - atomic_load(&as->rx_credit_mark) >= v.size / 4) {
						atomic_store(&as->rx_credit_mark, pos);
						ring_bell(slot, SLOTOP_CREDIT);
					}
				}
			}
			if (!waitall || total == want)
				break;
			continue;
		}
		if (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT))
			break; /* EOF */
		if (cl_hub_dead()) {
			if (!total)
				ret = -ECONNRESET;
			break;
		}
		st = atomic_load(&as->state);
		if (st == SLOT_CONNECTING) {
			if (!total)
				ret = -EAGAIN; /* a nonblocking connect under way */
			break;
		}
		if (st != SLOT_ESTABLISHED) {
			err = st == SLOT_CLOSED ? vs_take_error(slot) : ENOTCONN;
			/* a reset stays a reset for readers, even after another
			 * thread took the pending error: never a clean EOF */
			if (!err && (atomic_load(&as->flags) & SLOTF_RESET))
				err = ECONNRESET;
			if (!total && err)
				ret = -err;
			break;
		}
		if (nonblock) {
			if (!total)
				ret = -EAGAIN;
			break;
		}
		if (spin_ring(as, seq, &v.c->tail, tail) ||
		    (v.d && want_wake(&v.d->rx_want, &v.c->tail, tail)))
			continue;
		pthread_mutex_unlock(&as->rx_lock);
		err = wait_seq(as, seq);
		lock(&as->rx_lock);
		if (err) {
			if (!total)
				ret = err;
			break;
		}
	}
	atomic_fetch_sub(&as->waiters, 1);
	if (poll_fds[slot] && !peek && atomic_load(&as->rx_sig) && vring_of(slot, as, 0, &v) == 0 &&
	    ring_load(&v.c->tail) == atomic_load_explicit(&v.c->head, memory_order_relaxed))
		rx_settle(slot, as);
	pthread_mutex_unlock(&as->rx_lock);
	return total ? (ssize_t)total : ret;
}

int vs_nread(uint32_t slot)
{
	struct vring v;
	if (vring_of(slot, cl_slot(slot), 0, &v) < 0)
		return 0;
	return (int)vring_used(&v);
}
