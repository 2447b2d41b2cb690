/* Unit tests for daemon/url.c: parsing, the canonical form (the cache key),
 * the Host header form, and redirect resolution (RFC 3986 section 5).
 *
 * url_resolve drops fragments (they never reach an origin, and url_parse
 * drops them from the canonical form anyway), so the RFC's expected results
 * are compared with their "#..." part cut off. */
#include "url.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses text, which must succeed, and checks every part. */
static void parse_ok(const char *text, const char *scheme, const char *host, unsigned port,
                     int ipv6, const char *target, const char *canonical)
{
    url_t u;
    const char *why = NULL;
    int rc = url_parse(text, &u, &why);

    ck_assert_msg(rc == 0, "\"%s\": rc %d (%s)", text, rc, why ? why : "?");
    ck_assert_str_eq(u.scheme, scheme);
    ck_assert_str_eq(u.host, host);
    ck_assert_uint_eq(u.port, port);
    ck_assert_int_eq(u.ipv6, ipv6);
    ck_assert_str_eq(u.target, target);
    ck_assert_str_eq(u.canonical, canonical);
    url_free(&u);
}

static void parse_bad(const char *text)
{
    url_t u;
    const char *why = NULL;
    int rc = url_parse(text, &u, &why);

    ck_assert_msg(rc == -EINVAL, "\"%s\": got %d, want -EINVAL", text, rc);
    ck_assert_msg(why != NULL && why[0] != '\0', "\"%s\": no reason given", text);
    /* Nothing is left allocated: freeing again is harmless. */
    ck_assert_ptr_null(u.mem);
    url_free(&u);
    /* why may be NULL. */
    ck_assert_int_eq(url_parse(text, &u, NULL), -EINVAL);
}

START_TEST(url_parse_http_and_https)
{
    parse_ok("http://example.com/a/b?c=d", "http", "example.com", 80, 0, "/a/b?c=d",
             "http://example.com/a/b?c=d");
    parse_ok("https://example.com/x.tar.gz", "https", "example.com", 443, 0, "/x.tar.gz",
             "https://example.com/x.tar.gz");
    /* Percent-encodings, and '@' or ':' past the authority, pass through. */
    parse_ok("http://h/p%20q/a@b:c?x=%2F", "http", "h", 80, 0, "/p%20q/a@b:c?x=%2F",
             "http://h/p%20q/a@b:c?x=%2F");
    parse_ok("http://a-b_c.d9.example/", "http", "a-b_c.d9.example", 80, 0, "/",
             "http://a-b_c.d9.example/");
}
END_TEST

START_TEST(url_parse_lowercases_scheme_and_host)
{
    /* Scheme and host are case-insensitive, the path and query are not. */
    parse_ok("HTTP://Example.COM/Path/X?Q=Y", "http", "example.com", 80, 0, "/Path/X?Q=Y",
             "http://example.com/Path/X?Q=Y");
    parse_ok("HtTpS://WWW.Example.Org", "https", "www.example.org", 443, 0, "/",
             "https://www.example.org/");
}
END_TEST

START_TEST(url_parse_ports)
{
    /* The default port is dropped from the canonical form, so both spellings
     * are one cache key. */
    parse_ok("http://h:80/x", "http", "h", 80, 0, "/x", "http://h/x");
    parse_ok("https://h:443/x", "https", "h", 443, 0, "/x", "https://h/x");
    parse_ok("http://h:080/x", "http", "h", 80, 0, "/x", "http://h/x");
    /* "host:" with no digits is the default port (RFC 3986 3.2.3). */
    parse_ok("http://h:/x", "http", "h", 80, 0, "/x", "http://h/x");
    /* Explicit, non-default ports stay, including the other scheme's. */
    parse_ok("http://h:8080/x", "http", "h", 8080, 0, "/x", "http://h:8080/x");
    parse_ok("http://h:443/x", "http", "h", 443, 0, "/x", "http://h:443/x");
    parse_ok("https://h:80/x", "https", "h", 80, 0, "/x", "https://h:80/x");
    parse_ok("http://h:1", "http", "h", 1, 0, "/", "http://h:1/");
    parse_ok("http://h:65535?q", "http", "h", 65535, 0, "/?q", "http://h:65535/?q");
}
END_TEST

