/* hf_list: the REPO reply's file list, and --include / --exclude. */
#include "hf_list.h"

#include "proto.h"
#include "textnum.h"
#include "util.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIST_MAX (256u << 20) /* bytes: far above any repo's list (16 MiB of JSON) */
#define READ_CHUNK 65536      /* bytes per pread */

/* The whole of fd from offset 0 into a malloc'd NUL-terminated buffer. */
static int read_all(int fd, char **out, size_t *len)
{
    size_t cap = READ_CHUNK, n = 0;
    char *buf = xrealloc(NULL, cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap >= LIST_MAX) {
                free(buf);
                return -EFBIG;
            }
            cap *= 2;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t r = pread(fd, buf + n, cap - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* Lower-cases hex of n digits into out (n + 1 bytes); 0, or -1 if it is
 * not n hex digits. */
static int copy_hex(const char *s, size_t n, char *out)
{
    if (!s || !hex_is(s, n, 0))
        return -1;
    for (size_t i = 0; i <= n; i++)
        out[i] = (char)(s[i] >= 'A' && s[i] <= 'F' ? s[i] | 0x20 : s[i]);
    return 0;
}

/* One line, with "F " before it so that the protocol's parser takes it. */
static int parse_line(const char *line, size_t len, proto_msg_t *m, hf_file_t *f)
{
    char buf[PROTO_MAX_LINE];
    if (len + 2 > sizeof buf)
        return -1;
    memcpy(buf, "F ", 2);
    memcpy(buf + 2, line, len);
    if (proto_parse(buf, len + 2, m) < 0)
        return -1;
    const char *path = proto_get(m, "path"), *sha = proto_get(m, "sha256");
    if (!path || parse_u64(proto_get(m, "size"), &f->size) < 0 ||
        copy_hex(proto_get(m, "blob"), 40, f->blob) < 0 ||
        (sha && copy_hex(sha, 64, f->sha256) < 0))
        return -1;
    if (!sha)
        f->sha256[0] = '\0';
    f->path = xstrdup(path);
    return 0;
}

int hf_list_read(int fd, hf_list_t *l, char *err, size_t errcap)
{
    char *text = NULL;
    size_t len = 0, lineno = 0;
    memset(l, 0, sizeof *l);
    int rc = read_all(fd, &text, &len);
    if (rc < 0) {
        snprintf(err, errcap, "cannot read the file list hubd sent: %s", strerror(-rc));
        return rc;
    }
    proto_msg_t *m = xrealloc(NULL, sizeof *m);
    for (char *p = text; rc == 0 && p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
        lineno++;
        if (n > 0) {
            l->files = xrealloc(l->files, (l->n + 1) * sizeof *l->files);
            memset(&l->files[l->n], 0, sizeof *l->files);
            if (parse_line(p, n, m, &l->files[l->n]) == 0) {
                l->n++;
            } else {
                snprintf(err, errcap, "hubd sent a file list with a bad line %zu: '%.60s'", lineno,
                         p);
                rc = -EBADMSG;
            }
        }
        p += n + 1;
    }
    free(m);
    free(text);
    if (rc < 0)
        hf_list_free(l);
    return rc;
}

void hf_list_free(hf_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->files[i].path);
    free(l->files);
    l->files = NULL;
    l->n = 0;
}

const char *hf_file_etag(const hf_file_t *f)
{
    return f->sha256[0] ? f->sha256 : f->blob;
}

/* One pattern against path, a trailing "/" meaning "/" and "*". */
static int glob_match(const char *pattern, const char *path)
{
    size_t n = strlen(pattern);
    if (n == 0 || pattern[n - 1] != '/')
        return fnmatch(pattern, path, 0) == 0;
    char *p = xrealloc(NULL, n + 2);
    memcpy(p, pattern, n);
    memcpy(p + n, "*", 2);
    int ok = fnmatch(p, path, 0) == 0;
    free(p);
    return ok;
}

int hf_list_wanted(const char *path, const char *const *include, size_t ninclude,
                   const char *const *exclude, size_t nexclude)
{
    int in = ninclude == 0;
    for (size_t i = 0; !in && i < ninclude; i++)
        in = glob_match(include[i], path);
    for (size_t i = 0; in && i < nexclude; i++)
        in = !glob_match(exclude[i], path);
    return in;
}
