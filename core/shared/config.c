/*
 * config.c - reading rshare.conf(5) and the RSHARE_* variables, and the
 * library's question whether a socket uses rshare (cfg_use_rshare).
 *
 * Runs inside the preload library: no allocation, no stdio, no locale;
 * files are read with raw system calls (sys.h) so that nothing lands in
 * the interposer.  A line is cut into words and its key looked up in a
 * table of setters, one per key; `use` lines are rules, parsed and
 * matched in config_rule.c (config_int.h between).
 */
#include "config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "log.h"
#include "sys.h"

/* ---- small string helpers (no locale) ---- */

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Append formatted pieces to ERR: only %s and %d. */
void cfg_err_set(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	size_t n = 0;
	if (!err || !len)
		return;
	va_start(ap, fmt);
	for (const char *f = fmt; *f && n + 1 < len; f++) {
		char num[16];
		const char *s = NULL;
		if (*f == '%' && f[1] == 's') {
			s = va_arg(ap, const char *);
			f++;
		} else if (*f == '%' && f[1] == 'd') {
			int v = va_arg(ap, int), i = sizeof(num) - 1;
			unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
			num[i] = 0;
			do
				num[--i] = (char)('0' + u % 10);
			while ((u /= 10) && i > 1);
			if (v < 0)
				num[--i] = '-';
			s = num + i;
			f++;
		} else {
			err[n++] = *f;
			continue;
		}
		while (s && *s && n + 1 < len)
			err[n++] = *s++;
	}
	err[n] = 0;
	va_end(ap);
}

