/* promtext: the Prometheus text format of hubd's counters (see promtext.h). */
#include "promtext.h"
#include "textnum.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* STATS fields and their Prometheus metrics: the names hubctl's
 * --prometheus and --json and the daemon's /metrics use alike. */
static const promtext_metric_t metrics[] = {
    {"hits", "hubd_hits_total", "counter", "Fetches answered from the cache."},
    {"misses", "hubd_misses_total", "counter", "Fetches that started a download."},
    {"attached", "hubd_dedup_attaches_total", "counter",
     "Fetches that joined a download already running."},
    {"bytes_from_origin", "hubd_origin_bytes_total", "counter",
     "Response body bytes received from origins."},
    {"bytes_served", "hubd_served_bytes_total", "counter", "Bytes of the files handed out."},
    {"cache_bytes", "hubd_cache_size_bytes", "gauge", "Bytes of the blobs in the cache."},
    {"cache_blobs", "hubd_cache_blobs", "gauge", "Blobs in the cache."},
    {"max_cache_size", "hubd_cache_max_size_bytes", "gauge",
     "The configured max_cache_size (0: no limit)."},
    {"evicted", "hubd_evicted_blobs_total", "counter", "Blobs evicted."},
    {"evicted_bytes", "hubd_evicted_bytes_total", "counter", "Bytes evicted."},
    {"bad_blobs", "hubd_bad_blobs_total", "counter",
     "Blobs found changed or corrupt on disk (hits, background verification), quarantined."},
    {"segmented", "hubd_segmented_downloads_total", "counter",
     "Downloads fetched over several connections."},
    {"segment_retries", "hubd_segment_retries_total", "counter",
     "Ranges of segmented downloads asked for again (a failure, a stall, a 429)."},
    {"segment_fallbacks", "hubd_segment_fallbacks_total", "counter",
     "Segmented downloads restarted as one stream (ranges that did not fit together)."},
    {"revalidated", "hubd_revalidated_total", "counter",
     "Cached URLs the origin said were current (304 Not Modified), served as hits."},
    {"commits", "hubd_commits_total", "counter", "Downloads committed to the cache."},
    {"commit_groups", "hubd_commit_groups_total", "counter",
     "Group commits: the transactions (and fsyncs) those commits shared."},
    {"commit_name_syncs", "hubd_commit_name_syncs_total", "counter",
     "Group commits whose new names one syncfs made durable, not an fsync of each folder."},
    {"hits_on_loop", "hubd_hits_on_loop_total", "counter",
     "Hits answered on the event loop, with no thread pool item (their path was cached)."},
    {"jobs_active", "hubd_jobs_active", "gauge", "Downloads transferring now."},
    {"jobs_queued", "hubd_jobs_queued", "gauge", "Downloads waiting for a slot."},
    {"sessions", "hubd_sessions", "gauge", "Connected clients."},
    {"http_connections", "hubd_http_connections_total", "counter",
     "Connections accepted by the HTTP front."},
    {"http_requests", "hubd_http_requests_total", "counter",
     "Requests the HTTP front answered, whatever the status."},
    {"http_bytes", "hubd_http_bytes_total", "counter", "Body bytes the HTTP front sent."},
    {"http_refused", "hubd_http_refused_total", "counter",
     "HTTP front connections refused (user unknown or not allowed, over a limit)."},
    {"holds", "hubd_holds", "gauge", "Holds of blobs linked into users' HF caches."},
    {"held_bytes", "hubd_held_bytes", "gauge", "Bytes of the blobs held (each once)."},
    {"listing_bytes", "hubd_listing_bytes", "gauge",
     "Bytes the HFREPO file lists alive hold on the cache's disk."},
    {"uptime", "hubd_uptime_seconds", "gauge", "Seconds since the daemon started."},
};

const promtext_metric_t *promtext_metrics(size_t *n)
{
    *n = sizeof metrics / sizeof metrics[0];
    return metrics;
}

const char *promtext_name_of(const char *key)
{
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        if (strcmp(metrics[i].key, key) == 0)
            return metrics[i].name;
    return strcmp(key, "errors_by_code") == 0 ? "hubd_errors_total" : NULL;
}

int promtext_family(bytebuf_t *out, const char *name, const char *type, const char *help)
{
    return bytebuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The length of the UTF-8 character at p (at most n bytes there), or 0
 * when the bytes are none: an overlong form, a surrogate, past U+10FFFF or
 * cut. The format's label values are UTF-8, and Prometheus refuses a scrape
 * with one that is not. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len = c < 0x80                 ? 1
                 : c >= 0xc2 && c <= 0xdf ? 2
                 : (c & 0xf0) == 0xe0     ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

void promtext_escape(const char *value, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)value;
    size_t n = strlen(value), o = 0;
    if (!cap)
        return;
    for (size_t i = 0; i < n;) {
        char esc[2] = {0, 0};
        size_t len = utf8_len(p + i, n - i);
        if (p[i] == '\\' || p[i] == '"')
            esc[0] = '\\', esc[1] = (char)p[i];
        else if (p[i] == '\n')
            esc[0] = '\\', esc[1] = 'n';
        const unsigned char *src = esc[0] ? (const unsigned char *)esc : p + i;
        size_t w = esc[0] ? 2 : len;
        if (!esc[0] && (!len || p[i] < 0x20 || p[i] == 0x7f)) {
            src = (const unsigned char *)"?"; /* not a character, or a control byte */
            w = 1;
            len = len ? len : 1;
        }
        if (o + w + 1 > cap)
            break;
        memcpy(out + o, src, w);
        o += w;
        i += esc[0] ? 1 : len;
    }
    out[o] = '\0';
}

int promtext_sample(bytebuf_t *out, const char *name, const char *label, const char *value,
                    uint64_t v)
{
    char esc[512];
    promtext_escape(value, esc, sizeof esc);
    return bytebuf_printf(out, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, esc, v);
}

int promtext_stats(bytebuf_t *out, const proto_msg_t *m)
{
    int rc = 0;
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0] && !rc; i++) {
        uint64_t v;
        if (parse_u64(proto_get(m, metrics[i].key), &v) < 0)
            continue; /* an older daemon: leave the metric out, not 0 */
        rc = promtext_family(out, metrics[i].name, metrics[i].type, metrics[i].help);
        if (!rc)
            rc = bytebuf_printf(out, "%s %" PRIu64 "\n", metrics[i].name, v);
    }
    if (!rc)
        rc = promtext_family(out, "hubd_errors_total", "counter",
                             "Fetches answered with an error, by error code.");
    /* errors_by_code=code:n,code:n (codes are the daemon's own names) */
    const char *by = proto_get(m, "errors_by_code");
    while (!rc && by && *by) {
        size_t len = strcspn(by, ",");
        const char *colon = memchr(by, ':', len);
        uint64_t v;
        char code[64], num[24];
        if (colon && colon > by && (size_t)(colon - by) < sizeof code &&
            len - (size_t)(colon - by) - 1 < sizeof num) {
            snprintf(code, sizeof code, "%.*s", (int)(colon - by), by);
            snprintf(num, sizeof num, "%.*s", (int)(len - (size_t)(colon - by) - 1), colon + 1);
            if (parse_u64(num, &v) == 0)
                rc = promtext_sample(out, "hubd_errors_total", "code", code, v);
        }
        by += len + (by[len] == ',');
    }
    return rc;
}
