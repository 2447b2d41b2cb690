#!/usr/bin/env python3
"""A small forward proxy for hubd's proxy tests: the cases Squid makes
awkward (Basic auth with a known password, a refused CONNECT, a record of
every header it was sent).

Python 3 standard library only, loopback only (it refuses any other
destination with 403).

    python3 tests/authproxy.py --port-file FILE --log FILE
                               [--bind 127.0.0.1|::1] [--port 0]
                               [--user NAME:PASSWORD] [--refuse-connect STATUS]

--user: every request must carry "Proxy-Authorization: Basic <base64 of
NAME:PASSWORD>", or gets 407 with "Proxy-Authenticate: Basic realm=...".
--refuse-connect: every CONNECT that passed the auth check gets STATUS
(e.g. 403, 502) instead of a tunnel.

It serves CONNECT (a tunnel: 200, then bytes spliced both ways until either
side closes) and absolute-form requests ("GET http://host:port/path"), which
it forwards in origin form with Connection: close and without the proxy's
own headers (Proxy-Authorization, Proxy-Connection), relaying the response
with "Connection: close": one request per client connection.

--log: one JSON object per request received, appended as it arrives:
{"method", "target", "version", "headers": [[name, value], ...], "status"}
(status: what the proxy answered, or 200 for a forwarded request / an
established tunnel). The port is written to --port-file (by rename) once the
socket listens; SIGTERM or SIGINT ends it with status 0.
"""

import argparse
import base64
import ipaddress
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import urllib.parse

MAX_HEAD = 64 * 1024  # bytes of request line and headers we accept
REASONS = {200: "Connection established", 400: "Bad Request", 403: "Forbidden",
           405: "Method Not Allowed", 407: "Proxy Authentication Required", 502: "Bad Gateway",
           503: "Service Unavailable"}


def loopback(host):
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_head(sock):
    """Reads up to the blank line; returns (head text, bytes read past it),
    or (None, b"") when the peer closed first or sent too much."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data or len(buf) > MAX_HEAD:
            return None, b""
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def parse_head(head):
    lines = head.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers.append([name.strip(), value.strip()])
    return parts[0], parts[1], parts[2], headers


def header(headers, name):
    for n, v in headers:
        if n.lower() == name.lower():
            return v
    return None


def splice(src, dst):
    """Copies src to dst until EOF or an error, then half-closes dst."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        head, rest = read_head(sock)
        if head is None:
            return
        parsed = parse_head(head)
        if parsed is None:
            return self.answer(400)
        method, target, version, headers = parsed
        self.entry = {"method": method, "target": target, "version": version, "headers": headers}
        want = self.server.auth
        if want and header(headers, "Proxy-Authorization") != want:
            return self.answer(407, {"Proxy-Authenticate": 'Basic realm="hubd-test"'})
        if method == "CONNECT":
            return self.connect(target, rest)
        url = urllib.parse.urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            return self.answer(400)
        return self.forward(method, url, version, headers, rest)

    def record(self, status):
        self.entry["status"] = status
        self.server.record(self.entry)

    def answer(self, status, extra=None):
        """A short answer of the proxy's own, then the connection closes."""
        if hasattr(self, "entry"):
            self.record(status)
        body = ("%d %s\n" % (status, REASONS.get(status, "Error"))).encode()
        hdrs = dict(extra or {}, **{"Content-Length": str(len(body)), "Connection": "close"})
        text = "HTTP/1.1 %d %s\r\n" % (status, REASONS.get(status, "Error"))
        text += "".join("%s: %s\r\n" % kv for kv in hdrs.items()) + "\r\n"
        try:
            self.request.sendall(text.encode() + body)
        except OSError:
            pass

    def dial(self, host, port):
        if not loopback(host):
            return None
        try:
            return socket.create_connection((host.strip("[]"), port), timeout=10)
        except OSError:
            return None

    def connect(self, target, rest):
        if self.server.refuse_connect:
            return self.answer(self.server.refuse_connect)
        host, _, port = target.rpartition(":")
        upstream = self.dial(host, int(port)) if port.isdigit() and host else None
        if upstream is None:
            return self.answer(403 if host and not loopback(host) else 502)
        upstream.settimeout(None)
        self.record(200)
        with upstream:
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            t = threading.Thread(target=splice, args=(upstream, self.request), daemon=True)
            t.start()
            splice(self.request, upstream)
            t.join()

    def forward(self, method, url, version, headers, rest):
        upstream = self.dial(url.hostname, url.port or 80)
        if upstream is None:
            return self.answer(403 if not loopback(url.hostname) else 502)
        upstream.settimeout(None)
        self.record(200)
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        drop = ("proxy-authorization", "proxy-connection", "connection", "keep-alive")
        out = ["%s %s %s" % (method, path, version)]
        out += ["%s: %s" % (n, v) for n, v in headers if n.lower() not in drop]
        out.append("Connection: close")
        with upstream:
            upstream.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + rest)
            # The response's head, with our Connection: close in place of
            # the origin's connection headers, then the body until EOF.
            rhead, rrest = read_head(upstream)
            if rhead is None:
                return self.answer(502)
            lines = [ln for ln in rhead.split("\r\n")
                     if ln.partition(":")[0].strip().lower() not in ("connection", "keep-alive")]
            lines.append("Connection: close")
            self.request.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + rrest)
            splice(upstream, self.request)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def record(self, entry):
        with self.log_lock:
            with open(self.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")


def write_port_file(path, port):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="forward proxy for hubd's proxy tests")
    ap.add_argument("--bind", default="127.0.0.1", choices=["127.0.0.1", "::1"])
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", required=True, help="the chosen port is written here")
    ap.add_argument("--log", required=True, help="JSON lines: each request received")
    ap.add_argument("--user", metavar="NAME:PASSWORD", help="require this Basic proxy auth")
    ap.add_argument("--refuse-connect", type=int, metavar="STATUS", help="answer CONNECT with STATUS")
    args = ap.parse_args(argv)
    if args.refuse_connect is not None and not 400 <= args.refuse_connect <= 599:
        ap.error("--refuse-connect takes a status 400..599")

    Server.address_family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET
    server = Server((args.bind, args.port), Handler)
    server.log_path = args.log
    server.log_lock = threading.Lock()
    server.auth = "Basic " + base64.b64encode(args.user.encode()).decode() if args.user else None
    server.refuse_connect = args.refuse_connect
    open(args.log, "a").close()

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    write_port_file(args.port_file, server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
