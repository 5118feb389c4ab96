/*
 * client.c - a process's attachment to its hub and pool.
 *
 * On first need the process connects to the hub of its network namespace
 * (abstract unix socket), starting one if none answers (hub_spawn.c), and asks
 * for a new pool: the reply carries the arena memfd, mapped shared, and the
 * pool's eventfd.  Children inherit both through fork (handover.c).  Every
 * request goes over this process's connection in the pool of the socket it
 * names (cl.p[k].ctl_fd, see client.h), one at a time, and is answered in
 * order.
 */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "config.h"
#include "hub_spawn.h"
#include "sys.h"

#define CL_NO_POOL {.ctl_fd = -1, .evfd = -1}
struct cl_state cl = {.p = {CL_NO_POOL, CL_NO_POOL, CL_NO_POOL, CL_NO_POOL}};
_Static_assert(CL_POOLS == 4, "one CL_NO_POOL a pool");
pthread_mutex_t cl_rpc_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t cl_attach_lock = PTHREAD_MUTEX_INITIALIZER;

int cl_hi_fd(int fd)
{
	int n;
	if (fd < 0)
		return fd;
	if (!cl.hi_fd) {
		struct rlimit rl;
		long lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long)rl.rlim_cur : 1024;
		if (lim > 4096)
			lim = 4096; /* F_DUPFD searches upward from here */
		cl.hi_fd = lim > 256 ? (int)(lim * 3 / 4) : 3;
	}
	n = sys_fcntl(fd, F_DUPFD_CLOEXEC, cl.hi_fd);
	if (n < 0)
		n = sys_fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (n < 0)
		return fd;
	sys_close(fd);
	return n;
}

int cl_hub_connect(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const char *name = hub_sock_name();
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
	int fd = sys_socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	memcpy(a.sun_path + 1, name, strlen(name));
	if (fd < 0)
		return -errno;
	if (sys_connect(fd, &a, len) < 0) {
		int e = errno;
		sys_close(fd);
		errno = e; /* for perror(3) of callers outside core/ */
		return -e;
	}
	return cl_hi_fd(fd);
}

/* The hub's answer on the connection: polled for spin_us first, as a
 * request cell's is (cell.c), then slept for; the hub answers most
 * within a few microseconds, less than a sleep and a wake-up cost.  Each
 * look is a system call, so at most the default spin_us, whatever is set:
 * a spin_us of 100 ms made a request the hub was slow to answer cost
 * thousands of them. */
static ssize_t rpc_recv_soon(int fd, struct msghdr *m)
{
	uint64_t end = 0;
	for (;;) {
		ssize_t n = sys_recvmsg(fd, m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n >= 0 || errno != EAGAIN)
			return n;
		if (!end)
			end = sys_now_ns() +
			      (cl.spin_ns < CFG_DEFAULT_SPIN_US * 1000ull ? cl.spin_ns : CFG_DEFAULT_SPIN_US * 1000ull);
		else if (sys_now_ns() >= end)
			return sys_recvmsg(fd, m, MSG_CMSG_CLOEXEC);
		sched_yield();
	}
}

int cl_rpc_on(int fd, struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds)
{
	struct iovec iov = {.iov_base = q, .iov_len = sizeof(*q)};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;
	/* under a seccomp filter sendmsg may kill the process: nothing is
	 * asked of the hub any more (what this process held goes when it ends) */
	if (cl.sandboxed)
		return -ECONNRESET;
	cl_cells_quiet(); /* a release left in a cell goes first */
	if (sendfd >= 0) {
		struct cmsghdr *c;
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sendfd, sizeof(int));
	}
	do
		n = sys_sendmsg(fd, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(*q))
		return -ECONNRESET;
	if (!r)
		return 0;
	iov.iov_base = r;
	iov.iov_len = sizeof(*r);
	memset(&u, 0, sizeof(u));
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	n = rpc_recv_soon(fd, &m);
	while (n < 0 && errno == EINTR)
		n = sys_recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	if (n != sizeof(*r))
		return -ECONNRESET;
	for (int i = 0; i < nfds; i++)
		fds[i] = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k && i < nfds; i++)
				memcpy(&fds[i], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	return 0;
}

/* the requests that name a slot: they go to its pool (the rest to this
 * process's own), and an accepted connection is in its listener's */
static const uint8_t cl_op_slot[MSG_MAX + 1] = {
	[MSG_ACCEPT] = 1, [MSG_RELEASE] = 1, [MSG_SHUTDOWN] = 1, [MSG_POLLFD] = 1,
	[MSG_PAIRFD] = 1, [MSG_TXGROW] = 1, [MSG_PASS] = 1,
};

/* One request at a time, and the program's signal handlers put off while
 * it goes (vsock_sig.c): a handler that made a request of its own (a
 * close, a fork) would wait for ever on the lock its thread holds. */
int cl_rpc_pool(uint32_t k, struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds)
{
	int ret, fd;
	vs_sig_hold_begin();
	pthread_mutex_lock(&cl_rpc_lock);
	fd = k < CL_POOLS ? cl.p[k].ctl_fd : -1;
	ret = -ENOSYS;
	if (fd >= 0 && sendfd < 0 && !nfds && cl_cell_op(q->op))
		ret = cl_cell_rpc(k, q, r);
	if (ret == -ENOSYS)
		ret = fd >= 0 ? cl_rpc_on(fd, q, r, sendfd, fds, nfds) : -ECONNRESET;
	pthread_mutex_unlock(&cl_rpc_lock);
	vs_sig_hold_end();
	return ret;
}

