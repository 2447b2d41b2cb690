"""Mirrors: a fleet of hubd behind a site cache tier.

Real servers on loopback, started and stopped here: an HTTPS origin
(tests/origin.py, certificates from tests/tls/make-certs.sh), nginx running
etc/fleet/nginx-mirror.conf in front of it (nginx_mirror.py), hubd daemons
with a `mirror` rule, and plain origins standing in for mirrors that fail,
lie or record what reaches them. Every URL names 127.0.0.1.
"""

import json
import os
import re
import subprocess
import threading
import time
import unittest

from harness import TestCerts, HUBCTL, HubTestCase, Hubd, Origin, sha256_file, wait_for, write_config
from nginx_mirror import NginxMirror, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
CERTS = None


def setUpModule():
    global CERTS
    CERTS = TestCerts()


def tearDownModule():
    CERTS.remove()


class MirrorTestCase(HubTestCase):
    """The fixture's plain origin (self.origin) serves as a mirror that a
    test controls; the file's real home is an HTTPS origin on the same root."""

    def setUp(self):
        super().setUp()
        self.ca = CERTS.path("ca.crt")
        self.https = Origin(self.root, tls=(CERTS.path("server.crt"),
                                            CERTS.path("server.key")), name=".tls-port")
        self.addCleanup(self.https.stop)
        self.extra = []

    def start_hubd(self, name, mirrors, **keys):
        """A hubd of its own (socket, cache) with these mirror rules."""
        path = os.path.join(self.tmp, name + ".conf")
        write_config(path, **keys)
        with open(path, "a") as f:
            f.write("".join("mirror = %s\n" % m for m in mirrors))
        hub = Hubd(os.path.join(self.tmp, name), config=path,
                   extra_args=["--ca-file", self.ca])
        self.extra.append(hub)
        self.addCleanup(self.stop_extra, hub)
        return hub

    def use(self, hub):
        """The fixture's hubd (self.hubd) becomes hub: hubctl talks to it,
        and the end-of-test check (clean exit, no sanitizer report) covers
        it; the fixture's own daemon stops now, checked the same way."""
        if self.hubd not in self.extra:
            rc = self.hubd.stop()
            self.assertEqual(rc, 0, self.hubd.read_log())
        self.hubd = hub

    def stop_extra(self, hub):
        rc = hub.stop()
        log = hub.read_log()
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "handles still open"):
            self.assertNotIn(bad, log, log[-8000:])
        self.assertEqual(rc, 0, log[-8000:])

    def ctl(self, hub, *args, timeout=60):
        p = subprocess.run([HUBCTL, "--socket", hub.socket] + list(args), capture_output=True,
                           timeout=timeout)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def entries(self, hub):
        return [u for (u,) in hub.query("SELECT url FROM entries ORDER BY url")]


