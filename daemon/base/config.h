/* config: hubd's settings, from defaults, then the INI file, then flags.
 *
 * The struct is plain data owned by main(); every module reads it and none
 * writes it after start-up. Later sources override earlier ones key by key. */
#ifndef HUBD_CONFIG_H
#define HUBD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hostport.h"
#include "mirror.h"

/* What hf_upstream is by default. */
#define DEFAULT_HF_UPSTREAM "https://huggingface.co"

/* What deny_networks is by default. */
#define DEFAULT_DENY_NETWORKS                                                                      \
    "169.254.0.0/16, fe80::/10, fd00:ec2::254/128, 100.100.100.200/32, 0.0.0.0/8, ::/128"

/* A list of loopback host:port items (hostport.h), parsed at load so that
 * a bad item stops the start with the file and line named. */
typedef struct config_listen {
    char *text; /* as written, NULL: off (first: the string types read it) */
    struct sockaddr_storage addrs[HOSTPORT_MAX_ADDRS]; /* parsed from it, in its order */
    size_t n;                                          /* addresses in addrs[] */
} config_listen_t;

enum { CONFIG_LABEL_NAME, CONFIG_LABEL_UID }; /* metrics_user_label's values */
enum { CONFIG_KTLS_OFF, CONFIG_KTLS_AUTO };   /* ktls's values */

