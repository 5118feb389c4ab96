/*
 * preload.h - what the files of the interposition layer share (internal
 * to librshare.so, never installed).
 *
 * The descriptor table: one struct pfd per descriptor number, kind written
 * last and read first, so that a descriptor that is not an rshare socket
 * costs a bounds check and one load (pfd_get, rs_peek, rs_of inline here).
 * The real functions: real_NAME is the next definition of NAME (libc's),
 * found by the constructor (preload.c); R(NAME) finds it at first use too,
 * as another library's constructor may call in before ours has run.
 *
 * Everything declared here is hidden: it is reached from the other files
 * of the library directly (no GOT, no PLT), as a static would be.  The
 * functions that implement libc calls keep libc's convention (-1, errno).
 */
#ifndef RSHARE_PRELOAD_H
#define RSHARE_PRELOAD_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <spawn.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "sys.h"

#define PL_HIDDEN __attribute__((visibility("hidden")))

/* ---- the real functions (preload.c) ---- */

#define REAL_NAMES(X)                                                                              \
	X(socket) X(listen) X(accept) X(accept4) X(connect) X(read) X(write) X(recv) X(send)       \
	X(recvfrom) X(sendto) X(recvmsg) X(sendmsg) X(readv) X(writev) X(close) X(shutdown)      \
	X(getsockname) X(getpeername) X(setsockopt) X(getsockopt) X(fcntl) X(ioctl) X(bind)      \
	X(dup) X(dup2) X(dup3) X(poll) X(ppoll) X(select) X(pselect) X(epoll_ctl) X(epoll_wait)  \
	X(epoll_pwait) X(sendfile) X(execve) X(execvpe) X(fexecve) X(posix_spawn) X(posix_spawnp)  \
	X(system) X(popen) X(fdopen) X(splice) X(sigaction)

PL_HIDDEN void *real_next(const char *name);

