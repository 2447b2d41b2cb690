/* clientconf: /etc/hubd/client.conf and HUBD_NO_USER_DAEMON. */
#include "clientconf.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *path;
    int user_daemon; /* 1 yes, 0 no */
} conf_t;

/* yes/no in the words an INI file may use: 1, 0, or -1 for anything else. */
static int parse_bool(const char *v)
{
    static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false",
                                                                                "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

static int on_key(void *arg, const char *section, const char *key, const char *value)
{
    conf_t *c = arg;
    if (*section || strcmp(key, "user_daemon") != 0)
        return 1; /* other keys are for other clients, or later versions */
    int v = parse_bool(value);
    if (v < 0)
        fprintf(stderr, "hubctl: %s: bad value '%s' for user_daemon (yes or no): taken as no\n",
                c->path, value);
    c->user_daemon = v == 1;
    return 1;
}

const char *clientconf_path(void)
{
    const char *env = getenv("HUBD_CLIENT_CONF");
    return env && *env ? env : "/etc/hubd/client.conf";
}

int clientconf_user_daemon(char *why, size_t cap)
{
    const char *env = getenv("HUBD_NO_USER_DAEMON");
    if (env && *env && strcmp(env, "0") != 0) {
        snprintf(why, cap, "HUBD_NO_USER_DAEMON=%s in the environment", env);
        return 0;
    }
    conf_t c = {.path = clientconf_path(), .user_daemon = 1};
    FILE *f = fopen(c.path, "r");
    if (!f) {
        if (errno != ENOENT)
            fprintf(stderr, "hubctl: cannot read %s: %s\n", c.path, strerror(errno));
        return 1;
    }
    int rc = ini_parse_file(f, on_key, &c);
    fclose(f);
    if (rc > 0)
        fprintf(stderr, "hubctl: %s:%d: syntax error (ignored)\n", c.path, rc);
    if (!c.user_daemon)
        snprintf(why, cap, "user_daemon = no in %s", c.path);
    return c.user_daemon;
}
