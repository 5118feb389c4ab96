/*
 * helpers.h - what the unit tests and test programs share.
 *
 * Unit tests exit 0 (pass), 1 (fail) or 77 (skip).  CHECK() reports the
 * first failing condition with its line and exits 1.  The PRNG is a
 * splitmix64, so a (seed, position) pair always gives the same bytes under
 * any transport.
 */
#ifndef RSHARE_TEST_HELPERS_H
#define RSHARE_TEST_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define T_PASS 0
#define T_FAIL 1
#define T_SKIP 77

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (!(cond)) {                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,   \
				__LINE__, #cond);                                \
			exit(T_FAIL);                                            \
		}                                                                \
	} while (0)

#define CHECK_EQ(a, b)                                                           \
	do {                                                                     \
		unsigned long long _a = (unsigned long long)(a);                 \
		unsigned long long _b = (unsigned long long)(b);                 \
		if (_a != _b) {                                                  \
			fprintf(stderr, "%s:%d: check failed: %s == %s "         \
				"(%llu != %llu)\n", __FILE__, __LINE__, #a, #b,  \
				_a, _b);                                         \
			exit(T_FAIL);                                            \
		}                                                                \
	} while (0)

__attribute__((format(printf, 1, 2), noreturn))
static inline void t_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(T_FAIL);
}

static inline uint64_t t_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The byte at position pos of the stream of a given seed: cheap to compute
 * anywhere, so a reader can check bytes without remembering what was sent. */
static inline uint8_t t_stream_byte(uint64_t seed, uint64_t pos)
{
	uint64_t s = seed ^ (pos >> 3) * 0xd6e8feb86659fd93ull;
	uint64_t v = t_splitmix(&s);
	return (uint8_t)(v >> ((pos & 7) * 8));
}

static inline void t_stream_fill(uint64_t seed, uint64_t pos, uint8_t *buf, size_t len)
{
	size_t i = 0;
	while (i < len) {
		uint64_t p = pos + i;
		uint64_t s = seed ^ (p >> 3) * 0xd6e8feb86659fd93ull;
		uint64_t v = t_splitmix(&s);
		for (unsigned b = p & 7; b < 8 && i < len; b++, i++)
			buf[i] = (uint8_t)(v >> (b * 8));
	}
}

/* Offset of the first byte that differs from the stream, or -1. */
static inline long long t_stream_check(uint64_t seed, uint64_t pos, const uint8_t *buf, size_t len)
{
	uint8_t tmp[4096];
	size_t done = 0;
	while (done < len) {
		size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);
		t_stream_fill(seed, pos + done, tmp, n);
		if (memcmp(tmp, buf + done, n)) {
			for (size_t i = 0; i < n; i++)
				if (tmp[i] != buf[done + i])
					return (long long)(done + i);
		}
		done += n;
	}
	return -1;
}

/* Until PATH exists (a test's go or hold file), looked at every 50 ms;
 * dies after SECS seconds. */
static inline void t_wait_file(const char *path, int secs)
{
	struct stat st;
	for (int i = 0; stat(path, &st) < 0; i++) {
		if (i > secs * 20)
			t_die("%s never appeared", path);
		usleep(50000);
	}
}

/* Write all of len, retrying short writes and EINTR; 0 or -1 with errno. */
static inline int t_write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read exactly len: len, the shorter count at EOF, or -1 with errno. */
static inline ssize_t t_read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Read until EOF, throwing the bytes away: how many, or -1 with errno. */
static inline long long t_read_to_eof(int fd)
{
	static char sink[1 << 16];
	long long got = 0;
	for (;;) {
		ssize_t n = read(fd, sink, sizeof(sink));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return got;
		got += n;
	}
}

/* ---- programs run once on kernel TCP and once on rshare (rs_vs_kernel):
 * "PROG -s PORT" serves, each connection in a child of its own, and
 * "PROG -c ADDR PORT" is the client that prints what it saw ---- */

/* An IPv4 listener on PORT, any address, SO_REUSEADDR; dies on error. */
static inline int t_listen4(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 16) < 0)
		t_die("server: %s", strerror(errno));
	return lfd;
}

/* Prints "ready", then hands each connection LFD accepts to SERVE in a
 * child (SERVE ends it; the children are not waited for). */
static inline __attribute__((noreturn)) void t_serve_forked(int lfd, void (*serve)(int fd))
{
	signal(SIGCHLD, SIG_IGN);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			t_die("accept: %s", strerror(errno));
		}
		if (fork() == 0) {
			close(lfd);
			serve(fd);
			_exit(0);
		}
		close(fd);
	}
}

/* The client's peer, ADDR:PORT; dies on a bad address. */
static inline struct sockaddr_in t_peer4(const char *addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		t_die("bad address %s", addr);
	return a;
}

/* main of such a program: -s PORT or -c ADDR PORT, else USAGE and 2 */
static inline int t_serve_or_ask(int argc, char **argv, const char *usage, int (*server)(int port),
				 int (*client)(const char *addr, int port))
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "-s"))
		return server(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "-c"))
		return client(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: %s\n", usage);
	return 2;
}

#endif