typedef struct hubd_config {
    char *socket_path;    /* Unix socket to listen on (malloc'd) */
    unsigned socket_mode; /* its permission bits (0660) */
    char *socket_group;   /* its group, NULL: the daemon's own */
    char *admin_group;    /* members (and root) may use admin verbs; NULL: root only */
    char *allow_users;    /* if set (or allow_groups), only these may connect (and root) */
    char *allow_groups;
    char *subuid_file;              /* subordinate uid ranges: a uid in one counts as its owner */
    unsigned max_requests_per_user; /* waiting FETCHes of one uid; 0: no limit */
    unsigned max_jobs_per_user;     /* downloads transferring for one uid at once; 0: no limit */
    unsigned max_holds_per_user;    /* HOLD rows of one uid; past it HELD readable=0; 0: no limit */
    uint64_t max_held_bytes_per_user;    /* bytes of the blobs one uid holds; 0: half the cache */
    uint64_t max_hold_text_per_user;     /* bytes one uid's hold rows store (labels, links) */
    unsigned max_holds_per_blob;         /* hold rows of one uid on one blob; 0: no limit */
    unsigned hold_check_interval_ms;     /* holds whose links are gone are dropped this often */
    uint64_t max_listing_bytes_per_user; /* HFREPO listings one user keeps alive; 0: none */
    char *cache_dir;                     /* root of blobs/, tmp/, hubd.db (malloc'd) */
    uint64_t max_cache_size; /* blobs above this are evicted, least recently used first; 0: none */
    uint64_t max_file_size;  /* a download longer than this fails (too_large); 0: none */
    size_t read_buffer_size; /* bytes per pooled socket read buffer */
    size_t max_inflight;     /* per job: body bytes queued for hash/write before reading stops */
    unsigned worker_threads; /* libuv's pool (workers.h); 0: automatic */
    unsigned max_downloads;  /* jobs transferring at once; the rest wait queued */
    unsigned max_per_host;   /* connections to one host:port at once, all downloads */
    /* Segmented downloads: a file longer than segment_min_size
     * (0: never) from a server that answers ranges is fetched in chunks of
     * segment_chunk_size over up to max_connections_per_download
     * connections, at most segment_budget bytes beyond the hashed prefix;
     * a connection silent for segment_stall_timeout on the chunk the hash
     * waits for has it asked for again on another one. */
    uint64_t segment_min_size;
    size_t segment_chunk_size;
    unsigned max_connections_per_download;
    uint64_t segment_budget;
    unsigned segment_stall_timeout_ms;
    unsigned connect_timeout_ms;    /* DNS + TCP connect, per attempt */
    unsigned idle_timeout_ms;       /* no byte from the origin for this long: fail */
    unsigned first_byte_timeout_ms; /* request sent, no response byte for this long: fail */
    unsigned retries;               /* attempts after the first, for transient failures */
    unsigned retry_delay_ms;        /* first backoff; doubles per attempt, with jitter */
    unsigned retry_max_delay_ms;    /* backoff (and honoured Retry-After) cap */
    unsigned deadline_ms;           /* whole fetch, all attempts; 0: none */
    unsigned header_timeout_ms;     /* request sent, final response headers not all in: fail */
    unsigned low_speed_limit;       /* bytes/s a body must average over low_speed_time; 0: off */
    unsigned low_speed_time_ms;     /* the window of low_speed_limit; 0: off */
    uint64_t min_free_space;        /* bytes the cache's file system keeps free, unless... */
    unsigned min_free_percent;      /* ...this share of it is set instead (non-zero) */
    unsigned verify_interval_ms; /* each blob is re-hashed in the background this often; 0: never */
    unsigned revalidate_after_ms; /* a cached URL older than this is asked again (304); 0: never */
    uint64_t max_rate;            /* body bytes per second from origins, all downloads; 0: any */
    unsigned keepalive_ms;        /* an idle pooled connection is closed after this */
    unsigned max_redirects;       /* redirects followed per fetch */
    int log_level;                /* LOG_LVL_* */
    char *ca_file;                /* PEM bundle of trusted CAs, NULL: the system's */
    char *ca_path;                /* folder of PEM CA certificates, or NULL */
    char *tls_ciphers;            /* AEADs offered, fastest first (malloc'd) */
    char *tls_insecure_hosts;     /* hosts whose certificates are not checked, or NULL */
    int ktls;                     /* kernel TLS where the kernel has it: CONFIG_KTLS_* */
    char *deny_networks;          /* CIDRs never connected to (metadata, link-local), or NULL */
    char *allow_networks;         /* exceptions to deny_networks, or NULL */
    char *allow_hosts;            /* if set, the only hosts fetched from ("*.x" for subdomains) */
    char *deny_hosts;             /* hosts never fetched from, or NULL */
    char *proxy;    /* forward proxy URL (proxy.h); "" none; NULL: the environment decides */
    char *no_proxy; /* hosts that go direct (curl's list); NULL: the environment's, if any */
    mirror_rule_t mirrors[MIRROR_MAX_RULES]; /* `mirror` rules, in file order */
    size_t nmirrors;                         /* rules in mirrors[] */
    int mirror_fallback;            /* a failing mirror gives way to the original URL (default 1) */
    config_listen_t http_listen;    /* the HTTP front's loopback addresses */
    config_listen_t metrics_listen; /* the scrape endpoint's (http/metrics.h) */
    int metrics_user_label;         /* per-user series by user name or uid: CONFIG_LABEL_* */
    char *hf_upstream; /* Hugging Face Hub URL, canonical, no trailing '/' (malloc'd) */
    unsigned http_header_timeout_ms; /* the front: a request's head (and body) within this */
    /* The cluster swarm (daemon/fleet/). None set: hubd is one machine's
     * cache, as without the swarm. */
    char *fleet_listen;  /* "ip:port" of the peer port (pieces); port+1 answers metadata */
    char *fleet_tracker; /* an announce URL, or NULL: peers come from fleet_peers alone */
    char *fleet_peers;   /* the file of every node's fleet_listen, one a line (SIGHUP re-reads) */
    char *fleet_ca;      /* the cluster CA's certificate (PEM): peers must be signed by it */
    char *fleet_cert;    /* this node's certificate, signed by fleet_ca */
    char *fleet_key;     /* and its private key, readable by hubd alone */
    unsigned fleet_wait_ms; /* how long a node waits for the seed to start before fetching */
} hubd_config_t;

/* The settings as one table (config_keys.c), in the manner of redis's
 * static_configs[]: a row per key gives its name, type, field, default,
 * bounds, whether SIGHUP applies it and one line of help. Parsing
 * (config_set, the file), config_defaults, config_print, the reload's
 * comparison and config_free all walk the rows; a key written once cannot
 * drift between them. */
