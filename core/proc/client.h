/*
 * client.h - the process side of rshare: attaching to the hub and the pool,
 * requests to the hub (client.c), fork and exec (handover.c), and the
 * socket operations on arena slots (vsock.c, vsock_data.c, vsock_poll.c).
 * Linked into librshare.so; uses raw system calls (sys.h) so that it never
 * re-enters the interposer.  Failures are -errno unless said otherwise.
 */
#ifndef RSHARE_CLIENT_H
#define RSHARE_CLIENT_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "arena.h"
#include "msg.h"

/* A process belongs to one pool, its own (p[0]), and to at most
 * CL_POOLS - 1 more: the pools of sockets that processes of other pools
 * passed to it (same uid).  It speaks for each on a connection of its own,
 * where the hub sees it as a process of that pool, and names a slot of
 * pool k as k << CL_POOL_SHIFT | slot everywhere on the process side (a
 * local slot); requests go out on pool k's connection with the plain slot
 * (cl_rpc).  A pool not taken has arena NULL. */
#define CL_POOLS 4
#define CL_POOL_SHIFT 18
#define CL_SLOT_MASK ((1u << CL_POOL_SHIFT) - 1)
#define CL_SLOTS ((uint32_t)CL_POOLS << CL_POOL_SHIFT)
_Static_assert(ARENA_MAX_SLOTS == 1u << CL_POOL_SHIFT, "a local slot holds an arena's slot");

struct cl_pool {
	void *arena;
	uint64_t arena_bytes, id, token;
	int ctl_fd;         /* this process's connection to the hub in the pool */
	int evfd;           /* the pool's doorbell kick */
	int cell;           /* its request cell + 1; 0: not asked yet, -1: none (cell.c) */
};

/* processors a waiter for the hub needs before it polls (client.c: cl_cpus) */
#define CL_SPIN_HUB_CPUS 3

struct cl_state {
	_Atomic int attached; /* 1 attached, 0 not yet, -1 no hub to be had */
	struct cl_pool p[CL_POOLS];
	int hi_fd;          /* our descriptors live at or above this */
	pid_t pid;          /* the process that attached (a vfork child differs) */
	int kernel_only;    /* it uses io_uring: no new socket goes to rshare */
	int sandboxed;      /* under a seccomp filter: only plain read and write */
	uint64_t spin_ns;   /* how long a waiter spins before it sleeps (spin_us) */
	int spin_hub;       /* whether it spins for what only this node's hub brings */
};
extern struct cl_state cl;

int cl_attach(void);                      /* 0, or -ENOTCONN: use kernel TCP */
int cl_rpc(struct msg_req *q, struct msg_rep *r, int sendfd);
int cl_rpc_fd(struct msg_req *q, struct msg_rep *r, int *fd);
/* the same with SENDFD along (when >= 0) and at most NFDS descriptors back
 * into FDS; cl_rpc_pool: on pool K's connection as it is (no slot changed) */
int cl_rpc_fds(struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds);
int cl_rpc_pool(uint32_t k, struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds);
int cl_hub_connect(void);                 /* a new connection to this node's hub (errno set too) */
int cl_hi_fd(int fd);                     /* move fd up, close-on-exec */
void cl_kick(uint32_t pool);              /* wake a sleeping hub (a pool's doorbell) */
int cl_hub_alive(void);
void cl_init(void);                       /* fork handlers; call once */
/* exec: a connection, open across exec, holding this process's sockets
 * in pool K less the ndrop given (-errno: none to be had); and, in the new
 * program, taking it up as its pool K (0, or -errno and the sockets are
 * lost; pool 0 first) */
int cl_exec_begin(uint32_t k, const uint32_t *slots, const uint32_t *gens, int ndrop);
int cl_exec_adopt(uint32_t k, int fd);
/* Descriptor passing (SCM_RIGHTS): cl_pass gives the token to send in the
 * place of FD, a descriptor of the socket (-errno: send FD as it is);
 * cl_adopt takes the socket a token names (its id and secret, read from
 * it), or with LFD >= 0 the listener a pool registered for the kernel
 * listener LFD, and fills in A: its slot, the descriptor passed (a copy of
 * LFD), a listener's wake-up; -EPERM (another uid), -EXDEV (this process
 * is in another pool), -ENOENT (no such token or listener), -ENOTCONN (no
 * hub). */
