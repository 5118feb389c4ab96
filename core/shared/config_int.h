/*
 * config_int.h - what the two files of the configuration parser share
 * (private to core/shared/config*.c): config.c reads the file and the
 * environment, config_rule.c parses and matches the `use` rules.  Both
 * follow config.h's ways: nothing allocated, no stdio, no locale.
 */
#ifndef RSHARE_CONFIG_INT_H
#define RSHARE_CONFIG_INT_H

#include <stddef.h>

#include "config.h"

/* Append formatted pieces to ERR: only %s and %d. */
void cfg_err_set(char *err, size_t len, const char *fmt, ...);
/* Decimal digits only, at most MAX; 0, or -1 when there are none or too many. */
int cfg_parse_uint(const char *s, const char **end, unsigned long max, unsigned long *out);
/* A `use` line, split into words TOK[0..NTOK) (TOK[0] is "use"), REST what
 * is left past the sixth word: the rule goes into C.  0, or -1 with the
 * problem in ERR. */
int cfg_parse_use(struct cfg *c, char **tok, int ntok, const char *rest, int lineno, char *err,
		  size_t errlen);

#endif
