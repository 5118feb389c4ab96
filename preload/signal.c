/*
 * signal.c - the program's signal handlers, counted as they run, so that
 * a blocked call knows that one ran.
 *
 * A blocked send or recv on kernel TCP ends with EINTR when a handler
 * installed without SA_RESTART runs (any handler, under SO_RCVTIMEO or
 * SO_SNDTIMEO), wherever the thread was in its wait.  An rshare call
 * first polls its ring a while and then sleeps on a futex word: the
 * kernel ends the sleep the same way, but a handler that runs while the
 * thread polls, or as its sleep returns from a wake-up for nothing,
 * leaves no trace the call could see.  So sigaction(2), signal(2),
 * bsd_signal(3), sysv_signal(3) and sigset(3) install a trampoline in the
 * program's handler's place (and siginterrupt(3) changes its flags),
 * with the program's flags and mask (plus SA_SIGINFO): it counts the run
 * on its thread (vs_sig_runs: all handlers, and those without
 * SA_RESTART) and calls the program's handler as the kernel would have.
 * The call looks at the counts before it sleeps and after every wait
 * (core/proc/vsock_data.c).  A handler whose signal comes while its
 * thread holds a lock of the library's (a socket's ring, a request to
 * the hub, the epoll records) is put off to the end of that hold
 * (core/proc/vsock_sig.c).  What the program reads back (the old action)
 * is its own handler and flags; SIG_DFL and SIG_IGN go to the kernel as
 * they are.  A handler installed another way (a raw rt_sigaction) is not
 * counted: rshare(7), BUGS.
 */
#include <signal.h>

#include "preload.h"

#define SIG_N 65
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* the kernel's: glibc sets it, and reads it back */
#endif

/* the program's handler of each signal that the trampoline stands in for,
 * and its flags */
static struct {
	_Atomic(void *) fn;
	_Atomic int flags;
} sig_tab[SIG_N];

static void sig_tramp(int sig, siginfo_t *si, void *uc)
{
	void *fn = atomic_load(&sig_tab[sig].fn);
	int flags = atomic_load(&sig_tab[sig].flags);
	if (__builtin_expect(vs_sig_hold != 0, 0) && vs_sig_put_off(sig, si, flags))
		return; /* its thread holds a lock of the library's: it runs after */
	vs_sig_runs[0]++;
	vs_accept_sig(); /* out of the count of sleepers in accept, should it jump */
	if (!(flags & SA_RESTART))
		vs_sig_runs[1]++;
	if (flags & SA_RESETHAND) /* the kernel has put SIG_DFL back */
		atomic_store(&sig_tab[sig].fn, (void *)SIG_DFL);
	if (fn == (void *)SIG_DFL || fn == (void *)SIG_IGN)
		return; /* changed under a signal on its way: nothing of the program's to run */
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
	else
		((void (*)(int))fn)(sig);
}

/* what the program had: the trampoline in OLD becomes the handler and
 * flags it stood in for (PREV), with the C library's SA_RESTORER as the
 * kernel has it; and a handler its signal reset (SA_RESETHAND) leaves the
 * kernel SIG_DFL with the trampoline's flags, less the SA_SIGINFO added */
