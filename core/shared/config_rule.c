/*
 * config_rule.c - the `use` rules of rshare.conf(5): parsing one rule
 * line, and choosing rshare or kernel TCP for a socket by the first rule
 * that matches its operation, program name and address.
 *
 * A rule's address is *, ADDRESS or ADDRESS/PREFIX (IPv6 in brackets),
 * each optionally :PORT or :PORT-PORT; its program a glob (* and ?).
 * Runs inside the preload library like config.c: no allocation, no stdio,
 * no locale.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "config_int.h"

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
	if (cfg_parse_uint(s, &e, 65535, &lo) < 0)
		return -1;
	hi = lo;
	if (*e == '-' && cfg_parse_uint(e + 1, &e, 65535, &hi) < 0)
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
		if (cfg_parse_uint(p + 1, &p, r->prefix, &prefix) < 0)
			return -1;
		r->prefix = (uint8_t)prefix;
	}
	if (*p == ':')
		ports = p + 1;
	else if (*p)
		return -1;
	return ports ? parse_ports(ports, r) : 0;
}

/* ---- use rshare|tcp listen|connect|both PROGRAM ADDRESS ---- */

int cfg_parse_use(struct cfg *c, char **tok, int ntok, const char *rest, int lineno, char *err,
		  size_t errlen)
{
	struct cfg_rule *r;
	if (ntok != 5 || *rest) {
		cfg_err_set(err, errlen, "use: want 'use rshare|tcp listen|connect|both PROGRAM "
					 "ADDRESS[/PREFIX][:PORT[-PORT]]'");
		return -1;
	}
	if (c->nrules >= CFG_MAX_RULES) {
		cfg_err_set(err, errlen, "too many rules (at most %d)", CFG_MAX_RULES);
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
		cfg_err_set(err, errlen, "use: '%s' is not rshare or tcp", tok[1]);
		return -1;
	}
	if (!strcmp(tok[2], "listen"))
		r->ops = CFG_LISTEN;
	else if (!strcmp(tok[2], "connect"))
		r->ops = CFG_CONNECT;
	else if (!strcmp(tok[2], "both"))
		r->ops = CFG_LISTEN | CFG_CONNECT;
	else {
		cfg_err_set(err, errlen, "use: '%s' is not listen, connect or both", tok[2]);
		return -1;
	}
	if (strlen(tok[3]) >= sizeof(r->prog)) {
		cfg_err_set(err, errlen, "use: program pattern '%s' is too long", tok[3]);
		return -1;
	}
	strcpy(r->prog, tok[3]);
	if (parse_rule_addr(tok[4], r) < 0) {
		cfg_err_set(err, errlen, "use: bad address '%s' (want *, ADDRESS[/PREFIX], each with an "
					 "optional :PORT or :PORT-PORT)", tok[4]);
		return -1;
	}
	c->nrules++;
	return 0;
}

/* ---- matching ---- */

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
