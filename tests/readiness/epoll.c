/*
 * readiness/epoll.c - the checks of nonblocking-and-readiness through
 * epoll: create, ctl errors, level- and edge-triggered, one-shot, EPOLLOUT,
 * RDHUP, resets, EPOLLOUT|EPOLLET under a reading peer, nested sets,
 * epoll_pwait and epoll_pwait2.
 */
#include "readiness.h"

/* ---- epoll */

#define U64_A 0x1122334455667788ull
#define U64_B 0x8877665544332211ull
#define U64_C 0x0102030405060708ull
#define U64_P 0xfeedfacecafebeefull

/* epoll_create and epoll_create1: the set the next checks use */
static int epoll_creates(void)
{
	int r, e;
	int ep = epoll_create(1);
	check(ep >= 0 && fd_cloexec(ep) == 0, "epoll_create(1) gives a descriptor without FD_CLOEXEC",
	      "epoll_create %s, cloexec=%d", res(ep, errno), ep >= 0 ? fd_cloexec(ep) : -1);
	int ep1 = epoll_create1(EPOLL_CLOEXEC);
	check(ep1 >= 0 && fd_cloexec(ep1) == 1, "epoll_create1(EPOLL_CLOEXEC) sets FD_CLOEXEC",
	      "epoll_create1 %s, cloexec=%d", res(ep1, errno), ep1 >= 0 ? fd_cloexec(ep1) : -1);
	close(ep1);
	r = epoll_create(0);
	e = errno;
	check(r < 0 && e == EINVAL, "epoll_create(0) fails with EINVAL", "epoll_create %s", res(r, e));
	return ep;
}

/* EPOLL_CTL_ADD, MOD and DEL errors; the socket and the pipe's read end
 * join the set */
static void epoll_ctl_errors(int ep, struct conn *c, int pp[2])
{
	struct epoll_event ev;
	int r, e;
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = U64_A};
	r = epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	check(r == 0, "EPOLL_CTL_ADD of a connected socket", "epoll_ctl %s", res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	e = errno;
	check(r < 0 && e == EEXIST, "EPOLL_CTL_ADD of it again fails with EEXIST", "epoll_ctl %s", res(r, e));
	r = epoll_ctl(ep, EPOLL_CTL_MOD, pp[0], &ev);
	e = errno;
	check(r < 0 && e == ENOENT, "EPOLL_CTL_MOD of an unregistered descriptor fails with ENOENT",
	      "epoll_ctl %s", res(r, e));
	r = epoll_ctl(ep, EPOLL_CTL_DEL, pp[0], NULL);
	e = errno;
	check(r < 0 && e == ENOENT, "EPOLL_CTL_DEL of an unregistered descriptor fails with ENOENT",
	      "epoll_ctl %s", res(r, e));
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = U64_P};
	r = epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev);
	check(r == 0, "EPOLL_CTL_ADD of a pipe to the same set", "epoll_ctl %s", res(r, errno));
}

