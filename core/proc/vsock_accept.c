/*
 * vsock_accept.c - how the threads of a process wait in a blocking accept
 * on an rshare listener: one polls, the others sleep, as the kernel wakes
 * one thread blocked in accept for a connection.
 *
 * A blocking accept (preload/socket.c) takes from the hub's accept queue,
 * else from the kernel listener, and waits for either in poll(2) on the
 * kernel listener and the listener's eventfd, which the hub writes for
 * every connection it admits.  Every thread asleep in that poll would
 * wake for every connection, and all but one find nothing (a pool of 8
 * threads blocked in accept on one node made 10,600 to 13,400
 * connections a second where kernel TCP made 13,100 to 25,500).  So in
 * each process one thread of a listener leads: it polls; the others
 * follow: each sleeps on the process's word for that listener
 * (vs_accept_follow), and the leader, as it leaves accept with a
 * connection (or an error), hands the lead to one of them
 * (vs_accept_leave; also when it is cancelled in accept).
 * A follower also wakes every ACC_LOOK_MS to look at the queues itself
 * and at whether the leader's thread is still there (one that jumped out
 * of its poll and ended keeps the lead: the first follower to find it
 * gone takes it).  Its sleep ends with EINTR for a signal's handler as
 * the poll's does, and is a cancellation point, as accept(2) is.
 * Listeners beyond ACC_LISTENERS a process waits on, all its threads
 * poll, as before.
 *
 * The processes of a pre-fork pool that hold one listener each have a
 * leader, and the poll of every one of them would wake for every
 * connection (8 processes blocked in accept made 0.6x kernel TCP's
 * connections a second).  So where another process holds the listener
 * (the slot's holders), the leader sleeps in an epoll set of its
 * process's own, made the first time, that holds the kernel listener and
 * the eventfd with EPOLLEXCLUSIVE (vs_accept_wait): each write of the
 * eventfd wakes one process's leader, as the kernel wakes one process
 * blocked in accept; one that finds more waiting after its accept writes
 * the eventfd again (preload/socket.c), which wakes the next; and a set
 * that woke goes back to the end of the queues (acc_requeue), so that the
 * connections go round the processes.  A shutdown of the listener wakes
 * them all through the kernel listener, which the kernel wakes all at.
 * A process back in accept right after serving would take the
 * connection whose wake-up went to another before that one ran, and keep
 * doing so (8 processes, 400 connections one at a time: one took 257 in
 * some runs).  So a process asleep there counts itself in the listener's
 * acc_sleepers (its request cell names the listener meanwhile, so that
 * the hub counts out one that ends asleep; a handler that runs on the
 * sleeping thread counts it out first, vs_accept_sig, so that one that
 * leaves with siglongjmp leaves the count right), and one back in a blocking
 * accept that finds a connection waiting while some sleep leaves it to
 * them for up to ACC_DEFER_NS (vs_accept_defer), until the count of
 * waiting connections drops, as the kernel's queue of waiters hands it to
 * the one that waited longest; then it takes it.
 * The set is one more descriptor at a high number, kept from the
 * program's close and close_range as the library's others; a forked child
 * closes the sets it shares with its parent and makes its own, and the
 * process's last close of the listener closes its set.
 *
 * Before it sleeps, a thread back in accept for its next connection polls
 * the listener for a while (vs_accept_spin), as a recv polls its ring: a
 * server that accepts in a loop (and serves each connection itself, or
 * hands it to a new thread or child) is back before its next client
 * connects, and finds it without a wake-up.  Only while no other thread
 * of its process waits on the listener and no other process holds it
 * (the slot's holders: a pre-fork pool's processes sleep in their epoll
 * sets, one woken a connection, and the poll of one of them gained
 * nothing there when every one of them woke), and one thread at a time
 * (the entry's spinning field; a thread that jumps out of its poll with a
 * handler leaves it set, and that listener's accepts in the process then
 * sleep at once): the idle threads of a pool would only take the
 * processors that the one that serves, the hub and the clients need.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

#include "client_int.h"
#include "vsock_int.h"

#define ACC_LISTENERS 32
#define ACC_LOOK_MS 250
#define ACC_DEFER_NS 100000ull

struct acc {
	_Atomic uint64_t key;       /* the listener: 1 << 63 | gen << 32 | slot; 0: free */
	_Atomic int32_t leader;     /* the thread that polls (its tid), 0: none */
	_Atomic uint32_t word;      /* the followers' futex word, bumped by a hand-off */
	_Atomic uint32_t followers; /* threads asleep on it */
	_Atomic uint32_t spinning;  /* a thread polls the listener before it sleeps */
	_Atomic int ep;             /* the leader's epoll set + 1, 0: none (vs_accept_wait) */
	int ep_kfd, ep_evfd;        /* ... made with this kernel listener and eventfd */
};
static struct acc acc_tab[ACC_LISTENERS];
static __thread struct acc *acc_led __attribute__((tls_model("initial-exec")));

