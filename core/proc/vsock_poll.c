/*
 * vsock_poll.c - readiness of arena slots (core/hub/ready.c has the whole story).
 *
 * A socket's readiness descriptor is asked of the hub the first time it is
 * polled, and put in place of the program's descriptor when that is the
 * process's only one of the socket (vs_poll_fd_onto), else kept at a high
 * number of the library's; its true readiness is what its rings and flags
 * say (vs_poll_mask).  When the descriptor claimed more than is true, it is
 * brought in line: emptied when the receive ring is, filled when the send
 * ring is full, and the hub told to look again.
 */
#include <fcntl.h>
#include <poll.h>

#include "vsock_int.h"

/* One descriptor this process keeps spare, so that it can take a
 * readiness descriptor in at its descriptor limit (the kernel drops one
 * it has no number for), as it took the socket in. */
static _Atomic int vs_spare = -1;

/* the spare again, once the number it gave up is free again (or at first) */
static void spare_refill(void)
{
	int sp, none = -1;
	if (atomic_load(&vs_spare) >= 0 ||
	    (sp = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	sp = cl_hi_fd(sp);
	if (!atomic_compare_exchange_strong(&vs_spare, &none, sp))
		sys_close(sp);
}

/* The socket's readiness descriptor from the hub, at the lowest free
 * number: 0, or -errno. */
static int ask(uint32_t slot, uint32_t gen, int *fd)
{
	struct msg_req q = {.op = MSG_POLLFD, .slot = slot, .gen = gen};
	struct msg_rep r;
	int ret, sp;
	spare_refill();
	ret = cl_rpc_fd(&q, &r, fd);
	if (ret == 0 && !r.status && *fd < 0 && (sp = atomic_exchange(&vs_spare, -1)) >= 0) {
		sys_close(sp);
		ret = cl_rpc_fd(&q, &r, fd);
	}
	if (ret < 0 || r.status || *fd < 0) {
		if (*fd >= 0)
			sys_close(*fd);
		return ret < 0 ? ret : r.status ? r.status : -EMFILE;
	}
	return 0;
}

/* PF, a readiness descriptor of the slot's that this process took in,
 * kept at a high number of the library's: the one kept (two threads may
 * have asked at once: the first one's stays, the other is closed) */
static int keep_high(uint32_t slot, int pf)
{
	int none = 0;
	pf = cl_hi_fd(pf);
	if (!atomic_compare_exchange_strong(&vs_poll_fds[slot], &none, pf + 1)) {
		sys_close(pf);
		return none - 1;
	}
	return pf;
}

/* FD, the program's descriptor of the slot's socket, as its readiness
 * descriptor: FD, or the one another thread set first */
static int keep_self(uint32_t slot, int fd)
{
	int none = 0;
	atomic_store(&vs_poll_selfs[slot], 1);
	if (!atomic_compare_exchange_strong(&vs_poll_fds[slot], &none, fd + 1)) {
		atomic_store(&vs_poll_selfs[slot], 0);
		return none - 1;
	}
	return fd;
}

int vs_poll_fd(uint32_t slot, uint32_t gen)
{
	int fd, ret;
	if ((fd = atomic_load(&vs_poll_fds[slot])))
		return fd - 1;
	if ((ret = ask(slot, gen, &fd)) < 0)
		return ret;
	fd = keep_high(slot, fd);
	spare_refill();
	return fd;
}

int vs_poll_fd_cached(uint32_t slot)
{
	return atomic_load(&vs_poll_fds[slot]) - 1;
}

int vs_own_fds(int *out, int max)
{
	int n = 0, sp = atomic_load(&vs_spare);
	if (sp >= 0 && n < max)
		out[n++] = sp;
	for (uint32_t i = cl_slot_at(0); i < CL_SLOTS && n < max; i = cl_slot_at(i + 1)) {
		int fd = atomic_load(&vs_poll_fds[i]) - 1;
		if (fd >= 0 && !atomic_load(&vs_poll_selfs[i]))
			out[n++] = fd;
	}
	return n + vs_accept_own_fds(out + n, max - n);
}

int vs_poll_self(uint32_t slot)
{
	return atomic_load(&vs_poll_selfs[slot]);
}

/* fd takes pf's file, with its own close-on-exec flag */
static int onto(int pf, int fd)
{
	int fl = sys_fcntl(fd, F_GETFD, 0);
	return fl < 0 ? -1 : sys_dup3(pf, fd, (fl & FD_CLOEXEC) ? O_CLOEXEC : 0);
}

int vs_poll_fd_onto(uint32_t slot, uint32_t gen, int fd, int *moved)
{
	int pf, ret;
	if ((pf = atomic_load(&vs_poll_fds[slot])))
		return pf - 1;
	if ((ret = ask(slot, gen, &pf)) < 0)
		return ret;
	if (onto(pf, fd) < 0)
		return keep_high(slot, pf); /* as before: a number of the library's */
	sys_close(pf);
	spare_refill();
	*moved = 1;
	/* two threads may have asked at once: fd is the same file either way */
	return keep_self(slot, fd);
}

void vs_poll_fd_given(uint32_t slot, int pf)
{
	keep_high(slot, pf);
}

int vs_poll_is(uint32_t slot, int fd)
{
	return keep_self(slot, fd) == fd ? 0 : -1;
}

int vs_poll_move(uint32_t slot, int fd)
{
	int pf = atomic_load(&vs_poll_fds[slot]) - 1;
	if (pf < 0 || atomic_load(&vs_poll_selfs[slot]) || onto(pf, fd) < 0)
		return -1;
	atomic_store(&vs_poll_selfs[slot], 1);
	atomic_store(&vs_poll_fds[slot], fd + 1);
	return pf;
}

void vs_poll_unself(uint32_t slot, int fd)
{
	int hi;
	if (!atomic_load(&vs_poll_selfs[slot]) || atomic_load(&vs_poll_fds[slot]) != fd + 1)
		return;
	/* at the descriptor limit: without one, the readiness goes with fd */
	hi = cl_hi_fd(sys_fcntl(fd, F_DUPFD_CLOEXEC, 0));
	atomic_store(&vs_poll_fds[slot], hi + 1);
	atomic_store(&vs_poll_selfs[slot], 0);
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
	uint64_t avail = 0, lowat = 1;
	unsigned m = 0;
	struct vring v;
	if (cl_hub_dead() || st == SLOT_CLOSED)
		return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLRDHUP | POLLHUP |
		       (atomic_load(&as->error) || slot_errq_waiting(as) ? POLLERR : 0);
	if (st == SLOT_CONNECTING)
		return 0;
	if (st == SLOT_FALLBACK)
		return POLLOUT | POLLWRNORM; /* the waiter comes, and learns it */
	if (st != SLOT_ESTABLISHED)
		return POLLOUT | POLLHUP; /* as the kernel for a socket that is not connected */
	if (vring_of(slot, as, 0, &v) == 0) {
		avail = vring_used(&v);
		lowat = slot_rcvlowat(as, v.size);
		/* same node: whoever polls has seen this; the next arrival must
		 * reach the hub, which marks the readiness descriptor again */
		if (avail && v.d && !atomic_load_explicit(&v.d->rx_want, memory_order_relaxed))
			atomic_store(&v.d->rx_want, 1);
	}
	/* readable from SO_RCVLOWAT bytes on, or at the end of the stream */
	if (avail >= lowat || (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT)))
		m |= POLLIN | POLLRDNORM;
	if (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT))
		m |= POLLRDHUP;
	/* writable with a quarter of the ring free, as the hub then drains */
	if ((fl & SLOTF_TX_SHUT) || tx_space(slot, as) >= as->tx.size / 4)
		m |= POLLOUT | POLLWRNORM;
	if ((fl & SLOTF_TX_SHUT) && (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT)))
		m |= POLLHUP; /* both directions shut */
	if (atomic_load(&as->error) || slot_errq_waiting(as))
		m |= POLLERR; /* or a MSG_ZEROCOPY notification waits (vsock_errq.c) */
	return m;
}

