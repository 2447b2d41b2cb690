"""`hubctl hf download`'s flags from huggingface_hub's `hf download`, which
scripts copied from its docs use: --dry-run (what would be fetched, as a
table or hf's JSON shape; nothing fetched or written), --json (hf's
{"path": ...}; hubctl's per-file objects are --json-files), -q (the path
alone), --format, the deprecated flags (a warning), and HF_ENDPOINT
(hubd's Hub or its front: silent; any other: one line, and hubd's Hub
answers).
"""

import json
import os
import subprocess
import sys

from harness import HERE, HUBCTL, HubTestCase
from hubstub_fixture import HubStub, file_bytes, start_front
from test_hf_download import MAIN, REPOS, etag_of, try_to_load_from_cache, user_env

FILES = REPOS["repos"][0]["files"]


def format_size(n):
    """huggingface_hub's _format_size, as its `hf download --dry-run` prints it."""
    n = float(n)
    for unit in ("", "K", "M", "G", "T", "P", "E", "Z"):
        if abs(n) < 1000.0:
            return "%3.1f%s" % (n, unit)
        n /= 1000.0
    return "%.1fY" % n


class HfDownloadFlagsTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.port = start_front(self, self.stub)
        self.cache = os.path.join(self.tmp, "hf-cache")
        self.home = os.path.join(self.tmp, "home")
        os.mkdir(self.home)
        self.snap = os.path.join(self.cache, "models--org--model", "snapshots", MAIN)

    def env(self, **extra):
        return user_env(self.home, **extra)

    def dl(self, *args, env=None):
        argv = [HUBCTL, "--socket", self.hubd.socket, "hf", "download", "--cache-dir",
                self.cache] + list(args)
        p = subprocess.run(argv, capture_output=True, env=env or self.env(), timeout=120)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    def on_disk(self):
        return sorted(os.path.join(d, n) for d, ds, ns in os.walk(self.cache) for n in ns + ds)

    # ---- --dry-run -----------------------------------------------------------

    def test_dry_run_lists_what_would_be_fetched_and_fetches_nothing(self):
        rc, _, err = self.dl("org/model", "config.json")
        self.assertEqual(rc, 0, err)
        disk, misses = self.on_disk(), self.stats()["misses"]
        self.stub.reset()
        rc, out, err = self.dl("org/model", "--dry-run")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        fetched = sum(len(file_bytes(s)) for p, s in FILES.items() if p != "config.json")
        self.assertEqual(lines[0], "[dry-run] Will download 6 files (out of 7) totalling %s."
                         % format_size(fetched))
        self.assertEqual(lines[1].split(), ["FILE", "SIZE", "CACHED"])
        rows = {l.split()[0]: l.split()[1:] for l in lines[3:]}
        self.assertEqual(rows["config.json"], ["-", "yes"])
        self.assertEqual(rows["model.safetensors"], [format_size(700000), "no"])
        self.assertEqual(sorted(rows), sorted(FILES))
        # hf's JSON shape, sorted by file; -q: the names
        want = [{"file": p, "size": "-" if p == "config.json" else format_size(
            len(file_bytes(FILES[p])))} for p in sorted(FILES)]
        for flags in (["--format", "json"], ["--json"], ["--format=json"]):
            rc, out, err = self.dl("org/model", "--dry-run", *flags)
            self.assertEqual((rc, json.loads(out)), (0, want), err)
        rc, out, err = self.dl("org/model", "--dry-run", "-q")
        self.assertEqual((rc, out, err), (0, "".join(p + "\n" for p in sorted(FILES)), ""))
        rc, out, _ = self.dl("org/model", "--dry-run", "--format", "agent", "shards/part-1.bin")
        self.assertEqual(out.splitlines()[1:], ["file\tsize",
                                                "shards/part-1.bin\t%s" % format_size(200000)])
        # --json-files: huggingface_hub's DryRunFileInfo, one per file
        rc, out, _ = self.dl("org/model", "--dry-run", "--json-files", "--force-download",
                             "config.json", "README.md")
        recs = {r["filename"]: r for r in map(json.loads, out.splitlines())}
        self.assertEqual(recs["config.json"], {
            "filename": "config.json", "file_size": len(file_bytes(FILES["config.json"])),
            "is_cached": True, "will_download": True, "commit_hash": MAIN,
            "local_path": os.path.join(self.snap, "config.json")})
        self.assertEqual((recs["README.md"]["is_cached"], recs["README.md"]["will_download"]),
                         (False, True))
        # nothing fetched, nothing written
        self.assertEqual(self.stub.stats("cdn")["requests"], {})
        self.assertEqual([p for p in self.stub.stats("hub")["requests"] if "/resolve/" in p], [])
        self.assertEqual(self.stats()["misses"], misses)
        self.assertEqual(self.on_disk(), disk)
        # offline: what the cache holds, as in place
        rc, out, err = self.dl("org/model", "--dry-run", "--json", env=self.env(HF_HUB_OFFLINE="1"))
        self.assertEqual((rc, json.loads(out)), (0, [{"file": "config.json", "size": "-"}]), err)

    # ---- --json, -q, --format --------------------------------------------------

    def test_json_is_hfs_shape_and_q_prints_the_path_alone(self):
        rc, out, err = self.dl("org/model", "config.json", "--json")
        self.assertEqual((rc, json.loads(out)),
                         (0, {"path": os.path.join(self.snap, "config.json")}), err)
        rc, out, err = self.dl("org/model", "--exclude", "shards/", "--format", "json")
        self.assertEqual((rc, json.loads(out)), (0, {"path": self.snap}), err)
        self.assertEqual(try_to_load_from_cache(self.cache, "org/model", "model.safetensors"),
                         os.path.join(self.snap, "model.safetensors"))
        self.assertEqual(os.readlink(os.path.join(self.snap, "README.md")),
                         "../../blobs/" + etag_of(FILES["README.md"]))
        for q in ("-q", "--quiet", "--format=quiet"):
            self.assertEqual(self.dl("org/model", "--exclude", "shards/", q),
                             (0, self.snap + "\n", ""))
        rc, out, _ = self.dl("org/model", "--exclude", "shards/", "--format", "agent")
        self.assertEqual(out, "path=%s\n" % self.snap)
        rc, out, _ = self.dl("org/model", "--exclude", "shards/", "--format", "human")
        self.assertEqual(out.splitlines()[1:], ["  path: " + self.snap])
        self.assertIn("Downloaded", out.splitlines()[0])
        for bad in (["--format", "table"], ["--json", "--json-files"],
                    ["--format", "human", "--json"], ["--warm", "--json"],
                    ["--warm", "--dry-run"]):
            rc, out, err = self.dl("org/model", *bad)
            self.assertEqual((rc, out), (2, ""), bad)
            self.assertIn("hubctl:", err)

    def test_deprecated_flags_warn_and_are_ignored(self):
        rc, out, err = self.dl("org/model", "README.md", "--local-dir-use-symlinks", "False",
                               "--resume-download", "--json")
        self.assertEqual((rc, json.loads(out)), (0, {"path": os.path.join(self.snap,
                                                                         "README.md")}), err)
        self.assertIn("--local-dir-use-symlinks is deprecated", err)
        self.assertIn("--resume-download is deprecated", err)

    # ---- HF_ENDPOINT ------------------------------------------------------------

    def test_hf_endpoint_of_hubd_is_silent_another_is_said_once(self):
        for ep in (self.stub.hub_url, self.stub.hub_url + "/",
                   "http://localhost:%d/hf" % self.port, "http://127.0.0.1:%d/hf/" % self.port):
            rc, _, err = self.dl("org/model", "config.json", env=self.env(HF_ENDPOINT=ep))
            self.assertEqual(rc, 0, err)
            self.assertNotIn("HF_ENDPOINT", err, ep)
        for other in ("http://127.0.0.1:1", "https://localhost:%d/hf" % self.port, "not a url"):
            rc, out, err = self.dl("org/model", "--exclude", "shards/",
                                   env=self.env(HF_ENDPOINT=other))
            self.assertEqual((rc, out), (0, self.snap + "\n"), err)
            lines = [l for l in err.splitlines() if "HF_ENDPOINT" in l]
            self.assertEqual(len(lines), 1, err)
            self.assertIn(other, lines[0])
            self.assertIn(self.stub.hub_url, lines[0])
        with open(os.path.join(self.snap, "model.safetensors"), "rb") as f:  # hubd's Hub's
            self.assertEqual(f.read(), file_bytes(FILES["model.safetensors"]))
        rc, _, err = self.dl("org/model", "-q", env=self.env(HF_ENDPOINT="http://127.0.0.1:1"))
        self.assertEqual((rc, err), (0, ""))

    def test_hf_endpoint_rules_are_the_python_clients(self):
        """hubctl and hubd/_hfopts.py take every HF_ENDPOINT the same way."""
        sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
        from hubd import _hfopts
        hub = _hfopts.Hub({"hf_upstream": self.stub.hub_url,
                           "hf_front": "http://127.0.0.1:%d/hf" % self.port})
        up, p = self.stub.hub_url, self.port
        cases = [up.upper(), up + "/?x=1", up + "#f", up.replace("//", "//u:pw@"), up + "/hf",
                 up.replace("http:", "https:"), " %s\t" % up, "http://LOCALHOST:%d/hf#x" % p,
                 "http://127.9.9.9:%d/hf" % p, "http://[::1]:%d/hf" % p,
                 "http://a.localhost:%d/hf//" % p, "https://127.0.0.1:%d/hf" % p,
                 "http://127.0.0.1:%d/hf2" % p, "http://127.0.0.1:%d" % p,
                 "http://127.0.0.1:x/hf", "http://[::1:%d/hf" % p, "127.0.0.1:%d/hf" % p,
                 "http://127.0.0.1:0%d/hf" % p, "ftp://127.0.0.1:%d/hf" % p]
        for ep in cases:
            rc, _, err = self.dl("org/model", "config.json", "--dry-run",
                                 env=self.env(HF_ENDPOINT=ep))
            self.assertEqual(rc, 0, err)
            self.assertEqual("HF_ENDPOINT" not in err, hub.means_us(ep), (ep, err))
