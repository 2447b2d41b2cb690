/* hubd: the daemon's entry point: settings, start-up, signals, shutdown. */
#include "config.h"
#include "db.h"
#include "job.h"
#include "log.h"
#include "netpolicy.h"
#include "proxy.h"
#include "reconcile.h"
#include "service.h"
#include "session.h"
#include "sha256.h"
#include "store.h"
#include "sweep.h"
#include "hostport.h"
#include "httpd.h"
#include "metrics.h"
#include "tcp_listener.h"
#include "tls.h"
#include "swarm_glue.h"
#include "workers.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define USER_LOG_MAX (16L << 20) /* a per-user daemon's log file is emptied past this */

/* What the command line said; kept, since a reload re-applies it over the
 * file (flags win). */
typedef struct flags {
    const char *config_file, *socket, *cache_dir, *level, *ca_file;
    int check_config;
    int quiet;     /* --check-config prints nothing when the file is good */
    int user_mode; /* started by hubctl for one user: socket 0600 */
} flags_t;

typedef struct daemon_state {
    uv_loop_t *loop;
    flags_t flags;
    hubd_config_t cfg;
    store_t *store;
    db_t *db;
    tls_ctx_t *tls;
    netpolicy_t *policy;
    proxy_settings_t proxies;
    jobs_t *jobs;
    session_server_t *server;
    tcp_listener_t *http;    /* the HTTP front's sockets, NULL: none (or closed) */
    httpd_t *httpd;          /* the HTTP front's server, NULL: none (or closed) */
    tcp_listener_t *mlisten; /* the metrics endpoint's sockets (metrics_listen), or NULL */
    httpd_t *mhttpd;         /* its server, one route: /metrics; NULL: none (or closed) */
    metrics_t *metrics;      /* its page (metrics.h), or NULL */
    struct fleet *fleet;     /* the cluster swarm (fleet.h), NULL: none (or stopped) */
    uv_signal_t sigint, sigterm, sighup;
    int stopping;
    sweep_t *sweep; /* the background check of blobs/ (sweep.h), or NULL */
    /* A reload's CA bundle, read in the pool (one item at a time; a SIGHUP
     * meanwhile has it read once more when it is back). */
    uv_work_t ca_work;
    tls_ca_t *ca;
    int ca_out, ca_again;
    char reload_restart[300]; /* the keys the last reload could not change */
} daemon_state_t;

static void usage(FILE *out)
{
    fprintf(out, "usage: hubd [--config FILE] [--socket PATH] [--cache-dir DIR] [--ca-file FILE]\n"
                 "            [--log-level LEVEL] [--check-config [--quiet]]\n"
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
                 "  --check-config    check the settings (the CA bundle is loaded too), print\n"
                 "                    the effective ones, exit (0: good, 2: an error, named\n"
                 "                    on stderr)\n"
                 "  --quiet           with --check-config: print nothing when it is good\n"
                 "                    (hubd.service checks before start and reload)\n"
                 "  --user-mode       a per-user daemon (as hubctl starts it): socket 0600\n"
                 "  --version         print the version and exit\n"
                 "SIGINT or SIGTERM stops it cleanly (running downloads keep their partials\n"
                 "for the next start); SIGHUP re-reads the configuration file.\n"
                 "Under systemd: socket activation (LISTEN_FDS: the Unix socket, and TCP\n"
                 "sockets for the HTTP front, which then win over http_listen) and\n"
                 "Type=notify.\n");
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
    uv_close((uv_handle_t *)&d->sighup, on_signal_closed);
}

/* The swarm stops after jobs_stop, which took every swarm download back
 * from it (swarm_glue.h). */
static void stop_fleet(daemon_state_t *d)
{
    swarm_glue_stop(d->fleet, d->server);
    d->fleet = NULL;
}

static void on_server_down(void *arg)
{
    daemon_state_t *d = arg;
    jobs_shutdown(d->jobs, on_jobs_down, d);
}

/* A client of the HTTP front: httpd's (a client before the server exists,
 * in the start-up's last steps, is accepted and closed). */
