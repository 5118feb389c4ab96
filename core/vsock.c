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
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include "client.h"
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

static uint64_t tx_space(struct arena_slot *as)
{
	uint64_t used = ring_load(&as->tx.tail) - ring_load(&as->tx.head);
	return used > as->tx.size ? 0 : as->tx.size - used;
}

unsigned vs_poll_mask(uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint32_t fl = atomic_load(&as->flags), st = atomic_load(&as->state);
	uint64_t avail = ring_load(&as->rx.tail) - ring_load(&as->rx.head);
	unsigned m = 0;
	if (cl_hub_dead() || st == SLOT_CLOSED)
		return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLRDHUP | POLLHUP |
		       (atomic_load(&as->error) ? POLLERR : 0);
	if (st == SLOT_CONNECTING)
		return 0;
	if (st == SLOT_FALLBACK)
		return POLLOUT | POLLWRNORM; /* the waiter comes, and learns it */
	if (st != SLOT_ESTABLISHED)
		return POLLOUT | POLLHUP; /* as the kernel for a socket that is not connected */
	if ((avail && avail <= as->rx.size) || (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT)))
		m |= POLLIN | POLLRDNORM;
	if (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT))
		m |= POLLRDHUP;
	/* writable with a quarter of the ring free, as the hub then drains */
	if ((fl & SLOTF_TX_SHUT) || tx_space(as) >= as->tx.size / 4)
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
	if (tx_space(as) >= as->tx.size / 4 || atomic_load(&as->state) != SLOT_ESTABLISHED)
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
	uint8_t *base = arena_bytes(cl.arena, as->tx.off);
	uint64_t size = as->tx.size;
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
		tail = atomic_load_explicit(&as->tx.tail, memory_order_relaxed);
		head = ring_load(&as->tx.head);
		space = size - (tail - head);
		if (space == 0) {
			if (nonblock) {
				ret = total ? 0 : -EAGAIN;
				if (poll_fds[slot])
					tx_settle(slot, as);
				break;
			}
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
			ring_copy_in(base, size, tail, (const uint8_t *)iov[vi].iov_base + voff, n);
			tail += n;
			space -= n;
			total += n;
			voff += n;
			if (voff == iov[vi].iov_len) {
				vi++;
				voff = 0;
			}
		}
		ring_store(&as->tx.tail, tail);
		ring_bell(slot, SLOTOP_TX);
	}
	atomic_fetch_sub(&as->waiters, 1);
	pthread_mutex_unlock(&as->tx_lock);
	return total ? (ssize_t)total : ret;
}

ssize_t vs_recv(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	struct arena_slot *as = cl_slot(slot);
	uint8_t *base = arena_bytes(cl.arena, as->rx.off);
	uint64_t size = as->rx.size;
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
		uint64_t head = atomic_load_explicit(&as->rx.head, memory_order_relaxed);
		uint64_t tail = ring_load(&as->rx.tail);
		uint64_t avail = tail - head;
		int err;
		if (avail > size)
			avail = 0; /* cannot happen unless the arena is corrupt: give nothing */
		if (avail) {
			uint64_t pos = head;
			while (avail && vi < iovcnt) {
				size_t n = iov[vi].iov_len - voff;
				if (n > avail)
					n = avail;
				ring_copy_out(base, size, pos, (uint8_t *)iov[vi].iov_base + voff, n);
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
				ring_store(&as->rx.head, pos);
				if (pos - atomic_load(&as->rx_credit_mark) >= size / 4) {
					atomic_store(&as->rx_credit_mark, pos);
					ring_bell(slot, SLOTOP_CREDIT);
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
	if (poll_fds[slot] && !peek && atomic_load(&as->rx_sig) &&
	    ring_load(&as->rx.tail) == atomic_load_explicit(&as->rx.head, memory_order_relaxed))
		rx_settle(slot, as);
	pthread_mutex_unlock(&as->rx_lock);
	return total ? (ssize_t)total : ret;
}

int vs_nread(uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint64_t avail = ring_load(&as->rx.tail) - ring_load(&as->rx.head);
	return avail > as->rx.size ? 0 : (int)avail;
}
