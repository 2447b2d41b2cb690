"""Forward proxies: hubd through Squid (the site tier of
etc/fleet/squid.conf, tests/integration/squid.py) and through
tests/authproxy.py (Basic auth, refused tunnels, a record of every header a
proxy was sent).

What the spec promises and these tests hold hubd to:
- `proxy` (config) or curl's variables (`http_proxy` lower case only,
  `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY`, `no_proxy`/`NO_PROXY`)
  when the config does not set it; `proxy =` empty means none, env or not.
- http:// goes to the proxy in absolute form, https:// through CONNECT with
  TLS to the origin inside, verified against the origin's name.
- The proxy's password goes only to the proxy (Proxy-Authorization), never
  to an origin, never into hubd's log, --check-config or hubctl's output.
- 407: ERR code=proxy_auth; another 4xx to CONNECT: proxy_refused, tried
  once; a proxy that cannot be reached or answers 5xx: ERR code=proxy with
  the address and the status, retried.
- A host that is an IP literal in deny_networks (any spelling, metadata
  addresses by default) is refused forbidden before the proxy is asked,
  on every redirect hop.
- Each redirect hop decides proxy or direct anew; an origin's credentials
  reach the first origin only, and through CONNECT the proxy never sees them.

Squid logs a request when it ends (a CONNECT when its tunnel closes), so
the tests read Squid's access log after hubd has exited (finish_hubd).
Addresses are loopback literals only (127.0.0.1, ::1)."""

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse

from harness import (TestCerts, HUBCTL, HUBD, Hubd, HubTestCase, Origin, sha256_file, stop_pid,
                     wait_for, write_config)
from squid import Squid, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
AUTHPROXY_PY = os.path.join(os.path.dirname(HERE), "authproxy.py")
CERTS = None
USER, PASSWORD = "alice", "s3cret"
BASIC = "Basic " + base64.b64encode(b"alice:s3cret").decode()  # YWxpY2U6czNjcmV0
TOKEN = "origin-token-7f3a9c"  # an origin credential (hubctl -H)
TOKEN_H = __import__("hashlib").sha256(TOKEN.encode()).hexdigest()[:16]  # origin.py require_auth


def setUpModule():
    global CERTS
    CERTS = TestCerts()


def tearDownModule():
    CERTS.remove()


def quote(url):
    """url as one query value (origin.py's /redirect-to?url=)."""
    return urllib.parse.quote(url, safe="")


def ca_file():
    return CERTS.path("ca.crt")


