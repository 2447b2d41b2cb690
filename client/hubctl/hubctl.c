/* hubctl: the command-line client of hubd.
 *
 * Deliberately blocking and single-threaded: one Unix socket, poll(2), and
 * the line codec the daemon itself uses (proto/proto.h). A command builds all
 * its requests before it connects, so a bad argument never reaches the
 * daemon; it then pipelines them behind HELLO and hands each parsed reply to
 * a command handler until that handler has everything it asked for.
 * docs/PROTOCOL.md is the authority on the messages.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "autostart.h"
#include "materialize.h"
#include "proto.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef HUBCTL_VERSION
#define HUBCTL_VERSION "0.1"
#endif

/* Exit codes. Scripts branch on them, so --help documents them. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,      /* a download failed (any ERR but hash_mismatch) */
    EXIT_USAGE = 2,       /* bad command line */
    EXIT_UNREACHABLE = 3, /* no daemon, or it went away before answering */
    EXIT_VERIFY = 4,      /* ERR code=hash_mismatch */
};

#define CLI_RUN (-1)            /* cli_parse: go on and run the command */
#define CONNECT_TIMEOUT_MS 5000 /* the only timeout: transfers may take hours */
#define URL_MAX 8192            /* PROTOCOL.md: a FETCH url is at most 8192 bytes */
#define SHA256_HEX 64           /* hex digits of a SHA-256 digest */
#define READ_CHUNK 65536        /* bytes asked of one recvmsg(2) */
#define FDS_PER_READ 16         /* SCM_RIGHTS room per read; the kernel gives at most one DONE's */
#define REDRAW_INTERVAL 0.1     /* seconds between redraws of the TTY progress line */
#define PLAIN_INTERVAL 1.0      /* seconds between plain progress lines of one URL */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char usage_text[] =
    "Usage:\n"
    "  hubctl [--socket PATH] fetch [--sha256 HEX] [-H 'Name: value']... [-o DEST] [-q] [--json]\n"
    "                                [--progress] URL...\n"
    "  hubctl [--socket PATH] status [--json]\n"
    "  hubctl [--socket PATH] stats [--json | --prometheus]\n"
    "  hubctl [--socket PATH] ls [--json]\n"
    "  hubctl [--socket PATH] rm|pin|unpin URL|SHA256 [--json]\n"
    "  hubctl [--socket PATH] gc [--max-size SIZE] [--json]\n"
    "  hubctl [--socket PATH] verify [--json]\n"
    "  hubctl start | stop\n"
    "  hubctl --version\n"
    "\n"
    "Client of hubd, the shared download cache.\n"
    "\n"
    "Commands:\n"
    "  fetch     download each URL through the cache (once, however many ask) and\n"
    "            print the path of each file, one per line, in argument order\n"
    "  status    list the running download jobs\n"
    "  stats     print the daemon's counters (--prometheus: text exposition)\n"
    "  ls        list the cached entries\n"
    "  rm        remove a URL's entry (its blob too when no other entry names\n"
    "            it), or a blob by SHA-256 with every entry naming it\n"
    "  pin       keep a blob (by URL or SHA-256) from eviction; unpin undoes it\n"
    "  gc        evict least recently used blobs down to --max-size, or to the\n"
    "            configured max_cache_size\n"
    "  verify    re-hash every blob; bad ones are quarantined and listed\n"
    "  start     start a per-user hubd unless one runs; print its socket\n"
    "  stop      stop the per-user hubd\n"
    "rm, pin, unpin, gc and verify need root or the daemon's admin group.\n"
    "\n"
    "Options:\n"
    "  --socket PATH  daemon socket (default: $HUBD_SOCKET, else the system\n"
    "                 daemon's /run/hubd/hubd.sock when it answers, else a\n"
    "                 per-user daemon's $XDG_RUNTIME_DIR/hubd.sock (or\n"
    "                 /tmp/hubd-UID/hubd.sock), started when none answers)\n"
    "  -H, --header 'Name: value' | @FILE\n"
    "                 a request header for the origin (repeatable), e.g. a token;\n"
    "                 @FILE (@- for stdin) reads one per line and keeps a token\n"
    "                 out of the process list; headers go to the first origin\n"
    "                 only, and a file fetched with headers is served only to\n"
    "                 requests with the same ones\n"
    "  --sha256 HEX   expected SHA-256 of the file (a single URL only); a cached\n"
    "                 blob with this digest is served without any network\n"
    "  -o DEST        copy the file to DEST and print DEST; if DEST is a directory\n"
    "                 (required with several URLs) the name is the URL's last\n"
    "                 path segment\n"
    "  -q             no progress and no informational messages\n"
    "  --json         print one JSON object per URL (fetch), or JSON output\n"
    "  --progress     show progress even when stderr is not a terminal\n"
    "  -h, --help     show this help\n"
    "  --version      show the version\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  a download failed\n"
    "  2  usage error\n"
    "  3  hubd unreachable, or it closed the connection before answering\n"
    "  4  verification failed (SHA-256 mismatch; verify found a bad blob)\n"
    "With several URLs the worst applies: 3, then 4, then 1.\n";

/* ---- small helpers ------------------------------------------------------ */

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* A CLI has nothing better to do without memory than to say so and stop. */
static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fputs("hubctl: out of memory\n", stderr);
        exit(EXIT_FAILED);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fputs("hubctl: out of memory\n", stderr);
        exit(EXIT_FAILED);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

static int str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* Strict decimal: the daemon's numbers are all unsigned and fit 64 bits. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

/* A size as the config file writes it: bytes, or with K, M, G or T (powers
 * of 1024, "MiB"/"MB" spellings too). 1 when good. */
static int parse_size_arg(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, toupper((unsigned char)*end)) : NULL;
    unsigned shift = u ? 10 * (unsigned)(u - units + 1) : 0;
    if (u) {
        end++;
        end += *end == 'i';
        end += *end == 'B' || *end == 'b';
    }
    if (errno || *end || (shift && v > (UINT64_MAX >> shift)))
        return 0;
    *out = (uint64_t)v << shift;
    return 1;
}

static int is_sha256_hex(const char *s)
{
    size_t n = strspn(s, "0123456789abcdefABCDEF");
    return n == SHA256_HEX && s[n] == '\0';
}

/* "512 B", "1.5 KiB", "123.4 MiB": binary units, one decimal. The 1023.95
 * threshold avoids printing "1024.0 KiB". */
static const char *human_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", n);
        return buf;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1023.95 && u + 1 < ARRAY_LEN(unit)) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

