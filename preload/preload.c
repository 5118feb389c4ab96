/*
 * preload.c - the interposition layer of librshare.so: its start and end,
 * and the real functions it calls through.
 *
 * Thin on purpose: it keeps a table from descriptor to rshare socket, and
 * for a descriptor that is not an rshare socket every call goes straight
 * to the next definition (libc) after one bounds check and one load.
 *
 * Every AF_INET/AF_INET6 stream socket starts as a real kernel socket:
 * bind() is the kernel's (address reuse, EADDRINUSE), listen() keeps a
 * kernel listener (plain TCP clients still reach a preloaded server) and
 * registers an rshare one with the hub, connect() asks the hub first and
 * falls back to the kernel when the other node has no rshare listener.
 * An rshare connection keeps its kernel socket as the descriptor the
 * application sees until it is polled; then its readiness descriptor takes
 * that number (ready.c), so that it costs one descriptor, as on the kernel.
 *
 * The files: fdtab.c (the descriptor table, close and dup), ready.c (the
 * readiness descriptor as the program's descriptor), socket.c
 * (socket, bind, listen, accept, shutdown, names), connect.c, io.c (the
 * data calls), sockopt.c (socket options, fcntl, ioctl), poll.c (poll and
 * select), epoll.c, exec.c (sockets kept across exec), spawn.c (and
 * handed to programs started by posix_spawn, system, popen), pass.c
 * (descriptors passed over unix sockets), syscall.c (syscall(3), and
 * io_uring), stdio.c (stdio streams on connections), signal.c (the
 * program's signal handlers, counted as they run); preload.h is what they
 * share.
 */
#include "preload.h"

/* real_NAME: the next definition of NAME (libc's) */
#define REAL_DEF(name) __typeof__(name) *real_##name;
REAL_NAMES(REAL_DEF)

void *real_next(const char *n)
{
	return dlsym(RTLD_NEXT, n);
}

__attribute__((constructor)) static void preload_init(void)
{
#define REAL_LOAD(name) real_##name = real_next(#name);
	REAL_NAMES(REAL_LOAD)
	pfd_table_init();
	cl_init();
	vs_poll_forget = ep_forget;
	uring_check();
	exec_adopt();
	sock_activated();
}

__attribute__((destructor)) static void preload_fini(void)
{
	/* a process that exits closes its sockets as the kernel does, once it
	 * is gone (the hub, proc.c): its other threads may still use them
	 * until then; what its streams on them hold goes first */
	std_flush();
}
