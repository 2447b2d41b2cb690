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
  hit                p50 and p99 ms of hits by digest on one session, and
                     hits/s on one session and over 8 (tests/integration/hits.py)
  hit, C client      the same over 8 sessions from bench/hitload (a C
                     client: the Python one costs about as much CPU per hit
                     as hubd), and hubd's CPU per hit in us
  hit floor          bench/hitload against bench/hitfloor, a server that
                     does only what a hit must (read the line, open and
                     fstat a file, send it, close it): the most this
                     machine allows, on 1 and 8 sessions
  eviction           blobs/s when a reload lowers max_cache_size to a tenth of
                     the cache, and the p99 of one session's hits meanwhile
  small-file miss    4 KiB files from a local nginx, 4 sessions of 32 FETCHes
                     in flight: files/s and hubd's CPU ms per file
  commit floor       bench/commitfloor: one thread doing only what a durable
                     commit must (create, write, syncfs, link, folder fsync,
                     one SQLite transaction per group) for 2,000 files in
                     groups of 4 and of 32: the most this machine allows
Figures come from one run; builds alternate within each row.
"""

import argparse
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
import cachefill  # noqa: E402
import hits  # noqa: E402
import idle_clients  # noqa: E402
import misses  # noqa: E402


digest_of = cachefill.digest_of


def make_cache(d, n):
    """n blobs on disk, and a hubd.db that start-up must rebuild."""
    cachefill.fill(d, n)


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
                s.ask(b"STATS")
                s.close()
                return time.monotonic() - t
            except OSError:
                if time.monotonic() - t > timeout:
                    raise
                time.sleep(0.002)

    def connect(self):
        """A session, after HELLO."""
        return hits.Session(self.sock)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)

    def reload(self, **keys):
        with open(self.conf, "a") as f:
            f.write("".join("%s = %s\n" % kv for kv in keys.items()))
        self.proc.send_signal(1)  # SIGHUP

    def stats(self):
        s = self.connect()
        line = s.ask(b"STATS").decode()
        s.close()
        return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)


def stats_row(d, rounds=300):
    s = d.connect()
    took = {b"STATS": [], b"NOPE": []}
    for _ in range(rounds):
        for verb, times in took.items():
            t = time.perf_counter()
            s.ask(verb)
            times.append(time.perf_counter() - t)
    s.close()
    st, base = (statistics.median(took[v]) * 1e3 for v in (b"STATS", b"NOPE"))
    return st, st / base


def by_digest(ids):
    """FETCH targets that are hits by digest (the rebuilt blobs are
    public): any URL, with the blob's sha256."""
    return ["http://127.0.0.1:9/b%d sha256=%s" % (i, digest_of(i)) for i in ids]


