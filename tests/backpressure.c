/*
 * backpressure recv [-b BUF] [-P PAUSE_MS | -g GOFILE] [-s SEED] [-w HOLDFILE] -n BYTES PORT
 * backpressure send [-b BUF] [-s SEED] [-d] -n BYTES HOST PORT
 *
 * A sender that writes far more than the rings hold to a receiver that
 * stops reading for a while.
 *
 * recv: listens on 0.0.0.0:PORT with SO_RCVBUF and SO_SNDBUF set to BUF
 * (default 4096) before listen(), prints "ready", accepts one connection,
 * prints "accepted", reads nothing for PAUSE_MS (default 3000), or with -g
 * until GOFILE exists (at most 120 s), prints "resume", then reads exactly BYTES in reads of random size, checking
 * every byte against the stream of SEED, and expects EOF right after.
 * Prints "received BYTES verified" and, with -w, keeps the connection open
 * until HOLDFILE exists (at most 120 s).
 *
 * send: sets SO_SNDBUF and SO_RCVBUF to BUF before connect(), connects,
 * writes BYTES of the stream of SEED, shuts down its side, waits for the
 * receiver's EOF and exits.  With -d every write is send(MSG_DONTWAIT) of
 * random size up to 64 KiB: EAGAIN is counted and the rest retried after
 * 1 ms; without it writes block, and are of random size up to 1 KiB, so
 * that the count of bytes written is never more than 1 KiB behind what the
 * socket took.  A second thread
 * prints "progress MS sent=N eagain=E" every 100 ms (MS since connect,
 * N the bytes accepted by write so far), and the end prints
 * "sent BYTES eagain=E".
 *
 * Exit 0 on success, 1 on any error or mismatch (the message says which).
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

static _Atomic uint64_t sent_n, eagain_n;
static const char *go; /* recv -g */
static _Atomic int finished;
static struct timespec t0;

static long ms_since(const struct timespec *a)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - a->tv_sec) * 1000 + (t.tv_nsec - a->tv_nsec) / 1000000;
}

static void *progress(void *arg)
{
	(void)arg;
	while (!atomic_load(&finished)) {
		printf("progress %ld sent=%llu eagain=%llu\n", ms_since(&t0),
		       (unsigned long long)atomic_load(&sent_n), (unsigned long long)atomic_load(&eagain_n));
		fflush(stdout);
		usleep(100000);
	}
	return NULL;
}

static void setbufs(int fd, int buf)
{
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf)) < 0)
		t_die("backpressure: SO_RCVBUF/SO_SNDBUF %d: %s", buf, strerror(errno));
}

