"""The cache directory itself.

- hubd refuses a cache it does not own alone: a folder or file of another
  user's, one that group or others may write, or a symbolic link anywhere
  hubd keeps something (the cache dir, tmp/, blobs/ and its two-letter
  folders, quarantine/, hubd.db and its -wal, -shm, lock, secret); and what
  start-up finds inside (a partial or a blob that is a link) is removed or
  quarantined, never followed.
- Every file hubd makes in its cache is 0600 and every folder 0700, but for
  what clients open: the cache dir, blobs/, blobs/<aa>/ (0755) and the blobs.
- A damaged hubd.db is set aside and rebuilt from blobs/ at start-up.

Tests run as root: "another user" is uid 65534 (nobody), and victims are
files outside the cache (in the test's tmp dir) that must stay untouched.
"""

import glob
import json
import os
import socket
import sqlite3
import stat
import subprocess
import unittest

from harness import HUBD, WRAPPER, WRAPPER_WAIT, HubTestCase, answers, sha256_file, stop_pid, wait_for

NOBODY = 65534


class CacheDirTest(HubTestCase):
    def fetch_json(self, *args):
        r = self.hubctl("fetch", "--json", *args)
        return r, json.loads(r.out) if r.out.strip() else None

    def path(self, *rel):
        return os.path.join(self.hubd.cache, *rel)

    def victim(self, content=b"root's own file\n", mode=0o644, name="victim"):
        """A file outside the cache that hubd must never touch."""
        p = os.path.join(self.tmp, name)
        with open(p, "wb") as f:
            f.write(content)
        os.chmod(p, mode)
        return p

    def assert_untouched(self, victim, content=b"root's own file\n", mode=0o644):
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), content, victim + " was written")
        self.assertEqual(stat.S_IMODE(os.stat(victim).st_mode), mode, victim + " was chmodded")

    def start_expecting_refusal(self, cache=None):
        """Runs hubd on the cache (the fixture's by default), which must
        refuse it: returns its output. A hubd that serves instead is
        stopped and the test fails."""
        sock = os.path.join(self.tmp, "refused.sock")
        args = WRAPPER + [HUBD, "--socket", sock, "--cache-dir", cache or self.hubd.cache,
                          "--log-level", "debug", "--config", self.hubd.config]
        with open(os.path.join(self.tmp, "refused.log"), "w+b") as log:
            p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            try:
                wait_for(lambda: p.poll() is not None or answers(sock), WRAPPER_WAIT,
                         "hubd to exit")
            finally:
                serving = stop_pid(p) == 0  # SIGTERM ends a serving hubd with 0
            log.seek(0)
            out = log.read().decode(errors="replace")
        self.assertFalse(serving, "hubd served an unsafe cache:\n" + out)
        self.assertNotEqual(p.returncode, 0, out)
        for bad in ("Sanitizer", "runtime error:"):  # a refusal is a clean exit too
            self.assertNotIn(bad, out)
        return out

    def download(self, name, size=3000, seed=1, query=""):
        digest = self.make_file(name, size, seed)
        r, res = self.fetch_json(self.origin.url("/files/" + name + query))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["sha256"], digest)
        return res

    # ---- point 4: ownership, modes and links -------------------------------

    def test_a_cache_not_owned_by_hubd_alone_is_refused(self):
        res = self.download("a")
        self.assertEqual(self.hubd.stop(), 0)
        aa = os.path.join("blobs", res["sha256"][:2])
        os.mkdir(self.path("quarantine"), 0o700)
        # (what, its path in the cache, how it is made unsafe); each is put back after
        cases = []
        for rel in ("", "tmp", "blobs", aa, "quarantine", "hubd.db", "lock", "secret"):
            cases.append((rel or "the cache dir", rel, "chown"))
        for rel in ("", "tmp", "blobs", aa, "hubd.db"):
            cases.append((rel or "the cache dir", rel, "g+w"))
        cases.append(("the cache dir", "", "o+w"))
        for what, rel, how in cases:
            with self.subTest(what=what, how=how):
                p = self.path(rel) if rel else self.hubd.cache
                st = os.lstat(p)
                if how == "chown":
                    os.chown(p, NOBODY, NOBODY)
                else:
                    os.chmod(p, st.st_mode | (0o020 if how == "g+w" else 0o002))
                try:
                    out = self.start_expecting_refusal()
                finally:
                    os.chown(p, st.st_uid, st.st_gid)
                    os.chmod(p, stat.S_IMODE(st.st_mode))
                # The path, what was found, what is wanted.
                self.assertIn("unsafe cache dir: " + p.rstrip("/") + " is owned by uid", out)
                found = "uid %d with mode" % (NOBODY if how == "chown" else os.geteuid())
                self.assertIn(found, out)
                self.assertIn("wants a %s owned by uid %d, not writable by group or others"
                              % ("folder" if stat.S_ISDIR(st.st_mode) else "regular file",
                                 os.geteuid()), out)
        # Put back, it serves again, cache intact.
        self.hubd.start()
        r, res2 = self.fetch_json(self.origin.url("/files/a"))
        self.assertEqual((r.rc, res2["source"]), (0, "hit"), r)

    def test_symbolic_links_where_hubd_keeps_things_are_refused(self):
        self.download("a")
        self.assertEqual(self.hubd.stop(), 0)
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.mkdir(elsewhere, 0o755)
        for rel, target_is_dir in (("hubd.db", False), ("hubd.db-wal", False), ("lock", False),
                                   ("secret", False), ("tmp", True), ("blobs", True),
                                   ("quarantine", True), (os.path.join("blobs", "zz"), True)):
            with self.subTest(link=rel):
                p = self.path(rel)
                moved = p + ".real" if os.path.lexists(p) else None
                if moved:
                    os.rename(p, moved)
                # An empty file: a daemon that follows the link would make a
                # database of it, take a lock on it or write a secret into it.
                victim = elsewhere if target_is_dir else self.victim(b"", name="v-" + rel[-3:])
                os.symlink(victim, p)
                try:
                    out = self.start_expecting_refusal()
                finally:
                    os.unlink(p)
                    if moved:
                        os.rename(moved, p)
                self.assertIn("unsafe cache dir: %s is a symbolic link" % p, out)
                if target_is_dir:
                    self.assertEqual(os.listdir(elsewhere), [])
                else:
                    self.assert_untouched(victim, b"")
        # The cache dir itself, through a link.
        link = os.path.join(self.tmp, "cache-link")
        os.symlink(self.hubd.cache, link)
        out = self.start_expecting_refusal(cache=link)
        self.assertIn("unsafe cache dir: %s is a symbolic link" % link, out)
        self.hubd.start()
        r, res = self.fetch_json(self.origin.url("/files/a"))
        self.assertEqual((r.rc, res["source"]), (0, "hit"), r)

    def test_a_recorded_partial_that_is_a_link_is_removed_not_cut(self):
        # The attack: a partials row names tmp/7.part, which is a link to a
        # file of root's; start-up cut partials back with truncate(path),
        # which follows the link.
        self.assertEqual(self.hubd.stop(), 0)
        victim = self.victim(b"x" * 100)
        con = sqlite3.connect(self.path("hubd.db"))
        with con:
            con.execute("INSERT INTO partials(id, url, cred_tag, etag, total, durable, updated)"
                        " VALUES (7, 'http://127.0.0.1:9/p', '', '\"e\"', 1000, 10, 0)")
        con.close()
        part = self.path("tmp", "7.part")
        os.symlink(victim, part)
        self.hubd.start()
        self.assert_untouched(victim, b"x" * 100)
        self.assertFalse(os.path.lexists(part), "the link is still there")
        self.assertEqual(self.hubd.partials(), {})
        self.assertIn("0 partial download(s) kept for resuming, 1 dropped", self.hubd.read_log())

    def test_a_blob_that_is_a_link_is_quarantined_not_followed(self):
        self.assertEqual(self.hubd.stop(), 0)
        victim = self.victim(b"y" * 64, mode=0o600)
        sha = "ab" + "1" * 62
        con = sqlite3.connect(self.path("hubd.db"))
        with con:
            con.execute("INSERT INTO blobs(sha256, size, created, accessed) VALUES (?, 64, 0, 0)",
                        (sha,))
        con.close()
        os.makedirs(self.path("blobs", "ab"), exist_ok=True)
        blob = self.path("blobs", "ab", sha)
        os.symlink(victim, blob)
        done = "start-up check of blobs/ done"
        before = self.hubd.read_log().count(done)
        self.hubd.start()
        # In the background after a clean stop; meanwhile a hit
        # could not follow the link either (O_NOFOLLOW: it downloads again).
        wait_for(lambda: self.hubd.read_log().count(done) > before, what="the check of blobs/")
        self.assertFalse(os.path.lexists(blob))
        moved = self.path("quarantine", "ab-" + sha)
        self.assertTrue(os.path.islink(moved), "the link itself is moved")
        self.assertEqual(os.readlink(moved), victim)
        self.assert_untouched(victim, b"y" * 64, 0o600)
        self.assertEqual(self.hubd.query("SELECT count(*) FROM blobs WHERE sha256 = ?", sha),
                         [(0,)])
        self.assertIn("not a regular file of hubd's: forgotten", self.hubd.read_log())

    # ---- point 15: modes ---------------------------------------------------

    def test_only_what_clients_open_is_readable_by_others(self):
        res = self.download("a", query="?X-Amz-Signature=" + "s" * 64)
        self.download("b", seed=2)
        os.mkdir(self.path("quarantine"), 0o700)  # as start-up or verify makes it
        self.assertTrue(os.path.exists(self.path("hubd.db-wal")))
        public = {self.hubd.cache, self.path("blobs")}
        seen = []
        for d, dirs, files in os.walk(self.hubd.cache):
            for name in dirs + files:
                p = os.path.join(d, name)
                st = os.lstat(p)
                seen.append(os.path.relpath(p, self.hubd.cache))
                if stat.S_ISDIR(st.st_mode) and (p in public or
                                                 os.path.dirname(p) == self.path("blobs")):
                    self.assertEqual(stat.S_IMODE(st.st_mode), 0o755, p)
                elif os.path.dirname(os.path.dirname(p)) == self.path("blobs"):
                    self.assertEqual(stat.S_IMODE(st.st_mode), 0o444, p)
                else:
                    self.assertEqual(stat.S_IMODE(st.st_mode) & 0o077, 0, "%s is %o"
                                     % (p, stat.S_IMODE(st.st_mode)))
        for must in ("hubd.db", "hubd.db-wal", "hubd.db-shm", "lock", "secret", "tmp",
                     "quarantine", os.path.relpath(res["path"], self.hubd.cache)):
            self.assertIn(must, seen)
        self.assertEqual(stat.S_IMODE(os.stat(self.hubd.cache).st_mode), 0o755)

    def test_looser_files_of_hubds_are_made_private_at_start(self):
        self.download("a")
        self.assertEqual(self.hubd.stop(), 0)
        os.mkdir(self.path("quarantine"), 0o755)
        for rel, mode in (("hubd.db", 0o644), ("lock", 0o644), ("tmp", 0o755),
                          ("quarantine", 0o755)):
            os.chmod(self.path(rel), mode)
        self.hubd.start()
        for rel, mode in (("hubd.db", 0o600), ("hubd.db-wal", 0o600), ("lock", 0o600),
                          ("tmp", 0o700), ("quarantine", 0o700)):
            self.assertEqual(stat.S_IMODE(os.stat(self.path(rel)).st_mode), mode, rel)

    # ---- point 5: a damaged database ---------------------------------------

    def fill_and_damage(self, offset, n=12, clean=False):
        """n downloads with long URLs (so the tables span several pages),
        then hubd stops and bytes [offset, offset + 4096) of hubd.db become
        garbage; unless clean, as after a crash (no clean-stop marker: the
        start checks every page). Returns {name: (url, digest)}."""
        files = {}
        for i in range(n):
            name = "f%d.bin" % i
            res = self.download(name, 2000 + i, seed=i + 1, query="?pad=" + "p" * 1500)
            files[name] = (self.origin.url("/files/%s?pad=%s" % (name, "p" * 1500)),
                           res["sha256"])
        self.assertEqual(self.hubd.stop(), 0)
        self.assertTrue(os.path.exists(self.path("clean-stop")))
        if not clean:
            os.unlink(self.path("clean-stop"))
        db = self.path("hubd.db")
        self.assertGreater(os.path.getsize(db), offset + 4096, "no page to damage")
        self.assertFalse(os.path.exists(db + "-wal"))  # all of it is in the file
        rnd = __import__("random").Random(offset)
        with open(db, "r+b") as f:
            f.seek(offset)
            f.write(rnd.randbytes(4096))
        # SQLite itself agrees that the file is damaged.
        con = sqlite3.connect(db)
        try:
            result = con.execute("PRAGMA quick_check").fetchall()
            self.assertNotEqual(result, [("ok",)])
        except sqlite3.DatabaseError:
            pass
        finally:
            con.close()
        return files

    def start_with_notify(self):
        """Starts the fixture's hubd with a notify socket; returns the
        STATUS= line it sends."""
        notify_path = os.path.join(self.tmp, "notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        self.addCleanup(notify.close)
        os.environ["NOTIFY_SOCKET"] = notify_path
        try:
            self.hubd.start()
        finally:
            del os.environ["NOTIFY_SOCKET"]
        notify.settimeout(10)
        msgs = []
        while not any("READY=1" in m for m in msgs):
            msgs.append(notify.recv(4096).decode())
        return " ".join(m for m in msgs if m.startswith("STATUS="))

    def assert_rebuilt(self, files, status):
        log = self.hubd.read_log()
        aside = glob.glob(self.path("hubd.db.corrupt-*"))
        base = [a for a in aside if not a.endswith(("-wal", "-shm"))]
        self.assertEqual(len(base), 1, aside)
        self.assertIn("was corrupt: set aside as %s and rebuilt from blobs/, %d blob(s) recovered"
                      % (base[0], len(files)), log)
        self.assertIn("DATABASE WAS CORRUPT: set aside as " + base[0], status)
        self.assertFalse(os.path.exists(self.path("quarantine")) and
                         os.listdir(self.path("quarantine")), "quarantined")
        # By digest: a hit, no request to the origin.
        name, (url, digest) = sorted(files.items())[0]
        before = self.origin.requests_for("/files/" + name)
        r, res = self.fetch_json("--sha256", digest, "http://127.0.0.1:9/elsewhere.bin")
        self.assertEqual((r.rc, res["source"], res["sha256"]), (0, "hit", digest), r)
        self.assertEqual(sha256_file(res["path"]), digest)
        self.assertEqual(self.origin.requests_for("/files/" + name), before)
        # By URL: the entry is gone, so it downloads again, and then hits.
        name, (url, digest) = sorted(files.items())[1]
        for source in ("download", "hit"):
            r, res = self.fetch_json(url)
            self.assertEqual((r.rc, res["source"], res["sha256"]), (0, source, digest), r)
        self.assertEqual(sha256_file(res["path"]), digest)
        self.assertFalse(os.path.exists(self.path("quarantine")) and
                         os.listdir(self.path("quarantine")), "quarantined")
        self.assertEqual(len(self.hubd.blob_files()), len(files))

    def test_a_damaged_page_sets_the_database_aside_and_rebuilds_it(self):
        files = self.fill_and_damage(4096)  # page 2
        status = self.start_with_notify()
        self.assert_rebuilt(files, status)

    def test_a_page_damaged_after_a_clean_stop_is_found_and_rebuilt_at_the_next_start(self):
        # After a clean stop the start skips the quick_check (it reads every
        # page: 0.4 s at a million entries); the background check runs it,
        # and a damaged page found there leaves no clean-stop marker, so the
        # next start sets the file aside and rebuilds it.
        files = self.fill_and_damage(8192, clean=True)  # page 3: not read at start
        self.hubd.start()
        wait_for(lambda: "the database is damaged" in self.hubd.read_log() or
                 "was corrupt: set aside" in self.hubd.read_log(), what="the damage found")
        self.assertIn("the database is damaged", self.hubd.read_log(),
                      "found at start: this test wants a page the start does not read")
        self.assertEqual(self.hubd.stop(), 0)
        self.assertFalse(os.path.exists(self.path("clean-stop")))
        status = self.start_with_notify()
        self.assert_rebuilt(files, status)

    def test_a_file_that_is_no_database_at_all_is_set_aside_and_rebuilt(self):
        files = self.fill_and_damage(0, n=3)  # page 1: the header and the schema
        status = self.start_with_notify()
        self.assert_rebuilt(files, status)

    def test_a_rebuild_quarantines_private_blobs(self):
        # Whose a 0400 blob (fetched with credentials) was is lost with the
        # entries: no one may have it by digest any more.
        digest = self.make_file("gated", 5000, seed=7)
        url = self.origin.url("/files/gated")
        r = self.hubctl("fetch", "--json", "-H", "Authorization: Bearer t0k3n", url)
        self.assertEqual(r.rc, 0, r)
        blob = json.loads(r.out)["path"]
        self.assertEqual(stat.S_IMODE(os.stat(blob).st_mode), 0o400)
        files = self.fill_and_damage(4096, n=2)
        self.hubd.start()
        self.assertIn("2 blob(s) recovered, 1 private blob(s) quarantined", self.hubd.read_log())
        self.assertFalse(os.path.exists(blob))
        self.assertTrue(os.path.exists(self.path("quarantine", digest[:2] + "-" + digest)))
        r, res = self.fetch_json("--sha256", digest, "http://127.0.0.1:9/elsewhere.bin")
        self.assertNotEqual(r.rc, 0, r)  # not a hit: a download, which cannot connect
        r, res = self.fetch_json("--sha256", files["f0.bin"][1], "http://127.0.0.1:9/e.bin")
        self.assertEqual((r.rc, res["source"]), (0, "hit"), r)


if __name__ == "__main__":
    unittest.main()
