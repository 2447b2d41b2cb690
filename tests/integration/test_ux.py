"""What a new user hits. Each test drives hubctl as that user
would, and checks what it is told."""

import os
import re
import shutil
import signal
import subprocess
import time
import unittest

from harness import HUBCTL, HUBD, SLOW, Hubd, HubTestCase, wait_for, write_config

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class SocketChoiceTest(HubTestCase):
    def user_env(self, system_socket, owner=None):
        """hubctl's environment for a user without a daemon of their own
        yet: a private runtime dir and a home (owned by `owner`, a uid)."""
        env = dict(os.environ)
        env.pop("HUBD_SOCKET", None)
        env.pop("XDG_CACHE_HOME", None)
        run, home = os.path.join(self.tmp, "run"), os.path.join(self.tmp, "home")
        for d in (run, home):
            os.makedirs(d, 0o700, exist_ok=True)
            if owner is not None:
                os.chown(d, owner, owner)
        env.update(XDG_RUNTIME_DIR=run, HOME=home, HUBD_SYSTEM_SOCKET=system_socket, HUBD_BIN=HUBD)
        return env

    def stop_per_user(self, env, prefix=()):
        subprocess.run(list(prefix) + [HUBCTL, "stop"], env=env, capture_output=True, timeout=30)

    def test_read_only_commands_never_start_a_daemon(self):
        env = self.user_env(os.path.join(self.tmp, "no-system.sock"))
        self.addCleanup(self.stop_per_user, env)
        for args in (["status"], ["stats"], ["ls"], ["stats", "--json"]):
            r = subprocess.run([HUBCTL] + args, env=env, capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 3, r)  # EXIT_UNREACHABLE
            self.assertIn("no hubd is running", r.stderr)
            self.assertIn("does not start one", r.stderr)
            self.assertNotIn("started a per-user hubd", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "run", "hubd.sock")), args)

    def test_a_system_socket_that_refuses_the_user_is_named_before_the_per_user_daemon(self):
        self.restart_with_group("daemon")
        digest = self.make_file("a.bin", 5000)
        env = self.user_env(self.hubd.socket, owner=65534)
        self.addCleanup(self.stop_per_user, env, NOBODY)
        r = subprocess.run(NOBODY + [HUBCTL, "fetch", "--json", self.origin.url("/files/a.bin")],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertIn("the system hubd at %s refused you (permission denied)" % self.hubd.socket,
                      r.stderr)
        self.assertIn("ask an admin to run `adduser nobody daemon`, then log in again", r.stderr)
        self.assertIn("a per-user hubd with its own cache", r.stderr)
        # And then it goes on, with a daemon of the user's own.
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(digest, r.stdout)
        self.assertRegex(r.stderr, r"started a per-user hubd \(pid \d+\)")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "run", "hubd.sock")))

    def test_an_explicit_socket_that_refuses_the_user_says_how_to_get_in(self):
        self.restart_with_group("daemon")
        r = subprocess.run(NOBODY + [HUBCTL, "--socket", self.hubd.socket, "status"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("Permission denied", r.stderr)
        self.assertIn("`adduser nobody daemon`", r.stderr)

    def test_the_per_user_daemon_reads_the_users_config_and_keeps_a_dated_bounded_log(self):
        env = self.user_env(os.path.join(self.tmp, "no-system.sock"))
        self.addCleanup(self.stop_per_user, env)
        conf_dir = os.path.join(env["HOME"], ".config", "hubd")
        os.makedirs(conf_dir)
        with open(os.path.join(conf_dir, "hubd.conf"), "w") as f:
            f.write("[hubd]\nmax_file_size = 500\n")  # a limit of the user's own
        log = os.path.join(env["XDG_RUNTIME_DIR"], "hubd.log")
        with open(log, "wb") as f:  # an old log past its bound: rotated at start
            f.write(b"x" * (5 << 20))
        self.make_file("big", 1000)
        r = subprocess.run([HUBCTL, "fetch", self.origin.url("/files/big")], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("too_large", r.stderr)
        self.assertEqual(os.path.getsize(log + ".1"), 5 << 20)
        with open(log) as f:
            lines = [l for l in f.read().splitlines() if l]
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d{4} hubd: ")

    def test_a_group_joined_counts_without_a_reload(self):
        # admin_group is read from the peer's own groups at connect
        # (SO_PEERGROUPS), not only from the group's members listed at
        # start: nobody, given group daemon as a supplementary group (as a
        # login after `adduser nobody daemon` would), administers at once.
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "adm.conf"), socket_mode="0666",
                            admin_group="daemon")
        self.hubd = Hubd(os.path.join(self.tmp, "adm"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)
        base = ["setpriv", "--reuid=65534", "--regid=65534"]
        r = subprocess.run(base + ["--clear-groups"] + self.hubctl_args("verify"),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("permission_denied", r.stderr)
        r = subprocess.run(base + ["--groups=daemon"] + self.hubctl_args("verify"),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("checked 0 blob(s), 0 bad", r.stdout)


class FetchHabitsTest(HubTestCase):
    """curl's and aria2's habits: -o - to stdout, outputs that line up,
    -o checked before a byte is fetched, a final line with time and rate."""

    def test_dash_o_dash_writes_the_file_to_stdout(self):
        self.make_file("s.bin", 300000)
        r = subprocess.run(self.hubctl_args("fetch", "-o", "-", self.origin.url("/files/s.bin")),
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r)
        with open(os.path.join(self.root, "s.bin"), "rb") as f:
            self.assertEqual(r.stdout, f.read())
        for bad in (["--json"], [self.origin.url("/files/s.bin")]):  # one URL, no other stdout
            r = self.hubctl("fetch", "-o", "-", self.origin.url("/files/s.bin"), *bad)
            self.assertEqual(r.rc, 2, r)

    def test_a_failed_url_keeps_its_line_empty(self):
        da = self.make_file("a", 100)
        db = self.make_file("b", 200)
        r = self.hubctl("fetch", self.origin.url("/files/a"), self.origin.url("/files/nope"),
                        self.origin.url("/files/b"))
        self.assertEqual(r.rc, 1, r)
        lines = r.out.split("\n")
        self.assertEqual(len(lines), 4, r.out)  # three lines, the last ending in \n
        self.assertTrue(lines[0].endswith("/" + da), r.out)
        self.assertEqual(lines[1], "")
        self.assertTrue(lines[2].endswith("/" + db), r.out)
        self.assertIn("/files/nope", r.err)

    def test_an_unwritable_destination_is_refused_before_downloading(self):
        self.make_file("c", 100)
        for dest, says in (("/nonexistent/x", "/nonexistent is not a folder"),
                           (os.path.join(self.root, "c", "x"), "is not a folder")):
            r = self.hubctl("fetch", "-o", dest, self.origin.url("/files/c"))
            self.assertEqual(r.rc, 2, r)
            self.assertIn(says, r.err)
        # A folder the user may not write in (nobody, a folder of root's).
        locked = os.path.join(self.tmp, "locked")
        os.mkdir(locked, 0o755)
        self.restart_open_socket()
        r = subprocess.run(NOBODY + self.hubctl_args("fetch", "-o", os.path.join(locked, "c"),
                                                     self.origin.url("/files/c")),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("cannot write in %s: Permission denied" % locked, r.stderr)
        self.assertEqual(self.origin.requests_for("/files/c"), 0)  # nothing was fetched

    def restart_open_socket(self):
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "open.conf"), socket_mode="0666")
        self.hubd = Hubd(os.path.join(self.tmp, "open"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)

    def test_headers_without_o_warn_that_the_path_is_not_readable(self):
        self.make_file("h", 100)
        self.restart_open_socket()
        r = subprocess.run(NOBODY + self.hubctl_args("fetch", "-H", "X-Api-Key: k",
                                                     self.origin.url("/files/h")),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("readable by hubd alone", r.stderr)
        self.assertIn("use -o FILE", r.stderr)
        cat = subprocess.run(NOBODY + ["cat", r.stdout.strip()], capture_output=True, text=True)
        self.assertIn("Permission denied", cat.stderr)  # which is true
        r = subprocess.run(NOBODY + self.hubctl_args("fetch", "-H", "X-Api-Key: k", "-o", "-",
                                                     self.origin.url("/files/h")),
                           capture_output=True, timeout=60)
        self.assertEqual(len(r.stdout), 100)
        self.assertNotIn(b"readable by hubd alone", r.stderr)

    def test_a_narrow_terminal_cuts_the_name_not_the_numbers(self):
        # hubctl on a pty 40 columns wide: each drawn line fits, and the
        # numbers stay whole while the long name is cut from its start.
        import fcntl
        import pty
        import struct
        import termios
        name = "a-very-long-model-file-name-for-tests.safetensors"
        self.make_file(name, 2 * 1024 * 1024)
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
            os.execv(HUBCTL, self.hubctl_args("fetch", self.origin.url(
                "/files/%s?bps=%d" % (name, 2 << 20))))
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, out)
        text = out.decode("utf-8", "replace")
        frames = [f.replace("\x1b[K", "") for f in text.replace("\r\n", "\n").split("\r")]
        drawn = [f.strip("\n") for f in frames if "MiB" in f]
        self.assertTrue(drawn, text)
        for f in drawn:
            self.assertLessEqual(len(f.split("\n")[0]), 39, f)
        last = [f for f in drawn if "done" in f][-1].split("\n")[0]
        self.assertRegex(last, r"^\.\.\.[-a-z.]*  2\.0 MiB  done in \d+\.\d s, [0-9.]+ [KM]iB/s$")

    def test_dash_i_reads_urls_and_their_digests(self):
        da = self.make_file("a", 100, seed=1)
        db = self.make_file("b", 200, seed=2)
        self.make_file("c", 300, seed=3)
        listing = os.path.join(self.tmp, "urls.txt")
        with open(listing, "w") as f:
            f.write("# models\n%s sha256=%s\n\n%s\n%s sha256=%s\n"
                    % (self.origin.url("/files/a"), da.upper(), self.origin.url("/files/b"),
                       self.origin.url("/files/c"), "0" * 64))
        r = self.hubctl("fetch", "-i", listing, self.origin.url("/files/b"))
        self.assertEqual(r.rc, 4, r)  # c's digest is wrong: a verification failure
        lines = r.out.split("\n")
        self.assertEqual(len(lines), 5, r.out)  # the argument first, then the file's, in order
        self.assertTrue(lines[0].endswith(db) and lines[1].endswith(da) and
                        lines[2].endswith(db), r.out)
        self.assertEqual(lines[3], "")
        self.assertIn("hash_mismatch", r.err)
        # From stdin; a bad line is named with its number, before anything is fetched.
        p = subprocess.run(self.hubctl_args("fetch", "-i", "-"), input="%s\n%s oops\n"
                           % (self.origin.url("/files/a"), self.origin.url("/files/b")),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2, p)
        self.assertIn("-i -:2: after the URL only sha256=HEX", p.stderr)

    def test_the_last_line_says_size_time_and_rate(self):
        self.make_file("t.bin", 2 * 1024 * 1024)
        r = self.hubctl("fetch", "--progress", self.origin.url("/files/t.bin?bps=%d" % (4 << 20)))
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.err, r"t\.bin 2\.0 MiB done in 0\.[4-9] s, [0-9.]+ MiB/s\n$")


class ProgressStatesTest(HubTestCase):
    """The progress line says what is happening, not "queued" for 12 s."""

    def restart_retrying(self, **keys):
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "retry.conf"), retries="5", **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "retry"), config=conf)

    def test_a_refused_connection_gives_up_in_seconds(self):
        self.restart_retrying()  # retry_delay 500ms: the budget is 0.5+1+2+4+8 s
        from harness import free_port
        port = free_port()
        t = time.monotonic()
        r = self.hubctl("fetch", "--progress", "http://127.0.0.1:%d/x" % port)
        took = time.monotonic() - t
        self.assertEqual(r.rc, 1, r)
        self.assertIn("connection refused (after 3 attempts)", r.err)
        self.assertLess(took, 6)
        self.assertRegex(r.err, r"x retrying in \d+s \(cannot connect to [^)]*connection refused, "
                                r"attempt 2 of 6\)")

    def test_retrying_says_why_and_when(self):
        self.restart_retrying(retry_delay="1s")
        self.make_file("r.bin", 1000)
        r = self.hubctl("fetch", "--progress", self.origin.url("/files/r.bin?fail_first=2"))
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.err, r"r\.bin retrying in [12]s \(.*503.*, attempt 2 of 6\)")
        self.assertRegex(r.err, r"r\.bin retrying in \d+s \(.*503.*, attempt 3 of 6\)")
        self.assertRegex(r.err, r"r\.bin 1000 B done")

    def test_waiting_for_the_origin_says_connecting(self):
        self.make_file("w.bin", 1000)
        r = self.hubctl("fetch", "--progress", self.origin.url("/files/w.bin?delay_ms=1500"))
        self.assertEqual(r.rc, 0, r)
        self.assertIn("w.bin connecting\n", r.err)
        self.assertNotIn("queued", r.err)