def hit_rows(d, n):
    targets = by_digest(range(0, n, max(1, n // 50)))
    one = hits.measure(d.sock, targets, 3000, 1)
    eight = hits.measure(d.sock, targets, 1500, 8)
    return one, eight


def c_hit_row(d, n, hitload):
    """8 sessions of bench/hitload (built with the checkout that runs the
    benchmark: the client is the same for every build)."""
    targets = by_digest(range(0, n, max(1, n // 50)))
    r = subprocess.run([hitload, d.sock, "8", "2000", str(d.proc.pid)] + targets,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise SystemExit("hitload failed: %s" % r.stderr[-2000:])
    return json.loads(r.stdout)


def floor_row(work, hitload):
    """hitload against bench/hitfloor (beside hitload), 1 and 8 sessions."""
    sock, f = os.path.join(work, "floor.sock"), os.path.join(work, "floor.blob")
    with open(f, "wb") as out:
        out.write(b"hello")
    srv = subprocess.Popen([os.path.join(os.path.dirname(hitload), "hitfloor"), sock, f])
    try:
        while not os.path.exists(sock):
            time.sleep(0.01)
        rows = []
        for k in (1, 8):
            r = subprocess.run([hitload, sock, str(k), "3000", str(srv.pid), "x"],
                               capture_output=True, text=True, timeout=600, check=True)
            rows.append(json.loads(r.stdout))
        return rows
    finally:
        srv.kill()
        srv.wait()


def evict_row(d, n):
    """Lower max_cache_size to a tenth of the cache; blobs/s, and the p99
    of hits on blobs being used meanwhile (the most recent: they stay)."""
    keep = by_digest(range(n - 20, n))
    total = sum(len(b"%d" % i) for i in range(n))
    s = hits.Session(d.sock)
    for i, t in enumerate(keep):  # used last: the eviction keeps them
        s.hit(i, t)
    target = total // 10
    blobs0 = int(d.stats()["cache_blobs"])

    def stats():
        line = s.ask(b"STATS").decode()
        return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)

    # Done when the cache is at the target (how many blobs that takes
    # depends on their sizes and the order of use): the rate is what went
    # meanwhile. Counted from cache_blobs, which changes with cache_bytes at
    # each commit: `evicted` is counted once the run's last batch is back on
    # the loop, and a run done in one batch read 0 here. Asked every 5 ms on
    # the hits' own session, between hits and not timed: from a thread of
    # this process, as before, the poller held the GIL while a hit's answer
    # waited for it (at 1k, where a run makes 80-400 hits, that was the
    # p99: 0.2-2.8 ms against 0.1-1.1 ms so).
    t0 = time.monotonic()
    d.reload(max_cache_size=str(target))
    times, look = [], t0
    while time.monotonic() - t0 < 600:
        now = time.monotonic()
        if now >= look:
            st = stats()
            if int(st["cache_bytes"]) <= target:
                took, gone = now - t0, blobs0 - int(st["cache_blobs"])
                break
            look = now + 0.005
        times.append(s.hit(len(times), keep[len(times) % len(keep)]))
    else:
        raise SystemExit("the eviction did not end in 600 s")
    s.close()
    times.sort()
    p99 = times[len(times) * 99 // 100] * 1e3 if times else 0
    return gone / took, p99


def miss_row(d, port, first, n):
    urls = ["http://127.0.0.1:%s/files/m%d" % (port, i) for i in range(first, first + n)]
    return misses.measure(d.sock, urls, 4, 32, d.proc.pid)


def miss_rows(builds, work, n=2000):
    """Small-file misses from a local nginx, per build (a fresh cache each)."""
    ngx_sh = os.path.join(HERE, "..", "scripts", "nginx-origin.sh")
    root = os.path.join(work, "small")
    os.makedirs(root)
    for i in range(n * len(builds)):
        with open(os.path.join(root, "m%d" % i), "wb") as f:
            f.write(os.urandom(4096))
    port = subprocess.run([ngx_sh, "freeport"], check=True, capture_output=True,
                          text=True).stdout.strip()
    ngx = os.path.join(work, "ngx")
    subprocess.run([ngx_sh, "start", ngx, root, port], check=True, capture_output=True)
    rows = {}
    try:
        for k, (name, build) in enumerate(builds):
            w = os.path.join(work, "miss-" + name)
            os.makedirs(w)
            d = Daemon(build, w, os.path.join(w, "cache"))
            d.start()
            rows[name] = miss_row(d, port, k * n, n)
            d.stop()
    finally:
        subprocess.run([ngx_sh, "stop", ngx], capture_output=True)
    return rows


def commit_floor_rows(work, hitload):
    """bench/commitfloor (beside hitload) in work: groups of 4 and 32 with
    each folder fsync'ed, and of 32 with one syncfs for the names. Each
    one's files stay until the end (work goes): freed here, they would slow
    the next run's creates (see main)."""
    rows = {}
    for g, names in ((4, "fsync"), (32, "fsync"), (32, "syncfs")):
        d = os.path.join(work, "commitfloor-%d-%s" % (g, names))
        r = subprocess.run([os.path.join(os.path.dirname(hitload), "commitfloor"), d, "2000",
                            str(g), names], capture_output=True, text=True, timeout=600,
                           check=True)
        rows[(g, names)] = json.loads(r.stdout)
    return rows


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
    ap.add_argument("--hitload", required=True, help="bench/hitload's path")
    a = ap.parse_args()
    builds = [tuple(b.split("=", 1)) for b in a.build]
    work = tempfile.mkdtemp(prefix="hubd-scale-", dir=a.tmp)
    names = [n for n, _ in builds]
    try:
        one, eight = floor_row(work, a.hitload)
        print("hit floor (bench/hitfloor): %.0f hits/s on 1 session, %.0f on 8; %.0f us of "
              "server CPU per hit" % (one["total_per_s"], eight["total_per_s"],
                                      eight["hubd_cpu_us_per_hit"]), flush=True)
        # Small files first, and their floor: before the caches below are
        # made and removed. On a file system without a journal, ext4's
        # search for a free inode skips every one freed in the last one to
        # six minutes, and those rows free hundreds of thousands: measured
        # after them, a small file cost twice the CPU.
        mrows = miss_rows(builds, work)
        floors = commit_floor_rows(work, a.hitload)
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
                # The rows below are for a daemon in its steady state: the
                # background check of blobs/ after a start (about 20 us a
                # blob here) is let finish first.
                time.sleep(1 + n / 50000)
                one, eight = hit_rows(d, n)
                c8 = c_hit_row(d, n, a.hitload)
                ev, ev_p99 = evict_row(d, n)
                d.stop()
                shutil.rmtree(cache)
                res[name] = dict(first=first, restart=restart, stats=st, ratio=ratio, one=one,
                                 eight=eight, c8=c8, ev=ev, ev_p99=ev_p99)
            shutil.rmtree(src)
            row = lambda label, f: print("%-22s %10d" % (label, n) +
                                         "".join("%16s" % f(res[x]) for x in names), flush=True)
            row("first start (rebuild)", lambda r: "%.0f ms" % (r["first"] * 1e3))
            row("restart -> STATS", lambda r: "%.0f ms" % (r["restart"] * 1e3))
            row("STATS", lambda r: "%.3f ms %.1fx" % (r["stats"], r["ratio"]))
            row("hit p50 / p99", lambda r: "%.3f / %.2f ms" % (r["one"]["p50_ms"],
                                                             r["one"]["p99_ms"]))
            row("hits/s: 1 / 8 sessions",
                lambda r: "%.0f / %.0f" % (r["one"]["per_s"], r["eight"]["total_per_s"]))
            row("hits/s: 8, C client", lambda r: "%.0f" % r["c8"]["total_per_s"])
            row("  hubd CPU per hit", lambda r: "%.0f us" % r["c8"]["hubd_cpu_us_per_hit"])
            row("eviction blobs/s", lambda r: "%.0f" % r["ev"])
            row("  hit p99 meanwhile", lambda r: "%.2f ms" % r["ev_p99"])
            print("  (cache of %d made in %.0f s)" % (n, made), file=sys.stderr)
        print("%-22s %10d" % ("small-file miss", 2000) +
              "".join("%16s" % ("%.0f/s" % mrows[x]["per_s"]) for x in names))
        print("%-22s %10s" % ("  hubd CPU each", "") +
              "".join("%16s" % ("%.2f ms" % mrows[x]["cpu_ms_each"]) for x in names), flush=True)
        for (g, how), r in floors.items():
            print("commit floor (bench/commitfloor), groups of %d, names by %s: %.0f files/s, "
                  "%.2f ms of CPU each" % (g, how, r["per_s"], r["cpu_us_each"] / 1e3),
                  flush=True)
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
