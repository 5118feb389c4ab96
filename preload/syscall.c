/*
 * syscall.c - system calls that programs make around libc, and io_uring.
 *
 * syscall(3): libuv (Node.js) closes its descriptors with
 * syscall(SYS_close), which never reaches close(): here it forgets the
 * rshare socket behind the descriptor first, as close() does.  Everything
 * else goes on to libc's syscall untouched.
 *
 * io_uring: its operations on a socket go to the kernel without any call
 * the library could see, and would find a kernel socket that never
 * connected.  So a program that uses io_uring runs on kernel TCP: one
 * linked with liburing from its start (uring_check, run by the
 * constructor: no socket of it ever goes to rshare, and the rshare
 * sockets it inherited through exec are given up: exec.c), one that sets up a
 * ring itself through syscall(3) from then on (its rshare sockets made
 * before stay on rshare, and the ring's operations on them fail, never
 * silently).
 *
 * setrlimit(RLIMIT_NOFILE), prctl(PR_SET_SECCOMP) and seccomp(2): see
 * sandbox_prepare.
 */
#include <link.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "preload.h"

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

/* io_uring in use: new sockets of this process stay kernel TCP */
static void uring_seen(void)
{
	cl.kernel_only = 1;
}

static int uring_lib(struct dl_phdr_info *i, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	return i->dlpi_name && strstr(i->dlpi_name, "/liburing.so");
}

int uring_check(void)
{
	if (!dl_iterate_phdr(uring_lib, NULL))
		return 0;
	uring_seen();
	return 1;
}

/* A sandbox is about to close in: the descriptor limit lowered, or a
 * seccomp filter (filter 1) going in (OpenSSH's pre-authentication child
 * gets a limit of 1 descriptor and a filter that allows read, write, poll
 * and futex, little more).  What the rshare sockets of this process would
 * need later is made now, their readiness descriptors and the watch on
 * the hub; under a filter, readiness descriptors are read and filled with
 * read and write from then on (vsock_poll.c). */
static void sandbox_prepare(int filter)
{
	if (cl.attached <= 0 || !pfd_tab)
		return;
	cl_watch();
	for (unsigned fd = 0; fd < pfd_max; fd++) {
		struct pfd *p = rs_of((int)fd);
		if (p && p->kind == FD_RS && vs_poll_fd_cached(p->slot) < 0)
			rd_fd((int)fd, p);
	}
	if (filter)
		cl.sandboxed = 1;
}

/* setrlimit, prctl and syscall: the sanitizers' runtimes call them while
 * they start, before this library is set up (pfd_tab) and before code
 * they instrument may run; so these go to the kernel themselves, are not
 * instrumented, and call into the library only once it is set up. */
#define PL_EARLY __attribute__((no_sanitize("address", "thread", "undefined")))

PL_EARLY static long early_ret(long r)
{
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

PL_EARLY int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	struct rlimit now;
	if (res == RLIMIT_NOFILE && pfd_tab && SYS_RAW6(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, &now, 0, 0) == 0 &&
	    rl->rlim_cur < now.rlim_cur)
		sandbox_prepare(0);
	return (int)early_ret(SYS_RAW6(SYS_prlimit64, 0, res, rl, 0, 0, 0));
}

PL_EARLY int prctl(int op, ...)
{
	va_list ap;
	unsigned long a[4];
	va_start(ap, op);
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (op == PR_SET_SECCOMP && pfd_tab)
		sandbox_prepare(1);
	return (int)early_ret(SYS_RAW6(SYS_prctl, op, a[0], a[1], a[2], a[3], 0));
}

PL_EARLY long syscall(long n, ...)
{
	va_list ap;
	long a[6];
	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (pfd_tab && n == SYS_close)
		pfd_forget((int)a[0]);
	else if (pfd_tab && n == SYS_io_uring_setup)
		uring_seen();
	else if (pfd_tab && n == SYS_seccomp)
		sandbox_prepare(1);
	return early_ret(SYS_RAW6(n, a[0], a[1], a[2], a[3], a[4], a[5]));
}
