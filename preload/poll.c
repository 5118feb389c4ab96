/*
 * poll.c - poll, ppoll, select and pselect over rshare sockets
 * (core/hub/ready.c tells how readiness is kept).
 *
 * An rshare connection is waited on through its readiness descriptor,
 * put in place of the application's descriptor; a listener through the
 * kernel listener and the hub's wake-up side by side.  poll and select
 * check what the descriptors report against the socket's true state, so
 * they never report more than is true; epoll_wait (epoll.c) is the
 * kernel's own.  A call with no rshare socket in it is libc's.
 */
#include "preload.h"

/* What the kernel is asked: fds with each rshare connection's readiness
 * descriptor in its place, and each listener's wake-up after the n of
 * fds; in stack when it fits, else allocated (NULL: ENOMEM). */
static struct pollfd *pp_kernel_set(struct pollfd *fds, nfds_t n, struct pollfd *stack, nfds_t *nk)
{
	struct pollfd *k = stack;
	nfds_t nl = 0, i;
	for (i = 0; i < n; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		if (p && p->kind == FD_LISTEN)
			nl++;
	}
	*nk = n + nl;
	if (*nk > 64 && !(k = malloc(*nk * sizeof(*k)))) {
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0, nl = n; i < n; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		k[i] = fds[i];
		k[i].revents = 0;
		if (!p)
			continue;
		if (p->kind == FD_LISTEN) {
			k[nl++] = (struct pollfd){.fd = p->evfd, .events = POLLIN};
		} else {
			int pf = rd_fd(fds[i].fd, p);
			k[i].fd = pf >= 0 ? pf : -1; /* without one, the true state alone */
		}
	}
	return k;
}

/* what is true already needs no waiting */
static int pp_true_now(const struct pollfd *fds, nfds_t n)
{
	int now = 0;
	for (nfds_t i = 0; i < n && !now; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		if (!p)
			continue;
		if (p->kind == FD_LISTEN)
			now = (fds[i].events & POLLIN) && atomic_load(&cl_slot(p->slot)->acceptq);
		else
			now = (vs_poll_mask(p->slot) & (fds[i].events | POLLERR | POLLHUP)) != 0;
	}
	return now;
}

/* The kernel's answer in k into fds, rshare connections checked against
 * their true state; *redo when a descriptor became a kernel socket
 * meanwhile (it is polled itself from now on).  The count ready. */
static int pp_collect_conns(struct pollfd *fds, nfds_t n, struct pollfd *k, int *redo)
{
	int ready = 0;
	for (nfds_t i = 0; i < n; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		short ev = fds[i].events;
		fds[i].revents = k[i].revents;
		if (!p && k[i].fd != fds[i].fd && fds[i].fd >= 0) {
			/* a nonblocking connect given to kernel TCP meanwhile:
			 * from now on the socket itself is polled */
			k[i].fd = fds[i].fd;
			fds[i].revents = 0;
			*redo = 1;
			continue;
		}
		if (p && p->kind == FD_RS) {
			unsigned m = vs_poll_mask(p->slot);
			if (k[i].revents & ~m & (POLLIN | POLLOUT))
				m = vs_poll_settle(p->slot, (unsigned)k[i].revents);
			fds[i].revents = (short)(m & ((unsigned)ev | POLLERR | POLLHUP));
		}
		ready += fds[i].revents != 0;
	}
	return ready;
}

/* The listeners: readable while their accept queue is not empty (a
 * wake-up without one is drained).  The count that became ready. */
static int pp_collect_listeners(struct pollfd *fds, nfds_t n, struct pollfd *k)
{
	nfds_t nl = n;
	int ready = 0;
	for (nfds_t i = 0; i < n; i++) {
		struct pfd *p = rs_of(fds[i].fd);
		if (!p || p->kind != FD_LISTEN)
			continue;
		if ((k[nl].revents & POLLIN) && !atomic_load(&cl_slot(p->slot)->acceptq))
			lis_drain(p);
		nl++;
		if ((fds[i].events & POLLIN) && atomic_load(&cl_slot(p->slot)->acceptq)) {
			ready += fds[i].revents == 0;
			fds[i].revents |= POLLIN;
		}
	}
	return ready;
}

/* ask the kernel about the converted sockets at once: the count ready, or -1 */
static int pp_recheck(struct pollfd *fds, nfds_t n, struct pollfd *k, nfds_t nk, const sigset_t *mask)
{
	int ready = 0;
	if (R(ppoll)(k, nk, &(struct timespec){0, 0}, mask) < 0)
		return -1;
	for (nfds_t i = 0; i < n; i++)
		if (!rs_of(fds[i].fd)) {
			fds[i].revents = k[i].revents;
			ready += fds[i].revents != 0;
		}
	return ready;
}

