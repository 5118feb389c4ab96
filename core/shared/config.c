/*
 * config.c - reading rshare.conf(5) and the RSHARE_* variables, and the
 * rules that choose rshare or kernel TCP for a socket.
 *
 * Runs inside the preload library: no allocation, no stdio, no locale;
 * files are read with raw system calls (sys.h) so that nothing lands in
 * the interposer.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
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
static void err_set(char *err, size_t len, const char *fmt, ...)
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
static int parse_uint(const char *s, const char **end, unsigned long max, unsigned long *out)
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
	if (!s || parse_uint(s, &e, 1ul << 30, &v) < 0)
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

int cfg_parse_port(const char *s, int *out)
{
	unsigned long v;
	const char *e;
	if (!s || parse_uint(s, &e, 65535, &v) < 0 || *e || v == 0)
		return -1;
	*out = (int)v;
	return 0;
}

int cfg_parse_spin(const char *s, int *out)
{
	unsigned long v;
	const char *e;
	if (!s || parse_uint(s, &e, 100000, &v) < 0 || *e)
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

int cfg_parse_transport(const char *s)
{
	return s && (!strcmp(s, "auto") || !strcmp(s, "verbs") || !strcmp(s, "soft")) ? 0 : -1;
}

/* ---- rule addresses: *, ADDR[/PREFIX], each optionally :PORT[-PORT] ---- */