/* A's epoll set, if it has one, closed (vs_accept_wait). */
static void acc_set_close(struct acc *a)
{
	int ep = atomic_exchange(&a->ep, 0) - 1;
	if (ep >= 0)
		sys_close(ep);
}

static pid_t acc_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* This process's entry for the listener, made the first time; NULL when
 * the table is full.  An entry nobody leads or follows, of a slot that
 * has been given another generation since (its listener closed), is
 * taken again. */
static struct acc *acc_of(uint32_t slot, uint32_t gen)
{
	uint64_t key = 1ull << 63 | (uint64_t)gen << 32 | slot;
	for (int i = 0; i < ACC_LISTENERS; i++)
		if (atomic_load(&acc_tab[i].key) == key)
			return &acc_tab[i];
	for (int i = 0; i < ACC_LISTENERS; i++) {
		struct acc *a = &acc_tab[i];
		uint64_t old = atomic_load(&a->key);
		if (old && (atomic_load(&a->leader) || atomic_load(&a->followers) ||
			    ((cl_slot((uint32_t)old)->gen ^ (uint32_t)(old >> 32)) & 0x7fffffffu) == 0))
			continue;
		if (atomic_compare_exchange_strong(&a->key, &old, key)) {
			acc_set_close(a); /* the set of the listener before */
			return a;
		}
	}
	return NULL;
}

int vs_accept_spin(uint32_t slot, uint32_t gen, uint32_t seq)
{
	struct arena_slot *as = cl_slot(slot);
	struct acc *a = acc_of(slot, gen);
	int r;
	if (!a || atomic_load(&a->leader) || atomic_load(&a->followers) || atomic_load(&as->holders) > 1 ||
	    atomic_exchange(&a->spinning, 1))
		return 0;
	r = vs_spin_ring(&as->wake_seq, seq, NULL, 0, NULL);
	atomic_store(&a->spinning, 0);
	return r;
}

static void follow_cancelled(void *arg)
{
	atomic_fetch_sub((_Atomic uint32_t *)arg, 1);
}

/* A follower's sleep on A's word while it is still W, until TS: 0 woken,
 * or -errno.  As the kernel's accept, a cancellation point: cancelled
 * asleep (asynchronously, as glibc's own cancellation points are), the
 * thread is counted out. */
static long follow_sleep(struct acc *a, uint32_t w, const struct timespec *ts)
{
	long r;
	int type;
	atomic_fetch_add(&a->followers, 1);
	pthread_cleanup_push(follow_cancelled, &a->followers);
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &type);
	r = sys_futex(&a->word, FUTEX_WAIT, w, ts);
	r = r < 0 ? -errno : 0;
	pthread_setcanceltype(type, NULL);
	pthread_cleanup_pop(0);
	atomic_fetch_sub(&a->followers, 1);
	return r;
}

