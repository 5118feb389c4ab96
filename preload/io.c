/*
 * io.c - the data calls: read, write, send, recv and their msg, vector,
 * address, mmsg and _FORTIFY_SOURCE forms, and sendfile.
 *
 * On a descriptor that is not an rshare socket each call is as cheap as
 * it can be: read, write, send and recv are a bounds check, one load
 * (rs_peek) and a tail call to libc; the rshare side is out of line
 * (rs_send, rs_recv), and so is the pending check of a nonblocking
 * connect.  On an rshare connection the data goes through its arena rings
 * (vs_send, vs_recv); on a listener a read is ENOTCONN, a write EPIPE
 * (with SIGPIPE unless MSG_NOSIGNAL), as the kernel answers.
 */
#include "preload.h"

#include <signal.h>

/* Options a program set before it connected stay with the kernel socket
 * until the descriptor changes (sockopt.c: so_carry); a MSG_ZEROCOPY send
 * needs SO_ZEROCOPY's in the slot, where its notification is decided
 * (core/proc/vsock_errq.c). */
static inline void zc_carry(int fd, struct pfd *p, int flags)
{
	if ((flags & MSG_ZEROCOPY) && p->optmask && !(p->flags & PFD_SELF))
		so_carry(fd, p);
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct pfd *p = rs_of(fd);
	if (!p) {
		int sent;
		ssize_t r = m && m->msg_controllen ? pass_sendmsg(fd, m, flags, &sent) : (sent = 0);
		return sent ? r : R(sendmsg)(fd, m, flags);
	}
	if (p->kind != FD_RS)
		return rs_send_listener(flags);
	zc_carry(fd, p, flags);
	return ret_err(vs_send(p->slot, m->msg_iov, (int)m->msg_iovlen, flags));
}

/* a write to a listener: EPIPE, and SIGPIPE to the thread unless
 * MSG_NOSIGNAL, as the kernel's (tcp_sendmsg: not connected) */
ssize_t rs_send_listener(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	errno = EPIPE;
	return -1;
}

/* send and recv on an rshare socket, out of line: what other descriptors
 * pay is rs_of() and a tail call to libc */
/* before libc's read and write are known (another library's constructor) */
static __attribute__((noinline)) ssize_t plain_write(int fd, const void *buf, size_t len)
{
	return R(write)(fd, buf, len);
}

static __attribute__((noinline)) ssize_t plain_read(int fd, void *buf, size_t len)
{
	return R(read)(fd, buf, len);
}

static __attribute__((noinline)) ssize_t rs_send(int fd, struct pfd *p, const void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
	if (!p || (p->pending && rs_settle(fd, p)))
		return R(send)(fd, buf, len, flags); /* not rshare, or kernel TCP from now */
	if (p->kind != FD_RS)
		return rs_send_listener(flags);
	zc_carry(fd, p, flags);
	return ret_err(vs_send(p->slot, &v, 1, flags));
}

static __attribute__((noinline)) ssize_t rs_recv(int fd, struct pfd *p, void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	if (!p || (p->pending && rs_settle(fd, p)))
		return R(recv)(fd, buf, len, flags);
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	return ret_err(vs_recv(p->slot, &v, 1, flags));
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_send, 1))
		return real_send(fd, buf, len, flags); /* a tail call, no frame */
	return rs_send(fd, p, buf, len, flags);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *a, socklen_t al)
{
	if (!rs_of(fd))
		return R(sendto)(fd, buf, len, flags, a, al);
	(void)a; /* as Linux TCP: a connected stream socket ignores the address */
	(void)al;
	return send(fd, buf, len, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_write, 1))
		return real_write(fd, buf, len); /* a tail call, no frame */
	if (!p)
		return plain_write(fd, buf, len);
	return rs_send(fd, p, buf, len, 0);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(writev)(fd, iov, n);
	if (p->kind != FD_RS)
		return rs_send_listener(0);
	if (n < 0 || n > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return ret_err(vs_send(p->slot, iov, n, 0));
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct pfd *p = rs_of(fd);
	ssize_t r;
	if (!p) {
		r = R(recvmsg)(fd, m, flags);
		if (r >= 0 && m && m->msg_controllen)
			pass_received(m);
		return r;
	}
	if (p->kind != FD_RS) {
		errno = ENOTCONN;
		return -1;
	}
	if (flags & MSG_ERRQUEUE)
		return ret_err(vs_errqueue(p->slot, p->family, m));
	r = vs_recv(p->slot, m->msg_iov, (int)m->msg_iovlen, flags);
	if (r >= 0) {
		if (m->msg_name) /* as Linux TCP: a stream gives no source address */
			m->msg_namelen = 0;
		m->msg_controllen = 0;
		m->msg_flags = 0;
	}
	return ret_err(r);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_recv, 1))
		return real_recv(fd, buf, len, flags); /* a tail call, no frame */
	return rs_recv(fd, p, buf, len, flags);
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *a, socklen_t *al)
{
	struct pfd *p = rs_of(fd);
	ssize_t r;
	if (!p)
		return R(recvfrom)(fd, buf, len, flags, a, al);
	r = recv(fd, buf, len, flags);
	if (r >= 0 && a && al)
		*al = 0; /* as recvmsg: the address untouched, its length 0 */
	return r;
}