/* level-triggered */
static void epoll_level(int ep, struct conn *c, int pp[2])
{
	char why[200];
	struct epoll_event out[8];
	int r, e;
	sigset_t mask;
	sigemptyset(&mask);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "epoll_wait: an empty socket and pipe are not ready (timeout 0)", "epoll_wait %s",
	      res(r, errno));
	peer_sends(c, 10);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && out[0].events == EPOLLIN && out[0].data.u64 == U64_A,
	      "epoll_wait: EPOLLIN once the peer sends, data.u64 returned unchanged",
	      "epoll_wait %s, events %s, u64 0x%llx", res(r, errno), r > 0 ? evs(out[0].events) : "-",
	      r > 0 ? (unsigned long long)out[0].data.u64 : 0ull);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 1 && out[0].data.u64 == U64_A, "level-triggered: reported again while unread",
	      "epoll_wait %s", res(r, errno));
	r = epoll_pwait(ep, out, 8, 100, &mask);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == U64_A, "epoll_pwait reports it too",
	      "epoll_pwait %s", res(r, errno));
	struct timespec ts = {0, 100 * 1000000};
	r = epoll_pwait2(ep, out, 8, &ts, &mask);
	e = errno;
	if (r < 0 && e == ENOSYS)
		printf("ok - epoll_pwait2 # skip: the kernel has no epoll_pwait2\n");
	else
		check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == U64_A,
		      "epoll_pwait2 reports it too", "epoll_pwait2 %s", res(r, e));
	if (write(pp[1], "p", 1) != 1)
		t_die("pipe write: %s", strerror(errno));
	r = epoll_wait(ep, out, 8, 1000);
	check(r == 2 && ((out[0].data.u64 == U64_A && out[1].data.u64 == U64_P) ||
			 (out[0].data.u64 == U64_P && out[1].data.u64 == U64_A)),
	      "epoll_wait: socket and pipe both ready, each with its own data.u64", "epoll_wait %s",
	      res(r, errno));
	if (read(pp[0], buf2, 1) != 1)
		t_die("pipe read: %s", strerror(errno));
	check(get_bytes(c, c->fd, 10, why, sizeof(why)), "epoll: the 10 bytes read", "%s", why);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "epoll_wait: nothing ready once both were read", "epoll_wait %s, events %s",
	      res(r, errno), r > 0 ? evs(out[0].events) : "-");
	ts = (struct timespec){0, 200 * 1000000};
	double t0 = now();
	r = epoll_pwait2(ep, out, 8, &ts, NULL);
	e = errno;
	double dt = now() - t0;
	if (!(r < 0 && e == ENOSYS))
		check(r == 0 && dt >= 0.19, "epoll_pwait2 returns 0 after its 200 ms timeout",
		      "epoll_pwait2 %s after %.0f ms", res(r, e), dt * 1000);
	epoll_ctl(ep, EPOLL_CTL_DEL, pp[0], NULL);
}

/* edge-triggered */
static void epoll_edge(int ep, struct conn *c)
{
	char why[200];
	struct epoll_event ev, out[8];
	int r, e;
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u64 = U64_B};
	r = epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	check(r == 0, "EPOLL_CTL_MOD to EPOLLIN|EPOLLET", "epoll_ctl %s", res(r, errno));
	peer_sends(c, 10);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == U64_B,
	      "EPOLLET: reported when bytes arrive, with the data.u64 set by MOD", "epoll_wait %s, u64 0x%llx",
	      res(r, errno), r > 0 ? (unsigned long long)out[0].data.u64 : 0ull);
	r = epoll_wait(ep, out, 8, 100);
	check(r == 0, "EPOLLET: not reported again while unread and nothing new arrives", "epoll_wait %s",
	      res(r, errno));
	peer_sends(c, 10);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN), "EPOLLET: reported again when more bytes arrive",
	      "epoll_wait %s", res(r, errno));
	r = epoll_wait(ep, out, 8, 100);
	check(r == 0, "EPOLLET: and then not again", "epoll_wait %s", res(r, errno));
	check(get_bytes(c, c->fd, 20, why, sizeof(why)), "EPOLLET: all 20 bytes read", "%s", why);
	r = epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	check(r == 0, "EPOLL_CTL_DEL of the socket", "epoll_ctl %s", res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	e = errno;
	check(r < 0 && e == ENOENT, "EPOLL_CTL_DEL of it again fails with ENOENT", "epoll_ctl %s", res(r, e));
	r = epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	e = errno;
	check(r < 0 && e == ENOENT, "EPOLL_CTL_MOD after DEL fails with ENOENT", "epoll_ctl %s", res(r, e));
	peer_sends(c, 3);
	wait_nread(c->fd, 3);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "a deleted socket is no longer reported", "epoll_wait %s", res(r, errno));
	check(get_bytes(c, c->fd, 3, why, sizeof(why)), "the 3 bytes read", "%s", why);
}

