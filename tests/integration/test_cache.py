"""The cache: hits without network, persistence, listing, clean shutdown."""

import json
import os
import signal
import sqlite3
import unittest

from harness import HubTestCase, sha256_file, wait_for


class CacheTest(HubTestCase):
    def fetch_json(self, *args):
        r = self.hubctl("fetch", "--json", *args)
        return r, json.loads(r.out) if r.out.strip() else None

    def test_cached_url_and_known_sha_served_after_origin_stops(self):
        digest = self.make_file("w.bin", 1024 * 1024)
        url = self.origin.url("/files/w.bin")
        r, res = self.fetch_json(url)
        self.assertEqual(res["source"], "download", r)
        self.origin.stop()
        r, res = self.fetch_json(url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["source"], "hit")
        self.assertEqual(sha256_file(res["path"]), digest)
        # Another URL, never fetched, but its expected digest is in the cache.
        r, res = self.fetch_json("--sha256", digest, "http://127.0.0.1:9/elsewhere.bin")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["source"], "hit")
        st = self.stats()
        self.assertEqual(st["hits"], 2)
        self.assertEqual(st["misses"], 1)

    def test_cache_survives_restart(self):
        digest = self.make_file("p.bin", 300000)
        url = self.origin.url("/files/p.bin")
        self.assertEqual(self.hubctl("fetch", url).rc, 0)
        self.assertEqual(self.hubd.stop(), 0)
        self.hubd.start()
        r, res = self.fetch_json(url)
        self.assertEqual(res["source"], "hit", r)
        self.assertEqual(res["sha256"], digest)
        self.assertEqual(self.origin.requests_for("/files/p.bin"), 1)

    def test_restart_removes_stale_partials(self):
        self.assertEqual(self.hubd.stop(), 0)
        stale = os.path.join(self.hubd.cache, "tmp", "7.part")
        with open(stale, "wb") as f:
            f.write(b"half a download")
        self.hubd.start()
        self.assertFalse(os.path.exists(stale))
        self.assertIn("removed 1 unfinished download", self.hubd.read_log())

    def test_startup_reconciles_rows_and_blobs(self):
        d1 = self.make_file("g1", 50000, seed=1)
        d2 = self.make_file("g2", 60000, seed=2)
        r1 = json.loads(self.hubctl("fetch", "--json", self.origin.url("/files/g1")).out)
        json.loads(self.hubctl("fetch", "--json", self.origin.url("/files/g2")).out)
        self.assertEqual(self.hubd.stop(), 0)
        blobs = os.path.join(self.hubd.cache, "blobs")
        # A listed blob lost by hand, a file no row names, a misnamed file.
        os.unlink(r1["path"])
        stray = "ab" + "0" * 62
        os.makedirs(os.path.join(blobs, "ab"), exist_ok=True)
        with open(os.path.join(blobs, "ab", stray), "wb") as f:
            f.write(b"not from here")
        with open(os.path.join(blobs, "notes.txt"), "wb") as f:
            f.write(b"junk")
        done = "start-up check of blobs/ done"
        before = self.hubd.read_log().count(done)
        self.hubd.start()
        # After a clean stop the blobs' side is checked in the background
        # (the socket answers at once at any size).
        wait_for(lambda: self.hubd.read_log().count(done) > before,
                 what="the background check of blobs/")
        log = self.hubd.read_log()
        self.assertIn("1 row(s) forgotten, 2 file(s) quarantined", log)
        quarantine = os.listdir(os.path.join(self.hubd.cache, "quarantine"))
        self.assertEqual(sorted(quarantine), sorted(["ab-" + stray, "notes.txt"]))
        # The invariant: every file under blobs/ hashes to its name, and every
        # entry's blob exists.
        for path in self.hubd.blob_files():
            self.assertEqual(sha256_file(path), os.path.basename(path))
        rows = json.loads(self.hubctl("ls", "--json").out)
        self.assertEqual([r["sha256"] for r in rows], [d2])
        for row in rows:
            self.assertTrue(os.path.exists(os.path.join(blobs, row["sha256"][:2], row["sha256"])))
        # The forgotten URL downloads again.
        r = json.loads(self.hubctl("fetch", "--json", self.origin.url("/files/g1")).out)
        self.assertEqual((r["source"], r["sha256"]), ("download", d1))

    def cut_commit_short(self, name, total_delta=0):
        """Fetches a file, stops hubd, and leaves the cache as a crash
        between a commit's link into blobs/ and its transaction would: the
        blob has no row, tmp/7.part is the same file, and the partials row
        (durable: half) names the URL. Returns (url, digest, blob path)."""
        size = 300000
        digest = self.make_file(name, size)
        url = self.origin.url("/files/" + name)
        res = json.loads(self.hubctl("fetch", "--json", url).out)
        self.assertEqual(self.hubd.stop(), 0)
        (etag, lm), = self.hubd.query("SELECT etag, last_modified FROM entries")
        con = sqlite3.connect(os.path.join(self.hubd.cache, "hubd.db"))
        with con:
            con.execute("DELETE FROM entries")
            con.execute("DELETE FROM blobs")
            con.execute("INSERT INTO partials(id, url, cred_tag, etag, last_modified, total,"
                        " durable, updated) VALUES (7, ?, '', ?, ?, ?, ?, 0)",
                        (url, etag, lm, size + total_delta, size // 2))
        con.close()
        os.link(res["path"], os.path.join(self.hubd.cache, "tmp", "7.part"))
        return url, digest, res["path"]

    def test_a_commit_cut_short_by_a_crash_is_recorded_at_start(self):
        url, digest, blob = self.cut_commit_short("cc.bin")
        self.hubd.start()
        self.assertIn("1 finished download(s) recorded", self.hubd.read_log())
        r, res = self.fetch_json(url)
        self.assertEqual((res["source"], res["sha256"]), ("hit", digest), r)
        self.assertEqual(self.origin.requests_for("/files/cc.bin"), 1)
        # Recorded whole: not cut back to the row's durable half, one name.
        self.assertEqual(sha256_file(blob), digest)
        self.assertEqual(os.stat(blob).st_nlink, 1)
        self.assertEqual(self.hubd.tmp_files(), [])
        self.assertEqual(self.hubd.partials(), {})

    def test_a_linked_partial_that_does_not_match_is_not_cut(self):
        # The row says another length: not adopted. The blob goes to
        # quarantine whole (the partial's row must not cut the shared file
        # back to its durable half), the row and the tmp name go.
        url, digest, blob = self.cut_commit_short("cd.bin", total_delta=1)
        self.hubd.start()
        self.assertIn("0 row(s) forgotten, 1 file(s) quarantined, 0 finished", self.hubd.read_log())
        kept = os.path.join(self.hubd.cache, "quarantine", "%s-%s" % (digest[:2], digest))
        self.assertEqual(sha256_file(kept), digest)
        self.assertEqual(self.hubd.tmp_files(), [])
        self.assertEqual(self.hubd.partials(), {})
        self.assertEqual(self.hubd.blob_files(), [])
        r, res = self.fetch_json(url)
        self.assertEqual((res["source"], res["sha256"]), ("download", digest), r)

    def test_missing_blob_is_fetched_again(self):
        self.make_file("g.bin", 100000)
        url = self.origin.url("/files/g.bin")
        r, res = self.fetch_json(url)
        os.unlink(res["path"])
        r, res = self.fetch_json(url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["source"], "download")
        self.assertTrue(os.path.exists(res["path"]))
        self.assertEqual(self.origin.requests_for("/files/g.bin"), 2)

    def test_ls_lists_entries(self):
        d1 = self.make_file("l1", 1000, seed=1)
        self.hubctl("fetch", self.origin.url("/files/l1"))
        r = self.hubctl("ls", "--json")
        self.assertEqual(r.rc, 0, r)
        rows = json.loads(r.out)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["url"], self.origin.url("/files/l1"))
        self.assertEqual(rows[0]["sha256"], d1)
        self.assertEqual(rows[0]["size"], 1000)

    def test_status_shows_running_job(self):
        self.make_file("s.bin", 4 * 1024 * 1024)
        url = self.origin.url("/files/s.bin?bps=%d" % (2 * 1024 * 1024))
        p = self.hubctl_bg("fetch", url)
        from harness import wait_for
        wait_for(lambda: self.origin.requests_for("/files/s.bin") == 1, what="the download")
        r = self.hubctl("status", "--json")
        self.assertEqual(r.rc, 0, r)
        jobs = json.loads(r.out)
        self.assertEqual(len(jobs), 1)
        self.assertEqual(jobs[0]["url"], url)
        self.assertEqual(jobs[0]["waiters"], 1)
        self.assertEqual(jobs[0]["total"], 4 * 1024 * 1024)
        p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0)

    def test_sigterm_clean_exit(self):
        self.assertEqual(self.hubd.stop(signal.SIGTERM), 0)
        log = self.hubd.read_log()
        self.assertIn("stopped", log)
        self.assertNotIn("handles still open", log)
        self.assertFalse(os.path.exists(self.hubd.socket))
        self.hubd.start()  # for tearDown

    def test_sigterm_mid_download_keeps_a_resumable_partial(self):
        size = 8 * 1024 * 1024
        digest = self.make_file("k.bin", size)
        url = self.origin.url("/files/k.bin?bps=%d" % (4 * 1024 * 1024))
        p = self.hubctl_bg("fetch", url)
        from harness import wait_for
        wait_for(lambda: self.origin.stats()["bytes"].get("/files/k.bin", 0) > 1 << 20,
                 what="the transfer")
        self.assertEqual(self.hubd.stop(signal.SIGINT), 0)
        _, err = p.communicate(timeout=30)
        # The waiter hears why before its session closes.
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(b"shutting_down", err)
        self.assertNotIn("handles still open", self.hubd.read_log())
        # Nothing served-looking: no blob, no entry; the partial is recorded
        # with exactly the bytes its file holds.
        self.assertEqual(self.hubd.blob_files(), [])
        self.assertEqual(self.hubd.query("SELECT count(*) FROM entries"), [(0,)])
        (pid, durable), = self.hubd.partials().values()
        self.assertEqual(self.hubd.tmp_files(), ["%d.part" % pid])
        self.assertEqual(os.path.getsize(os.path.join(self.hubd.cache, "tmp", "%d.part" % pid)),
                         durable)
        self.assertGreater(durable, 0)
        # After the restart the same fetch resumes where the partial ends.
        self.hubd.start()
        r = self.hubctl("fetch", url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)
        self.assertEqual(self.origin.resume_starts("/files/k.bin"), [durable])
        self.assertIn("resuming %s at byte %d" % (url, durable), self.hubd.read_log())
        self.assertEqual(self.hubd.partials(), {})
        self.assertEqual(self.hubd.tmp_files(), [])

    def test_one_daemon_per_cache(self):
        # A second hubd on the same cache (another socket) stops before it
        # touches anything: it would cut the first one's partials back.
        import subprocess
        from harness import HUBD
        r = subprocess.run([HUBD, "--socket", os.path.join(self.tmp, "second.sock"),
                            "--cache-dir", self.hubd.cache], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("another hubd is using the cache dir", r.stderr)
        self.make_file("one.bin", 1000)
        self.assertEqual(self.hubctl("fetch", self.origin.url("/files/one.bin")).rc, 0)

    def test_startup_checks_recorded_partials(self):
        # Three partials, as a crash may leave them: one whose file holds
        # more than its row promises (cut back and kept), one whose file is
        # shorter (dropped), one whose file is gone (dropped).
        self.make_file("s1", 3000, seed=1)
        self.make_file("s2", 3000, seed=2)
        self.make_file("s3", 3000, seed=3)
        self.assertEqual(self.hubd.stop(), 0)
        tmp = os.path.join(self.hubd.cache, "tmp")
        with open(os.path.join(self.root, "s1"), "rb") as f:
            head = f.read(2500)
        for pid, size in ((11, 2500), (12, 100)):
            with open(os.path.join(tmp, "%d.part" % pid), "wb") as f:
                f.write(head[:size])
        con = __import__("sqlite3").connect(os.path.join(self.hubd.cache, "hubd.db"))
        etag = lambda name: '"%x-%x"' % (3000, os.stat(os.path.join(self.root, name)).st_mtime_ns)
        with con:
            for pid, name, durable in ((11, "s1", 1000), (12, "s2", 1000), (13, "s3", 500)):
                con.execute("INSERT INTO partials(id, url, etag, total, durable, updated)"
                            " VALUES (?, ?, ?, 3000, ?, 0)",
                            (pid, self.origin.url("/files/" + name), etag(name), durable))
        con.close()
        self.hubd.start()
        self.assertIn("1 partial download(s) kept for resuming, 2 dropped", self.hubd.read_log())
        self.assertEqual(self.hubd.tmp_files(), ["11.part"])
        self.assertEqual(os.path.getsize(os.path.join(tmp, "11.part")), 1000)
        self.assertEqual(list(self.hubd.partials().values()), [(11, 1000)])
        # The kept one resumes from byte 1000; the others start over.
        for name in ("s1", "s2", "s3"):
            r = self.hubctl("fetch", "--json", self.origin.url("/files/" + name))
            self.assertEqual(r.rc, 0, r)
            self.assertEqual(json.loads(r.out)["sha256"], sha256_file(os.path.join(self.root, name)))
        st = self.origin.stats()
        self.assertEqual(self.origin.resume_starts("/files/s1", st), [1000])
        self.assertEqual(self.origin.resume_starts("/files/s2", st), [])
        # New jobs are numbered past the kept partial: no name is reused.
        self.assertIn("job 14:", self.hubd.read_log())

    def test_sigterm_while_connecting(self):
        # The job has no partial file yet: it is freed at once, and the jobs
        # module must still outlive the sessions that are draining.
        self.make_file("c.bin", 1000)
        p = self.hubctl_bg("fetch", self.origin.url("/files/c.bin?delay_ms=5000"))
        from harness import wait_for
        wait_for(lambda: self.origin.requests_for("/files/c.bin") == 1, what="the request")
        self.assertEqual(self.hubd.stop(signal.SIGTERM), 0)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(b"shutting_down", err)
        self.hubd.start()

    def test_daemon_unreachable_exit_3(self):
        import subprocess
        from harness import HUBCTL
        p = subprocess.run([HUBCTL, "--socket", os.path.join(self.tmp, "nope.sock"), "fetch",
                            self.origin.url("/files/x")], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 3, p)
        self.assertTrue(p.stderr, "hubctl must say why it failed")


if __name__ == "__main__":
    unittest.main()
