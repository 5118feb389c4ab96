/*
 * cmd_stat.c - rshare stat: what the hub of this node sees, as ss(8)
 * shows sockets.  The hub answers STAT with JSON (core/hub/stat.c); this reads
 * it (json.c), filters the sockets and processes, and prints them as
 * tables or the JSON again; -w does so every second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "json.h"

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

int cmd_stat(int argc, char **argv)
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