/* "42s", "3m07s", "2h15m". */
static const char *human_eta(uint64_t s, char *buf, size_t cap)
{
    if (s < 60)
        snprintf(buf, cap, "%" PRIu64 "s", s);
    else if (s < 3600)
        snprintf(buf, cap, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(buf, cap, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    return buf;
}

/* Seconds left at `rate`, or -1 when that is unknowable. */
static int64_t eta_seconds(uint64_t done, uint64_t total, uint64_t rate)
{
    if (rate == 0 || done > total)
        return -1;
    return (int64_t)((total - done + rate - 1) / rate);
}

/* Prints s with control bytes as '?': reply values are percent-decoded and
 * could otherwise carry terminal escape sequences to the user's screen. */
static void put_clean(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        putc(c < 0x20 || c == 0x7f ? '?' : c, f);
    }
}

static char *clean_copy(const char *s)
{
    char *out = xstrdup(s);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return out;
}

/* A bounded line buffer: progress lines and table cells are cut, never
 * overflowed. */
typedef struct line {
    char buf[512]; /* NUL-terminated text */
    size_t len;    /* bytes used, < sizeof buf */
} line_t;

__attribute__((format(printf, 2, 3))) static void line_add(line_t *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        l->len += (size_t)n < sizeof l->buf - l->len ? (size_t)n : sizeof l->buf - l->len - 1;
}

/* "123.4 MiB / 256.0 MiB", or "123.4 MiB" while the total is unknown. */
static void line_amount(line_t *l, uint64_t done, int has_total, uint64_t total)
{
    char a[32], b[32];
    if (has_total)
        line_add(l, "%s / %s", human_bytes(done, a, sizeof a), human_bytes(total, b, sizeof b));
    else
        line_add(l, "%s", human_bytes(done, a, sizeof a));
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hubctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'hubctl --help' for more information.\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

/* ---- JSON output -------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p, or 0 if there is none. Relies on
 * the terminating NUL, which is never a continuation byte. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0; /* overlong */
    else if (c == 0xed)
        hi = 0x9f; /* surrogates */
    else if (c == 0xf0)
        lo = 0x90; /* overlong */
    else if (c == 0xf4)
        hi = 0x8f; /* beyond U+10FFFF */
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

/* Writes s as a JSON string. Values come percent-decoded off the wire and may
 * hold any byte; JSON must be UTF-8, so a stray byte becomes U+FFFD. */
static void json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    putc('"', f);
    while (*p) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p++);
        } else if (*p == '\n') {
            fputs("\\n", f);
            p++;
        } else if (*p == '\t') {
            fputs("\\t", f);
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            putc(*p++, f);
        }
    }
    putc('"', f);
}

/* JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        s += strspn(s, "0123456789");
    else
        return 0;
    if (*s == '.') {
        size_t n = strspn(++s, "0123456789");
        if (n == 0)
            return 0;
        s += n;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        size_t n = strspn(s, "0123456789");
        if (n == 0)
            return 0;
        s += n;
    }
    return *s == '\0';
}

/* Keys whose values are text even when they look like a number (a URL, a
 * digest that happens to be all digits). */
static int key_is_text(const char *key)
{
    static const char *const text[] = {"url", "state", "sha256", "path", "source", "code", "msg"};
    for (size_t i = 0; i < ARRAY_LEN(text); i++)
        if (strcmp(key, text[i]) == 0)
            return 1;
    return 0;
}

/* One reply line as a JSON object: every key, numbers as numbers, so keys a
 * newer daemon adds reach the user without a client update. A repeated key
 * keeps its first value, as proto_get does. */
static void json_msg(FILE *f, const proto_msg_t *m)
{
    int first = 1;
    putc('{', f);
    for (size_t i = 0; i < m->nfields; i++) {
        const proto_field_t *fl = &m->fields[i];
        if (proto_get(m, fl->key) != fl->value)
            continue;
        if (!first)
            putc(',', f);
        first = 0;
        json_str(f, fl->key);
        putc(':', f);
        if (!key_is_text(fl->key) && is_json_number(fl->value))
            fputs(fl->value, f);
        else
            json_str(f, fl->value);
    }
    putc('}', f);
}

/* ---- received descriptors ----------------------------------------------- */

/* Descriptors received with SCM_RIGHTS, oldest first. PROTOCOL.md: only DONE
 * carries one, so each DONE line takes the head. */
typedef struct fdq {
    int *fd;     /* storage for cap descriptors */
    size_t head; /* index of the oldest */
    size_t len;  /* descriptors held, from head on */
    size_t cap;  /* entries of storage */
} fdq_t;

static void fdq_push(fdq_t *q, int fd)
{
    if (q->head + q->len == q->cap && q->head > 0) {
        memmove(q->fd, q->fd + q->head, q->len * sizeof *q->fd);
        q->head = 0;
    }
    if (q->len == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 8;
        q->fd = xrealloc(q->fd, q->cap * sizeof *q->fd);
    }
    q->fd[q->head + q->len++] = fd;
}

/* The oldest descriptor, or -1 if none came. */
static int fdq_pop(fdq_t *q)
{
    if (q->len == 0)
        return -1;
    int fd = q->fd[q->head++];
    if (--q->len == 0)
        q->head = 0;
    return fd;
}

static void fdq_free(fdq_t *q)
{
    for (int fd; (fd = fdq_pop(q)) >= 0;)
        close(fd);
    free(q->fd);
}

/* ---- command line ------------------------------------------------------- */

typedef struct cli {
    const char *socket;   /* --socket, NULL for the default */
    const char *command;  /* first operand: fetch, status, stats, ls */
    const char *sha256;   /* --sha256 HEX */
    const char *dest;     /* -o DEST */
    int quiet;            /* -q */
    int json;             /* --json */
    int progress;         /* --progress */
    int prometheus;       /* --prometheus (stats) */
    const char *max_size; /* --max-size (gc) */
    char **headers;       /* -H, in order (fetch); copies, freed at exit */
    size_t nheaders;
    const char **args; /* operands after the command (URLs) */
    size_t nargs;      /* entries of args */
} cli_t;

/* Matches argv[*i] against an option with a value: "--name VALUE" and
 * "--name=VALUE", or "-o VALUE" and "-oVALUE" for a short one. Returns 0 if
 * it is another option, 1 with *value set (NULL when missing). */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    int is_long = name[1] == '-';
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '\0')
        *value = *i + 1 < argc ? argv[++*i] : NULL;
    else if (is_long && a[n] == '=')
        *value = a + n + 1;
    else if (!is_long)
        *value = a + n;
    else
        return 0;
    return 1;
}

static void add_header(cli_t *c, const char *h)
{
    c->headers = xrealloc(c->headers, (c->nheaders + 1) * sizeof *c->headers);
    c->headers[c->nheaders++] = xstrdup(h);
}

/* -H @FILE (or @- for stdin): one "Name: value" per line, blank lines and
 * lines starting with '#' skipped. */
static int read_header_file(cli_t *c, const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f)
        return usage_error("-H @%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = CLI_RUN;
    while (rc == CLI_RUN && (n = getline(&line, &cap, f)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        if (!strchr(line, ':'))
            rc = usage_error("-H @%s: a line is not 'Name: value'", path);
        else
            add_header(c, line);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* Handles the option at argv[*i]. Returns CLI_RUN to go on, or an exit code
 * (help and version end the program successfully, here). */
static int cli_option(cli_t *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v = NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        fputs(usage_text, stdout);
        return EXIT_OK;
    }
    if (strcmp(a, "--version") == 0) {
        puts("hubctl " HUBCTL_VERSION);
        return EXIT_OK;
    }
    int *flag = strcmp(a, "-q") == 0             ? &c->quiet
                : strcmp(a, "--json") == 0       ? &c->json
                : strcmp(a, "--progress") == 0   ? &c->progress
                : strcmp(a, "--prometheus") == 0 ? &c->prometheus
                                                 : NULL;
    if (flag) {
        *flag = 1;
        return CLI_RUN;
    }
    if (opt_value(argc, argv, i, "-H", &v) || opt_value(argc, argv, i, "--header", &v)) {
        if (v && v[0] == '@') /* from a file: a token on the command line is in ps */
            return read_header_file(c, v + 1);
        if (!v || !strchr(v, ':'))
            return usage_error("-H needs 'Name: value' or @FILE");
        add_header(c, v);
        return CLI_RUN;
    }
    const char **slot = opt_value(argc, argv, i, "--socket", &v)     ? &c->socket
                        : opt_value(argc, argv, i, "--sha256", &v)   ? &c->sha256
                        : opt_value(argc, argv, i, "-o", &v)         ? &c->dest
                        : opt_value(argc, argv, i, "--max-size", &v) ? &c->max_size
                                                                     : NULL;
    if (!slot)
        return usage_error("unknown option '%s'", a);
    if (!v || !*v)
        return usage_error("option '%s' needs a value", a);
    *slot = v;
    return CLI_RUN;
}

/* Options may stand anywhere; "--" ends them, and a lone "-" is an operand. */
static int cli_parse(int argc, char **argv, cli_t *c)
{
    memset(c, 0, sizeof *c);
    c->args = xcalloc((size_t)argc, sizeof *c->args);
    c->headers = NULL;
    int only_operands = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_operands && strcmp(a, "--") == 0) {
            only_operands = 1;
        } else if (!only_operands && a[0] == '-' && a[1] != '\0') {
            int rc = cli_option(c, argc, argv, &i);
            if (rc != CLI_RUN)
                return rc;
        } else if (!c->command) {
            c->command = a;
        } else {
            c->args[c->nargs++] = a;
        }
    }
    if (!c->command)
        return usage_error("no command given");
    return CLI_RUN;
}

