/*
 * rshare - the command: run a program under rshare, show what the hub of
 * this node sees, start and stop the hub.  See rshare(1).
 *
 * Exit status, as iproute2: 0 done, 1 a runtime error (no hub, a hub that
 * would not start or stop), 2 a usage error.  `rshare run` exits with the
 * command's status (127 when it cannot be found, 126 when it cannot run).
 *
 * This file: main, where things are, asking the hub, and the options and
 * configuration the commands share; each command has a file of its own
 * (cmd_run.c, cmd_stat.c, cmd_hub.c).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "cmd.h"
#include "msg.h"

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

int bad_usage(const char *line)
{
	fprintf(stderr, "Usage: %s\n", line);
	return 2;
}

int bad_arg(const char *fmt, ...)
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
int find_lib(char *buf, size_t len)
{
	static const char *const cands[] = {"/librshare.so", "/../lib/rshare/librshare.so"};
	return find_near(buf, len, cands, 2, R_OK);
}

/* RSHARE_HUB or the configuration's hub, else next to us, else PATH */
const char *find_hub(const struct cfg *c, char *buf, size_t len)
{
	static const char *const cands[] = {"/rshared", "/../sbin/rshared"};
	if (c && c->hub[0])
		return c->hub;
	if (find_near(buf, len, cands, 2, X_OK) == 0)
		return buf;
	return "rshared";
}

/* ---- asking the hub ---- */

char *hub_query(int json, size_t *lenp)
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
int common_opt(int argc, char **argv, int *i, int *handled, const char *usage_line)
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
int load_config(struct cfg *c)
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
void export_config(const struct cfg *c)
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
