/*
 * nonblocking-and-readiness peer PORT
 * nonblocking-and-readiness check HOST PORT
 *
 * Conformance of nonblocking calls and readiness (poll, ppoll, select,
 * pselect, epoll) on TCP stream sockets, with Linux kernel TCP as the
 * reference, errno included.  Plain BSD sockets: knows nothing of rshare,
 * so the same checks run on kernel TCP and under rshare.
 *
 * peer: listens on PORT (control) and PORT+1 (data), prints "ready", and
 * serves one control connection at a time.  Each control line is a
 * command about the data connections it holds (numbered from 0), answered
 * by one line, "ok ..." or "err ...":
 *   ACCEPT          accept the next data connection on PORT+1: "ok K"
 *   DIAL P          connect to the control peer's address, port P: "ok K"
 *   SEND K N        send N bytes of K's peer-to-checker stream
 *   SEND2 K N MS    answer first, then send N bytes, wait MS ms, send N more
 *   RECV K N        read exactly N bytes, each checked against K's
 *                   checker-to-peer stream
 *   READ K          one read: "data N", "eof" or "err ENAME"
 *   SHUTWR K        shutdown(SHUT_WR)
 *   RESET K         wait until received data is pending, then close without
 *                   reading it: the kernel answers with a reset
 *   CLOSE K         close
 * Nothing listens on PORT+2: the refused port.
 *
 * check: drives the peer at HOST through PORT, listens itself on PORT+3
 * (for DIAL), runs every check and prints one line per check:
 *   ok - WHAT
 *   not ok - WHAT: DETAIL
 * then "summary: checks=N failed=F connections=C refused=R", where C
 * counts the TCP connections made with the peer (control connection
 * included) and R the connects refused for want of a listener.  Each group
 * of checks runs under an alarm: a call that blocks for good is reported
 * as "not ok - GROUP: timed out".  Exit 0 when every check passed, 1 if not.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#define BUFSZ (64 << 10)

static uint64_t seed_c2p(int k) { return 0x1000u + (uint64_t)k; }
static uint64_t seed_p2c(int k) { return 0x2000u + (uint64_t)k; }

static const char *ename(int e)
{
	static __thread char b[8][32];
	static __thread int i;
	const char *n = strerrorname_np(e);
	if (n)
		return n;
	i = (i + 1) % 8;
	snprintf(b[i], sizeof(b[i]), "errno %d", e);
	return b[i];
}

/* "-1 ENAME" or "N": what a call returned, for a failure's detail */
static const char *res(long r, int e)
{
	static char b[8][48];
	static int i;
	i = (i + 1) % 8;
	if (r < 0)
		snprintf(b[i], sizeof(b[i]), "-1 %s", ename(e));
	else
		snprintf(b[i], sizeof(b[i]), "%ld", r);
	return b[i];
}

/* One line of a stream socket, without the newline; -1 at EOF or error. */
static int line_read(int fd, char *buf, size_t len)
{
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (c == '\n')
			break;
		if (n + 1 < len)
			buf[n++] = c;
	}
	buf[n] = 0;
	return (int)n;
}

__attribute__((format(printf, 2, 3))) static int line_write(int fd, const char *fmt, ...)
{
	char b[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n > (int)sizeof(b) - 2)
		n = (int)sizeof(b) - 2;
	b[n++] = '\n';
	return t_write_full(fd, b, (size_t)n);
}

static int tcp_listen(int port, int nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (fd < 0)
		t_die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("bind port %d: %s", port, strerror(errno));
	if (listen(fd, 64) < 0)
		t_die("listen port %d: %s", port, strerror(errno));
	return fd;
}

/* ------------------------------------------------------------------ peer */

#define MAXC 256
static struct pconn {
	int fd;
	uint64_t tx, rx;
} pc[MAXC];
static int npc;

static struct pconn *pconn_of(int k)
{
	return k >= 0 && k < npc && pc[k].fd >= 0 ? &pc[k] : NULL;
}

static int pconn_add(int fd)
{
	if (npc == MAXC) {
		close(fd);
		return -1;
	}
	pc[npc] = (struct pconn){.fd = fd};
	return npc++;
}

static int peer_send(struct pconn *p, int k, uint64_t n)
{
	static uint8_t buf[BUFSZ];
	while (n) {
		size_t m = n < BUFSZ ? (size_t)n : BUFSZ;
		t_stream_fill(seed_p2c(k), p->tx, buf, m);
		if (t_write_full(p->fd, buf, m) < 0)
			return -1;
		p->tx += m;
		n -= m;
	}
	return 0;
}

static void peer_serve(int cfd, int dlfd)
{
	static uint8_t buf[BUFSZ];
	char line[256];
	while (line_read(cfd, line, sizeof(line)) >= 0) {
		char cmd[16] = "";
		long a1 = -1, a2 = -1, a3 = -1;
		sscanf(line, "%15s %ld %ld %ld", cmd, &a1, &a2, &a3);
		struct pconn *p = pconn_of((int)a1);
		int k = (int)a1;
		if (!strcmp(cmd, "ACCEPT")) {
			int fd = accept(dlfd, NULL, NULL);
			if (fd < 0)
				line_write(cfd, "err accept %s", ename(errno));
			else
				line_write(cfd, "ok %d", pconn_add(fd));
		} else if (!strcmp(cmd, "DIAL")) {
			struct sockaddr_in a;
			socklen_t al = sizeof(a);
			int fd = -1;
			if (getpeername(cfd, (struct sockaddr *)&a, &al) < 0) {
				line_write(cfd, "err getpeername %s", ename(errno));
				continue;
			}
			a.sin_port = htons((uint16_t)a1);
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
				line_write(cfd, "err connect %s", ename(errno));
				if (fd >= 0)
					close(fd);
				continue;
			}
			line_write(cfd, "ok %d", pconn_add(fd));
		} else if (!p) {
			line_write(cfd, "err bad command or connection: %s", line);
		} else if (!strcmp(cmd, "SEND") && a2 >= 0) {
			if (peer_send(p, k, (uint64_t)a2) < 0)
				line_write(cfd, "err send %s", ename(errno));
			else
				line_write(cfd, "ok");
		} else if (!strcmp(cmd, "SEND2") && a2 >= 0 && a3 >= 0) {
			line_write(cfd, "ok");
			if (peer_send(p, k, (uint64_t)a2) == 0) {
				usleep((useconds_t)a3 * 1000);
				peer_send(p, k, (uint64_t)a2);
			}
		} else if (!strcmp(cmd, "RECV") && a2 >= 0) {
			uint64_t want = (uint64_t)a2, got = 0;
			const char *err = NULL;
			char eb[160];
			while (got < want) {
				size_t m = want - got < BUFSZ ? (size_t)(want - got) : BUFSZ;
				ssize_t r = read(p->fd, buf, m);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					snprintf(eb, sizeof(eb), "%s after %llu of %llu bytes",
						 r == 0 ? "eof" : ename(errno), (unsigned long long)got,
						 (unsigned long long)want);
					err = eb;
					break;
				}
				long long bad = t_stream_check(seed_c2p(k), p->rx, buf, (size_t)r);
				if (bad >= 0) {
					snprintf(eb, sizeof(eb), "byte %llu differs from what was sent",
						 (unsigned long long)(p->rx + (uint64_t)bad));
					err = eb;
					break;
				}
				p->rx += (uint64_t)r;
				got += (uint64_t)r;
			}
			if (err)
				line_write(cfd, "err %s", err);
			else
				line_write(cfd, "ok");
		} else if (!strcmp(cmd, "READ")) {
			ssize_t r;
			do
				r = read(p->fd, buf, BUFSZ);
			while (r < 0 && errno == EINTR);
			if (r < 0)
				line_write(cfd, "err %s", ename(errno));
			else if (r == 0)
				line_write(cfd, "eof");
			else if (t_stream_check(seed_c2p(k), p->rx, buf, (size_t)r) >= 0)
				line_write(cfd, "err %zd bytes differ from what was sent", r);
			else {
				p->rx += (uint64_t)r;
				line_write(cfd, "data %zd", r);
			}
		} else if (!strcmp(cmd, "SHUTWR")) {
			if (shutdown(p->fd, SHUT_WR) < 0)
				line_write(cfd, "err shutdown %s", ename(errno));
			else
				line_write(cfd, "ok");
		} else if (!strcmp(cmd, "RESET")) {
			ssize_t r;
			do
				r = recv(p->fd, buf, 1, MSG_PEEK);
			while (r < 0 && errno == EINTR);
			close(p->fd);
			p->fd = -1;
			if (r == 1)
				line_write(cfd, "ok");
			else
				line_write(cfd, "err no unread data to reset with (peek %s)", res(r, errno));
		} else if (!strcmp(cmd, "CLOSE")) {
			close(p->fd);
			p->fd = -1;
			line_write(cfd, "ok");
		} else {
			line_write(cfd, "err bad command: %s", line);
		}
	}
}

