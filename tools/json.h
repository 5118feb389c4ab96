/*
 * json.h - a small JSON reader for the command: the hub's stat schema is
 * fixed (core/hub/stat.c), so this reads a whole document into a tree of values
 * and looks members up by key; nothing is ever freed (one process, one
 * answer).
 */
#ifndef RSHARE_JSON_H
#define RSHARE_JSON_H

#include <stddef.h>

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

/* S (LEN bytes), which must be one object and nothing else: 0, or -1 */
int json_parse(const char *s, size_t len, struct jv *out);
/* a member of object O, or NULL */
const struct jv *jget(const struct jv *o, const char *key);
/* the member KEY as a positive number (else 0), a string (else "-"), an
 * array (else an empty one) */
unsigned long long jnum(const struct jv *o, const char *key);
const char *jstr(const struct jv *o, const char *key);
const struct jv *jarr(const struct jv *o, const char *key);

#endif