static int rs_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	struct pollfd stack[64], *k;
	struct timespec end = {0, 0}, t;
	nfds_t nk;
	int r, ready, redo;
	if (!(k = pp_kernel_set(fds, n, stack, &nk)))
		return -1;
	if (tmo) {
		tmo_deadline(tmo, &end);
	}
	for (;;) {
		int now = pp_true_now(fds, n);
		if (now) {
			t = (struct timespec){0, 0};
		} else if (tmo) {
			long ms = tmo_ms_left(&end);
			t.tv_sec = ms / 1000;
			t.tv_nsec = (ms % 1000) * 1000000;
		}
		r = R(ppoll)(k, nk, now || tmo ? &t : NULL, mask);
		if (r < 0)
			break;
		redo = 0;
		ready = pp_collect_conns(fds, n, k, &redo);
		ready += pp_collect_listeners(fds, n, k);
		r = ready;
		if (redo && !ready) {
			r = ready = pp_recheck(fds, n, k, nk, mask);
			if (r < 0)
				break;
		}
		if (ready || (tmo && tmo_ms_left(&end) == 0))
			break;
	}
	if (k != stack)
		free(k);
	return r;
}


static int any_rs(const struct pollfd *fds, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		if (rs_of(fds[i].fd))
			return 1;
	return 0;
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
	if (!any_rs(fds, n))
		return R(ppoll)(fds, n, tmo, mask);
	return rs_ppoll(fds, n, tmo, mask);
}

int poll(struct pollfd *fds, nfds_t n, int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	if (!any_rs(fds, n))
		return R(poll)(fds, n, ms);
	return rs_ppoll(fds, n, ms < 0 ? NULL : &t, NULL);
}

int __poll_chk(struct pollfd *fds, nfds_t n, int ms, size_t len);
int __poll_chk(struct pollfd *fds, nfds_t n, int ms, size_t len)
{
	(void)len;
	return poll(fds, n, ms);
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask, size_t len);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask, size_t len)
{
	(void)len;
	return ppoll(fds, n, tmo, mask);
}

/* select and pselect through ppoll, when an rshare socket is in a set */
static int rs_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timespec *tmo,
		     const sigset_t *mask)
{
	struct pollfd stack[64], *pf = stack;
	int n = 0, r, cnt = 0;
	for (int fd = 0; fd < nfds; fd++)
		n += (rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex));
	if (n > 64 && !(pf = malloc((size_t)n * sizeof(*pf)))) {
		errno = ENOMEM;
		return -1;
	}
	n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) | (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
				   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
		if (ev)
			pf[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	r = rs_ppoll(pf, (nfds_t)n, tmo, mask);
	if (r >= 0) {
		for (int i = 0; i < n; i++)
			if (pf[i].revents & POLLNVAL) {
				errno = EBADF;
				r = -1;
				goto out;
			}
		for (int i = 0; i < n; i++) {
			int fd = pf[i].fd;
			short re = pf[i].revents;
			if (rd && FD_ISSET(fd, rd) && !(re & (POLLIN | POLLHUP | POLLERR)))
				FD_CLR(fd, rd);
			if (wr && FD_ISSET(fd, wr) && !(re & (POLLOUT | POLLERR)))
				FD_CLR(fd, wr);
			if (ex && FD_ISSET(fd, ex) && !(re & POLLPRI))
				FD_CLR(fd, ex);
			cnt += (rd && FD_ISSET(fd, rd)) + (wr && FD_ISSET(fd, wr)) + (ex && FD_ISSET(fd, ex));
		}
		r = cnt;
	}
out:
	if (pf != stack)
		free(pf);
	return r;
}

static int sets_have_rs(int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	if (nfds > FD_SETSIZE)
		return 0;
	for (int fd = 0; fd < nfds; fd++)
		if (((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex))) &&
		    rs_of(fd))
			return 1;
	return 0;
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct timespec t, end, now;
	int r;
	if (!sets_have_rs(nfds, rd, wr, ex))
		return R(select)(nfds, rd, wr, ex, tv);
	if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0)) {
		errno = EINVAL;
		return -1;
	}
	if (tv) {
		t.tv_sec = tv->tv_sec + tv->tv_usec / 1000000;
		t.tv_nsec = (tv->tv_usec % 1000000) * 1000;
		tmo_deadline(&t, &end);
	}
	r = rs_select(nfds, rd, wr, ex, tv ? &t : NULL, NULL);
	if (tv) {
		/* as Linux: the time not slept */
		long long left;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (end.tv_sec - now.tv_sec) * 1000000LL + (end.tv_nsec - now.tv_nsec) / 1000;
		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000000;
		tv->tv_usec = left % 1000000;
	}
	return r;
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo, const sigset_t *mask)
{
	struct timespec t;
	if (!sets_have_rs(nfds, rd, wr, ex))
		return R(pselect)(nfds, rd, wr, ex, tmo, mask);
	if (tmo)
		t = *tmo;
	return rs_select(nfds, rd, wr, ex, tmo ? &t : NULL, mask);
}
