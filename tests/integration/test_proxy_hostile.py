"""A hostile HTTPS forward proxy: one that answers CONNECT
with `200 Connection established` and then does not pass TLS through, or
relays to a server with another host's certificate, or answers CONNECT in
some malformed, endless or final way.

What these tests hold hubd to, for each:
- the download fails (or is retried, if the trouble may pass) with an error
  code and a message naming the proxy and what was wrong;
- no byte from the proxy is cached or served;
- nothing hubd sends after the proxy's 200 is readable by the proxy: no
  request line, no origin credential (hubctl --header), no
  Proxy-Authorization beyond the CONNECT itself; the request is written
  only once TLS has verified the origin's certificate;
- time and memory stay bounded, and hubd keeps serving other requests.

The proxy is a small threaded server on 127.0.0.1 (HostileProxy), stopped
in cleanup; it relays to a TLS origin of the test when a case needs a real
certificate. Every byte hubd sends it is recorded."""

import base64
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request

from harness import (SLOW, SLOWED, TestCerts, Hubd, HubTestCase, Origin, free_port, wait_for,
                     write_config)

CERTS = None
TOKEN = "origin-token-5e1d77"  # an origin credential (hubctl --header)
USER, PASSWORD = "bob", "pr0xy-pw"
BASIC = base64.b64encode(b"bob:pr0xy-pw")


def setUpModule():
    global CERTS
    CERTS = TestCerts()


def tearDownModule():
    CERTS.remove()


def recv_head(conn, limit=65536):
    """Bytes up to the end of an HTTP head (CRLF CRLF), or all before EOF."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < limit:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


class HostileProxy:
    """A CONNECT proxy on 127.0.0.1. behave(proxy, conn) runs for each
    connection once its CONNECT head is read (and recorded); each
    connection's received bytes are in self.received, one bytearray each,
    CONNECT head included (self.heads has the heads alone)."""

    def __init__(self, behave):
        self.behave = behave
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.address = "127.0.0.1:%d" % self.port
        self.url = "http://" + self.address
        self.received = []
        self.heads = []
        self.conns = []
        self.threads = []
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self):
        self.sock.settimeout(0.1)  # a close from stop() does not wake accept()
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(None)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            with self.lock:
                self.conns.append(conn)
                self.threads.append(t)
            t.start()

    def _serve(self, conn):
        rec = bytearray()
        with self.lock:
            self.received.append(rec)
        try:
            conn.settimeout(30)
            head = recv_head(conn)
            rec += head
            with self.lock:
                self.heads.append(head)
            self.behave(self, conn, rec)
        except OSError:
            pass
        finally:
            conn.close()

    def after_head(self):
        """What hubd sent the proxy after its CONNECT heads, all
        connections together."""
        with self.lock:
            return b"".join(bytes(r[len(h):]) for r, h in zip(self.received, self.heads))

    @staticmethod
    def drain(conn, rec, seconds=1.0):
        """Records what the client sends for a while (or until it closes)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = conn.recv(65536)
            except socket.timeout:
                return
            if not chunk:
                return
            rec += chunk

    @staticmethod
    def relay(conn, rec, port, upstream_limit=None, inject=None):
        """Passes the tunnel through to 127.0.0.1:port, recording what the
        client sends; upstream_limit: close after that many bytes from the
        server (a cut); inject: (offset, bytes) put into the server's
        stream at that offset."""
        up = socket.create_connection(("127.0.0.1", port), timeout=30)
        done = threading.Event()

        def down():
            sent = 0
            try:
                while not done.is_set():
                    chunk = up.recv(65536)
                    if not chunk:
                        break
                    if inject and sent <= inject[0] < sent + len(chunk):
                        k = inject[0] - sent
                        chunk = chunk[:k] + inject[1] + chunk[k:]
                        sent -= len(inject[1])
                    if upstream_limit is not None:
                        chunk = chunk[:upstream_limit - sent]
                    conn.sendall(chunk)
                    sent += len(chunk)
                    if upstream_limit is not None and sent >= upstream_limit:
                        break
            except OSError:
                pass
            done.set()
            for s in (conn, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=down, daemon=True)
        t.start()
        try:
            while not done.is_set():
                chunk = conn.recv(65536)
                if not chunk:
                    break
                rec += chunk
                up.sendall(chunk)
        except OSError:
            pass
        done.set()
        t.join(10)
        up.close()

    def stop(self):
        self.stopped.set()
        self.threads[0].join(10)
        self.sock.close()
        with self.lock:
            conns = list(self.conns)
            threads = list(self.threads[1:])
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(10)


ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
PLAIN_OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nproxy bytes\n"


