#!/usr/bin/env python3
"""A real HTTP/1.1 test origin for hubd's integration tests.

Python 3 standard library only. It listens on loopback (127.0.0.1 or ::1),
keeps connections alive, and can misbehave on request (slow, late, truncated,
no ranges) so that the tests can drive hubd's retry, resume and redirect code
against a real socket. With --tls-cert and --tls-key it speaks HTTPS instead.

    python3 tests/origin.py --root DIR [--bind 127.0.0.1|::1] [--port 0]
                            --port-file FILE [--verbose]
                            [--tls-cert FILE --tls-key FILE]

The chosen port is written to FILE (atomically, by rename) once the socket
listens; the process exits with status 0 on SIGTERM or SIGINT.

TLS mode (tests/tls/make-certs.sh makes the certificates): TLS 1.2 and 1.3,
TLS 1.2 limited to ECDHE with AES-GCM or ChaCha20-Poly1305 (what hubd's
mbedTLS client offers), session tickets and the session cache on. Each
handshake runs in the connection's own thread, so a slow or failed one holds
up no other client; a failed handshake just closes the connection (logged
with --verbose). A connection the origin ends normally ends with a TLS
close_notify; a truncated one (truncate=N) ends with a bare TCP FIN and no
close_notify, which a client must treat as an error. Absolute Location
values use https://.

Endpoints (every one answers GET and HEAD):
  /files/<name>          DIR/<name> with Content-Length, a strong ETag (from
                         size and mtime), Last-Modified, Accept-Ranges; one
                         range "bytes=N-", "bytes=N-M" or "bytes=-N" gives
                         206 + Content-Range, an unsatisfiable one 416;
                         If-Range (ETag or HTTP date) that does not match
                         gives the whole file with 200; If-None-Match and
                         If-Modified-Since give 304.
  /chunked/<name>        the same file with Transfer-Encoding: chunked, chunk
                         sizes cycling through CHUNK_CYCLE.
  /redirect/<n>/<rest>   n > 0: to /redirect/<n-1>/<rest>, n == 0: to /<rest>,
                         query string kept; status CODE_CYCLE[n % 5]; the
                         Location is absolute (from the Host header) when n is
                         even, relative when n is odd.
  /redirect-loop         302 to itself, for ever.
  /sign/<name>?ttl_ms=T  302 to a signed URL, /files/<name>?expires=E (E: now
                         + T ms, in ms since the epoch; other query options
                         kept), as a CDN's expiring link.
  /files/<name>?expires=E  403 once the clock is past E (a signed URL that
                         expired): the client must resolve /sign/ again.
  /redirect-to?url=U[&code=C]
                         a redirect to the absolute URL U (percent-encoded in
                         the query; any scheme, host and port, e.g. another
                         origin's), status C (300..399, default 302).
  /eof/<name>            DIR/<name> with neither Content-Length nor chunking:
                         200, Connection: close, the body ends where the
                         connection does. In TLS mode that end is a
                         close_notify; with truncate=N it is a bare close
                         after N bytes (N >= the size sends the whole file
                         and still leaves out the close_notify). No ranges.
  /status/<code>         that status with a short text body.
  /badheaders            a malformed response: "HTTP/1.1 200 OK", then
                         "Content-Length: 5", then the line "Bad Header" (no
                         colon), then the body "hello"; the connection is
                         closed after it (FIN; in TLS mode after close_notify).
  /bigheaders?n=N[&len=L] 200 with N header lines "X-Filler-<i>: aaa..." of
                         exactly L bytes each (18..1000, default 1000), CRLF
                         included (N: default 100,
                         at most 100000), then Content-Length and a 3-byte
                         body "ok\n"; the connection is kept alive.
  /stats                 JSON counters (see Stats.snapshot, origin_server.py);
                         not counted.
  /reset (GET or POST)   zero the counters; not counted.
Anything else is 404.

Query options, combinable, on /files, /chunked and /eof (delay_ms on every
path):
  bps=N       send the body at about N bytes/s (writes of at most 64 KiB)
  slow_range=S&slow_bps=N
              a ranged request that starts at byte S exactly is sent at N
              bytes/s instead (one slow connection among fast ones; asked
              again from further on, the range is served as the others)
  delay_ms=N  wait N ms before sending the status line and headers
  truncate=N  announce the real length but close after N body bytes (in
              TLS mode without a close_notify; see /eof for that path)
  norange=1   ignore Range and If-Range: always 200 with the whole file
  encoding=E  (/files) add "Content-Encoding: E" (the body stays the file)
  retry_after=N   on /status, and on the failures of fail_first: add a
              Retry-After: N header

Fault options for retry, resume and timeout tests. Offsets N are ABSOLUTE
file offsets: a body that starts at S (S is 0 without a range, and always 0
on /chunked and /eof, which take no ranges) has "reached" N once N - S of
its bytes are sent. "The k-th request" uses the per-path ordinal k: the
value requests[<path>] of /stats takes when the request arrives (1-based,
path without the query, counted across connections, every method and every
query included, zeroed by /reset). HEAD requests take an ordinal too but are
answered normally (they have no body to cut, reset or stall).
  cut=N1,N2,...  the k-th request announces the real Content-Length /
              Content-Range (or chunking), then ends the connection
              abruptly (FIN; in TLS mode no close_notify, as truncate
              does; on /chunked no last-chunk) once the body reaches
              offset Nk: it sends Nk - S body bytes, and just the headers
              when Nk <= S. An Nk at or past the end of the body sends the
              whole response normally, and so is every request with k past
              the end of the list (e.g. cut=1000,5000: request 1 stops at
              1000, request 2 at 5000, request 3 and later are whole).
              Combined with truncate, the smaller stop wins.
  reset_at=N  like cut=N for every request, but the connection ends with a
              TCP RST (SO_LINGER on with a 0 timeout, then close) instead of
              a FIN, so the client sees ECONNRESET. The origin first waits
              (up to RESET_DRAIN_TIMEOUT s) for the client to acknowledge the
              bytes sent, so exactly N - S of them reach it. When cut or
              truncate stops the body earlier, that one acts instead (on a
              tie the RST wins).
  fail_at=K1,K2,...[&fail_status=C][&retry_after=S]
              the same failure for the requests with these ordinals only
              (e.g. a segmented download's third and fourth requests).
  lie_range=1 (/files) a range that starts past byte 0 is answered with
              a Content-Range one byte off ("bytes N+1-M+1/size"), the
              body still bytes N..M: a server whose ranges do not fit.
  fail_first=N[&fail_status=C][&retry_after=S]
              requests with ordinal k <= N get status C (400..599, default
              503; anything else gives 400) with a short text body
              ("503 Service Unavailable\n"), Content-Length and keep-alive,
              plus Retry-After: S when given; later ones are served as usual
              (with their own ordinal, so cut's k counts these failures too).
  stall_at=N&stall_ms=T
              once per request, when the body has reached offset N and has
              more to send (S <= N < the offset where it stops), sleep T ms,
              then go on. N = S stalls right after the headers; a ranged
              request that starts past N, or a body that stops at or before
              N (cut, truncate, end of file), does not stall. On /chunked the
              stall may fall inside a chunk (its size line already sent).
              With stall_once=1 only the first request of the path that
              reaches N stalls (a client that asks again from N is served).
  require_auth=H
              (any path) answer 401 unless the request carries
              "Authorization: Bearer T" where H is the start (8 or more hex
              digits) of T's SHA-256, so the token itself is not in the URL. Every counted request's
              Authorization header ("" when absent) is listed per path in
              /stats "auth", so tests can see what reached which origin;
              "proxy_auth" lists each one's Proxy-Authorization the same
              way (a proxy's credential must never reach an origin).
  etag=per_request
              (/files, /chunked) every such request gets a new version of
              the validators: ETag '"<size>-<mtime_ns>-<v>"' (all in hex) and
              Last-Modified = mtime + v seconds, where v is 1, 2, 3... per
              path. v is not zeroed by /reset, so a validator from any
              earlier response never matches again: If-Range then gives 200
              with the whole file, If-None-Match and If-Modified-Since give
              200 (not 304).

Counting: every request except /stats and /reset adds one to
requests[<path as sent, without the query>] when it arrives, and each body
write adds its payload bytes (file data, not chunk framing or headers) to
bytes[<same key>] as it goes, so a test can watch a transfer in flight.
"connections" counts the TCP connections that carried such a request, so a
test can see keep-alive at work (a connection used only for /stats or /reset
is not counted). "ranges" counts, per path, the counted requests that
carried a Range header (any Range header, even one ignored or malformed),
and "range_starts" lists, per path and in arrival order, the first byte
position each of those asked for: N for "bytes=N-" and "bytes=N-M", -N for
a suffix range "bytes=-N", null for one that is not a single byte range.
"tls" says whether the origin speaks TLS; "handshakes"
counts the completed TLS handshakes of connections that carried a counted
request (so a test's own /stats calls add none), counted once per connection
when its first such request arrives, and "resumed" counts those among them
that resumed an earlier session (by ticket or session id).
"""

