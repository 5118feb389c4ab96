/*
 * bench - one benchmark program for kernel TCP, plain rsockets and rshare.
 *
 *   bench server PORT [-a ADDR] [-t SECS]
 *   bench rtt HOST PORT [-n N] [-s SIZE] [-B ADDR] [-t SECS]
 *   bench stream HOST PORT [-b TOTAL] [-w WRITESIZE] [-B ADDR] [-t SECS]
 *   bench connrate HOST PORT [-n N] [-B ADDR] [-t SECS]
 *   bench hold HOST PORT -c K [-f FILE] [-m PER] [-i FIRST] [-B ADDR] [-t SECS]
 *   bench msgrate HOST PORT -c K [-d SECS] [-s SIZE] [-f FILE] [-m PER] [-i FIRST]
 *                 [-B ADDR] [-t SECS]
 *
 * Plain blocking BSD sockets only (socket, bind, listen, accept, connect,
 * read, write, shutdown, close; no epoll, no accept4, no SOCK_NONBLOCK, no
 * SO_REUSEPORT), so the same binary runs unchanged on kernel TCP, under
 * LD_PRELOAD=librspreload.so (plain rsockets) and under `rshare run --`.
 *
 * server: listens on ADDR:PORT (default 0.0.0.0), prints
 *   "server port=P ready=1", and serves each accepted connection in a
 *   thread of its own.  The connection's first byte chooses the mode:
 *     'R' echo: every byte after it is sent back (rtt)
 *     'S' sink: reads to EOF, then writes the byte count (8 bytes, big
 *         endian) and closes (stream)
 *     'C' request/response: the byte opens a 64-byte request; the server
 *         sends the 64 bytes back, then waits for EOF and closes (connrate)
 *     'H' hold: the server answers one byte 'k', then keeps the connection
 *         open until the peer closes it (hold)
 * rtt: one connection; N round trips of SIZE bytes (default 1000 x 64 B,
 *   at most 64K: the whole message is written before its echo is read, so
 *   a bigger one could fill every buffer on the way and stall) after N/10
 *   (at most 100) untimed ones; each echo is checked.
 *   Prints "rtt size=S n=N median_us=X p99_us=Y min_us= mean_us= max_us=".
 * stream: one connection; TOTAL bytes (default 64M) in writes of WRITESIZE
 *   (default 64K), shutdown(SHUT_WR), then the server's count must equal
 *   TOTAL.  Timed from the first write to the count's arrival.  Prints
 *   "stream write=W bytes=B MBps=X secs=T" (MB = 10^6 bytes).
 * connrate: N (default 200) sequential connections, after one untimed: each
 *   connect, one 64-byte request and its checked response, close.  Prints
 *   "connrate n=N conns_per_s=X connect_ms=A rr_ms=B close_ms=C" (means per
 *   connection).
 * hold: opens K connections and waits for each server's 'k', prints
 *   "held K", then waits until FILE exists (none: closes at once), closes
 *   them all and exits 0.  Connection i (0-based) goes to port
 *   PORT + (FIRST + i) / PER when PER > 0 (several servers, each holding at
 *   most PER connections), else to PORT.
 * msgrate: opens K connections (one thread each) and does one untimed round
 *   trip on each, prints "ready K", waits until FILE exists (none: goes on
 *   at once), then every connection does round trips of SIZE bytes (default
 *   64, at most 64K; each echo checked) back to back for SECS seconds
 *   (default 2).  A message is one round trip.  Prints "msgrate conns=K
 *   size=S msgs=M secs=T msgs_per_s=X" (all connections together; T from
 *   the start to the last connection's last echo).  Several such processes
 *   started at once and released by one FILE give an aggregate rate.  PER
 *   and FIRST spread the connections over ports as in hold.
 *
 * Sizes take K, M or G (powers of 1024).  -B binds the client's sockets to
 * ADDR (port 0) before connect.  -t bounds the whole run (default 120 s
 * for clients, 3600 s for the server; 0: no bound): past it the program
 * prints "error mode=M op=timeout secs=T" on stderr and exits 3.  Any other
 * failure prints "error mode=M op=OP errno=NAME" (or a key=value detail) on
 * stderr and exits 1; usage errors exit 2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RR_SIZE 64

static const char *mode = "bench";
static char alarm_msg[128];
static size_t alarm_len;

static void usage(void)
{
	fprintf(stderr,
		"usage: bench server PORT [-a ADDR] [-t SECS]\n"
		"       bench rtt HOST PORT [-n N] [-s SIZE] [-B ADDR] [-t SECS]\n"
		"       bench stream HOST PORT [-b TOTAL] [-w WRITESIZE] [-B ADDR] [-t SECS]\n"
		"       bench connrate HOST PORT [-n N] [-B ADDR] [-t SECS]\n"
		"       bench hold HOST PORT -c K [-f FILE] [-m PER] [-i FIRST] [-B ADDR] [-t SECS]\n"
		"       bench msgrate HOST PORT -c K [-d SECS] [-s SIZE] [-f FILE] [-m PER] [-i FIRST]\n"
		"                     [-B ADDR] [-t SECS]\n");
	exit(2);
}

__attribute__((noreturn)) static void bad(const char *what)
{
	fprintf(stderr, "bench: %s\n", what);
	exit(2);
}

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "unknown";
}

__attribute__((noreturn)) static void fail(const char *op, int err)
{
	fprintf(stderr, "error mode=%s op=%s errno=%s\n", mode, op, errname(err));
	exit(1);
}

__attribute__((noreturn, format(printf, 2, 3))) static void failx(const char *op, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "error mode=%s op=%s ", mode, op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Async-signal-safe: the raw system call, past any preloaded write(). */
static void on_alarm(int sig)
{
	(void)sig;
	syscall(SYS_write, 2, alarm_msg, alarm_len);
	_exit(3);
}

