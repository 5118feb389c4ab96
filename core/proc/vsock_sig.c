/*
 * vsock_sig.c - the program's signal handlers put off while its thread
 * holds a lock of the library's.
 *
 * Kernel TCP copies a send's or recv's bytes inside the system call: the
 * program's handler of a signal that comes meanwhile runs once the call
 * returns, or once it blocks (then the call ends early, or restarts).
 * rshare copies in the program's own thread, holding the ring's lock (a
 * mutex shared with the other processes of the socket) and its place in
 * the ring (vs_ring_enter).  A handler that ran there and sent on the
 * same socket (send(2) is async-signal-safe) would wait for ever on the
 * lock its own thread holds; one that left with siglongjmp would keep the
 * lock, and the ring, from every other thread and process for good.  The
 * same holds for the process's requests to its hub (a connect's, an
 * accept's, a close's: client.c), its epoll records (preload/epoll.c) and
 * a fork's hand-over (handover.c), each under a lock that a close takes
 * too: a handler that closed a socket meanwhile would wait for ever.
 *
 * So the trampoline (preload/signal.c) puts off a handler whose signal
 * comes while the thread holds one of those (vs_sig_hold: a send or recv
 * from its start to its end, its waits aside; the others from their lock
 * to its release): it keeps the signal's siginfo and returns.  Where the
 * hold ends (vs_sig_hold_end: the end, or a wait's start) each signal put
 * off is queued again to the thread with the same siginfo
 * (rt_tgsigqueueinfo), so that the kernel delivers it there with the
 * handler's own mask, flags and stack; a send or recv that then waits
 * sees the handler run, as kernel TCP's blocked call would (vsock_data.c,
 * xfer_signalled).  A send's or recv's hold starts before it takes its
 * hold on the socket and ends after it gives it back (vs_call_begin,
 * vsock_int.h), so that no jump leaves a hold taken, or ends one twice.
 * Not put off: the signals of a fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 * SIGTRAP, SIGSYS), which cannot wait; a handler installed with
 * SA_RESETHAND (the kernel has already put SIG_DFL back); and more than
 * VS_SIG_LATER different signals in one hold.
 */
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vsock_int.h"

#define VS_SIG_LATER 4

__thread uint32_t vs_sig_hold __attribute__((tls_model("initial-exec")));
__thread uint32_t vs_sig_nlater __attribute__((tls_model("initial-exec")));
static __thread siginfo_t vs_sig_later[VS_SIG_LATER] __attribute__((tls_model("initial-exec")));

static int fault_signal(int sig)
{
	static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		if (sig == faults[i])
			return 1;
	return 0;
}

/* Called by the trampoline while vs_sig_hold is not 0. */
int vs_sig_put_off(int sig, const siginfo_t *si, int flags)
{
	uint32_t n = vs_sig_nlater;
	if (!si || (flags & SA_RESETHAND) || fault_signal(sig))
		return 0;
	/* a standard signal pending twice is delivered once (with the first
	 * one's siginfo); a real-time one is queued each time */
	if (sig < SIGRTMIN)
		for (uint32_t i = 0; i < n; i++)
			if (vs_sig_later[i].si_signo == sig)
				return 1;
	if (n == VS_SIG_LATER)
		return 0;
	memcpy(&vs_sig_later[n], si, sizeof(*si));
	vs_sig_later[n].si_signo = sig;
	atomic_signal_fence(memory_order_seq_cst);
	vs_sig_nlater = n + 1;
	return 1;
}

/* With every signal blocked, so that no handler comes between (one that
 * sent would put off signals of its own): queued again, then delivered as
 * the old mask comes back, unless it blocks them (then when the program
 * unblocks them, as any pending signal). */
void vs_sig_deliver_later(void)
{
	siginfo_t later[VS_SIG_LATER];
	sigset_t all, old;
	uint32_t n;
	pid_t pid, tid;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	n = vs_sig_nlater;
	memcpy(later, vs_sig_later, n * sizeof(later[0]));
	vs_sig_nlater = 0;
	pid = getpid();
	tid = (pid_t)syscall(SYS_gettid);
	for (uint32_t i = 0; i < n; i++)
		syscall(SYS_rt_tgsigqueueinfo, pid, tid, later[i].si_signo, &later[i]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
