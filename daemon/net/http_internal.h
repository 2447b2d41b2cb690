/* http_internal: the state shared by http.c (connections, requests, the
 * client) and http_parse.c (llhttp's callbacks, which http.c calls and
 * which call nothing of http.c's). Private to the HTTP client; the rest of
 * hubd uses http.h. Loop thread only. */
#ifndef HUBD_HTTP_INTERNAL_H
#define HUBD_HTTP_INTERNAL_H

#include "dialer.h"
#include "http.h"
#include "pool.h"
#include "stream.h"

#include <llhttp.h>

typedef enum {
    CONN_CONNECTING, /* the dialer is connecting (and tunnelling, and TLS) */
    CONN_ACTIVE,     /* request written or being written, response being read */
    CONN_IDLE,       /* in the pool, reading only to notice a close */
    CONN_CLOSING,    /* closing its parts; freed when the last one is closed */
} conn_state_t;

typedef struct http_conn http_conn_t;

struct http_client {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    bufpool_t *pool;
    pool_t idle;          /* idle connections (http_conn_t.pooled) */
    unsigned nconns;      /* connections not yet freed */
    int closing;          /* http_client_close called: free at nconns == 0 */
    uv_timer_t defer;     /* runs deferred completions; its close frees the client */
    http_req_t *deferred; /* requests that ended inside http_request(), oldest first */
    void (*close_cb)(void *);
    void *close_arg;
    llhttp_settings_t settings;
    tls_ctx_t *tls;                  /* shared TLS configuration; not owned */
    const netpolicy_t *policy;       /* NULL: no limits; not owned */
    const proxy_settings_t *proxies; /* NULL: always direct; not owned */
};

struct http_conn {
    conn_state_t state;
    http_client_t *client;
    pool_entry_t pooled;     /* the origin (pooled.key) and the link while idle */
    uv_timer_t timer;        /* handshake, first-byte/idle (and header deadline), keep-alive */
    dialer_t *dialer;        /* while connecting; owned */
    stream_t *stream;        /* once connected; owned */
    unsigned closes_pending; /* close callbacks of the timer, connector, stream to come */
    llhttp_t parser;
    http_req_t *req;         /* the request this connection serves, or NULL */
    buf_t *rbuf;             /* the read buffer being parsed (the stream's reference) */
    int in_execute;          /* inside llhttp_execute: defer teardown */
    int reused;              /* came from the pool: may be stale */
    int https;               /* TLS to the origin (direct or tunnelled) */
    unsigned tls_generation; /* the CA bundle's when made (tls_ctx_generation) */
    const char *fail_code;   /* set by a parser callback that stopped the parse */
    const char *fail_msg;
};

struct http_req {
    http_client_t *client;
    http_conn_t *conn; /* NULL between connections */
    http_req_cbs_t cbs;
    void *data;
    char *key;            /* pool key: origin, and " via " proxy */
    char *origin;         /* "scheme://host:port" */
    const proxy_t *proxy; /* the proxy it goes through, or NULL */
    int absolute;         /* plain http to that proxy: the request in absolute form */
    char *host;           /* the origin's, for TLS (and DNS when direct) */
    char port[8];
    char *head; /* request text */
    size_t head_len;
    int paused;       /* http_req_set_paused(1) in force */
    int aborted;      /* http_req_abort during llhttp_execute */
    int retried;      /* already retried a stale pooled connection */
    int refused;      /* its connect failed: every address refused (dialer_refused) */
    int got_response; /* any response byte arrived on this connection */
    int discard;      /* HTTP_BODY_DISCARD */
    int message_done; /* on_message_complete for a final status */
    int status;
    /* The header phase: from sending the request to the final response's
     * headers. Its limits cover every response to this request (1xx ones
     * too), so they are reset when the request starts on a connection,
     * never at a message begin: endless 1xx responses cannot renew them. */
    size_t header_bytes;       /* status lines and header bytes so far */
    unsigned nheaders;         /* header lines so far */
    unsigned ninformational;   /* 1xx responses so far */
    int headers_done;          /* the final response's headers are in: no deadline */
    uint64_t header_deadline;  /* uv_now() when the header phase fails (header_timeout) */
    unsigned transfer_codings; /* Transfer-Encoding lines in the current message */
    char field[64];            /* the header name being read, lower-cased */
    size_t field_len;          /* may exceed sizeof field: then it is not ours */
    char *value;               /* the header value being read (HTTP_MAX_VALUE) */
    size_t value_len;
    char *location, *etag, *last_modified, *content_range, *retry_after;
    http_want_t wanted[HTTP_MAX_WANTED]; /* the response headers the caller asked for */
    size_t nwanted;
    char *wanted_value[HTTP_MAX_WANTED]; /* their values (http_response_t.wanted) */
    char *content_type;                  /* http_response_t.content_type */
    int starting;                        /* inside http_request(): completions are deferred */
    int is_deferred;                     /* on client->deferred */
    http_req_t *next_deferred;
    const char *deferred_code; /* the deferred outcome */
    char deferred_msg[512];
};

/* http_parse.c: llhttp's callbacks for a response (parser.data is the
 * connection), with the header limits and the headers a download keeps.
 * They only record: what follows from a response (the timer once its
 * headers are in, the connection's fate) is http.c's, after llhttp
 * returns. */
void http_parse_settings_init(llhttp_settings_t *s);
/* Drops the header values kept from a response. */
void http_req_forget_headers(http_req_t *req);

#endif