static void on_http_client(void *arg, tcp_listener_t *l)
{
    daemon_state_t *d = arg;
    httpd_accept(d->loop, d->httpd, l);
}

/* Whether addr (formatted) is one of the n addresses of list. */
static int addr_in(const char *addr, const struct sockaddr_storage *list, size_t n)
{
    char other[80];
    for (size_t i = 0; i < n; i++)
        if (hostport_format((const struct sockaddr *)&list[i], other, sizeof other) > 0 &&
            strcmp(addr, other) == 0)
            return 1;
    return 0;
}

/* Whether the TCP sockets systemd passed are bound to the addresses
 * http_listen names, neither more nor fewer: an admin who keeps the two in
 * step (as the package ships them) is told nothing. */
static int http_listen_matches(const hubd_config_t *cfg, const int *fds, size_t nfds)
{
    struct sockaddr_storage passed[HOSTPORT_MAX_ADDRS];
    char addr[80];
    for (size_t i = 0; i < nfds; i++) {
        socklen_t len = sizeof passed[i];
        if (getsockname(fds[i], (struct sockaddr *)&passed[i], &len))
            return 0;
    }
    for (size_t i = 0; i < nfds; i++)
        if (hostport_format((const struct sockaddr *)&passed[i], addr, sizeof addr) < 0 ||
            !addr_in(addr, cfg->http_listen.addrs, cfg->http_listen.n))
            return 0;
    for (size_t i = 0; i < cfg->http_listen.n; i++)
        if (hostport_format((const struct sockaddr *)&cfg->http_listen.addrs[i], addr,
                            sizeof addr) < 0 ||
            !addr_in(addr, passed, nfds))
            return 0;
    return 1;
}

/* The HTTP front's sockets. Sockets systemd passed win: the
 * socket unit decides, and http_listen is then ignored (logged when the
 * two disagree);
 * without any, hubd binds http_listen itself; with neither, there is no
 * HTTP front. */
static int start_http(daemon_state_t *d, const int *fds, size_t nfds)
{
    if (nfds && d->cfg.http_listen.n && !http_listen_matches(&d->cfg, fds, nfds))
        log_warn("http_listen (%s) is ignored under socket activation: the HTTP front uses the "
                 "TCP sockets systemd passed (ListenStream= of the socket unit)",
                 d->cfg.http_listen.text);
    if (!nfds && !d->cfg.http_listen.n)
        return 0;
    int rc = tcp_listener_start(d->loop, "HTTP front", d->cfg.http_listen.addrs,
                                d->cfg.http_listen.n, fds, nfds, on_http_client, d, &d->http);
    if (rc)
        return rc;
    /* Fetches never go back into the front (netpolicy_set_self). */
    struct sockaddr_storage own[HOSTPORT_MAX_ADDRS];
    netpolicy_set_self(d->policy, own, tcp_listener_addrs(d->http, own, HOSTPORT_MAX_ADDRS));
    return 0;
}

/* The HTTP front's counters, as the sessions' STATS and STATUS show them. */
static void front_stats(void *arg, session_front_stats_t *out)
{
    httpd_stats_t hs;
    httpd_get_stats(arg, &hs);
    *out = (session_front_stats_t){.connections = hs.connections,
                                   .requests = hs.requests,
                                   .bytes = hs.bytes,
                                   .refused = hs.refused,
                                   .open = hs.open};
}

/* The HTTP front's server, sharing the sessions' access lists and quota. */
static int start_httpd(daemon_state_t *d)
{
    httpd_deps_t deps = {
        .loop = d->loop,
        .cfg = &d->cfg,
        .jobs = d->jobs,
        .acl = session_server_acl(d->server),
        .quota = session_server_quota(d->server),
        .store = d->store,
        .db = d->db,
        .hf = session_server_hf(d->server),
    };
    int rc = httpd_new(&deps, &d->httpd);
    if (!rc) {
        struct sockaddr_storage own[HOSTPORT_MAX_ADDRS];
        session_server_set_front_stats(d->server, front_stats, d->httpd);
        session_server_set_front(d->server, own,
                                 tcp_listener_addrs(d->http, own, HOSTPORT_MAX_ADDRS));
    }
    return rc;
}