static int peer_main(int port)
{
	signal(SIGPIPE, SIG_IGN);
	int clfd = tcp_listen(port, 0), dlfd = tcp_listen(port + 1, 0);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int cfd = accept(clfd, NULL, NULL);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			t_die("nonblocking-and-readiness peer: accept: %s", strerror(errno));
		}
		peer_serve(cfd, dlfd);
		close(cfd);
		for (int i = 0; i < npc; i++)
			if (pc[i].fd >= 0)
				close(pc[i].fd);
		npc = 0;
	}
}

/* --------------------------------------------------------------- checker */

static int ctl = -1, base_port, lfd_own = -1;
static struct sockaddr_in peer_ip;
static int nchecks, nfailed, nconns, nrefused;
static volatile sig_atomic_t sigpipes;
static const char *volatile group = "setup";
static uint8_t buf[BUFSZ], buf2[BUFSZ];

struct conn {
	int fd, k;
	uint64_t tx, rx;
};

__attribute__((format(printf, 3, 4))) static int check(int ok, const char *what, const char *fmt, ...)
{
	nchecks++;
	if (ok) {
		printf("ok - %s\n", what);
	} else {
		char d[400];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(d, sizeof(d), fmt, ap);
		va_end(ap);
		nfailed++;
		printf("not ok - %s: %s\n", what, d);
	}
	fflush(stdout);
	return ok;
}

static void on_pipe(int sig)
{
	(void)sig;
	sigpipes++;
}

