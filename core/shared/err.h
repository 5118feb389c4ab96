/*
 * err.h - how code in core/ reports failure (one convention, written once).
 *
 * A function that can fail returns 0, or a non-negative value (a count, a
 * descriptor, an index), on success and -errno on failure: `r = f(); if (r
 * < 0) return r;` passes the reason up without a global in between, and
 * strerror(-r) says what it was.  A function that returns a pointer
 * returns NULL on failure with errno set.  A function that only answers a
 * question (a match, a lookup) returns 1 or 0 and cannot fail.
 *
 * Where core/ meets the kernel or libc, their own convention holds at that
 * edge only: syscall(2) and the sys_* wrappers (sys.h) return -1 with errno
 * set, and the caller turns that into -errno (err_neg()).  preload/
 * implements libc's calls (socket, connect, read, ...) for the program and
 * so keeps -1 with errno set at its boundary, turning a -errno from core/
 * into errno there.  Between a process and its hub the reason travels in
 * the reply itself: struct msg_rep's status is 0 or -errno (msg.h).
 */
#ifndef RSHARE_ERR_H
#define RSHARE_ERR_H

#include <errno.h>

/* -errno after a call that failed with errno set; never 0 (-EIO when a
 * broken callee failed without setting errno), so a failure stays one. */
static inline int err_neg(void)
{
	return errno > 0 ? -errno : -EIO;
}

#endif
