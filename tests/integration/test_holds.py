"""Holds and read grants: HOLD, UNHOLD, HOLDS; a
private blob linked into a user's HF cache is readable by that user alone
(a POSIX ACL entry), is kept from eviction while the link stands, and goes
with its holds on an admin's RM. hubd runs as root; the clients as two
other local users (setpriv)."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.parse

from harness import Hubd, HubTestCase, wait_for, write_config

TOKEN_A = "tok-holds-a-4f1e2d3c"
TOKEN_B = "tok-holds-b-9a8b7c6d"
UID_A = 1000   # two users other than hubd's (root)
UID_B = 65534

# A client of the socket, run as another user: sends each request line
# given (JSON list of lines), reads up to each one's final line (descriptors
# passed with DONE are closed) and prints every line read, as JSON.
CLIENT = r'''
import array, json, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
buf = b""
out = []
def line():
    global buf
    while b"\n" not in buf:
        fds = array.array("i")
        data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
        for lvl, typ, d in anc:
            if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(d[:len(d) - len(d) % fds.itemsize])
        for fd in fds:
            os.close(fd)
        if not data:
            raise SystemExit("closed")
        buf += data
    l, buf = buf.split(b"\n", 1)
    return l.decode()
for req in json.loads(sys.argv[2]):
    s.sendall(req.encode() + b"\n")
    while True:
        l = line()
        out.append(l)
        if l.split()[0] in ("DONE", "ERR", "HELD", "OK", "END", "HELLO"):
            break
print(json.dumps(out))
'''


def enc(v):
    return urllib.parse.quote(v, safe="/:")


def fields(line):
    out = {}
    for w in line.split()[1:]:
        k, _, v = w.partition("=")
        out[k] = urllib.parse.unquote(v)
    return out


def needs(token):
    """The origin's require_auth value for a token (not the token itself)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def as_user(uid, argv, **kw):
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]
                          + argv, capture_output=True, text=True, timeout=60, **kw)


class HoldsBase(HubTestCase):
    """The fixture: hubd as root, socket 0666, two users' HF caches."""

    def setUp(self):
        super().setUp()
        self.restart()
        os.chmod(self.tmp, 0o755)
        self.homes = {}
        for uid in (UID_A, UID_B):  # each user's HF cache, theirs alone
            home = os.path.join(self.tmp, "home%d" % uid)
            os.mkdir(home, 0o700)
            os.chown(home, uid, uid)
            self.homes[uid] = home
        self.client = os.path.join(self.tmp, "client.py")
        with open(self.client, "w") as f:
            f.write(CLIENT)
        os.chmod(self.client, 0o644)

    def restart(self, **keys):
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "holds.conf"), socket_mode="0666", **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-holds"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)

    def talk(self, uid, *lines):
        """The lines a user's session read, for each request line sent."""
        argv = [sys.executable, self.client, self.hubd.socket, json.dumps(list(lines))]
        r = as_user(uid, argv) if uid else subprocess.run(argv, capture_output=True, text=True,
                                                          timeout=60)
        self.assertEqual(r.returncode, 0, r)
        return json.loads(r.stdout)

    def gated(self, name, token, size=5000, seed=1):
        digest = self.make_file(name, size, seed=seed)
        return self.origin.url("/files/%s?require_auth=%s" % (name, needs(token))), digest

    def fetch(self, uid, url, token=None):
        req = "FETCH id=f url=%s" % enc(url)
        if token:
            req += " header=%s" % enc("Authorization: Bearer " + token)
        last = self.talk(uid, req)[-1]
        self.assertTrue(last.startswith("DONE"), last)
        return fields(last)

    def hold(self, uid, sha, label="models/org/m@main", link=None):
        link = link or os.path.join(self.homes.get(uid, self.tmp), sha)
        last = self.talk(uid, "HOLD id=h sha256=%s label=%s link=%s" % (sha, enc(label),
                                                                        enc(link)))[-1]
        return last, link

    def link_as(self, uid, target, link):
        r = as_user(uid, ["ln", "-s", target, link])
        self.assertEqual(r.returncode, 0, r)

    def read_as(self, uid, path):
        """sha256sum as that user: its output is text, whatever the bytes."""
        return as_user(uid, ["sha256sum", path])

    def held_private(self, name="g.bin", size=5000):
        """A gated blob fetched by A with its token, held, linked in A's
        cache: (digest, store path, link)."""
        url, digest = self.gated(name, TOKEN_A, size)
        done = self.fetch(UID_A, url, TOKEN_A)
        self.assertEqual(done["sha256"], digest)
        last, link = self.hold(UID_A, digest)
        self.assertTrue(last.startswith("HELD"), last)
        f = fields(last)
        self.assertEqual(f["readable"], "1", last)
        self.assertEqual(f["path"], done["path"])
        self.link_as(UID_A, f["path"], link)
        return digest, f["path"], link

    def age_holds(self):
        """Holds younger than HOLDS_GRACE (120 s) are not checked: as if made
        long ago."""
        import sqlite3
        con = sqlite3.connect(os.path.join(self.hubd.cache, "hubd.db"), timeout=10)
        con.execute("UPDATE holds SET created = created - 1000")
        con.commit()
        con.close()


