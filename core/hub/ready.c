/*
 * ready.c - readiness descriptors: what poll, select and epoll see of an
 * rshare connection.
 *
 * The descriptor an application holds for an rshare connection is a kernel
 * TCP socket that never connects, so the kernel cannot tell when it is
 * readable.  The first time a process polls such a socket it asks the hub
 * for the socket's readiness descriptor: one end (P) of a unix stream
 * socketpair whose other end (H) the hub keeps.  The library puts P in
 * place of the application's descriptor (dup3 over its number, where
 * nothing is lost by it: preload/ready.c; else P stays beside it and
 * stands in for it in poll, select and epoll_ctl); the kernel then reports
 * P, so every kind of waiting works as it does for kernel sockets: level
 * and edge triggered, one-shot, exclusive, nested epoll sets, fork.  P's
 * readiness mirrors the connection's:
 *
 *   readable  the hub writes one byte into H at every arrival of data (so
 *             that an edge-triggered waiter is woken at each, as for a
 *             kernel socket; the arrivals of one reap of completions are
 *             one: hpoll_reflect_soon) and when the ring is readable while rx_sig is
 *             0 (rx_sig goes 0 -> 1); the process reads the bytes out of P
 *             when it finds the ring empty (rx_sig 1 -> 0) and, should the
 *             ring have filled in between, rings SLOTOP_POLL to be told
 *             again.  Readable means SO_RCVLOWAT bytes or more
 *             (slot_rcvlowat), so arrivals below the mark write nothing;
 *             on one node the hub then asks to hear of the next one
 *             (rx_want).  End of stream: shutdown(H, SHUT_WR), so P reads
 *             POLLIN|POLLRDHUP for good.
 *   writable  P is writable unless a process that found the send ring full
 *             filled P's small send buffer (tx_blk 0 -> 1); the hub drains H
 *             once a quarter of the ring is free again (tx_blk 1 -> 0).
 *   connect   while a nonblocking connect is under way the hub keeps P
 *             filled (not writable); it drains it when the connection is
 *             made, refused, or given to kernel TCP (then nothing more).
 *   listener  a listener's (only for signal-driven I/O: its poll goes by
 *             its eventfd) gets a byte each time the hub wakes it with
 *             connections queued; its accepts read them out, and the
 *             kernel signals the owner the process set on P.
 *   closed    a reset or lost connection: the hub writes a byte into P and
 *             closes H, so the kernel marks P with ECONNRESET (a unix
 *             socket closed with unread data does that to its peer) and P
 *             reads POLLIN|POLLOUT|POLLRDHUP|POLLHUP|POLLERR, as a reset
 *             TCP socket; the error goes with the first read of P, or
 *             when the process takes the reset (vs_take_error: SO_ERROR,
 *             or the call that reports it), as a TCP socket's.  Closed without an error:
 *             H is drained and shut both ways, no POLLERR.
 *
 * The hub keeps P as long as any process holds the socket (a process that
 * asks later gets the same open file), so P's life is the socket's, as a
 * kernel socket's file is: an epoll set forgets it when the socket goes.
 * A socket nobody polls has no descriptor and costs nothing.  The hub's
 * copies of P and H are at most a budget; the rest wait in keepers, and
 * are taken back when needed (keep.c).
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hub.h"
#include "pair.h"

/* Empty H: a read shorter than the buffer found it empty (a unix stream
 * socket gives what it holds), so no second call to learn EAGAIN. */
