/*
 * bench - one benchmark program for kernel TCP, plain rsockets and rshare.
 *
 *   bench server PORT [-a ADDR] [-p THREADS | -P PROCESSES] [-t SECS]
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
 *   thread of its own; with -p, THREADS threads (with -P, PROCESSES
 *   processes) each accept in a loop and serve the connection they took
 *   (a pool blocked in accept).  The connection's first byte chooses the
 *   mode:
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
 *
 * This file holds main and what the modes share; the server is
 * bench_server.c, the client modes bench_client.c.
 */
#include "bench.h"

const char *mode = "bench";
static char alarm_msg[128];
static size_t alarm_len;

void usage(void)
{
	fprintf(stderr,
		"usage: bench server PORT [-a ADDR] [-p THREADS | -P PROCESSES] [-t SECS]\n"
		"       bench rtt HOST PORT [-n N] [-s SIZE] [-B ADDR] [-t SECS]\n"
		"       bench stream HOST PORT [-b TOTAL] [-w WRITESIZE] [-B ADDR] [-t SECS]\n"
		"       bench connrate HOST PORT [-n N] [-B ADDR] [-t SECS]\n"
		"       bench hold HOST PORT -c K [-f FILE] [-m PER] [-i FIRST] [-B ADDR] [-t SECS]\n"
		"       bench msgrate HOST PORT -c K [-d SECS] [-s SIZE] [-f FILE] [-m PER] [-i FIRST]\n"
		"                     [-B ADDR] [-t SECS]\n");
	exit(2);
}

__attribute__((noreturn)) void bad(const char *what)
{
	fprintf(stderr, "bench: %s\n", what);
	exit(2);
}

const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "unknown";
}

__attribute__((noreturn)) void fail(const char *op, int err)
{
	fprintf(stderr, "error mode=%s op=%s errno=%s\n", mode, op, errname(err));
	exit(1);
}

__attribute__((noreturn, format(printf, 2, 3))) void failx(const char *op, const char *fmt, ...)
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

void set_deadline(long secs)
{
	int n = snprintf(alarm_msg, sizeof(alarm_msg), "error mode=%s op=timeout secs=%ld\n", mode, secs);
	alarm_len = n > 0 && (size_t)n < sizeof(alarm_msg) ? (size_t)n : 0;
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	if (secs > 0)
		alarm((unsigned)secs);
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

long parse_num(const char *s, const char *what)
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

void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

ssize_t read_full(int fd, void *buf, size_t len)
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

int write_full(int fd, const void *buf, size_t len)
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

void resolve(const char *host, int port, struct addr *a, int family)
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

void set_port(struct addr *a, int port)
{
	if (a->ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
}

void client_init(struct client *c, const char *host, const char *port, const char *bind_to)
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
int dial(const struct client *c, int port)
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
