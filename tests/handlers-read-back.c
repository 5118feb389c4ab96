/*
 * handlers-read-back
 *
 * Installs SIGUSR1 handlers every way a program can through the C library
 * (sigaction, signal, bsd_signal, sysv_signal, sigset with SIG_HOLD, and
 * siginterrupt on them), ignores it with sigignore (which glibc does past
 * the library's sigaction), reads each back, raises the signal, and prints
 * one line per step: the disposition each call returned, the flags and
 * mask read back, which handler ran, what is blocked and pending, and the
 * errors of bad calls.
 * Never an address or a time: the transcript of a run under rshare (whose
 * library stands a trampoline in for each handler) must be the one of a
 * run without it.
 */
#include "helpers.h"

#include <signal.h>

sighandler_t bsd_signal(int sig, sighandler_t h); /* not declared with _GNU_SOURCE */

static volatile sig_atomic_t ran1, ran2;
static void h1(int sig) { (void)sig; ran1++; }
static void h2(int sig) { (void)sig; ran2++; }

static const char *name(sighandler_t h)
{
	return h == h1 ? "h1" : h == h2 ? "h2" : h == SIG_DFL ? "SIG_DFL" : h == SIG_IGN ? "SIG_IGN" :
	       h == SIG_HOLD ? "SIG_HOLD" : h == SIG_ERR ? "SIG_ERR" : "other";
}

/* a call's result, and errno when it failed */
static void said(const char *what, sighandler_t r)
{
	printf("%s -> %s%s%s\n", what, name(r), r == SIG_ERR ? " " : "", r == SIG_ERR ? strerror(errno) : "");
}

/* what sigaction reads back of SIGUSR1, and the mask and pending set */
static void look(const char *when)
{
	struct sigaction o;
	sigset_t m, p;
	sigaction(SIGUSR1, NULL, &o);
	sigprocmask(SIG_BLOCK, NULL, &m);
	sigpending(&p);
	printf("%s: handler %s flags %#x mask-usr2 %d blocked %d pending %d ran %d %d\n", when,
	       name(o.sa_handler), (unsigned)o.sa_flags, sigismember(&o.sa_mask, SIGUSR2),
	       sigismember(&m, SIGUSR1), sigismember(&p, SIGUSR1), (int)ran1, (int)ran2);
}

int main(void)
{
	struct sigaction a = {.sa_handler = h1, .sa_flags = SA_RESTART | SA_NODEFER}, o;
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, SIGUSR2);
	printf("sigaction -> %d\n", sigaction(SIGUSR1, &a, &o));
	look("sigaction h1");
	raise(SIGUSR1);
	look("raised");
	said("signal h2", signal(SIGUSR1, h2));
	look("signal h2");
	said("bsd_signal h1", bsd_signal(SIGUSR1, h1));
	look("bsd_signal h1");
	said("sysv_signal h2", sysv_signal(SIGUSR1, h2));
	look("sysv_signal h2");
	raise(SIGUSR1);
	look("raised (reset to SIG_DFL)");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	said("sigset h1", sigset(SIGUSR1, h1));
	look("sigset h1");
	raise(SIGUSR1);
	look("raised");
	said("sigset SIG_HOLD", sigset(SIGUSR1, SIG_HOLD));
	raise(SIGUSR1);
	look("held, raised");
	said("sigset SIG_HOLD again", sigset(SIGUSR1, SIG_HOLD));
	said("sigset h2", sigset(SIGUSR1, h2));
	look("sigset h2 (unblocked)");
	said("sigset SIG_IGN", sigset(SIGUSR1, SIG_IGN));
	raise(SIGUSR1);
	look("ignored, raised");
	said("sigset h1", sigset(SIGUSR1, h1));
	printf("sigignore -> %d\n", sigignore(SIGUSR1));
	raise(SIGUSR1);
	look("sigignore, raised");
	said("signal h2 after sigignore", signal(SIGUSR1, h2));
	raise(SIGUSR1);
	look("signal h2 after sigignore, raised");
	said("sigset SIG_DFL", sigset(SIGUSR1, SIG_DFL));
	printf("siginterrupt 1 -> %d\n", siginterrupt(SIGUSR1, 1));
	look("siginterrupt 1 (SIG_DFL)");
	said("signal h1", signal(SIGUSR1, h1));
	look("signal h1 after siginterrupt 1");
	said("bsd_signal h2", bsd_signal(SIGUSR1, h2));
	look("bsd_signal h2 after siginterrupt 1");
	printf("siginterrupt 0 -> %d\n", siginterrupt(SIGUSR1, 0));
	look("siginterrupt 0");
	said("signal h1", signal(SIGUSR1, h1));
	look("signal h1 after siginterrupt 0");
	printf("siginterrupt 1 -> %d\n", siginterrupt(SIGUSR1, 1));
	raise(SIGUSR1);
	look("siginterrupt 1, raised");
	{
		int r = siginterrupt(99, 1);
		printf("siginterrupt 99 -> %d %s\n", r, strerror(errno));
	}
	said("signal SIG_DFL", signal(SIGUSR1, SIG_DFL));
	said("sigset 0", sigset(0, h1));
	said("sigset 99", sigset(99, h1));
	said("sigset SIGKILL", sigset(SIGKILL, h1));
#pragma GCC diagnostic pop
	said("bsd_signal 99", bsd_signal(99, h1));
	said("signal SIGKILL", signal(SIGKILL, h1));
	said("sysv_signal SIGSTOP", sysv_signal(SIGSTOP, h1));
	look("end");
	return 0;
}
