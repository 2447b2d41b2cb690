/* log: stderr with journald priority prefixes when run by systemd. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Written by the loop thread (start-up, SIGHUP), read by every thread. */
static atomic_int log_threshold = LOG_LVL_INFO;
static int log_journal; /* stderr is journald: prefix "<N>" */

void log_init(int level)
{
    log_set_level(level);
    log_journal = getenv("JOURNAL_STREAM") != NULL;
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
    if (log_journal)
        fprintf(stderr, "<%d>%s\n", level, line);
    else
        fprintf(stderr, "hubd: %s\n", line);
}