/* Decimal digits only, at most MAX. */
int cfg_parse_uint(const char *s, const char **end, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	const char *p = s;
	if (!is_digit(*p))
		return -1;
	for (; is_digit(*p); p++) {
		v = v * 10 + (unsigned long)(*p - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	*end = p;
	return 0;
}

int cfg_parse_size(const char *s, uint32_t *out)
{
	unsigned long v, mult = 1;
	const char *e;
	if (!s || cfg_parse_uint(s, &e, 1ul << 30, &v) < 0)
		return -1;
	if (*e == 'k' || *e == 'K')
		mult = 1024, e++;
	else if (*e == 'm' || *e == 'M')
		mult = 1024 * 1024, e++;
	if ((mult > 1) && (*e == 'i' || *e == 'I') && (e[1] == 'B' || e[1] == 'b'))
		e += 2;
	else if ((mult > 1) && (*e == 'B' || *e == 'b'))
		e++;
	if (*e)
		return -1;
	v *= mult;
	if (v < ARENA_MIN_RING || v > ARENA_MAX_RING)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int cfg_parse_bytes(const char *s, uint64_t *out)
{
	static const char suf[] = "KMGT";
	unsigned long v;
	uint64_t mult = 1;
	const char *e, *x;
	if (!s || cfg_parse_uint(s, &e, 1ul << 30, &v) < 0)
		return -1;
	if (*e && (x = strchr(suf, *e & ~0x20))) {
		mult = 1ull << (10 * (x - suf + 1));
		e++;
		if ((*e == 'i' || *e == 'I') && (e[1] == 'B' || e[1] == 'b'))
			e += 2;
		else if (*e == 'B' || *e == 'b')
			e++;
	}
	if (*e || (uint64_t)v * mult < (1ull << 20) || (uint64_t)v * mult > (1ull << 40))
		return -1;
	*out = (uint64_t)v * mult;
	return 0;
}

int cfg_parse_port(const char *s, int *out)
{
	unsigned long v;
	const char *e;
	if (!s || cfg_parse_uint(s, &e, 65535, &v) < 0 || *e || v == 0)
		return -1;
	*out = (int)v;
	return 0;
}

int cfg_parse_spin(const char *s, int *out)
{
	unsigned long v;
	const char *e;
	if (!s || cfg_parse_uint(s, &e, 100000, &v) < 0 || *e)
		return -1;
	*out = (int)v;
	return 0;
}

int cfg_parse_link_timeout(const char *s, int *out)
{
	unsigned long v;
	const char *e;
	if (!s || cfg_parse_uint(s, &e, 86400, &v) < 0 || *e || !v)
		return -1;
	*out = (int)v;
	return 0;
}

int cfg_parse_log(const char *s, int *out)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; s && i < 4; i++)
		if (!strcmp(s, names[i])) {
			*out = LOG_LVL_ERROR + i;
			return 0;
		}
	return -1;
}

/* a TCP congestion control's name (what TCP_CONGESTION takes: at most 15
 * of a-z, 0-9 and _), or auto */
int cfg_parse_congestion(const char *s)
{
	size_t n = 0;
	while (s && ((s[n] >= 'a' && s[n] <= 'z') || is_digit(s[n]) || s[n] == '_'))
		n++;
	return s && !s[n] && n >= 1 && n <= 15 ? 0 : -1;
}

int cfg_parse_transport(const char *s)
{
	return s && (!strcmp(s, "auto") || !strcmp(s, "verbs") || !strcmp(s, "soft")) ? 0 : -1;
}

/* ---- the file ---- */

const char *cfg_path(void)
{
	const char *e = getenv("RSHARE_CONF");
	return e && *e ? e : CFG_DEFAULT_PATH;
}

static void cfg_reset(struct cfg *c)
{
	memset(c, 0, offsetof(struct cfg, rule));
	c->log = -1;
	c->spin_us = -1;
	c->link_timeout = -1;
	c->link_outage = -1;
}

/* Cut LINE at its comment and into at most 6 words (TOK, NUL-ended in
 * place); *REST gets what is left past them, spaces skipped. */
static int split_words(char *line, char *tok[8], char **rest)
{
	char *p = line;
	int ntok = 0;
	char *hash = strchr(line, '#');
	if (hash)
		*hash = 0;
	while (*p && ntok < 6) {
		while (is_space(*p))
			p++;
		if (!*p)
			break;
		tok[ntok++] = p;
		while (*p && !is_space(*p))
			p++;
		if (*p)
			*p++ = 0;
	}
	while (is_space(*p))
		p++;
	*rest = p;
	return ntok;
}

/* key = value, key=value and key value are all fine: the key in TOK[0],
 * the value (if any) in TOK[1].  Returns the new number of words. */
static int split_eq(char *tok[8], int ntok)
{
	char *eq = strchr(tok[0], '=');
	if (eq) {
		*eq = 0;
		if (eq[1]) {
			for (int i = ntok; i > 1; i--)
				tok[i] = tok[i - 1];
			tok[1] = eq + 1;
			ntok++;
		}
	} else if (ntok > 1 && !strcmp(tok[1], "=")) {
		for (int i = 1; i + 1 < ntok; i++)
			tok[i] = tok[i + 1];
		ntok--;
	} else if (ntok > 1 && tok[1][0] == '=') {
		tok[1]++;
	}
	return ntok;
}

/* ---- one setter per key: 0, or -1 with the problem in ERR ---- */

static int set_transport(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	(void)key;
	if (cfg_parse_transport(val) < 0) {
		cfg_err_set(err, errlen, "transport: '%s' is not auto, verbs or soft", val);
		return -1;
	}
	strcpy(c->transport, val);
	return 0;
}

static int set_port(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	(void)key;
	if (cfg_parse_port(val, &c->port) < 0) {
		cfg_err_set(err, errlen, "port: '%s' is not a port (1-65535)", val);
		return -1;
	}
	return 0;
}

static int set_log(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	(void)key;
	if (cfg_parse_log(val, &c->log) < 0) {
		cfg_err_set(err, errlen, "log: '%s' is not error, warn, info or debug", val);
		return -1;
	}
	return 0;
}

/* rcvbuf and sndbuf */
static int set_size(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	if (cfg_parse_size(val, key[0] == 'r' ? &c->rcvbuf : &c->sndbuf) < 0) {
		cfg_err_set(err, errlen, "%s: '%s' is not a size from 4K to 4M", key, val);
		return -1;
	}
	return 0;
}

static int set_spin(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	(void)key;
	if (cfg_parse_spin(val, &c->spin_us) < 0) {
		cfg_err_set(err, errlen, "spin_us: '%s' is not a number of microseconds (0-100000)", val);
		return -1;
	}
	return 0;
}

/* link_timeout and link_outage: seconds, 1 to 86400 */
static int set_link_secs(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	if (cfg_parse_link_timeout(val, strcmp(key, "link_outage") ? &c->link_timeout : &c->link_outage) < 0) {
		cfg_err_set(err, errlen, "%s: '%s' is not a number of seconds (1-86400)", key, val);
		return -1;
	}
	return 0;
}

static int set_congestion(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	(void)key;
	if (cfg_parse_congestion(val) < 0) {
		cfg_err_set(err, errlen, "link_congestion: '%s' is not auto or a congestion control's name", val);
		return -1;
	}
	strcpy(c->link_congestion, val);
	return 0;
}

/* uid_pools, uid_sockets, uid_memory */
static int set_uid_limit(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	unsigned long v;
	const char *e;
	if (!strcmp(key, "uid_memory")) {
		if (cfg_parse_bytes(val, &c->uid_memory) < 0) {
			cfg_err_set(err, errlen, "uid_memory: '%s' is not a size from 1M to 1T", val);
			return -1;
		}
		return 0;
	}
	if (cfg_parse_uint(val, &e, 1ul << 24, &v) < 0 || *e || !v) {
		cfg_err_set(err, errlen, "%s: '%s' is not a number from 1 to 16777216", key, val);
		return -1;
	}
	*(key[4] == 'p' ? &c->uid_pools : &c->uid_sockets) = (uint32_t)v;
	return 0;
}

static int set_hub(struct cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
	(void)key;
	if (val[0] != '/' || strlen(val) >= sizeof(c->hub)) {
		cfg_err_set(err, errlen, "hub: '%s' is not an absolute path", val);
		return -1;
	}
	strcpy(c->hub, val);
	return 0;
}

/* the keys that take one value (`use` lines are rules: config_rule.c) */
static const struct cfg_key {
	const char *name;
	int (*set)(struct cfg *c, const char *key, const char *val, char *err, size_t errlen);
} cfg_keys[] = {
	{"transport", set_transport},
	{"port", set_port},
	{"log", set_log},
	{"rcvbuf", set_size},
	{"sndbuf", set_size},
	{"hub", set_hub},
	{"spin_us", set_spin},
	{"link_timeout", set_link_secs},
	{"link_outage", set_link_secs},
	{"link_congestion", set_congestion},
	{"uid_pools", set_uid_limit},
	{"uid_sockets", set_uid_limit},
	{"uid_memory", set_uid_limit},
};

static const struct cfg_key *key_of(const char *name)
{
	for (size_t i = 0; i < sizeof(cfg_keys) / sizeof(cfg_keys[0]); i++)
		if (!strcmp(name, cfg_keys[i].name))
			return &cfg_keys[i];
	return NULL;
}

/* One line, comments and ends trimmed; 0, or -1 with the problem in ERR. */
static int parse_line(struct cfg *c, char *line, int lineno, char *err, size_t errlen)
{
	char *tok[8], *p, *key;
	const struct cfg_key *k = NULL;
	int ntok = split_words(line, tok, &p);
	if (ntok == 0)
		return 0;
	ntok = split_eq(tok, ntok);
	key = tok[0];
	if (!strcmp(key, "use"))
		return cfg_parse_use(c, tok, ntok, p, lineno, err, errlen);
	if (!(k = key_of(key))) {
		cfg_err_set(err, errlen, "unknown key '%s'", key);
		return -1;
	}
	if (ntok < 2 || !*tok[1]) {
		cfg_err_set(err, errlen, "missing value for '%s'", key);
		return -1;
	}
	if (ntok > 2 || *p) {
		cfg_err_set(err, errlen, "%s: one value only, '%s' is one too many", key, ntok > 2 ? tok[2] : p);
		return -1;
	}
	return k->set(c, key, tok[1], err, errlen);
}

static const char *errno_text(int e)
{
	switch (e) {
	case ENOENT: return "no such file";
	case EACCES: return "permission denied";
	case EISDIR: return "is a directory";
	case ENOTDIR: return "a path component is not a directory";
	default: return "cannot read it";
	}
}

struct reader {
	struct cfg *c;
	const char *path;
	char line[CFG_LINE_MAX];
	size_t len;
	int lineno, toolong;
	char *err;
	size_t errlen;
};

static int finish_line(struct reader *r)
{
	char why[CFG_LINE_MAX + 128];
	r->line[r->len] = 0;
	if (r->toolong) {
		cfg_err_set(r->err, r->errlen, "%s:%d: line longer than %d bytes", r->path, r->lineno,
			CFG_LINE_MAX - 1);
		return -1;
	}
	if (parse_line(r->c, r->line, r->lineno, why, sizeof(why)) < 0) {
		cfg_err_set(r->err, r->errlen, "%s:%d: %s", r->path, r->lineno, why);
		return -1;
	}
	r->len = 0;
	r->lineno++;
	return 0;
}

int cfg_load(const char *path, struct cfg *out, char *err, size_t errlen)
{
	struct reader r;
	char buf[2048];
	int fd, ret = 0;
	ssize_t n;
	if (!path)
		path = cfg_path();
	cfg_reset(out);
	out->nrules = 0;
	if (err && errlen)
		err[0] = 0;
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT && !strcmp(path, CFG_DEFAULT_PATH))
			return 0;
		cfg_err_set(err, errlen, "%s: %s", path, errno_text(e));
		return -1;
	}
	if (strlen(path) < sizeof(out->path))
		strcpy(out->path, path);
	memset(&r, 0, sizeof(r));
	r.c = out;
	r.path = path;
	r.lineno = 1;
	r.err = err;
	r.errlen = errlen;
	for (;;) {
		n = sys_read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cfg_err_set(err, errlen, "%s: %s", path, errno_text(errno));
			ret = -1;
			goto done;
		}
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n') {
				if (finish_line(&r) < 0) {
					ret = -1;
					goto done;
				}
			} else if (buf[i] == 0) {
				cfg_err_set(err, errlen, "%s:%d: a NUL byte: not a text file", path, r.lineno);
				ret = -1;
				goto done;
			} else if (r.len + 1 < sizeof(r.line)) {
				r.line[r.len++] = buf[i];
			} else {
				r.toolong = 1;
			}
		}
	}
	/* a last line without a newline */
	if ((r.len || r.toolong) && finish_line(&r) < 0)
		ret = -1;
