/* config_internal: what config.c (the walks over the rows) and
 * config_keys.c (the rows and their types) share. This file is private to
 * daemon/base/config*.c. */
#ifndef HUBD_CONFIG_INTERNAL_H
#define HUBD_CONFIG_INTERNAL_H

#include "config.h"

/* A kind of value, as redis's typeInterface: each row points at one. The
 * functions reach the row's field through k->off (and k->width); a custom
 * type (min_free_space, mirror, proxy, hf_upstream) knows its
 * fields by name instead. */
struct config_type {
    const char *name; /* what the value is, for people and tests ("size", "duration") */
    /* Reads value into the field; 0 or a negative errno as config_set
     * returns. A refused value leaves the field as it was. */
    int (*parse)(hubd_config_t *cfg, const config_key_t *k, const char *value);
    /* Writes the key's line(s), as config_load_file reads them back. */
    void (*print)(const hubd_config_t *cfg, const config_key_t *k, FILE *out);
    /* Whether a and b hold different values (a reload's "needs a restart"). */
    int (*differ)(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k);
    /* cfg's value becomes next's (a reload); NULL for a type never reloaded. */
    void (*take)(hubd_config_t *cfg, const hubd_config_t *next, const config_key_t *k);
    /* Frees what the field holds and leaves it empty; NULL: nothing held. */
    void (*release)(hubd_config_t *cfg, const config_key_t *k);
    /* Writes into err why value was refused with rc, when the type knows
     * more than "bad value"; returns 0 to leave it to the generic message.
     * May parse value again: the config is not touched. NULL: never. */
    int (*explain)(const config_key_t *k, const char *value, int rc, char *err, size_t errlen);
};

/* config_front.c: the types of the front's irregular keys. A loopback
 * host:port list (http_listen, metrics_listen: a config_listen_t at the
 * row's offset), and a word of a set whose row's help begins with the
 * words ("name or uid: ..."; metrics_user_label, ktls): the field, an int,
 * is the word's place in the list. */
extern const config_type_t config_type_listen;
extern const config_type_t config_type_word;

#endif
