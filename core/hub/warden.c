/*
 * warden.c - a hub that dies is succeeded: rshared's main process keeps
 * the hub's records and descriptors and starts a new hub on them.
 *
 * Once set up, rshared clone()s the process that runs the hub's loop with
 * CLONE_VM | CLONE_FILES: the hub's memory (its records, the arenas it
 * maps) and its descriptor table (every process's connection to the hub,
 * the watches among them, arenas, readiness pairs, listeners, links)
 * belong to both processes, so they outlive the hub.  The first process,
 * the warden, runs no hub code while the hub lives: it waits for it and
 * passes on the signals it is sent.  When the hub ends:
 *  - it stopped (SIGTERM, exit 0): the warden exits 0;
 *  - it handed the node over (restart.c): the warden executes the new
 *    program on the image the hub left, in its own process, so that
 *    rshared's pid stays the same across restarts too;
 *  - it died (SIGKILL, a crash): the warden takes the records as they are
 *    (warden_succeed): every link is dropped as lost, so that each of its
 *    connections waits and resumes from both sides' ring counters
 *    (resume.c) whatever the hub was doing with it (a ring position it
 *    counted but did not show is shown; bytes it sent but did not count
 *    are taken as sent when the peer has them); a request the hub had
 *    read but not answered (from a connection, or a request cell: cell.c) is
 *    answered EINTR; every socket's bell is rung
 *    (what the hub had taken from the bells and not done yet is done) and
 *    the waiters with something to take are woken; then a new hub process
 *    goes on with the same records.
 *    The processes see a pause: their connections to the hub never ended.
 * A hub that dies within WARDEN_CRASHLOOP_MS of being started that way,
 * WARDEN_CRASHLOOP_N times in a row, is not started again (its records
 * may be what kills it): the warden exits 1, and the node's connections are reset as at any hub's
 * end.  So is a succession that takes longer than WARDEN_SUCCEED_S (the
 * hub may have died holding a lock of the C library's: SIGALRM ends it).
 * The warden's death ends the hub (PR_SET_PDEATHSIG): killing rshared
 * ends the node's connections, as before.
 * The two processes share the C library's per-thread state (errno,
 * malloc's caches, the cached thread id), which only one of them uses at a
 * time: while the hub lives the warden only waits (restarted by
 * SA_RESTART) and sends signals.  A signal the hub raises with the C
 * library's raise() or abort() reaches the warden (the cached thread id is
 * the warden's), which passes it on too.
 * On verbs the hub process opens the RDMA device itself (hub_open_verbs):
 * the kernel takes the device's commands only from a process with the
 * credentials it was opened with, and a clone()d process has its own.
 * For the same reason, and because the verbs libraries keep the device
 * they opened in their own records, no process of this address space can
 * use the device after the hub that opened it died: a hub that dies with
 * the device open is succeeded by an execve of rshared on an image of the
 * records, as a restart is (succeed_by_exec; restart.c), and the new hub
 * registers the rings again and tells the peers their new keys (resume.c).
 * Without a warden (--no-warden; a build with AddressSanitizer or
 * ThreadSanitizer, whose run-times keep per-thread state of their own;
 * valgrind, which cannot run two processes on one address space) the hub
 * runs in rshared's process.
 */
#include "hub.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "msg.h"
#include "sys.h"

#define WARDEN_STACK (8u << 20)
#define WARDEN_CRASHLOOP_MS 1000 /* a hub that dies this soon after taking over ... */
#define WARDEN_CRASHLOOP_N 3      /* ... this many times in a row is not started again */
#define WARDEN_SUCCEED_S 10
#define WARDEN_HANDOVER 75 /* the hub's exit status when it handed over */
#define WARDEN_FATAL 76    /* ... when it could not start (no RDMA device with --transport verbs) */

static volatile pid_t hub_pid;  /* the hub process, 0 while there is none */
static pid_t warden_pid;

/* what the warden is sent goes to the hub (a fault of its own kills it) */
static const int fwd_sigs[] = {SIGTERM, SIGINT, SIGUSR2, SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE};

