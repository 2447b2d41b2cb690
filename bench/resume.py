#!/usr/bin/env python3
"""What interruptions cost: bytes the origin serves for one file, relative to
the file's size, when the transfer is cut by the network and when hubd is
killed with SIGKILL. A benchmark, not a test: it prints figures and fails
only when a fetch fails or a digest is wrong.

  bench/resume.py [--size-mib 256] [--cuts 5] [--kills 5] [--kill-rate-mib 64]
                  [--seed N]

Cuts: the fault-injecting origin (tests/origin.py, ?cut=) ends the response
early at random offsets; hubd retries with Range + If-Range. The same file
fetched without cuts, in the same run, is the baseline for the time.
Kills: the file is served at --kill-rate-mib MiB/s; hubd is killed at random
moments (at least one checkpoint in, never right after one), started again,
and the fetch asked again until it completes. Everything runs on loopback
with the binaries in build/ (HUBD_BIN, HUBCTL_BIN override them)."""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HUBD_BIN", os.path.join(ROOT, "build", "daemon", "hubd"))
os.environ.setdefault("HUBCTL_BIN", os.path.join(ROOT, "build", "client", "hubctl"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import HUBCTL, Hubd, Origin, wait_for, write_config, write_random_file  # noqa: E402

MiB = 1024 * 1024


def fetch(hubd, url, digest):
    """hubctl fetch --sha256: (exit status, seconds)."""
    t = time.monotonic()
    p = subprocess.run([HUBCTL, "--socket", hubd.socket, "-q", "fetch", "--sha256", digest, url],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, time.monotonic() - t


def origin_counts(origin):
    """(requests, bytes) of /files/f.bin since the last call: the counts
    are read, then zeroed (cut=N1,... counts requests from the last zeroing)."""
    st = origin.stats()
    urllib.request.urlopen(origin.url("/reset"), timeout=10).read()
    return st["requests"].get("/files/f.bin", 0), st["bytes"].get("/files/f.bin", 0)


def bench_cuts(work, origin, size, ncuts, rnd, digest):
    conf = write_config(os.path.join(work, "cuts.conf"), retries=str(ncuts + 1),
                        retry_delay="20ms")
    cuts = sorted(rnd.randrange(1, size) for _ in range(ncuts))
    rows = []
    for name, query in (("no cuts", ""), ("%d cuts" % ncuts, "?cut=" + ",".join(map(str, cuts)))):
        hubd = Hubd(os.path.join(work, "hub-" + name.replace(" ", "")), config=conf)
        try:
            origin_counts(origin)
            rc, secs = fetch(hubd, origin.url("/files/f.bin" + query), digest)
            reqs, served = origin_counts(origin)
        finally:
            hubd.stop()
        if rc != 0:
            sys.exit("bench: fetch with %s failed (exit %d)" % (name, rc))
        rows.append((name, reqs, served, secs))
    print("cut points:", ", ".join(map(str, cuts)))
    print("%-10s %8s %14s %8s %8s" % ("", "requests", "origin bytes", "x file", "seconds"))
    for name, reqs, served, secs in rows:
        print("%-10s %8d %14d %8.4f %8.2f" % (name, reqs, served, served / size, secs))
    print("time with cuts / without: %.2f" % (rows[1][3] / rows[0][3]))


def bench_kills(work, origin, size, nkills, rate, rnd, digest):
    hubd = Hubd(os.path.join(work, "hub-kills"), config=write_config(os.path.join(work, "k.conf")))
    origin_counts(origin)
    url = origin.url("/files/f.bin?bps=%d" % rate)
    argv = [HUBCTL, "--socket", hubd.socket, "-q", "fetch", "--sha256", digest, url]
    kills = 0
    t = time.monotonic()
    try:
        while True:
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if kills < nkills:
                # Killed some time after a checkpoint: none is lost to luck.
                try:
                    wait_for(lambda: hubd.partials() or p.poll() is not None, 60, "a checkpoint")
                    time.sleep(rnd.uniform(0.05, 1.0))
                except AssertionError:
                    pass
                if p.poll() is None:
                    hubd.kill9()
                    kills += 1
                    p.wait()
                    hubd.start()
                    continue
            _, err = p.communicate()
            if p.returncode != 0:
                sys.exit("bench: fetch after %d kills failed (exit %d): %s"
                         % (kills, p.returncode, err.decode().strip()))
            break
        secs = time.monotonic() - t
        reqs, served = origin_counts(origin)
    finally:
        hubd.stop()
    print("%d kill(s) at %d MiB/s: %d requests, origin served %d bytes = %.4f x file in %.1f s"
          % (kills, rate // MiB, reqs, served, served / size, secs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--cuts", type=int, default=5)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--kill-rate-mib", type=int, default=64)
    ap.add_argument("--seed", type=int, default=None, help="default: random, printed")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    size = a.size_mib * MiB
    for b in (os.environ["HUBD_BIN"], os.environ["HUBCTL_BIN"]):
        if not os.access(b, os.X_OK):
            sys.exit("bench: %s is not built (cmake --build build)" % b)
    work = tempfile.mkdtemp(prefix="hubd-resume-")
    origin = None
    try:
        root = os.path.join(work, "root")
        os.mkdir(root)
        digest = write_random_file(os.path.join(root, "f.bin"), size, seed)
        origin = Origin(root)
        print("hubd resume bench: %d MiB file, seed %d" % (a.size_mib, seed))
        bench_cuts(work, origin, size, a.cuts, rnd, digest)
        bench_kills(work, origin, size, a.kills, a.kill_rate_mib * MiB, rnd, digest)
    finally:
        if origin:
            origin.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
