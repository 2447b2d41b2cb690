"""The /hf front when the Hub cannot be reached: a client that has no cache
of its own (the real @huggingface/hub's downloadFile, curl) still gets the
files hubd holds, as huggingface_hub answers from its cache then. The Hub
stopped (hubd: connect) and the Hub answering 503 to everything (POST
/control/down). A branch is read as the commit the Hub last named for it
(kept in hubd.db, so a restart does not forget it); the file is the one that
client's credentials (or none) fetched, never another token's. What hubd
does not hold fails with the Hub's failure, and the Hub's answers (401, 403,
404) are never replaced by the cache's.
"""

import copy
import hashlib
import json
import os
import subprocess

from harness import HubTestCase
from hubstub_fixture import HubStub, file_bytes, git_blob_sha1, start_front
from test_front_hf import setUpModule  # noqa: F401 (node and @huggingface/hub)
from test_hf_outage import MAIN, REPOS as OUTAGE_REPOS, TAG
from test_hubstub import HUBCLIENT, request

# test_hf_outage's repos, with bob granted too and the gated file an LFS
# one: alice fetched it, and the Hub cannot vouch for bob while it is down.
REPOS = copy.deepcopy(OUTAGE_REPOS)
_gated = next(r for r in REPOS["repos"] if r["id"] == "org/gated")
_gated["gated"] = ["alice", "bob"]
_gated["files"] = {"g.bin": {"lfs": {"size": 70000, "seed": 9}}}


def sha256(b):
    return hashlib.sha256(b).hexdigest()


class FrontHfOutageTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.port = start_front(self, self.stub)
        self.hf = "http://127.0.0.1:%d/hf" % self.port

    def js(self, repo, path, rev="main", token=None):
        """@huggingface/hub's downloadFile through the front: its result."""
        out = os.path.join(self.tmp, "js.out")
        args = ["node", HUBCLIENT, "download", "--hub-url", self.hf, "--repo", repo,
                "--path", path, "--revision", rev, "--out", out, "--no-xet"]
        if token:
            args += ["--token", token]
        p = subprocess.run(args, capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def want(self, repo, path):
        spec = next(r for r in REPOS["repos"] if r["id"] == repo)["files"][path]
        return file_bytes(spec)

    def assert_js_gets(self, repo, path, rev="main", token=None):
        r = self.js(repo, path, rev, token)
        self.assertTrue(r["ok"], r)
        data = self.want(repo, path)
        self.assertEqual((r["size"], r["sha256"]), (len(data), sha256(data)))

    def assert_js_fails(self, repo, path, rev="main", token=None):
        r = self.js(repo, path, rev, token)
        self.assertFalse(r["ok"], r)
        return r

    def head(self, repo, path, rev="main", token=None, method="HEAD"):
        headers = {"Authorization": "Bearer " + token} if token else {}
        return request("%s/%s/resolve/%s/%s" % (self.hf, repo, rev, path), method, headers)

    def assert_gets(self, repo, path, rev="main", token=None):
        """A plain GET (urllib) of the file through the front: its bytes.
        Cheaper than a node process; @huggingface/hub's own runs are
        assert_js_gets."""
        st, _, body = self.head(repo, path, rev, token, "GET")
        self.assertEqual((st, sha256(body)), (200, sha256(self.want(repo, path))),
                         (repo, path, rev, token))

    def assert_fails(self, repo, path, rev="main", token=None):
        st, h, body = self.head(repo, path, rev, token, "GET")
        self.assertGreaterEqual(st, 500, (repo, path, rev, token))
        self.assertIsNone(h.get("X-Hubd-Offline"))
        self.assertNotEqual(sha256(body), sha256(self.want(repo, path)))

    def fill(self):
        """What the clients fetched while the Hub was up: main's small and
        LFS files, one file at the tag by its name, the gated file for
        alice."""
        self.assert_js_gets("org/model", "config.json")
        self.assert_gets("org/model", "model.safetensors")
        self.assert_gets("org/model", "config.json", "v1.0")
        self.assert_gets("org/gated", "g.bin", token="hf_alice")

    def check_served_from_cache(self, why):
        # the real @huggingface/hub finds a branch's LFS file and a tag's
        self.assert_js_gets("org/model", "model.safetensors")
        self.assert_js_gets("org/model", "config.json", "v1.0")
        self.assert_gets("org/model", "config.json")
        self.assert_gets("org/model", "config.json", TAG)  # a commit needs no note
        self.assert_gets("org/gated", "g.bin", token="hf_alice")
        # The head huggingface_hub reads, and why it is the cache's. Asked
        # with another token than the files were fetched with (a public
        # repo: the bytes fetched without one are everyone's), so that no
        # answer of the Hub's from the last minute stands in for it.
        st, h, _ = self.head("org/model", "model.safetensors", token="hf_bob")
        big = self.want("org/model", "model.safetensors")
        self.assertEqual(st, 200)
        self.assertEqual((h["X-Repo-Commit"], h["X-Linked-Etag"], h["X-Linked-Size"],
                          h["Content-Length"]),
                         (MAIN, '"%s"' % sha256(big), str(len(big)), str(len(big))))
        self.assertIn("the Hub cannot be reached (%s): answered from hubd's cache" % why,
                      h["X-Hubd-Offline"])
        st, h, _ = self.head("org/model", "config.json", token="hf_carol")
        self.assertEqual((st, h["X-Repo-Commit"], h["ETag"]),
                         (200, MAIN, '"%s"' % git_blob_sha1(self.want("org/model",
                                                                      "config.json"))))
        self.assertIsNone(h.get("X-Linked-Etag"))
        # not held: the Hub's failure
        self.assert_js_fails("org/model", "sub/vocab.txt")
        self.assert_fails("org/model", "model.safetensors", "v1.0")
        # alice's gated file is not bob's (granted, but the Hub cannot say so
        # now) nor anyone's without a token
        self.assert_fails("org/gated", "g.bin", token="hf_bob")
        self.assert_fails("org/gated", "g.bin")
        st, h, _ = self.head("org/gated", "g.bin", token="hf_bob")
        self.assertGreaterEqual(st, 500)
        self.assertIsNone(h.get("X-Linked-Etag"))

    def test_hub_stopped_the_front_serves_what_hubd_holds(self):
        self.fill()
        self.stub.stop()
        self.check_served_from_cache("connect")
        # after a restart: the branch's commit was kept in hubd.db
        self.hubd.stop()
        self.hubd.start()
        self.check_served_from_cache("connect")
        self.assertIn("the Hub cannot be reached (connect): answered from hubd's cache",
                      self.hubd.read_log())

    def test_hub_answering_503_the_front_serves_what_hubd_holds(self):
        self.fill()
        self.stub.control("down", {"status": 503})
        self.check_served_from_cache("http_503")
        self.stub.control("down", {"status": None})
        st, h, _ = self.head("org/model", "model.safetensors", token="hf_alice")
        self.assertEqual(st, 200)
        self.assertIsNone(h.get("X-Hubd-Offline"))

    def test_the_hubs_answers_are_not_replaced_by_the_cache(self):
        """A 401, 403 or 404 is the Hub's word about the file: it passes,
        whatever hubd holds."""
        self.fill()
        for token, status in ((None, 401), ("hf_carol", 403)):
            st, h, _ = self.head("org/gated", "g.bin", token=token)
            self.assertEqual(st, status)
            self.assertIsNone(h.get("X-Hubd-Offline"))
            r = self.assert_js_fails("org/gated", "g.bin", token=token)
            self.assertEqual(r["status"], status, r)
        st, h, _ = self.head("org/model", "config.json", rev="nope")
        self.assertEqual(st, 404)
        self.assertIsNone(h.get("X-Hubd-Offline"))

    def test_a_branch_is_the_commit_the_hub_last_named(self):
        """main moves to the tag's commit and a client fetches a file of it;
        then the Hub goes: main is served as the tag's commit, as
        huggingface_hub's refs/main would say. (Bob's token: no answer of
        the Hub's to it from the last minute stands in.)"""
        self.fill()
        self.stub.control("branch", {"repo": "org/model", "rev": "main", "commit": TAG})
        self.assert_gets("org/model", "sub/vocab.txt")
        self.stub.control("down", {"status": 503})
        st, h, _ = self.head("org/model", "config.json", token="hf_bob")
        self.assertEqual((st, h["X-Repo-Commit"]), (200, TAG))
        self.assertIn("X-Hubd-Offline", h)
        # main's LFS file was held at the old commit only
        st, _, _ = self.head("org/model", "model.safetensors", token="hf_bob")
        self.assertEqual(st, 503)


if __name__ == "__main__":
    import unittest
    unittest.main()
