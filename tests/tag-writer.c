/*
 * tag-writer -b BYTES [-w HOLDFILE] HOST PORT
 *
 * Connects, writes BYTES bytes (content seeded by its pid, in chunks of
 * varying size), shuts down its sending side, and checks that the 16-byte
 * ack of tag-sink carries exactly BYTES and the checksum of what was sent.
 * Prints "pid PID bytes BYTES"; with -w, then prints "done" and keeps the
 * connection open until HOLDFILE exists (at most 300 s).  Then expects EOF.  Exit 0 when the
 * ack matches, 1 otherwise, 3 on a reset.
 */
#include "helpers.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

int main(int argc, char **argv)
{
	const char *holdfile = NULL;
	uint64_t bytes = 0;
	int opt;
	while ((opt = getopt(argc, argv, "b:w:")) != -1) {
		switch (opt) {
		case 'b': bytes = strtoull(optarg, NULL, 0); break;
		case 'w': holdfile = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 2)
		goto usage;
	signal(SIGPIPE, SIG_IGN);

	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int r = getaddrinfo(argv[optind], argv[optind + 1], &hints, &ai);
	if (r)
		t_die("tag-writer: %s", gai_strerror(r));
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		t_die("tag-writer %d: connect: %s", getpid(), strerror(errno));
	freeaddrinfo(ai);

	uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull, rng = seed, sent = 0;
	uint64_t sum = 0xcbf29ce484222325ull;
	uint8_t buf[65536 + 123];
	while (sent < bytes) {
		uint64_t n = 1 + t_splitmix(&rng) % sizeof(buf);
		if (n > bytes - sent)
			n = bytes - sent;
		t_stream_fill(seed, sent, buf, n);
		for (uint64_t i = 0; i < n; i++)
			sum = (sum ^ buf[i]) * 0x100000001b3ull;
		if (t_write_full(fd, buf, n) < 0) {
			int e = errno;
			fprintf(stderr, "tag-writer %d: %swrite: %s after %llu bytes\n", getpid(),
				e == ECONNRESET || e == EPIPE ? "reset: " : "", strerror(e),
				(unsigned long long)sent);
			return e == ECONNRESET || e == EPIPE ? 3 : 1;
		}
		sent += n;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		t_die("tag-writer %d: shutdown: %s", getpid(), strerror(errno));
	uint8_t ack[16];
	ssize_t got = t_read_full(fd, ack, sizeof(ack));
	if (got != (ssize_t)sizeof(ack))
		t_die("tag-writer %d: ack: %s", getpid(), got < 0 ? strerror(errno) : "short read");
	if (get64(ack) != bytes || get64(ack + 8) != sum)
		t_die("tag-writer %d: ack says %llu bytes checksum %016llx, sent %llu checksum %016llx",
		      getpid(), (unsigned long long)get64(ack), (unsigned long long)get64(ack + 8),
		      (unsigned long long)bytes, (unsigned long long)sum);
	printf("pid %d bytes %llu\n", getpid(), (unsigned long long)bytes);
	fflush(stdout);
	if (holdfile) {
		printf("done\n");
		fflush(stdout);
		struct stat st;
		for (int w = 0; w < 300 * 20 && stat(holdfile, &st) < 0; w++)
			usleep(50000);
	}
	/* nothing after the ack (the sink closes after its own hold) */
	char extra;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 30000) != 1)
		t_die("tag-writer %d: no EOF within 30 s after the ack", getpid());
	if (read(fd, &extra, 1) != 0)
		t_die("tag-writer %d: no EOF after the ack", getpid());
	close(fd);
	return 0;
usage:
	fprintf(stderr, "usage: tag-writer -b BYTES [-w HOLDFILE] HOST PORT\n");
	return 2;
}
