"""Resilience: retries with resume, restarts, timeouts, hostile servers, and
clients whose daemon dies. Each case checks the outcome and that nothing wrong
is in the cache."""

import json
import os
import random
import signal
import time
import unittest

from harness import Hubd, HubTestCase, sha256_file, wait_for, write_config

MiB = 1024 * 1024


class ResilienceTest(HubTestCase):
    def restart_with(self, **keys):
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "r.conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-r%d" % len(os.listdir(self.tmp))),
                         config=conf)

    def assert_cache_clean(self):
        """No partial is left behind; every blob hashes to its name."""
        self.hubd.wait_no_partials()
        for path in self.hubd.blob_files():
            self.assertEqual(sha256_file(path), os.path.basename(path))

    def assert_invariant(self):
        """The cache's promise after any crash: every file under blobs/
        hashes to its name, every blob row and every entry has its file, and
        every recorded partial has its file, with at least the bytes its row
        promises (a finished download keeps its tmp name until the
        transaction that records it has dropped the row: store_commit)."""
        h = self.hubd
        for path in h.blob_files():
            self.assertEqual(sha256_file(path), os.path.basename(path), path)
        on_disk = {os.path.basename(p) for p in h.blob_files()}
        for sha, size in h.query("SELECT sha256, size FROM blobs"):
            self.assertIn(sha, on_disk)
            self.assertEqual(os.path.getsize(os.path.join(h.cache, "blobs", sha[:2], sha)), size)
        for url, sha in h.query("SELECT url, sha256 FROM entries"):
            self.assertIn(sha, on_disk, url)
        for url, (pid, durable) in h.partials().items():
            part = os.path.join(h.cache, "tmp", "%d.part" % pid)
            self.assertTrue(os.path.exists(part), (url, pid))
            self.assertGreaterEqual(os.path.getsize(part), durable, url)

    def test_kill9_mid_download_resumes_from_the_recorded_partial(self):
        size = 24 * MiB
        digest = self.make_file("k9.bin", size)
        url = self.origin.url("/files/k9.bin?bps=%d" % (6 * MiB))
        p = self.hubctl_bg("fetch", url)
        # A crash at a moment of its own: some time after the first
        # checkpoint, not right after one.
        wait_for(lambda: self.hubd.partials(), what="a checkpoint")
        time.sleep(random.Random(9).uniform(0.2, 1.5))
        self.hubd.kill9()
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 3, err)
        (_, durable), = self.hubd.partials().values()
        self.assertGreater(durable, 0)
        self.hubd.start()
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        st = self.origin.stats()
        self.assertEqual(len(self.origin.resume_starts("/files/k9.bin", st)), 1)
        self.assertGreaterEqual(self.origin.resume_starts("/files/k9.bin", st)[0], durable)
        self.assertLess(st["bytes"]["/files/k9.bin"], 1.2 * size)
        self.assertEqual(self.hubd.partials(), {})
        self.assert_invariant()
        self.assert_cache_clean()

    def test_kill9_then_changed_file_starts_over(self):
        self.make_file("ch9.bin", 8 * MiB, seed=1)
        url = self.origin.url("/files/ch9.bin?bps=%d" % (4 * MiB))
        p = self.hubctl_bg("fetch", url)
        wait_for(lambda: self.hubd.partials(), what="a checkpoint")
        self.hubd.kill9()
        p.communicate(timeout=30)
        # The origin's file changes while hubd is down: If-Range refuses the
        # old partial and the whole new file comes, right.
        time.sleep(0.01)
        digest = self.make_file("ch9.bin", 8 * MiB, seed=2)
        self.hubd.start()
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        self.assertEqual(len(self.origin.resume_starts("/files/ch9.bin")), 1)
        self.assert_invariant()
        self.assert_cache_clean()

    def crash_with_partial(self, name, size):
        digest = self.make_file(name, size)
        url = self.origin.url("/files/%s?bps=%d" % (name, 6 * MiB))
        p = self.hubctl_bg("fetch", url)
        wait_for(lambda: self.hubd.partials(), what="a checkpoint")
        self.hubd.kill9()
        p.communicate(timeout=30)
        (pid, durable), = self.hubd.partials().values()
        return url, digest, pid, durable

    def test_bad_bytes_in_a_partial_are_dropped_not_resumed_forever(self):
        # One flipped byte in the recorded prefix (a disk fault, or an
        # origin that changed the file but kept its validator): the fetch
        # with the expected digest fails once, the partial goes with it, and
        # the next fetch downloads it all again, right.
        url, digest, pid, durable = self.crash_with_partial("m.bin", 12 * MiB)
        part = os.path.join(self.hubd.cache, "tmp", "%d.part" % pid)
        with open(part, "r+b") as f:
            f.seek(durable // 2)
            b = f.read(1)
            f.seek(durable // 2)
            f.write(bytes([b[0] ^ 0xFF]))
        self.hubd.start()
        r = self.hubctl("fetch", "--sha256", digest, url)
        self.assertEqual(r.rc, 4, r)
        self.assertIn("hash_mismatch", r.err)
        self.hubd.wait_no_partials()
        self.assertEqual(self.hubd.partials(), {})
        r = self.hubctl("fetch", "--sha256", digest, url)
        self.assertEqual(r.rc, 0, r)
        self.assert_invariant()

    def test_short_206_is_never_committed_as_the_file(self):
        # An origin that answers "Range: bytes=N-" with a valid but shorter
        # 206 (bytes N-(N+99)/total): a prefix must not become the blob.
        import hashlib
        import http.server
        import threading
        data = random.Random(3).randbytes(8 * MiB)

        class ShortRange(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                if rng:
                    start = int(rng.split("=")[1].split("-")[0])
                    body = data[start:start + 100]
                    self.send_response(206)
                    self.send_header("Content-Range",
                                     "bytes %d-%d/%d" % (start, start + 99, len(data)))
                else:
                    body = data
                    self.send_response(200)
                self.send_header("ETag", '"v1"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    for i in range(0, len(body), 64 * 1024):
                        self.wfile.write(body[i:i + 64 * 1024])
                        if not rng:
                            time.sleep(0.01)  # about 6 MiB/s
                except OSError:
                    pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ShortRange)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        url = "http://127.0.0.1:%d/f.bin" % srv.server_address[1]
        p = self.hubctl_bg("fetch", url)
        wait_for(lambda: self.hubd.partials(), what="a checkpoint")
        self.hubd.kill9()
        p.communicate(timeout=30)
        self.hubd.start()
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("truncated", r.out)  # --json: the error is in the object
        self.assertEqual(self.hubd.blob_files(), [])
        self.assertNotIn(hashlib.sha256(data[:100]).hexdigest(), r.out)

    def test_crash_loop(self):
        # Four downloads (two clients share one), hubd killed with SIGKILL at
        # random moments 20 times and started again; then every fetch
        # completes with the right bytes and the cache keeps its invariant.
        # The three larger files come over several connections (segments of
        # 1 MiB), so their partials also record ranges past the prefix.
        self.restart_with(segment_min_size="4M", segment_chunk_size="1M")
        rnd = random.Random(20)
        files = {}
        for i, size in enumerate((3 * MiB, 5 * MiB + 11, 7 * MiB, 9 * MiB + 3)):
            name = "cl%d.bin" % i
            files[self.origin.url("/files/%s?bps=%d" % (name, 4 * MiB))] = \
                (name, size, self.make_file(name, size, seed=i + 1))
        urls = list(files)
        for round_ in range(20):
            clients = [self.hubctl_bg("fetch", u) for u in urls + urls[:1]]
            time.sleep(rnd.uniform(0.05, 1.2))
            self.hubd.kill9()
            for c in clients:
                out, err = c.communicate(timeout=30)
                self.assertIn(c.returncode, (0, 3), err)  # done, or "hubd went away"
                if c.returncode == 0:
                    self.assertEqual(os.path.basename(out.decode().strip()),
                                     files[urls[urls.index(c.args[-1])]][2])
            self.assert_invariant()
            self.hubd.start()
            self.assert_invariant()  # and after the start-up check
        for u in urls:
            r = self.hubctl("fetch", "--json", u)
            self.assertEqual(r.rc, 0, r)
            self.assertEqual(json.loads(r.out)["sha256"], files[u][2])
        self.assert_invariant()
        self.assertEqual(self.hubd.partials(), {})
        self.assert_cache_clean()
        st = self.origin.stats()["bytes"]
        ratio = {files[u][0]: round(st.get("/files/" + files[u][0], 0) / files[u][1], 2)
                 for u in urls}
        print("crash loop: origin bytes / file size:", ratio)

    def test_resume_after_cuts(self):
        self.restart_with(retries="5", retry_delay="20ms")
        size = 8 * MiB + 123
        digest = self.make_file("c.bin", size)
        cuts = [1 * MiB + 7, 3 * MiB, 5 * MiB + 999]
        r = self.hubctl("fetch", "--json",
                        self.origin.url("/files/c.bin?cut=%s" % ",".join(map(str, cuts))))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        st = self.origin.stats()
        self.assertEqual(self.origin.resume_starts("/files/c.bin", st), cuts)
        self.assertEqual(st["bytes"]["/files/c.bin"], size)  # not one byte twice
        self.assert_cache_clean()

    def test_five_random_cuts_cost_under_1_2x(self):
        self.restart_with(retries="6", retry_delay="20ms")
        size = 32 * MiB
        digest = self.make_file("rc.bin", size)
        rnd = random.Random(4)
        cuts = sorted(rnd.randrange(1, size) for _ in range(5))
        r = self.hubctl("fetch", "--sha256", digest,
                        self.origin.url("/files/rc.bin?cut=%s" % ",".join(map(str, cuts))))
        self.assertEqual(r.rc, 0, r)
        served = self.origin.stats()["bytes"]["/files/rc.bin"]
        self.assertLess(served, 1.2 * size)
        self.assert_cache_clean()

    def test_chunked_resume(self):
        self.restart_with(retries="3", retry_delay="20ms")
        digest = self.make_file("ch.bin", 3 * MiB)
        r = self.hubctl("fetch", self.origin.url("/chunked/ch.bin?cut=%d" % MiB))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)
        self.assert_cache_clean()

    def test_ignored_range_restarts_from_zero(self):
        self.restart_with(retries="3", retry_delay="20ms")
        digest = self.make_file("n.bin", 4 * MiB)
        r = self.hubctl("fetch", self.origin.url("/files/n.bin?norange=1&cut=%d" % (2 * MiB)))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)
        self.assert_cache_clean()

    def test_changed_validator_restarts_from_zero(self):
        self.restart_with(retries="3", retry_delay="20ms")
        digest = self.make_file("e.bin", 4 * MiB)
        r = self.hubctl("fetch", self.origin.url("/files/e.bin?etag=per_request&cut=%d" % MiB))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)
        st = self.origin.stats()
        self.assertEqual(self.origin.resume_starts("/files/e.bin", st), [MiB])  # refused by If-Range
        self.assert_cache_clean()

    def test_retry_after_is_honoured(self):
        self.restart_with(retries="3", retry_delay="10ms")
        digest = self.make_file("a.bin", 1000)
        t = time.monotonic()
        r = self.hubctl("fetch", self.origin.url("/files/a.bin?fail_first=2&retry_after=1"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)
        self.assertGreaterEqual(time.monotonic() - t, 1.9)
        self.assertEqual(self.origin.requests_for("/files/a.bin"), 3)

    def test_retries_exhausted(self):
        self.restart_with(retries="2", retry_delay="10ms")
        self.make_file("x.bin", 1000)
        r = self.hubctl("fetch", self.origin.url("/files/x.bin?fail_first=10&fail_status=502"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("http_502", r.err)
        self.assertIn("after 3 attempts", r.err)
        self.assertEqual(self.origin.requests_for("/files/x.bin"), 3)
        self.assert_cache_clean()

    def test_permanent_failure_not_retried(self):
        self.restart_with(retries="5", retry_delay="10ms")
        self.make_file("p.bin", 1000)
        r = self.hubctl("fetch", self.origin.url("/files/p.bin?fail_first=10&fail_status=403"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("http_403", r.err)
        self.assertEqual(self.origin.requests_for("/files/p.bin"), 1)

    def test_reset_without_retries_stores_nothing(self):
        self.make_file("r.bin", 2 * MiB)
        r = self.hubctl("fetch", self.origin.url("/files/r.bin?reset_at=%d" % MiB))
        self.assertEqual(r.rc, 1, r)
        self.assertTrue("truncated" in r.err or "connect" in r.err, r)
        self.assertEqual(self.hubd.blob_files(), [])
        self.assert_cache_clean()

    def test_stalled_server_hits_idle_timeout(self):
        self.restart_with(idle_timeout="300ms")
        self.make_file("s.bin", 2 * MiB)
        t = time.monotonic()
        r = self.hubctl("fetch", self.origin.url("/files/s.bin?stall_at=%d&stall_ms=5000" % MiB))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("idle timeout", r.err)
        self.assertLess(time.monotonic() - t, 3)
        self.assert_cache_clean()

    def test_deadline_bounds_a_dripping_server(self):
        self.restart_with(deadline="1s", retries="3", retry_delay="10ms")
        self.make_file("d.bin", 4 * MiB)
        t = time.monotonic()
        r = self.hubctl("fetch", self.origin.url("/files/d.bin?bps=200000"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("deadline", r.err)
        self.assertLess(time.monotonic() - t, 3)
        self.assert_cache_clean()

    def test_malformed_and_oversized_headers(self):
        self.restart_with(retries="3", retry_delay="10ms")
        for path in ("/badheaders", "/bigheaders?n=100"):
            r = self.hubctl("fetch", self.origin.url(path))
            self.assertEqual(r.rc, 1, (path, r))
            self.assertIn("http_parse", r.err)
        self.assertEqual(self.origin.requests_for("/badheaders"), 1)  # not retried
        self.assert_cache_clean()

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_full_disk(self):
        # The cache on a 16 MiB tmpfs: a 32 MiB download fails with no_space
        # (before writing, its length being known; and mid-way for a chunked
        # one), nothing is left, and the daemon goes on serving.
        small = self.hubd_on_tmpfs(16)
        self.make_file("big.bin", 32 * MiB, seed=1)
        ok = self.make_file("ok.bin", 100000, seed=2)

        def free():
            return os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
        before = free()  # the database and the reserve kept for removals are in
        for path in ("/files/big.bin", "/chunked/big.bin"):
            r = self.hubctl("fetch", self.origin.url(path))
            self.assertEqual(r.rc, 1, (path, r))
            self.assertIn("no_space", r.err)
            self.hubd.wait_no_partials()
            # Removed means the space is back, not only the name gone.
            wait_for(lambda: free() > before - MiB, what="the partial's space to be freed")
        r = self.hubctl("fetch", self.origin.url("/files/ok.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), ok)
        r = self.hubctl("fetch", "--json", self.origin.url("/files/ok.bin"))
        self.assertEqual(json.loads(r.out)["source"], "hit")
        self.assert_cache_clean()

    def test_hubctl_exits_3_when_the_daemon_dies(self):
        self.make_file("k.bin", 4 * MiB)
        p = self.hubctl_bg("fetch", self.origin.url("/files/k.bin?bps=%d" % MiB))
        wait_for(lambda: self.origin.requests_for("/files/k.bin") == 1, what="the download")
        os.kill(self.hubd.proc.pid, signal.SIGKILL)
        self.hubd.proc.wait()
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 3, err)
        self.assertIn(b"hubd", err)
        self.hubd.start()  # the fixture's clean exit


if __name__ == "__main__":
    unittest.main()