static void on_alarm(int sig)
{
	char b[200];
	(void)sig;
	int n = snprintf(b, sizeof(b), "not ok - %s: timed out (a call blocked for good)\n", group);
	if (write(1, b, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

static void begin(const char *g, unsigned secs)
{
	group = g;
	alarm(secs);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void ctl_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctl_begin(const char *fmt, ...)
{
	char b[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (line_write(ctl, "%s", b) < 0)
		t_die("nonblocking-and-readiness: control connection: write: %s", strerror(errno));
}

static const char *ctl_end(void)
{
	static char reply[256];
	if (line_read(ctl, reply, sizeof(reply)) < 0)
		t_die("nonblocking-and-readiness: control connection lost (%s)", strerror(errno));
	return reply;
}

/* send a command and wait for its answer */
static const char *ctl_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *ctl_cmd(const char *fmt, ...)
{
	char b[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	ctl_begin("%s", b);
	return ctl_end();
}

static int is_ok(const char *reply)
{
	return !strncmp(reply, "ok", 2);
}

static struct sockaddr_in peer_at(int port)
{
	struct sockaddr_in a = peer_ip;
	a.sin_port = htons((uint16_t)port);
	return a;
}

/* A blocking connection to the peer's data port, accepted there; with
 * SO_SNDBUF set first when sndbuf > 0. */
static struct conn conn_out_sndbuf(int sndbuf)
{
	struct conn c = {.fd = socket(AF_INET, SOCK_STREAM, 0), .k = -1};
	struct sockaddr_in a = peer_at(base_port + 1);
	if (sndbuf > 0 && setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
		t_die("nonblocking-and-readiness: %s: SO_SNDBUF: %s", group, strerror(errno));
	if (c.fd < 0 || connect(c.fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("nonblocking-and-readiness: %s: connect to the peer: %s", group, strerror(errno));
	const char *r = ctl_cmd("ACCEPT");
	if (sscanf(r, "ok %d", &c.k) != 1)
		t_die("nonblocking-and-readiness: %s: peer ACCEPT: %s", group, r);
	nconns++;
	return c;
}

static struct conn conn_out(void)
{
	return conn_out_sndbuf(0);
}

/* The peer asks it to DIAL our listener: its answer, "ok K" or "err ..." */
static const char *dial_in(int *k)
{
	const char *r = ctl_cmd("DIAL %d", base_port + 3);
	if (sscanf(r, "ok %d", k) != 1)
		t_die("nonblocking-and-readiness: %s: peer DIAL: %s", group, r);
	nconns++;
	return r;
}

/* Send n bytes of c's stream, blocking. */
static int send_stream(struct conn *c, int fd, size_t n)
{
	while (n) {
		size_t m = n < BUFSZ ? n : BUFSZ;
		t_stream_fill(seed_c2p(c->k), c->tx, buf, m);
		if (t_write_full(fd, buf, m) < 0)
			return -1;
		c->tx += m;
		n -= m;
	}
	return 0;
}

/* The peer sends n bytes on c. */
static void peer_sends(struct conn *c, size_t n)
{
	const char *r = ctl_cmd("SEND %d %zu", c->k, n);
	if (!is_ok(r))
		t_die("nonblocking-and-readiness: %s: peer SEND: %s", group, r);
}

/* The peer reads n bytes of c and checks them: 1 when all arrived. */
static int peer_got(struct conn *c, size_t n, char *why, size_t wl)
{
	const char *r = ctl_cmd("RECV %d %zu", c->k, n);
	snprintf(why, wl, "peer: %s", r);
	return is_ok(r);
}

/* Read exactly n bytes from fd (c's stream), without blocking, for up to
 * 5 s, checking every byte: 1 when all came and matched. */
static int get_bytes(struct conn *c, int fd, size_t n, char *why, size_t wl)
{
	size_t got = 0;
	double end = now() + 5;
	while (got < n) {
		size_t m = n - got < BUFSZ ? n - got : BUFSZ;
		ssize_t r = recv(fd, buf2, m, MSG_DONTWAIT);
		if (r > 0) {
			long long bad = t_stream_check(seed_p2c(c->k), c->rx, buf2, (size_t)r);
			if (bad >= 0) {
				snprintf(why, wl, "byte %llu differs from what the peer sent",
					 (unsigned long long)(c->rx + (uint64_t)bad));
				return 0;
			}
			c->rx += (uint64_t)r;
			got += (size_t)r;
			continue;
		}
		if (r == 0) {
			snprintf(why, wl, "EOF after %zu of %zu bytes", got, n);
			return 0;
		}
		if (errno != EAGAIN && errno != EINTR) {
			snprintf(why, wl, "recv: %s after %zu of %zu bytes", ename(errno), got, n);
			return 0;
		}
		if (now() > end) {
			snprintf(why, wl, "only %zu of %zu bytes within 5 s", got, n);
			return 0;
		}
		usleep(1000);
	}
	return 1;
}

/* Wait (without poll) until FIONREAD reports n bytes, at most 5 s. */
static void wait_nread(int fd, int n)
{
	double end = now() + 5;
	int v = 0;
	while ((ioctl(fd, FIONREAD, &v) < 0 || v < n) && now() < end)
		usleep(1000);
}

/* Fill fd's sending side while the peer does not read: send without
 * blocking until EAGAIN, and again after a pause, until a send made after
 * a pause fails at once.  The bytes sent (all of c's stream). */
static uint64_t fill(struct conn *c, int *err)
{
	int fl = fcntl(c->fd, F_GETFL);
	uint64_t total = 0;
	*err = 0;
	fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
	for (int round = 0; round < 200; round++) {
		int first = 1;
		for (;;) {
			t_stream_fill(seed_c2p(c->k), c->tx, buf, BUFSZ);
			ssize_t r = send(c->fd, buf, BUFSZ, 0);
			if (r > 0) {
				c->tx += (uint64_t)r;
				total += (uint64_t)r;
				first = 0;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno != EAGAIN)
				*err = errno;
			break;
		}
		if (*err || (first && round > 0))
			break;
		usleep(20000);
	}
	fcntl(c->fd, F_SETFL, fl);
	return total;
}

/* Send without blocking until EAGAIN, once: the bytes sent. */
static uint64_t refill(struct conn *c)
{
	uint64_t total = 0;
	for (;;) {
		t_stream_fill(seed_c2p(c->k), c->tx, buf, BUFSZ);
		ssize_t r = send(c->fd, buf, BUFSZ, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return total;
		c->tx += (uint64_t)r;
		total += (uint64_t)r;
	}
}

static int fd_flags(int fd)
{
	return fcntl(fd, F_GETFL);
}

static int fd_cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);
	return f < 0 ? -1 : !!(f & FD_CLOEXEC);
}

static int sock_error(int fd, int *err)
{
	socklen_t l = sizeof(*err);
	*err = -1;
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &l);
}

static const char *revs(short r)
{
	static char b[8][96];
	static int i;
	i = (i + 1) % 8;
	snprintf(b[i], sizeof(b[i]), "%s%s%s%s%s%s%s", r ? "" : "none", r & POLLIN ? "POLLIN " : "",
		 r & POLLOUT ? "POLLOUT " : "", r & POLLRDHUP ? "POLLRDHUP " : "", r & POLLHUP ? "POLLHUP " : "",
		 r & POLLERR ? "POLLERR " : "", r & POLLPRI ? "POLLPRI " : "");
	return b[i];
}

static const char *evs(uint32_t e)
{
	static char b[8][128];
	static int i;
	i = (i + 1) % 8;
	snprintf(b[i], sizeof(b[i]), "%s%s%s%s%s%s", e ? "" : "none", e & EPOLLIN ? "EPOLLIN " : "",
		 e & EPOLLOUT ? "EPOLLOUT " : "", e & EPOLLRDHUP ? "EPOLLRDHUP " : "",
		 e & EPOLLHUP ? "EPOLLHUP " : "", e & EPOLLERR ? "EPOLLERR " : "");
	return b[i];
}

/* ---- flags: fcntl, FIONBIO, MSG_DONTWAIT, options */

static void check_flags(void)
{
	char what[200];
	begin("flags", 30);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	check(s >= 0 && (fd_flags(s) & O_NONBLOCK), "socket(SOCK_NONBLOCK) sets O_NONBLOCK (F_GETFL)",
	      "F_GETFL %s", res(fd_flags(s), errno));
	check(fd_cloexec(s) == 1, "socket(SOCK_CLOEXEC) sets FD_CLOEXEC (F_GETFD)", "F_GETFD cloexec=%d",
	      fd_cloexec(s));
	close(s);
	s = socket(AF_INET, SOCK_STREAM, 0);
	check(s >= 0 && !(fd_flags(s) & O_NONBLOCK) && fd_cloexec(s) == 0,
	      "socket() without flags is blocking and not close-on-exec", "F_GETFL 0x%x cloexec=%d",
	      fd_flags(s), fd_cloexec(s));
	close(s);

	struct conn c = conn_out();
	int fl = fd_flags(c.fd), r, e, v;
	check(fl >= 0 && !(fl & O_NONBLOCK), "a connected blocking socket has no O_NONBLOCK", "F_GETFL %s",
	      res(fl, errno));
	r = fcntl(c.fd, F_SETFL, fl | O_NONBLOCK);
	check(r == 0 && (fd_flags(c.fd) & O_NONBLOCK), "fcntl(F_SETFL, O_NONBLOCK) sets it (F_GETFL)",
	      "F_SETFL %s, F_GETFL 0x%x", res(r, errno), fd_flags(c.fd));
	r = (int)recv(c.fd, buf, 10, 0);
	e = errno;
	check(r < 0 && e == EAGAIN, "recv on an empty socket made nonblocking by fcntl fails with EAGAIN",
	      "recv %s", res(r, e));
	r = (int)read(c.fd, buf, 10);
	e = errno;
	check(r < 0 && e == EAGAIN, "read on an empty nonblocking socket fails with EAGAIN", "read %s",
	      res(r, e));
	r = fcntl(c.fd, F_SETFL, fl & ~O_NONBLOCK);
	check(r == 0 && !(fd_flags(c.fd) & O_NONBLOCK), "fcntl(F_SETFL) without O_NONBLOCK clears it",
	      "F_SETFL %s, F_GETFL 0x%x", res(r, errno), fd_flags(c.fd));

	v = 1;
	r = ioctl(c.fd, FIONBIO, &v);
	check(r == 0 && (fd_flags(c.fd) & O_NONBLOCK), "ioctl(FIONBIO, 1) sets O_NONBLOCK",
	      "ioctl %s, F_GETFL 0x%x", res(r, errno), fd_flags(c.fd));
	r = (int)recv(c.fd, buf, 10, 0);
	e = errno;
	check(r < 0 && e == EAGAIN, "recv after FIONBIO 1 on an empty socket fails with EAGAIN", "recv %s",
	      res(r, e));
	v = 0;
	r = ioctl(c.fd, FIONBIO, &v);
	check(r == 0 && !(fd_flags(c.fd) & O_NONBLOCK), "ioctl(FIONBIO, 0) clears O_NONBLOCK",
	      "ioctl %s, F_GETFL 0x%x", res(r, errno), fd_flags(c.fd));

	r = (int)recv(c.fd, buf, 10, MSG_DONTWAIT);
	e = errno;
	check(r < 0 && e == EAGAIN, "recv(MSG_DONTWAIT) on an empty blocking socket fails with EAGAIN",
	      "recv %s", res(r, e));
	check(!(fd_flags(c.fd) & O_NONBLOCK), "MSG_DONTWAIT leaves the socket blocking", "F_GETFL 0x%x",
	      fd_flags(c.fd));
	t_stream_fill(seed_c2p(c.k), c.tx, buf, 8);
	r = (int)send(c.fd, buf, 8, MSG_DONTWAIT);
	e = errno;
	if (r > 0)
		c.tx += (uint64_t)r;
	check(r == 8 && peer_got(&c, 8, what, sizeof(what)), "send(MSG_DONTWAIT) on a socket with room sends at once",
	      "send %s, %s", res(r, e), r == 8 ? what : "-");

	int err;
	r = sock_error(c.fd, &err);
	check(r == 0 && err == 0, "getsockopt(SO_ERROR) is 0 on a healthy connection", "%s, value %d",
	      res(r, errno), err);

	socklen_t l = sizeof(v);
	v = -1;
	r = getsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, &l);
	check(r == 0 && v == 0, "TCP_NODELAY is off by default", "getsockopt %s, value %d", res(r, errno), v);
	v = 1;
	r = setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v));
	v = -1;
	l = sizeof(v);
	e = getsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, &l);
	check(r == 0 && e == 0 && v != 0, "setsockopt(TCP_NODELAY, 1) reads back as set",
	      "setsockopt %d, getsockopt %d, value %d", r, e, v);
	v = 0;
	r = setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v));
	v = -1;
	l = sizeof(v);
	e = getsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, &l);
	check(r == 0 && e == 0 && v == 0, "setsockopt(TCP_NODELAY, 0) reads back as clear",
	      "setsockopt %d, getsockopt %d, value %d", r, e, v);

	v = -1;
	r = ioctl(c.fd, FIONREAD, &v);
	check(r == 0 && v == 0, "ioctl(FIONREAD) is 0 on an empty socket", "ioctl %s, value %d",
	      res(r, errno), v);
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
}

