/*
 * readiness/poll.c - the checks of nonblocking-and-readiness through poll,
 * ppoll, select and pselect, over a socket and a pipe: empty, readable,
 * writable, full, drained, half-closed, reset.
 */
#include "readiness.h"

/* ---- poll, ppoll, select, pselect over a socket and a pipe */

static const char *const api_name[] = {"poll", "ppoll", "select", "pselect"};

/* Wait with api; revents filled in (select: POLLIN readable, POLLOUT
 * writable, POLLPRI exceptional); the number of descriptors ready. */
static int waitfds(enum api api, struct pollfd *p, int n, int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	sigset_t mask;
	sigemptyset(&mask);
	for (int i = 0; i < n; i++)
		p[i].revents = 0;
	if (api == API_POLL)
		return poll(p, (nfds_t)n, ms);
	if (api == API_PPOLL)
		return ppoll(p, (nfds_t)n, &ts, &mask);
	fd_set r, w, x;
	int maxfd = -1, ret, ready = 0;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_ZERO(&x);
	for (int i = 0; i < n; i++) {
		if (p[i].events & (POLLIN | POLLRDHUP))
			FD_SET(p[i].fd, &r);
		if (p[i].events & POLLOUT)
			FD_SET(p[i].fd, &w);
		FD_SET(p[i].fd, &x);
		if (p[i].fd > maxfd)
			maxfd = p[i].fd;
	}
	if (api == API_SELECT) {
		struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
		ret = select(maxfd + 1, &r, &w, &x, &tv);
	} else {
		ret = pselect(maxfd + 1, &r, &w, &x, &ts, &mask);
	}
	if (ret < 0)
		return ret;
	for (int i = 0; i < n; i++) {
		if (FD_ISSET(p[i].fd, &r))
			p[i].revents |= POLLIN;
		if (FD_ISSET(p[i].fd, &w))
			p[i].revents |= POLLOUT;
		if (FD_ISSET(p[i].fd, &x))
			p[i].revents |= POLLPRI;
		ready += p[i].revents != 0;
	}
	return ready;
}

/* empty, writable, readable (a socket and a pipe), then read */
static void poll_data(enum api api, struct conn *c, int pp[2])
{
	char what[200], why[200];
	const char *nm = api_name[api];
	struct pollfd p[2];
	int r;

	p[0] = (struct pollfd){.fd = c->fd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = pp[0], .events = POLLIN};
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: an empty socket and an empty pipe are not readable (timeout 0)", nm);
	check(r == 0, what, "%s %s, socket %s, pipe %s", nm, res(r, errno), revs(p[0].revents),
	      revs(p[1].revents));

	p[0] = (struct pollfd){.fd = c->fd, .events = POLLIN | POLLOUT};
	p[1] = (struct pollfd){.fd = pp[1], .events = POLLOUT};
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: a fresh connection is writable (and not readable), as is the pipe", nm);
	check(r == 2 && (p[0].revents & (POLLIN | POLLOUT)) == POLLOUT && (p[1].revents & POLLOUT), what,
	      "%s %s, socket %s, pipe %s", nm, res(r, errno), revs(p[0].revents), revs(p[1].revents));

	peer_sends(c, 5);
	p[0] = (struct pollfd){.fd = c->fd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = pp[0], .events = POLLIN};
	r = waitfds(api, p, 2, 2000);
	snprintf(what, sizeof(what), "%s: the socket is readable after the peer sends, the empty pipe not", nm);
	check(r == 1 && (p[0].revents & POLLIN) && !p[1].revents, what, "%s %s, socket %s, pipe %s", nm,
	      res(r, errno), revs(p[0].revents), revs(p[1].revents));
	if (write(pp[1], "p", 1) != 1)
		t_die("pipe write: %s", strerror(errno));
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: socket and pipe both readable", nm);
	check(r == 2 && (p[0].revents & POLLIN) && (p[1].revents & POLLIN), what, "%s %s, socket %s, pipe %s",
	      nm, res(r, errno), revs(p[0].revents), revs(p[1].revents));
	if (read(pp[0], buf2, 1) != 1)
		t_die("pipe read: %s", strerror(errno));
	snprintf(what, sizeof(what), "%s: the 5 bytes read", nm);
	check(get_bytes(c, c->fd, 5, why, sizeof(why)), what, "%s", why);
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: neither readable once both were read", nm);
	check(r == 0, what, "%s %s, socket %s, pipe %s", nm, res(r, errno), revs(p[0].revents),
	      revs(p[1].revents));
}

