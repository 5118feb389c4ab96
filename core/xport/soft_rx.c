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
 *
 * A write whose payload the buffer lacks SOFT_DIRECT_MIN bytes or more of
 * is read straight into its ring, without the copy through the buffer,
 * when the kernel holds all the rest of it (SIOCINQ) and the hub says
 * where it goes (hub_rx_peek): what the buffer has of it is copied there,
 * the stream's position says so (DIRECT: a successor of a hub killed in
 * the read finds the bytes in the ring, and finishes it), the rest comes
 * in one recvmsg, and only then is the write counted (hub_rx_target, the
 * same place) and completed, as a NIC's write is.  A rest that did not
 * come whole is copied back to the buffer at once and goes the buffer's
 * way: the hub does nothing between, so no ring moves (resize.c) under a
 * write half placed.  After a large write the next read takes the next
 * header alone (and after a large write's rest too small to go this way,
 * that rest alone), so that a stream of large writes goes the same way.
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

/* IOV's N pieces from byte AT on, into REST: their count */
static int iov_from(const struct iovec *iov, int n, uint32_t at, struct iovec rest[2])
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (at >= iov[i].iov_len) {
			at -= (uint32_t)iov[i].iov_len;
			continue;
		}
		rest[k].iov_base = (uint8_t *)iov[i].iov_base + at;
		rest[k++].iov_len = iov[i].iov_len - at;
		at = 0;
	}
	return k;
}

/* LEN bytes between P and IOV's N pieces from byte AT on (OUT: into them) */
static void iov_copy(const struct iovec *iov, int n, uint32_t at, uint8_t *p, uint32_t len, int out)
{
	struct iovec v[2];
	int k = iov_from(iov, n, at, v);
	for (int i = 0; i < k && len; i++) {
		size_t c = v[i].iov_len < len ? v[i].iov_len : len;
		if (out)
			memcpy(v[i].iov_base, p, c);
		else
			memcpy(p, v[i].iov_base, c);
		p += c;
		len -= (uint32_t)c;
	}
}

/* A frame's header: 0, or -1 when malformed.  A write that names its
 * writer's socket (WIRE_BY_SRC: sent before our hub's ACCEPT reached the
 * writer's) is made to name ours from here on.  Where we know none yet
 * while completions pushed before it wait for the hub (its CONNECT among
 * them: this parse runs ahead of the hub), 1 when the parse may WAIT for
 * them; after them, one still unknown is dropped, as a write for a socket
 * that is gone (its CONNECT refused). */
static int frame_decode(struct soft_link *sl, const uint8_t *in, struct wire_frame *f, const char **why, int wait)
{
	uint32_t imm;
	if (wire_frame_decode(in, f, why) < 0)
		return -1;
	if (f->type == FR_WRITE_IMM && (f->raddr & WIRE_BY_SRC)) {
		imm = hub_rx_by_src(sl->l, f->imm);
		if (!imm && wait) {
			if (!sl->by_src_wait) {
				sl->by_src_wait = 1;
				sl->by_src_mark = sl->sx->cq_pushed;
			}
			if (sl->sx->cq_taken < sl->by_src_mark)
				return 1;
		}
		sl->by_src_wait = 0;
		f->raddr &= ~WIRE_BY_SRC;
		f->imm = imm;
	}
	return 0;
}

/* A write counted (hub_rx_target: where its payload goes, into IOV): the
 * iov count, 0 to discard it, -1 the link failed or closed */
static int write_count(struct soft_link *sl, const struct wire_frame *f, struct iovec iov[2], int *again)
{
	int n = hub_rx_target(sl->l, f->imm, f->raddr, f->len, iov, again);
	if (sl->closed)
		return -1;
	if (n < 0) {
		hub_count_malformed(sl->sx->h);
		fail(sl, "write outside its socket's ring window");
	}
	return n;
}

/* ... and placed: it completes, unless it was counted already (AGAIN: by
 * the hub that died in it) */
static void write_complete(struct soft_link *sl, const struct wire_frame *f, int again)
{
	struct xwc wc = {.op = XWC_RECV_IMM, .imm = f->imm, .byte_len = f->len, .link = sl->l};
	if (!again)
		soft_cq_push(sl->sx, &wc);
}