/* ---- listener: nonblocking accept, accept4 flags, readiness */

static void check_listener(void)
{
	char why[200];
	int r, e, k, fd;
	begin("listener", 30);
	int fl = fd_flags(lfd_own);
	fcntl(lfd_own, F_SETFL, fl | O_NONBLOCK);
	check(fd_flags(lfd_own) & O_NONBLOCK, "fcntl(F_SETFL, O_NONBLOCK) on a listener reads back",
	      "F_GETFL 0x%x", fd_flags(lfd_own));
	r = accept(lfd_own, NULL, NULL);
	e = errno;
	check(r < 0 && e == EAGAIN, "accept on an empty nonblocking listener fails with EAGAIN", "accept %s",
	      res(r, e));
	r = accept4(lfd_own, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	e = errno;
	check(r < 0 && e == EAGAIN, "accept4 on an empty nonblocking listener fails with EAGAIN",
	      "accept4 %s", res(r, e));
	struct pollfd p = {.fd = lfd_own, .events = POLLIN};
	r = poll(&p, 1, 0);
	check(r == 0, "poll: an empty listener is not readable (timeout 0)", "poll %s, revents %s",
	      res(r, errno), revs(p.revents));

	/* accept from a nonblocking listener: the new socket does not inherit
	 * O_NONBLOCK (Linux) */
	dial_in(&k);
	p.revents = 0;
	r = poll(&p, 1, 2000);
	check(r == 1 && (p.revents & POLLIN), "poll: a listener with a pending connection is readable",
	      "poll %s, revents %s", res(r, errno), revs(p.revents));
	double end = now() + 5;
	while ((fd = accept(lfd_own, NULL, NULL)) < 0 && errno == EAGAIN && now() < end)
		usleep(1000);
	e = errno;
	check(fd >= 0, "accept on a nonblocking listener with a pending connection succeeds", "accept %s",
	      res(fd, e));
	if (fd >= 0) {
		check(!(fd_flags(fd) & O_NONBLOCK) && fd_cloexec(fd) == 0,
		      "accept() gives a blocking socket without FD_CLOEXEC (O_NONBLOCK is not inherited)",
		      "F_GETFL 0x%x cloexec=%d", fd_flags(fd), fd_cloexec(fd));
		struct conn c = {.fd = fd, .k = k};
		peer_sends(&c, 10);
		check(get_bytes(&c, fd, 10, why, sizeof(why)), "an accepted connection receives the peer's bytes",
		      "%s", why);
		check(send_stream(&c, fd, 20) == 0 && peer_got(&c, 20, why, sizeof(why)),
		      "an accepted connection sends to the peer", "%s", why);
		close(fd);
		ctl_cmd("CLOSE %d", k);
	}
	p.revents = 0;
	r = poll(&p, 1, 0);
	check(r == 0, "poll: the listener is not readable once its connection was accepted",
	      "poll %s, revents %s", res(r, errno), revs(p.revents));
	fcntl(lfd_own, F_SETFL, fl & ~O_NONBLOCK);
	check(!(fd_flags(lfd_own) & O_NONBLOCK), "fcntl(F_SETFL) clears O_NONBLOCK of a listener",
	      "F_GETFL 0x%x", fd_flags(lfd_own));

	/* accept4 flags on a blocking listener */
	dial_in(&k);
	fd = accept4(lfd_own, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	e = errno;
	check(fd >= 0 && (fd_flags(fd) & O_NONBLOCK) && fd_cloexec(fd) == 1,
	      "accept4(SOCK_NONBLOCK|SOCK_CLOEXEC) sets O_NONBLOCK and FD_CLOEXEC",
	      "accept4 %s, F_GETFL 0x%x cloexec=%d", res(fd, e), fd_flags(fd), fd_cloexec(fd));
	if (fd >= 0) {
		struct conn c = {.fd = fd, .k = k};
		r = (int)recv(fd, buf, 10, 0);
		e = errno;
		check(r < 0 && e == EAGAIN, "recv on an empty socket from accept4(SOCK_NONBLOCK) fails with EAGAIN",
		      "recv %s", res(r, e));
		peer_sends(&c, 1000);
		check(get_bytes(&c, fd, 1000, why, sizeof(why)),
		      "a socket from accept4(SOCK_NONBLOCK) receives the peer's bytes", "%s", why);
		close(fd);
		ctl_cmd("CLOSE %d", k);
	}
	/* epoll on the listener */
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 77}, out[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd_own, &ev);
	r = epoll_wait(ep, out, 4, 0);
	check(r == 0, "epoll: an empty listener is not readable", "epoll_wait %s", res(r, errno));
	dial_in(&k);
	r = epoll_wait(ep, out, 4, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == 77,
	      "epoll: a listener with a pending connection is readable", "epoll_wait %s, events %s",
	      res(r, errno), r > 0 ? evs(out[0].events) : "-");
	fd = accept(lfd_own, NULL, NULL);
	if (fd >= 0)
		close(fd);
	ctl_cmd("CLOSE %d", k);
	r = epoll_wait(ep, out, 4, 0);
	check(r == 0, "epoll: the listener is not readable once its connection was accepted",
	      "epoll_wait %s", res(r, errno));
	close(ep);

	/* EPOLLEXCLUSIVE on a listener, as pre-forked event-driven servers use */
	ep = epoll_create1(0);
	ev.events = EPOLLIN | EPOLLEXCLUSIVE;
	ev.data.u64 = 78;
	r = epoll_ctl(ep, EPOLL_CTL_ADD, lfd_own, &ev);
	check(r == 0, "EPOLL_CTL_ADD of a listener with EPOLLIN|EPOLLEXCLUSIVE", "epoll_ctl %s",
	      res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_MOD, lfd_own, &ev);
	e = errno;
	check(r < 0 && e == EINVAL, "EPOLL_CTL_MOD of an EPOLLEXCLUSIVE registration fails with EINVAL",
	      "epoll_ctl %s", res(r, e));
	dial_in(&k);
	r = epoll_wait(ep, out, 4, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == 78,
	      "EPOLLEXCLUSIVE: the listener is reported readable", "epoll_wait %s, events %s", res(r, errno),
	      r > 0 ? evs(out[0].events) : "-");
	fd = accept(lfd_own, NULL, NULL);
	if (fd >= 0)
		close(fd);
	ctl_cmd("CLOSE %d", k);
	close(ep);
}

/* ---- data: EAGAIN, MSG_PEEK, MSG_WAITALL, FIONREAD */

static void check_data(void)
{
	char why[200];
	int r, e, v;
	begin("data", 30);
	struct conn c = conn_out();
	peer_sends(&c, 10);
	wait_nread(c.fd, 10);
	v = -1;
	r = ioctl(c.fd, FIONREAD, &v);
	check(r == 0 && v == 10, "ioctl(FIONREAD) counts the 10 unread bytes", "ioctl %s, value %d",
	      res(r, errno), v);
	r = (int)recv(c.fd, buf2, 4, MSG_PEEK);
	check(r == 4 && t_stream_check(seed_p2c(c.k), c.rx, buf2, 4) < 0,
	      "recv(MSG_PEEK) returns the first bytes", "recv %s", res(r, errno));
	r = (int)recv(c.fd, buf2, 10, MSG_PEEK);
	check(r == 10 && t_stream_check(seed_p2c(c.k), c.rx, buf2, 10) < 0,
	      "recv(MSG_PEEK) again returns the same bytes, all 10", "recv %s", res(r, errno));
	v = -1;
	ioctl(c.fd, FIONREAD, &v);
	check(v == 10, "peeked bytes stay unread (FIONREAD)", "FIONREAD %d", v);
	r = (int)recv(c.fd, buf2, 10, 0);
	check(r == 10 && t_stream_check(seed_p2c(c.k), c.rx, buf2, 10) < 0,
	      "recv after MSG_PEEK reads the peeked bytes again", "recv %s", res(r, errno));
	if (r > 0)
		c.rx += (uint64_t)r;
	v = -1;
	ioctl(c.fd, FIONREAD, &v);
	check(v == 0, "ioctl(FIONREAD) is 0 once read", "FIONREAD %d", v);

	/* MSG_WAITALL: two halves 200 ms apart come back as one */
	const char *rep = ctl_cmd("SEND2 %d 1000 200", c.k);
	double t0 = now();
	r = (int)recv(c.fd, buf2, 2000, MSG_WAITALL);
	e = errno;
	double dt = now() - t0;
	check(is_ok(rep) && r == 2000 && t_stream_check(seed_p2c(c.k), c.rx, buf2, 2000) < 0,
	      "recv(MSG_WAITALL) waits for all 2000 bytes sent in two halves 200 ms apart",
	      "peer %s, recv %s after %.0f ms", rep, res(r, e), dt * 1000);
	if (r > 0)
		c.rx += (uint64_t)r;

	/* a plain recv returns what is there */
	rep = ctl_cmd("SEND2 %d 300 500", c.k);
	wait_nread(c.fd, 300);
	r = (int)recv(c.fd, buf2, 600, 0);
	check(r == 300 && t_stream_check(seed_p2c(c.k), c.rx, buf2, 300) < 0,
	      "recv without MSG_WAITALL returns the 300 bytes there, not waiting for 600", "recv %s",
	      res(r, errno));
	if (r > 0)
		c.rx += (uint64_t)r;
	check(get_bytes(&c, c.fd, 300, why, sizeof(why)), "the second half arrives too", "%s", why);

	/* MSG_DONTWAIT with data there returns it */
	peer_sends(&c, 50);
	wait_nread(c.fd, 50);
	r = (int)recv(c.fd, buf2, 100, MSG_DONTWAIT);
	check(r == 50 && t_stream_check(seed_p2c(c.k), c.rx, buf2, 50) < 0,
	      "recv(MSG_DONTWAIT) returns the bytes that are there", "recv %s", res(r, errno));
	if (r > 0)
		c.rx += (uint64_t)r;
	check(send_stream(&c, c.fd, 5000) == 0 && peer_got(&c, 5000, why, sizeof(why)),
	      "the peer receives 5000 bytes intact", "%s", why);
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
}

/* ---- MSG_NOSIGNAL, SIGPIPE */

static void check_nosignal(void)
{
	int r, e;
	begin("nosignal", 30);
	struct conn c = conn_out();
	ctl_cmd("CLOSE %d", c.k);
	r = (int)recv(c.fd, buf2, 10, 0);
	e = errno;
	check(r == 0, "recv returns 0 (EOF) after the peer closed", "recv %s", res(r, e));
	sigpipes = 0;
	int tries = 0;
	for (; tries < 200; tries++) {
		r = (int)send(c.fd, "x", 1, MSG_NOSIGNAL);
		if (r < 0)
			break;
		usleep(10000);
	}
	e = errno;
	check(r < 0 && (e == EPIPE || e == ECONNRESET),
	      "send(MSG_NOSIGNAL) to a peer that closed fails with EPIPE (or ECONNRESET first)",
	      "send %s after %d sends", res(r, e), tries);
	r = (int)send(c.fd, "x", 1, MSG_NOSIGNAL);
	e = errno;
	check(r < 0 && e == EPIPE, "a further send(MSG_NOSIGNAL) fails with EPIPE", "send %s", res(r, e));
	check(sigpipes == 0, "send(MSG_NOSIGNAL) raises no SIGPIPE", "%d SIGPIPE", (int)sigpipes);
	r = (int)send(c.fd, "x", 1, 0);
	e = errno;
	check(r < 0 && e == EPIPE && sigpipes == 1, "send without MSG_NOSIGNAL fails with EPIPE and raises SIGPIPE",
	      "send %s, %d SIGPIPE", res(r, e), (int)sigpipes);
	close(c.fd);
}

/* ---- resets: SO_ERROR, ECONNRESET, SO_LINGER {1,0} */

static void check_reset(void)
{
	int r, e, err;
	begin("reset", 30);
	struct conn c = conn_out();
	send_stream(&c, c.fd, 100); /* left unread: the peer's close resets */
	const char *rep = ctl_cmd("RESET %d", c.k);
	struct pollfd p = {.fd = c.fd, .events = POLLIN};
	r = poll(&p, 1, 2000);
	check(is_ok(rep) && r == 1 && (p.revents & POLLHUP) && (p.revents & POLLERR),
	      "poll reports POLLHUP|POLLERR after the peer reset", "peer %s, poll %s, revents %s", rep,
	      res(r, errno), revs(p.revents));
	r = sock_error(c.fd, &err);
	check(r == 0 && err == ECONNRESET, "getsockopt(SO_ERROR) is ECONNRESET after the peer reset",
	      "getsockopt %s, value %s", res(r, errno), err >= 0 ? ename(err) : "-1");
	r = sock_error(c.fd, &err);
	check(r == 0 && err == 0, "getsockopt(SO_ERROR) reads 0 once the error was taken",
	      "getsockopt %s, value %d", res(r, errno), err);
	sigpipes = 0;
	r = (int)send(c.fd, "x", 1, MSG_NOSIGNAL);
	e = errno;
	check(r < 0 && (e == EPIPE || e == ECONNRESET) && sigpipes == 0,
	      "send(MSG_NOSIGNAL) after a reset fails with EPIPE, no SIGPIPE", "send %s, %d SIGPIPE", res(r, e),
	      (int)sigpipes);
	close(c.fd);

	c = conn_out();
	send_stream(&c, c.fd, 100);
	rep = ctl_cmd("RESET %d", c.k);
	p = (struct pollfd){.fd = c.fd, .events = POLLIN};
	poll(&p, 1, 2000);
	r = (int)recv(c.fd, buf2, 10, 0);
	e = errno;
	check(r < 0 && e == ECONNRESET, "recv after the peer reset fails with ECONNRESET", "peer %s, recv %s",
	      rep, res(r, e));
	close(c.fd);

	c = conn_out();
	struct linger lg = {.l_onoff = 1, .l_linger = 0}, lg2 = {-1, -1};
	socklen_t l = sizeof(lg2);
	r = setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	e = getsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg2, &l);
	check(r == 0 && e == 0 && lg2.l_onoff == 1 && lg2.l_linger == 0, "SO_LINGER {1,0} reads back",
	      "setsockopt %d, getsockopt %d, value {%d,%d}", r, e, lg2.l_onoff, lg2.l_linger);
	close(c.fd);
	rep = ctl_cmd("READ %d", c.k);
	check(!strcmp(rep, "err ECONNRESET"),
	      "close with SO_LINGER {1,0} resets: the peer's read fails with ECONNRESET", "peer read: %s", rep);
	ctl_cmd("CLOSE %d", c.k);
}

