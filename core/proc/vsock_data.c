/*
 * vsock_data.c - send and recv on arena slots.
 *
 * Data never goes through the hub's connection: send copies into the
 * slot's tx ring, publishes the tail and rings the doorbell (kicking the
 * hub only when it sleeps); recv copies out of the rx ring, publishes the
 * head and, once a quarter of the ring has been consumed, asks the hub to
 * return credit to the sender.  A thread that must wait sleeps on the
 * slot's futex word, which the hub bumps on every event (vsock_wait.c).
 * Concurrent readers (or writers) of one socket, in any processes of the
 * pool, serialize on the slot's robust mutex, so each byte goes to exactly
 * one reader.
 *
 * A same-node connection (pair.h) has its rings in the pair segment of the
 * two pools instead: send and recv work on them the same way, but nothing
 * needs the hub unless the other side sleeps (rx_want, tx_want).
 */
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include "vsock_int.h"

static void raise_sigpipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGPIPE);
}

/* One send or recv under way: the socket, its ring, the caller's buffers
 * (the next iovec and how far into it), what is done so far, and what
 * the call returns when nothing was moved (ret). */
struct xfer {
	uint32_t slot;
	struct arena_slot *as;
	struct vring v;
	const struct iovec *iov;
	int iovcnt, vi;
	size_t voff, total, want;
	int flags, nonblock;
	ssize_t ret;
	uint64_t deadline; /* SO_RCVTIMEO or SO_SNDTIMEO: when the wait ends, 0 never */
	uint64_t spun;     /* total + 1 at the last spin, 0 before the first */
	uint32_t sig0[2];  /* vs_sig_runs at the start */
};

VS_INLINE void xfer_init(struct xfer *x, uint32_t slot, const struct iovec *iov, int iovcnt, int flags, int tx)
{
	int64_t tmo;
	x->slot = slot;
	x->as = cl_slot(slot);
	x->iov = iov;
	x->iovcnt = iovcnt;
	x->vi = 0;
	x->voff = x->total = x->want = 0;
	x->flags = flags;
	x->nonblock = (flags & MSG_DONTWAIT) || (atomic_load(&x->as->flags) & SLOTF_NONBLOCK);
	x->ret = 0;
	x->deadline = x->spun = 0;
	vs_sig_mark(x->sig0);
	for (int i = 0; i < iovcnt; i++)
		x->want += iov[i].iov_len;
	/* the program's timeout counts from the call's start, as the kernel's */
	tmo = x->as->opts.tmo_us[tx];
	if (!x->nonblock && tmo > 0)
		x->deadline = sys_now_ns() + (uint64_t)tmo * 1000u;
}

/* Has a handler run on this thread since the call began that would have
 * ended kernel TCP's blocked call with EINTR: one installed without
 * SA_RESTART, or any under SO_RCVTIMEO or SO_SNDTIMEO (preload/signal.c
 * counts them)?  Looked at before every wait and just before the sleep,
 * so that a handler that ran while the thread spun, or as its sleep ended
 * for nothing, ends the call as the kernel's. */
VS_INLINE int xfer_signalled(const struct xfer *x)
{
	return vs_sig_since(x->sig0, x->deadline != 0);
}

/* Before a wait: the watch on the hub made (vsock_wait.c: no system call
 * between the last look and the sleep), -EINTR when a signal interrupted
 * its connect or a handler ran (xfer_signalled); then 1 to spin first: at
 * the call's first wait and after one that moved bytes (a waiter woken
 * with nothing for it sleeps again at once). */
VS_INLINE int xfer_pre_wait(struct xfer *x)
{
	int r = x->spun != x->total + 1;
	if (cl_watch() == -EINTR || xfer_signalled(x))
		return -EINTR;
	x->spun = x->total + 1;
	return r;
}

/* How long a blocking wait may sleep: up to LEFT ns (0: no limit of its
 * own) and the call's deadline; 1 when the deadline has passed. */
static int xfer_left(const struct xfer *x, uint64_t *left)
{
	uint64_t now;
	if (!x->deadline)
		return 0;
	now = sys_now_ns();
	if (now >= x->deadline)
		return 1;
	if (!*left || x->deadline - now < *left)
		*left = x->deadline - now;
	return 0;
}

/* Up to ROOM bytes between the caller's buffers and the ring at POS, into
 * the ring (send) or out of it (recv, OUT; with MSG_TRUNC counted and
 * left, as tcp_recvmsg discards them, the buffers never touched); the
 * bytes moved. */
