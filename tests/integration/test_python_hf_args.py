"""hubd.hf_hub_download and hubd.snapshot_download take huggingface_hub's
other arguments (client/python/hubd/_hfopts.py, _hfprogress.py), through a
real hubd whose hf_upstream is the stand-in Hub (tests/hubstub.py):
subfolder, force_download (fetched again, refresh=1), local_files_only (no
connection at all), headers (reach the Hub) and user_agent (not sent),
etag_timeout (a slow listing: the cache answers), dry_run (DryRunFileInfo,
nothing fetched or written), max_workers (FETCHes in flight), endpoint
(hubd's Hub, its front, or ValueError naming both) and HF_ENDPOINT (one
note), which HELLO's hf_upstream and hf_front make known. Progress:
tqdm_class gets "Fetching N files" and a bar per file; on a terminal (a
pty) the built-in display draws both, as `hubctl hf download` does (under
script(1)); with stderr not a terminal, neither draws anything.
"""

import contextlib
import io
import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from unittest import mock

from harness import HERE, HUBCTL, HubTestCase
from hubstub_fixture import HubStub, clear_env, file_bytes, start_front

REPO = os.path.dirname(os.path.dirname(HERE))
CLIENT = os.path.join(REPO, "client", "python")
sys.path.insert(0, CLIENT)
import hubd  # noqa: E402
import hubd.hf  # noqa: E402
import hubd._hfopts  # noqa: E402
from test_hubstub import HUBCLIENT  # noqa: E402

MAIN = "a" * 40
REPOS = {
    "tokens": {"hf_alice": "alice", "hf_carol": "carol"},
    "repos": [
        {"id": "org/public", "revisions": {"main": MAIN},
         "files": {"config.json": {"text": '{"model_type": "stub"}\n'},
                   "README.md": {"text": "# public\n"},
                   "sub/dir/tok.json": {"text": '{"tok": 1}\n'},
                   "weights/model.safetensors": {"lfs": {"size": 300 * 1024, "seed": 5}},
                   "weights/other.safetensors": {"lfs": {"size": 200 * 1024, "seed": 6}}}},
        {"id": "org/gated", "gated": ["alice"], "files": {"g.txt": {"text": "gated\n"}}},
    ],
}
HF_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH", "XDG_CACHE_HOME",
          "HF_HUB_DISABLE_PROGRESS_BARS", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE",
          "TRANSFORMERS_OFFLINE", "HUBD_SOCKET", "HF_ENDPOINT", "HF_HUB_ETAG_TIMEOUT")

# A child that runs one snapshot_download with its stderr where the test
# put it (a pty, or a pipe); tqdm blocked when asked (a package that
# fails to import), so that hubd's own display draws.
CHILD = '''
import sys
sys.path.insert(0, sys.argv[1])
import hubd
print(hubd.snapshot_download("org/public", cache_dir=sys.argv[2], token="hf_alice"))
'''


class Rec:
    """A tqdm_class that records what it is told."""
    made = []

    def __init__(self, *a, **kw):
        self.kw, self.n, self.closed = kw, 0, False
        Rec.made.append(self)

    def update(self, n=1):
        self.n += n

    def close(self):
        self.closed = True


class PythonHfArgsTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.port = start_front(self, self.stub)
        clear_env(self, HF_ENV)
        os.environ["HF_HOME"] = os.path.join(self.tmp, "hfhome")
        os.environ["HUBD_SOCKET"] = self.hubd.socket
        self.cache = os.path.join(self.tmp, "hfcache")
        hubd._hfopts._told_endpoint.clear()

    # -- helpers --
    @contextlib.contextmanager
    def sent(self):
        """The lines the functions send to hubd, and the most FETCHes
        waiting for their DONE at once."""
        lines, state = [], {"open": 0, "most": 0}
        send, reply = hubd.hf._Session.send, hubd.hf._Session.reply

        def spy_send(sess, line):
            lines.append(line.decode())
            if line.startswith(b"FETCH "):
                state["open"] += 1
                state["most"] = max(state["most"], state["open"])
            return send(sess, line)

        def spy_reply(sess, *a):
            got = reply(sess, *a)
            if got and got[0] in ("DONE", "ERR") and str(got[1].get("id", "")).startswith("f"):
                state["open"] -= 1
            return got
        with mock.patch.object(hubd.hf._Session, "send", spy_send), \
                mock.patch.object(hubd.hf._Session, "reply", spy_reply):
            yield lines, state

    def quiet(self, fn, *a, **kw):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            out = fn(*a, **kw)
        return out, err.getvalue()

    def api_requests(self):
        return sum(n for p, n in self.stub.stats("hub")["requests"].items()
                   if p.startswith("/api/"))

    def snap(self, path):
        return os.path.join(self.cache, "models--org--public", "snapshots", MAIN,
                            *path.split("/"))

    # -- the protocol --
    def test_hello_names_the_hub_and_the_front(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.hubd.socket)
        s.sendall(b"HELLO proto=1 client=test\n")
        line = b""
        while not line.endswith(b"\n"):
            line += s.recv(4096)
        s.close()
        _, f = hubd._parse_line(line.strip())
        self.assertEqual(f["hf_upstream"], self.stub.hub_url)
        self.assertEqual(f["hf_front"], "http://127.0.0.1:%d/hf" % self.port)

    # -- which Hub --
    def test_endpoint_is_hubds_hub_or_an_error(self):
        for ep in (self.stub.hub_url, self.stub.hub_url + "/",
                   "http://127.0.0.1:%d/hf" % self.port, "http://localhost:%d/hf/" % self.port):
            path = hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                                        endpoint=ep)
            self.assertEqual(path, self.snap("config.json"), ep)
        before = self.api_requests()
        other = "http://127.0.0.1:%d" % (self.stub.hub_port + 1 if self.stub.hub_port < 65535
                                          else 1)
        for fn, a in ((hubd.hf_hub_download, ("org/public", "README.md")),
                      (hubd.snapshot_download, ("org/public",))):
            with self.assertRaises(ValueError) as cm:
                fn(*a, cache_dir=self.cache, endpoint=other)
            self.assertIn(other, str(cm.exception))
            self.assertIn(self.stub.hub_url, str(cm.exception))
        self.assertEqual(self.api_requests(), before, "nothing asked of the Hub")
        self.assertFalse(os.path.exists(self.snap("README.md")))

    def test_hf_endpoint_honoured_or_said_once(self):
        os.environ["HF_ENDPOINT"] = "http://localhost:%d/hf" % self.port
        _, err = self.quiet(hubd.hf_hub_download, "org/public", "config.json",
                            cache_dir=self.cache)
        self.assertNotIn("HF_ENDPOINT", err)
        os.environ["HF_ENDPOINT"] = self.stub.hub_url
        _, err = self.quiet(hubd.snapshot_download, "org/public", cache_dir=self.cache,
                            allow_patterns="*.md")
        self.assertNotIn("HF_ENDPOINT", err)
        other = "http://127.0.0.1:1"
        os.environ["HF_ENDPOINT"] = other
        with self.assertLogs("hubd._hfopts", "WARNING"):
            path, err = self.quiet(hubd.hf_hub_download, "org/public", "sub/dir/tok.json",
                                   cache_dir=self.cache)
        _, err2 = self.quiet(hubd.hf_hub_download, "org/public", "config.json",
                             cache_dir=self.cache)
        lines = [x for x in (err + err2).splitlines() if "HF_ENDPOINT" in x]
        self.assertEqual(len(lines), 1, err + err2)
        self.assertIn(other, lines[0])
        self.assertIn(self.stub.hub_url, lines[0])
        with open(path, "rb") as f:  # from hubd's Hub
            self.assertEqual(f.read(), file_bytes(REPOS["repos"][0]["files"]["sub/dir/tok.json"]))

    # -- where, and whether --
    def test_subfolder(self):
        path = hubd.hf_hub_download("org/public", "tok.json", subfolder="sub/dir",
                                    cache_dir=self.cache)
        self.assertEqual(path, self.snap("sub/dir/tok.json"))
        self.assertEqual(hubd.hf_hub_download("org/public", "config.json", subfolder="",
                                              cache_dir=self.cache), self.snap("config.json"))

    def test_the_hubs_own_clients_read_what_the_arguments_wrote(self):
        """After subfolder, force_download, max_workers and dry_run, the HF
        cache is one huggingface_hub and the real @huggingface/hub read:
        scanCacheDir finds main's commit with its top-level files, each of
        its blob's size, no warning; downloadFileToCacheDir at the commit finds the
        subfolder's file with no request."""
        hubd.hf_hub_download("org/public", "tok.json", subfolder="sub/dir", cache_dir=self.cache)
        hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                             force_download=True)
        hubd.snapshot_download("org/public", cache_dir=self.cache, max_workers=2)
        hubd.snapshot_download("org/public", cache_dir=self.cache, dry_run=True)
        hubd.snapshot_download("org/public", cache_dir=self.cache, force_download=True)
        p = subprocess.run(["node", HUBCLIENT, "scan-cache", "--dir", self.cache],
                           capture_output=True, timeout=120)
        scan = json.loads(p.stdout.decode().strip().splitlines()[-1])
        self.assertTrue(scan["ok"], scan)
        self.assertEqual(scan["warnings"], [])
        (repo,) = scan["repos"]
        (rev,) = repo["revisions"]
        self.assertEqual((rev["commitOid"], rev["refs"]), (MAIN, ["main"]))
        files = next(r for r in REPOS["repos"] if r["id"] == "org/public")["files"]
        # scanCacheDir lists a snapshot's top-level files only
        self.assertEqual({os.path.basename(f["path"]): f["size"] for f in rev["files"]},
                         {k: len(file_bytes(v)) for k, v in files.items() if "/" not in k})
        p = subprocess.run(["node", HUBCLIENT, "cache-file", "--hub-url", "http://127.0.0.1:9",
                            "--repo", "org/public", "--revision", MAIN, "--path",
                            "sub/dir/tok.json", "--dir", self.cache],
                           capture_output=True, timeout=120)
        got = json.loads(p.stdout.decode().strip().splitlines()[-1])
        self.assertTrue(got["ok"], got)
        self.assertEqual(got["requests"], [])
        self.assertEqual(got["files"]["sub/dir/tok.json"]["file"], self.snap("sub/dir/tok.json"))

    def test_force_download_fetches_again(self):
        path = hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache)
        blob = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        os.unlink(blob)  # a stale blob that a plain call would keep
        with open(blob, "wb") as f:
            f.write(b"stale")
        with self.sent() as (lines, _):
            hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache)
        self.assertFalse([x for x in lines if x.startswith("FETCH")])
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"stale")
        hub = self.stub.stats("hub")["requests"]
        with self.sent() as (lines, _):
            hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                                 force_download=True)
        fetches = [x for x in lines if x.startswith("FETCH")]
        self.assertEqual(len(fetches), 1)
        self.assertIn(" refresh=1", fetches[0])
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b'{"model_type": "stub"}\n')
        key = "/org/public/resolve/%s/config.json" % MAIN
        self.assertGreater(self.stub.stats("hub")["requests"].get(key, 0), hub.get(key, 0),
                           "hubd asked the Hub again")
        # every file of a snapshot again
        hubd.snapshot_download("org/public", cache_dir=self.cache)
        with self.sent() as (lines, _):
            hubd.snapshot_download("org/public", cache_dir=self.cache, force_download=True)
        self.assertEqual(len([x for x in lines if x.startswith("FETCH")]), 5)
        # as huggingface_hub: a forced download needs the Hub
        with self.assertRaises(ValueError):
            hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                                 force_download=True, local_files_only=True)
        os.environ["HF_HUB_OFFLINE"] = "1"
        with self.assertRaises(ValueError):
            hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                                 force_download=True)

    def test_local_files_only_asks_nothing(self):
        hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache)
        os.environ["HUBD_SOCKET"] = os.path.join(self.tmp, "no-such.sock")  # no hubd there
        self.assertEqual(hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                                              local_files_only=True), self.snap("config.json"))
        self.assertEqual(hubd.snapshot_download("org/public", cache_dir=self.cache,
                                                local_files_only=True),
                         os.path.dirname(self.snap("config.json")))
        with self.assertRaises(hubd.LocalEntryNotFoundError) as cm:
            hubd.hf_hub_download("org/public", "README.md", cache_dir=self.cache,
                                 local_files_only=True)
        self.assertIn("local_files_only=True", str(cm.exception))
        with self.assertRaises(hubd.LocalEntryNotFoundError):
            hubd.snapshot_download("org/other", cache_dir=self.cache, local_files_only=True)

    # -- the requests --
    def test_headers_reach_the_hub_and_user_agent_does_not(self):
        self.stub.reset()
        hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache,
                             headers={"X-Test-Trace": "t1"}, user_agent="myapp/1.0",
                             library_name="mylib", library_version="2")
        st = self.stub.stats("hub")
        api = [p for p in st["x_headers"] if p.startswith("/api/")]
        res = [p for p in st["x_headers"] if "/resolve/" in p]
        self.assertTrue(api and res, st["x_headers"])
        for p in api + res:
            self.assertIn({"X-Test-Trace": "t1"}, [
                {k: v for k, v in h.items() if k.lower() == "x-test-trace"}
                for h in st["x_headers"][p]], p)
        agents = [a for v in st["agents"].values() for a in v]
        self.assertTrue(agents)
        self.assertFalse([a for a in agents if "myapp" in a or "mylib" in a], agents)
        # headers win over the token, as huggingface_hub's
        path = hubd.hf_hub_download("org/gated", "g.txt", cache_dir=self.cache, token="hf_carol",
                                    headers={"authorization": "Bearer hf_alice"})
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"gated\n")
        with self.assertRaises(hubd.GatedRepoError):
            hubd.hf_hub_download("org/gated", "g.txt", cache_dir=os.path.join(self.tmp, "c2"),
                                 token="hf_carol")

    def test_etag_timeout_bounds_the_listing(self):
        hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache, token="hf_alice")
        self.stub.control("hold", {"user": "alice", "delay": 4, "status": None, "api": True})
        t = time.monotonic()
        path, err = self.quiet(hubd.hf_hub_download, "org/public", "config.json",
                               cache_dir=self.cache, token="hf_alice", etag_timeout=0.5)
        self.assertLess(time.monotonic() - t, 3.5)
        self.assertEqual(path, self.snap("config.json"))
        self.assertIn("etag_timeout", err)
        # HF_HUB_ETAG_TIMEOUT wins over the argument, as huggingface_hub's
        os.environ["HF_HUB_ETAG_TIMEOUT"] = "1"
        t = time.monotonic()
        self.quiet(hubd.snapshot_download, "org/public", cache_dir=self.cache, token="hf_alice",
                   allow_patterns="config.json", etag_timeout=100)
        self.assertLess(time.monotonic() - t, 3.5)
        # not cached: the listing is waited for
        del os.environ["HF_HUB_ETAG_TIMEOUT"]
        path, _ = self.quiet(hubd.hf_hub_download, "org/public", "README.md",
                             cache_dir=self.cache, token="hf_alice", etag_timeout=0.5)
        self.assertEqual(path, self.snap("README.md"))

    def test_dry_run_fetches_and_writes_nothing(self):
        with self.sent() as (lines, _):
            info = hubd.hf_hub_download("org/public", "weights/model.safetensors",
                                        cache_dir=self.cache, dry_run=True)
        self.assertFalse([x for x in lines if x.startswith(("FETCH", "HOLD"))])
        self.assertFalse(os.path.exists(self.cache), "nothing written")
        self.assertIsInstance(info, hubd.DryRunFileInfo)
        self.assertEqual((info.commit_hash, info.file_size, info.filename, info.local_path,
                          info.is_cached, info.will_download),
                         (MAIN, 300 * 1024, "weights/model.safetensors",
                          self.snap("weights/model.safetensors"), False, True))
        hubd.hf_hub_download("org/public", "weights/model.safetensors", cache_dir=self.cache)
        info = hubd.hf_hub_download("org/public", "weights/model.safetensors",
                                    cache_dir=self.cache, dry_run=True)
        self.assertEqual((info.is_cached, info.will_download), (True, False))
        info = hubd.hf_hub_download("org/public", "weights/model.safetensors",
                                    cache_dir=self.cache, dry_run=True, force_download=True)
        self.assertEqual((info.is_cached, info.will_download), (True, True))
        infos = hubd.snapshot_download("org/public", cache_dir=self.cache, dry_run=True,
                                       allow_patterns="weights/*")
        self.assertEqual(sorted((i.filename, i.is_cached, i.will_download) for i in infos),
                         [("weights/model.safetensors", True, False),
                          ("weights/other.safetensors", False, True)])
        self.assertFalse(os.path.exists(self.snap("weights/other.safetensors")))
        with self.assertRaises(hubd.DryRunError) as cm:
            hubd.snapshot_download("org/public", cache_dir=self.cache, dry_run=True,
                                   local_files_only=True)
        self.assertIsInstance(cm.exception, hubd.HubdError)

    def test_max_workers_bounds_the_fetches_in_flight(self):
        with self.sent() as (_, st):
            hubd.snapshot_download("org/public", cache_dir=self.cache, max_workers=1)
        self.assertEqual(st["most"], 1)
        with self.sent() as (_, st):
            hubd.snapshot_download("org/public", cache_dir=os.path.join(self.tmp, "c2"))
        self.assertEqual(st["most"], 5)
        with self.assertRaises(ValueError):
            hubd.snapshot_download("org/public", cache_dir=self.cache, max_workers=0)

    # -- progress --
    def test_tqdm_class_gets_the_bars(self):
        Rec.made = []
        hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache)
        hubd.snapshot_download("org/public", cache_dir=self.cache, tqdm_class=Rec)
        files = REPOS["repos"][0]["files"]
        self.assertEqual(Rec.made[0].kw, {"total": 5, "desc": "Fetching 5 files"})
        self.assertEqual(Rec.made[0].n, 5)
        per_file = {b.kw["desc"]: b for b in Rec.made[1:]}
        self.assertEqual(sorted(per_file), sorted(p for p in files if p != "config.json"))
        for name, b in per_file.items():
            self.assertEqual(b.kw["total"], len(file_bytes(files[name])))
            self.assertEqual(b.n, b.kw["total"])
            self.assertEqual(b.kw["unit"], "B")
        self.assertTrue(all(b.closed for b in Rec.made))
        Rec.made = []
        hubd.hf_hub_download("org/public", "config.json", cache_dir=os.path.join(self.tmp, "c2"),
                             tqdm_class=Rec)
        self.assertEqual([b.kw["desc"] for b in Rec.made], ["config.json"])

    def run_on(self, tty, block_tqdm=True, argv=None, env=None):
        """The child's (or argv's) stderr, written to a pty (tty) or a pipe."""
        env = dict(os.environ, **(env or {}))
        if block_tqdm:
            fake = os.path.join(self.tmp, "no-tqdm")
            os.makedirs(os.path.join(fake, "tqdm"), exist_ok=True)
            with open(os.path.join(fake, "tqdm", "__init__.py"), "w") as f:
                f.write("raise ImportError('tqdm blocked by the test')\n")
            env["PYTHONPATH"] = fake
        argv = argv or [sys.executable, "-c", CHILD, CLIENT,
                        os.path.join(self.tmp, "c-%d-%d" % (tty, block_tqdm))]
        self.stub.control("hold", {"user": "alice", "delay": 1, "status": None})
        if not tty:
            p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            return p.stderr.decode("utf-8", "replace")
        master, slave = pty.openpty()
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        out = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 1)
            if r:
                try:
                    b = os.read(master, 65536)
                except OSError:  # EIO: the child's end is closed
                    break
                if not b:
                    break
                out += b
            elif p.poll() is not None:
                break
        os.close(master)
        p.stdout.read()
        p.stdout.close()
        self.assertEqual(p.wait(timeout=60), 0, out)
        return out.decode("utf-8", "replace")

    def test_python_bars_on_a_terminal_only(self):
        err = self.run_on(tty=True)
        self.assertIn("Fetching 5 files", err)
        for name in ("weights/model.safetensors", "weights/other.safetensors", "README.md"):
            self.assertIn(name, err)
        self.assertIn("[5/5]", err)
        # tqdm's, where it imports (python3-tqdm)
        probe = subprocess.run([sys.executable, "-c", "import tqdm"], capture_output=True)
        if probe.returncode == 0:
            err = self.run_on(tty=True, block_tqdm=False)
            self.assertIn("Fetching 5 files", err)
            self.assertIn("model.safetensors", err)
        for block in (True, False):
            err = self.run_on(tty=False, block_tqdm=block)
            self.assertNotIn("Fetching", err)
            self.assertNotIn("\r", err)
            self.assertNotIn("\033[", err)
            self.assertNotIn("safetensors", err)
        # HF_HUB_DISABLE_PROGRESS_BARS: none on a terminal either
        err = self.run_on(tty=True, env={"HF_HUB_DISABLE_PROGRESS_BARS": "1"})
        self.assertNotIn("Fetching", err)

    def test_hubctl_bars_on_a_terminal_only(self):
        dl = [HUBCTL, "--socket", self.hubd.socket, "hf", "download", "org/public",
              "--token", "hf_alice", "--cache-dir", os.path.join(self.tmp, "hc")]
        import shlex
        self.stub.control("hold", {"user": "alice", "delay": 1, "status": None})
        # script(1) runs it on a pty of its own and copies what it writes
        p = subprocess.run(["script", "-qfec", shlex.join(dl), "/dev/null"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        out = p.stdout.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("Fetching 5 files", out)
        self.assertIn("\n  weights/model.safetensors", out.replace("\r", ""))
        dl[-1] = os.path.join(self.tmp, "hc2")
        err = self.run_on(tty=False, block_tqdm=False, argv=dl)
        self.assertNotIn("Fetching", err)
        self.assertNotIn("\033[", err)