import argparse
import email.utils
import fcntl
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

# The counters, pacing, parsing and the (TLS) server: origin_server.py, beside
# this file (the script's directory is on sys.path).
from origin_server import (GONE, Pacer, Server, Stats, http_date_to_ts, int_list_option,
                           int_option, make_tls_context, parse_range, write_port_file)

CODE_CYCLE = (301, 302, 303, 307, 308)
CHUNK_CYCLE = (1, 7, 4096, 65536, 100000)
FAST_WRITE = 1024 * 1024  # sendfile step when not rate limiting
UNCOUNTED = ("/stats", "/reset")
RESET_DRAIN_TIMEOUT = 10.0  # s reset_at waits for the peer to ack what was sent
SIOCOUTQ = 0x5411  # Linux ioctl (TIOCOUTQ): bytes sent but not yet acknowledged
BIGHEADERS_MAX = 100000  # lines; 100 MB of headers is plenty


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubd-test-origin/1"
    disable_nagle_algorithm = True  # small keep-alive answers must not wait 40 ms

    # -- plumbing ---------------------------------------------------------

    def log_message(self, format, *args):  # noqa: A002 (name fixed by the base class)
        if self.server.verbose:
            sys.stderr.write("origin: %s %s\n" % (self.address_string(), format % args))

    def do_GET(self):
        self.dispatch()

    def do_HEAD(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def discard_request_body(self):
        """Reads and drops a request body so the connection stays usable."""
        length = self.headers.get("Content-Length")
        if length is None:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True  # not worth decoding here
            return
        try:
            left = int(length)
        except ValueError:
            self.close_connection = True
            return
        while left > 0:
            got = self.rfile.read(min(left, 65536))
            if not got:
                break
            left -= len(got)

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        self.key = url.path
        self.query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        self.raw_query = url.query
        self.ordinal = 0  # this request's number for its path (see the docstring)
        if self.key not in UNCOUNTED:
            self.ordinal = self.server.stats.count_request(self.key, self, self.headers.get("Range"),
                                                           self.headers.get("Authorization"),
                                                           self.headers.get("Proxy-Authorization"))
        self.discard_request_body()
        try:
            delay = int_option(self.query, "delay_ms")
            if delay:
                time.sleep(delay / 1000.0)
            want = self.query.get("require_auth")
            got = self.headers.get("Authorization", "")
            if want and not (got.startswith("Bearer ") and len(want[-1]) >= 8 and hashlib.sha256(
                    got[7:].encode()).hexdigest().startswith(want[-1])):
                return self.send_text(401, "unauthorized\n", {"WWW-Authenticate": "Bearer"})
            self.route(url.path)
        except GONE:
            self.close_connection = True

    def route(self, path):
        parts = path.split("/")  # "/a/b" -> ["", "a", "b"]
        head = parts[1] if len(parts) > 1 else ""
        if self.command == "POST" and path != "/reset":
            return self.send_text(405, "method not allowed\n", {"Allow": "GET, HEAD"})
        if head == "files" and len(parts) > 2:
            return self.serve_file("/".join(parts[2:]), chunked=False)
        if head == "chunked" and len(parts) > 2:
            return self.serve_file("/".join(parts[2:]), chunked=True)
        if head == "redirect" and len(parts) > 3:
            return self.serve_redirect(parts[2], "/".join(parts[3:]))
        if path == "/redirect-loop":
            return self.send_redirect(302, self.absolute("/redirect-loop"))
        if path == "/redirect-to":
            return self.serve_redirect_to()
        if head == "sign" and len(parts) > 2:
            ttl = int_option(self.query, "ttl_ms", 1000)
            rest = [(k, v[-1]) for k, v in self.query.items() if k != "ttl_ms"]
            rest.append(("expires", str(int(time.time() * 1000) + ttl)))
            return self.send_redirect(302, self.absolute(
                "/files/%s?%s" % ("/".join(parts[2:]), urllib.parse.urlencode(rest))))
        if head == "eof" and len(parts) > 2:
            return self.serve_eof("/".join(parts[2:]))
        if head == "status" and len(parts) == 3:
            return self.serve_status(parts[2])
        if path == "/badheaders":
            return self.serve_badheaders()
        if path == "/bigheaders":
            return self.serve_bigheaders()
        if path == "/stats":
            body = json.dumps(self.server.stats.snapshot(), sort_keys=True) + "\n"
            return self.send_text(200, body, content_type="application/json")
        if path == "/reset":
            self.server.stats.reset()
            return self.send_text(200, '{"ok": true}\n', content_type="application/json")
        return self.send_text(404, "not found\n")

    def send_text(self, code, body, extra=None, content_type="text/plain; charset=utf-8"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
            if self.key not in UNCOUNTED:
                self.server.stats.count_bytes(self.key, len(data))

    def absolute(self, path_and_query):
        """Turns a path into an absolute URL using the Host header.

        The scheme is https in TLS mode, http otherwise.
        """
        host = self.headers.get("Host")
        if not host:
            addr, port = self.server.server_address[:2]
            host = "[%s]:%d" % (addr, port) if ":" in addr else "%s:%d" % (addr, port)
        scheme = "https" if self.server.tls_context else "http"
        return "%s://%s%s" % (scheme, host, path_and_query)

    def abort_connection(self):
        """Ends the connection now, as a truncating server or a cut cable would.

        The peer sees a TCP FIN right after the data sent so far; in TLS
        mode with no close_notify before it (SSLSocket.shutdown drops the
        TLS layer and shuts the socket down underneath), so a TLS client can
        tell the stream was cut short.
        """
        self.close_connection = True
        self.wfile.flush()
        if self.server.tls_context:
            self.connection.origin_aborted = True
        self.connection.shutdown(socket.SHUT_WR)

    def reset_connection(self):
        """Ends the connection now with a TCP RST (reset_at=N).

        It first waits (up to RESET_DRAIN_TIMEOUT) until the peer has
        acknowledged every byte sent, since a RST discards what is still in
        our send queue; then SO_LINGER {on, 0} and a close send the RST. The
        fd is closed here, detached from its socket object, because the
        usual end of a connection would shut it down (a FIN) first. In TLS
        mode no close_notify goes out either.
        """
        self.close_connection = True
        self.wfile.flush()
        sock = self.connection
        deadline = time.monotonic() + RESET_DRAIN_TIMEOUT
        while time.monotonic() < deadline:
            try:
                queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), SIOCOUTQ, b"\0\0\0\0"))[0]
            except OSError:
                break  # not Linux, or the socket is gone already
            if queued <= 0:
                break
            time.sleep(0.002)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        if self.server.tls_context:
            sock.origin_aborted = True  # close_tls must not try a close_notify
        os.close(sock.detach())

    def end_cut_short(self, ending):
        """Ends a body that stopped before its announced end (body_plan)."""
        if ending == "reset":
            self.reset_connection()
        else:
            self.abort_connection()

    def fail_first(self):
        """fail_first=N: answers the first N requests of a path with a failure.

        Returns True when it answered (then the caller must do nothing more).
        """
        n = int_option(self.query, "fail_first")
        at = [int(k) for k in self.query.get("fail_at", [""])[-1].split(",") if k.isdigit()]
        if (not n or self.ordinal > n) and self.ordinal not in at:
            return False
        code = 503
        if "fail_status" in self.query:
            code = int_option(self.query, "fail_status")
            if code is None or not 400 <= code <= 599:
                self.send_text(400, "fail_status must be 400..599\n")
                return True
        extra = {}
        retry = int_option(self.query, "retry_after")
        if retry is not None:
            extra["Retry-After"] = str(retry)
        try:
            reason = HTTPStatus(code).phrase
        except ValueError:
            reason = "failure"
        self.send_text(code, "%d %s\n" % (code, reason), extra)
        return True

    def body_plan(self, first, length):
        """How much of a body to send under truncate, cut, reset_at, stall_at.

        The body is `length` bytes from absolute file offset `first`.
        Returns (limit, ending, stall): the number of bytes to send; None
        when that is the whole body, otherwise "abort" (FIN, no
        close_notify) or "reset" (RST) for how the connection then ends;
        and None or (bytes to send before the stall, seconds to stall).
        """
        limit, ending = length, None
        truncate = int_option(self.query, "truncate")
        if truncate is not None and truncate < limit:
            limit, ending = truncate, "abort"
        cuts = int_list_option(self.query, "cut")
        if cuts and 1 <= self.ordinal <= len(cuts):
            n = max(0, cuts[self.ordinal - 1] - first)
            if n < limit:
                limit, ending = n, "abort"
        reset_at = int_option(self.query, "reset_at")
        if reset_at is not None:
            n = max(0, reset_at - first)
            if n < length and n <= limit:
                limit, ending = n, "reset"
        stall = None
        stall_at = int_option(self.query, "stall_at")
        stall_ms = int_option(self.query, "stall_ms", 0)
        if stall_at is not None and stall_ms > 0 and first <= stall_at < first + limit and (
                not int_option(self.query, "stall_once", 0) or self.server.stats.first_stall(self.key)):
            stall = (stall_at - first, stall_ms / 1000.0)
        return limit, ending, stall

    def send_redirect(self, code, location):
        self.send_text(code, "redirect to %s\n" % location, {"Location": location})

    # -- endpoints --------------------------------------------------------

    def serve_redirect(self, n_text, rest):
        if not n_text.isdigit():
            return self.send_text(404, "bad redirect count\n")
        n = int(n_text)
        target = "/redirect/%d/%s" % (n - 1, rest) if n > 0 else "/" + rest
        if self.raw_query:
            target += "?" + self.raw_query
        location = self.absolute(target) if n % 2 == 0 else target
        self.send_redirect(CODE_CYCLE[n % len(CODE_CYCLE)], location)

    def serve_redirect_to(self):
        urls = self.query.get("url")
        if not urls or not urls[-1]:
            return self.send_text(400, "url= is required\n")
        location = urls[-1]
        if any(ord(c) < 0x21 or ord(c) == 0x7F for c in location):
            return self.send_text(400, "url= must not hold spaces or control characters\n")
        code = int_option(self.query, "code", 302)
        if code is None or not 300 <= code <= 399:
            return self.send_text(400, "code must be 300..399\n")
        self.send_redirect(code, location)

    def serve_eof(self, name):
        """The file with its end marked only by the end of the connection."""
        if self.fail_first():
            return
        f = self.open_file(name)
        if f is None:
            return self.send_text(404, "no such file\n")
        with f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")  # also sets close_connection
            self.end_headers()
            if self.command == "HEAD":
                return
            limit, ending, stall = self.body_plan(0, size)
            self.send_body(f, 0, limit, int_option(self.query, "bps", 0), stall)
            if ending is None and int_option(self.query, "truncate") is not None:
                ending = "abort"  # truncate=N >= size: still no close_notify
            if ending is not None:
                self.end_cut_short(ending)
            # Otherwise the connection ends normally once this returns: FIN
            # in plain mode, close_notify then FIN in TLS mode.

    def serve_badheaders(self):
        """A response with a header line that has no colon; then a close."""
        self.close_connection = True
        self.log_request(200)
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nBad Header\r\n\r\n")
        if self.command != "HEAD":
            self.wfile.write(b"hello")
            self.server.stats.count_bytes(self.key, 5)

    def serve_bigheaders(self):
        """200 with n header lines of 1000 bytes each (CRLF included)."""
        n = int_option(self.query, "n", 100)
        size = int_option(self.query, "len", 1000)
        if n is None or n > BIGHEADERS_MAX:
            return self.send_text(400, "n must be 0..%d\n" % BIGHEADERS_MAX)
        if size is None or not 18 <= size <= 1000:
            return self.send_text(400, "len must be 18..1000\n")
        self.log_request(200)
        head = [b"HTTP/1.1 200 OK\r\n", b"Content-Type: text/plain; charset=utf-8\r\n"]
        self.wfile.write(b"".join(head))
        batch = []
        for i in range(n):
            name = b"X-Filler-%06d: " % i
            batch.append(name + b"a" * (size - len(name) - 2) + b"\r\n")
            if len(batch) == 1024:
                self.wfile.write(b"".join(batch))
                batch = []
        batch.append(b"Content-Length: 3\r\n\r\n")
        self.wfile.write(b"".join(batch))
        if self.command != "HEAD":
            self.wfile.write(b"ok\n")
            self.server.stats.count_bytes(self.key, 3)

    def serve_status(self, code_text):
        if not code_text.isdigit() or not 200 <= int(code_text) <= 599:
            return self.send_text(400, "status must be 200..599\n")
        code = int(code_text)
        extra = {}
        retry = int_option(self.query, "retry_after")
        if retry is not None:
            extra["Retry-After"] = str(retry)
        if code in (204, 304):  # these never carry a body
            self.send_response(code)
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            return
        try:
            reason = HTTPStatus(code).phrase
        except ValueError:
            reason = "status"
        self.send_text(code, "%d %s\n" % (code, reason), extra)

    def open_file(self, name):
        """Opens DIR/<name> for reading, refusing anything outside DIR."""
        rel = urllib.parse.unquote(name)
        root = self.server.root
        full = os.path.realpath(os.path.join(root, rel))
        if not full.startswith(root + os.sep) or not os.path.isfile(full):
            return None
        try:
            return open(full, "rb")
        except OSError:
            return None

    def serve_file(self, name, chunked):
        if self.fail_first():
            return
        expires = int_option(self.query, "expires")
        if expires is not None and time.time() * 1000 > expires:
            return self.send_text(403, "the signature expired\n")
        f = self.open_file(name)
        if f is None:
            return self.send_text(404, "no such file\n")
        with f:
            st = os.fstat(f.fileno())
            size = st.st_size
            mtime = int(st.st_mtime)
            etag = '"%x-%x"' % (size, st.st_mtime_ns)
            if self.query.get("etag", [""])[-1] == "per_request":
                version = self.server.stats.next_version(self.key)
                etag = '"%x-%x-%x"' % (size, st.st_mtime_ns, version)
                mtime += version
            last_modified = email.utils.formatdate(mtime, usegmt=True)
            norange = int_option(self.query, "norange", 0) != 0

            if self.not_modified(etag, mtime):
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", last_modified)
                self.end_headers()
                return

            rng = None
            if not chunked and not norange and self.if_range_matches(etag, mtime):
                rng = parse_range(self.headers.get("Range"), size)
            if rng == "unsatisfiable":
                return self.send_text(416, "range not satisfiable\n", {"Content-Range": "bytes */%d" % size})

            first, last = rng if rng else (0, size - 1)
            length = last - first + 1
            self.send_response(206 if rng else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("ETag", etag)
            if self.query.get("encoding"):
                self.send_header("Content-Encoding", self.query["encoding"][-1])
            self.send_header("Last-Modified", last_modified)
            if not chunked:
                self.send_header("Accept-Ranges", "none" if norange else "bytes")
            if rng:
                shift = 1 if first > 0 and int_option(self.query, "lie_range", 0) else 0
                self.send_header("Content-Range",
                                 "bytes %d-%d/%d" % (first + shift, last + shift, size))
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(length))
            self.end_headers()
            if self.command == "HEAD":
                return

            limit, ending, stall = self.body_plan(first, length)
            bps = int_option(self.query, "bps", 0)
            if rng and first == int_option(self.query, "slow_range", -1):
                bps = int_option(self.query, "slow_bps", bps)
            if chunked:
                self.send_chunked(f, limit, bps, stall)
            else:
                self.send_body(f, first, limit, bps, stall)
            if ending is not None:
                # The promised length was not met: the client must see EOF
                # (or a reset).
                self.end_cut_short(ending)
            elif chunked:
                self.wfile.write(b"0\r\n\r\n")

    def not_modified(self, etag, mtime):
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            tags = [t.strip() for t in inm.split(",")]
            # Weak comparison: W/"x" matches "x".
            return "*" in tags or any(t.removeprefix("W/") == etag for t in tags)
        ims = self.headers.get("If-Modified-Since")
        if ims is not None:
            ts = http_date_to_ts(ims)
            return ts is not None and mtime <= ts
        return False

    def if_range_matches(self, etag, mtime):
        """True when there is no If-Range, or when it names this version.

        An entity tag must match strongly (a weak one never does); a date
        must equal Last-Modified to the second.
        """
        value = self.headers.get("If-Range")
        if value is None:
            return True
        value = value.strip()
        if value.startswith('"') or value.startswith("W/"):
            return value == etag
        return http_date_to_ts(value) == mtime

    def send_body(self, f, offset, count, bps, stall=None):
        """Sends count bytes of f from offset, paced when bps > 0.

        stall: None or (bytes, seconds): sleep once after that many bytes
        (0 <= bytes < count); the pacing starts afresh after it.
        """
        if stall is not None:
            before, seconds = stall
            self.send_body(f, offset, before, bps)
            time.sleep(seconds)
            return self.send_body(f, offset + before, count - before, bps)
        out = self.connection.fileno()
        tls = self.server.tls_context is not None
        stats = self.server.stats
        pacer = Pacer(bps) if bps > 0 else None
        while count > 0:
            step = min(count, pacer.step if pacer else FAST_WRITE)
            if tls:
                # The bytes must go through the TLS layer: read, then write.
                data = os.pread(f.fileno(), step, offset)
                self.connection.sendall(data)
                n = len(data)
            else:
                # sendfile on the blocking socket: the kernel copies the file.
                n = os.sendfile(out, f.fileno(), offset, step)
            if n == 0:
                break  # the file shrank under us
            offset += n
            count -= n
            stats.count_bytes(self.key, n)
            if pacer:
                pacer.wait(n)

    def send_chunked(self, f, count, bps, stall=None):
        """Sends count bytes of f as chunks whose sizes cycle CHUNK_CYCLE.

        Pacing splits a large chunk into several writes; the chunk framing
        is not changed by it. stall: None or (bytes, seconds): sleep once
        after that many bytes of data, inside a chunk if it falls there
        (the pacing starts afresh after it).
        """
        stats = self.server.stats
        pacer = Pacer(bps) if bps > 0 else None
        stall_pos, stall_seconds = stall if stall is not None else (None, 0)
        sent = 0
        i = 0
        while count > 0:
            want = min(count, CHUNK_CYCLE[i % len(CHUNK_CYCLE)])
            i += 1
            data = f.read(want)
            if not data:
                break
            count -= len(data)
            size_line = b"%x\r\n" % len(data)
            if stall_pos is not None and sent <= stall_pos < sent + len(data):
                split = stall_pos - sent
            else:
                split = None
            if not pacer and split is None:
                self.wfile.write(size_line + data + b"\r\n")
                stats.count_bytes(self.key, len(data))
                sent += len(data)
                continue
            self.wfile.write(size_line)
            pos = 0
            while pos < len(data):
                if split is not None and pos == split:
                    time.sleep(stall_seconds)
                    stall_pos = split = None
                    if pacer:
                        pacer = Pacer(bps)
                end = len(data)
                if pacer:
                    end = min(end, pos + pacer.step)
                if split is not None:
                    end = min(end, split)  # pos < split here
                piece = data[pos:end]
                self.wfile.write(piece)
                stats.count_bytes(self.key, len(piece))
                if pacer:
                    pacer.wait(len(piece))
                pos = end
            sent += len(data)
            self.wfile.write(b"\r\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="HTTP/1.1 test origin for hubd")
    ap.add_argument("--root", required=True, help="directory served under /files/ and /chunked/")
    ap.add_argument("--bind", default="127.0.0.1", choices=["127.0.0.1", "::1"])
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", required=True, help="the chosen port is written here")
    ap.add_argument("--verbose", action="store_true", help="log each request to stderr")
    ap.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (chain), PEM")
    ap.add_argument("--tls-key", metavar="FILE", help="the certificate's private key, PEM")
    args = ap.parse_args(argv)

    if not os.path.isdir(args.root):
        ap.error("--root %s is not a directory" % args.root)
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    tls_context = None
    if args.tls_cert:
        tls_context = make_tls_context(args.tls_cert, args.tls_key)
    Server.address_family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET
    server = Server((args.bind, args.port), Handler)
    server.root = os.path.realpath(args.root)
    server.stats = Stats()
    server.verbose = args.verbose
    server.tls_context = tls_context
    server.stats.tls = tls_context is not None

    # Both signals unwind serve_forever and exit with 0. SIGINT is set too
    # because a shell starts background jobs with SIGINT ignored.
    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    write_port_file(args.port_file, server.server_address[1])
    if args.verbose:
        mode = " (TLS)" if tls_context else ""
        sys.stderr.write("origin: listening on %s port %d%s\n" % (args.bind, server.server_address[1], mode))
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