VS_INLINE size_t xfer_copy(struct xfer *x, uint64_t pos, uint64_t room, int out)
{
	size_t done = 0;
	while (room && x->vi < x->iovcnt) {
		size_t n = x->iov[x->vi].iov_len - x->voff;
		uint8_t *b = (uint8_t *)x->iov[x->vi].iov_base + x->voff;
		if (n > room)
			n = room;
		if (out) {
			if (!(x->flags & MSG_TRUNC))
				ring_copy_out(x->v.base, x->v.size, pos, b, n);
		} else
			ring_copy_in(x->v.base, x->v.size, pos, b, n);
		pos += n;
		room -= n;
		done += n;
		x->voff += n;
		if (x->voff == x->iov[x->vi].iov_len) {
			x->vi++;
			x->voff = 0;
		}
	}
	x->total += done;
	return done;
}

/* ---- send ---- */

/* 1 when the send cannot go on: the hub is gone, a connect is under way,
 * or the socket is closed or shut for writing. */
VS_INLINE int send_stop(struct xfer *x)
{
	uint32_t st = atomic_load(&x->as->state);
	int err;
	if (cl_hub_dead()) {
		/* the hub that carried this connection is gone */
		if (!x->total)
			raise_sigpipe(x->flags);
		x->ret = x->total ? 0 : -EPIPE;
		return 1;
	}
	if (st == SLOT_CONNECTING) {
		x->ret = x->total ? 0 : -EAGAIN; /* a nonblocking connect under way */
		return 1;
	}
	if (st != SLOT_ESTABLISHED || (atomic_load(&x->as->flags) & SLOTF_TX_SHUT)) {
		/* bytes moved: they are the answer, the error waits for the next call */
		if (x->total)
			return 1;
		err = st == SLOT_CLOSED ? vs_take_error(x->slot) : 0;
		if (!err || err == EPIPE) {
			raise_sigpipe(x->flags);
			err = EPIPE;
		}
		x->ret = -err;
		return 1;
	}
	return 0;
}

/* send_full's wait, spin and sleep, without the ring's lock (as a recv's,
 * recv_wait_unlocked): 0 to look again, 1 to give up (x->ret set) */
VS_INLINE int send_wait_unlocked(struct xfer *x, uint32_t seq, uint64_t head, uint64_t left, int spin)
{
	struct arena_slot *as = x->as;
	struct vring *v = &x->v;
	int err;
	if ((spin && (v->d || cl.spin_hub) && vs_spin_ring(&as->tx_seq, seq, &v->c->head, head, NULL)) ||
	    (v->d && vs_want_wake(&v->d->tx_want, &v->c->head, head)))
		return 0;
	if (xfer_left(x, &left)) {
		x->ret = x->total ? 0 : -EAGAIN; /* SO_SNDTIMEO */
		return 1;
	}
	if (xfer_signalled(x)) {
		x->ret = x->total ? 0 : -EINTR;
		return 1;
	}
	err = vs_wait_word(&as->tx_seq, &as->tx_waiters, seq, left);
	if (!err || err == -ETIMEDOUT)
		return 0; /* stalled, maybe, or the deadline: look again */
	if (err == -ECONNRESET)
		raise_sigpipe(x->flags);
	x->ret = x->total ? 0 : (err == -ECONNRESET ? -EPIPE : err);
	return 1;
}

/* The send ring is full: 1 to give up (nonblocking, or the wait failed),
 * 0 to look again once the head moved, the ring grew, the hub said
 * anything or (LEFT) the time to call it stalled has come. */
VS_INLINE int send_full(struct xfer *x, uint32_t seq, uint64_t head)
{
	struct arena_slot *as = x->as;
	uint64_t left = 0;
	uint32_t d;
	int r, spin;
	/* blocking writers only: a nonblocking one is told EAGAIN and woken
	 * through its readiness descriptor, which the growth would not track */
	if (!x->nonblock && vs_tx_may_grow(x->slot, as->gen, x->v.size)) {
		/* a ring below the kernel's default (verbs starts small) grows
		 * the first time it is full, stalled reader or not (vsock_grow.c) */
		left = x->v.size < ARENA_DEFAULT_RING ? 0 : vs_tx_stall_left(x->slot, head);
		if (!left && vs_tx_grow(x->slot, as->gen))
			return 0;
	}
	if (x->nonblock) {
		x->ret = x->total ? 0 : -EAGAIN;
		if (vs_poll_fds[x->slot])
			vs_tx_settle(x->slot, as);
		return 1;
	}
	if ((spin = xfer_pre_wait(x)) < 0) {
		x->ret = x->total ? 0 : spin;
		return 1;
	}
	pthread_mutex_unlock(&as->tx_lock);
	d = vs_wait_enter(x->slot, (uintptr_t)__builtin_frame_address(0));
	vs_sig_hold_end(); /* handlers put off run here, as before a blocked call's wait */
	r = send_wait_unlocked(x, seq, head, left, spin);
	vs_sig_hold_begin();
	vs_wait_leave(d);
	vs_lock(&as->tx_lock, &as->tx_in);
	return r;
}