class HoldsTest(HoldsBase):
    def test_private_hold_grants_read_to_its_user_alone(self):
        digest, path, link = self.held_private()
        st = os.stat(path)
        self.assertEqual(st.st_mode & 0o007, 0, oct(st.st_mode))  # still private
        self.assertIn("system.posix_acl_access", os.listxattr(path))
        with open(os.path.join(self.root, "g.bin"), "rb") as f:
            want = f.read()
        got = as_user(UID_A, ["sha256sum", link]).stdout.split()[0]
        self.assertEqual(got, hashlib.sha256(want).hexdigest())
        r = self.read_as(UID_B, path)
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("Permission denied", r.stderr)
        st = self.stats()
        self.assertEqual(st["holds"], 1)
        self.assertEqual(st["held_bytes"], 5000)
        lines = self.talk(UID_A, "HOLDS id=l")
        self.assertEqual(len(lines), 2, lines)
        rec = fields(lines[0])
        self.assertEqual((rec["uid"], rec["label"], rec["files"], rec["size"]),
                         (str(UID_A), "models/org/m@main", "1", "5000"))
        # UNHOLD takes the grant away: the mode is 0400 again, no ACL left.
        last = self.talk(UID_A, "UNHOLD id=u label=models/org/m@main")[-1]
        self.assertEqual(fields(last)["released"], "1", last)
        self.assertNotIn("system.posix_acl_access", os.listxattr(path))
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o400)
        self.assertNotEqual(self.read_as(UID_A, link).returncode, 0)
        self.assertEqual(self.stats()["holds"], 0)

    def test_hold_needs_a_done_for_a_private_blob(self):
        url, digest = self.gated("g.bin", TOKEN_A)
        self.fetch(UID_A, url, TOKEN_A)
        last, _ = self.hold(UID_B, digest)  # B was never given these bytes
        self.assertTrue(last.startswith("ERR"), last)
        self.assertEqual(fields(last)["code"], "permission_denied", last)
        self.assertEqual(self.stats()["holds"], 0)
        last, _ = self.hold(UID_A, "ab" * 32)
        self.assertEqual(fields(last)["code"], "not_found", last)
        for bad in ("HOLD id=x label=l link=/a", "HOLD id=x sha256=%s label=l link=rel" % digest,
                    "HOLD id=x sha256=%s link=/a" % digest, "UNHOLD id=x"):
            last = self.talk(UID_A, bad)[-1]
            self.assertEqual(fields(last)["code"], "bad_request", (bad, last))

    def test_public_blob_is_held_without_a_grant(self):
        digest = self.make_file("p.bin", 4000)
        self.fetch(UID_B, self.origin.url("/files/p.bin"))
        last, link = self.hold(UID_B, digest)
        f = fields(last)
        self.assertEqual(f["readable"], "1", last)
        self.assertNotIn("system.posix_acl_access", os.listxattr(f["path"]))
        self.assertEqual(os.stat(f["path"]).st_mode & 0o777, 0o444)
        self.assertEqual(self.stats()["holds"], 1)

    def test_hold_needs_a_done_for_a_public_blob_too(self):
        """A hold pins bytes in the cache: only for a uid that was given
        them, public or not."""
        digest = self.make_file("p.bin", 4000)
        self.fetch(0, self.origin.url("/files/p.bin"))  # someone else fetched it
        last, _ = self.hold(UID_B, digest)
        self.assertEqual(fields(last).get("code"), "permission_denied", last)
        self.assertEqual(self.hubd.query("SELECT count(*) FROM holds"), [(0,)])

    def test_holds_past_a_bound_of_the_uid_are_copies(self):
        """max_holds_per_user and max_held_bytes_per_user (0: half of
        max_cache_size): past one, HELD readable=0 and no row (the client
        copies), said once per uid in the log."""
        self.restart(max_cache_size="20K", max_holds_per_user="2")
        digs = []
        for k, size in enumerate((8000, 1000, 3000)):
            digs.append(self.make_file("p%d.bin" % k, size, seed=10 + k))
            self.fetch(UID_B, self.origin.url("/files/p%d.bin" % k))
        last, _ = self.hold(UID_B, digs[0], label="x@1", link="/l/0")
        self.assertEqual(fields(last)["readable"], "1", last)
        last, _ = self.hold(UID_B, digs[2], label="x@1", link="/l/2")  # 11000 > 10K
        self.assertEqual(fields(last)["readable"], "0", last)
        last, _ = self.hold(UID_B, digs[1], label="x@1", link="/l/1")  # 9000: fits
        self.assertEqual(fields(last)["readable"], "1", last)
        last, _ = self.hold(UID_B, digs[1], label="x@1", link="/l/1")  # a renewal: no row
        self.assertEqual(fields(last)["readable"], "1", last)
        last, _ = self.hold(UID_B, digs[1], label="x@2", link="/l/3")  # a 3rd row
        self.assertEqual(fields(last)["readable"], "0", last)
        self.assertEqual(self.hubd.query("SELECT count(*) FROM holds"), [(2,)])
        log = self.hubd.read_log()
        self.assertEqual(log.count("uid %d: blob %s would take" % (UID_B, digs[2])), 1, log)
        self.assertNotIn("has max_holds_per_user", log)  # told once per uid already

    def test_unhold_of_one_link_keeps_the_others(self):
        """UNHOLD link=: one cache's link goes; the grant stays while another
        hold of the uid keeps the blob."""
        digest, path, link = self.held_private()
        link2 = os.path.join(self.homes[UID_A], "second")
        last, _ = self.hold(UID_A, digest, link=link2)
        self.assertEqual(fields(last)["readable"], "1", last)
        last = self.talk(UID_A, "UNHOLD id=u label=models/org/m@main link=%s" % enc(link2))[-1]
        self.assertEqual(last, "OK id=u released=1")
        self.assertEqual(self.read_as(UID_A, link).returncode, 0)  # grant kept
        self.assertEqual(self.stats()["holds"], 1)
        last = self.talk(UID_A, "UNHOLD id=u label=models/org/m@main link=%s" % enc(link))[-1]
        self.assertEqual(last, "OK id=u released=1")
        self.assertNotIn("system.posix_acl_access", os.listxattr(path))
        last = self.talk(UID_A, "UNHOLD id=u label=models/org/m@main link=rel")[-1]
        self.assertEqual(fields(last)["code"], "bad_request", last)

    def test_a_moved_hold_takes_its_grant_with_it(self):
        """A HOLD of the same label and link to another blob moves the row:
        the first blob's grant goes with it, and after UNHOLD the uid
        holds nothing and reads neither blob."""
        digest, path, link = self.held_private()
        url2, digest2 = self.gated("g2.bin", TOKEN_A, 6000, seed=2)
        path2 = self.fetch(UID_A, url2, TOKEN_A)["path"]
        last, _ = self.hold(UID_A, digest2, link=link)  # the same label and link
        self.assertEqual(fields(last)["readable"], "1", last)
        self.assertEqual(self.hubd.query("SELECT sha256 FROM holds"), [(digest2,)])
        self.assertNotEqual(self.read_as(UID_A, path).returncode, 0)
        self.assertNotIn("system.posix_acl_access", os.listxattr(path))
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o400)
        self.assertEqual(self.read_as(UID_A, path2).returncode, 0)
        last = self.talk(UID_A, "UNHOLD id=u label=models/org/m@main")[-1]
        self.assertEqual(last, "OK id=u released=1")
        for p in (path, path2):
            self.assertNotEqual(self.read_as(UID_A, p).returncode, 0, p)
            self.assertNotIn("system.posix_acl_access", os.listxattr(p))

    def test_hold_rows_are_bounded_by_what_they_store_and_per_blob(self):
        """A uid's hold rows are bounded by the bytes of their labels and
        links (max_hold_text_per_user) and by its links to one blob
        (max_holds_per_blob): past either, HELD readable=0 and no row, said
        once in the log. Before, 3,000 HOLDs of one blob with 4 KB links
        added 30 MiB to hubd.db."""
        self.restart(max_hold_text_per_user="40K", max_holds_per_blob="4")
        digests = []
        for k in range(4):
            digests.append(self.make_file("t%d.bin" % k, 4096, seed=30 + k))
            self.fetch(UID_B, self.origin.url("/files/t%d.bin" % k))
        label = "l" * 500
        lines = ["HOLD id=h%d sha256=%s label=%s link=%s" % (i, digests[i % 4], label,
                                                            "/" + "%04d" % i + "x" * 4000)
                 for i in range(20)]
        got = [fields(l)["readable"] for l in self.talk(UID_B, *lines)]
        # 4,605 bytes a row: 8 fit in 40 KiB (36,840), the 9th does not.
        self.assertEqual(got, ["1"] * 8 + ["0"] * 12, got)
        self.assertEqual(self.hubd.query("SELECT count(*) FROM holds"), [(8,)])
        log = self.hubd.read_log()
        self.assertEqual(log.count("uid %d: its holds' labels and links would store more" % UID_B),
                         1, log)
        # Short links, one blob: the 5th link to it is a copy.
        self.talk(UID_B, "UNHOLD id=u label=%s" % label)
        lines = ["HOLD id=h%d sha256=%s label=s link=/s/%d" % (i, digests[0], i) for i in range(6)]
        got = [fields(l)["readable"] for l in self.talk(UID_B, *lines)]
        self.assertEqual(got, ["1"] * 4 + ["0"] * 2, got)
        # A renewal of a link it has is no 5th.
        last, _ = self.hold(UID_B, digests[0], label="s", link="/s/0")
        self.assertEqual(fields(last)["readable"], "1", last)

    def test_a_hold_whose_link_is_gone_is_dropped_without_an_eviction(self):
        """hold_check_interval: the holds whose links are gone go, with
        their grants, though no eviction runs (before: only when eviction
        had to run)."""
        self.restart(hold_check_interval="1s")
        digest, path, link = self.held_private()
        last, link2 = self.hold(UID_A, digest, link=os.path.join(self.homes[UID_A], "kept"))
        self.link_as(UID_A, path, link2)
        self.age_holds()
        os.unlink(link)
        wait_for(lambda: self.hubd.query("SELECT link FROM holds") == [(link2,)], timeout=20,
                 what="the hold whose link is gone to be dropped")
        self.assertEqual(self.read_as(UID_A, path).returncode, 0)  # link2 keeps the grant
        os.unlink(link2)
        wait_for(lambda: self.hubd.query("SELECT count(*) FROM holds") == [(0,)], timeout=20,
                 what="the last hold to be dropped")
        wait_for(lambda: "system.posix_acl_access" not in os.listxattr(path), timeout=5,
                 what="the grant to go")
        self.assertEqual(self.stats()["evicted"], 0)
        self.assertIn("whose links are gone dropped", self.hubd.read_log())

    def test_a_link_in_a_file_system_that_hangs_does_not_stall_eviction(self):
        """A hold's link in a FUSE file system whose server stopped: its
        look-up is given up on after 2 s (the hold is kept), and eviction
        goes on (before: hubd-bg slept in lstat, and nothing was evicted
        again)."""
        if shutil.which("bindfs") is None:
            self.fail("bindfs missing: run scripts/install-deps.sh")
        self.restart(max_cache_size="12K", hold_check_interval="0")
        src, mnt = os.path.join(self.tmp, "fuse-src"), os.path.join(self.tmp, "fuse-mnt")
        os.mkdir(src)
        os.mkdir(mnt)
        fs = subprocess.Popen(["bindfs", "-f", src, mnt], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)

        def unmount():
            os.kill(fs.pid, signal.SIGCONT)
            subprocess.run(["fusermount", "-u", mnt], capture_output=True, timeout=30)
            if fs.poll() is None:
                fs.terminate()
            fs.wait(30)
        self.addCleanup(unmount)
        wait_for(lambda: os.path.ismount(mnt), what="the FUSE mount")
        url, digest = self.gated("g.bin", TOKEN_A, 5000)
        path = self.fetch(UID_A, url, TOKEN_A)["path"]
        link = os.path.join(mnt, "g.bin")
        last, _ = self.hold(UID_A, digest, link=link)
        self.assertEqual(fields(last)["readable"], "1", last)
        os.symlink(path, os.path.join(src, "g.bin"))
        os.lchown(os.path.join(src, "g.bin"), UID_A, UID_A)
        self.age_holds()
        os.kill(fs.pid, signal.SIGSTOP)  # every look-up in the mount hangs now
        for k in range(3):  # 5000 + 3 x 4000 > 12K: the oldest public one goes
            self.make_file("p%d.bin" % k, 4000, seed=40 + k)
            self.fetch(UID_B, self.origin.url("/files/p%d.bin" % k))
        wait_for(lambda: self.stats()["evicted"] >= 1, timeout=20, what="an eviction")
        self.assertEqual(self.hubd.query("SELECT count(*) FROM holds"), [(1,)])
        self.assertTrue(os.path.exists(path))
        wait_for(lambda: "did not answer within 2000 ms" in self.hubd.read_log(), timeout=5,
                 what="the log to say why the hold is kept")

    def test_a_link_with_control_bytes_is_refused(self):
        """link= goes into the log: no control bytes (log forging)."""
        digest = self.make_file("p.bin", 3000, seed=7)
        self.fetch(UID_B, self.origin.url("/files/p.bin"))
        for bad in ("/x\nhubd: FORGED", "/x\x7f", "/x\ty"):
            last, _ = self.hold(UID_B, digest, link=bad.encode().decode("unicode_escape"))
            self.assertEqual(fields(last).get("code"), "bad_request", (bad, last))
        self.assertEqual(self.hubd.query("SELECT count(*) FROM holds"), [(0,)])

    def test_gc_keeps_a_held_blob_until_its_link_is_gone(self):
        digest, path, link = self.held_private()
        other = self.make_file("o.bin", 3000, seed=2)
        self.fetch(0, self.origin.url("/files/o.bin"))
        r = self.hubctl("gc", "--max-size", "0")
        self.assertEqual(r.rc, 0, r)
        self.assertTrue(os.path.exists(path))
        self.assertFalse(any(p.endswith(other) for p in self.hubd.blob_files()))
        self.age_holds()  # checked now: the link stands
        self.assertEqual(self.hubctl("gc", "--max-size", "0").rc, 0)
        self.assertTrue(os.path.exists(path))
        self.assertEqual(self.stats()["holds"], 1)
        os.unlink(link)
        self.assertEqual(self.hubctl("gc", "--max-size", "0").rc, 0)
        self.assertFalse(os.path.exists(path))
        self.assertEqual(self.stats()["holds"], 0)
        self.assertIn("dropped: its link", self.hubd.read_log())

    def test_a_link_elsewhere_or_another_users_drops_the_hold(self):
        digest, path, link = self.held_private()
        os.unlink(link)
        self.link_as(UID_A, "/etc/hostname", link)  # pointing elsewhere
        self.age_holds()
        self.assertEqual(self.hubctl("gc", "--max-size", "0").rc, 0)
        self.assertFalse(os.path.exists(path))

    def test_eviction_by_max_cache_size_keeps_the_held_blob(self):
        self.restart(max_cache_size="20K")  # a user may hold half of it
        digest, path, link = self.held_private(size=8000)
        self.make_file("o0.bin", 8000, seed=5)
        self.fetch(0, self.origin.url("/files/o0.bin"))
        self.make_file("o.bin", 8000, seed=3)
        self.fetch(0, self.origin.url("/files/o.bin"))
        self.make_file("o2.bin", 8000, seed=4)
        self.fetch(0, self.origin.url("/files/o2.bin"))
        self.assertTrue(os.path.exists(path))
        self.assertIn("evicted blob", self.hubd.read_log())

    def test_admin_rm_of_a_held_blob_names_its_users_and_needs_force(self):
        import pwd
        digest, path, link = self.held_private()
        url = self.origin.url("/files/g.bin?require_auth=%s" % needs(TOKEN_A))
        public = self.make_file("p.bin", 3000, seed=7)
        purl = self.origin.url("/files/p.bin")
        self.fetch(UID_B, purl)
        self.assertTrue(self.hold(UID_B, public)[0].startswith("HELD"))
        def name(uid):
            try:
                return pwd.getpwuid(uid).pw_name
            except KeyError:
                return str(uid)
        for target, who in ((digest, UID_A), (purl, UID_B), (public, UID_B)):
            r = self.hubctl("rm", target)
            self.assertEqual(r.rc, 1, r)
            self.assertIn("held by the HF caches of %s," % name(who), r.err)
            self.assertIn("--force", r.err)
            self.assertIn("hf ls --all", r.err)
        self.assertTrue(os.path.exists(path))
        self.assertEqual(self.stats()["holds"], 2)
        r = self.hubctl("rm", digest, "--json")
        self.assertEqual(json.loads(r.out)["error"]["code"], "held", r)
        self.assertEqual(self.hubctl("rm", url).rc, 1)  # no public entry of it: not found
        r = self.hubctl("rm", digest, "--force")
        self.assertEqual(r.rc, 0, r)
        self.assertFalse(os.path.exists(path))
        self.assertEqual(self.stats()["holds"], 1)  # B's, of the public blob
        self.assertEqual(self.hubd.query("SELECT count(*) FROM holds"), [(1,)])
        self.assertEqual(self.hubctl("rm", purl, "--force").rc, 0)
        self.assertEqual(self.stats()["holds"], 0)

    def test_gc_says_what_the_holds_kept_and_where_to_look(self):
        digest, path, link = self.held_private()
        self.make_file("o.bin", 3000, seed=2)
        self.fetch(0, self.origin.url("/files/o.bin"))
        r = self.hubctl("gc", "--max-size", "0")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("evicted 1 blob(s)", r.out)
        self.assertIn("the cache holds 4.9 KiB, above its 0 B target: 4.9 KiB held by 1 hold(s), "
                      "0 B pinned", r.out)
        self.assertIn("held: 1 blob(s) linked from 1 user(s)' HF caches", r.out)
        self.assertIn("hubctl hf ls --all", r.out)
        res = json.loads(self.hubctl("gc", "--max-size", "0", "--json").out)["result"]
        self.assertEqual((res["held"], res["held_blobs"], res["holds"], res["holders"],
                          res["pinned_bytes"], res["size"], res["target"]),
                         (5000, 1, 1, 1, 0, 5000, 0), res)
        self.assertEqual(self.stats()["cache_bytes"], res["size"])
        r = self.hubctl("gc", "--max-size", "1M")  # under its target: nothing to say
        self.assertIn("the cache holds 4.9 KiB (target 1.0 MiB)", r.out)
        self.assertNotIn("held", r.out)

    def test_holds_of_others_are_an_admins(self):
        self.held_private()
        last = self.talk(UID_B, "HOLDS id=l uid=%d" % UID_A)[-1]
        self.assertEqual(fields(last)["code"], "permission_denied", last)
        self.assertEqual(self.talk(UID_B, "HOLDS id=l"), ["END id=l"])
        lines = self.talk(0, "HOLDS id=l")  # root: every uid
        self.assertEqual(fields(lines[0])["uid"], str(UID_A), lines)
        last = self.talk(UID_B, "UNHOLD id=u label=models/org/m@main uid=%d" % UID_A)[-1]
        self.assertEqual(fields(last)["code"], "permission_denied", last)
        last = self.talk(0, "UNHOLD id=u label=models/org/m@main uid=%d" % UID_A)[-1]
        self.assertEqual(fields(last)["released"], "1", last)

    def test_private_bytes_committed_again_stay_private_and_keep_grants(self):
        """The same bytes fetched again with other credentials replace the
        blob's file: a grant's mask in the group bits must not make it public,
        and the grant goes over to the new file."""
        digest, path, link = self.held_private()
        url_b, _ = self.gated("g2.bin", TOKEN_B)  # same bytes (seed 1), B's token
        self.fetch(UID_B, url_b, TOKEN_B)
        st = os.stat(path)
        self.assertEqual(st.st_mode & 0o004, 0, oct(st.st_mode))
        self.assertEqual(self.read_as(UID_A, link).returncode, 0)


