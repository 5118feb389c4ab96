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
 *
 * This file holds main, what both sides share and the checker's harness;
 * the peer is readiness/peer.c, the groups of checks readiness/sockets.c
 * (flags, listener, data, SIGPIPE, resets, connect), poll.c (poll, ppoll,
 * select, pselect), epoll.c and fds.c (fork, idle waits, dup, sendfile).
 */
#include "readiness.h"

const char *ename(int e)
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
const char *res(long r, int e)
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
int line_read(int fd, char *buf, size_t len)
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

__attribute__((format(printf, 2, 3))) int line_write(int fd, const char *fmt, ...)
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

int tcp_listen(int port, int nonblock)
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

/* --------------------------------------------------------------- checker */

int ctl = -1, base_port, lfd_own = -1;
struct sockaddr_in peer_ip;
int nchecks, nfailed, nconns, nrefused;
volatile sig_atomic_t sigpipes;
const char *volatile group = "setup";
uint8_t buf[BUFSZ], buf2[BUFSZ];

__attribute__((format(printf, 3, 4))) int check(int ok, const char *what, const char *fmt, ...)
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

void on_pipe(int sig)
{
	(void)sig;
	sigpipes++;
}

void on_alarm(int sig)
{
	char b[200];
	(void)sig;
	int n = snprintf(b, sizeof(b), "not ok - %s: timed out (a call blocked for good)\n", group);
	if (write(1, b, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

void begin(const char *g, unsigned secs)
{
	group = g;
	alarm(secs);
}

double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void ctl_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ctl_begin(const char *fmt, ...)
{
	char b[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (line_write(ctl, "%s", b) < 0)
		t_die("nonblocking-and-readiness: control connection: write: %s", strerror(errno));
}

const char *ctl_end(void)
{
	static char reply[256];
	if (line_read(ctl, reply, sizeof(reply)) < 0)
		t_die("nonblocking-and-readiness: control connection lost (%s)", strerror(errno));
	return reply;
}

/* send a command and wait for its answer */
const char *ctl_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *ctl_cmd(const char *fmt, ...)
{
	char b[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	ctl_begin("%s", b);
	return ctl_end();
}

int is_ok(const char *reply)
{
	return !strncmp(reply, "ok", 2);
}

struct sockaddr_in peer_at(int port)
{
	struct sockaddr_in a = peer_ip;
	a.sin_port = htons((uint16_t)port);
	return a;
}

/* A blocking connection to the peer's data port, accepted there; with
 * SO_SNDBUF set first when sndbuf > 0. */
struct conn conn_out_sndbuf(int sndbuf)
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

struct conn conn_out(void)
{
	return conn_out_sndbuf(0);
}

/* The peer asks it to DIAL our listener: its answer, "ok K" or "err ..." */
const char *dial_in(int *k)
{
	const char *r = ctl_cmd("DIAL %d", base_port + 3);
	if (sscanf(r, "ok %d", k) != 1)
		t_die("nonblocking-and-readiness: %s: peer DIAL: %s", group, r);
	nconns++;
	return r;
}

/* Send n bytes of c's stream, blocking. */
int send_stream(struct conn *c, int fd, size_t n)
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
void peer_sends(struct conn *c, size_t n)
{
	const char *r = ctl_cmd("SEND %d %zu", c->k, n);
	if (!is_ok(r))
		t_die("nonblocking-and-readiness: %s: peer SEND: %s", group, r);
}

/* The peer reads n bytes of c and checks them: 1 when all arrived. */
int peer_got(struct conn *c, size_t n, char *why, size_t wl)
{
	const char *r = ctl_cmd("RECV %d %zu", c->k, n);
	snprintf(why, wl, "peer: %s", r);
	return is_ok(r);
}

/* Read exactly n bytes from fd (c's stream), without blocking, for up to
 * 5 s, checking every byte: 1 when all came and matched. */
int get_bytes(struct conn *c, int fd, size_t n, char *why, size_t wl)
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
void wait_nread(int fd, int n)
{
	double end = now() + 5;
	int v = 0;
	while ((ioctl(fd, FIONREAD, &v) < 0 || v < n) && now() < end)
		usleep(1000);
}

/* Fill fd's sending side while the peer does not read: send without
 * blocking until EAGAIN, and again after a pause, until a send made after
 * a pause fails at once.  The bytes sent (all of c's stream). */
uint64_t fill(struct conn *c, int *err)
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
uint64_t refill(struct conn *c)
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

int fd_flags(int fd)
{
	return fcntl(fd, F_GETFL);
}

int fd_cloexec(int fd)
{
	int f = fcntl(fd, F_GETFD);
	return f < 0 ? -1 : !!(f & FD_CLOEXEC);
}

int sock_error(int fd, int *err)
{
	socklen_t l = sizeof(*err);
	*err = -1;
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &l);
}

const char *revs(short r)
{
	static char b[8][96];
	static int i;
	i = (i + 1) % 8;
	snprintf(b[i], sizeof(b[i]), "%s%s%s%s%s%s%s", r ? "" : "none", r & POLLIN ? "POLLIN " : "",
		 r & POLLOUT ? "POLLOUT " : "", r & POLLRDHUP ? "POLLRDHUP " : "", r & POLLHUP ? "POLLHUP " : "",
		 r & POLLERR ? "POLLERR " : "", r & POLLPRI ? "POLLPRI " : "");
	return b[i];
}

const char *evs(uint32_t e)
{
	static char b[8][128];
	static int i;
	i = (i + 1) % 8;
	snprintf(b[i], sizeof(b[i]), "%s%s%s%s%s%s", e ? "" : "none", e & EPOLLIN ? "EPOLLIN " : "",
		 e & EPOLLOUT ? "EPOLLOUT " : "", e & EPOLLRDHUP ? "EPOLLRDHUP " : "",
		 e & EPOLLHUP ? "EPOLLHUP " : "", e & EPOLLERR ? "EPOLLERR " : "");
	return b[i];
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