static void set_deadline(long secs)
{
	int n = snprintf(alarm_msg, sizeof(alarm_msg), "error mode=%s op=timeout secs=%ld\n", mode, secs);
	alarm_len = n > 0 && (size_t)n < sizeof(alarm_msg) ? (size_t)n : 0;
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	if (secs > 0)
		alarm((unsigned)secs);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long parse_num(const char *s, const char *what)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	long long mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1LL << 10; end++; break;
	case 'm': case 'M': mul = 1LL << 20; end++; break;
	case 'g': case 'G': mul = 1LL << 30; end++; break;
	}
	if (errno || end == s || *end || v < 0 || v > (1LL << 42) / mul) {
		fprintf(stderr, "bench: bad %s: %s\n", what, s);
		exit(2);
	}
	return (long)(v * mul);
}

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static ssize_t read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t put = 0;
	while (put < len) {
		ssize_t n = write(fd, (const char *)buf + put, len - put);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		put += (size_t)n;
	}
	return 0;
}

/* ---- addresses ---- */

struct addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

static void resolve(const char *host, int port, struct addr *a, int family)
{
	struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV}, *res;
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	int rc = getaddrinfo(host, ps, &hints, &res);
	if (rc) {
		fprintf(stderr, "error mode=%s op=resolve host=%s msg=\"%s\"\n", mode, host, gai_strerror(rc));
		exit(1);
	}
	memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
	a->len = res->ai_addrlen;
	freeaddrinfo(res);
}

static void set_port(struct addr *a, int port)
{
	if (a->ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
}

struct client {
	const char *host;
	int port;
	struct addr dst;
	int has_src;
	struct addr src;
};

static void client_init(struct client *c, const char *host, const char *port, const char *bind_to)
{
	c->host = host;
	c->port = (int)parse_num(port, "port");
	if (c->port < 1 || c->port > 65535)
		usage();
	resolve(host, c->port, &c->dst, AF_UNSPEC);
	c->has_src = bind_to != NULL;
	if (bind_to)
		resolve(bind_to, 0, &c->src, c->dst.ss.ss_family);
}

/* A connected socket to the client's destination at PORT. */
static int dial(const struct client *c, int port)
{
	struct addr d = c->dst;
	set_port(&d, port);
	int fd = socket(d.ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		fail("socket", errno);
	if (c->has_src && bind(fd, (const struct sockaddr *)&c->src.ss, c->src.len) < 0)
		fail("bind", errno);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* best effort */
	while (connect(fd, (const struct sockaddr *)&d.ss, d.len) < 0) {
		if (errno != EINTR)
			fail("connect", errno);
	}
	return fd;
}

/* ---- server ---- */

static void serve_echo(int fd)
{
	size_t cap = 64 << 10;
	char *buf = malloc(cap);
	if (!buf)
		return;
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || write_full(fd, buf, (size_t)n) < 0)
			break;
	}
	free(buf);
}

static void serve_sink(int fd)
{
	size_t cap = 256 << 10;
	char *buf = malloc(cap);
	uint64_t count = 0;
	if (!buf)
		return;
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return; /* no count: the client reports the failure */
		}
		if (n == 0)
			break;
		count += (uint64_t)n;
	}
	free(buf);
	unsigned char out[8];
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(count >> (56 - 8 * i));
	write_full(fd, out, sizeof(out));
}