START_TEST(url_parse_ipv6_literal)
{
    parse_ok("http://[::1]:8080/x", "http", "::1", 8080, 1, "/x", "http://[::1]:8080/x");
    parse_ok("http://[::1]", "http", "::1", 80, 1, "/", "http://[::1]/");
    parse_ok("https://[2001:DB8::A]:443/", "https", "2001:db8::a", 443, 1, "/",
             "https://[2001:db8::a]/");
    parse_ok("http://[::ffff:192.0.2.1]:81/", "http", "::ffff:192.0.2.1", 81, 1, "/",
             "http://[::ffff:192.0.2.1]:81/");
    /* A dotted or plain host is not flagged. */
    parse_ok("http://192.0.2.1:81/", "http", "192.0.2.1", 81, 0, "/", "http://192.0.2.1:81/");
}
END_TEST

START_TEST(url_parse_target_forms)
{
    /* Missing path is "/". */
    parse_ok("http://h", "http", "h", 80, 0, "/", "http://h/");
    /* A query without a path gets the "/" in front of it. */
    parse_ok("http://host?x=1", "http", "host", 80, 0, "/?x=1", "http://host/?x=1");
    /* The query is kept, the fragment dropped. */
    parse_ok("http://h/p?q=1&r=#frag", "http", "h", 80, 0, "/p?q=1&r=", "http://h/p?q=1&r=");
    parse_ok("http://h/p#frag?notquery", "http", "h", 80, 0, "/p", "http://h/p");
    parse_ok("http://h#frag", "http", "h", 80, 0, "/", "http://h/");
    parse_ok("http://h:8080#f", "http", "h", 8080, 0, "/", "http://h:8080/");
    parse_ok("http://h?#", "http", "h", 80, 0, "/?", "http://h/?");
}
END_TEST

/* Dot segments go from the path (never the query): one resource, one key. */
START_TEST(url_parse_removes_dot_segments)
{
    parse_ok("http://h/a/../b", "http", "h", 80, 0, "/b", "http://h/b");
    parse_ok("http://h/a/./b/", "http", "h", 80, 0, "/a/b/", "http://h/a/b/");
    parse_ok("http://h/../../x", "http", "h", 80, 0, "/x", "http://h/x");
    parse_ok("http://h/a/..", "http", "h", 80, 0, "/", "http://h/");
    parse_ok("http://h/a?p=../b", "http", "h", 80, 0, "/a?p=../b", "http://h/a?p=../b");
}
END_TEST

/* A path that a server would read, once its dots are decoded and removed,
 * as another path: each spelling of "." and ".." as a whole segment is
 * found, dots inside a name are not. */