class ConfigUxTest(HubTestCase):
    def test_check_config_fails_on_an_unreadable_ca_bundle(self):
        for key, value, says in (("ca_file", "/nonexistent/ca.pem", "cannot read ca_file"),
                                 ("ca_path", "/nonexistent/certs", "cannot read ca_path")):
            conf = write_config(os.path.join(self.tmp, "ca.conf"), **{key: value})
            r = subprocess.run([HUBD, "--config", conf, "--check-config"], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r)
            self.assertIn("%s %s: No such file or directory" % (says, value), r.stderr)

    def test_one_version_for_hubd_hubctl_and_the_wire(self):
        d = subprocess.run([HUBD, "--version"], capture_output=True, text=True).stdout.split()
        c = subprocess.run([HUBCTL, "--version"], capture_output=True, text=True).stdout.split()
        self.assertEqual((d[0], c[0]), ("hubd", "hubctl"))
        self.assertEqual(d[1], c[1])
        self.assertRegex(d[1], r"^\d+\.\d+\.\d+$")
        import socket as so
        s = so.socket(so.AF_UNIX, so.SOCK_STREAM)
        s.connect(self.hubd.socket)
        s.sendall(b"HELLO proto=1\n")
        self.assertIn(b"server=hubd/%s" % d[1].encode(), s.recv(4096))
        s.close()


