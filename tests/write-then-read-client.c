/*
 * write-then-read-client -c CONNS -m CHUNK -n ROUNDS ADDR PORT
 *
 * The echo client many programs are: one thread, one connection per
 * forked child, each round writes a whole CHUNK (blocking) and only then
 * reads the echo back, every byte checked against the connection's
 * stream.  It finishes only where the connection holds a chunk in flight
 * each way, as kernel TCP's buffers do once they have grown.  Prints
 *   done conns=N verified=V errors=E bytes=B
 * and exits 0 when every connection verified.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int one_conn(const struct sockaddr_in *a, int idx, size_t chunk, int rounds)
{
	uint8_t *buf = malloc(chunk);
	uint64_t seed = 0x5eed0000u + (uint64_t)idx, pos_tx = 0, pos_rx = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (!buf || fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		perror("connect");
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		size_t got = 0;
		t_stream_fill(seed, pos_tx, buf, chunk);
		if (t_write_full(fd, buf, chunk) < 0) {
			fprintf(stderr, "conn %d round %d: write: %s\n", idx, r, strerror(errno));
			return 1;
		}
		pos_tx += chunk;
		while (got < chunk) {
			ssize_t n = read(fd, buf + got, chunk - got);
			if (n <= 0) {
				fprintf(stderr, "conn %d round %d: read: %s\n", idx, r, n ? strerror(errno) : "EOF");
				return 1;
			}
			got += (size_t)n;
		}
		if (t_stream_check(seed, pos_rx, buf, chunk) >= 0) {
			fprintf(stderr, "conn %d round %d: wrong bytes\n", idx, r);
			return 1;
		}
		pos_rx += chunk;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int opt, conns = 1, rounds = 4, bad = 0, st;
	size_t chunk = 1 << 20;
	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt(argc, argv, "c:m:n:")) != -1) {
		if (opt == 'c')
			conns = atoi(optarg);
		else if (opt == 'm')
			chunk = strtoull(optarg, NULL, 0);
		else if (opt == 'n')
			rounds = atoi(optarg);
		else
			return 2;
	}
	if (optind + 2 != argc || inet_pton(AF_INET, argv[optind], &a.sin_addr) != 1 || !chunk) {
		fprintf(stderr, "usage: write-then-read-client -c CONNS -m CHUNK -n ROUNDS ADDR PORT\n");
		return 2;
	}
	a.sin_port = htons((uint16_t)atoi(argv[optind + 1]));
	for (int i = 0; i < conns; i++)
		if (fork() == 0)
			_exit(one_conn(&a, i, chunk, rounds));
	while (wait(&st) > 0)
		bad += !WIFEXITED(st) || WEXITSTATUS(st);
	printf("done conns=%d verified=%d errors=%d bytes=%llu\n", conns, conns - bad, bad,
	       (unsigned long long)(conns - bad) * chunk * (unsigned long long)rounds);
	return bad != 0;
}
