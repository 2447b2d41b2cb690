"""Hostile local users, lying origins and full disks.

Each test reproduces one hole that was found by trying to break hubd, and
asserts the behaviour that closes it: bounded memory and descriptors for
clients that never read, waiters that cannot fail or hold up each other,
ranges that are not the end of a file, slow drips, a full disk, a clock set
back, blobs edited on disk, and query strings kept from other users.
"""

import hashlib
import http.server
import json
import os
import resource
import socket
import sqlite3
import subprocess
import threading
import time
import unittest

from harness import Hubd, HubTestCase, sha256_file, wait_for, write_config

MiB = 1 << 20
FIRST_RANGE = "bytes=0-%d" % (16 * MiB - 1)  # a download's first request (segment_chunk_size)
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def vm_kb(pid, field):
    """A VmRSS / VmHWM figure of a process, in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (field, pid))


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def flood(path, payload, count):
    """`count` sessions that each send payload without ever reading a
    reply, as fast as the socket takes it (2 s at most); returns them
    open."""
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.setblocking(False)
        left = payload
        deadline = time.monotonic() + 2
        while left and time.monotonic() < deadline:
            try:
                left = left[s.send(left):]
            except BlockingIOError:
                time.sleep(0.01)
        socks.append(s)
    return socks


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


class Scripted(http.server.ThreadingHTTPServer):
    """An origin on 127.0.0.1 whose k-th request (1-based) is answered by
    handlers[min(k, len) - 1](handler, data); records each request's
    headers."""

    daemon_threads = True

    def __init__(self, test, data, handlers):
        self.data = data
        self.handlers = handlers
        self.seen = []
        self.lock = threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                with self.server.lock:
                    self.server.seen.append(dict(self.headers))
                    k = len(self.server.seen)
                fn = self.server.handlers[min(k, len(self.server.handlers)) - 1]
                try:
                    fn(self, self.server.data)
                except OSError:
                    pass

        super().__init__(("127.0.0.1", 0), H)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        test.addCleanup(self.server_close)
        test.addCleanup(self.shutdown)
        self.url = "http://127.0.0.1:%d/f.bin" % self.server_address[1]


def reply(h, status, headers, body, cut=None):
    """Sends a response; with cut, only that many body bytes, then the
    connection closes."""
    h.send_response(status)
    for k, v in headers:
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body if cut is None else body[:cut])
    h.wfile.flush()
    if cut is not None:
        h.close_connection = True


class HostileTest(HubTestCase):
    def restart_with(self, name="hub2", env=None, preexec_fn=None, **keys):
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, name + ".conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, name), config=conf, env=env,
                         preexec_fn=preexec_fn)
        for d in (self.tmp, self.hubd.workdir):  # let another user reach the socket
            os.chmod(d, 0o755)

    def as_nobody(self, *args, timeout=60):
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                              + self.hubctl_args(*args), capture_output=True, text=True,
                              timeout=timeout)

    def fetch(self, *args, timeout=60):
        r = self.hubctl("fetch", "--json", *args, timeout=timeout)
        return r, (json.loads(r.out) if r.out.strip() else None)

    # ---- 1. unbounded replies -------------------------------------------------

    def fill_entries(self, n, url_len):
        """n entries with URLs of about url_len bytes, all naming one real
        blob, written into the stopped daemon's database; restarts it."""
        self.make_file("e.bin", 1000)
        r = self.hubctl("fetch", "--json", self.origin.url("/files/e.bin"))
        sha = json.loads(r.out)["sha256"]
        self.hubd.stop()
        con = sqlite3.connect(os.path.join(self.hubd.cache, "hubd.db"))
        pad = "p" * url_len
        # (seq: the use order; an older hubd had only the times.)
        seq = any(c[1] == "seq" for c in con.execute("PRAGMA table_info(entries)"))
        con.executemany(
            "INSERT INTO entries(url, cred_tag, sha256, created, accessed%s)"
            " VALUES (?, '', ?, 1, ?%s)" % ((", seq", ", ?") if seq else ("", "")),
            [("http://127.0.0.1:1/%d?%s" % (i, pad), sha, 1000 + i) + ((1000 + i,) if seq else ())
             for i in range(n)])
        con.commit()
        con.close()
        self.hubd.start()
        return sha

    def flood_and_ask(self, what, payload, sessions, *args):
        """Sessions that send payload and never read; a second later,
        another client runs hubctl with args. Returns (its Ctl, how long it
        took, hubd's peak RSS in KiB, the flooding sockets)."""
        pid = self.hubd.proc.pid
        socks = flood(self.hubd.socket, payload, sessions)
        time.sleep(1)
        r, took = timed(lambda: self.hubctl(*args, timeout=120))
        hwm = vm_kb(pid, "VmHWM")
        print("\n  %s flood: peak RSS %d KiB, another client's %s in %.3f s"
              % (what, hwm, args[0], took))
        self.assertEqual(r.rc, 0, r)
        return r, took, hwm, socks

    def test_a_list_flood_that_is_never_read_holds_little_memory(self):
        # 300 entries of 2 KB: each LIST is 600 KB of replies. Three
        # sessions each send 3,276 LISTs in one 16 KiB write and never
        # read. Before: every line was parsed and answered whole at once
        # (GBs of RSS, another client's STATS waited seconds).
        self.fill_entries(300, 2000)
        r, took, hwm, socks = self.flood_and_ask("LIST", b"LIST\n" * 3276, 3, "stats", "--json")
        self.assertLess(took, 2.0, "another client's STATS waited")
        self.assertLess(hwm, 100 * 1024, "peak RSS %d KiB" % hwm)
        self.assertEqual(json.loads(r.out)["hubd_sessions"], 4)
        for s in socks:
            s.close()
        wait_for(lambda: self.stats()["sessions"] == 1, what="the flooders to go")

    def test_pipelined_lists_are_all_answered_whole_and_in_order(self):
        # Streamed in pages, a LIST is still every entry, most recently
        # used first, and the requests after it are answered after it.
        self.fill_entries(150, 100)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        f = s.makefile("rwb")
        f.write(b"LIST\nSTATS\n" * 20 + b"HELLO proto=1\n")
        f.flush()
        for _ in range(20):
            urls = []
            while True:
                line = f.readline().decode()
                if line.startswith("END"):
                    self.assertIn("count=151", line)
                    break
                self.assertTrue(line.startswith("ENTRY"), line)
                urls.append(line.split("url=")[1].split(" ")[0])
            self.assertEqual(len(urls), 151)
            self.assertEqual(urls[0].split("?")[0], "http://127.0.0.1:1/149")
            self.assertEqual(urls[149].split("?")[0], "http://127.0.0.1:1/0")
            self.assertTrue(f.readline().startswith(b"STATS "))
        self.assertTrue(f.readline().startswith(b"HELLO "))
        s.close()

    def test_a_status_flood_that_is_never_read_holds_little_memory(self):
        # 20 of one's own jobs with 8 KB URLs: 160 KB per STATUS.
        self.make_file("s.bin", 1 << 20)
        pad = "q" * 8000
        slow = [self.hubctl_bg("fetch", self.origin.url(
            "/files/s.bin?bps=20000&i=%d&pad=%s" % (i, pad))) for i in range(20)]
        for p in slow:
            self.addCleanup(p.kill)
        wait_for(lambda: self.stats()["jobs_active"] + self.stats()["jobs_queued"] == 20,
                 what="20 jobs")
        r, took, hwm, socks = self.flood_and_ask("STATUS", b"STATUS\n" * 2340, 2,
                                                 "status", "--json")
        self.assertEqual(len(json.loads(r.out)), 20)
        self.assertLess(took, 2.0)
        self.assertLess(hwm, 100 * 1024, "peak RSS %d KiB" % hwm)
        for s in socks:
            s.close()
        self.hubd.stop()  # the slow jobs end with the daemon
        for p in slow:
            p.wait(timeout=30)
        self.hubd.start()

    def test_listing_lines_are_never_dropped(self):
        # A path of 5,440 '%' (each %25 on the wire): its FETCH line just
        # fits 16 KiB, a JOB line of it would not. Such lines are sent with
        # the URL cut, never dropped (before: dropped, END's count said
        # otherwise, and a page of only such lines stalled STATUS for good).
        self.restart_with(max_downloads="1")
        self.make_file("slow.bin", 1 * MiB)
        slow = self.hubctl_bg("fetch", self.origin.url("/files/slow.bin?bps=100000"))
        self.addCleanup(slow.kill)
        wait_for(lambda: self.stats()["jobs_active"] == 1, what="the slot taken")
        long_url = self.origin.url("/files/" + "%" * 5440)  # each one %25 on the wire
        waiting = [self.hubctl_bg("fetch", long_url + "?n=%d" % i) for i in range(3)]
        for p in waiting:
            self.addCleanup(p.kill)
        wait_for(lambda: self.stats()["jobs_queued"] == 3, what="three queued jobs")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        s.settimeout(10)
        f = s.makefile("rwb")
        f.write(b"STATUS\nHELLO proto=1\n")
        f.flush()
        jobs = 0
        while True:
            line = f.readline().decode()
            if line.startswith("END"):
                break
            self.assertTrue(line.startswith("JOB "), line[:80])
            self.assertLessEqual(len(line), 16384)
            jobs += 1
        self.assertEqual((jobs, line.strip()), (4, "END count=4"))
        self.assertTrue(f.readline().startswith(b"HELLO "))
        s.close()
        self.hubd.stop()
        for p in [slow] + waiting:
            p.wait(timeout=30)
        self.hubd.start()

    # ---- 2. one user's expectations fail only that user -----------------------

    def test_a_wrong_digest_fails_only_its_own_waiter(self):
        # alice expects a wrong digest; bob, attached to the same download
        # without one, gets the good file, and it is cached.
        digest = self.make_file("x.bin", 2 * MiB)
        url = self.origin.url("/files/x.bin?bps=%d" % MiB)  # 2 s: bob joins well before the end
        alice = self.hubctl_bg("fetch", "--json", "--sha256", "0" * 64, url)
        wait_for(lambda: self.origin.requests_for("/files/x.bin") == 1, what="the download")
        bob = self.hubctl_bg("fetch", "--json", url)
        out_b, _ = bob.communicate(timeout=60)
        out_a, _ = alice.communicate(timeout=60)
        res_b, res_a = json.loads(out_b), json.loads(out_a)
        self.assertEqual((res_b["source"], res_b["sha256"]), ("attached", digest), res_b)
        self.assertEqual(res_a["error"]["code"], "hash_mismatch", res_a)
        self.assertEqual(alice.returncode, 4)
        self.assertIn(digest, res_a["error"]["message"])  # what the bytes really are
        r, res = self.fetch(url)
        self.assertEqual((res["source"], res["sha256"]), ("hit", digest))
        self.assertEqual(self.origin.requests_for("/files/x.bin"), 1)

    def test_a_digest_does_not_attach_to_another_users_slow_url(self):
        # alice names her own dripping URL with the digest of a real file;
        # bob asks for the real file with that digest: he is not attached
        # to her job (before: he waited on it, 110 s and more).
        digest = self.make_file("real.bin", 1 * MiB, seed=5)
        self.make_file("drip.bin", 1 * MiB, seed=5)
        alice = self.hubctl_bg("fetch", "--sha256", digest,
                               self.origin.url("/files/drip.bin?bps=2000"))
        self.addCleanup(alice.kill)
        wait_for(lambda: self.origin.requests_for("/files/drip.bin") == 1, what="alice's job")
        (r, res), took = timed(lambda: self.fetch("--sha256", digest,
                                                  self.origin.url("/files/real.bin"), timeout=30))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual((res["source"], res["sha256"]), ("download", digest))
        self.assertLess(took, 20)
        # And a fetch of alice's failing URL does not fail bob's.
        r, res = self.fetch("--sha256", digest, self.origin.url("/files/real.bin?again=1"))
        self.assertEqual(res["source"], "hit")

    # ---- 3. a short range is not the end of the file ---------------------------

    def test_a_206_of_unknown_total_is_not_taken_for_the_end(self):
        # 200 with Content-Length 100000 cut at 50000, then a whole 206 of
        # bytes 50000-74999/*: the file is still 100000 bytes long (before:
        # DONE size=75000, cached for everyone). The next range brings the
        # rest.
        data = bytes(range(256)) * 390 + b"x" * 160  # 100000 bytes
        digest = hashlib.sha256(data).hexdigest()
        etag = [("ETag", '"v1"')]

        def first(h, d):
            reply(h, 200, etag + [("Content-Length", "100000")], d, cut=50000)

        def short(h, d):
            reply(h, 206, etag + [("Content-Range", "bytes 50000-74999/*"),
                                  ("Content-Length", "25000")], d[50000:75000])

        def rest(h, d):
            start = int(h.headers["Range"].split("=")[1].split("-")[0])
            reply(h, 206, etag + [("Content-Range", "bytes %d-99999/*" % start),
                                  ("Content-Length", str(100000 - start))], d[start:])

        srv = Scripted(self, data, [first, short, rest])
        self.restart_with(retries="3", retry_delay="10ms")
        r, res = self.fetch(srv.url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual((res["size"], res["sha256"]), (100000, digest))
        # (A download's first request asks for its first chunk; the 200
        # to it is the whole file.)
        self.assertEqual([h.get("Range") for h in srv.seen],
                         [FIRST_RANGE, "bytes=50000-", "bytes=75000-"])
        # Without retries left, the short range is an error, nothing stored.
        srv2 = Scripted(self, data, [first, short, rest])
        self.restart_with(name="hub3")
        r, res = self.fetch(srv2.url)
        self.assertEqual(res["error"]["code"], "truncated", r)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_a_range_of_a_file_of_unknown_length_restarts_it(self):
        # A chunked 200 (no length) cut short, then a 206 with "*": where
        # that range ends says nothing about the file's end, so the file is
        # asked for again whole.
        data = os.urandom(60000)
        digest = hashlib.sha256(data).hexdigest()
        etag = [("ETag", '"v2"')]

        def chunked_cut(h, d):
            h.send_response(200)
            for k, v in etag + [("Transfer-Encoding", "chunked")]:
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(b"7530\r\n" + d[:30000] + b"\r\n")
            h.wfile.flush()
            h.close_connection = True

        def star(h, d):
            reply(h, 206, etag + [("Content-Range", "bytes 30000-39999/*"),
                                  ("Content-Length", "10000")], d[30000:40000])

        def whole(h, d):
            reply(h, 200, etag + [("Content-Length", str(len(d)))], d)

        srv = Scripted(self, data, [chunked_cut, star, whole])
        self.restart_with(retries="3", retry_delay="10ms")
        r, res = self.fetch(srv.url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual((res["size"], res["sha256"]), (60000, digest))
        self.assertEqual([h.get("Range") for h in srv.seen], [FIRST_RANGE, "bytes=30000-", None])

    # ---- 6. a dripping body ends ------------------------------------------------

    def test_a_body_below_the_minimum_rate_is_dropped(self):
        # Chunked at about 200 bytes/s: below low_speed_limit for
        # low_speed_time, a timeout (retried like one).
        self.make_file("d.bin", 200000)
        self.restart_with(low_speed_limit="1K", low_speed_time="2s")
        (r, res), took = timed(lambda: self.fetch(self.origin.url("/chunked/d.bin?bps=200")))
        self.assertEqual(res["error"]["code"], "timeout", r)
        self.assertIn("low_speed_limit", res["error"]["message"])
        self.assertLess(took, 15)
        # A fast body under the same settings is fine.
        self.make_file("f.bin", 4 * MiB)
        r, res = self.fetch(self.origin.url("/files/f.bin"))
        self.assertEqual(r.rc, 0, r)

    # ---- 8. a full disk ----------------------------------------------------------

    @staticmethod
    def fill(path):
        """Fills the file system of path to the last byte; returns the
        filler's name."""
        filler = os.path.join(path, "filler")
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        try:
            with open(filler, "ab") as f:
                while True:
                    f.write(b"\0" * 512)
                    f.flush()
        except OSError:
            pass
        return filler

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_rm_and_gc_work_on_a_full_disk(self):
        small = self.hubd_on_tmpfs(32)
        for i in range(3):
            self.make_file("r%d.bin" % i, 2 * MiB, seed=i + 1)
            self.assertEqual(self.hubctl("fetch", self.origin.url("/files/r%d.bin" % i)).rc, 0)
        filler = self.fill(small)
        self.assertLess(os.statvfs(small).f_bavail, 2)
        r = self.hubctl("rm", self.origin.url("/files/r0.bin"))
        self.assertEqual(r.rc, 0, r)  # before: ERR io
        r = self.hubctl("gc", "--max-size", "0")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.stats()["cache_blobs"], 0)
        self.assertEqual(self.hubd.blob_files(), [])
        # Disk errors say no_space: a download now fails so.
        self.fill(small)
        self.make_file("n.bin", 1 * MiB, seed=9)
        r, res = self.fetch(self.origin.url("/files/n.bin"))
        self.assertEqual(res["error"]["code"], "no_space", r)
        os.unlink(filler)
        r, res = self.fetch(self.origin.url("/files/n.bin"))
        self.assertEqual(r.rc, 0, r)

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_a_commit_that_cannot_be_recorded_leaves_no_blob(self):
        # The file fits, its row does not: the commit fails with no_space
        # and removes the blob it linked (before: an unrecorded blob left
        # for the next start to quarantine, never reclaimed).
        small = self.hubd_on_tmpfs(16)
        self.make_file("warm.bin", 1000, seed=3)
        self.assertEqual(self.hubctl("fetch", self.origin.url("/files/warm.bin")).rc, 0)
        reserve = os.path.join(self.hubd.cache, "reserve")
        if os.path.exists(reserve):  # the room kept for removals is not for commits
            os.unlink(reserve)
        self.hubd.query("PRAGMA wal_checkpoint(TRUNCATE)")
        free = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
        size = free - 4096  # room for the file's pages, none for the WAL
        digest = self.make_file("tight.bin", size, seed=4)
        r, res = self.fetch(self.origin.url("/files/tight.bin"))
        self.assertEqual(res["error"]["code"], "no_space", r)
        names = [os.path.basename(p) for p in self.hubd.blob_files()]
        self.assertNotIn(digest, names)
        self.hubd.wait_no_partials()

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_a_download_that_fits_once_blobs_are_evicted_is_not_failed(self):
        # 23 MiB free, two 20 MiB blobs cached, a 30 MiB download: it fits
        # once one is evicted, and the eviction runs beside its first
        # writes; it must not fail meanwhile.
        self.hubd_on_tmpfs(64, min_free_space="1M")
        for i in range(2):
            self.make_file("c%d.bin" % i, 20 * MiB, seed=i + 1)
            self.assertEqual(self.hubctl("fetch", self.origin.url("/files/c%d.bin" % i)).rc, 0)
        self.make_file("big.bin", 30 * MiB, seed=7)
        r, res = self.fetch(self.origin.url("/files/big.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertGreaterEqual(self.stats()["evicted"], 1)

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_a_floor_other_data_holds_does_not_empty_the_cache(self):
        # Other files hold the room: evicting the whole cache would not keep
        # min_free_space, so nothing goes, and the download fails.
        small = self.hubd_on_tmpfs(64, min_free_space="40M")
        self.make_file("keep.bin", 10 * MiB, seed=1)
        self.assertEqual(self.hubctl("fetch", self.origin.url("/files/keep.bin")).rc, 0)
        with open(os.path.join(small, "other"), "wb") as f:
            f.write(b"\0" * (30 * MiB))
        self.make_file("one.bin", 1 * MiB, seed=2)
        r, res = self.fetch(self.origin.url("/files/one.bin"))
        self.assertEqual(res["error"]["code"], "no_space", r)
        st = self.stats()
        self.assertEqual((st["cache_blobs"], st["evicted"]), (1, 0))
        self.assertIn("more than the whole cache holds", self.hubd.read_log())

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_downloads_in_progress_count_against_the_free_space_floor(self):
        # min_free_space 40M on a 64M disk: a cached 10M blob is evicted to
        # make room for a 20M download; an endless chunked download stops
        # (no_space) before the disk is full instead of filling it.
        small = self.hubd_on_tmpfs(64, min_free_space="40M", max_inflight="1M")
        self.make_file("a.bin", 10 * MiB, seed=1)
        self.make_file("b.bin", 20 * MiB, seed=2)
        self.make_file("endless.bin", 60 * MiB, seed=3)
        self.assertEqual(self.hubctl("fetch", self.origin.url("/files/a.bin")).rc, 0)
        r = self.hubctl("fetch", self.origin.url("/files/b.bin"))
        self.assertEqual(r.rc, 0, r)
        st = self.stats()
        self.assertEqual((st["cache_blobs"], st["evicted"]), (1, 1))
        r, res = self.fetch(self.origin.url("/chunked/endless.bin"))
        self.assertEqual(res["error"]["code"], "no_space", r)
        self.assertIn("min_free_space", res["error"]["message"])
        sent = self.origin.stats()["bytes"]["/chunked/endless.bin"]
        self.assertLess(sent, 40 * MiB)  # before: until the disk was full (~60M)
        self.hubd.wait_no_partials()
        # Near the floor, not at the disk's end: the database's WAL (up to
        # 4 MiB before its checkpoint) grows after the last write's check.
        free = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
        self.assertGreater(free, 32 * MiB)

    def test_downloads_in_progress_count_against_max_cache_size(self):
        # max_cache_size 30M, two 10M blobs cached, two 12M downloads
        # running: both cached blobs go while they run (before: only room
        # for the one starting, the cache over its limit until the end).
        self.restart_with(max_cache_size="30M")
        for name in ("a", "b"):
            self.make_file(name, 10 * MiB, seed=ord(name))
            self.assertEqual(self.hubctl("fetch", self.origin.url("/files/" + name)).rc, 0)
        for name in ("c", "d"):
            self.make_file(name, 12 * MiB, seed=ord(name))
        procs = [self.hubctl_bg("fetch", self.origin.url(
            "/files/%s?stall_at=%d&stall_ms=3000" % (n, 6 * MiB))) for n in "cd"]
        wait_for(lambda: self.stats()["evicted"] == 2, timeout=5, what="room for both")
        self.assertEqual(self.stats()["cache_blobs"], 0)
        for p in procs:
            self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(self.stats()["cache_blobs"], 2)

    # ---- 9. the clock set back --------------------------------------------------

    @unittest.skipUnless(os.path.exists(FAKETIME_LIB), "needs libfaketime (faketime package)")
    def test_setting_the_clock_back_does_not_invert_eviction(self):
        # libfaketime steps hubd's wall clock (not its monotonic clock) a
        # day back, as an admin or NTP may. a was used after b, so b goes
        # first; and uptime does not go negative.
        stamp = os.path.join(self.tmp, "faketime")
        with open(stamp, "w") as f:
            f.write("+0\n")
        # NO_FAKE_STAT: file times stay real (a blob's identity is its
        # file's times, and the disk's clock did not move).
        env = {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME_TIMESTAMP_FILE": stamp,
               "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1", "NO_FAKE_STAT": "1",
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
        self.restart_with(env=env, max_cache_size="2500K")
        for name in "abc":
            self.make_file(name, 1 * MiB, seed=ord(name))
        url = {n: self.origin.url("/files/" + n) for n in "abc"}
        self.assertEqual(self.hubctl("fetch", url["a"]).rc, 0)
        self.assertEqual(self.hubctl("fetch", url["b"]).rc, 0)
        with open(stamp, "w") as f:
            f.write("-1d\n")
        r, res = self.fetch(url["a"])
        self.assertEqual(res["source"], "hit")
        self.assertEqual(self.hubctl("fetch", url["c"]).rc, 0)
        wait_for(lambda: self.stats()["evicted"] == 1, what="an eviction")
        r, res = self.fetch(url["a"])
        self.assertEqual(res["source"], "hit", "a was used last and must stay")
        r, res = self.fetch(url["b"])
        self.assertEqual(res["source"], "download")
        self.assertGreaterEqual(self.stats()["uptime"], 0)

    # ---- 13. descriptors held for clients that never read ---------------------

    def test_clients_that_never_read_pin_few_descriptors(self):
        # 14 sessions each send 330 FETCHes of a cached file in one write
        # and never read: each hit holds the blob open until its DONE goes.
        # hubd runs with 1024 descriptors; another user's hits still work.
        def limit_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        self.restart_with(preexec_fn=limit_fds, socket_mode="0666")
        self.make_file("c.bin", 1000)
        url = self.origin.url("/files/c.bin")
        self.assertEqual(self.hubctl("fetch", url).rc, 0)
        pid = self.hubd.proc.pid
        base = nfds(pid)
        line = b"FETCH id=%d url=" + url.encode() + b"\n"
        socks = flood(self.hubd.socket, b"".join(line % i for i in range(330)), 14)
        time.sleep(1)
        held = nfds(pid) - base
        print("\n  14 non-reading sessions: %d descriptors over the %d at rest" % (held, base))
        self.assertLess(held, 14 + 64 + 16, "descriptors: %d over the %d at rest" % (held, base))
        for _ in range(5):
            r = self.as_nobody("fetch", url)
            self.assertEqual(r.returncode, 0, r)
        for s in socks:
            s.close()
        wait_for(lambda: nfds(pid) <= base + 1, what="the descriptors to be closed")

    def test_an_unprivileged_hubd_keeps_few_descriptors_in_flight(self):
        # hubd as an ordinary user (as the hubd account): descriptors passed
        # to clients that never read stay in the kernel and count against
        # its uid, and past RLIMIT_NOFILE of them the kernel refuses every
        # client's (ETOOMANYREFS). Each session holds at most 16 in flight,
        # each uid 64: another user's hits still get theirs.
        work = os.path.join(self.tmp, "hub-nobody")
        os.makedirs(work)
        os.chown(work, 65534, 65534)

        def as_nobody():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        self.hubd.stop()
        os.chmod(self.tmp, 0o755)  # hubd must reach its config and folder
        self.hubd = Hubd(work, config=write_config(os.path.join(self.tmp, "nobody.conf"),
                                                   socket_mode="0666"),
                         preexec_fn=as_nobody)
        self.make_file("c.bin", 1000)
        url = self.origin.url("/files/c.bin")
        self.assertEqual(self.hubctl("fetch", url).rc, 0)
        # The machine's count of open files: other tests running beside
        # this one open files too, so each side is the least of a few looks,
        # and the least of three tries counts.
        def open_files():
            seen = []
            for _ in range(6):
                seen.append(int(open("/proc/sys/fs/file-nr").read().split()[0]))
                time.sleep(0.1)
            return min(seen)
        line = b"FETCH id=%d url=" + url.encode() + b"\n"
        tries = []
        for _ in range(3):
            files_before = open_files()
            socks = flood(self.hubd.socket, b"".join(line % i for i in range(330)), 8)
            time.sleep(1)
            tries.append(open_files() - files_before)
            for _ in range(3):  # another uid than the flooders' (root)
                r = self.as_nobody("fetch", url)
                self.assertEqual(r.returncode, 0, r)
            for s in socks:
                s.close()
            if tries[-1] < 8 + 64 + 100:
                break
            time.sleep(1)
        print("\n  8 non-reading sessions, unprivileged hubd: %s more open files" % tries)
        self.assertLess(min(tries), 8 + 64 + 100)

    def test_many_waiters_of_one_download_share_its_descriptor(self):
        # 60 requests in one non-reading session attached to one download:
        # their 60 DONE lines hold one descriptor, not 60.
        self.make_file("w.bin", 1 * MiB)
        url = self.origin.url("/files/w.bin?bps=%d" % (2 * MiB))
        pid = self.hubd.proc.pid
        base = nfds(pid)
        line = b"FETCH id=%d url=" + url.encode() + b"\n"
        socks = flood(self.hubd.socket, b"".join(line % i for i in range(60)), 1)
        wait_for(lambda: self.hubd.query("SELECT count(*) FROM entries") == [(1,)],
                 what="the commit")
        time.sleep(0.3)
        held = nfds(pid) - base
        self.assertLess(held, 8, "descriptors: %d over %d" % (held, base))
        socks[0].close()

    # ---- 14. a blob edited on disk -------------------------------------------------

    def edit_in_place(self, path):
        """Changes one byte of a file, keeping its size and its mtime (the
        ctime changes: no one but the kernel sets it)."""
        st = os.stat(path)
        with open(path, "r+b") as f:
            f.seek(10)
            b = f.read(1)
            f.seek(10)
            f.write(bytes([b[0] ^ 0xff]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    def test_a_blob_edited_on_disk_is_not_served(self):
        digest = self.make_file("v.bin", 300000)
        url = self.origin.url("/files/v.bin")
        r, res = self.fetch(url)
        self.edit_in_place(res["path"])
        # Even asked by digest: the hit notices and downloads again.
        r, res = self.fetch("--sha256", digest, url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["source"], "download")
        self.assertEqual(sha256_file(res["path"]), digest)
        self.assertEqual(self.origin.requests_for("/files/v.bin"), 2)
        self.assertEqual(self.stats()["bad_blobs"], 1)
        quarantined = os.listdir(os.path.join(self.hubd.cache, "quarantine"))
        self.assertEqual(quarantined, [digest])

    def test_a_blob_copied_to_a_new_file_is_still_served(self):
        # A backup restored or `cp -a` to a new disk: another inode and
        # ctime, the same bytes. Re-hashed, not thrown away.
        digest = self.make_file("k.bin", 300000)
        url = self.origin.url("/files/k.bin")
        r, res = self.fetch(url)
        path = res["path"]
        subprocess.run(["cp", "-a", path, path + ".new"], check=True)
        os.rename(path + ".new", path)
        r, res = self.fetch(url)
        self.assertEqual((res["source"], res["sha256"]), ("hit", digest))
        self.assertEqual(self.stats()["bad_blobs"], 0)
        r, res = self.fetch(url)  # its new identity recorded: a plain hit again
        self.assertEqual(res["source"], "hit")
        self.assertEqual(self.origin.requests_for("/files/k.bin"), 1)

    def test_background_verification_finds_a_rotten_blob(self):
        self.restart_with(verify_interval="1s")
        digest = self.make_file("b.bin", 200000)
        url = self.origin.url("/files/b.bin")
        r, res = self.fetch(url)
        self.edit_in_place(res["path"])
        # Nobody fetches it: the verifier finds it within a few seconds.
        wait_for(lambda: self.stats()["bad_blobs"] == 1, timeout=10, what="the verifier")
        self.assertEqual(self.hubd.query("SELECT count(*) FROM blobs"), [(0,)])
        self.assertIn("did not hash to its name", self.hubd.read_log())
        r, res = self.fetch(url)
        self.assertEqual((res["source"], res["sha256"]), ("download", digest))

    # ---- 15. signed URLs are not shown to other users ------------------------------

    def test_query_strings_are_shown_only_to_their_requesters_and_admins(self):
        self.restart_with(socket_mode="0666")
        self.make_file("p.bin", 1000)
        secret = "X-Amz-Signature=5ec7e7"
        url = self.origin.url("/files/p.bin?" + secret)
        self.assertEqual(self.hubctl("fetch", url).rc, 0)  # root asks
        r = self.as_nobody("ls", "--json")
        self.assertEqual(r.returncode, 0, r)
        self.assertNotIn(secret, r.stdout)
        self.assertIn("/files/p.bin?REDACTED", r.stdout)
        self.assertIn(secret, self.hubctl("ls", "--json").out)  # root: an admin
        # Once nobody asks for it too, nobody sees it whole.
        self.assertEqual(self.as_nobody("fetch", url).returncode, 0)
        self.assertIn(secret, self.as_nobody("ls", "--json").stdout)
        # STATUS: a running job of root's.
        self.make_file("slow.bin", 1 * MiB)
        slow = self.hubctl_bg("fetch", self.origin.url("/files/slow.bin?bps=200000&" + secret))
        wait_for(lambda: len(json.loads(self.hubctl("status", "--json").out)) == 1,
                 what="the job")
        out = self.as_nobody("status", "--json").stdout
        self.assertIn("REDACTED", out)
        self.assertNotIn(secret, out)
        self.assertEqual(slow.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main()