static void forward(int sig, siginfo_t *si, void *uc)
{
	pid_t p = hub_pid;
	(void)uc;
	int ctl = sig == SIGTERM || sig == SIGINT || sig == SIGUSR2;
	if (p > 0 && (ctl || !si || si->si_code <= 0)) {
		syscall(SYS_tgkill, p, p, sig);
		return;
	}
	if (sig == SIGTERM || sig == SIGINT) {
		if (the_hub)
			the_hub->stop = 1;
	} else if (!ctl)
		signal(sig, SIG_DFL); /* the warden's own fault: it dies of it */
}

static void warden_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
		sigaction(fwd_sigs[i], &sa, NULL);
}

static int hub_proc(void *arg)
{
	struct hub *h = arg;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != warden_pid)
		return 1; /* the warden is gone already */
	hub_signals(h);
	h->hub_pid = getpid();
	if (hub_open_verbs(h) < 0)
		return WARDEN_FATAL;
	hub_loop(h);
	return h->handover_fd >= 0 ? WARDEN_HANDOVER : 0;
}

/* What a hub that died did between a step and its record: a ring
 * position it counted and did not show the process yet is shown (the
 * bytes were in place before it counted them); bytes it sent and did not
 * count are settled by the RESUME (torn, resume.c); rings it held are let
 * go. */
static void untear(struct hub *h)
{
	if (h->npunch)
		punch_flush(h); /* the rings it held for a batch of punches */
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (!s || !s->as)
			continue;
		s->torn = 1;
		/* a ring move it was in the middle of: the process would wait
		 * for its end for ever; the move is tried again (resize.c) */
		atomic_store(&s->as->rx_hold, 0);
		atomic_store(&s->as->tx_hold, 0);
		if (s->lp)
			continue; /* same node: the processes keep the rings' positions */
		if (!s->rx_switch && ring_load(&s->as->rx.tail) < s->rx_tail)
			ring_store(&s->as->rx.tail, s->rx_tail);
		if (ring_load(&s->as->tx.head) < s->tx_done)
			ring_store(&s->as->tx.head, s->tx_done);
	}
}

/* A waiter the hub that died may have left asleep with something to take:
 * bytes in its receive ring, an end, a connection no longer established.
 * (Room in a send ring comes with the bells rung again: hub_ring_all.)
 * Not every waiter: one woken for nothing spins before it sleeps again,
 * and a signal that lands in that spin is missed (rshare(7), BUGS). */
static int may_want_waking(struct hsock *s)
{
	struct arena_slot *as = s->as;
	if (!atomic_load(&as->waiters) && !atomic_load(&as->rx_waiters) && !atomic_load(&as->tx_waiters))
		return 0;
	return s->state != HS_ESTABLISHED || ring_load(&as->rx.tail) != ring_load(&as->rx.head) ||
	       (atomic_load(&as->flags) & (SLOTF_RX_FIN | SLOTF_RESET));
}

/* The hub's answer to the request it died in, and the waiters that may
 * have something to take woken. */
static void wake_all(struct hub *h)
{
	struct msg_rep rep;
	if (h->req_pr) {
		memset(&rep, 0, sizeof(rep));
		rep.status = -EINTR;
		proc_send_reply(h->req_pr->fd, &rep, NULL, 0);
		h->succession_eintr++;
		h->req_pr = NULL;
	}
	for (uint32_t sid = 1; sid < h->sid_hi; sid++) {
		struct hsock *s = h->socks[sid];
		if (s && s->as && may_want_waking(s))
			hsock_wake(s);
	}
}

/* A hub that died with the RDMA device open: no process of this address
 * space can use the device again (the kernel takes its commands only
 * from the opener, and the verbs libraries keep the dead hub's device in
 * their own records), so the successor is a new program on an image of
 * the records, as on a restart (restart.c): it opens the device and
 * registers the rings again.  Returns only when it could not: then the
 * node's connections end. */
