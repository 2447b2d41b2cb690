"""The scale benchmark's driver (bench/scale.sh runs it): what an operation
costs hubd as its cache grows, one build beside another in one run.

For each N, a cache of N blobs is made once (N small files under blobs/ and
a hubd.db that is not a database: hubd's start-up rebuild records them),
and each build's hubd runs on a copy of it. Rows:
  restart -> STATS   ms from starting hubd on a recorded cache until a
                     STATS is answered (the first start, which rebuilds, is
                     not counted)
  STATS              median ms of 300 STATS, and the ratio to an ERR's round
                     trip asked in turns (the machine's noise falls on both)
  idle session       KiB of RSS per idle session (1,000, after HELLO), and
                     KiB left once they closed
  idle front conn    the same for kept-alive HTTP front connections (512)
Figures come from one run; builds alternate within each row.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import idle_clients  # noqa: E402


def make_cache(d, n):
    """n blobs on disk, and a hubd.db that start-up must rebuild."""
    os.makedirs(os.path.join(d, "blobs"))
    for i in range(n):
        data = b"%d" % i
        h = hashlib.sha256(data).hexdigest()
        sub = os.path.join(d, "blobs", h[:2])
        if not os.path.isdir(sub):
            os.mkdir(sub, 0o755)
        p = os.path.join(sub, h)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o444)
    with open(os.path.join(d, "hubd.db"), "wb") as f:
        f.write(b"no database at all" * 512)


class Daemon:
    def __init__(self, build, work, cache, http_port=None):
        self.hubd = os.path.join(build, "daemon", "hubd")
        self.hubctl = os.path.join(build, "client", "hubctl")
        self.work, self.cache = work, cache
        self.sock = os.path.join(work, "hubd.sock")
        self.conf = os.path.join(work, "hubd.conf")
        with open(self.conf, "w") as f:
            f.write("[hubd]\nsocket_mode = 0666\nmin_free_space = 0\n")
            if http_port:
                f.write("http_listen = 127.0.0.1:%d\n" % http_port)
        self.proc = None

    def start(self, timeout=600):
        """Starts hubd; the seconds until a STATS is answered."""
        t = time.monotonic()
        self.proc = subprocess.Popen(
            [self.hubd, "--socket", self.sock, "--cache-dir", self.cache, "--config", self.conf,
             "--log-level", "warning"], stderr=open(os.path.join(self.work, "hubd.log"), "ab"))
        while True:
            if self.proc.poll() is not None:
                with open(os.path.join(self.work, "hubd.log")) as f:
                    raise SystemExit("hubd exited with %d:\n%s" % (self.proc.returncode,
                                                                   f.read()[-2000:]))
            try:
                s = self.connect()
                ask(s, b"STATS")
                s.close()
                return time.monotonic() - t
            except OSError:
                if time.monotonic() - t > timeout:
                    raise
                time.sleep(0.002)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        s.connect(self.sock)
        return s

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def ask(s, line):
    s.sendall(line + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionResetError("hubd closed the session")
        got += chunk
    return got


def stats_row(d, rounds=300):
    s = d.connect()
    took = {b"STATS": [], b"NOPE": []}
    for _ in range(rounds):
        for verb, times in took.items():
            t = time.perf_counter()
            ask(s, verb)
            times.append(time.perf_counter() - t)
    s.close()
    st, base = (statistics.median(took[v]) * 1e3 for v in (b"STATS", b"NOPE"))
    return st, st / base


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def idle_rows(builds, work):
    """Idle sessions and front connections, per build."""
    root = os.path.join(work, "origin")
    os.makedirs(root)
    with open(os.path.join(root, "hit"), "wb") as f:
        f.write(os.urandom(1000))
    oport = free_port()
    origin = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                               str(oport), "--directory", root],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.chmod(work, 0o755)
    rows = {}
    try:
        for name, build in builds:
            # Each kind on a daemon of its own: the memory one kind's
            # clients leave would be reused by the other's.
            rows[name] = {}
            for kind in ("front", "sessions"):
                w = os.path.join(work, "idle-%s-%s" % (name, kind))
                os.makedirs(w)
                port = free_port()
                d = Daemon(build, w, os.path.join(w, "cache"), http_port=port)
                d.start()
                url = "http://127.0.0.1:%d/hit" % oport
                for _ in range(100):
                    if subprocess.run([d.hubctl, "--socket", d.sock, "fetch", url],
                                      capture_output=True).returncode == 0:
                        break
                    time.sleep(0.05)  # the origin is starting
                if kind == "front":
                    got = idle_clients.measure(d.proc.pid, d.sock, 0, port, url, 512)
                else:
                    got = idle_clients.measure(d.proc.pid, d.sock, 1000)
                rows[name][kind] = got[kind]
                d.stop()
    finally:
        origin.kill()
        origin.wait()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", required=True, help="NAME=DIR, in order")
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--tmp", default=None)
    a = ap.parse_args()
    builds = [tuple(b.split("=", 1)) for b in a.build]
    work = tempfile.mkdtemp(prefix="hubd-scale-", dir=a.tmp)
    names = [n for n, _ in builds]
    try:
        print("%-22s %10s" % ("row", "N") + "".join("%16s" % n for n in names))
        for n in [int(x) for x in a.sizes.split(",")]:
            src = os.path.join(work, "cache-%d" % n)
            t = time.monotonic()
            make_cache(src, n)
            made = time.monotonic() - t
            res = {}
            for name, build in builds:
                w = os.path.join(work, "%s-%d" % (name, n))
                os.makedirs(w)
                cache = os.path.join(w, "cache")
                shutil.copytree(src, cache)
                d = Daemon(build, w, cache)
                first = d.start()
                d.stop()
                restart = d.start()
                st, ratio = stats_row(d)
                d.stop()
                shutil.rmtree(cache)
                res[name] = dict(first=first, restart=restart, stats=st, ratio=ratio)
            shutil.rmtree(src)
            row = lambda label, f: print("%-22s %10d" % (label, n) +
                                         "".join("%16s" % f(res[x]) for x in names), flush=True)
            row("first start (rebuild)", lambda r: "%.0f ms" % (r["first"] * 1e3))
            row("restart -> STATS", lambda r: "%.0f ms" % (r["restart"] * 1e3))
            row("STATS", lambda r: "%.3f ms %.1fx" % (r["stats"], r["ratio"]))
            print("  (cache of %d made in %.0f s)" % (n, made), file=sys.stderr)
        rows = idle_rows(builds, work)
        for kind, label in (("sessions", "idle session"), ("front", "idle front conn")):
            print("%-22s %10d" % (label, rows[names[0]][kind]["n"]) +
                  "".join("%16s" % ("%.1f KiB" % rows[x][kind]["per_client_kib"]) for x in names))
            print("%-22s %10s" % ("  left after close", "") +
                  "".join("%16s" % ("%d KiB" % rows[x][kind]["left_kib"]) for x in names))
        print(json.dumps(rows), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