/* Read until EOF (or an error), discarding. */
static void drain(int fd)
{
	char buf[512];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
	}
}

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char m, req[RR_SIZE];
	if (read_full(fd, &m, 1) == 1) {
		switch (m) {
		case 'R':
			serve_echo(fd);
			break;
		case 'S':
			serve_sink(fd);
			break;
		case 'C':
			req[0] = m;
			if (read_full(fd, req + 1, RR_SIZE - 1) == RR_SIZE - 1 &&
			    write_full(fd, req, RR_SIZE) == 0)
				drain(fd);
			break;
		case 'H':
			if (write_full(fd, "k", 1) == 0)
				drain(fd);
			break;
		default:
			break;
		}
	}
	close(fd);
	return NULL;
}

static int cmd_server(int argc, char **argv)
{
	const char *bind_to = NULL;
	long secs = 3600;
	int opt;
	if (argc < 2)
		usage();
	int port = (int)parse_num(argv[1], "port");
	optind = 2;
	while ((opt = getopt(argc, argv, "a:t:")) != -1) {
		switch (opt) {
		case 'a': bind_to = optarg; break;
		case 't': secs = parse_num(optarg, "seconds"); break;
		default: usage();
		}
	}
	if (optind != argc || port < 1 || port > 65535)
		usage();
	set_deadline(secs);

	struct addr a;
	resolve(bind_to ? bind_to : "0.0.0.0", port, &a, AF_UNSPEC);
	int lfd = socket(a.ss.ss_family, SOCK_STREAM, 0);
	if (lfd < 0)
		fail("socket", errno);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a.ss, a.len) < 0)
		fail("bind", errno);
	if (listen(lfd, 1024) < 0)
		fail("listen", errno);
	printf("server port=%d ready=1\n", port);
	fflush(stdout);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				fprintf(stderr, "warning mode=server op=accept errno=%s\n", errname(errno));
				usleep(10000);
				continue;
			}
			fail("accept", errno);
		}
		one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		int rc = pthread_create(&t, &attr, conn_thread, (void *)(intptr_t)fd);
		if (rc) {
			fprintf(stderr, "warning mode=server op=pthread_create errno=%s\n", errname(rc));
			close(fd);
		}
	}
}

/* ---- clients ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int cmd_rtt(struct client *c, long n, long size)
{
	if (n < 1)
		bad("-n must be at least 1");
	if (size < 1 || size > (64L << 10))
		bad("-s must be 1 to 64K");
	long warm = n / 10 < 100 ? n / 10 : 100;
	unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
	double *t = malloc((size_t)n * sizeof(*t));
	if (!out || !in || !t)
		failx("malloc", "size=%ld", size);
	for (long i = 0; i < size; i++)
		out[i] = (unsigned char)(i * 7 + 1);
	int fd = dial(c, c->port);
	if (write_full(fd, "R", 1) < 0)
		fail("write", errno);
	for (long i = 0; i < warm + n; i++) {
		out[0] = (unsigned char)i;
		double t0 = now_s();
		if (write_full(fd, out, (size_t)size) < 0)
			fail("write", errno);
		ssize_t got = read_full(fd, in, (size_t)size);
		if (got < 0)
			fail("read", errno);
		if (got != size)
			failx("read", "msg=early_eof round=%ld got=%zd want=%ld", i, got, size);
		double t1 = now_s();
		if (memcmp(in, out, (size_t)size))
			failx("verify", "msg=echo_differs round=%ld", i);
		if (i >= warm)
			t[i - warm] = (t1 - t0) * 1e6;
	}
	close(fd);
	double sum = 0;
	for (long i = 0; i < n; i++)
		sum += t[i];
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	long p99i = (99 * n + 99) / 100 - 1; /* ceil(0.99 n) - 1 */
	printf("rtt size=%ld n=%ld median_us=%.1f p99_us=%.1f min_us=%.1f mean_us=%.1f max_us=%.1f\n",
	       size, n, median, t[p99i], t[0], sum / (double)n, t[n - 1]);
	free(out);
	free(in);
	free(t);
	return 0;
}