/* ---- session: one connection to hubd ----------------------------------- */

/* Gets each parsed reply after the HELLO exchange, with the descriptor its
 * DONE line carried (else -1), which it then owns. Returns non-zero once the
 * command has every reply it waits for. */
typedef int (*session_msg_cb)(void *arg, const proto_msg_t *msg, int fd);

typedef struct session {
    int fd;                /* the socket, -1 until connected */
    char path[PATH_MAX];   /* socket path, for messages */
    int quiet;             /* -q: no warnings */
    int hello_done;        /* the HELLO reply (or its ERR) was seen */
    int done;              /* the handler has all its replies */
    char *out;             /* requests not yet written */
    size_t out_len;        /* bytes in out */
    size_t out_off;        /* bytes of out already written */
    fdq_t fds;             /* descriptors not yet taken by a DONE line */
    session_msg_cb on_msg; /* the command's reply handler */
    void *arg;             /* its context */
    proto_reader_t reader; /* splits the byte stream into lines */
    proto_msg_t msg;       /* the line being handled */
} session_t;

static void session_queue(session_t *s, const char *data, size_t n)
{
    s->out = xrealloc(s->out, s->out_len + n);
    memcpy(s->out + s->out_len, data, n);
    s->out_len += n;
}

/* Ends the line in w and queues it. Returns 0, or -E2BIG when it would break
 * the protocol's line limit (nothing is queued then). */
static int session_queue_line(session_t *s, proto_writer_t *w)
{
    int n = proto_end(w);
    if (n < 0)
        return n;
    session_queue(s, w->buf, (size_t)n);
    return 0;
}

static void session_queue_verb(session_t *s, const char *verb)
{
    char line[64];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, verb);
    session_queue_line(s, &w);
}

/* A session not yet connected, with HELLO already queued so that it goes out
 * before any request. */
static session_t *session_new(const cli_t *c, session_msg_cb on_msg, void *arg)
{
    session_t *s = xcalloc(1, sizeof *s);
    char buf[PATH_MAX];
    s->fd = -1;
    s->quiet = c->quiet;
    s->on_msg = on_msg;
    s->arg = arg;
    /* A failure to start a per-user daemon was told on stderr; the connect
     * then fails and says so too. */
    buf[0] = '\0';
    if (autostart_socket(c->socket, 1, c->quiet, buf, sizeof buf) < 0 && !buf[0])
        snprintf(buf, sizeof buf, "/run/hubd/hubd.sock");
    snprintf(s->path, sizeof s->path, "%s", buf);
    proto_reader_init(&s->reader);

    char line[128];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, "HELLO");
    proto_add_u64(&w, "proto", PROTO_VERSION);
    proto_add(&w, "client", "hubctl/" HUBCTL_VERSION);
    session_queue_line(s, &w);
    return s;
}

static void session_free(session_t *s)
{
    if (!s)
        return;
    close_fd(s->fd);
    fdq_free(&s->fds);
    free(s->out);
    free(s);
}

/* A Unix socket never answers connect(2) with EINPROGRESS: with the listen
 * backlog full it fails with EAGAIN (non-blocking) or blocks with no timeout
 * (blocking). So retry EAGAIN with a growing pause until the deadline. */
static int connect_with_timeout(int fd, const struct sockaddr_un *sa)
{
    double deadline = now_sec() + CONNECT_TIMEOUT_MS / 1000.0;
    int pause_ms = 1;
    for (;;) {
        if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0)
            return 0;
        if (errno != EAGAIN)
            return -errno;
        double left_ms = (deadline - now_sec()) * 1000;
        if (left_ms <= 0)
            return -ETIMEDOUT;
        poll(NULL, 0, pause_ms < left_ms ? pause_ms : (int)left_ms + 1);
        pause_ms = pause_ms < 100 ? pause_ms * 2 : 100;
    }
}

/* Connects the (non-blocking, close-on-exec) socket. Returns 0 or -errno. */
static int session_connect(session_t *s)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(s->path);
    if (len >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, s->path, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int rc = connect_with_timeout(fd, &sa);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    s->fd = fd;
    return 0;
}

/* Writes what the socket takes now. A daemon that stopped reading (EPIPE) is
 * not an error here: the reads will see it close, and replies it sent before
 * that still count. */
static int session_flush(session_t *s)
{
    while (s->out_off < s->out_len) {
        ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n < 0 && errno != EPIPE && errno != ECONNRESET)
            return -errno;
        s->out_off = n < 0 ? s->out_len : s->out_off + (size_t)n;
    }
    s->out_off = s->out_len = 0;
    return 0;
}

/* Queues every descriptor the message carried. A truncated control message
 * (MSG_CTRUNC: usually the descriptor limit) has lost some, and the queue no
 * longer lines up with the DONE lines: say so; materialize_file's size check
 * keeps a wrong descriptor from being copied. */
static void session_take_fds(session_t *s, struct msghdr *mh)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        const unsigned char *data = CMSG_DATA(c);
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, data + i * sizeof fd, sizeof fd);
            fdq_push(&s->fds, fd);
        }
    }
    if (mh->msg_flags & MSG_CTRUNC)
        fputs("hubctl: warning: file descriptors from hubd were lost (too many open files?)\n",
              stderr);
}

/* One recvmsg(2), with room for descriptors on every read since any read may
 * carry one. Returns the byte count, 0 at EOF, or -errno. */
static ssize_t session_recv(session_t *s, char *buf, size_t cap)
{
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * FDS_PER_READ)];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space, .msg_controllen = sizeof ctl};
    ssize_t n;
    do
        n = recvmsg(s->fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    session_take_fds(s, &mh);
    return n;
}

/* Does the raw line start with the verb DONE? Checked before parsing so that
 * even a garbled DONE consumes its descriptor and the queue stays in step. */
static int line_is_done(const char *line, size_t len)
{
    return len >= 4 && memcmp(line, "DONE", 4) == 0 &&
           (len == 4 || line[4] == ' ' || line[4] == '\r');
}

/* The first reply is HELLO's: a HELLO, or an ERR without id (proto_version).
 * Either way the session goes on at version 1. Returns 1 if m was it. */
static int session_hello_reply(session_t *s, const proto_msg_t *m)
{
    s->hello_done = 1;
    if (str_eq(m->verb, "HELLO"))
        return 1;
    if (!str_eq(m->verb, "ERR") || proto_get(m, "id"))
        return 0; /* no HELLO reply: an old daemon; this line is for the command */
    if (!s->quiet) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        fputs("hubctl: hubd answered HELLO with ", stderr);
        put_clean(stderr, code ? code : "an error");
        fputs(": ", stderr);
        put_clean(stderr, msg ? msg : "");
        putc('\n', stderr);
    }
    return 1;
}

/* proto_reader callback. Lines from the daemon that are too long or do not
 * parse are dropped: a client cannot answer them, and must not crash. */
