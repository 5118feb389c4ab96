/*
 * vsock_errq.c - the error queue of an rshare connection: the
 * notifications of MSG_ZEROCOPY sends (Linux's msg_zerocopy.rst).
 *
 * A process that set SO_ZEROCOPY may send with MSG_ZEROCOPY and must not
 * touch the buffer until the kernel's notification says it is done with
 * it; a program that waits for that notification would wait for ever if
 * none came.  rshare copies the bytes into the send ring before the send
 * returns, so each such send that sent bytes is done when it returns: it
 * takes the socket's next number and its notification is queued at once,
 * as the kernel notifies a copy, with SO_EE_CODE_ZEROCOPY_COPIED.  As the
 * kernel does, consecutive notifications waiting on the queue are one
 * range: the slot keeps one 64-bit word (zc), the next send's number
 * above the count of those waiting, moved with compare-and-swap, so that
 * every process and thread that holds the socket sees one queue.
 * recvmsg(MSG_ERRQUEUE) takes the range: 0 bytes, MSG_ERRQUEUE in
 * msg_flags and one IP_RECVERR (IPV6_RECVERR) control message of a
 * sock_extended_err, origin SO_EE_ORIGIN_ZEROCOPY, the range in ee_info
 * (first) and ee_data (last), written as the kernel's put_cmsg does
 * (MSG_CTRUNC where the room is short; the notification is taken all the
 * same); EAGAIN when none waits.  poll, select and epoll see POLLERR
 * while one waits (vs_poll_mask; the readiness descriptor stays readable
 * meanwhile, so that the kernel wakes the waiter: vs_rx_settle leaves it,
 * and the hub writes it at the first, core/hub/ready.c).  Without
 * SO_ZEROCOPY the flag does nothing, as on Linux.
 */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/errqueue.h>

#include "vsock_int.h"

/* A send with MSG_ZEROCOPY returned bytes on SLOT: with SO_ZEROCOPY, its
 * notification queued; the first to wait makes the readiness descriptor
 * readable (the hub does, as for data: core/hub/ready.c), so that epoll
 * reports EPOLLERR. */
void vs_errq_sent(uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint64_t w, n;
	if (!(atomic_load(&as->opts.bools) & (1u << SLOT_OPTB_ZEROCOPY)))
		return;
	w = atomic_load(&as->zc);
	do
		n = w + (1ull << 32) + ((uint32_t)w == UINT32_MAX ? 0 : 1);
	while (!atomic_compare_exchange_weak(&as->zc, &w, n));
	if (!(uint32_t)w)
		vs_poll_bell(slot);
}

/* The waiting notifications taken: 1 and their range in LO..HI, or 0. */
int vs_errq_take(struct arena_slot *as, uint32_t *lo, uint32_t *hi)
{
	uint64_t w = atomic_load(&as->zc);
	do {
		if (!(uint32_t)w)
			return 0;
	} while (!atomic_compare_exchange_weak(&as->zc, &w, w & ~0xffffffffull));
	*hi = (uint32_t)(w >> 32) - 1;
	*lo = *hi - (uint32_t)w + 1;
	return 1;
}

/* As the kernel's put_cmsg: what fits of the control message, MSG_CTRUNC
 * for the rest; returns the room it took. */
static size_t put_cmsg(struct msghdr *m, int level, int type, const void *data, size_t len)
{
	struct cmsghdr h = {.cmsg_level = level, .cmsg_type = type, .cmsg_len = CMSG_LEN(len)};
	size_t room = m->msg_control ? m->msg_controllen : 0;
	if (room < sizeof(h)) {
		m->msg_flags |= MSG_CTRUNC;
		return 0;
	}
	if (room < h.cmsg_len) {
		m->msg_flags |= MSG_CTRUNC;
		h.cmsg_len = room;
	}
	memcpy(m->msg_control, &h, sizeof(h));
	memcpy((char *)m->msg_control + CMSG_LEN(0), data, h.cmsg_len - CMSG_LEN(0));
	return CMSG_SPACE(len) < room ? CMSG_SPACE(len) : room;
}

ssize_t vs_errqueue(uint32_t slot, int family, struct msghdr *m)
{
	struct {
		struct sock_extended_err ee;
		union {
			struct sockaddr_in in;
			struct sockaddr_in6 in6;
		} offender; /* none: zeros, as the kernel's for a notification */
	} e;
	uint32_t lo, hi;
	int got;
	if (vs_call_begin(slot))
		return -EBADF;
	got = vs_errq_take(cl_slot(slot), &lo, &hi);
	vs_call_end(slot);
	if (!got)
		return -EAGAIN;
	memset(&e, 0, sizeof(e));
	e.ee.ee_origin = SO_EE_ORIGIN_ZEROCOPY;
	e.ee.ee_code = SO_EE_CODE_ZEROCOPY_COPIED;
	e.ee.ee_info = lo;
	e.ee.ee_data = hi;
	m->msg_flags = MSG_ERRQUEUE;
	if (m->msg_name) { /* the family, no address or port: nobody sent it */
		socklen_t n = family == AF_INET6 ? sizeof(e.offender.in6) : sizeof(e.offender.in);
		e.offender.in.sin_family = (sa_family_t)(family == AF_INET6 ? AF_INET6 : AF_INET);
		memcpy(m->msg_name, &e.offender, m->msg_namelen < n ? m->msg_namelen : n);
		m->msg_namelen = n;
		e.offender.in.sin_family = 0;
	}
	if (family == AF_INET6)
		m->msg_controllen = put_cmsg(m, SOL_IPV6, IPV6_RECVERR, &e, sizeof(e.ee) + sizeof(e.offender.in6));
	else
		m->msg_controllen = put_cmsg(m, SOL_IP, IP_RECVERR, &e, sizeof(e.ee) + sizeof(e.offender.in));
	return 0;
}