class FreshnessTest(HubTestCase):
    """A cached URL is served forever unless asked to revalidate (--refresh,
    revalidate_after): a 304 serves the cached file, a new body replaces
    it, and a digest the cache has never needs the network."""

    def fetch_json(self, *args):
        import json
        r = self.hubctl("fetch", "--json", *args)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out)

    def change(self, name, size, seed):
        path = os.path.join(self.root, name)
        st = os.stat(path)
        digest = self.make_file(name, size, seed=seed)
        os.utime(path, (st.st_atime + 10, st.st_mtime + 10))  # a new Last-Modified too
        return digest

    def test_refresh_revalidates_and_a_304_is_a_hit(self):
        v1 = self.make_file("f.bin", 100000)
        url = self.origin.url("/files/f.bin")
        self.assertEqual(self.fetch_json(url)["source"], "download")
        j = self.fetch_json("--refresh", url)
        self.assertEqual((j["sha256"], j["source"]), (v1, "hit"))
        st = self.origin.stats()
        self.assertEqual(st["requests"]["/files/f.bin"], 2)  # the second, a 304
        self.assertEqual(st["bytes"]["/files/f.bin"], 100000)
        stats = self.stats()
        self.assertEqual((stats["revalidated"], stats["hits"], stats["errors"]), (1, 1, 0))
        self.assertIn("not modified at the origin (304)", self.hubd.read_log())

    def test_a_changed_file_is_served_until_refreshed_then_replaced(self):
        v1 = self.make_file("c.bin", 5000, seed=1)
        url = self.origin.url("/files/c.bin")
        self.assertEqual(self.fetch_json(url)["sha256"], v1)
        v2 = self.change("c.bin", 6000, seed=2)
        self.assertEqual(self.fetch_json(url)["sha256"], v1)  # the default: never asks
        self.assertEqual(self.origin.requests_for("/files/c.bin"), 1)
        j = self.fetch_json("--refresh", url)
        self.assertEqual((j["sha256"], j["source"], j["size"]), (v2, "download", 6000))
        self.assertEqual(self.fetch_json(url)["sha256"], v2)  # the entry moved
        self.assertEqual(self.origin.requests_for("/files/c.bin"), 2)

    def test_revalidate_after_asks_once_an_entry_is_that_old(self):
        self.hubd.stop()
        self.hubd = Hubd(os.path.join(self.tmp, "reval"), config=write_config(
            os.path.join(self.tmp, "reval.conf"), revalidate_after="2s"))
        v1 = self.make_file("r.bin", 3000, seed=1)
        url = self.origin.url("/files/r.bin")
        self.assertEqual(self.fetch_json(url)["sha256"], v1)
        self.assertEqual(self.fetch_json(url)["source"], "hit")  # young: no network
        self.assertEqual(self.origin.requests_for("/files/r.bin"), 1)
        time.sleep(2.1)
        self.assertEqual(self.fetch_json(url)["source"], "hit")  # old: a 304
        self.assertEqual(self.origin.requests_for("/files/r.bin"), 2)
        self.assertEqual(self.fetch_json(url)["source"], "hit")  # validated just now
        self.assertEqual(self.origin.requests_for("/files/r.bin"), 2)
        v2 = self.change("r.bin", 3500, seed=2)
        time.sleep(2.1)
        self.assertEqual(self.fetch_json(url)["sha256"], v2)

    def test_a_digest_asked_for_is_never_answered_by_a_304(self):
        # A revalidation is running; a request for other bytes (a digest the
        # cache does not have) joins it. The origin says 304: the cached
        # file is not what that request asked for, so it downloads and is
        # checked (hash_mismatch here), never handed the cached digest.
        v1 = self.make_file("j.bin", 2000)
        url = self.origin.url("/files/j.bin?delay_ms=1500")
        self.fetch_json(url)
        a = self.hubctl_bg("fetch", "--json", "--refresh", url)
        time.sleep(0.5)
        b = self.hubctl("fetch", "--json", "--sha256", "1" * 64, url)
        import json
        self.assertEqual(b.rc, 4, b)
        self.assertEqual(json.loads(b.out)["error"]["code"], "hash_mismatch", b)
        out, _ = a.communicate(timeout=30)
        self.assertEqual(json.loads(out)["sha256"], v1)

    def test_a_flood_of_refreshes_shares_the_running_revalidation(self):
        # Refreshes that come while the URL's revalidation runs join it:
        # the origin is asked once however many ask (each one that comes
        # after it ended asks again, as it should: the file may have changed
        # since), and plain hits of the URL are served meanwhile.
        v1 = self.make_file("fl.bin", 50000)
        url = self.origin.url("/files/fl.bin?delay_ms=1500")
        self.fetch_json(url)
        first = self.hubctl_bg("fetch", "--json", "--refresh", url)
        self.addCleanup(first.kill)
        wait_for(lambda: self.origin.requests_for("/files/fl.bin") == 2, what="the revalidation")
        flood = [self.hubctl_bg("fetch", "--json", "--refresh", url) for _ in range(40)]
        for p in flood:
            self.addCleanup(p.kill)
        t = time.monotonic()
        self.assertEqual(self.fetch_json(url)["source"], "hit")  # not held up by the flood
        self.assertLess(time.monotonic() - t, 1.0 * SLOW)
        import json
        for p in [first] + flood:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual((json.loads(out)["sha256"], json.loads(out)["source"]), (v1, "hit"))
        self.assertEqual(self.origin.requests_for("/files/fl.bin"), 2)  # the download, one 304
        self.assertEqual(self.stats()["revalidated"], 1)

    def test_a_refresh_joins_a_running_download_and_restarts_nothing(self):
        # A download others wait on is running: refreshes of its URL join it
        # (it is fresher than any cached copy) and neither restart nor fail
        # it; every waiter gets the whole file, asked from the origin once.
        v1 = self.make_file("run.bin", 2 * 1024 * 1024)
        url = self.origin.url("/files/run.bin?bps=1000000")
        other = self.hubctl_bg("fetch", "--json", url)
        self.addCleanup(other.kill)
        wait_for(lambda: self.origin.stats()["bytes"].get("/files/run.bin", 0) > 200000,
                 what="the download to be under way")
        refreshers = [self.hubctl_bg("fetch", "--json", "--refresh", url) for _ in range(20)]
        import json
        for p in [other] + refreshers:
            self.addCleanup(p.kill)
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(json.loads(out)["sha256"], v1)
        self.assertEqual(self.origin.requests_for("/files/run.bin"), 1)
        self.assertEqual(self.origin.resume_starts("/files/run.bin"), [])  # nothing asked again
        self.assertEqual(self.stats()["attached"], 20)

    def test_a_digest_the_cache_has_never_needs_the_network(self):
        v1 = self.make_file("d.bin", 2000)
        url = self.origin.url("/files/d.bin")
        self.fetch_json(url)
        j = self.fetch_json("--refresh", "--sha256", v1, url)
        self.assertEqual(j["source"], "hit")
        self.assertEqual(self.origin.requests_for("/files/d.bin"), 1)