static int session_on_line(void *arg, const char *line, size_t len, int err)
{
    session_t *s = arg;
    if (err < 0)
        return 0;
    int fd = line_is_done(line, len) ? fdq_pop(&s->fds) : -1;
    if (proto_parse(line, len, &s->msg) < 0 ||
        (!s->hello_done && session_hello_reply(s, &s->msg))) {
        close_fd(fd);
        return 0;
    }
    s->done = s->on_msg(s->arg, &s->msg, fd);
    return s->done; /* stop feeding: what follows is not ours to handle */
}

/* Writes the queued requests and feeds replies to the handler until it has
 * them all. No timeout: a download may take hours, and a daemon that dies
 * closes the socket. Returns 0, -EPIPE when the daemon closed the connection
 * first, or another -errno. */
static int session_run(session_t *s)
{
    char buf[READ_CHUNK];
    while (!s->done) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (s->out_len > s->out_off)
            p.events |= POLLOUT;
        if (poll(&p, 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (p.revents & POLLNVAL)
            return -EBADF;
        int rc = (p.revents & POLLOUT) ? session_flush(s) : 0;
        if (rc < 0)
            return rc;
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t n = session_recv(s, buf, sizeof buf);
        if (n == -EAGAIN)
            continue;
        if (n == 0 || n == -ECONNRESET)
            return -EPIPE;
        if (n < 0)
            return (int)n;
        proto_reader_feed(&s->reader, buf, (size_t)n, session_on_line, s);
    }
    return 0;
}

/* Connects, telling the user why not. Returns 0 or EXIT_UNREACHABLE. */
static int session_open(session_t *s)
{
    int rc = session_connect(s);
    if (rc == 0)
        return 0;
    fprintf(stderr, "hubctl: cannot connect to hubd at %s: %s", s->path,
            rc == -ETIMEDOUT ? "timed out after 5 s" : strerror(-rc));
    if (rc == -ENOENT || rc == -ECONNREFUSED)
        fputs(" (is hubd running?)", stderr);
    putc('\n', stderr);
    return EXIT_UNREACHABLE;
}

/* Reports a session_run failure; all of them mean the daemon is gone for us. */
static int session_report(int rc)
{
    if (rc == -EPIPE)
        fputs("hubctl: hubd closed the connection\n", stderr);
    else
        fprintf(stderr, "hubctl: connection to hubd failed: %s\n", strerror(-rc));
    return EXIT_UNREACHABLE;
}

/* ---- fetch -------------------------------------------------------------- */

typedef enum { REQ_PENDING, REQ_OK, REQ_FAILED } req_state_t;
typedef enum { VIA_NONE, VIA_HIT, VIA_QUEUED, VIA_ATTACHED } req_via_t;

/* One URL of a fetch. Its protocol id is its index + 1. */
typedef struct req {
    const char *url;   /* as given on the command line */
    char *name;        /* last segment of the URL path, raw (may be empty) */
    char *label;       /* name (or the URL) cleaned for the progress display */
    char *dest;        /* where -o puts it, NULL without -o */
    req_state_t state; /* PENDING until DONE or ERR */
    req_via_t via;     /* what the first reply said */
    int has_progress;  /* a PROGRESS arrived */
    int has_total;     /* the last PROGRESS had a total */
    uint64_t done;     /* bytes, from the last PROGRESS */
    uint64_t total;    /* bytes, valid if has_total */
    uint64_t rate;     /* bytes per second, from the last PROGRESS */
    double last_line;  /* when its last plain progress line went out */
    char *path;        /* DONE: the cache path, or dest with -o */
    char *sha256;      /* DONE: digest */
    char *source;      /* DONE: hit, download or attached */
    uint64_t size;     /* DONE: bytes */
    char *code;        /* failure: ERR code, or one of hubctl's own */
    char *msg;         /* failure: text for the user */
    int exit;          /* this URL's exit code */
} req_t;

typedef enum { PROG_OFF, PROG_TTY, PROG_PLAIN } prog_mode_t;

typedef struct fetch {
    const cli_t *cli;            /* options */
    char sha256[SHA256_HEX + 1]; /* --sha256, lower case, or "" */
    req_t *req;                  /* one per URL, in argument order */
    size_t n;                    /* entries of req */
    size_t finished;             /* requests that got DONE or ERR */
    size_t printed;              /* results written to stdout, in order */
    prog_mode_t prog;            /* how progress is shown */
    int drawn;                   /* a TTY progress line is on screen, not ended */
    double last_draw;            /* when it was last drawn */
} fetch_t;

/* -- progress ------------------------------------------------------------- */

static size_t term_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
        return ws.ws_col;
    return 80;
}

/* "  95.1 MiB/s  ETA 3s" after an amount; ETA only when it is known. */
static void line_rate(line_t *l, const req_t *r)
{
    char a[32], b[32];
    int64_t eta = r->has_total ? eta_seconds(r->done, r->total, r->rate) : -1;
    if (r->rate)
        line_add(l, "  %s/s", human_bytes(r->rate, a, sizeof a));
    if (eta >= 0)
        line_add(l, "  ETA %s", human_eta((uint64_t)eta, b, sizeof b));
}

/* The TTY line of a single URL. */
static void render_one(line_t *l, const req_t *r)
{
    char a[32];
    line_add(l, "%s  ", r->label);
    if (r->state == REQ_OK) {
        line_add(l, "%s  %s", human_bytes(r->size, a, sizeof a),
                 r->via == VIA_HIT ? "cached" : "done");
    } else if (r->state == REQ_FAILED) {
        line_add(l, "failed");
    } else if (r->via == VIA_HIT) {
        line_add(l, "cached");
    } else if (!r->has_progress) {
        line_add(l, "%s", r->via == VIA_NONE ? "waiting for hubd" : "queued");
    } else {
        line_amount(l, r->done, r->has_total, r->total);
        if (r->has_total && r->total > 0 && r->done <= r->total)
            line_add(l, "  %3d%%", (int)(r->done * 100 / r->total));
        line_rate(l, r);
    }
    if (r->via == VIA_ATTACHED && r->state != REQ_FAILED)
        line_add(l, "  attached");
}

/* The TTY line of several URLs: one aggregate, not a line each. */
static void render_all(line_t *l, const fetch_t *f)
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
    line_add(l, "[%zu/%zu]  ", f->finished, f->n);
    line_amount(l, done, total_known, total);
    if (total_known && total > 0 && done <= total)
        line_add(l, "  %3d%%", (int)(done * 100 / total));
    if (f->finished < f->n)
        line_rate(l, &sum);
    if (hits)
        line_add(l, "  %zu cached", hits);
    if (attached)
        line_add(l, "  %zu attached", attached);
    if (failed)
        line_add(l, "  %zu failed", failed);
}

/* Redraws the TTY line in place: '\r', the text cut to the terminal width (a
 * wrapped line could not be redrawn), then clear to the end of the line. */
static void progress_draw(fetch_t *f, int force)
{
    double now = now_sec();
    if (f->prog != PROG_TTY || (!force && now - f->last_draw < REDRAW_INTERVAL))
        return;
    line_t l = {.len = 0};
    if (f->n == 1)
        render_one(&l, &f->req[0]);
    else
        render_all(&l, f);
    size_t width = term_width() - 1;
    fprintf(stderr, "\r%.*s\033[K", (int)(l.len < width ? l.len : width), l.buf);
    f->drawn = 1;
    f->last_draw = now;
}

/* Takes the TTY line off the screen before other output. */
static void progress_clear(fetch_t *f)
{
    if (!f->drawn)
        return;
    fputs("\r\033[K", stderr);
    f->drawn = 0;
}

