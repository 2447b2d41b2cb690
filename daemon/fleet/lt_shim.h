/* lt_shim: the cluster swarm's one door to libtorrent-rasterbar 2.0 (C++).
 *
 * The rest of hubd is C; this header is all of libtorrent it sees. No C++
 * type and no exception crosses it: every function catches at the boundary
 * and answers 0 or a negative errno, with a reason a person can read in
 * *why when the caller passes one. The shim holds no policy: which file,
 * which peer, when to seed and when to stop are hubd's.
 *
 * What the shim sets up, and why:
 * - TCP only (uTP off), no DHT, local peer discovery, UPnP or NAT-PMP:
 *   the nodes of a cluster are found through hubd's own list, never by
 *   asking a network;
 * - SSL torrents: a torrent made with the cluster CA's certificate as its
 *   ssl-cert accepts only peers whose certificate that CA signed (a
 *   certificate whose CN is * serves every torrent; one naming the torrent,
 *   that torrent alone. A subjectAltName DNS entry counts too, but 2.0.8
 *   leaks what it decodes of that extension at every handshake, so hubd's
 *   node certificates name it in the CN only). Its peers connect only to the
 *   SSL listen port. The node's own certificate and key are the session's
 *   (lt_config_t) and go to every SSL torrent it adds;
 * - connections out from listen_ip, the address the other nodes know
 *   this one by (and let through their firewalls): libtorrent takes one
 *   connection per address and torrent, so nodes seen from the kernel's
 *   choice of source (127.0.0.1 for all the nodes of one machine) would
 *   crowd each other out;
 * - v2 hashes (SHA-256 merkle trees, each 16 KiB block checked on arrival)
 *   or hybrid v1+v2 metadata for peers that only speak v1.
 *
 * Threads: one thread (hubd's loop) makes every call on a session and its
 * torrents, except lt_torrent_make, which touches no session and may run
 * on any thread. Most calls only queue work for libtorrent's own threads;
 * lt_session_new, lt_session_ports, lt_session_stats, lt_torrent_stats and
 * lt_torrent_add wait for its network thread's answer (well under a
 * millisecond when it is idle). lt_torrent_make reads and hashes the whole
 * file and lt_session_free waits for libtorrent to close its connections
 * and files: both belong in a pool item (or at shutdown), never on the
 * loop. Handing lt_session_free to a pool item ends the loop's calls on
 * that session: the loop makes none after, and keeps the handle notify
 * signals (its uv_async) open until lt_session_free has returned, since
 * notify may run until then.
 *
 * News comes back as events, read by the caller with lt_session_poll. The
 * notify callback (lt_config_t.notify) tells that events are waiting; it
 * runs on one of libtorrent's threads (and may run once on the caller's,
 * inside lt_session_new) with libtorrent's lock held, so it must only
 * signal (uv_async_send) and return: hubd polls from its loop in the
 * async's callback, and a uv_timer may poll too. */
#ifndef HUBD_LT_SHIM_H
#define HUBD_LT_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_session lt_session_t; /* one libtorrent session */
typedef struct lt_torrent lt_torrent_t; /* one torrent in a session */

/* Why a call failed, for a log line or an error reply. */
typedef struct lt_why {
    char text[200]; /* NUL-terminated, may be cut short */
} lt_why_t;

/* A session's settings. Strings and PEM blobs are copied; NULL means none. */
typedef struct lt_config {
    const char *listen_ip;     /* numeric address to listen on ("127.0.0.1", "::1") */
    int tcp_port;              /* plain peer port: 0 any, -1 no plain listener */
    int ssl_port;              /* SSL torrents' peer port: 0 any, -1 none */
    int max_connections;       /* peer connections of the whole session; 0: libtorrent's */
    const char *cert_pem;      /* this node's certificate, signed by the cluster CA */
    const char *key_pem;       /* its private key (PEM, unencrypted) */
    const char *dh_pem;        /* DH parameters (PEM); NULL: the RFC 7919 group ffdhe2048 */
    void (*notify)(void *arg); /* events are waiting: signal only (see above) */
    void *notify_arg;
} lt_config_t;

/* Starts a session listening as cfg says. Returns 0 and *out, or -EINVAL (a
 * setting that cannot be: cert without key, no port at all), -EADDRINUSE
 * and the like (a listener asked for could not be opened), -ENOMEM, -EIO. */
int lt_session_new(const lt_config_t *cfg, lt_session_t **out, lt_why_t *why);

/* The ports bound (port 0 asked: the one the system chose); 0 where there
 * is no such listener. Either pointer may be NULL. */
