/* log: stderr with journald priority prefixes when run by systemd. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_threshold = LOG_LVL_INFO; /* loop thread writes it once at start-up */
static int log_journal;                  /* stderr is journald: prefix "<N>" */

void log_init(int level)
{
    log_threshold = level;
    log_journal = getenv("JOURNAL_STREAM") != NULL;
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
    if (level > log_threshold)
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