static void sig_own(struct sigaction *old, void *prev, int prev_flags)
{
	if (!old)
		return;
	if (old->sa_sigaction != sig_tramp) {
		if (old->sa_handler == SIG_DFL && prev == (void *)SIG_DFL && !(prev_flags & SA_SIGINFO) &&
		    (old->sa_flags & ~SA_RESTORER) == ((prev_flags | SA_SIGINFO) & ~SA_RESTORER))
			old->sa_flags &= ~SA_SIGINFO;
		return;
	}
	old->sa_flags = prev_flags | (old->sa_flags & SA_RESTORER);
	if (prev_flags & SA_SIGINFO)
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev;
	else
		old->sa_handler = (void (*)(int))prev;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction a;
	void *prev, *fn;
	int prev_flags, r;
	if (sig <= 0 || sig >= SIG_N)
		return R(sigaction)(sig, act, old);
	prev = atomic_load(&sig_tab[sig].fn);
	prev_flags = atomic_load(&sig_tab[sig].flags);
	fn = !act ? NULL : act->sa_flags & SA_SIGINFO ? (void *)act->sa_sigaction : (void *)act->sa_handler;
	/* a look, SIG_DFL, SIG_IGN: the kernel's; the trampoline itself (read
	 * back with a raw rt_sigaction) stays what it stands for */
	if (!act || fn == (void *)SIG_DFL || fn == (void *)SIG_IGN || fn == (void *)sig_tramp || sig == SIGKILL ||
	    sig == SIGSTOP) {
		r = R(sigaction)(sig, act, old);
	} else {
		a = *act;
		a.sa_sigaction = sig_tramp;
		a.sa_flags |= SA_SIGINFO;
		/* the table first: a signal may come as soon as the kernel has it */
		atomic_store(&sig_tab[sig].flags, act->sa_flags);
		atomic_store(&sig_tab[sig].fn, fn);
		r = R(sigaction)(sig, &a, old);
		if (r < 0) {
			atomic_store(&sig_tab[sig].fn, prev);
			atomic_store(&sig_tab[sig].flags, prev_flags);
			return r;
		}
	}
	if (r == 0)
		sig_own(old, prev, prev_flags);
	return r;
}

/* the signals siginterrupt(3) made interrupting: signal(2) installs
 * their handlers without SA_RESTART, as glibc's does */
static _Atomic uint64_t sig_intr;

static uint64_t sig_bit(int sig)
{
	return 1ull << (sig - 1);
}

/* signal(2) and sysv_signal(3) as glibc makes them: FLAGS, and the signal
 * itself blocked in its handler unless SA_NODEFER */
static sighandler_t sig_set(int sig, sighandler_t h, int flags)
{
	struct sigaction a = {.sa_handler = h, .sa_flags = flags}, old;
	if (sig <= 0 || sig >= SIG_N) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&a.sa_mask);
	if (!(flags & SA_NODEFER))
		sigaddset(&a.sa_mask, sig);
	if (sigaction(sig, &a, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

sighandler_t signal(int sig, sighandler_t h)
{
	return sig_set(sig, h, sig > 0 && sig < SIG_N && (atomic_load(&sig_intr) & sig_bit(sig)) ? 0 : SA_RESTART);
}

sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return sig_set(sig, h, SA_RESETHAND | SA_NODEFER);
}

/* signal(2)'s other name (glibc's own calls its sigaction past this one) */
sighandler_t bsd_signal(int sig, sighandler_t h);
sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return signal(sig, h);
}

/* siginterrupt(3), as glibc makes it: the handler's SA_RESTART off (or
 * on), and signal(2)'s later handlers of SIG without it (or with it).
 * glibc's own changes the kernel's flags past the table above, so that a
 * handler it made interrupting would count as one that restarts. */
int siginterrupt(int sig, int interrupt)
{
	struct sigaction a;
	if (sigaction(sig, NULL, &a) < 0)
		return -1;
	if (interrupt) {
		atomic_fetch_or(&sig_intr, sig_bit(sig));
		a.sa_flags &= ~SA_RESTART;
	} else {
		atomic_fetch_and(&sig_intr, ~sig_bit(sig));
		a.sa_flags |= SA_RESTART;
	}
	return sigaction(sig, &a, NULL);
}

/* sigset(3), as glibc makes it: SIG_HOLD blocks the signal; a handler (no
 * SA_RESTART), SIG_DFL or SIG_IGN is installed and the signal unblocked.
 * The disposition before, or SIG_HOLD where the signal was blocked. */
sighandler_t sigset(int sig, sighandler_t h)
{
	struct sigaction a = {.sa_handler = h}, old;
	sigset_t one, was;
	sigemptyset(&one);
	sigemptyset(&a.sa_mask);
	if (sig <= 0 || sig >= SIG_N || sigaddset(&one, sig) < 0) {
		errno = EINVAL;
		return SIG_ERR;
	}
	if (h == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &one, &was) < 0 || sigaction(sig, NULL, &old) < 0)
			return SIG_ERR;
	} else if (sigaction(sig, &a, &old) < 0 || sigprocmask(SIG_UNBLOCK, &one, &was) < 0) {
		return SIG_ERR;
	}
	return sigismember(&was, sig) ? SIG_HOLD : old.sa_handler;
}