/* The plain (non-TTY) line of one URL, at most once per PLAIN_INTERVAL. */
static void progress_plain(req_t *r)
{
    double now = now_sec();
    if (now - r->last_line < PLAIN_INTERVAL)
        return;
    r->last_line = now;
    line_t l = {.len = 0};
    line_add(&l, "%s ", r->label);
    line_amount(&l, r->done, r->has_total, r->total);
    line_rate(&l, r);
    if (r->via == VIA_ATTACHED)
        line_add(&l, " [attached]");
    fprintf(stderr, "%s\n", l.buf);
}

/* After HIT, QUEUED, ATTACHED or PROGRESS. */
static void progress_update(fetch_t *f, req_t *r)
{
    if (f->prog == PROG_TTY)
        progress_draw(f, 0);
    else if (f->prog == PROG_PLAIN && r->has_progress)
        progress_plain(r);
}

/* After DONE or ERR: a TTY ends its line once everything is settled, else
 * clears it for the messages that follow; plain mode prints a final line. */
static void progress_settled(fetch_t *f, const req_t *r)
{
    char a[32];
    if (f->prog == PROG_TTY && f->finished == f->n) {
        progress_draw(f, 1);
        fputc('\n', stderr);
        f->drawn = 0;
    } else if (f->prog == PROG_TTY) {
        progress_clear(f);
    } else if (f->prog == PROG_PLAIN && r->state == REQ_OK) {
        fprintf(stderr, "%s %s done%s\n", r->label, human_bytes(r->size, a, sizeof a),
                r->via == VIA_HIT        ? " [cached]"
                : r->via == VIA_ATTACHED ? " [attached]"
                                         : "");
    }
}

/* -- results -------------------------------------------------------------- */

static void json_result(FILE *o, const req_t *r)
{
    fputs("{\"url\":", o);
    json_str(o, r->url);
    if (r->state == REQ_OK) {
        fputs(",\"ok\":true,\"path\":", o);
        json_str(o, r->path);
        fputs(",\"sha256\":", o);
        json_str(o, r->sha256);
        fprintf(o, ",\"size\":%" PRIu64 ",\"source\":", r->size);
        json_str(o, r->source);
    } else {
        fputs(",\"ok\":false,\"code\":", o);
        json_str(o, r->code);
        fputs(",\"message\":", o);
        json_str(o, r->msg);
    }
    fputs("}\n", o);
}

/* Writes the results that are ready, in argument order: a URL's line waits
 * for all before it, so output lines match the arguments. */
static void fetch_print_ready(fetch_t *f)
{
    for (; f->printed < f->n && f->req[f->printed].state != REQ_PENDING; f->printed++) {
        const req_t *r = &f->req[f->printed];
        if (f->cli->json)
            json_result(stdout, r);
        else if (r->state == REQ_OK)
            printf("%s\n", r->path);
    }
    fflush(stdout);
}

/* Bookkeeping once a request has its answer, then the output it unlocks. */
static void fetch_settle(fetch_t *f, req_t *r, int announce)
{
    f->finished++;
    progress_settled(f, r);
    if (r->state == REQ_FAILED && announce && !f->cli->json) {
        fprintf(stderr, "hubctl: %s: ", r->url);
        put_clean(stderr, r->code);
        fputs(": ", stderr);
        put_clean(stderr, r->msg);
        putc('\n', stderr);
    }
    fetch_print_ready(f);
    if (f->finished < f->n)
        progress_draw(f, 1);
}

static void fetch_fail(fetch_t *f, req_t *r, const char *code, const char *msg)
{
    r->state = REQ_FAILED;
    r->code = xstrdup(code);
    r->msg = xstrdup(msg);
    r->exit = strcmp(code, "hash_mismatch") == 0 ? EXIT_VERIFY : EXIT_FAILED;
    fetch_settle(f, r, 1);
}

/* The daemon went away: every open request fails, with one message overall
 * (from session_report) rather than one per URL. */
static void fetch_abandon(fetch_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        req_t *r = &f->req[i];
        if (r->state != REQ_PENDING)
            continue;
        r->state = REQ_FAILED;
        r->code = xstrdup("disconnected");
        r->msg = xstrdup("hubd closed the connection");
        r->exit = EXIT_UNREACHABLE;
        fetch_settle(f, r, 0);
    }
}

/* The worst exit code: 3 (daemon gone), then 4 (verification), then 1. */
static int fetch_exit(const fetch_t *f)
{
    static const int rank[] = {
        [EXIT_OK] = 0, [EXIT_FAILED] = 1, [EXIT_VERIFY] = 2, [EXIT_UNREACHABLE] = 3};
    int worst = EXIT_OK;
    for (size_t i = 0; i < f->n; i++)
        if (rank[f->req[i].exit] > rank[worst])
            worst = f->req[i].exit;
    return worst;
}

/* -- replies -------------------------------------------------------------- */

static void on_hit(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)m, (void)fd;
    r->via = VIA_HIT;
    progress_update(f, r);
}

static void on_queued(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)m, (void)fd;
    r->via = VIA_QUEUED;
    progress_update(f, r);
}

static void on_attached(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)m, (void)fd;
    r->via = VIA_ATTACHED;
    progress_update(f, r);
}

static void on_progress(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)fd;
    uint64_t done, rate, total = 0;
    const char *t = proto_get(m, "total");
    if (parse_u64(proto_get(m, "done"), &done) < 0 || (t && parse_u64(t, &total) < 0))
        return; /* a progress line we cannot read is only a missed frame */
    if (parse_u64(proto_get(m, "rate"), &rate) < 0)
        rate = 0;
    r->has_progress = 1;
    r->done = done;
    r->has_total = t != NULL;
    r->total = total;
    r->rate = rate;
    progress_update(f, r);
}

/* Copies the blob to r->dest. Returns 0, or fails r and returns -1. */
static int fetch_materialize(fetch_t *f, req_t *r, int fd, uint64_t size)
{
    char msg[PATH_MAX + 128];
    int rc = fd < 0 ? -EBADMSG : materialize_file(fd, size, r->dest);
    if (rc == 0)
        return 0;
    if (rc == -EBADMSG)
        snprintf(msg, sizeof msg, "cannot write %s: hubd sent no matching file descriptor",
                 r->dest);
    else
        snprintf(msg, sizeof msg, "cannot write %s: %s", r->dest, strerror(-rc));
    fetch_fail(f, r, "output", msg);
    return -1;
}

static void on_done(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    const char *path = proto_get(m, "path"), *sha = proto_get(m, "sha256");
    const char *source = proto_get(m, "source");
    uint64_t size;
    if (!path || !sha || parse_u64(proto_get(m, "size"), &size) < 0) {
        close_fd(fd);
        fetch_fail(f, r, "bad_reply", "hubd sent DONE without path, sha256 or size");
        return;
    }
    if (f->sha256[0] && strcasecmp(sha, f->sha256) != 0) {
        /* The daemon should have said hash_mismatch; trust but verify. */
        close_fd(fd);
        fetch_fail(f, r, "hash_mismatch", "hubd returned a blob with another sha256");
        return;
    }
    int rc = r->dest ? fetch_materialize(f, r, fd, size) : 0;
    close_fd(fd);
    if (rc < 0)
        return;
    r->state = REQ_OK;
    r->path = xstrdup(r->dest ? r->dest : path);
    r->sha256 = xstrdup(sha);
    r->source = xstrdup(source ? source : r->via == VIA_HIT ? "hit" : "download");
    r->size = size;
    fetch_settle(f, r, 1);
}

static void on_err(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)fd;
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    fetch_fail(f, r, code ? code : "unknown", msg ? msg : "");
}

/* Replies to a FETCH, in the order PROTOCOL.md gives them. */
static const struct {
    const char *verb;
    void (*fn)(fetch_t *f, req_t *r, const proto_msg_t *m, int fd);
} fetch_replies[] = {
    {"HIT", on_hit},           /* served from the cache; DONE follows */
    {"QUEUED", on_queued},     /* a new download job */
    {"ATTACHED", on_attached}, /* joined a running job */
    {"PROGRESS", on_progress}, /* bytes so far */
    {"DONE", on_done},         /* success, with the blob's descriptor */
    {"ERR", on_err},           /* failure */
};