int cl_rpc_fds(struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds)
{
	struct msg_req w = *q; /* callers may send q again */
	uint32_t k = 0;
	int ret;
	if (q->op <= MSG_MAX && cl_op_slot[q->op]) {
		k = q->slot >> CL_POOL_SHIFT;
		w.slot &= CL_SLOT_MASK;
	}
	ret = cl_rpc_pool(k, &w, r, sendfd, fds, nfds);
	if (!ret && r && q->op == MSG_ACCEPT && !r->status)
		r->slot = (r->slot & CL_SLOT_MASK) | k << CL_POOL_SHIFT;
	return ret;
}

int cl_rpc(struct msg_req *q, struct msg_rep *r, int sendfd)
{
	return cl_rpc_fds(q, r, sendfd, NULL, 0);
}

/* An RPC whose reply carries one descriptor (-1 when none came). */
int cl_rpc_fd(struct msg_req *q, struct msg_rep *r, int *fd)
{
	*fd = -1;
	return cl_rpc_fds(q, r, -1, fd, 1);
}

/* The processors this process may run on (its affinity: taskset, a
 * cpuset), 1 when that cannot be read.  A waiter whose answer only this
 * node's hub can bring (a recv on a soft link, where the hub places every
 * byte; a send on any link, whose room the hub's completions make) polls
 * only where that leaves the hub and the program's peer a processor each
 * (CL_SPIN_HUB_CPUS, unless spin_us is set): with fewer, its polling takes
 * the processor the hub needs to answer it, and a loaded node's waiters
 * poll each other out.  A same-node ring, and a verbs ring whose writes
 * the peer's NIC places, are polled as before. */
static int cl_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	return CPU_COUNT(&set);
}

int cl_map_pool(uint32_t k, const struct msg_rep *rp, int *fds)
{
	struct msg_rep r = *rp;
	struct cl_pool *p = &cl.p[k];
	struct arena_hdr *h;
	void *a = mmap(NULL, r.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	sys_close(fds[0]);
	if (a == MAP_FAILED) {
		int e = errno;
		sys_close(fds[1]);
		return -e;
	}
	h = a;
	if (h->magic != ARENA_MAGIC || h->version != ARENA_VERSION || h->bytes != r.arena_bytes) {
		munmap(a, r.arena_bytes);
		sys_close(fds[1]);
		return -EPROTO;
	}
	p->arena_bytes = r.arena_bytes;
	p->id = r.pool_id;
	cl.pid = getpid();
	if (k == 0) { /* the process's own settings, once: joined pools share them */
		const struct cfg *c = cfg_lib();
		const char *e = getenv("RSHARE_SPIN_US");
		int set = c && c->spin_us >= 0, us = set ? c->spin_us : CFG_DEFAULT_SPIN_US;
		if (!c && e && *e && cfg_parse_spin(e, &us) == 0)
			set = 1;
		cl.spin_ns = (uint64_t)us * 1000;
		cl.spin_hub = set || cl_cpus() >= CL_SPIN_HUB_CPUS;
	}
	p->token = r.token;
	p->evfd = cl_hi_fd(fds[1]);
	p->arena = a; /* its slots are named only once this returned */
	return 0;
}

static int attach_locked(void)
{
	struct msg_req q = {.op = MSG_HELLO, .pid = getpid()};
	struct msg_rep r;
	int fds[2], ret, fd = cl_hub_connect();
	if (fd < 0 && getenv("RSHARE_NO_AUTOSTART") == NULL) {
		spawn_lib_hub();
		for (int i = 0; i < 300 && fd < 0; i++) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
			fd = cl_hub_connect();
		}
	}
	if (fd < 0)
		return fd;
	ret = cl_rpc_on(fd, &q, &r, -1, fds, 2);
	if (!ret && (r.status || fds[0] < 0 || fds[1] < 0))
		ret = r.status < 0 ? r.status : -EPROTO;
	if (!ret)
		ret = cl_map_pool(0, &r, fds);
	if (ret < 0) {
		sys_close(fd);
		return ret;
	}
	cl.p[0].ctl_fd = fd;
	return 0;
}

int cl_attach(void)
{
	if (cl.kernel_only)
		return -ENOTCONN;
	if (cl.attached > 0 && cl_hub_dead())
		return -ENOTCONN; /* its hub died: what is new here uses kernel TCP */
	if (cl.attached)
		return cl.attached > 0 ? 0 : -ENOTCONN;
	pthread_mutex_lock(&cl_attach_lock);
	if (!cl.attached)
		cl.attached = attach_locked() == 0 ? 1 : -1;
	pthread_mutex_unlock(&cl_attach_lock);
	return cl.attached > 0 ? 0 : -ENOTCONN;
}

void cl_kick(uint32_t k)
{
	uint64_t one = 1;
	int fd = k < CL_POOLS ? cl.p[k].evfd : -1;
	if (fd >= 0 && sys_write(fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the hub is awake */
	}
}

int cl_hub_alive(void)
{
	struct pollfd p = {.fd = cl.p[0].ctl_fd, .events = POLLIN};
	if (p.fd < 0)
		return 0;
	if (syscall(SYS_poll, &p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLIN)))
		return 0; /* the hub never speaks first: anything here is its end */
	return 1;
}
