/*
 * config.h - rshare's configuration: /etc/rshare.conf (or $RSHARE_CONF),
 * overridden by RSHARE_* environment variables, overridden by command
 * options.  The format is in rshare.conf(5).
 *
 * The parser allocates nothing, reads the file with raw system calls and
 * uses no locale-dependent function, so the preload library can run it
 * lazily on a program's first listen() or connect().
 */
#ifndef RSHARE_CONFIG_H
#define RSHARE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RSHARE_VERSION "0.1"
#define CFG_DEFAULT_PATH "/etc/rshare.conf"
#define CFG_MAX_RULES 64
#define CFG_PATH_MAX 256
#define CFG_PROG_MAX 64
#define CFG_LINE_MAX 1024
#define CFG_DEFAULT_SPIN_US 50        /* spin before sleeping: hub and processes */

/* what a rule applies to */
enum { CFG_LISTEN = 1, CFG_CONNECT = 2 };
/* what it chooses */
enum { CFG_TCP = 0, CFG_RSHARE = 1 };

struct cfg_rule {
	uint8_t use;        /* CFG_RSHARE or CFG_TCP */
	uint8_t ops;        /* CFG_LISTEN | CFG_CONNECT */
	uint8_t family;     /* 0: any address, AF_INET, AF_INET6 */
	uint8_t prefix;     /* leading bits of addr that must match */
	uint16_t port_lo;   /* 0..65535 both: any port */
	uint16_t port_hi;
	uint8_t addr[16];
	char prog[CFG_PROG_MAX]; /* glob on the program name: * and ? */
	int line;
};

struct cfg {
	char path[CFG_PATH_MAX];      /* the file read, "" when none */
	char transport[8];            /* "" unset, or auto, verbs, soft */
	int port;                     /* 0 unset, else 1..65535 */
	int log;                      /* -1 unset, else LOG_LVL_* */
	uint32_t rcvbuf, sndbuf;      /* 0 unset, else bytes (ring sizes) */
	char hub[CFG_PATH_MAX];       /* "" unset, else an absolute path */
	int spin_us;                  /* -1 unset, else how long a waiter spins before it sleeps */
	int link_timeout;             /* -1 unset, else seconds a link may go unanswered (1..86400) */
	int link_outage;              /* -1 unset, else seconds a connection waits for a lost link to come back */
	char link_congestion[16];     /* "" unset (auto), else a soft link's TCP congestion control */
	/* what one uid may hold on the hub at once: 0 unset */
	uint32_t uid_pools, uid_sockets;
	uint64_t uid_memory;          /* ring bytes */
	unsigned nrules;
	struct cfg_rule rule[CFG_MAX_RULES];
};

/* The file to read: $RSHARE_CONF when set and not empty, else /etc/rshare.conf. */
const char *cfg_path(void);

/*
 * Read the configuration file PATH (NULL: cfg_path()) into OUT, which is
 * reset first.  0 on success (a missing /etc/rshare.conf is no error: the
 * defaults apply); -1 on error, with ERR set to one line without a newline,
 * "FILE:LINE: problem" or "FILE: problem".
 */
int cfg_load(const char *path, struct cfg *out, char *err, size_t errlen);

/* Apply RSHARE_TRANSPORT, _PORT, _LOG, _RCVBUF, _SNDBUF, _SPIN_US, _LINK_TIMEOUT,
 * _LINK_OUTAGE, _LINK_CONGESTION and _HUB over C.
 * 0, or -1 with ERR "RSHARE_X: problem". */
int cfg_env(struct cfg *c, char *err, size_t errlen);

/* Value parsers shared with the command; 0 ok, -1 bad. */
int cfg_parse_size(const char *s, uint32_t *out);   /* N[K|M], 4K..4M */
int cfg_parse_port(const char *s, int *out);        /* 1..65535 */
int cfg_parse_log(const char *s, int *out);         /* error warn info debug */
int cfg_parse_spin(const char *s, int *out);        /* 0..100000 microseconds */
int cfg_parse_link_timeout(const char *s, int *out); /* 1..86400 seconds */
int cfg_parse_congestion(const char *s);            /* auto, or a-z 0-9 _, 1..15 */
int cfg_parse_bytes(const char *s, uint64_t *out);  /* 1M..1T, K/M/G/T suffixes */
int cfg_parse_transport(const char *s);             /* auto verbs soft */

/* The rule that decides for program PROG doing OP at address A (NULL or
 * not INET: matches only rules on any address): CFG_RSHARE or CFG_TCP.
 * LINE, when not NULL, gets the rule's line (0: no rule matched, the
 * default, rshare). */
int cfg_choose(const struct cfg *c, int op, const char *prog, const struct sockaddr *a, int *line);

/*
 * The library's question at the top of listen() and connect() of a TCP
 * socket: should this socket use rshare?  OP is CFG_LISTEN (ADDR NULL: the
 * address bound to FD is used) or CFG_CONNECT (ADDR the destination).
 * The first call loads the configuration; a bad one is reported once on
 * stderr and then every socket is plain kernel TCP (returns 0).  When it
 * returns 1, *RXSIZE and *TXSIZE that are 0 get the configured defaults.
 */
int cfg_use_rshare(int op, int fd, const struct sockaddr *addr, socklen_t len, uint32_t *rxsize,
		   uint32_t *txsize);

/* The library's configuration after cfg_use_rshare loaded it; NULL before,
 * or when it was bad. */
const struct cfg *cfg_lib(void);

#endif
