/*
 * bench_client.c - bench's client modes: rtt, stream, connrate, hold and
 * msgrate (bench.c tells what each measures and prints).
 */
#include "bench.h"

/* ---- clients ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int cmd_rtt(struct client *c, long n, long size)
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

int cmd_stream(struct client *c, long total, long wsize)
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

int cmd_connrate(struct client *c, long n)
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

int cmd_hold(struct client *c, long k, const char *file, long per, long first)
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

int cmd_msgrate(struct client *c, long k, long secs, long size, const char *file, long per,
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