int vs_accept_follow(uint32_t slot, uint32_t gen, int64_t ms)
{
	struct acc *a;
	struct timespec ts;
	uint32_t w;
	int32_t none = 0, lead;
	long r;
	if (acc_led || !(a = acc_of(slot, gen)))
		return 1;
	w = atomic_load(&a->word); /* before the try: a hand-off after it ends the sleep */
	if (atomic_compare_exchange_strong(&a->leader, &none, acc_tid())) {
		acc_led = a;
		return 1;
	}
	if (ms < 0 || ms > ACC_LOOK_MS)
		ms = ACC_LOOK_MS;
	ts = (struct timespec){ms / 1000, ms % 1000 * 1000000L};
	r = follow_sleep(a, w, &ts);
	if (r == -EINTR)
		return -EINTR;
	/* a leader whose thread is gone (cancelled, or its thread ended in
	 * a jump out of the poll) is replaced */
	lead = atomic_load(&a->leader);
	if (r == -ETIMEDOUT && lead && syscall(SYS_tgkill, getpid(), lead, 0) < 0 &&
	    errno == ESRCH)
		atomic_compare_exchange_strong(&a->leader, &lead, 0);
	return 0;
}

void vs_accept_leave(void)
{
	struct acc *a = acc_led;
	if (!a)
		return;
	acc_led = NULL;
	atomic_store(&a->leader, 0);
	atomic_fetch_add(&a->word, 1);
	if (atomic_load(&a->followers))
		sys_futex(&a->word, FUTEX_WAKE, 1, NULL);
}

/* fd into set ep, exclusively, at the end of fd's queue (with DEL, taken
 * out of it first); 0 or -1 */
static int acc_add(int ep, int fd, int del)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE};
	if (del)
		syscall(SYS_epoll_ctl, ep, EPOLL_CTL_DEL, fd, NULL);
	return syscall(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -1 : 0;
}

/* A's epoll set, made with kernel listener kfd and eventfd evfd the first
 * time (again where the descriptors are others now: a dup); -1 where it
 * cannot be made. */
static int acc_epoll(struct acc *a, int kfd, int evfd)
{
	int ep = atomic_load(&a->ep) - 1;
	if (ep >= 0 && a->ep_kfd == kfd && a->ep_evfd == evfd)
		return ep;
	acc_set_close(a);
	ep = cl_hi_fd((int)syscall(SYS_epoll_create1, EPOLL_CLOEXEC));
	if (ep < 0)
		return -1;
	if (acc_add(ep, evfd, 0) < 0 || acc_add(ep, kfd, 0) < 0) {
		sys_close(ep);
		return -1;
	}
	a->ep_kfd = kfd;
	a->ep_evfd = evfd;
	atomic_store(&a->ep, ep + 1);
	return ep;
}

/* An exclusive wake-up goes to the first set in the file's queue that has
 * a sleeper, and a set stays where it was added: the process whose set is
 * first would take every connection while it sleeps in time.  The kernel
 * queues a process blocked in accept anew at each wait, behind the others,
 * so that a pool's connections go round its processes; so a set that woke
 * is taken out of both queues and put back at their ends.  A wake-up
 * meanwhile goes to another process, or, the eventfd or kernel listener
 * still readable, finds the set ready when it is added again. */
static void acc_requeue(struct acc *a, int ep)
{
	if (acc_add(ep, a->ep_evfd, 1) < 0 || acc_add(ep, a->ep_kfd, 1) < 0)
		acc_set_close(a); /* the leader polls from now on */
}

/* The process, asleep in accept on listener AS, counted in its sleepers
 * with its cell C naming it (C NULL: not counted), and no longer so */
struct acc_sleep {
	struct arena_cell *c;
	struct arena_slot *as;
};

static void acc_sleep_begin(struct acc_sleep *z, uint32_t slot)
{
	uint32_t none = 0;
	z->as = cl_slot(slot);
	z->c = cl_cell(slot >> CL_POOL_SHIFT);
	if (z->c && !atomic_compare_exchange_strong(&z->c->acc_sleep, &none, (slot & CL_SLOT_MASK) + 1))
		z->c = NULL; /* another listener's sleep of this process counts */
	if (z->c)
		atomic_fetch_add(&z->as->acc_sleepers, 1);
}

