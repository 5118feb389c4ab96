/*
 * echo-client -c CONNS [-s SEED] [-n MSGS] [-t SECS [-x STOPFILE]] [-m MAXSIZE] [-w HOLDFILE] [-r] [-S]
 *             HOST PORT
 *
 * Opens CONNS connections to an echo server, then on each sends MSGS
 * messages (default 16) of random size 1..MAXSIZE bytes (default 256 KiB),
 * or keeps sending messages until SECS seconds have passed (-t; or until
 * STOPFILE exists, -x, if that comes first), while a
 * second thread of the connection reads the echo back and checks every
 * byte against the connection's deterministic stream (seeded by SEED and
 * the connection's index).  Without -w, each connection then shuts down its
 * sending side and expects EOF right after the last echoed byte.
 *
 * Prints one summary line:
 *   echo-client: conns=N verified=N resets=N errors=N bytes=B
 * where B is the number of bytes echoed and checked over all connections;
 * with -S, then " stall_ms=S": the longest time any connection went
 * without an echoed byte (the pause an outage caused, for example).
 * With -w HOLDFILE: after the summary, prints "done", keeps every
 * connection open until HOLDFILE exists (at most 300 s), then closes them.
 *
 * Exit: 0 all verified; 1 any mismatch or error (the message names the
 * connection); 3 a connection was reset (ECONNRESET, or EPIPE after the
 * peer went away: the message says "reset").  With -r a reset is an
 * acceptable end of a connection, and so is an early EOF (a peer that
 * went away with nothing unread closed with FIN first): resets are
 * counted and the exit is 0 if every connection that was not reset
 * verified.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

enum { C_OK = 0, C_ERR = 1, C_RESET = 3 };

struct conn {
	int idx, fd;
	uint64_t seed;
	uint64_t sent;             /* bytes written so far */
	_Atomic uint64_t total;    /* bytes to expect: final once writer_done */
	_Atomic int writer_done;
	_Atomic int result;        /* C_* */
	uint64_t verified;
	double last_t, stall;      /* reader: when bytes last came; the longest wait */
	pthread_t wt, rt;
	char why[200];
};

static int nconns = 0, msgs = 16, secs = 0, allow_reset = 0, show_stall = 0;
static uint64_t maxsize = 256 << 10, base_seed = 1;
static const char *holdfile, *stopfile;
static struct timespec t0;
static struct conn *conns;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static double elapsed(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

/* -x: the stop file exists */
static int stopped(void)
{
	struct stat st;
	return stopfile && stat(stopfile, &st) == 0;
}

static int is_reset(int e)
{
	return e == ECONNRESET || e == EPIPE;
}

/* Record how a connection ended; the first outcome wins. */
static void conn_end(struct conn *c, int result, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void conn_end(struct conn *c, int result, const char *fmt, ...)
{
	int expect = C_OK;
	if (!atomic_compare_exchange_strong(&c->result, &expect, result))
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&out_lock);
	fprintf(stderr, "echo-client %d: connection %d: %s\n", getpid(), c->idx, c->why);
	pthread_mutex_unlock(&out_lock);
	if (result == C_ERR && !allow_reset)
		exit(1); /* corruption: stop at once */
	/* unblock the other thread of this connection */
	shutdown(c->fd, SHUT_RDWR);
}

static void *writer(void *arg)
{
	struct conn *c = arg;
	uint64_t rng = c->seed ^ 0xabcdef;
	uint8_t *buf = malloc(64 << 10);
	if (!buf)
		t_die("echo-client: out of memory");
	for (int m = 0; secs ? elapsed() < secs && !stopped() : m < msgs; m++) {
		uint64_t size = 1 + t_splitmix(&rng) % maxsize;
		/* publish first, so the reader never waits for bytes never sent */
		atomic_fetch_add(&c->total, size);
		while (size) {
			size_t n = size < (64 << 10) ? size : (64 << 10);
			t_stream_fill(c->seed, c->sent, buf, n);
			if (t_write_full(c->fd, buf, n) < 0) {
				int e = errno;
				atomic_fetch_sub(&c->total, size);
				if (is_reset(e))
					conn_end(c, C_RESET, "reset (write: %s) after %llu bytes sent",
						 strerror(e), (unsigned long long)c->sent);
				else
					conn_end(c, C_ERR, "write: %s after %llu bytes sent",
						 strerror(e), (unsigned long long)c->sent);
				goto out;
			}
			c->sent += n;
			size -= n;
		}
	}
	/* ENOTCONN: the connection was reset (as on kernel TCP, a reset
	 * socket is closed); the reader reports it when it reaches the end */
	if (!holdfile && shutdown(c->fd, SHUT_WR) < 0 && errno != ENOTCONN)
		conn_end(c, C_ERR, "shutdown(SHUT_WR): %s", strerror(errno));
out:
	free(buf);
	atomic_store(&c->writer_done, 1);
	return NULL;
}

static void *reader(void *arg)
{
	struct conn *c = arg;
	uint8_t *buf = malloc(64 << 10);
	if (!buf)
		t_die("echo-client: out of memory");
	c->last_t = elapsed();
	for (;;) {
		if (atomic_load(&c->result) != C_OK)
			break;
		/* writer_done before total: once done is seen, total is final */
		int wdone = atomic_load(&c->writer_done);
		uint64_t total = atomic_load(&c->total);
		if (c->verified == total) {
			if (!wdone) {
				/* wait for the writer to publish more, never reading
				 * past what was sent, so an extra byte is still caught */
				struct pollfd p = {.fd = c->fd, .events = POLLIN};
				if (poll(&p, 1, 5) > 0)
					usleep(1000);
				continue;
			}
			if (holdfile)
				break;
			/* after the last byte, EOF and nothing else */
			ssize_t n = read(c->fd, buf, 1);
			if (n == 0)
				break;
			if (n < 0 && is_reset(errno))
				conn_end(c, C_RESET, "reset (read at end: %s)", strerror(errno));
			else if (n < 0)
				conn_end(c, C_ERR, "read at end: %s", strerror(errno));
			else
				conn_end(c, C_ERR, "extra byte after %llu echoed bytes",
					 (unsigned long long)c->verified);
			break;
		}
		uint64_t want = total - c->verified;
		if (want > (64 << 10))
			want = 64 << 10;
		ssize_t n = read(c->fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (is_reset(errno))
				conn_end(c, C_RESET, "reset (read: %s) after %llu echoed bytes",
					 strerror(errno), (unsigned long long)c->verified);
			else
				conn_end(c, C_ERR, "read: %s after %llu echoed bytes",
					 strerror(errno), (unsigned long long)c->verified);
			break;
		}
		if (n == 0) {
			/* -r: a server killed with nothing unread closes with FIN,
			 * and the RST that the next bytes draw comes after it: the
			 * reader sees EOF, on kernel TCP as on rshare */
			conn_end(c, allow_reset ? C_RESET : C_ERR, "%s after %llu of %llu echoed bytes",
				 allow_reset ? "reset (EOF: the peer went away)" : "unexpected EOF",
				 (unsigned long long)c->verified, (unsigned long long)atomic_load(&c->total));
			break;
		}
		long long bad = t_stream_check(c->seed, c->verified, buf, (size_t)n);
		if (bad >= 0) {
			uint8_t want_b = t_stream_byte(c->seed, c->verified + (uint64_t)bad);
			conn_end(c, C_ERR, "mismatch at byte %llu: got 0x%02x, want 0x%02x",
				 (unsigned long long)(c->verified + (uint64_t)bad), buf[bad], want_b);
			break;
		}
		c->verified += (uint64_t)n;
		double now = elapsed();
		if (now - c->last_t > c->stall)
			c->stall = now - c->last_t;
		c->last_t = now;
	}
	free(buf);
	return NULL;
}

static int dial(const char *host, const char *port, int idx)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	int r = getaddrinfo(host, port, &hints, &res);
	if (r)
		t_die("echo-client: %s:%s: %s", host, port, gai_strerror(r));
	int fd = -1, err = 0;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		fprintf(stderr, "echo-client %d: connection %d: connect %s:%s: %s\n",
			getpid(), idx, host, port, strerror(err));
		exit(1);
	}
	return fd;
}

