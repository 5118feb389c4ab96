/*
 * readiness/fds.c - the checks of nonblocking-and-readiness about
 * descriptors: readiness across fork, idle waits that cost no CPU,
 * dup/dup2/dup3/F_DUPFD(_CLOEXEC), sendfile.
 */
#include "readiness.h"

/* ---- readiness across fork */

void check_fork(void)
{
	char why[200];
	int r;
	begin("fork", 30);
	struct conn c = conn_out();
	peer_sends(&c, 7);
	wait_nread(c.fd, 7);
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 9}, out[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		t_die("fork: %s", strerror(errno));
	if (pid == 0) {
		nfailed = 0;
		group = "fork (child)";
		struct pollfd p = {.fd = c.fd, .events = POLLIN};
		r = poll(&p, 1, 2000);
		check(r == 1 && (p.revents & POLLIN), "fork: the child sees the inherited socket readable (poll)",
		      "poll %s, revents %s", res(r, errno), revs(p.revents));
		r = epoll_wait(ep, out, 4, 0);
		check(r == 1 && out[0].data.u64 == 9, "fork: the inherited epoll set reports it in the child",
		      "epoll_wait %s", res(r, errno));
		int ep2 = epoll_create1(0);
		epoll_ctl(ep2, EPOLL_CTL_ADD, c.fd, &ev);
		r = epoll_wait(ep2, out, 4, 0);
		check(r == 1, "fork: a new epoll set of the child reports it", "epoll_wait %s", res(r, errno));
		int v = -1;
		ioctl(c.fd, FIONREAD, &v);
		check(v == 7, "fork: FIONREAD in the child counts the 7 bytes", "FIONREAD %d", v);
		fflush(stdout);
		exit(nfailed ? 1 : 0);
	}
	struct pollfd p = {.fd = c.fd, .events = POLLIN};
	r = poll(&p, 1, 0);
	check(r == 1 && (p.revents & POLLIN), "fork: the parent still sees the socket readable (poll)",
	      "poll %s, revents %s", res(r, errno), revs(p.revents));
	int st = -1;
	waitpid(pid, &st, 0);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork: the child's checks passed", "status 0x%x", st);
	r = poll(&p, 1, 0);
	check(r == 1 && (p.revents & POLLIN), "fork: still readable in the parent after the child exited",
	      "poll %s, revents %s", res(r, errno), revs(p.revents));
	r = epoll_wait(ep, out, 4, 0);
	check(r == 1, "fork: the parent's epoll set still reports it", "epoll_wait %s", res(r, errno));
	check(get_bytes(&c, c.fd, 7, why, sizeof(why)), "fork: the parent reads the 7 bytes", "%s", why);
	check(send_stream(&c, c.fd, 100) == 0 && peer_got(&c, 100, why, sizeof(why)),
	      "fork: the connection still carries data after the child exited", "%s", why);
	close(ep);
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
}

/* ---- idle waits cost no CPU */

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

void check_idle(void)
{
	int r;
	begin("idle", 30);
	struct conn c = conn_out();
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 5}, out[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	double c0 = cpu_s(), t0 = now();
	r = epoll_wait(ep, out, 4, 1000);
	double cpu = cpu_s() - c0, dt = now() - t0;
	check(r == 0 && dt >= 0.99, "an idle epoll_wait(1000 ms) on a socket returns 0 after its timeout",
	      "epoll_wait %s after %.0f ms", res(r, errno), dt * 1000);
	check(cpu < 0.05, "an idle epoll_wait(1000 ms) on a socket uses < 50 ms CPU (the process, all threads)",
	      "%.1f ms CPU", cpu * 1000);
	struct pollfd p = {.fd = c.fd, .events = POLLIN};
	c0 = cpu_s();
	t0 = now();
	r = poll(&p, 1, 500);
	cpu = cpu_s() - c0;
	dt = now() - t0;
	check(r == 0 && dt >= 0.49, "an idle poll(500 ms) on a socket returns 0 after its timeout",
	      "poll %s after %.0f ms", res(r, errno), dt * 1000);
	check(cpu < 0.05, "an idle poll(500 ms) on a socket uses < 50 ms CPU", "%.1f ms CPU", cpu * 1000);
	close(ep);
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
}

