/*
 * cmd.h - what the parts of the command share: rshare.c (main, finding
 * things, asking the hub, the options and configuration), cmd_run.c,
 * cmd_stat.c and cmd_hub.c (one per command).
 */
#ifndef RSHARE_CMD_H
#define RSHARE_CMD_H

#include <stddef.h>

#include "config.h"

#define USAGE_RUN "rshare run [ --transport auto|verbs|soft ] [ --rcvbuf SIZE ] [ --sndbuf SIZE ] " \
		  "[ --log LEVEL ] [ --port PORT ] [ -- ] COMMAND [ ARG... ]"
#define USAGE_STAT "rshare stat [ -l | -p | -a ] [ -w ] [ --json ] [ state STATE ] " \
		   "[ sport|dport|port [:]PORT ] [ pid PID ]"
#define USAGE_HUB "rshare hub { start [ --port PORT ] [ --log LEVEL ] [ --transport auto|verbs|soft ] " \
		  "| stop | restart | status }"

/* a usage error: the line (or the message) on stderr; 2 */
int bad_usage(const char *line);
__attribute__((format(printf, 1, 2))) int bad_arg(const char *fmt, ...);
/* librshare.so next to this binary (0, or -1) */
int find_lib(char *buf, size_t len);
/* the hub to start: the configuration's, else next to us, else PATH */
const char *find_hub(const struct cfg *c, char *buf, size_t len);
/* The hub's whole answer to STAT (malloc'd, NUL-terminated), or NULL. */
char *hub_query(int json, size_t *lenp);
/* An option run and hub start share (it becomes an RSHARE_* variable):
 * *HANDLED 1 when ARGV[*I] was one; 0, or the exit status of a usage error */
int common_opt(int argc, char **argv, int *i, int *handled, const char *usage_line);
int load_config(struct cfg *c);
void export_config(const struct cfg *c);
/* cmd_hub.c: start PATH as the hub and wait until it answers (0, or -1
 * after saying why); FRESH: with none of our scheduling or lowered limits */
int hub_spawn(const char *path, int port, int quiet, int fresh);

int cmd_run(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_hub(int argc, char **argv);

#endif
