"""Single flight: concurrent requests for one file share one transfer."""

import json
import os
import signal
import subprocess
import time
import unittest

from harness import HubTestCase, sha256_file, wait_for

SIZE = 8 * 1024 * 1024
RATE = 16 * 1024 * 1024  # bytes/s: the transfer lasts about half a second


class DedupTest(HubTestCase):
    def test_eight_concurrent_fetches_one_origin_transfer(self):
        digest = self.make_file("big.bin", SIZE)
        url = self.origin.url("/files/big.bin?bps=%d" % RATE)
        procs = [self.hubctl_bg("fetch", "--json", url) for _ in range(8)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            results.append(json.loads(out))
        self.assertEqual(self.origin.requests_for("/files/big.bin"), 1)
        self.assertEqual(self.origin.stats()["bytes"]["/files/big.bin"], SIZE)
        self.assertEqual({r["path"] for r in results}, {results[0]["path"]})
        self.assertEqual({r["sha256"] for r in results}, {digest})
        self.assertEqual(sha256_file(results[0]["path"]), digest)
        sources = sorted(r["source"] for r in results)
        self.assertEqual(sources.count("download"), 1, sources)
        st = self.stats()
        self.assertEqual(st["misses"], 1)
        self.assertEqual(st["attached"] + st["hits"], 7)
        self.assertEqual(st["bytes_from_origin"], SIZE)
        self.assertEqual(st["bytes_served"], 8 * SIZE)

    def test_attached_waiters_get_progress(self):
        self.make_file("p.bin", SIZE)
        url = self.origin.url("/files/p.bin?bps=%d" % (SIZE))  # about one second
        first = self.hubctl_bg("fetch", "--progress", url)
        wait_for(lambda: self.origin.requests_for("/files/p.bin") == 1, what="the download")
        second = self.hubctl_bg("fetch", "--progress", url)
        out2, err2 = second.communicate(timeout=60)
        out1, _ = first.communicate(timeout=60)
        self.assertEqual(second.returncode, 0, err2)
        self.assertEqual(out1, out2)
        self.assertIn(b"attached", err2)
        self.assertIn(b"MiB", err2)

    def test_progress_bar_on_a_terminal_only(self):
        import pty
        self.make_file("t.bin", SIZE)
        url = self.origin.url("/files/t.bin?bps=%d" % (SIZE))
        first = self.hubctl_bg("fetch", url)
        wait_for(lambda: self.origin.requests_for("/files/t.bin") == 1, what="the download")
        master, slave = pty.openpty()
        p = subprocess.Popen(self.hubctl_args("fetch", url), stdout=subprocess.PIPE,
                             stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        out, _ = p.communicate(timeout=60)
        first.communicate(timeout=60)
        self.assertEqual(p.returncode, 0)
        self.assertTrue(out.strip())  # the path still goes to stdout
        self.assertIn(b"\r", seen)  # a redrawn line
        self.assertIn(b"attached", seen)
        self.assertIn(b"MiB", seen)
        # Not a terminal and no --progress: silent.
        r = self.hubctl("fetch", url)
        self.assertEqual(r.err, "")

    def test_disconnecting_waiter_does_not_cancel_the_job(self):
        digest = self.make_file("d.bin", SIZE)
        url = self.origin.url("/files/d.bin?bps=%d" % (SIZE))
        leaver = self.hubctl_bg("fetch", url)
        stayer = self.hubctl_bg("fetch", url)
        wait_for(lambda: self.origin.stats()["bytes"].get("/files/d.bin", 0) > SIZE // 8,
                 what="the transfer to start")
        os.kill(leaver.pid, signal.SIGKILL)
        leaver.wait()
        out, err = stayer.communicate(timeout=60)
        self.assertEqual(stayer.returncode, 0, err)
        self.assertEqual(sha256_file(out.decode().strip()), digest)
        self.assertEqual(self.origin.requests_for("/files/d.bin"), 1)

    def test_last_waiter_leaving_still_caches(self):
        digest = self.make_file("l.bin", SIZE)
        url = self.origin.url("/files/l.bin?bps=%d" % (SIZE * 2))
        p = self.hubctl_bg("fetch", url)
        wait_for(lambda: self.origin.requests_for("/files/l.bin") == 1, what="the download")
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        # The file is renamed into blobs/ just before its row is written:
        # wait for the row, which is what a hit goes by.
        wait_for(lambda: self.hubd.query("SELECT count(*) FROM entries") == [(1,)], timeout=30,
                 what="the commit")
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(json.loads(r.out)["source"], "hit")
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        self.assertEqual(self.origin.requests_for("/files/l.bin"), 1)

    def test_same_expected_sha_under_another_url_is_not_attached(self):
        # Two URLs promising one digest are two downloads while both run (a
        # job of another URL could be slow, fail or lie); once
        # one is cached, the digest is a hit whatever the URL.
        digest = self.make_file("s.bin", SIZE)
        os.link(os.path.join(self.root, "s.bin"), os.path.join(self.root, "mirror.bin"))
        u1 = self.origin.url("/files/s.bin?bps=%d" % RATE)
        u2 = self.origin.url("/files/mirror.bin?bps=%d" % RATE)
        p1 = self.hubctl_bg("fetch", "--json", "--sha256", digest, u1)
        wait_for(lambda: self.origin.requests_for("/files/s.bin") == 1, what="the download")
        p2 = self.hubctl_bg("fetch", "--json", "--sha256", digest, u2)
        r2 = json.loads(p2.communicate(timeout=60)[0])
        r1 = json.loads(p1.communicate(timeout=60)[0])
        self.assertTrue(r1["ok"] and r2["ok"])
        self.assertEqual((r1["source"], r2["source"]), ("download", "download"))
        self.assertEqual(self.origin.requests_for("/files/mirror.bin"), 1)
        r3 = self.hubctl("fetch", "--json", "--sha256", digest, self.origin.url("/files/x"))
        self.assertEqual(json.loads(r3.out)["source"], "hit")


if __name__ == "__main__":
    unittest.main()