/* ---- dup, dup2, dup3, F_DUPFD, F_DUPFD_CLOEXEC */

static int sends_through(struct conn *c, int fd, size_t n, char *why, size_t wl)
{
	if (send_stream(c, fd, n) < 0) {
		snprintf(why, wl, "send: %s", ename(errno));
		return 0;
	}
	return peer_got(c, n, why, wl);
}

void check_dup(void)
{
	char why[200];
	int r, e, pp[2];
	begin("dup", 30);
	struct conn c = conn_out();
	int d1 = dup(c.fd);
	check(d1 >= 0 && fd_cloexec(d1) == 0, "dup() gives a descriptor without FD_CLOEXEC", "dup %s, cloexec=%d",
	      res(d1, errno), fd_cloexec(d1));
	check(sends_through(&c, d1, 100, why, sizeof(why)), "dup: bytes sent on the duplicate arrive", "%s", why);
	if (pipe(pp) < 0)
		t_die("pipe: %s", strerror(errno));
	int d2 = dup2(c.fd, pp[0]);
	check(d2 == pp[0], "dup2 onto an open descriptor returns it", "dup2 %s", res(d2, errno));
	check(sends_through(&c, d2, 100, why, sizeof(why)), "dup2: bytes sent on the duplicate arrive", "%s", why);
	close(pp[1]);
	r = dup2(c.fd, c.fd);
	check(r == c.fd, "dup2 of a descriptor onto itself returns it", "dup2 %s", res(r, errno));
	int d3 = dup3(c.fd, 200, O_CLOEXEC);
	check(d3 == 200 && fd_cloexec(d3) == 1, "dup3(O_CLOEXEC) sets FD_CLOEXEC", "dup3 %s, cloexec=%d",
	      res(d3, errno), fd_cloexec(200));
	check(sends_through(&c, d3, 100, why, sizeof(why)), "dup3: bytes sent on the duplicate arrive", "%s", why);
	r = dup3(c.fd, c.fd, 0);
	e = errno;
	check(r < 0 && e == EINVAL, "dup3 of a descriptor onto itself fails with EINVAL", "dup3 %s", res(r, e));
	int d4 = fcntl(c.fd, F_DUPFD, 300);
	check(d4 >= 300 && fd_cloexec(d4) == 0, "fcntl(F_DUPFD, 300) gives a descriptor >= 300 without FD_CLOEXEC",
	      "fcntl %s, cloexec=%d", res(d4, errno), fd_cloexec(d4));
	check(sends_through(&c, d4, 100, why, sizeof(why)), "F_DUPFD: bytes sent on the duplicate arrive", "%s",
	      why);
	int d5 = fcntl(c.fd, F_DUPFD_CLOEXEC, 0);
	check(d5 >= 0 && fd_cloexec(d5) == 1, "fcntl(F_DUPFD_CLOEXEC) sets FD_CLOEXEC", "fcntl %s, cloexec=%d",
	      res(d5, errno), fd_cloexec(d5));
	check(sends_through(&c, d5, 100, why, sizeof(why)), "F_DUPFD_CLOEXEC: bytes sent on the duplicate arrive",
	      "%s", why);
	r = fcntl(d1, F_SETFL, O_NONBLOCK);
	check(r == 0 && (fd_flags(c.fd) & O_NONBLOCK), "dup: O_NONBLOCK set on a duplicate shows on the original",
	      "F_SETFL %s, original F_GETFL 0x%x", res(r, errno), fd_flags(c.fd));
	r = (int)recv(c.fd, buf2, 10, 0);
	e = errno;
	check(r < 0 && e == EAGAIN, "dup: the original is nonblocking too (recv EAGAIN)", "recv %s", res(r, e));
	fcntl(d1, F_SETFL, 0);
	peer_sends(&c, 5);
	struct pollfd p = {.fd = d4, .events = POLLIN};
	r = poll(&p, 1, 2000);
	check(r == 1 && (p.revents & POLLIN), "dup: poll on a duplicate sees the socket readable",
	      "poll %s, revents %s", res(r, errno), revs(p.revents));
	check(get_bytes(&c, d5, 5, why, sizeof(why)), "dup: another duplicate reads the bytes", "%s", why);

	close(c.fd);
	check(sends_through(&c, d1, 100, why, sizeof(why)), "dup: the duplicate still sends after the original was closed",
	      "%s", why);
	peer_sends(&c, 5);
	check(get_bytes(&c, d1, 5, why, sizeof(why)), "dup: the duplicate still receives after the original was closed",
	      "%s", why);
	close(d2);
	close(d3);
	close(d4);
	close(d5);
	check(sends_through(&c, d1, 100, why, sizeof(why)), "dup: the last duplicate still sends", "%s", why);
	close(d1);
	const char *rep = ctl_cmd("READ %d", c.k);
	check(!strcmp(rep, "eof"), "dup: closing the last descriptor closes the connection (peer reads EOF)",
	      "peer read: %s", rep);
	ctl_cmd("CLOSE %d", c.k);
}