/* one-shot */
static void epoll_oneshot(int ep, struct conn *c)
{
	char why[200];
	struct epoll_event ev, out[8];
	int r, e;
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLONESHOT, .data.u64 = U64_C};
	r = epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	peer_sends(c, 5);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == U64_C, "EPOLLONESHOT: reported once",
	      "epoll_wait %s", res(r, errno));
	r = epoll_wait(ep, out, 8, 100);
	check(r == 0, "EPOLLONESHOT: not reported again while unread", "epoll_wait %s", res(r, errno));
	peer_sends(c, 5);
	r = epoll_wait(ep, out, 8, 200);
	check(r == 0, "EPOLLONESHOT: not reported when more bytes arrive before it is re-armed",
	      "epoll_wait %s", res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	e = epoll_wait(ep, out, 8, 1000);
	check(r == 0 && e == 1 && (out[0].events & EPOLLIN),
	      "EPOLLONESHOT: reported again once EPOLL_CTL_MOD re-armed it", "epoll_ctl %s, epoll_wait %s",
	      res(r, errno), res(e, errno));
	check(get_bytes(c, c->fd, 10, why, sizeof(why)), "EPOLLONESHOT: the 10 bytes read", "%s", why);
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
}

/* EPOLLOUT: level-triggered, not while full, again after the drain */
static void epoll_out_level(int ep, struct conn *c)
{
	struct epoll_event ev, out[8];
	int r, e;
	ev = (struct epoll_event){.events = EPOLLOUT, .data.u64 = U64_A};
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 1 && out[0].events == EPOLLOUT, "EPOLLOUT: a fresh connection is writable",
	      "epoll_wait %s, events %s", res(r, errno), r > 0 ? evs(out[0].events) : "-");
	uint64_t filled = fill(c, &e);
	int tries = 0, spurious = 0;
	for (;;) {
		r = epoll_wait(ep, out, 8, 0);
		if (r <= 0 || ++tries > 20)
			break;
		uint64_t more = refill(c);
		if (!more) {
			spurious = 1;
			break;
		}
		filled += more;
	}
	check(!e && r == 0, "EPOLLOUT: not reported once a nonblocking send hit EAGAIN",
	      "after %llu bytes (%s, %d refills%s), epoll_wait %s, events %s", (unsigned long long)filled,
	      e ? ename(e) : "EAGAIN", tries, spurious ? ", and a send right after failed with EAGAIN" : "",
	      res(r, errno), r > 0 ? evs(out[0].events) : "-");
	ctl_begin("RECV %d %llu", c->k, (unsigned long long)filled);
	r = epoll_wait(ep, out, 8, 10000);
	const char *rep = ctl_end();
	check(is_ok(rep) && r == 1 && (out[0].events & EPOLLOUT), "EPOLLOUT: reported again after the peer drained",
	      "peer %s, epoll_wait %s", rep, res(r, errno));
}

/* EPOLLRDHUP */
static void epoll_rdhup(int ep, struct conn *c)
{
	struct epoll_event ev, out[8];
	int r;
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLRDHUP, .data.u64 = U64_A};
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
	const char *rep = ctl_cmd("SHUTWR %d", c->k);
	r = epoll_wait(ep, out, 8, 2000);
	check(is_ok(rep) && r == 1 && out[0].events == (EPOLLIN | EPOLLRDHUP),
	      "EPOLLIN|EPOLLRDHUP (no EPOLLHUP) after the peer's shutdown(SHUT_WR)", "peer %s, epoll_wait %s, events %s",
	      rep, res(r, errno), r > 0 ? evs(out[0].events) : "-");
	r = (int)recv(c->fd, buf2, 10, MSG_DONTWAIT);
	check(r == 0, "epoll: read returns 0 after EPOLLRDHUP", "recv %s", res(r, errno));
	close(c->fd); /* closing the only descriptor removes it from the set */
	ctl_cmd("CLOSE %d", c->k);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "a closed socket leaves the epoll set", "epoll_wait %s", res(r, errno));
}

