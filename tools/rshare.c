/*
 * rshare - the command: run a program under rshare, show what the hub of
 * this node sees, start and stop the hub.  See rshare(1).
 *
 * Exit status, as iproute2: 0 done, 1 a runtime error (no hub, a hub that
 * would not start or stop), 2 a usage error.  `rshare run` exits with the
 * command's status (127 when it cannot be found, 126 when it cannot run).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "config.h"
#include "msg.h"

#define USAGE_RUN "rshare run [ --transport auto|verbs|soft ] [ --rcvbuf SIZE ] [ --sndbuf SIZE ] " \
		  "[ --log LEVEL ] [ --port PORT ] [ -- ] COMMAND [ ARG... ]"
#define USAGE_STAT "rshare stat [ -l | -p | -a ] [ -w ] [ --json ] [ state STATE ] " \
		   "[ sport|dport|port [:]PORT ] [ pid PID ]"
#define USAGE_HUB "rshare hub { start [ --port PORT ] [ --log LEVEL ] [ --transport auto|verbs|soft ] " \
		  "| stop | status }"

static void usage(FILE *f)
{
	fprintf(f, "Usage: " USAGE_RUN "\n"
		   "       " USAGE_STAT "\n"
		   "       " USAGE_HUB "\n"
		   "       rshare version\n"
		   "       rshare help\n"
		   "STATE := { established | listening | connecting | fallback | closed | linger }\n"
		   "SIZE := NUMBER[K|M] from 4K to 4M     LEVEL := { error | warn | info | debug }\n");
}

static int bad_usage(const char *line)
{
	fprintf(stderr, "Usage: %s\n", line);
	return 2;
}

__attribute__((format(printf, 1, 2))) static int bad_arg(const char *fmt, ...)
{
	va_list ap;
	fputs("rshare: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

/* ---- where things are ---- */

/* The directory of this binary, without the final slash. */
static int exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;
	if (n <= 0)
		return -1;
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return 0;
}

/* The first of DIR/CANDS[i] that passes access(MODE), as a real path. */
static int find_near(char *buf, size_t len, const char *const *cands, int n, int mode)
{
	char dir[PATH_MAX - 64];
	if (exe_dir(dir, sizeof(dir)) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if ((size_t)snprintf(buf, len, "%s%s", dir, cands[i]) >= len)
			return -1;
		if (access(buf, mode) == 0) {
			char *r = realpath(buf, NULL);
			if (r) {
				snprintf(buf, len, "%s", r);
				free(r);
			}
			return 0;
		}
	}
	return -1;
}

/* built: build/librshare.so next to build/rshare; installed: bin/ and lib/rshare/ */
static int find_lib(char *buf, size_t len)
{
	static const char *const cands[] = {"/librshare.so", "/../lib/rshare/librshare.so"};
	return find_near(buf, len, cands, 2, R_OK);
}

/* RSHARE_HUB or the configuration's hub, else next to us, else PATH */
static const char *find_hub(const struct cfg *c, char *buf, size_t len)
{
	static const char *const cands[] = {"/rshared", "/../sbin/rshared"};
	if (c && c->hub[0])
		return c->hub;
	if (find_near(buf, len, cands, 2, X_OK) == 0)
		return buf;
	return "rshared";
}

/* ---- asking the hub ---- */

/* The hub's whole answer to STAT (malloc'd, NUL-terminated), or NULL. */
static char *hub_query(int json, size_t *lenp)
{
	struct msg_req q = {.op = MSG_STAT, .arg = json};
	size_t len = 0, cap = 65536;
	char *buf;
	ssize_t n;
	int fd = cl_hub_connect();
	if (fd < 0)
		return NULL;
	if (send(fd, &q, sizeof(q), MSG_NOSIGNAL) != sizeof(q) || !(buf = malloc(cap))) {
		close(fd);
		return NULL;
	}
	for (;;) {
		if (cap - len < 65536 + 1) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	close(fd);
	if (len == 0) {
		free(buf);
		return NULL;
	}
	buf[len] = 0;
	if (lenp)
		*lenp = len;
	return buf;
}

/* ---- a small JSON reader: the hub's stat schema is fixed (hub_stat.c) ---- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	int type;
	const char *raw;     /* the value's text in the input */
	size_t rawlen;
	char *key;           /* a member's key */
	char *str;           /* J_STR: the decoded string */
	double num;          /* J_NUM, J_BOOL */
	struct jv *kid;      /* J_ARR, J_OBJ */
	size_t nkid;
};

