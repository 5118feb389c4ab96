/*
 * exec.c - rshare sockets kept across exec, and handed to new programs
 * that other processes start (spawn.c: posix_spawn, system, popen; and a
 * vfork child's exec).
 *
 * An rshare socket without close-on-exec survives exec into a program
 * that is preloaded too: the hub is told first (cl_exec_begin), and the
 * new program finds its sockets in RSHARE_EXEC (exec_adopt, run by the
 * constructor): the hub connection's descriptor for each of the process's
 * pools, "c0/c1/c2/c3" (-1 where none), then for each kept descriptor
 * ";fd,kind,family,slot,gen,evfd,ino,self".  A program that is
 * not preloaded sees plain kernel sockets that never connected: every
 * call on them fails (ENOTCONN), nothing passes unseen.  When exec fails,
 * what was prepared is undone (exec_undo).  execv, execvp and the execl
 * forms go through execve and execvpe.
 *
 * A new program that another process starts (spawn mode) is the same but
 * for three things: the starter goes on, so nothing of its own changes
 * (its readiness descriptors stay, it is not exiting); the list names
 * close-on-exec descriptors too (up to EXEC_SPAWN_ALL of them), as the
 * starter's file actions may make them survive at another number; and the
 * new program finds each by the inode of its kernel object (ino) wherever
 * it is, turns a readiness descriptor (self) back into a kernel socket,
 * and gives back to the hub what it did not get.
 */
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "preload.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

extern char **environ;

#define EXEC_SPAWN_ALL 256

/* Does descriptor fd go in the list?  Those without close-on-exec, and in
 * spawn mode all, when there are not too many (all: 1). */
static int exec_listed(unsigned fd, int all)
{
	return pfd_tab[fd].kind >= FD_RS && (all || !(R(fcntl)((int)fd, F_GETFD) & FD_CLOEXEC));
}

/* Mark in keep the slots of the rshare descriptors below max that go in
 * the list (*nkeep of them); the number of rshare descriptors.  *all: in
 * spawn mode, whether the list names them all. */
static unsigned exec_mark_kept(unsigned max, uint8_t *keep, unsigned *nkeep, int spawn, int *all)
{
	unsigned n = 0;
	memset(keep, 0, CL_SLOTS);
	for (unsigned fd = 0; fd < max; fd++)
		n += pfd_tab[fd].kind >= FD_RS;
	*all = spawn && n <= EXEC_SPAWN_ALL;
	for (unsigned fd = 0; fd < max; fd++)
		if (exec_listed(fd, *all))
			keep[pfd_tab[fd].slot] = 1, (*nkeep)++;
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
	for (uint32_t sl = cl_slot_at(0); sl < CL_SLOTS; sl = cl_slot_at(sl + 1)) {
		struct arena_slot *as = cl_slot(sl);
		if (!keep[sl] && vs_held(sl)) {
			dslot[ndrop] = sl;
			dgen[ndrop++] = as->gen;
		}
	}
	return ndrop;
}

/* The kernel object of the socket at fd into st: in a vfork child, the
 * parent's (the table is the parent's, and the child may have closed fd,
 * or put something else at its number, as Python's subprocess does before
 * its exec; the new program finds the object wherever the child put it,
 * exec_find); -1 when fd names none */
static int exec_stat(unsigned fd, struct stat *st)
{
	char path[48];
	if (pl_vfork_child()) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%u", (int)cl.pid, fd);
		if (stat(path, st) == 0)
			return 0;
		if (errno == ENOENT && access("/proc/self", F_OK) == 0)
			return -1; /* no more in the parent either */
	}
	return fstat((int)fd, st);
}

/* RSHARE_EXEC=...: the listed descriptors below max (nkeep of them), their
 * listeners' wake-ups made to survive exec (into u->ev); NULL when out of
 * memory or room */
