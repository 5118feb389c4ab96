/*
 * soak-client -c CONNS (-t SECS | -T MS) [-s SEED] [-m MAXSIZE] [-R READY] [-S STOP] [-E] HOST PORT
 *
 * Keeps CONNS connections to an echo server busy for SECS seconds (or MS
 * milliseconds), one thread each.  A connection sends one message of random size (1..MAXSIZE,
 * default and at most 64 KiB, so that it always fits in flight; a quarter
 * of the messages are at most 64 bytes), reads the echo back and checks
 * every byte against the connection's deterministic stream, again and
 * again.  A connection reset (ECONNRESET or EPIPE, as when the server
 * worker holding it is killed) is counted and the thread connects again,
 * with a fresh stream.  When the time is up each connection shuts down its
 * side and expects EOF right after its last echoed byte (a reset there is
 * counted as a reset).
 *
 * Anything else ends the run with exit 1 and one line saying which
 * connection: a byte that differs (corrupt), EOF before the whole echo
 * (lost: the connection ended without a reset), an extra byte, or any
 * other error.  With -E (the server's workers are killed) an EOF before
 * the whole echo is a reset too, counted apart as well (eofs): the kernel
 * closes a dead process's socket with FIN when it left nothing unread
 * (the worker had read the message and not yet echoed it all).  With -R, the file READY is created once all CONNS
 * connections are up for the first time; with -S, the time is up as soon
 * as the file STOP exists too (a test that ends the run once it has done
 * what it wanted in the middle of it).
 *
 * Prints at the end:
 *   soak-client PID: conns=N opened=O resets=R bytes=B msgs=M corrupt=0 lost=0 errors=0 eofs=E
 * where O counts every connection made (CONNS plus reconnections), B
 * the bytes echoed and verified, and E the resets that were an EOF (-E).
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

static int nconns;
static double secs;
static uint64_t maxsize = 64 << 10, base_seed = 1;
static struct sockaddr_in dst;
static struct timespec t0;
static _Atomic uint64_t opened, resets, bytes, msgs, corrupt, lost, errors, eofs;
static int eof_is_reset; /* -E */
static _Atomic int up;
static const char *ready, *stop;

static double elapsed(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

/* the time is up: SECS passed, or the STOP file came */
static int time_up(void)
{
	return elapsed() >= secs || (stop && access(stop, F_OK) == 0);
}

static int is_reset(int e)
{
	return e == ECONNRESET || e == EPIPE;
}

static int dial(int idx)
{
	for (int tries = 0;; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0) {
			fprintf(stderr, "soak-client %d: connection %d: socket: %s\n", getpid(), idx,
				strerror(errno));
			return -1;
		}
		if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) == 0) {
			atomic_fetch_add(&opened, 1);
			return fd;
		}
		int e = errno;
		close(fd);
		/* a listener's backlog may be momentarily full; nothing else is expected */
		if ((e == EINTR || e == EAGAIN) && tries < 100)
			continue;
		fprintf(stderr, "soak-client %d: connection %d: connect: %s\n", getpid(), idx, strerror(e));
		return -1;
	}
}