int lt_session_ports(lt_session_t *s, int *tcp_port, int *ssl_port);

/* Stops the session and frees it with every lt_torrent_t still in it:
 * first its listen sockets close and it pauses, and its peers are let go
 * (0.2 s at least, 2 s at most), then it is torn down. Blocks until
 * libtorrent has closed its connections and files (seconds at worst):
 * from a pool item or at shutdown. No notify call comes after it
 * returns; pending events are dropped. NULL is a no-op. */
void lt_session_free(lt_session_t *s);

/* ---- Metadata ------------------------------------------------------- */

typedef struct lt_make_params {
    const char *path;   /* the complete file on disk (a blob) */
    uint64_t size;      /* its size as hubd knows it; another size on disk: -ESTALE */
    int piece_size;     /* bytes, a power of two >= 16 KiB; 0: libtorrent's choice for size */
    int hybrid;         /* nonzero: v1 and v2 metadata; 0: v2 only */
    const char *ca_pem; /* the cluster CA's certificate: an SSL torrent; NULL: plain */
} lt_make_params_t;

/* The metadata made: a .torrent's bencoded bytes and its info-hashes. */
typedef struct lt_metadata {
    unsigned char *bytes; /* malloc'ed .torrent bytes: the caller frees them */
    size_t len;
    char info_hash[65];    /* v2 (SHA-256) info-hash, lowercase hex */
    char info_hash_v1[41]; /* v1 (SHA-1) info-hash, hex; "" for v2 only */
} lt_metadata_t;

/* Hashes the file at p->path and makes the metadata of a single-file
 * torrent for it, named after the file's last path component (hubd's blobs
 * are named by SHA-256, so two nodes making it for one blob with the same
 * parameters get the same torrent). Reads the whole file: a pool item.
 * Returns 0 and *out, or -ENOENT, -EACCES, -EISDIR, -ESTALE (size differs),
 * -EINVAL (bad piece size, empty file), -EIO, -ENOMEM. */
int lt_torrent_make(const lt_make_params_t *p, lt_metadata_t *out, lt_why_t *why);

/* The size of the one file a .torrent describes (pad files not counted):
 * 0, or -EINVAL (not a torrent, not one file). Parses on the caller's
 * thread: well under a millisecond for a torrent of a few hundred KiB. */
int lt_torrent_size(const unsigned char *torrent, size_t len, uint64_t *size);

/* ---- Torrents -------------------------------------------------------- */

typedef enum lt_add_mode {
    LT_ADD_SEED = 1, /* the file is complete and verified: seed it without reading it first
                        (libtorrent hashes each piece the first time a peer asks for it) */
    LT_ADD_CHECK,    /* hash what the file holds (missing: nothing), then seed it if it is
                        all there, else download the rest into it: a download, a resumed
                        one, or a seed to be checked */
} lt_add_mode_t;

typedef struct lt_add_params {
    const unsigned char *torrent; /* .torrent bytes (lt_torrent_make's or a peer's) */
    size_t torrent_len;
    const char *path; /* the file itself: the blob to seed, or where the download goes
                         (hubd's partial file: the bytes land there, no second copy) */
    lt_add_mode_t mode;
    void *user;          /* given back in this torrent's events until LT_EV_REMOVED */
    const char *tracker; /* an announce URL, or NULL: peers come from lt_torrent_add_peer */
} lt_add_params_t;

/* Adds a torrent to the session; for an SSL torrent, with the session's
 * certificate. Returns 0 and *out (the session owns it; it stays valid until
 * lt_torrent_remove or lt_session_free), or -EINVAL (bad metadata, not a
 * single file, an SSL torrent and no certificate), -EEXIST (already in the
 * session), -ENOMEM, -EIO. */
int lt_torrent_add(lt_session_t *s, const lt_add_params_t *p, lt_torrent_t **out, lt_why_t *why);

/* Connects to a peer at ip:port (its SSL port for an SSL torrent). Returns
 * 0 (the attempt is queued; LT_EV_PEER_CONNECTED or _DISCONNECTED tells how
 * it went), or -EINVAL (not a numeric address or port). */
int lt_torrent_add_peer(lt_torrent_t *t, const char *ip, int port, lt_why_t *why);

typedef struct lt_torrent_stats {
    uint64_t bytes_up;   /* payload sent since added */
    uint64_t bytes_down; /* payload received since added (failed pieces included) */
    uint64_t bytes_done; /* bytes of the file verified and on disk */
    uint64_t size;       /* the file's size, from the metadata */
    int peers;           /* connected peers */
    int seeds;           /* of them, peers that have the whole file */
    int progress_ppm;    /* bytes_done in millionths of the size */
    int finished;        /* every piece is here and verified */
    int err;             /* 0, or the -errno that stopped it (LT_EV_TORRENT_ERROR) */
} lt_torrent_stats_t;