class HfHoldsCliTest(HoldsBase):
    """hubctl hf ls and hf rm over a user's HF cache laid out as
    huggingface_hub's (models--org--m/{blobs,refs,snapshots})."""

    def layout(self, uid, digest, store_path, commit="c" * 40):
        hub = os.path.join(self.homes[uid], "hub")
        repo = os.path.join(hub, "models--org--m")
        script = ("mkdir -p {r}/blobs {r}/refs {r}/snapshots/{c}/sub && "
                  "printf %s {c} > {r}/refs/main && "
                  "ln -s ../../../blobs/{d} {r}/snapshots/{c}/sub/w.bin").format(r=repo, c=commit,
                                                                               d=digest)
        r = as_user(uid, ["sh", "-c", script])
        self.assertEqual(r.returncode, 0, r)
        link = os.path.join(repo, "blobs", digest)
        last = self.talk(uid, "HOLD id=h sha256=%s label=models/org/m@main link=%s"
                         % (digest, enc(link)))[-1]
        self.assertEqual(fields(last)["readable"], "1", last)
        self.link_as(uid, store_path, link)
        return hub, repo

    def hubctl_as(self, uid, *args):
        return as_user(uid, self.hubctl_args(*args))

    def test_hf_ls_and_rm(self):
        url, digest = self.gated("w.bin", TOKEN_A)
        done = self.fetch(UID_A, url, TOKEN_A)
        hub, repo = self.layout(UID_A, digest, done["path"])
        r = self.read_as(UID_A, os.path.join(repo, "snapshots", "c" * 40, "sub", "w.bin"))
        self.assertEqual(r.returncode, 0, r)
        r = self.hubctl_as(UID_A, "hf", "ls")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("models/org/m@main", r.stdout)
        r = self.hubctl_as(UID_A, "hf", "ls", "--json")
        self.assertEqual(json.loads(r.stdout)[0]["files"], 1, r)
        self.assertEqual(json.loads(self.hubctl_as(UID_B, "hf", "ls", "--json").stdout), [])
        r = self.hubctl_as(UID_A, "hf", "rm", "org/m", "--cache-dir", hub)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("removed 1 snapshot(s) of org/m", r.stdout)
        self.assertIn("of hubd's store released", r.stdout)
        self.assertFalse(os.path.exists(repo))
        self.assertEqual(self.stats()["holds"], 0)
        self.assertNotIn("system.posix_acl_access", os.listxattr(done["path"]))

    def test_hf_ls_all_is_an_admins_and_names_users_in_aligned_columns(self):
        import pwd
        url, digest = self.gated("w.bin", TOKEN_A)
        self.fetch(UID_B, self.origin.url("/files/w.bin?x=1"))  # public, for B
        long_label = "models/" + "an-organisation-with-a-long-name/" + "m" * 60 + "@main"
        for label in ("models/org/m@main", long_label):
            last, _ = self.hold(UID_B, digest, label=label,
                                link=os.path.join(self.homes[UID_B], label.replace("/", "_")))
            self.assertTrue(last.startswith("HELD"), last)
        r = self.hubctl_as(UID_B, "hf", "ls", "--all")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("permission_denied", r.stderr)
        self.assertIn("admin group", r.stderr)
        self.assertEqual(r.stdout, "")
        r = subprocess.run(self.hubctl_args("hf", "ls", "--all"), capture_output=True, text=True,
                           timeout=60)  # root
        self.assertEqual(r.returncode, 0, r)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 3, r.stdout)
        name = pwd.getpwuid(UID_B).pw_name
        self.assertTrue(all(line.startswith(name) for line in lines[1:]), lines)
        self.assertEqual(len({len(line) for line in lines}), 1, lines)  # columns line up
        self.assertEqual({line.index("REPO@REVISION") for line in lines[:1]} |
                         {line.index("models/") for line in lines[1:]}, {lines[0].index("REPO")})
        rows = json.loads(self.hubctl_as(UID_B, "hf", "ls", "--json").stdout)
        self.assertEqual({(x["uid"], x["user"]) for x in rows}, {(UID_B, name)})

    def test_hf_rm_of_one_revision_keeps_blobs_another_uses(self):
        url, digest = self.gated("w.bin", TOKEN_A)
        done = self.fetch(UID_A, url, TOKEN_A)
        hub, repo = self.layout(UID_A, digest, done["path"])
        other = os.path.join(repo, "snapshots", "d" * 40)
        r = as_user(UID_A, ["sh", "-c", "mkdir -p %s && ln -s ../../blobs/%s %s/w.bin"
                            % (other, digest, other)])
        self.assertEqual(r.returncode, 0, r)
        r = self.hubctl_as(UID_A, "hf", "rm", "org/m", "--revision", "main", "--cache-dir", hub)
        self.assertEqual(r.returncode, 0, r)
        self.assertFalse(os.path.exists(os.path.join(repo, "refs", "main")))
        self.assertFalse(os.path.exists(os.path.join(repo, "snapshots", "c" * 40)))
        self.assertTrue(os.path.islink(os.path.join(repo, "blobs", digest)))  # d... uses it
        # its hold and read grant stay with it: nothing of the link was released
        r = self.read_as(UID_A, os.path.join(other, "w.bin"))
        self.assertEqual(r.returncode, 0, r)

    def test_hf_rm_finds_the_cache_as_download_does(self):
        """HF_HUB_CACHE=~/hub: ~ expanded, as hf download and the Hub's
        clients do; a repo id the Hub refuses is refused."""
        url, digest = self.gated("w.bin", TOKEN_A)
        done = self.fetch(UID_A, url, TOKEN_A)
        hub, repo = self.layout(UID_A, digest, done["path"])
        env = dict(os.environ, HOME=self.homes[UID_A], HF_HUB_CACHE="~/hub")
        r = as_user(UID_A, self.hubctl_args("hf", "rm", "org/m"), env=env)
        self.assertEqual(r.returncode, 0, r)
        self.assertFalse(os.path.exists(repo))
        r = as_user(UID_A, self.hubctl_args("hf", "rm", "org/-m"), env=env)
        self.assertEqual(r.returncode, 2, r)