class AuthProxy:
    """tests/authproxy.py on 127.0.0.1; requests() is what it was sent."""

    def __init__(self, workdir, user=None, refuse_connect=None):
        os.makedirs(workdir, exist_ok=True)
        self.port_file = os.path.join(workdir, "authproxy.port")
        self.log = os.path.join(workdir, "authproxy.json")
        args = [sys.executable, AUTHPROXY_PY, "--port-file", self.port_file, "--log", self.log]
        if user:
            args += ["--user", user]
        if refuse_connect:
            args += ["--refuse-connect", str(refuse_connect)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(self.port_file) or self.proc.poll() is not None,
                 what="authproxy to listen")
        if self.proc.poll() is not None:
            raise RuntimeError("authproxy exited with %d" % self.proc.returncode)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        self.address = "127.0.0.1:%d" % self.port

    def url(self, userinfo=""):
        return "http://%s%s" % (userinfo + "@" if userinfo else "", self.address)

    def requests(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        stop_pid(self.proc)


def header(entry, name):
    """The values of header name in one authproxy record."""
    return [v for n, v in entry["headers"] if n.lower() == name.lower()]


class ProxyTestCase(HubTestCase):
    """The fixture's plain origin (127.0.0.1), a TLS origin beside it, and a
    hubd restarted per test with the proxy settings under test."""

    def setUp(self):
        super().setUp()
        self.tls_origin = Origin(self.root, tls=(CERTS.path("server.crt"),
                                                 CERTS.path("server.key")), name=".tls-port")
        self.addCleanup(self.tls_origin.stop)

    def restart_hubd(self, env=None, **config):
        """A new hubd (fresh cache) with config keys (ca_file always: the
        TLS origin's CA) and variables added to its environment."""
        self.hubd.stop()
        config.setdefault("ca_file", ca_file())
        n = len(os.listdir(self.tmp))
        conf = write_config(os.path.join(self.tmp, "proxy-%d.conf" % n), **config)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-%d" % n), config=conf, env=env)
        return conf

    def finish_hubd(self):
        """Stops hubd (exit 0 expected): its connections close, and Squid
        logs what they carried. The cleanup's stop is then a no-op."""
        self.assertEqual(self.hubd.stop(), 0, self.hubd.read_log()[-8000:])

    def start_squid(self, **kw):
        squid = Squid(log_headers=True, **kw)
        self.addCleanup(squid.close)
        return squid

    def start_authproxy(self, **kw):
        p = AuthProxy(os.path.join(self.tmp, "authproxy-%d" % len(os.listdir(self.tmp))), **kw)
        self.addCleanup(p.stop)
        return p

    def https(self, path, host="127.0.0.1"):
        return "https://%s:%d%s" % (host, self.tls_origin.port, path)

    def fetch_json(self, url, *args):
        r = self.hubctl("fetch", "--json", *args, url)
        try:
            return r, json.loads(r.out)
        except ValueError:
            self.fail("hubctl printed no JSON: %r" % r)

    def assert_fetched(self, url, digest, *args, sha256=False):
        """Fetches url (not from the cache: a hit would prove nothing about
        the path taken) and checks the bytes. sha256: pass --sha256 too,
        which only a first fetch of those bytes may (hubd answers a known
        digest from its cache, whatever the URL)."""
        opts = ("--sha256", digest) if sha256 else ()
        r = self.hubctl("fetch", "--json", *opts, *args, url)
        self.assertEqual(r.rc, 0, r)
        res = json.loads(r.out)
        self.assertNotEqual(res["source"], "hit", res)
        self.assertEqual(res["sha256"], digest, res)
        self.assertEqual(sha256_file(res["path"]), digest)

    def squid_requests(self, squid):
        """(method, url) of every request Squid logged, once what came
        before is surely logged: a request of the test's own (to the
        origin's uncounted /stats) goes through Squid and is waited for, so
        a tunnel that closed before it (hubd's, at its exit) is in the log
        too, and an empty list means that none went through Squid. The
        test's requests and Squid's start-up port probe (method '-') are
        left out."""
        stats = self.origin.url("/stats")

        def marks():
            return sum(1 for _, u, _ in squid.access_lines() if u == stats)

        before = marks()
        with socket.create_connection(("127.0.0.1", squid.port), timeout=10) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" %
                       (stats, self.origin.port)).encode())
            while s.recv(65536):
                pass
        wait_for(lambda: marks() > before, what="squid to log the test's own request")
        return [(m, u) for m, u, _ in squid.access_lines() if m != "-" and u != stats]


