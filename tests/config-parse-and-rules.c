/*
 * config-parse-and-rules: rshare.conf(5) parsing (keys, values, errors
 * with file:line) and the use rules (first match wins, default rshare,
 * program globs, prefixes, port ranges, IPv6, IPv4-mapped).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

static int failures;
static char path[] = "/tmp/rshare-conf-XXXXXX";

#define CHECK(c, ...)                                                         \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #c); \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			failures++;                                           \
		}                                                             \
	} while (0)

static int load(const char *text, struct cfg *c, char *err, size_t len)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		exit(1);
	}
	return cfg_load(path, c, err, len);
}

/* the error for TEXT is "PATH:" + WANT */
static void bad(const char *text, const char *want)
{
	static struct cfg c;
	char err[2048], exp[1024];
	int r = load(text, &c, err, sizeof(err));
	snprintf(exp, sizeof(exp), "%s:%s", path, want);
	CHECK(r == -1, "config %s accepted", text);
	CHECK(!strcmp(err, exp), "error '%s', want '%s'", err, exp);
}

static struct sockaddr_storage sa(const char *ip, int port)
{
	struct sockaddr_storage s;
	memset(&s, 0, sizeof(s));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&s;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		inet_pton(AF_INET6, ip, &a->sin6_addr);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&s;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		inet_pton(AF_INET, ip, &a->sin_addr);
	}
	return s;
}

static void choose(const struct cfg *c, int op, const char *prog, const char *ip, int port, int want,
		   int want_line)
{
	struct sockaddr_storage s = sa(ip, port);
	int line, got = cfg_choose(c, op, prog, (struct sockaddr *)&s, &line);
	CHECK(got == want && line == want_line, "%s %s %s:%d: got %s (line %d), want %s (line %d)",
	      op == CFG_LISTEN ? "listen" : "connect", prog, ip, port, got ? "rshare" : "tcp", line,
	      want ? "rshare" : "tcp", want_line);
}

static void value_cases(void)
{
	uint32_t sz;

	/* values */
	CHECK(cfg_parse_size("64K", &sz) == 0 && sz == 65536, "64K");
	CHECK(cfg_parse_size("1MiB", &sz) == 0 && sz == 1048576, "1MiB");
	CHECK(cfg_parse_size("4096", &sz) == 0 && sz == 4096, "4096");
	CHECK(cfg_parse_size("4095", &sz) < 0, "4095");
	CHECK(cfg_parse_size("8M", &sz) < 0, "8M");
	CHECK(cfg_parse_size("-4K", &sz) < 0 && cfg_parse_size("4X", &sz) < 0 && cfg_parse_size("", &sz) < 0,
	      "junk sizes");
}

