/*
 * json.c - the command's small JSON reader (json.h): a recursive descent
 * over the hub's stat answer, each value keeping its text (raw) so that
 * the filtered output can copy it unchanged.
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

struct jp {
	const char *p, *end;
	int depth;
};

static void jskip(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static char *jstring(struct jp *j)
{
	char *out, *o;
	const char *q;
	if (j->p >= j->end || *j->p != '"')
		return NULL;
	j->p++;
	/* as long as the string is (its escapes only shorten it), not the
	 * rest of the input: an answer of many strings stays linear */
	for (q = j->p; q < j->end && *q != '"'; q++)
		if (*q == '\\' && q + 1 < j->end)
			q++;
	out = o = malloc((size_t)(q - j->p) + 1);
	if (!out)
		return NULL;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;
		if (c == '\\') {
			if (j->p >= j->end)
				break;
			c = *j->p++;
			switch (c) {
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				unsigned v = 0;
				for (int i = 0; i < 4; i++, j->p++) {
					char h = j->p < j->end ? *j->p : 'x';
					v <<= 4;
					if (h >= '0' && h <= '9')
						v |= h - '0';
					else if ((h | 32) >= 'a' && (h | 32) <= 'f')
						v |= (h | 32) - 'a' + 10;
					else {
						free(out);
						return NULL;
					}
				}
				c = v < 0x80 ? (char)v : '?';
				break;
			}
			default: break; /* \" \\ \/ */
			}
		}
		*o++ = c;
	}
	if (j->p >= j->end) {
		free(out);
		return NULL;
	}
	j->p++;
	*o = 0;
	return out;
}

static int jvalue(struct jp *j, struct jv *v)
{
	memset(v, 0, sizeof(*v));
	jskip(j);
	if (j->p >= j->end || ++j->depth > 32)
		return -1;
	v->raw = j->p;
	if (*j->p == '{' || *j->p == '[') {
		char close = *j->p == '{' ? '}' : ']';
		size_t cap = 0;
		v->type = *j->p == '{' ? J_OBJ : J_ARR;
		j->p++;
		jskip(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
		} else {
			for (;;) {
				char *key = NULL;
				if (v->nkid == cap) {
					struct jv *nk = realloc(v->kid, (cap = cap ? cap * 2 : 8) * sizeof(*nk));
					if (!nk)
						return -1;
					v->kid = nk;
				}
				if (v->type == J_OBJ) {
					jskip(j);
					if (!(key = jstring(j)))
						return -1;
					jskip(j);
					if (j->p >= j->end || *j->p++ != ':') {
						free(key);
						return -1;
					}
				}
				if (jvalue(j, &v->kid[v->nkid]) < 0) {
					free(key);
					return -1;
				}
				v->kid[v->nkid++].key = key;
				jskip(j);
				if (j->p < j->end && *j->p == ',') {
					j->p++;
					continue;
				}
				if (j->p < j->end && *j->p == close) {
					j->p++;
					break;
				}
				return -1;
			}
		}
	} else if (*j->p == '"') {
		v->type = J_STR;
		if (!(v->str = jstring(j)))
			return -1;
	} else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
		v->type = J_BOOL;
		v->num = *j->p == 't';
		j->p += *j->p == 't' ? 4 : 5;
	} else if (!strncmp(j->p, "null", 4)) {
		v->type = J_NULL;
		j->p += 4;
	} else {
		char *e;
		v->type = J_NUM;
		v->num = strtod(j->p, &e);
		if (e == j->p)
			return -1;
		j->p = e;
	}
	v->rawlen = j->p - v->raw;
	j->depth--;
	return 0;
}

int json_parse(const char *s, size_t len, struct jv *out)
{
	struct jp j = {.p = s, .end = s + len};
	if (jvalue(&j, out) < 0 || out->type != J_OBJ)
		return -1;
	jskip(&j);
	return j.p == j.end ? 0 : -1;
}

const struct jv *jget(const struct jv *o, const char *key)
{
	for (size_t i = 0; o && o->type == J_OBJ && i < o->nkid; i++)
		if (!strcmp(o->kid[i].key, key))
			return &o->kid[i];
	return NULL;
}

unsigned long long jnum(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);
	return v && v->type == J_NUM && v->num > 0 ? (unsigned long long)v->num : 0;
}

const char *jstr(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);
	return v && v->type == J_STR ? v->str : "-";
}

const struct jv *jarr(const struct jv *o, const char *key)
{
	static const struct jv empty = {.type = J_ARR};
	const struct jv *v = jget(o, key);
	return v && v->type == J_ARR ? v : &empty;
}