#define REAL_DECL(name)                                                           \
	extern PL_HIDDEN __typeof__(name) *real_##name;                           \
	static inline __typeof__(name) *get_##name(void)                          \
	{                                                                         \
		if (__builtin_expect(!real_##name, 0))                            \
			real_##name = (__typeof__(name) *)real_next(#name);       \
		return real_##name;                                               \
	}
REAL_NAMES(REAL_DECL)
#define R(name) (get_##name())

/* ---- the descriptor table (fdtab.c) ---- */

enum { FD_NONE = 0, FD_TCP, FD_RS, FD_LISTEN };

struct pfd {
	uint8_t kind;
	uint8_t family;
	uint8_t pending;         /* FD_RS: a nonblocking connect under way (to dst);
				    FD_TCP: 2, that connect given to kernel TCP */
	uint8_t flags;           /* PFD_*: what the kernel would remember of this socket */
	uint32_t slot, gen;
	uint32_t rxsize, txsize; /* SO_RCVBUF / SO_SNDBUF asked before connect or listen */
	uint32_t optmask;        /* FD_TCP, FD_LISTEN: options set on it (sockopt.c's table) */
	int evfd;                /* listener: the hub's wake-up */
	union sockaddr_any dst;
};

#define PFD_RCVBUF_SET 1     /* setsockopt fixed SO_RCVBUF */
#define PFD_SNDBUF_SET 2     /* ... SO_SNDBUF */
#define PFD_CONNECT_UNTOLD 4 /* a connect went on after EINPROGRESS or EINTR: the
				next connect() reports its end (0 once, then EISCONN) */
#define PFD_SELF 8           /* the descriptor is the connection's readiness
				descriptor, no kernel TCP socket (ready.c) */
#define PFD_ASYNC 16         /* the program set O_ASYNC, an owner or a signal:
				signal-driven I/O goes by the readiness descriptor */

extern PL_HIDDEN struct pfd *pfd_tab;
extern PL_HIDDEN unsigned pfd_max;

PL_HIDDEN void pfd_table_init(void);
PL_HIDDEN void pfd_set(struct pfd *p, const struct pfd *v);
PL_HIDDEN void pfd_clear(int fd);
PL_HIDDEN void pfd_forget(int fd);
PL_HIDDEN int pfd_dup(int oldfd, int newfd);

static inline struct pfd *pfd_get(int fd)
{
	return (unsigned)fd < pfd_max ? &pfd_tab[fd] : NULL;
}

/* The rshare socket behind fd (or one being connected), or NULL: the
 * fast check, before the pending check of rs_of(). */
static inline struct pfd *rs_peek(int fd)
{
	struct pfd *p = pfd_get(fd);
	return p && __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE) >= FD_RS ? p : NULL;
}

/* connect.c: a nonblocking connect that went on rshare, settled */
PL_HIDDEN __attribute__((noinline)) int rs_settle(int fd, struct pfd *p);

/* The rshare socket behind fd, or NULL: the fast check on every call. */
static inline struct pfd *rs_of(int fd)
{
	struct pfd *p = pfd_get(fd);
	if (!p || __atomic_load_n(&p->kind, __ATOMIC_ACQUIRE) < FD_RS)
		return NULL;
	/* a nonblocking connect given to kernel TCP: the kernel's from now */
	return __builtin_expect(p->pending, 0) && rs_settle(fd, p) ? NULL : p;
}

/* A listener's wake-up (its eventfd) emptied, and the readiness
 * descriptor its signals come by (O_ASYNC: sockopt.c), if it has one. */
static inline void lis_drain(const struct pfd *p)
{
	uint64_t junk;
	char b[256];
	int pf;
	while (sys_read(p->evfd, &junk, sizeof(junk)) > 0)
		;
	if ((p->flags & PFD_ASYNC) && (pf = vs_poll_fd_cached(p->slot)) >= 0)
		while (sys_read(pf, b, sizeof(b)) == (ssize_t)sizeof(b))
			;
}

/* A vfork child (a child that shares this memory: cl.pid is its
 * parent's): the table and the references are its parent's, so until it
 * execs (exec.c, spawn mode) its descriptor calls are the kernel's alone. */
static inline int pl_vfork_child(void)
{
	return cl.pid && getpid() != cl.pid;
}

/* io.c: a write to a listener (EPIPE, SIGPIPE unless MSG_NOSIGNAL) */
PL_HIDDEN ssize_t rs_send_listener(int flags);

/* a -errno answer of core/proc as libc's -1 and errno */
static inline ssize_t ret_err(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* ---- the rest, each from its file ---- */

/* socket.c: listeners of systemd's socket activation (constructor) */
PL_HIDDEN void sock_activated(void);
/* AF_INET or AF_INET6 when fd is a kernel TCP stream socket (*listening:
 * whether it listens; may be NULL), else 0 */
PL_HIDDEN int sock_tcp_family(int fd, int *listening);
/* socket.c: a's address into out (at most *len bytes), *len its size */
PL_HIDDEN void sock_fill_addr(const union sockaddr_any *a, struct sockaddr *out, socklen_t *len);

/* poll.c, epoll.c: end = now (CLOCK_MONOTONIC) plus t */
static inline void tmo_deadline(const struct timespec *t, struct timespec *end)
{
	clock_gettime(CLOCK_MONOTONIC, end);
	end->tv_sec += t->tv_sec;
	end->tv_nsec += t->tv_nsec;
	if (end->tv_nsec >= 1000000000) {
		end->tv_sec++;
		end->tv_nsec -= 1000000000;
	}
}

/* the milliseconds left until end, rounded up */
static inline long tmo_ms_left(const struct timespec *end)
{
	struct timespec now;
	long ms;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (end->tv_sec - now.tv_sec) * 1000 + (end->tv_nsec - now.tv_nsec + 999999) / 1000000;
	return ms < 0 ? 0 : ms;
}

/* epoll.c */
PL_HIDDEN int ep_forget(uint32_t slot, int pf, int *sets, int max);
/* a listener's descriptor fd is about to close: its wake-up leaves the sets */
PL_HIDDEN void ep_listener_closing(int fd);
PL_HIDDEN int ep_hand_over(int fd, struct pfd *p, uint32_t slot);
/* the set registrations of slot's readiness descriptor at number from move to to */
PL_HIDDEN void ep_rekey(uint32_t slot, int from, int to);

/* ready.c: the program's descriptor as the readiness descriptor.
 * rd_fd: the readiness descriptor of fd's connection, fd itself where it
 * may become it (else a high number; -errno); rd_settled: a connect made,
 * the same for one polled while under way; rd_closing: fd is about to
 * stop naming the socket; rd_unbecome: fd a kernel socket again (exec) */
PL_HIDDEN int rd_fd(int fd, struct pfd *p);
PL_HIDDEN void rd_settled(int fd, struct pfd *p);
PL_HIDDEN void rd_closing(int fd, const struct pfd *p);
PL_HIDDEN int rd_unbecome(int fd, struct pfd *p);

/* pass.c: sendmsg passing rshare descriptors, which go as tokens (*sent
 * 0: it passes none, send m as is); the descriptors recvmsg took in */
PL_HIDDEN ssize_t pass_sendmsg(int fd, const struct msghdr *m, int flags, int *sent);
PL_HIDDEN void pass_received(const struct msghdr *m);

/* sockopt.c: the options set on fd's kernel socket go to its slot */
PL_HIDDEN void so_carry(int fd, struct pfd *p);
PL_HIDDEN int so_tcp_state(uint32_t slot); /* TCP_ESTABLISHED, TCP_CLOSE, ... */
/* signal-driven I/O's settings of a descriptor: O_ASYNC, the owner
 * (F_SETOWN, F_SETOWN_EX) and the signal (F_SETSIG); so_async_put sets
 * them on another (a readiness descriptor, kept nonblocking) */
struct so_async {
	int on, sig;
	struct f_owner_ex own;
};
PL_HIDDEN void so_async_get(int fd, struct so_async *a);
PL_HIDDEN void so_async_put(int fd, const struct so_async *a);
PL_HIDDEN void so_inherit(int lfd, const struct pfd *lp, uint32_t slot);
/* SO_LINGER: 0 off, -1 on with a zero time (a last close resets), else
 * its time in seconds (a last close waits that long at most: vs_linger) */
PL_HIDDEN int so_linger(int fd, const struct pfd *p);

/* exec.c: in the new program, take up the sockets the old one kept; and
 * before a program starts, what goes along (see exec.c), undone by
 * exec_undo when the exec failed or (spawn) once the program started */
struct exec_undo {
	int ctl[CL_POOLS], spawn; /* the connections made for it, a pool each */
	char **env;
	int nev, ev[64];
};
PL_HIDDEN void exec_adopt(void);
PL_HIDDEN char *exec_prepare_list(struct exec_undo *u, int spawn);
PL_HIDDEN char **exec_prepare(char *const envp[], struct exec_undo *u, int spawn);
PL_HIDDEN void exec_undo(struct exec_undo *u);
/* syscall.c: a program linked with liburing runs on kernel TCP (1) */
PL_HIDDEN int uring_check(void);
/* stdio.c: stdin, stdout or stderr (FD 0-2) follows what FD names: a
 * stream of the library's calls on an rshare connection, else the
 * program's; the streams made flushed, before the library ends */
PL_HIDDEN void std_follow(int fd);
PL_HIDDEN void std_flush(void);

#endif