static char *exec_list(struct exec_undo *u, unsigned max, unsigned nkeep, int all)
{
	size_t len, cap = 64 + (size_t)nkeep * 96;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	len = (size_t)snprintf(s, cap, "RSHARE_EXEC=%d", u->ctl[0]);
	for (uint32_t k = 1; k < CL_POOLS; k++)
		len += (size_t)snprintf(s + len, cap - len, "/%d", u->ctl[k]);
	for (unsigned fd = 0; fd < max; fd++) {
		struct pfd *p = &pfd_tab[fd];
		struct stat st;
		if (!exec_listed(fd, all) || exec_stat(fd, &st) < 0)
			continue;
		if (p->kind == FD_LISTEN && p->evfd >= 0 && u->nev < 64 &&
		    sys_fcntl(p->evfd, F_SETFD, 0) == 0)
			u->ev[u->nev++] = p->evfd;
		len += (size_t)snprintf(s + len, cap - len, ";%u,%u,%u,%u,%u,%d,%llu,%d", fd, p->kind,
					p->family, p->slot, p->gen, p->evfd, (unsigned long long)st.st_ino,
					!!(p->flags & PFD_SELF));
		if (len >= cap) {
			free(s);
			return NULL;
		}
	}
	return s;
}

/* "LD_PRELOAD=" and the path of this library, made once */
static const char *exec_preload(void)
{
	static char v[PATH_MAX + 16];
	Dl_info di;
	if (!v[0] && dladdr((void *)exec_adopt, &di) && di.dli_fname && strlen(di.dli_fname) < PATH_MAX)
		snprintf(v, sizeof(v), "LD_PRELOAD=%s", di.dli_fname);
	return v[0] ? v : NULL;
}

/* u->env: envp without its RSHARE_EXEC, and s; and with this library in
 * LD_PRELOAD when envp has none, as a program that builds its children's
 * environment leaves it out (nginx keeps only TZ): the sockets that go
 * along need it.  One there, even empty, is the program's choice.  -1
 * when out of memory. */
static int exec_env(char *const envp[], char *s, struct exec_undo *u)
{
	unsigned n = 0;
	const char *pre = exec_preload();
	int has = 0;
	while (envp && envp[n])
		n++;
	u->env = malloc((n + 3) * sizeof(char *));
	if (!u->env)
		return -1;
	n = 0;
	for (unsigned i = 0; envp && envp[i]; i++) {
		if (!strncmp(envp[i], "RSHARE_EXEC=", 12))
			continue;
		has |= !strncmp(envp[i], "LD_PRELOAD=", 11);
		u->env[n++] = envp[i];
	}
	if (!has && pre)
		u->env[n++] = (char *)pre;
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
	for (uint32_t k = 0; k < CL_POOLS; k++) {
		if (u->ctl[k] >= 0)
			sys_close(u->ctl[k]);
		u->ctl[k] = -1;
	}
}

/* A connection for the new program in each pool (the dropped sockets,
 * NDROP of them pool after pool, let go); 0, or -1 when pool 0's failed
 * (another pool's sockets are lost to the new program when its fails). */
static int exec_begin(struct exec_undo *u, const uint32_t *dslot, const uint32_t *dgen, unsigned ndrop)
{
	unsigned i = 0;
	for (uint32_t k = 0; k < CL_POOLS; k++) {
		unsigned from = i;
		while (i < ndrop && dslot[i] >> CL_POOL_SHIFT == k)
			i++;
		if (cl.p[k].arena)
			u->ctl[k] = cl_exec_begin(k, dslot + from, dgen + from, (int)(i - from));
		if (u->ctl[k] < 0 && k == 0)
			return -1;
		if (u->ctl[k] < 0)
			u->ctl[k] = -1;
	}
	return 0;
}

/* "RSHARE_EXEC=..." for a program about to start (u: what to undo if
 * exec fails, or the starter's part to end once the program started),
 * or NULL: exec as asked.  spawn: another process starts it (see above). */