/* The new tail for the reader, and the bell (a same-node reader: only
 * when it sleeps). */
VS_INLINE void send_publish(struct xfer *x, uint64_t tail)
{
	struct vring *v = &x->v;
	if (v->d) {
		vs_other_bell(x->slot, &v->c->tail, tail, &v->d->rx_want, SLOTOP_TX);
	} else {
		ring_store(&v->c->tail, tail);
		vs_ring_bell(x->slot, SLOTOP_TX);
	}
}

VS_INLINE ssize_t send_call(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	struct xfer x;
	struct arena_slot *as;
	int grown = 0;
	xfer_init(&x, slot, iov, iovcnt, flags, 1);
	as = x.as;
	if (x.want == 0 && atomic_load(&as->state) == SLOT_ESTABLISHED)
		return 0;
	vs_lock(&as->tx_lock, &as->tx_in);
	while (x.total < x.want) {
		uint32_t seq = atomic_load(&as->tx_seq);
		uint64_t tail, head, space;
		if (send_stop(&x))
			break;
		vs_ring_enter(&as->tx_in, &as->tx_hold);
		if (vring_of(slot, as, 1, &x.v) < 0) {
			vs_ring_leave(&as->tx_in);
			x.ret = x.total ? 0 : -EPIPE;
			break;
		}
		tail = atomic_load_explicit(&x.v.c->tail, memory_order_relaxed);
		head = ring_load(&x.v.c->head);
		space = tail - head >= x.v.size ? 0 : x.v.size - (tail - head);
		if (!grown && space < x.want - x.total &&
		    (x.v.d ? vs_tx_may_fit(slot, as->gen, x.v.size)
			   : x.v.size < ARENA_DEFAULT_RING && vs_tx_may_grow(slot, as->gen, x.v.size))) {
			/* kernel TCP takes such a write whole: on one node the
			 * ring grows to hold it, as loopback's send buffer would
			 * (vsock_grow.c); a link's ring below the kernel's default
			 * (verbs, idle) grows before the write's first byte, so
			 * that nothing the peer answers to its first part (a
			 * reset) comes before the call returns */
			grown = 1;
			vs_ring_leave(&as->tx_in);
			if (x.v.d)
				vs_tx_fit(slot, as->gen, x.v.size, tail - head + (x.want - x.total));
			else
				vs_tx_grow(slot, as->gen);
			continue;
		}
		if (space == 0) {
			vs_ring_leave(&as->tx_in);
			if (send_full(&x, seq, head))
				break;
			continue;
		}
		tail += xfer_copy(&x, tail, space, 0);
		send_publish(&x, tail);
		vs_ring_leave(&as->tx_in);
	}
	pthread_mutex_unlock(&as->tx_lock);
	return x.total ? (ssize_t)x.total : x.ret;
}

/* ---- recv ---- */

/* Bytes taken out up to POS: the new head for the writer, and its credit
 * (by the quarter of the ring). */
VS_INLINE void recv_consumed(struct xfer *x, uint64_t tail, uint64_t pos)
{
	struct vring *v = &x->v;
	if (v->d) {
		/* a writer waiting for room gets it by the quarter */
		if (v->size - (tail - pos) >= v->size / 4)
			vs_other_bell(x->slot, &v->c->head, pos, &v->d->tx_want, SLOTOP_CREDIT);
		else
			ring_store(&v->c->head, pos);
	} else {
		uint64_t csz = atomic_load_explicit(&x->as->rx_credit_size, memory_order_relaxed);
		ring_store(&v->c->head, pos);
		if (!csz || csz > v->size)
			csz = v->size;
		if (pos - atomic_load(&x->as->rx_credit_mark) >= csz / 4) {
			atomic_store(&x->as->rx_credit_mark, pos);
			vs_ring_bell(x->slot, SLOTOP_CREDIT);
		}
	}
}

/* The ring is empty: 1 when the recv ends here (end of file, the hub
 * gone, a connect under way, the socket closed, nonblocking), given the
 * flags FL read before the tail. */