/* ---- nonblocking connect */

static void check_connect(void)
{
	char why[200];
	int r, e, err;
	begin("connect", 30);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = peer_at(base_port + 1);
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	e = errno;
	/* across two nodes the kernel never completes it within the call */
	check(r < 0 && e == EINPROGRESS, "nonblocking connect fails with EINPROGRESS", "connect %s", res(r, e));
	if (r < 0 && e == EINPROGRESS) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		r = poll(&p, 1, 5000);
		check(r == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP)),
		      "poll reports POLLOUT once the nonblocking connect completed", "poll %s, revents %s",
		      res(r, errno), revs(p.revents));
	}
	r = sock_error(s, &err);
	check(r == 0 && err == 0, "getsockopt(SO_ERROR) is 0 after the nonblocking connect",
	      "getsockopt %s, value %d", res(r, errno), err);
	struct sockaddr_in pa;
	socklen_t pl = sizeof(pa);
	r = getpeername(s, (struct sockaddr *)&pa, &pl);
	check(r == 0 && pa.sin_port == a.sin_port && pa.sin_addr.s_addr == a.sin_addr.s_addr,
	      "getpeername after the nonblocking connect names the peer", "getpeername %s", res(r, errno));
	struct conn c = {.fd = s, .k = -1};
	const char *rep = ctl_cmd("ACCEPT");
	if (sscanf(rep, "ok %d", &c.k) != 1)
		t_die("nonblocking-and-readiness: connect: peer ACCEPT: %s", rep);
	nconns++;
	ctl_begin("RECV %d 1000", c.k);
	t_stream_fill(seed_c2p(c.k), c.tx, buf, 1000);
	size_t sent = 0;
	double end = now() + 5;
	while (sent < 1000 && now() < end) {
		ssize_t n = send(s, buf + sent, 1000 - sent, 0);
		if (n > 0)
			sent += (size_t)n;
		else
			usleep(1000);
	}
	c.tx += sent;
	rep = ctl_end();
	check(sent == 1000 && is_ok(rep), "a nonblockingly connected socket sends", "sent %zu, peer %s", sent,
	      rep);
	peer_sends(&c, 1000);
	check(get_bytes(&c, s, 1000, why, sizeof(why)), "a nonblockingly connected socket receives", "%s",
	      why);
	close(s);
	ctl_cmd("CLOSE %d", c.k);

	/* refused: nothing listens on PORT+2 */
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	a = peer_at(base_port + 2);
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	e = errno;
	nrefused++;
	if (r < 0 && e == EINPROGRESS) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		int pr = poll(&p, 1, 5000);
		r = sock_error(s, &err);
		check(pr == 1 && r == 0 && err == ECONNREFUSED,
		      "a nonblocking connect to a port with no listener reports ECONNREFUSED (SO_ERROR)",
		      "poll %s revents %s, SO_ERROR %s", res(pr, errno), revs(p.revents),
		      err >= 0 ? ename(err) : "-1");
	} else {
		check(r < 0 && e == ECONNREFUSED,
		      "a nonblocking connect to a port with no listener reports ECONNREFUSED (at once)", "connect %s",
		      res(r, e));
	}
	close(s);
	s = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	e = errno;
	nrefused++;
	check(r < 0 && e == ECONNREFUSED, "a blocking connect to a port with no listener fails with ECONNREFUSED",
	      "connect %s", res(r, e));
	close(s);
}