class MaxRateTest(HubTestCase):
    def test_max_rate_caps_all_downloads_together(self):
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "rate.conf"), max_rate="4M")
        self.hubd = Hubd(os.path.join(self.tmp, "rate"), config=conf)
        MiB = 1024 * 1024
        self.make_file("r1.bin", 4 * MiB, seed=1)
        self.make_file("r2.bin", 4 * MiB, seed=2)
        t = time.monotonic()
        r = self.hubctl("fetch", self.origin.url("/files/r1.bin"), self.origin.url("/files/r2.bin"))
        took = time.monotonic() - t
        self.assertEqual(r.rc, 0, r)
        # 8 MiB at 4 MiB/s for both: about 2 s (a burst of 400 KiB aside).
        self.assertGreater(took, 1.7, "max_rate did not hold: %.2f s" % took)
        self.assertLess(took, 6)
        # SIGHUP without it: at the origin's speed again.
        with open(conf, "w") as f:
            f.write("[hubd]\nretries = 0\nmin_free_space = 0\n")
        import signal as sig
        self.hubd.proc.send_signal(sig.SIGHUP)
        from harness import wait_for
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log(), what="the reload")
        self.make_file("r3.bin", 8 * MiB, seed=3)
        t = time.monotonic()
        r = self.hubctl("fetch", self.origin.url("/files/r3.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertLess(time.monotonic() - t, took * 0.75)  # the same 8 MiB, uncapped


def check(value, schema, where="$"):
    """A small JSON schema check: schema is a type (int, str, bool), a list
    [item schema], or a dict {key: schema} where a key ending in '?' is
    optional and no other key may appear. Returns the first mismatch, or
    None."""
    if isinstance(schema, list):
        if not isinstance(value, list):
            return "%s: not a list" % where
        for i, v in enumerate(value):
            bad = check(v, schema[0], "%s[%d]" % (where, i))
            if bad:
                return bad
        return None
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return "%s: not an object" % where
        keys = {k.rstrip("?"): k.endswith("?") for k in schema}
        for k in value:
            if k not in keys:
                return "%s: unexpected key %r" % (where, k)
        for k, optional in keys.items():
            if k not in value:
                if not optional:
                    return "%s: %r missing" % (where, k)
                continue
            bad = check(value[k], schema[k + "?" if optional else k], "%s.%s" % (where, k))
            if bad:
                return bad
        return None
    if schema is int and isinstance(value, bool):
        return "%s: a boolean where a number belongs" % where
    return None if isinstance(value, schema) else "%s: %r is not %s" % (
        where, value, getattr(schema, "__name__", schema))


ERROR = {"code": str, "message": str}
FETCH_OK = {"url": str, "ok": bool, "path": str, "sha256": str, "size": int, "source": str}
FETCH_FAILED = {"url": str, "ok": bool, "error": ERROR}
ENTRY = {"url": str, "sha256": str, "size": int, "created": int, "accessed": int, "pinned": bool,
         "cred": (str, type(None))}
JOB = {"job": int, "url": str, "state": str, "done": int, "total?": int, "rate": int,
       "waiters": int, "connections": int, "source": str, "mirror?": str, "users?": [int]}
ADMIN_FAILED = {"ok": bool, "error": ERROR}


class JsonTest(HubTestCase):
    """One JSON style across hubctl's commands, checked against a schema:
    numbers as numbers, booleans as booleans, objects not encoded strings,
    one error shape, no protocol ids; stats named as the Prometheus
    metrics."""

    def json_of(self, *args, rc=0):
        import json
        r = self.hubctl(*(args + ("--json",)))
        self.assertEqual(r.rc, rc, r)
        return [json.loads(line) for line in r.out.splitlines() if line.strip()] \
            if args[0] == "fetch" else json.loads(r.out)

    def assertSchema(self, value, schema):
        self.assertIsNone(check(value, schema), value)

    def test_every_command_speaks_one_style(self):
        self.make_file("a", 1000)
        url = self.origin.url("/files/a")
        ok, failed = self.json_of("fetch", url, self.origin.url("/files/nope"), rc=1)
        self.assertSchema(ok, FETCH_OK)
        self.assertSchema(failed, FETCH_FAILED)
        self.assertEqual((ok["ok"], failed["ok"], failed["error"]["code"]), (True, False, "http_404"))
        self.assertSchema(self.json_of("ls"), [ENTRY])
        self.assertSchema(self.json_of("pin", url), {"ok": bool, "result": {}})
        self.assertIs(self.json_of("ls")[0]["pinned"], True)
        self.assertSchema(self.json_of("rm", "http://127.0.0.1:9/none", rc=1), ADMIN_FAILED)
        self.assertSchema(self.json_of("verify"), {"ok": bool, "result": {"checked": int, "bad": int},
                                                   "bad_blobs": [{"sha256": str, "reason": str}]})
        self.assertSchema(self.json_of("gc", "--max-size", "0"),
                          {"ok": bool, "result": {"evicted": int, "freed": int, "size": int,
                                                  "target": int, "held": int, "held_blobs": int,
                                                  "holds": int, "holders": int,
                                                  "pinned_bytes": int, "pinned_blobs": int,
                                                  "waited": bool}})
        self.assertSchema(self.json_of("rm", url), {"ok": bool, "result": {"removed_blob": bool}})
        # status, with a job running.
        self.make_file("slow", 1 << 20)
        p = self.hubctl_bg("fetch", self.origin.url("/files/slow?bps=65536"))
        from harness import wait_for
        wait_for(lambda: self.json_of("status"), what="a job")
        self.assertSchema(self.json_of("status"), [JOB])
        self.hubctl("cancel", self.origin.url("/files/slow?bps=65536"))
        p.communicate(timeout=10)

    def test_stats_are_named_as_the_prometheus_metrics(self):
        self.make_file("a", 1000)
        self.hubctl("fetch", self.origin.url("/files/nope"))
        st = self.json_of("stats")
        self.assertEqual(st["hubd_errors_total"], {"http_4xx": 1})  # an object, not "http_4xx:1"
        self.assertEqual(st["hubd_misses_total"], 1)
        prom = self.hubctl("stats", "--prometheus").out
        import re
        names = set(re.findall(r"^# TYPE (\S+) ", prom, re.M))
        self.assertEqual(set(st), names)
        for k, v in st.items():
            self.assertTrue(isinstance(v, int) or k == "hubd_errors_total", (k, v))


class CompletionTest(unittest.TestCase):
    SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                          "hubctl", "completion", "hubctl.bash")

    def complete(self, *words):
        """What bash completion offers for the last of words."""
        line = " ".join(words)
        cmd = ('source "%s"; COMP_WORDS=(%s); COMP_CWORD=%d; _hubctl; printf "%%s\\n" '
               '"${COMPREPLY[@]}"' % (self.SCRIPT, " ".join("'%s'" % w for w in words),
                                      len(words) - 1))
        r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, (line, r.stderr))
        return sorted(x for x in r.stdout.split("\n") if x)

    def test_commands_and_their_options(self):
        self.assertEqual(self.complete("hubctl", "fe"), ["fetch"])
        self.assertEqual(self.complete("hubctl", "--socket", "/s", "ca"), ["cancel"])
        self.assertEqual(self.complete("hubctl", "fetch", "--re"), ["--refresh"])
        self.assertEqual(self.complete("hubctl", "stats", "--p"), ["--prometheus"])
        self.assertIn("-", self.complete("hubctl", "fetch", "-o", ""))

    def test_every_command_of_the_help_is_completed(self):
        r = subprocess.run([HUBCTL, "--help"], capture_output=True, text=True)
        import re
        section = r.stdout.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
        commands = set(re.findall(r"^  ([a-z]+)  ", section, re.M))
        self.assertIn("cancel", commands)
        commands.add("unpin")  # described on pin's line
        self.assertEqual(set(self.complete("hubctl", "")), commands)