ssize_t read(int fd, void *buf, size_t len)
{
	struct pfd *p = rs_peek(fd);
	if (__builtin_expect(!p && real_read, 1))
		return real_read(fd, buf, len); /* a tail call, no frame */
	if (!p)
		return plain_read(fd, buf, len);
	return rs_recv(fd, p, buf, len, 0);
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct pfd *p = rs_of(fd);
	if (!p)
		return R(readv)(fd, iov, n);
	if (p->kind != FD_RS || n < 0 || n > IOV_MAX) {
		errno = p->kind != FD_RS ? ENOTCONN : EINVAL;
		return -1;
	}
	return ret_err(vs_recv(p->slot, iov, n, 0));
}

/* _FORTIFY_SOURCE builds call these instead */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	(void)buflen;
	return read(fd, buf, len);
}
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	(void)buflen;
	return recv(fd, buf, len, flags);
}
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *a,
		       socklen_t *al);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags, struct sockaddr *a,
		       socklen_t *al)
{
	(void)buflen;
	return recvfrom(fd, buf, len, flags, a, al);
}

/* recvmmsg and sendmmsg on an rshare connection, or sendmmsg of messages
 * with control data (descriptors to pass go as tokens): one recvmsg or
 * sendmsg a message, as the kernel does for a stream socket; the count
 * done, or the first one's error.  (recvmmsg's timeout is looked at between messages
 * by the kernel; here a blocking call waits for each.) */
int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *tmo)
{
	struct pfd *p = rs_of(fd);
	unsigned int i;
	int k;
	if (!p) {
		/* descriptors that came over a unix socket are looked at (pass.c) */
		k = (int)syscall(SYS_recvmmsg, fd, v, n, flags, tmo);
		for (int j = 0; j < k; j++)
			if (v[j].msg_hdr.msg_controllen)
				pass_received(&v[j].msg_hdr);
		return k;
	}
	for (i = 0; i < n; i++) {
		ssize_t r = recvmsg(fd, &v[i].msg_hdr, flags & ~MSG_WAITFORONE);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned int)r;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (!r)
			return (int)i + 1; /* end of stream */
	}
	return (int)i;
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	struct pfd *p = rs_of(fd);
	unsigned int i, ctl = 0;
	for (i = 0; !p && i < n; i++)
		ctl |= v[i].msg_hdr.msg_controllen != 0;
	/* without descriptors to pass (as tokens, pass.c) in one go, as the kernel */
	if (!p && !ctl)
		return (int)syscall(SYS_sendmmsg, fd, v, n, flags);
	for (i = 0; i < n; i++) {
		ssize_t r = sendmsg(fd, &v[i].msg_hdr, flags);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned int)r;
	}
	return (int)i;
}

/* sendfile onto an rshare connection: read in pieces of 64 KiB and sent;
 * what was read but not sent is given back to a file without offset */
ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct pfd *p = rs_of(out);
	static __thread char *buf;
	size_t done = 0;
	ssize_t ret = 0;
	if (!p)
		return R(sendfile)(out, in, off, count);
	if (p->kind != FD_RS)
		return rs_send_listener(0);
	if (!buf && !(buf = malloc(1 << 16))) {
		errno = ENOMEM;
		return -1;
	}
	while (done < count) {
		size_t want = count - done < (1 << 16) ? count - done : (1 << 16);
		ssize_t r = off ? pread(in, buf, want, *off + (off_t)done) : sys_read(in, buf, want);
		struct iovec v;
		ssize_t w;
		if (r <= 0) {
			if (r < 0 && !done)
				ret = -1;
			break;
		}
		v = (struct iovec){.iov_base = buf, .iov_len = (size_t)r};
		w = vs_send(p->slot, &v, 1, 0);
		if (w < 0) {
			if (!off)
				lseek(in, -r, SEEK_CUR);
			if (!done) {
				errno = (int)-w;
				ret = -1;
			}
			break;
		}
		done += (size_t)w;
		if (w < r) {
			if (!off)
				lseek(in, -(r - w), SEEK_CUR); /* what was read but not sent */
			break;
		}
	}
	if (ret < 0)
		return -1;
	if (off)
		*off += (off_t)done;
	return (ssize_t)done;
}

ssize_t sendfile64(int out, int in, off_t *off, size_t count);
ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}