static int cmd_stream(struct client *c, long total, long wsize)
{
	if (wsize < 1 || wsize > (64L << 20))
		bad("-w must be 1 to 64M");
	char *buf = malloc((size_t)wsize);
	if (!buf)
		failx("malloc", "size=%ld", wsize);
	for (long i = 0; i < wsize; i++)
		buf[i] = (char)(i * 13 + 5);
	int fd = dial(c, c->port);
	if (write_full(fd, "S", 1) < 0)
		fail("write", errno);
	double t0 = now_s();
	for (long left = total; left > 0;) {
		size_t chunk = (size_t)(left < wsize ? left : wsize);
		if (write_full(fd, buf, chunk) < 0)
			fail("write", errno);
		left -= (long)chunk;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		fail("shutdown", errno);
	unsigned char in[8];
	ssize_t got = read_full(fd, in, sizeof(in));
	if (got < 0)
		fail("read", errno);
	if (got != 8)
		failx("read", "msg=no_count got=%zd", got);
	double secs = now_s() - t0;
	uint64_t count = 0;
	for (int i = 0; i < 8; i++)
		count = count << 8 | in[i];
	if (count != (uint64_t)total)
		failx("verify", "msg=count_differs got=%llu want=%ld", (unsigned long long)count, total);
	close(fd);
	printf("stream write=%ld bytes=%ld MBps=%.1f secs=%.3f\n", wsize, total,
	       secs > 0 ? (double)total / secs / 1e6 : 0.0, secs);
	free(buf);
	return 0;
}

static void one_request(int fd, long i)
{
	unsigned char req[RR_SIZE], rep[RR_SIZE];
	req[0] = 'C';
	for (int j = 1; j < RR_SIZE; j++)
		req[j] = (unsigned char)(i + j);
	if (write_full(fd, req, RR_SIZE) < 0)
		fail("write", errno);
	ssize_t got = read_full(fd, rep, RR_SIZE);
	if (got < 0)
		fail("read", errno);
	if (got != RR_SIZE)
		failx("read", "msg=early_eof conn=%ld got=%zd", i, got);
	if (memcmp(req, rep, RR_SIZE))
		failx("verify", "msg=response_differs conn=%ld", i);
}

static int cmd_connrate(struct client *c, long n)
{
	if (n < 1)
		bad("-n must be at least 1");
	double tc = 0, trr = 0, tcl = 0;
	/* one untimed connection first: the first one may set up links */
	int fd = dial(c, c->port);
	one_request(fd, -1);
	if (close(fd) < 0)
		fail("close", errno);
	double start = now_s();
	for (long i = 0; i < n; i++) {
		double t0 = now_s();
		fd = dial(c, c->port);
		double t1 = now_s();
		one_request(fd, i);
		double t2 = now_s();
		if (close(fd) < 0)
			fail("close", errno);
		double t3 = now_s();
		tc += t1 - t0;
		trr += t2 - t1;
		tcl += t3 - t2;
	}
	double secs = now_s() - start;
	printf("connrate n=%ld conns_per_s=%.1f connect_ms=%.3f rr_ms=%.3f close_ms=%.3f\n", n,
	       (double)n / secs, tc * 1e3 / (double)n, trr * 1e3 / (double)n, tcl * 1e3 / (double)n);
	return 0;
}

/* The port of connection I: PORT + (FIRST + I) / PER, or PORT when PER is 0. */
static int spread_port(const struct client *c, long per, long first, long i)
{
	long port = c->port + (per ? (first + i) / per : 0);
	if (port > 65535)
		failx("connect", "msg=port_out_of_range port=%ld", port);
	return (int)port;
}

static int cmd_hold(struct client *c, long k, const char *file, long per, long first)
{
	if (k < 1)
		bad("hold needs -c K, K at least 1");
	int *fds = malloc((size_t)k * sizeof(*fds));
	if (!fds)
		failx("malloc", "conns=%ld", k);
	for (long i = 0; i < k; i++) {
		int port = spread_port(c, per, first, i);
		fds[i] = dial(c, port);
		char ack;
		if (write_full(fds[i], "H", 1) < 0)
			fail("write", errno);
		ssize_t got = read_full(fds[i], &ack, 1);
		if (got < 0)
			fail("read", errno);
		if (got != 1 || ack != 'k')
			failx("read", "msg=no_ack conn=%ld port=%d", i, port);
	}
	printf("held %ld\n", k);
	fflush(stdout);
	if (file)
		while (access(file, F_OK) != 0)
			usleep(20000);
	for (long i = 0; i < k; i++)
		close(fds[i]);
	free(fds);
	return 0;
}

struct pinger {
	int fd;
	long size;
	long msgs;
	double until;
	pthread_t thread;
};

/* One round trip of P->size bytes on P->fd, the echo checked; I tags it. */
static void ping(struct pinger *p, unsigned char *out, unsigned char *in, long i)
{
	out[0] = (unsigned char)i;
	out[p->size - 1] = (unsigned char)(i >> 8);
	if (write_full(p->fd, out, (size_t)p->size) < 0)
		fail("write", errno);
	ssize_t got = read_full(p->fd, in, (size_t)p->size);
	if (got < 0)
		fail("read", errno);
	if (got != p->size)
		failx("read", "msg=early_eof round=%ld got=%zd want=%ld", i, got, p->size);
	if (memcmp(in, out, (size_t)p->size))
		failx("verify", "msg=echo_differs round=%ld", i);
}

static void *pinger_thread(void *arg)
{
	struct pinger *p = arg;
	unsigned char *out = malloc((size_t)p->size), *in = malloc((size_t)p->size);
	if (!out || !in)
		failx("malloc", "size=%ld", p->size);
	for (long i = 0; i < p->size; i++)
		out[i] = (unsigned char)(i * 11 + 3);
	do
		ping(p, out, in, p->msgs++);
	while (now_s() < p->until);
	free(out);
	free(in);
	return NULL;
}

static int cmd_msgrate(struct client *c, long k, long secs, long size, const char *file, long per,
		       long first)
{
	if (k < 1)
		bad("msgrate needs -c K, K at least 1");
	if (secs < 1)
		bad("-d must be at least 1");
	if (size < 1 || size > (64L << 10))
		bad("-s must be 1 to 64K");
	struct pinger *p = calloc((size_t)k, sizeof(*p));
	unsigned char *out = malloc((size_t)size), *in = malloc((size_t)size);
	if (!p || !out || !in)
		failx("malloc", "conns=%ld", k);
	memset(out, 'w', (size_t)size);
	for (long i = 0; i < k; i++) {
		p[i].fd = dial(c, spread_port(c, per, first, i));
		p[i].size = size;
		if (write_full(p[i].fd, "R", 1) < 0)
			fail("write", errno);
		ping(&p[i], out, in, 0); /* untimed: the connection works */
	}
	printf("ready %ld\n", k);
	fflush(stdout);
	if (file)
		while (access(file, F_OK) != 0)
			usleep(1000);
	double t0 = now_s();
	for (long i = 0; i < k; i++) {
		p[i].until = t0 + (double)secs;
		int rc = pthread_create(&p[i].thread, NULL, pinger_thread, &p[i]);
		if (rc)
			fail("pthread_create", rc);
	}
	long msgs = 0;
	for (long i = 0; i < k; i++) {
		pthread_join(p[i].thread, NULL);
		msgs += p[i].msgs;
	}
	double t = now_s() - t0;
	for (long i = 0; i < k; i++)
		close(p[i].fd);
	printf("msgrate conns=%ld size=%ld msgs=%ld secs=%.3f msgs_per_s=%.1f\n", k, size, msgs, t,
	       (double)msgs / t);
	free(p);
	free(out);
	free(in);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	mode = argv[1];
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	if (!strcmp(mode, "server"))
		return cmd_server(argc - 1, argv + 1);

	static const char *const modes[] = {"rtt", "stream", "connrate", "hold", "msgrate"};
	int known = 0;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		known |= !strcmp(mode, modes[i]);
	if (!known || argc < 4)
		usage();
	const char *host = argv[2], *port = argv[3], *bind_to = NULL, *file = NULL;
	long n = -1, size = 64, total = 64L << 20, wsize = 64L << 10, k = -1, per = 0, first = 0;
	long secs = 120, dur = 2;
	int opt;
	optind = 4;
	while ((opt = getopt(argc, argv, "n:s:b:w:c:f:m:i:d:B:t:")) != -1) {
		switch (opt) {
		case 'n': n = parse_num(optarg, "count"); break;
		case 's': size = parse_num(optarg, "size"); break;
		case 'b': total = parse_num(optarg, "total"); break;
		case 'w': wsize = parse_num(optarg, "write size"); break;
		case 'c': k = parse_num(optarg, "connections"); break;
		case 'f': file = optarg; break;
		case 'm': per = parse_num(optarg, "per-port"); break;
		case 'i': first = parse_num(optarg, "first"); break;
		case 'd': dur = parse_num(optarg, "seconds"); break;
		case 'B': bind_to = optarg; break;
		case 't': secs = parse_num(optarg, "seconds"); break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	set_deadline(secs);
	struct client c;
	client_init(&c, host, port, bind_to);
	int rc;
	if (!strcmp(mode, "rtt"))
		rc = cmd_rtt(&c, n < 0 ? 1000 : n, size);
	else if (!strcmp(mode, "stream"))
		rc = cmd_stream(&c, total, wsize);
	else if (!strcmp(mode, "connrate"))
		rc = cmd_connrate(&c, n < 0 ? 200 : n);
	else if (!strcmp(mode, "msgrate"))
		rc = cmd_msgrate(&c, k, dur, size, file, per, first);
	else
		rc = cmd_hold(&c, k, file, per, first);
	fflush(stdout);
	return rc;
}
