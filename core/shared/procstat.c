/*
 * procstat.c - a process's state and parent from /proc/PID/stat
 * (procstat.h).  The file reads "pid (comm) state ppid ...", where comm
 * may hold anything, spaces and parentheses included, but not past its
 * last ')': the fields are read after that one.
 */
#include "procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int procstat_read(pid_t pid, char *state, pid_t *ppid)
{
	char path[64], buf[512], *p, st;
	int fd, n, pp;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = 0;
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %c %d", &st, &pp) != 2)
		return -EIO;
	if (state)
		*state = st;
	if (ppid)
		*ppid = pp;
	return 0;
}