/* reset: EPOLLHUP and EPOLLERR come unasked */
static void epoll_reset(int ep)
{
	struct epoll_event ev, out[8];
	int r;
	struct conn c = conn_out();
	send_stream(&c, c.fd, 100);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = U64_B};
	epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	const char *rep = ctl_cmd("RESET %d", c.k);
	r = epoll_wait(ep, out, 8, 2000);
	check(is_ok(rep) && r == 1 && (out[0].events & EPOLLHUP) && (out[0].events & EPOLLERR),
	      "EPOLLHUP|EPOLLERR reported after the peer reset (asked only for EPOLLIN)", "peer %s, epoll_wait %s, events %s",
	      rep, res(r, errno), r > 0 ? evs(out[0].events) : "-");
	int err;
	r = sock_error(c.fd, &err);
	check(r == 0 && err == ECONNRESET, "epoll: SO_ERROR is ECONNRESET after the reset", "value %s",
	      err >= 0 ? ename(err) : "-1");
	close(c.fd);
}

/* ---- EPOLLOUT|EPOLLET after each EAGAIN, as event-driven servers write:
 * the peer reads 4 MiB meanwhile; every wait must end with EPOLLOUT.
 * A small SO_SNDBUF makes sends hit EAGAIN often. */

/* the writer: its stream so far, its waits, and what went wrong */
struct etw {
	int ep;
	struct conn c;
	size_t sent, stream;
	int cycles, lost, reading;
	char lostwhy[200];
};

/* finish the stream blocking, so the peer's RECV ends */
static void etw_finish(struct etw *w)
{
	fcntl(w->c.fd, F_SETFL, 0);
	while (w->sent < w->stream) {
		size_t m = w->stream - w->sent < BUFSZ ? w->stream - w->sent : BUFSZ;
		t_stream_fill(seed_c2p(w->c.k), w->c.tx, buf, m);
		if (t_write_full(w->c.fd, buf, m) < 0)
			break;
		w->c.tx += m;
		w->sent += m;
	}
}

/* A send hit EAGAIN: wait for EPOLLOUT (the peer starts reading only once
 * a send found the socket full, so at least one wait happens however fast
 * the peer reads).  0 when it came, -1 (the stream finished blocking) when
 * not. */
static int etw_wait(struct etw *w)
{
	struct epoll_event ev, out[8];
	int r;
	w->cycles++;
	ev = (struct epoll_event){.events = EPOLLOUT | EPOLLET, .data.u64 = U64_C};
	epoll_ctl(w->ep, EPOLL_CTL_MOD, w->c.fd, &ev);
	if (!w->reading) {
		ctl_begin("RECV %d %zu", w->c.k, w->stream);
		w->reading = 1;
	}
	r = epoll_wait(w->ep, out, 8, 5000);
	if (r != 1 || !(out[0].events & EPOLLOUT)) {
		struct pollfd pw = {.fd = w->c.fd, .events = POLLOUT};
		int pr = poll(&pw, 1, 0);
		snprintf(w->lostwhy, sizeof(w->lostwhy),
			 "wait %d after EAGAIN: epoll_wait %s within 5 s, %zu of %zu bytes sent; poll now %d %s", w->cycles,
			 res(r, errno), w->sent, w->stream, pr, revs(pw.revents));
		w->lost = 1;
		etw_finish(w);
		return -1;
	}
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u64 = U64_C};
	epoll_ctl(w->ep, EPOLL_CTL_MOD, w->c.fd, &ev);
	return 0;
}

/* send the stream without blocking, waiting after each EAGAIN */
static void etw_run(struct etw *w)
{
	while (w->sent < w->stream) {
		size_t m = w->stream - w->sent < BUFSZ ? w->stream - w->sent : BUFSZ;
		t_stream_fill(seed_c2p(w->c.k), w->c.tx, buf, m);
		ssize_t n = send(w->c.fd, buf, m, 0);
		if (n > 0) {
			w->c.tx += (uint64_t)n;
			w->sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			snprintf(w->lostwhy, sizeof(w->lostwhy), "send %s after %zu bytes", ename(errno), w->sent);
			w->lost = 1;
			break;
		}
		if (etw_wait(w) < 0)
			break;
	}
}

