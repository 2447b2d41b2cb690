/* http_range: a request's Range header against a file of known size, as
 * RFC 9110 14.1 and 14.2 read it, for the HTTP front's answers.
 *
 * One range is served (206); a header the front does not serve (another
 * unit, several ranges, bad syntax) is ignored, which the RFC allows: the
 * whole file goes out (200). A well-formed range that starts past the end
 * (or any range of an empty file) is unsatisfiable (416). Pure; any
 * thread. */
#ifndef HUBD_HTTP_RANGE_H
#define HUBD_HTTP_RANGE_H

#include <stdint.h>

typedef enum {
    RANGE_NONE,          /* no range to serve: the whole file */
    RANGE_ONE,           /* bytes [*first, *last] */
    RANGE_UNSATISFIABLE, /* 416, with Content-Range: bytes * / size */
} range_kind_t;

/* value: the Range header's value, or NULL. */
range_kind_t http_range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *last);

#endif