struct jp {
	const char *p, *end;
	int depth;
};

static void jskip(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static char *jstring(struct jp *j)
{
	char *out, *o;
	if (j->p >= j->end || *j->p != '"')
		return NULL;
	j->p++;
	out = o = malloc(j->end - j->p + 1);
	if (!out)
		return NULL;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;
		if (c == '\\') {
			if (j->p >= j->end)
				break;
			c = *j->p++;
			switch (c) {
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				unsigned v = 0;
				for (int i = 0; i < 4; i++, j->p++) {
					char h = j->p < j->end ? *j->p : 'x';
					v <<= 4;
					if (h >= '0' && h <= '9')
						v |= h - '0';
					else if ((h | 32) >= 'a' && (h | 32) <= 'f')
						v |= (h | 32) - 'a' + 10;
					else {
						free(out);
						return NULL;
					}
				}
				c = v < 0x80 ? (char)v : '?';
				break;
			}
			default: break; /* \" \\ \/ */
			}
		}
		*o++ = c;
	}
	if (j->p >= j->end) {
		free(out);
		return NULL;
	}
	j->p++;
	*o = 0;
	return out;
}

static int jvalue(struct jp *j, struct jv *v)
{
	memset(v, 0, sizeof(*v));
	jskip(j);
	if (j->p >= j->end || ++j->depth > 32)
		return -1;
	v->raw = j->p;
	if (*j->p == '{' || *j->p == '[') {
		char close = *j->p == '{' ? '}' : ']';
		size_t cap = 0;
		v->type = *j->p == '{' ? J_OBJ : J_ARR;
		j->p++;
		jskip(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
		} else {
			for (;;) {
				char *key = NULL;
				if (v->nkid == cap) {
					struct jv *nk = realloc(v->kid, (cap = cap ? cap * 2 : 8) * sizeof(*nk));
					if (!nk)
						return -1;
					v->kid = nk;
				}
				if (v->type == J_OBJ) {
					jskip(j);
					if (!(key = jstring(j)))
						return -1;
					jskip(j);
					if (j->p >= j->end || *j->p++ != ':') {
						free(key);
						return -1;
					}
				}
				if (jvalue(j, &v->kid[v->nkid]) < 0) {
					free(key);
					return -1;
				}
				v->kid[v->nkid++].key = key;
				jskip(j);
				if (j->p < j->end && *j->p == ',') {
					j->p++;
					continue;
				}
				if (j->p < j->end && *j->p == close) {
					j->p++;
					break;
				}
				return -1;
			}
		}
	} else if (*j->p == '"') {
		v->type = J_STR;
		if (!(v->str = jstring(j)))
			return -1;
	} else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
		v->type = J_BOOL;
		v->num = *j->p == 't';
		j->p += *j->p == 't' ? 4 : 5;
	} else if (!strncmp(j->p, "null", 4)) {
		v->type = J_NULL;
		j->p += 4;
	} else {
		char *e;
		v->type = J_NUM;
		v->num = strtod(j->p, &e);
		if (e == j->p)
			return -1;
		j->p = e;
	}
	v->rawlen = j->p - v->raw;
	j->depth--;
	return 0;
}

static int json_parse(const char *s, size_t len, struct jv *out)
{
	struct jp j = {.p = s, .end = s + len};
	if (jvalue(&j, out) < 0 || out->type != J_OBJ)
		return -1;
	jskip(&j);
	return j.p == j.end ? 0 : -1;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
	for (size_t i = 0; o && o->type == J_OBJ && i < o->nkid; i++)
		if (!strcmp(o->kid[i].key, key))
			return &o->kid[i];
	return NULL;
}

