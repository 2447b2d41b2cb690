"""Memory at scale.

A thousand slow downloads in flight at once (64 KiB each, at 8 KiB/s a
connection, from nginx) must not hold a thousand full read buffers: a stream
reads into small buffers until it is fast (bufpool_meter_next), and a slow
batch is handed on after half a second (BATCH_MAX_AGE_MS) instead of waiting
for read_buffer_size bytes. Before: 88 MB peak RSS for this crowd, then 45-50
MiB; the goal set for it was 64 MiB and the stretch 32 MiB (bench/bench.sh
BENCH_CROWD=1 prints the exact figure). Small buffers come from slabs of their
own, a batch has room for a few buffers in itself, an idle stream holds no
buffer, and a slow download checkpoints per 64 KiB, not per write: 27.6-29.3
MiB. The bound here is 40 MiB, generous for a loaded machine, and under what
the build before measured.
"""

import json
import os
import socket
import sqlite3
import statistics
import subprocess
import time
import unittest

import cachefill
import crowd
import hits
import idle_clients
import misses
from harness import HERE, free_port, Hubd, HubTestCase, wait_for, write_config

NGINX_ORIGIN = os.path.join(HERE, "..", "..", "scripts", "nginx-origin.sh")
SANITIZED = os.environ.get("HUBD_SANITIZED") == "1"
KiB = 1024


class CrowdTest(HubTestCase):
    def start_nginx(self, rate):
        """nginx serving self.root under /capped/ at `rate` per connection."""
        ngx = os.path.join(self.tmp, "nginx")
        port = subprocess.run([NGINX_ORIGIN, "freeport"], check=True, capture_output=True,
                              text=True).stdout.strip()
        env = dict(os.environ, NGINX_LIMIT_RATE=rate, NGINX_CONNECTIONS="2048")
        subprocess.run([NGINX_ORIGIN, "start", ngx, self.root, port], check=True, env=env,
                       capture_output=True)
        self.addCleanup(lambda: subprocess.run([NGINX_ORIGIN, "stop", ngx], check=True))
        return "http://127.0.0.1:%s" % port, os.path.join(ngx, "access.log")

    def test_a_thousand_slow_downloads_hold_little_memory(self):
        count = 1000
        sha = self.make_file("f.bin", 64 * KiB)
        base, access_log = self.start_nginx("8k")
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "crowd.conf"), max_downloads=count,
                            max_per_host=count, max_jobs_per_user=count)
        self.hubd = Hubd(os.path.join(self.tmp, "crowd"), config=conf,
                         extra_args=["--log-level", "info"])
        r = crowd.run(self.hubd.socket, self.hubd.proc.pid, base + "/capped/f.bin", sha, count,
                      timeout=90)
        print("\n  %d downloads of 64 KiB at 8 KiB/s: peak RSS %d KiB (at start %d), %.1f s"
              % (count, r["peak_rss_kib"], r["start_rss_kib"], r["wall_s"]))
        self.assertEqual((r["ok"], r["errors"]), (count, {}), r)
        # All at once: 8 s each, so the crowd took about one download's time.
        self.assertEqual(r["max_in_flight"], count)
        self.assertLess(r["wall_s"], 40, r)
        with open(access_log) as f:
            gets = [line.split("\t") for line in f if line.startswith("GET\t/capped/f.bin")]
        self.assertEqual(len(gets), count)
        self.assertTrue(all(g[3] == str(64 * KiB) for g in gets))
        if SANITIZED:
            self.skipTest("RSS not bounded under the sanitizers (their shadow and quarantine)")
        self.assertLess(r["peak_rss_kib"], 40 * KiB, r)