VS_INLINE int recv_stop(struct xfer *x, uint32_t fl)
{
	uint32_t st;
	int err;
	if (fl & (SLOTF_RX_FIN | SLOTF_RX_SHUT))
		return 1; /* EOF */
	if (cl_hub_dead()) {
		if (!x->total)
			x->ret = -ECONNRESET;
		return 1;
	}
	st = atomic_load(&x->as->state);
	if (st == SLOT_CONNECTING) {
		if (!x->total)
			x->ret = -EAGAIN; /* a nonblocking connect under way */
		return 1;
	}
	if (st != SLOT_ESTABLISHED) {
		/* as the kernel: a reset is told once, to the first call that
		 * moves nothing (or SO_ERROR), and the reads after it see EOF */
		if (x->total)
			return 1;
		err = st == SLOT_CLOSED ? vs_take_error(x->slot) : ENOTCONN;
		if (err)
			x->ret = -err;
		return 1;
	}
	if (x->nonblock) {
		if (!x->total)
			x->ret = -EAGAIN;
		return 1;
	}
	return 0;
}

/* recv_wait's wait, spin and sleep, without the ring's lock: kernel TCP's
 * blocked call holds no lock of the socket while it waits, so a signal
 * handler that leaves the wait with a longjmp (an old program's timeout)
 * leaves the socket usable, by this thread or another; and a second
 * reader is not kept from the ring meanwhile.  0 to look again, 1 when
 * the wait failed. */
VS_INLINE int recv_wait_unlocked(struct xfer *x, uint32_t seq, uint64_t tail, int spin)
{
	struct arena_slot *as = x->as;
	struct vring *v = &x->v;
	uint64_t left = 0;
	int err;
	/* a link's ring: TAIL may be a placed tail (arena.h), which moves
	 * first; the counter's moves since come with an rx_seq past seq */
	if ((spin && (v->d || cl.spin_hub || atomic_load_explicit(&as->rx_placed_tag, memory_order_relaxed)) &&
	     vs_spin_ring(&as->rx_seq, seq, &v->c->tail, v->d ? tail : ring_load(&v->c->tail),
			  v->d ? NULL : &as->rx_placed)) ||
	    (v->d && vs_want_wake(&v->d->rx_want, &v->c->tail, tail)))
		return 0;
	if (xfer_left(x, &left)) {
		if (!x->total)
			x->ret = -EAGAIN; /* SO_RCVTIMEO */
		return 1;
	}
	if (xfer_signalled(x)) {
		if (!x->total)
			x->ret = -EINTR;
		return 1;
	}
	err = vs_wait_word(&as->rx_seq, &as->rx_waiters, seq, left);
	if (err == -ETIMEDOUT)
		return 0; /* the deadline: look again */
	if (err && !x->total)
		x->ret = err;
	return err != 0;
}

/* Wait for the tail to leave TAIL: 0 to look again, 1 when the wait failed. */
VS_INLINE int recv_wait(struct xfer *x, uint32_t seq, uint64_t tail)
{
	uint32_t d;
	int spin, r;
	if ((spin = xfer_pre_wait(x)) < 0) {
		if (!x->total)
			x->ret = spin;
		return 1;
	}
	pthread_mutex_unlock(&x->as->rx_lock);
	d = vs_wait_enter(x->slot, (uintptr_t)__builtin_frame_address(0));
	vs_sig_hold_end();
	r = recv_wait_unlocked(x, seq, tail, spin);
	vs_sig_hold_begin();
	vs_wait_leave(d);
	vs_lock(&x->as->rx_lock, &x->as->rx_in);
	return r;
}

