/*
 * echo-rounds -c CONNS [-s SEED] [-m MAXSIZE] [-r ROUNDS] [-g GOFILE] [-p USEC] [-q] HOST PORT
 *
 * Opens CONNS connections to an echo server and keeps them open over
 * ROUNDS rounds (default 2).  In each round every connection sends one
 * message of random size 1..MAXSIZE bytes (default and at most 64 KiB, so
 * that it always fits in flight) and reads the echo back, checking every
 * byte against the connection's deterministic stream.  Round 0 starts at
 * once; round K > 0 starts when the file GOFILE.K exists (at most 600 s),
 * or at once without -g, USEC microseconds after the round before with -p
 * (a flow of messages slower than a waiter's spin).
 *
 * Prints "round K ok conns=N bytes=B" after each round (B: the bytes
 * echoed and checked in that round; -q: after the last round only, so
 * that the rounds make no system call of their own), and "done" once every connection shut
 * down its sending side and saw EOF right after its last echoed byte.
 * Exit 0 all verified; 1 any error or mismatch (the message says which).
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

/* round K > 0 starts when GO.K exists (at most 600 s) */
static void wait_go(const char *go, int r)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s.%d", go, r);
	t_wait_file(path, 600);
}

/* one message of SIZE bytes at stream position POS out on FD and its echo checked */
static void echo_one(int fd, int r, int i, uint64_t seed, uint64_t pos, size_t size, uint8_t *buf,
		     uint8_t *back)
{
	t_stream_fill(seed, pos, buf, size);
	if (t_write_full(fd, buf, size) < 0)
		t_die("echo-rounds: round %d connection %d: write: %s", r, i, strerror(errno));
	ssize_t n = t_read_full(fd, back, size);
	if (n < 0)
		t_die("echo-rounds: round %d connection %d: read: %s", r, i, strerror(errno));
	if ((size_t)n != size)
		t_die("echo-rounds: round %d connection %d: EOF after %zd of %zu bytes", r, i, n, size);
	long long bad = t_stream_check(seed, pos, back, size);
	if (bad >= 0)
		t_die("echo-rounds: round %d connection %d: mismatch at stream byte %llu", r, i,
		      (unsigned long long)(pos + (uint64_t)bad));
}

/* our FIN, then EOF right after the last echoed byte */
static void end_conn(int fd, int i)
{
	char c;
	if (shutdown(fd, SHUT_WR) < 0)
		t_die("echo-rounds: connection %d: shutdown: %s", i, strerror(errno));
	ssize_t n = read(fd, &c, 1);
	if (n != 0)
		t_die("echo-rounds: connection %d: %s at end", i, n < 0 ? strerror(errno) : "extra byte");
	close(fd);
}

int main(int argc, char **argv)
{
	int nconns = 1, rounds = 2, quiet = 0, pause_us = 0, opt;
	uint64_t maxsize = 64 << 10, base_seed = 1;
	const char *go = NULL;
	while ((opt = getopt(argc, argv, "c:s:m:r:g:p:q")) != -1) {
		switch (opt) {
		case 'c': nconns = atoi(optarg); break;
		case 's': base_seed = strtoull(optarg, NULL, 0); break;
		case 'm': maxsize = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		case 'g': go = optarg; break;
		case 'p': pause_us = atoi(optarg); break;
		case 'q': quiet = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 2 || nconns < 1 || rounds < 1 || pause_us < 0 || pause_us > 1000000 || maxsize < 1 ||
	    maxsize > (64 << 10))
		goto usage;
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[optind + 1]))};
	if (inet_pton(AF_INET, argv[optind], &a.sin_addr) != 1)
		t_die("echo-rounds: %s: not an IPv4 address", argv[optind]);
	int *fds = calloc((size_t)nconns, sizeof(int));
	uint64_t *pos = calloc((size_t)nconns, sizeof(uint64_t));
	uint8_t *buf = malloc(64 << 10), *back = malloc(64 << 10);
	if (!fds || !pos || !buf || !back)
		t_die("echo-rounds: out of memory");
	for (int i = 0; i < nconns; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof(a)) < 0)
			t_die("echo-rounds: connection %d: connect: %s", i, strerror(errno));
	}
	uint64_t rng = base_seed ^ 0x5eed;
	for (int r = 0; r < rounds; r++) {
		uint64_t bytes = 0;
		if (r > 0 && go)
			wait_go(go, r);
		if (r > 0 && pause_us) {
			struct timespec ts = {pause_us / 1000000, (long)(pause_us % 1000000) * 1000};
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
		for (int i = 0; i < nconns; i++) {
			uint64_t seed = base_seed * 1000003u + (uint64_t)i;
			size_t size = 1 + t_splitmix(&rng) % maxsize;
			echo_one(fds[i], r, i, seed, pos[i], size, buf, back);
			pos[i] += size;
			bytes += size;
		}
		if (!quiet || r == rounds - 1) {
			printf("round %d ok conns=%d bytes=%llu\n", r, nconns, (unsigned long long)bytes);
			fflush(stdout);
		}
	}
	for (int i = 0; i < nconns; i++)
		end_conn(fds[i], i);
	printf("done\n");
	return 0;
usage:
	fprintf(stderr, "usage: echo-rounds -c CONNS [-s SEED] [-m MAXSIZE<=65536] [-r ROUNDS] [-g GOFILE] [-p USEC] "
			"[-q] HOST PORT\n");
	return 2;
}
