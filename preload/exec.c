/*
 * exec.c - rshare sockets kept across exec.
 *
 * An rshare socket without close-on-exec survives exec into a program
 * that is preloaded too: the hub is told first (cl_exec_begin), and the
 * new program finds its sockets in RSHARE_EXEC (exec_adopt, run by the
 * constructor): the hub connection's descriptor, then for each kept
 * descriptor ";fd,kind,family,slot,gen,evfd".  A program that is not
 * preloaded sees plain kernel sockets that never connected: every call on
 * them fails (ENOTCONN), nothing passes unseen.  When exec fails, what
 * was prepared is undone (exec_undo).  execv, execvp and the execl forms
 * go through execve and execvpe.
 */
#include <sys/resource.h>

#include "preload.h"

extern char **environ;

struct exec_undo {
	int ctl;
	char **env;
	int nev, ev[64];
};

/* Mark in keep the slots of the rshare descriptors below max that survive
 * exec (*nkeep of them); the number of rshare descriptors. */
static unsigned exec_mark_kept(unsigned max, uint8_t *keep, unsigned *nkeep)
{
	unsigned n = 0;
	memset(keep, 0, ARENA_MAX_SLOTS);
	for (unsigned fd = 0; fd < max; fd++)
		if (pfd_tab[fd].kind >= FD_RS) {
			n++;
			if (!(R(fcntl)((int)fd, F_GETFD) & FD_CLOEXEC))
				keep[pfd_tab[fd].slot] = 1, (*nkeep)++;
		}
	return n;
}

/* The kept descriptors that are their connection's readiness descriptor
 * become kernel sockets again (preload/ready.c): the program after the
 * exec sees a socket that never connected when it is not preloaded, and
 * asks for the readiness descriptor again when it is. */
static void exec_unbecome(unsigned max, const uint8_t *keep)
{
	for (unsigned fd = 0; fd < max; fd++) {
		struct pfd *p = &pfd_tab[fd];
		if (p->kind == FD_RS && (p->flags & PFD_SELF) && keep[p->slot] &&
		    !(R(fcntl)((int)fd, F_GETFD) & FD_CLOEXEC))
			rd_unbecome((int)fd, p);
	}
}

/* every socket of this process that no surviving descriptor names, into
 * dslot and dgen: their number */
static unsigned exec_dropped(const uint8_t *keep, uint32_t *dslot, uint32_t *dgen)
{
	unsigned ndrop = 0;
	for (uint32_t sl = 0, n = cl_slots_hi(); sl < n; sl++) {
		struct arena_slot *as = cl_slot(sl);
		if (!keep[sl] && vs_held(sl)) {
			dslot[ndrop] = sl;
			dgen[ndrop++] = as->gen;
		}
	}
	return ndrop;
}

/* RSHARE_EXEC=...: the kept descriptors below max (nkeep of them), their
 * listeners' wake-ups made to survive exec (into u->ev); NULL when out of
 * memory or room */
static char *exec_list(struct exec_undo *u, unsigned max, unsigned nkeep)
{
	size_t len, cap = 64 + (size_t)nkeep * 64;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	len = (size_t)snprintf(s, cap, "RSHARE_EXEC=%d", u->ctl);
	for (unsigned fd = 0; fd < max; fd++) {
		struct pfd *p = &pfd_tab[fd];
		if (p->kind < FD_RS || (R(fcntl)((int)fd, F_GETFD) & FD_CLOEXEC))
			continue;
		if (p->kind == FD_LISTEN && p->evfd >= 0 && u->nev < 64 &&
		    sys_fcntl(p->evfd, F_SETFD, 0) == 0)
			u->ev[u->nev++] = p->evfd;
		len += (size_t)snprintf(s + len, cap - len, ";%u,%u,%u,%u,%u,%d", fd, p->kind, p->family,
					p->slot, p->gen, p->evfd);
		if (len >= cap) {
			free(s);
			return NULL;
		}
	}
	return s;
}

/* u->env: envp without its RSHARE_EXEC, and s; -1 when out of memory */
static int exec_env(char *const envp[], char *s, struct exec_undo *u)
{
	unsigned n = 0;
	while (envp && envp[n])
		n++;
	u->env = malloc((n + 2) * sizeof(char *));
	if (!u->env)
		return -1;
	n = 0;
	for (unsigned i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], "RSHARE_EXEC=", 12))
			u->env[n++] = envp[i];
	u->env[n++] = s;
	u->env[n] = NULL;
	return 0;
}

/* what exec_prepare made, undone before exec */
static void exec_fail(struct exec_undo *u, char *s)
{
	free(s);
	free(u->env);
	u->env = NULL;
	for (int i = 0; i < u->nev; i++)
		sys_fcntl(u->ev[i], F_SETFD, FD_CLOEXEC);
	sys_close(u->ctl);
	u->ctl = -1;
}

