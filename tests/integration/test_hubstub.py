"""The stand-in Hub (tests/hubstub.py) against the real clients' expectations.

No hubd here: @huggingface/hub (tests/js, pinned by its package-lock.json,
installed by scripts/install-deps.sh) and plain urllib talk to the stub
directly, so these tests document how faithful the stub is. The tests of
hubd's /hf front point the same client at the front instead.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.parse
import urllib.request

from harness import sha256_file
from hubstub_fixture import HubStub, file_bytes, git_blob_sha1

HERE = os.path.dirname(os.path.abspath(__file__))
JS_DIR = os.path.join(os.path.dirname(HERE), "js")
HUBCLIENT = os.path.join(JS_DIR, "hubclient.mjs")
MAIN = "1" * 40
TAG = "2" * 40

REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob"},
    "repos": [
        {"id": "org/model", "revisions": {"main": MAIN, "v1.0": TAG},
         "files": {"config.json": {"text": '{"model_type": "stub"}\n'},
                   "README.md": {"text": "# a stub\n"},
                   "tokenizer/vocab.txt": {"text": "a\nb\nc\n"},
                   "tokenizer/deep/merges.txt": {"text": "a b\n"},
                   "model.safetensors": {"lfs": {"size": 700000, "seed": 1}},
                   "shards/part-1.bin": {"lfs": {"size": 200000, "seed": 2}},
                   "shards/part-2.bin": {"lfs": {"size": 200001, "seed": 3}}}},
        {"id": "org/xet", "xet": True,
         "files": {"weights.bin": {"lfs": {"size": 50000, "seed": 4}}, "README.md": {"text": "x"}}},
        {"id": "org/gated", "gated": ["alice"], "files": {"g.bin": {"lfs": {"size": 1234, "seed": 5}}}},
        {"id": "org/private", "private": ["alice"], "files": {"p.txt": {"text": "secret"}}},
        {"id": "new-org/moved", "renamed_from": "old-org/moved", "files": {"m.txt": {"text": "moved"}}},
        {"id": "org/data", "type": "dataset", "files": {"data/train.csv": {"text": "a,b\n1,2\n"}}},
    ],
}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def request(url, method="GET", headers=None, data=None):
    """(status, headers, body) without following redirects."""
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with OPENER.open(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers, e.read()


def setUpModule():
    if shutil.which("node") is None or not os.path.isdir(os.path.join(JS_DIR, "node_modules", "@huggingface", "hub")):
        raise RuntimeError("node or tests/js/node_modules missing: run scripts/install-deps.sh")


class HubStubTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="hubd-hubstub-")
        cls.stub = HubStub(cls.tmp, REPOS, page_size=2)

    @classmethod
    def tearDownClass(cls):
        cls.stub.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.stub.reset()
        self.work = tempfile.mkdtemp(dir=self.tmp)

    def js(self, cmd, *args, repo="org/model", timeout=120):
        p = subprocess.run(["node", HUBCLIENT, cmd, "--hub-url", self.stub.hub_url, "--repo", repo] + list(args),
                           capture_output=True, timeout=timeout)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def download(self, path, *args, repo="org/model"):
        out = os.path.join(self.work, "out")
        return self.js("download", "--path", path, "--out", out, *args, repo=repo), out

    # --- what huggingface_hub reads from the resolve answers ---------------
    def test_small_file_headers(self):
        data = self.stub.file_bytes("org/model", "config.json")
        st, h, body = request(self.stub.resolve_url("org/model", "config.json"), "HEAD")
        self.assertEqual(st, 200)
        self.assertEqual(h["ETag"], '"%s"' % git_blob_sha1(data))
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        self.assertEqual(h["Content-Length"], str(len(data)))
        self.assertEqual(h["Accept-Ranges"], "bytes")
        self.assertIsNone(h["X-Linked-Etag"])
        self.assertIsNone(h["Location"])
        st, h, body = request(self.stub.resolve_url("org/model", "config.json", "v1.0"),
                              headers={"Range": "bytes=0-0"})
        self.assertEqual((st, body, h["Content-Range"]), (206, data[:1], "bytes 0-0/%d" % len(data)))
        self.assertEqual(h["X-Repo-Commit"], TAG)

    def test_lfs_file_headers_and_cdn(self):
        data = self.stub.file_bytes("org/model", "model.safetensors")
        sha = hashlib.sha256(data).hexdigest()
        st, h, _ = request(self.stub.resolve_url("org/model", "model.safetensors"), "HEAD")
        self.assertEqual(st, 302)
        self.assertEqual(h["X-Linked-Etag"], '"%s"' % sha)
        self.assertEqual(h["X-Linked-Size"], str(len(data)))
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        self.assertRegex(h["ETag"], r'^"[0-9a-f]{40}"$')
        self.assertIsNone(h["X-Xet-Hash"])
        loc = urllib.parse.urlsplit(h["Location"])
        self.assertEqual("%s://%s" % (loc.scheme, loc.netloc), self.stub.cdn_url)
        q = urllib.parse.parse_qs(loc.query)
        self.assertIn("X-Amz-Signature", q)
        self.assertIn("Expires", q)
        st, h2, body = request(h["Location"])
        self.assertEqual((st, hashlib.sha256(body).hexdigest(), h2["ETag"]), (200, sha, '"%s"' % sha))
        st, h2, body = request(h["Location"], headers={"Range": "bytes=10-19"})
        self.assertEqual((st, body, h2["Content-Range"]), (206, data[10:20], "bytes 10-19/%d" % len(data)))
        bad = h["Location"].replace("X-Amz-Signature=", "X-Amz-Signature=0")
        self.assertEqual(request(bad)[0], 403)
        self.assertEqual(self.stub.stats("cdn")["requests"], {loc.path: 3})

    def test_errors_carry_hub_codes(self):
        st, h, body = request(self.stub.resolve_url("org/model", "missing.json"), "HEAD")
        self.assertEqual((st, h["X-Error-Code"], h["X-Repo-Commit"]), (404, "EntryNotFound", MAIN))
        self.assertEqual(h["X-Error-Message"], "Entry not found")
        st, h, _ = request(self.stub.resolve_url("org/model", "config.json", "nope"))
        self.assertEqual((st, h["X-Error-Code"]), (404, "RevisionNotFound"))
        st, h, _ = request(self.stub.resolve_url("org/none", "config.json"))
        self.assertEqual((st, h["X-Error-Code"]), (401, "RepoNotFound"))
        st, h, _ = request(self.stub.resolve_url("org/none", "config.json"),
                           headers={"Authorization": "Bearer hf_alice"})
        self.assertEqual((st, h["X-Error-Code"]), (404, "RepoNotFound"))
        st, h, _ = request(self.stub.resolve_url("org/private", "p.txt"), headers={"Authorization": "Bearer hf_bob"})
        self.assertEqual((st, h["X-Error-Code"]), (404, "RepoNotFound"))
        st, h, _ = request(self.stub.resolve_url("org/model", "config.json"),
                           headers={"Authorization": "Bearer hf_unknown"})
        self.assertEqual((st, h["X-Error-Message"]), (401, "Invalid credentials in Authorization header"))
        # a commit sha and a percent-encoded revision are revisions too
        self.assertEqual(request(self.stub.resolve_url("org/model", "README.md", TAG))[0], 200)
        st, h, _ = request(self.stub.hub_url + "/api/models/org/model/revision/v1.0")
        self.assertEqual(json.loads(_)["sha"], TAG)

    def test_renamed_repo_relative_redirect(self):
        st, h, _ = request(self.stub.resolve_url("old-org/moved", "m.txt"), "HEAD")
        self.assertEqual((st, h["Location"]), (307, "/new-org/moved/resolve/main/m.txt"))
        r, out = self.download("m.txt", repo="old-org/moved")
        self.assertTrue(r["ok"], r)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"moved")

    def test_api_info_tree_paths_info(self):
        st, h, body = request(self.stub.hub_url + "/api/models/org/model?blobs=true")
        info = json.loads(body)
        self.assertEqual(info["sha"], MAIN)
        sib = {s["rfilename"]: s for s in info["siblings"]}
        self.assertEqual(len(sib), 7)
        self.assertEqual(sib["model.safetensors"]["lfs"]["size"], 700000)
        # paging: 2 a page, the next page's absolute URL in Link
        url = self.stub.hub_url + "/api/models/org/model/tree/main?recursive=true"
        paths, pages = [], 0
        while url:
            st, h, body = request(url)
            self.assertEqual(st, 200)
            paths += [e["path"] for e in json.loads(body)]
            pages += 1
            link = h["Link"]
            url = link[1:link.index(">")] if link else None
            if link:
                self.assertTrue(link.startswith("<%s/api/models/org/model/tree/main?" % self.stub.hub_url), link)
                self.assertTrue(link.endswith('>; rel="next"'), link)
        self.assertEqual(pages, 5)
        self.assertEqual(sorted(paths), sorted(list(sib) + ["shards", "tokenizer", "tokenizer/deep"]))
        st, _, body = request(self.stub.hub_url + "/api/models/org/model/tree/main/tokenizer")
        self.assertEqual([e["path"] for e in json.loads(body)], ["tokenizer/deep", "tokenizer/vocab.txt"])
        # paths-info: JSON (@huggingface/hub) and form (huggingface_hub) bodies
        url = self.stub.hub_url + "/api/models/org/model/paths-info/main"
        for body, ctype in ((json.dumps({"paths": ["model.safetensors", "nope", "shards"], "expand": True}),
                             "application/json"),
                            ("paths=model.safetensors&paths=nope&paths=shards&expand=True",
                             "application/x-www-form-urlencoded")):
            st, _, out = request(url, "POST", {"Content-Type": ctype}, body.encode())
            entries = json.loads(out)
            self.assertEqual([e["path"] for e in entries], ["model.safetensors", "shards"])
            sha = hashlib.sha256(self.stub.file_bytes("org/model", "model.safetensors")).hexdigest()
            self.assertEqual(entries[0]["lfs"]["oid"], sha)
            self.assertEqual(entries[0]["lastCommit"]["id"], MAIN)

    # --- @huggingface/hub ----------------------------------------------------
    def test_js_download_small_file(self):
        data = self.stub.file_bytes("org/model", "config.json")
        r, out = self.download("config.json")
        self.assertTrue(r["ok"], r)
        self.assertEqual((r["size"], r["sha256"]), (len(data), hashlib.sha256(data).hexdigest()))
        self.assertEqual(sha256_file(out), r["sha256"])
        # fileDownloadInfo's probe is a GET with Range: bytes=0-0, then the whole file
        self.assertEqual([(m, rg, st) for m, _, rg, st, _ in r["requests"]],
                         [("GET", "bytes=0-0", 206), ("GET", None, 200)])
        info = self.js("info", "--path", "config.json")
        self.assertEqual(info["etag"], '"%s"' % git_blob_sha1(data))

    def test_js_download_lfs_file_through_cdn(self):
        data = self.stub.file_bytes("org/model", "model.safetensors")
        sha = hashlib.sha256(data).hexdigest()
        r, out = self.download("model.safetensors", "--revision", "v1.0")
        self.assertTrue(r["ok"], r)
        self.assertEqual((r["size"], r["sha256"], sha256_file(out)), (len(data), sha, sha))
        for _, url, _, st, final in r["requests"]:
            self.assertTrue(final.startswith(self.stub.cdn_url + "/cdn/" + sha), final)
        # The client's one-byte probe is counted apart from the download.
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})
        self.assertEqual(self.stub.stats("cdn")["probes"], {"/cdn/" + sha: 1})
        info = self.js("info", "--path", "model.safetensors")
        self.assertEqual((info["size"], info["etag"], info["xet"]), (len(data), '"%s"' % sha, None))

    def test_js_snapshot_with_tree_paging(self):
        r = self.js("snapshot", "--dir", self.work)
        self.assertTrue(r["ok"], r)
        self.assertTrue(r["folder"].endswith("/snapshots/" + MAIN), r["folder"])
        want = {p: (len(file_bytes(s)), hashlib.sha256(file_bytes(s)).hexdigest())
                for p, s in REPOS["repos"][0]["files"].items()}
        self.assertEqual({p: (f["size"], f["sha256"]) for p, f in r["files"].items()}, want)
        tree = [u for _, u, _, _, _ in r["requests"] if "/tree/" in u]
        self.assertEqual(len(tree), 5)
        self.assertTrue(all("cursor=" in u for u in tree[1:]), tree)
        r = self.js("list")
        self.assertEqual(len(r["entries"]), 10)

    def test_js_gated_repo(self):
        r, _ = self.download("g.bin", repo="org/gated")
        self.assertEqual((r["ok"], r["status"]), (False, 401))
        r, _ = self.download("g.bin", "--token", "hf_bob", repo="org/gated")
        self.assertEqual((r["ok"], r["status"]), (False, 403))
        r, _ = self.download("g.bin", "--token", "hf_nobody", repo="org/gated")
        self.assertEqual((r["ok"], r["status"]), (False, 401))
        r, out = self.download("g.bin", "--token", "hf_alice", repo="org/gated")
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["sha256"], hashlib.sha256(self.stub.file_bytes("org/gated", "g.bin")).hexdigest())
        auth = self.stub.stats("hub")["auth"]["/org/gated/resolve/main/g.bin"]
        self.assertEqual(set(auth), {"", "Bearer hf_bob", "Bearer hf_nobody", "Bearer hf_alice"})

    def test_js_missing_file(self):
        r, out = self.download("nope.json")
        self.assertEqual((r["ok"], r["error"], r["status"]), (False, "EntryNotFound", 404))
        self.assertFalse(os.path.exists(out))
        r = self.js("info", repo="org/none")
        self.assertEqual((r["ok"], r["status"]), (False, 401))

    def test_js_concurrent_downloads(self):
        paths = ["shards/part-1.bin", "shards/part-2.bin", "config.json"]
        args = []
        for p in paths:
            args += ["--path", p]
        r = self.js("download-many", "--dir", self.work, "--copies", "3", *args)
        self.assertTrue(r["ok"], r)
        self.assertEqual(len(r["results"]), 9)
        for res in r["results"]:
            data = self.stub.file_bytes("org/model", res["path"])
            self.assertEqual(res["sha256"], hashlib.sha256(data).hexdigest())
        cdn = self.stub.stats("cdn")
        self.assertEqual(sorted(cdn["requests"].values()), [3, 3])  # a body per copy: no cache here
        self.assertEqual(sorted(cdn["probes"].values()), [3, 3])  # and the client's probe

    def test_js_xet_repo(self):
        data = self.stub.file_bytes("org/xet", "weights.bin")
        sha = hashlib.sha256(data).hexdigest()
        # with its xet-fileinfo Accept, the library sees a xet file...
        info = self.js("info", "--path", "weights.bin", repo="org/xet")
        self.assertEqual(info["size"], len(data))
        self.assertRegex(info["xet"]["hash"], "^[0-9a-f]{64}$")
        self.assertTrue(info["xet"]["refreshUrl"].startswith(self.stub.hub_url + "/api/models/org/xet/xet-read-token/"))
        # ...and downloads it over plain HTTP only with xet: false (the stub has no CAS)
        r, _ = self.download("weights.bin", repo="org/xet")
        self.assertFalse(r["ok"], r)
        self.assertTrue(any("reconstructions" in u for _, u, _, _, _ in r["requests"]), r)
        r, _ = self.download("weights.bin", "--no-xet", repo="org/xet")
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["sha256"], sha)
        st, h, _ = request(self.stub.resolve_url("org/xet", "weights.bin"), "HEAD")
        self.assertEqual(st, 302)
        self.assertIn('rel="xet-auth"', h["Link"])
        self.assertIn('rel="xet-reconstruction-info"', h["Link"])
        self.assertIsNotNone(h["X-Xet-Hash"])
        entries = self.js("list", repo="org/xet")["entries"]
        self.assertIn("xetHash", [e for e in entries if e["path"] == "weights.bin"][0])
        _, _, body = request(self.stub.hub_url + "/api/models/org/xet")
        self.assertTrue(json.loads(body)["xetEnabled"])
        self.assertEqual(request(self.stub.hub_url + "/api/models/org/xet/xet-read-token/main")[0], 200)

    def test_js_corrupted_cdn(self):
        data = self.stub.file_bytes("org/model", "shards/part-1.bin")
        sha = hashlib.sha256(data).hexdigest()
        self.stub.corrupt(sha, "short")
        try:
            r, out = self.download("shards/part-1.bin")
            self.assertFalse(r["ok"], r)  # a body cut short is an error to the client
            self.assertFalse(os.path.exists(out))
            self.stub.corrupt(sha, "flip")
            r, out = self.download("shards/part-1.bin")
            # wrong bytes of the right length go unnoticed by the client: the
            # front must check the sha256 before it lets the tail go
            self.assertTrue(r["ok"], r)
            self.assertEqual(r["size"], len(data))
            self.assertNotEqual(r["sha256"], sha)
        finally:
            self.stub.corrupt(sha, None)
        r, _ = self.download("shards/part-1.bin")
        self.assertEqual(r["sha256"], sha)

    def test_js_dataset(self):
        r, out = self.download("data/train.csv", "--type", "dataset", repo="org/data")
        self.assertTrue(r["ok"], r)
        self.assertIn("/datasets/org/data/resolve/main/data/train.csv", r["requests"][0][1])
        r = self.js("info", "--type", "dataset", repo="org/data")
        self.assertEqual(r["info"]["name"], "org/data")


if __name__ == "__main__":
    unittest.main()
