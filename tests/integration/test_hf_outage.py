"""hubctl hf download, hubd.hf_hub_download and hubd.snapshot_download when
the Hub cannot be reached: as huggingface_hub falls back on its cache when
its HEAD or repo-info call fails with a connection error, a timeout or a
5xx, they answer what HF_HUB_OFFLINE answers (the same paths), say once on
stderr that the answer is the cache's and why, and fail with the Hub's
reason when the cache does not hold it. The stand-in Hub (tests/hubstub.py)
is stopped (hubd: connect) or answers 503 to everything (POST /control/down).
The Hub's answers (401, 403, 404) still fail, cached or not. A commit's file
already cached is answered with no request at all.
"""

import contextlib
import io
import logging
import os
import subprocess
import sys

from harness import HERE, HUBCTL, HubTestCase
from hubstub_fixture import HubStub, clear_env, start_front

REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "client", "python"))
import hubd  # noqa: E402
import hubd.hf  # noqa: E402

MAIN = "5" * 40
TAG = "6" * 40
GATED = "7" * 40

REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
    "repos": [
        {"id": "org/model", "revisions": {"main": MAIN, "v1.0": TAG},
         "files": {"config.json": {"text": '{"model_type": "stub"}\n'},
                   "sub/vocab.txt": {"text": "a\nb\n"},
                   "model.safetensors": {"lfs": {"size": 100000, "seed": 4}}}},
        {"id": "org/gated", "gated": ["alice"], "revisions": {"main": GATED},
         "files": {"g.json": {"text": "{}\n"}}},
        {"id": "org/other", "files": {"x.txt": {"text": "x\n"}}},
    ],
}

HF_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH", "XDG_CACHE_HOME",
          "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


class HfOutageTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        start_front(self, self.stub)
        clear_env(self, HF_ENV + ("HUBD_SOCKET",))
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        os.environ["HF_HOME"] = os.path.join(self.home, "hf")
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        os.environ["HUBD_SOCKET"] = self.hubd.socket
        self.cache = os.path.join(self.tmp, "hf-cache")     # hubctl's
        self.pycache = os.path.join(self.tmp, "py-cache")   # the Python functions'
        self.local = os.path.join(self.tmp, "local")
        self.pylocal = os.path.join(self.tmp, "pylocal")

    # -- helpers --
    def dl(self, *args, cache=True):
        argv = [HUBCTL, "--socket", self.hubd.socket, "hf", "download"] + list(args)
        if cache and "--local-dir" not in args:
            argv += ["--cache-dir", self.cache]
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update(HOME=self.home, XDG_CACHE_HOME=os.path.join(self.home, ".cache"))
        p = subprocess.run(argv, capture_output=True, env=env, timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def py(self, fn, *a, **kw):
        """fn's answer, its stderr and its hubd._hfcache warnings."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertLogs("hubd._hfcache", "DEBUG") as logs:
            logging.getLogger("hubd._hfcache").debug("start")  # assertLogs wants one record
            out = fn(*a, **kw)
        return out, err.getvalue(), [r.getMessage() for r in logs.records[1:]]

    def py_fails(self, fn, *a, **kw):
        with self.assertRaises(hubd.HubdError) as cm:
            self.py(fn, *a, **kw)
        return cm.exception

    def snap(self, cache, commit=MAIN, repo="models--org--model"):
        return os.path.join(cache, repo, "snapshots", commit)

    def fill(self):
        """The repo at main in both caches and config.json in both local dirs."""
        rc, out, err = self.dl("org/model")
        self.assertEqual((rc, out), (0, self.snap(self.cache) + "\n"), err)
        rc, _, err = self.dl("org/model", "config.json", "--local-dir", self.local)
        self.assertEqual(rc, 0, err)
        self.assertEqual(hubd.snapshot_download("org/model", cache_dir=self.pycache),
                         self.snap(self.pycache))
        hubd.hf_hub_download("org/model", "config.json", local_dir=self.pylocal)

    def assert_note(self, err, code, where, prefix="hubctl"):
        """One line on stderr: the cache answered, and why."""
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("%s: note: cannot reach the Hub (" % prefix), err)
        self.assertIn("; %s): answered from the %s" % (code, where), lines[0])

    def check_answers_from_cache(self, code):
        """With the Hub unreachable (hubd's code): every cached answer, said
        once; what is not cached fails with the Hub's reason."""
        cache, py = "cache " + self.cache, "cache " + self.pycache
        rc, out, err = self.dl("org/model")
        self.assertEqual((rc, out), (0, self.snap(self.cache) + "\n"), err)
        self.assert_note(err, code, cache)
        rc, out, err = self.dl("org/model", "config.json", "sub/vocab.txt")
        self.assertEqual((rc, out), (0, self.snap(self.cache) + "\n"), err)
        self.assert_note(err, code, cache)
        rc, out, err = self.dl("org/model", "sub/vocab.txt")
        self.assertEqual((rc, out), (0, os.path.join(self.snap(self.cache), "sub/vocab.txt\n")),
                         err)
        self.assert_note(err, code, cache)
        rc, out, err = self.dl("org/model", "config.json", "--local-dir", self.local)
        self.assertEqual((rc, out), (0, os.path.join(self.local, "config.json\n")), err)
        self.assert_note(err, code, "local dir " + self.local)
        # not cached: the Hub's reason, and what is missing
        for args, what in ((["org/other"], "model org/other at revision main"),
                           (["org/model", "--revision", "v1.0"], "model org/model at revision v1.0"),
                           (["org/model", "nope.txt"], "model org/model nope.txt at revision main")):
            rc, out, err = self.dl(*args)
            self.assertEqual((rc, out), (1, ""), err)
            self.assertRegex(err, r"^hubctl: cannot reach the Hub \(.*; %s\) and %s is not in the "
                             r"cache %s\n$" % (code, what, self.cache))
        # Python
        path, err, logs = self.py(hubd.snapshot_download, "org/model", cache_dir=self.pycache)
        self.assertEqual(path, self.snap(self.pycache))
        self.assert_note(err, code, py, "hubd")
        self.assertEqual(len(logs), 1, logs)
        self.assertIn("; %s): answered from the %s" % (code, py), logs[0])
        path, err, _ = self.py(hubd.hf_hub_download, "org/model", "sub/vocab.txt",
                               cache_dir=self.pycache)
        self.assertEqual(path, os.path.join(self.snap(self.pycache), "sub/vocab.txt"))
        self.assert_note(err, code, py, "hubd")
        path, err, _ = self.py(hubd.hf_hub_download, "org/model", "config.json",
                               local_dir=self.pylocal)
        self.assertEqual(path, os.path.join(self.pylocal, "config.json"))
        self.assert_note(err, code, "local dir " + self.pylocal, "hubd")
        e = self.py_fails(hubd.snapshot_download, "org/other", cache_dir=self.pycache)
        self.assertEqual(e.code, code)
        self.assertRegex(e.msg, r"^cannot reach the Hub \(.*; %s\) and model org/other at "
                         r"revision main is not in the cache " % code)
        e = self.py_fails(hubd.hf_hub_download, "org/model", "nope.txt", cache_dir=self.pycache)
        self.assertEqual(e.code, code)
        self.assertIn("and model org/model nope.txt at revision main is not in the cache", e.msg)

    # -- tests --
    def test_hub_stopped_answers_from_the_cache(self):
        self.fill()
        self.stub.stop()
        self.check_answers_from_cache("connect")

    def test_hub_answering_503_answers_from_the_cache(self):
        self.fill()
        self.stub.control("down", {"status": 503})
        self.check_answers_from_cache("http_503")
        self.stub.control("down", {"status": None})
        rc, _, err = self.dl("org/model")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("cannot reach", err)

    def test_a_file_fetch_that_gets_an_outage_takes_the_local_copy(self):
        """The listing comes, the file's FETCH gets the Hub's 503: a local
        dir's copy (changed since, so it was to be fetched again) answers.
        Another token than the first run's: hubd's copy is not shared with
        it, so hubd asks the Hub."""
        self.fill()
        for where in (self.local, self.pylocal):
            with open(os.path.join(where, "config.json"), "w") as f:
                f.write("mine\n")
        self.stub.control("down", {"status": 503, "only": "resolve"})
        rc, out, err = self.dl("org/model", "config.json", "--local-dir", self.local,
                               "--token", "hf_bob")
        self.assertEqual((rc, out), (0, os.path.join(self.local, "config.json\n")), err)
        self.assert_note(err, "http_503", "local dir " + self.local)
        path, err, _ = self.py(hubd.hf_hub_download, "org/model", "config.json",
                               local_dir=self.pylocal, token="hf_bob")
        self.assertEqual(path, os.path.join(self.pylocal, "config.json"))
        self.assert_note(err, "http_503", "local dir " + self.pylocal, "hubd")
        for where in (self.local, self.pylocal):
            with open(os.path.join(where, "config.json")) as f:
                self.assertEqual(f.read(), "mine\n")
        # a file that is nowhere on disk: the FETCH's error, as always
        rc, out, err = self.dl("org/model", "sub/vocab.txt", "--local-dir", self.local,
                               "--token", "hf_bob")
        self.assertEqual(rc, 1, err)
        self.assertIn("http_503", err)
        e = self.py_fails(hubd.hf_hub_download, "org/model", "sub/vocab.txt",
                          local_dir=self.pylocal, token="hf_bob")
        self.assertEqual(e.code, "http_503")

    def test_the_hubs_answers_still_fail_an_outage_does_not(self):
        """401, 403 and 404 are the Hub's word: they fail, the repo cached or
        not; the same cached repo is answered from the cache in an outage."""
        rc, _, err = self.dl("org/gated", "--token", "hf_alice")
        self.assertEqual(rc, 0, err)
        hubd.snapshot_download("org/gated", cache_dir=self.pycache, token="hf_alice")
        self.fill()
        for args, code in ((["org/gated", "--token", "hf_carol"], "http_403"),
                           (["org/gated"], "http_401"),
                           (["org/model", "--revision", "nope"], "http_404")):
            rc, out, err = self.dl(*args)
            self.assertEqual((rc, out), (1, ""), err)
            self.assertIn("(%s)" % code, err)
            self.assertNotIn("cache", err)
        rc, out, err = self.dl("org/model", "nope.txt")
        self.assertEqual((rc, out), (1, ""), err)
        self.assertIn("nope.txt is not a file of model org/model", err)
        for kw, code in (({"token": "hf_carol"}, "http_403"), ({"token": False}, "http_401")):
            e = self.py_fails(hubd.snapshot_download, "org/gated", cache_dir=self.pycache, **kw)
            self.assertEqual(e.code, code)
        e = self.py_fails(hubd.snapshot_download, "org/model", revision="nope",
                          cache_dir=self.pycache)
        self.assertEqual(e.code, "http_404")
        e = self.py_fails(hubd.hf_hub_download, "org/model", "nope.txt", cache_dir=self.pycache)
        self.assertEqual(e.code, "http_404")
        # the same cached gated repo, the Hub down: the cache answers
        self.stub.control("down", {"status": 502})
        rc, out, err = self.dl("org/gated", "--token", "hf_carol")
        self.assertEqual((rc, out), (0, self.snap(self.cache, GATED, "models--org--gated") + "\n"),
                         err)
        self.assert_note(err, "http_502", "cache " + self.cache)
        path, err, _ = self.py(hubd.snapshot_download, "org/gated", cache_dir=self.pycache,
                               token="hf_carol")
        self.assertEqual(path, self.snap(self.pycache, GATED, "models--org--gated"))
        self.assert_note(err, "http_502", "cache " + self.pycache, "hubd")

    def test_a_commits_cached_file_needs_no_request(self):
        """As huggingface_hub's hf_hub_download: a commit as the revision and
        its file in the cache: no request, to hubd or the Hub."""
        self.fill()
        self.stub.reset()
        fetches = lambda s: (s["hits"], s["misses"], s["attached"])
        before = fetches(self.stats())
        rc, out, err = self.dl("org/model", "sub/vocab.txt", "--revision", MAIN)
        self.assertEqual((rc, out, err),
                         (0, os.path.join(self.snap(self.cache), "sub/vocab.txt\n"), ""))
        path, err, logs = self.py(hubd.hf_hub_download, "org/model", "sub/vocab.txt",
                                  revision=MAIN, cache_dir=self.pycache)
        self.assertEqual((path, err, logs),
                         (os.path.join(self.snap(self.pycache), "sub/vocab.txt"), "", []))
        self.assertEqual(self.stub.stats("hub")["requests"], {})
        self.assertEqual(self.stub.stats("cdn")["requests"], {})
        self.assertEqual(fetches(self.stats()), before)
        # a commit's file not cached is asked for, as any
        rc, out, err = self.dl("org/model", "config.json", "--revision", TAG)
        self.assertEqual(rc, 0, err)
        self.assertNotEqual(self.stub.stats("hub")["requests"], {})


if __name__ == "__main__":
    import unittest
    unittest.main()
