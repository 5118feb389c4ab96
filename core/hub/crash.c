/*
 * crash.c - the hub's last words: on a fatal signal (SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE, SIGABRT) it writes the signal and a backtrace (libunwind,
 * local unwinding on an alternate stack) to standard error, then dies of
 * the same signal, so that a core dump or the service manager still sees
 * what happened; the warden then starts a new hub on its records
 * (warden.c).  Without a warden, its processes notice its end through
 * their watch (core/proc/handover.c) and their sockets fail with
 * ECONNRESET or EPIPE.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "crash.h"

static char altstack[64 << 10];

static void say(const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	char line[512];
	unw_context_t ctx;
	unw_cursor_t cur;
	int n, depth = 0;
	(void)uc;
	n = snprintf(line, sizeof(line), "rshared[%d]: error: fatal signal %d (%s) at %p; backtrace:\n",
		     (int)getpid(), sig, strsignal(sig), si ? si->si_addr : NULL);
	say(line, (size_t)n);
	if (unw_getcontext(&ctx) == 0 && unw_init_local(&cur, &ctx) == 0) {
		while (depth < 64 && unw_step(&cur) > 0) {
			unw_word_t ip = 0, off = 0;
			char name[256] = "?";
			unw_get_reg(&cur, UNW_REG_IP, &ip);
			unw_get_proc_name(&cur, name, sizeof(name), &off);
			n = snprintf(line, sizeof(line), "rshared[%d]: error:   #%d %#lx %s+%#lx\n",
				     (int)getpid(), depth++, (unsigned long)ip, name, (unsigned long)off);
			say(line, (size_t)n);
		}
	}
	signal(sig, SIG_DFL);
	/* this thread, as the kernel names it (raise() goes by the C
	 * library's cached id: the warden's, in a hub process of warden.c) */
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

void crash_install(void)
{
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};
	struct sigaction sa;
	int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	sigaltstack(&ss, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}