done:
	sys_close(fd);
	return ret;
}

/* The keys a variable RSHARE_KEY sets over the file, checked by the file's
 * setter ("key: problem" said as "RSHARE_KEY: problem"); RSHARE_HUB aside. */
static const char *const env_keys[] = {"transport",    "port",        "log",         "rcvbuf",         "sndbuf",
				       "spin_us",      "link_timeout", "link_outage", "link_congestion"};

int cfg_env(struct cfg *c, char *err, size_t errlen)
{
	const char *v;
	for (size_t i = 0; i < sizeof(env_keys) / sizeof(env_keys[0]); i++) {
		char name[32] = "RSHARE_", why[CFG_LINE_MAX];
		size_t k = strlen(env_keys[i]);
		for (size_t j = 0; j < k; j++)
			name[7 + j] = (char)(env_keys[i][j] >= 'a' ? env_keys[i][j] - 'a' + 'A' : env_keys[i][j]);
		if (!(v = getenv(name)) || !*v)
			continue;
		if (key_of(env_keys[i])->set(c, env_keys[i], v, why, sizeof(why)) < 0) {
			cfg_err_set(err, errlen, "%s%s", name, why + k);
			return -1;
		}
	}
	if ((v = getenv("RSHARE_HUB")) && *v && strlen(v) >= sizeof(c->hub)) {
		cfg_err_set(err, errlen, "RSHARE_HUB: the path is too long");
		return -1;
	}
	if (v && *v)
		strcpy(c->hub, v);
	return 0;
}