static unsigned long long jnum(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);
	return v && v->type == J_NUM && v->num > 0 ? (unsigned long long)v->num : 0;
}

static const char *jstr(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);
	return v && v->type == J_STR ? v->str : "-";
}

static const struct jv *jarr(const struct jv *o, const char *key)
{
	static const struct jv empty = {.type = J_ARR};
	const struct jv *v = jget(o, key);
	return v && v->type == J_ARR ? v : &empty;
}

/* ---- stat ---- */

struct filter {
	unsigned states;         /* bit per state name; 0: all */
	int sport, dport, port;  /* -1: any */
	long pid;                /* -1: any */
};

static const char *const state_names[] = {"connecting", "established", "listening", "fallback", "closed",
					  "linger"};
#define NSTATES (int)(sizeof(state_names) / sizeof(state_names[0]))

static int port_of(const char *addr)
{
	const char *c = strrchr(addr, ':');
	return c && c[1] ? atoi(c + 1) : -1;
}

static int sock_holds(const struct jv *s, long pid)
{
	const struct jv *h = jarr(s, "holders");
	for (size_t i = 0; i < h->nkid; i++)
		if (h->kid[i].type == J_NUM && (long)h->kid[i].num == pid)
			return 1;
	return 0;
}

static int sock_match(const struct jv *s, const struct filter *f)
{
	int lp = port_of(jstr(s, "local")), pp = port_of(jstr(s, "peer"));
	if (f->states) {
		int ok = 0;
		for (int i = 0; i < NSTATES; i++)
			if ((f->states & (1u << i)) && !strcmp(jstr(s, "state"), state_names[i]))
				ok = 1;
		if (!ok)
			return 0;
	}
	if (f->sport >= 0 && lp != f->sport)
		return 0;
	if (f->dport >= 0 && pp != f->dport)
		return 0;
	if (f->port >= 0 && lp != f->port && pp != f->port)
		return 0;
	if (f->pid >= 0 && !sock_holds(s, f->pid))
		return 0;
	return 1;
}

static int filtering(const struct filter *f)
{
	return f->states || f->sport >= 0 || f->dport >= 0 || f->port >= 0 || f->pid >= 0;
}

/* The hub's JSON with the sockets (and, for pid, the processes) filtered. */
static void print_json(const char *raw, const struct jv *root, const struct filter *f)
{
	if (!filtering(f)) {
		fputs(raw, stdout);
		return;
	}
	putchar('{');
	for (size_t i = 0; i < root->nkid; i++) {
		const struct jv *m = &root->kid[i];
		printf("%s\"%s\":", i ? "," : "", m->key);
		if (m->type == J_ARR && (!strcmp(m->key, "sockets") || !strcmp(m->key, "processes"))) {
			int first = 1, socks = !strcmp(m->key, "sockets");
			putchar('[');
			for (size_t k = 0; k < m->nkid; k++) {
				const struct jv *e = &m->kid[k];
				if (socks ? !sock_match(e, f) : (f->pid >= 0 && (long)jnum(e, "pid") != f->pid))
					continue;
				printf("%s%.*s", first ? "" : ",", (int)e->rawlen, e->raw);
				first = 0;
			}
			putchar(']');
		} else {
			printf("%.*s", (int)m->rawlen, m->raw);
		}
	}
	puts("}");
}

