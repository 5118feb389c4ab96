/*
 * vsock_wait.c - how a thread of the program waits for a socket: a spin,
 * then a sleep on the slot's futex word.
 *
 * A blocked send or recv (vsock_data.c), accept or connect (vsock.c) first
 * polls the counter it waits for a while (spin_us of rshare.conf(5)), so
 * that a quick answer costs no system call, then sleeps on a futex word
 * that the hub (or, on one node, the other side) bumps.  The kernel ends
 * that sleep with EINTR for a signal's handler installed without
 * SA_RESTART, as it ends kernel TCP's blocked call; a handler that runs
 * while the thread polls, or as its sleep ends for nothing, leaves no
 * trace there.  So the program's handlers are counted as they run
 * (vs_sig_runs, preload/signal.c), and a send or recv looks at the count
 * before each wait and just before it sleeps (vsock_data.c,
 * xfer_signalled).  A send or recv also makes the process's watch on the
 * hub (a connect, which waits while a hub that died is succeeded) before
 * its last look, and polls again only after a wait that moved bytes
 * (xfer_pre_wait).
 */
#include <sched.h>
#include <time.h>

#include "vsock_int.h"

__thread uint32_t vs_sig_runs[2] __attribute__((tls_model("initial-exec")));

/* Wait for the futex word W of slot AS (wake_seq, or a recv's rx_seq, a
 * send's tx_seq) to move past seq, for at most NS nanoseconds (0: no
 * limit), counted in CNT (the word's sleepers: waiters, rx_waiters,
 * tx_waiters) only while asleep: the hub makes the wake-up system call
 * only when a thread sleeps (it bumps the word, then reads the count; we
 * count, then the kernel compares the word), not for one that spins or
 * copies.  Without a limit, the kernel itself restarts the wait after a
 * handler installed with SA_RESTART and reports EINTR after any other,
 * exactly as for a blocked recv on kernel TCP.  -ETIMEDOUT after NS.
 * The watch on the hub is made before (its connect waits while a hub that
 * died is succeeded): a send or recv makes it before its last look.
 * N, where not NULL: the wait note (vsock_int.h) of the send or recv
 * that waits, which holds CNT while the thread sleeps, so that a
 * handler's jump out of the sleep gives the count back; it is set after
 * the count is taken and cleared before it is given back, so a jump
 * between the two can leave one too many, never one too few. */
static int wait_word(_Atomic uint32_t *w, _Atomic uint32_t *cnt, uint32_t seq, uint64_t ns,
		     struct vs_wait_note *n)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
	long r;
	int e;
	if (cl_watch() == -EINTR)
		return -EINTR; /* as the wait itself would have ended */
	if (cl_hub_dead())
		return -ECONNRESET;
	atomic_fetch_add(cnt, 1);
	if (n)
		n->asleep = cnt;
	r = sys_futex(w, FUTEX_WAIT, seq, ns ? &ts : NULL);
	e = r < 0 ? errno : 0;
	if (n)
		n->asleep = NULL;
	atomic_fetch_sub(cnt, 1);
	if (e == EINTR)
		return -EINTR;
	if (cl_hub_dead())
		return -ECONNRESET;
	return e == ETIMEDOUT ? -ETIMEDOUT : 0;
}

/* ... for a send or recv, between vs_wait_enter and vs_wait_leave */
int vs_wait_word(_Atomic uint32_t *w, _Atomic uint32_t *cnt, uint32_t seq, uint64_t ns)
{
	uint32_t d = vs_wait_depth;
	return wait_word(w, cnt, seq, ns, d && d <= VS_WAIT_NOTES ? &vs_wait_notes[d - 1] : NULL);
}

int vs_wait_seq(struct arena_slot *as, uint32_t seq)
{
	return wait_word(&as->wake_seq, &as->waiters, seq, 0, NULL);
}

/* vs_wait_seq for at most NS nanoseconds: -ETIMEDOUT after them */
int vs_wait_seq_for(struct arena_slot *as, uint32_t seq, uint64_t ns)
{
	return wait_word(&as->wake_seq, &as->waiters, seq, ns ? ns : 1, NULL);
}

/* Adaptive waiting: spin for the counter to leave old (CTR NULL: none),
 * or the hub to signal anything, giving the CPU to others now and then;
 * 1 when something moved, 0 when it is time to sleep.  How long: up to cl.spin_ns,
 * per thread halved by every spin that waited in vain and doubled by every
 * one that did not, so that a busy machine, where the other side is
 * seldom running, stops burning what its other threads need; every 16th
 * wait spins the whole time, so that the budget grows back. */
static __thread uint64_t spin_budget;
static __thread unsigned spin_waits;

int vs_spin_ring(_Atomic uint32_t *word, uint32_t seq, _Atomic uint64_t *ctr, uint64_t old, _Atomic uint64_t *alt)
{
	uint64_t end = 0, floor = cl.spin_ns / 16, b, alt_old = alt ? atomic_load(alt) : 0;
	if (!cl.spin_ns)
		return 0;
	if (spin_budget < floor || spin_budget > cl.spin_ns)
		spin_budget = cl.spin_ns;
	/* every 16th wait tries the whole time: the other side may be quick again */
	b = ++spin_waits % 16 ? spin_budget : cl.spin_ns;
	for (unsigned i = 1;; i++) {
		if ((ctr && ring_load(ctr) != old) || atomic_load(word) != seq ||
		    (alt && atomic_load(alt) != alt_old)) {
			spin_budget = b * 2 > cl.spin_ns ? cl.spin_ns : b * 2;
			return 1;
		}
		if (!(i & 63)) {
			uint64_t now = sys_now_ns();
			if (!end) {
				end = now + b;
			} else if (now >= end || cl_hub_dead()) {
				spin_budget = spin_budget / 2 < floor ? floor : spin_budget / 2;
				return 0;
			}
			sched_yield();
		}
		cpu_relax();
	}
}
