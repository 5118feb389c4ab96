/*
 * handover.c - a process's sockets across fork and exec, and the watch on
 * its hub.
 *
 * Before a fork, the prepare handler opens a fresh connection and tells
 * the hub (MSG_FORK), which pins the parent's sockets for the child; the
 * child takes that connection as its own and names its pid (MSG_CHILD);
 * the same for each other pool it belongs to (client.h).  So the hub knows
 * every process, even one that dies before it touches a socket.  Exec
 * works the same way with a connection left open across it
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

static int fork_fd[CL_POOLS] = {-1, -1, -1, -1};
static uint64_t fork_token[CL_POOLS];

/* A connection made by MSG_FORK in pool K's name, holding what this
 * process holds there (its token in *token); -errno */
static int fork_conn(uint32_t k, uint64_t *token)
{
	struct msg_req q = {.op = MSG_FORK, .token = cl.p[k].token, .pid = getpid()};
	struct msg_rep r;
	int fd = cl_hub_connect(), ret;
	if (fd < 0)
		return fd;
	ret = cl_rpc_on(fd, &q, &r, -1, NULL, 0);
	if (!ret && r.status)
		ret = r.status < 0 ? r.status : -EPROTO;
	if (ret < 0) {
		sys_close(fd);
		return ret;
	}
	*token = r.token;
	return fd;
}

/* From the prepare to the parent's or child's end the thread holds the
 * requests' lock, its signal handlers put off (vsock_sig.c): one that
 * closed a socket there would wait for ever on it. */
static void fork_prepare(void)
{
	for (uint32_t k = 0; k < CL_POOLS; k++)
		fork_fd[k] = -1;
	vs_sig_hold_begin();
	vs_segs_lock();
	pthread_mutex_lock(&cl_attach_lock);
	pthread_mutex_lock(&cl_rpc_lock);
	if (cl.attached <= 0)
		return;
	/* where one fails, the child finds no connection (ctl_fd -1) */
	for (uint32_t k = 0; k < CL_POOLS; k++)
		if (cl.p[k].arena && (fork_fd[k] = fork_conn(k, &fork_token[k])) < 0)
			fork_fd[k] = -1;
}

static void fork_parent(void)
{
	for (uint32_t k = 0; k < CL_POOLS; k++) {
		if (fork_fd[k] >= 0)
			sys_close(fork_fd[k]);
		fork_fd[k] = -1;
	}
	pthread_mutex_unlock(&cl_rpc_lock);
	pthread_mutex_unlock(&cl_attach_lock);
	vs_segs_unlock();
	vs_sig_hold_end();
}

static void fork_child(void)
{
	vs_fork_child();
	cl_cells_forget();
	cl.pid = getpid();
	for (uint32_t k = 0; k < CL_POOLS && cl.attached > 0; k++) {
		struct msg_req q = {.op = MSG_CHILD, .pid = getpid()};
		if (!cl.p[k].arena)
			continue;
		sys_close(cl.p[k].ctl_fd);
		cl.p[k].ctl_fd = fork_fd[k];
		cl.p[k].token = fork_token[k];
		if (fork_fd[k] >= 0)
			cl_rpc_on(fork_fd[k], &q, NULL, -1, NULL, 0);
	}
	for (uint32_t k = 0; k < CL_POOLS; k++)
		fork_fd[k] = -1;
	/* this thread took them in fork_prepare */
	pthread_mutex_unlock(&cl_rpc_lock);
	pthread_mutex_unlock(&cl_attach_lock);
	vs_segs_unlock();
	vs_sig_nlater = 0; /* the parent's: a child starts with no signal pending */
	vs_sig_hold_end();
}

static _Atomic pid_t watch_pid;
static _Atomic int watch_fd = -1;

