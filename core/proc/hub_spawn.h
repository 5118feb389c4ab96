/*
 * hub_spawn.h - starting a hub that is nobody's child.
 *
 * Used by the library (a process's first socket finds no hub: client.c)
 * and by the command (rshare run, rshare hub start).  The hub runs in a
 * session of its own, its parent a middle process that has exited, so no
 * SIGCHLD ever reaches the caller and its wait() never sees the hub.  Only
 * raw system calls run between the clone and the exec (hub_spawn.c).
 */
#ifndef RSHARE_HUB_SPAWN_H
#define RSHARE_HUB_SPAWN_H

#include <sys/types.h>

struct spawn_opt {
	const char *path;        /* with a '/': that file; else looked up in PATH */
	char *const *argv;
	int err_fd;              /* the hub's stderr; -1: err_path, else /dev/null */
	const char *err_path;    /* appended to (created 0600) when err_fd is -1 */
	int pid_fd;              /* >= 0: the middle process writes the hub's pid here */
	int close_fds;           /* close every descriptor from 3 up before exec */
	int env_max;             /* at most this many variables go along (0: all) */
	int fresh;               /* the hub takes none of the caller's scheduling
				    or lowered limits, as far as it may, and stays
				    in its session (hub_spawn.c); else a session
				    of its own */
	/* in the hub's process when the exec failed, before it exits 127 */
	void (*exec_failed)(const char *path, int err);
};

/* Start the hub as O says (LD_PRELOAD never goes along); 0 once the middle
 * process is gone, -errno when it could not be made. */
int spawn_hub(const struct spawn_opt *o);
/* execvpe(3) in raw system calls (librshare.so defines exec*): FILE with a
 * '/' is run as is, else looked up in PATH; only returns, with -errno. */
int spawn_execvpe(const char *file, char *const argv[], char *const envp[]);
/* The library's hub: RSHARE_HUB, the configuration's hub, next to
 * librshare.so, else rshared in PATH, started as `rshared --daemon`. */
void spawn_lib_hub(void);

#endif