/* The STATS counters the metrics endpoint renders: the verb's own. */
static void server_stats(void *arg, proto_writer_t *w)
{
    session_server_stats(arg, w);
}

/* A client of the metrics endpoint: its server's (or accepted and closed,
 * before the server exists). */
static void on_metrics_client(void *arg, tcp_listener_t *l)
{
    daemon_state_t *d = arg;
    httpd_accept(d->loop, d->mhttpd, l);
}

/* The metrics endpoint (metrics_listen; off by default): its sockets, then
 * a server of httpd's with the one route /metrics, reading the sessions'
 * STATS counters. After the sessions' server: it reads its counters. */
static int start_metrics(daemon_state_t *d)
{
    if (!d->cfg.metrics_listen.n)
        return 0;
    metrics_deps_t md = {.loop = d->loop,
                         .cfg = &d->cfg,
                         .jobs = d->jobs,
                         .db = d->db,
                         .stats = server_stats,
                         .stats_arg = d->server};
    httpd_deps_t hd = {.loop = d->loop, .cfg = &d->cfg};
    int rc = metrics_new(&md, &d->metrics);
    if (!rc) {
        hd.metrics = d->metrics;
        rc = httpd_new(&hd, &d->mhttpd);
    }
    if (!rc)
        rc =
            tcp_listener_start(d->loop, "metrics endpoint", d->cfg.metrics_listen.addrs,
                               d->cfg.metrics_listen.n, NULL, 0, on_metrics_client, d, &d->mlisten);
    if (rc == -ENOMEM)
        log_err("metrics endpoint: no memory");
    return rc;
}

/* No new HTTP client from here on; the listener frees itself once the loop
 * has closed its handles. */
static void close_http(daemon_state_t *d)
{
    if (d->mlisten)
        tcp_listener_close(d->mlisten, NULL, NULL);
    d->mlisten = NULL;
    if (d->mhttpd) /* its requests leave the metrics' queue */
        httpd_close(d->mhttpd, NULL, NULL);
    d->mhttpd = NULL;
    if (d->metrics) /* an item in the pool frees itself */
        metrics_close(d->metrics);
    d->metrics = NULL;
    if (d->http)
        tcp_listener_close(d->http, NULL, NULL);
    d->http = NULL;
    if (d->httpd) { /* its requests leave their jobs, which run on */
        if (d->server) {
            session_server_set_front_stats(d->server, NULL, NULL);
            session_server_set_front(d->server, NULL, 0);
        }
        httpd_close(d->httpd, NULL, NULL);
    }
    d->httpd = NULL;
}

/* Stop order: the HTTP front stops listening, jobs fail first (requests aborted, each waiter hears
 * ERR shutting_down), then sessions drain their replies and close, then the jobs module waits for
 * its pool work and frees itself, then the signal handles close; uv_run returns when no handle is
 * left. */
static void on_signal(uv_signal_t *h, int signum)
{
    daemon_state_t *d = h->data;
    if (d->stopping)
        return;
    d->stopping = 1;
    log_info("signal %d: shutting down", signum);
    service_stopping();
    sweep_stop(d->sweep); /* a step in flight still holds the jobs' worktrack */
    d->sweep = NULL;
    close_http(d);
    jobs_stop(d->jobs);
    stop_fleet(d);
    session_server_close(d->server, on_server_down, d);
}

static int parse_flags(int argc, char **argv, flags_t *f)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"socket", required_argument, NULL, 's'},
        {"cache-dir", required_argument, NULL, 'd'},
        {"log-level", required_argument, NULL, 'l'},
        {"ca-file", required_argument, NULL, 'a'},
        {"check-config", no_argument, NULL, 'k'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"user-mode", no_argument, NULL, 'u'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "c:s:d:l:a:kqhVu", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            f->config_file = optarg;
            break;
        case 's':
            f->socket = optarg;
            break;
        case 'd':
            f->cache_dir = optarg;
            break;
        case 'l':
            f->level = optarg;
            break;
        case 'a':
            f->ca_file = optarg;
            break;
        case 'k':
            f->check_config = 1;
            break;
        case 'q':
            f->quiet = 1;
            break;
        case 'u':
            f->user_mode = 1;
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
    return 0;
}

