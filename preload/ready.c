/*
 * ready.c - one descriptor per connection: the program's descriptor of a
 * polled rshare connection becomes the connection's readiness descriptor.
 *
 * An rshare connection starts as the kernel socket the program made (or,
 * accepted, one the library made): a TCP socket that never connects.  The
 * first time the process polls it, the readiness descriptor the hub hands
 * out (core/hub/ready.c) is put in place of that socket with dup3, so that
 * a polled connection costs the program one descriptor, as on kernel TCP,
 * where it used to cost two.  The descriptor then is a unix socket: every
 * call the program makes on it is the library's (the data calls, names,
 * shutdown, fcntl and ioctl, and socket options, which sockopt.c keeps in
 * the slot and answers as the kernel would), and the entry is marked
 * PFD_SELF.
 *
 * It happens only where nothing is lost: the descriptor is the process's
 * only one of the socket (a second one would still name the kernel
 * socket), the connection is made (a connect under way may still go to
 * kernel TCP; it moves over once made, rd_settled), and the kernel socket
 * holds no port the program bound (kernel TCP keeps a bound port taken
 * while connected; the kernel socket keeps it here).  Otherwise the
 * readiness descriptor stays at a high number of the library's, as before.
 * Before an exec, kept descriptors become kernel sockets again
 * (rd_unbecome), and one passed to another process over a unix socket
 * has one stand in for it (pass.c): a program that is not preloaded sees
 * a socket that never connected, never the hub's unix socket.
 */
#include "preload.h"

/* See above: may fd become the readiness descriptor of its socket? */
static int rd_may(int fd, const struct pfd *p)
{
	union sockaddr_any a;
	socklen_t al = sizeof(a);
	if (p->kind != FD_RS || p->pending || (p->flags & PFD_SELF) || vs_nrefs(p->slot) != 1)
		return 0;
	if (R(getsockname)(fd, &a.sa, &al) < 0)
		return 0;
	if (a.sa.sa_family == AF_INET)
		return !a.in.sin_port;
	return a.sa.sa_family == AF_INET6 && !a.in6.sin6_port;
}

int rd_fd(int fd, struct pfd *p)
{
	int pf = vs_poll_fd_cached(p->slot), onto = 0;
	struct so_async a;
	if (pf >= 0)
		return pf;
	if (p->flags & PFD_ASYNC)
		so_async_get(fd, &a); /* what the dup3 onto fd would drop */
	if (!rd_may(fd, p)) {
		pf = vs_poll_fd(p->slot, p->gen);
	} else {
		so_carry(fd, p);
		pf = vs_poll_fd_onto(p->slot, p->gen, fd, &onto);
		if (onto)
			p->flags |= PFD_SELF;
	}
	if (pf >= 0 && (p->flags & PFD_ASYNC))
		so_async_put(pf, &a);
	return pf;
}

void rd_settled(int fd, struct pfd *p)
{
	int old;
	if (vs_poll_fd_cached(p->slot) < 0 || !rd_may(fd, p))
		return;
	so_carry(fd, p);
	old = vs_poll_move(p->slot, fd);
	if (old < 0)
		return;
	p->flags |= PFD_SELF;
	ep_rekey(p->slot, old, fd);
	sys_close(old);
}

void rd_closing(int fd, const struct pfd *p)
{
	int pf, fl;
	if ((p->flags & PFD_SELF) && vs_nrefs(p->slot) > 1)
		vs_poll_unself(p->slot, fd);
	/* the last close of a socket with signal-driven I/O: the hub keeps
	 * the readiness descriptor's file open while the connection ends,
	 * and the kernel would signal its owner for a socket it closed
	 * (kernel TCP's file is gone); O_ASYNC goes from that file first */
	if ((p->flags & PFD_ASYNC) && vs_nrefs(p->slot) == 1 && atomic_load(&cl_slot(p->slot)->holders) <= 1 &&
	    (pf = vs_poll_fd_cached(p->slot)) >= 0 && (fl = R(fcntl)(pf, F_GETFL)) >= 0 && (fl & O_ASYNC))
		R(fcntl)(pf, F_SETFL, fl & ~O_ASYNC);
}

int rd_unbecome(int fd, struct pfd *p)
{
	struct so_async a;
	int nfd, fl;
	if (!(p->flags & PFD_SELF))
		return 0;
	nfd = R(socket)(p->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (nfd < 0)
		return -1;
	/* the readiness descriptor stays this process's, at a high number */
	vs_poll_unself(p->slot, fd);
	fl = R(fcntl)(fd, F_GETFD);
	if (p->flags & PFD_ASYNC)
		so_async_get(fd, &a);
	if (sys_dup3(nfd, fd, (fl > 0 && (fl & FD_CLOEXEC)) ? O_CLOEXEC : 0) < 0) {
		R(close)(nfd);
		return -1;
	}
	R(close)(nfd);
	if (p->flags & PFD_ASYNC)
		so_async_put(fd, &a);
	p->flags &= (uint8_t)~PFD_SELF;
	return 0;
}
