"""What a small-file miss costs: K sessions, each FETCHing its share of
distinct URLs with up to `window` FETCHes in flight, every DONE's
descriptor received and closed; files per second, and hubd's CPU per file
(from /proc/PID/stat) when its pid is given.

Used by test_scale.GroupCommitTest and bench/scale.py.
"""

import multiprocessing
import os
import time

from hits import Session


def _fetch_all(path, urls, window, out):
    try:
        s = Session(path)
        sent = done = 0
        while done < len(urls):
            while sent < len(urls) and sent - done < window:
                s.s.sendall(b"FETCH id=%d url=%s\n" % (sent, urls[sent].encode()))
                sent += 1
            line, fds = s.line()
            for fd in fds:
                os.close(fd)
            if line.startswith(b"ERR"):
                raise AssertionError(line.decode())
            if line.startswith(b"DONE"):
                done += 1
        s.close()
        out.put(dict(ok=done))
    except Exception as e:  # said to the parent, which fails
        out.put(dict(error=repr(e)))


def cpu_s(pid):
    """user + system seconds of a process."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(path, urls, sessions=4, window=32, pid=None):
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    shares = [urls[i::sessions] for i in range(sessions)]
    cpu0 = cpu_s(pid) if pid else 0
    t = time.monotonic()
    procs = [ctx.Process(target=_fetch_all, args=(path, share, window, out)) for share in shares]
    for p in procs:
        p.start()
    rs = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    wall = time.monotonic() - t
    bad = [r["error"] for r in rs if "error" in r]
    if bad:
        raise AssertionError("a session failed: %s" % bad[0])
    r = dict(files=len(urls), wall_s=wall, per_s=len(urls) / wall)
    if pid:
        r["cpu_ms_each"] = (cpu_s(pid) - cpu0) * 1e3 / len(urls)
    return r
