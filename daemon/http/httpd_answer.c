/* httpd_answer: the HTTP front's answers (see httpd_internal.h): each
 * one's head (status, the file's headers, the request's extra lines,
 * keep-alive) and body (a short text or bytes, or the file by sendfile),
 * handed to the connection to send; the statuses the front answers with,
 * and the per-uid count of waiting requests every route that waits
 * shares. Below the router and the routes: it calls only the connection
 * (httpd_conn.c). */
#include "errcode.h"
#include "http_range.h"
#include "httpd_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 507:
        return "Insufficient Storage";
    default:
        return "Error";
    }
}

int httpd_status_of(const char *code)
{
    return errcode_front_status(code); /* the table's front column */
}

/* Hands a finished head (and short body) to the connection to send. */
static void answer(hconn_t *c, char *text, int len, int close_after)
{
    if (len < 0) {
        hconn_close(c);
        return;
    }
    free(c->out);
    c->out = text;
    c->out_len = (size_t)len;
    c->out_off = 0;
    if (close_after)
        c->keep_alive = 0;
    hconn_send(c);
}

void hanswer_text(hconn_t *c, int status, const char *code, const char *msg, int close_after)
{
    char line[512];
    size_t n = 0;
    for (const char *m = msg; *m && n + 1 < sizeof line; m++) /* one line, printable */
        line[n++] = (unsigned char)*m < 0x20 ? ' ' : *m;
    line[n] = '\0';
    char *text = NULL;
    int len = asprintf(
        &text,
        "HTTP/1.1 %d %s\r\nServer: hubd\r\nContent-Type: text/plain; "
        "charset=utf-8\r\nContent-Length: %zu\r\n%s%s%s%s%s%s%s%s\r\n%s%s",
        status, reason(status), c->req->method == HTTP_HEAD ? (size_t)0 : n + 1,
        c->req->extra ? c->req->extra : "", code ? "X-Hubd-Error: " : "", code ? code : "",
        code ? "\r\n" : "", status == 405 ? "Allow: " : "",
        status == 405 ? (c->req->allow ? c->req->allow : "GET, HEAD") : "",
        status == 405 ? "\r\n" : "", close_after || !c->keep_alive ? "Connection: close\r\n" : "",
        c->req->method == HTTP_HEAD ? "" : line, c->req->method == HTTP_HEAD ? "" : "\n");
    answer(c, text, len, close_after);
}

/* The file is in the cache: its head, and its body (GET) from the blob. */
void hanswer_file(hconn_t *c, const job_result_t *res)
{
    static const char *const sources[] = {"hit", "download", "attached"};
    uint64_t first = 0, last = res->size ? res->size - 1 : 0;
    range_kind_t rk =
        http_range_parse(c->req->range[0] ? c->req->range : NULL, res->size, &first, &last);
    char *text = NULL;
    int len;
    if (rk == RANGE_UNSATISFIABLE) {
        len =
            asprintf(&text,
                     "HTTP/1.1 416 %s\r\nServer: hubd\r\nContent-Range: bytes */%llu\r\n"
                     "Content-Length: 0\r\n%s%s\r\n",
                     reason(416), (unsigned long long)res->size, c->req->extra ? c->req->extra : "",
                     c->keep_alive ? "" : "Connection: close\r\n");
        answer(c, text, len, 0);
        return;
    }
    uint64_t length = rk == RANGE_ONE ? last - first + 1 : res->size;
    char crange[96] = "";
    if (rk == RANGE_ONE)
        snprintf(crange, sizeof crange, "Content-Range: bytes %llu-%llu/%llu\r\n",
                 (unsigned long long)first, (unsigned long long)last,
                 (unsigned long long)res->size);
    len = asprintf(&text,
                   "HTTP/1.1 %d %s\r\nServer: hubd\r\nContent-Type: application/octet-stream\r\n"
                   "Content-Length: %llu\r\n%sAccept-Ranges: bytes\r\n%s%s%s"
                   "X-Hubd-Sha256: %s\r\nX-Hubd-Source: %s\r\n%s%s\r\n",
                   rk == RANGE_ONE ? 206 : 200, reason(rk == RANGE_ONE ? 206 : 200),
                   (unsigned long long)length, crange, c->req->own_etag ? "" : "ETag: \"",
                   c->req->own_etag ? "" : res->sha256, c->req->own_etag ? "" : "\"\r\n",
                   res->sha256, sources[res->kind], c->req->extra ? c->req->extra : "",
                   c->keep_alive ? "" : "Connection: close\r\n");
    if (c->req->method != HTTP_HEAD && length > 0) {
        c->body = job_fd_ref(res->fd);
        c->body_off = first;
        c->body_left = length;
        c->body_limit = first + length;
    }
    answer(c, text, len, 0);
}