/* An ERR that names no request cannot fail one; show it, keep waiting. */
static void fetch_stray(fetch_t *f, const proto_msg_t *m)
{
    if (!str_eq(m->verb, "ERR") || proto_get(m, "id") || f->cli->quiet)
        return;
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    progress_clear(f);
    fputs("hubctl: hubd: ", stderr);
    put_clean(stderr, code ? code : "error");
    fputs(": ", stderr);
    put_clean(stderr, msg ? msg : "");
    putc('\n', stderr);
}

static int fetch_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    fetch_t *f = arg;
    uint64_t id;
    req_t *r = NULL;
    if (parse_u64(proto_get(m, "id"), &id) == 0 && id >= 1 && id <= f->n)
        r = &f->req[id - 1];
    if (!r || r->state != REQ_PENDING) {
        close_fd(fd);
        if (!r)
            fetch_stray(f, m);
        return f->finished == f->n;
    }
    for (size_t i = 0; i < ARRAY_LEN(fetch_replies); i++) {
        if (strcmp(m->verb, fetch_replies[i].verb) == 0) {
            fetch_replies[i].fn(f, r, m, fd);
            return f->finished == f->n;
        }
    }
    close_fd(fd); /* a verb this client does not know: ignored */
    return f->finished == f->n;
}

/* -- planning: everything checked before connecting ----------------------- */

/* The last segment of the URL's path, which names the file under -o DIR and
 * labels its progress. Raw, not percent-decoded: "%2F" must not put a '/'
 * into a file name. Empty for "http://host" or "http://host/dir/". */
static char *url_basename(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t end = strcspn(p, "?#");
    const char *slash = memrchr(p, '/', end);
    if (!slash)
        return xstrdup("");
    size_t n = (size_t)(p + end - slash - 1);
    char *name = xrealloc(NULL, n + 1);
    memcpy(name, slash + 1, n);
    name[n] = '\0';
    return name;
}

/* http:// or https:// (the scheme is case-insensitive) and a host after it. */
static int url_ok(const char *url)
{
    size_t skip = strncasecmp(url, "http://", 7) == 0    ? 7
                  : strncasecmp(url, "https://", 8) == 0 ? 8
                                                         : 0;
    return skip && url[skip] && !strchr("/?#", url[skip]);
}

static int name_ok(const char *name)
{
    return *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static char *path_join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    int slash = d > 0 && dir[d - 1] != '/';
    char *p = xrealloc(NULL, d + slash + n + 1);
    memcpy(p, dir, d);
    if (slash)
        p[d] = '/';
    memcpy(p + d + slash, name, n + 1);
    return p;
}

/* -o DEST is a directory when it is one, and must be one when it ends in '/'
 * or several URLs share it. Sets *into_dir; returns 0 or EXIT_USAGE. */
static int dest_mode(const cli_t *c, int *into_dir)
{
    struct stat st;
    size_t len = strlen(c->dest);
    int is_dir = stat(c->dest, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir && c->nargs > 1)
        return usage_error("-o %s: not a directory (required with several URLs)", c->dest);
    if (!is_dir && c->dest[len - 1] == '/')
        return usage_error("-o %s: not a directory", c->dest);
    *into_dir = is_dir;
    return 0;
}

static int req_plan(req_t *r, const char *url, const char *dest, int into_dir)
{
    if (!url_ok(url))
        return usage_error("not an http:// or https:// URL: '%s'", url);
    if (strlen(url) > URL_MAX)
        return usage_error("URL longer than %d bytes: '%.60s...'", URL_MAX, url);
    r->url = url;
    r->name = url_basename(url);
    r->label = clean_copy(*r->name ? r->name : url);
    r->last_line = -1e9;
    if (!dest)
        return 0;
    if (!into_dir) {
        r->dest = xstrdup(dest);
        return 0;
    }
    if (!name_ok(r->name))
        return usage_error("no file name in URL '%s' for -o %s", url, dest);
    r->dest = path_join(dest, r->name);
    return 0;
}

/* With -o DIR, two URLs with one name would overwrite each other. */
static int check_unique_names(const fetch_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(f->req[i].dest, f->req[j].dest) == 0)
                return usage_error("'%s' and '%s' would both be saved as %s", f->req[j].url,
                                   f->req[i].url, f->req[i].dest);
    return 0;
}

static int fetch_queue(const fetch_t *f, session_t *s, size_t i)
{
    char line[PROTO_MAX_LINE];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, "FETCH");
    proto_add_u64(&w, "id", i + 1);
    proto_add(&w, "url", f->req[i].url);
    if (f->sha256[0])
        proto_add(&w, "sha256", f->sha256);
    for (size_t h = 0; h < f->cli->nheaders; h++)
        proto_add(&w, "header", f->cli->headers[h]);
    if (session_queue_line(s, &w) < 0)
        return usage_error("URL (and headers) too long once encoded: '%.60s...'", f->req[i].url);
    return 0;
}

/* Checks the arguments and queues one FETCH per URL. Returns 0 or
 * EXIT_USAGE. */
static int fetch_plan(fetch_t *f, session_t *s)
{
    const cli_t *c = f->cli;
    int into_dir = 0, rc;
    if (c->nargs == 0)
        return usage_error("fetch needs at least one URL");
    if (c->sha256 && c->nargs > 1)
        return usage_error("--sha256 applies to a single URL");
    if (c->sha256 && !is_sha256_hex(c->sha256))
        return usage_error("--sha256 wants 64 hex digits, not '%s'", c->sha256);
    for (size_t i = 0; c->sha256 && i < SHA256_HEX; i++)
        f->sha256[i] = (char)(c->sha256[i] | 0x20); /* hex digits lower-case with bit 5 */
    if (c->dest && (rc = dest_mode(c, &into_dir)) != 0)
        return rc;
    f->n = c->nargs;
    f->req = xcalloc(f->n, sizeof *f->req);
    for (size_t i = 0; i < f->n; i++)
        if ((rc = req_plan(&f->req[i], c->args[i], c->dest, into_dir)) != 0 ||
            (rc = fetch_queue(f, s, i)) != 0)
            return rc;
    return into_dir ? check_unique_names(f) : 0;
}

static void fetch_free(fetch_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        req_t *r = &f->req[i];
        free(r->name);
        free(r->label);
        free(r->dest);
        free(r->path);
        free(r->sha256);
        free(r->source);
        free(r->code);
        free(r->msg);
    }
    free(f->req);
}

static prog_mode_t progress_mode(const cli_t *c)
{
    if (c->quiet)
        return PROG_OFF;
    if (isatty(STDERR_FILENO))
        return PROG_TTY;
    return c->progress ? PROG_PLAIN : PROG_OFF;
}

static int cmd_fetch(const cli_t *c)
{
    fetch_t f = {.cli = c, .prog = progress_mode(c)};
    session_t *s = session_new(c, fetch_on_msg, &f);
    int rc = fetch_plan(&f, s);
    if (rc == 0)
        rc = session_open(s);
    if (rc == 0) {
        int err = session_run(s);
        if (err < 0) {
            fetch_abandon(&f);
            session_report(err);
        }
        rc = fetch_exit(&f);
    }
    fetch_free(&f);
    session_free(s);
    return rc;
}

/* ---- status, stats, ls -------------------------------------------------- */

