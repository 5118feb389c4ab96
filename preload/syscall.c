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
 */
#include <link.h>

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

long syscall(long n, ...)
{
	va_list ap;
	long a[6];
	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (n == SYS_close)
		pfd_forget((int)a[0]);
	else if (n == SYS_io_uring_setup)
		uring_seen();
	return R(syscall)(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