static void good_file_cases(struct cfg *c, char *err, size_t errlen)
{
	/* a good file */
	CHECK(load("# comment\n\n  transport soft  # trailing\nport=19000\nlog = debug\nrcvbuf 64K\n"
		   "sndbuf\t1M\nhub /opt/rshared\n"
		   "use tcp listen * *:5000-5009\n"
		   "use tcp connect db* 10.1.0.0/16\n"
		   "use rshare connect * 10.1.2.3\n"
		   "use tcp both * [fd00::]/8:80\n"
		   "use tcp connect cli?nt 192.168.0.0/16:22\n"
		   "use tcp connect * 127.0.0.1:7000\nlink_timeout 900\nlink_outage 60",
		   c, err, errlen) == 0,
	      "good file: %s", err);
	CHECK(!strcmp(c->transport, "soft") && c->port == 19000 && c->log == LOG_LVL_DEBUG &&
		      c->rcvbuf == 65536 && c->sndbuf == 1048576 && !strcmp(c->hub, "/opt/rshared") &&
		      c->link_timeout == 900 && c->link_outage == 60 && c->nrules == 6,
	      "values %s %d %d %u %u %s %d %u", c->transport, c->port, c->log, c->rcvbuf, c->sndbuf, c->hub,
	      c->link_timeout, c->nrules);
	choose(c, CFG_LISTEN, "srv", "0.0.0.0", 5003, CFG_TCP, 9);
	choose(c, CFG_LISTEN, "srv", "0.0.0.0", 5010, CFG_RSHARE, 0);
	choose(c, CFG_CONNECT, "srv", "10.9.9.9", 5003, CFG_RSHARE, 0);     /* listen rule only */
	choose(c, CFG_CONNECT, "dbclient", "10.1.2.3", 1, CFG_TCP, 10);     /* first match wins */
	choose(c, CFG_CONNECT, "web", "10.1.2.3", 1, CFG_RSHARE, 11);
	choose(c, CFG_CONNECT, "web", "10.1.2.4", 1, CFG_RSHARE, 0);
	choose(c, CFG_CONNECT, "dbclient", "10.2.0.1", 1, CFG_RSHARE, 0);
	choose(c, CFG_CONNECT, "x", "fd12::1", 80, CFG_TCP, 12);
	choose(c, CFG_LISTEN, "x", "fd12::1", 80, CFG_TCP, 12);
	choose(c, CFG_CONNECT, "x", "fe80::1", 80, CFG_RSHARE, 0);
	choose(c, CFG_CONNECT, "client", "192.168.7.7", 22, CFG_TCP, 13);
	choose(c, CFG_CONNECT, "clients", "192.168.7.7", 22, CFG_RSHARE, 0);
	choose(c, CFG_CONNECT, "x", "::ffff:127.0.0.1", 7000, CFG_TCP, 14); /* IPv4-mapped */
	choose(c, CFG_CONNECT, "x", "127.0.0.1", 7001, CFG_RSHARE, 0);
}