VS_INLINE ssize_t recv_call(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	struct xfer x;
	struct arena_slot *as;
	int peek = flags & MSG_PEEK, waitall = flags & MSG_WAITALL;
	uint64_t target, skip;
	int32_t lowat;
	if (flags & MSG_ERRQUEUE) /* a notification taken, its message lost (vsock_errq.c) */
		return vs_errq_take(cl_slot(slot), &(uint32_t){0}, &(uint32_t){0}) ? 0 : -EAGAIN;
	if (flags & MSG_OOB)
		return -EINVAL; /* urgent data goes inline (rshare(7)): none is ever waiting */
	xfer_init(&x, slot, iov, iovcnt, flags, 0);
	as = x.as;
	if (x.want == 0)
		return 0;
	/* as tcp_recvmsg: a blocking read goes on until it has the length
	 * (MSG_WAITALL) or SO_RCVLOWAT bytes, whichever is less; a peek too,
	 * from SO_PEEK_OFF on, each pass taking the bytes after those it saw
	 * (or once the ring is full: no more can come while they stay) */
	lowat = __atomic_load_n(&as->opts.ival[SLOT_OPTI_RCVLOWAT], __ATOMIC_RELAXED);
	target = waitall ? x.want : lowat <= 1 ? 1 : (uint64_t)lowat < x.want ? (uint64_t)lowat : x.want;
	vs_lock(&as->rx_lock, &as->rx_in);
	skip = peek ? peek_off_skip(as) : 0;
	for (;;) {
		uint32_t seq = atomic_load(&as->rx_seq);
		/* the flags before the tail: the hub publishes the last bytes'
		 * tail before it sets FIN, so a FIN seen here comes with them */
		uint32_t fl = atomic_load(&as->flags);
		uint64_t head, tail, avail;
		vs_ring_enter(&as->rx_in, &as->rx_hold);
		if (vring_of(slot, as, 0, &x.v) < 0) {
			vs_ring_leave(&as->rx_in);
			if (!x.total)
				x.ret = -ECONNRESET;
			break;
		}
		head = atomic_load_explicit(&x.v.c->head, memory_order_relaxed);
		tail = vring_tail(&x.v, head);
		/* same node: the ring may have grown (its writer asked); a tail
		 * past the old bytes comes with the new geometry, seen here */
		if (x.v.d && __builtin_expect(__atomic_load_n(&as->rx.size, __ATOMIC_ACQUIRE) != x.v.size, 0))
			continue;
		avail = tail - head;
		if (avail > x.v.size)
			avail = 0; /* a corrupt counter (only the writer could): give nothing */
		if (avail > (peek ? skip + x.total : 0)) {
			uint64_t from = peek ? head + skip + x.total : head;
			uint64_t pos = from + xfer_copy(&x, from, tail - from, 1);
			if (!peek)
				recv_consumed(&x, tail, pos);
			vs_ring_leave(&as->rx_in);
			if (x.total >= target || (peek && avail >= x.v.size))
				break;
			continue;
		}
		vs_ring_leave(&as->rx_in);
		if (recv_stop(&x, fl) || recv_wait(&x, seq, tail))
			break;
	}
	if (vs_poll_fds[slot] && !peek && atomic_load(&as->rx_sig) && vring_of(slot, as, 0, &x.v) == 0) {
		uint64_t head = atomic_load_explicit(&x.v.c->head, memory_order_relaxed);
		if (vring_tail(&x.v, head) - head < slot_rcvlowat(as, x.v.size))
			vs_rx_settle(slot, as);
	}
	if (x.total)
		peek_off_move(as, peek, x.total);
	pthread_mutex_unlock(&as->rx_lock);
	return x.total ? (ssize_t)x.total : x.ret;
}

static int ring_used(uint32_t slot, int tx)
{
	struct vring v;
	if (vring_of(slot, cl_slot(slot), tx, &v) < 0)
		return 0;
	return (int)vring_used(&v);
}

int vs_nread(uint32_t slot)
{
	return ring_used(slot, 0);
}

int vs_nunsent(uint32_t slot)
{
	return cl_slot(slot)->pair_seg ? 0 : ring_used(slot, 1);
}

int vs_nroom(uint32_t slot)
{
	struct vring v;
	uint64_t size;
	if (vring_of(slot, cl_slot(slot), 1, &v) < 0)
		return 0;
	size = v.d ? __atomic_load_n(&v.g->size, __ATOMIC_ACQUIRE) : v.size;
	return (int)(size - vring_used(&v));
}

/* ---- the calls: each holds the socket while it runs ---- */

/* Each puts off the program's signal handlers while it holds the socket,
 * its waits aside (vsock_sig.c): copies, and holds taken and given back,
 * are never cut by a handler's own send or jump. */
ssize_t vs_send(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t r = -EBADF;
	vs_sig_hold_begin();
	if (!vs_call_begin(slot)) {
		r = send_call(slot, iov, iovcnt, flags);
		if (r > 0 && (flags & MSG_ZEROCOPY))
			vs_errq_sent(slot);
		vs_call_end(slot);
	}
	vs_sig_hold_end();
	return r;
}

ssize_t vs_recv(uint32_t slot, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t r = -EBADF;
	vs_sig_hold_begin();
	if (!vs_call_begin(slot)) {
		r = recv_call(slot, iov, iovcnt, flags);
		vs_call_end(slot);
	}
	vs_sig_hold_end();
	return r;
}