void hanswer_head(hconn_t *c, uint64_t length)
{
    char *text = NULL;
    int len =
        asprintf(&text,
                 "HTTP/1.1 200 %s\r\nServer: hubd\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: %llu\r\nAccept-Ranges: bytes\r\n%s%s\r\n",
                 reason(200), (unsigned long long)length, c->req->extra ? c->req->extra : "",
                 c->keep_alive ? "" : "Connection: close\r\n");
    answer(c, text, len, 0);
}

/* The head of an answer of len bytes of ctype (malloc'd), or -1. */
static int bytes_head(hconn_t *c, int status, const char *ctype, size_t len, char **head)
{
    return asprintf(head,
                    "HTTP/1.1 %d %s\r\nServer: hubd\r\nContent-Type: %s\r\n"
                    "Content-Length: %zu\r\n%s%s\r\n",
                    status, reason(status), ctype, len, c->req->extra ? c->req->extra : "",
                    c->keep_alive ? "" : "Connection: close\r\n");
}

void hanswer_bytes_at(hconn_t *c, int status, const char *ctype, char *buf, size_t room, size_t len)
{
    char *head = NULL;
    int hl = bytes_head(c, status, ctype, len, &head);
    if (hl < 0 || (size_t)hl > room) {
        if (hl >= 0) /* a head larger than the room: the body is copied after it */
            hanswer_bytes(c, status, ctype, buf + room, len);
        else
            hconn_close(c);
        free(head);
        free(buf);
        return;
    }
    memcpy(buf + room - hl, head, (size_t)hl);
    free(head);
    size_t blen = c->req->method == HTTP_HEAD ? 0 : len;
    free(c->out);
    c->out = buf;
    c->out_len = room + blen;
    c->out_off = room - (size_t)hl;
    hconn_send(c);
}

void hanswer_bytes(hconn_t *c, int status, const char *ctype, const char *body, size_t len)
{
    char *head = NULL;
    int hl = bytes_head(c, status, ctype, len, &head);
    size_t blen = c->req->method == HTTP_HEAD ? 0 : len;
    char *text = hl < 0 ? NULL : realloc(head, (size_t)hl + blen);
    if (!text) {
        free(head);
        hconn_close(c);
        return;
    }
    memcpy(text + hl, body, blen);
    answer(c, text, hl + (int)blen, 0);
}

int hanswer_stream(hconn_t *c, job_fd_t *body, uint64_t total, const char *source, uint64_t limit)
{
    char *text = NULL;
    int len =
        asprintf(&text,
                 "HTTP/1.1 200 %s\r\nServer: hubd\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: %lld\r\nAccept-Ranges: bytes\r\nX-Hubd-Source: %s\r\n%s%s\r\n",
                 reason(200), (long long)total, source, c->req->extra ? c->req->extra : "",
                 c->keep_alive ? "" : "Connection: close\r\n");
    if (len < 0)
        return -1;
    c->body = body;
    c->body_off = 0;
    c->body_left = total;
    c->body_limit = limit;
    answer(c, text, len, 0);
    return 0;
}

int hanswer_add_line(hconn_t *c, const char *name, const char *value)
{
    hreq_t *r = c->req;
    if (!value)
        return 0;
    for (const char *v = value; *v; v++)
        if ((unsigned char)*v < 0x20)
            return 0; /* no header smuggling through the Hub's values */
    char *more = NULL;
    if (asprintf(&more, "%s%s: %s\r\n", r->extra ? r->extra : "", name, value) < 0)
        return -1;
    free(r->extra);
    r->extra = more;
    return 0;
}

int hanswer_quota_begin(hconn_t *c)
{
    httpd_t *h = c->srv;
    char msg[160];
    if (quota_request_admit(h->d.quota, &c->who, h->d.cfg->max_requests_per_user, msg,
                            sizeof msg)) {
        hanswer_text(c, 429, "too_many_requests", msg, 0);
        return -1;
    }
    return 0;
}