START_TEST(url_path_dot_segments_in_any_spelling)
{
    const char *dotted[] = {"/a/../b",     "/a/./b",    "/..",     "/.",       "..",     "/a/..",
                            "/a/%2e%2e/b", "/a/%2E./b", "/a/.%2e", "/a/%2e/b", "/a/%2E", "."};
    for (size_t i = 0; i < sizeof dotted / sizeof dotted[0]; i++)
        ck_assert_msg(url_path_has_dot_segment(dotted[i], strlen(dotted[i])), "%s", dotted[i]);
    const char *plain[] = {"/a/b",    "/a/.b",     "/a/b.", "/a/...", "/a/%2e%2e%2e", "/a/x%2e",
                           "/a/%2ex", "/a/%2f..x", "",      "/",      "/a//b",        "/.git/x"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        ck_assert_msg(!url_path_has_dot_segment(plain[i], strlen(plain[i])), "%s", plain[i]);
    /* Only the bytes given are read: the dots after n do not count. */
    ck_assert(!url_path_has_dot_segment("/a/b/../c", 4));
}
END_TEST

START_TEST(url_parse_rejects)
{
    static const char *const bad[] = {
        "",                                  /* empty */
        "example.com/x",                     /* no scheme */
        "//example.com/x",                   /* scheme-relative is not absolute */
        "http:/h/x",                         /* one slash */
        "http:h",                            /* no authority */
        "://h/",                             /* empty scheme */
        "http:///x",                         /* empty host */
        "http://",                           /* empty host, nothing after */
        "http://:8080/x",                    /* empty host with a port */
        "http://?q",                         /* empty host before the query */
        "http://[]/",                        /* empty IPv6 literal */
        "http://[::1/",                      /* unterminated IPv6 literal */
        "http://[::g]/",                     /* not hex */
        "http://[::1]x/",                    /* junk after the literal */
        "http://h:0/",                       /* port 0 */
        "http://h:65536/",                   /* port too big */
        "http://h:99999999999999999999999/", /* port overflow */
        "http://h:abc/",                     /* port not a number */
        "http://h:8o/",                      /* port not a number */
        "http://h:-1/",                      /* port not a number */
        "http://h:+80/",                     /* port not a number */
        "http://h:80:81/",                   /* two ports */
        "http://user:pass@h/",               /* userinfo */
        "http://user@h/",                    /* userinfo */
        "http://@h/",                        /* empty userinfo */
        "http://h%41/",                      /* '%' in host */
        "http://h!/",                        /* bad host character */
        "http://h/a b",                      /* space */
        "http://h/a\tb",                     /* control */
        "http://h/\x01",                     /* control */
        "http://h/\x7f",                     /* DEL */
        "http://h/caf\xc3\xa9",              /* non-ASCII */
        "http://h\xc3\xa9/",                 /* non-ASCII host */
        "http://h/a\"b",                     /* quote */
        "http://h/<script>",                 /* angle brackets */
        "http://h/a\r\nHost: evil",          /* header injection */
        " http://h/",                        /* leading space */
        "http://h/ ",                        /* trailing space */
        /* A host whose last label is a number is an IPv4 address or
         * nothing (WHATWG URL): never a name to look up. */
        "http://1.2.3.4.5/",               /* five parts */
        "http://256.0.0.1/",               /* a leading part above 255 */
        "http://1.2.3.256/",               /* the last part too big */
        "http://1.2.65536/",               /* ... for the two bytes left */
        "http://1.16777216/",              /* ... for the three bytes left */
        "http://4294967296/",              /* 2^32 */
        "http://0x100000000/",             /* 2^32 in hex */
        "http://99999999999999999999999/", /* far past 2^32 (no wrap) */
        "http://08/",                      /* leading 0 is octal: no 8 */
        "http://09.0.0.1/",                /* ... nor 9 */
        "http://0xg.1/",                   /* not hex */
        "http://1..2/",                    /* an empty part */
        "http://.1/",                      /* an empty first part */
        "http://a.1/",                     /* a name part before a number */
        "http://example.123/",             /* ... */
        "http://example.0x1/",             /* ... a hex number */
        "http://[1.2.3.4]/",               /* IPv4 in brackets */
        "http://[abc]/",                   /* hex, but no IPv6 address */
        "http://[::1::2]/",                /* two "::" */
        "http://[12345::]/",               /* a group of five digits */
        "http://[1:2:3:4:5:6:7:8:9]/",     /* nine groups */
        "http://[::ffff:127.1]/",          /* short IPv4 inside IPv6 */
        "http://[::ffff:1.2.3.256]/",      /* bad IPv4 inside IPv6 */
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        parse_bad(bad[i]);
}
END_TEST

/* Every spelling of an IPv4 address that browsers (WHATWG URL "IPv4
 * parser") and inet_aton, and so getaddrinfo, read as one address comes
 * out as its dotted quad: deny_hosts, the cache key and the Host header
 * see the address the socket reaches. */
START_TEST(url_parse_ipv4_spellings_are_canonical)
{
    static const struct {
        const char *host, *want;
    } cases[] = {
        {"127.0.0.1", "127.0.0.1"},
        {"127.1", "127.0.0.1"},          /* the last part fills three bytes */
        {"127.0.1", "127.0.0.1"},        /* ... two bytes */
        {"2130706433", "127.0.0.1"},     /* one decimal number */
        {"0x7f000001", "127.0.0.1"},     /* one hex number */
        {"0X7F000001", "127.0.0.1"},     /* upper case */
        {"017700000001", "127.0.0.1"},   /* one octal number */
        {"0x7f.1", "127.0.0.1"},         /* hex parts */
        {"0177.0.0.1", "127.0.0.1"},     /* octal parts */
        {"0x7f.0.0.0x1", "127.0.0.1"},   /* mixed */
        {"0x000000007f.1", "127.0.0.1"}, /* leading zeros in hex */
        {"127.0.0.1.", "127.0.0.1"},     /* one final dot, as in a name */
        {"0127.0.0.1", "87.0.0.1"},      /* a leading 0 is octal, not decimal */
        {"169.254.43518", "169.254.169.254"},
        {"0xa9.0xfe.0xa9.0xfe", "169.254.169.254"},
        {"0", "0.0.0.0"},
        {"0x", "0.0.0.0"}, /* WHATWG: "0x" alone is 0 (inet_aton refuses it) */
        {"4294967295", "255.255.255.255"},
        {"1.16777215", "1.255.255.255"},
        {"1.2.65535", "1.2.255.255"},
        {"192.0.2.1", "192.0.2.1"},
    };
    char url[128], want[128];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(url, sizeof url, "http://%s:81/x", cases[i].host);
        snprintf(want, sizeof want, "http://%s:81/x", cases[i].want);
        parse_ok(url, "http", cases[i].want, 81, 0, "/x", want);
        /* Where the resolver's own parser takes the spelling, it agrees. */
        struct in_addr a;
        if (inet_aton(cases[i].host, &a))
            ck_assert_msg(strcmp(inet_ntoa(a), cases[i].want) == 0, "%s: inet_aton says %s",
                          cases[i].host, inet_ntoa(a));
    }
    /* Host header and origin: the one spelling too. */
    url_t u, v;
    char hp[64];
    ck_assert_int_eq(url_parse("https://0x7f.1:8443/a", &u, NULL), 0);
    ck_assert_int_eq(url_hostport(&u, hp, sizeof hp), (int)strlen("127.0.0.1:8443"));
    ck_assert_str_eq(hp, "127.0.0.1:8443");
    ck_assert_int_eq(url_parse("https://127.0.0.1:8443/b", &v, NULL), 0);
    ck_assert_int_eq(url_same_origin(&u, &v), 1);
    url_free(&u);
    url_free(&v);
}
END_TEST

/* A last label that is not a number keeps the host a name, unchanged. */
START_TEST(url_parse_names_that_look_numeric_stay_names)
{
    static const char *const names[] = {"1.2.3.4a",  "127.0.0.1x", "0x7g",      "1e100",
                                        "1.2.3.4-x", "0x.example", "1.example", "example.com."};
    char url[128], want[128];

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(url, sizeof url, "http://%s/", names[i]);
        snprintf(want, sizeof want, "http://%s/", names[i]);
        parse_ok(url, "http", names[i], 80, 0, "/", want);
    }
}
END_TEST