class FleetTest(MirrorTestCase):
    """nginx as the site mirror in front of the HTTPS origin, two hubd."""

    def setUp(self):
        super().setUp()
        self.nginx = NginxMirror(os.path.join(self.tmp, "nginx"), self.https.base, self.ca)
        self.addCleanup(self.nginx.stop)
        rule = "%s/ %s/" % (self.https.base, self.nginx.base)
        self.hubs = [self.start_hubd("hub%d" % i, [rule]) for i in (1, 2)]

    def fetch_all(self, urls, digest):
        """Runs each (hub, url) fetch at once; returns (rc, out, err) each."""
        results = [None] * len(urls)

        def one(i, hub, url):
            results[i] = self.ctl(hub, "fetch", "--sha256", digest, url)
        threads = [threading.Thread(target=one, args=(i, h, u)) for i, (h, u) in enumerate(urls)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        return results

    def test_fleet_fetches_once_from_the_origin(self):
        digest = self.make_file("model.bin", 3 * 1024 * 1024 + 5)
        url = self.https.url("/files/model.bin")
        results = self.fetch_all([(h, url) for h in self.hubs for _ in range(4)], digest)
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
            self.assertEqual(sha256_file(out.strip()), digest)
        # The fleet figure: 2 x 4 fetches, one GET at the origin.
        self.assertEqual(self.https.requests_for("/files/model.bin"), 1,
                         "\n".join(self.nginx.access()))
        misses = [ln for ln in self.nginx.access() if "cache=MISS" in ln]
        self.assertEqual(len(misses), 1, "\n".join(self.nginx.access()))
        for hub in self.hubs:
            # Entries under the original URL, never the mirror's.
            self.assertEqual(self.entries(hub), [url])
            self.assertIn("is fetched from the mirror %s" % self.nginx.base, hub.read_log())
        # A second round: each hubd's own cache, nothing reaches nginx.
        seen = len(self.nginx.access())
        for hub in self.hubs:
            for _ in range(4):
                rc, out, err = self.ctl(hub, "fetch", "--json", "--sha256", digest, url)
                self.assertEqual(rc, 0, err)
                self.assertEqual(json.loads(out)["source"], "hit")
        self.assertEqual(len(self.nginx.access()), seen)
        self.assertEqual(self.https.requests_for("/files/model.bin"), 1)

    def test_redirect_to_cdn_followed_inside_nginx(self):
        """The origin answers 301 with an absolute Location (as the Hub
        sends its CDN URL); nginx follows it with verified TLS and caches
        the file under the URL hubd asked for."""
        digest = self.make_file("lfs.bin", 1024 * 1024 + 3)
        url = self.https.url("/redirect/0/files/lfs.bin")
        for hub in self.hubs:
            rc, out, err = self.ctl(hub, "fetch", "--sha256", digest, url)
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.entries(hub), [url])
        self.assertEqual(self.https.requests_for("/redirect/0/files/lfs.bin"), 1)
        self.assertEqual(self.https.requests_for("/files/lfs.bin"), 1)
        log = self.nginx.access()
        self.assertEqual([("cache=MISS" in ln, "cache=HIT" in ln) for ln in log],
                         [(True, False), (False, True)], "\n".join(log))
        self.assertIn('upstream_status="301 : 200"', log[0])

    def test_credentials_pass_through_uncached(self):
        """With `credentials` in the rule the Authorization header reaches
        the upstream through nginx, and nginx neither stores nor serves
        such a response from its cache (one user's gated file is not
        another's)."""
        digest = self.make_file("gated.bin", 100000)
        url = self.https.url("/files/gated.bin")
        rule = "%s/ %s/ credentials" % (self.https.base, self.nginx.base)
        for name in ("cred1", "cred2"):
            hub = self.start_hubd(name, [rule])
            rc, out, err = self.ctl(hub, "fetch", "-H", "Authorization: Bearer x", "--sha256",
                                    digest, url)
            self.assertEqual(rc, 0, err)
        self.assertEqual(self.https.stats()["auth"]["/files/gated.bin"], ["Bearer x"] * 2)
        log = self.nginx.access()
        self.assertEqual(["cache=BYPASS" in ln for ln in log], [True, True], "\n".join(log))

    def test_mirror_down_falls_back_to_the_origin(self):
        digest = self.make_file("down.bin", 200000)
        self.nginx.stop()
        url = self.https.url("/files/down.bin")
        for hub in self.hubs:
            rc, out, err = self.ctl(hub, "fetch", "--sha256", digest, url)
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.entries(hub), [url])
            self.assertRegex(hub.read_log(), r"the mirror %s failed \(connect" %
                             re.escape(self.nginx.base))
        self.assertEqual(self.https.requests_for("/files/down.bin"), 2)


