/* hf_endpoint: HF_ENDPOINT against the Hub hubd asks.
 *
 * hubd fetches from one Hub, hubd.conf's hf_upstream; HELLO names it, and
 * the /hf endpoints of hubd's HTTP front (hf_front, docs/PROTOCOL.md). An
 * HF_ENDPOINT that names either is hubd's Hub, and is honoured as it is:
 * silently. Any other (another Hub, or no URL at all) cannot be: hf
 * download says so in one line on stderr, once per run, naming the Hub
 * the files come from and why, and goes on through hubd. The rules are the
 * Python client's (client/python/hubd/_hfopts.py, Hub.means_us), so both
 * clients take the same HF_ENDPOINT the same way: a URL is compared as
 * Python's urlsplit reads it (scheme and host in lower case, the scheme's
 * port when none is given, the path without a trailing '/', no query);
 * hf_upstream must match whole; a front matches with http, its port and
 * path, and a loopback name on both sides (localhost, 127.x, ::1,
 * *.localhost). Single-threaded. */
#ifndef HUBCTL_HF_ENDPOINT_H
#define HUBCTL_HF_ENDPOINT_H

/* Does url name hubd's Hub: upstream (HELLO's hf_upstream; NULL: a hubd
 * too old to say, then nothing does), or one of fronts (hf_front's
 * ','-joined list, or NULL)? Pure. */
int hf_endpoint_means_hubd(const char *url, const char *upstream, const char *fronts);

/* HF_ENDPOINT checked against HELLO's fields (NULL for a hubd that named
 * none): the note on stderr when it is set and is not hubd's Hub, at most
 * once per process. quiet (-q): nothing said. */
void hf_endpoint_check(const char *upstream, const char *fronts, int quiet);

#endif