/* The environment to exec with when sockets survive (u: what to undo if
 * exec fails), or NULL: exec as asked. */
static char **exec_prepare(char *const envp[], struct exec_undo *u)
{
	struct rlimit rl;
	unsigned max = pfd_max, nkeep = 0, ndrop;
	static uint32_t dslot[ARENA_MAX_SLOTS], dgen[ARENA_MAX_SLOTS];
	static uint8_t keep[ARENA_MAX_SLOTS];
	char *s;
	u->ctl = -1;
	u->env = NULL;
	u->nev = 0;
	if (cl.attached <= 0 || !pfd_tab)
		return NULL;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < max)
		max = (unsigned)rl.rlim_cur;
	if (!exec_mark_kept(max, keep, &nkeep))
		return NULL;
	exec_unbecome(max, keep);
	ndrop = exec_dropped(keep, dslot, dgen);
	if (!nkeep || (u->ctl = cl_exec_begin(dslot, dgen, (int)ndrop)) < 0)
		return NULL;
	vs_exiting(1); /* close-on-exec sockets close as close() would */
	s = exec_list(u, max, nkeep);
	if (s && exec_env(envp, s, u) == 0)
		return u->env;
	exec_fail(u, s);
	return NULL;
}

/* exec failed: the connection goes, and with it what it held */
static void exec_undo(struct exec_undo *u)
{
	int e = errno;
	if (u->ctl >= 0) {
		sys_close(u->ctl);
		vs_exiting(0);
	}
	for (int i = 0; i < u->nev; i++)
		sys_fcntl(u->ev[i], F_SETFD, FD_CLOEXEC);
	if (u->env) {
		for (unsigned i = 0; u->env[i]; i++)
			if (!strncmp(u->env[i], "RSHARE_EXEC=", 12))
				free(u->env[i]);
		free(u->env);
	}
	errno = e;
}

/* In the new program: take up the sockets the old one kept. */
void exec_adopt(void)
{
	const char *v = getenv("RSHARE_EXEC");
	char *end;
	long ctl;
	if (!v)
		return;
	ctl = strtol(v, &end, 10);
	if (end == v || ctl < 0 || !pfd_tab || cl_exec_adopt((int)ctl) < 0) {
		unsetenv("RSHARE_EXEC");
		return;
	}
	while (*end == ';') {
		unsigned fd, kind, family, slot, gen;
		int evfd, used = 0;
		if (sscanf(end + 1, "%u,%u,%u,%u,%u,%d%n", &fd, &kind, &family, &slot, &gen, &evfd, &used) != 6 ||
		    fd >= pfd_max || slot >= ARENA_MAX_SLOTS || (kind != FD_RS && kind != FD_LISTEN))
			break;
		end += 1 + used;
		pfd_set(&pfd_tab[fd], &(struct pfd){.kind = (uint8_t)kind, .family = (uint8_t)family,
						 .slot = slot, .gen = gen, .evfd = evfd});
		if (kind == FD_LISTEN && evfd >= 0)
			sys_fcntl(evfd, F_SETFD, FD_CLOEXEC);
		vs_ref(slot);
	}
	unsetenv("RSHARE_EXEC");
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u);
	int r = R(execve)(path, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u);
	int r = R(execvpe)(file, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u);
	int r = R(fexecve)(fd, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* execl, execle, execlp: the arguments into an array, then as above */
static char **va_argv(const char *arg0, va_list ap, char ***envp)
{
	size_t n = 1, cap = 16;
	char **v = malloc(cap * sizeof(char *)), *a;
	if (!v)
		return NULL;
	v[0] = (char *)arg0;
	do {
		a = va_arg(ap, char *);
		if (n + 1 >= cap) {
			char **m = realloc(v, (cap *= 2) * sizeof(char *));
			if (!m) {
				free(v);
				return NULL;
			}
			v = m;
		}
		v[n++] = a;
	} while (a);
	if (envp)
		*envp = va_arg(ap, char **);
	return v;
}

/* exec the array va_argv made (NULL: out of memory), then free it;
 * search: execlp's path search (execvpe) */
static int exec_made(const char *file, char **v, char **env, int search)
{
	int r;
	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	r = search ? execvpe(file, v, env) : execve(file, v, env);
	free(v);
	return r;
}

int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v;
	va_start(ap, arg);
	v = va_argv(arg, ap, NULL);
	va_end(ap);
	return exec_made(path, v, environ, 0);
}

int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **v, **env = NULL;
	va_start(ap, arg);
	v = va_argv(arg, ap, &env);
	va_end(ap);
	return exec_made(path, v, env, 0);
}

int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **v;
	va_start(ap, arg);
	v = va_argv(arg, ap, NULL);
	va_end(ap);
	return exec_made(file, v, environ, 1);
}
