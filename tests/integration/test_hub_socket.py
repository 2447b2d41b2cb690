"""The Hugging Face Hub over the Unix socket (a FETCH of a Hub URL with a
token, and HFREPO): a repo's file list from the Hub asked with the client's
own token (HFREPO, answered REPO with a descriptor of the list), and a FETCH
of a Hub resolve URL with a token, which asks the Hub about the file with
that token first, as the HTTP front's /hf route does: two users whose
different tokens the Hub accepts for one gated file share one CDN download
(a hit one after the other, attached at once); a token the Hub refuses gets
the Hub's error and no byte, even when the refusal names the digest; wrong
CDN bytes serve nobody. The stand-in Hub is tests/hubstub.py.
"""

import array
import hashlib
import os
import random
import re
import socket
import threading
import time
import urllib.parse

from harness import SLOWED, HubTestCase, Hubd, wait_for, write_config
from hubstub_fixture import HubStub, git_blob_sha1, start_front

ALICE = "Authorization: Bearer hf_alice"
BOB = "Authorization: Bearer hf_bob"
CAROL = "Authorization: Bearer hf_carol"  # a valid token, not granted


def sha(*parts):
    return hashlib.sha1("/".join(parts).encode()).hexdigest()


REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
    "repos": [
        {"id": "org/gated", "gated": ["alice", "bob"],
         "files": {"g.bin": {"lfs": {"size": 3 * 1024 * 1024, "seed": 22}},
                   "README.md": {"text": "gated\n"}}},
        {"id": "org/public",
         "revisions": {"main": sha("public", "main"), "v1.0": sha("public", "v1.0"),
                       "refs/pr/1": sha("public", "pr1")},
         "files": {"config.json": {"text": "{\"a\": 1}\n"},
                   "sub dir/w.bin": {"lfs": {"size": 70000, "seed": 3}}}},
        {"id": "org/data", "type": "dataset",
         "files": {"data/train.csv": {"text": "x,y\n1,2\n"}}},
        {"id": "new-org/model", "renamed_from": "old-org/model",
         "files": {"m.txt": {"text": "renamed\n"}}},
        {"id": "org/many", "files": {"f%04d.txt" % i: {"text": "%d\n" % i} for i in range(3000)}},
        # A public pointer to the gated file's digest, its object never
        # uploaded: the CDN has nothing for this repo.
        {"id": "evil/borrow", "files": {"b.bin": {"lfs_pointer": {
            "sha256": hashlib.sha256(random.Random(22).randbytes(3 * 1024 * 1024)).hexdigest(),
            "size": 3 * 1024 * 1024}}}},
    ],
}


def enc(v):
    return urllib.parse.quote(v, safe="/:.-_~@")


class Session:
    """One socket session: request lines out, reply lines (with the
    descriptor a DONE or REPO line carries) in."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(path)
        self.buf = b""
        self.fds = []

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.sock.close()

    def send(self, verb, fields):
        self.sock.sendall((verb + "".join(" %s=%s" % (k, enc(v)) for k, v in fields) + "\n").encode())

    def line(self):
        """(verb, {key: value}, fd or None)."""
        while b"\n" not in self.buf:
            fds = array.array("i")
            data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[:len(cdata) - len(cdata) % fds.itemsize])
            self.fds.extend(fds)
            if not data:
                raise AssertionError("hubd closed the session")
            self.buf += data
        raw, self.buf = self.buf.split(b"\n", 1)
        words = raw.decode().split(" ")
        fd = self.fds.pop(0) if words[0] in ("DONE", "REPO") and self.fds else None
        return words[0], parse_fields(words[1:]), fd

    def final(self):
        """The request's last line (DONE, REPO or ERR), and the verbs before it."""
        seen = []
        while True:
            verb, f, fd = self.line()
            seen.append(verb)
            if verb in ("DONE", "REPO", "ERR"):
                return verb, f, fd, seen


