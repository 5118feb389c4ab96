/*
 * ring-resize server PORT DELAY_S [RCVBUF]
 * ring-resize client ADDR PORT MIB IDLE_S [SNDBUF]
 *
 * The two ends of one connection whose buffers should follow its load.
 * The server accepts one connection (with SO_RCVBUF set on the listener
 * when RCVBUF is given), waits DELAY_S seconds (a reader that stalls, so
 * that the writer blocks), reads it to EOF in 1 MiB reads, checks every byte
 * of the stream and prints
 *   server bytes=B verified=0|1 rcvbuf_after=N
 * The client (SO_SNDBUF set when SNDBUF is given) writes MIB MiB in 256
 * KiB writes, prints
 *   client sent=B sndbuf_after=N
 * then holds the connection open for IDLE_S seconds (an idle connection,
 * whose rings should go back to their first size meanwhile), writes 1 MiB
 * more (the rings work after they shrank) and closes.
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#define SEED 0x7e51ceu

static int sockbuf(int fd, int name)
{
	int v = 0;
	socklen_t l = sizeof(v);
	getsockopt(fd, SOL_SOCKET, name, &v, &l);
	return v;
}

static int server(int port, int delay, int rcvbuf)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	uint64_t pos = 0;
	int one = 1, ok = 1, ls = socket(AF_INET, SOCK_STREAM, 0), fd;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (rcvbuf)
		setsockopt(ls, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (!buf || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 4) < 0) {
		perror("listen");
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	if ((fd = accept(ls, NULL, NULL)) < 0) {
		perror("accept");
		return 1;
	}
	sleep((unsigned)delay);
	for (;;) {
		ssize_t n = read(fd, buf, cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				ok = 0;
			break;
		}
		if (t_stream_check(SEED, pos, buf, (size_t)n) >= 0)
			ok = 0;
		pos += (uint64_t)n;
	}
	printf("server bytes=%llu verified=%d rcvbuf_after=%d\n", (unsigned long long)pos, ok,
	       sockbuf(fd, SO_RCVBUF));
	close(fd);
	return ok ? 0 : 1;
}

static int client(const char *addr, int port, int mib, int idle, int sndbuf)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	size_t w = 256 << 10;
	uint8_t *buf = malloc(w);
	uint64_t pos = 0, total = (uint64_t)mib << 20;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, addr, &a.sin_addr);
	if (sndbuf)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (!buf || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		return 1;
	}
	for (int phase = 0; phase < 2; phase++) {
		for (; pos < total; pos += w) {
			t_stream_fill(SEED, pos, buf, w);
			if (t_write_full(fd, buf, w) < 0) {
				perror("write");
				return 1;
			}
		}
		if (phase)
			break;
		printf("client sent=%llu sndbuf_after=%d\n", (unsigned long long)pos, sockbuf(fd, SO_SNDBUF));
		fflush(stdout);
		sleep((unsigned)idle);
		total += 1 << 20;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
	if (argc >= 6 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argc > 6 ? atoi(argv[6]) : 0);
	fprintf(stderr, "usage: ring-resize server PORT DELAY_S [RCVBUF] | client ADDR PORT MIB IDLE_S [SNDBUF]\n");
	return 2;
}