class StatsAtScaleTest(HubTestCase):
    """STATS reads counters, not the table. Before, every
    STATS summed the blobs on the loop (`SELECT sum(size), count(*)`):
    2.3-3.5 ms at 20k entries, 17 ms at 100k, and every other client of the
    daemon waited meanwhile."""

    N = 20000

    def stats_line(self, s, verb=b"STATS"):
        s.sendall(verb + b"\n")
        line = b""
        while not line.endswith(b"\n"):
            chunk = s.recv(65536)
            self.assertTrue(chunk, "hubd closed the session")
            line += chunk
        return dict(f.split("=", 1) for f in line.decode().split()[1:] if "=" in f)

    def test_stats_at_20k_entries_is_answered_from_counters(self):
        # 20k blobs on disk and a database that is no database at all: the
        # start-up rebuild records them all (db_add_blobs, the counters'
        # path at start), as fast as a test can make 20k rows.
        self.assertEqual(self.hubd.stop(), 0)
        total = cachefill.fill(self.hubd.cache, self.N)
        self.hubd.start()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self.hubd.socket)
        self.addCleanup(s.close)
        st = self.stats_line(s)
        self.assertEqual((int(st["cache_blobs"]), int(st["cache_bytes"])), (self.N, total), st)
        # Against the round trip of a line hubd answers at once (an unknown
        # verb: ERR bad_request), asked in turns, so that the machine's
        # speed and noise fall on both alike.
        took = {b"STATS": [], b"NOPE": []}
        for _ in range(300):
            for verb, times in took.items():
                t = time.perf_counter()
                self.stats_line(s, verb)
                times.append(time.perf_counter() - t)
        stats, base = (statistics.median(took[v]) for v in (b"STATS", b"NOPE"))
        print("\n  STATS at %d entries: median %.3f ms, an ERR's round trip %.3f ms (%.1fx)" %
              (self.N, stats * 1e3, base * 1e3, stats / base))
        # Generous: about 1.5x here; the scan it replaced made it 30x.
        self.assertLess(stats / base, 5.0)


class IdleClientsTest(HubTestCase):
    """An idle client costs what it uses. Before, each
    session held a 16 KiB read buffer and a 16 KiB line buffer (33 KiB of
    RSS each), each kept-alive front connection a 16 KiB head buffer and its
    request's 14 KiB (26-30 KiB), and 5,000 clients left 142 MB behind when
    they closed. Now reads land in one buffer per server and what a read
    leaves is copied out, a split line holds what it needs, a front request
    allocates its buffers when its bytes come, and malloc_trim runs in the
    pool after a burst (memtrim.h)."""

    def test_idle_clients_cost_little_and_their_memory_goes_back(self):
        port = free_port()
        self.assertEqual(self.hubd.stop(), 0)
        conf = write_config(os.path.join(self.tmp, "idle.conf"),
                            http_listen="127.0.0.1:%d" % port, socket_mode="0666")
        self.hubd = Hubd(os.path.join(self.tmp, "idle"), config=conf,
                         extra_args=["--log-level", "info"])
        self.make_file("hit", 1000)
        url = self.origin.url("/files/hit")
        r = self.hubctl("fetch", url)  # the front's answers are hits from now on
        self.assertEqual(r.rc, 0, r)
        os.chmod(self.tmp, 0o755)  # the front's other uids run python from here
        out = idle_clients.measure(self.hubd.proc.pid, self.hubd.socket, sessions=1000,
                                   front_port=port, target=url, conns=512)
        for kind, m in sorted(out.items()):
            print("\n  %d idle %s: %.1f KiB each (RSS %d -> %d KiB), %d KiB left after they "
                  "closed" % (m["n"], kind, m["per_client_kib"], m["base_kib"], m["open_kib"],
                              m["left_kib"]), end="")
        print()
        if SANITIZED:
            self.skipTest("RSS not bounded under the sanitizers (their shadow and quarantine)")
        # Generous: about 1-2 KiB each here; the goal is 4 KiB.
        self.assertLess(out["sessions"]["per_client_kib"], 8, out)
        self.assertLess(out["front"]["per_client_kib"], 8, out)
        # Half of the rise, at most, stays (malloc_trim gives back whole free pages).
        for kind in ("sessions", "front"):
            m = out[kind]
            self.assertLess(m["left_kib"], max(512, (m["open_kib"] - m["base_kib"]) / 2), out)


