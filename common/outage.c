/* outage: see outage.h. */
#include "outage.h"

#include <stddef.h>
#include <string.h>

/* hubd's error codes that mean the Hub gave no answer, one row each
 * (docs/PROTOCOL.md, "Error codes"): hubd's transient codes, those it
 * retries itself, and dns. Left out, as answers or as what a user must
 * fix: http_401, http_403, http_404 and other 4xx (the Hub's word on the
 * repo, the revision or the token); tls_verify, proxy_auth and
 * proxy_refused (what answered is not trusted, or the proxy's rules said
 * no: huggingface_hub raises on SSLError and ProxyError too); forbidden,
 * redirect, http_parse, too_large; and hubd's own refusals (busy,
 * too_many_requests, io, no_space, shutting_down...). */
static const char *const outage_codes[] = {
    "dns",       /* the Hub's name did not resolve: no network */
    "connect",   /* no address accepted a connection */
    "timeout",   /* no answer, or too slow, within hubd's timeouts */
    "tls",       /* the TLS connection broke (a record or the handshake cut) */
    "truncated", /* the connection ended before the answer was whole */
    "proxy",     /* the forward proxy could not reach the Hub (a 502, 503) */
};

int outage_status(int status)
{
    return (status >= 500 && status <= 599) || status == 408 || status == 429;
}

int outage_code(const char *code)
{
    if (!code)
        return 0;
    for (size_t i = 0; i < sizeof outage_codes / sizeof *outage_codes; i++)
        if (strcmp(code, outage_codes[i]) == 0)
            return 1;
    /* http_NNN: the Hub's status (or its front's) */
    if (strncmp(code, "http_", 5) != 0 || strspn(code + 5, "0123456789") != 3 || code[8])
        return 0;
    return outage_status((code[5] - '0') * 100 + (code[6] - '0') * 10 + (code[7] - '0'));
}
