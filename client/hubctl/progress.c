#include "progress.h"

#include "out.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define REDRAW_INTERVAL 0.1 /* seconds between redraws of the TTY progress line */
#define PLAIN_INTERVAL 1.0  /* seconds between plain progress lines of one URL */

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t term_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
        return ws.ws_col;
    return 80;
}

/* Seconds left at `rate`, or -1 when that is unknowable. */
static int64_t eta_seconds(uint64_t done, uint64_t total, uint64_t rate)
{
    if (rate == 0 || done > total)
        return -1;
    return (int64_t)((total - done + rate - 1) / rate);
}

/* "  95.1 MiB/s  ETA 3s" after an amount; ETA only when it is known. */
static void line_rate(out_line_t *l, const req_t *r)
{
    char a[32], b[32];
    int64_t eta = r->has_total ? eta_seconds(r->done, r->total, r->rate) : -1;
    if (r->rate)
        out_line_add(l, "  %s/s", out_bytes(r->rate, a, sizeof a));
    if (eta >= 0)
        out_line_add(l, "  ETA %s", out_eta((uint64_t)eta, b, sizeof b));
}

/* " in 4.2 s, 243.1 MiB/s": what a finished fetch took, on average, since
 * hubctl started (queueing included, as curl's average speed). */
static void line_took(out_line_t *l, uint64_t bytes, double secs)
{
    char a[32];
    out_line_add(l, " in %.1f s", secs);
    if (secs >= 0.001)
        out_line_add(l, ", %s/s", out_bytes((uint64_t)((double)bytes / secs), a, sizeof a));
}

/* What a download that brings no bytes now is doing: "connecting",
 * "retrying in 2s (connection refused, attempt 2 of 6)", "storing"; 0 when
 * it is bringing bytes (or the daemon did not say). */
static int line_doing(out_line_t *l, const req_t *r)
{
    char a[32];
    if (r->reason) {
        double left = r->retry_at - progress_now();
        out_line_add(l, "retrying in %s (%s, attempt %u of %u)",
                     out_eta(left > 0 ? (uint64_t)(left + 0.999) : 0, a, sizeof a), r->reason,
                     r->attempt + 1, r->attempts);
        return 1;
    }
    if (str_eq(r->phase, "connecting") || str_eq(r->phase, "resuming")) {
        out_line_add(l, "%s", r->phase);
        return 1;
    }
    if (str_eq(r->phase, "committing")) {
        out_line_add(l, "storing");
        return 1;
    }
    return 0;
}

/* The TTY line of a single URL within width columns; secs: since the fetch
 * began. What it says comes first: on a narrow terminal the name is cut
 * (its end kept, "..." before it), not the numbers. */
static void render_state(out_line_t *l, const req_t *r, double secs);
static void render_one(out_line_t *l, const req_t *r, double secs, size_t width)
{
    out_line_t rest = {.len = 0};
    render_state(&rest, r, secs);
    size_t name = strlen(r->label), room = width > rest.len + 2 ? width - rest.len - 2 : 0;
    if (name <= room)
        out_line_add(l, "%s  %s", r->label, rest.buf);
    else if (room > 3)
        out_line_add(l, "...%s  %s", r->label + name - (room - 3), rest.buf);
    else
        out_line_add(l, "%s", rest.buf);
}

static void render_state(out_line_t *l, const req_t *r, double secs)
{
    char a[32];
    if (r->state == REQ_OK) {
        out_line_add(l, "%s  %s", out_bytes(r->size, a, sizeof a),
                     r->via == VIA_HIT ? "cached" : "done");
        if (r->via != VIA_HIT)
            line_took(l, r->size, secs);
    } else if (r->state == REQ_FAILED) {
        out_line_add(l, "failed");
    } else if (r->via == VIA_HIT) {
        out_line_add(l, "cached");
    } else if (!r->has_progress) {
        out_line_add(l, "%s", r->via == VIA_NONE ? "waiting for hubd" : "queued");
    } else if (line_doing(l, r)) {
        /* said what it is doing */
    } else {
        out_line_amount(l, r->done, r->has_total, r->total);
        if (r->has_total && r->total > 0 && r->done <= r->total)
            out_line_add(l, "  %3d%%", (int)(r->done * 100 / r->total));
        line_rate(l, r);
    }
    if (r->via == VIA_ATTACHED && r->state != REQ_FAILED)
        out_line_add(l, "  attached");
}