/* full (a nonblocking send hit EAGAIN), then drained by the peer */
static void poll_full(enum api api, struct conn *c, int pp[2])
{
	char what[200];
	const char *nm = api_name[api];
	struct pollfd p[2];
	int r, e;

	/* full: a nonblocking send hit EAGAIN while the peer does not read */
	uint64_t filled = fill(c, &e);
	snprintf(what, sizeof(what), "%s: a nonblocking send fills the connection until EAGAIN", nm);
	check(!e && filled > 0, what, "sent %llu bytes, then %s", (unsigned long long)filled,
	      e ? ename(e) : "EAGAIN");
	p[0] = (struct pollfd){.fd = c->fd, .events = POLLOUT};
	p[1] = (struct pollfd){.fd = pp[1], .events = POLLOUT};
	/* an ACK may open room between the EAGAIN and the wait: writable is
	 * then true, and a send makes progress; fill again and look again */
	int tries = 0, spurious = 0;
	for (;;) {
		r = waitfds(api, p, 2, 0);
		if (r < 0 || !(p[0].revents & POLLOUT) || ++tries > 20)
			break;
		uint64_t more = refill(c);
		if (!more) {
			spurious = 1;
			break;
		}
		filled += more;
	}
	snprintf(what, sizeof(what), "%s: the full socket is not writable, the pipe is", nm);
	check(r == 1 && !(p[0].revents & POLLOUT) && (p[1].revents & POLLOUT), what,
	      "%s %s, socket %s, pipe %s (after %llu bytes, %d refills%s)", nm, res(r, errno), revs(p[0].revents),
	      revs(p[1].revents), (unsigned long long)filled, tries,
	      spurious ? ", and a send right after failed with EAGAIN" : "");
	/* the kernel may open the window again later (the receiver collapses
	 * its queue): a wait with a timeout either ends empty or reports a
	 * socket a nonblocking send can really write to */
	r = waitfds(api, p, 1, 200);
	e = errno;
	ssize_t more = 0;
	int me = 0;
	if (r == 1) {
		t_stream_fill(seed_c2p(c->k), c->tx, buf, BUFSZ);
		more = send(c->fd, buf, BUFSZ, MSG_DONTWAIT);
		me = errno;
		if (more > 0) {
			c->tx += (uint64_t)more;
			filled += (uint64_t)more;
		}
	}
	snprintf(what, sizeof(what), "%s: a 200 ms wait on the full socket times out, or reports room a send then uses", nm);
	check(r == 0 || (r == 1 && (p[0].revents & POLLOUT) && more > 0), what, "%s %s, socket %s, send %s", nm,
	      res(r, e), revs(p[0].revents), r == 1 ? res(more, me) : "-");
	ctl_begin("RECV %d %llu", c->k, (unsigned long long)filled);
	r = waitfds(api, p, 1, 10000);
	const char *rep = ctl_end();
	snprintf(what, sizeof(what), "%s: writable again after the peer drained the %llu bytes", nm,
		 (unsigned long long)filled);
	check(is_ok(rep) && r == 1 && (p[0].revents & POLLOUT), what, "peer %s, %s %s, socket %s", rep, nm,
	      res(r, errno), revs(p[0].revents));
}

