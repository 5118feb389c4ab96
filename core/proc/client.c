/*
 * client.c - a process's attachment to its hub and pool.
 *
 * On first need the process connects to the hub of its network namespace
 * (abstract unix socket), starting one if none answers, and asks for a new
 * pool: the reply carries the arena memfd, mapped shared, and the pool's
 * eventfd.  Children inherit both through fork.  Before a fork, the
 * prepare handler opens a fresh connection and tells the hub (MSG_FORK),
 * which pins the parent's sockets for the child; the child takes that
 * connection as its own and names its pid (MSG_CHILD).  So the hub knows
 * every process, even one that dies before it touches a socket.
 *
 * The hub is started so that it is nobody's child: a clone without exit
 * signal (no SIGCHLD reaches the application, whose wait() cannot see
 * it), which calls setsid() and forks the hub, then exits.
 */
#include "client.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "config.h"
#include "sys.h"

struct cl_state cl = {.ctl_fd = -1, .evfd = -1};
static pthread_mutex_t rpc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static int fork_fd = -1;
static uint64_t fork_token;

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
		return -1;
	if (sys_connect(fd, &a, len) < 0) {
		int e = errno;
		sys_close(fd);
		errno = e;
		return -1;
	}
	return cl_hi_fd(fd);
}

static const char *hub_path(char *buf, size_t len)
{
	const char *env = getenv("RSHARE_HUB");
	const struct cfg *c = cfg_lib();
	Dl_info di;
	if (env && *env)
		return env;
	if (c && c->hub[0])
		return c->hub;
	if (dladdr((void *)cl_attach, &di) && di.dli_fname) {
		const char *slash = strrchr(di.dli_fname, '/');
		if (slash && (size_t)(slash - di.dli_fname) + 16 < len) {
			memcpy(buf, di.dli_fname, slash - di.dli_fname);
			strcpy(buf + (slash - di.dli_fname), "/rshared");
			if (access(buf, X_OK) == 0)
				return buf;
			/* installed layout: lib/rshare/librshare.so and sbin/rshared */
			strcpy(buf + (slash - di.dli_fname), "/../../sbin/rshared");
			if (access(buf, X_OK) == 0)
				return buf;
		}
	}
	return "rshared";
}

extern char **environ;

static void start_hub(void)
{
	char pbuf[PATH_MAX];
	const char *path = hub_path(pbuf, sizeof(pbuf));
	char *argv[] = {(char *)"rshared", (char *)"--daemon", NULL};
	char *envp[256];
	int n = 0;
	pid_t pid;
	for (char **e = environ; e && *e && n < 255; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11))
			envp[n++] = *e;
	envp[n] = NULL;
	/* a clone with exit signal 0: no SIGCHLD, invisible to wait(-1) */
	pid = (pid_t)syscall(SYS_clone, 0, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return;
	if (pid == 0) {
		pid_t p2;
		setsid();
		p2 = (pid_t)syscall(SYS_fork);
		if (p2 == 0) {
			int null = (int)syscall(SYS_open, "/dev/null", O_RDWR);
			const char *log = getenv("RSHARE_HUB_LOG");
			int lfd = log ? (int)syscall(SYS_open, log, O_WRONLY | O_APPEND | O_CREAT, 0600) : -1;
			syscall(SYS_dup2, null, 0);
			syscall(SYS_dup2, null, 1);
			syscall(SYS_dup2, lfd >= 0 ? lfd : null, 2);
			syscall(SYS_close_range, 3, ~0u, 0);
			if (strchr(path, '/'))
				syscall(SYS_execve, path, argv, envp);
			else
				execvpe(path, argv, envp);
			syscall(SYS_exit, 127);
		}
		syscall(SYS_exit, 0);
	}
	while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
		;
}

static int rpc_on(int fd, struct msg_req *q, struct msg_rep *r, int sendfd, int *fds, int nfds)
{
	struct iovec iov = {.iov_base = q, .iov_len = sizeof(*q)};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 2)];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;
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
	do
		n = sys_recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
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