static void *watch_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char b;
	ssize_t n;
	do
		n = syscall(SYS_recvfrom, fd, &b, 1, 0, NULL, NULL);
	while (n < 0 && errno == EINTR);
	/* the hub never writes here: whatever ended the wait is its end */
	atomic_store(&watch_fd, -1);
	for (uint32_t k = 0; k < CL_POOLS; k++)
		if (cl.p[k].arena)
			atomic_store(&((struct arena_hdr *)cl.p[k].arena)->hub_dead, 1);
	for (uint32_t i = cl_slot_at(0); i < CL_SLOTS; i = cl_slot_at(i + 1)) {
		arena_wake_all(cl_slot(i));
	}
	sys_close(fd);
	return NULL;
}

int cl_watch(void)
{
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;
	pid_t me;
	int fd = 0;
	/* cl.pid: getpid() is a system call, and every wait comes here */
	if (watch_pid == cl.pid || cl.attached <= 0 || cl_hub_dead())
		return 0;
	me = getpid();
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
	return fd == -EINTR ? -EINTR : 0;
}

/* ---- exec ----
 * Before exec, a new connection to the hub is made exactly as for fork
 * (MSG_FORK: it holds every socket of this process), the sockets that do
 * not survive the exec (close-on-exec) are released on it, and it is left
 * open across the exec; the new program names itself on it (MSG_EXECED)
 * and maps the pool again.  When exec fails, closing it undoes all. */