/* The TTY line of several URLs: one aggregate, not a line each. */
static void render_all(out_line_t *l, const fetch_t *f, double secs)
{
    uint64_t done = 0, total = 0, rate = 0;
    size_t hits = 0, attached = 0, failed = 0;
    int total_known = 1;
    for (size_t i = 0; i < f->n; i++) {
        const req_t *r = &f->req[i];
        hits += r->via == VIA_HIT;
        attached += r->via == VIA_ATTACHED;
        failed += r->state == REQ_FAILED;
        if (r->state == REQ_OK) {
            done += r->size;
            total += r->size;
        } else if (r->state == REQ_PENDING) {
            done += r->done;
            total += r->total;
            rate += r->rate;
            total_known &= r->has_total || r->via == VIA_HIT;
        }
    }
    req_t sum = {.has_total = total_known, .done = done, .total = total, .rate = rate};
    if (f->per_file) /* hf download: the count huggingface_hub's bar names */
        out_line_add(l, "Fetching %zu file%s  ", f->n, f->n == 1 ? "" : "s");
    out_line_add(l, "[%zu/%zu]  ", f->finished, f->n);
    out_line_amount(l, done, total_known, total);
    if (total_known && total > 0 && done <= total)
        out_line_add(l, "  %3d%%", (int)(done * 100 / total));
    if (f->finished < f->n)
        line_rate(l, &sum);
    else if (done && hits + failed < f->n)
        line_took(l, done, secs);
    if (hits)
        out_line_add(l, "  %zu cached", hits);
    if (attached)
        out_line_add(l, "  %zu attached", attached);
    if (failed)
        out_line_add(l, "  %zu failed", failed);
}

#define MAX_FILE_LINES 8 /* running files shown under the total (hf download) */

/* Puts the cursor at the start of the first line drawn. */
static void cursor_to_top(fetch_t *f)
{
    if (f->lines > 1)
        fprintf(stderr, "\033[%dA", f->lines - 1);
    fputc('\r', stderr);
}

/* '\r', the text cut to the terminal width (a wrapped line could not be
 * redrawn), then clear to the end of the line; with per_file a line for
 * each running request below, and the rest of the screen cleared (lines of
 * files that finished). */
void progress_draw(fetch_t *f, int force)
{
    double now = progress_now();
    if (f->prog != PROG_TTY || (!force && now - f->last_draw < REDRAW_INTERVAL))
        return;
    out_line_t l = {.len = 0};
    size_t width = term_width() - 1;
    if (f->n == 1 && !f->per_file)
        render_one(&l, &f->req[0], now - f->t_start, width);
    else
        render_all(&l, f, now - f->t_start);
    cursor_to_top(f);
    fprintf(stderr, "%.*s\033[K", (int)(l.len < width ? l.len : width), l.buf);
    int lines = 1;
    for (size_t i = 0; f->per_file && i < f->n && lines <= MAX_FILE_LINES; i++) {
        const req_t *r = &f->req[i];
        if (!r->running || r->state != REQ_PENDING)
            continue;
        out_line_t one = {.len = 0};
        render_one(&one, r, now - f->t_start, width > 2 ? width - 2 : width);
        fprintf(stderr, "\n  %.*s\033[K", (int)one.len, one.buf);
        lines++;
    }
    if (f->per_file)
        fputs("\033[J", stderr);
    f->drawn = 1;
    f->lines = lines;
    f->last_draw = now;
}

void progress_clear(fetch_t *f)
{
    if (!f->drawn)
        return;
    cursor_to_top(f);
    fputs(f->per_file ? "\033[J" : "\033[K", stderr);
    f->drawn = 0;
    f->lines = 0;
}

/* The plain (non-TTY) line of one URL, at most once per PLAIN_INTERVAL. */
static void progress_plain(req_t *r)
{
    double now = progress_now();
    char doing[32]; /* a new state (or attempt) is told at once */
    snprintf(doing, sizeof doing, "%s/%u", r->phase, r->reason ? r->attempt : 0);
    if (now - r->last_line < PLAIN_INTERVAL && str_eq(doing, r->shown))
        return;
    snprintf(r->shown, sizeof r->shown, "%s", doing);
    r->last_line = now;
    out_line_t l = {.len = 0};
    out_line_add(&l, "%s ", r->label);
    if (!line_doing(&l, r)) {
        out_line_amount(&l, r->done, r->has_total, r->total);
        line_rate(&l, r);
    }
    if (r->via == VIA_ATTACHED)
        out_line_add(&l, " [attached]");
    fprintf(stderr, "%s\n", l.buf);
}

void progress_update(fetch_t *f, req_t *r)
{
    if (f->prog == PROG_TTY)
        progress_draw(f, 0);
    else if (f->prog == PROG_PLAIN && r->has_progress)
        progress_plain(r);
}

void progress_settled(fetch_t *f, const req_t *r)
{
    char a[32];
    if (f->prog == PROG_TTY && f->finished == f->n) {
        progress_draw(f, 1);
        fputc('\n', stderr);
        f->drawn = 0;
        f->lines = 0;
    } else if (f->prog == PROG_TTY) {
        progress_clear(f);
    } else if (f->prog == PROG_PLAIN && r->state == REQ_OK) {
        out_line_t l = {.len = 0};
        out_line_add(&l, "%s %s done", r->label, out_bytes(r->size, a, sizeof a));
        if (r->via != VIA_HIT)
            line_took(&l, r->size, progress_now() - f->t_start);
        fprintf(stderr, "%s%s\n", l.buf,
                r->via == VIA_HIT        ? " [cached]"
                : r->via == VIA_ATTACHED ? " [attached]"
                                         : "");
    }
}

prog_mode_t progress_mode(const cli_t *c)
{
    if (c->quiet)
        return PROG_OFF;
    if (isatty(STDERR_FILENO))
        return PROG_TTY;
    return c->progress ? PROG_PLAIN : PROG_OFF;
}