static void acc_sleep_end(void *arg)
{
	struct acc_sleep *z = arg;
	if (z->c && atomic_exchange(&z->c->acc_sleep, 0))
		count_down(&z->as->acc_sleepers);
}

/* The thread's sleep in acc_sleep, while it is there: a handler that runs
 * meanwhile takes it out of the count first (vs_accept_sig) */
static __thread struct acc_sleep *acc_asleep __attribute__((tls_model("initial-exec")));

/* the sleep's end: at its return, its cancellation's cleanup, or a handler */
static void acc_wake(void *arg)
{
	acc_asleep = NULL;
	acc_sleep_end(arg);
}

void vs_accept_sig(void)
{
	struct acc_sleep *z = acc_asleep;
	if (z)
		acc_wake(z);
}

void vs_accept_defer(uint32_t slot)
{
	struct arena_slot *as = cl_slot(slot);
	uint32_t q = atomic_load(&as->acceptq);
	uint64_t end = 0;
	if (!q || atomic_load(&as->holders) <= 1 || !atomic_load(&as->acc_sleepers))
		return;
	for (unsigned i = 1; atomic_load(&as->acceptq) >= q; i++) {
		if (i & 63) {
			cpu_relax();
			continue;
		}
		if (!end)
			end = sys_now_ns() + ACC_DEFER_NS;
		else if (sys_now_ns() >= end || cl_hub_dead())
			return;
		sched_yield();
	}
}

/* epoll_pwait on set EP for at most MS: a cancellation point, as
 * accept(2) is (the caller's cleanup passes the lead on); asleep, the
 * process is counted in listener SLOT's sleepers */
static long acc_sleep(uint32_t slot, int ep, int ms)
{
	struct epoll_event ev[2];
	struct acc_sleep z;
	int type;
	long r;
	acc_sleep_begin(&z, slot);
	pthread_cleanup_push(acc_wake, &z);
	acc_asleep = &z;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &type);
	r = syscall(SYS_epoll_pwait, ep, ev, 2, ms, NULL, 8);
	r = r < 0 ? -errno : r;
	pthread_setcanceltype(type, NULL);
	pthread_cleanup_pop(1);
	return r;
}

int vs_accept_wait(uint32_t slot, int kfd, int evfd, int ms)
{
	struct acc *a = acc_led;
	int ep;
	long r;
	if (!a || (uint32_t)atomic_load(&a->key) != slot || atomic_load(&cl_slot(slot)->holders) <= 1 ||
	    (ep = acc_epoll(a, kfd, evfd)) < 0)
		return -ENOSYS;
	r = acc_sleep(slot, ep, ms);
	if (r > 0)
		acc_requeue(a, ep);
	if (r >= 0 || r == -EINTR)
		return (int)r;
	/* the set is not what it was (a dup2 over its number): poll */
	atomic_store(&a->ep, 0);
	return -ENOSYS;
}

void vs_accept_forget(uint32_t slot, uint32_t gen)
{
	uint64_t key = 1ull << 63 | (uint64_t)gen << 32 | slot;
	for (int i = 0; i < ACC_LISTENERS; i++) {
		struct acc *a = &acc_tab[i];
		if (atomic_load(&a->key) == key && !atomic_load(&a->leader) && !atomic_load(&a->followers))
			acc_set_close(a);
	}
}

int vs_accept_own_fds(int *out, int max)
{
	int n = 0;
	for (int i = 0; i < ACC_LISTENERS && n < max; i++) {
		int ep = atomic_load(&acc_tab[i].ep) - 1;
		if (ep >= 0)
			out[n++] = ep;
	}
	return n;
}

/* The parent's other threads are not in the child: their leads go, and
 * the epoll sets, which the child shares with its parent, are closed (the
 * child makes its own). */
void vs_accept_fork_child(void)
{
	for (int i = 0; i < ACC_LISTENERS; i++) {
		struct acc *a = &acc_tab[i];
		acc_set_close(a);
		if (a != acc_led)
			atomic_store(&a->leader, 0);
		atomic_store(&a->followers, 0);
		atomic_store(&a->spinning, 0);
	}
}