/* $XDG_CONFIG_HOME/hubd/hubd.conf, or ~/.config/hubd/hubd.conf: 0, or
 * -ENOENT when neither variable is set. */
static int user_config_path(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(out, cap, "%s/hubd/hubd.conf", xdg);
    else if (home && *home)
        snprintf(out, cap, "%s/.config/hubd/hubd.conf", home);
    else
        return -ENOENT;
    return 0;
}

/* Settings: defaults, then the file (--config; a per-user daemon's own
 * otherwise), then flags (so flags win). On error, err says what and
 * where. */
static int build_config(const flags_t *f, hubd_config_t *cfg, char *err, size_t cap)
{
    int rc = config_defaults(cfg);
    if (rc) {
        snprintf(err, cap, "cannot work out default paths (is HOME set?)");
        return rc;
    }
    /* A per-user daemon reads the user's own settings (CA file, proxy,
     * limits) when there are some and no --config says otherwise. */
    char user_conf[PATH_MAX];
    const char *file = f->config_file;
    if (!file && f->user_mode && user_config_path(user_conf, sizeof user_conf) == 0 &&
        access(user_conf, F_OK) == 0)
        file = user_conf;
    if (file && (rc = config_load_file(cfg, file, err, cap)))
        return rc;
    const struct {
        const char *key, *value, *flag;
    } flags[] = {{"socket", f->socket, "--socket"},
                 {"cache_dir", f->cache_dir, "--cache-dir"},
                 {"log_level", f->level, "--log-level"},
                 {"ca_file", f->ca_file, "--ca-file"}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (flags[i].value && config_set(cfg, flags[i].key, flags[i].value)) {
            snprintf(err, cap, "bad value '%s' for %s", flags[i].value, flags[i].flag);
            return -EINVAL;
        }
    }
    if (f->user_mode) /* one user's daemon: nobody else may connect */
        cfg->socket_mode = 0600;
    return 0;
}

/* What start-up found of a damaged hubd.db, for the log and STATUS=. */
typedef struct rebuilt {
    char aside[PATH_MAX + 64]; /* where the damaged file went; "" if it was sound */
    unsigned recovered;        /* blobs recorded again from blobs/ */
    unsigned quarantined;      /* private blobs no one may open any more */
} rebuilt_t;

/* Opens hubd.db and makes it agree with the files (reconcile). A database
 * that SQLite finds damaged, while opening it, in its quick_check or while
 * reconcile reads it, is trusted no further: any row read from it might be
 * garbage, and a row it cannot read would have its blob quarantined. It is
 * set aside for a person, a new one is made and the blob rows are recorded
 * again from blobs/, whose file names are their digests. Entries, pins and
 * partial rows are lost; the bytes are not: a public blob is a hit by digest
 * again, a URL is downloaded again. Any other error stops the start.
 *
 * Its time does not grow with the cache (a start must not keep clients
 * waiting longer the more the cache holds): after a clean stop
 * (CLEAN_STOP, written last by a run that checked every page) the
 * quick_check, which reads every page, is skipped and left to the sweep;
 * after a crash it runs now. Either way reconcile_start leaves the blobs'
 * side to the background sweep (*swept 0), unless a commit was cut short. */
#define CLEAN_STOP "clean-stop"