static void print_links(const struct jv *root)
{
	const struct jv *ls = jarr(root, "links");
	printf("%-4s %-16s %-22s %-5s %-10s %-3s %6s %7s %12s %12s %10s %10s\n", "Id", "Peer-Node", "Peer",
	       "Xport", "State", "Dir", "Conns", "Total", "Bytes-Tx", "Bytes-Rx", "Msgs-Tx", "Msgs-Rx");
	for (size_t i = 0; i < ls->nkid; i++) {
		const struct jv *l = &ls->kid[i];
		printf("%-4llu %-16s %-22s %-5s %-10s %-3s %6llu %7llu %12llu %12llu %10llu %10llu\n",
		       jnum(l, "id"), jstr(l, "peer_node"), jstr(l, "peer"), jstr(l, "transport"), jstr(l, "state"),
		       jstr(l, "direction"), jnum(l, "connections"), jnum(l, "connections_total"),
		       jnum(l, "bytes_tx"), jnum(l, "bytes_rx"), jnum(l, "msgs_tx"), jnum(l, "msgs_rx"));
	}
}

static void print_pools(const struct jv *root, const struct filter *f)
{
	const struct jv *ps = jarr(root, "pools"), *pr = jarr(root, "processes");
	printf("%-6s %9s %8s %12s\n", "Pool", "Processes", "Sockets", "Ring-Bytes");
	for (size_t i = 0; i < ps->nkid; i++)
		printf("%-6llu %9llu %8llu %12llu\n", jnum(&ps->kid[i], "id"), jnum(&ps->kid[i], "processes"),
		       jnum(&ps->kid[i], "sockets"), jnum(&ps->kid[i], "ring_bytes"));
	printf("\n%-8s %-6s %s\n", "Pid", "Pool", "Sockets");
	for (size_t i = 0; i < pr->nkid; i++) {
		const struct jv *p = &pr->kid[i], *s = jarr(p, "sockets");
		if (f->pid >= 0 && (long)jnum(p, "pid") != f->pid)
			continue;
		printf("%-8llu %-6llu ", jnum(p, "pid"), jnum(p, "pool"));
		for (size_t k = 0; k < s->nkid; k++)
			printf("%s%llu", k ? "," : "", (unsigned long long)s->kid[k].num);
		printf("%s\n", s->nkid ? "" : "-");
	}
}

static void print_sockets(const struct jv *root, const struct filter *f)
{
	const struct jv *ss = jarr(root, "sockets");
	printf("%-12s %-24s %-24s %5s %5s %4s %12s %12s  %s\n", "State", "Local Address:Port",
	       "Peer Address:Port", "Sid", "Pool", "Link", "Bytes-Tx", "Bytes-Rx", "Process");
	for (size_t i = 0; i < ss->nkid; i++) {
		const struct jv *s = &ss->kid[i], *h = jarr(s, "holders");
		if (!sock_match(s, f))
			continue;
		char link[24];
		if (jnum(s, "same_node"))
			strcpy(link, "same"); /* same node: shared memory, no link */
		else
			snprintf(link, sizeof(link), "%llu", jnum(s, "link"));
		printf("%-12s %-24s %-24s %5llu %5llu %4s %12llu %12llu  pids=(", jstr(s, "state"),
		       jstr(s, "local"), jstr(s, "peer"), jnum(s, "sid"), jnum(s, "pool"), link,
		       jnum(s, "bytes_tx"), jnum(s, "bytes_rx"));
		for (size_t k = 0; k < h->nkid; k++)
			printf("%s%lld", k ? "," : "", (long long)h->kid[k].num);
		printf(")\n");
	}
}

enum { SHOW_SOCKETS = 1, SHOW_LINKS = 2, SHOW_POOLS = 4 };

static int stat_once(int json, int show, const struct filter *f)
{
	struct jv root;
	size_t len;
	char *raw = hub_query(1, &len);
	if (!raw) {
		fprintf(stderr, "rshare: no hub runs in this network namespace\n");
		return 1;
	}
	if (json_parse(raw, len, &root) < 0) {
		fprintf(stderr, "rshare: the hub's answer is not the JSON expected\n");
		free(raw);
		return 1;
	}
	if (json) {
		print_json(raw, &root, f);
	} else {
		int sep = 0;
		if (show & SHOW_LINKS) {
			print_links(&root);
			sep = 1;
		}
		if (show & SHOW_POOLS) {
			if (sep)
				putchar('\n');
			print_pools(&root, f);
			sep = 1;
		}
		if (show & SHOW_SOCKETS) {
			if (sep)
				putchar('\n');
			print_sockets(&root, f);
		}
	}
	fflush(stdout);
	/* one process, one answer: what the tree holds goes with the exit */
	free(raw);
	return 0;
}

