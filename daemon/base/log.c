/* log: stderr with journald priority prefixes when run by systemd. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Written by the loop thread (start-up, SIGHUP), read by every thread. */
static atomic_int log_threshold = LOG_LVL_INFO;
static int log_journal; /* stderr is journald: prefix "<N>" */
static int log_stamps;  /* prefix the local time (log_set_timestamps) */
static long log_bound;  /* log_set_bound */
static atomic_uint log_lines;

void log_init(int level)
{
    log_set_level(level);
    log_journal = getenv("JOURNAL_STREAM") != NULL;
}

void log_set_timestamps(int on)
{
    log_stamps = on;
}

void log_set_bound(long max)
{
    log_bound = max;
}

/* Every 256 lines: a regular file past log_bound is emptied (O_APPEND
 * writes then go to its new end). Any thread: a line or two more or less
 * between the check and the truncation does not matter. */
static void log_keep_bounded(void)
{
    struct stat st;
    if (!log_bound || atomic_fetch_add(&log_lines, 1) % 256 != 0)
        return;
    if (fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > log_bound &&
        ftruncate(STDERR_FILENO, 0) == 0)
        fprintf(stderr, "hubd: the log passed %ld bytes and was emptied\n", log_bound);
}

void log_set_level(int level)
{
    atomic_store_explicit(&log_threshold, level, memory_order_relaxed);
}

int log_level_parse(const char *name)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {
        {"error", LOG_LVL_ERR},
        {"warning", LOG_LVL_WARN},
        {"info", LOG_LVL_INFO},
        {"debug", LOG_LVL_DEBUG},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].level;
    return -EINVAL;
}

void log_msg(int level, const char *fmt, ...)
{
    if (level > atomic_load_explicit(&log_threshold, memory_order_relaxed))
        return;
    /* One fprintf per line: stderr is unbuffered, so a single call keeps
     * lines from pool threads and the loop thread whole. */
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char stamp[40] = "";
    if (log_stamps && !log_journal) {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (localtime_r(&ts.tv_sec, &tm))
            strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S%z ", &tm);
    }
    if (log_journal)
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "%shubd: %s\n", stamp, line);
    log_keep_bounded();
}