int cl_rpc(struct msg_req *q, struct msg_rep *r, int sendfd)
{
	int ret;
	pthread_mutex_lock(&rpc_lock);
	ret = cl.ctl_fd >= 0 ? rpc_on(cl.ctl_fd, q, r, sendfd, NULL, 0) : -ECONNRESET;
	pthread_mutex_unlock(&rpc_lock);
	return ret;
}

/* An RPC whose reply carries one descriptor (-1 when none came). */
int cl_rpc_fd(struct msg_req *q, struct msg_rep *r, int *fd)
{
	int ret;
	*fd = -1;
	pthread_mutex_lock(&rpc_lock);
	ret = cl.ctl_fd >= 0 ? rpc_on(cl.ctl_fd, q, r, -1, fd, 1) : -ECONNRESET;
	pthread_mutex_unlock(&rpc_lock);
	return ret;
}

/* The arena and pool eventfd of a HELLO (or EXECED) reply. */
static int map_pool(const struct msg_rep *rp, int *fds)
{
	struct msg_rep r = *rp;
	struct arena_hdr *h;
	cl.arena = mmap(NULL, r.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	sys_close(fds[0]);
	if (cl.arena == MAP_FAILED) {
		cl.arena = NULL;
		sys_close(fds[1]);
		return -1;
	}
	h = cl.arena;
	if (h->magic != ARENA_MAGIC || h->version != ARENA_VERSION || h->bytes != r.arena_bytes) {
		munmap(cl.arena, r.arena_bytes);
		cl.arena = NULL;
		sys_close(fds[1]);
		return -1;
	}
	cl.arena_bytes = r.arena_bytes;
	cl.pool_id = r.pool_id;
	{
		const struct cfg *c = cfg_lib();
		const char *e = getenv("RSHARE_SPIN_US");
		int us = c && c->spin_us >= 0 ? c->spin_us : CFG_DEFAULT_SPIN_US;
		if (!c && e && *e)
			cfg_parse_spin(e, &us);
		cl.spin_ns = (uint64_t)us * 1000;
	}
	cl.token = r.token;
	cl.evfd = cl_hi_fd(fds[1]);
	return 0;
}

static int attach_locked(void)
{
	struct msg_req q = {.op = MSG_HELLO, .pid = getpid()};
	struct msg_rep r;
	int fds[2], fd = cl_hub_connect();
	if (fd < 0 && getenv("RSHARE_NO_AUTOSTART") == NULL) {
		start_hub();
		for (int i = 0; i < 300 && fd < 0; i++) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
			fd = cl_hub_connect();
		}
	}
	if (fd < 0)
		return -1;
	if (rpc_on(fd, &q, &r, -1, fds, 2) < 0 || r.status || fds[0] < 0 || fds[1] < 0)
		goto fail;
	if (map_pool(&r, fds) < 0)
		goto fail;
	cl.ctl_fd = fd;
	return 0;
fail:
	sys_close(fd);
	return -1;
}

int cl_attach(void)
{
	if (cl.attached > 0 && cl_hub_dead())
		return -1; /* its hub died: what is new here uses kernel TCP */
	if (cl.attached)
		return cl.attached > 0 ? 0 : -1;
	pthread_mutex_lock(&attach_lock);
	if (!cl.attached)
		cl.attached = attach_locked() == 0 ? 1 : -1;
	pthread_mutex_unlock(&attach_lock);
	return cl.attached > 0 ? 0 : -1;
}

void cl_kick(void)
{
	uint64_t one = 1;
	if (cl.evfd >= 0 && sys_write(cl.evfd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the hub is awake */
	}
}

int cl_hub_alive(void)
{
	struct pollfd p = {.fd = cl.ctl_fd, .events = POLLIN};
	if (cl.ctl_fd < 0)
		return 0;
	if (syscall(SYS_poll, &p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLIN)))
		return 0; /* the hub never speaks first: anything here is its end */
	return 1;
}

static void fork_prepare(void)
{
	struct msg_req q = {.op = MSG_FORK};
	struct msg_rep r;
	fork_fd = -1;
	pthread_mutex_lock(&attach_lock);
	pthread_mutex_lock(&rpc_lock);
	if (cl.attached <= 0)
		return;
	q.token = cl.token;
	q.pid = getpid();
	fork_fd = cl_hub_connect();
	if (fork_fd >= 0 && (rpc_on(fork_fd, &q, &r, -1, NULL, 0) < 0 || r.status)) {
		sys_close(fork_fd);
		fork_fd = -1;
	}
	if (fork_fd >= 0)
		fork_token = r.token;
}

