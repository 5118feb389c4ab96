/*
 * ctl.c - the processes' unix connections to the hub: accepted, read, and
 * ended.
 *
 * The hub accepts on its abstract unix socket (one SOCK_SEQPACKET
 * connection per process, its pid and uid from SO_PEERCRED) and watches
 * each connection in its epoll set.  A message is one request (msg.h),
 * with at most one descriptor along: answered by request.c.  A request
 * that is not one (its size, its op, a truncated descriptor) drops the
 * process, as does end of file; before the process's records go, the
 * request in its request cell, if one is posted, is answered (cell.c), as
 * one written on the connection before the end would be.  When every
 * descriptor is taken, a new process is turned away at once (it runs on
 * kernel TCP) rather than left to ring the listener for ever.
 */
#include "hub.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "msg.h"

void proc_event(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	struct proc *pr = (struct proc *)ev;
	struct msg_req q;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &q, .iov_len = sizeof(q)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	int rfd = -1;

	if ((events & EPOLLOUT) && pr->out) {
		proc_stat_flush(h, pr);
		if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
			return;
	}
	n = recvmsg(pr->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
	if (n <= 0 || pr->stat_only) {
		if (rfd >= 0)
			close(rfd);
		if (pr->cell)
			hub_cell_take(h, pr); /* it came before the end */
		proc_free(h, pr);
		return;
	}
	if (n != sizeof(q) || q.op == 0 || q.op > MSG_MAX || (m.msg_flags & MSG_CTRUNC)) {
		log_warn("process %d: malformed request, dropping it", (int)pr->pid);
		if (rfd >= 0)
			close(rfd);
		proc_free(h, pr);
		return;
	}
	proc_request(h, pr, &q, rfd);
}

void hub_accept_proc(struct hub *h, struct hub_ev *ev, uint32_t events)
{
	(void)ev;
	(void)events;
	for (;;) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		struct proc *pr;
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) && h->spare_fd >= 0) {
			/* every descriptor is taken: the process is turned away
			 * (its connection closes: it runs on kernel TCP), not left
			 * to ring the listener for ever.  The kernel says EMFILE
			 * before it looks for a connection: none may be waiting. */
			close(h->spare_fd);
			fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				close(fd);
			h->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				return;
			hub_refused(h);
			continue;
		}
		if (fd < 0)
			return;
		pr = calloc(1, sizeof(*pr));
		if (!pr || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			free(pr);
			close(fd);
			continue;
		}
		pr->fd = fd;
		pr->pid = cr.pid;
		pr->uid = cr.uid;
		pr->ev.fn = proc_event;
		if (hub_watch(h, fd, EPOLLIN | EPOLLRDHUP, &pr->ev) < 0) {
			close(fd);
			free(pr);
			continue;
		}
		pr->next = h->procs;
		h->procs = pr;
	}
}
