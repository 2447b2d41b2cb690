"""`hubctl hf download`: a repo of the
stand-in Hub (tests/hubstub.py) through hubd into the HF cache, laid out as
huggingface_hub documents it, so that the real @huggingface/hub (npm) finds
every file there and asks the Hub for no file's contents; --local-dir,
--include/--exclude, the token's discovery order, --json-files, --warm, and one
copy on disk.
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import unittest
import urllib.parse

from harness import HERE, HUBCTL, HubTestCase, Hubd, free_port, write_config
from hubstub_fixture import HubStub, file_bytes, git_blob_sha1, start_front

from test_hubstub import HUBCLIENT, JS_DIR

PYTHON_CLIENT = os.path.join(HERE, "..", "..", "client", "python")
MAIN = "1" * 40
TAG = "2" * 40
GATED = "3" * 40

REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
    "repos": [
        {"id": "org/model", "revisions": {"main": MAIN, "v1.0": TAG},
         "files": {"config.json": {"text": '{"model_type": "stub"}\n'},
                   "README.md": {"text": "# a stub\n"},
                   "tokenizer/vocab.txt": {"text": "a\nb\nc\n"},
                   "tokenizer/deep/merges.txt": {"text": "a b\n"},
                   "model.safetensors": {"lfs": {"size": 700000, "seed": 1}},
                   "shards/part-1.bin": {"lfs": {"size": 200000, "seed": 2}},
                   "shards/part-2.bin": {"lfs": {"size": 200001, "seed": 3}}}},
        {"id": "org/gated", "gated": ["alice", "bob"], "revisions": {"main": GATED},
         "files": {"g.bin": {"lfs": {"size": 300000, "seed": 5}}, "g.json": {"text": "{}\n"}}},
        {"id": "org/data", "type": "dataset", "files": {"data/train.csv": {"text": "a,b\n1,2\n"}}},
    ],
}


def setUpModule():
    if shutil.which("node") is None or not os.path.isdir(
            os.path.join(JS_DIR, "node_modules", "@huggingface", "hub")):
        raise RuntimeError("node or tests/js/node_modules missing: run scripts/install-deps.sh")


def etag_of(spec):
    data = file_bytes(spec)
    return hashlib.sha256(data).hexdigest() if "lfs" in spec else git_blob_sha1(data)


def try_to_load_from_cache(cache, repo_id, filename, revision="main", repo_type="model"):
    """huggingface_hub's try_to_load_from_cache, step by step: the repo
    folder, refs/{revision} to a commit, snapshots/{commit}/{filename}."""
    repo_cache = os.path.join(cache, "%ss--%s" % (repo_type, repo_id.replace("/", "--")))
    if not os.path.isdir(repo_cache):
        return None
    refs = os.path.join(repo_cache, "refs", revision)
    if os.path.isfile(refs):
        with open(refs) as f:
            revision = f.read()
    snapshots = os.path.join(repo_cache, "snapshots")
    if not os.path.isdir(snapshots) or revision not in os.listdir(snapshots):
        return None
    path = os.path.join(snapshots, revision, filename)
    return path if os.path.isfile(path) else None


def allocated(top):
    """Bytes allocated to the regular files under top (du's count: blocks,
    not sizes; symlinks and folders left out)."""
    total = 0
    for d, _, names in os.walk(top):
        for n in names:
            st = os.lstat(os.path.join(d, n))
            if not os.path.islink(os.path.join(d, n)):
                total += st.st_blocks * 512
    return total


class FakeHubd:
    """An older hubd on a socket of its own: HELLO, and of the other verbs
    only those in `known` (HFREPO lists `files`, {path: bytes}; FETCH sends
    a file's bytes in a memfd); any other verb gets `ERR code=unknown_verb`
    without id, as a hubd older than the verb answers it."""

    COMMIT = "4" * 40

    def __init__(self, path, known=(), files=None):
        self.path, self.known, self.files = path, set(known), files or {}
        self.verbs = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        threading.Thread(target=self.serve, daemon=True).start()

    def stop(self):
        self.sock.close()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.session, args=(c,), daemon=True).start()

    def session(self, c):
        buf = b""
        with c:
            while True:
                try:
                    data = c.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    self.answer(c, line.decode())

    @staticmethod
    def memfd(data):
        fd = os.memfd_create("fake")
        os.write(fd, data)
        return fd

    def send(self, c, line, data=None):
        if data is None:
            c.sendall(line.encode() + b"\n")
            return
        fd = self.memfd(data)
        socket.send_fds(c, [line.encode() + b"\n"], [fd])
        os.close(fd)

    def answer(self, c, line):
        verb = line.split(" ")[0]
        f = {k: urllib.parse.unquote(v) for k, _, v in
             (w.partition("=") for w in line.split(" ")[1:])}
        self.verbs.append(verb)
        q = lambda v: urllib.parse.quote(v, safe="/")
        resolve = "http://127.0.0.1:9/org/old/resolve/%s/" % self.COMMIT
        if verb == "HELLO":
            self.send(c, "HELLO proto=1 server=hubd/0.9")
        elif verb not in self.known:
            self.send(c, "ERR code=unknown_verb msg=%s" % verb)
        elif verb == "HFREPO":
            listing = "".join("path=%s size=%d blob=%s\n" % (q(p), len(b), git_blob_sha1(b))
                              for p, b in self.files.items())
            self.send(c, "REPO id=%s repo=org/old type=model commit=%s files=%d size=%d "
                      "resolve=%s" % (f["id"], self.COMMIT, len(self.files),
                                      sum(map(len, self.files.values())), q(resolve)),
                      listing.encode())
        elif verb == "FETCH":
            data = self.files[urllib.parse.unquote(f["url"][len(resolve):])]
            sha = hashlib.sha256(data).hexdigest()
            self.send(c, "DONE id=%s path=/nonexistent/%s sha256=%s size=%d source=download"
                      % (f["id"], sha, sha, len(data)), data)


class OldHubdTest(unittest.TestCase):
    """hubctl hf download against a hubd that knows no HFREPO, or no HOLD:
    said, or copied; never a hang."""

    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="hf-old-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.files = {"a.txt": b"alpha\n", "sub/b.txt": b"beta\n"}

    def fake(self, known, files=None):
        f = FakeHubd(os.path.join(self.tmp, "sock"), known, files or self.files)
        self.addCleanup(f.stop)
        return f

    def dl(self, fake, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        p = subprocess.run([HUBCTL, "--socket", fake.path, "hf", "download", "org/old"]
                           + list(args), capture_output=True, text=True, timeout=20, env=env)
        return p

    def test_no_hfrepo_says_update_hubd(self):
        r = self.dl(self.fake(()), "--cache-dir", os.path.join(self.tmp, "c"))
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("update hubd", r.stderr)

    def test_no_hold_copies_the_blobs(self):
        fake = self.fake(("HFREPO", "FETCH"))
        cache = os.path.join(self.tmp, "c")
        r = self.dl(fake, "--cache-dir", cache)
        self.assertEqual(r.returncode, 0, r)
        snap = os.path.join(cache, "models--org--old", "snapshots", FakeHubd.COMMIT)
        self.assertEqual(r.stdout, snap + "\n")
        for path, data in self.files.items():
            blob = os.path.join(cache, "models--org--old", "blobs", git_blob_sha1(data))
            self.assertFalse(os.path.islink(blob), "a copy: no hold, no link")
            with open(os.path.join(snap, path), "rb") as f:
                self.assertEqual(f.read(), data)
        self.assertEqual(fake.verbs.count("HOLD"), 2)

    def test_hub_paths_that_would_be_metadata_or_unsafe_are_refused(self):
        local = os.path.join(self.tmp, "local")
        bad = dict(self.files)
        bad[".cache/huggingface/download/a.txt.metadata"] = b"%s\nx\n9e99\n" % b"0" * 40
        r = self.dl(self.fake(("HFREPO", "FETCH"), bad), "--local-dir", local)
        self.assertEqual(r.returncode, 1, r)
        self.assertIn(".cache/huggingface", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(local, "a.txt")))


def user_env(home, **extra):
    """The environment of a user (home) with no HF settings but extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HF_") and k != "TRANSFORMERS_OFFLINE"}
    env.update(HOME=home, XDG_CACHE_HOME=os.path.join(home, ".cache"))
    env.update(extra)
    return env


class HfDownloadTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS, page_size=3)
        self.addCleanup(self.stub.stop)
        self.port = start_front(self, self.stub)
        self.cache = os.path.join(self.tmp, "hf-cache")
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)

    def env(self, **extra):
        return user_env(self.home, **extra)

    def dl(self, *args, env=None, cache=True):
        argv = [HUBCTL, "--socket", self.hubd.socket, "hf", "download"] + list(args)
        if cache and "--local-dir" not in args and "--warm" not in args:
            argv += ["--cache-dir", self.cache]
        p = subprocess.run(argv, capture_output=True, env=env or self.env(), timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def js(self, cmd, *args, hub=None, repo="org/model"):
        p = subprocess.run(["node", HUBCLIENT, cmd, "--hub-url", hub or self.stub.hub_url,
                            "--repo", repo] + list(args), capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def content_requests(self):
        """The stand-in's requests for file contents: resolve on the Hub,
        anything on the CDN."""
        hub = {p: n for p, n in self.stub.stats("hub")["requests"].items() if "/resolve/" in p}
        return hub, self.stub.stats("cdn")["requests"]

    def fetches(self):
        s = self.stats()
        return s["hits"] + s["misses"] + s["attached"]

    def assert_layout(self, repo_id, commit, paths, revision="main", repo_type="model", cache=None):
        cache = cache or self.cache
        spec = next(r for r in REPOS["repos"] if r["id"] == repo_id)["files"]
        for path in paths:
            found = try_to_load_from_cache(cache, repo_id, path, revision, repo_type)
            self.assertIsNotNone(found, path)
            self.assertTrue(found.endswith("/snapshots/%s/%s" % (commit, path)), found)
            etag = etag_of(spec[path])
            self.assertEqual(os.readlink(found), "../" * (path.count("/") + 2) + "blobs/" + etag)
            with open(found, "rb") as f:
                self.assertEqual(f.read(), file_bytes(spec[path]), path)

    # ---- the cache layout, and the Hub's own clients in it ---------------

    def test_snapshot_is_huggingface_hubs_layout_and_a_second_run_fetches_nothing(self):
        rc, out, err = self.dl("org/model")
        self.assertEqual(rc, 0, err)
        repo = os.path.join(self.cache, "models--org--model")
        self.assertEqual(out, os.path.join(repo, "snapshots", MAIN) + "\n")
        with open(os.path.join(repo, "refs", "main")) as f:
            self.assertEqual(f.read(), MAIN)  # no newline
        paths = sorted(REPOS["repos"][0]["files"])
        self.assert_layout("org/model", MAIN, paths)
        self.assertEqual(sorted(os.listdir(os.path.join(repo, "blobs"))),
                         sorted(etag_of(s) for s in REPOS["repos"][0]["files"].values()))
        # Again: one API question, no FETCH, and it says so.
        before = self.fetches()
        self.stub.reset()
        rc, out2, err = self.dl("org/model")
        self.assertEqual((rc, out2), (0, out), err)
        self.assertIn("7 files already in %s" % repo, err)
        self.assertEqual(self.fetches(), before)
        self.assertEqual(self.content_requests(), ({}, {}))

    def test_the_hub_clients_find_every_file_and_download_nothing(self):
        rc, _, err = self.dl("org/model")
        self.assertEqual(rc, 0, err)
        paths = sorted(REPOS["repos"][0]["files"])
        files = REPOS["repos"][0]["files"]
        for hub in (self.stub.hub_url, "http://127.0.0.1:%d/hf" % self.port):
            self.stub.reset()
            snap = self.js("snapshot", "--dir", self.cache, hub=hub)
            self.assertTrue(snap["ok"], snap)
            self.assertEqual(snap["folder"], os.path.join(self.cache, "models--org--model",
                                                          "snapshots", MAIN))
            self.assertEqual(sorted(snap["files"]), paths)
            for p in paths:
                self.assertEqual(snap["files"][p]["sha256"],
                                 hashlib.sha256(file_bytes(files[p])).hexdigest())
            one = self.js("cache-file", "--dir", self.cache, hub=hub,
                          *sum((["--path", p] for p in paths), []))
            self.assertTrue(one["ok"], one)
            self.assertEqual(self.content_requests(), ({}, {}), hub)
        scan = self.js("scan-cache", "--dir", self.cache)
        self.assertEqual(scan["warnings"], [])
        [r] = scan["repos"]
        self.assertEqual(r["id"], {"name": "org/model", "type": "model"})
        [rev] = r["revisions"]
        self.assertEqual((rev["commitOid"], rev["refs"]), (MAIN, ["main"]))
        # scanCacheDir lists a snapshot's top-level files only
        top = sorted(os.path.basename(f["path"]) for f in rev["files"])
        self.assertEqual(top, sorted(p for p in paths if "/" not in p))
        for f in rev["files"]:
            name = os.path.basename(f["path"])
            self.assertEqual(f["size"], len(file_bytes(files[name])))

    def test_a_tag_a_dataset_and_named_files(self):
        rc, out, err = self.dl("org/model", "tokenizer/vocab.txt", "--revision", "v1.0")
        self.assertEqual(rc, 0, err)
        repo = os.path.join(self.cache, "models--org--model")
        self.assertEqual(out, os.path.join(repo, "snapshots", TAG, "tokenizer/vocab.txt") + "\n")
        with open(os.path.join(repo, "refs", "v1.0")) as f:
            self.assertEqual(f.read(), TAG)
        self.assert_layout("org/model", TAG, ["tokenizer/vocab.txt"], revision="v1.0")
        self.assertFalse(os.path.exists(os.path.join(repo, "snapshots", TAG, "config.json")))
        # by commit: no ref written
        rc, out, err = self.dl("org/model", "README.md", "config.json", "--revision", MAIN)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, os.path.join(repo, "snapshots", MAIN) + "\n")
        self.assertEqual(os.listdir(os.path.join(repo, "refs")), ["v1.0"])
        rc, out, err = self.dl("org/data", "--repo-type", "dataset")
        self.assertEqual(rc, 0, err)
        data = os.path.join(self.cache, "datasets--org--data")
        self.assertTrue(out.startswith(os.path.join(data, "snapshots")), out)
        commit = os.path.basename(out.strip())
        self.assert_layout("org/data", commit, ["data/train.csv"], repo_type="dataset")

    def test_errors_say_what_was_wrong(self):
        rc, out, err = self.dl("org/model", "config.json", "nope.bin")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("nope.bin is not a file of model org/model at revision main", err)
        self.assertEqual(self.content_requests(), ({}, {}))  # nothing fetched
        rc, out, err = self.dl("org/model", "--revision", "v9")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("RevisionNotFound", err)
        self.assertIn("v9", err)
        rc, out, err = self.dl("org/gated")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("GatedRepo: Access to model org/gated is restricted", err)
        rc, out, err = self.dl("org/gated", "--token", "hf_carol")
        self.assertEqual(rc, 1)
        self.assertIn("not in the authorized list", err)
        rc, _, err = self.dl("org/model", "--repo-type", "kernel")
        self.assertEqual(rc, 2)
        self.assertIn("--repo-type", err)
        self.assertEqual(self.content_requests(), ({}, {}))

    def test_include_and_exclude_as_filter_repo_objects(self):
        rc, _, err = self.dl("org/model", "--include", "tokenizer/", "--include", "*.json",
                             "--exclude", "*merges*")
        self.assertEqual(rc, 0, err)
        snap = os.path.join(self.cache, "models--org--model", "snapshots", MAIN)
        got = sorted(os.path.relpath(os.path.join(d, n), snap)
                     for d, _, ns in os.walk(snap) for n in ns)
        self.assertEqual(got, ["config.json", "tokenizer/vocab.txt"])
        self.assertEqual(self.stub.stats("cdn")["requests"], {})  # no LFS file came

    def test_json_files_gives_one_object_per_file(self):
        rc, out, err = self.dl("org/model", "--json-files", "--exclude", "shards/")
        self.assertEqual(rc, 0, err)
        objs = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(sorted(o["path"] for o in objs),
                         ["README.md", "config.json", "model.safetensors",
                          "tokenizer/deep/merges.txt", "tokenizer/vocab.txt"])
        files = REPOS["repos"][0]["files"]
        for o in objs:
            self.assertTrue(o["ok"], o)
            self.assertEqual(o["etag"], etag_of(files[o["path"]]))
            self.assertEqual(o["size"], len(file_bytes(files[o["path"]])))
            self.assertEqual(o["file"], try_to_load_from_cache(self.cache, "org/model", o["path"]))
            self.assertIn(o["source"], ("download", "hit", "attached"))
            self.assertEqual(o["placed"], "symlink")  # hubd held it
        rc, out, err = self.dl("org/model", "--json-files", "--exclude", "shards/")
        self.assertEqual({json.loads(l)["source"] for l in out.splitlines()}, {"present"})

    # ---- HF_HUB_OFFLINE ----------------------------------------------------

    def test_offline_prints_the_cached_paths_with_hubd_stopped(self):
        rc, _, err = self.dl("org/model", "--exclude", "shards/")
        self.assertEqual(rc, 0, err)
        rc, _, err = self.dl("org/model", "tokenizer/vocab.txt", "--revision", "v1.0")
        self.assertEqual(rc, 0, err)
        local = os.path.join(self.tmp, "local")
        rc, _, err = self.dl("org/model", "README.md", "--local-dir", local)
        self.assertEqual(rc, 0, err)
        self.hubd.stop()  # its socket is gone: only the disk can answer
        self.stub.reset()
        repo = os.path.join(self.cache, "models--org--model")
        snap = os.path.join(repo, "snapshots", MAIN)
        kept = sorted(p for p in REPOS["repos"][0]["files"] if not p.startswith("shards/"))
        for value in ("1", "TRUE", "Yes", "on"):
            env = self.env(HF_HUB_OFFLINE=value)
            self.assertEqual(self.dl("org/model", env=env), (0, snap + "\n", ""))
            for path in kept:  # the path huggingface_hub's offline lookup finds
                rc, out, err = self.dl("org/model", path, env=env)
                self.assertEqual((rc, out), (0, try_to_load_from_cache(self.cache, "org/model",
                                                                       path) + "\n"), err)
            self.assertEqual(self.dl("org/model", "README.md", "config.json", env=env),
                             (0, snap + "\n", ""))
        env = self.env(HF_HUB_OFFLINE="1")
        vocab = try_to_load_from_cache(self.cache, "org/model", "tokenizer/vocab.txt", "v1.0")
        self.assertEqual(self.dl("org/model", "tokenizer/vocab.txt", "--revision", "v1.0",
                                 env=env), (0, vocab + "\n", ""))
        self.assertEqual(self.dl("org/model", "config.json", "--revision", MAIN, env=env),
                         (0, os.path.join(snap, "config.json") + "\n", ""))
        self.assertEqual(self.dl("org/model", "--revision", "v1.0", env=env),
                         (0, os.path.join(repo, "snapshots", TAG) + "\n", ""))
        self.assertEqual(self.dl("org/model", "README.md", "--local-dir", local, env=env),
                         (0, os.path.join(local, "README.md") + "\n", ""))
        self.assertEqual(self.dl("org/model", "--local-dir", local, env=env), (0, local + "\n", ""))
        self.assertEqual(self.dl("org/model", "config.json", env=self.env(
            TRANSFORMERS_OFFLINE="1")), (0, os.path.join(snap, "config.json") + "\n", ""))
        rc, out, err = self.dl("org/model", "--json-files", "--include", "tokenizer/", env=env)
        self.assertEqual(rc, 0, err)
        objs = sorted((json.loads(l) for l in out.splitlines()), key=lambda o: o["path"])
        self.assertEqual([o["path"] for o in objs],
                         ["tokenizer/deep/merges.txt", "tokenizer/vocab.txt"])
        for o in objs:
            self.assertEqual(o["file"], try_to_load_from_cache(self.cache, "org/model", o["path"]))
            self.assertEqual(o["etag"], etag_of(REPOS["repos"][0]["files"][o["path"]]))
        self.assert_layout("org/model", MAIN, kept)
        # not cached: a file (alone, or among cached ones), a revision, a repo
        missing = "HF_HUB_OFFLINE is set and model org/model shards/part-1.bin at revision main " \
                  "is not in the cache " + self.cache
        self.assertIsNone(try_to_load_from_cache(self.cache, "org/model", "shards/part-1.bin"))
        rc, out, err = self.dl("org/model", "shards/part-1.bin", env=env)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn(missing, err)
        rc, out, err = self.dl("org/model", "config.json", "shards/part-1.bin", env=env)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn(missing, err)
        self.assertNotIn("config.json", err)
        rc, out, err = self.dl("org/model", "config.json", "--revision", TAG, env=env)
        self.assertEqual((rc, out), (1, ""))
        rc, out, err = self.dl("org/model", "--revision", "v9", env=env)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("HF_HUB_OFFLINE is set and model org/model at revision v9 is not in the "
                      "cache " + self.cache, err)
        rc, out, err = self.dl("org/data", "--repo-type", "dataset", env=env)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("dataset org/data at revision main is not in the cache", err)
        rc, out, err = self.dl("org/model", "config.json", "--local-dir", local, env=env)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("is not in the local dir " + local, err)
        rc, out, err = self.dl("org/model", "--warm", env=env)
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("HF_HUB_OFFLINE", err)
        self.assertEqual(self.stub.stats("hub")["requests"], {})
        self.assertEqual(self.content_requests(), ({}, {}))
        # not offline: hubd is asked, and is gone
        rc, _, err = self.dl("org/model", env=self.env(HF_HUB_OFFLINE="0",
                                                        TRANSFORMERS_OFFLINE="1"))
        self.assertEqual(rc, 3, err)

    # ---- --local-dir -------------------------------------------------------

    def test_local_dir_plain_files_metadata_and_a_no_op_rerun(self):
        local = os.path.join(self.tmp, "local")
        rc, out, err = self.dl("org/model", "--local-dir", local, "--exclude", "shards/*")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, local + "\n")
        files = REPOS["repos"][0]["files"]
        paths = [p for p in files if not p.startswith("shards/")]
        for p in paths:
            f = os.path.join(local, p)
            self.assertFalse(os.path.islink(f), p)
            with open(f, "rb") as fh:
                self.assertEqual(fh.read(), file_bytes(files[p]))
            with open(os.path.join(local, ".cache/huggingface/download", p + ".metadata")) as fh:
                lines = fh.read().splitlines()
            self.assertEqual(len(lines), 3)
            self.assertEqual(lines[:2], [MAIN, etag_of(files[p])])
            self.assertGreaterEqual(float(lines[2]), os.stat(f).st_mtime)
        with open(os.path.join(local, ".cache/huggingface/.gitignore")) as fh:
            self.assertEqual(fh.read().strip(), "*")
        self.assertFalse(os.path.exists(self.cache))
        before = self.fetches()
        self.stub.reset()
        rc, out, err = self.dl("org/model", "--local-dir", local, "--exclude", "shards/*")
        self.assertEqual((rc, out), (0, local + "\n"), err)
        self.assertIn("%d files already in %s" % (len(paths), local), err)
        self.assertEqual(self.fetches(), before)
        self.assertEqual(self.content_requests(), ({}, {}))
        # a file changed by hand is fetched again
        with open(os.path.join(local, "README.md"), "w") as fh:
            fh.write("mine")
        rc, _, err = self.dl("org/model", "--local-dir", local, "README.md")
        self.assertEqual(rc, 0, err)
        with open(os.path.join(local, "README.md"), "rb") as fh:
            self.assertEqual(fh.read(), file_bytes(files["README.md"]))

    # ---- tokens ------------------------------------------------------------

    def test_token_discovery_order(self):
        hf_home = os.path.join(self.tmp, "hf-home")
        os.mkdir(hf_home)

        def token_file(tok, path=os.path.join(hf_home, "token")):
            with open(path, "w") as f:
                f.write(tok + "\n")

        def gated_ok(env, *args):
            shutil.rmtree(self.cache, ignore_errors=True)
            rc, _, err = self.dl("org/gated", "g.json", *args, env=env)
            return rc == 0, err

        token_file("hf_carol")
        # --token first, then HF_TOKEN, then the file
        self.assertEqual(gated_ok(self.env(HF_HOME=hf_home, HF_TOKEN="hf_carol"),
                                  "--token", "hf_alice")[0], True)
        self.assertEqual(gated_ok(self.env(HF_HOME=hf_home, HF_TOKEN="hf_alice"))[0], True)
        self.assertEqual(gated_ok(self.env(HF_HOME=hf_home))[0], False)
        token_file("hf_bob")
        self.assertEqual(gated_ok(self.env(HF_HOME=hf_home))[0], True)
        self.assertEqual(gated_ok(self.env(HF_HOME=hf_home, HF_TOKEN="hf_carol"))[0], False)
        # HF_TOKEN_PATH, and the default ~/.cache/huggingface/token
        other = os.path.join(self.tmp, "tok")
        token_file("hf_alice", other)
        self.assertEqual(gated_ok(self.env(HF_TOKEN_PATH=other))[0], True)
        os.makedirs(os.path.join(self.home, ".cache", "huggingface"))
        token_file("hf_alice", os.path.join(self.home, ".cache", "huggingface", "token"))
        ok, err = gated_ok(self.env())
        self.assertTrue(ok, err)
        auth = self.stub.stats("hub")["auth"]
        self.assertIn("Bearer hf_alice", sum(auth.values(), []))

    def test_a_blob_an_admin_removed_is_downloaded_again(self):
        rc, _, err = self.dl("org/model", "config.json", "model.safetensors")
        self.assertEqual(rc, 0, err)
        sha = etag_of(REPOS["repos"][0]["files"]["model.safetensors"])
        rm = self.hubctl("rm", "--force", sha)  # held by this user's HF cache
        self.assertEqual(rm.rc, 0, rm)
        found = try_to_load_from_cache(self.cache, "org/model", "model.safetensors")
        self.assertIsNone(found)  # a dangling link is not a file
        self.stub.reset()
        rc, _, err = self.dl("org/model", "config.json", "model.safetensors")
        self.assertEqual(rc, 0, err)
        self.assertIn("1 file already in", err)
        self.assert_layout("org/model", MAIN, ["config.json", "model.safetensors"])
        self.assertEqual(list(self.stub.stats("cdn")["bytes"].values()), [700000])

    # ---- --warm, and one copy on disk --------------------------------------

    def test_warm_then_another_granted_token_is_a_hit(self):
        rc, out, err = self.dl("org/gated", "--warm", "--token", "hf_alice")
        self.assertEqual((rc, out), (0, ""), err)
        self.assertIn("2 files", err)
        self.assertFalse(os.path.exists(self.cache))  # no layout
        self.assertEqual(self.stub.stats("cdn")["bytes"], {"/cdn/" + etag_of(
            REPOS["repos"][1]["files"]["g.bin"]): 300000})
        self.stub.reset()
        rc, out, err = self.dl("org/gated", "--token", "hf_bob", "--json-files")
        self.assertEqual(rc, 0, err)
        objs = {o["path"]: o for o in map(json.loads, out.splitlines())}
        self.assertEqual(objs["g.bin"]["source"], "hit")
        self.assertEqual(self.stub.stats("cdn")["requests"], {})
        self.assert_layout("org/gated", GATED, ["g.bin", "g.json"])
        # a token the Hub refuses gets nothing
        rc, _, err = self.dl("org/gated", "--warm", "--token", "hf_carol")
        self.assertEqual(rc, 1)

    def test_disk_holds_one_copy(self):
        rc, _, err = self.dl("org/model")
        self.assertEqual(rc, 0, err)
        sizes = sum(len(file_bytes(s)) for s in REPOS["repos"][0]["files"].values())
        store = os.path.join(self.hubd.cache, "blobs")
        on_disk = allocated(store) + allocated(self.cache)
        # blocks round each file up; the HF cache holds refs/main and symlinks
        self.assertLessEqual(on_disk, 1.01 * sizes + 7 * 4096 + 4096 + 65536,
                             "hubd %d + HF cache %d for %d bytes" % (
                                 allocated(store), allocated(self.cache), sizes))
        self.assertLessEqual(allocated(self.cache), 4096)