/* ---- poll, ppoll, select, pselect over a socket and a pipe */

enum api { API_POLL, API_PPOLL, API_SELECT, API_PSELECT };
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

static void check_poll_family(enum api api)
{
	char what[200], why[200];
	const char *nm = api_name[api];
	int sel = api >= API_SELECT, r, e, pp[2];
	begin(nm, 60);
	struct conn c = conn_out();
	if (pipe(pp) < 0)
		t_die("pipe: %s", strerror(errno));
	struct pollfd p[2];

	p[0] = (struct pollfd){.fd = c.fd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = pp[0], .events = POLLIN};
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: an empty socket and an empty pipe are not readable (timeout 0)", nm);
	check(r == 0, what, "%s %s, socket %s, pipe %s", nm, res(r, errno), revs(p[0].revents),
	      revs(p[1].revents));

	p[0] = (struct pollfd){.fd = c.fd, .events = POLLIN | POLLOUT};
	p[1] = (struct pollfd){.fd = pp[1], .events = POLLOUT};
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: a fresh connection is writable (and not readable), as is the pipe", nm);
	check(r == 2 && (p[0].revents & (POLLIN | POLLOUT)) == POLLOUT && (p[1].revents & POLLOUT), what,
	      "%s %s, socket %s, pipe %s", nm, res(r, errno), revs(p[0].revents), revs(p[1].revents));

	peer_sends(&c, 5);
	p[0] = (struct pollfd){.fd = c.fd, .events = POLLIN};
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
	check(get_bytes(&c, c.fd, 5, why, sizeof(why)), what, "%s", why);
	r = waitfds(api, p, 2, 0);
	snprintf(what, sizeof(what), "%s: neither readable once both were read", nm);
	check(r == 0, what, "%s %s, socket %s, pipe %s", nm, res(r, errno), revs(p[0].revents),
	      revs(p[1].revents));

	/* full: a nonblocking send hit EAGAIN while the peer does not read */
	uint64_t filled = fill(&c, &e);
	snprintf(what, sizeof(what), "%s: a nonblocking send fills the connection until EAGAIN", nm);
	check(!e && filled > 0, what, "sent %llu bytes, then %s", (unsigned long long)filled,
	      e ? ename(e) : "EAGAIN");
	p[0] = (struct pollfd){.fd = c.fd, .events = POLLOUT};
	p[1] = (struct pollfd){.fd = pp[1], .events = POLLOUT};
	/* an ACK may open room between the EAGAIN and the wait: writable is
	 * then true, and a send makes progress; fill again and look again */
	int tries = 0, spurious = 0;
	for (;;) {
		r = waitfds(api, p, 2, 0);
		if (r < 0 || !(p[0].revents & POLLOUT) || ++tries > 20)
			break;
		uint64_t more = refill(&c);
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
		t_stream_fill(seed_c2p(c.k), c.tx, buf, BUFSZ);
		more = send(c.fd, buf, BUFSZ, MSG_DONTWAIT);
		me = errno;
		if (more > 0) {
			c.tx += (uint64_t)more;
			filled += (uint64_t)more;
		}
	}
	snprintf(what, sizeof(what), "%s: a 200 ms wait on the full socket times out, or reports room a send then uses", nm);
	check(r == 0 || (r == 1 && (p[0].revents & POLLOUT) && more > 0), what, "%s %s, socket %s, send %s", nm,
	      res(r, e), revs(p[0].revents), r == 1 ? res(more, me) : "-");
	ctl_begin("RECV %d %llu", c.k, (unsigned long long)filled);
	r = waitfds(api, p, 1, 10000);
	const char *rep = ctl_end();
	snprintf(what, sizeof(what), "%s: writable again after the peer drained the %llu bytes", nm,
		 (unsigned long long)filled);
	check(is_ok(rep) && r == 1 && (p[0].revents & POLLOUT), what, "peer %s, %s %s, socket %s", rep, nm,
	      res(r, errno), revs(p[0].revents));

	/* half-close by the peer */
	rep = ctl_cmd("SHUTWR %d", c.k);
	p[0] = (struct pollfd){.fd = c.fd, .events = POLLIN | POLLRDHUP};
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
	r = (int)recv(c.fd, buf2, 10, MSG_DONTWAIT);
	e = errno;
	snprintf(what, sizeof(what), "%s: read returns 0 after the peer's shutdown(SHUT_WR)", nm);
	check(r == 0, what, "recv %s", res(r, e));
	snprintf(what, sizeof(what), "%s: the half-closed socket still sends", nm);
	check(send_stream(&c, c.fd, 100) == 0 && peer_got(&c, 100, why, sizeof(why)), what, "%s", why);
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);

	/* reset by the peer */
	c = conn_out();
	send_stream(&c, c.fd, 100); /* left unread: the peer's close resets */
	rep = ctl_cmd("RESET %d", c.k);
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
	close(pp[0]);
	close(pp[1]);
}

