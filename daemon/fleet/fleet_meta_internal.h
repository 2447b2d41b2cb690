/* fleet_meta_internal: what the files of fleet_meta share, private to them.
 * fleet_meta.c: the identity and the link (one TLS connection over one
 * uv_tcp_t, through memory buffers); fleet_meta_serve.c: the server and its
 * connections; fleet_meta_ask.c: the asks. The link calls its owner back
 * only through fm_link_ops_t, so calls go one way: from the owners down to
 * the link. Loop thread, as fleet_meta.h says. */
#ifndef HUBD_FLEET_META_INTERNAL_H
#define HUBD_FLEET_META_INTERNAL_H

#include <stddef.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>

#include "bytebuf.h"
#include "fleet_meta.h"
#include "hostport.h"

/* A session an ask may resume with one node: an abbreviated handshake has
 * no public-key work, where a full one costs each end milliseconds of its
 * loop (what made seeds with a crowd of askers answer too late). */
typedef struct fm_session {
    char peer[HOSTPORT_TEXT_MAX]; /* "ip:port" asked */
    mbedtls_ssl_session session;  /* its ticket and master secret */
    time_t kept_at;               /* when its full handshake was done; FM_TICKET_S later: gone */
    uint64_t used;                /* the identity's count at its last use: the least is replaced */
} fm_session_t;

struct fmeta_identity {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg; /* both configurations' randomness */
    mbedtls_x509_crt ca;           /* the cluster CA(s): a peer's certificate must chain to it */
    mbedtls_x509_crt cert;         /* this node's certificate (and any chain after it) */
    mbedtls_pk_context key;        /* its private key */
    mbedtls_ssl_config server;     /* for accepted connections */
    mbedtls_ssl_config client;     /* for asks */
    mbedtls_ssl_ticket_context tickets; /* the server's: the tickets it gives and takes back */
    uint64_t resumed;                   /* handshakes the server resumed from a ticket */
    fm_session_t *sessions;             /* the client's, one per node asked, FM_SESSIONS at most */
    size_t nsessions;
    uint64_t uses;
};

typedef struct fm_link fm_link_t;

/* What a link tells its owner. */
typedef struct fm_link_ops {
    void (*written)(fm_link_t *l, int status); /* writes drained (0), or one failed */
    void (*closed)(fm_link_t *l);              /* both handles closed: free the owner */
} fm_link_ops_t;

struct fm_link {
    uv_tcp_t tcp;                 /* the socket */
    uv_timer_t timer;             /* the owner's one deadline */
    mbedtls_ssl_context ssl;      /* set up by fm_link_tls; freed with the last handle */
    bytebuf_t in;                 /* ciphertext read, not yet taken by mbedTLS */
    bytebuf_t out;                /* ciphertext made, not yet handed to uv_write */
    const fm_link_ops_t *ops;     /* the owner's */
    unsigned writes;              /* uv_write requests in flight */
    int handles;                  /* handles not yet closed: the owner goes with the last */
    int closing;                  /* fm_link_close was called */
    char peer[HOSTPORT_TEXT_MAX]; /* "ip:port", for messages and the lookup */
};

/* The handles, on loop; the link's buffers, and its TLS context initialised
 * (set up by fm_link_tls). On failure the link is closing already, and its
 * owner goes in ops->closed like any other. */
int fm_link_init(fm_link_t *l, uv_loop_t *loop, const fm_link_ops_t *ops);
/* The TLS context on conf, once the link is worth one (a connection closed
 * at accept is not). 0 or -ENOMEM. */
int fm_link_tls(fm_link_t *l, const mbedtls_ssl_config *conf);
/* The link's one close path: both handles; a write or a connect in flight
 * comes back UV_ECANCELED before the close callbacks; ops->closed after the
 * last. A second call does nothing. */
void fm_link_close(fm_link_t *l);
/* uv_read_start's alloc callback: room at the end of l->in (the read's n
 * bytes are then bytebuf_commit'ed there by the owner's read callback). */
void fm_link_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
/* Encrypts all of data into l->out: 0 or an mbedTLS error. */
int fm_link_encrypt(fm_link_t *l, const void *data, size_t n);
/* Hands the ciphertext made so far to the socket: 0 or a negative errno.
 * ops->written comes once no write is left in flight, or for a failure. */
int fm_link_flush(fm_link_t *l);
/* Before a close after a failed handshake: the alert mbedTLS made, if the
 * socket takes it at once. Best effort. */
void fm_link_flush_now(fm_link_t *l);
/* Why a handshake failed (rc: mbedtls_ssl_handshake's), a sentence naming
 * the peer: its certificate as this end judged it, or the alert it sent. */
void fm_handshake_why(fm_link_t *l, int rc, char *why, size_t len);
/* Before an ask's handshake: the session kept for l->peer, if any and
 * young enough, offered to it. */
void fm_session_offer(fmeta_identity_t *id, fm_link_t *l);
/* After an ask's handshake: its session kept for the next ask of l->peer
 * (resumed ones keep their first handshake's time). */
void fm_session_keep(fmeta_identity_t *id, fm_link_t *l);
/* After a failed handshake: no session is offered to l->peer again. */
void fm_session_forget(fmeta_identity_t *id, fm_link_t *l);
/* A numeric IPv4 or IPv6 address and a port 0..65535: 0 or -EINVAL. */
int fm_addr_parse(const char *ip, int port, struct sockaddr_storage *ss);
/* mbedTLS's words for rc. */
void fm_mbed_words(int rc, char *buf, size_t len);

/* fmeta_ask's body, for any line (fleet_meta_ask.c): the test sends bad
 * ones through it. line is copied; NULL as fmeta_ask. */
fmeta_ask_t *fm_ask_line(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                         const char *line, size_t len, unsigned timeout_ms, fmeta_reply_fn cb,
                         void *arg);

#endif
