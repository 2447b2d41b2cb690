/* config_front: the types of the front's irregular keys (config_internal.h):
 * the loopback host:port lists of http_listen and metrics_listen, and
 * metrics_user_label's word. Apart from config_keys.c, which holds the
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

/* ---- metrics_user_label: name or uid ---- */

static const char *const label_words[] = {[CONFIG_LABEL_NAME] = "name", [CONFIG_LABEL_UID] = "uid"};

static int parse_label(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    for (int i = 0; i < (int)(sizeof label_words / sizeof label_words[0]); i++)
        if (strcmp(value, label_words[i]) == 0) {
            *(int *)(void *)((char *)cfg + k->off) = i;
            return 0;
        }
    return -EINVAL;
}

static void print_label(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    int v = *(const int *)(const void *)((const char *)cfg + k->off);
    fprintf(out, "%s = %s\n", k->name, label_words[v == CONFIG_LABEL_UID]);
}

static int differ_label(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    return memcmp((const char *)a + k->off, (const char *)b + k->off, sizeof(int)) != 0;
}

static void take_label(hubd_config_t *cfg, const hubd_config_t *next, const config_key_t *k)
{
    memcpy((char *)cfg + k->off, (const char *)next + k->off, sizeof(int));
}

/* The words the value may be, from the row's help ("name or uid: ..."). */
static int explain_label(const config_key_t *k, const char *value, int rc, char *err, size_t errlen)
{
    (void)rc;
    snprintf(err, errlen, "bad value '%s' for key '%s': give %.*s", value, k->name,
             (int)strcspn(k->help, ":"), k->help);
    return 1;
}

const config_type_t config_type_label = {"name or uid", parse_label, print_label,  differ_label,
                                         take_label,    NULL,        explain_label};
