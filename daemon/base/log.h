/* log: leveled messages on stderr, the one log sink of hubd.
 *
 * Levels are syslog's numbers so that, under systemd (JOURNAL_STREAM set),
 * each line carries a "<N>" prefix that journald turns into a priority.
 * Credentials must never reach this module: callers log URLs, not headers. */
#ifndef HUBD_LOG_H
#define HUBD_LOG_H

enum { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

void log_init(int level);
/* Each line starts with the local date and time (a per-user daemon's log
 * file; journald and a terminal have their own). */
void log_set_timestamps(int on);
/* A log that is a file (a per-user daemon's) is emptied, with a line that
 * says so, once past max bytes (checked every 256 lines); 0: unbounded. */
void log_set_bound(long max);
void log_set_level(int level);         /* SIGHUP: any thread may be logging meanwhile */
int log_level_parse(const char *name); /* "error"... "debug", or -EINVAL */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
