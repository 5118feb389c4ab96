/*
 * procstat.h - what /proc/PID/stat says of a process: its state letter
 * and its parent.
 */
#ifndef RSHARE_PROCSTAT_H
#define RSHARE_PROCSTAT_H

#include <sys/types.h>

/* 0 with *state ('R', 'S', 'Z', ...) and *ppid filled (either may be
 * NULL), or -errno: the process is gone (-ENOENT) or the file is not
 * what it should be (-EIO). */
int procstat_read(pid_t pid, char *state, pid_t *ppid);

#endif
