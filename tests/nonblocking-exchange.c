/*
 * nonblocking-exchange server PORT BYTES
 * nonblocking-exchange client ADDR PORT BYTES
 *
 * Both ends of one connection, nonblocking and driven by poll(2), send
 * BYTES before they read anything, then read BYTES, every byte checked:
 * a protocol whose peers both speak first (a large greeting each way).
 * It finishes only where the connection holds BYTES in flight each way
 * while nobody reads, as kernel TCP's grown buffers do (about 700 KiB
 * each way across two namespaces); a poll that waits 5 s ends it.
 * Prints "server|client ok N", "... stalled sending at N" or
 * "... stalled reading at N" (or the error), and exits 0 on ok.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#define SEED 0xe8c4a11u

static int wait_for(int fd, short ev)
{
	struct pollfd p = {.fd = fd, .events = ev};
	return poll(&p, 1, 5000) == 1;
}

static int exchange(const char *who, int fd, uint64_t bytes)
{
	size_t cap = 256 << 10;
	uint8_t *buf = malloc(cap);
	uint64_t sent = 0, got = 0;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (sent < bytes) {
		size_t n = bytes - sent < cap ? (size_t)(bytes - sent) : cap;
		ssize_t w;
		t_stream_fill(SEED, sent, buf, n);
		w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w > 0) {
			sent += (uint64_t)w;
		} else if (w < 0 && errno != EAGAIN) {
			printf("%s send: %s\n", who, strerror(errno));
			return 1;
		} else if (!wait_for(fd, POLLOUT)) {
			printf("%s stalled sending at %llu\n", who, (unsigned long long)sent);
			return 1;
		}
	}
	while (got < bytes) {
		ssize_t r = recv(fd, buf, cap, 0);
		if (r > 0) {
			if (t_stream_check(SEED, got, buf, (size_t)r) >= 0) {
				printf("%s wrong bytes at %llu\n", who, (unsigned long long)got);
				return 1;
			}
			got += (uint64_t)r;
		} else if (r == 0 || errno != EAGAIN) {
			printf("%s recv: %s\n", who, r ? strerror(errno) : "EOF");
			return 1;
		} else if (!wait_for(fd, POLLIN)) {
			printf("%s stalled reading at %llu\n", who, (unsigned long long)got);
			return 1;
		}
	}
	printf("%s ok %llu\n", who, (unsigned long long)got);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int one = 1, fd;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server")) {
		int ls = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_port = htons((uint16_t)atoi(argv[2]));
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4) < 0) {
			perror("listen");
			return 1;
		}
		printf("ready\n");
		if ((fd = accept(ls, NULL, NULL)) < 0)
			return 1;
		return exchange("server", fd, strtoull(argv[3], NULL, 0));
	}
	if (argc == 5 && !strcmp(argv[1], "client")) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_port = htons((uint16_t)atoi(argv[3]));
		inet_pton(AF_INET, argv[2], &a.sin_addr);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("connect");
			return 1;
		}
		return exchange("client", fd, strtoull(argv[4], NULL, 0));
	}
	fprintf(stderr, "usage: nonblocking-exchange server PORT BYTES | client ADDR PORT BYTES\n");
	return 2;
}