static int open_db(daemon_state_t *d, const char *db_path, reconcile_report_t *rep, rebuilt_t *rb,
                   int *swept, int *clean)
{
    /* Taken away at once, durably: a crash from here on leaves no marker
     * (an unlink not yet on the disk could come back after a power cut,
     * just when a page may have torn). */
    *clean =
        unlinkat(store_dir_fd(d->store), CLEAN_STOP, 0) == 0 && fsync(store_dir_fd(d->store)) == 0;
    int rc = db_open_ex(db_path, !*clean, &d->db);
    if (!rc)
        rc = reconcile_start(d->store, d->db, rep, swept);
    if (!rc && *swept && *clean) /* no sweep to check the pages later */
        rc = db_check_pages(d->db);
    if (rc && rc != -EUCLEAN && *clean) {
        /* The quick_check skipped, a read failed: it may have been a bad
         * page that only some statements say is one. Check them all now. */
        db_close(d->db);
        d->db = NULL;
        if (db_open_ex(db_path, 1, &d->db) == -EUCLEAN)
            rc = -EUCLEAN;
    }
    if (rc != -EUCLEAN)
        return rc;
    *swept = 1;
    db_close(d->db);
    d->db = NULL;
    rc = reconcile_set_aside(d->store, "hubd.db", rb->aside, sizeof rb->aside);
    if (!rc)
        rc = db_open(db_path, &d->db);
    if (!rc)
        rc = reconcile_rebuild(d->store, d->db, &rb->recovered, &rb->quarantined);
    if (!rc)
        rc = reconcile_cache(d->store, d->db, rep);
    if (rc) {
        log_err("the database %s was corrupt and could not be rebuilt: %s", db_path, strerror(-rc));
        return rc;
    }
    log_err("the database %s was corrupt: set aside as %s and rebuilt from blobs/, %u blob(s) "
            "recovered, %u private blob(s) quarantined; entries, pins and partial downloads were "
            "lost (a URL downloads again; a recovered blob is a hit by its digest)",
            db_path, rb->aside, rb->recovered, rb->quarantined);
    return 0;
}

static void ca_start(daemon_state_t *d);

/* The reload done: logged, and systemd told. */
static void reload_done(daemon_state_t *d)
{
    log_info("configuration reloaded%s%s%s", d->reload_restart[0] ? " (changes to " : "",
             d->reload_restart, d->reload_restart[0] ? " need a restart)" : "");
    service_ready();
}

static void ca_work(uv_work_t *w)
{
    daemon_state_t *d = w->data;
    tls_ca_load(d->ca);
}

/* Back on the loop: the bundle in use from now on, unless a newer reload
 * wants it read again; then the reload is done (logged, and systemd told). */
static void ca_done(uv_work_t *w, int status)
{
    daemon_state_t *d = w->data;
    char err[600];
    (void)status;
    d->ca_out = 0;
    if (!d->stopping && !d->ca_again && tls_ctx_take_ca(d->tls, d->ca, err, sizeof err))
        log_err("the CA bundle was not reloaded (the one loaded before stays): %s", err);
    tls_ca_free(d->ca);
    d->ca = NULL;
    if (d->stopping)
        return;
    if (d->ca_again)
        ca_start(d);
    else
        reload_done(d);
}

/* The CA bundle read again in the pool (a parse of 140 certificates took
 * the loop 5-7 ms). */
static void ca_start(daemon_state_t *d)
{
    if (d->ca_out) {
        d->ca_again = 1;
        return;
    }
    d->ca_again = 0;
    d->ca = tls_ca_new(&d->cfg);
    if (!d->ca) {
        log_err("the CA bundle was not reloaded (the one loaded before stays): out of memory");
        reload_done(d);
        return;
    }
    d->ca_out = 1;
    d->ca_work.data = d;
    uv_queue_work(d->loop, &d->ca_work, ca_work, ca_done); /* fails only without a callback */
}

/* SIGHUP: the file again, over fresh defaults, with the same flags. What
 * can change at run time does; the rest is named in the log. A file that
 * no longer parses changes nothing. The CA bundle is read in the pool; the
 * reload is done (and said so) once it is in use. */
static void on_sighup(uv_signal_t *h, int signum)
{
    daemon_state_t *d = h->data;
    (void)signum;
    if (d->stopping)
        return;
    service_reloading();
    hubd_config_t next;
    char err[600];
    int rc = build_config(&d->flags, &next, err, sizeof err);
    if (rc) {
        log_err("reload refused, settings unchanged: %s", err);
        if (!d->ca_out) /* else the reload in flight says when it is done */
            service_ready();
    } else {
        config_apply_runtime(&d->cfg, &next, d->reload_restart, sizeof d->reload_restart);
        log_set_level(d->cfg.log_level);
        session_server_reload(d->server);
        jobs_reload(d->jobs);
        swarm_glue_reload(d->fleet);
        ca_start(d);
    }
    config_free(&next);
}