/* IPv6 literals come out as inet_ntop writes them: one spelling each. */
START_TEST(url_parse_ipv6_spellings_are_canonical)
{
    static const struct {
        const char *host, *want;
    } cases[] = {
        {"0:0:0:0:0:0:0:1", "::1"},
        {"0000:0000::0001", "::1"},
        {"::FFFF:7F00:1", "::ffff:127.0.0.1"},
        {"0:0:0:0:0:ffff:127.0.0.1", "::ffff:127.0.0.1"},
        {"::ffff:127.0.0.1", "::ffff:127.0.0.1"},
        {"2001:0DB8:0:0:0:0:0:0A", "2001:db8::a"},
        {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
        {"fe80:0::1", "fe80::1"},
        {"::", "::"},
    };
    char url[128], want[128];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(url, sizeof url, "http://[%s]:8080/x", cases[i].host);
        snprintf(want, sizeof want, "http://[%s]:8080/x", cases[i].want);
        parse_ok(url, "http", cases[i].want, 8080, 1, "/x", want);
    }
}
END_TEST

/* The classification the host lists use (netpolicy): an address in 16
 * bytes with IPv4 as IPv4-mapped, a name, or neither. */
START_TEST(url_host_addr_kinds)
{
    static const uint8_t lo4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    static const uint8_t lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    static const struct {
        const char *host;
        int rc;
        const uint8_t *addr;
    } cases[] = {
        {"127.0.0.1", 1, lo4},
        {"127.1", 1, lo4},
        {"2130706433", 1, lo4},
        {"0x7F000001", 1, lo4},
        {"127.0.0.1.", 1, lo4},
        {"::ffff:127.0.0.1", 1, lo4}, /* IPv4-mapped: the same 16 bytes */
        {"[::ffff:7f00:1]", 1, lo4},
        {"::1", 1, lo6},
        {"[0::1]", 1, lo6},
        {"example.org", 0, NULL},
        {"*.example.org", 0, NULL},
        {"localhost", 0, NULL},
        {"1.2.3.4a", 0, NULL},
        {"10.0.0.256", -EINVAL, NULL},
        {"*.0.0.1", -EINVAL, NULL},
        {"a.1", -EINVAL, NULL},
        {"[::1", -EINVAL, NULL},
        {"[]", -EINVAL, NULL},
        {"[1.2.3.4]", -EINVAL, NULL},
        {"127.0.0.1:80", -EINVAL, NULL},
        {"::1::", -EINVAL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t addr[16];
        int rc = url_host_addr(cases[i].host, strlen(cases[i].host), addr);
        ck_assert_msg(rc == cases[i].rc, "%s: got %d, want %d", cases[i].host, rc, cases[i].rc);
        if (cases[i].addr)
            ck_assert_msg(memcmp(addr, cases[i].addr, 16) == 0, "%s: wrong address", cases[i].host);
    }
    /* Only the n bytes given are read. */
    uint8_t addr[16];
    ck_assert_int_eq(url_host_addr("127.1,example.org", 5, addr), 1);
    ck_assert_int_eq(memcmp(addr, lo4, 16), 0);
}
END_TEST

/* Another scheme is its own error, so the daemon can say which it was. */
START_TEST(url_parse_unsupported_scheme)
{
    static const char *const other[] = {"ftp://h/x", "file:///etc/passwd", "httpx://h/"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        url_t u;
        const char *why = NULL;
        ck_assert_int_eq(url_parse(other[i], &u, &why), -EPROTONOSUPPORT);
        ck_assert_ptr_nonnull(why);
    }
}
END_TEST

/* Credentials follow a redirect only within one scheme, host and port. */
START_TEST(url_same_origin_rules)
{
    static const struct {
        const char *a, *b;
        int same;
    } cases[] = {
        {"https://h/a", "https://h/b?x", 1},
        {"https://H:443/a", "https://h/b", 1},     /* default port, case */
        {"https://h/a", "http://h/a", 0},          /* scheme */
        {"https://h/a", "https://h:8443/a", 0},    /* port */
        {"https://h/a", "https://evil.h/a", 0},    /* host */
        {"http://[::1]:80/", "http://[::1]/x", 1}, /* IPv6 literal */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        url_t a, b;
        ck_assert_int_eq(url_parse(cases[i].a, &a, NULL), 0);
        ck_assert_int_eq(url_parse(cases[i].b, &b, NULL), 0);
        ck_assert_msg(url_same_origin(&a, &b) == cases[i].same, "%s vs %s", cases[i].a, cases[i].b);
        url_free(&a);
        url_free(&b);
    }
}
END_TEST

START_TEST(url_parse_length_limit)
{
    static char text[URL_MAX_LEN + 2];
    url_t u;

    memset(text, 'a', sizeof text);
    memcpy(text, "http://h/", 9);
    text[URL_MAX_LEN] = '\0';
    ck_assert_int_eq(url_parse(text, &u, NULL), 0);
    ck_assert_uint_eq(strlen(u.canonical), URL_MAX_LEN);
    ck_assert_uint_eq(strlen(u.target), URL_MAX_LEN - 8);
    url_free(&u);

    text[URL_MAX_LEN] = 'a';
    text[URL_MAX_LEN + 1] = '\0';
    parse_bad(text);

    /* The longest host (253) is accepted, one more is not. */
    char host[300];
    memset(host, 'x', sizeof host);
    memcpy(host, "http://", 7);
    host[7 + 253] = '\0';
    ck_assert_int_eq(url_parse(host, &u, NULL), 0);
    ck_assert_uint_eq(strlen(u.host), 253);
    url_free(&u);
    host[7 + 253] = 'x';
    host[7 + 254] = '\0';
    parse_bad(host);

    /* The canonical form keeps the limit, so that it parses again: "0" is
     * six bytes longer as "0.0.0.0". */
    memset(text, 'a', sizeof text);
    memcpy(text, "http://0/", 9);
    text[URL_MAX_LEN - 6] = '\0';
    ck_assert_int_eq(url_parse(text, &u, NULL), 0);
    ck_assert_uint_eq(strlen(u.canonical), URL_MAX_LEN);
    url_free(&u);
    text[URL_MAX_LEN - 6] = 'a';
    text[URL_MAX_LEN - 5] = '\0';
    parse_bad(text);
    /* The same for the "/" a query without a path gets (fuzz_url checks
     * that every canonical form parses again). */
    memset(text, 'a', sizeof text);
    memcpy(text, "http://h?", 9);
    text[URL_MAX_LEN - 1] = '\0';
    ck_assert_int_eq(url_parse(text, &u, NULL), 0);
    ck_assert_uint_eq(strlen(u.canonical), URL_MAX_LEN);
    url_free(&u);
    text[URL_MAX_LEN - 1] = 'a';
    text[URL_MAX_LEN] = '\0';
    parse_bad(text);
}
END_TEST

START_TEST(url_hostport_forms)
{
    static const struct {
        const char *url, *want;
    } cases[] = {
        {"http://h/", "h"},          {"http://H:80/", "h"},
        {"https://h:443/", "h"},     {"http://h:8080/", "h:8080"},
        {"https://h:80/", "h:80"},   {"http://[::1]:8080/", "[::1]:8080"},
        {"https://[::1]/", "[::1]"},
    };
    char buf[64];
    url_t u;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(url_parse(cases[i].url, &u, NULL), 0);
        int n = url_hostport(&u, buf, sizeof buf);
        ck_assert_msg(n == (int)strlen(cases[i].want) && strcmp(buf, cases[i].want) == 0,
                      "%s: got %d \"%s\", want \"%s\"", cases[i].url, n, buf, cases[i].want);
        url_free(&u);
    }

    /* Exact fit (with the NUL) and one byte short. */
    ck_assert_int_eq(url_parse("http://[::1]:8080/", &u, NULL), 0);
    ck_assert_int_eq(url_hostport(&u, buf, 11), 10);
    ck_assert_str_eq(buf, "[::1]:8080");
    ck_assert_int_eq(url_hostport(&u, buf, 10), -E2BIG);
    url_free(&u);
}
END_TEST

