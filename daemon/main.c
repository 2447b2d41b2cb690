/* hubd: the daemon's entry point: settings, start-up, signals, shutdown. */
#include "config.h"
#include "db.h"
#include "job.h"
#include "log.h"
#include "reconcile.h"
#include "session.h"
#include "sha256.h"
#include "store.h"
#include "tls.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define HUBD_VERSION "0.1.0"

typedef struct daemon_state {
    uv_loop_t *loop;
    hubd_config_t cfg;
    store_t *store;
    db_t *db;
    tls_ctx_t *tls;
    jobs_t *jobs;
    session_server_t *server;
    uv_signal_t sigint, sigterm;
    int stopping;
} daemon_state_t;

static void usage(FILE *out)
{
    fprintf(out, "usage: hubd [--config FILE] [--socket PATH] [--cache-dir DIR] [--ca-file FILE]\n"
                 "            [--log-level LEVEL]\n"
                 "\n"
                 "The hubd download cache daemon. Runs in the foreground and logs to stderr.\n"
                 "  --config FILE     read settings from an INI file (see etc/hubd.conf)\n"
                 "  --socket PATH     Unix socket to listen on (default: $HUBD_SOCKET,\n"
                 "                    $XDG_RUNTIME_DIR/hubd.sock, or /run/hubd/hubd.sock)\n"
                 "  --cache-dir DIR   cache directory (default: $XDG_CACHE_HOME/hubd or\n"
                 "                    ~/.cache/hubd; /var/cache/hubd for root)\n"
                 "  --ca-file FILE    trusted CA certificates (PEM) for https:// (default: the\n"
                 "                    system bundle, /etc/ssl/certs/ca-certificates.crt)\n"
                 "  --log-level L     error, warning, info (default) or debug\n"
                 "  --version         print the version and exit\n"
                 "SIGINT or SIGTERM stops it cleanly.\n");
}

static void on_signal_closed(uv_handle_t *h)
{
    (void)h;
}

static void on_jobs_down(void *arg)
{
    daemon_state_t *d = arg;
    uv_close((uv_handle_t *)&d->sigint, on_signal_closed);
    uv_close((uv_handle_t *)&d->sigterm, on_signal_closed);
}

static void on_server_down(void *arg)
{
    daemon_state_t *d = arg;
    jobs_shutdown(d->jobs, on_jobs_down, d);
}

/* Stop order: jobs fail first (requests aborted, each waiter hears ERR
 * shutting_down), then sessions drain their replies and close, then the jobs
 * module waits for its pool work and frees itself, then the signal handles
 * close; uv_run returns when no handle is left. */
static void on_signal(uv_signal_t *h, int signum)
{
    daemon_state_t *d = h->data;
    if (d->stopping)
        return;
    d->stopping = 1;
    log_info("signal %d: shutting down", signum);
    jobs_stop(d->jobs);
    session_server_close(d->server, on_server_down, d);
}

/* Settings: defaults, then the file, then flags (so flags win). */
static int parse_args(int argc, char **argv, hubd_config_t *cfg)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},    {"socket", required_argument, NULL, 's'},
        {"cache-dir", required_argument, NULL, 'd'}, {"log-level", required_argument, NULL, 'l'},
        {"ca-file", required_argument, NULL, 'a'},   {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0},
    };
    const char *config_file = NULL, *socket = NULL, *cache_dir = NULL, *level = NULL;
    const char *ca_file = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "c:s:d:l:a:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config_file = optarg;
            break;
        case 's':
            socket = optarg;
            break;
        case 'd':
            cache_dir = optarg;
            break;
        case 'l':
            level = optarg;
            break;
        case 'a':
            ca_file = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("hubd %s\n", HUBD_VERSION);
            exit(0);
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hubd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -EINVAL;
    }
    int rc = config_defaults(cfg);
    if (rc) {
        fprintf(stderr, "hubd: cannot work out default paths (is HOME set?)\n");
        return rc;
    }
    if (config_file) {
        char err[600];
        if ((rc = config_load_file(cfg, config_file, err, sizeof err))) {
            fprintf(stderr, "hubd: %s\n", err);
            return rc;
        }
    }
    const struct {
        const char *key, *value, *flag;
    } flags[] = {{"socket", socket, "--socket"},
                 {"cache_dir", cache_dir, "--cache-dir"},
                 {"log_level", level, "--log-level"},
                 {"ca_file", ca_file, "--ca-file"}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (flags[i].value && config_set(cfg, flags[i].key, flags[i].value)) {
            fprintf(stderr, "hubd: bad value '%s' for %s\n", flags[i].value, flags[i].flag);
            return -EINVAL;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static daemon_state_t d;
    if (parse_args(argc, argv, &d.cfg))
        return 2;
    log_init(d.cfg.log_level);
    signal(SIGPIPE, SIG_IGN);

    d.loop = uv_default_loop();
    char db_path[PATH_MAX];
    int rc = store_open(d.cfg.cache_dir, &d.store);
    if (rc)
        goto out;
    snprintf(db_path, sizeof db_path, "%s/hubd.db", d.cfg.cache_dir);
    if ((rc = db_open(db_path, &d.db)))
        goto out;
    reconcile_report_t rep;
    if ((rc = reconcile_cache(d.store, d.db, &rep)))
        goto out;
    char err[600];
    if ((rc = tls_ctx_new(&d.cfg, &d.tls, err, sizeof err))) {
        log_err("TLS set-up: %s", err);
        goto out;
    }
    if ((rc = jobs_new(d.loop, &d.cfg, d.store, d.db, d.tls, &d.jobs)))
        goto out;
    jobs_set_first_id(d.jobs, rep.max_partial_id);
    if ((rc = session_server_start(d.loop, &d.cfg, d.jobs, d.db, &d.server))) {
        jobs_shutdown(d.jobs, NULL, NULL);
        goto run_out;
    }
    uv_signal_init(d.loop, &d.sigint);
    uv_signal_init(d.loop, &d.sigterm);
    d.sigint.data = d.sigterm.data = &d;
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    log_info("hubd %s listening on %s, cache %s, sha256 %s, read buffers %zu KiB", HUBD_VERSION,
             d.cfg.socket_path, d.cfg.cache_dir, sha256_impl_name(), d.cfg.read_buffer_size / 1024);

run_out:
    uv_run(d.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(d.loop) != 0)
        log_err("event loop closed with handles still open");
    else if (!rc)
        log_info("stopped");
out:
    tls_ctx_free(d.tls);
    db_close(d.db);
    store_close(d.store);
    config_free(&d.cfg);
    return rc ? 1 : 0;
}
