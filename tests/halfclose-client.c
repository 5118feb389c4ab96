/*
 * halfclose-client HOST PORT BYTES
 *
 * Connects, writes BYTES bytes, shutdown(SHUT_WR), then must still read the
 * server's reply "got BYTES\n" and after it EOF.  Exit 0 when so, 1 if not.
 */
#include "helpers.h"

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: halfclose-client HOST PORT BYTES\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	uint64_t bytes = strtoull(argv[3], NULL, 0), sent = 0;
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai))
		t_die("halfclose-client: bad address");
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		t_die("halfclose-client: connect: %s", strerror(errno));
	static uint8_t buf[65536];
	while (sent < bytes) {
		size_t n = bytes - sent < sizeof(buf) ? (size_t)(bytes - sent) : sizeof(buf);
		t_stream_fill(99, sent, buf, n);
		if (t_write_full(fd, buf, n) < 0)
			t_die("halfclose-client: write: %s after %llu", strerror(errno),
			      (unsigned long long)sent);
		sent += n;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		t_die("halfclose-client: shutdown(SHUT_WR): %s", strerror(errno));
	/* writing after SHUT_WR must fail with EPIPE */
	if (write(fd, "x", 1) != -1 || errno != EPIPE)
		t_die("halfclose-client: write after SHUT_WR did not fail with EPIPE");
	char want[64], got[64];
	int wlen = snprintf(want, sizeof(want), "got %llu\n", (unsigned long long)bytes);
	ssize_t n = t_read_full(fd, got, (size_t)wlen);
	if (n < 0)
		t_die("halfclose-client: read reply: %s", strerror(errno));
	if (n != wlen || memcmp(got, want, (size_t)wlen))
		t_die("halfclose-client: reply %.*s, want %s", (int)(n > 0 ? n : 0), got, want);
	n = read(fd, got, 1);
	if (n != 0)
		t_die("halfclose-client: expected EOF after the reply, read returned %zd (%s)", n,
		      n < 0 ? strerror(errno) : "data");
	printf("half-close ok: sent %llu, reply and EOF after shutdown(SHUT_WR)\n",
	       (unsigned long long)bytes);
	close(fd);
	return 0;
}
