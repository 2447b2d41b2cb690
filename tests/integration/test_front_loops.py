"""The HTTP front never fetches from itself.

A target such as /http://127.0.0.1:8399/http://127.0.0.1:8399/.../http://origin/f
made hubd connect to its own front: each level a job holding a download
slot while the level inside it waited in the queue, so that 8 such requests
filled max_downloads and another user's fetch waited 240 s. Now a target (or
a redirect hop) that names one of the front's listeners, in any spelling, is
refused `forbidden` before anything connects, and a connection whose peer
socket is hubd's own is refused by the front itself (the unit tests
test_peeruid and test_netpolicy cover that check and the spellings).
"""

import http.client
import json
import os
import subprocess
import time
import unittest
from urllib.parse import quote

from harness import SLOW, free_port, HubTestCase, Hubd, wait_for, write_config


class FrontLoopCase(HubTestCase):
    def setUp(self):
        super().setUp()
        self.hubd.stop()
        self.port = free_port()
        conf = write_config(os.path.join(self.tmp, "front.conf"),
                            http_listen="127.0.0.1:%d" % self.port,
                            socket_mode="0666")  # the test's other users may use the front
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)
        wait_for(self._listens, what="the HTTP front to listen")

    def _listens(self):
        try:
            self.get("/", timeout=1)
            return True
        except OSError:
            return False

    def get(self, target, timeout=30):
        """GET target from the front: (status, lower-cased headers, body, seconds)."""
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", target)
            r = c.getresponse()
            body = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, body, \
                time.monotonic() - t0
        finally:
            c.close()

    def nested(self, host, depth, url):
        """The front's target for url wrapped depth times in the front's own address."""
        return "/" + ("http://%s:%d/" % (host, self.port)) * depth + url

    def jobs(self):
        return json.loads(self.hubctl("status", "--json").out)

    def assert_refused_fast(self, target):
        status, h, body, secs = self.get(target)
        self.assertEqual((status, h.get("x-hubd-error")), (403, "forbidden"), body)
        self.assertIn(b"hubd never fetches from itself", body)
        self.assertLess(secs, 2.0 * SLOW)


class NestedTargetTest(FrontLoopCase):
    def test_nested_targets_are_refused_at_once(self):
        self.make_file("f.bin", 1000)
        url = self.origin.url("/files/f.bin")
        for host in ("127.0.0.1", "localhost", "127.1", "[::ffff:127.0.0.1]", "2130706433",
                     "0.0.0.0", "127.0.0.2"):
            for depth in (1, 2, 10):
                with self.subTest(host=host, depth=depth):
                    self.assert_refused_fast(self.nested(host, depth, url))
        # Nothing reached the origin, nothing runs, and hubd never had to
        # refuse a connection of its own: none was made.
        self.assertEqual(self.origin.stats()["total_requests"], 0)
        self.assertEqual(self.jobs(), [])
        self.assertNotIn("connection from hubd itself", self.hubd.read_log())
        # The front still serves the plain URL.
        status, h, body, _ = self.get("/" + url)
        self.assertEqual(status, 200, body)

    def test_fetch_over_the_socket_is_refused(self):
        self.make_file("f.bin", 1000)
        target = "http://127.0.0.1:%d/%s" % (self.port, self.origin.url("/files/f.bin"))
        r = self.hubctl("fetch", "--json", target)
        self.assertEqual(r.rc, 1, r)
        err = json.loads(r.out)["error"]
        self.assertEqual(err["code"], "forbidden", err)
        self.assertIn("never fetches from itself", err["message"])
        self.assertEqual(self.origin.stats()["total_requests"], 0)

    def test_a_redirect_to_the_front_is_refused(self):
        self.make_file("f.bin", 1000)
        inner = "http://localhost:%d/%s" % (self.port, self.origin.url("/files/f.bin"))
        for where in (inner, inner.replace("localhost", "127.0.0.1")):
            with self.subTest(location=where):
                status, h, body, secs = self.get(
                    "/" + self.origin.url("/redirect-to?url=" + quote(where, safe="")))
                self.assertEqual((status, h.get("x-hubd-error")), (403, "forbidden"), body)
                self.assertIn(b"never fetches from itself", body)
                self.assertLess(secs, 2.0 * SLOW)
        # The origin saw the redirects only, never the file.
        self.assertEqual(self.origin.requests_for("/files/f.bin"), 0)
        self.assertNotIn("connection from hubd itself", self.hubd.read_log())


class JamTest(FrontLoopCase):
    def other_fetch(self, name):
        """Another user's fetch of /files/name through the front: its seconds."""
        url = "http://127.0.0.1:%d/%s" % (self.port, self.origin.url("/files/" + name))
        t0 = time.monotonic()
        r = subprocess.run(["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups",
                            "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                            "--max-time", "20", url], capture_output=True, timeout=60)
        secs = time.monotonic() - t0
        self.assertTrue(r.returncode == 0 and r.stdout == b"200" or secs >= 20, r)
        return secs

    @staticmethod
    def stop_all(procs):
        outs = []
        for p in procs:
            if p.poll() is None:
                p.kill()
            outs.append(p.communicate()[0])
        return outs

    def test_nested_requests_do_not_stop_another_users_fetch(self):
        """8 requests nested 10 deep against a slow origin, then another
        user's small fetch: it is answered at its normal latency, and once
        the attacker is gone nothing is left running. (Before the fix: the
        nested jobs filled max_downloads within seconds and the small fetch
        got no answer for minutes.)"""
        self.make_file("slow.bin", 4 * 1024 * 1024, seed=1)
        self.make_file("small.bin", 100 * 1024, seed=2)
        self.make_file("base.bin", 100 * 1024, seed=3)
        base = self.other_fetch("base.bin")
        slow = self.origin.url("/files/slow.bin?bps=20000")
        attackers = []
        for i in range(8):
            target = self.nested("127.0.0.1", 10, slow + "&n=%d" % i)
            # The attacker is a user of its own (nobody), as hubd's own uid
            # (root here) owns the inner jobs: each may hold
            # max_jobs_per_user (8) slots, together all 16.
            attackers.append(subprocess.Popen(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "30",
                 "http://127.0.0.1:%d%s" % (self.port, target)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        self.addCleanup(self.stop_all, attackers)
        time.sleep(4)  # the jam filled max_downloads within 4 s before the fix
        secs = self.other_fetch("small.bin")
        print("\nthe other user's 100 KB fetch: %.3f s alone, %.3f s under the jam"
              % (base, secs))
        self.assertLess(secs, 2.0 * SLOW)
        # Each nested request was refused at once, none left a job behind.
        self.assertEqual(set(self.stop_all(attackers)), {b"403"})
        wait_for(lambda: self.jobs() == [], timeout=10, what="no job left running")
        self.assertEqual(self.origin.requests_for("/files/slow.bin"), 0)


if __name__ == "__main__":
    unittest.main()