int cl_exec_begin(uint32_t k, const uint32_t *slots, const uint32_t *gens, int ndrop)
{
	struct msg_rep r;
	uint64_t token;
	int fd, ret = 0;
	if (cl.attached <= 0 || cl_hub_dead() || k >= CL_POOLS || !cl.p[k].arena)
		return -ENOTCONN;
	fd = fork_conn(k, &token);
	if (fd < 0)
		return fd;
	for (int i = 0; i < ndrop && !ret; i++) {
		struct msg_req d = {.op = MSG_RELEASE, .slot = slots[i] & CL_SLOT_MASK, .gen = gens[i]};
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

int cl_exec_adopt(uint32_t k, int fd)
{
	struct msg_req q = {.op = MSG_EXECED, .pid = getpid()};
	struct msg_rep r;
	int fds[2], ret;
	sys_fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (k >= CL_POOLS || cl.p[k].arena || (k && cl.attached <= 0))
		ret = -EINVAL; /* pool 0 first, each once */
	else
		ret = cl_rpc_on(fd, &q, &r, -1, fds, 2);
	if (!ret && (r.status || fds[0] < 0 || fds[1] < 0))
		ret = r.status < 0 ? r.status : -EPROTO;
	if (!ret)
		ret = cl_map_pool(k, &r, fds);
	if (ret < 0) {
		sys_close(fd);
		if (k == 0)
			cl.attached = -1;
		return ret;
	}
	cl.p[k].ctl_fd = fd;
	if (k == 0)
		cl.attached = 1;
	return 0;
}

/* ---- descriptors passed over a unix socket ----
 * The sender asks for a token to send in its descriptor's place; the
 * receiver shows the hub the token's name and gets the descriptor back
 * (core/hub/pass.c).  A process that has no pool yet joins the socket's
 * on a connection of its own, which becomes its connection to the hub;
 * one in another pool joins the socket's as one more of its pools
 * (client.h), on one more connection, when it has room. */
int cl_pass(uint32_t slot, uint32_t gen, int fd)
{
	struct msg_req q = {.op = MSG_PASS, .slot = slot, .gen = gen};
	struct msg_rep r;
	int t = -1, ret;
	if (cl.attached <= 0 || cl_hub_dead())
		return -ENOTCONN;
	ret = cl_rpc_fds(&q, &r, fd, &t, 1);
	if (!ret && (r.status || t < 0)) {
		if (t >= 0)
			sys_close(t);
		ret = r.status < 0 ? r.status : -EPROTO;
	}
	return ret < 0 ? ret : t;
}

/* ADOPT on pool K's connection FD, which joins the socket's pool when it
 * is new (FRESH); the rpc lock held.  0 (A filled in) or -errno; R: the
 * reply, whose pool_id names the socket's pool on -EXDEV. */
static int adopt_on(uint32_t k, int fd, int fresh, struct msg_req *q, int lfd, struct msg_rep *r,
		    struct cl_adopted *a)
{
	int fds[4] = {-1, -1, -1, -1}, ret, e = 1;
	r->pool_id = 0;
	ret = cl_rpc_on(fd, q, r, lfd, fds, 4);
	if (!ret && (r->status || fds[0] < 0))
		ret = r->status < 0 ? r->status : -EPROTO;
	if (!ret && fresh != !!(r->flags & MSG_ADOPT_JOINED))
		ret = -EPROTO;
	if (!ret && fresh) {
		ret = cl_map_pool(k, r, fds + 1);
		fds[1] = fds[2] = -1;
		e = 3;
		if (!ret)
			cl.p[k].ctl_fd = fd;
	}
	if (ret < 0) {
		for (int i = 0; i < 4; i++)
			if (fds[i] >= 0)
				sys_close(fds[i]);
		return ret;
	}
	a->slot = (r->slot & CL_SLOT_MASK) | k << CL_POOL_SHIFT;
	a->gen = r->gen;
	a->listener = !!(r->flags & MSG_ADOPT_LISTENER);
	a->fd = fds[0];
	a->evfd = a->listener ? cl_hi_fd(fds[e]) : -1;
	vs_ref(a->slot);
	return 0;
}

/* the same on a new connection, as pool K */
static int adopt_new(uint32_t k, struct msg_req *q, int lfd, struct msg_rep *r, struct cl_adopted *a)
{
	int fd = cl_hub_connect(), ret;
	if (fd < 0)
		return fd;
	ret = adopt_on(k, fd, 1, q, lfd, r, a);
	if (ret < 0)
		sys_close(fd);
	return ret;
}

int cl_adopt(uint32_t id, uint64_t secret, int lfd, struct cl_adopted *a)
{
	struct msg_req q = {.op = MSG_ADOPT, .slot = id, .token = secret, .arg = lfd >= 0};
	struct msg_rep r;
	uint32_t k;
	int ret;
	if (cl.attached < 0 || cl.kernel_only || cl_hub_dead())
		return -ENOTCONN;
	pthread_mutex_lock(&cl_attach_lock);
	pthread_mutex_lock(&cl_rpc_lock);
	if (cl.attached <= 0) {
		ret = adopt_new(0, &q, lfd, &r, a);
		if (!ret)
			cl.attached = 1;
	} else if ((ret = adopt_on(0, cl.p[0].ctl_fd, 0, &q, lfd, &r, a)) == -EXDEV && r.pool_id) {
		/* the socket is another pool's: one this process is in, or
		 * one it joins where it has room (else EXDEV stays) */
		for (k = 1; k < CL_POOLS && !(cl.p[k].arena && cl.p[k].id == r.pool_id); k++)
			;
		if (k < CL_POOLS) {
			ret = adopt_on(k, cl.p[k].ctl_fd, 0, &q, lfd, &r, a);
		} else {
			for (k = 1; k < CL_POOLS && cl.p[k].arena; k++)
				;
			if (k < CL_POOLS)
				ret = adopt_new(k, &q, lfd, &r, a);
		}
	}
	pthread_mutex_unlock(&cl_rpc_lock);
	pthread_mutex_unlock(&cl_attach_lock);
	return ret;
}

int cl_own_fds(int *out, int max)
{
	int n = 0, v[1 + 3 * CL_POOLS], nv = 0;
	v[nv++] = atomic_load(&watch_fd);
	for (uint32_t k = 0; k < CL_POOLS; k++) {
		v[nv++] = cl.p[k].ctl_fd;
		v[nv++] = cl.p[k].evfd;
		v[nv++] = fork_fd[k];
	}
	for (int i = 0; i < nv && n < max; i++)
		if (v[i] >= 0)
			out[n++] = v[i];
	return n + vs_own_fds(out + n, max - n);
}

void cl_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
