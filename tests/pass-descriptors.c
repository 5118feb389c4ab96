/*
 * pass-descriptors.c - a server that hands its sockets to other processes,
 * and its client, for comparing rshare with kernel TCP
 * (tests/sockets-move-between-processes-as-on-kernel-tcp.bats).
 *
 *   pass-descriptors serve HOW PORT N [UNIXPATH]
 *     accepts N connections on PORT; on each it writes "giver\n", hands
 *     the connection to another process, writes "after\n" on its own copy
 *     and closes it.  HOW: child (a child forked before the listener, over
 *     a socketpair), sibling (one child accepts, another takes), unrelated
 *     (the process of `take` at UNIXPATH), listener (it serves the first
 *     connection, then hands the listener itself to `take`, which serves
 *     the others), spawn, system, popen, vfork (a new program per
 *     connection, `serve-fd`, started that way, the connection on
 *     descriptor 90; the server closes its copy once it is started).
 *   pass-descriptors take UNIXPATH [N]
 *     an unrelated process: takes descriptors on a unix socket at UNIXPATH
 *     and serves each (a listener: N connections accepted on it).
 *   pass-descriptors take-many UNIXPATH GIVERS OWNPORT
 *     a process in a pool of its own (it listens on OWNPORT first) takes
 *     descriptors from GIVERS unrelated servers (other pools), one after
 *     the other at UNIXPATH: it serves the I-th connection it takes (or
 *     accepts: 2 on a listener, as `take`) here, in a forked child, or in
 *     a new program that a forked child execs, by turns; then serves one
 *     connection accepted on OWNPORT ("own").
 *   pass-descriptors serve-fd FD
 *     serves the connection on FD.
 *   pass-descriptors client HOST PORT N [K]
 *     N connections one after another, each reading K lines (1) before it
 *     writes "ping I"; prints what each read, up to EOF.
 * Serving a connection: read a line, answer "taken " and the line, close.
 * Each server prints "ready" once it listens.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "helpers.h"

extern char **environ;
static const char *self;

static void put(int fd, const char *s)
{
	size_t n = strlen(s);
	if (write(fd, s, n) != (ssize_t)n)
		t_die("write: %s", strerror(errno));
}

/* one line from fd (at most len - 1 bytes), NUL-terminated; its length */
static int get_line(int fd, char *b, int len)
{
	int n = 0;
	while (n < len - 1) {
		ssize_t r = read(fd, b + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			t_die("read: %s", strerror(errno));
		if (r == 0 || b[n++] == '\n')
			break;
	}
	b[n] = 0;
	return n;
}

static void serve(int c)
{
	char line[128], out[160];
	get_line(c, line, sizeof(line));
	snprintf(out, sizeof(out), "taken %s", line);
	put(c, out);
	close(c);
}

static int send_fd(int u, int fd)
{
	char b = 'f';
	struct iovec v = {.iov_base = &b, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof(int));
	return sendmsg(u, &m, 0) == 1 ? 0 : -1;
}

/* a descriptor from u, -1 at its end */
static int recv_fd(int u)
{
	char b;
	int fd = -1;
	struct iovec v = {.iov_base = &b, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
	if (recvmsg(u, &m, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(h), sizeof(int));
	return fd;
}

static void take_all(int u)
{
	int fd;
	while ((fd = recv_fd(u)) >= 0)
		serve(fd);
}

static int listener(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 64) < 0)
		t_die("listen %d: %s", port, strerror(errno));
	return l;
}

static int unix_to(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int u = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	for (int i = 0; i < 100; i++) {
		if (connect(u, (struct sockaddr *)&a, sizeof(a)) == 0)
			return u;
		usleep(50000);
	}
	t_die("connect %s: %s", path, strerror(errno));
}

/* a new program serves c, started as HOW says; c is closed here after */
static void spawn_one(const char *how, int c)
{
	char cmd[512], fdnum[16] = "90";
	char *argv[] = {(char *)self, (char *)"serve-fd", fdnum, NULL};
	pid_t pid;
	if (dup2(c, 90) < 0)
		t_die("dup2");
	if (c != 90)
		close(c);
	snprintf(cmd, sizeof(cmd), "exec %s serve-fd 90", self);
	if (!strcmp(how, "spawn")) {
		if (posix_spawn(&pid, self, NULL, NULL, argv, environ))
			t_die("posix_spawn");
	} else if (!strcmp(how, "vfork")) {
		if ((pid = vfork()) == 0) {
			execv(self, argv);
			_exit(127);
		}
	} else if (!strcmp(how, "popen")) {
		FILE *f = popen(cmd, "w");
		close(90);
		if (!f || pclose(f) != 0)
			t_die("popen");
		return;
	} else {
		t_die("serve: no such way %s", how);
	}
	close(90);
	waitpid(pid, NULL, 0);
}

static int do_serve(const char *how, int port, int n, const char *path)
{
	int sv[2] = {-1, -1}, u = -1, l, take_l = !strcmp(how, "listener");
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(how, "child") || !strcmp(how, "sibling")) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
			t_die("socketpair");
		if (fork() == 0) {
			close(sv[0]);
			take_all(sv[1]);
			_exit(0);
		}
		close(sv[1]);
		u = sv[0];
		if (!strcmp(how, "sibling") && fork() != 0) {
			/* the parent only waits: the second child gives */
			close(u);
			while (wait(NULL) > 0)
				;
			return 0;
		}
	} else if (!strcmp(how, "unrelated") || take_l) {
		u = unix_to(path);
	}
	l = listener(port);
	printf("ready\n");
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			t_die("accept: %s", strerror(errno));
		put(c, "giver\n");
		if (take_l) {
			serve(c); /* the first here, the others in `take` */
			if (send_fd(u, l) < 0)
				t_die("sendmsg: %s", strerror(errno));
			close(l);
			break;
		}
		if (u < 0 && strcmp(how, "system")) {
			spawn_one(how, c);
			continue;
		}
		if (u < 0) {
			char cmd[512];
			snprintf(cmd, sizeof(cmd), "exec %s serve-fd %d", self, c);
			if (system(cmd) != 0)
				t_die("system");
			close(c);
			continue;
		}
		if (send_fd(u, c) < 0)
			t_die("sendmsg: %s", strerror(errno));
		put(c, "after\n");
		close(c);
	}
	if (u >= 0)
		close(u);
	while (wait(NULL) > 0)
		;
	return 0;
}