/* ---- url_resolve -------------------------------------------------------- */

/* Resolves ref against base and compares with the RFC's result minus its
 * fragment; the result must also be a URL url_parse accepts. */
static void resolve_eq(const char *base_text, const char *ref, const char *rfc_want)
{
    url_t base, out;
    char *got = NULL, want[256];

    ck_assert_int_eq(url_parse(base_text, &base, NULL), 0);
    snprintf(want, sizeof want, "%.*s", (int)strcspn(rfc_want, "#"), rfc_want);
    int rc = url_resolve(&base, ref, &got);
    ck_assert_msg(rc == 0, "base %s ref \"%s\": rc %d", base_text, ref, rc);
    ck_assert_msg(strcmp(got, want) == 0, "base %s ref \"%s\": got \"%s\", want \"%s\"", base_text,
                  ref, got, want);
    ck_assert_msg(url_parse(got, &out, NULL) == 0, "resolved \"%s\" does not parse", got);
    url_free(&out);
    free(got);
    url_free(&base);
}

#define RFC_BASE "http://a/b/c/d;p?q"

/* RFC 3986 section 5.4.1, the normal examples whose result is an http URL
 * ("g:h" is another scheme; "" is a reference to the same document). */
START_TEST(url_resolve_rfc3986_normal)
{
    static const char *const ex[][2] = {
        {"g", "http://a/b/c/g"},
        {"./g", "http://a/b/c/g"},
        {"g/", "http://a/b/c/g/"},
        {"/g", "http://a/g"},
        {"//g", "http://g"},
        {"?y", "http://a/b/c/d;p?y"},
        {"g?y", "http://a/b/c/g?y"},
        {"#s", "http://a/b/c/d;p?q#s"},
        {"g#s", "http://a/b/c/g#s"},
        {"g?y#s", "http://a/b/c/g?y#s"},
        {";x", "http://a/b/c/;x"},
        {"g;x", "http://a/b/c/g;x"},
        {"g;x?y#s", "http://a/b/c/g;x?y#s"},
        {".", "http://a/b/c/"},
        {"./", "http://a/b/c/"},
        {"..", "http://a/b/"},
        {"../", "http://a/b/"},
        {"../g", "http://a/b/g"},
        {"../..", "http://a/"},
        {"../../", "http://a/"},
        {"../../g", "http://a/g"},
    };

    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        resolve_eq(RFC_BASE, ex[i][0], ex[i][1]);
}
END_TEST