/* Reading and filling the readiness descriptor (made nonblocking by the
 * hub): recvfrom and sendto with MSG_DONTWAIT, whatever O_NONBLOCK a
 * program set on it; read and write once the process is in a seccomp
 * sandbox, which may allow only those (cl.sandboxed: OpenSSH's). */
static ssize_t rd_take(int fd, void *b, size_t n)
{
	return cl.sandboxed ? sys_read(fd, b, n) : sys_recv_now(fd, b, n);
}

static ssize_t rd_fill(int fd, const void *b, size_t n)
{
	return cl.sandboxed ? sys_write(fd, b, n) : sys_send_now(fd, b, n);
}

/* The receive ring was found empty (or holding less than SO_RCVLOWAT):
 * take the hub's byte out of the readiness descriptor, and ask for it
 * again if data came meanwhile. */
void vs_rx_settle(uint32_t slot, struct arena_slot *as)
{
	char b[64];
	int fd = vs_poll_fds[slot] - 1;
	if (fd < 0 || !atomic_load(&as->rx_sig) || slot_errq_waiting(as))
		return; /* (a notification waits: epoll is to see it, vsock_errq.c) */
	atomic_store(&as->rx_sig, 0);
	while (rd_take(fd, b, sizeof(b)) == sizeof(b))
		;
	if (as->pair_seg) {
		struct vring v;
		if (vring_of(slot, as, 0, &v) == 0)
			atomic_store(&v.d->rx_want, 1);
	}
	if (vs_poll_mask(slot) & POLLIN) {
		atomic_store(&as->rx_sig, 0);
		vs_poll_bell(slot);
	}
}

/* The send ring was found full: fill the descriptor so it stops being
 * writable (every time: a drain of the hub's may have come between), then
 * say so; the hub drains it when room comes back, and a drain that raced
 * with this fill only wakes a waiter early, which finds the ring full and
 * comes here again. */
void vs_tx_settle(uint32_t slot, struct arena_slot *as)
{
	static const char junk[16384];
	int fd = vs_poll_fds[slot] - 1;
	if (fd < 0)
		return;
	/* a write the descriptor does not take whole filled it: one call */
	while (rd_fill(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk))
		;
	atomic_store(&as->tx_blk, 1);
	if (as->pair_seg) {
		struct vring v;
		if (vring_of(slot, as, 1, &v) == 0)
			atomic_store(&v.d->tx_want, 1);
	}
	/* always: the hub also watches the full ring, to grow it if its
	 * reader stalls (core/hub/resize.c) */
	vs_poll_bell(slot);
}

unsigned vs_poll_settle(uint32_t slot, unsigned claimed)
{
	struct arena_slot *as = cl_slot(slot);
	unsigned m = vs_poll_mask(slot);
	if ((claimed & POLLIN) && !(m & POLLIN))
		vs_rx_settle(slot, as);
	if ((claimed & POLLOUT) && !(m & POLLOUT))
		vs_tx_settle(slot, as);
	return m;
}