static int rx_write(struct soft_link *sl, const struct wire_frame *f, const uint8_t *pay)
{
	struct iovec iov[2];
	int again = 0, n = write_count(sl, f, iov, &again);
	if (n < 0)
		return -1;
	if (n > 0) {
		iov_copy(iov, n, 0, (uint8_t *)pay, f->len, 1); /* only read */
		write_complete(sl, f, again);
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

/* ---- a write's payload straight into its ring ---- */

static int large_write(const struct wire_frame *f)
{
	return f->type == FR_WRITE_IMM && f->len >= SOFT_DIRECT_MIN;
}

/* The frame at IP's OFF, whose payload the buffer does not hold whole,
 * goes straight to its ring (direct_go reads it there): 1, else 0 */
static int direct_begin(struct soft_link *sl, struct soft_inpos ip, const struct wire_frame *f)
{
	uint32_t have = ip.len - ip.off - WIRE_FRAME_LEN;
	size_t end = (size_t)ip.off + WIRE_FRAME_LEN + f->len;
	int q;
	if (f->type != FR_WRITE_IMM || f->len - have < SOFT_DIRECT_MIN || !sl->hello_in)
		return 0;
	sl->dn = hub_rx_peek(sl->l, f->imm, f->raddr, f->len, sl->dv);
	if (sl->dn <= 0 || ioctl(sl->fd, SIOCINQ, &q) < 0 || q < 0 || (uint32_t)q < f->len - have)
		return 0;
	if (sl->icap < end) { /* room to take it back (to_buffer) */
		uint8_t *b = realloc(sl->in, end);
		if (!b)
			return 0;
		sl->in = b;
		sl->icap = end;
	}
	iov_copy(sl->dv, sl->dn, 0, sl->in + ip.off + WIRE_FRAME_LEN, have, 1);
	ip.direct = 1;
	ip.put = have;
	soft_in_store(sl, ip);
	return 1;
}

/* A write that did not come whole goes the buffer's way: what of it the
 * ring has, copied back behind the rest of it in the buffer */
static void to_buffer(struct soft_link *sl, struct soft_inpos ip)
{
	uint32_t have = ip.len - ip.off - WIRE_FRAME_LEN;
	iov_copy(sl->dv, sl->dn, have, sl->in + ip.len, ip.put - have, 0);
	soft_in_set(sl, ip.base, ip.off + WIRE_FRAME_LEN + ip.put, ip.off);
}

/* The frame at the buffer's OFF, on its way to its ring (DIRECT): the rest
 * read into the ring, in one recvmsg (the kernel held it all when it
 * began), then counted and completed (0: the buffer is empty).  A rest
 * that did not come goes the buffer's way, before the hub does anything
 * else that could move the ring (1).  -1: the link failed. */
static int direct_go(struct soft_link *sl)
{
	struct soft_inpos ip = soft_in(sl);
	struct wire_frame f;
	struct iovec iov[2];
	const char *why;
	int again = 0, n;
	if (frame_decode(sl, sl->in + ip.off, &f, &why, 0) < 0) {
		hub_count_malformed(sl->sx->h);
		fail(sl, why);
		return -1;
	}
	if (ip.put < f.len) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iov_from(sl->dv, sl->dn, ip.put, iov)};
		ssize_t r = recvmsg(sl->fd, &m, MSG_DONTWAIT);
		if (r > 0) {
			ip.put += (uint32_t)r;
			soft_in_store(sl, ip);
			sl->rcvd += (uint64_t)r;
			sl->rx_direct += (uint64_t)r;
		}
		if (ip.put < f.len) { /* the reads that follow see why */
			to_buffer(sl, ip);
			return 1;
		}
	}
	n = write_count(sl, &f, iov, &again);
	if (n < 0)
		return -1;
	if (n > 0)
		write_complete(sl, &f, again);
	soft_in_set(sl, ip.base + ip.off + WIRE_FRAME_LEN + f.len, 0, 0);
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
	uint32_t len, off;
	uint32_t upto = 0; /* the next read's most (next_read) */
	struct hub *h = sl->sx->h;
	int r;
	sl->need_parse = 0;
	/* a write on its way to its ring: a hub that died in it left it */
	if (ip.direct && (r = direct_go(sl)) < 0)
		return;
	ip = soft_in(sl);
	len = ip.len;
	off = ip.off;
	while (!sl->closed && len - off >= WIRE_FRAME_LEN) {
		struct wire_frame f;
		const char *why;
		const uint8_t *p = sl->in + off;
		if ((r = frame_decode(sl, p, &f, &why, 1)) < 0) {
			hub_count_malformed(h);
			fail(sl, why);
			return;
		}
		if (r > 0) {
			sl->need_parse = 1; /* again once the hub took the completions */
			break;
		}
		upto = 0;
		if (len - off < WIRE_FRAME_LEN + (size_t)f.len) {
			/* straight to its ring; else, a large write, its rest
			 * alone, and the next header alone after it */
			if (direct_begin(sl, (struct soft_inpos){.base = ip.base, .len = len, .off = off}, &f)) {
				if ((r = direct_go(sl)) < 0)
					return;
				ip = soft_in(sl);
				len = ip.len;
				off = ip.off;
				if (r == 0) {
					upto = WIRE_FRAME_LEN;
					continue;
				}
			}
			if (large_write(&f))
				upto = WIRE_FRAME_LEN + f.len - (len - off);
			break;
		}
		r = rx_frame(sl, &f, p + WIRE_FRAME_LEN);
		if (r < 0)
			return;
		if (r > 0)
			break;
		if (large_write(&f))
			upto = WIRE_FRAME_LEN;
		off += WIRE_FRAME_LEN + f.len;
		soft_in_set(sl, ip.base, len, off);
	}
	if (sl->closed)
		return;
	if (off && off == len)
		soft_in_set(sl, ip.base + len, 0, 0);
	if (upto && len - off < WIRE_FRAME_LEN)
		upto = WIRE_FRAME_LEN - (len - off);
	sl->next_read = upto;
	soft_set_events(sl);
}

