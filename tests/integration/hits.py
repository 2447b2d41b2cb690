"""What a cache hit costs: FETCHes of cached URLs over a session, one at a
time, each DONE's descriptor received and closed, as the clients do.

Used by test_scale.HitsTest (bounds) and bench/scale.py (figures). As a
program it prints one JSON object:
  hits.py --socket S --url URL [--url URL...] [--count N] [--sessions K]
with K sessions in K processes at once: p50 and p99 in ms (of session 0),
and hits per second per session and in all.
"""

import argparse
import array
import json
import multiprocessing
import os
import socket
import time


class Session:
    def __init__(self, path, timeout=60):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        hello = self.ask(b"HELLO proto=1 client=hits")
        if not hello.startswith(b"HELLO "):
            raise AssertionError("HELLO got %r" % hello)

    def ask(self, line):
        """Sends one line; the next line back (descriptors closed)."""
        self.s.sendall(line + b"\n")
        got, fds = self.line()
        for fd in fds:
            os.close(fd)
        return got

    def line(self):
        """The next line, and the descriptors that came with it."""
        fds = []
        while b"\n" not in self.buf:
            data, anc, _, _ = self.s.recvmsg(65536, socket.CMSG_SPACE(4 * 8))
            if not data:
                raise ConnectionResetError("hubd closed the session")
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(raw[:len(raw) - len(raw) % a.itemsize])
                    fds.extend(a)
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line, fds

    def hit(self, n, url):
        """One FETCH to its DONE; the descriptor is closed. Seconds."""
        t = time.perf_counter()
        self.s.sendall(b"FETCH id=%d url=%s\n" % (n, url.encode()))
        fds = []
        while True:
            line, got = self.line()
            fds += got
            if line.startswith(b"DONE") or line.startswith(b"ERR"):
                break
        took = time.perf_counter() - t
        for fd in fds:
            os.close(fd)
        if not line.startswith(b"DONE") or b"source=hit" not in line or len(fds) != 1:
            raise AssertionError("not a hit with its descriptor: %r, %d fds" % (line, len(fds)))
        return took

    def close(self):
        self.s.close()


def one_session(path, urls, count, start=None, timeout=60):
    s = Session(path, timeout)
    for i in range(min(50, count)):  # warm-up
        s.hit(i, urls[i % len(urls)])
    if start is not None:
        start.wait()
    times = []
    t0 = time.perf_counter()
    for i in range(count):
        times.append(s.hit(i, urls[i % len(urls)]))
    wall = time.perf_counter() - t0
    s.close()
    times.sort()
    return dict(p50_ms=times[len(times) // 2] * 1e3, p99_ms=times[len(times) * 99 // 100] * 1e3,
                per_s=count / wall)


def _worker(path, urls, count, barrier, out):
    try:
        out.put(one_session(path, urls, count, barrier))
    except Exception as e:  # said to the parent, which fails
        out.put(dict(error=repr(e)))
        barrier.abort()


def measure(path, urls, count=2000, sessions=1, timeout=60):
    """p50/p99 of the first session to finish; hits per second per session
    and in all. A hit that takes longer than timeout seconds fails it."""
    if sessions == 1:
        r = one_session(path, urls, count, timeout=timeout)
        r.update(sessions=1, total_per_s=r["per_s"])
        return r
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(sessions), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, urls, count, barrier, out))
             for _ in range(sessions)]
    for p in procs:
        p.start()
    rs = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    bad = [x["error"] for x in rs if "error" in x]
    if bad:
        raise AssertionError("a session failed: %s" % bad[0])
    r = dict(rs[0])
    r.update(sessions=sessions, total_per_s=sum(x["per_s"] for x in rs))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--url", action="append", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--sessions", type=int, default=1)
    a = ap.parse_args()
    print(json.dumps(measure(a.socket, a.url, a.count, a.sessions)))


if __name__ == "__main__":
    main()
