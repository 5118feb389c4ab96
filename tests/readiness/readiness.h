/*
 * readiness.h - what the parts of tests/nonblocking-and-readiness share:
 * the peer (readiness/peer.c), the checker's harness (in
 * nonblocking-and-readiness.c, with main) and the groups of checks
 * (readiness/sockets.c, poll.c, epoll.c, fds.c).
 */
#ifndef RSHARE_TEST_READINESS_H
#define RSHARE_TEST_READINESS_H

#include "helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#define BUFSZ (64 << 10)

static inline uint64_t seed_c2p(int k) { return 0x1000u + (uint64_t)k; }
static inline uint64_t seed_p2c(int k) { return 0x2000u + (uint64_t)k; }

/* both sides (nonblocking-and-readiness.c) */
const char *ename(int e);
const char *res(long r, int e);
int line_read(int fd, char *buf, size_t len);
__attribute__((format(printf, 2, 3))) int line_write(int fd, const char *fmt, ...);
int tcp_listen(int port, int nonblock);

/* the peer (readiness/peer.c) */
int peer_main(int port);

/* the checker's state and harness (nonblocking-and-readiness.c) */
extern int ctl, base_port, lfd_own;
extern struct sockaddr_in peer_ip;
extern int nchecks, nfailed, nconns, nrefused;
extern volatile sig_atomic_t sigpipes;
extern const char *volatile group;
extern uint8_t buf[BUFSZ], buf2[BUFSZ];

struct conn {
	int fd, k;
	uint64_t tx, rx;
};

__attribute__((format(printf, 3, 4))) int check(int ok, const char *what, const char *fmt, ...);
void on_pipe(int sig);
void on_alarm(int sig);
void begin(const char *g, unsigned secs);
double now(void);
void ctl_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *ctl_end(void);
const char *ctl_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int is_ok(const char *reply);
struct sockaddr_in peer_at(int port);
struct conn conn_out_sndbuf(int sndbuf);
struct conn conn_out(void);
const char *dial_in(int *k);
int send_stream(struct conn *c, int fd, size_t n);
void peer_sends(struct conn *c, size_t n);
int peer_got(struct conn *c, size_t n, char *why, size_t wl);
int get_bytes(struct conn *c, int fd, size_t n, char *why, size_t wl);
void wait_nread(int fd, int n);
uint64_t fill(struct conn *c, int *err);
uint64_t refill(struct conn *c);
int fd_flags(int fd);
int fd_cloexec(int fd);
int sock_error(int fd, int *err);
const char *revs(short r);
const char *evs(uint32_t e);

/* the groups of checks, in the order check_main runs them */
void check_flags(void);    /* readiness/sockets.c */
void check_listener(void); /* readiness/sockets.c */
void check_data(void);     /* readiness/sockets.c */
void check_nosignal(void); /* readiness/sockets.c */
void check_reset(void);    /* readiness/sockets.c */
void check_connect(void);  /* readiness/sockets.c */

enum api { API_POLL, API_PPOLL, API_SELECT, API_PSELECT };
void check_poll_family(enum api api); /* readiness/poll.c */
void check_epoll(void);               /* readiness/epoll.c */
void check_fork(void);                /* readiness/fds.c */
void check_idle(void);                /* readiness/fds.c */
void check_dup(void);                 /* readiness/fds.c */
void check_sendfile(void);            /* readiness/fds.c */

#endif
