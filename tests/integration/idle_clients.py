"""What idle clients cost hubd: VmRSS per open session and per kept-alive
HTTP front connection, and what is left once they have gone.

Used by test_scale.IdleClientsTest (bounds) and bench/scale.sh (figures).
Sessions say HELLO, read the answer, and stay open. Front connections each
get one whole answer (a hit of `target`) and stay open; as the front admits
64 connections per uid, they are spread over child processes that each run
as another uid (root only; else all come from this uid, at most 64).

Run as a program, it prints one JSON object:
  idle_clients.py --pid P --socket S [--sessions N] [--front PORT --target T --conns M]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from hits import Session

PER_UID = 64  # HTTPD_MAX_CONNS_PER_UID
KiB = 1024

# A child of one uid: opens n connections, reads one answer on each, says
# "ready", and holds them until its stdin closes.
CHILD = r"""
import socket, sys
port, n, target = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
req = ("GET /%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (target, port)).encode()
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("the front closed before answering")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    if b" 200 " not in lines[0] + b" ":
        sys.exit("the front answered %r" % lines[0])
    length = [int(l.split(b":", 1)[1]) for l in lines if l.lower().startswith(b"content-length:")]
    while len(body) < length[0]:
        body += s.recv(65536)
    held.append(s)
print("ready", flush=True)
sys.stdin.read()
"""


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def settle(pid, seconds=0.5):
    """VmRSS once it has stopped moving (at most `seconds` of waiting)."""
    time.sleep(seconds)
    return rss_kib(pid)


def more_fds(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n), hard))


def open_sessions(path, n):
    return [Session(path, 30) for _ in range(n)]  # each after HELLO's answer


def open_front(port, target, n):
    """Children holding n front connections, PER_UID a uid."""
    uids = [None]
    if os.geteuid() == 0:
        uids = list(range(1, 1 + (n + PER_UID - 1) // PER_UID))
    elif n > PER_UID:
        n = PER_UID
    kids = []
    left = n
    for uid in uids:
        k = min(left, PER_UID)
        left -= k
        pre = (lambda u=uid: os.setuid(u)) if uid is not None else None
        # Debian's python3 (install-deps.sh): another uid may run it.
        py = "/usr/bin/python3" if uid is not None else sys.executable
        p = subprocess.Popen([py, "-c", CHILD, str(port), str(k), target],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=pre)
        kids.append(p)
        if p.stdout.readline().strip() != b"ready":
            p.kill()
            raise AssertionError("a front client (uid %s) failed: %d" % (uid, p.wait()))
        if left == 0:
            break
    return kids, n


def close_front(kids):
    for p in kids:
        p.stdin.close()
    for p in kids:
        p.wait(timeout=30)
        p.stdout.close()


def measure(pid, sock, sessions=1000, front_port=None, target=None, conns=512):
    """The figures, in KiB: per client while open, and what stayed after."""
    more_fds(sessions + 256)
    out = {}
    # The front first: the sessions' freed memory would be reused by it.
    if front_port:
        kids, n = open_front(front_port, target, 8)
        close_front(kids)
        base = settle(pid)
        kids, n = open_front(front_port, target, conns)
        rss = settle(pid)
        close_front(kids)
        after = settle(pid, 2.0)
        out["front"] = dict(n=n, base_kib=base, open_kib=rss, after_kib=after,
                            per_client_kib=round((rss - base) / n, 2), left_kib=after - base)
    if not sessions:
        return out
    # Warm-up: the allocator's and the loop's first growth is not the
    # clients' cost.
    for s in open_sessions(sock, 32):
        s.close()
    base = settle(pid)
    held = open_sessions(sock, sessions)
    rss = settle(pid)
    for s in held:
        s.close()
    after = settle(pid, 2.0)  # a trim is at most a second away (memtrim.h)
    out["sessions"] = dict(n=sessions, base_kib=base, open_kib=rss, after_kib=after,
                           per_client_kib=round((rss - base) / sessions, 2),
                           left_kib=after - base)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--front", type=int, help="the front's port")
    ap.add_argument("--target", help="what each front connection GETs (a hit), without '/'")
    ap.add_argument("--conns", type=int, default=512)
    a = ap.parse_args()
    print(json.dumps(measure(a.pid, a.socket, a.sessions, a.front, a.target, a.conns)))


if __name__ == "__main__":
    main()