static int do_recv(int buf, int pause_ms, uint64_t seed, uint64_t bytes, const char *hold, int port)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (lfd < 0)
		t_die("backpressure recv: socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setbufs(lfd, buf);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_ANY)};
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("backpressure recv: bind/listen port %d: %s", port, strerror(errno));
	printf("ready\n");
	fflush(stdout);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		t_die("backpressure recv: accept: %s", strerror(errno));
	printf("accepted\n");
	fflush(stdout);
	if (go)
		t_wait_file(go, 120);
	else
		usleep((useconds_t)pause_ms * 1000);
	printf("resume\n");
	fflush(stdout);
	uint8_t *b = malloc(64 << 10);
	uint64_t got = 0, rng = seed ^ 0x7eadull;
	if (!b)
		t_die("backpressure recv: out of memory");
	while (got < bytes) {
		size_t want = 1 + t_splitmix(&rng) % (64 << 10);
		if (want > bytes - got)
			want = (size_t)(bytes - got);
		ssize_t n = read(fd, b, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			t_die("backpressure recv: read after %llu bytes: %s", (unsigned long long)got,
			      strerror(errno));
		if (n == 0)
			t_die("backpressure recv: EOF after %llu of %llu bytes: bytes lost",
			      (unsigned long long)got, (unsigned long long)bytes);
		long long bad = t_stream_check(seed, got, b, (size_t)n);
		if (bad >= 0)
			t_die("backpressure recv: mismatch at byte %llu: got 0x%02x, want 0x%02x",
			      (unsigned long long)(got + (uint64_t)bad), b[bad],
			      t_stream_byte(seed, got + (uint64_t)bad));
		got += (uint64_t)n;
	}
	ssize_t n = read(fd, b, 1);
	if (n != 0)
		t_die("backpressure recv: %s after the last byte", n < 0 ? strerror(errno) : "an extra byte");
	printf("received %llu verified\n", (unsigned long long)got);
	fflush(stdout);
	if (hold)
		t_wait_file(hold, 120);
	close(fd);
	return 0;
}

static int do_send(int buf, uint64_t seed, uint64_t bytes, int dontwait, const char *host, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		t_die("backpressure send: %s: not an IPv4 address", host);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		t_die("backpressure send: socket: %s", strerror(errno));
	setbufs(fd, buf);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		t_die("backpressure send: connect: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t pt;
	if (pthread_create(&pt, NULL, progress, NULL))
		t_die("backpressure send: pthread_create failed");
	uint8_t *b = malloc(64 << 10);
	uint64_t pos = 0, rng = seed ^ 0x5e7dull;
	if (!b)
		t_die("backpressure send: out of memory");
	while (pos < bytes) {
		size_t len = 1 + t_splitmix(&rng) % (dontwait ? 64 << 10 : 1 << 10);
		if (len > bytes - pos)
			len = (size_t)(bytes - pos);
		t_stream_fill(seed, pos, b, len);
		size_t off = 0;
		while (off < len) {
			ssize_t n = send(fd, b + off, len - off, dontwait ? MSG_DONTWAIT : 0);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && dontwait) {
				atomic_fetch_add(&eagain_n, 1);
				usleep(1000);
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				t_die("backpressure send: send after %llu bytes: %s",
				      (unsigned long long)(pos + off), strerror(errno));
			if (n == 0)
				t_die("backpressure send: send returned 0");
			off += (size_t)n;
			atomic_store(&sent_n, pos + off);
		}
		pos += len;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		t_die("backpressure send: shutdown: %s", strerror(errno));
	char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 0)
		t_die("backpressure send: %s instead of the receiver's EOF", n < 0 ? strerror(errno) : "a byte");
	atomic_store(&finished, 1);
	pthread_join(pt, NULL);
	printf("sent %llu eagain=%llu\n", (unsigned long long)pos, (unsigned long long)atomic_load(&eagain_n));
	fflush(stdout);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	int buf = 4096, pause_ms = 3000, dontwait = 0, opt, recv_mode;
	uint64_t seed = 1, bytes = 0;
	const char *hold = NULL;
	if (argc < 2)
		goto usage;
	if (!strcmp(argv[1], "recv"))
		recv_mode = 1;
	else if (!strcmp(argv[1], "send"))
		recv_mode = 0;
	else
		goto usage;
	optind = 2;
	while ((opt = getopt(argc, argv, "b:P:g:s:w:n:d")) != -1) {
		switch (opt) {
		case 'b': buf = atoi(optarg); break;
		case 'P': pause_ms = atoi(optarg); break;
		case 'g': go = optarg; break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'w': hold = optarg; break;
		case 'n': bytes = strtoull(optarg, NULL, 0); break;
		case 'd': dontwait = 1; break;
		default: goto usage;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (bytes < 1 || buf < 1 || pause_ms < 0)
		goto usage;
	if (recv_mode && optind == argc - 1)
		return do_recv(buf, pause_ms, seed, bytes, hold, atoi(argv[optind]));
	if (!recv_mode && optind == argc - 2)
		return do_send(buf, seed, bytes, dontwait, argv[optind], atoi(argv[optind + 1]));
usage:
	fprintf(stderr, "usage: backpressure recv [-b BUF] [-P PAUSE_MS | -g GOFILE] [-s SEED] [-w HOLDFILE] -n BYTES PORT\n"
			"       backpressure send [-b BUF] [-s SEED] [-d] -n BYTES HOST PORT\n");
	return 2;
}
