/*
 * log.h - leveled logging for the hub and the tools.
 *
 * The level comes from RSHARE_LOG (error, warn, info, debug; default warn
 * for the hub).  Lines go to stderr, or to syslog once log_to_syslog().  The preload library logs nothing unless RSHARE_LOG asks.
 */
#ifndef RSHARE_LOG_H
#define RSHARE_LOG_H

enum { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

extern int log_level;
void log_init(const char *prog, int default_level);
void log_to_syslog(void);   /* from now on to syslog (daemon facility) */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) do { if (log_level >= LOG_LVL_INFO) log_msg(LOG_LVL_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_level >= LOG_LVL_DEBUG) log_msg(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)

#endif