static int parse_port_arg(const char *s, int *out)
{
	if (*s == ':')
		s++;
	return cfg_parse_port(s, out);
}

static int cmd_stat(int argc, char **argv)
{
	struct filter f = {.sport = -1, .dport = -1, .port = -1, .pid = -1};
	int json = 0, watch = 0, show = 0, ret;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json") || !strcmp(a, "-j")) {
			json = 1;
		} else if (!strcmp(a, "-w") || !strcmp(a, "--watch")) {
			watch = 1;
		} else if (!strcmp(a, "-l") || !strcmp(a, "--links")) {
			show |= SHOW_LINKS;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--pools") || !strcmp(a, "--processes")) {
			show |= SHOW_POOLS;
		} else if (!strcmp(a, "-a") || !strcmp(a, "--all")) {
			show |= SHOW_LINKS | SHOW_POOLS | SHOW_SOCKETS;
		} else if (!strcmp(a, "state")) {
			int k;
			if (++i >= argc)
				return bad_usage(USAGE_STAT);
			for (k = 0; k < NSTATES && strcmp(argv[i], state_names[k]); k++)
				;
			if (k == NSTATES)
				return bad_arg("invalid state \"%s\": want established, listening, connecting, "
					       "fallback, closed or linger", argv[i]);
			f.states |= 1u << k;
		} else if (!strcmp(a, "sport") || !strcmp(a, "dport") || !strcmp(a, "port") || !strcmp(a, "src") ||
			   !strcmp(a, "dst")) {
			int *dst = a[0] == 's' ? &f.sport : a[0] == 'd' ? &f.dport : &f.port;
			if (i + 1 < argc && (!strcmp(argv[i + 1], "=") || !strcmp(argv[i + 1], "eq") ||
					     !strcmp(argv[i + 1], "==")))
				i++;
			if (++i >= argc)
				return bad_usage(USAGE_STAT);
			if (parse_port_arg(argv[i], dst) < 0)
				return bad_arg("invalid port \"%s\"", argv[i]);
		} else if (!strcmp(a, "pid")) {
			char *e;
			if (++i >= argc)
				return bad_usage(USAGE_STAT);
			f.pid = strtol(argv[i], &e, 10);
			if (*e || e == argv[i] || f.pid <= 0 || f.pid > 0x3fffffff)
				return bad_arg("invalid pid \"%s\"", argv[i]);
		} else if (!strcmp(a, "help") || !strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("Usage: %s\n", USAGE_STAT);
			return 0;
		} else {
			return bad_usage(USAGE_STAT);
		}
	}
	if (!show)
		show = SHOW_SOCKETS;
	if (!watch)
		return stat_once(json, show, &f);
	for (int n = 0;; n++) {
		if (isatty(1) && !json)
			fputs("\033[H\033[2J", stdout);
		else if (n && !json)
			putchar('\n');
		ret = stat_once(json, show, &f);
		if (ret)
			return ret;
		sleep(1);
	}
}

/* ---- the hub ---- */

struct hub_info {
	long pid;
	char node[32];
	unsigned port;
};

static int hub_info(struct hub_info *hi)
{
	struct jv root;
	size_t len;
	char *raw = hub_query(1, &len);
	int ret = -1;
	if (!raw)
		return -1;
	if (json_parse(raw, len, &root) == 0) {
		hi->pid = (long)jnum(&root, "pid");
		snprintf(hi->node, sizeof(hi->node), "%s", jstr(&root, "node"));
		hi->port = (unsigned)jnum(&root, "port");
		ret = hi->pid > 0 ? 0 : -1;
	}
	free(raw);
	return ret;
}

