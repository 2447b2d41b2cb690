#include "out.h"

#include "textnum.h"
#include "util.h"

#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The 1023.95 threshold avoids printing "1024.0 KiB". */
const char *out_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", n);
        return buf;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1023.95 && u + 1 < ARRAY_LEN(unit)) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

const char *out_eta(uint64_t s, char *buf, size_t cap)
{
    if (s < 60)
        snprintf(buf, cap, "%" PRIu64 "s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    return buf;
}

/* Reply values could otherwise carry terminal escape sequences to the
 * user's screen. */
void out_clean(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        putc(c < 0x20 || c == 0x7f ? '?' : c, f);
    }
}

char *out_clean_copy(const char *s)
{
    char *out = xstrdup(s);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return out;
}

void out_reason(FILE *f, const char *code, const char *msg)
{
    out_clean(f, code);
    fputs(": ", f);
    out_clean(f, msg);
    /* The disk that is full is not the one the user wrote to, nor theirs to
     * clean: whose it is, and who can free it. */
    if (strcmp(code, "no_space") == 0)
        fputs(" (this is hubd's cache, not your disk or output folder: ask hubd's admin to free "
              "room: hubctl gc, max_cache_size, min_free_space)",
              f);
    putc('\n', f);
}

void out_user_names(const char *uids, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (const char *p = uids ? uids : ""; *p && len + 1 < cap;) {
        char *end;
        unsigned long uid = strtoul(p, &end, 10);
        if (end == p)
            break;
        const struct passwd *pw = getpwuid((uid_t)uid);
        if (pw)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", pw->pw_name);
        else
            len += (size_t)snprintf(out + len, cap - len, "%s%lu", len ? "," : "", uid);
        p = *end == ',' ? end + 1 : end;
    }
    if (!out[0])
        snprintf(out, cap, "-");
}

void out_line_add(out_line_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        l->len += (size_t)n < sizeof l->buf - l->len ? (size_t)n : sizeof l->buf - l->len - 1;
}

void out_line_amount(out_line_t *l, uint64_t done, int has_total, uint64_t total)
{
    char a[32], b[32];
    if (has_total)
        out_line_add(l, "%s / %s", out_bytes(done, a, sizeof a), out_bytes(total, b, sizeof b));
    else
        out_line_add(l, "%s", out_bytes(done, a, sizeof a));
}

const char *out_get_or(const proto_msg_t *m, const char *key, const char *dflt)
{
    const char *v = proto_get(m, key);
    return v ? v : dflt;
}

const char *out_field_bytes(const proto_msg_t *m, const char *key, char *buf, size_t cap)
{
    uint64_t v;
    if (parse_u64(proto_get(m, key), &v) < 0)
        return "?";
    return out_bytes(v, buf, cap);
}

const char *out_field_time(const proto_msg_t *m, const char *key, char *buf, size_t cap)
{
    uint64_t v;
    struct tm tm;
    time_t t;
    if (parse_u64(proto_get(m, key), &v) < 0 || v > INT64_MAX)
        return "?";
    t = (time_t)v;
    if (!localtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%d %H:%M", &tm) == 0)
        return "?";
    return buf;
}
