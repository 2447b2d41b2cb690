"""One node of fleet.py's reference BitTorrent swarm (Debian's
python3-libtorrent), run inside the node's namespace; or, with --make, the
publisher's step that writes the .torrent of the files.

  torrent_node.py --make DIR OUT TRACKER_URL   write OUT for DIR's files
                  (v1 only: the tracker's whitelist holds SHA-1 info-hashes)
                  and print its info-hash in hex
  torrent_node.py --torrent T --save DIR --listen IP [--fetch BASE_URL]
                  [--sha256 NAME=HEX ...]

A node prints one JSON line per event on stdout: "ready" once its session
listens, then waits for a line "go" on stdin (so that every node starts at
once, and the import and session set-up are not timed); "fetched" (the
seed only: the files came from the origin over plain HTTP and match their
SHA-256), then "done" once it has every file with the SHA-256 checked on
disk. It goes on seeding until stdin closes or SIGTERM comes. Times are
time.monotonic(), one clock for every process on the machine.

The session is plain libtorrent with what would reach outside the cluster
turned off (DHT, local peer discovery, UPnP, NAT-PMP) and TCP only: uTP's
LEDBAT backs off at the delay the tbf queues add, which would measure the
queue setting more than the swarm.
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import threading
import time
import urllib.request

import libtorrent as lt


def emit(event, **kw):
    kw["event"] = event
    kw["t"] = time.monotonic()
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def make(src, out, tracker):
    fs = lt.file_storage()
    lt.add_files(fs, src)
    ct = lt.create_torrent(fs, 0, lt.create_torrent.v1_only)
    ct.add_tracker(tracker)
    lt.set_piece_hashes(ct, os.path.dirname(os.path.abspath(src)))
    with open(out, "wb") as f:
        f.write(lt.bencode(ct.generate()))
    print(str(lt.torrent_info(out).info_hashes().v1))


def fetch(base, ti, save, digests):
    """The seed's download: each file of the torrent from base + its path
    inside the torrent, checked against its SHA-256."""
    fs = ti.files()
    for i in range(fs.num_files()):
        if fs.file_flags(i) & lt.file_storage.flag_pad_file:
            continue
        rel = fs.file_path(i)  # torrent name / file name
        path = os.path.join(save, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        h = hashlib.sha256()
        with urllib.request.urlopen(base + "/" + os.path.basename(rel), timeout=600) as r, \
                open(path, "wb") as f:
            while True:
                b = r.read(1 << 18)
                if not b:
                    break
                h.update(b)
                f.write(b)
        want = digests.get(os.path.basename(rel))
        if want and h.hexdigest() != want:
            raise SystemExit("%s: SHA-256 %s, expected %s" % (rel, h.hexdigest(), want))


def verify(ti, save, digests):
    fs = ti.files()
    for i in range(fs.num_files()):
        if fs.file_flags(i) & lt.file_storage.flag_pad_file:
            continue
        rel = fs.file_path(i)
        want = digests.get(os.path.basename(rel))
        if want and sha256_file(os.path.join(save, rel)) != want:
            return False
    return True


def node(args):
    digests = dict(d.split("=", 1) for d in args.sha256)
    ti = lt.torrent_info(args.torrent)
    settings = {
        "listen_interfaces": "%s:6881" % args.listen,
        "enable_dht": False,
        "enable_lsd": False,
        "enable_upnp": False,
        "enable_natpmp": False,
        "enable_outgoing_utp": False,
        "enable_incoming_utp": False,
        "alert_mask": lt.alert_category.error,
    }
    ses = lt.session(settings)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    emit("ready")
    line = sys.stdin.readline()
    if line.strip() != "go":
        return 0
    # stdin closing later is the other way to end.
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    p = lt.add_torrent_params()
    p.ti = ti
    p.save_path = args.save
    if args.fetch:
        fetch(args.fetch, ti, args.save, digests)
        emit("fetched")
        # The files are checked already: no hashing pass before seeding.
        p.flags |= lt.torrent_flags.seed_mode
    h = ses.add_torrent(p)
    done = False
    while not stop.is_set():
        for a in ses.pop_alerts():
            sys.stderr.write("%s\n" % a.message())
        if not done and h.status().is_seeding:
            # Written through libtorrent's disk threads: flush before reading.
            h.flush_cache()
            done = True
            emit("done", ok=verify(ti, args.save, digests))
        stop.wait(0.05)
    del ses
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make", nargs=3, metavar=("DIR", "OUT", "TRACKER_URL"))
    ap.add_argument("--torrent")
    ap.add_argument("--save")
    ap.add_argument("--listen")
    ap.add_argument("--fetch", help="the origin's base URL: this node is the seed")
    ap.add_argument("--sha256", action="append", default=[], metavar="NAME=HEX")
    args = ap.parse_args()
    if args.make:
        make(*args.make)
        return 0
    if not (args.torrent and args.save and args.listen):
        ap.error("--torrent, --save and --listen are needed")
    return node(args)


if __name__ == "__main__":
    sys.exit(main())