def parse_fields(words):
    out = {}
    for w in words:
        k, _, v = w.partition("=")
        out[k] = urllib.parse.unquote(v)
    return out


def vm_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def read_fd(fd):
    """By offset: waiters of one download share one open file (its offset)."""
    try:
        out, off = [], 0
        while True:
            b = os.pread(fd, 1 << 20, off)
            if not b:
                return b"".join(out)
            out.append(b)
            off += len(b)
    finally:
        os.close(fd)


class HubSocketTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        start_front(self, self.stub)
        self.url = self.stub.resolve_url("org/gated", "g.bin")
        self.data = self.stub.file_bytes("org/gated", "g.bin")
        self.sha = hashlib.sha256(self.data).hexdigest()
        self.cdn_path = "/cdn/" + self.sha

    def session(self):
        s = Session(self.hubd.socket)
        self.addCleanup(s.close)
        return s

    def cdn_requests(self):
        return self.stub.stats("cdn")["requests"].get(self.cdn_path, 0)

    # ---- HFREPO -------------------------------------------------------------

    def hfrepo(self, repo, *extra, header=None):
        s = self.session()
        fields = [("id", "r1"), ("repo", repo)] + list(extra)
        if header:
            fields.append(("header", header))
        s.send("HFREPO", fields)
        verb, f, fd, _ = s.final()
        lines = None
        if fd is not None:
            lines = [parse_fields(w.split(" ")) for w in read_fd(fd).decode().splitlines()]
        return verb, f, lines

    def test_hfrepo_public_lists_every_file(self):
        verb, f, lines = self.hfrepo("org/public")
        self.assertEqual(verb, "REPO", f)
        self.assertEqual((f["id"], f["repo"], f["type"], f["commit"]),
                         ("r1", "org/public", "model", sha("public", "main")))
        self.assertEqual(f["resolve"], "%s/org/public/resolve/%s/" % (self.stub.hub_url, f["commit"]))
        w = self.stub.file_bytes("org/public", "sub dir/w.bin")
        cfg = self.stub.file_bytes("org/public", "config.json")
        self.assertEqual((f["files"], f["size"]), ("2", str(len(w) + len(cfg))))
        by_path = {line["path"]: line for line in lines}
        self.assertEqual(sorted(by_path), ["config.json", "sub dir/w.bin"])
        self.assertEqual(by_path["config.json"],
                         {"path": "config.json", "size": str(len(cfg)), "blob": git_blob_sha1(cfg)})
        self.assertEqual(by_path["sub dir/w.bin"]["sha256"], hashlib.sha256(w).hexdigest())
        self.assertEqual(by_path["sub dir/w.bin"]["size"], str(len(w)))
        self.assertEqual(len(by_path["sub dir/w.bin"]["blob"]), 40)

    def test_hfrepo_fd_is_read_only(self):
        s = self.session()
        s.send("HFREPO", [("id", "x"), ("repo", "org/public")])
        verb, f, fd, _ = s.final()
        self.assertEqual(verb, "REPO", f)
        try:
            with self.assertRaises(OSError):
                os.write(fd, b"more")
        finally:
            os.close(fd)

    def test_hfrepo_revisions(self):
        for rev, want in (("v1.0", sha("public", "v1.0")), ("refs/pr/1", sha("public", "pr1")),
                          (sha("public", "v1.0"), sha("public", "v1.0"))):
            verb, f, _ = self.hfrepo("org/public", ("revision", rev))
            self.assertEqual((verb, f.get("commit")), ("REPO", want), (rev, f))
        verb, f, _ = self.hfrepo("org/public", ("revision", "nope"))
        self.assertEqual((verb, f["code"]), ("ERR", "http_404"), f)
        self.assertIn("RevisionNotFound", f["msg"])

    def test_hfrepo_gated_by_token(self):
        verb, f, lines = self.hfrepo("org/gated", header=ALICE)
        self.assertEqual(verb, "REPO", f)
        self.assertEqual(sorted(line["path"] for line in lines), ["README.md", "g.bin"])
        verb, f, _ = self.hfrepo("org/gated", header=CAROL)
        self.assertEqual((verb, f["id"], f["code"]), ("ERR", "r1", "http_403"), f)
        self.assertTrue(f["msg"].startswith("GatedRepo: Access to model org/gated is restricted"), f)
        verb, f, _ = self.hfrepo("org/gated")
        self.assertEqual((verb, f["code"]), ("ERR", "http_401"), f)
        self.assertNotIn("hf_alice", self.hubd.read_log())

    def test_hfrepo_dataset_and_renamed_repo(self):
        verb, f, lines = self.hfrepo("org/data", ("type", "dataset"))
        self.assertEqual((verb, f.get("type")), ("REPO", "dataset"), f)
        self.assertTrue(f["resolve"].startswith(self.stub.hub_url + "/datasets/org/data/resolve/"))
        self.assertEqual([line["path"] for line in lines], ["data/train.csv"])
        verb, f, lines = self.hfrepo("old-org/model")
        self.assertEqual((verb, f.get("repo")), ("REPO", "new-org/model"), f)
        self.assertTrue(f["resolve"].startswith(self.stub.hub_url + "/new-org/model/resolve/"))
        self.assertEqual([line["path"] for line in lines], ["m.txt"])

    def test_hfrepo_bad_requests(self):
        for repo, extra in (("a//b", ()), ("-x", ()), ("a/b/c", ()), ("org/public", (("type", "x"),))):
            verb, f, _ = self.hfrepo(repo, *extra)
            self.assertEqual((verb, f["code"]), ("ERR", "bad_request"), (repo, f))
        verb, f, _ = self.hfrepo("org/missing")
        self.assertEqual((verb, f["code"]), ("ERR", "http_401"), f)  # RepoNotFound, anonymous

    def test_hfrepo_then_fetch_each_file(self):
        verb, f, lines = self.hfrepo("org/public")
        for line in lines:
            url = f["resolve"] + "/".join(urllib.parse.quote(p) for p in line["path"].split("/"))
            s = self.session()
            s.send("FETCH", [("id", "f"), ("url", url)])
            verb, d, fd, _ = s.final()
            self.assertEqual((verb, d.get("size")), ("DONE", line["size"]), (url, d))
            data = read_fd(fd)
            if "sha256" in line:
                self.assertEqual(hashlib.sha256(data).hexdigest(), line["sha256"])
            else:
                self.assertEqual(git_blob_sha1(data), line["blob"])

    def test_session_closed_mid_hfrepo_and_mid_question(self):
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        s = Session(self.hubd.socket)
        s.send("HFREPO", [("id", "a"), ("repo", "org/gated"), ("header", ALICE)])
        s.send("FETCH", [("id", "b"), ("url", self.url), ("header", ALICE)])
        s.close()
        time.sleep(0.5)
        # the daemon goes on: a new session is answered
        verb, f, _ = self.hfrepo("org/public")
        self.assertEqual(verb, "REPO", f)

    def test_hfrepo_in_flight_per_uid_is_bounded(self):
        """At most 4 HFREPOs of one uid in flight, across its sessions: the
        5th is refused at once, the 4 are answered, and then it may ask."""
        self.stub.control("hold", {"user": "alice", "delay": 2.0, "status": None, "api": True})
        held = []
        for i in range(4):
            s = self.session()
            s.send("HFREPO", [("id", "h%d" % i), ("repo", "org/gated"), ("header", ALICE)])
            held.append(s)
        time.sleep(0.5)  # the four are at the Hub, which holds them
        s = self.session()
        t0 = time.monotonic()
        s.send("HFREPO", [("id", "x"), ("repo", "org/public")])
        verb, f, _, _ = s.final()
        self.assertEqual((verb, f.get("code")), ("ERR", "too_many_requests"), f)
        self.assertIn("4 HFREPO requests in flight", f["msg"])
        self.assertLess(time.monotonic() - t0, 1.0)
        for s in held:
            verb, f, fd, _ = s.final()
            self.assertEqual(verb, "REPO", f)
            os.close(fd)
        verb, f, _ = self.hfrepo("org/public")
        self.assertEqual(verb, "REPO", f)

    def test_hfrepo_listings_held_open_cost_disk_not_hubds_memory(self):
        """A listing is a file of the cache's tmp/ with no name (O_TMPFILE),
        not a memfd whose pages are hubd's as long as a client keeps it:
        120 of them held open by a client leave hubd's RSS where it was."""
        s = self.session()
        pid = self.hubd.proc.pid  # hubd itself, unless under HUBD_WRAPPER
        fds = []

        def close_all():
            for fd in fds:
                os.close(fd)
        self.addCleanup(close_all)
        rss0 = None
        for i in range(120):
            s.send("HFREPO", [("id", "l%d" % i), ("repo", "org/many")])
            verb, f, fd, _ = s.final()
            self.assertEqual((verb, f.get("files")), ("REPO", "3000"), f)
            fds.append(fd)
            if i == 9:  # the pool's arenas have grown to what a listing takes
                rss0 = vm_rss(pid)
        st = os.fstat(fds[0])
        self.assertEqual(st.st_nlink, 0)  # no name: gone with the last descriptor
        self.assertEqual(st.st_dev, os.stat(os.path.join(self.hubd.cache, "tmp")).st_dev)
        self.assertEqual(st.st_mode & 0o777, 0o400)
        self.assertFalse(os.readlink("/proc/self/fd/%d" % fds[0]).startswith("/memfd:"))
        self.assertEqual(self.hubd.tmp_files(), [])
        # Nor the disk without bound: a user's 16 latest stay whole (its
        # oldest are emptied for them, whoever holds them open), and STATS
        # says what they hold. Before, all 120 stayed: 25 MB on disk. (The
        # emptying is the pool's, after the answers: a moment later.)
        wait_for(lambda: all(os.fstat(fd).st_size == 0 for fd in fds[:104]), 10,
                 what="the oldest listings to be emptied")
        sizes = [os.fstat(fd).st_size for fd in fds]
        self.assertEqual(sizes[:104], [0] * 104)
        self.assertTrue(all(n > 100000 for n in sizes[104:]), sizes[104:])
        self.assertEqual(self.stats()["listing_bytes"], sum(sizes))
        # Under the sanitizers RSS says nothing (ASan's quarantine keeps
        # what the pool freed); under valgrind pid is not hubd's.
        if not SLOWED:
            self.assertLess(vm_rss(pid) - rss0, 8 << 20, "hubd's RSS grew with the listings held")
        # The session that asked goes: so do its listings.
        s.close()
        wait_for(lambda: self.stats()["listing_bytes"] == 0, what="the listings to be emptied")
        wait_for(lambda: all(os.fstat(fd).st_size == 0 for fd in fds[104:]), 10,
                 what="their files to be emptied")

    def test_hfrepo_listings_are_bounded_by_their_users_bytes(self):
        """max_listing_bytes_per_user: a user's listings kept open hold at
        most that on the cache's disk, its oldest emptied first; one
        larger alone is refused (too_large)."""
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "lb.conf"), hf_upstream=self.stub.hub_url,
                            max_listing_bytes_per_user="500K")
        self.hubd = Hubd(os.path.join(self.tmp, "hub-lb"), config=conf)
        s = self.session()
        fds = []
        self.addCleanup(lambda: [os.close(fd) for fd in fds])
        for i in range(5):
            s.send("HFREPO", [("id", "l%d" % i), ("repo", "org/many")])
            verb, f, fd, _ = s.final()
            self.assertEqual(verb, "REPO", f)
            fds.append(fd)
        # The older listings are emptied in the pool, after the answer that
        # pushed them out: on a loaded machine a moment later.
        wait_for(lambda: sum(os.fstat(fd).st_size for fd in fds) <= 500 << 10, 10,
                 what="the oldest listings to be emptied")
        sizes = [os.fstat(fd).st_size for fd in fds]
        self.assertLessEqual(sum(sizes), 500 << 10, sizes)
        self.assertEqual(sizes[0], 0)
        self.assertGreater(sizes[-1], 100000)
        self.assertEqual(self.stats()["listing_bytes"], sum(sizes))
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "lb2.conf"), hf_upstream=self.stub.hub_url,
                            max_listing_bytes_per_user="100K")
        self.hubd = Hubd(os.path.join(self.tmp, "hub-lb2"), config=conf)
        verb, f, lines = self.hfrepo("org/many")
        self.assertEqual((verb, f["code"]), ("ERR", "too_large"), f)
        self.assertIn("max_listing_bytes_per_user", f["msg"])

    # ---- FETCH of a Hub URL with a token ----------------------------------

    def fetch(self, header, s=None, url=None):
        s = s or self.session()
        s.send("FETCH", [("id", "g"), ("url", url or self.url), ("header", header)])
        return s.final()

    def assert_served(self, out, source=None):
        verb, f, fd, _ = out
        self.assertEqual(verb, "DONE", f)
        self.assertEqual(f["sha256"], self.sha)
        self.assertEqual(hashlib.sha256(read_fd(fd)).hexdigest(), self.sha)
        if source:
            self.assertEqual(f["source"], source)

    def assert_refused(self, out, code):
        verb, f, fd, seen = out
        self.assertEqual((verb, f["code"]), ("ERR", code), f)
        self.assertIsNone(fd)
        self.assertEqual(seen, ["ERR"])  # no QUEUED, HIT or ATTACHED before it

    def test_a_pointer_in_another_repo_naming_the_digest_opens_nothing(self):
        """The socket's FETCH of another repo's pointer to the gated digest,
        whose object that repo never stored: the Hub names the digest, the
        CDN has no such object for that repo, so it vouches for nobody and
        the fetch fails (before: DONE with the gated bytes, a hit)."""
        self.assert_served(self.fetch(ALICE), "download")
        borrow = self.stub.resolve_url("evil/borrow", "b.bin")
        verb, f, fd, _ = self.fetch(CAROL, url=borrow)
        self.assertEqual(verb, "ERR", f)
        self.assertIsNone(fd)
        self.assertGreaterEqual(self.stub.stats("cdn")["probes"].get(self.cdn_path, 0), 1)

    def test_two_granted_tokens_one_after_the_other_download_once(self):
        self.assert_served(self.fetch(ALICE), "download")
        self.assertEqual(self.cdn_requests(), 1)
        self.assert_served(self.fetch(BOB), "hit")
        self.assertEqual(self.cdn_requests(), 1)
        auth = self.stub.stats("hub")["auth"]["/org/gated/resolve/main/g.bin"]
        self.assertIn("Bearer hf_bob", auth)
        self.assertEqual(len(self.hubd.blob_files()), 1)

    def test_two_granted_tokens_at_once_download_once(self):
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        a, b = self.session(), self.session()
        a.send("FETCH", [("id", "a"), ("url", self.url), ("header", ALICE)])
        time.sleep(0.3)
        b.send("FETCH", [("id", "b"), ("url", self.url), ("header", BOB)])
        outs = [None, None]
        threads = [threading.Thread(target=lambda i, s: outs.__setitem__(i, s.final()), args=(i, s))
                   for i, s in enumerate((a, b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        self.assert_served(outs[0], "download")
        self.assert_served(outs[1], "attached")
        self.assertEqual(outs[1][3][0], "ATTACHED")
        self.assertEqual(self.cdn_requests(), 1)

    def test_a_token_not_granted_gets_the_hubs_error_and_no_bytes(self):
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        a = self.session()
        a.send("FETCH", [("id", "a"), ("url", self.url), ("header", ALICE)])
        time.sleep(0.3)
        out = self.fetch(CAROL)  # while alice's download runs
        self.assert_refused(out, "http_403")
        self.assertTrue(out[1]["msg"].startswith("GatedRepo: "), out[1])
        self.assert_served(a.final())
        for _ in range(2):  # once it is stored, and again (nothing remembered for carol)
            self.assert_refused(self.fetch(CAROL), "http_403")
        self.assert_served(self.fetch(BOB), "hit")
        self.assertEqual(self.cdn_requests(), 1)

    def test_a_hub_that_names_the_digest_in_a_refusal_opens_nothing(self):
        self.stub.control("hostile", {"on": True})
        self.assert_served(self.fetch(ALICE))
        self.assert_refused(self.fetch(CAROL), "http_403")
        # even with the digest named by the client itself
        s = self.session()
        s.send("FETCH", [("id", "c"), ("url", self.url), ("sha256", self.sha), ("header", CAROL)])
        self.assert_refused(s.final(), "http_403")
        self.assertEqual(self.cdn_requests(), 1)

    def test_a_client_digest_the_hub_contradicts_is_refused(self):
        s = self.session()
        s.send("FETCH", [("id", "c"), ("url", self.url), ("sha256", "0" * 64), ("header", ALICE)])
        out = s.final()
        self.assert_refused(out, "hash_mismatch")
        self.assertIn(self.sha, out[1]["msg"])
        self.assertEqual(self.cdn_requests(), 0)

    def test_wrong_bytes_from_the_cdn_serve_nobody(self):
        self.stub.corrupt(self.sha, "flip")
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        a, b = self.session(), self.session()
        a.send("FETCH", [("id", "a"), ("url", self.url), ("header", ALICE)])
        time.sleep(0.3)
        b.send("FETCH", [("id", "b"), ("url", self.url), ("header", BOB)])
        for s in (a, b):
            verb, f, fd, _ = s.final()
            self.assertEqual((verb, f.get("code")), ("ERR", "hash_mismatch"), f)
            self.assertIsNone(fd)
        self.assertEqual(self.hubd.blob_files(), [])
        self.stub.corrupt(self.sha, None)
        self.stub.control("hold", {"user": None})
        self.assert_served(self.fetch(BOB), "download")

    def test_a_small_file_stays_private_to_its_token(self):
        url = self.stub.resolve_url("org/gated", "README.md")
        s = self.session()
        s.send("FETCH", [("id", "r"), ("url", url), ("header", ALICE)])
        self.assertEqual(s.final()[0], "DONE")
        s.send("FETCH", [("id", "r2"), ("url", url), ("header", CAROL)])
        self.assert_refused(s.final(), "http_403")

    def test_wrong_bytes_of_a_small_file_are_refused_and_forgotten(self):
        """A small file's ETag is its git blob SHA-1: stored bytes that do
        not match it are ERR hash_mismatch, never DONE, and their entry is
        forgotten, so that the FETCH after the Hub mends gets the file."""
        url = self.stub.resolve_url("org/gated", "README.md")
        data = self.stub.file_bytes("org/gated", "README.md")
        oid = git_blob_sha1(data)
        self.stub.corrupt(oid, "flip")
        for _ in range(2):  # downloaded again each time: the wrong bytes are not kept
            verb, f, fd, seen = self.fetch(ALICE, url=url)
            self.assertEqual((verb, f.get("code")), ("ERR", "hash_mismatch"), f)
            self.assertIsNone(fd)
            self.assertNotIn("DONE", seen)
            shas = re.findall(r"\b[0-9a-f]{40}\b", f["msg"])
            self.assertEqual(len(shas), 2, f["msg"])  # what the bytes are, what the Hub says
            self.assertEqual(shas[1], oid)
            self.assertNotEqual(shas[0], oid)
        self.stub.corrupt(oid, None)
        verb, f, fd, _ = self.fetch(ALICE, url=url)
        self.assertEqual(verb, "DONE", f)
        self.assertEqual(read_fd(fd), data)
        self.assertEqual(f["source"], "download")


if __name__ == "__main__":
    import unittest
    unittest.main()
