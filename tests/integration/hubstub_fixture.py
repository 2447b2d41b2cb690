"""Runs tests/hubstub.py (the stand-in Hub and its CDN) for a test.

    stub = HubStub(workdir, {"repos": [...], "tokens": {...}}, page_size=2)
    stub.hub_url                 # http://127.0.0.1:P, what HF_ENDPOINT / hubUrl take
    stub.resolve_url("org/name", "config.json")
    stub.stats("cdn")["requests"]
    stub.corrupt(sha256, "flip"); stub.corrupt(sha256, None)
    stub.stop()                  # by pid

The stub is stopped by pid; workdir is the caller's (removed with its temp dir).
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import urllib.request

from harness import Hubd, free_port, stop_pid, wait_for, write_config

HUBSTUB_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hubstub.py")


def lfs_bytes(size, seed=0):
    """The bytes the stub serves for {"lfs": {"size": size, "seed": seed}}."""
    return random.Random(seed).randbytes(size)


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def file_bytes(spec):
    """The bytes of one file of a repo description."""
    if "lfs" in spec:
        return lfs_bytes(spec["lfs"]["size"], spec["lfs"].get("seed", 0))
    if "text" in spec:
        return spec["text"].encode()
    import base64
    return base64.b64decode(spec["b64"])


def clear_env(case, names):
    """Takes names out of os.environ for the test case's run, and puts each
    back as it was (set or not) when the case is cleaned up."""
    saved = {k: os.environ.get(k) for k in names}

    def restore():
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    case.addCleanup(restore)
    for k in names:
        os.environ.pop(k, None)


def start_front(case, stub):
    """Restarts case.hubd (a HubTestCase's) with the HTTP front on a free
    loopback port and hf_upstream at stub; returns the port."""
    case.hubd.stop()
    port = free_port()
    conf = write_config(os.path.join(case.tmp, "hf.conf"), http_listen="127.0.0.1:%d" % port,
                        hf_upstream=stub.hub_url)
    case.hubd = Hubd(os.path.join(case.tmp, "hub"), config=conf)
    return port


class HubStub:
    def __init__(self, workdir, description, page_size=None, verbose=False):
        os.makedirs(workdir, exist_ok=True)
        self.description = description
        self.repos_file = os.path.join(workdir, "hubstub-repos.json")
        with open(self.repos_file, "w") as f:
            json.dump(description, f)
        self.port_file = os.path.join(workdir, "hubstub.ports")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        args = [sys.executable, HUBSTUB_PY, "--repos", self.repos_file, "--port-file", self.port_file]
        if page_size:
            args += ["--page-size", str(page_size)]
        self.log_path = os.path.join(workdir, "hubstub.log")
        self.log = open(self.log_path, "ab")
        if verbose:
            args.append("--verbose")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        wait_for(lambda: os.path.exists(self.port_file) or self.proc.poll() is not None,
                 what="the hub stub to listen")
        if self.proc.poll() is not None:
            raise RuntimeError("hubstub exited with %d: %s" % (self.proc.returncode, self.read_log()))
        with open(self.port_file) as f:
            ports = json.load(f)
        self.hub_port, self.cdn_port = ports["hub"], ports["cdn"]
        self.hub_url = "http://127.0.0.1:%d" % self.hub_port
        self.cdn_url = "http://127.0.0.1:%d" % self.cdn_port

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def repo(self, repo_id, repo_type="model"):
        for r in self.description["repos"]:
            if r["id"] == repo_id and r.get("type", "model") == repo_type:
                return r
        raise KeyError(repo_id)

    def file_bytes(self, repo_id, path, repo_type="model"):
        return file_bytes(self.repo(repo_id, repo_type)["files"][path])

    def resolve_url(self, repo_id, path, revision="main", repo_type="model"):
        prefix = "" if repo_type == "model" else repo_type + "s/"
        return "%s/%s%s/resolve/%s/%s" % (self.hub_url, prefix, repo_id, revision, path)

    def _base(self, side):
        return self.hub_url if side == "hub" else self.cdn_url

    def stats(self, side="hub"):
        with urllib.request.urlopen(self._base(side) + "/stats", timeout=10) as r:
            return json.load(r)

    def reset(self):
        for side in ("hub", "cdn"):
            urllib.request.urlopen(self._base(side) + "/reset", timeout=10).close()

    def corrupt(self, oid, mode):
        """mode "flip" (wrong bytes, same length), "short" (cut), None (off),
        for the file whose sha256 (LFS) or git blob sha1 (small) is oid."""
        req = urllib.request.Request(self.hub_url + "/control/corrupt", method="POST",
                                     data=json.dumps({"oid": oid, "mode": mode}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).close()

    def control(self, what, obj):
        """POST /control/<what> (hubstub.py: hold, hostile, corrupt)."""
        req = urllib.request.Request(self.hub_url + "/control/" + what, method="POST",
                                     data=json.dumps(obj).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).close()

    def stop(self):
        rc = stop_pid(self.proc)
        if not self.log.closed:
            self.log.close()
        return rc