class SquidTest(ProxyTestCase):
    """Squid as the proxy: configured from etc/fleet/squid.conf."""

    def test_https_through_squid_connect(self):
        squid = self.start_squid()
        self.restart_hubd(proxy=squid.url)
        digest = self.make_file("a.bin", 3 * 1024 * 1024 + 5)
        self.assert_fetched(self.https("/files/a.bin"), digest, sha256=True)
        self.assertEqual(self.tls_origin.requests_for("/files/a.bin"), 1)
        self.finish_hubd()
        line = squid.wait_logged("CONNECT", "127.0.0.1:%d" % self.tls_origin.port)
        self.assertIn("TCP_TUNNEL/200", line)
        # Squid saw a tunnel, nothing of what went through it.
        self.assertNotIn("/files/a.bin", squid.read_access_log())

    def test_https_by_name_through_squid_verifies_the_name(self):
        # CONNECT localhost:port, then TLS to the origin checked against
        # "localhost" (the certificate's dNSName), not against the proxy.
        squid = self.start_squid()
        self.restart_hubd(proxy=squid.url)
        digest = self.make_file("n.bin", 100000)
        self.assert_fetched(self.https("/files/n.bin", host="localhost"), digest)
        self.finish_hubd()
        squid.wait_logged("CONNECT", "localhost:%d" % self.tls_origin.port)

    def test_http_absolute_form_through_squid(self):
        squid = self.start_squid()
        self.restart_hubd(proxy=squid.url)
        digest = self.make_file("b.bin", 2 * 1024 * 1024)
        url = self.origin.url("/files/b.bin")
        self.assert_fetched(url, digest)
        self.assertEqual(self.origin.requests_for("/files/b.bin"), 1)
        line = squid.wait_logged("GET", url)
        self.assertIn("/200 ", line)

    def test_no_proxy_bypasses_squid(self):
        squid = self.start_squid()
        digest = self.make_file("c.bin", 100000)
        for no_proxy in ("127.0.0.1", "127.0.0.0/8", "*", "localhost,127.0.0.1"):
            with self.subTest(no_proxy=no_proxy):
                self.restart_hubd(proxy=squid.url, no_proxy=no_proxy)
                self.assert_fetched(self.origin.url("/files/c.bin"), digest)
                self.assert_fetched(self.https("/files/c.bin"), digest)
                self.finish_hubd()
                self.assertEqual(self.squid_requests(squid), [])

    def test_no_proxy_host_and_port(self):
        # "host:port" bypasses that port only: the plain origin direct, the
        # TLS origin on the same address through Squid.
        squid = self.start_squid()
        self.restart_hubd(proxy=squid.url, no_proxy="127.0.0.1:%d" % self.origin.port)
        digest = self.make_file("p.bin", 100000)
        self.assert_fetched(self.origin.url("/files/p.bin"), digest)
        self.assert_fetched(self.https("/files/p.bin"), digest)
        self.finish_hubd()
        self.assertEqual(self.squid_requests(squid),
                         [("CONNECT", "127.0.0.1:%d" % self.tls_origin.port)])

    def test_env_https_proxy_used(self):
        # No proxy key: curl's variables. https_proxy and HTTPS_PROXY both
        # count for https:// URLs.
        squid = self.start_squid()
        digest = self.make_file("e.bin", 100000)
        for var in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            with self.subTest(var=var):
                before = len(self.squid_requests(squid))
                self.restart_hubd(env={var: squid.url})
                self.assert_fetched(self.https("/files/e.bin"), digest)
                self.finish_hubd()
                self.assertEqual(self.squid_requests(squid)[before:],
                                 [("CONNECT", "127.0.0.1:%d" % self.tls_origin.port)])

    def test_env_http_proxy_lower_case_only(self):
        # curl's rule: http_proxy is read in lower case only (HTTP_PROXY can
        # be set by a CGI request's "Proxy:" header, httpoxy).
        squid = self.start_squid()
        digest = self.make_file("f.bin", 100000)
        url = self.origin.url("/files/f.bin")
        self.restart_hubd(env={"HTTP_PROXY": squid.url})
        self.assert_fetched(url, digest)
        self.finish_hubd()
        self.assertEqual(self.squid_requests(squid), [])
        self.restart_hubd(env={"http_proxy": squid.url})
        self.assert_fetched(url, digest)
        self.finish_hubd()
        self.assertEqual(self.squid_requests(squid), [("GET", url)])

    def test_env_no_proxy(self):
        squid = self.start_squid()
        digest = self.make_file("g.bin", 100000)
        for var in ("no_proxy", "NO_PROXY"):
            with self.subTest(var=var):
                self.restart_hubd(env={"https_proxy": squid.url, "http_proxy": squid.url,
                                       var: "127.0.0.1"})
                self.assert_fetched(self.https("/files/g.bin"), digest)
                self.assert_fetched(self.origin.url("/files/g.bin"), digest)
                self.finish_hubd()
                self.assertEqual(self.squid_requests(squid), [])

    def test_empty_proxy_in_config_ignores_env(self):
        squid = self.start_squid()
        digest = self.make_file("h.bin", 100000)
        self.restart_hubd(env={"https_proxy": squid.url, "http_proxy": squid.url,
                               "all_proxy": squid.url}, proxy="")
        self.assert_fetched(self.https("/files/h.bin"), digest)
        self.assert_fetched(self.origin.url("/files/h.bin"), digest)
        self.finish_hubd()
        self.assertEqual(self.squid_requests(squid), [])

    def test_origin_credentials_never_reach_squid(self):
        # Squid logs every request's headers here (log_mime_hdrs on): the
        # CONNECT carries none of the origin's, the token goes inside TLS.
        squid = self.start_squid()
        self.restart_hubd(proxy=squid.url)
        digest = self.make_file("s.bin", 200000)
        url = self.https("/files/s.bin?require_auth=" + TOKEN_H)
        self.assert_fetched(url, digest, "--header", "Authorization: Bearer " + TOKEN)
        self.assertEqual(self.tls_origin.stats()["auth"]["/files/s.bin"], ["Bearer " + TOKEN])
        self.finish_hubd()
        line = squid.wait_logged("CONNECT", "127.0.0.1:%d" % self.tls_origin.port)
        self.assertIn("Host: 127.0.0.1:%d" % self.tls_origin.port, line)  # headers are logged
        log = squid.read_access_log()
        self.assertNotIn(TOKEN, log)
        self.assertNotIn("Authorization", log)

    def test_origin_credentials_over_http_through_squid(self):
        # Plain http through a proxy: the request, its Authorization
        # included, is the proxy's to read (inherent in http; the spec
        # promises nothing more). What holds: the first origin gets the
        # token, the fetch works.
        squid = self.start_squid()
        self.restart_hubd(proxy=squid.url)
        digest = self.make_file("t.bin", 200000)
        url = self.origin.url("/files/t.bin?require_auth=" + TOKEN_H)
        self.assert_fetched(url, digest, "--header", "Authorization: Bearer " + TOKEN)
        self.assertEqual(self.origin.stats()["auth"]["/files/t.bin"], ["Bearer " + TOKEN])

    def test_redirect_decides_proxy_per_hop(self):
        # A (127.0.0.1, through Squid) redirects to B ([::1], in no_proxy):
        # B is fetched direct. Then the other way: B redirects to A, which
        # goes through Squid. The origin credential reaches A only.
        squid = self.start_squid()
        root6 = os.path.join(self.tmp, "root6")
        os.mkdir(root6)
        b = Origin(root6, bind="::1")
        self.addCleanup(b.stop)
        self.restart_hubd(proxy=squid.url, no_proxy="::1")
        d1 = self.make_file("r1.bin", 150000, seed=1)
        shutil.copy(os.path.join(self.root, "r1.bin"), os.path.join(root6, "r1.bin"))
        to_b = self.origin.url("/redirect-to?url=" + quote(b.url("/files/r1.bin")))
        self.assert_fetched(to_b, d1, "--header", "Authorization: Bearer " + TOKEN)
        self.assertEqual(b.requests_for("/files/r1.bin"), 1)
        self.assertEqual(b.stats()["auth"]["/files/r1.bin"], [""])  # not the first origin
        d2 = self.make_file("r2.bin", 150000, seed=2)
        to_a = b.url("/redirect-to?url=" + quote(self.origin.url("/files/r2.bin")))
        self.assert_fetched(to_a, d2)
        self.assertEqual(self.origin.requests_for("/files/r2.bin"), 1)
        self.finish_hubd()
        # (Squid logs URLs without their query: strip_query_terms.)
        self.assertEqual(self.squid_requests(squid),
                         [("GET", to_b.split("?")[0] + "?"), ("GET", self.origin.url("/files/r2.bin"))])

    def test_squid_collapses_two_daemons_into_one_origin_request(self):
        """Two servers' hubd (separate caches), four clients each, one
        http:// URL through the site's Squid: one origin request.

        Each hubd sends one request (single flight per machine); Squid's
        collapsed_forwarding makes the second wait for the first's response
        (or, once that is in, read it as it arrives). Two conditions make
        this exact, both true of real model files and checked with curl on
        Squid 5.7: the URL has no query string (etc/fleet/squid.conf's
        `refresh_pattern (/cgi-bin/|\\?) 0 0% 0` makes every later request
        revalidate, an If-Modified-Since that the origin counts), and the
        file's Last-Modified is old (Squid's heuristic freshness is 20% of
        its age; a file written a second ago is stale at once, and each
        collapsed request would revalidate it). With curl, 8 concurrent
        clients made one origin request this way, and with a query string
        (`?bps=...`) the origin got 6 requests for 8 clients (revalidations)."""
        squid = self.start_squid()
        conf = self.restart_hubd(proxy=squid.url)
        other = Hubd(os.path.join(self.tmp, "hub-other"), config=conf)
        self.addCleanup(lambda: self.assertEqual(other.stop(), 0, other.read_log()[-8000:]))
        digest = self.make_file("big.bin", 32 * 1024 * 1024)
        os.utime(os.path.join(self.root, "big.bin"), (1700000000, 1700000000))  # Nov 2023
        url = self.origin.url("/files/big.bin")
        procs = []
        for hub in (self.hubd, other):
            for _ in range(4):
                procs.append(subprocess.Popen([HUBCTL, "--socket", hub.socket, "fetch", "--json", url],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
            results.append(json.loads(out))
        self.assertTrue(all(r["ok"] and r["sha256"] == digest for r in results), results)
        self.assertEqual(self.origin.requests_for("/files/big.bin"), 1)
        self.assertEqual(self.squid_requests(squid), [("GET", url)] * 2)
        # One went to the origin (HIER_DIRECT); the other was collapsed onto
        # it (TCP_MISS with HIER_NONE) or, if it came after, a TCP_MEM_HIT.
        lines = [line for m, u, line in squid.access_lines() if (m, u) == ("GET", url)]
        self.assertEqual(sum("HIER_DIRECT/" in line for line in lines), 1, lines)


class AuthProxyTest(ProxyTestCase):
    """tests/authproxy.py: Basic auth, refused tunnels, what a proxy sees."""

    def test_basic_auth_sent_to_the_proxy_only(self):
        proxy = self.start_authproxy(user="%s:%s" % (USER, PASSWORD))
        conf = self.restart_hubd(proxy=proxy.url("%s:%s" % (USER, PASSWORD)))
        digest = self.make_file("a.bin", 2 * 1024 * 1024)
        self.assert_fetched(self.https("/files/a.bin?require_auth=" + TOKEN_H), digest,
                            "--header", "Authorization: Bearer " + TOKEN)
        # The http one at 1 MB/s: hubctl status runs while it goes on.
        slow = self.origin.url("/files/a.bin?bps=1000000")
        p = self.hubctl_bg("fetch", slow)
        status = []

        def running():
            status.append(self.hubctl("status"))
            return "/files/a.bin" in status[-1].out

        wait_for(running, what="the download in hubctl status")
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(sha256_file(out.decode().strip()), digest)
        status = status[-1]
        reqs = proxy.requests()
        self.assertEqual([(e["method"], e["target"], e["status"]) for e in reqs],
                         [("CONNECT", "127.0.0.1:%d" % self.tls_origin.port, 200),
                          ("GET", slow, 200)])
        for e in reqs:
            self.assertEqual(header(e, "Proxy-Authorization"), [BASIC], e)
        # The CONNECT carried nothing of the origin's credential.
        self.assertEqual(header(reqs[0], "Authorization"), [], reqs[0])
        self.assertNotIn(TOKEN, json.dumps(reqs[0]))
        # Neither origin got the proxy's credential; the TLS one got its own.
        for origin, path in ((self.tls_origin, "/files/a.bin"), (self.origin, "/files/a.bin")):
            self.assertEqual(set(origin.stats()["proxy_auth"][path]), {""})
        self.assertEqual(self.tls_origin.stats()["auth"]["/files/a.bin"], ["Bearer " + TOKEN])
        # The password is nowhere hubd writes or answers.
        check = subprocess.run([HUBD, "--check-config", "--config", conf], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout)
        shown = check.stdout.decode()
        self.assertIn(proxy.address, shown)  # the effective proxy is shown...
        self.finish_hubd()
        log = self.hubd.read_log()
        self.assertIn(proxy.address, log)  # ...and logged at start-up...
        for text in (shown, log, status.out + status.err):
            self.assertNotIn(PASSWORD, text)  # ...without the password
            self.assertNotIn(BASIC.split()[1], text)

    def test_env_proxy_password_not_shown(self):
        proxy = self.start_authproxy(user="%s:%s" % (USER, PASSWORD))
        env = dict(os.environ, https_proxy=proxy.url("%s:%s" % (USER, PASSWORD)))
        conf = write_config(os.path.join(self.tmp, "env.conf"))
        check = subprocess.run([HUBD, "--check-config", "--config", conf], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=env, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout)
        self.assertIn(proxy.address, check.stdout.decode())
        self.assertNotIn(PASSWORD, check.stdout.decode())
        self.restart_hubd(env={"https_proxy": proxy.url("%s:%s" % (USER, PASSWORD))})
        digest = self.make_file("e.bin", 100000)
        self.assert_fetched(self.https("/files/e.bin"), digest)
        self.assertEqual(header(proxy.requests()[0], "Proxy-Authorization"), [BASIC])
        self.finish_hubd()
        self.assertNotIn(PASSWORD, self.hubd.read_log())

    def test_wrong_password_is_proxy_auth(self):
        proxy = self.start_authproxy(user="%s:%s" % (USER, PASSWORD))
        self.restart_hubd(proxy=proxy.url("%s:%s" % (USER, "wrong-pw")))
        self.make_file("w.bin", 100000)
        for url in (self.https("/files/w.bin"), self.origin.url("/files/w.bin")):
            with self.subTest(url=url):
                r, res = self.fetch_json(url)
                self.assertEqual(r.rc, 1, r)
                self.assertFalse(res["ok"])
                self.assertEqual(res["error"]["code"], "proxy_auth", res)
                self.assertNotIn("wrong-pw", r.out + r.err)
                r = self.hubctl("fetch", url)  # the text form names the code
                self.assertEqual(r.rc, 1, r)
                self.assertIn("proxy_auth", r.err)
        self.assertEqual(self.tls_origin.requests_for("/files/w.bin"), 0)
        self.assertEqual(self.origin.requests_for("/files/w.bin"), 0)
        self.assertEqual(self.hubd.blob_files(), [])
        self.finish_hubd()
        self.assertNotIn("wrong-pw", self.hubd.read_log())

    def test_no_credentials_for_a_proxy_that_wants_them(self):
        proxy = self.start_authproxy(user="%s:%s" % (USER, PASSWORD))
        self.restart_hubd(proxy=proxy.url())
        self.make_file("n.bin", 1000)
        r, res = self.fetch_json(self.https("/files/n.bin"))
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(res["error"]["code"], "proxy_auth", res)

    def test_unreachable_proxy(self):
        port = free_port()  # nothing listens there
        self.restart_hubd(proxy="http://127.0.0.1:%d" % port)
        self.make_file("u.bin", 1000)
        for url in (self.https("/files/u.bin"), self.origin.url("/files/u.bin")):
            with self.subTest(url=url):
                r, res = self.fetch_json(url)
                self.assertEqual(r.rc, 1, r)
                self.assertEqual(res["error"]["code"], "proxy", res)
                self.assertIn("127.0.0.1:%d" % port, res["error"]["message"])
        self.assertEqual(self.origin.requests_for("/files/u.bin"), 0)

    def test_connect_refused_by_the_proxy(self):
        # A 4xx to CONNECT is the proxy's rules saying no: proxy_refused,
        # tried once (a 403 was tried six times). A 5xx is its
        # trouble: proxy, retried. retries = 5: six attempts at most.
        self.make_file("x.bin", 1000)
        for status, code, connects in ((403, "proxy_refused", 1), (400, "proxy_refused", 1),
                                       (502, "proxy", 6)):
            with self.subTest(status=status):
                proxy = self.start_authproxy(refuse_connect=status)
                self.restart_hubd(proxy=proxy.url(), retries=5, retry_delay="20ms",
                                  retry_max_delay="100ms")
                r, res = self.fetch_json(self.https("/files/x.bin"))
                self.assertEqual(r.rc, 1, r)
                self.assertEqual(res["error"]["code"], code, res)
                self.assertIn(str(status), r.out)
                self.assertIn(proxy.address, r.out)
                self.assertEqual([e["method"] for e in proxy.requests()], ["CONNECT"] * connects)
        self.assertEqual(self.tls_origin.requests_for("/files/x.bin"), 0)


# The list: what hubd handed a proxy before it checked literals.
METADATA_URLS = (
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/x",
    "http://[::ffff:169.254.169.254]/x",
    "http://2852039166/x",  # 169.254.169.254
    "http://100.100.100.200/x",  # Alibaba's metadata service
    "https://169.254.169.254/latest/meta-data/",  # was CONNECT 169.254.169.254:443, six times
)


class ProxyNetworkPolicyTest(ProxyTestCase):
    """Through a proxy hubd resolves nothing, but a host that is an IP
    literal needs no DNS: its address is checked against deny_networks and
    allow_networks (the default denies link-local and metadata) before the
    proxy is asked, on every redirect hop. authproxy records
    every request as it arrives (and would refuse these destinations
    itself: nothing leaves loopback). Retries are on, so a refusal that
    were retried would show."""

    def restart_with_proxy(self, proxy, **config):
        self.restart_hubd(proxy=proxy.url(), retries=5, retry_delay="1s", **config)

    def assert_forbidden(self, url, where):
        t0 = time.monotonic()
        r, res = self.fetch_json(url)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(res["error"]["code"], "forbidden", res)
        self.assertIn("deny_networks", res["error"]["message"])
        self.assertIn(where, res["error"]["message"])
        self.assertLess(elapsed, 0.9, "retried? %.2fs" % elapsed)  # retry_delay 1s

    def test_metadata_literals_never_reach_the_proxy(self):
        proxy = self.start_authproxy()
        self.restart_with_proxy(proxy)
        for url in METADATA_URLS:
            with self.subTest(url=url):
                where = urllib.parse.urlsplit(url).hostname
                self.assert_forbidden(url, "169.254.169.254" if where == "2852039166" else where)
        seen = [(e["method"], e["target"]) for e in proxy.requests()]
        self.assertEqual(seen, [],
                         "%d requests for the metadata list reached the proxy" % len(seen))

    def test_allow_networks_admits_a_literal_through_the_proxy(self):
        # The same check as a direct connection's: allow_networks is its
        # exception. authproxy then refuses the destination itself (403).
        proxy = self.start_authproxy()
        self.restart_with_proxy(proxy, allow_networks="169.254.169.254/32")
        r, res = self.fetch_json("http://2852039166/x")
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(res["error"]["code"], "http_403", res)
        self.assertEqual([e["target"] for e in proxy.requests()], ["http://169.254.169.254/x"])

    def test_an_admins_deny_networks_holds_through_the_proxy(self):
        # Not only the defaults: an admin's deny_networks (here 127.0.0.2,
        # while the proxy itself stays reachable on 127.0.0.1) holds for a
        # literal in any spelling, http and https alike.
        proxy = self.start_authproxy()
        self.restart_with_proxy(proxy, deny_networks="127.0.0.2/32")
        self.assert_forbidden("http://2130706434:%d/files/l.bin" % self.origin.port, "127.0.0.2")
        self.assert_forbidden(self.https("/files/l.bin", host="127.0.0.2"), "127.0.0.2")
        self.assertEqual(proxy.requests(), [])

    def test_redirect_to_metadata_through_the_proxy_is_refused(self):
        # The first hop (an allowed origin) goes through the proxy; the
        # redirect's target, a metadata literal, never does.
        proxy = self.start_authproxy()
        self.restart_with_proxy(proxy)
        for target in ("http://169.254.169.254/latest/meta-data/", "http://2852039166/x",
                       "http://[::ffff:169.254.169.254]/x"):
            with self.subTest(target=target):
                before = len(proxy.requests())
                self.assert_forbidden(self.origin.url("/redirect-to?url=" + quote(target)),
                                      "169.254.169.254")
                hops = [e["target"] for e in proxy.requests()[before:]]
                self.assertEqual(len(hops), 1, hops)
                self.assertIn("/redirect-to?", hops[0])


if __name__ == "__main__":
    import unittest
    unittest.main()