static void succeed_by_exec(struct hub *h)
{
	const char *why = h->npasses ? "sockets were in flight between processes"
			  : h->nkeepers ? "keepers held readiness descriptors"
					: hub_layout_differs();
	int r;
	h->verbs.gone = 1;
	if (!why && (r = hub_image_handover(h, "the hub died")) == 0) {
		alarm(0); /* (it would outlive the execve) */
		hub_handover_exec(h);
		why = "rshared could not be executed";
	} else if (!why) {
		why = strerror(-r);
	}
	log_error("the hub died on verbs and cannot be succeeded: %s; the node's connections end", why);
}

/* Take over the records of a hub that died (how: ST). */
static void warden_succeed(struct hub *h, pid_t dead, int st)
{
	char why[64];
	if (WIFSIGNALED(st))
		snprintf(why, sizeof(why), "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(why, sizeof(why), "exit status %d", WEXITSTATUS(st));
	log_warn("the hub (pid %d) died of %s: a new one takes over its records", (int)dead, why);
	h->successions++;
	untear(h);
	wake_all(h);
	hub_cells_succeed(h);
	hub_ring_all(h);
	if (h->verbs.up) {
		succeed_by_exec(h);
		return;
	}
	hub_links_let_go(h, "the hub died");
	for (struct proc *pr = h->procs, *next; pr; pr = next) {
		next = pr->next;
		if (pr->stat_only)
			proc_free(h, pr);
	}
	hub_free_deferred(h);
}

int hub_warden_wanted(const struct hub *h)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	(void)h;
	return 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
	(void)h;
	return 0;
#endif
#endif
	return !h->no_warden;
}

int hub_warden(struct hub *h, int on)
{
	char *stack;
	uint64_t now;
	int st, quick;
	h->handover_fd = -1;
	on = on && hub_warden_wanted(h);
	stack = on ? mmap(NULL, WARDEN_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
			  -1, 0)
		   : MAP_FAILED;
	if (stack == MAP_FAILED) {
		h->warden_pid = 0;
		h->hub_pid = getpid();
		hub_signals(h);
		if (hub_open_verbs(h) < 0)
			return 1;
		for (;;) {
			hub_loop(h);
			if (h->handover_fd < 0)
				return 0;
			hub_handover_exec(h); /* returns only when it failed */
			h->restarts--;
			h->stop = 0;
		}
	}
	warden_pid = h->warden_pid = getpid();
	for (;;) {
		pid_t p;
		/* the hub installs its own handlers; the warden's go once it runs */
		p = clone(hub_proc, stack + WARDEN_STACK, CLONE_VM | CLONE_FILES | CLONE_FS | SIGCHLD, h);
		if (p < 0) {
			log_error("cannot start the hub process: %s", strerror(errno));
			return 1;
		}
		hub_pid = p;
		warden_signals();
		while (waitpid(p, &st, __WALL) < 0 && errno == EINTR)
			;
		hub_pid = 0;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			return 0;
		if (WIFEXITED(st) && WEXITSTATUS(st) == WARDEN_FATAL)
			return 1;
		if (WIFEXITED(st) && WEXITSTATUS(st) == WARDEN_HANDOVER && h->handover_fd >= 0) {
			h->succession_ms = 0; /* a restart ends a crash loop */
			hub_handover_exec(h); /* returns only when it failed */
			h->restarts--;
			h->stop = 0;
			continue;
		}
		if (h->stop)
			return 0;
		now = hub_now_ms();
		quick = h->succession_ms && now - h->succession_ms < WARDEN_CRASHLOOP_MS ? h->succession_quick + 1 : 0;
		if (quick >= WARDEN_CRASHLOOP_N) {
			log_error("the hub (pid %d) died within %d ms of taking over %d times in a row: the node's connections end",
				  (int)p, WARDEN_CRASHLOOP_MS, quick);
			return 1;
		}
		h->succession_quick = quick;
		h->succession_ms = now; /* (an execve on verbs carries both) */
		alarm(WARDEN_SUCCEED_S);
		warden_succeed(h, p, st);
		alarm(0);
		if (h->verbs.up)
			return 1; /* it could not be executed again */
		h->succession_ms = hub_now_ms();
		if (h->stop)
			return 0;
	}
}