/* half-closed by the peer */
static void poll_halfclose(enum api api, struct conn *c, int pp[2])
{
	char what[200], why[200];
	const char *nm = api_name[api];
	struct pollfd p[2];
	int sel = api >= API_SELECT, r, e;

	const char *rep = ctl_cmd("SHUTWR %d", c->k);
	p[0] = (struct pollfd){.fd = c->fd, .events = POLLIN | POLLRDHUP};
	p[1] = (struct pollfd){.fd = pp[0], .events = POLLIN};
	r = waitfds(api, p, 2, 2000);
	if (sel) {
		snprintf(what, sizeof(what), "%s: readable after the peer's shutdown(SHUT_WR)", nm);
		check(is_ok(rep) && r == 1 && (p[0].revents & POLLIN) && !p[1].revents, what,
		      "peer %s, %s %s, socket %s, pipe %s", rep, nm, res(r, errno), revs(p[0].revents),
		      revs(p[1].revents));
	} else {
		snprintf(what, sizeof(what), "%s: POLLIN|POLLRDHUP (no POLLHUP) after the peer's shutdown(SHUT_WR)",
			 nm);
		check(is_ok(rep) && r == 1 && (p[0].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) ==
								(POLLIN | POLLRDHUP) && !p[1].revents,
		      what, "peer %s, %s %s, socket %s, pipe %s", rep, nm, res(r, errno), revs(p[0].revents),
		      revs(p[1].revents));
	}
	r = (int)recv(c->fd, buf2, 10, MSG_DONTWAIT);
	e = errno;
	snprintf(what, sizeof(what), "%s: read returns 0 after the peer's shutdown(SHUT_WR)", nm);
	check(r == 0, what, "recv %s", res(r, e));
	snprintf(what, sizeof(what), "%s: the half-closed socket still sends", nm);
	check(send_stream(c, c->fd, 100) == 0 && peer_got(c, 100, why, sizeof(why)), what, "%s", why);
	close(c->fd);
	ctl_cmd("CLOSE %d", c->k);
}

/* reset by the peer, on a connection of its own */
static void poll_reset(enum api api, int pp[2])
{
	char what[200];
	const char *nm = api_name[api];
	struct pollfd p[2];
	int sel = api >= API_SELECT, r, e;

	struct conn c = conn_out();
	send_stream(&c, c.fd, 100); /* left unread: the peer's close resets */
	const char *rep = ctl_cmd("RESET %d", c.k);
	p[0] = (struct pollfd){.fd = c.fd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = pp[0], .events = POLLIN};
	r = waitfds(api, p, 2, 2000);
	if (sel) {
		snprintf(what, sizeof(what), "%s: readable after the peer reset", nm);
		check(is_ok(rep) && r == 1 && (p[0].revents & POLLIN) && !p[1].revents, what,
		      "peer %s, %s %s, socket %s, pipe %s", rep, nm, res(r, errno), revs(p[0].revents),
		      revs(p[1].revents));
	} else {
		snprintf(what, sizeof(what), "%s: POLLHUP|POLLERR after the peer reset", nm);
		check(is_ok(rep) && r == 1 && (p[0].revents & POLLHUP) && (p[0].revents & POLLERR) &&
			      !p[1].revents,
		      what, "peer %s, %s %s, socket %s, pipe %s", rep, nm, res(r, errno), revs(p[0].revents),
		      revs(p[1].revents));
	}
	r = (int)recv(c.fd, buf2, 10, MSG_DONTWAIT);
	e = errno;
	snprintf(what, sizeof(what), "%s: recv fails with ECONNRESET after the peer reset", nm);
	check(r < 0 && e == ECONNRESET, what, "recv %s", res(r, e));
	close(c.fd);
}

void check_poll_family(enum api api)
{
	int pp[2];
	begin(api_name[api], 60);
	struct conn c = conn_out();
	if (pipe(pp) < 0)
		t_die("pipe: %s", strerror(errno));
	poll_data(api, &c, pp);
	poll_full(api, &c, pp);
	poll_halfclose(api, &c, pp);
	poll_reset(api, pp);
	close(pp[0]);
	close(pp[1]);
}