/* Descriptors: the soft limit up to the hard one (systemd's default is
 * 1024 of 524288). hubd holds a blob descriptor for each hit being served
 * and each download whose DONE lines wait (bounded per session and per uid,
 * see session/session_core.h), plus one per session and connection; 1024 would let a
 * few busy users make others' hits fail. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl))
            log_warn("cannot raise the descriptor limit: %s", strerror(errno));
    }
}

static const char *env_get(const char *name)
{
    return getenv(name);
}

/* The pool's size for people: "4 worker threads (automatic: 2 cores)",
 * "8 worker threads (worker_threads; UV_THREADPOOL_SIZE=5 in the
 * environment passed over)". env: UV_THREADPOOL_SIZE as hubd found it. */
static void describe_workers(unsigned n, workers_from_t from, const char *env, int env_bad,
                             char *buf, size_t cap)
{
    int len = snprintf(buf, cap, "%u worker threads (%s", n, workers_from_name(from));
    if (len < 0 || (size_t)len >= cap)
        return;
    if (from == WORKERS_FROM_CORES)
        len += snprintf(buf + len, cap - (size_t)len, ": %u cores", uv_available_parallelism());
    if (env && from != WORKERS_FROM_ENV && (size_t)len < cap)
        len += snprintf(buf + len, cap - (size_t)len,
                        "; UV_THREADPOOL_SIZE=%.32s in the environment passed over%s", env,
                        env_bad ? ", not a count of 1 to 1024" : "");
    if ((size_t)len < cap)
        snprintf(buf + len, cap - (size_t)len, ")");
}