/* ---- the library's side ---- */

static struct cfg lib_cfg;
static int lib_ok;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_load(void)
{
	char msg[CFG_LINE_MAX + 2 * CFG_PATH_MAX], *err = msg + 8;
	memcpy(msg, "rshare: ", 8);
	if (cfg_load(NULL, &lib_cfg, err, sizeof(msg) - 9) < 0 || cfg_env(&lib_cfg, err, sizeof(msg) - 9) < 0) {
		/* the one thing the library ever says: the program goes on, on kernel TCP */
		size_t n = strlen(msg);
		msg[n++] = '\n';
		if (sys_write(2, msg, n) < 0) {
			/* nowhere to say it */
		}
		lib_ok = 0;
		return;
	}
	lib_ok = 1;
}

const struct cfg *cfg_lib(void)
{
	return lib_ok ? &lib_cfg : NULL;
}

int cfg_use_rshare(int op, int fd, const struct sockaddr *addr, socklen_t len, uint32_t *rxsize,
		   uint32_t *txsize)
{
	union sockaddr_any local;
	pthread_once(&lib_once, lib_load);
	if (!lib_ok)
		return 0;
	if (op == CFG_LISTEN && !addr) {
		socklen_t ll = sizeof(local);
		memset(&local, 0, sizeof(local));
		if (syscall(SYS_getsockname, fd, &local.sa, &ll) == 0)
			addr = &local.sa;
	} else if (addr && (len < sizeof(struct sockaddr_in) ||
			    (addr->sa_family == AF_INET6 && len < sizeof(struct sockaddr_in6)))) {
		addr = NULL;
	}
	if (lib_cfg.nrules &&
	    cfg_choose(&lib_cfg, op, program_invocation_short_name, addr, NULL) != CFG_RSHARE)
		return 0;
	if (rxsize && !*rxsize && lib_cfg.rcvbuf)
		*rxsize = arena_ring_size(lib_cfg.rcvbuf);
	if (txsize && !*txsize && lib_cfg.sndbuf)
		*txsize = arena_ring_size(lib_cfg.sndbuf);
	return 1;
}