static void error_cases(void)
{
	/* errors name the line */
	bad("port 1\n\n# x\ntrasport soft\n", "4: unknown key 'trasport'");
	bad("port 0\n", "1: port: '0' is not a port (1-65535)");
	bad("port 65536\n", "1: port: '65536' is not a port (1-65535)");
	bad("log\n", "1: missing value for 'log'");
	bad("log loud\n", "1: log: 'loud' is not error, warn, info or debug");
	bad("log info warn\n", "1: log: one value only, 'warn' is one too many");
	bad("transport rdma\n", "1: transport: 'rdma' is not auto, verbs or soft");
	bad("rcvbuf 9G\n", "1: rcvbuf: '9G' is not a size from 4K to 4M");
	bad("sndbuf 1\n", "1: sndbuf: '1' is not a size from 4K to 4M");
	bad("hub rshared\n", "1: hub: 'rshared' is not an absolute path");
	bad("link_timeout 0\n", "1: link_timeout: '0' is not a number of seconds (1-86400)");
	bad("link_timeout 3s\n", "1: link_timeout: '3s' is not a number of seconds (1-86400)");
	bad("link_outage 86401\n", "1: link_outage: '86401' is not a number of seconds (1-86400)");
	bad("link_congestion BBR\n", "1: link_congestion: 'BBR' is not auto or a congestion control's name");
	bad("link_congestion abcdefghijklmnop\n",
	    "1: link_congestion: 'abcdefghijklmnop' is not auto or a congestion control's name");
	bad("port 1\nuse udp both * *\n", "2: use: 'udp' is not rshare or tcp");
	bad("use tcp accept * *\n", "1: use: 'accept' is not listen, connect or both");
	bad("use tcp both *\n",
	    "1: use: want 'use rshare|tcp listen|connect|both PROGRAM ADDRESS[/PREFIX][:PORT[-PORT]]'");
	bad("use tcp both * * extra\n",
	    "1: use: want 'use rshare|tcp listen|connect|both PROGRAM ADDRESS[/PREFIX][:PORT[-PORT]]'");
	bad("use tcp both * 10.0.0.0/33\n",
	    "1: use: bad address '10.0.0.0/33' (want *, ADDRESS[/PREFIX], each with an optional :PORT or "
	    ":PORT-PORT)");
	bad("use tcp both * *:90-80\n",
	    "1: use: bad address '*:90-80' (want *, ADDRESS[/PREFIX], each with an optional :PORT or "
	    ":PORT-PORT)");
	bad("use tcp both * host.example:80\n",
	    "1: use: bad address 'host.example:80' (want *, ADDRESS[/PREFIX], each with an optional :PORT or "
	    ":PORT-PORT)");
	{
		char big[CFG_LINE_MAX + 100];
		memset(big, '#', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		bad(big, "1: line longer than 1023 bytes");
	}
	{
		/* at most CFG_MAX_RULES rules */
		static char many[(CFG_MAX_RULES + 1) * 24];
		size_t n = 0;
		for (int i = 0; i <= CFG_MAX_RULES; i++)
			n += sprintf(many + n, "use tcp both * *:%d\n", 1000 + i);
		bad(many, "65: too many rules (at most 64)");
	}
}

static void env_cases(struct cfg *c, char *err, size_t errlen)
{
	/* the environment overrides the file */
	CHECK(load("rcvbuf 64K\nport 1000\n", c, err, errlen) == 0, "%s", err);
	setenv("RSHARE_RCVBUF", "16K", 1);
	setenv("RSHARE_PORT", "", 1); /* empty: unset */
	CHECK(cfg_env(c, err, errlen) == 0 && c->rcvbuf == 16384 && c->port == 1000, "env: %u %d",
	      c->rcvbuf, c->port);
	setenv("RSHARE_LINK_TIMEOUT", "30", 1);
	CHECK(cfg_env(c, err, errlen) == 0 && c->link_timeout == 30, "env link_timeout: %d", c->link_timeout);
	unsetenv("RSHARE_LINK_TIMEOUT");
	setenv("RSHARE_LINK_OUTAGE", "120", 1);
	CHECK(cfg_env(c, err, errlen) == 0 && c->link_outage == 120, "env link_outage: %d", c->link_outage);
	setenv("RSHARE_LINK_OUTAGE", "0", 1);
	CHECK(cfg_env(c, err, errlen) == -1 &&
		      !strcmp(err, "RSHARE_LINK_OUTAGE: '0' is not a number of seconds (1-86400)"),
	      "bad env link_outage: %s", err);
	unsetenv("RSHARE_LINK_OUTAGE");
	CHECK(load("link_congestion reno\n", c, err, errlen) == 0 && !strcmp(c->link_congestion, "reno"),
	      "link_congestion: %s", err);
	setenv("RSHARE_LINK_CONGESTION", "bbr", 1);
	CHECK(cfg_env(c, err, errlen) == 0 && !strcmp(c->link_congestion, "bbr"), "env link_congestion: %s",
	      c->link_congestion);
	setenv("RSHARE_LINK_CONGESTION", "cubic!", 1);
	CHECK(cfg_env(c, err, errlen) == -1 &&
		      !strcmp(err, "RSHARE_LINK_CONGESTION: 'cubic!' is not auto or a congestion control's name"),
	      "bad env link_congestion: %s", err);
	unsetenv("RSHARE_LINK_CONGESTION");
	CHECK(load("port 1\n", c, err, errlen) == 0 && !c->link_congestion[0], "link_congestion unset: %s",
	      c->link_congestion);
	setenv("RSHARE_LOG", "chatty", 1);
	CHECK(cfg_env(c, err, errlen) == -1 &&
		      !strcmp(err, "RSHARE_LOG: 'chatty' is not error, warn, info or debug"),
	      "bad env: %s", err);
}

int main(void)
{
	static struct cfg c;
	char err[2048];
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);

	value_cases();
	good_file_cases(&c, err, sizeof(err));

	/* no file named by the default path is fine; a named one must exist */
	CHECK(cfg_load("/nonexistent/rshare.conf", &c, err, sizeof(err)) == -1 &&
		      !strcmp(err, "/nonexistent/rshare.conf: no such file"),
	      "missing file: %s", err);

	error_cases();
	env_cases(&c, err, sizeof(err));

	unlink(path);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