int main(int argc, char **argv)
{
    static daemon_state_t d;
    char err[600];
    int bad_config = 0; /* exit 2, as for a file that does not parse: not retried */
    int clean_stop = 0; /* the loop ended well: the marker of a clean stop is written */
    if (parse_flags(argc, argv, &d.flags))
        return 2;
    if (build_config(&d.flags, &d.cfg, err, sizeof err)) {
        fprintf(stderr, "hubd: %s\n", err);
        config_free(&d.cfg);
        return 2;
    }
    /* Proxies: the config's, or the environment hubd started with (a
     * per-user daemon inherits its caller's; under systemd, Environment=). */
    if (proxy_settings_init(&d.proxies, d.cfg.proxy, d.cfg.no_proxy, env_get, err, sizeof err)) {
        fprintf(stderr, "hubd: %s\n", err);
        config_free(&d.cfg);
        return 2;
    }
    char proxies[1024];
    proxy_settings_describe(&d.proxies, proxies, sizeof proxies);
    if (d.flags.check_config) {
        /* The CA bundle as the daemon would load it: an unreadable or bad
         * ca_file or ca_path is an error here, not at the first https://. */
        tls_ctx_t *tls = NULL;
        if (tls_ctx_new(&d.cfg, &tls, err, sizeof err)) {
            fprintf(stderr, "hubd: TLS set-up: %s\n", err);
            proxy_settings_free(&d.proxies);
            config_free(&d.cfg);
            return 2;
        }
        tls_ctx_free(tls);
        if (swarm_glue_check(&d.cfg, err, sizeof err)) {
            fprintf(stderr, "hubd: the swarm: %s\n", err);
            proxy_settings_free(&d.proxies);
            config_free(&d.cfg);
            return 2;
        }
        if (config_free_space_unmet(&d.cfg, err, sizeof err))
            fprintf(stderr, "hubd: warning: %s\n", err);
        if (!d.flags.quiet) {
            const char *env = getenv("UV_THREADPOOL_SIZE");
            workers_from_t from;
            int env_bad;
            unsigned n = workers_choose(d.cfg.worker_threads, env, uv_available_parallelism(),
                                        &from, &env_bad);
            char workers[200];
            describe_workers(n, from, env, env_bad, workers, sizeof workers);
            config_print(&d.cfg, stdout);
            printf("# effective proxies: %s\n", proxies);
            printf("# %s\n", workers);
        }
        proxy_settings_free(&d.proxies);
        config_free(&d.cfg);
        return 0;
    }
    log_init(d.cfg.log_level);
    if (d.flags.user_mode) { /* its log is a file hubctl keeps */
        log_set_timestamps(1);
        log_set_bound(USER_LOG_MAX);
    }
    /* libuv reads UV_THREADPOOL_SIZE once, at the first work queued: set
     * before anything is. */
    char workers[200], *env = getenv("UV_THREADPOOL_SIZE");
    env = env ? strdup(env) : NULL; /* the environment's own, for the log */
    unsigned nworkers;
    workers_from_t from;
    int env_bad;
    int wrc = workers_apply(d.cfg.worker_threads, &nworkers, &from, &env_bad);
    if (wrc) {
        log_warn("cannot size the worker threads (setenv: %s): libuv's default", strerror(-wrc));
    } else {
        describe_workers(nworkers, from, env, env_bad, workers, sizeof workers);
        log_info("%s", workers);
    }
    free(env);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    /* A reload asked for during a long start-up (reconciling a big cache)
     * must not kill the daemon; the loop's handler takes over later. */
    signal(SIGHUP, SIG_IGN);

    if (config_free_space_unmet(&d.cfg, err, sizeof err))
        log_warn("%s", err);
    d.loop = uv_default_loop();
    char db_path[PATH_MAX];
    int rc = store_open(d.cfg.cache_dir, &d.store);
    if (rc)
        goto out;
    snprintf(db_path, sizeof db_path, "%s/hubd.db", d.cfg.cache_dir);
    reconcile_report_t rep;
    rebuilt_t rebuilt = {.aside = ""};
    int swept = 0, clean = 0;
    if ((rc = open_db(&d, db_path, &rep, &rebuilt, &swept, &clean)))
        goto out;
    if ((rc = tls_ctx_new(&d.cfg, &d.tls, err, sizeof err))) {
        log_err("TLS set-up: %s", err);
        bad_config = 1; /* ca_file or ca_path: as --check-config says */
        goto out;
    }
    if (tls_ctx_ktls(d.tls))
        log_info("kernel TLS: the kernel decrypts the https downloads that use AES-GCM");
    else
        log_debug("kernel TLS: %s: mbedTLS decrypts every download",
                  d.cfg.ktls == CONFIG_KTLS_OFF ? "ktls = off" : "no tls module in the kernel");
    if ((rc = jobs_new(d.loop, &d.cfg, d.store, d.db, d.tls, &d.jobs))) {
        log_err("cannot start the downloads' module (its thread, HTTP client): %s", strerror(-rc));
        goto out;
    }
    jobs_set_first_id(d.jobs, rep.max_partial_id);
    cred_secret_t secret;
    if ((rc = cred_secret_load(d.cfg.cache_dir, &secret))) {
        log_err("the cache's secret (%s/secret, 32 bytes, mode 0600): %s", d.cfg.cache_dir,
                strerror(-rc));
        jobs_shutdown(d.jobs, NULL, NULL);
        uv_run(d.loop, UV_RUN_DEFAULT);
        goto out;
    }
    jobs_set_secret(d.jobs, &secret);
    if ((rc = netpolicy_new(&d.cfg, &d.policy))) {
        log_err("network policy: %s", strerror(-rc));
        jobs_shutdown(d.jobs, NULL, NULL);
        uv_run(d.loop, UV_RUN_DEFAULT);
        goto out;
    }
    jobs_set_policy(d.jobs, d.policy);
    jobs_set_proxies(d.jobs, &d.proxies);
    if ((rc = swarm_glue_check(&d.cfg, err, sizeof err))) {
        log_err("the swarm: %s", err);
        bad_config = 1; /* as --check-config says */
        jobs_shutdown(d.jobs, NULL, NULL);
        uv_run(d.loop, UV_RUN_DEFAULT);
        goto out;
    }
    if ((rc = swarm_glue_start(d.loop, &d.cfg, d.jobs, d.store, &d.fleet, err, sizeof err))) {
        log_err("the swarm: %s", err);
        jobs_shutdown(d.jobs, NULL, NULL);
        uv_run(d.loop, UV_RUN_DEFAULT);
        goto out;
    }
    /* Signals are caught before the socket exists: a SIGTERM sent as soon as
     * the socket answers must find its handler (not the default action).
     * They run only once uv_run does, when d.server is set. */
    uv_signal_init(d.loop, &d.sigint);
    uv_signal_init(d.loop, &d.sigterm);
    uv_signal_init(d.loop, &d.sighup);
    d.sigint.data = d.sigterm.data = d.sighup.data = &d;
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sighup, on_sighup, SIGHUP);
    int listen_fd, tcp_fds[HOSTPORT_MAX_ADDRS];
    size_t ntcp;
    if ((rc = service_listen_fds(&listen_fd, tcp_fds, HOSTPORT_MAX_ADDRS, &ntcp)) != 0) {
        log_err("systemd passed sockets hubd cannot use: it wants one listening Unix stream "
                "socket (the clients') and at most %d listening TCP sockets (the HTTP front)",
                HOSTPORT_MAX_ADDRS);
        d.stopping = 1;
        jobs_stop(d.jobs);
        stop_fleet(&d);
        jobs_shutdown(d.jobs, on_jobs_down, &d);
        goto run_out;
    }
    /* The HTTP front binds first: a port in use stops the start before the
     * Unix socket exists, so no client finds a daemon that is about to go. */
    if ((rc = start_http(&d, tcp_fds, ntcp)) ||
        (rc = session_server_start(d.loop, &d.cfg, d.jobs, d.db, d.store, listen_fd, &d.server)) ||
        (d.http && (rc = start_httpd(&d))) || (rc = start_metrics(&d))) {
        d.stopping = 1; /* on_jobs_down closes the signal handles */
        close_http(&d);
        jobs_stop(d.jobs);
        stop_fleet(&d);
        if (d.server) /* the front's server failed after the sessions' started */
            session_server_close(d.server, on_server_down, &d);
        else
            jobs_shutdown(d.jobs, on_jobs_down, &d);
        goto run_out;
    }
    swarm_glue_attach(d.fleet, d.server);
    log_info("hubd %s listening on %s, cache %s, sha256 %s, read buffers %zu KiB", HUBD_VERSION,
             listen_fd >= 0 ? "the socket systemd passed" : d.cfg.socket_path, d.cfg.cache_dir,
             sha256_impl_name(), d.cfg.read_buffer_size / 1024);
    log_info("proxies: %s", proxies);
    if (rebuilt.aside[0]) /* loud where an admin looks: systemctl status */
        service_status("serving; DATABASE WAS CORRUPT: set aside as %s, rebuilt with %u blob(s) "
                       "from blobs/ (entries lost); cache %s",
                       rebuilt.aside, rebuilt.recovered, d.cfg.cache_dir);
    else
        service_status("serving; cache %s (%u partial download(s) to resume)", d.cfg.cache_dir,
                       rep.partials_kept);
    service_ready();
    if (!swept && sweep_start(d.loop, jobs_work(d.jobs), d.store, d.db, clean, &d.sweep))
        log_warn("no memory for the check of blobs/ against the database: it runs at the next "
                 "start");

run_out:
    uv_run(d.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(d.loop) != 0)
        log_err("event loop closed with handles still open");
    else if (!rc) {
        log_info("stopped");
        clean_stop = 1;
    }
out:
    tls_ctx_free(d.tls);
    netpolicy_free(d.policy);
    proxy_settings_free(&d.proxies);
    if (d.db)
        db_uses_flush(d.db); /* the last hits' uses: the loop and its pool are done */
    /* Only a run that checked every page may let the next skip it. */
    clean_stop = clean_stop && d.db && db_pages_checked(d.db) && !db_damaged(d.db);
    db_close(d.db);
    if (clean_stop) /* the next start may skip what only a crash needs */
        close(openat(store_dir_fd(d.store), CLEAN_STOP, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    store_close(d.store);
    config_free(&d.cfg);
    return bad_config ? 2 : rc ? 1 : 0;
}