class HitsTest(HubTestCase):
    """A hit writes nothing. Its use (the LRU order,
    `accessed`, who asked) is queued in memory and written with others once
    a second, and its blob's recorded identity is read on a connection that
    never waits for the writer. Before, every hit wrote three rows in three
    transactions with their fsyncs (p50 0.73 ms, 1,300 hits/s on one
    session), and waited for any commit or eviction in progress."""

    def test_hits_go_on_while_the_database_is_locked_for_writing(self):
        urls = []
        for i in range(5):
            self.make_file("h%d" % i, 2000 + i, seed=i + 1)
            urls.append(self.origin.url("/files/h%d" % i))
            r = self.hubctl("fetch", urls[-1])
            self.assertEqual(r.rc, 0, r)
        # Another writer holds the database (an admin's sqlite3, a backup):
        # hubd's writer would wait for it (busy_timeout: 10 s).
        lock = sqlite3.connect(os.path.join(self.hubd.cache, "hubd.db"), isolation_level=None,
                               timeout=1)
        self.addCleanup(lock.close)
        lock.execute("BEGIN IMMEDIATE")
        t = time.monotonic()
        r = hits.measure(self.hubd.socket, urls[:4], count=300, timeout=5)
        took = time.monotonic() - t
        print("\n  300 hits with the database locked: %.1f s, p50 %.3f ms, p99 %.3f ms"
              % (took, r["p50_ms"], r["p99_ms"]))
        self.assertLess(took, 10)  # each waited 10 s before
        lock.execute("ROLLBACK")
        # The uses were kept: h4, fetched last but not hit since, is now the
        # least recently used, and LIST (most recent first) shows it last.
        r = self.hubctl("ls", "--json")
        self.assertEqual(r.rc, 0, r)
        order = [row["url"] for row in json.loads(r.out)]
        self.assertEqual(order[-1], urls[4], order)
        self.assertEqual(set(order[:4]), set(urls[:4]), order)


    def test_a_hit_whose_path_is_cached_is_answered_on_the_loop(self):
        # Its blob's path in the kernel's lookup cache (openat2
        # RESOLVE_CACHED) and its file the one recorded: the hit needs no
        # pool item (two thread wake-ups each way, about half of a hit's
        # CPU). Before, every hit went through the pool.
        urls, paths = [], []
        for i in range(4):
            self.make_file("l%d" % i, 3000 + i, seed=i + 7)
            urls.append(self.origin.url("/files/l%d" % i))
            r = self.hubctl("fetch", "--json", urls[-1])
            self.assertEqual(r.rc, 0, r)
            paths.append(json.loads(r.out)["path"])
        before = self.stats()
        hits.measure(self.hubd.socket, urls, count=200, timeout=30)
        st = self.stats()
        served = st["hits"] - before["hits"]
        on_loop = st["hits_on_loop"] - before.get("hits_on_loop", 0)
        print("\n  %d of %d hits on the loop" % (on_loop, served))
        self.assertEqual(served, 250)  # 50 to warm up
        self.assertGreater(on_loop, served * 3 // 4, st)
        # A file changed under its name is still caught: the loop sees a
        # file that is not the one recorded and hands the hit to the pool,
        # which re-hashes, quarantines and downloads again.
        os.chmod(paths[0], 0o644)
        with open(paths[0], "r+b") as f:
            f.write(b"X")
        r = self.hubctl("fetch", urls[0])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.stats()["bad_blobs"], before["bad_blobs"] + 1)
        self.assertEqual(self.origin.requests_for("/files/l0"), 2)


def syncfs_stands_for_fsync(path):
    """As hubd's store.c decides: Linux 5.17 or later, and ext4, XFS,
    btrfs or tmpfs."""
    release = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    kind = subprocess.run(["stat", "-f", "-c", "%t", path], check=True, capture_output=True,
                          text=True).stdout.strip()
    return release >= (5, 17) and int(kind, 16) in (0xEF53, 0x58465342, 0x9123683E, 0x01021994)