static int parse_ports(const char *s, struct cfg_rule *r)
{
	unsigned long lo, hi;
	const char *e;
	if (!strcmp(s, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	if (parse_uint(s, &e, 65535, &lo) < 0)
		return -1;
	hi = lo;
	if (*e == '-' && parse_uint(e + 1, &e, 65535, &hi) < 0)
		return -1;
	if (*e || hi < lo)
		return -1;
	r->port_lo = (uint16_t)lo;
	r->port_hi = (uint16_t)hi;
	return 0;
}

static int parse_rule_addr(const char *s, struct cfg_rule *r)
{
	char host[64];
	const char *p = s, *ports = NULL, *hend;
	unsigned long prefix;
	r->port_lo = 0;
	r->port_hi = 65535;
	r->family = 0;
	r->prefix = 0;
	if (*p == '*') {
		p++;
		if (*p == ':')
			return parse_ports(p + 1, r);
		return *p ? -1 : 0;
	}
	if (*p == '[') {
		hend = strchr(p, ']');
		if (!hend || (size_t)(hend - p - 1) >= sizeof(host))
			return -1;
		memcpy(host, p + 1, hend - p - 1);
		host[hend - p - 1] = 0;
		if (inet_pton(AF_INET6, host, r->addr) != 1)
			return -1;
		r->family = AF_INET6;
		p = hend + 1;
	} else {
		hend = p;
		while (*hend && *hend != '/' && *hend != ':')
			hend++;
		if ((size_t)(hend - p) >= sizeof(host) || hend == p)
			return -1;
		memcpy(host, p, hend - p);
		host[hend - p] = 0;
		if (inet_pton(AF_INET, host, r->addr) != 1)
			return -1;
		r->family = AF_INET;
		p = hend;
	}
	r->prefix = r->family == AF_INET ? 32 : 128;
	if (*p == '/') {
		if (parse_uint(p + 1, &p, r->prefix, &prefix) < 0)
			return -1;
		r->prefix = (uint8_t)prefix;
	}
	if (*p == ':')
		ports = p + 1;
	else if (*p)
		return -1;
	return ports ? parse_ports(ports, r) : 0;
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
}

/* One line, comments and ends trimmed; 0, or -1 with the problem in ERR. */
static int parse_line(struct cfg *c, char *line, int lineno, char *err, size_t errlen)
{
	char *tok[8], *p = line, *key, *val;
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
	if (ntok == 0)
		return 0;
	key = tok[0];
	/* key = value, key=value and key value are all fine */
	{
		char *eq = strchr(key, '=');
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
	}
	if (!strcmp(key, "use")) {
		struct cfg_rule *r;
		if (ntok != 5 || *p) {
			err_set(err, errlen, "use: want 'use rshare|tcp listen|connect|both PROGRAM "
					     "ADDRESS[/PREFIX][:PORT[-PORT]]'");
			return -1;
		}
		if (c->nrules >= CFG_MAX_RULES) {
			err_set(err, errlen, "too many rules (at most %d)", CFG_MAX_RULES);
			return -1;
		}
		r = &c->rule[c->nrules];
		memset(r, 0, sizeof(*r));
		r->line = lineno;
		if (!strcmp(tok[1], "rshare"))
			r->use = CFG_RSHARE;
		else if (!strcmp(tok[1], "tcp"))
			r->use = CFG_TCP;
		else {
			err_set(err, errlen, "use: '%s' is not rshare or tcp", tok[1]);
			return -1;
		}
		if (!strcmp(tok[2], "listen"))
			r->ops = CFG_LISTEN;
		else if (!strcmp(tok[2], "connect"))
			r->ops = CFG_CONNECT;
		else if (!strcmp(tok[2], "both"))
			r->ops = CFG_LISTEN | CFG_CONNECT;
		else {
			err_set(err, errlen, "use: '%s' is not listen, connect or both", tok[2]);
			return -1;
		}
		if (strlen(tok[3]) >= sizeof(r->prog)) {
			err_set(err, errlen, "use: program pattern '%s' is too long", tok[3]);
			return -1;
		}
		strcpy(r->prog, tok[3]);
		if (parse_rule_addr(tok[4], r) < 0) {
			err_set(err, errlen, "use: bad address '%s' (want *, ADDRESS[/PREFIX], each with an "
					     "optional :PORT or :PORT-PORT)", tok[4]);
			return -1;
		}
		c->nrules++;
		return 0;
	}
	if (strcmp(key, "transport") && strcmp(key, "port") && strcmp(key, "log") && strcmp(key, "rcvbuf") &&
	    strcmp(key, "sndbuf") && strcmp(key, "hub") && strcmp(key, "spin_us")) {
		err_set(err, errlen, "unknown key '%s'", key);
		return -1;
	}
	if (ntok < 2 || !*tok[1]) {
		err_set(err, errlen, "missing value for '%s'", key);
		return -1;
	}
	if (ntok > 2 || *p) {
		err_set(err, errlen, "%s: one value only, '%s' is one too many", key, ntok > 2 ? tok[2] : p);
		return -1;
	}
	val = tok[1];
	if (!strcmp(key, "transport")) {
		if (cfg_parse_transport(val) < 0) {
			err_set(err, errlen, "transport: '%s' is not auto, verbs or soft", val);
			return -1;
		}
		strcpy(c->transport, val);
	} else if (!strcmp(key, "port")) {
		if (cfg_parse_port(val, &c->port) < 0) {
			err_set(err, errlen, "port: '%s' is not a port (1-65535)", val);
			return -1;
		}
	} else if (!strcmp(key, "log")) {
		if (cfg_parse_log(val, &c->log) < 0) {
			err_set(err, errlen, "log: '%s' is not error, warn, info or debug", val);
			return -1;
		}
	} else if (!strcmp(key, "rcvbuf") || !strcmp(key, "sndbuf")) {
		if (cfg_parse_size(val, key[0] == 'r' ? &c->rcvbuf : &c->sndbuf) < 0) {
			err_set(err, errlen, "%s: '%s' is not a size from 4K to 4M", key, val);
			return -1;
		}
	} else if (!strcmp(key, "spin_us")) {
		if (cfg_parse_spin(val, &c->spin_us) < 0) {
			err_set(err, errlen, "spin_us: '%s' is not a number of microseconds (0-100000)", val);
			return -1;
		}
	} else {
		if (val[0] != '/' || strlen(val) >= sizeof(c->hub)) {
			err_set(err, errlen, "hub: '%s' is not an absolute path", val);
			return -1;
		}
		strcpy(c->hub, val);
	}
	return 0;
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
		err_set(r->err, r->errlen, "%s:%d: line longer than %d bytes", r->path, r->lineno,
			CFG_LINE_MAX - 1);
		return -1;
	}
	if (parse_line(r->c, r->line, r->lineno, why, sizeof(why)) < 0) {
		err_set(r->err, r->errlen, "%s:%d: %s", r->path, r->lineno, why);
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
		err_set(err, errlen, "%s: %s", path, errno_text(e));
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
			err_set(err, errlen, "%s: %s", path, errno_text(errno));
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
				err_set(err, errlen, "%s:%d: a NUL byte: not a text file", path, r.lineno);
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

int cfg_env(struct cfg *c, char *err, size_t errlen)
{
	const char *v;
	if ((v = getenv("RSHARE_TRANSPORT")) && *v) {
		if (cfg_parse_transport(v) < 0) {
			err_set(err, errlen, "RSHARE_TRANSPORT: '%s' is not auto, verbs or soft", v);
			return -1;
		}
		strcpy(c->transport, v);
	}
	if ((v = getenv("RSHARE_PORT")) && *v && cfg_parse_port(v, &c->port) < 0) {
		err_set(err, errlen, "RSHARE_PORT: '%s' is not a port (1-65535)", v);
		return -1;
	}
	if ((v = getenv("RSHARE_LOG")) && *v && cfg_parse_log(v, &c->log) < 0) {
		err_set(err, errlen, "RSHARE_LOG: '%s' is not error, warn, info or debug", v);
		return -1;
	}
	if ((v = getenv("RSHARE_RCVBUF")) && *v && cfg_parse_size(v, &c->rcvbuf) < 0) {
		err_set(err, errlen, "RSHARE_RCVBUF: '%s' is not a size from 4K to 4M", v);
		return -1;
	}
	if ((v = getenv("RSHARE_SNDBUF")) && *v && cfg_parse_size(v, &c->sndbuf) < 0) {
		err_set(err, errlen, "RSHARE_SNDBUF: '%s' is not a size from 4K to 4M", v);
		return -1;
	}
	if ((v = getenv("RSHARE_SPIN_US")) && *v && cfg_parse_spin(v, &c->spin_us) < 0) {
		err_set(err, errlen, "RSHARE_SPIN_US: '%s' is not a number of microseconds (0-100000)", v);
		return -1;
	}
	if ((v = getenv("RSHARE_HUB")) && *v) {
		if (strlen(v) >= sizeof(c->hub)) {
			err_set(err, errlen, "RSHARE_HUB: the path is too long");
			return -1;
		}
		strcpy(c->hub, v);
	}
	return 0;
}

/* ---- rules ---- */

/* * any run of characters, ? one character, anything else itself */
static int glob_match(const char *pat, const char *s)
{
	const char *star = NULL, *resume = NULL;
	while (*s) {
		if (*pat == '*') {
			star = pat++;
			resume = s;
		} else if (*pat == '?' || *pat == *s) {
			pat++;
			s++;
		} else if (star) {
			pat = star + 1;
			s = ++resume;
		} else {
			return 0;
		}
	}
	while (*pat == '*')
		pat++;
	return *pat == 0;
}

static int addr_match(const struct cfg_rule *r, const struct sockaddr *a)
{
	const uint8_t *ip;
	int family, port;
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (!a || (a->sa_family != AF_INET && a->sa_family != AF_INET6))
		return r->family == 0 && r->port_lo == 0 && r->port_hi == 65535;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)a;
		ip = (const uint8_t *)&in->sin_addr;
		family = AF_INET;
		port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
		ip = in6->sin6_addr.s6_addr;
		family = AF_INET6;
		port = ntohs(in6->sin6_port);
		if (r->family == AF_INET && !memcmp(ip, v4mapped, 12)) {
			ip += 12;
			family = AF_INET;
		}
	}
	if (port < r->port_lo || port > r->port_hi)
		return 0;
	if (r->family == 0)
		return 1;
	if (r->family != family)
		return 0;
	for (int bit = 0; bit < r->prefix; bit += 8) {
		int left = r->prefix - bit;
		uint8_t mask = left >= 8 ? 0xff : (uint8_t)(0xff << (8 - left));
		if ((ip[bit / 8] ^ r->addr[bit / 8]) & mask)
			return 0;
	}
	return 1;
}

int cfg_choose(const struct cfg *c, int op, const char *prog, const struct sockaddr *a, int *line)
{
	for (unsigned i = 0; i < c->nrules; i++) {
		const struct cfg_rule *r = &c->rule[i];
		if (!(r->ops & op) || !glob_match(r->prog, prog ? prog : "") || !addr_match(r, a))
			continue;
		if (line)
			*line = r->line;
		return r->use;
	}
	if (line)
		*line = 0;
	return CFG_RSHARE;
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