/* ---- epoll */

#define U64_A 0x1122334455667788ull
#define U64_B 0x8877665544332211ull
#define U64_C 0x0102030405060708ull
#define U64_P 0xfeedfacecafebeefull

static void check_epoll(void)
{
	char why[200];
	struct epoll_event ev, out[8];
	int r, e, pp[2];
	sigset_t mask;
	sigemptyset(&mask);
	begin("epoll", 60);

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

	struct conn c = conn_out();
	if (pipe(pp) < 0)
		t_die("pipe: %s", strerror(errno));
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = U64_A};
	r = epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	check(r == 0, "EPOLL_CTL_ADD of a connected socket", "epoll_ctl %s", res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
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

	/* level-triggered */
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "epoll_wait: an empty socket and pipe are not ready (timeout 0)", "epoll_wait %s",
	      res(r, errno));
	peer_sends(&c, 10);
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
	check(get_bytes(&c, c.fd, 10, why, sizeof(why)), "epoll: the 10 bytes read", "%s", why);
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

	/* edge-triggered */
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u64 = U64_B};
	r = epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
	check(r == 0, "EPOLL_CTL_MOD to EPOLLIN|EPOLLET", "epoll_ctl %s", res(r, errno));
	peer_sends(&c, 10);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == U64_B,
	      "EPOLLET: reported when bytes arrive, with the data.u64 set by MOD", "epoll_wait %s, u64 0x%llx",
	      res(r, errno), r > 0 ? (unsigned long long)out[0].data.u64 : 0ull);
	r = epoll_wait(ep, out, 8, 100);
	check(r == 0, "EPOLLET: not reported again while unread and nothing new arrives", "epoll_wait %s",
	      res(r, errno));
	peer_sends(&c, 10);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN), "EPOLLET: reported again when more bytes arrive",
	      "epoll_wait %s", res(r, errno));
	r = epoll_wait(ep, out, 8, 100);
	check(r == 0, "EPOLLET: and then not again", "epoll_wait %s", res(r, errno));
	check(get_bytes(&c, c.fd, 20, why, sizeof(why)), "EPOLLET: all 20 bytes read", "%s", why);
	r = epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, NULL);
	check(r == 0, "EPOLL_CTL_DEL of the socket", "epoll_ctl %s", res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, NULL);
	e = errno;
	check(r < 0 && e == ENOENT, "EPOLL_CTL_DEL of it again fails with ENOENT", "epoll_ctl %s", res(r, e));
	r = epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
	e = errno;
	check(r < 0 && e == ENOENT, "EPOLL_CTL_MOD after DEL fails with ENOENT", "epoll_ctl %s", res(r, e));
	peer_sends(&c, 3);
	wait_nread(c.fd, 3);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "a deleted socket is no longer reported", "epoll_wait %s", res(r, errno));
	check(get_bytes(&c, c.fd, 3, why, sizeof(why)), "the 3 bytes read", "%s", why);

	/* one-shot */
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLONESHOT, .data.u64 = U64_C};
	r = epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	peer_sends(&c, 5);
	r = epoll_wait(ep, out, 8, 2000);
	check(r == 1 && (out[0].events & EPOLLIN) && out[0].data.u64 == U64_C, "EPOLLONESHOT: reported once",
	      "epoll_wait %s", res(r, errno));
	r = epoll_wait(ep, out, 8, 100);
	check(r == 0, "EPOLLONESHOT: not reported again while unread", "epoll_wait %s", res(r, errno));
	peer_sends(&c, 5);
	r = epoll_wait(ep, out, 8, 200);
	check(r == 0, "EPOLLONESHOT: not reported when more bytes arrive before it is re-armed",
	      "epoll_wait %s", res(r, errno));
	r = epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
	e = epoll_wait(ep, out, 8, 1000);
	check(r == 0 && e == 1 && (out[0].events & EPOLLIN),
	      "EPOLLONESHOT: reported again once EPOLL_CTL_MOD re-armed it", "epoll_ctl %s, epoll_wait %s",
	      res(r, errno), res(e, errno));
	check(get_bytes(&c, c.fd, 10, why, sizeof(why)), "EPOLLONESHOT: the 10 bytes read", "%s", why);
	epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, NULL);

	/* EPOLLOUT: level-triggered, not while full, again after the drain */
	ev = (struct epoll_event){.events = EPOLLOUT, .data.u64 = U64_A};
	epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 1 && out[0].events == EPOLLOUT, "EPOLLOUT: a fresh connection is writable",
	      "epoll_wait %s, events %s", res(r, errno), r > 0 ? evs(out[0].events) : "-");
	uint64_t filled = fill(&c, &e);
	int tries = 0, spurious = 0;
	for (;;) {
		r = epoll_wait(ep, out, 8, 0);
		if (r <= 0 || ++tries > 20)
			break;
		uint64_t more = refill(&c);
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
	ctl_begin("RECV %d %llu", c.k, (unsigned long long)filled);
	r = epoll_wait(ep, out, 8, 10000);
	const char *rep = ctl_end();
	check(is_ok(rep) && r == 1 && (out[0].events & EPOLLOUT), "EPOLLOUT: reported again after the peer drained",
	      "peer %s, epoll_wait %s", rep, res(r, errno));

	/* EPOLLRDHUP */
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLRDHUP, .data.u64 = U64_A};
	epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
	rep = ctl_cmd("SHUTWR %d", c.k);
	r = epoll_wait(ep, out, 8, 2000);
	check(is_ok(rep) && r == 1 && out[0].events == (EPOLLIN | EPOLLRDHUP),
	      "EPOLLIN|EPOLLRDHUP (no EPOLLHUP) after the peer's shutdown(SHUT_WR)", "peer %s, epoll_wait %s, events %s",
	      rep, res(r, errno), r > 0 ? evs(out[0].events) : "-");
	r = (int)recv(c.fd, buf2, 10, MSG_DONTWAIT);
	check(r == 0, "epoll: read returns 0 after EPOLLRDHUP", "recv %s", res(r, errno));
	close(c.fd); /* closing the only descriptor removes it from the set */
	ctl_cmd("CLOSE %d", c.k);
	r = epoll_wait(ep, out, 8, 0);
	check(r == 0, "a closed socket leaves the epoll set", "epoll_wait %s", res(r, errno));

	/* reset: EPOLLHUP and EPOLLERR come unasked */
	c = conn_out();
	send_stream(&c, c.fd, 100);
	ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = U64_B};
	epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	rep = ctl_cmd("RESET %d", c.k);
	r = epoll_wait(ep, out, 8, 2000);
	check(is_ok(rep) && r == 1 && (out[0].events & EPOLLHUP) && (out[0].events & EPOLLERR),
	      "EPOLLHUP|EPOLLERR reported after the peer reset (asked only for EPOLLIN)", "peer %s, epoll_wait %s, events %s",
	      rep, res(r, errno), r > 0 ? evs(out[0].events) : "-");
	int err;
	r = sock_error(c.fd, &err);
	check(r == 0 && err == ECONNRESET, "epoll: SO_ERROR is ECONNRESET after the reset", "value %s",
	      err >= 0 ? ename(err) : "-1");
	close(c.fd);
	close(ep);
	close(pp[0]);
	close(pp[1]);

	/* EPOLLOUT|EPOLLET after each EAGAIN, as event-driven servers write:
	 * the peer reads 4 MiB meanwhile; every wait must end with EPOLLOUT.
	 * A small SO_SNDBUF makes sends hit EAGAIN often. */
	ep = epoll_create1(0);
	c = conn_out_sndbuf(16384);
	int cycles = 0, lost = 0;
	char lostwhy[200] = "";
	/* full first (the peer not reading yet): at least one wait */
	size_t sent = (size_t)fill(&c, &e);
	const size_t stream = sent + (4 << 20);
	fcntl(c.fd, F_SETFL, O_NONBLOCK);
	ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u64 = U64_C};
	epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
	/* the peer starts reading only once a send found the socket full,
	 * so at least one wait happens however fast the peer reads */
	int reading = 0;
	while (sent < stream) {
		size_t m = stream - sent < BUFSZ ? stream - sent : BUFSZ;
		t_stream_fill(seed_c2p(c.k), c.tx, buf, m);
		ssize_t n = send(c.fd, buf, m, 0);
		if (n > 0) {
			c.tx += (uint64_t)n;
			sent += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			snprintf(lostwhy, sizeof(lostwhy), "send %s after %zu bytes", ename(errno), sent);
			lost = 1;
			break;
		}
		cycles++;
		ev = (struct epoll_event){.events = EPOLLOUT | EPOLLET, .data.u64 = U64_C};
		epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
		if (!reading) {
			ctl_begin("RECV %d %zu", c.k, stream);
			reading = 1;
		}
		r = epoll_wait(ep, out, 8, 5000);
		if (r != 1 || !(out[0].events & EPOLLOUT)) {
			struct pollfd pw = {.fd = c.fd, .events = POLLOUT};
			int pr = poll(&pw, 1, 0);
			snprintf(lostwhy, sizeof(lostwhy),
				 "wait %d after EAGAIN: epoll_wait %s within 5 s, %zu of %zu bytes sent; poll now %d %s", cycles,
				 res(r, errno), sent, stream, pr, revs(pw.revents));
			lost = 1;
			/* finish the stream blocking, so the peer's RECV ends */
			fcntl(c.fd, F_SETFL, 0);
			while (sent < stream) {
				m = stream - sent < BUFSZ ? stream - sent : BUFSZ;
				t_stream_fill(seed_c2p(c.k), c.tx, buf, m);
				if (t_write_full(c.fd, buf, m) < 0)
					break;
				c.tx += m;
				sent += m;
			}
			break;
		}
		ev = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.u64 = U64_C};
		epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
	}
	if (!reading) {
		/* a send failed before any wait: the peer still has to read it all */
		ctl_begin("RECV %d %zu", c.k, stream);
		fcntl(c.fd, F_SETFL, 0);
		while (sent < stream) {
			size_t m = stream - sent < BUFSZ ? stream - sent : BUFSZ;
			t_stream_fill(seed_c2p(c.k), c.tx, buf, m);
			if (t_write_full(c.fd, buf, m) < 0)
				break;
			c.tx += m;
			sent += m;
		}
	}
	rep = ctl_end();
	check(!lost && cycles > 0, "EPOLLOUT|EPOLLET: after each EAGAIN, reported once the reading peer made room",
	      "%s (%d waits)", lost ? lostwhy : "no send ever hit EAGAIN", cycles);
	check(is_ok(rep), "EPOLLOUT|EPOLLET: the peer received all bytes intact", "peer %s", rep);
	close(c.fd);
	ctl_cmd("CLOSE %d", c.k);
	close(ep);

	/* an epoll set inside another */
	int inner = epoll_create1(0), outer = epoll_create1(0);
	c = conn_out();
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