/* serve c here (0), in a child (1), or in a program a child execs (2) */
static void serve_by(int c, int how)
{
	char fdnum[16];
	pid_t pid;
	if (!how) {
		serve(c);
		return;
	}
	if ((pid = fork()) < 0)
		t_die("fork: %s", strerror(errno));
	if (pid == 0 && how == 1) {
		serve(c);
		_exit(0);
	}
	if (pid == 0) {
		if (dup2(c, 90) < 0)
			_exit(126);
		snprintf(fdnum, sizeof(fdnum), "%d", 90);
		execl(self, self, "serve-fd", fdnum, (char *)NULL);
		_exit(127);
	}
	close(c);
	waitpid(pid, NULL, 0);
}

/* a unix listener at path, for givers to connect to */
static int unix_listen(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int ul = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	if (bind(ul, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ul, 4) < 0)
		t_die("unix listen: %s", strerror(errno));
	return ul;
}

/* What comes over u until its end: each connection served, each listener
 * accepted on NACC times (each connection told "taker" first), then
 * closed; here, or with TURN by turns (serve_by with *TURN, counted on) */
static void take_from(int u, int nacc, int *turn)
{
	int fd, acc;
	socklen_t al = sizeof(acc);
	while ((fd = recv_fd(u)) >= 0) {
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) == 0 && acc) {
			for (int i = 0; i < nacc; i++) {
				int c = accept(fd, NULL, NULL);
				if (c < 0)
					t_die("accept on the listener taken: %s", strerror(errno));
				put(c, "taker\n");
				serve_by(c, turn ? (*turn)++ % 3 : 0);
			}
			close(fd);
			continue;
		}
		serve_by(fd, turn ? (*turn)++ % 3 : 0);
	}
}

static int do_take(const char *path, int n)
{
	int ul = unix_listen(path);
	printf("ready\n");
	fflush(stdout);
	take_from(accept(ul, NULL, NULL), n - 1, NULL);
	return 0;
}

static int do_take_many(const char *path, int givers, int port)
{
	int l = listener(port), ul = unix_listen(path), turn = 0, u, c;
	printf("ready\n");
	fflush(stdout);
	for (int g = 0; g < givers; g++) {
		u = accept(ul, NULL, NULL);
		take_from(u, 2, &turn);
		close(u);
	}
	if ((c = accept(l, NULL, NULL)) < 0)
		t_die("accept on its own listener: %s", strerror(errno));
	put(c, "own\n");
	serve(c);
	return 0;
}

static int do_client(const char *host, int port, int n, int before)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, host, &a.sin_addr);
	for (int i = 0; i < n; i++) {
		char line[128], all[512] = "", msg[32];
		int c = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
			t_die("connect: %s", strerror(errno));
		for (int k = 0; k < before; k++) {
			get_line(c, line, sizeof(line));
			strcat(all, line);
		}
		snprintf(msg, sizeof(msg), "ping %d\n", i);
		put(c, msg);
		while (get_line(c, line, sizeof(line)) > 0 && strlen(all) + strlen(line) < sizeof(all))
			strcat(all, line);
		for (char *p = all; *p; p++)
			if (*p == '\n')
				*p = '|';
		printf("%d: %s\n", i, all);
		close(c);
	}
	return 0;
}

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc >= 5 && !strcmp(argv[1], "serve"))
		return do_serve(argv[2], atoi(argv[3]), atoi(argv[4]), argc > 5 ? argv[5] : "");
	if (argc >= 3 && !strcmp(argv[1], "take"))
		return do_take(argv[2], argc > 3 ? atoi(argv[3]) : 0);
	if (argc == 5 && !strcmp(argv[1], "take-many"))
		return do_take_many(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 3 && !strcmp(argv[1], "serve-fd")) {
		serve(atoi(argv[2]));
		return 0;
	}
	if (argc >= 5 && !strcmp(argv[1], "client"))
		return do_client(argv[2], atoi(argv[3]), atoi(argv[4]), argc > 5 ? atoi(argv[5]) : 1);
	fprintf(stderr, "usage: pass-descriptors serve HOW PORT N [UNIXPATH] | take UNIXPATH [N] |"
			" take-many UNIXPATH GIVERS OWNPORT | serve-fd FD | client HOST PORT N [K]\n");
	return 2;
}