static void fork_parent(void)
{
	if (fork_fd >= 0)
		sys_close(fork_fd);
	fork_fd = -1;
	pthread_mutex_unlock(&rpc_lock);
	pthread_mutex_unlock(&attach_lock);
}

static void fork_child(void)
{
	if (cl.attached > 0) {
		struct msg_req q = {.op = MSG_CHILD, .pid = getpid()};
		sys_close(cl.ctl_fd);
		cl.ctl_fd = fork_fd;
		cl.token = fork_token;
		if (fork_fd >= 0)
			rpc_on(fork_fd, &q, NULL, -1, NULL, 0);
	}
	fork_fd = -1;
	/* this thread took them in fork_prepare */
	pthread_mutex_unlock(&rpc_lock);
	pthread_mutex_unlock(&attach_lock);
}

static _Atomic pid_t watch_pid;

static void *watch_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct arena_hdr *h = cl.arena;
	char b;
	ssize_t n;
	do
		n = syscall(SYS_recvfrom, fd, &b, 1, 0, NULL, NULL);
	while (n < 0 && errno == EINTR);
	/* the hub never writes here: whatever ended the wait is its end */
	atomic_store(&h->hub_dead, 1);
	for (uint32_t i = 0; i < h->nslots && i < ARENA_MAX_SLOTS; i++) {
		struct arena_slot *s = arena_slot(cl.arena, i);
		atomic_fetch_add(&s->wake_seq, 1);
		sys_futex(&s->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
	}
	sys_close(fd);
	return NULL;
}

void cl_watch(void)
{
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;
	pid_t me = getpid();
	int fd;
	if (watch_pid == me || cl.attached <= 0 || cl_hub_dead())
		return;
	pthread_mutex_lock(&attach_lock);
	if (watch_pid != me && (fd = cl_hub_connect()) >= 0) {
		/* the application's signals never land on this thread */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64 << 10);
		if (pthread_create(&t, &a, watch_main, (void *)(intptr_t)fd) == 0)
			watch_pid = me;
		else
			sys_close(fd);
		pthread_attr_destroy(&a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&attach_lock);
}

/* ---- exec ----
 * Before exec, a new connection to the hub is made exactly as for fork
 * (MSG_FORK: it holds every socket of this process), the sockets that do
 * not survive the exec (close-on-exec) are released on it, and it is left
 * open across the exec; the new program names itself on it (MSG_EXECED)
 * and maps the pool again.  When exec fails, closing it undoes all. */
int cl_exec_begin(const uint32_t *slots, const uint32_t *gens, int ndrop)
{
	struct msg_req q = {.op = MSG_FORK};
	struct msg_rep r;
	int fd;
	if (cl.attached <= 0 || cl_hub_dead())
		return -1;
	q.token = cl.token;
	q.pid = getpid();
	fd = cl_hub_connect();
	if (fd < 0)
		return -1;
	if (rpc_on(fd, &q, &r, -1, NULL, 0) < 0 || r.status)
		goto fail;
	for (int i = 0; i < ndrop; i++) {
		struct msg_req d = {.op = MSG_RELEASE, .slot = slots[i], .gen = gens[i]};
		if (rpc_on(fd, &d, &r, -1, NULL, 0) < 0)
			goto fail;
	}
	if (sys_fcntl(fd, F_SETFD, 0) < 0)
		goto fail;
	return fd;
fail:
	sys_close(fd);
	return -1;
}

int cl_exec_adopt(int fd)
{
	struct msg_req q = {.op = MSG_EXECED, .pid = getpid()};
	struct msg_rep r;
	int fds[2];
	sys_fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (rpc_on(fd, &q, &r, -1, fds, 2) < 0 || r.status || fds[0] < 0 || fds[1] < 0 ||
	    map_pool(&r, fds) < 0) {
		sys_close(fd);
		cl.attached = -1;
		return -1;
	}
	cl.ctl_fd = fd;
	cl.attached = 1;
	return 0;
}

void cl_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