char *exec_prepare_list(struct exec_undo *u, int spawn)
{
	struct rlimit rl;
	unsigned max = pfd_max, nkeep = 0, ndrop;
	static uint32_t dslot[CL_SLOTS], dgen[CL_SLOTS];
	static uint8_t keep[CL_SLOTS];
	char *s;
	int all;
	for (uint32_t k = 0; k < CL_POOLS; k++)
		u->ctl[k] = -1;
	u->env = NULL;
	u->nev = 0;
	u->spawn = spawn;
	if (cl.attached <= 0 || !pfd_tab)
		return NULL;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < max)
		max = (unsigned)rl.rlim_cur;
	if (!exec_mark_kept(max, keep, &nkeep, spawn, &all))
		return NULL;
	if (!spawn)
		exec_unbecome(max, keep);
	ndrop = exec_dropped(keep, dslot, dgen);
	if (!nkeep || exec_begin(u, dslot, dgen, ndrop) < 0) {
		exec_fail(u, NULL);
		return NULL;
	}
	if (!(s = exec_list(u, max, nkeep, all)))
		exec_fail(u, NULL);
	return s;
}

/* The environment to exec with when sockets survive, or NULL (as above) */
char **exec_prepare(char *const envp[], struct exec_undo *u, int spawn)
{
	char *s = exec_prepare_list(u, spawn);
	if (s && exec_env(envp, s, u) == 0)
		return u->env;
	if (s)
		exec_fail(u, s);
	return NULL;
}

/* exec failed, or (spawn mode) the program started: the starter's
 * connection goes; what it held goes too unless the program took it */
