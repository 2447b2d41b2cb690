/* config_front: the types of the front's irregular keys (config_internal.h):
 * the loopback host:port lists of http_listen and metrics_listen, and a
 * word of a set (metrics_user_label's, and ktls's). Apart from config_keys.c, which holds the
 * regular types and the rows. */
#include "config_internal.h"
#include "hostport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LISTEN(cfg, k) ((config_listen_t *)(void *)((char *)(cfg) + (k)->off))
#define CLISTEN(cfg, k) ((const config_listen_t *)(const void *)((const char *)(cfg) + (k)->off))

/* ---- a loopback host:port list ---- */

/* Parsed now, so that a bad item stops the start with the file and line
 * named, and the listener gets addresses it need not check again. The
 * text is kept as written for config_print; blank: off. */
static int parse_listen(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    struct sockaddr_storage addrs[HOSTPORT_MAX_ADDRS];
    char item[HOSTPORT_TEXT_MAX];
    const char *why;
    size_t n;
    int rc = hostport_parse_list(value, addrs, HOSTPORT_MAX_ADDRS, &n, item, sizeof item, &why);
    if (rc)
        return rc;
    char *text = NULL;
    if (n && !(text = strdup(value)))
        return -ENOMEM;
    config_listen_t *l = LISTEN(cfg, k);
    free(l->text);
    l->text = text;
    memcpy(l->addrs, addrs, n * sizeof addrs[0]);
    l->n = n;
    return 0;
}

static void print_listen(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    const char *v = CLISTEN(cfg, k)->text;
    fprintf(out, "%s = %s\n", k->name, v ? v : "");
}

static int differ_listen(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    const char *x = CLISTEN(a, k)->text, *y = CLISTEN(b, k)->text;
    return (x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0);
}

static void release_listen(hubd_config_t *cfg, const config_key_t *k)
{
    config_listen_t *l = LISTEN(cfg, k);
    free(l->text);
    l->text = NULL;
    l->n = 0;
}

/* Parsed again for the item and the reason. */
static int explain_listen(const config_key_t *k, const char *value, int rc, char *err,
                          size_t errlen)
{
    if (rc == -ENOMEM)
        return 0;
    struct sockaddr_storage addrs[HOSTPORT_MAX_ADDRS];
    char item[HOSTPORT_TEXT_MAX];
    const char *why = "";
    size_t n;
    hostport_parse_list(value, addrs, HOSTPORT_MAX_ADDRS, &n, item, sizeof item, &why);
    snprintf(err, errlen, "%s: %s %s", k->name, item, why);
    return 1;
}

/* The listening sockets are bound once (or are systemd's): no take. */
const config_type_t config_type_listen = {"host:port list", parse_listen, print_listen,
                                          differ_listen,    NULL,         release_listen,
                                          explain_listen};

/* ---- a word of a set: metrics_user_label (name or uid), ktls (off or auto) ---- */

/* The i-th word of the list the row's help begins with ("name or uid: "),
 * at *w, *len bytes long; 0, or -1 past the list's end. */
static int word_at(const char *help, int i, const char **w, size_t *len)
{
    size_t list = strcspn(help, ":");
    for (size_t at = 0; at < list;) {
        at += strspn(help + at, " ,");
        size_t n = strcspn(help + at, " ,:");
        if (n == 0 || at + n > list)
            break;
        if (!(n == 2 && strncmp(help + at, "or", 2) == 0) && i-- == 0) {
            *w = help + at;
            *len = n;
            return 0;
        }
        at += n;
    }
    return -1;
}

static int parse_word(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    const char *w;
    size_t len;
    for (int i = 0; word_at(k->help, i, &w, &len) == 0; i++)
        if (strlen(value) == len && strncmp(value, w, len) == 0) {
            *(int *)(void *)((char *)cfg + k->off) = i;
            return 0;
        }
    return -EINVAL;
}

static void print_word(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    int v = *(const int *)(const void *)((const char *)cfg + k->off);
    const char *w = "?";
    size_t len = 1;
    word_at(k->help, v, &w, &len);
    fprintf(out, "%s = %.*s\n", k->name, (int)len, w);
}

static int differ_word(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    return memcmp((const char *)a + k->off, (const char *)b + k->off, sizeof(int)) != 0;
}

static void take_word(hubd_config_t *cfg, const hubd_config_t *next, const config_key_t *k)
{
    memcpy((char *)cfg + k->off, (const char *)next + k->off, sizeof(int));
}

/* The words the value may be, from the row's help ("name or uid: ..."). */
static int explain_word(const config_key_t *k, const char *value, int rc, char *err, size_t errlen)
{
    (void)rc;
    snprintf(err, errlen, "bad value '%s' for key '%s': give %.*s", value, k->name,
             (int)strcspn(k->help, ":"), k->help);
    return 1;
}

const config_type_t config_type_word = {"word",    parse_word, print_word,  differ_word,
                                        take_word, NULL,       explain_word};