struct cl_adopted {
	uint32_t slot, gen;
	int listener, fd, evfd;
};
int cl_pass(uint32_t slot, uint32_t gen, int fd);
int cl_adopt(uint32_t id, uint64_t secret, int lfd, struct cl_adopted *a);
/* The library's own descriptors (hub connections, the pool's doorbell,
 * readiness descriptors at numbers of its own), at most MAX into OUT:
 * what a program's close_range(2) must leave open.  Their number. */
int cl_own_fds(int *out, int max);
int vs_own_fds(int *out, int max);
/* Make sure this process has a watch on its hub: a thread blocked on a
 * connection to the hub which, when the hub dies, marks the arena and
 * wakes every waiter of the pool.  -EINTR when a signal's handler (one
 * without SA_RESTART) interrupted the connect, which waits while a hub
 * that died is succeeded; else 0 (no watch: the next wait tries again). */
int cl_watch(void);
static inline int cl_hub_dead(void)
{
	return cl.p[0].arena && atomic_load(&((struct arena_hdr *)cl.p[0].arena)->hub_dead);
}

/* the arena of a local slot's pool */
static inline void *cl_arena(uint32_t slot)
{
	return cl.p[slot >> CL_POOL_SHIFT].arena;
}

static inline struct arena_slot *cl_slot(uint32_t slot)
{
	return arena_slot(cl_arena(slot), slot & CL_SLOT_MASK);
}

/* The slots pool k ever used: walks over slots stop there. */
static inline uint32_t cl_pool_hi(uint32_t k)
{
	void *a = k < CL_POOLS ? cl.p[k].arena : NULL;
	uint32_t n = a ? atomic_load(&((struct arena_hdr *)a)->slots_hi) : 0;
	return n < ARENA_MAX_SLOTS ? n : ARENA_MAX_SLOTS;
}

/* A walk over every slot this process's pools ever used, pool after pool:
 * the first local slot at or after i that lies in one (CL_SLOTS: none).
 * for (i = cl_slot_at(0); i < CL_SLOTS; i = cl_slot_at(i + 1)) */
static inline uint32_t cl_slot_at(uint32_t i)
{
	for (uint32_t k = i >> CL_POOL_SHIFT; k < CL_POOLS; i = ++k << CL_POOL_SHIFT)
		if ((i & CL_SLOT_MASK) < cl_pool_hi(k))
			return i;
	return CL_SLOTS;
}

/* vsock*.c: socket operations; return values are -errno on failure */
/* kfd: the kernel listener; one a pool has registered already is shared,
 * as the kernel's is (its slot and wake-up come back), by a process of
 * that pool or by one that has none yet (it joins the pool) */
int vs_listen(const union sockaddr_any *bound, int backlog, uint32_t rxsize, uint32_t txsize, int kfd,
	      int *evfd, uint32_t *slot, uint32_t *gen);
/* 0 established, 1 fallback to kernel TCP, -errno; -EINTR: a signal
 * handler without SA_RESTART came, or -EINPROGRESS: TMO_US (SO_SNDTIMEO,
 * 0 none) passed; the connect goes on (slot, gen set) */
int vs_connect(const union sockaddr_any *dst, const union sockaddr_any *local, uint32_t rxsize,
	       uint32_t txsize, int64_t tmo_us, uint32_t *slot, uint32_t *gen);
/* Wait while the slot's connect is under way, at most TMO_US (0: no
 * limit): 0 when it is over, -EINTR (a handler without SA_RESTART, or
 * any handler under a limit, as the kernel's), -EINPROGRESS (the time
 * passed), -ECONNRESET (the hub is gone). */
int vs_connect_wait(uint32_t slot, int64_t tmo_us);
/* the CONNECT alone (a nonblocking connect): 0 under way, 1 fallback,
 * -errno; with POLLED (a connect an event loop polls next) the socket's
 * readiness descriptor comes with it where the hub could make one
 * (vs_poll_fd_cached: that poll asks nothing more) */
int vs_connect_start(const union sockaddr_any *dst, const union sockaddr_any *local, uint32_t rxsize,
		     uint32_t txsize, int polled, uint32_t *slot, uint32_t *gen);
/* the next connection of a listener; with pfd, its readiness descriptor
 * too where the hub could make one (else *pfd is -1), which the caller
 * makes the program's descriptor (vs_poll_is) */