typedef struct config_type config_type_t; /* how a kind of value is read, printed, compared */

enum {
    CONFIG_RELOAD = 1 << 0,   /* SIGHUP applies it; otherwise a change needs a restart */
    CONFIG_ERANGE = 1 << 1,   /* a size past 64 bits is -ERANGE ("out of range"), not -EINVAL */
    CONFIG_IN_BYTES = 1 << 2, /* a size printed in bytes, without a unit */
};

typedef struct config_key {
    const char *name;                /* as hubd.conf spells it */
    const config_type_t *type;       /* its parser, printer and comparison */
    size_t off;                      /* offsetof() its field in hubd_config_t */
    size_t width;                    /* sizeof that field (a size may be 4 or 8 bytes) */
    const char *def;                 /* the default as text its parser reads; NULL: unset (NULL) */
    char *(*def_fn)(void);           /* or a default worked out at start (malloc'd, stored as is) */
    uint64_t min, max;               /* bounds of a number (unsigned, size), both included */
    int (*check)(const char *value); /* a string's own check (0: good), or NULL */
    unsigned flags;                  /* CONFIG_* */
    const char *help;                /* one line for people */
} config_key_t;

/* The rows, in config_print's order (which is also the order a reload
 * names the keys that need a restart); *n is how many. Read-only. */
const config_key_t *config_key_table(size_t *n);

/* The row of a key, or NULL. */
const config_key_t *config_key_find(const char *name);

/* What the key's value is, for people and tests: "string", "size", ... */
const char *config_key_type(const config_key_t *k);

/* Fills defaults; socket_path and cache_dir follow the environment
 * (HUBD_SOCKET, XDG_RUNTIME_DIR, CACHE_DIRECTORY, XDG_CACHE_HOME, HOME, root
 * or not). */
int config_defaults(hubd_config_t *cfg);

/* Reads an INI file ([hubd] section or none). Returns 0, or a negative errno
 * with a message naming file, line and key in err (e.g. an unknown key). */
int config_load_file(hubd_config_t *cfg, const char *path, char *err, size_t errlen);

/* Sets one key from its text form, as the file does; used by flags too.
 * Returns 0, -ENOENT for an unknown key, -EINVAL for a bad value, -ERANGE
 * for one out of range, -EDOM for a timeout of 0, -E2BIG for an
 * http_listen of more than HOSTPORT_MAX_ITEMS items. `mirror` is repeatable:
 * each value adds a rule (-E2BIG past MIRROR_MAX_RULES), an empty one
 * removes them all. */
int config_set(hubd_config_t *cfg, const char *key, const char *value);

/* Parses "256K", "1M", "2G", "1T" or plain bytes: parse_size (textnum.h). */
int config_parse_size(const char *s, uint64_t *out);

/* Writes the effective settings as an INI file that config_load_file reads
 * back to the same values (hubd --check-config). */
void config_print(const hubd_config_t *cfg, FILE *out);

/* SIGHUP: takes from next the settings that can change while running (the
 * rows marked CONFIG_RELOAD: log level, limits, timeouts, retries,
 * max_cache_size, admin_group, ...); names each other setting that differs
 * in `needs_restart` (comma-separated, in the rows' order, "" if none). */
void config_apply_runtime(hubd_config_t *cfg, const hubd_config_t *next, char *needs_restart,
                          size_t cap);

void config_free(hubd_config_t *cfg);

/* Whether min_free_space asks for more room than the cache's file system
 * has in all (then every download is refused no_space): 1 and a sentence
 * in why, else 0. Reads the file system of cache_dir, or of its nearest
 * folder that exists (--check-config before the first start). Blocking:
 * start-up and --check-config only. */
int config_free_space_unmet(const hubd_config_t *cfg, char *why, size_t cap);

/* config_load_file on INI text in memory (for the fuzzer, tests/fuzz). */
int config_load_string(hubd_config_t *cfg, const char *text, char *err, size_t errlen);

#endif