class GroupCommitTest(HubTestCase):
    """Downloads that finish together share a commit:
    their names, one transaction for their rows, one flush of the disk for
    the small files' data (a syncfs). Before, each small file took its own
    fsyncs and transactions under the writer's lock, one after another:
    400-900 files/s from a local nginx. Every DONE still comes only once
    its own row is durable: a kill -9 right after the last DONE loses
    nothing."""

    def test_small_files_share_commits_and_each_is_durable_at_its_done(self):
        n = 240
        urls = []
        for i in range(n):
            self.make_file("s%d" % i, 4096, seed=1000 + i)
            urls.append(self.origin.url("/files/s%d" % i))
        r = misses.measure(self.hubd.socket, urls, sessions=4, window=32, pid=self.hubd.proc.pid)
        st = self.stats()
        print("\n  %d small misses: %.0f/s, %.2f ms of hubd CPU each, %d commits in %d groups"
              % (n, r["per_s"], r["cpu_ms_each"], st["commits"], st["commit_groups"]))
        self.assertEqual(st["commits"], n)
        self.assertLess(st["commit_groups"], n * 3 / 4, st)  # shared: about 10 a group here
        # The groups spread over 8 folders or more made their names durable
        # with one syncfs where that stands for each folder's fsync. With
        # 10 files or more a group on average, the largest has 10 or more:
        # all in fewer than 8 of 256 folders about once in a thousand.
        if not syncfs_stands_for_fsync(self.hubd.cache):
            self.assertEqual(st["commit_name_syncs"], 0, st)
        elif st["commits"] >= 10 * st["commit_groups"]:
            self.assertGreater(st["commit_name_syncs"], 0, st)
        self.hubd.kill9()  # right after the last DONE
        self.hubd.start()
        r = hits.measure(self.hubd.socket, urls, count=n)  # each a hit, or it fails
        self.assertEqual(self.stats()["misses"], 0)

    def test_a_download_waiting_for_its_commit_holds_no_slot(self):
        """A job whose bytes are in and that waits for its commit has no
        connection: it no longer counts against max_downloads,
        max_per_host or its user's max_jobs_per_user. Before, it kept the
        next download queued, so that a flood of small files went half
        downloading, half committing, and each group took half of
        max_jobs_per_user (groups of 4, 1,000 files/s)."""
        self.assertEqual(self.hubd.stop(), 0)
        conf = write_config(os.path.join(self.tmp, "slot.conf"), max_jobs_per_user=1)
        self.hubd = Hubd(os.path.join(self.tmp, "slot"), config=conf)
        for name in ("c1", "c2", "c3"):
            self.make_file(name, 4096, seed=len(name) + ord(name[1]))
        # Another writer holds the database: c1's commit waits for it.
        lock = sqlite3.connect(os.path.join(self.hubd.cache, "hubd.db"), isolation_level=None,
                               timeout=1)
        self.addCleanup(lock.close)
        lock.execute("BEGIN IMMEDIATE")
        s = hits.Session(self.hubd.socket)
        self.addCleanup(s.s.close)
        for i, name in enumerate(("c1", "c2", "c3")):
            s.s.sendall(b"FETCH id=%d url=%s\n" % (i, self.origin.url("/files/" + name).encode()))
        # c2 and c3 download one after the other (one slot) while c1 waits.
        wait_for(lambda: self.origin.requests_for("/files/c3") == 1, timeout=5,
                 what="c2 and c3 downloaded while c1's commit waits")
        st = self.stats()
        self.assertEqual((st["commits"], st["jobs_queued"], st["jobs_active"]), (0, 0, 3), st)
        lock.execute("ROLLBACK")
        done = set()
        while len(done) < 3:
            line, fds = s.line()
            for fd in fds:
                os.close(fd)
            self.assertFalse(line.startswith(b"ERR"), line)
            if line.startswith(b"DONE"):
                done.add(line.split(b"id=")[1].split(b" ")[0])
        self.assertEqual(self.stats()["commits"], 3)


if __name__ == "__main__":
    unittest.main()