int vs_accept(uint32_t slot, uint32_t gen, uint32_t *nslot, uint32_t *ngen, int *pfd);
/* A blocking accept's waits (vsock_accept.c): a thread back for its next
 * connection polls the listener first (1: it moved past seq); before it
 * sleeps, a thread leads (1: it polls the listener itself) or follows (0:
 * it slept on its process's word for the listener, at most MS (-1: no
 * limit), and looks again; -EINTR: a handler ran); a thread leaving
 * accept gives its lead, if any, to a follower. */
int vs_accept_spin(uint32_t slot, uint32_t gen, uint32_t seq);
int vs_accept_follow(uint32_t slot, uint32_t gen, int64_t ms);
void vs_accept_leave(void);
/* The leading thread's sleep on kernel listener kfd and eventfd evfd of
 * listener SLOT, for at most MS (-1: no end), where other processes hold
 * it: in an exclusive epoll set, one process woken a connection: the
 * count of descriptors ready (0: the time is up), -EINTR, or -ENOSYS where
 * the caller is to poll(2) both itself. */
int vs_accept_wait(uint32_t slot, int kfd, int evfd, int ms);
/* A blocking accept's first look at listener SLOT, which other processes
 * hold: a connection that waits, while some of them sleep in accept (one
 * woken for it), is left to them for a while (vsock_accept.c) */
void vs_accept_defer(uint32_t slot);
/* A handler about to run on this thread (preload/signal.c): if the thread
 * sleeps in a blocking accept, counted in the listener's sleepers, it is
 * counted out first, so that a handler that leaves with siglongjmp leaves
 * the count right (one that returns ends the sleep with EINTR anyway). */
void vs_accept_sig(void);
int vs_accept_own_fds(int *out, int max); /* the epoll sets of vs_accept_wait */
/* the process's last descriptor of listener SLOT closed: its set goes,
 * unless a thread still waits on it */
void vs_accept_forget(uint32_t slot, uint32_t gen);
void vs_accept_fork_child(void);
void vs_ref(uint32_t slot);
/* 1 when this was the process's last descriptor of the slot, 0 when not */
int vs_unref(uint32_t slot, uint32_t gen);
void vs_waits_check(uintptr_t frame); /* a call's entry: end the waits a handler's jump left (vsock_int.h) */
/* the same, and a last release resets the connection (SO_LINGER 0) */
int vs_unref_abort(uint32_t slot, uint32_t gen);
/* before the last close of a socket with SO_LINGER on and a time of SECS:
 * until the peer has every byte, at most SECS (vsock.c) */
void vs_linger(uint32_t slot, int secs);
ssize_t vs_send(uint32_t slot, const struct iovec *iov, int iovcnt, int flags);
ssize_t vs_recv(uint32_t slot, const struct iovec *iov, int iovcnt, int flags);
/* recvmsg(MSG_ERRQUEUE): a MSG_ZEROCOPY notification into M, as the
 * kernel's for a socket of FAMILY; 0, or -EAGAIN when none waits */
struct msghdr;
ssize_t vs_errqueue(uint32_t slot, int family, struct msghdr *m);
int vs_shutdown(uint32_t slot, uint32_t gen, int how);
int vs_listen_stop(uint32_t slot, uint32_t gen); /* shutdown(2) of a listener */
int vs_take_error(uint32_t slot);
int vs_nread(uint32_t slot);
int vs_nunsent(uint32_t slot);            /* bytes in the send ring, none on the same node (SIOCOUTQ) */
int vs_nroom(uint32_t slot);              /* free bytes of the send ring */
int vs_held(uint32_t slot);               /* this process has descriptors of it */
uint32_t vs_nrefs(uint32_t slot);         /* how many */
void vs_fork_child(void);                 /* in a new child: no call of its is under way */
void vs_segs_lock(void);                  /* a fork holds the pair segments' lock (vsock.c) */
void vs_segs_unlock(void);
/* Readiness (vsock_poll.c; see core/hub/ready.c): the socket's readiness
 * descriptor, asked of the hub the first time (-errno on failure); the
 * socket's true readiness as POLL* bits; and, after the descriptor claimed
 * more than is true, bringing it in line (empty it, or fill it when the send ring is full),
 * which returns the true readiness it settled by. */
