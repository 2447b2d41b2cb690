"""The HTTP front's Hugging Face endpoint (issue 13, first part: resolve):
hubd's /hf in front of the stand-in Hub (tests/hubstub.py), asked by
urllib as huggingface_hub asks, and by the real @huggingface/hub from npm.
"""

import hashlib
import json
import os
import shutil
import subprocess
import threading
import unittest

from harness import HubTestCase, Hubd, sha256_file, wait_for, write_config
from hubstub_fixture import HubStub, git_blob_sha1
from test_front import free_port
from test_hubstub import JS_DIR, HUBCLIENT, REPOS, request

MAIN = "1" * 40


def setUpModule():
    if shutil.which("node") is None or not os.path.isdir(
            os.path.join(JS_DIR, "node_modules", "@huggingface", "hub")):
        raise RuntimeError("node or tests/js/node_modules missing: run scripts/install-deps.sh")


class HfTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS, page_size=2)
        self.addCleanup(self.stub.stop)
        self.hubd.stop()
        self.port = free_port()
        conf = write_config(os.path.join(self.tmp, "hf.conf"), http_listen="127.0.0.1:%d" % self.port,
                            hf_upstream=self.stub.hub_url)
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)
        self.hf = "http://127.0.0.1:%d/hf" % self.port

    def resolve(self, path, rev="main", repo="org/model"):
        return "%s/%s/resolve/%s/%s" % (self.hf, repo, rev, path)

    def js(self, cmd, *args, repo="org/model"):
        p = subprocess.run(["node", HUBCLIENT, cmd, "--hub-url", self.hf, "--repo", repo] + list(args),
                           capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def assert_no_hint(self, headers):
        self.assertIsNone(headers.get("Location"))
        for k in headers.keys():
            self.assertFalse(k.lower().startswith("x-xet"), k)
        self.assertNotIn("xet", headers.get("Link", ""))

    def test_head_answers_what_huggingface_hub_reads(self):
        small = self.stub.file_bytes("org/model", "config.json")
        st, h, _ = request(self.resolve("config.json"), "HEAD")
        self.assertEqual(st, 200)
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        self.assertEqual(h["ETag"], '"%s"' % git_blob_sha1(small))
        self.assertEqual(int(h["Content-Length"]), len(small))
        self.assert_no_hint(h)
        big = self.stub.file_bytes("org/model", "model.safetensors")
        sha = hashlib.sha256(big).hexdigest()
        st, h, _ = request(self.resolve("model.safetensors", rev="v1.0"), "HEAD")
        self.assertEqual(st, 200)  # never the Hub's 302: the front follows it
        self.assertEqual((h["X-Linked-Etag"], h["X-Linked-Size"]), ('"%s"' % sha, str(len(big))))
        self.assertEqual(h["X-Repo-Commit"], "2" * 40)
        self.assertEqual(int(h["Content-Length"]), len(big))
        self.assert_no_hint(h)
        self.assertEqual(self.stub.stats("cdn")["requests"], {})  # a HEAD fetches no body

    def test_get_is_pinned_to_the_commit_and_verified(self):
        big = self.stub.file_bytes("org/model", "model.safetensors")
        sha = hashlib.sha256(big).hexdigest()
        outs = [None] * 4

        def get(i):
            outs[i] = request(self.resolve("model.safetensors"))
        threads = [threading.Thread(target=get, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for st, h, body in outs:
            self.assertEqual((st, hashlib.sha256(body).hexdigest()), (200, sha))
            self.assertEqual(h["X-Repo-Commit"], MAIN)
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})
        # By a tag of the same commit... and as the same content anywhere: hits.
        st, h, body = request(self.resolve("model.safetensors", rev=MAIN))
        self.assertEqual((st, h["X-Hubd-Source"]), (200, "hit"))
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})
        rows = self.hubd.query("SELECT url FROM entries")
        self.assertIn(("%s/org/model/resolve/%s/model.safetensors" % (self.stub.hub_url, MAIN),),
                      rows)

    def test_a_get_after_a_head_asks_for_the_commit_the_head_announced(self):
        st, h, _ = request(self.resolve("config.json"), "HEAD")
        self.assertEqual((st, h["X-Repo-Commit"]), (200, MAIN))
        st, h, body = request(self.resolve("config.json"))
        self.assertEqual((st, body), (200, self.stub.file_bytes("org/model", "config.json")))
        asked = self.stub.stats("hub")["requests"]
        # The HEAD asked for the branch; the GET for the commit it was then.
        self.assertEqual(asked.get("/org/model/resolve/main/config.json"), 1, asked)
        self.assertGreaterEqual(asked.get("/org/model/resolve/%s/config.json" % MAIN, 0), 1, asked)

    def test_errors_pass_with_the_hubs_codes(self):
        st, h, body = request(self.resolve("missing.txt"))
        self.assertEqual((st, h["X-Error-Code"]), (404, "EntryNotFound"))
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        st, h, _ = request(self.resolve("config.json", rev="nope"))
        self.assertEqual((st, h["X-Error-Code"]), (404, "RevisionNotFound"))
        st, h, _ = request(self.resolve("g.bin", repo="org/gated"))
        self.assertEqual(st, 401)
        st, h, body = request(self.resolve("g.bin", repo="org/gated"),
                              headers={"Authorization": "Bearer hf_alice"})
        self.assertEqual(st, 200)
        # bob's token is refused by the Hub: the file alice's fetch cached
        # is not his.
        st, h, _ = request(self.resolve("g.bin", repo="org/gated"),
                           headers={"Authorization": "Bearer hf_bob"})
        self.assertEqual((st, h["X-Error-Code"]), (403, "GatedRepo"))

    def test_a_renamed_repo_is_followed_by_the_front(self):
        st, h, body = request(self.resolve("m.txt", repo="old-org/moved"))
        self.assertEqual((st, body), (200, b"moved"))
        self.assert_no_hint(h)

    def test_a_corrupted_cdn_never_delivers_the_file_whole(self):
        data = self.stub.file_bytes("org/model", "shards/part-1.bin")
        sha = hashlib.sha256(data).hexdigest()
        self.stub.corrupt(sha, "flip")
        out = os.path.join(self.tmp, "c.out")
        r = subprocess.run(["curl", "-sS", "-o", out, "-w", "%{http_code}",
                            self.resolve("shards/part-1.bin")], capture_output=True, timeout=60)
        # Either the download was verified (and refused) before the answer
        # began: a 502 that says so; or it was being streamed: the body is
        # cut short of its Content-Length (curl: 18). Never the file.
        if r.returncode == 0:
            self.assertEqual(r.stdout, b"502")
            with open(out, "rb") as f:
                self.assertIn(b"sha256", f.read())
        else:
            self.assertEqual(r.returncode, 18, r)
        self.assertLess(os.path.getsize(out), len(data))
        self.assertEqual(self.hubd.blob_files(), [])
        self.stub.corrupt(sha, None)
        r = subprocess.run(["curl", "-sS", "-o", out, self.resolve("shards/part-1.bin")],
                           capture_output=True, timeout=60)
        self.assertEqual((r.returncode, sha256_file(out)), (0, sha))

    def test_a_small_file_is_checked_against_its_git_sha1(self):
        data = self.stub.file_bytes("org/model", "tokenizer/vocab.txt")
        self.stub.corrupt(git_blob_sha1(data), "flip")
        st, h, body = request(self.resolve("tokenizer/vocab.txt"))
        self.assertEqual((st, h["X-Hubd-Error"]), (502, "hash_mismatch"))
        self.assertNotEqual(body, data)
        # The refused file is forgotten (removed as hubctl rm does): the
        # next request downloads it again.
        wait_for(lambda: self.hubd.query(
            "SELECT count(*) FROM entries WHERE url LIKE '%vocab.txt'")[0][0] == 0,
            what="the refused entry to go")
        self.stub.corrupt(git_blob_sha1(data), None)
        st, h, body = request(self.resolve("tokenizer/vocab.txt", rev=MAIN))
        self.assertEqual((st, body), (200, data))

    def test_huggingface_js_downloads_through_the_front(self):
        for path in ("config.json", "model.safetensors"):
            with self.subTest(path=path):
                data = self.stub.file_bytes("org/model", path)
                out = os.path.join(self.tmp, path.replace("/", "_"))
                r = self.js("download", "--path", path, "--out", out)
                self.assertTrue(r["ok"], r)
                self.assertEqual(sha256_file(out), hashlib.sha256(data).hexdigest())
                for _, url, _, _, final in r["requests"]:
                    self.assertTrue(final.startswith(self.hf), final)  # never around the front
        sha = hashlib.sha256(self.stub.file_bytes("org/model", "model.safetensors")).hexdigest()
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})


if __name__ == "__main__":
    unittest.main()
