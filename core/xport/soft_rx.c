/*
 * soft_rx.c - the receiving side of the `soft` transport: the link's
 * incoming stream, read into one buffer and parsed frame by frame.
 *
 * The first frame must be the peer's HELLO (it brings the link up); after
 * it, a write with immediate is placed where the hub says its payload
 * belongs and completes as a receive with the immediate, and a send fills
 * the oldest posted receive, or stops the parse (the socket is no longer
 * read) until one is posted.  A frame that breaks the protocol drops the
 * link.
 */
#include <errno.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "log.h"
#include "soft.h"

/* Each frame handler: 0 frame taken, 1 not now (stop parsing, keep the
 * frame), -1 the link failed or closed (stop, touch nothing more). */

static int rx_hello(struct soft_link *sl, const struct wire_frame *f, const uint8_t *pay)
{
	struct hub *h = sl->sx->h;
	struct wire_hello hh;
	const char *why;
	if (f->type != FR_HELLO) {
		hub_count_malformed(h);
		fail(sl, "first frame is not HELLO");
		return -1;
	}
	if (wire_hello_decode(pay, f->len, &hh, &why) < 0) {
		hub_count_malformed(h);
		fail(sl, why);
		return -1;
	}
	sl->hello_in = 1;
	hub_link_up(sl->l, hh.node_id);
	return 0;
}

static int rx_write(struct soft_link *sl, const struct wire_frame *f, const uint8_t *pay)
{
	struct iovec iov[2];
	int again = 0, n = hub_rx_target(sl->l, f->imm, f->raddr, f->len, iov, &again);
	if (sl->closed)
		return -1;
	if (n < 0) {
		hub_count_malformed(sl->sx->h);
		fail(sl, "write outside its socket's ring window");
		return -1;
	}
	if (n > 0) {
		const uint8_t *src = pay;
		struct xwc wc = {.op = XWC_RECV_IMM, .imm = f->imm, .byte_len = f->len,
				 .link = sl->l};
		for (int i = 0; i < n; i++) {
			memcpy(iov[i].iov_base, src, iov[i].iov_len);
			src += iov[i].iov_len;
		}
		if (!again) /* else counted by the hub that died in it */
			soft_cq_push(sl->sx, &wc);
	}
	return 0;
}

static int rx_send(struct soft_link *sl, const struct wire_frame *f, const uint8_t *pay)
{
	struct soft_recv *r;
	struct xwc wc = {.op = XWC_RECV, .byte_len = f->len, .link = sl->l};
	if (!sl->rq_n) {
		if (sl->draining)
			return 0; /* the link is down: nothing would take it */
		sl->stalled = 1; /* receiver not ready: wait for post_recv */
		return 1;
	}
	r = &sl->rq[sl->rq_head];
	sl->rq_head = (sl->rq_head + 1) % sl->rq_cap;
	sl->rq_n--;
	memcpy(r->buf, pay, f->len < r->len ? f->len : r->len);
	wc.wr_id = r->wr_id;
	soft_cq_push(sl->sx, &wc);
	return 0;
}

static int rx_frame(struct soft_link *sl, const struct wire_frame *f, const uint8_t *pay)
{
	if (!sl->hello_in)
		return rx_hello(sl, f, pay);
	if (f->type == FR_HELLO) {
		hub_count_malformed(sl->sx->h);
		fail(sl, "second HELLO");
		return -1;
	}
	if (f->type == FR_WRITE_IMM)
		return rx_write(sl, f, pay);
	return rx_send(sl, f, pay); /* FR_SEND */
}

void soft_parse(struct soft_link *sl)
{
	struct soft_inpos ip = soft_in(sl);
	uint32_t len = ip.len, off = ip.off;
	struct hub *h = sl->sx->h;
	sl->need_parse = 0;
	while (!sl->closed && len - off >= WIRE_FRAME_LEN) {
		struct wire_frame f;
		const char *why;
		const uint8_t *p = sl->in + off;
		int r;
		if (wire_frame_decode(p, &f, &why) < 0) {
			hub_count_malformed(h);
			fail(sl, why);
			return;
		}
		if (len - off < WIRE_FRAME_LEN + (size_t)f.len)
			break;
		r = rx_frame(sl, &f, p + WIRE_FRAME_LEN);
		if (r < 0)
			return;
		if (r > 0)
			break;
		off += WIRE_FRAME_LEN + f.len;
		soft_in_set(sl, ip.base, len, off);
	}
	if (sl->closed)
		return;
	if (off && off == len)
		soft_in_set(sl, ip.base + len, 0, 0);
	soft_set_events(sl);
}