static void print_hub(const struct hub_info *hi)
{
	printf("hub: pid %ld node %s port %u\n", hi->pid, hi->node, hi->port);
}

static int pid_gone(pid_t pid)
{
	char path[64], buf[256], *rp;
	int fd, n;
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	/* a zombie nobody has reaped yet is gone too */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * Start PATH as this namespace's hub, a daemon in its own session that is
 * no child of ours (the program `rshare run` becomes never sees it), and
 * wait until it answers.  Until then its stderr comes to us through a
 * pipe, so that a hub that fails says why; RSHARE_HUB_LOG names a file for
 * its log instead.  0, or -1 after printing what went wrong.
 */
static int hub_spawn(const char *path, int port, int quiet)
{
	int errp[2], pidp[2], logfd = -1;
	const char *log = getenv("RSHARE_HUB_LOG");
	char portstr[16], out[4096];
	size_t outlen = 0;
	pid_t child, hub = -1;
	char *argv[] = {(char *)"rshared", (char *)"--daemon", NULL, NULL, NULL};
	if (port > 0) {
		snprintf(portstr, sizeof(portstr), "%d", port);
		argv[2] = (char *)"--port";
		argv[3] = portstr;
	}
	if (log && *log && (logfd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "rshare: %s: %s\n", log, strerror(errno));
		return -1;
	}
	if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(pidp, O_CLOEXEC) < 0) {
		fprintf(stderr, "rshare: pipe: %s\n", strerror(errno));
		return -1;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "rshare: fork: %s\n", strerror(errno));
		return -1;
	}
	if (child == 0) {
		pid_t p;
		setsid();
		p = fork();
		if (p == 0) {
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(logfd >= 0 ? logfd : errp[1], 2);
			signal(SIGPIPE, SIG_DFL);
			unsetenv("LD_PRELOAD");
			if (strchr(path, '/'))
				execv(path, argv);
			else
				execvp(path, argv);
			fprintf(stderr, "rshare: cannot run the hub %s: %s\n", path, strerror(errno));
			_exit(127);
		}
		if (write(pidp[1], &p, sizeof(p)) != sizeof(p))
			_exit(1);
		_exit(0);
	}
	close(errp[1]);
	close(pidp[1]);
	if (logfd >= 0)
		close(logfd);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	if (read(pidp[0], &hub, sizeof(hub)) != sizeof(hub))
		hub = -1;
	close(pidp[0]);
	for (int t = 0, eof = 0; t < 100; t++) { /* 10 s */
		struct pollfd pf = {.fd = errp[0], .events = POLLIN};
		char *ans;
		/* at end of file (the hub's stderr went to a log, or it closed it)
		 * the pipe no longer paces the wait: sleep instead */
		if (eof) {
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
		} else if (poll(&pf, 1, 100) > 0) {
			ssize_t n = read(errp[0], out + outlen, sizeof(out) - 1 - outlen);
			if (n > 0)
				outlen += n;
			else
				eof = 1;
		}
		/* up is when it answers STAT: its links' port is open by then */
		if ((ans = hub_query(1, NULL))) {
			free(ans);
			close(errp[0]);
			return 0;
		}
		if (hub <= 0 || pid_gone(hub)) {
			/* collect the last words */
			ssize_t n;
			while (outlen < sizeof(out) - 1 && (n = read(errp[0], out + outlen, sizeof(out) - 1 - outlen)) > 0)
				outlen += n;
			break;
		}
	}
	close(errp[0]);
	if (!quiet) {
		out[outlen] = 0;
		if (outlen)
			fputs(out, stderr);
		if (outlen && out[outlen - 1] != '\n')
			fputc('\n', stderr);
	}
	fprintf(stderr, "rshare: the hub (%s) did not start\n", path);
	return -1;
}

/* --opt VALUE or --opt=VALUE; advances *I.  NULL when ARGV[*I] is not OPT. */
static const char *opt_value(int argc, char **argv, int *i, const char *opt, int *missing)
{
	size_t n = strlen(opt);
	const char *a = argv[*i];
	if (strncmp(a, opt, n))
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n])
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