/* ---- sendfile */

void check_sendfile(void)
{
	const size_t n1 = 300000 + 17, n2 = 100000 + 3;
	int f = -1;
	begin("sendfile", 30);
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	f = open(dir, O_TMPFILE | O_RDWR, 0600);
	if (f < 0) {
		char path[256];
		snprintf(path, sizeof(path), "%s/nbr-XXXXXX", dir);
		f = mkstemp(path);
		if (f >= 0)
			unlink(path);
	}
	if (f < 0)
		t_die("sendfile: temporary file: %s", strerror(errno));
	struct conn c = conn_out();
	/* the file holds the next n1 + n2 bytes of the connection's stream */
	static uint8_t fb[1 << 19];
	t_stream_fill(seed_c2p(c.k), c.tx, fb, n1 + n2);
	if (t_write_full(f, fb, n1 + n2) < 0)
		t_die("sendfile: write file: %s", strerror(errno));
	lseek(f, 0, SEEK_SET);

	off_t off = 0;
	ssize_t r = 0;
	int e = 0;
	ctl_begin("RECV %d %zu", c.k, n1);
	while ((size_t)off < n1) {
		r = sendfile(c.fd, f, &off, n1 - (size_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
	}
	e = errno;
	size_t sent1 = (size_t)off;
	if (sent1 < n1) {
		/* the peer still waits for the rest: end its RECV */
		close(c.fd);
	}
	const char *rep = ctl_end();
	check((size_t)off == n1, "sendfile with an offset sends the whole range and advances the offset",
	      "offset %lld of %zu, last sendfile %s", (long long)off, n1, res((long)r, e));
	check(lseek(f, 0, SEEK_CUR) == 0, "sendfile with an offset leaves the file position alone",
	      "file position %lld", (long long)lseek(f, 0, SEEK_CUR));
	check(is_ok(rep), "the peer receives the file's bytes exactly (sendfile with an offset)", "peer %s", rep);
	c.tx += sent1;
	if (sent1 < n1) {
		ctl_cmd("CLOSE %d", c.k);
		close(f);
		return;
	}
	lseek(f, (off_t)n1, SEEK_SET);
	size_t done = 0;
	ctl_begin("RECV %d %zu", c.k, n2);
	while (done < n2) {
		r = sendfile(c.fd, f, NULL, n2 - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	e = errno;
	if (done < n2)
		close(c.fd);
	rep = ctl_end();
	off_t pos = lseek(f, 0, SEEK_CUR);
	check(done == n2 && pos == (off_t)(n1 + n2),
	      "sendfile without an offset sends from the file position and advances it",
	      "sent %zu of %zu, last sendfile %s, file position %lld", done, n2, res((long)r, e), (long long)pos);
	check(is_ok(rep), "the peer receives the file's bytes exactly (sendfile from the file position)", "peer %s",
	      rep);
	if (done == n2)
		close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
	close(f);
}