static void drain(int fd)
{
	char buf[16384]; /* more than P's least send buffer lets it hold: one call */
	while (read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
}

int hpoll_get(struct hsock *s)
{
	int sv[2], small = 1;
	if (!s->as)
		return -EBADF;
	if (s->poll_ends & 1) {
		int p = keep_fd(the_hub, s, 0);
		return p >= 0 ? p : -EBADF;
	}
	if (s->poll_ends)
		return -EBADF; /* P went with a keeper that died */
	keep_trim(the_hub); /* room for two more, waited for near the limit */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* the least the kernel allows: a few KiB fill it */
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	s->poll_p = sv[0];
	s->poll_h = sv[1];
	s->poll_fin = s->poll_hup = 0;
	s->poll_lis = s->state == HS_LISTENING;
	if (!s->poll_lis)
		s->poll_rx_tail = ring_load(&hsock_ring(s, 0)->tail);
	if (s->lp) /* same node: tell the hub at the next arrival */
		atomic_store(&hpair_dir(s, 0)->rx_want, 1);
	atomic_store(&s->as->rx_sig, 0);
	atomic_store(&s->as->tx_blk, 0);
	if (s->state == HS_CONNECTING) {
		/* not writable until the connection is made (or given up):
		 * a write that P does not take whole filled it, in one call */
		static const char junk[16384];
		while (write(s->poll_p, junk, sizeof(junk)) == (ssize_t)sizeof(junk))
			;
		atomic_store(&s->as->tx_blk, 1);
	}
	keep_add(the_hub, s);
	hpoll_reflect(s);
	/* the reflect may have used other sockets' copies: ours stays, the newest */
	return keep_fd(the_hub, s, 0) >= 0 ? s->poll_p : -EBADF;
}

/* Is a quarter of s's send ring free (or its sending side shut)? */
static int tx_room(struct hsock *s, uint32_t flags)
{
	uint64_t head = ring_load(&hsock_ring(s, 1)->head), tail = ring_load(&hsock_ring(s, 1)->tail);
	uint64_t used = tail - head;
	return used > s->tx_size || s->tx_size - used >= s->tx_size / 4 || (flags & SLOTF_TX_SHUT);
}

/* A writer that filled its readiness descriptor: drained once a quarter
 * of its ring is free.  Not yet, on the same node: its reader must ring
 * again at its next read, so the want word is set once more, and the room
 * looked at after (the reader stores its head, then looks at the word),
 * or a reader that took the word for a few bytes would leave the writer
 * unwritable for ever. */
static void tx_reflect(struct hsock *s, int hfd, struct arena_slot *as, uint32_t flags)
{
	if (!tx_room(s, flags)) {
		if (!s->lp)
			return;
		atomic_store(&hpair_dir(s, 1)->tx_want, 1);
		if (!tx_room(s, flags))
			return;
	}
	if (atomic_exchange(&as->tx_blk, 0))
		drain(hfd);
}

void hpoll_reflect(struct hsock *s)
{
	struct arena_slot *as = s->as;
	uint32_t flags;
	uint64_t rx_head, rx_tail, lowat;
	int closed, readable, hfd;
	if (!as || !(s->poll_ends & 2) || s->poll_hup)
		return;
	if ((hfd = keep_fd(the_hub, s, 1)) < 0) {
		/* H cannot be had now (a keeper that has not answered yet, the
		 * hub out of descriptors): looked at again at the next round,
		 * never dropped, or a waiter would sleep for ever */
		if (s->pool && s->pool->base)
			arena_ring(s->pool->base, s->slot, SLOTOP_POLL);
		return;
	}
	if (s->poll_lis) {
		/* a listener's, for the signals of its processes (O_ASYNC):
		 * a byte each time it is woken with connections queued, which
		 * its accepts read out */
		if (s->state == HS_LISTENING && s->qlen && send(hfd, "a", 1, MSG_NOSIGNAL) < 0) {
			/* full: its process has not accepted for a long while */
		}
		return;
	}
	if (s->state == HS_FALLBACK) {
		/* a nonblocking connect given to kernel TCP: writable, so its
		 * waiter comes to learn it */
		drain(hfd);
		atomic_store(&as->tx_blk, 0);
		s->poll_hup = 1;
		return;
	}
	lowat = slot_rcvlowat(as, __atomic_load_n(&as->rx.size, __ATOMIC_RELAXED));
again:
	flags = atomic_load(&as->flags);
	closed = s->state == HS_CLOSED || atomic_load(&as->state) == SLOT_CLOSED;
	/* the process's counters are hints here, nothing is indexed by them */
	rx_tail = ring_load(&hsock_ring(s, 0)->tail);
	rx_head = ring_load(&hsock_ring(s, 0)->head);
	readable = (rx_tail > rx_head && rx_tail - rx_head >= lowat) ||
		   (flags & (SLOTF_RX_FIN | SLOTF_RX_SHUT | SLOTF_RESET)) || closed ||
		   slot_errq_waiting(as); /* P readable for its POLLERR */
	if (!readable && rx_tail > rx_head && s->lp && !atomic_exchange(&hpair_dir(s, 0)->rx_want, 1) &&
	    ring_load(&hsock_ring(s, 0)->tail) != rx_tail)
		goto again; /* below the mark: the next arrival rings (one came meanwhile: look again) */
	if ((readable && !atomic_exchange(&as->rx_sig, 1)) ||
	    (rx_tail != s->poll_rx_tail && (readable || lowat == 1))) {
		atomic_store(&as->rx_sig, 1);
		s->poll_rx_tail = rx_tail;
		/* once H is shut for writing (the end of the stream) P reads
		 * its end for good: a byte more is an EPIPE */
		if (!s->poll_fin && send(hfd, "r", 1, MSG_NOSIGNAL) < 0) {
			/* full of earlier bytes: P is readable anyway */
		}
	}
	if (closed) {
		atomic_store(&as->tx_blk, 0);
		s->poll_hup = 1;
		if (atomic_load(&as->error)) {
			/* unread data in H when it closes (its last copy, a
			 * keeper's too): P gets ECONNRESET */
			int pfd = keep_fd(the_hub, s, 0);
			if (pfd >= 0 && send(pfd, "e", 1, MSG_NOSIGNAL) < 0) {
				/* P is full of the process's filling: unread data anyway */
			}
			keep_close_end(the_hub, s, 1);
		} else {
			drain(hfd);
			shutdown(hfd, SHUT_RDWR);
		}
		return;
	}
	if ((flags & SLOTF_RX_FIN) && !s->poll_fin) {
		shutdown(hfd, SHUT_WR);
		s->poll_fin = 1;
	}
	if (s->state != HS_CONNECTING && atomic_load(&as->tx_blk))
		tx_reflect(s, hfd, as, flags);
}

/* Within a reap of completions, a socket's readiness descriptor is
 * looked at once, after the last of its completions in it, not at each:
 * every look that found new bytes writes one into H, a system call that
 * wakes a poller, and one arrival of the link's stream often holds
 * several writes for one socket.  An edge-triggered waiter then gets one
 * edge for them, as for the segments that the kernel takes in one pass. */
void hpoll_reflect_soon(struct hub *h, struct hsock *s)
{
	if (!h->reflect_defer) {
		hpoll_reflect(s);
		return;
	}
	if (s->reflect_queued)
		return;
	if (sid_push(&h->reflect, &h->nreflect, &h->reflect_cap, s->sid) < 0) {
		hpoll_reflect(s);
		return;
	}
	s->reflect_queued = 1;
}

void hpoll_reflect_queued(struct hub *h)
{
	h->reflect_defer = 0;
	for (uint32_t i = 0; i < h->nreflect; i++) {
		struct hsock *s = h->socks[h->reflect[i]];
		if (s && s->reflect_queued) {
			s->reflect_queued = 0;
			hpoll_reflect(s);
		}
	}
	h->nreflect = 0;
}

void hpoll_close(struct hsock *s)
{
	keep_close_end(the_hub, s, 1);
	keep_close_end(the_hub, s, 0);
	s->poll_p = s->poll_h = -1;
}
