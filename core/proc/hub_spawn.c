/*
 * hub_spawn.c - starting the hub so that it is nobody's child.
 *
 * A clone without exit signal (no SIGCHLD reaches the caller, whose
 * wait() cannot see it) makes a process group of its own and forks the
 * hub, then exits; the caller reaps it with __WALL.  The group keeps the
 * hub out of what is sent to the program's (Ctrl-C, a hang-up, a kill of
 * the group).  A hub started without being asked for stays in the
 * caller's session: where the scheduler groups processes by session
 * (autogroups), one in a session of its own was a group of its own, the
 * programs' yields did not reach it nor its yields them, and on 2
 * processors a client and a thread-per-connection server of one shell
 * made half the connections a second.  `rshare hub start` (a daemon asked
 * for by name) calls setsid() instead and leads a session of its own.
 * The hub's process sets up its descriptors 0, 1 and 2 (and closes the
 * caller's others), unblocks every signal and sets each to its default,
 * drops LD_PRELOAD from its environment and runs the hub.
 * A hub started without being asked for (the library's, that of
 * `rshare run`: spawn_opt.fresh) serves every program of the node, not
 * only the one that happened to start it, so it first undoes what was set
 * for that program alone, as far as it may: its processor affinity (back
 * to every processor its cpuset allows), scheduling policy (SCHED_OTHER:
 * a hub that polls at a real-time priority would hold its processor), nice
 * value (0) and lowered resource limits (processor time, file size, data,
 * address space, resident set, locked memory: none where the caller may
 * raise its hard limits (CAP_SYS_RESOURCE); else the soft limit up to the hard
 * one).  A seccomp filter cannot be undone.  `rshare hub start` and
 * rshared keep what their caller chose.
 * Everything after the clone is raw system calls on memory of its own
 * (the caller may be a threaded application), and the exec's PATH search
 * is done here too, since librshare.so defines the exec family itself.
 */
#include "hub_spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "sys.h"

extern char **environ;

/* execve, and for a file the kernel cannot run a shell on it, as execvp(3) */
static int exec_one(const char *file, char *const argv[], char *const envp[], int script)
{
	char *sh[16];
	int n = 0;
	syscall(SYS_execve, file, argv, envp);
	if (errno != ENOEXEC || !script)
		return -errno;
	sh[n++] = (char *)"/bin/sh";
	sh[n++] = (char *)file;
	for (int i = 1; argv[0] && argv[i] && n < 15; i++)
		sh[n++] = argv[i];
	sh[n] = NULL;
	syscall(SYS_execve, "/bin/sh", sh, envp);
	errno = ENOEXEC;
	return -ENOEXEC;
}

int spawn_execvpe(const char *file, char *const argv[], char *const envp[])
{
	const char *p = getenv("PATH");
	size_t flen = strlen(file);
	int eacces = 0, ret = -ENOENT;
	char buf[PATH_MAX];
	if (!*file)
		return -ENOENT;
	if (strchr(file, '/'))
		return exec_one(file, argv, envp, 0);
	if (!p)
		p = "/bin:/usr/bin";
	for (;;) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		if (dlen + 1 + flen < sizeof(buf)) {
			memcpy(buf, p, dlen);
			buf[dlen] = '/';
			/* an empty element is the current directory */
			memcpy(buf + dlen + (dlen > 0), file, flen + 1);
			ret = exec_one(buf, argv, envp, 1);
			if (ret == -EACCES)
				eacces = 1;
			else if (ret != -ENOENT && ret != -ESTALE && ret != -ENOTDIR && ret != -ENODEV &&
				 ret != -ETIMEDOUT)
				return ret;
		}
		if (!*end)
			break;
		p = end + 1;
	}
	if (eacces)
		ret = -EACCES;
	errno = -ret;
	return ret;
}

/* Every signal unblocked and at its default: an exec keeps the blocked
 * ones and the ignored ones, and a hub started by a program that blocks
 * or ignores SIGTERM (one that takes its signals through a signalfd, or
 * run under `trap '' TERM`) would neither stop nor restart.  The kernel's
 * sigaction all zero is SIG_DFL, whatever the order of its fields. */
static void signals_default(void)
{
	unsigned long none = 0, dfl[8] = {0};
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
	for (int sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, dfl, NULL, sizeof(none));
}

