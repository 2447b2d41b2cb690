"""hubd.hf_hub_download and hubd.snapshot_download: the
Python client's counterparts of huggingface_hub's functions, through a real
hubd whose hf_upstream is the stand-in Hub (tests/hubstub.py): a public
model with subfolders and a tag, a gated one with two users' tokens, and a
dataset. Checked: the paths they return, the cache layout against the one
huggingface_hub documents (check_hf_cache below), that the real
@huggingface/hub (tests/js/hubclient.mjs) finds every file in that cache and
asks the Hub for no file's contents, that a re-run sends no FETCH, local_dir
and its no-op re-run, allow/ignore patterns, token discovery, a refused token
(the Hub's message) and wrong bytes (nothing placed).
"""

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from unittest import mock

from harness import HERE, HubTestCase
from hubstub_fixture import HubStub, clear_env, file_bytes, git_blob_sha1, start_front

REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "client", "python"))
import hubd  # noqa: E402
import hubd.hf  # noqa: E402
import hubd._hfsession  # noqa: E402

HUBCLIENT = os.path.join(REPO, "tests", "js", "hubclient.mjs")
MAIN = "a" * 40
V1 = "b" * 40

REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
    "repos": [
        {"id": "org/public", "revisions": {"main": MAIN, "v1.0": V1},
         "files": {"config.json": {"text": '{"model_type": "stub"}\n'},
                   "README.md": {"text": "# public\n"},
                   "sub/dir/tok.json": {"text": '{"tok": 1}\n'},
                   "weights/model.safetensors": {"lfs": {"size": 300 * 1024, "seed": 5}},
                   "weights/copy.safetensors": {"lfs": {"size": 300 * 1024, "seed": 5}}}},
        {"id": "org/gated", "gated": ["alice", "bob"],
         "files": {"g.bin": {"lfs": {"size": 256 * 1024, "seed": 22}},
                   "README.md": {"text": "gated\n"}}},
        {"id": "org/data", "type": "dataset",
         "files": {"data/train.csv": {"text": "a,b\n1,2\n"},
                   "data/big.parquet": {"lfs": {"size": 128 * 1024, "seed": 7}},
                   "other/x.txt": {"text": "x\n"},
                   "README.md": {"text": "data\n"}}},
    ],
}

HF_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH", "XDG_CACHE_HOME",
          "HF_HUB_DISABLE_PROGRESS_BARS", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE",
          "TRANSFORMERS_OFFLINE")


def etag_of(spec):
    data = file_bytes(spec)
    return hashlib.sha256(data).hexdigest() if "lfs" in spec else git_blob_sha1(data)


def check_hf_cache(case, cache, repo_id, repo_type, revision, commit, paths):
    """The layout huggingface_hub documents (its "Manage the cache" guide,
    file_download.py, scan_cache_dir): {type}s--{org}--{name}/ with refs/,
    blobs/ and snapshots/; refs/{revision} holds the commit, no newline;
    snapshots/{commit}/{path} is a relative symlink to ../../blobs/{etag}
    (one more ../ per folder of path); the etag is the LFS sha256, else the
    git blob id; the blob resolves to the file's bytes; blobs/ holds nothing
    but etags (no temp file left), every one used by a snapshot."""
    files = next(r for r in REPOS["repos"] if r["id"] == repo_id
                 and r.get("type", "model") == repo_type)["files"]
    folder = os.path.join(cache, "%ss--%s" % (repo_type, repo_id.replace("/", "--")))
    case.assertTrue(os.path.isdir(folder), folder)
    if revision != commit:
        with open(os.path.join(folder, "refs", *revision.split("/")), "rb") as f:
            case.assertEqual(f.read(), commit.encode())
    used = set()
    for p in paths:
        link = os.path.join(folder, "snapshots", commit, *p.split("/"))
        etag = etag_of(files[p])
        case.assertTrue(os.path.islink(link), link)
        case.assertEqual(os.readlink(link), "../" * (2 + p.count("/")) + "blobs/" + etag)
        with open(link, "rb") as f:
            case.assertEqual(f.read(), file_bytes(files[p]), p)
        used.add(etag)
    for name in os.listdir(os.path.join(folder, "blobs")):
        case.assertIn(name, used | all_etags(files), "stray file in blobs/: " + name)
    # what scan_cache_dir does: every snapshot file resolves to an existing blob
    for d, _, names in os.walk(os.path.join(folder, "snapshots")):
        for n in names:
            case.assertTrue(os.path.exists(os.path.join(d, n)), os.path.join(d, n))
    return folder


