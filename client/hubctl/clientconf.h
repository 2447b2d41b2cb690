/* clientconf: the machine's settings for hubd's clients.
 *
 * /etc/hubd/client.conf ($HUBD_CLIENT_CONF names another file), INI, keys
 * before any section; read by hubctl and, with the same meaning, by the
 * Python client. An admin sets them for every user of the machine:
 *
 *   user_daemon = no     no per-user hubd is started when the system one
 *                        cannot be used (yes: the default)
 *
 * A user turns the per-user daemon off for their own processes with
 * HUBD_NO_USER_DAEMON=1 in the environment (a training job that must never
 * fill a home folder); neither can turn back on what the other turned off.
 * A missing file is no error. A bad value counts as "no" (the admin meant
 * to restrict something) and is named on stderr. */
#ifndef HUBCTL_CLIENTCONF_H
#define HUBCTL_CLIENTCONF_H

#include <stddef.h>

/* 1 when a per-user daemon may be started; 0 when it is turned off, with
 * why (cap bytes) naming what turned it off. */
int clientconf_user_daemon(char *why, size_t cap);

/* The file read: $HUBD_CLIENT_CONF, else /etc/hubd/client.conf. */
const char *clientconf_path(void);

#endif
