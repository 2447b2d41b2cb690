"""The scrape endpoint for Prometheus (metrics_listen): GET /metrics in the
text format, checked by promtool and scraped by a real Prometheus on
loopback; the STATS counters under hubctl's names, per-user series after a
user fetched and held a file, no URL, token or file name on the page; only
GET/HEAD /metrics answered; bad settings refused at --check-config."""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from harness import free_port, HUBD, Hubd, stop_pid, wait_for, write_config
import test_holds
from test_holds import TOKEN_A, UID_A

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
USER_A = __import__("pwd").getpwuid(UID_A).pw_name


class MetricsTestCase(test_holds.HoldsBase):
    """A hubd with the metrics endpoint on a free port, and the holds
    fixture's two users (HoldsBase: talk, fetch, hold as another user)."""

    def restart(self, **keys):
        self.mport = free_port()
        keys.setdefault("metrics_listen", "127.0.0.1:%d" % self.mport)
        super().restart(**keys)
        wait_for(self._answers, what="the metrics endpoint to listen")

    def _answers(self):
        try:
            socket.create_connection(("127.0.0.1", self.mport), timeout=1).close()
            return True
        except OSError:
            return False

    def get(self, path="/metrics", method="GET"):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.mport, path), method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def used(self):
        """A private file fetched by user A with its token, held through a
        link into A's folder: (page, url, link)."""
        url, digest = self.gated("secret-weights.bin", TOKEN_A, size=5000)
        self.fetch(UID_A, url, TOKEN_A)
        last, link = self.hold(UID_A, digest, label="models/org/private-model@main")
        self.assertTrue(last.startswith("HELD"), last)
        status, headers, page = self.get()
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
        return page, url, link

    def samples(self, page):
        out = {}
        for line in page.splitlines():
            if line and not line.startswith("#"):
                key, _, v = line.rpartition(" ")
                out[key] = int(v)
        return out

    def test_page_names_users_and_hides_urls(self):
        page, url, link = self.used()
        s = self.samples(page)
        self.assertEqual(s["hubd_cache_size_bytes"], 5000)
        self.assertEqual(s['hubd_user_served_bytes_total{user="%s"}' % USER_A], 5000)
        self.assertEqual(s['hubd_user_holds{user="%s"}' % USER_A], 1)
        self.assertEqual(s['hubd_user_held_bytes{user="%s"}' % USER_A], 5000)
        self.assertEqual(s['hubd_user_downloads_active{user="%s"}' % USER_A], 0)
        # The same names as hubctl's rendering of the STATS line.
        prom = self.hubctl("stats", "--prometheus").out
        names = {l.split()[2] for l in prom.splitlines() if l.startswith("# TYPE ")}
        mine = {l.split()[2] for l in page.splitlines() if l.startswith("# TYPE ")}
        self.assertTrue(names <= mine, names - mine)
        for secret in (url, urllib.parse.quote(url), "secret-weights", "private-model", link,
                       TOKEN_A, "require_auth", "http://"):
            self.assertNotIn(secret, page)

    def test_uid_label(self):
        self.restart(metrics_user_label="uid")
        page, _, _ = self.used()
        s = self.samples(page)
        self.assertEqual(s['hubd_user_holds{uid="%d"}' % UID_A], 1)
        self.assertNotIn(USER_A, page)

    @unittest.skipUnless(PROMTOOL, "promtool is missing (Debian's prometheus package: "
                         "scripts/install-deps.sh installs it)")
    def test_promtool_accepts_the_page(self):
        page, _, _ = self.used()
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=page, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_only_get_and_head_of_metrics(self):
        self.assertEqual(self.get("/")[0], 404)
        self.assertEqual(self.get("/metrics/x")[0], 404)
        self.assertEqual(self.get("/http://127.0.0.1:9/f")[0], 404)  # no front here
        status, headers, _ = self.get(method="POST")
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, HEAD")
        self.assertEqual(self.get(method="DELETE")[0], 405)
        status, headers, body = self.get(method="HEAD")
        self.assertEqual((status, body), (200, ""))
        self.assertGreater(int(headers["Content-Length"]), 1000)
        # A Host that does not name the listener (DNS rebinding): refused.
        with socket.create_connection(("127.0.0.1", self.mport), timeout=30) as c:
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: evil.example\r\n\r\n")
            self.assertIn(b" 403 ", c.recv(4096).split(b"\r\n")[0])
        # A head past 16 KiB: refused, and the connection goes.
        with socket.create_connection(("127.0.0.1", self.mport), timeout=30) as c:
            c.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
            self.assertIn(b" 431 ", c.recv(4096).split(b"\r\n")[0])

    def test_a_slow_client_is_dropped_and_scrapes_share(self):
        self.restart(http_header_timeout="1s")
        with socket.create_connection(("127.0.0.1", self.mport), timeout=30) as c:
            c.sendall(b"GET /metrics HTTP/1.1\r\n")  # and nothing more
            t0 = time.monotonic()
            self.assertIn(b" 408 ", c.recv(4096).split(b"\r\n")[0])
            self.assertEqual(c.recv(4096), b"")
            self.assertLess(time.monotonic() - t0, 20)
        results = []
        threads = [threading.Thread(target=lambda: results.append(self.get()[0]))
                   for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(results, [200] * 12)

    def test_bad_settings_refused_at_check(self):
        for key, value, words in (("metrics_listen", "0.0.0.0:9464", "0.0.0.0:9464"),
                                  ("metrics_listen", "127.0.0.1", "127.0.0.1"),
                                  ("metrics_user_label", "login", "give name or uid")):
            conf = write_config(os.path.join(self.tmp, "bad.conf"), **{key: value})
            r = subprocess.run([HUBD, "--config", conf, "--check-config"], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r)
            self.assertIn(key, r.stderr)
            self.assertIn(words, r.stderr)

    @unittest.skipUnless(PROMETHEUS, "prometheus is missing (Debian's prometheus package: "
                         "scripts/install-deps.sh installs it)")
    def test_prometheus_scrapes_it(self):
        self.used()
        pdir = os.path.join(self.tmp, "prometheus")
        os.mkdir(pdir)
        conf = os.path.join(pdir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: hubd\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % self.mport)
        pport = free_port()
        log = open(os.path.join(pdir, "log"), "w")
        proc = subprocess.Popen([PROMETHEUS, "--config.file=" + conf,
                                 "--storage.tsdb.path=" + os.path.join(pdir, "data"),
                                 "--web.listen-address=127.0.0.1:%d" % pport],
                                stdout=log, stderr=subprocess.STDOUT, cwd=pdir)
        self.addCleanup(log.close)
        self.addCleanup(stop_pid, proc)

        def query(q):
            u = "http://127.0.0.1:%d/api/v1/query?query=%s" % (pport, urllib.parse.quote(q))
            try:
                with urllib.request.urlopen(u, timeout=10) as r:
                    return json.load(r)["data"]["result"]
            except (OSError, ValueError, KeyError):
                return []

        def have(q):
            return bool(query(q))
        wait_for(lambda: have("hubd_cache_size_bytes"), timeout=90,
                 what="Prometheus to scrape hubd_cache_size_bytes")
        res = query("hubd_cache_size_bytes")
        self.assertEqual(res[0]["metric"]["__name__"], "hubd_cache_size_bytes")
        self.assertEqual(res[0]["value"][1], "5000")
        wait_for(lambda: have('hubd_user_holds{user="%s"}' % USER_A), timeout=60,
                 what="a per-user series")
        res = query('hubd_user_served_bytes_total{user="%s"}' % USER_A)
        self.assertEqual(res[0]["value"][1], "5000")
        up = query('up{job="hubd"}')
        self.assertEqual(up[0]["value"][1], "1")


if __name__ == "__main__":
    unittest.main()