/* RFC 3986 section 5.4.2, the abnormal examples with an http result (the
 * strict "http:g" case aside): too many "..", dot segments in the middle,
 * dots that are not whole segments, and dots in the query or fragment. */
START_TEST(url_resolve_rfc3986_abnormal)
{
    static const char *const ex[][2] = {
        {"../../../g", "http://a/g"},
        {"../../../../g", "http://a/g"},
        {"/./g", "http://a/g"},
        {"/../g", "http://a/g"},
        {"g.", "http://a/b/c/g."},
        {".g", "http://a/b/c/.g"},
        {"g..", "http://a/b/c/g.."},
        {"..g", "http://a/b/c/..g"},
        {"./../g", "http://a/b/g"},
        {"./g/.", "http://a/b/c/g/"},
        {"g/./h", "http://a/b/c/g/h"},
        {"g/../h", "http://a/b/c/h"},
        {"g;x=1/./y", "http://a/b/c/g;x=1/y"},
        {"g;x=1/../y", "http://a/b/c/y"},
        {"g?y/./x", "http://a/b/c/g?y/./x"},
        {"g?y/../x", "http://a/b/c/g?y/../x"},
        {"g#s/./x", "http://a/b/c/g#s/./x"},
        {"g#s/../x", "http://a/b/c/g#s/../x"},
    };

    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        resolve_eq(RFC_BASE, ex[i][0], ex[i][1]);
}
END_TEST