/* One read into the incoming buffer: its length, 0 at the end, -1 (errno) */
static ssize_t read_some(struct soft_link *sl)
{
	struct soft_inpos ip = soft_in(sl);
	uint64_t base = ip.base;
	uint32_t len = ip.len, off = ip.off;
	ssize_t n;
	if (off && len - off <= off && sl->icap - len < SOFT_IN_CHUNK) {
		/* the unparsed rest to the front, where it overlaps nothing it
		 * is copied from: a successor finds one or the other whole */
		memcpy(sl->in, sl->in + off, len - off);
		base += off;
		len -= off;
		off = 0;
		soft_in_set(sl, base, len, off);
	}
	if (sl->icap - len < SOFT_IN_CHUNK) {
		size_t cap = len + SOFT_IN_CHUNK + WIRE_FRAME_LEN + WIRE_MAX_WRITE;
		uint8_t *b = realloc(sl->in, cap);
		if (!b) {
			errno = EAGAIN;
			return -1;
		}
		sl->in = b;
		sl->icap = cap;
	}
	n = recv(sl->fd, sl->in + len, sl->icap - len, MSG_DONTWAIT);
	if (n > 0) {
		soft_in_set(sl, base, len + (uint32_t)n, off);
		sl->rcvd += (uint64_t)n;
	}
	return n;
}

void soft_on_readable(struct soft_link *sl)
{
	ssize_t n = read_some(sl);
	if (n == 0) {
		if (!sl->closed)
			hub_link_lost(sl->l, "peer closed the link");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			fail_errno(sl, errno);
		return;
	}
	soft_parse(sl);
}

/* tcpi_state's values, as <netinet/tcp.h> names them (it does not go with
 * <linux/tcp.h>, whose tcp_info has tcpi_bytes_received) */
enum { ST_ESTABLISHED = 1, ST_FIN_WAIT1 = 4, ST_FIN_WAIT2 = 5 };

/* A hub killed in a recv (SIGKILL ends it on the call's way out) took
 * bytes from the kernel that it did not count: they are in the buffer,
 * after what it counted.  The kernel's count of the bytes read (those it
 * received less those still queued, looked at until no byte came between
 * the looks) says how many; not once the peer's FIN came, which both
 * counts take in (established, or our FIN sent). */
static void soft_in_recover(struct soft_link *sl)
{
	struct soft_inpos ip = soft_in(sl);
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	int q1, q2, tries = 0;
	uint64_t read, have = ip.base + ip.len;
	do {
		if (ioctl(sl->fd, SIOCINQ, &q1) < 0 || getsockopt(sl->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0 ||
		    tl < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received) ||
		    ioctl(sl->fd, SIOCINQ, &q2) < 0)
			return;
	} while (q1 != q2 && ++tries < 100);
	read = ti.tcpi_bytes_received - (uint64_t)q1;
	if (q1 != q2 || (ti.tcpi_state != ST_ESTABLISHED && ti.tcpi_state != ST_FIN_WAIT1 && ti.tcpi_state != ST_FIN_WAIT2) || read <= have ||
	    read - have > sl->icap - ip.len)
		return;
	log_info("link %u: %llu bytes read by a hub that died before it counted them: parsed now", sl->l->id,
		 (unsigned long long)(read - have));
	soft_in_set(sl, ip.base, ip.len + (uint32_t)(read - have), ip.off);
}

/* A lost link, before it is closed: every byte the kernel took from the
 * peer (and acknowledged: the peer counts those writes complete) is read
 * and placed, or the peer could not go on (resume.c).  With WAIT_MS (this
 * hub lets go of a link that works: a restart, a successor), the link is
 * half-closed and read until the peer's end, for at most WAIT_MS: what
 * the peer sends until it sees the end is placed too, and the close that
 * follows finds nothing unread (which would reset the connection and lose
 * bytes the peer counts complete).  A control message that finds no posted
 * receive then is passed over, not waited for: the link is down, nothing
 * would take it (the hub may have died with many unrouted), and the bytes
 * behind it must be read. */
void soft_link_drain(struct xlink *l, int wait_ms)
{
	struct soft_link *sl = SL(l);
	int left = wait_ms;
	if (!sl || sl->closed)
		return;
	soft_in_recover(sl);
	if (wait_ms > 0)
		shutdown(sl->fd, SHUT_WR);
	sl->draining = 1;
	/* what the buffer holds first (a stalled parse's rest, a dead hub's
	 * last read): the reads below may find nothing more */
	sl->stalled = 0;
	soft_parse(sl);
	for (int i = 0; !sl->closed && i < 4096; i++) {
		ssize_t n = read_some(sl);
		if (n < 0 && errno == EAGAIN && left > 0) {
			/* poll's wait, counted in whole steps: no clock needed */
			struct pollfd p = {.fd = sl->fd, .events = POLLIN};
			if (poll(&p, 1, 10) == 0)
				left -= 10;
			continue;
		}
		if (n <= 0)
			return;
		soft_parse(sl);
	}
}