class CancelTest(HubTestCase):
    """hubctl cancel: a user undoes a download of theirs; others' waiters
    keep theirs going; an admin may stop any."""

    def setUp(self):
        super().setUp()
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "open.conf"), socket_mode="0666")
        self.hubd = Hubd(os.path.join(self.tmp, "open"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)
        self.make_file("slow.bin", 4 * 1024 * 1024)
        self.url = self.origin.url("/files/slow.bin?bps=65536")  # a minute

    def status(self):
        import json
        return json.loads(self.hubctl("status", "--json").out)

    def wait_job(self, waiters=1):
        from harness import wait_for
        wait_for(lambda: any(j["waiters"] == waiters and j["done"] > 0
                             for j in self.status()), what="the download to run")
        return self.status()[0]["job"]

    def test_a_user_cancels_their_own_download_and_its_partial_goes(self):
        p = self.hubctl_bg("fetch", self.url)
        self.wait_job()
        r = self.hubctl("cancel", self.url)
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.out, r"^cancelled job \d+ \(1 waiting request\(s\) told\)\n$")
        out, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 1, err)
        self.assertIn(b"cancelled by uid 0", err)
        self.assertEqual(self.status(), [])
        self.hubd.wait_no_partials()
        self.assertEqual(self.hubd.tmp_files(), [])
        r = self.hubctl("cancel", self.url)  # nothing left to cancel
        self.assertEqual(r.rc, 1, r)
        self.assertIn("no such download", r.err)

    def test_another_users_waiter_keeps_it_going_until_an_admin_stops_it(self):
        p = subprocess.Popen(NOBODY + self.hubctl_args("fetch", self.url),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        job = self.wait_job()
        mine = self.hubctl_bg("fetch", self.url)  # root attaches: two users wait
        self.wait_job(waiters=2)
        r = subprocess.run(NOBODY + self.hubctl_args("cancel", str(job)), capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("1 of the 2 requests waiting on job %d are other users'" % job, r.stderr)
        self.assertEqual(self.status()[0]["waiters"], 2)  # still going
        # An admin (root) may end it for everyone.
        r = self.hubctl("cancel", str(job))
        self.assertEqual(r.rc, 0, r)
        self.assertIn("(2 waiting request(s) told)", r.out)
        for proc in (p, mine):
            out, err = proc.communicate(timeout=10)
            self.assertEqual(proc.returncode, 1, err)
            self.assertIn(b"cancelled", err)

    def test_status_shows_who_asked_to_admins_and_to_them(self):
        p = subprocess.Popen(NOBODY + self.hubctl_args("fetch", self.url),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        job = self.wait_job()
        mine = self.hubctl_bg("fetch", self.url)
        self.wait_job(waiters=2)
        self.assertEqual(self.status()[0]["users"], [65534, 0])  # root: an admin
        r = self.hubctl("status")
        self.assertIn("nobody,root", r.out)
        self.assertIn("USERS", r.out.splitlines()[0])
        import json
        r = subprocess.run(NOBODY + self.hubctl_args("status", "--json"), capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(json.loads(r.stdout)[0]["users"], [65534, 0])  # nobody asked too
        self.hubctl("cancel", str(job))
        for proc in (p, mine):
            proc.communicate(timeout=10)
        # Another user's download: who asked is not shown to a stranger.
        mine = self.hubctl_bg("fetch", self.url)
        self.wait_job()
        r = subprocess.run(NOBODY + self.hubctl_args("status", "--json"), capture_output=True,
                           text=True, timeout=30)
        self.assertNotIn("users", json.loads(r.stdout)[0])
        self.hubctl("cancel", self.url)
        mine.communicate(timeout=10)

    def test_a_user_may_not_cancel_a_download_of_someone_else(self):
        mine = self.hubctl_bg("fetch", self.url)
        job = self.wait_job()
        r = subprocess.run(NOBODY + self.hubctl_args("cancel", self.url), capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("1 of the 1 requests waiting on job %d are other users'" % job, r.stderr)
        self.assertEqual(self.status()[0]["job"], job)
        self.hubctl("cancel", str(job))
        mine.communicate(timeout=10)


if __name__ == "__main__":
    unittest.main()


class HelpAndAdminToolsTest(HubTestCase):
    """Each command's own --help; ls tells rows apart by credential;
    doctor checks the socket it was given; a min_free_space the cache's
    file system cannot hold is said at start and by --check-config; a
    no_space says whose disk is full and whom to ask."""

    def test_each_command_has_its_own_help(self):
        for words, says in ((["fetch"], "fetch [--sha256 HEX]"), (["gc"], "gc [--max-size SIZE]"),
                            (["rm"], "--force"), (["ls"], "CRED"), (["doctor"], "HUBD_SOCKET"),
                            (["hf", "download"], "hf download REPO"), (["hf", "ls"], "--all"),
                            (["hf", "rm"], "hf rm REPO")):
            for argv in (words + ["--help"], ["help"] + words, words + ["-h"]):
                r = subprocess.run([HUBCTL] + argv, capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, (argv, r))
                self.assertTrue(r.stdout.startswith("Usage: hubctl"), (argv, r.stdout))
                self.assertIn(says, r.stdout, argv)
                self.assertNotIn("Commands:", r.stdout, argv)  # not the whole program's
        r = subprocess.run([HUBCTL, "help", "nope"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r)

    def test_ls_shows_which_rows_differ_by_credential(self):
        import json
        self.make_file("a", 1000)
        url = self.origin.url("/files/a")
        for extra in ((), ("-H", "Authorization: Bearer tok-one"),
                      ("-H", "Authorization: Bearer tok-two")):
            r = self.hubctl("fetch", url, *extra)
            self.assertEqual(r.rc, 0, r)
        r = self.hubctl("ls")
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        self.assertIn("CRED", lines[0])
        at = lines[0].index("CRED")
        creds = sorted(line[at:].split()[0] for line in lines[1:])
        self.assertEqual(len(lines), 4, r.out)  # one URL, three rows
        self.assertEqual(creds[0], "-")
        self.assertRegex(creds[1], r"^[0-9a-f]{8}$")
        self.assertRegex(creds[2], r"^[0-9a-f]{8}$")
        self.assertNotEqual(creds[1], creds[2])
        rows = json.loads(self.hubctl("ls", "--json").out)
        self.assertEqual(sorted(str(e["cred"]) for e in rows), sorted(["None"] + creds[1:]))
        self.assertNotIn("tok-one", r.out)

    def test_doctor_checks_the_socket_it_was_given(self):
        r = self.hubctl("doctor")  # --socket: the test's daemon
        self.assertEqual(r.rc, 0, r)
        self.assertIn(self.hubd.socket, r.out)
        self.assertIn("hubd answers", r.out)
        self.assertNotIn("system hubd at", r.out)
        gone = os.path.join(self.tmp, "nobody-here.sock")
        env = dict(os.environ, HUBD_SOCKET=gone)
        r = subprocess.run([HUBCTL, "doctor"], capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn(gone, r.stdout)
        self.assertIn("HUBD_SOCKET", r.stdout)
        self.assertNotIn("/run/hubd", r.stdout)
        self.assertNotIn("systemctl", r.stdout)

    @unittest.skipUnless(os.geteuid() == 0, "mounting a small tmpfs needs root")
    def test_min_free_space_past_the_file_system_is_said_and_no_space_names_hubds_cache(self):
        import sys
        small = self.hubd_on_tmpfs(16, min_free_space="1G")
        self.assertIn("min_free_space (1073741824 bytes) is more than the whole file system",
                      self.hubd.read_log())
        conf = write_config(os.path.join(self.tmp, "check.conf"), min_free_space="1G",
                            cache_dir=os.path.join(small, "not-yet"))
        r = subprocess.run([HUBD, "--config", conf, "--check-config", "--quiet"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("warning: min_free_space", r.stderr)
        conf = write_config(os.path.join(self.tmp, "check2.conf"), min_free_space="8M",
                            cache_dir=os.path.join(small, "not-yet"))
        r = subprocess.run([HUBD, "--config", conf, "--check-config", "--quiet"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        # Every download is refused no_space, and the clients say whose.
        self.make_file("a", 100000)
        url = self.origin.url("/files/a")
        r = self.hubctl("fetch", url)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("no_space", r.err)
        self.assertIn("hubd's cache", r.err)
        self.assertIn("ask hubd's admin", r.err)
        here = os.path.dirname(os.path.abspath(__file__))
        code = ("import sys; sys.path.insert(0, %r); import hubd\n"
                "try:\n    hubd.fetch(%r, progress=False)\n"
                "except hubd.HubdError as e:\n    print(type(e).__name__, e.code, e)\n"
                % (os.path.join(here, "..", "..", "client", "python"), url))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HUBD_SOCKET=self.hubd.socket))
        self.assertTrue(r.stdout.startswith("HubdError no_space "), r)
        self.assertIn("hubd's cache", r.stdout)
        self.assertIn("ask hubd's admin", r.stdout)