START_TEST(url_resolve_absolute_location)
{
    /* An absolute Location replaces the base whole, whatever its host,
     * scheme or port. */
    resolve_eq(RFC_BASE, "http://other.example/x?y", "http://other.example/x?y");
    resolve_eq(RFC_BASE, "https://cdn.example:8443/blob", "https://cdn.example:8443/blob");
    resolve_eq("https://a:8443/b", "http://a/c", "http://a/c");
    /* A "://" inside the query of a relative reference does not make it
     * absolute. */
    resolve_eq(RFC_BASE, "/go?to=http://evil/", "http://a/go?to=http://evil/");
    resolve_eq(RFC_BASE, "g?to=http://evil/", "http://a/b/c/g?to=http://evil/");

    /* Upper-case scheme and host come out canonical once parsed. */
    url_t base, out;
    char *got = NULL;
    ck_assert_int_eq(url_parse(RFC_BASE, &base, NULL), 0);
    ck_assert_int_eq(url_resolve(&base, "HTTP://Other.Example:80/X#f", &got), 0);
    ck_assert_int_eq(url_parse(got, &out, NULL), 0);
    ck_assert_str_eq(out.canonical, "http://other.example/X");
    url_free(&out);
    free(got);
    url_free(&base);
}
END_TEST

START_TEST(url_resolve_base_with_port)
{
    static const char *const ex[][2] = {
        {"g", "http://a:8080/b/c/g"},
        {"/g", "http://a:8080/g"},
        {"?y", "http://a:8080/b/c/d;p?y"},
        {"#s", "http://a:8080/b/c/d;p?q"},
        {"../../../g", "http://a:8080/g"},
        {"..", "http://a:8080/b/"},
        {"//g", "http://g"}, /* a new authority brings its own (default) port */
        {"//g:9/x", "http://g:9/x"},
    };

    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
        resolve_eq("http://a:8080/b/c/d;p?q", ex[i][0], ex[i][1]);

    /* The scheme's own default port is not spelled out. */
    resolve_eq("https://a:443/b/c", "d", "https://a/b/d");
    resolve_eq("https://a/b/c", "//g/x", "https://g/x");
    /* IPv6 bases keep their brackets. */
    resolve_eq("http://[::1]:8080/d/e?q", "f", "http://[::1]:8080/d/f");
    resolve_eq("http://[::1]/d/e", "/f", "http://[::1]/f");
    /* A base whose target is only "/" or only a query. */
    resolve_eq("http://a/?q", "g", "http://a/g");
    resolve_eq("http://a?q", "#f", "http://a/?q");
}
END_TEST