int vs_poll_fd(uint32_t slot, uint32_t gen);
int vs_poll_fd_cached(uint32_t slot);     /* -1 when it has none */
/* The program's own descriptor as the readiness descriptor, so that a
 * polled connection costs the program one descriptor, as on kernel TCP:
 * vs_poll_fd_onto asks the hub for it and puts it in place of fd (the
 * kernel socket there goes); vs_poll_move puts the one this process holds
 * already (a high number) in place of fd, and returns that number, which
 * the caller closes once it has moved its epoll registrations; vs_poll_self
 * says whether the readiness descriptor is a descriptor of the program's;
 * vs_poll_unself, called before the program closes fd, that descriptor,
 * gives this process a high number of its own again (other descriptors of
 * the socket stay). */
int vs_poll_fd_onto(uint32_t slot, uint32_t gen, int fd, int *onto); /* *onto: fd is it now */
int vs_poll_move(uint32_t slot, int fd);
int vs_poll_is(uint32_t slot, int fd);   /* fd, the program's, is it from the start (accepted with it): 0 or -1 */
void vs_poll_fd_given(uint32_t slot, int pf); /* pf came with the connect: kept at a high number */
int vs_poll_self(uint32_t slot);
void vs_poll_unself(uint32_t slot, int fd);
unsigned vs_poll_mask(uint32_t slot);
unsigned vs_poll_settle(uint32_t slot, unsigned claimed);
/* Called when this process drops its last descriptor of a socket that has
 * a readiness descriptor, before it tells the hub (which may then give the
 * slot to a new socket at once) and before the descriptor is closed: the
 * interposer lets go of its epoll records of the slot, and returns the
 * sets (at most max) that hold pollfd itself.  Should no process hold the
 * socket any more, those are told to forget it. */
#define VS_FORGET_SETS 32
extern int (*vs_poll_forget)(uint32_t slot, int pollfd, int *sets, int max);
/* Does an accepted rshare connection still hold this local port? */
int vs_port_in_use(const union sockaddr_any *addr);
/* Would the kernel restart a blocked socket call after this signal?  Only
 * when no handler is installed without SA_RESTART (a guess, for handlers
 * the library did not count: vs_sig_restarts). */
int vs_restartable(void);
/* After a wait that a signal ended with EINTR (poll: the kernel restarts
 * it for no handler), would kernel TCP's call have gone on?  1 when the
 * handlers that ran on this thread since MARK (vs_sig_runs' values then)
 * were all installed with SA_RESTART; when none that the library counts
 * ran, vs_restartable's guess. */
int vs_sig_restarts(const uint32_t mark[2]);
/* The program's signal handlers that ran on this thread, as
 * preload/signal.c counts them: [0] all, [1] those installed without
 * SA_RESTART.  A blocked send or recv compares them with their values at
 * its start (vsock_data.c). */
extern __thread uint32_t vs_sig_runs[2] __attribute__((tls_model("initial-exec")));
/* A blocked call's mark of the program's handlers at its start (or that
 * of one wait: vs_sig_restarts), and whether one ran since that ends it
 * with EINTR as the kernel's blocked socket call: one installed without
 * SA_RESTART, or any under a time limit (TIMED). */
static inline void vs_sig_mark(uint32_t mark[2])
{
	mark[0] = vs_sig_runs[0];
	mark[1] = vs_sig_runs[1];
}
static inline int vs_sig_since(const uint32_t mark[2], int timed)
{
	return vs_sig_runs[!timed] != mark[!timed];
}

/* The program's handlers put off while the thread holds a lock of the
 * library's (vsock_sig.c): the hold's depth, and the signals put off.  The
 * trampoline asks vs_sig_put_off first while the hold is not 0 (1: put
 * off, the handler must not run now); the end of the outermost hold delivers them
 * (vs_sig_deliver_later). */
extern __thread uint32_t vs_sig_hold __attribute__((tls_model("initial-exec")));
extern __thread uint32_t vs_sig_nlater __attribute__((tls_model("initial-exec")));
int vs_sig_put_off(int sig, const siginfo_t *si, int flags);
void vs_sig_deliver_later(void);
static inline void vs_sig_hold_begin(void)
{
	vs_sig_hold++;
	atomic_signal_fence(memory_order_seq_cst);
}
static inline void vs_sig_hold_end(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	vs_sig_hold--;
	atomic_signal_fence(memory_order_seq_cst);
	if (__builtin_expect(vs_sig_nlater != 0, 0) && !vs_sig_hold)
		vs_sig_deliver_later();
}

#endif