/* The options run and hub start share: they become RSHARE_* variables. */
static int common_opt(int argc, char **argv, int *i, int *handled, const char *usage_line)
{
	static const struct {
		const char *opt, *env;
	} opts[] = {{"--transport", "RSHARE_TRANSPORT"}, {"--rcvbuf", "RSHARE_RCVBUF"},
		    {"--sndbuf", "RSHARE_SNDBUF"}, {"--log", "RSHARE_LOG"}, {"--port", "RSHARE_PORT"}};
	*handled = 0;
	for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
		int missing = 0, iv;
		uint32_t sz;
		const char *v = opt_value(argc, argv, i, opts[k].opt, &missing);
		if (missing)
			return bad_usage(usage_line);
		if (!v)
			continue;
		*handled = 1;
		if ((k == 0 && cfg_parse_transport(v) < 0))
			return bad_arg("invalid transport \"%s\": want auto, verbs or soft", v);
		if ((k == 1 || k == 2) && cfg_parse_size(v, &sz) < 0)
			return bad_arg("invalid size \"%s\" for %s: want a number from 4K to 4M", v, opts[k].opt);
		if (k == 3 && cfg_parse_log(v, &iv) < 0)
			return bad_arg("invalid log level \"%s\": want error, warn, info or debug", v);
		if (k == 4 && cfg_parse_port(v, &iv) < 0)
			return bad_arg("invalid port \"%s\"", v);
		setenv(opts[k].env, v, 1);
		return 0;
	}
	return 0;
}

/* Configuration, then RSHARE_* (where the options already are). */
static int load_config(struct cfg *c)
{
	char err[CFG_LINE_MAX + 2 * CFG_PATH_MAX];
	if (cfg_load(NULL, c, err, sizeof(err)) < 0 || cfg_env(c, err, sizeof(err)) < 0) {
		fprintf(stderr, "rshare: %s\n", err);
		return -1;
	}
	return 0;
}

/* What the configuration says and no variable overrides goes to the
 * environment, so that the hub and the library see the same. */
static void export_config(const struct cfg *c)
{
	static const char *const lv[] = {"error", "warn", "info", "debug"};
	char num[32];
	if (c->transport[0])
		setenv("RSHARE_TRANSPORT", c->transport, 0);
	if (c->port) {
		snprintf(num, sizeof(num), "%d", c->port);
		setenv("RSHARE_PORT", num, 0);
	}
	if (c->log >= 0 && c->log < 4)
		setenv("RSHARE_LOG", lv[c->log], 0);
	if (c->rcvbuf) {
		snprintf(num, sizeof(num), "%u", c->rcvbuf);
		setenv("RSHARE_RCVBUF", num, 0);
	}
	if (c->sndbuf) {
		snprintf(num, sizeof(num), "%u", c->sndbuf);
		setenv("RSHARE_SNDBUF", num, 0);
	}
	if (c->hub[0])
		setenv("RSHARE_HUB", c->hub, 0);
}