int lt_torrent_stats(lt_torrent_t *t, lt_torrent_stats_t *st);

/* The same figures without waiting: lt_torrent_stats asks libtorrent's
 * thread and waits for its answer, which a busy session (hundreds of peers
 * on a loaded machine) gives late, so the loop must not ask it on every
 * tick. lt_session_post_updates asks for the figures of every torrent that
 * changed (no wait); they come as an alert, which lt_session_poll takes
 * in; lt_torrent_stats_seen reads the last of them (zeros before the
 * first). */
void lt_session_post_updates(lt_session_t *s);
void lt_torrent_stats_seen(const lt_torrent_t *t, lt_torrent_stats_t *st);

/* One connected peer of a torrent. */
typedef struct lt_peer_info {
    char peer[64];       /* "ip:port" as connected (an incoming peer's port is its own) */
    uint64_t bytes_up;   /* payload sent to it over this connection */
    uint64_t bytes_down; /* payload received from it */
    int seed;            /* it has the whole file */
} lt_peer_info_t;

/* Up to cap of the torrent's connected peers into out; returns how many
 * (0 on failure). */
int lt_torrent_peers(lt_torrent_t *t, lt_peer_info_t *out, int cap);

/* Removes the torrent from the session, keeping its file. Its connections
 * close and libtorrent lets go of the file; LT_EV_REMOVED is the last event
 * carrying its user pointer. t is freed by this call. */
void lt_torrent_remove(lt_torrent_t *t);

typedef struct lt_session_stats {
    int torrents;        /* torrents in the session */
    int peers;           /* connected peers, over all torrents */
    uint64_t bytes_up;   /* payload sent, over the torrents now in the session */
    uint64_t bytes_down; /* payload received, likewise */
} lt_session_stats_t;

int lt_session_stats(lt_session_t *s, lt_session_stats_t *st);

/* ---- Events ---------------------------------------------------------- */

typedef enum lt_event_kind {
    LT_EV_FINISHED = 1,      /* every piece is here, verified and written to the file
                                (libtorrent's disk queue flushed): a download done; a
                                seed reports it once as it starts */
    LT_EV_HASH_FAILED,       /* a piece failed its hash check: piece */
    LT_EV_PEER_BANNED,       /* a peer was banned (it sent pieces that failed): peer */
    LT_EV_TORRENT_ERROR,     /* the torrent stopped on an error: err, message */
    LT_EV_FILE_ERROR,        /* reading or writing its file failed (ENOSPC...): err, message */
    LT_EV_PEER_CONNECTED,    /* a peer connection is up: peer (outgoing: TCP connected,
                                its TLS handshake may still fail) */
    LT_EV_PEER_DISCONNECTED, /* one closed: peer, err (0: closed by the peer), message;
                                tls set when the TLS layer reported the error (a foreign
                                certificate; possibly also a TLS peer that closed
                                without close_notify). Only the connecting side hears
                                of a refused handshake: libtorrent 2.0.8 posts nothing
                                on the side that refused it */
    LT_EV_REMOVED,           /* lt_torrent_remove is done: the last event with user */
    LT_EV_LISTEN_FAILED,     /* a listener failed (session event): err, message */
} lt_event_kind_t;

typedef struct lt_event {
    lt_event_kind_t kind;
    void *user;        /* lt_add_params_t.user; NULL for session events and a peer
                          of no torrent (TLS refused it, or its torrent is removed) */
    int err;           /* 0 or a negative errno (-EIO where libtorrent's has none) */
    int piece;         /* LT_EV_HASH_FAILED: the piece's index; else -1 */
    int tls;           /* LT_EV_PEER_DISCONNECTED: the TLS layer failed */
    char peer[64];     /* "ip:port" for peer events, else "" */
    char message[160]; /* libtorrent's words, for the log; may be cut short */
} lt_event_t;

/* Copies up to cap waiting events into ev, oldest first, and returns how
 * many. The notify callback is called again only for events that come
 * after a poll, so poll until it returns less than cap. */
int lt_session_poll(lt_session_t *s, lt_event_t *ev, int cap);

/* The event kind's name ("finished", "hash_failed", ...), for logs. */
const char *lt_event_name(lt_event_kind_t kind);

#ifdef __cplusplus
}
#endif

#endif /* HUBD_LT_SHIM_H */