/* Every connection's end: the summary line, and the exit status, or -1
 * when all went well (then -w holds them) */
static int finish(void)
{
	uint64_t bytes = 0;
	double stall = 0;
	int verified = 0, resets = 0, errors = 0;
	for (int i = 0; i < nconns; i++) {
		pthread_join(conns[i].wt, NULL);
		pthread_join(conns[i].rt, NULL);
		switch (atomic_load(&conns[i].result)) {
		case C_OK:
			verified++;
			break;
		case C_RESET:
			resets++;
			break;
		default:
			errors++;
		}
		bytes += conns[i].verified;
		if (conns[i].stall > stall)
			stall = conns[i].stall;
	}
	printf("echo-client: conns=%d verified=%d resets=%d errors=%d bytes=%llu", nconns, verified, resets,
	       errors, (unsigned long long)bytes);
	if (show_stall)
		printf(" stall_ms=%.0f", stall * 1000);
	printf("\n");
	fflush(stdout);
	if (errors)
		return 1;
	if (resets && !allow_reset)
		return 3;
	return -1;
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "c:s:n:t:m:w:x:rS")) != -1) {
		switch (opt) {
		case 'c': nconns = atoi(optarg); break;
		case 's': base_seed = strtoull(optarg, NULL, 0); break;
		case 'n': msgs = atoi(optarg); break;
		case 't': secs = atoi(optarg); break;
		case 'm': maxsize = strtoull(optarg, NULL, 0); break;
		case 'w': holdfile = optarg; break;
		case 'x': stopfile = optarg; break;
		case 'r': allow_reset = 1; break;
		case 'S': show_stall = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 2 || nconns < 1 || msgs < 0 || maxsize < 1)
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	conns = calloc((size_t)nconns, sizeof(*conns));
	if (!conns)
		t_die("echo-client: out of memory");
	for (int i = 0; i < nconns; i++) {
		conns[i].idx = i;
		conns[i].seed = base_seed * 1000003u + (uint64_t)i;
		conns[i].fd = dial(argv[optind], argv[optind + 1], i);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 << 10);
	for (int i = 0; i < nconns; i++) {
		if (pthread_create(&conns[i].rt, &a, reader, &conns[i]) ||
		    pthread_create(&conns[i].wt, &a, writer, &conns[i]))
			t_die("echo-client: pthread_create failed");
	}
	int rc = finish();
	if (rc >= 0)
		return rc;
	if (holdfile) {
		printf("done\n");
		fflush(stdout);
		struct stat st;
		int waited = 0;
		while (stat(holdfile, &st) < 0) {
			if (waited++ > 300 * 20) {
				fprintf(stderr, "echo-client %d: %s never appeared\n", getpid(), holdfile);
				return 1;
			}
			usleep(50000);
		}
	}
	for (int i = 0; i < nconns; i++)
		close(conns[i].fd);
	return 0;
usage:
	fprintf(stderr, "usage: echo-client -c CONNS [-s SEED] [-n MSGS] [-t SECS [-x STOPFILE]] [-m MAXSIZE] [-S] "
			"[-w HOLDFILE] [-r] HOST PORT\n");
	return 2;
}