static int cmd_hub(int argc, char **argv)
{
	struct hub_info hi;
	if (argc < 1)
		return bad_usage(USAGE_HUB);
	if (!strcmp(argv[0], "help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
		printf("Usage: %s\n", USAGE_HUB);
		return 0;
	}
	if (!strcmp(argv[0], "status")) {
		if (argc > 1)
			return bad_usage(USAGE_HUB);
		if (hub_info(&hi) < 0) {
			printf("no hub\n");
			return 1;
		}
		print_hub(&hi);
		return 0;
	}
	if (!strcmp(argv[0], "stop")) {
		if (argc > 1)
			return bad_usage(USAGE_HUB);
		if (hub_info(&hi) < 0) {
			fprintf(stderr, "rshare: no hub runs in this network namespace\n");
			return 1;
		}
		if (kill((pid_t)hi.pid, SIGTERM) < 0 && errno != ESRCH) {
			fprintf(stderr, "rshare: cannot stop the hub (pid %ld): %s\n", hi.pid, strerror(errno));
			return 1;
		}
		for (int t = 0; t < 200; t++) { /* 10 s */
			int fd = cl_hub_connect();
			if (fd >= 0)
				close(fd);
			else if (pid_gone((pid_t)hi.pid))
				return 0;
			sleep_ms(50);
		}
		fprintf(stderr, "rshare: the hub (pid %ld) did not stop within 10 s\n", hi.pid);
		return 1;
	}
	if (!strcmp(argv[0], "start")) {
		struct cfg c;
		char buf[PATH_MAX];
		for (int i = 1; i < argc; i++) {
			int handled, r;
			/* ring sizes are the library's business, not the hub's */
			if (!strncmp(argv[i], "--rcvbuf", 8) || !strncmp(argv[i], "--sndbuf", 8))
				return bad_usage(USAGE_HUB);
			if ((r = common_opt(argc, argv, &i, &handled, USAGE_HUB)))
				return r;
			if (!handled)
				return bad_usage(USAGE_HUB);
		}
		if (load_config(&c) < 0)
			return 1;
		if (hub_info(&hi) == 0) {
			print_hub(&hi);
			return 0;
		}
		export_config(&c);
		if (hub_spawn(find_hub(&c, buf, sizeof(buf)), c.port, 0) < 0)
			return 1;
		if (hub_info(&hi) < 0) {
			fprintf(stderr, "rshare: the hub started but does not answer\n");
			return 1;
		}
		print_hub(&hi);
		return 0;
	}
	fprintf(stderr, "Command \"%s\" is unknown, try \"rshare help\".\n", argv[0]);
	return 2;
}

/* ---- run ---- */

static int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX], hubbuf[PATH_MAX], *pre;
	const char *old = getenv("LD_PRELOAD");
	struct cfg c;
	int i, use = 1, fd;
	for (i = 0; i < argc; i++) {
		int handled, r;
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (argv[i][0] != '-')
			break;
		if ((r = common_opt(argc, argv, &i, &handled, USAGE_RUN)))
			return r;
		if (!handled)
			return bad_arg("unknown option \"%s\" of run, try \"rshare help\"", argv[i]);
	}
	if (i >= argc)
		return bad_usage(USAGE_RUN);
	if (load_config(&c) < 0)
		use = 0; /* said once; the command runs on kernel TCP */
	if (use) {
		if (find_lib(lib, sizeof(lib)) < 0) {
			fprintf(stderr, "rshare: cannot find librshare.so next to this rshare\n");
			return 1;
		}
		export_config(&c);
		if ((fd = cl_hub_connect()) >= 0)
			close(fd);
		else if (!getenv("RSHARE_NO_AUTOSTART"))
			hub_spawn(find_hub(&c, hubbuf, sizeof(hubbuf)), c.port, 0);
		if (old && *old) {
			size_t n = strlen(lib) + strlen(old) + 2;
			pre = malloc(n);
			if (!pre)
				return 1;
			snprintf(pre, n, "%s:%s", lib, old);
		} else {
			pre = lib;
		}
		setenv("LD_PRELOAD", pre, 1);
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "rshare: %s: %s\n", argv[i], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	const char *c;
	signal(SIGPIPE, SIG_DFL);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	c = argv[1];
	if (!strcmp(c, "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(c, "stat") || !strcmp(c, "s"))
		return cmd_stat(argc - 2, argv + 2);
	if (!strcmp(c, "hub"))
		return cmd_hub(argc - 2, argv + 2);
	if (!strcmp(c, "version") || !strcmp(c, "-V") || !strcmp(c, "--version")) {
		if (argc > 2)
			return bad_usage("rshare version");
		printf("rshare %s\n", RSHARE_VERSION);
		return 0;
	}
	if (!strcmp(c, "help") || !strcmp(c, "--help") || !strcmp(c, "-h")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "Command \"%s\" is unknown, try \"rshare help\".\n", c);
	return 2;
}
