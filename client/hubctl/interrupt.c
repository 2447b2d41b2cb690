#include "interrupt.h"

#include "out.h"
#include "textnum.h"
#include "util.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    got_sigint = 1;
}

void interrupt_arm(void)
{
    struct sigaction sa = {.sa_handler = on_sigint}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

int interrupt_pending(void)
{
    return got_sigint != 0;
}

void interrupt_disarm(void)
{
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

int interrupt_take(interrupt_account_t *a, const char *id, const proto_msg_t *m)
{
    const char *mid = proto_get(m, "id"), *code = proto_get(m, "code");
    if (str_eq(m->verb, "OK") && mid && str_eq(mid, id)) {
        a->answered = 1;
        return 1;
    }
    if (!str_eq(m->verb, "ERR") || !code)
        return 0;
    if (!mid && str_eq(code, "unknown_verb")) { /* a hubd older than INTERRUPT */
        a->unknown = 1;
        return 1;
    }
    uint64_t job, stopped, n = 0, done = 0;
    if (!str_eq(code, "interrupted") || parse_u64(proto_get(m, "job"), &job) < 0 ||
        parse_u64(proto_get(m, "stopped"), &stopped) < 0)
        return 0; /* a fetch that had no download yet, or another line */
    parse_u64(proto_get(m, "done"), &done);
    if (stopped) {
        uint64_t resumable = 0;
        parse_u64(proto_get(m, "resumable"), &resumable);
        if (resumable) {
            a->stopped++;
            a->kept += done;
        } else {
            a->stopped_fresh++;
        }
    } else {
        parse_u64(proto_get(m, "waiters"), &n);
        if (!a->going++)
            a->going_job = job;
        a->going_waiters += (unsigned)n;
    }
    return 0;
}

void interrupt_say(const interrupt_account_t *a, FILE *err)
{
    out_line_t l = {.len = 0};
    out_line_add(&l, "hubctl: interrupted");
    if (a->unknown || !a->answered) {
        out_line_add(&l, "; %s: any download goes on for the cache",
                     a->unknown ? "this hubd cannot stop one on request" : "hubd did not answer");
        fprintf(err, "%s\n", l.buf);
        return;
    }
    unsigned stopped = a->stopped + a->stopped_fresh;
    if (stopped) {
        if (stopped == 1)
            out_line_add(&l, ": the download stopped");
        else
            out_line_add(&l, ": %u downloads stopped", stopped);
        if (a->stopped && a->kept) {
            char size[32];
            out_line_add(&l, ", %s kept", out_bytes(a->kept, size, sizeof size));
        }
        if (a->stopped)
            out_line_add(&l, ": run the same command again to resume");
        if (a->stopped_fresh)
            out_line_add(&l, " (%u%s had no ETag or Last-Modified to resume with: nothing kept)",
                         a->stopped_fresh, stopped > 1 ? " of them" : "");
    }
    if (a->going) {
        out_line_add(&l, "%s", stopped ? "; " : ": ");
        if (a->going == 1)
            out_line_add(&l, "the download (job %llu) goes on", (unsigned long long)a->going_job);
        else
            out_line_add(&l, "%u downloads go on (job %llu, ...)", a->going,
                         (unsigned long long)a->going_job);
        if (a->going_waiters)
            out_line_add(&l, " for %u other waiting request%s", a->going_waiters,
                         a->going_waiters == 1 ? "" : "s");
        else
            out_line_add(&l, " for the cache (a client that left it let it run)");
        out_line_add(&l, "; `hubctl cancel %llu` stops it%s", (unsigned long long)a->going_job,
                     a->going_waiters
                         ? " for everyone (if those requests are yours; else an admin can)"
                         : "");
    }
    if (!stopped && !a->going)
        out_line_add(&l, ": no download was running");
    fprintf(err, "%s\n", l.buf);
}