class MirrorRulesTest(MirrorTestCase):
    """Mirrors that fail, lie, record or throttle: plain origins on loopback."""

    def test_no_fallback_names_the_mirror(self):
        self.make_file("nf.bin", 1000)
        closed = "http://127.0.0.1:%d" % free_port()
        hub = self.start_hubd("nofb", ["%s/ %s/" % (self.https.base, closed)],
                              mirror_fallback="no")
        rc, out, err = self.ctl(hub, "fetch", self.https.url("/files/nf.bin"))
        self.assertEqual(rc, 1, err)
        self.assertIn("the mirror %s" % closed, err)
        self.assertEqual(self.https.requests_for("/files/nf.bin"), 0)
        self.assertEqual(hub.blob_files(), [])

    def test_404_and_5xx_fall_back(self):
        d404 = self.make_file("a.bin", 5000, seed=3)
        d503 = self.make_file("five.bin", 7000, seed=4)
        # Longest prefix wins: five.bin's rule gives a 503, the others a 404.
        hub = self.start_hubd("errs", [
            "%s/files/ %s/nothing/" % (self.https.base, self.origin.base),
            "%s/files/five.bin %s/status/503" % (self.https.base, self.origin.base),
        ])
        for name, digest in (("a.bin", d404), ("five.bin", d503)):
            rc, out, err = self.ctl(hub, "fetch", "--sha256", digest,
                                    self.https.url("/files/" + name))
            self.assertEqual(rc, 0, err)
            self.assertEqual(self.https.requests_for("/files/" + name), 1)
        self.assertEqual(self.origin.requests_for("/nothing/a.bin"), 1)
        self.assertEqual(self.origin.requests_for("/status/503"), 1)
        log = hub.read_log()
        self.assertIn("failed (http_404", log)
        self.assertIn("failed (http_503", log)

    def test_cut_body_resumes_at_the_origin(self):
        """A mirror that stops mid-body: the origin is asked for the rest
        (Range from the byte reached), and the fallback is not one of the
        `retries` (here 1: the origin's own first answer is cut too)."""
        digest = self.make_file("cut.bin", 3000000)
        hub = self.start_hubd("cut", ["%s/ %s/" % (self.https.base, self.origin.base)],
                              retries="1", retry_delay="10ms")
        rc, out, err = self.ctl(hub, "fetch", "--sha256", digest,
                                self.https.url("/files/cut.bin?cut=1000000"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.origin.requests_for("/files/cut.bin"), 1)
        st = self.https.stats()
        self.assertEqual([s for s in st["range_starts"].get("/files/cut.bin", []) if s], [1000000, 1000000], st)

    def test_credentials_only_with_the_rule_word(self):
        digest = self.make_file("gated.bin", 4000)
        url = self.https.url("/files/gated.bin")
        rule = "%s/ %s/" % (self.https.base, self.origin.base)
        plain = self.start_hubd("plain", [rule])
        rc, out, err = self.ctl(plain, "fetch", "-H", "Authorization: Bearer x", "--sha256",
                                digest, url)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.origin.stats()["auth"]["/files/gated.bin"], [""])
        cred = self.start_hubd("cred", [rule + " credentials"])
        rc, out, err = self.ctl(cred, "fetch", "-H", "Authorization: Bearer x", "--sha256",
                                digest, url)
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.origin.stats()["auth"]["/files/gated.bin"], ["", "Bearer x"])
        self.assertEqual(self.https.requests_for("/files/gated.bin"), 0)

    def test_status_shows_the_source(self):
        self.make_file("slow.bin", 1200000)
        hub = self.start_hubd("slow", ["%s/ %s/" % (self.https.base, self.origin.base)])
        self.use(hub)
        p = self.hubctl_bg("fetch", self.https.url("/files/slow.bin?bps=400000"))
        try:
            def running():
                r = self.hubctl("status", "--json")
                jobs = json.loads(r.out)
                return jobs and jobs[0]["state"] == "downloading" and jobs[0]
            wait_for(running, 10, "the download to run")
            job = running() or {}
            self.assertEqual(job.get("source"), "mirror")
            self.assertEqual(job.get("mirror"), self.origin.base)
            self.assertEqual(job.get("url"), self.https.url("/files/slow.bin?bps=400000"))
            r = self.hubctl("status")
            self.assertRegex(r.out, r"SOURCE +URL\n")
            self.assertIn("%s  %s" % (self.origin.base.ljust(24), self.https.base), r.out)
        finally:
            out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)

    def test_wrong_bytes_from_the_mirror_fail_and_nothing_is_cached(self):
        """The SHA-256 check guards what the tier serves: a mirror with
        other bytes under the name fails the fetch (hash_mismatch, naming
        the mirror) and leaves no entry or blob; the origin is not asked."""
        digest = self.make_file("w.bin", 50000, seed=1)
        liar_root = os.path.join(self.tmp, "liar")
        os.mkdir(liar_root)
        with open(os.path.join(self.root, "w.bin"), "rb") as f:
            data = bytearray(f.read())
        data[1000] ^= 1
        with open(os.path.join(liar_root, "w.bin"), "wb") as f:
            f.write(data)
        liar = Origin(liar_root)
        self.addCleanup(liar.stop)
        hub = self.start_hubd("liar", ["%s/ %s/" % (self.https.base, liar.base)])
        rc, out, err = self.ctl(hub, "fetch", "--sha256", digest, self.https.url("/files/w.bin"))
        self.assertNotEqual(rc, 0)
        self.assertIn("hash_mismatch", err)
        self.assertIn("from the mirror %s" % liar.base, err)
        self.assertEqual(self.entries(hub), [])
        self.assertEqual(hub.blob_files(), [])
        self.assertEqual(self.https.requests_for("/files/w.bin"), 0)


if __name__ == "__main__":
    unittest.main()