static void epoll_out_et(void)
{
	struct etw w = {.lostwhy = ""};
	struct epoll_event ev;
	int e;
	w.ep = epoll_create1(0);
	w.c = conn_out_sndbuf(16384);
	/* full first (the peer not reading yet): at least one wait */
	w.sent = (size_t)fill(&w.c, &e);
	w.stream = w.sent + (4 << 20);
	fcntl(w.c.fd, F_SETFL, O_NONBLOCK);
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u64 = U64_C};
	epoll_ctl(w.ep, EPOLL_CTL_ADD, w.c.fd, &ev);
	etw_run(&w);
	if (!w.reading) {
		/* a send failed before any wait: the peer still has to read it all */
		ctl_begin("RECV %d %zu", w.c.k, w.stream);
		etw_finish(&w);
	}
	const char *rep = ctl_end();
	check(!w.lost && w.cycles > 0, "EPOLLOUT|EPOLLET: after each EAGAIN, reported once the reading peer made room",
	      "%s (%d waits)", w.lost ? w.lostwhy : "no send ever hit EAGAIN", w.cycles);
	check(is_ok(rep), "EPOLLOUT|EPOLLET: the peer received all bytes intact", "peer %s", rep);
	close(w.c.fd);
	ctl_cmd("CLOSE %d", w.c.k);
	close(w.ep);
}

/* an epoll set inside another */
static void epoll_nested(void)
{
	char why[200];
	struct epoll_event ev, out[8];
	int r, e;
	int inner = epoll_create1(0), outer = epoll_create1(0);
	struct conn c = conn_out();
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 1};
	r = epoll_ctl(inner, EPOLL_CTL_ADD, c.fd, &ev);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 2};
	e = epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev);
	check(r == 0 && e == 0, "an epoll set is added to another", "inner %d, outer %d", r, e);
	r = epoll_wait(outer, out, 8, 0);
	check(r == 0, "nested: the outer set is not ready while the inner's socket is empty", "epoll_wait %s",
	      res(r, errno));
	peer_sends(&c, 3);
	r = epoll_wait(outer, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == 2,
	      "nested: the outer set reports the inner readable once its socket is", "epoll_wait %s",
	      res(r, errno));
	struct pollfd p = {.fd = inner, .events = POLLIN};
	r = poll(&p, 1, 0);
	check(r == 1 && (p.revents & POLLIN), "nested: poll reports the inner epoll descriptor readable",
	      "poll %s, revents %s", res(r, errno), revs(p.revents));
	r = epoll_wait(inner, out, 8, 0);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == 1,
	      "nested: the inner set reports the socket", "epoll_wait %s", res(r, errno));
	check(get_bytes(&c, c.fd, 3, why, sizeof(why)), "nested: the 3 bytes read", "%s", why);
	r = epoll_wait(outer, out, 8, 0);
	check(r == 0, "nested: the outer set is not ready once the socket was read", "epoll_wait %s",
	      res(r, errno));
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
	close(outer);
	close(inner);
}

void check_epoll(void)
{
	int pp[2];
	begin("epoll", 60);

	int ep = epoll_creates();
	struct conn c = conn_out();
	if (pipe(pp) < 0)
		t_die("pipe: %s", strerror(errno));
	epoll_ctl_errors(ep, &c, pp);
	epoll_level(ep, &c, pp);
	epoll_edge(ep, &c);
	epoll_oneshot(ep, &c);
	epoll_out_level(ep, &c);
	epoll_rdhup(ep, &c);
	epoll_reset(ep);
	close(ep);
	close(pp[0]);
	close(pp[1]);

	epoll_out_et();
	epoll_nested();
}