/* One read into the incoming buffer: its length, 0 at the end, -1 (errno) */
static ssize_t read_some(struct soft_link *sl)
{
	struct soft_inpos ip = soft_in(sl);
	uint64_t base = ip.base;
	uint32_t len = ip.len, off = ip.off;
	size_t want;
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
	want = sl->icap - len;
	if (sl->next_read && sl->next_read < want)
		want = sl->next_read;
	n = recv(sl->fd, sl->in + len, want, MSG_DONTWAIT);
	if (n > 0) {
		soft_in_set(sl, base, len + (uint32_t)n, off);
		sl->rcvd += (uint64_t)n;
	}
	return n;
}

/* A read and its frames; again at once while a write goes straight to its
 * ring (the kernel holds the rest of it) or large writes come piece by
 * piece, a few times: the hub has other links and processes to serve. */
void soft_on_readable(struct soft_link *sl)
{
	for (int i = 0; i < 4; i++) {
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
		if (sl->closed || sl->stalled || !sl->next_read)
			return;
	}
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
	uint64_t read, have = ip.direct ? ip.base + ip.off + WIRE_FRAME_LEN + ip.put : ip.base + ip.len;
	struct wire_frame f;
	const char *why;
	do {
		if (ioctl(sl->fd, SIOCINQ, &q1) < 0 || getsockopt(sl->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0 ||
		    tl < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received) ||
		    ioctl(sl->fd, SIOCINQ, &q2) < 0)
			return;
	} while (q1 != q2 && ++tries < 100);
	read = ti.tcpi_bytes_received - (uint64_t)q1;
	if (q1 != q2 || (ti.tcpi_state != ST_ESTABLISHED && ti.tcpi_state != ST_FIN_WAIT1 && ti.tcpi_state != ST_FIN_WAIT2) || read <= have)
		return;
	if (ip.direct) { /* they are in the ring, after what it counted */
		if (frame_decode(sl, sl->in + ip.off, &f, &why, 0) < 0 || read - have > f.len - ip.put)
			return;
		ip.put += (uint32_t)(read - have);
	} else {
		if (read - have > sl->icap - ip.len)
			return;
		ip.len += (uint32_t)(read - have);
	}
	log_info("link %u: %llu bytes read by a hub that died before it counted them: placed now", sl->l->id,
		 (unsigned long long)(read - have));
	soft_in_store(sl, ip);
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

