"""The GC benchmark's driver (bench/gc.sh runs it): how long `hubctl gc`
takes to empty a cache of N blobs, one build beside another in one run.

A cache of N small blobs is made once (tests/integration/cachefill.py, as
bench/scale.py does; or of --blob-size bytes each), and each run of each build gets a copy: hubd
rebuilds its database at the first start, is restarted (the state a GC
meets), rests while the start-up's check of blobs/ runs, writes back the
copy's dirty pages (sync), then
`hubctl gc --max-size 0` is timed (wall, the client's whole command) with
hubd's CPU over the same span (user+system, from /proc). Builds alternate
within each run, so the machine's noise falls on both alike.
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """User+system seconds of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def make_cache(d, n, size):
    """n blobs of size bytes each (0: cachefill's few bytes), and a
    hubd.db that start-up must rebuild (it records what blobs/ holds)."""
    if not size:
        scale.make_cache(d, n)
        return
    scale.make_cache(d, 0)  # the folders and the database to rebuild
    for i in range(n):
        data = (b"%d." % i) * (size // len(b"%d." % i) + 1)
        data = data[:size]
        h = hashlib.sha256(data).hexdigest()
        sub = os.path.join(d, "blobs", h[:2])
        os.makedirs(sub, 0o755, exist_ok=True)
        p = os.path.join(sub, h)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o444)


def one_gc(build, work, src, n):
    """Seconds of `hubctl gc --max-size 0` on a fresh copy, hubd's CPU
    seconds meanwhile, and what gc said."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cache = os.path.join(work, "cache")
    shutil.copytree(src, cache)
    d = scale.Daemon(build, work, cache)
    d.start()
    d.stop()
    d.start()
    time.sleep(1 + n / 50000)  # the start-up's check of blobs/ (scale.py)
    # The copy's dirty pages written back now: ext4 (data=ordered) would
    # write them at the GC's first commit, and time the copy.
    os.sync()
    blobs = int(d.stats()["cache_blobs"])
    if blobs != n:
        raise SystemExit("%s: %d blobs recorded, not %d" % (build, blobs, n))
    c0 = cpu_s(d.proc.pid)
    t = time.monotonic()
    p = subprocess.run([d.hubctl, "--socket", d.sock, "gc", "--max-size", "0", "--json"],
                       capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t
    cpu = cpu_s(d.proc.pid) - c0
    if p.returncode:
        raise SystemExit("%s: gc failed: %s%s" % (build, p.stdout, p.stderr))
    res = json.loads(p.stdout)["result"]
    left = int(d.stats()["cache_blobs"])
    d.stop()
    shutil.rmtree(work)
    if res["evicted"] != n or left:
        raise SystemExit("%s: gc evicted %d of %d, %d left" % (build, res["evicted"], n, left))
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", required=True, help="NAME=DIR, in order")
    ap.add_argument("--blobs", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--blob-size", type=int, default=0, help="bytes a blob (0: a few)")
    ap.add_argument("--tmp", default=None)
    a = ap.parse_args()
    builds = [tuple(b.split("=", 1)) for b in a.build]
    work = tempfile.mkdtemp(prefix="hubd-gc-", dir=a.tmp)
    try:
        src = os.path.join(work, "cache-src")
        make_cache(src, a.blobs, a.blob_size)
        took = {name: [] for name, _ in builds}
        for run in range(a.runs):
            for name, build in builds:
                wall, cpu = one_gc(build, os.path.join(work, name), src, a.blobs)
                took[name].append((wall, cpu))
                print("  run %d/%d  %-10s gc of %d blobs: %.3f s, hubd cpu %.3f s"
                      % (run + 1, a.runs, name, a.blobs, wall, cpu), flush=True)
        print("%-10s %8s %12s %12s %14s" % ("build", "runs", "median s", "max s", "median cpu s"))
        for name, _ in builds:
            walls = [w for w, _ in took[name]]
            cpus = [c for _, c in took[name]]
            print("%-10s %8d %12.3f %12.3f %14.3f" % (name, len(walls), statistics.median(walls),
                                                     max(walls), statistics.median(cpus)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