/* ---- readiness across fork */

static void check_fork(void)
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

static void check_idle(void)
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

static void check_dup(void)
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

static void check_sendfile(void)
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

static int check_main(const char *host, int port)
{
	struct sigaction sa = {.sa_handler = on_pipe};
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	base_port = port;
	peer_ip.sin_family = AF_INET;
	if (inet_pton(AF_INET, host, &peer_ip.sin_addr) != 1)
		t_die("nonblocking-and-readiness: %s: not an IPv4 address", host);
	lfd_own = tcp_listen(port + 3, 0);
	begin("setup", 30);
	ctl = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = peer_at(port);
	if (ctl < 0 || connect(ctl, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("nonblocking-and-readiness: control connection to %s:%d: %s", host, port, strerror(errno));
	nconns++;

	check_flags();
	check_listener();
	check_data();
	check_nosignal();
	check_reset();
	check_connect();
	for (int api = API_POLL; api <= API_PSELECT; api++)
		check_poll_family((enum api)api);
	check_epoll();
	check_fork();
	check_idle();
	check_dup();
	check_sendfile();
	alarm(0);
	printf("summary: checks=%d failed=%d connections=%d refused=%d\n", nchecks, nfailed, nconns, nrefused);
	fflush(stdout);
	close(ctl);
	return nfailed ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "peer"))
		return peer_main(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "check"))
		return check_main(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: nonblocking-and-readiness peer PORT\n"
			"       nonblocking-and-readiness check HOST PORT\n");
	return 2;
}