void exec_undo(struct exec_undo *u)
{
	int e = errno;
	for (uint32_t k = 0; k < CL_POOLS; k++)
		if (u->ctl[k] >= 0)
			sys_close(u->ctl[k]);
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

struct exec_ent {
	unsigned fd, kind, family, slot, gen, self, found;
	int evfd;
	unsigned long long ino;
};

/* descriptor fd of the new program names the socket of e */
static void exec_place(int fd, struct exec_ent *e)
{
	if ((unsigned)fd >= pfd_max || pfd_tab[fd].kind >= FD_RS)
		return;
	if (e->self) {
		/* a readiness descriptor: a kernel socket again, as exec's */
		int k = R(socket)((int)e->family, SOCK_STREAM | SOCK_CLOEXEC, 0), fl = R(fcntl)(fd, F_GETFD);
		if (k >= 0) {
			sys_dup3(k, fd, fl > 0 && (fl & FD_CLOEXEC) ? O_CLOEXEC : 0);
			R(close)(k);
		}
	}
	pfd_set(&pfd_tab[fd], &(struct pfd){.kind = (uint8_t)e->kind, .family = (uint8_t)e->family,
					 .slot = e->slot, .gen = e->gen, .evfd = e->evfd});
	vs_ref(e->slot);
	e->found = 1;
}

/* Each descriptor of this program whose kernel object is one the list
 * names (by inode), wherever the starter's file actions put it. */
static void exec_find(struct exec_ent *e, unsigned n)
{
	struct stat st;
	struct dirent *d;
	DIR *dir;
	for (unsigned i = 0; i < n; i++)
		if (fstat((int)e[i].fd, &st) == 0 && st.st_ino == e[i].ino)
			exec_place((int)e[i].fd, &e[i]);
	if (!(dir = opendir("/proc/self/fd")))
		return;
	while ((d = readdir(dir))) {
		int fd = atoi(d->d_name);
		if (d->d_name[0] < '0' || d->d_name[0] > '9' || fd == dirfd(dir) || fstat(fd, &st) < 0 ||
		    !S_ISSOCK(st.st_mode))
			continue;
		for (unsigned i = 0; i < n; i++)
			if (st.st_ino == e[i].ino) {
				exec_place(fd, &e[i]);
				break;
			}
	}
	closedir(dir);
}

/* The connections of RSHARE_EXEC's head V, taken up pool by pool (END:
 * where the list goes on); -1 when pool 0's could not be, and then none
 * is (under io_uring, see syscall.c, none is wanted). */
static int exec_adopt_pools(const char *v, char **end)
{
	long ctl[CL_POOLS];
	uint32_t n = 0;
	const char *at = v;
	int bad = 0;
	do {
		ctl[n] = strtol(at, end, 10);
		bad |= *end == at;
		at = *end + 1;
	} while (!bad && ++n < CL_POOLS && **end == '/');
	if (bad || ctl[0] < 0 || !pfd_tab || cl.kernel_only || cl_exec_adopt(0, (int)ctl[0]) < 0) {
		for (uint32_t k = cl.kernel_only ? 0 : 1; k < n; k++)
			if (ctl[k] >= 0)
				sys_close((int)ctl[k]);
		return -1;
	}
	for (uint32_t k = 1; k < n; k++)
		if (ctl[k] >= 0)
			cl_exec_adopt(k, (int)ctl[k]);
	return 0;
}

/* In the new program: take up the sockets the old one kept (or the
 * starter handed on), and give back those that did not come. */
void exec_adopt(void)
{
	const char *v = getenv("RSHARE_EXEC"), *c;
	struct exec_ent *e;
	unsigned n = 0, cap = 0;
	char *end;
	if (!v || exec_adopt_pools(v, &end) < 0) {
		unsetenv("RSHARE_EXEC");
		return;
	}
	for (c = end; *c; c++)
		cap += *c == ';';
	e = calloc(cap + 1, sizeof(*e));
	while (e && *end == ';' && n < cap) {
		struct exec_ent *x = &e[n];
		int used = 0;
		if (sscanf(end + 1, "%u,%u,%u,%u,%u,%d,%llu,%u%n", &x->fd, &x->kind, &x->family, &x->slot,
			   &x->gen, &x->evfd, &x->ino, &x->self, &used) != 8 ||
		    x->slot >= CL_SLOTS || (x->kind != FD_RS && x->kind != FD_LISTEN))
			break;
		end += 1 + used;
		if (!cl.p[x->slot >> CL_POOL_SHIFT].arena) {
			/* its pool's connection did not come: lost, as on a failed exec */
			if (x->kind == FD_LISTEN && x->evfd >= 0)
				sys_close(x->evfd);
			continue;
		}
		if (x->kind == FD_LISTEN && x->evfd >= 0)
			sys_fcntl(x->evfd, F_SETFD, FD_CLOEXEC);
		n++;
	}
	if (e)
		exec_find(e, n);
	for (unsigned i = 0; e && i < n; i++)
		if (!e[i].found && !vs_held(e[i].slot)) {
			/* it did not come (closed, or close-on-exec): the hub's hold goes */
			vs_ref(e[i].slot);
			vs_unref(e[i].slot, e[i].gen);
		}
	free(e);
	unsetenv("RSHARE_EXEC");
}

/* Before an exec that may not come back.  A vfork child runs on its
 * parent's stack: built with AddressSanitizer, the redzones of our frames
 * that the exec leaves would stay marked there, and a later vfork child
 * whose own frames lie over them (Python's subprocess, whose child calls
 * sigaction) be taken for an overflow.  The marks go, as before a call
 * that never returns. */
static void exec_no_return(void)
{
#if defined(__SANITIZE_ADDRESS__)
	__asan_handle_no_return();
#endif
}

/* a vfork child (it shares its parent's memory): it execs as a program
 * its parent starts */
static int exec_spawned(void)
{
	return cl.attached > 0 && cl.pid && getpid() != cl.pid;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u, exec_spawned());
	int r;
	exec_no_return();
	r = R(execve)(path, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u, exec_spawned());
	int r;
	exec_no_return();
	r = R(execvpe)(file, argv, env ? env : envp);
	exec_undo(&u);
	return r;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char **env = exec_prepare(envp, &u, exec_spawned());
	int r;
	exec_no_return();
	r = R(fexecve)(fd, argv, env ? env : envp);
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
