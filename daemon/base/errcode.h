/* errcode: every error code a fetch can end with, as one table.
 *
 * A code travels as its wire name (docs/PROTOCOL.md, "Error codes": ERR
 * lines, the front's X-Hubd-Error), the name the net layer reports and the
 * job fails with. Every decision about a code reads its row: whether
 * another attempt may succeed, how a segmented download's connection takes
 * it, the status the HTTP front answers with, the STATS bucket it counts
 * in. No other code compares error names. An origin's status is a code
 * too, http_NNN: the statuses that decide something have rows of their
 * own, the others fall in http_4xx or http_5xx (and anything else in
 * "other").
 *
 * Pure: a constant table and look-ups; any thread. */
#ifndef HUBD_ERRCODE_H
#define HUBD_ERRCODE_H

typedef enum {
    EC_OTHER, /* a name not in the table (and the STATS bucket "other") */
    EC_BAD_REQUEST,
    EC_LINE_TOO_LONG,
    EC_UNKNOWN_VERB,
    EC_PROTO_VERSION,
    EC_BAD_URL,
    EC_UNSUPPORTED_SCHEME,
    EC_DNS,
    EC_CONNECT,
    EC_TIMEOUT,
    EC_REDIRECT,
    EC_TLS_VERIFY,
    EC_TLS,
    EC_HTTP_PARSE,
    EC_TRUNCATED,
    EC_HASH_MISMATCH,
    EC_IO,
    EC_NO_SPACE,
    EC_FORBIDDEN,
    EC_PROXY,
    EC_PROXY_AUTH,
    EC_PROXY_REFUSED,
    EC_TOO_LARGE,
    EC_TOO_MANY_REQUESTS,
    EC_SHUTTING_DOWN,
    EC_BUSY,
    EC_INTERNAL,
    EC_PERMISSION_DENIED,
    EC_CANCELLED,
    EC_INTERRUPTED,
    EC_HELD,
    EC_NOT_FOUND,
    EC_NOT_MODIFIED,
    EC_NOT_IN_SWARM,
    EC_HTTP_401,
    EC_HTTP_403,
    EC_HTTP_404,
    EC_HTTP_408,
    EC_HTTP_410,
    EC_HTTP_429,
    EC_HTTP_451,
    EC_HTTP_503,
    EC_HTTP_4XX, /* any other 4xx */
    EC_HTTP_5XX, /* any other 5xx */
    EC_COUNT
} errcode_id_t;

/* Whether another attempt may succeed. */
typedef enum {
    EC_FINAL,     /* it would fail again: the job fails now */
    EC_TRANSIENT, /* the network, timeouts, a cut body, 5xx, 408: again, after a backoff */
    EC_THROTTLE,  /* 429, 503: the server is busy: again, after its Retry-After; a segmented
                     download wants one connection fewer, and a connection over that number
                     gives its chunk to another one */
} errcode_retry_t;

typedef struct errcode {
    errcode_id_t id;
    const char *name;      /* the wire name; an HTTP class row's is its class, "http_4xx" */
    errcode_retry_t retry; /* see above */
    int front_status;      /* the HTTP front's answer; 0: the origin's own status passes */
    int resolve_again;     /* a segment's connection that gets it resolves the job's URL again and
                              retries: a signed link that expired (403, 410) */
    int resumable;         /* the job stopped, not broke: its partial is kept to resume */
    int not_failure;       /* the end of a revalidation (304), not a failure: not logged as one */
    const char *bucket;    /* the STATS errors_by_code bucket it counts in */
} errcode_t;

/* The row of a wire name; never NULL: an unknown name gets EC_OTHER's. */
const errcode_t *errcode_of(const char *name);

/* The row of an id (EC_COUNT or more: EC_OTHER's). */
const errcode_t *errcode_row(errcode_id_t id);

/* Whether another attempt may succeed: EC_TRANSIENT or EC_THROTTLE. */
int errcode_is_transient(const char *name);

/* The HTTP front's status for a code: the row's, or for an http_NNN row
 * that passes, NNN itself. NULL (no error): 200. */
int errcode_front_status(const char *name);

#endif
