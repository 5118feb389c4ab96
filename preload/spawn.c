/*
 * spawn.c - rshare sockets handed to programs that this process starts
 * without forking itself: posix_spawn, posix_spawnp, system, popen.
 *
 * These start the program from a child that shares this process's memory
 * and runs no fork handler, so the hub would not know it.  Here the
 * starter does for it what exec does (exec.c, spawn mode): a connection
 * to the hub that holds its sockets for the program, left open for the
 * program to take, and the list of its sockets in RSHARE_EXEC, in the
 * environment the program gets (system and popen use this process's own:
 * it is set for the call and taken away after).  Once the program has
 * started, the starter closes its copy of that connection.  A vfork
 * child's exec is seen in exec.c.
 */
#include <spawn.h>

#include "preload.h"

extern char **environ;

static pthread_mutex_t spawn_env_lock = PTHREAD_MUTEX_INITIALIZER;

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u, 1);
	int r = R(posix_spawn)(pid, path, fa, at, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
		 const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u, 1);
	int r = R(posix_spawnp)(pid, file, fa, at, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

/* system and popen: the list in this process's environment for the call */
static char *spawn_env_set(struct exec_undo *u)
{
	char *s = exec_prepare_list(u, 1);
	if (s) {
		pthread_mutex_lock(&spawn_env_lock);
		if (putenv(s) != 0) {
			pthread_mutex_unlock(&spawn_env_lock);
			free(s);
			return NULL;
		}
	}
	return s;
}

static void spawn_env_unset(struct exec_undo *u, char *s)
{
	int e = errno;
	if (s) {
		unsetenv("RSHARE_EXEC");
		pthread_mutex_unlock(&spawn_env_lock);
		free(s);
	}
	exec_undo(u);
	errno = e;
}

int system(const char *cmd)
{
	struct exec_undo u;
	char *s;
	int r;
	if (!cmd)
		return R(system)(cmd);
	s = spawn_env_set(&u);
	r = R(system)(cmd);
	spawn_env_unset(&u, s);
	return r;
}

FILE *popen(const char *cmd, const char *mode)
{
	struct exec_undo u;
	char *s = spawn_env_set(&u);
	FILE *f = R(popen)(cmd, mode);
	spawn_env_unset(&u, s);
	return f;
}
