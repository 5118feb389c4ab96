/*
 * handover.c - a process's sockets across fork and exec, and the watch on
 * its hub.
 *
 * Before a fork, the prepare handler opens a fresh connection and tells
 * the hub (MSG_FORK), which pins the parent's sockets for the child; the
 * child takes that connection as its own and names its pid (MSG_CHILD).
 * So the hub knows every process, even one that dies before it touches a
 * socket.  Exec works the same way with a connection left open across it
 * (cl_exec_begin, cl_exec_adopt).  A descriptor passed over a unix
 * socket goes as a token the hub gives (cl_pass, cl_adopt).  The watch is
 * a thread blocked on one more connection to the hub: when that ends, the
 * hub is gone.
 */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "sys.h"

static int fork_fd = -1;
static uint64_t fork_token;

static void fork_prepare(void)
{
	struct msg_req q = {.op = MSG_FORK};
	struct msg_rep r;
	fork_fd = -1;
	pthread_mutex_lock(&cl_attach_lock);
	pthread_mutex_lock(&cl_rpc_lock);
	if (cl.attached <= 0)
		return;
	q.token = cl.token;
	q.pid = getpid();
	fork_fd = cl_hub_connect();
	if (fork_fd < 0)
		fork_fd = -1; /* the child finds no connection (cl.ctl_fd -1) */
	if (fork_fd >= 0 && (cl_rpc_on(fork_fd, &q, &r, -1, NULL, 0) < 0 || r.status)) {
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
	pthread_mutex_unlock(&cl_rpc_lock);
	pthread_mutex_unlock(&cl_attach_lock);
}

static void fork_child(void)
{
	vs_fork_child();
	cl.pid = getpid();
	if (cl.attached > 0) {
		struct msg_req q = {.op = MSG_CHILD, .pid = getpid()};
		sys_close(cl.ctl_fd);
		cl.ctl_fd = fork_fd;
		cl.token = fork_token;
		if (fork_fd >= 0)
			cl_rpc_on(fork_fd, &q, NULL, -1, NULL, 0);
	}
	fork_fd = -1;
	/* this thread took them in fork_prepare */
	pthread_mutex_unlock(&cl_rpc_lock);
	pthread_mutex_unlock(&cl_attach_lock);
}

static _Atomic pid_t watch_pid;
static _Atomic int watch_fd = -1;

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
	atomic_store(&watch_fd, -1);
	atomic_store(&h->hub_dead, 1);
	for (uint32_t i = 0, n = cl_slots_hi(); i < n; i++) {
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
	pthread_mutex_lock(&cl_attach_lock);
	if (watch_pid != me && (fd = cl_hub_connect()) >= 0) {
		/* the application's signals never land on this thread */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 64 << 10);
		atomic_store(&watch_fd, fd);
		if (pthread_create(&t, &a, watch_main, (void *)(intptr_t)fd) == 0) {
			watch_pid = me;
		} else {
			atomic_store(&watch_fd, -1);
			sys_close(fd);
		}
		pthread_attr_destroy(&a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&cl_attach_lock);
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
	int fd, ret;
	if (cl.attached <= 0 || cl_hub_dead())
		return -ENOTCONN;
	q.token = cl.token;
	q.pid = getpid();
	fd = cl_hub_connect();
	if (fd < 0)
		return fd;
	ret = cl_rpc_on(fd, &q, &r, -1, NULL, 0);
	if (!ret && r.status)
		ret = r.status < 0 ? r.status : -EPROTO;
	for (int i = 0; i < ndrop && !ret; i++) {
		struct msg_req d = {.op = MSG_RELEASE, .slot = slots[i], .gen = gens[i]};
		ret = cl_rpc_on(fd, &d, &r, -1, NULL, 0);
	}
	if (!ret && sys_fcntl(fd, F_SETFD, 0) < 0)
		ret = -errno;
	if (ret < 0) {
		sys_close(fd);
		return ret;
	}
	return fd;
}

int cl_exec_adopt(int fd)
{
	struct msg_req q = {.op = MSG_EXECED, .pid = getpid()};
	struct msg_rep r;
	int fds[2], ret;
	sys_fcntl(fd, F_SETFD, FD_CLOEXEC);
	ret = cl_rpc_on(fd, &q, &r, -1, fds, 2);
	if (!ret && (r.status || fds[0] < 0 || fds[1] < 0))
		ret = r.status < 0 ? r.status : -EPROTO;
	if (!ret)
		ret = cl_map_pool(&r, fds);
	if (ret < 0) {
		sys_close(fd);
		cl.attached = -1;
		return ret;
	}
	cl.ctl_fd = fd;
	cl.attached = 1;
	return 0;
}

/* ---- descriptors passed over a unix socket ----
 * The sender asks for a token to send in its descriptor's place; the
 * receiver shows the hub the token's name and gets the descriptor back
 * (core/hub/pass.c).  A process that has no pool yet joins the socket's
 * on a connection of its own, which becomes its connection to the hub. */
int cl_pass(uint32_t slot, uint32_t gen, int fd)
{
	struct msg_req q = {.op = MSG_PASS, .slot = slot, .gen = gen};
	struct msg_rep r;
	int t = -1, ret;
	if (cl.attached <= 0 || cl_hub_dead())
		return -ENOTCONN;
	pthread_mutex_lock(&cl_rpc_lock);
	ret = cl.ctl_fd >= 0 ? cl_rpc_on(cl.ctl_fd, &q, &r, fd, &t, 1) : -ECONNRESET;
	pthread_mutex_unlock(&cl_rpc_lock);
	if (!ret && (r.status || t < 0)) {
		if (t >= 0)
			sys_close(t);
		ret = r.status < 0 ? r.status : -EPROTO;
	}
	return ret < 0 ? ret : t;
}

int cl_adopt(uint32_t id, uint64_t secret, int lfd, struct cl_adopted *a)
{
	struct msg_req q = {.op = MSG_ADOPT, .slot = id, .token = secret, .arg = lfd >= 0};
	struct msg_rep r;
	int fds[4] = {-1, -1, -1, -1}, fd = -1, ret, k = 1;
	if (cl.attached < 0 || cl.kernel_only || cl_hub_dead())
		return -ENOTCONN;
	pthread_mutex_lock(&cl_attach_lock);
	pthread_mutex_lock(&cl_rpc_lock);
	if (cl.attached > 0)
		ret = cl_rpc_on(cl.ctl_fd, &q, &r, lfd, fds, 4);
	else if ((fd = cl_hub_connect()) < 0)
		ret = fd;
	else
		ret = cl_rpc_on(fd, &q, &r, lfd, fds, 4);
	if (!ret && (r.status || fds[0] < 0))
		ret = r.status < 0 ? r.status : -EPROTO;
	if (!ret && (r.flags & MSG_ADOPT_JOINED) && fd >= 0) {
		ret = cl_map_pool(&r, fds + 1);
		fds[1] = fds[2] = -1;
		k = 3;
		if (!ret) {
			cl.ctl_fd = fd;
			cl.attached = 1;
			fd = -1;
		}
	}
	if (!ret) {
		a->slot = r.slot;
		a->gen = r.gen;
		a->listener = !!(r.flags & MSG_ADOPT_LISTENER);
		a->fd = fds[0];
		a->evfd = a->listener ? cl_hi_fd(fds[k]) : -1;
		vs_ref(r.slot);
	} else {
		for (int i = 0; i < 4; i++)
			if (fds[i] >= 0)
				sys_close(fds[i]);
	}
	if (fd >= 0)
		sys_close(fd);
	pthread_mutex_unlock(&cl_rpc_lock);
	pthread_mutex_unlock(&cl_attach_lock);
	return ret;
}

int cl_own_fds(int *out, int max)
{
	int n = 0, v[] = {cl.ctl_fd, cl.evfd, atomic_load(&watch_fd), fork_fd};
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]) && n < max; i++)
		if (v[i] >= 0)
			out[n++] = v[i];
	return n + vs_own_fds(out + n, max - n);
}

void cl_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
