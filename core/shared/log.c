/*
 * log.c - leveled logging to stderr, one line per message, with the
 * program name and pid so that hub logs from several nodes can be merged.
 */
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

int log_level = LOG_LVL_WARN;
static const char *log_prog = "rshare";
static int log_syslog;

void log_to_syslog(void)
{
	openlog(log_prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = 1;
}

static int parse_level(const char *s, int dflt)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	if (!s || !*s)
		return dflt;
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return dflt;
}

void log_init(const char *prog, int default_level)
{
	log_prog = prog;
	log_level = parse_level(getenv("RSHARE_LOG"), default_level);
}

void log_msg(int level, const char *fmt, ...)
{
	static const char *tag[] = {"error", "warn", "info", "debug"};
	char buf[1024];
	int saved = errno, n;
	va_list ap;
	if (level > log_level)
		return;
	if (log_syslog) {
		static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
		va_start(ap, fmt);
		vsyslog(prio[level], fmt, ap);
		va_end(ap);
		errno = saved;
		return;
	}
	n = snprintf(buf, sizeof(buf), "%s[%d]: %s: ", log_prog, (int)getpid(), tag[level]);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (sys_write(2, buf, n) < 0) { /* raw: the library interposes write() */
		/* nowhere left to report it */
	}
	errno = saved;
}