def answers_itself(p, conn, rec):
    """A proxy that says 200 to CONNECT, reads the ClientHello, then answers
    in plain HTTP itself instead of passing the tunnel through."""
    conn.sendall(ESTABLISHED)
    rec += conn.recv(65536)
    conn.sendall(PLAIN_OK)
    p.drain(conn, rec)


class HostileProxyTest(HubTestCase):
    """hubd with proxy = a HostileProxy; the fetches carry an origin token
    and the proxy URL a user and password, so a leak would show."""

    def setUp(self):
        super().setUp()
        self.make_file("x.bin", 100000)

    def start_proxy(self, behave):
        p = HostileProxy(behave)
        self.addCleanup(p.stop)
        return p

    def start_tls_origin(self, cert_name):
        o = Origin(self.root, tls=CERTS.pair(cert_name), name=".%s-port" % cert_name)
        self.addCleanup(o.stop)
        return o

    def restart_hubd(self, proxy, **config):
        self.hubd.stop()
        config.setdefault("ca_file", CERTS.path("ca.crt"))
        config["proxy"] = "http://%s:%s@%s" % (USER, PASSWORD, proxy.address)
        n = len(os.listdir(self.tmp))
        conf = write_config(os.path.join(self.tmp, "hostile-%d.conf" % n), **config)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-%d" % n), config=conf)

    def fetch(self, url):
        t0 = time.monotonic()
        r = self.hubctl("fetch", "--json", "--header", "Authorization: Bearer " + TOKEN, url)
        elapsed = time.monotonic() - t0
        try:
            res = json.loads(r.out)
        except ValueError:
            self.fail("hubctl printed no JSON: %r" % r)
        return r, res, elapsed

    def assert_refused(self, proxy, url, code, *words, within=10.0):
        """The fetch fails with code, its message naming the proxy and
        words; nothing stored; the proxy saw nothing but TLS after its
        answer."""
        r, res, elapsed = self.fetch(url)
        self.assertEqual(r.rc, 1, r)
        self.assertFalse(res["ok"], res)
        self.assertEqual(res["error"]["code"], code, res)
        msg = res["error"]["message"]
        self.assertIn(proxy.address, msg)
        for w in words:
            self.assertIn(w, msg)
        self.assertFalse([ch for ch in msg if ord(ch) < 0x20 or ord(ch) == 0x7f], msg)
        self.assertLess(elapsed, within * SLOW, res)
        self.assertEqual(self.hubd.blob_files(), [])
        self.assert_nothing_readable(proxy)
        return res

    def assert_nothing_readable(self, proxy):
        """No request, no credential in what hubd sent after CONNECT."""
        after = proxy.after_head()
        for secret in (TOKEN.encode(), b"Bearer", b"GET ", b"HTTP/1.1", BASIC, PASSWORD.encode()):
            self.assertNotIn(secret, after)
        for h in proxy.heads:  # the proxy's credentials: in the CONNECT only
            self.assertTrue(h.startswith(b"CONNECT "), h)
            self.assertIn(b"Proxy-Authorization: Basic " + BASIC, h)
            self.assertNotIn(TOKEN.encode(), h)

    def url(self, port, host="127.0.0.1"):
        return "https://%s:%d/files/x.bin" % (host, port)


    # ---- a 200, then not TLS ------------------------------------------------

    def test_plain_http_after_200_is_named_and_gets_nothing(self):
        # The proxy says the tunnel is up, then answers the ClientHello with
        # an HTTP response of its own (or a redirect, or at once without
        # waiting for it). Was "TLS handshake with 127.0.0.1: SSL - An
        # invalid SSL record was received (-0x7200)", no proxy named.
        redirect = (b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/x\r\n"
                    b"Content-Length: 0\r\n\r\n")
        for answer, eager in ((PLAIN_OK, False), (redirect, False), (PLAIN_OK, True)):
            with self.subTest(answer=answer[:12], eager=eager):
                def behave(p, conn, rec):
                    if eager:
                        conn.sendall(ESTABLISHED)
                        time.sleep(0.3 * SLOW)  # its own read, not bytes after the 200
                    else:
                        conn.sendall(ESTABLISHED)
                        rec += conn.recv(65536)  # the ClientHello
                    conn.sendall(answer)
                    p.drain(conn, rec)
                proxy = self.start_proxy(behave)
                self.restart_hubd(proxy)
                self.assert_refused(proxy, self.url(self.origin.port), "tls", "not TLS",
                                    'begins "%s"' % answer.split(b"\r\n")[0].decode())
        self.assertEqual(self.origin.requests_for("/files/x.bin"), 0)

    def test_the_record_would_show_a_leak(self):
        # The check above is not blind: over plain http the request goes
        # to the proxy in absolute form, the token in it (inherent in http,
        # the spec promises nothing more), and assert_nothing_readable says
        # so.
        def behave(p, conn, rec):
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        proxy = self.start_proxy(behave)
        self.restart_hubd(proxy)
        r, res, _ = self.fetch(self.origin.url("/files/x.bin"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn(b"Authorization: Bearer " + TOKEN.encode(), proxy.heads[0])
        with self.assertRaises(AssertionError):
            self.assert_nothing_readable(proxy)

    def test_another_hosts_certificate_is_tls_verify(self):
        # The proxy relays to a real TLS server: one with a valid certificate
        # of the test CA for another name (wrong.example) or another address
        # (127.0.0.1 where the URL says 127.0.0.2), a self-signed one, an
        # expired one, one of a CA hubd does not trust. The request is never
        # written (the origin counts none). The message named the host and
        # the reason but not the proxy that chose the server.
        for cert_name, host, reason in (
                ("wrongname", "127.0.0.1", "name mismatch"),
                ("server", "127.0.0.2", "name mismatch"),
                ("selfsigned", "127.0.0.1", "self-signed certificate"),
                ("expired", "localhost", "certificate expired"),
                ("untrusted", "127.0.0.1", "unable to get local issuer certificate (unknown CA")):
            with self.subTest(cert=cert_name, host=host):
                origin = self.start_tls_origin(cert_name)

                def behave(p, conn, rec):
                    conn.sendall(ESTABLISHED)
                    p.relay(conn, rec, origin.port)
                proxy = self.start_proxy(behave)
                self.restart_hubd(proxy)
                res = self.assert_refused(proxy, self.url(origin.port, host), "tls_verify",
                                          host + ": " + reason)
                self.assertIn("through the proxy " + proxy.url, res["error"]["message"])
                self.assertEqual(origin.requests_for("/files/x.bin"), 0)

    def test_mirror_goes_through_the_same_tunnel(self):
        # A mirror (with the origin's credentials: the `credentials` word)
        # is dialled like any origin: CONNECT to the mirror, TLS inside; a
        # proxy answering itself gets neither the token nor a request, and
        # the fall-back to the origin goes the same way.
        proxy = self.start_proxy(answers_itself)
        mirror = "https://127.0.0.1:%d/" % self.origin.port
        self.restart_hubd(proxy, mirror="https://127.0.0.3:9/ %s credentials" % mirror)
        self.assert_refused(proxy, "https://127.0.0.3:9/files/x.bin", "tls", "not TLS")
        targets = [h.split(b" ")[1].decode() for h in proxy.heads]
        self.assertIn("127.0.0.1:%d" % self.origin.port, targets)  # the mirror, tunnelled

    def test_http_front_goes_through_the_same_tunnel(self):
        # The HTTP front's Hugging Face routes ask hf_upstream through the
        # same dialer: the client's token goes inside TLS or nowhere, and
        # the front's error names the proxy.
        proxy = self.start_proxy(answers_itself)
        port = free_port()
        self.restart_hubd(proxy, http_listen="127.0.0.1:%d" % port,
                          hf_upstream="https://127.0.0.1:%d" % self.origin.port)
        for path in ("/hf/api/models/org/model/revision/main",
                     "/hf/org/model/resolve/main/config.json"):
            with self.subTest(path=path):
                req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                             headers={"Authorization": "Bearer " + TOKEN})
                with self.assertRaises(urllib.error.HTTPError) as cm:
                    urllib.request.urlopen(req, timeout=30)
                body = cm.exception.read().decode(errors="replace")
                self.assertEqual(cm.exception.code, 502, body)
                self.assertEqual(cm.exception.headers["X-Hubd-Error"], "tls")
                self.assertIn("through the proxy " + proxy.url, body)
                self.assertIn('not TLS but begins "HTTP/1.1 200 OK"', body)
                self.assertNotIn("proxy bytes", body)
        self.assertEqual(self.hubd.blob_files(), [])
        self.assert_nothing_readable(proxy)
        targets = [h.split(b" ")[1].decode() for h in proxy.heads]
        self.assertIn("127.0.0.1:%d" % self.origin.port, targets)

    # ---- the answer to CONNECT itself ----------------------------------------

    def test_malformed_answers_to_connect(self):
        def send(data, then_drain=True, pause=0):
            def behave(p, conn, rec):
                for i, part in enumerate(data if isinstance(data, tuple) else (data,)):
                    if i:
                        time.sleep(pause)
                    conn.sendall(part)
                if then_drain:
                    p.drain(conn, rec)
            return behave

        cases = (
            # bytes that belong to nobody, in the 200's packet
            ("extra bytes", send(ESTABLISHED + b"\x16\x03\x01junk"), "proxy",
             ("sent bytes after its answer (200 Connection established)",)),
            ("a body in the 200's packet",
             send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), "proxy",
             ("sent bytes after its answer (200 OK)",)),
            # the same body a moment later: the TLS handshake reads it
            ("a body later", send((b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b"hello"),
                                  pause=0.2), "tls", ('not TLS but begins "hello"',)),
            ("HTTP/1.0 200, then closed", send(b"HTTP/1.0 200 OK\r\n\r\n", then_drain=False),
             "tls", ("closed the connection during the TLS handshake",)),
            ("a huge header", send(b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 40000 + b"\r\n\r\n"),
             "proxy", ("more than 16 KiB of headers",)),
            ("endless 1xx", send(b"HTTP/1.1 100 Continue\r\n\r\n" * 2000), "proxy",
             ("more than 16 KiB of headers",)),
            ("407", send(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                         b"Content-Length: 0\r\n\r\n"),
             "proxy_auth", ("wants a user and password (407",)),
            ("403", send(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"),
             "proxy_refused", ("refused the tunnel: 403 Forbidden",)),
            ("503", send(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"),
             "proxy", ("failed to open the tunnel: 503 Service Unavailable",)),
            # a captive portal's redirect: no tunnel, and no refusal either
            ("302", send(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:8/login\r\n"
                         b"Content-Length: 0\r\n\r\n"), "proxy",
             ("did not open the tunnel: 302 Found",)),
            # the proxy's words are quoted, its terminal escapes are not
            ("escapes in the reason", send(b"HTTP/1.1 403 \x1b[2J\x1b]0;pwned\x07Forbidden\r\n"
                                           b"Content-Length: 0\r\n\r\n"),
             "proxy_refused", ("403 ?[2J?]0;pwned?Forbidden",)),
            ("closed at once", send(b"", then_drain=False), "proxy",
             ("closed the connection (end of stream) before answering CONNECT",)),
            ("not HTTP", send(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), "proxy",
             ("bad answer from the proxy",)),
        )
        for name, behave, code, words in cases:
            with self.subTest(name):
                proxy = self.start_proxy(behave)
                self.restart_hubd(proxy)
                self.assert_refused(proxy, self.url(self.origin.port), code, *words)
        self.assertEqual(self.origin.requests_for("/files/x.bin"), 0)

    def test_what_is_retried(self):
        # retries = 2: what may pass is tried three times (a 5xx, a plain
        # answer after the 200: "tls"), what would fail again once (a 407,
        # a certificate that is not the host's).
        wrong = self.start_tls_origin("wrongname")

        def relay_wrong(p, conn, rec):
            conn.sendall(ESTABLISHED)
            p.relay(conn, rec, wrong.port)

        def plain(p, conn, rec):
            conn.sendall(ESTABLISHED)
            rec += conn.recv(65536)
            conn.sendall(PLAIN_OK)

        def status(line):
            return lambda p, conn, rec: conn.sendall(line + b"\r\nContent-Length: 0\r\n\r\n")

        for name, behave, port, code, tries in (
                ("407", status(b"HTTP/1.1 407 Proxy Authentication Required"), self.origin.port,
                 "proxy_auth", 1),
                ("503", status(b"HTTP/1.1 503 Service Unavailable"), self.origin.port, "proxy", 3),
                ("plain", plain, self.origin.port, "tls", 3),
                ("wrong cert", relay_wrong, wrong.port, "tls_verify", 1)):
            with self.subTest(name):
                proxy = self.start_proxy(behave)
                self.restart_hubd(proxy, retries=2, retry_delay="20ms", retry_max_delay="50ms")
                self.assert_refused(proxy, self.url(port), code)
                self.assertEqual(len(proxy.heads), tries, proxy.heads)

    def test_1xx_before_200_opens_the_tunnel(self):
        # Interim answers are skipped, the 200 after them opens the tunnel,
        # and the fetch works through it (the proxy sees only TLS).
        origin = self.start_tls_origin("server")

        def behave(p, conn, rec):
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            time.sleep(0.1)
            conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n" + ESTABLISHED)
            p.relay(conn, rec, origin.port)
        proxy = self.start_proxy(behave)
        self.restart_hubd(proxy)
        r, res, _ = self.fetch(self.url(origin.port))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["size"], 100000, res)
        self.assertEqual(origin.stats()["auth"]["/files/x.bin"], ["Bearer " + TOKEN])
        self.assert_nothing_readable(proxy)

    def test_cut_mid_handshake_names_the_proxy(self):
        # 200, the server's first 100 bytes of handshake, then the end.
        origin = self.start_tls_origin("server")

        def behave(p, conn, rec):
            conn.sendall(ESTABLISHED)
            p.relay(conn, rec, origin.port, upstream_limit=100)
        proxy = self.start_proxy(behave)
        self.restart_hubd(proxy)
        self.assert_refused(proxy, self.url(origin.port), "tls",
                            "closed the connection during the TLS handshake")

    def test_tampering_after_the_handshake_fails_and_stores_nothing(self):
        # The tunnel works, the response is under way (100000 bytes), then
        # the proxy cuts it or puts bytes of its own into it: a record, or
        # plain text. Neither is taken as the body's: truncated, nothing
        # in the cache.
        origin = self.start_tls_origin("server")
        for name, kw in (("cut", {"upstream_limit": 40000}),
                         ("a record", {"inject": (40000, bytes([23, 3, 3, 0, 16]) + b"x" * 16)}),
                         ("plain text", {"inject": (40000, b"HTTP/1.1 200 OK\r\n\r\nEVIL")})):
            with self.subTest(name):
                def behave(p, conn, rec):
                    conn.sendall(ESTABLISHED)
                    p.relay(conn, rec, origin.port, **kw)
                proxy = self.start_proxy(behave)
                self.restart_hubd(proxy)
                r, res, _ = self.fetch(self.url(origin.port))
                self.assertEqual(r.rc, 1, r)
                self.assertEqual(res["error"]["code"], "truncated", res)
                self.assertEqual(self.hubd.blob_files(), [])
                self.assert_nothing_readable(proxy)

    def test_dribbled_answer_is_bounded_and_others_are_served(self):
        # The answer's header comes a line every 100 ms, forever: the
        # connect timeout (3s here) ends it, and meanwhile hubd serves a
        # direct fetch (localhost is in no_proxy).
        def behave(p, conn, rec):
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not p.stopped.is_set():
                conn.sendall(b"X-Slow: y\r\n")
                time.sleep(0.1)
        proxy = self.start_proxy(behave)
        self.restart_hubd(proxy, connect_timeout="3s", no_proxy="localhost")
        self.make_file("d.bin", 50000)
        slow = self.hubctl_bg("fetch", "--json", "--header", "Authorization: Bearer " + TOKEN,
                              self.url(self.origin.port))
        self.addCleanup(lambda: slow.poll() is None and slow.kill())
        wait_for(lambda: proxy.heads, what="the CONNECT")
        r = self.hubctl("fetch", "http://localhost:%d/files/d.bin" % self.origin.port)
        self.assertEqual(r.rc, 0, r)
        self.assertIsNone(slow.poll(), "the dribbled fetch ended before the direct one")
        out, _ = slow.communicate(timeout=30 * SLOW)
        res = json.loads(out)
        self.assertEqual(res["error"]["code"], "proxy", res)
        self.assertIn("the proxy %s did not answer CONNECT" % proxy.url, res["error"]["message"])
        self.assertEqual(self.hubd.blob_files(), [r.out.strip()])
        self.assert_nothing_readable(proxy)

    def test_endless_tls_noise_after_200_is_bounded(self):
        # After its 200 the proxy sends TLS warning alerts as fast as it can
        # (mbedTLS reads past each one): the connect timeout (3s) ends the
        # handshake, hubd's memory stays flat (each record is consumed as it
        # comes), and a direct fetch is served meanwhile.
        alerts = bytes([21, 3, 3, 0, 2, 1, 112]) * 9362  # warning: unrecognized_name
        sent = []

        def behave(p, conn, rec):
            conn.sendall(ESTABLISHED)
            rec += conn.recv(65536)
            n = 0
            try:
                while not p.stopped.is_set() and n < (4 << 30):
                    conn.sendall(alerts)
                    n += len(alerts)
            except OSError:
                pass
            sent.append(n)
        proxy = self.start_proxy(behave)
        self.restart_hubd(proxy, connect_timeout="3s", no_proxy="localhost")
        self.make_file("d.bin", 50000)
        hwm0 = vm_kib(self.hubd.proc.pid, "VmHWM")
        noisy = self.hubctl_bg("fetch", "--json", self.url(self.origin.port))
        self.addCleanup(lambda: noisy.poll() is None and noisy.kill())
        wait_for(lambda: proxy.heads, what="the CONNECT")
        r = self.hubctl("fetch", "http://localhost:%d/files/d.bin" % self.origin.port)
        self.assertEqual(r.rc, 0, r)
        out, _ = noisy.communicate(timeout=30 * SLOW)
        res = json.loads(out)
        self.assertEqual(res["error"]["code"], "timeout", res)
        self.assertIn("through the proxy %s: TLS handshake with" % proxy.url,
                      res["error"]["message"])
        wait_for(lambda: sent, what="the proxy to see the end")
        self.assertGreater(sent[0], 16 << 20)  # it did flood
        if not SLOWED:
            grew = vm_kib(self.hubd.proc.pid, "VmHWM") - hwm0
            self.assertLess(grew, 16 * 1024, "hubd's peak RSS grew by %d KiB" % grew)


def vm_kib(pid, field):
    """A /proc/PID/status figure, in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for pid %d" % (field, pid))


if __name__ == "__main__":
    import unittest
    unittest.main()
