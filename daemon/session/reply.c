/* reply: building and queuing protocol lines. */
#include "reply.h"
#include "log.h"

void reply_begin(reply_t *r, const char *verb)
{
    proto_begin(&r->w, r->buf, sizeof r->buf, verb);
}

size_t reply_end(reply_t *r)
{
    int n = proto_end(&r->w);
    return n > 0 ? (size_t)n : 0;
}

int reply_send(transport_t *t, reply_t *r)
{
    int n = proto_end(&r->w);
    if (n < 0) {
        log_err("reply too long for the protocol, dropped");
        return 0;
    }
    transport_send(t, r->buf, (size_t)n);
    return 1;
}

void reply_err(transport_t *t, const char *id, const char *code, const char *msg)
{
    reply_t r;
    for (int with_msg = 1; with_msg >= 0; with_msg--) {
        reply_begin(&r, "ERR");
        if (id)
            proto_add(&r.w, "id", id);
        proto_add(&r.w, "code", code);
        if (with_msg)
            proto_add(&r.w, "msg", msg);
        int n = proto_end(&r.w);
        if (n > 0) { /* else a message too long to carry: again, keeping the code */
            transport_send(t, r.buf, (size_t)n);
            return;
        }
    }
}