static void fail(_Atomic uint64_t *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(_Atomic uint64_t *what, const char *fmt, ...)
{
	va_list ap;
	char line[300];
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	atomic_fetch_add(what, 1);
	fprintf(stderr, "soak-client %d: %s\n", getpid(), line);
}

/* the first time up: the last connection up creates READY */
static void first_up(void)
{
	if (atomic_fetch_add(&up, 1) + 1 == nconns && ready) {
		int r = open(ready, O_WRONLY | O_CREAT, 0644);
		if (r >= 0)
			close(r);
	}
}

/* messages and their echoes on FD until the time is up or something ends
 * them; returns 1 after a reset (connect again), 0 otherwise */
static int echo_loop(int fd, int idx, uint64_t seed, uint64_t *rng, uint8_t *buf, uint8_t *back)
{
	uint64_t pos = 0;
	int again = 0;
	while (!time_up()) {
		uint64_t r = t_splitmix(rng);
		size_t size = 1 + (size_t)((r >> 8) % ((r & 3) ? maxsize : 64));
		t_stream_fill(seed, pos, buf, size);
		if (t_write_full(fd, buf, size) < 0) {
			if (is_reset(errno)) {
				atomic_fetch_add(&resets, 1);
				again = 1;
			} else {
				fail(&errors, "connection %d: write: %s", idx, strerror(errno));
			}
			break;
		}
		ssize_t n = t_read_full(fd, back, size);
		if (n < 0) {
			if (is_reset(errno)) {
				atomic_fetch_add(&resets, 1);
				again = 1;
			} else {
				fail(&errors, "connection %d: read: %s", idx, strerror(errno));
			}
			break;
		}
		long long bad = t_stream_check(seed, pos, back, (size_t)n);
		if (bad >= 0) {
			fail(&corrupt, "connection %d: corrupt: stream byte %llu is 0x%02x, want 0x%02x",
			     idx, (unsigned long long)(pos + (uint64_t)bad), back[bad],
			     t_stream_byte(seed, pos + (uint64_t)bad));
			break;
		}
		atomic_fetch_add(&bytes, (uint64_t)n);
		if ((size_t)n != size && eof_is_reset) {
			atomic_fetch_add(&resets, 1);
			atomic_fetch_add(&eofs, 1);
			again = 1;
			break;
		}
		if ((size_t)n != size) {
			fail(&lost, "connection %d: lost: EOF after %zd of %zu echoed bytes, no reset",
			     idx, n, size);
			break;
		}
		pos += size;
		atomic_fetch_add(&msgs, 1);
	}
	return again;
}

/* the end: our FIN, then the server's EOF and nothing else */
static void end_conn(int fd, int idx)
{
	char c;
	ssize_t n;
	if (shutdown(fd, SHUT_WR) < 0) {
		/* ENOTCONN: reset before our FIN, as on kernel TCP; the
		 * read that follows must then say so */
		if (errno == ENOTCONN && read(fd, &c, 1) < 0 && is_reset(errno))
			atomic_fetch_add(&resets, 1);
		else if (is_reset(errno))
			atomic_fetch_add(&resets, 1);
		else
			fail(&errors, "connection %d: shutdown: %s", idx, strerror(errno));
	} else {
		while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
			;
		if (n < 0 && is_reset(errno))
			atomic_fetch_add(&resets, 1);
		else if (n < 0)
			fail(&errors, "connection %d: read at end: %s", idx, strerror(errno));
		else if (n > 0)
			fail(&corrupt, "connection %d: extra byte after the last echo", idx);
	}
}

static void *conn_thread(void *arg)
{
	int idx = (int)(intptr_t)arg, gen = 0, first = 1;
	uint8_t *buf = malloc(64 << 10), *back = malloc(64 << 10);
	uint64_t rng = (base_seed << 20) ^ (uint64_t)idx ^ 0x50a4ull;
	if (!buf || !back)
		t_die("soak-client: out of memory");
	for (;;) {
		int fd = dial(idx);
		if (fd < 0) {
			atomic_fetch_add(&errors, 1);
			break;
		}
		if (first) {
			first = 0;
			first_up();
		}
		uint64_t seed = ((base_seed * 1000003u + (uint64_t)idx) << 16) + (uint64_t)gen++;
		if (echo_loop(fd, idx, seed, &rng, buf, back)) {
			close(fd);
			continue;
		}
		if (time_up() && !atomic_load(&corrupt) && !atomic_load(&lost))
			end_conn(fd, idx);
		close(fd);
		break;
	}
	free(buf);
	free(back);
	return NULL;
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "c:t:T:s:m:R:S:E")) != -1) {
		switch (opt) {
		case 'c': nconns = atoi(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'T': secs = atof(optarg) / 1000; break;
		case 's': base_seed = strtoull(optarg, NULL, 0); break;
		case 'm': maxsize = strtoull(optarg, NULL, 0); break;
		case 'R': ready = optarg; break;
		case 'S': stop = optarg; break;
		case 'E': eof_is_reset = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 2 || nconns < 1 || !(secs > 0) || maxsize < 1 || maxsize > (64 << 10))
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)atoi(argv[optind + 1]));
	if (inet_pton(AF_INET, argv[optind], &dst.sin_addr) != 1)
		t_die("soak-client: %s: not an IPv4 address", argv[optind]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t *t = calloc((size_t)nconns, sizeof(*t));
	pthread_attr_t a;
	if (!t)
		t_die("soak-client: out of memory");
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 128 << 10);
	for (int i = 0; i < nconns; i++)
		if (pthread_create(&t[i], &a, conn_thread, (void *)(intptr_t)i))
			t_die("soak-client: pthread_create failed");
	for (int i = 0; i < nconns; i++)
		pthread_join(t[i], NULL);
	printf("soak-client %d: conns=%d opened=%llu resets=%llu bytes=%llu msgs=%llu corrupt=%llu lost=%llu "
	       "errors=%llu eofs=%llu\n",
	       getpid(), nconns, (unsigned long long)opened, (unsigned long long)resets,
	       (unsigned long long)bytes, (unsigned long long)msgs, (unsigned long long)corrupt,
	       (unsigned long long)lost, (unsigned long long)errors, (unsigned long long)eofs);
	fflush(stdout);
	return corrupt || lost || errors ? 1 : 0;
usage:
	fprintf(stderr, "usage: soak-client -c CONNS (-t SECS | -T MS) [-s SEED] [-m MAXSIZE<=65536] [-R READY] [-S STOP] HOST PORT\n");
	return 2;
}
