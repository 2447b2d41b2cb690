"""The test origin's machinery under its request handler (tests/origin.py).

Per-path counters (Stats: what /stats answers), write pacing (Pacer), the
parsing of query options, Range headers and HTTP dates, the threaded server
with its TLS mode (Server, make_tls_context) and the port file. Python 3
standard library only; origin.py's docstring says what all of it serves.
"""

import email.utils
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import ThreadingHTTPServer

MAX_WRITE = 64 * 1024  # largest single write when rate limiting
HANDSHAKE_TIMEOUT = 30.0  # s; a client that never finishes it loses its thread
CLOSE_TIMEOUT = 2.0  # s to send our close_notify and wait for the peer's
# TLS 1.2 suites: ECDHE with AEAD only. These are what an mbedTLS 2.28 client
# (hubd) offers, and the certificates of make-certs.sh are ECDSA.
TLS12_CIPHERS = ":".join((
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE+AESGCM",  # the same with RSA keys, should a test use one
    "ECDHE+CHACHA20",
))
# A client going away mid-body is normal in these tests (truncation, aborts).
# Over TLS that can also show as an SSLError (unexpected EOF, bad record).
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError, ssl.SSLError)


class Stats:
    """Per-path request and byte counters, shared by all handler threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._requests = {}
        self._bytes = {}
        self._ranges = {}
        self._range_starts = {}
        self._auth = {}
        self._proxy_auth = {}
        self._versions = {}  # etag=per_request; never zeroed (see origin.py's docstring)
        self._connections = 0
        self._generation = 0  # bumped by reset(), so connections count anew
        self._handshakes = 0
        self._resumed = 0
        self.tls = False

    def count_request(self, key, conn, range_header=None, auth=None, proxy_auth=None):
        """Counts a request, and its connection if that is new to us.

        conn is the handler: one per TCP connection, however many requests
        it carries; it remembers the generation it was counted in. In TLS
        mode its socket carries the handshake, counted at most once.
        range_header is the request's Range header, if it had one.
        Returns the request's per-path ordinal (1 for the first since the
        start or the last reset), which the fault options go by.
        """
        sock = conn.connection
        with self._lock:
            ordinal = self._requests.get(key, 0) + 1
            self._requests[key] = ordinal
            self._auth.setdefault(key, []).append(auth or "")
            self._proxy_auth.setdefault(key, []).append(proxy_auth or "")
            if range_header is not None:
                self._ranges[key] = self._ranges.get(key, 0) + 1
                self._range_starts.setdefault(key, []).append(range_start(range_header))
            if getattr(conn, "stats_generation", None) != self._generation:
                conn.stats_generation = self._generation
                self._connections += 1
            if getattr(sock, "origin_handshake_uncounted", False):
                sock.origin_handshake_uncounted = False
                self._handshakes += 1
                if sock.session_reused:
                    self._resumed += 1
            return ordinal

    def first_stall(self, key):
        """True the first time key asks (stall_once=1), False after."""
        with self._lock:
            done = getattr(self, "_stalled", set())
            self._stalled = done
            if key in done:
                return False
            done.add(key)
            return True

    def next_version(self, key):
        """The next validator version (1, 2, ...) of key, for etag=per_request."""
        with self._lock:
            v = self._versions.get(key, 0) + 1
            self._versions[key] = v
            return v

    def count_bytes(self, key, n):
        with self._lock:
            self._bytes[key] = self._bytes.get(key, 0) + n

    def reset(self):
        with self._lock:
            self._requests.clear()
            self._bytes.clear()
            self._ranges.clear()
            self._range_starts.clear()
            self._auth.clear()
            self._proxy_auth.clear()
            self._connections = 0
            self._generation += 1
            self._handshakes = 0
            self._resumed = 0

    def snapshot(self):
        with self._lock:
            return {
                "requests": dict(self._requests),
                "bytes": dict(self._bytes),
                "total_requests": sum(self._requests.values()),
                "total_bytes": sum(self._bytes.values()),
                "connections": self._connections,
                "tls": self.tls,
                "handshakes": self._handshakes,
                "resumed": self._resumed,
                "ranges": dict(self._ranges),
                "range_starts": {k: list(v) for k, v in self._range_starts.items()},
                "auth": {k: list(v) for k, v in self._auth.items()},
                "proxy_auth": {k: list(v) for k, v in self._proxy_auth.items()},
            }


class Pacer:
    """Spaces writes so the body goes out at about `bps` bytes per second.

    The schedule is absolute (bytes sent so far against time since the first
    byte), so sleep overshoot does not accumulate into a slower rate.
    """

    def __init__(self, bps):
        self.bps = bps
        self.start = time.monotonic()
        self.sent = 0
        # About ten writes a second, never more than MAX_WRITE at once.
        self.step = max(1, min(MAX_WRITE, bps // 10))

    def wait(self, n):
        self.sent += n
        ahead = self.sent / self.bps - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def int_option(query, name, default=None):
    """Returns the query option `name` as a non-negative int, or default."""
    values = query.get(name)
    if not values:
        return default
    try:
        v = int(values[-1])
    except ValueError:
        return default
    return v if v >= 0 else default


def int_list_option(query, name):
    """Returns the query option `name` ("N1,N2,...") as a list of
    non-negative ints, or None when absent or malformed."""
    values = query.get(name)
    if not values:
        return None
    try:
        items = [int(v) for v in values[-1].split(",")]
    except ValueError:
        return None
    return items if all(v >= 0 for v in items) else None


def range_start(header):
    """The first byte position a Range header asks for, for /stats.

    N for "bytes=N-" or "bytes=N-M", -N for the suffix range "bytes=-N",
    None for anything that is not one byte range.
    """
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first_s, dash, last_s = spec.strip().partition("-")
    first_s, last_s = first_s.strip(), last_s.strip()
    if not dash:
        return None
    if first_s.isdigit():
        return int(first_s)
    if first_s == "" and last_s.isdigit():
        return -int(last_s)
    return None


def parse_range(header, size):
    """Parses one byte range against a file of `size` bytes.

    Returns None when the header should be ignored (absent, malformed or a
    multi-range set, which RFC 9110 lets a server ignore), "unsatisfiable",
    or the inclusive pair (first, last).
    """
    if not header:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first_s, dash, last_s = spec.strip().partition("-")
    if not dash:
        return None
    first_s, last_s = first_s.strip(), last_s.strip()
    if not (first_s.isdigit() or first_s == "") or not (last_s.isdigit() or last_s == ""):
        return None
    if first_s == "":  # suffix range: the last N bytes
        if last_s == "":
            return None
        n = int(last_s)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return (max(0, size - n), size - 1)
    first = int(first_s)
    last = int(last_s) if last_s else None
    if last is not None and last < first:
        return None
    if first >= size:
        return "unsatisfiable"
    if last is None:
        last = size - 1
    return (first, min(last, size - 1))


def http_date_to_ts(value):
    """Returns the POSIX time of an HTTP date, or None if it is not one."""
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None:
        return None
    return int(dt.timestamp())


class Server(ThreadingHTTPServer):
    daemon_threads = True  # do not wait for slow transfers on exit
    request_queue_size = 128  # tests open many connections at once

    def server_bind(self):
        # HTTPServer.server_bind would do a reverse DNS lookup (getfqdn): skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port

    tls_context = None  # an ssl.SSLContext in TLS mode
    verbose = False

    def finish_request(self, request, client_address):
        """Serves one connection; in TLS mode wraps it first.

        This runs in the connection's own thread (ThreadingMixIn), so the
        handshake does too.
        """
        if self.tls_context is None:
            return super().finish_request(request, client_address)
        try:
            request.settimeout(HANDSHAKE_TIMEOUT)
            conn = self.tls_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except OSError as e:
            self.log_tls("wrap failed", client_address, e)
            return
        try:
            try:
                conn.do_handshake()
            except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
                self.log_tls("handshake failed", client_address, e)
                return
            conn.origin_handshake_uncounted = True  # see Stats.count_request
            if self.verbose:
                resumed = " (resumed)" if conn.session_reused else ""
                sys.stderr.write(
                    "origin: %s %s %s%s\n" % (client_address[0], conn.version(), conn.cipher()[0], resumed)
                )
            conn.settimeout(None)  # as in plain mode: no timeout on requests
            conn.origin_aborted = False
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            self.close_tls(conn)

    def close_tls(self, conn):
        """Closes a TLS connection: with close_notify unless it was aborted."""
        if getattr(conn, "origin_aborted", False):
            conn.close()  # already shut down underneath the TLS layer
            return
        try:
            conn.settimeout(CLOSE_TIMEOUT)
            conn.unwrap()  # sends close_notify, waits briefly for the peer's
            conn.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            pass  # the peer left first, or without a close_notify of its own
        conn.close()

    def log_tls(self, what, client_address, exc):
        if self.verbose:
            sys.stderr.write("origin: %s TLS %s: %s\n" % (client_address[0], what, exc))

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, GONE):
            return
        super().handle_error(request, client_address)


def make_tls_context(cert, key):
    """The server side of TLS mode (see the module's docstring)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)  # TLS 1.3's suites are set apart, all on
    ctx.options &= ~ssl.OP_NO_TICKET  # tickets on (the default; made sure)
    ctx.load_cert_chain(cert, key)
    return ctx


def write_port_file(path, port):
    """Writes the port to path by rename, so a reader never sees half of it."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)