def all_etags(files):
    return {etag_of(s) for s in files.values()}


class PythonHfTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        start_front(self, self.stub)
        clear_env(self, HF_ENV + ("HUBD_SOCKET",))
        self.home = os.path.join(self.tmp, "hfhome")
        os.environ["HF_HOME"] = self.home
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        os.environ["HUBD_SOCKET"] = self.hubd.socket
        self.cache = os.path.join(self.tmp, "hfcache")

    # -- helpers --
    @contextlib.contextmanager
    def sent(self):
        """Records the verbs of the lines the functions send to hubd."""
        verbs = []
        orig = hubd.hf._Session.send

        def spy(sess, line):
            verbs.append(line.split(b" ", 1)[0].decode())
            return orig(sess, line)
        with mock.patch.object(hubd.hf._Session, "send", spy):
            yield verbs

    def stderr_of(self, fn, *a, **kw):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            out = fn(*a, **kw)
        return out, err.getvalue()

    def content_requests(self):
        """The stand-in Hub's and CDN's requests for file contents."""
        hub = self.stub.stats("hub")["requests"]
        cdn = self.stub.stats("cdn")["requests"]
        return {p: n for p, n in list(hub.items()) + list(cdn.items())
                if "/resolve/" in p or p.startswith("/cdn/")}

    def js_snapshot(self, repo, cache, *extra):
        if not shutil.which("node"):
            self.skipTest("node is not installed")
        self.stub.reset()
        p = subprocess.run(["node", HUBCLIENT, "snapshot", "--hub-url", self.stub.hub_url,
                            "--repo", repo, "--dir", cache] + list(extra),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertTrue(out["ok"], out)
        self.assertEqual(self.content_requests(), {}, out["requests"])
        return out

    # -- tests --
    def test_snapshot_download_layout_rerun_and_js_client(self):
        with self.sent() as verbs:
            folder = hubd.snapshot_download("org/public", cache_dir=self.cache)
        self.assertEqual(folder, os.path.join(self.cache, "models--org--public", "snapshots", MAIN))
        files = REPOS["repos"][0]["files"]
        check_hf_cache(self, self.cache, "org/public", "model", "main", MAIN, list(files))
        # two paths with one etag: one FETCH, one blob
        self.assertEqual(verbs.count("FETCH"), len(files) - 1, verbs)
        self.assertEqual(verbs.count("HFREPO"), 1)
        blobs = os.path.join(self.cache, "models--org--public", "blobs")
        self.assertEqual(len(os.listdir(blobs)), len(files) - 1)
        # public blobs: symlinks into hubd's store (HELD readable=1), one copy on disk
        for name in os.listdir(blobs):
            target = os.readlink(os.path.join(blobs, name))
            self.assertTrue(target.startswith(self.hubd.cache + "/"), target)
        # a re-run: no FETCH, says so
        with self.sent() as verbs:
            again, err = self.stderr_of(hubd.snapshot_download, "org/public",
                                        cache_dir=self.cache)
        self.assertEqual(again, folder)
        self.assertNotIn("FETCH", verbs)
        self.assertEqual(err, "")  # progress (and the line) off by HF_HUB_DISABLE_PROGRESS_BARS
        del os.environ["HF_HUB_DISABLE_PROGRESS_BARS"]
        _, err = self.stderr_of(hubd.snapshot_download, "org/public", cache_dir=self.cache)
        self.assertIn("%d files already in the cache" % len(files), err)
        # the real @huggingface/hub finds every file and downloads nothing
        out = self.js_snapshot("org/public", self.cache)
        self.assertEqual(out["folder"], folder)
        self.assertEqual(sorted(out["files"]), sorted(files))
        for p, spec in files.items():
            self.assertEqual(out["files"][p]["sha256"], hashlib.sha256(file_bytes(spec)).hexdigest())
        check_hf_cache(self, self.cache, "org/public", "model", "main", MAIN, list(files))

    def test_hf_hub_download_paths_tag_and_missing_file(self):
        path = hubd.hf_hub_download("org/public", "sub/dir/tok.json", cache_dir=self.cache)
        self.assertEqual(path, os.path.join(self.cache, "models--org--public", "snapshots", MAIN,
                                            "sub", "dir", "tok.json"))
        check_hf_cache(self, self.cache, "org/public", "model", "main", MAIN, ["sub/dir/tok.json"])
        # the default cache: $HF_HOME/hub
        p2 = hubd.hf_hub_download("org/public", "weights/model.safetensors")
        self.assertEqual(p2, os.path.join(self.home, "hub", "models--org--public", "snapshots",
                                          MAIN, "weights", "model.safetensors"))
        os.environ["HF_HUB_CACHE"] = os.path.join(self.tmp, "hubcache")
        p3 = hubd.hf_hub_download("org/public", "config.json")
        self.assertTrue(p3.startswith(os.environ["HF_HUB_CACHE"] + "/models--org--public/"), p3)
        # a tag: refs/v1.0 and its own snapshot; the blob is there: no FETCH
        with self.sent() as verbs:
            p4 = hubd.hf_hub_download("org/public", "sub/dir/tok.json", revision="v1.0",
                                      cache_dir=self.cache)
        self.assertEqual(p4, os.path.join(self.cache, "models--org--public", "snapshots", V1,
                                          "sub", "dir", "tok.json"))
        self.assertNotIn("FETCH", verbs)
        check_hf_cache(self, self.cache, "org/public", "model", "v1.0", V1, ["sub/dir/tok.json"])
        # a commit as the revision: no ref written for it; asked again, no question at all
        hubd.hf_hub_download("org/public", "README.md", revision=V1, cache_dir=self.cache)
        with self.sent() as verbs:
            again = hubd.hf_hub_download("org/public", "README.md", revision=V1,
                                         cache_dir=self.cache)
        self.assertEqual((verbs, os.path.basename(again)), ([], "README.md"))
        self.assertEqual(sorted(os.listdir(os.path.join(self.cache, "models--org--public", "refs"))),
                         ["main", "v1.0"])
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/public", "nope.txt", cache_dir=self.cache)
        self.assertEqual(cm.exception.code, "http_404")
        self.assertIn("EntryNotFound", cm.exception.msg)
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/public", "README.md", revision="v9", cache_dir=self.cache)
        self.assertEqual(cm.exception.code, "http_404")
        self.assertIn("RevisionNotFound", cm.exception.msg)

    def test_dataset_and_patterns(self):
        folder = hubd.snapshot_download("org/data", repo_type="dataset", cache_dir=self.cache,
                                        allow_patterns=["data/", "README*"],
                                        ignore_patterns="*.parquet")
        self.assertTrue(folder.startswith(os.path.join(self.cache, "datasets--org--data",
                                                       "snapshots") + "/"), folder)
        commit = os.path.basename(folder)
        check_hf_cache(self, self.cache, "org/data", "dataset", "main", commit,
                       ["data/train.csv", "README.md"])
        found = sorted(os.path.relpath(os.path.join(d, n), folder)
                       for d, _, ns in os.walk(folder) for n in ns)
        self.assertEqual(found, ["README.md", "data/train.csv"])
        path = hubd.hf_hub_download("org/data", "data/big.parquet", repo_type="dataset",
                                    cache_dir=self.cache)
        self.assertEqual(path, os.path.join(folder, "data", "big.parquet"))
        # huggingface_hub's filter_repo_objects, case by case
        names = ["a.json", "sub/b.json", "sub/c.bin", "subx/d.txt", "README.md"]
        flt = lambda a=None, i=None: list(hubd.hf.filter_repo_files(names, a, i))  # noqa: E731
        self.assertEqual(flt("*.json"), ["a.json", "sub/b.json"])  # * crosses "/"
        self.assertEqual(flt(["sub/"]), ["sub/b.json", "sub/c.bin"])
        self.assertEqual(flt(None, ["sub/", "*.md"]), ["a.json", "subx/d.txt"])
        self.assertEqual(flt("sub/*", "*.bin"), ["sub/b.json"])
        self.assertEqual(flt([]), [])
        with self.assertRaises(ValueError):
            hubd.snapshot_download("org/data", repo_type="bucket", cache_dir=self.cache)
        # names that would leave the cache are refused before anything is written
        for bad in ("../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b"):
            with self.assertRaises(hubd.HubdError, msg=bad):
                hubd.hf._safe_rel(bad, "file name")
        with self.assertRaises(hubd.HubdError):
            hubd.hf_hub_download("org/data", "../escape", repo_type="dataset",
                                 cache_dir=self.cache)

    def test_local_dir_and_its_noop_rerun(self):
        local = os.path.join(self.tmp, "local")
        files = REPOS["repos"][0]["files"]
        out = hubd.snapshot_download("org/public", local_dir=local + "/", cache_dir=self.cache)
        self.assertEqual(out, os.path.realpath(local))
        self.assertFalse(os.path.exists(self.cache))  # local_dir writes no HF cache
        hf = os.path.join(local, ".cache", "huggingface")
        with open(os.path.join(hf, ".gitignore")) as f:
            self.assertEqual(f.read(), "*")
        for p, spec in files.items():
            path = os.path.join(local, *p.split("/"))
            self.assertFalse(os.path.islink(path), p)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), file_bytes(spec), p)
            with open(os.path.join(hf, "download", p + ".metadata")) as f:
                lines = f.read().split("\n")
            self.assertEqual(lines[:2], [MAIN, etag_of(spec)])
            self.assertEqual(lines[3:], [""])
            self.assertGreaterEqual(float(lines[2]), os.stat(path).st_mtime)
        self.assertEqual(sorted(os.listdir(os.path.join(hf, "download"))),
                         ["README.md.metadata", "config.json.metadata", "sub", "weights"])
        with self.sent() as verbs:
            hubd.snapshot_download("org/public", local_dir=local)
            one = hubd.hf_hub_download("org/public", "sub/dir/tok.json", local_dir=local)
        self.assertNotIn("FETCH", verbs)
        self.assertEqual(one, os.path.join(local, "sub", "dir", "tok.json"))
        # the tag has other commits but the same etags: no FETCH, metadata updated
        with self.sent() as verbs:
            hubd.snapshot_download("org/public", revision="v1.0", local_dir=local)
        self.assertNotIn("FETCH", verbs)
        with open(os.path.join(hf, "download", "config.json.metadata")) as f:
            self.assertEqual(f.readline().strip(), V1)
        # a file changed after its metadata is fetched again
        changed = os.path.join(local, "config.json")
        with open(changed, "w") as f:
            f.write("edited\n")
        st = os.stat(changed)
        os.utime(changed, (st.st_atime, st.st_mtime + 5))
        with self.sent() as verbs:
            hubd.hf_hub_download("org/public", "config.json", local_dir=local)
        self.assertEqual(verbs.count("FETCH"), 1)
        with open(changed, "rb") as f:
            self.assertEqual(f.read(), file_bytes(files["config.json"]))

    def old_hubd(self, files, known=("HFREPO", "FETCH")):
        """A stand-in hubd on a socket of its own (test_hf_download.FakeHubd):
        HOLD unknown to it; files: {path: bytes}."""
        from test_hf_download import FakeHubd
        fake = FakeHubd(os.path.join(self.tmp, "old%d.sock" % len(files)), known, files)
        self.addCleanup(fake.stop)
        os.environ["HUBD_SOCKET"] = fake.path
        return fake

    def test_local_dir_writes_follow_no_planted_symlink(self):
        self.old_hubd({"a.txt": b"alpha\n"})
        local = os.path.join(self.tmp, "local")
        hf = os.path.join(local, ".cache", "huggingface")
        os.makedirs(os.path.join(hf, "download"))
        victim, elsewhere = os.path.join(self.tmp, "victim"), os.path.join(self.tmp, "new")
        with open(victim, "w") as f:
            f.write("precious")
        os.symlink(elsewhere, os.path.join(hf, ".gitignore"))  # dangling: made by open()
        os.symlink(victim, os.path.join(hf, "download", "a.txt.metadata"))
        hubd.snapshot_download("org/old", local_dir=local)
        self.assertFalse(os.path.lexists(elsewhere))
        with open(victim) as f:
            self.assertEqual(f.read(), "precious")
        for p in (".gitignore", os.path.join("download", "a.txt.metadata")):
            self.assertFalse(os.path.islink(os.path.join(hf, p)), p)
        with open(os.path.join(local, "a.txt"), "rb") as f:
            self.assertEqual(f.read(), b"alpha\n")

    def test_hub_names_that_are_unsafe_or_metadata_are_refused(self):
        self.old_hubd({"a.txt": b"alpha\n", ".cache/huggingface/download/a.txt.metadata": b"x\n"})
        local = os.path.join(self.tmp, "local")
        with self.assertRaises(hubd.HubdError) as e:
            hubd.snapshot_download("org/old", local_dir=local)
        self.assertIn(".cache/huggingface", str(e.exception))
        self.assertFalse(os.path.exists(os.path.join(local, "a.txt")))
        self.old_hubd({"a\nb.txt": b"x\n"})
        with self.assertRaises(hubd.HubdError) as e:
            hubd.snapshot_download("org/old", cache_dir=self.cache)
        self.assertEqual(e.exception.code, "bad_request")
        for bad in ("a\x01b", "a\x7fb", "a\rb"):
            with self.assertRaises(hubd.HubdError):
                hubd.hf._safe_rel(bad, "file name")

    def test_gated_token_discovery_and_refusals(self):
        gated = REPOS["repos"][1]["files"]
        g_sha = etag_of(gated["g.bin"])
        # $HF_TOKEN
        os.environ["HF_TOKEN"] = "hf_alice"
        hubd._hfplace._said_copy = False
        a, err = self.stderr_of(hubd.snapshot_download, "org/gated",
                                cache_dir=os.path.join(self.tmp, "alice"))
        check_hf_cache(self, os.path.join(self.tmp, "alice"), "org/gated", "model", "main",
                       os.path.basename(a), list(gated))
        # private blobs: a symlink into hubd's store (a read grant), else a copy said once
        blobs = os.path.join(self.tmp, "alice", "models--org--gated", "blobs")
        for name in os.listdir(blobs):
            blob = os.path.join(blobs, name)
            if os.path.islink(blob):
                self.assertTrue(os.readlink(blob).startswith(self.hubd.cache + "/"))
            else:
                self.assertEqual(err.count("files are copied into"), 1, err)
        # $HF_HOME/token (stripped)
        del os.environ["HF_TOKEN"]
        os.makedirs(self.home)
        with open(os.path.join(self.home, "token"), "w") as f:
            f.write("hf_bob\n")
        self.stub.reset()
        b = hubd.snapshot_download("org/gated", cache_dir=os.path.join(self.tmp, "bob"))
        check_hf_cache(self, os.path.join(self.tmp, "bob"), "org/gated", "model", "main",
                       os.path.basename(b), list(gated))
        auth = self.stub.stats("hub")["auth"]
        self.assertTrue(auth, auth)
        for path, tokens in auth.items():
            self.assertEqual(set(tokens), {"Bearer hf_bob"}, path)
        # the gated file came down once for both tokens
        self.assertEqual(self.stub.stats("cdn")["requests"], {})
        # $HF_TOKEN_PATH wins over $HF_HOME/token
        tp = os.path.join(self.tmp, "tokfile")
        with open(tp, "w") as f:
            f.write("hf_carol")
        os.environ["HF_TOKEN_PATH"] = tp
        carol = os.path.join(self.tmp, "carol")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.snapshot_download("org/gated", cache_dir=carol)
        self.assertEqual(cm.exception.code, "http_403")
        self.assertIn("GatedRepo", cm.exception.msg)
        self.assertFalse(os.path.exists(os.path.join(carol, "models--org--gated", "snapshots")))
        # a refused token given as the argument: the Hub's message, nothing placed
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/gated", "g.bin", token="hf_carol", cache_dir=carol)
        self.assertEqual(cm.exception.code, "http_403")
        self.assertIn("GatedRepo", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(carol, "models--org--gated", "blobs", g_sha)))
        # token=False: none sent, whatever is found
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/gated", "g.bin", token=False, cache_dir=carol)
        self.assertEqual(cm.exception.code, "http_401")
        # and an explicit token beats the discovered one
        self.stub.reset()
        p = hubd.hf_hub_download("org/gated", "g.bin", token="hf_alice", cache_dir=carol)
        with open(p, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), g_sha)
        for tokens in self.stub.stats("hub")["auth"].values():
            self.assertEqual(set(tokens), {"Bearer hf_alice"})
        # the JS client reads the gated cache with a granted token: no download
        self.js_snapshot("org/gated", os.path.join(self.tmp, "alice"), "--token", "hf_alice")

    def test_offline_returns_the_cache_and_never_connects(self):
        """HF_HUB_OFFLINE, as huggingface_hub: no connection to hubd (stopped,
        its socket gone), the cached paths by refs/ and snapshots/, and
        offline_not_cached for anything not on disk."""
        tok = hubd.hf_hub_download("org/public", "sub/dir/tok.json", cache_dir=self.cache)
        readme = hubd.hf_hub_download("org/public", "README.md", revision="v1.0",
                                      cache_dir=self.cache)
        local = os.path.join(self.tmp, "local")
        train = hubd.hf_hub_download("org/data", "data/train.csv", repo_type="dataset",
                                     local_dir=local)
        snap = os.path.join(self.cache, "models--org--public", "snapshots")
        self.hubd.stop()
        os.environ["HUBD_SOCKET"] = os.path.join(self.tmp, "nothing.sock")
        self.stub.reset()
        connect = mock.patch.object(hubd._hfsession, "_connect",
                                    side_effect=AssertionError("offline, yet hubd was asked"))

        def not_cached(fn, *a, **kw):
            with self.assertRaises(hubd.HubdError) as cm:
                fn(*a, **kw)
            self.assertEqual(cm.exception.code, "offline_not_cached")
            return cm.exception.msg
        for value in ("1", "True", "yes", "ON"):
            os.environ["HF_HUB_OFFLINE"] = value
            with connect:
                self.assertEqual(hubd.hf_hub_download("org/public", "sub/dir/tok.json",
                                                      cache_dir=self.cache), tok)
                self.assertEqual(hubd.hf_hub_download("org/public", "README.md", revision="v1.0",
                                                      cache_dir=self.cache), readme)
                self.assertEqual(hubd.hf_hub_download("org/public", "README.md", revision=V1,
                                                      cache_dir=self.cache), readme)
                self.assertEqual(hubd.snapshot_download("org/public", cache_dir=self.cache),
                                 os.path.join(snap, MAIN))
                self.assertEqual(hubd.snapshot_download("org/public", revision="v1.0",
                                                        cache_dir=self.cache),
                                 os.path.join(snap, V1))
                self.assertEqual(hubd.hf_hub_download("org/data", "data/train.csv",
                                                      repo_type="dataset", local_dir=local), train)
                self.assertEqual(hubd.snapshot_download("org/data", repo_type="dataset",
                                                        local_dir=local), os.path.realpath(local))
        check_hf_cache(self, self.cache, "org/public", "model", "main", MAIN, ["sub/dir/tok.json"])
        check_hf_cache(self, self.cache, "org/public", "model", "v1.0", V1, ["README.md"])
        with connect:
            # a file of a cached snapshot that is not there, by tag and by commit
            msg = not_cached(hubd.hf_hub_download, "org/public", "weights/model.safetensors",
                             cache_dir=self.cache)
            self.assertEqual(msg, "HF_HUB_OFFLINE is set and model org/public "
                             "weights/model.safetensors at revision main is not in the cache "
                             + self.cache)
            not_cached(hubd.hf_hub_download, "org/public", "config.json", revision=V1,
                       cache_dir=self.cache)
            # a revision, a repo, a snapshot not cached
            self.assertIn("at revision v9 ", not_cached(hubd.hf_hub_download, "org/public",
                                                        "README.md", revision="v9",
                                                        cache_dir=self.cache))
            msg = not_cached(hubd.snapshot_download, "org/gated", cache_dir=self.cache)
            self.assertIn("model org/gated at revision main is not in the cache", msg)
            not_cached(hubd.snapshot_download, "org/public", revision="c" * 40,
                       cache_dir=self.cache)
            not_cached(hubd.snapshot_download, "org/data", repo_type="dataset",
                       cache_dir=self.cache)
            # local_dir: the file must be there; an empty folder is no snapshot
            msg = not_cached(hubd.hf_hub_download, "org/data", "other/x.txt",
                             repo_type="dataset", local_dir=local)
            self.assertIn("is not in the local dir " + local, msg)
            os.mkdir(os.path.join(self.tmp, "empty"))
            not_cached(hubd.snapshot_download, "org/data", repo_type="dataset",
                       local_dir=os.path.join(self.tmp, "empty"))
            # the legacy name, when HF_HUB_OFFLINE is unset or empty
            os.environ["HF_HUB_OFFLINE"] = ""
            os.environ["TRANSFORMERS_OFFLINE"] = "true"
            self.assertEqual(hubd.hf_hub_download("org/public", "sub/dir/tok.json",
                                                  cache_dir=self.cache), tok)
        # not offline ("0" wins over TRANSFORMERS_OFFLINE): hubd is asked, and is gone
        os.environ["HF_HUB_OFFLINE"] = "0"
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/public", "sub/dir/tok.json", cache_dir=self.cache)
        self.assertEqual(cm.exception.code, "no_daemon")
        self.assertEqual(self.stub.stats("hub")["requests"], {})
        self.assertEqual(self.content_requests(), {})

    def test_wrong_bytes_raise_and_place_nothing(self):
        files = REPOS["repos"][0]["files"]
        lfs = etag_of(files["weights/model.safetensors"])
        self.stub.corrupt(lfs, "flip")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/public", "weights/model.safetensors", cache_dir=self.cache)
        self.assertEqual(cm.exception.code, "hash_mismatch")
        folder = os.path.join(self.cache, "models--org--public")
        self.assertEqual(os.listdir(os.path.join(folder, "blobs"))
                         if os.path.isdir(os.path.join(folder, "blobs")) else [], [])
        self.assertFalse(os.path.lexists(os.path.join(folder, "snapshots", MAIN, "weights",
                                                      "model.safetensors")))
        # a small file: its git blob id is checked by the client
        small = etag_of(files["config.json"])
        self.stub.corrupt(small, "flip")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache)
        self.assertEqual(cm.exception.code, "hash_mismatch")
        self.assertIn(small, cm.exception.msg)
        self.assertFalse(os.path.lexists(os.path.join(folder, "blobs", small)))
        self.assertFalse(os.path.lexists(os.path.join(folder, "snapshots", MAIN, "config.json")))
        # the CDN mends: the LFS file comes, placed as usual
        self.stub.corrupt(lfs, None)
        p = hubd.hf_hub_download("org/public", "weights/model.safetensors", cache_dir=self.cache)
        with open(p, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), lfs)
        # with a token hubd asks the Hub first and checks a small file's git
        # blob id itself: the wrong bytes are refused and forgotten, so a
        # retry once the Hub mends gets the file
        spec = REPOS["repos"][1]["files"]["README.md"]
        gated = etag_of(spec)
        self.stub.corrupt(gated, "flip")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.hf_hub_download("org/gated", "README.md", token="hf_alice", cache_dir=self.cache)
        self.assertEqual(cm.exception.code, "hash_mismatch")
        self.assertIn(gated, cm.exception.msg)
        self.stub.corrupt(gated, None)
        p = hubd.hf_hub_download("org/gated", "README.md", token="hf_alice", cache_dir=self.cache)
        with open(p, "rb") as f:
            self.assertEqual(f.read(), file_bytes(spec))