/* How a listing command asks and prints. */
typedef struct listing_spec {
    const char *request;                          /* verb sent */
    const char *row;                              /* verb of each row */
    int until_end;                                /* rows until END, else one row */
    const char *header;                           /* table header, or NULL */
    void (*print)(FILE *o, const proto_msg_t *m); /* one row as text */
} listing_spec_t;

typedef struct listing {
    const listing_spec_t *spec; /* the command */
    int json;                   /* --json */
    FILE *out;                  /* memory: output appears only once the reply is whole */
    size_t rows;                /* rows seen */
    int failed;                 /* the daemon answered ERR */
} listing_t;

static const char *get_or(const proto_msg_t *m, const char *key, const char *dflt)
{
    const char *v = proto_get(m, key);
    return v ? v : dflt;
}

/* A byte count field, human-readable, or "?" if it is not a number. */
static const char *human_field(const proto_msg_t *m, const char *key, char *buf, size_t cap)
{
    uint64_t v;
    if (parse_u64(proto_get(m, key), &v) < 0)
        return "?";
    return human_bytes(v, buf, cap);
}

/* A Unix time field as local "YYYY-MM-DD HH:MM", or "?". */
static const char *time_field(const proto_msg_t *m, const char *key, char *buf, size_t cap)
{
    uint64_t v;
    struct tm tm;
    time_t t;
    if (parse_u64(proto_get(m, key), &v) < 0 || v > INT64_MAX)
        return "?";
    t = (time_t)v;
    if (!localtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%d %H:%M", &tm) == 0)
        return "?";
    return buf;
}

static void print_job(FILE *o, const proto_msg_t *m)
{
    char a[32], b[32], rate[32];
    line_t amount = {.len = 0}, cells = {.len = 0};
    line_add(&amount, "%s", human_field(m, "done", a, sizeof a));
    if (proto_get(m, "total"))
        line_add(&amount, " / %s", human_field(m, "total", b, sizeof b));
    line_add(&cells, "%5.20s  %-10.20s  %-23s  %10s/s  %7.20s  ", get_or(m, "job", "?"),
             get_or(m, "state", "?"), amount.buf, human_field(m, "rate", rate, sizeof rate),
             get_or(m, "waiters", "?"));
    put_clean(o, cells.buf);
    put_clean(o, get_or(m, "url", "?"));
    putc('\n', o);
}

static void print_entry(FILE *o, const proto_msg_t *m)
{
    char size[32], when[32];
    line_t cells = {.len = 0};
    line_add(&cells, "%-12.12s  %10s  %-16s  %-6s  ", get_or(m, "sha256", "?"),
             human_field(m, "size", size, sizeof size),
             time_field(m, "accessed", when, sizeof when),
             str_eq(get_or(m, "pinned", "0"), "1") ? "yes" : "");
    put_clean(o, cells.buf);
    put_clean(o, get_or(m, "url", "?"));
    putc('\n', o);
}

static void print_stats(FILE *o, const proto_msg_t *m)
{
    for (size_t i = 0; i < m->nfields; i++) {
        const proto_field_t *fl = &m->fields[i];
        if (proto_get(m, fl->key) != fl->value)
            continue; /* a repeated key: the first one counts */
        put_clean(o, fl->key);
        fputs(": ", o);
        put_clean(o, fl->value);
        putc('\n', o);
    }
}

static const listing_spec_t status_spec = {
    "STATUS", "JOB", 1, "  JOB  STATE       DONE/TOTAL                       RATE  WAITERS  URL\n",
    print_job};
static const listing_spec_t stats_spec = {"STATS", "STATS", 0, NULL, print_stats};
static const listing_spec_t ls_spec = {
    "LIST", "ENTRY", 1, "SHA256              SIZE  ACCESSED          PINNED  URL\n", print_entry};

static void listing_row(listing_t *l, const proto_msg_t *m)
{
    if (l->json && l->spec->until_end)
        fputs(l->rows ? ",\n" : "\n", l->out);
    if (l->json)
        json_msg(l->out, m);
    else
        l->spec->print(l->out, m);
    l->rows++;
}

static int listing_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    listing_t *l = arg;
    close_fd(fd);
    if (str_eq(m->verb, "ERR") && !proto_get(m, "id")) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        fprintf(stderr, "hubctl: hubd answered %s with ", l->spec->request);
        put_clean(stderr, code ? code : "an error");
        fputs(": ", stderr);
        put_clean(stderr, msg ? msg : "");
        putc('\n', stderr);
        l->failed = 1;
        return 1;
    }
    if (str_eq(m->verb, l->spec->row)) {
        listing_row(l, m);
        return !l->spec->until_end;
    }
    return l->spec->until_end && str_eq(m->verb, "END");
}

/* STATUS, STATS and LIST: one request, one whole reply, printed only once it
 * is complete so a failure leaves no half table or half JSON behind. */
static int cmd_listing(const cli_t *c, const listing_spec_t *spec)
{
    char *buf = NULL;
    size_t len = 0;
    listing_t l = {.spec = spec, .json = c->json, .out = open_memstream(&buf, &len)};
    if (!l.out) {
        fprintf(stderr, "hubctl: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    if (c->json && spec->until_end)
        putc('[', l.out);
    else if (!c->json && spec->header)
        fputs(spec->header, l.out);

    session_t *s = session_new(c, listing_on_msg, &l);
    session_queue_verb(s, spec->request);
    int rc = session_open(s);
    int err = rc == 0 ? session_run(s) : 0;
    if (err < 0)
        rc = session_report(err);
    else if (rc == 0 && l.failed)
        rc = EXIT_FAILED;
    if (c->json && spec->until_end)
        fputs(l.rows ? "\n]\n" : "]\n", l.out);
    else if (c->json)
        putc('\n', l.out);
    fclose(l.out);
    if (rc == 0)
        fwrite(buf, 1, len, stdout);
    free(buf);
    session_free(s);
    return rc;
}

static int cmd_status(const cli_t *c)
{
    return cmd_listing(c, &status_spec);
}

/* Prometheus text exposition (version 0.0.4) of one STATS line. */
static void print_prometheus(FILE *o, const proto_msg_t *m)
{
    static const struct {
        const char *key, *name, *type, *help;
    } metrics[] = {
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
        {"jobs_active", "hubd_jobs_active", "gauge", "Downloads transferring now."},
        {"jobs_queued", "hubd_jobs_queued", "gauge", "Downloads waiting for a slot."},
        {"sessions", "hubd_sessions", "gauge", "Connected clients."},
        {"uptime", "hubd_uptime_seconds", "gauge", "Seconds since the daemon started."},
    };
    for (size_t i = 0; i < ARRAY_LEN(metrics); i++) {
        uint64_t v;
        if (parse_u64(proto_get(m, metrics[i].key), &v) < 0)
            continue; /* an older daemon: leave the metric out, not 0 */
        fprintf(o, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", metrics[i].name, metrics[i].help,
                metrics[i].name, metrics[i].type, metrics[i].name, v);
    }
    /* errors_by_code=code:n,code:n */
    fputs("# HELP hubd_errors_total Fetches answered with an error, by error code.\n"
          "# TYPE hubd_errors_total counter\n",
          o);
    const char *by = get_or(m, "errors_by_code", "");
    while (*by) {
        size_t len = strcspn(by, ",");
        const char *colon = memchr(by, ':', len);
        if (colon && colon > by) {
            int nlen = (int)(colon - by);
            fprintf(o, "hubd_errors_total{code=\"%.*s\"} %.*s\n", nlen, by,
                    (int)(len - (size_t)nlen - 1), colon + 1);
        }
        by += len + (by[len] == ',');
    }
}

static const listing_spec_t prometheus_spec = {"STATS", "STATS", 0, NULL, print_prometheus};

static int cmd_stats(const cli_t *c)
{
    if (c->prometheus && c->json)
        return usage_error("--json and --prometheus do not go together");
    return cmd_listing(c, c->prometheus ? &prometheus_spec : &stats_spec);
}

static int cmd_ls(const cli_t *c)
{
    return cmd_listing(c, &ls_spec);
}

/* ---- admin: rm, pin, unpin, gc, verify ---------------------------------- */

typedef struct admin {
    const char *verb;
    int json;
    FILE *out;   /* memory: printed once the answer is whole */
    size_t nbad; /* BAD lines */
    int rc;      /* exit code from the answer */
} admin_t;

static int admin_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    admin_t *a = arg;
    close_fd(fd);
    if (str_eq(m->verb, "BAD")) {
        if (a->json) {
            fputs(a->nbad ? ",\n  " : "\n  ", a->out);
            json_msg(a->out, m);
        } else {
            fputs("bad blob ", a->out);
            put_clean(a->out, get_or(m, "sha256", "?"));
            fputs(": ", a->out);
            put_clean(a->out, get_or(m, "reason", "?"));
            fputs(" (quarantined)\n", a->out);
        }
        a->nbad++;
        return 0;
    }
    if (str_eq(m->verb, "ERR")) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        if (a->json) { /* the whole answer is this error */
            fclose(a->out);
            a->out = NULL;
            fputs("{\"ok\": false, \"error\": ", stdout);
            json_msg(stdout, m);
            fputs("}\n", stdout);
        }
        fprintf(stderr, "hubctl: %s: ", a->verb);
        put_clean(stderr, code ? code : "error");
        fputs(": ", stderr);
        put_clean(stderr, msg ? msg : "");
        putc('\n', stderr);
        a->rc = EXIT_FAILED;
        return 1;
    }
    if (!str_eq(m->verb, "OK"))
        return 0;
    a->rc = a->nbad ? EXIT_VERIFY : EXIT_OK;
    if (a->json) {
        fputs(a->nbad ? "\n],\n\"result\": " : "],\n\"result\": ", a->out);
        json_msg(a->out, m);
        fputs("}\n", a->out);
        return 1;
    }
    char b1[32], b2[32];
    if (str_eq(a->verb, "GC"))
        fprintf(a->out, "evicted %s blob(s), %s freed; the cache holds %s\n",
                get_or(m, "evicted", "?"), human_field(m, "freed", b1, sizeof b1),
                human_field(m, "size", b2, sizeof b2));
    else if (str_eq(a->verb, "VERIFY"))
        fprintf(a->out, "checked %s blob(s), %s bad\n", get_or(m, "checked", "?"),
                get_or(m, "bad", "?"));
    else if (str_eq(a->verb, "PIN") || str_eq(a->verb, "UNPIN"))
        fprintf(a->out, "%s\n", str_eq(a->verb, "PIN") ? "pinned" : "unpinned");
    else if (str_eq(a->verb, "RM"))
        fprintf(a->out, "removed%s\n",
                str_eq(get_or(m, "removed_blob", "0"), "1") ? " (and its blob)" : "");
    return 1;
}