/* RFC 3986 5.2.2: when the reference has its own scheme or authority, its
 * path still goes through remove_dot_segments, so "//g/a/../b" and
 * "http://g/b" are one cache key and one request target. */
START_TEST(url_resolve_dot_segments_after_authority)
{
    resolve_eq(RFC_BASE, "//g/a/../b", "http://g/b");
    resolve_eq(RFC_BASE, "http://x/a/./b/../c", "http://x/a/c");
}
END_TEST

START_TEST(url_resolve_rejects)
{
    static char big[URL_MAX_LEN + 2];
    url_t base;
    char *got = NULL;

    ck_assert_int_eq(url_parse(RFC_BASE, &base, NULL), 0);
    memset(big, 'g', sizeof big - 1);
    big[URL_MAX_LEN + 1] = '\0';
    ck_assert_int_eq(url_resolve(&base, big, &got), -EINVAL);
    ck_assert_ptr_null(got);
    big[URL_MAX_LEN] = '\0';
    ck_assert_int_eq(url_resolve(&base, big, &got), 0);
    ck_assert_uint_eq(strlen(got), strlen("http://a/b/c/") + URL_MAX_LEN);
    free(got);
    url_free(&base);
}
END_TEST

static Suite *url_suite(void)
{
    Suite *s = suite_create("url");
    TCase *parse = tcase_create("parse");
    TCase *resolve = tcase_create("resolve");

    tcase_add_test(parse, url_parse_http_and_https);
    tcase_add_test(parse, url_parse_lowercases_scheme_and_host);
    tcase_add_test(parse, url_parse_ports);
    tcase_add_test(parse, url_parse_ipv6_literal);
    tcase_add_test(parse, url_parse_ipv4_spellings_are_canonical);
    tcase_add_test(parse, url_parse_names_that_look_numeric_stay_names);
    tcase_add_test(parse, url_parse_ipv6_spellings_are_canonical);
    tcase_add_test(parse, url_host_addr_kinds);
    tcase_add_test(parse, url_parse_target_forms);
    tcase_add_test(parse, url_parse_removes_dot_segments);
    tcase_add_test(parse, url_path_dot_segments_in_any_spelling);
    tcase_add_test(parse, url_parse_unsupported_scheme);
    tcase_add_test(parse, url_same_origin_rules);
    tcase_add_test(parse, url_parse_rejects);
    tcase_add_test(parse, url_parse_length_limit);
    tcase_add_test(parse, url_hostport_forms);
    suite_add_tcase(s, parse);

    tcase_add_test(resolve, url_resolve_rfc3986_normal);
    tcase_add_test(resolve, url_resolve_rfc3986_abnormal);
    tcase_add_test(resolve, url_resolve_absolute_location);
    tcase_add_test(resolve, url_resolve_base_with_port);
    tcase_add_test(resolve, url_resolve_dot_segments_after_authority);
    tcase_add_test(resolve, url_resolve_rejects);
    suite_add_tcase(s, resolve);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(url_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
