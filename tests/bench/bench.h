/*
 * bench.h - what the parts of bench share: bench.c (main, failures,
 * deadlines, numbers, full reads and writes, addresses and dialing),
 * bench_server.c (the server) and bench_client.c (the client modes).
 */
#ifndef RSHARE_BENCH_H
#define RSHARE_BENCH_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RR_SIZE 64

extern const char *mode; /* argv[1], named in every error line */

__attribute__((noreturn)) void usage(void);
__attribute__((noreturn)) void bad(const char *what);
const char *errname(int e);
__attribute__((noreturn)) void fail(const char *op, int err);
__attribute__((noreturn, format(printf, 2, 3))) void failx(const char *op, const char *fmt, ...);
void set_deadline(long secs);
double now_s(void);
long parse_num(const char *s, const char *what);
void raise_nofile(void);
ssize_t read_full(int fd, void *buf, size_t len);
int write_full(int fd, const void *buf, size_t len);

/* ---- addresses ---- */

struct addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

void resolve(const char *host, int port, struct addr *a, int family);
void set_port(struct addr *a, int port);

struct client {
	const char *host;
	int port;
	struct addr dst;
	int has_src;
	struct addr src;
};

void client_init(struct client *c, const char *host, const char *port, const char *bind_to);
int dial(const struct client *c, int port);

/* ---- the modes */
int cmd_server(int argc, char **argv); /* bench_server.c */
int cmd_rtt(struct client *c, long n, long size);           /* bench_client.c */
int cmd_stream(struct client *c, long total, long wsize);   /* bench_client.c */
int cmd_connrate(struct client *c, long n);                 /* bench_client.c */
int cmd_hold(struct client *c, long k, const char *file, long per, long first); /* bench_client.c */
int cmd_msgrate(struct client *c, long k, long secs, long size, const char *file, long per,
		long first); /* bench_client.c */

#endif
