/*
 * pass.c - descriptors passed over a unix socket (SCM_RIGHTS): rshare
 * sockets that go to another process, and TCP sockets that come in.
 *
 * sendmsg: each rshare descriptor among those passed goes as a token the
 * hub gives for it (cl_pass, core/hub/pass.c); the message goes with the
 * tokens in the descriptors' places, then this process closes its copies
 * of the tokens.  A connection's readiness descriptor is never what goes
 * to the hub or to the other process: a kernel socket that never
 * connected stands in for it.  Without a token (no hub), a descriptor
 * goes as it is, and a readiness descriptor as that stand-in.
 *
 * recvmsg: each descriptor that came is looked at (pass_took).  A token,
 * a unix seqpacket socket whose first message is a pass's name (read
 * with MSG_PEEK, so it stays for anyone else), is shown to the hub
 * (cl_adopt): this process holds the socket from then on, and the
 * descriptor the sender passed takes the token's number.  A token the
 * hub refuses (another uid, another pool) becomes a kernel socket that
 * never connected.  A kernel listener that a pool registered with its hub
 * (its process knew it; this one gets it from one that did not, as Node's
 * cluster primary hands its workers a bound socket) is that rshare
 * listener here too.  Another TCP socket that is not connected is FD_TCP,
 * so that its listen() and connect() here go to rshare as on the sender's
 * side.
 */
#include "preload.h"

/* v, a descriptor being passed, goes as *out: a token, a stand-in, or
 * itself; what this process must close once the message went, into c */
static void pass_one(int v, int *out, int *c, int *nc)
{
	struct pfd *p = rs_of(v);
	int self = p && p->kind == FD_RS && (p->flags & PFD_SELF), stand = -1, t;
	*out = v;
	if (!p)
		return;
	if (self && (stand = R(socket)(p->family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	t = cl_pass(p->slot, p->gen, self ? stand : v);
	if (t >= 0) {
		*out = c[(*nc)++] = t;
		if (stand >= 0)
			R(close)(stand);
	} else if (stand >= 0) {
		*out = c[(*nc)++] = stand;
	}
}

/* what sendmsg passes, rshare descriptors as tokens (see above); *sent 0
 * when m passes none of them (the caller sends m as it is) */
ssize_t pass_sendmsg(int fd, const struct msghdr *m, int flags, int *sent)
{
	struct msghdr c = *m;
	struct cmsghdr *h;
	int *cl, ncl = 0, n = 0;
	ssize_t r;
	*sent = 0;
	for (h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR((struct msghdr *)m, h)) {
		int *v = (int *)CMSG_DATA(h), k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
			for (int i = 0; i < k; i++)
				n += rs_peek(v[i]) != NULL;
	}
	if (!n)
		return 0;
	*sent = 1;
	c.msg_control = malloc(m->msg_controllen);
	cl = malloc(sizeof(int) * (size_t)n);
	if (!c.msg_control || !cl) {
		free(c.msg_control);
		free(cl);
		errno = ENOBUFS;
		return -1;
	}
	memcpy(c.msg_control, m->msg_control, m->msg_controllen);
	for (h = CMSG_FIRSTHDR(&c); h; h = CMSG_NXTHDR(&c, h)) {
		int *v = (int *)CMSG_DATA(h), k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (int i = 0; i < k; i++) {
			int out;
			if (!rs_peek(v[i]) || ncl >= n)
				continue;
			pass_one(v[i], &out, cl, &ncl);
			v[i] = out;
		}
	}
	r = R(sendmsg)(fd, &c, flags);
	for (int i = 0; i < ncl; i++) {
		int e = errno;
		R(close)(cl[i]);
		errno = e;
	}
	free(c.msg_control);
	free(cl);
	return r;
}

static int sock_int(int fd, int opt)
{
	int v = -1;
	socklen_t l = sizeof(v);
	return R(getsockopt)(fd, SOL_SOCKET, opt, &v, &l) < 0 ? -1 : v;
}

/* fd, a token that the hub did not give this process its socket for,
 * becomes a kernel socket that never connected (of family fam) */
static void pass_dead(int fd, int fam, int cloexec)
{
	int s = R(socket)(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s >= 0) {
		sys_dup3(s, fd, cloexec ? O_CLOEXEC : 0);
		R(close)(s);
	}
}

/* fd came in over a unix socket: see above */
static void pass_took(int fd)
{
	struct pfd *p = pfd_get(fd);
	struct msg_pass_name n;
	struct cl_adopted a;
	union sockaddr_any sa;
	socklen_t sl = sizeof(sa);
	int dom, lis = 0, fdfl, r;
	if (!p || p->kind)
		return;
	if ((dom = sock_tcp_family(fd, &lis))) {
		if (R(getpeername)(fd, &sa.sa, &sl) == 0 || errno != ENOTCONN)
			return; /* a kernel TCP connection */
		if (lis && !cl_adopt(0, 0, fd, &a)) {
			/* a kernel listener a pool registered: this process
			 * shares that rshare listener (and joins that pool) */
			sys_close(a.fd);
			pfd_set(p, &(struct pfd){.kind = FD_LISTEN, .family = (uint8_t)dom, .slot = a.slot,
						 .gen = a.gen, .evfd = a.evfd});
			return;
		}
		pfd_set(p, &(struct pfd){.kind = FD_TCP, .family = (uint8_t)dom, .evfd = -1});
		return;
	}
	if (sock_int(fd, SO_DOMAIN) != AF_UNIX || sock_int(fd, SO_TYPE) != SOCK_SEQPACKET ||
	    syscall(SYS_recvfrom, fd, &n, sizeof(n), MSG_PEEK | MSG_DONTWAIT, NULL, NULL) != sizeof(n) ||
	    memcmp(n.magic, MSG_PASS_MAGIC, sizeof(n.magic)))
		return;
	fdfl = R(fcntl)(fd, F_GETFD);
	r = cl_adopt(n.id, n.secret, -1, &a);
	if (r < 0) {
		pass_dead(fd, n.family == AF_INET6 ? AF_INET6 : AF_INET, fdfl > 0 && (fdfl & FD_CLOEXEC));
		return;
	}
	dom = sock_int(a.fd, SO_DOMAIN);
	sys_dup3(a.fd, fd, fdfl > 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	sys_close(a.fd);
	pfd_set(p, &(struct pfd){.kind = a.listener ? FD_LISTEN : FD_RS,
				 .family = (uint8_t)(dom == AF_INET6 ? AF_INET6 : AF_INET),
				 .slot = a.slot, .gen = a.gen, .evfd = a.evfd});
}

void pass_received(const struct msghdr *m)
{
	if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR((struct msghdr *)m, h)) {
		int *v = (int *)CMSG_DATA(h), k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
			for (int i = 0; i < k; i++)
				pass_took(v[i]);
	}
}
