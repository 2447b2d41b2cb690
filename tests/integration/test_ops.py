"""Operations: configuration checks and reload, eviction, the cache commands,
Prometheus output, systemd activation and notification, per-user mode."""

import array
import json
import os
import re
import signal
import socket
import subprocess
import time
import unittest

from harness import (HUBCTL, HUBD, SLOW, WRAPPER, Hubd, HubTestCase, sha256_file, stop_pid,
                     wait_for, write_config)

KiB = 1024
MiB = 1024 * 1024


def check_config(*args):
    return subprocess.run([HUBD, "--check-config"] + list(args), capture_output=True, text=True)


class ConfigTest(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="hubd-cfg-")
        self.addCleanup(__import__("shutil").rmtree, self.tmp, True)

    def conf(self, text):
        path = os.path.join(self.tmp, "hubd.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_check_config_prints_what_it_reads_back(self):
        path = self.conf("[hubd]\nmax_cache_size = 10G\nretries = 3\nsocket_mode = 0600\n"
                         "idle_timeout = 1500ms\n")
        r = check_config("--config", path, "--socket", "/tmp/x.sock")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("max_cache_size = 10G\n", r.stdout)
        self.assertIn("retries = 3\n", r.stdout)
        self.assertIn("socket_mode = 0600\n", r.stdout)
        self.assertIn("idle_timeout = 1500ms\n", r.stdout)
        self.assertIn("socket = /tmp/x.sock\n", r.stdout)  # flags win over the file
        # The output is itself a valid configuration with the same meaning.
        again = check_config("--config", self.conf(r.stdout))
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout, r.stdout)

    def test_worker_threads_are_checked_and_said(self):
        r = check_config("--config", self.conf("[hubd]\nworker_threads = 3\n"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("worker_threads = 3\n", r.stdout)
        self.assertIn("# 3 worker threads (worker_threads)\n", r.stdout)
        r = check_config("--config", self.conf("[hubd]\nworker_threads = 1025\n"))
        self.assertEqual(r.returncode, 2, r)
        self.assertIn(":2: bad value '1025' for key 'worker_threads': out of range (0 to 1024)",
                      r.stderr)

    def test_errors_name_file_line_and_key(self):
        cases = [("[hubd]\nretries = 3\nbogus = 1\n", ":3: unknown key 'bogus'"),
                 ("[hubd]\nmax_cache_size = 12X\n", ":2: bad value '12X' for key 'max_cache_size'"),
                 ("[hubd]\nsocket_mode = 0999\n", ":2: bad value '0999' for key 'socket_mode'"),
                 ("[other]\nretries = 1\n", ":2: unknown section [other]")]
        for text, want in cases:
            path = self.conf(text)
            r = check_config("--config", path)
            self.assertEqual(r.returncode, 2, (text, r))
            self.assertIn(path + want, r.stderr)
        r = check_config("--config", os.path.join(self.tmp, "missing.conf"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("No such file", r.stderr)


def recv_fd_fetch(sock_path, url):
    """FETCH over the raw protocol; returns (DONE fields, the passed fd)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall(b"FETCH id=1 url=%s\n" % url.encode())
    buf, fd = b"", None
    while b"\nDONE " not in b"\n" + buf and not buf.startswith(b"ERR"):
        data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(4))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fd = array.array("i", payload[:4])[0]
        if not data:
            break
        buf += data
    s.close()
    line = [l for l in buf.decode().splitlines() if l.startswith("DONE ")][0]
    return dict(kv.split("=", 1) for kv in line.split()[1:]), fd


class OpsTest(HubTestCase):
    def restart_with(self, **keys):
        self.hubd.stop()
        self.conf = write_config(os.path.join(self.tmp, "ops.conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-ops"), config=self.conf)

    def fetch(self, name):
        r = self.hubctl("fetch", "--json", self.origin.url("/files/" + name))
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out)

    def ls(self):
        r = self.hubctl("ls", "--json")
        self.assertEqual(r.rc, 0, r)
        return {e["url"].rsplit("/", 1)[1]: e for e in json.loads(r.out)}

    def pool_threads(self):
        """hubd's threads named as the process but its loop's: libuv's pool
        (the background thread is hubd-bg; nothing else runs here)."""
        task = "/proc/%d/task" % self.hubd.proc.pid
        names = []
        for t in os.listdir(task):
            try:
                with open(os.path.join(task, t, "comm")) as f:
                    names.append(f.read().strip())
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
        return names.count("hubd") - 1

    def test_the_pool_has_the_worker_threads_chosen(self):
        cores = len(os.sched_getaffinity(0))
        auto = max(4, min(128, cores + 2))
        cases = (({}, None, auto, "%d worker threads (automatic: %d cores)" % (auto, cores)),
                 ({"worker_threads": "3"}, None, 3, "3 worker threads (worker_threads)"),
                 ({}, "5", 5, "5 worker threads (UV_THREADPOOL_SIZE)"),
                 ({"worker_threads": "2"}, "5", 2, "2 worker threads (worker_threads; "
                  "UV_THREADPOOL_SIZE=5 in the environment passed over)"),
                 ({}, "lots", auto, "%d worker threads (automatic: %d cores; UV_THREADPOOL_SIZE="
                  "lots in the environment passed over, not a count of 1 to 1024)" % (auto, cores)))
        self.make_file("w", 1000)
        for i, (keys, env, n, said) in enumerate(cases):
            with self.subTest(keys=keys, env=env):
                self.hubd.stop()
                conf = write_config(os.path.join(self.tmp, "w%d.conf" % i), **keys)
                self.hubd = Hubd(os.path.join(self.tmp, "hub-w%d" % i), config=conf,
                                 env={"UV_THREADPOOL_SIZE": env} if env else None)
                self.assertIn(said, self.hubd.read_log())
                self.fetch("w")  # the pool's first work makes its threads
                if not WRAPPER:  # valgrind names threads its own way
                    wait_for(lambda: self.pool_threads() == n, what="%d pool threads" % n)

    def test_eviction_is_lru_and_spares_pinned_and_open_blobs(self):
        self.restart_with(max_cache_size="2560K")  # room for two 1 MiB files, not three
        for i, name in enumerate("abcd"):
            self.make_file(name, MiB, seed=i + 1)
        self.fetch("a")
        time.sleep(1.1)  # accessed times are in seconds
        self.fetch("b")
        time.sleep(1.1)
        self.assertEqual(self.fetch("a")["source"], "hit")  # a is now newer than b
        time.sleep(1.1)
        self.fetch("c")  # room is made before it is written: b goes, a stays
        self.assertEqual(sorted(self.ls()), ["a", "c"])
        self.assert_blobs_match_rows()
        # A pinned blob outlives newer ones; a blob a client holds open keeps
        # working for it after eviction.
        r = self.hubctl("pin", self.origin.url("/files/a"))
        self.assertEqual(r.rc, 0, r)
        done, fd = recv_fd_fetch(self.hubd.socket, self.origin.url("/files/c"))
        self.assertIsNotNone(fd)
        time.sleep(1.1)
        self.fetch("d")
        self.assertEqual(sorted(self.ls()), ["a", "d"])
        self.assertFalse(os.path.exists(done["path"]))
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        with open(os.path.join(self.root, "c"), "rb") as f:
            self.assertEqual(data, f.read())
        st = self.stats()
        self.assertEqual(st["evicted"], 2)
        self.assertLessEqual(st["cache_bytes"], 2560 * KiB)
        self.assert_blobs_match_rows()

    def test_eviction_runs_on_a_thread_of_lower_priority(self):
        """Eviction runs on hubd's background thread (bgwork.h), whose nice
        value is the loop's plus 10: a run of thousands of blobs must not
        take the CPU from the hits the loop answers meanwhile."""
        self.restart_with(max_cache_size="0")
        for i, name in enumerate("ab"):
            self.make_file(name, MiB, seed=i + 1)
            self.fetch(name)

        def thread(tid):
            """(name, nice, ns on a CPU) of one of hubd's threads."""
            task = "/proc/%d/task/%d" % (self.hubd.proc.pid, tid)
            with open(task + "/stat") as f:
                stat = f.read()
            with open(task + "/schedstat") as f:
                ran = int(f.read().split()[0])
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            return name, int(stat[stat.rindex(")") + 2:].split()[16]), ran

        tids = [int(t) for t in os.listdir("/proc/%d/task" % self.hubd.proc.pid)]
        bg = [t for t in tids if thread(t)[0] == "hubd-bg"]
        self.assertEqual(len(bg), 1, [thread(t) for t in tids])
        loop_nice = thread(self.hubd.proc.pid)[1]
        _, bg_nice, bg_ran = thread(bg[0])
        self.assertEqual(bg_nice, min(loop_nice + 10, 19))
        self.reload(max_cache_size="1M")
        wait_for(lambda: self.stats()["evicted"] == 1, what="the eviction")
        _, nice, ran = thread(bg[0])
        self.assertGreater(ran, bg_ran, "the eviction ran on another thread")
        self.assertEqual(nice, bg_nice)
        self.assertEqual(sorted(self.ls()), ["b"])

    def assert_blobs_match_rows(self):
        rows = {sha for sha, in self.hubd.query("SELECT sha256 FROM blobs")}
        files = {os.path.basename(p) for p in self.hubd.blob_files()}
        self.assertEqual(rows, files)
        for p in self.hubd.blob_files():
            self.assertEqual(sha256_file(p), os.path.basename(p))

    def test_cache_commands(self):
        da = self.make_file("a", 100 * KiB, seed=1)
        db = self.make_file("b", 200 * KiB, seed=2)
        self.fetch("a")
        self.fetch("b")
        # Two URLs for one blob: rm of one URL keeps the blob for the other.
        os.link(os.path.join(self.root, "a"), os.path.join(self.root, "a2"))
        self.fetch("a2")
        ls = self.ls()
        self.assertEqual(ls["a"]["pinned"], 0)
        self.assertEqual(ls["a"]["size"], 100 * KiB)
        r = self.hubctl("ls")
        self.assertIn("100.0 KiB", r.out)
        self.assertIn("PINNED", r.out)

        r = self.hubctl("pin", "--json", da)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.ls()["a"]["pinned"], 1)
        r = self.hubctl("unpin", self.origin.url("/files/a"))
        self.assertEqual((r.rc, r.out), (0, "unpinned\n"))
        self.assertEqual(self.ls()["a"]["pinned"], 0)

        r = self.hubctl("rm", self.origin.url("/files/a"))
        self.assertEqual((r.rc, r.out), (0, "removed\n"), r)
        self.assertEqual(sorted(self.ls()), ["a2", "b"])
        r = self.hubctl("rm", "--json", da)  # by digest: every entry naming it
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["result"]["removed_blob"], 1)
        self.assertEqual(sorted(self.ls()), ["b"])
        r = self.hubctl("rm", self.origin.url("/files/nothing"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("not_found", r.err)
        self.assertEqual(self.fetch("a")["source"], "download")  # gone means gone

        # verify finds a blob corrupted behind hubd's back, quarantines it
        # and forgets it; the next fetch downloads it again.
        path = os.path.join(self.hubd.cache, "blobs", db[:2], db)
        os.chmod(path, 0o644)
        with open(path, "r+b") as f:
            f.seek(1000)
            f.write(b"X")
        r = self.hubctl("verify", "--json")
        self.assertEqual(r.rc, 4, r)
        out = json.loads(r.out)
        self.assertEqual(out["result"]["checked"], 2)
        self.assertEqual([(b["sha256"], b["reason"]) for b in out["bad_blobs"]],
                         [(db, "content differs")])
        self.assertTrue(os.path.exists(os.path.join(self.hubd.cache, "quarantine", db)))
        self.assertNotIn("b", self.ls())
        time.sleep(1.1)  # accessed times are in seconds: b is now the newest
        self.assertEqual(self.fetch("b")["sha256"], db)
        r = self.hubctl("verify")
        self.assertEqual((r.rc, r.out), (0, "checked 2 blob(s), 0 bad\n"))

        r = self.hubctl("gc", "--max-size", "250K")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("evicted 1 blob(s), 100.0 KiB freed", r.out)
        self.assertEqual(sorted(self.ls()), ["b"])  # a was the older access
        r = self.hubctl("gc")  # no max_cache_size configured, none given
        self.assertEqual(r.rc, 1, r)
        self.assertIn("max_size", r.err)

    def test_targets_are_normalised_and_oversized_blobs_not_kept(self):
        self.restart_with(max_cache_size="1M")
        small = self.make_file("s", 300 * KiB, seed=1)
        big = self.make_file("big", 2 * MiB, seed=2)
        self.fetch("s")
        # Named as a user might: upper-case digest, scheme in capitals.
        r = self.hubctl("pin", small.upper())
        self.assertEqual(r.rc, 0, r)
        r = self.hubctl("unpin", self.origin.url("/files/s").replace("http://", "HTTP://"))
        self.assertEqual(r.rc, 0, r)
        # A file larger than the whole cache is handed out, then not kept;
        # the other blobs are not sacrificed for it.
        done, fd = recv_fd_fetch(self.hubd.socket, self.origin.url("/files/big"))
        with os.fdopen(fd, "rb") as f:
            self.assertEqual(len(f.read()), 2 * MiB)
        wait_for(lambda: not os.path.exists(done["path"]), what="the oversized blob to go")
        self.assertEqual(done["sha256"], big)
        self.assertEqual(sorted(self.ls()), ["s"])
        r = self.hubctl("rm", "--json", "0" * 64)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(json.loads(r.out)["error"]["code"], "not_found")

    def test_admin_verbs_need_root_or_the_admin_group(self):
        self.restart_with(socket_mode="0666")
        for d in (self.tmp, self.hubd.workdir):  # let another user reach the socket
            os.chmod(d, 0o755)
        digest = self.make_file("a", 1000)
        self.fetch("a")
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        for args in (["rm", digest], ["pin", digest], ["gc", "--max-size", "0"], ["verify"]):
            p = subprocess.run(nobody + self.hubctl_args(*args), capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, (args, p))
            self.assertIn("permission_denied", p.stderr)
        # Users still fetch and list.
        p = subprocess.run(nobody + self.hubctl_args("ls"), capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(len(self.ls()), 1)

    def test_stats_prometheus(self):
        self.make_file("a", 5000)
        self.fetch("a")
        self.fetch("a")
        r = self.hubctl("fetch", self.origin.url("/status/404"))
        self.assertEqual(r.rc, 1)
        r = self.hubctl("stats", "--prometheus")
        self.assertEqual(r.rc, 0, r)
        samples, types = {}, {}
        for line in r.out.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split()
                types[name] = kind
                continue
            if line.startswith("#"):
                self.assertTrue(line.startswith("# HELP "), line)
                continue
            m = re.fullmatch(r'([a-z_]+)(\{code="([a-z0-9_]+)"\})? (\d+)', line)
            self.assertIsNotNone(m, line)
            samples[(m.group(1), m.group(3))] = int(m.group(4))
            self.assertIn(m.group(1), types)
        self.assertEqual(samples[("hubd_hits_total", None)], 1)
        self.assertEqual(samples[("hubd_misses_total", None)], 2)
        self.assertEqual(samples[("hubd_cache_size_bytes", None)], 5000)
        self.assertEqual(samples[("hubd_errors_total", "http_4xx")], 1)
        self.assertEqual(types["hubd_hits_total"], "counter")
        self.assertEqual(types["hubd_cache_size_bytes"], "gauge")

    def test_sighup_reloads_what_can_change(self):
        self.restart_with(max_cache_size="0")
        for i, name in enumerate("abc"):
            self.make_file(name, MiB, seed=i + 1)
        self.fetch("a")
        time.sleep(1.1)
        self.fetch("b")
        write_config(self.conf, max_cache_size="1M", read_buffer_size="128K")
        os.kill(self.hubd.proc.pid, signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log(), what="the reload")
        self.assertIn("changes to read_buffer_size need a restart", self.hubd.read_log())
        # The new limit applies at once: down to 1 MiB, the older blob goes.
        wait_for(lambda: self.stats()["cache_bytes"] <= MiB, what="the eviction")
        self.assertEqual(sorted(self.ls()), ["b"])
        # A file that no longer parses changes nothing; hubd goes on.
        with open(self.conf, "a") as f:
            f.write("nonsense = 1\n")
        os.kill(self.hubd.proc.pid, signal.SIGHUP)
        wait_for(lambda: "reload refused" in self.hubd.read_log(), what="the refusal")
        self.assertIn("unknown key 'nonsense'", self.hubd.read_log())
        self.assertEqual(self.stats()["max_cache_size"], MiB)
        self.fetch("c")


    def reload(self, **keys):
        """Rewrites the config (atomically, as an editor saving it does: a
        half-written file would be read as it is) and sends SIGHUP; waits
        for the reload to be logged."""
        before = self.hubd.read_log().count("configuration reloaded")
        write_config(self.conf + ".new", **keys)
        os.rename(self.conf + ".new", self.conf)
        os.kill(self.hubd.proc.pid, signal.SIGHUP)
        wait_for(lambda: self.hubd.read_log().count("configuration reloaded") > before,
                 what="the reload")

    def test_a_lowered_limit_spares_the_running_download(self):
        # A reload that lowers max_file_size and deadline below what a
        # running download has reached applies to downloads that start after
        # it: the running one is not failed (it was failed at its next body
        # byte, too_large, and at its next tick, timeout).
        base = dict(low_speed_limit="0")
        self.restart_with(**base)
        digest = self.make_file("big", 4 * MiB, seed=5)
        self.make_file("next", 4 * MiB, seed=6)
        out = os.path.join(self.tmp, "big.out")
        p = self.hubctl_bg("fetch", "-o", out, self.origin.url("/files/big?bps=1000000"))
        self.addCleanup(p.kill)
        wait_for(lambda: self.origin.stats()["bytes"].get("/files/big", 0) > MiB,
                 timeout=30, what="the download to be under way")
        self.reload(max_file_size="1M", deadline="1s", **base)
        _, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(sha256_file(out), digest)
        self.assertEqual(self.origin.requests_for("/files/big"), 1)
        # The new limit holds for the next download.
        r = self.hubctl("fetch", self.origin.url("/files/next"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("too_large", r.err)

    def test_a_burst_of_reloads_under_load_fails_no_download(self):
        # Downloads of every kind in flight (one stream, segmented, with a
        # credential, many small ones committing), then SIGHUP once and 50
        # times at once, with settings that change, one that needs a
        # restart and a file that does not parse between them: every file
        # comes whole and right, none starts again from byte 0, STATS keeps
        # answering, and the daemon exits cleanly (under ASan: no
        # use-after-free of the settings a job reads).
        base = dict(low_speed_limit="0", segment_min_size="2M", segment_chunk_size="1M",
                    max_connections_per_download="3")
        self.restart_with(**base)
        digests = {n: self.make_file(n, 6 * MiB, seed=i + 1)
                   for i, n in enumerate(("plain", "seg", "cred"))}
        smalls = {"s%d" % i: self.make_file("s%d" % i, 3000 + i, seed=100 + i) for i in range(120)}
        out = {n: os.path.join(self.tmp, n + ".out") for n in digests}
        u = lambda n, q="": self.origin.url("/files/%s%s" % (n, q))
        procs = {
            "plain": self.hubctl_bg("fetch", "-o", out["plain"], u("plain", "?bps=1000000")),
            "seg": self.hubctl_bg("fetch", "-o", out["seg"], u("seg", "?bps=400000")),
            "cred": self.hubctl_bg("fetch", "-H", "Authorization: Bearer s3cret", "-o", out["cred"],
                                   u("cred", "?bps=1000000")),
        }
        names = sorted(smalls)
        for k in range(3):
            procs["small%d" % k] = self.hubctl_bg("fetch", "--json", *[u(n) for n in names[k::3]])
        for p in procs.values():
            self.addCleanup(p.kill)
        # All three transferring before any limit is lowered: a download
        # still queued then starts under the new settings, as it should.
        wait_for(lambda: all(self.origin.stats()["bytes"].get("/files/" + n, 0) > 512 * KiB
                             for n in digests),
                 timeout=30 * SLOW, what="the downloads to be under way")
        # The deadline is below the large downloads' 6 s but above what a
        # small one takes even under valgrind on a busy machine: a small
        # download that starts while it is in force keeps it (1 s failed
        # small ones there, as designed).
        variants = [dict(max_downloads="1"), dict(max_rate="300K"), dict(max_jobs_per_user="1"),
                    dict(max_file_size="1M", deadline="4s"), dict(max_cache_size="4M"),
                    dict(deny_networks="10.0.0.0/8"), dict(allow_users="root"),
                    dict(segment_chunk_size="2M", max_connections_per_download="1")]
        pid = self.hubd.proc.pid
        os.kill(pid, signal.SIGHUP)
        slowest = 0.0
        for i in range(50):
            if i % 9 == 4:
                with open(self.conf, "w") as f:
                    f.write("[hubd]\nretries = lots\n")
            else:
                write_config(self.conf + ".new", **dict(base, **variants[i % len(variants)]))
                os.rename(self.conf + ".new", self.conf)
            os.kill(pid, signal.SIGHUP)
            time.sleep(0.02)  # some settings stay in force while bytes come
            if i % 10 == 0:
                t = time.monotonic()
                self.stats()
                slowest = max(slowest, time.monotonic() - t)
        for _ in range(50):
            os.kill(pid, signal.SIGHUP)
        write_config(self.conf, **base)
        os.kill(pid, signal.SIGHUP)
        for name, p in procs.items():
            so, se = p.communicate(timeout=120)
            failed = [ln for ln in so.decode().splitlines() if '"ok":true' not in ln]
            self.assertEqual(p.returncode, 0, "%s: %s%s" % (name, se.decode(), failed))
            if name.startswith("small"):
                lines = so.decode().splitlines()  # one JSON object per file
                self.assertEqual(len(lines), len(names[int(name[-1])::3]))
                for item in map(json.loads, lines):
                    self.assertEqual(item["sha256"], smalls[item["url"].rsplit("/", 1)[1]])
        for name, digest in digests.items():
            self.assertEqual(sha256_file(out[name]), digest, name)
            # Never asked again from byte 0: the requests other than the
            # segments' (ranges from further in) are the first one alone.
            path = "/files/" + name
            self.assertEqual(self.origin.requests_for(path) - len(self.origin.resume_starts(path)),
                             1, name)
        self.assertLess(slowest, 2.0 * SLOW)
        log = self.hubd.read_log()
        self.assertIn("reload refused, settings unchanged", log)
        self.assertNotIn("restarting", log)

class ServiceTest(HubTestCase):
    """hubd under systemd's protocols, with the real tools: socket activation
    by systemd-socket-activate, and a notify socket of our own."""

    def test_socket_activation_and_notify(self):
        self.hubd.stop()
        sock = os.path.join(self.tmp, "activated.sock")
        notify_path = os.path.join(self.tmp, "notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        self.addCleanup(notify.close)
        cache = os.path.join(self.tmp, "svc-cache")
        log = open(os.path.join(self.tmp, "svc.log"), "wb")
        self.addCleanup(log.close)
        # It passes the launched process only the variables named with -E.
        proc = subprocess.Popen(["systemd-socket-activate", "-l", sock,
                                 "-E", "NOTIFY_SOCKET=" + notify_path,
                                 "-E", "CACHE_DIRECTORY=" + cache,
                                 "-E", "JOURNAL_STREAM=8:12345", HUBD, "--log-level",
                                 "debug", "--config", write_config(
                                     os.path.join(self.tmp, "svc.conf"))],
                                stdout=log, stderr=log)
        self.addCleanup(stop_pid, proc)
        wait_for(lambda: os.path.exists(sock), what="the listening socket")
        # hubd starts on the first connection, on the socket it was given.
        self.make_file("a", 3000)
        r = subprocess.run([HUBCTL, "--socket", sock, "fetch", self.origin.url("/files/a")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r)
        self.assertTrue(r.stdout.startswith(cache + "/blobs/"), r.stdout)  # CACHE_DIRECTORY
        notify.settimeout(10)
        msgs = []
        while not any("READY=1" in m for m in msgs):
            msgs.append(notify.recv(4096).decode())
        self.assertTrue(any(m.startswith("STATUS=serving") for m in msgs), msgs)
        self.assertEqual(stop_pid(proc), 0)
        while not any("STOPPING=1" in m for m in msgs):
            msgs.append(notify.recv(4096).decode())
        with open(os.path.join(self.tmp, "svc.log"), "rb") as f:
            text = f.read().decode()
        self.assertIn("the socket systemd passed", text)
        # Under journald every line carries its syslog priority.
        lines = [l for l in text.splitlines() if l and not l.startswith("Listening")
                 and not l.startswith("Communication") and not l.startswith("Execing")]
        self.assertTrue(lines)
        for l in lines:
            self.assertRegex(l, r"^<[3-7]>", l)
        self.assertIn("<6>hubd 0.1.0 listening", text)
        self.assertNotIn("runtime error", text)
        self.assertTrue(os.path.exists(sock), "the passed socket is systemd's to remove")
        self.hubd.start()  # the fixture's clean exit check


class PerUserTest(HubTestCase):
    def user_env(self, system_socket):
        env = dict(os.environ)
        env.pop("HUBD_SOCKET", None)
        run = os.path.join(self.tmp, "run")
        os.makedirs(run, 0o700, exist_ok=True)
        env.update(XDG_RUNTIME_DIR=run, HOME=os.path.join(self.tmp, "home"),
                   HUBD_SYSTEM_SOCKET=system_socket, HUBD_BIN=HUBD)
        env.pop("XDG_CACHE_HOME", None)
        return env

    def run_ctl(self, env, *args):
        return subprocess.run([HUBCTL] + list(args), env=env, capture_output=True, text=True,
                              timeout=60)

    def test_autostart_and_stop(self):
        env = self.user_env(os.path.join(self.tmp, "no-system.sock"))
        digest = self.make_file("a", 4000)
        r = self.run_ctl(env, "fetch", self.origin.url("/files/a"))
        self.assertEqual(r.returncode, 0, r)
        m = re.search(r"started a per-user hubd \(pid (\d+)\)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        pid = int(m.group(1))
        self.addCleanup(lambda: os.kill(pid, signal.SIGKILL) if os.path.exists(
            "/proc/%d" % pid) else None)
        home_cache = os.path.join(self.tmp, "home", ".cache", "hubd")
        self.assertEqual(r.stdout.strip(), os.path.join(home_cache, "blobs", digest[:2], digest))
        sock = os.path.join(self.tmp, "run", "hubd.sock")
        self.assertEqual(os.stat(sock).st_mode & 0o777, 0o600)
        # The next command finds it running: no second daemon.
        r = self.run_ctl(env, "fetch", "--json", self.origin.url("/files/a"))
        self.assertEqual(json.loads(r.stdout)["source"], "hit")
        self.assertNotIn("started", r.stderr)
        r = self.run_ctl(env, "start")
        self.assertEqual((r.returncode, r.stdout), (0, sock + "\n"))
        # Its owner may administer it.
        r = self.run_ctl(env, "verify")
        self.assertEqual(r.returncode, 0, r)
        r = self.run_ctl(env, "stop")
        self.assertEqual(r.returncode, 0, r)
        self.assertFalse(os.path.exists("/proc/%d" % pid) and
                         open("/proc/%d/stat" % pid).read().split()[2] != "Z")
        r = self.run_ctl(env, "stop")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("no per-user hubd is running", r.stderr)

    def test_autostarted_daemon_inherits_the_proxy_variables(self):
        # The per-user daemon hubctl starts goes through the caller's proxy
        # (curl's variables): here one on a closed port, so the fetch fails
        # as the proxy's, naming it, and the origin sees nothing.
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()
        env = self.user_env(os.path.join(self.tmp, "no-system.sock"))
        env["http_proxy"] = "http://127.0.0.1:%d" % port
        self.make_file("a", 4000)
        r = self.run_ctl(env, "fetch", self.origin.url("/files/a"))
        m = re.search(r"started a per-user hubd \(pid (\d+)\)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        pid = int(m.group(1))
        self.addCleanup(lambda: os.kill(pid, signal.SIGKILL) if os.path.exists(
            "/proc/%d" % pid) else None)
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("proxy", r.stderr)
        self.assertIn("127.0.0.1:%d" % port, r.stderr)
        self.assertEqual(self.origin.requests_for("/files/a"), 0)
        r = self.run_ctl(env, "stop")
        self.assertEqual(r.returncode, 0, r)

    def test_a_planted_tmp_folder_is_refused(self):
        # Without XDG_RUNTIME_DIR the per-user socket is in /tmp/hubd-UID:
        # another user who made that folder first must not get our fetches.
        d = "/tmp/hubd-%d" % os.getuid()
        if os.path.lexists(d):
            self.skipTest(d + " exists already")
        os.mkdir(d)
        self.addCleanup(os.rmdir, d)
        os.chmod(d, 0o777)
        os.chown(d, 65534, 65534)
        env = self.user_env(os.path.join(self.tmp, "no-system.sock"))
        del env["XDG_RUNTIME_DIR"]
        r = self.run_ctl(env, "start")
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("not a private folder of yours", r.stderr)
        self.assertEqual(os.listdir(d), [])

    def test_a_system_daemon_wins(self):
        env = self.user_env(self.hubd.socket)  # the fixture's hubd plays the system one
        self.make_file("a", 4000)
        r = self.run_ctl(env, "fetch", self.origin.url("/files/a"))
        self.assertEqual(r.returncode, 0, r)
        self.assertNotIn("per-user", r.stderr)
        self.assertTrue(r.stdout.startswith(self.hubd.cache), r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "run", "hubd.sock")))


if __name__ == "__main__":
    unittest.main()