/* The environment less LD_PRELOAD, in place: this is the hub's own copy. */
static char **hub_env(int max)
{
	static char *none[] = {NULL};
	char **out = environ;
	int n = 0;
	if (!environ)
		return none;
	for (char **e = environ; *e && (!max || n < max); e++)
		if (strncmp(*e, "LD_PRELOAD=", 11))
			out[n++] = *e;
	out[n] = NULL;
	return out;
}

static void sched_and_limits_fresh(void)
{
	static const int res[] = {RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_DATA, RLIMIT_AS, RLIMIT_RSS, RLIMIT_MEMLOCK};
	unsigned char all[128];
	struct sched_param sp = {0};
	memset(all, 0xff, sizeof(all));
	syscall(SYS_sched_setaffinity, 0, sizeof(all), all); /* the kernel keeps the cpuset's */
	syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, &sp);
	syscall(SYS_setpriority, PRIO_PROCESS, 0, 0);
	for (unsigned i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
		if (syscall(SYS_setrlimit, res[i], &rl) == 0 || syscall(SYS_getrlimit, res[i], &rl) < 0)
			continue;
		rl.rlim_cur = rl.rlim_max;
		syscall(SYS_setrlimit, res[i], &rl);
	}
}

static void __attribute__((noreturn)) hub_main(const struct spawn_opt *o)
{
	int null = (int)syscall(SYS_open, "/dev/null", O_RDWR);
	int efd = o->err_fd;
	char **envp;
	if (efd < 0 && o->err_path)
		efd = (int)syscall(SYS_open, o->err_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
	syscall(SYS_dup2, null, 0);
	syscall(SYS_dup2, null, 1);
	syscall(SYS_dup2, efd >= 0 ? efd : null, 2);
	if (o->close_fds)
		syscall(SYS_close_range, 3, ~0u, 0);
	signals_default();
	if (o->fresh)
		sched_and_limits_fresh();
	envp = hub_env(o->env_max);
	spawn_execvpe(o->path, o->argv, envp);
	if (o->exec_failed)
		o->exec_failed(o->path, errno);
	syscall(SYS_exit, 127);
	__builtin_unreachable();
}

int spawn_hub(const struct spawn_opt *o)
{
	/* a clone with exit signal 0: no SIGCHLD, invisible to wait(-1) */
	pid_t pid = (pid_t)syscall(SYS_clone, 0, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		pid_t hub;
		if (o->fresh)
			setpgid(0, 0); /* in the caller's session: see above */
		else
			setsid();
		hub = (pid_t)syscall(SYS_fork);
		if (hub == 0)
			hub_main(o);
		if (o->pid_fd >= 0 && sys_write(o->pid_fd, &hub, sizeof(hub)) != sizeof(hub))
			syscall(SYS_exit, 1);
		syscall(SYS_exit, 0);
	}
	while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	return 0;
}

static const char *lib_hub_path(char *buf, size_t len)
{
	const char *env = getenv("RSHARE_HUB");
	const struct cfg *c = cfg_lib();
	Dl_info di;
	if (env && *env)
		return env;
	if (c && c->hub[0])
		return c->hub;
	if (dladdr((void *)spawn_lib_hub, &di) && di.dli_fname) {
		const char *slash = strrchr(di.dli_fname, '/');
		if (slash && (size_t)(slash - di.dli_fname) + 16 < len) {
			memcpy(buf, di.dli_fname, slash - di.dli_fname);
			strcpy(buf + (slash - di.dli_fname), "/rshared");
			if (access(buf, X_OK) == 0)
				return buf;
			/* installed layout: lib/rshare/librshare.so and sbin/rshared */
			strcpy(buf + (slash - di.dli_fname), "/../../sbin/rshared");
			if (access(buf, X_OK) == 0)
				return buf;
		}
	}
	return "rshared";
}

void spawn_lib_hub(void)
{
	char pbuf[PATH_MAX];
	char *argv[] = {(char *)"rshared", (char *)"--daemon", NULL};
	struct spawn_opt o = {.path = lib_hub_path(pbuf, sizeof(pbuf)), .argv = argv, .err_fd = -1,
			      .err_path = getenv("RSHARE_HUB_LOG"), .pid_fd = -1, .close_fds = 1,
			      .env_max = 255, .fresh = 1};
	spawn_hub(&o);
}
