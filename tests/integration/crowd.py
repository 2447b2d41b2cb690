#!/usr/bin/env python3
"""A crowd of slow downloads in flight at once, and hubd's memory meanwhile.

1,000 downloads of a small file from an origin that sends
each connection a few KiB a second must not cost hubd 1,000 full read
buffers. This drives COUNT fetches of distinct URLs (BASE?crowd=N) over a
few sessions of the Unix socket at once, with one process and a selector,
samples hubd's VmRSS every 50 ms until every fetch has its final line, and
checks each DONE against the expected digest.

Used by tests/integration/test_scale.py (a generous bound) and by
bench/bench.sh BENCH_CROWD=1 (the exact figure), or by hand:

    crowd.py --socket SOCK --pid PID --url URL --sha256 HEX [--count N]

prints one JSON object: count, ok, errors (code -> n), peak_rss_kib,
start_rss_kib, wall_s, max_in_flight.
"""

import argparse
import array
import json
import os
import selectors
import socket
import time
from urllib.parse import unquote

PER_SESSION = 50  # under the protocol's 64 waiting FETCHes per session


def vm_kib(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError("no %s for pid %d" % (field, pid))


class _Session:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.setblocking(False)
        self.out = b""
        self.inbuf = b""

    def lines(self):
        """Reads what is there; yields complete lines. DONE lines carry a
        descriptor, closed at once (the crowd only checks the digest)."""
        fds = array.array("i")
        try:
            data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
        except BlockingIOError:
            return []
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        for fd in fds:
            os.close(fd)
        if not data:
            raise ConnectionError("hubd closed a session")
        self.inbuf += data
        *whole, self.inbuf = self.inbuf.split(b"\n")
        return whole


def _fields(line):
    parts = line.decode().rstrip("\r").split(" ")
    return parts[0], dict(p.split("=", 1) for p in parts[1:] if "=" in p)


def run(sock_path, pid, url, sha256, count, timeout=120.0):
    sessions = [_Session(sock_path) for _ in range((count + PER_SESSION - 1) // PER_SESSION)]
    sel = selectors.DefaultSelector()
    for i, s in enumerate(sessions):
        ids = range(i * PER_SESSION, min(count, (i + 1) * PER_SESSION))
        s.out = b"".join(b"FETCH id=%d url=%s?crowd=%d\n" % (n, url.encode(), n) for n in ids)
        sel.register(s.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, s)
    start_rss = vm_kib(pid)
    peak, ok, errors, started, finished = start_rss, 0, {}, set(), 0
    max_in_flight = 0
    t0 = time.monotonic()
    next_sample = t0
    while finished < count:
        now = time.monotonic()
        if now - t0 > timeout:
            raise TimeoutError("%d of %d fetches finished in %.0f s" % (finished, count, timeout))
        if now >= next_sample:
            peak = max(peak, vm_kib(pid))
            next_sample = now + 0.05
        for key, events in sel.select(timeout=0.05):
            s = key.data
            if events & selectors.EVENT_WRITE and s.out:
                s.out = s.out[s.sock.send(s.out):]
                if not s.out:
                    sel.modify(s.sock, selectors.EVENT_READ, s)
            if events & selectors.EVENT_READ:
                for line in s.lines():
                    verb, f = _fields(line)
                    if verb in ("QUEUED", "ATTACHED"):
                        started.add(f["id"])
                        max_in_flight = max(max_in_flight, len(started) - finished)
                    elif verb == "DONE":
                        finished += 1
                        if f.get("sha256") == sha256:
                            ok += 1
                        else:
                            errors["wrong_digest"] = errors.get("wrong_digest", 0) + 1
                    elif verb == "ERR":
                        finished += 1
                        code = f.get("code", "?")
                        errors[code] = errors.get(code, 0) + 1
                        if len(errors) == 1 and errors[code] == 1:
                            errors["first_message"] = unquote(f.get("msg", ""))
    peak = max(peak, vm_kib(pid, "VmHWM"))
    for s in sessions:
        s.sock.close()
    return {
        "count": count,
        "ok": ok,
        "errors": errors,
        "start_rss_kib": start_rss,
        "peak_rss_kib": peak,
        "wall_s": round(time.monotonic() - t0, 3),
        "max_in_flight": max_in_flight,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--pid", type=int, required=True, help="hubd's pid, for its VmRSS")
    ap.add_argument("--url", required=True, help="the file; each fetch adds ?crowd=N")
    ap.add_argument("--sha256", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    print(json.dumps(run(a.socket, a.pid, a.url, a.sha256, a.count, a.timeout)))


if __name__ == "__main__":
    main()