static int cmd_admin(const cli_t *c, const char *verb)
{
    uint64_t size = 0;
    if (c->max_size && !str_eq(verb, "GC"))
        return usage_error("--max-size is an option of gc");
    if (c->max_size && !parse_size_arg(c->max_size, &size))
        return usage_error("bad --max-size '%s' (bytes, or with K, M, G or T)", c->max_size);
    char *buf = NULL;
    size_t len = 0;
    admin_t a = {.verb = verb, .json = c->json, .out = open_memstream(&buf, &len)};
    if (!a.out) {
        fprintf(stderr, "hubctl: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    if (c->json)
        fputs("{\"bad\": [", a.out);
    session_t *s = session_new(c, admin_on_msg, &a);
    char line[PROTO_MAX_LINE];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, verb);
    proto_add(&w, "id", "1");
    if (c->nargs)
        proto_add(&w, "target", c->args[0]);
    if (c->max_size)
        proto_add_u64(&w, "max_size", size);
    int rc = session_queue_line(s, &w) ? EXIT_USAGE : session_open(s);
    int err = rc == 0 ? session_run(s) : 0;
    if (err < 0)
        rc = session_report(err);
    else if (rc == 0)
        rc = a.rc;
    if (a.out)
        fclose(a.out);
    if ((rc == EXIT_OK || rc == EXIT_VERIFY) && a.out)
        fwrite(buf, 1, len, stdout);
    free(buf);
    session_free(s);
    return rc;
}

static int cmd_rm(const cli_t *c)
{
    return cmd_admin(c, "RM");
}

static int cmd_pin(const cli_t *c)
{
    return cmd_admin(c, "PIN");
}

static int cmd_unpin(const cli_t *c)
{
    return cmd_admin(c, "UNPIN");
}

static int cmd_gc(const cli_t *c)
{
    return cmd_admin(c, "GC");
}

static int cmd_verify(const cli_t *c)
{
    return cmd_admin(c, "VERIFY");
}

/* ---- the per-user daemon ------------------------------------------------- */

static int cmd_start(const cli_t *c)
{
    char sock[PATH_MAX];
    int rc = autostart_start(c->quiet, sock, sizeof sock);
    if (rc < 0)
        return EXIT_UNREACHABLE;
    puts(sock);
    return EXIT_OK;
}

static int cmd_stop(const cli_t *c)
{
    return autostart_stop(c->quiet) < 0 ? EXIT_FAILED : EXIT_OK;
}

/* ---- main --------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*run)(const cli_t *c);
    int takes_urls; /* fetch: URLs and the fetch-only options */
    int one_arg;    /* exactly one operand (a URL or a digest) */
} commands[] = {
    {"fetch", cmd_fetch, 1, 0}, {"status", cmd_status, 0, 0}, {"stats", cmd_stats, 0, 0},
    {"ls", cmd_ls, 0, 0},       {"rm", cmd_rm, 0, 1},         {"pin", cmd_pin, 0, 1},
    {"unpin", cmd_unpin, 0, 1}, {"gc", cmd_gc, 0, 0},         {"verify", cmd_verify, 0, 0},
    {"start", cmd_start, 0, 0}, {"stop", cmd_stop, 0, 0},
};

static int cli_dispatch(const cli_t *c)
{
    for (size_t i = 0; i < ARRAY_LEN(commands); i++) {
        if (strcmp(c->command, commands[i].name) != 0)
            continue;
        if (commands[i].takes_urls)
            return commands[i].run(c);
        if (commands[i].one_arg && c->nargs != 1)
            return usage_error("%s takes one URL or SHA256", c->command);
        if (!commands[i].one_arg && c->nargs)
            return usage_error("%s takes no arguments ('%s')", c->command, c->args[0]);
        if (c->sha256 || c->dest || c->progress || c->nheaders)
            return usage_error("--sha256, -o, -H and --progress are options of fetch");
        if (c->prometheus && !str_eq(c->command, "stats"))
            return usage_error("--prometheus is an option of stats");
        return commands[i].run(c);
    }
    return usage_error("unknown command '%s'", c->command);
}

/* stdout is buffered: a full disk or closed pipe shows only at the flush. */
static int finish_stdout(int rc)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return rc;
    if (errno != EPIPE)
        fprintf(stderr, "hubctl: write error on stdout: %s\n", strerror(errno));
    return rc ? rc : EXIT_FAILED;
}

int main(int argc, char **argv)
{
    /* A daemon that dies mid-write must be an error return, not a signal. */
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &sa, NULL);

    cli_t c;
    int rc = cli_parse(argc, argv, &c);
    if (rc == CLI_RUN)
        rc = cli_dispatch(&c);
    free(c.args);
    for (size_t i = 0; i < c.nheaders; i++)
        free(c.headers[i]);
    free(c.headers);
    return finish_stdout(rc);
}