UID_A, UID_B, UID_C = 1000, 65534, 1001  # users other than hubd's (root)


def as_user(uid, argv, env):
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]
                          + argv, capture_output=True, text=True, timeout=120, env=env)


class HfDownloadUsersTest(HubTestCase):
    """Users other than hubd's, each with their own HF cache (the default
    one, under their HOME) and their own token to one gated repo."""

    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "users.conf"), socket_mode="0666",
                            http_listen="127.0.0.1:%d" % free_port(), hf_upstream=self.stub.hub_url)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-users"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)
        self.homes = {}
        for uid in (UID_A, UID_B, UID_C):
            home = os.path.join(self.tmp, "home%d" % uid)
            os.mkdir(home, 0o700)
            os.chown(home, uid, uid)
            self.homes[uid] = home

    def dl(self, uid, token, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
        env.update(HOME=self.homes[uid], HF_TOKEN=token)
        return as_user(uid, [HUBCTL, "--socket", self.hubd.socket, "hf", "download"] + list(args),
                       env)

    def test_two_users_share_one_gated_copy_and_a_third_gets_nothing(self):
        spec = REPOS["repos"][1]["files"]
        sha = etag_of(spec["g.bin"])
        for uid, tok in ((UID_A, "hf_alice"), (UID_B, "hf_bob")):
            r = self.dl(uid, tok, "org/gated")
            self.assertEqual(r.returncode, 0, r)
            cache = os.path.join(self.homes[uid], ".cache", "huggingface", "hub")
            self.assertEqual(r.stdout, os.path.join(cache, "models--org--gated", "snapshots",
                                                    GATED) + "\n")
            blob = os.path.join(cache, "models--org--gated", "blobs", sha)
            self.assertTrue(os.path.islink(blob), "a symlink into hubd's store")
            got = as_user(uid, ["sha256sum", os.path.join(r.stdout.strip(), "g.bin")], None)
            self.assertEqual(got.stdout.split()[0], sha, got)
            js = as_user(uid, ["node", HUBCLIENT, "cache-file", "--hub-url", self.stub.hub_url,
                               "--repo", "org/gated", "--path", "g.bin", "--token", tok,
                               "--dir", cache], None)
            res = json.loads(js.stdout.strip().splitlines()[-1])
            self.assertEqual(res["files"]["g.bin"]["sha256"], sha, res)
            self.assertEqual([q for q in res["requests"] if "/resolve/" in q[1]], [])
            target = os.readlink(blob)
        # the CDN sent the file once; the disk holds it once
        self.assertEqual(self.stub.stats("cdn")["bytes"], {"/cdn/" + sha: 300000})
        size = 300000 + len(file_bytes(spec["g.json"]))
        store = os.path.join(self.hubd.cache, "blobs")
        on_disk = allocated(store) + sum(allocated(h) for h in self.homes.values())
        self.assertLessEqual(on_disk, 1.01 * size + 4 * 4096)
        # carol's token is refused: no file, and hubd's copy stays unreadable to her
        r = self.dl(UID_C, "hf_carol", "org/gated")
        self.assertEqual(r.returncode, 1, r)
        self.assertIn("not in the authorized list", r.stderr)
        self.assertTrue(target.startswith(store), target)
        self.assertFalse(self.readable(UID_C, target))
        self.assertTrue(self.readable(UID_A, target))

    def rm(self, uid, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
        env.update(HOME=self.homes[uid])
        return as_user(uid, [HUBCTL, "--socket", self.hubd.socket, "hf", "rm"] + list(args), env)

    def unhold(self, uid, label):
        """UNHOLD of a whole label, as an older hubctl's hf rm sent it."""
        code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
                "s.sendall(b'UNHOLD id=u label=' + sys.argv[2].encode() + b'\\n')\n"
                "print(s.recv(4096).decode())")
        r = as_user(uid, [sys.executable, "-c", code, self.hubd.socket, label], None)
        self.assertIn("OK id=u", r.stdout, r)

    def test_hf_rm_of_one_cache_keeps_the_other_caches_grant(self):
        c2 = os.path.join(self.homes[UID_A], "c2")
        r = self.dl(UID_A, "hf_alice", "org/gated")
        self.assertEqual(r.returncode, 0, r)
        g = os.path.join(r.stdout.strip(), "g.bin")
        r = self.dl(UID_A, "hf_alice", "org/gated", "--cache-dir", c2)
        self.assertEqual(r.returncode, 0, r)
        holds = self.stats()["holds"]
        r = self.rm(UID_A, "org/gated", "--cache-dir", c2)
        self.assertEqual(r.returncode, 0, r)
        self.assertFalse(os.path.exists(os.path.join(c2, "models--org--gated")))
        self.assertTrue(self.readable(UID_A, g), "the default cache's link keeps its grant")
        self.assertEqual(self.stats()["holds"], holds // 2, "c2's holds, not the default's")

    def test_a_blob_link_that_cannot_be_read_is_fetched_and_held_again(self):
        """Both clients take a blob they cannot read (its grant gone) for
        absent: fetched, held, readable again."""
        r = self.dl(UID_A, "hf_alice", "org/gated")
        self.assertEqual(r.returncode, 0, r)
        g = os.path.join(r.stdout.strip(), "g.bin")
        self.unhold(UID_A, "models/org/gated@main")
        self.assertFalse(self.readable(UID_A, g))
        r = self.dl(UID_A, "hf_alice", "org/gated")
        self.assertEqual(r.returncode, 0, r)
        self.assertTrue(self.readable(UID_A, g), r)
        self.unhold(UID_A, "models/org/gated@main")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
        env.update(HOME=self.homes[UID_A], HF_TOKEN="hf_alice", HUBD_SOCKET=self.hubd.socket,
                   PYTHONPATH=PYTHON_CLIENT, HF_HUB_DISABLE_PROGRESS_BARS="1")
        py = ("import hubd\nprint(hubd.hf_hub_download('org/gated', 'g.bin'))\n"
              "print(hubd.snapshot_download('org/gated'))")
        r = as_user(UID_A, [sys.executable, "-c", py], env)
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(r.stdout.splitlines()[0], g)
        self.assertTrue(self.readable(UID_A, g), r)

    def readable(self, uid, path):
        return as_user(uid, ["sh", "-c", 'cat "$0" >/dev/null', path], None).returncode == 0


if __name__ == "__main__":
    unittest.main()
