"""The cluster swarm against hostile peers (docs/SECURITY.md, "The cluster
swarm"): three hubd nodes on loopback addresses of their own (127.0.0.51,
.52, .53), one cluster CA, one origin, and a hostile process beside them.

The hostile peers are Debian's libtorrent for Python (python3-libtorrent,
imported by /usr/bin/python3: this very file run as `peer`, see
peer_main) holding a certificate of the cluster's CA (a member gone bad),
of another CA (a stranger) or an expired one; and raw TLS clients of the
metadata port. Each test checks that the honest nodes still get the file
whole (its SHA-256), that the origin sent it once where that applies, and
that the daemons keep serving: wrong pieces get their sender banned; a
peer that claims every piece and sends none, or one that reads at a drip,
holds nothing up; floods of connections, bad lines and asks are capped;
strangers, an expired member and a tracker naming non-members get no byte.
"""
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (SLOWED, Hubd, Origin, free_port, stop_pid, wait_for,  # noqa: E402
                     write_config, write_random_file)
import swarm_fixture  # noqa: E402  (SwarmCase is not bound here: unittest would run it)
from swarm_fixture import HAVE_FLEET, make_ca, make_node, rendezvous, two_ports  # noqa: E402

THIS = os.path.abspath(__file__)
LT_PYTHON = "/usr/bin/python3"  # Debian's, where python3-libtorrent is
HAVE_LT_PYTHON = HAVE_FLEET and os.path.exists(LT_PYTHON) and subprocess.run(
    [LT_PYTHON, "-c", "import libtorrent"], stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL).returncode == 0
OPENTRACKER = shutil.which("opentracker") or "/usr/sbin/opentracker"
NO_LT_PYTHON = ("the hostile peers are Debian's python3-libtorrent under %s, which is not "
                "installed (scripts/install-deps.sh)" % LT_PYTHON)

CERTS = None


# ---- the hostile peer: libtorrent under /usr/bin/python3 ------------------

def peer_main(argv):
    """Libtorrent sessions with one SSL torrent each, driven by the test.

    --sessions N: N sessions, listening on consecutive addresses from
    --listen (one peer each, as the nodes take one connection per
    address), saving into --save/0, /1, ... (N > 1). It prints one JSON
    line per event on stdout: "ready" once listening, then "stats" every
    0.2 s (payload bytes down and up summed, peers connected now and at
    most, how many sessions have a seed among them, the first torrent's
    state) and the alerts a test looks at
    ("ban", "hash_failed", "disconnect" and "peer_error" with libtorrent's
    words, "tracker" with the number of peers a tracker named). It ends when stdin closes
    or SIGTERM comes."""
    import argparse
    import ipaddress
    import libtorrent as lt

    ap = argparse.ArgumentParser(prog="test_swarm_hostile.py peer")
    ap.add_argument("--listen", required=True, help="IP to listen on (SSL port: --port)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--dh", required=True)
    ap.add_argument("--torrent", required=True)
    ap.add_argument("--save", required=True, help="the folder of the torrent's file")
    ap.add_argument("--up-limit", type=int, default=0, help="bytes/s this torrent sends")
    ap.add_argument("--down-limit", type=int, default=0, help="bytes/s this torrent reads")
    ap.add_argument("--connect", action="append", default=[], help="ip:port, asked again and again")
    ap.add_argument("--tracker", help="an announce URL")
    args = ap.parse_args(argv)

    def emit(event, **kw):
        kw["event"] = event
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    ti = lt.torrent_info(args.torrent)
    torrents = []
    for k in range(args.sessions):
        ip = str(ipaddress.ip_address(args.listen) + k)
        ses = lt.session({
            "listen_interfaces": "%s:%ds" % (ip, args.port),
            "outgoing_interfaces": ip,
            "enable_dht": False, "enable_lsd": False, "enable_upnp": False,
            "enable_natpmp": False, "enable_outgoing_utp": False, "enable_incoming_utp": False,
            "max_retry_port_bind": 0,
            "alert_mask": (lt.alert_category.error | lt.alert_category.peer |
                           lt.alert_category.status | lt.alert_category.tracker |
                           lt.alert_category.connect),
        })
        p = lt.add_torrent_params()
        p.ti = ti
        p.save_path = args.save if args.sessions == 1 else os.path.join(args.save, str(k))
        p.flags = (p.flags & ~lt.torrent_flags.auto_managed) | lt.torrent_flags.paused
        if args.tracker:
            p.trackers = [args.tracker]
        h = ses.add_torrent(p)
        h.set_ssl_certificate(args.cert, args.key, args.dh, "")
        if args.up_limit:
            h.set_upload_limit(args.up_limit)
        if args.down_limit:
            h.set_download_limit(args.down_limit)
        h.resume()
        torrents.append((ses, h))
    emit("ready")
    connect = [(c.rsplit(":", 1)[0], int(c.rsplit(":", 1)[1])) for c in args.connect]
    most = 0
    next_connect = 0.0
    while not stop.is_set():
        now = time.monotonic()
        if connect and now >= next_connect:
            for _, h in torrents:
                for ep in connect:
                    h.connect_peer(ep)
            next_connect = now + 1.0
        down = up = peers = seeds = 0
        for ses, h in torrents:
            for a in ses.pop_alerts():
                if isinstance(a, lt.peer_ban_alert):
                    emit("ban", peer=str(a.endpoint))
                elif isinstance(a, lt.hash_failed_alert):
                    emit("hash_failed")
                elif isinstance(a, lt.peer_disconnected_alert):
                    emit("disconnect", peer=str(a.endpoint), why=a.message())
                elif isinstance(a, lt.peer_error_alert):  # an incoming one that failed
                    emit("peer_error", peer=str(a.endpoint), why=a.message())
                elif isinstance(a, lt.tracker_reply_alert):
                    emit("tracker", peers=a.num_peers)
                elif isinstance(a, lt.tracker_error_alert):
                    emit("tracker_error", why=a.message())
                elif os.environ.get("PEER_DEBUG"):  # every other alert too
                    emit("alert", what=type(a).__name__, why=a.message())
            s = h.status()
            down += s.total_payload_download
            up += s.total_payload_upload
            peers += s.num_peers
            seeds += s.num_seeds > 0
        most = max(most, peers)
        s = torrents[0][1].status()
        emit("stats", down=down, up=up, peers=peers, most=most, seeds=seeds, state=str(s.state),
             errc=s.errc.message())
        stop.wait(0.2)
    return 0


class HostilePeer:
    """A peer_main process; its events are read as they come."""

    def __init__(self, workdir, name, ip, port, cert, torrent, save, **opts):
        self.name = name
        self.events = []
        self.lock = threading.Lock()
        args = [LT_PYTHON, THIS, "peer", "--listen", ip, "--port", str(port),
                "--cert", os.path.join(CERTS, cert + ".pem"),
                "--key", os.path.join(CERTS, cert + ".key"), "--dh", os.path.join(CERTS, "dh.pem"),
                "--torrent", torrent, "--save", save]
        for k, v in opts.items():
            flag = "--" + k.replace("_", "-")
            if v is True:
                args.append(flag)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    args += [flag, str(x)]
            elif v:
                args += [flag, str(v)]
        self.err_path = os.path.join(workdir, name + ".err")
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        wait_for(lambda: self.last("ready") or self.proc.poll() is not None, 30,
                 "the hostile peer %s to listen" % name)
        if self.proc.poll() is not None:
            raise AssertionError("hostile peer %s exited: %s" % (name, self.stderr()))

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                if ev["event"] == "stats" and self.events and self.events[-1]["event"] == "stats":
                    self.events[-1] = ev  # the latest numbers are enough
                else:
                    self.events.append(ev)

    def last(self, kind):
        with self.lock:
            for ev in reversed(self.events):
                if ev["event"] == kind:
                    return ev
        return None

    def all(self, kind):
        with self.lock:
            return [ev for ev in self.events if ev["event"] == kind]

    def stats(self):
        return self.last("stats") or {"down": 0, "up": 0, "peers": 0, "most": 0}

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                stop_pid(self.proc, signal.SIGKILL)
        self.err.close()


# ---- the metadata port, as a raw client ---------------------------------

def member_context(cert):
    """A client TLS context with cert's pair, checking the server against
    the cluster CA (no name check: nodes are named by IP); a certificate
    not of the cluster checks nothing (what would a stranger check?)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if cert == "node":
        ctx.load_verify_locations(os.path.join(CERTS, "ca.pem"))
    else:
        ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(os.path.join(CERTS, cert + ".pem"), os.path.join(CERTS, cert + ".key"))
    return ctx


def meta_exchange(addr, line, cert="node", timeout=10):
    """Sends one line (bytes, \\n included) to a node's metadata port
    (addr "ip:port", the pieces' port: +1 here) and returns all it
    answered before closing."""
    ip, port = addr.rsplit(":", 1)
    with socket.create_connection((ip, int(port) + 1), timeout) as raw:
        with member_context(cert).wrap_socket(raw) as s:
            s.sendall(line)
            out = b""
            while True:
                try:
                    b = s.recv(65536)
                except (ssl.SSLEOFError, ConnectionResetError):
                    break
                if not b:
                    break
                out += b
            return out


def ask_torrent(addr, sha, url=None, cert="node"):
    """TORRENT <sha> [url]: ("HAVE", bytes), ("FETCHING", None), ..."""
    out = meta_exchange(addr, ("TORRENT %s%s\n" % (sha, " " + url if url else "")).encode(), cert)
    head, _, rest = out.partition(b"\n")
    words = head.decode("ascii", "replace").split(" ", 1)
    if words[0] == "HAVE":
        n = int(words[1])
        if len(rest) != n:
            raise AssertionError("HAVE %d with %d bytes" % (n, len(rest)))
        return "HAVE", rest
    return words[0], (words[1] if len(words) > 1 else None)


def v1_info_hash(torrent):
    """The SHA-1 of a .torrent's bencoded info dictionary, as sent."""
    def skip(b, i):
        c = b[i:i + 1]
        if c == b"i":
            return b.index(b"e", i) + 1
        if c in (b"l", b"d"):
            i += 1
            while b[i:i + 1] != b"e":
                i = skip(b, i)
            return i + 1
        colon = b.index(b":", i)
        return colon + 1 + int(b[i:colon])
    i = 1
    while torrent[i:i + 1] != b"e":
        key_end = skip(torrent, i)
        value_end = skip(torrent, key_end)
        if torrent[i:key_end] == b"4:info":
            return hashlib.sha1(torrent[key_end:value_end]).hexdigest()
        i = value_end
    raise AssertionError("no info dictionary")


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class HoldingOrigin:
    """An origin that holds every request until released (or 90 s), then
    answers 404, and counts how many it held at once: what a node's
    fetches for other nodes cost the origin."""

    def __init__(self, ip="127.0.0.1"):
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.now = self.most = self.total = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with outer.lock:
                    outer.now += 1
                    outer.total += 1
                    outer.most = max(outer.most, outer.now)
                try:
                    outer.release.wait(90)
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.send_header("Connection", "close")
                    self.end_headers()
                finally:
                    with outer.lock:
                        outer.now -= 1

        self.server = ThreadingHTTPServer((ip, 0), Handler)
        self.server.daemon_threads = True
        self.server.request_queue_size = 1024
        self.base = "http://%s:%d" % (ip, self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def setUpModule():
    global CERTS
    if not HAVE_LT_PYTHON:
        return
    CERTS = tempfile.mkdtemp(prefix="hubd-hostile-certs-")
    make_ca(CERTS, "ca")
    make_ca(CERTS, "other")
    make_node(CERTS, "node", "ca")
    make_node(CERTS, "stranger", "other")
    # An expired member: `openssl x509 -req` cannot date one in the past,
    # `openssl ca` can (as tests/unit/test_fleet_meta.c does).
    subprocess.run(
        "printf '[ca]\\ndefault_ca = c\\n[c]\\ndatabase = index.txt\\nnew_certs_dir = .\\n"
        "serial = serial\\ndefault_md = sha256\\npolicy = p\\nunique_subject = no\\n"
        "[p]\\ncommonName = supplied\\n' > ca.cnf && touch index.txt && echo 1000 > serial && "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout expired.key "
        "-out expired.csr -subj '/CN=*' 2>/dev/null && "
        "openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr "
        "-out expired.pem -startdate 20200101000000Z -enddate 20210101000000Z -notext "
        "2>/dev/null && "
        "openssl genpkey -genparam -algorithm DH -pkeyopt group:ffdhe2048 -out dh.pem",
        shell=True, cwd=CERTS, check=True)
    os.chmod(os.path.join(CERTS, "expired.key"), 0o600)


def tearDownModule():
    if CERTS:
        shutil.rmtree(CERTS, ignore_errors=True)


@unittest.skipUnless(HAVE_FLEET, "hubd was built without libtorrent-rasterbar")
@unittest.skipUnless(HAVE_LT_PYTHON, NO_LT_PYTHON)
class HostileSwarmTest(unittest.TestCase):
    """Three honest hubd nodes; fleet_peers may also list hostile members
    (addresses 127.0.0.61 and up), which no hubd runs on."""
    HONEST = 3

    # swarm_fixture.SwarmCase's own helpers (they use only self.nodes, self.tmp, self.origin).
    fetch = swarm_fixture.SwarmCase.fetch
    fetch_all = swarm_fixture.SwarmCase.fetch_all
    assert_once = swarm_fixture.SwarmCase.assert_once
    check_blob = swarm_fixture.SwarmCase.check_blob
    _outcome_ok = swarm_fixture.SwarmCase._outcome_ok

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hubd-hostile-")
        self.root = os.path.join(self.tmp, "root")
        os.mkdir(self.root)
        self.origin = Origin(self.root)
        self.addCleanup(self.origin.stop)
        self.nodes = []
        self.peers = []
        self.addCleanup(self.stop_all)

    def start_cluster(self, hostile=0, **conf):
        """The honest nodes, with fleet_peers listing them and `hostile`
        member addresses more (self.members[HONEST:])."""
        self.members = []
        for i in range(self.HONEST + hostile):
            ip = "127.0.0.%d" % (51 + i if i < self.HONEST else 61 + i - self.HONEST)
            self.members.append("%s:%d" % (ip, two_ports(ip)))
        self.peers_file = os.path.join(self.tmp, "peers")
        with open(self.peers_file, "w") as f:
            f.write("\n".join(self.members) + "\n")
        for i in range(self.HONEST):
            keys = dict(fleet_listen=self.members[i], fleet_peers=self.peers_file,
                        fleet_ca=os.path.join(CERTS, "ca.pem"),
                        fleet_cert=os.path.join(CERTS, "node.pem"),
                        fleet_key=os.path.join(CERTS, "node.key"), fleet_wait="5s")
            keys.update(conf)
            cfg = write_config(os.path.join(self.tmp, "node%d.conf" % i), **keys)
            self.nodes.append(Hubd(os.path.join(self.tmp, "node%d" % i), config=cfg))

    def stop_all(self):
        for p in self.peers:
            p.stop()
        failed = not self._outcome_ok()
        if failed:
            for p in self.peers:
                sys.stderr.write("\n--- hostile peer %s: %s\n%s\n%s\n" % (
                    p.name, p.stats(), "\n".join(map(str, p.events[-40:])), p.stderr()))
        swarm_fixture.SwarmCase.stop_all(self)

    def peer(self, name, member, cert="node", **opts):
        """A hostile libtorrent peer listening on member's address."""
        ip, port = member.rsplit(":", 1)
        p = HostilePeer(self.tmp, name, ip, int(port), cert, **opts)
        self.peers.append(p)
        return p

    def honest_file(self, name, size, seed):
        """A file whose rendezvous order begins with an honest node (a
        hostile member first would only be skipped as down)."""
        path = os.path.join(self.root, name)
        for s in range(seed, seed + 1000):
            sha = write_random_file(path, size, seed=s)
            order = rendezvous(sha, self.members)
            if order[0] < self.HONEST:
                return sha, self.origin.url("/files/" + name), order
        raise AssertionError("no file whose seed is honest")

    def seed_file(self, name, size, seed):
        """A file fetched by its (honest) seed, and its .torrent as the seed
        serves it to members, saved for the hostile peers."""
        sha, url, order = self.honest_file(name, size, seed)
        r = self.fetch(order[0], url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {}

        def have():
            got["a"] = ask_torrent(self.members[order[0]], sha)
            return got["a"][0] == "HAVE"
        wait_for(have, 30, "the seed to serve the torrent")
        torrent = os.path.join(self.tmp, sha + ".torrent")
        with open(torrent, "wb") as f:
            f.write(got["a"][1])
        return sha, url, order, torrent

    def honest_rest(self, order):
        return [i for i in order if i < self.HONEST][1:]

    def assert_serving(self, i):
        """The node still answers: a fresh file, fetched without the swarm."""
        name = "after-%d.bin" % i
        sha = write_random_file(os.path.join(self.root, name), 64 << 10, seed=900 + i)
        r = subprocess.run([os.environ.get("HUBCTL_BIN", "hubctl"), "--socket",
                            self.nodes[i].socket, "fetch", self.origin.url("/files/" + name)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(sha, r.stdout + r.stderr + "".join(self.nodes[i].blob_files()))

    # ---- 1. wrong pieces ------------------------------------------------------

    def liar_copy(self, name, sha):
        """A folder holding a true copy of the file, for a hostile seed to
        check at its start (libtorrent then has every piece) before the test
        spoils it on disk: libtorrent does not read a piece again before it
        sends it, so the member then sends wrong bytes for a bitfield that
        says it has them all. (In seed_mode it would check each piece as it
        is first asked for, and find out.)"""
        save = os.path.join(self.tmp, "peer-" + name)
        os.mkdir(save)
        shutil.copyfile(os.path.join(self.root, name), os.path.join(save, sha))
        return save

    def paused(self, i, until, most=6.0):
        """Node i stopped (SIGSTOP) until until() or most seconds, then let
        go on: meanwhile the others' only source is whatever else is in the
        swarm. Under STALL_MS (10 s): the download does not give up on it."""
        pid = self.nodes[i].proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            end = time.monotonic() + most
            while time.monotonic() < end and not until():
                time.sleep(0.05)
        finally:
            os.kill(pid, signal.SIGCONT)

    def test_a_member_sending_wrong_pieces_is_banned(self):
        """A member listed in fleet_peers claims every piece and sends wrong
        bytes: the node downloading bans it once a piece fails its check,
        and finishes from the honest seed; every node's blob is right. The
        seed is paused for a few seconds once the download has started, so
        that the liar's pieces certainly arrive (on loopback the seed alone
        is done in a second)."""
        self.start_cluster(hostile=1)
        size = 16 << 20
        sha, url, order, torrent = self.seed_file("bad.bin", size, seed=20)
        save = self.liar_copy("bad.bin", sha)
        liar = self.peer("liar", self.members[self.HONEST], torrent=torrent, save=save,
                         connect=[self.members[i] for i in range(self.HONEST)])
        wait_for(lambda: liar.stats().get("state") == "seeding", 30, "the liar to check its copy")
        with open(os.path.join(save, sha), "r+b") as f:
            f.write(random.Random(1).randbytes(size))
        y, z = self.honest_rest(order)
        p = subprocess.Popen([os.environ.get("HUBCTL_BIN", "hubctl"), "--socket",
                              self.nodes[y].socket, "fetch", "--sha256", sha, url],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "bytes from the swarm" in self.nodes[y].read_log(), 30, "the swarm")
        self.paused(order[0], lambda: "banned" in self.nodes[y].read_log())
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        self.check_blob(y, sha)
        log = self.nodes[y].read_log()
        self.assertIn("failed its hash check", log)
        self.assertRegex(log, r"peer 127\.0\.0\.61:\d+ banned")
        self.assertGreater(liar.stats()["up"], 0)
        r = self.fetch(z, url, sha)  # the liar is still there, for this one too
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(z, sha)
        self.assert_once("/files/bad.bin")
        for i in range(self.HONEST):
            self.assert_serving(i)

    # ---- 2. a lying bitfield ---------------------------------------------------

    def test_a_member_that_claims_every_piece_and_sends_none_holds_nothing_up(self):
        """A member listed in fleet_peers has every piece by its bitfield,
        unchokes, takes requests and sends nothing (1 byte/s): the node
        downloading asks the others for those blocks too and finishes. The
        seed is paused for its first seconds, so that the liar gets the
        node's requests first. Bound: 120 s (a second on loopback)."""
        self.start_cluster(hostile=1)
        sha, url, order, torrent = self.seed_file("mute.bin", 8 << 20, seed=40)
        save = self.liar_copy("mute.bin", sha)
        liar = self.peer("mute", self.members[self.HONEST], torrent=torrent, save=save, up_limit=1,
                         connect=[self.members[i] for i in range(self.HONEST)])
        wait_for(lambda: liar.stats().get("state") == "seeding", 30, "the liar to check its copy")
        y, z = self.honest_rest(order)
        p = subprocess.Popen([os.environ.get("HUBCTL_BIN", "hubctl"), "--socket",
                              self.nodes[y].socket, "fetch", "--sha256", sha, url],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "bytes from the swarm" in self.nodes[y].read_log(), 30, "the swarm")
        self.paused(order[0], lambda: False, most=4)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        self.check_blob(y, sha)
        r = self.fetch(z, url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(z, sha)
        self.assert_once("/files/mute.bin")
        self.assertGreaterEqual(liar.stats()["most"], 1, "the liar never had a peer")
        self.assertLess(liar.stats()["up"], 64 << 10)
        for i in range(self.HONEST):
            self.assert_serving(i)

    # ---- 3. floods -------------------------------------------------------------

    def lying_meta_server(self, member, torrent):
        """A member's metadata port that answers every TORRENT with the
        given .torrent bytes (another file's), mutual TLS as the nodes."""
        ip, port = member.rsplit(":", 1)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(CERTS, "ca.pem"))
        ctx.load_cert_chain(os.path.join(CERTS, "node.pem"), os.path.join(CERTS, "node.key"))
        lsock = socket.create_server((ip, int(port) + 1))
        lsock.settimeout(0.2)
        stop = threading.Event()
        asked = []

        def serve():
            while not stop.is_set():
                try:
                    raw, _ = lsock.accept()
                except OSError:
                    continue
                try:
                    raw.settimeout(5)
                    with ctx.wrap_socket(raw, server_side=True) as c:
                        line = c.recv(8192)
                        asked.append(line)
                        c.sendall(b"HAVE %d\n" % len(torrent) + torrent)
                except (OSError, ssl.SSLError):
                    pass
        t = threading.Thread(target=serve, daemon=True)
        t.start()

        def close():
            stop.set()
            t.join(5)
            lsock.close()
        self.addCleanup(close)
        return asked

    def test_a_member_naming_another_files_torrent_sends_the_node_to_the_origin(self):
        """A member first in a file's order answers its TORRENT with
        another blob's torrent: the node brings those bytes, finds they
        are not the digest asked for, and fetches the file from the origin
        once; its client gets the right bytes, never hash_mismatch."""
        self.start_cluster(hostile=1, fleet_wait="60s")
        liar = self.members[self.HONEST]
        other_sha, _, other_order, other_torrent = self.seed_file("other.bin", 2 << 20, seed=700)
        with open(other_torrent, "rb") as f:
            other = f.read()
        path = os.path.join(self.root, "asked.bin")
        for s in range(800, 1800):
            sha = write_random_file(path, 1 << 20, seed=s)
            order = rendezvous(sha, self.members)
            if order[0] == self.HONEST:  # the liar is this file's seed
                break
        else:
            raise AssertionError("no file whose seed is the liar")
        asked = self.lying_meta_server(liar, other)
        # Not the other file's seed: it has that torrent already.
        i = [k for k in order[1:] if k < self.HONEST and k != other_order[0]][0]
        r = self.fetch(i, self.origin.url("/files/asked.bin"), sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(i, sha)
        self.assertTrue(asked, "the liar was never asked")
        self.assertIn("goes on in job", self.nodes[i].read_log())
        self.assert_once("/files/asked.bin")
        self.assert_serving(i)

    def test_a_flood_of_metadata_connections_and_bad_lines_is_capped(self):
        """300 connections at once to a node's metadata port: 256 are held
        (each until its 10 s bound), the rest closed at accept; then a member
        sends every kind of bad line, each answered ERR, and a stranger
        plain text; then the node serves the file to the others as before,
        and its memory has not run away."""
        self.start_cluster()
        sha, url, order, torrent = self.seed_file("flood.bin", 4 << 20, seed=80)
        seed = order[0]
        addr = self.members[seed]
        ip, port = addr.rsplit(":", 1)
        pid = self.nodes[seed].proc.pid
        rss0 = vm_rss_kib(pid)
        conns = [socket.create_connection((ip, int(port) + 1), 5) for _ in range(300)]
        try:
            def closed(c):
                c.setblocking(False)
                try:
                    return c.recv(1) == b""
                except BlockingIOError:
                    return False
                except OSError:
                    return True
            wait_for(lambda: sum(closed(c) for c in conns) >= 44, 5, "44 closed at accept")
            self.assertLessEqual(sum(closed(c) for c in conns), 60)
            rss_flood = vm_rss_kib(pid)
        finally:
            for c in conns:
                c.close()
        self.assertIn("256 connections open", self.nodes[seed].read_log())
        bad = [b"GET / HTTP/1.1\r\n\r\n", b"TORRENT\n", b"TORRENT " + b"A" * 64 + b"\n",
               b"TORRENT " + b"0" * 63 + b"\n", b"TORRENT " + sha.encode() + b" \n",
               b"TORRENT " + sha.encode() + b" a b\n", b"TORRENT " + sha.encode() + b"\x00\n",
               b"TORRENT " + sha.encode() + b" http://x/" + b"a" * 5000 + b"\n",
               b"x" * 100000, bytes(range(256)) + b"\n"]
        answers = []

        def member():
            for k in range(20):
                answers.append(meta_exchange(addr, bad[k % len(bad)]))
        threads = [threading.Thread(target=member) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in range(40):  # plain text where TLS is wanted
            with socket.create_connection((ip, int(port) + 1), 5) as c:
                c.sendall(b"TORRENT " + sha.encode() + b"\n")
                c.settimeout(10)
                try:
                    while c.recv(4096):
                        pass
                except OSError:
                    pass
        for t in threads:
            t.join(120)
        self.assertEqual(len(answers), 80)
        for a in answers:
            self.assertTrue(a.startswith(b"ERR "), a[:200])
        with open(torrent, "rb") as f:
            self.assertEqual(ask_torrent(addr, sha), ("HAVE", f.read()))
        rest = self.honest_rest(order)
        res = self.fetch_all(rest, url, sha)
        for i in rest:
            self.assertEqual(res[i].returncode, 0, "node %d: %s" % (i, res[i].stderr))
            self.check_blob(i, sha)
        self.assert_once("/files/flood.bin")
        rss1 = vm_rss_kib(pid)
        if not SLOWED:  # 256 TLS contexts held add some 10 MiB
            self.assertLess(max(rss_flood, rss1) - rss0, 64 << 10,
                            "VmRSS %d -> %d (the flood) -> %d KiB" % (rss0, rss_flood, rss1))
        self.assert_serving(seed)

    def shas_seeded_by(self, i, n):
        """n random SHA-256s whose rendezvous order begins with node i."""
        rnd = random.Random(i)
        out = []
        while len(out) < n:
            sha = "%064x" % rnd.getrandbits(256)
            if rendezvous(sha, self.members)[0] == i:
                out.append(sha)
        return out

    def ask_many(self, addr, shas, url_of, threads=8):
        """TORRENT <sha> <url> for each sha, from threads at once: [(sha,
        the answer's first word)] in the order answered, and the words
        counted."""
        todo = list(reversed(shas))
        lock = threading.Lock()
        answered = []

        def run():
            while True:
                with lock:
                    if not todo:
                        return
                    sha = todo.pop()
                word = ask_torrent(addr, sha, url_of(sha))[0]
                with lock:
                    answered.append((sha, word))
        ts = [threading.Thread(target=run) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(300)
        count = {}
        for _, w in answered:
            count[w] = count.get(w, 0) + 1
        return answered, count

    def test_a_flood_of_asks_starts_at_most_64_fetches(self):
        """A member asks one node for 1,000 files it is the seed of, each
        with a URL: the node fetches at most 64 of them at once for other
        nodes (the origin holds every request), answers NONE past that, and
        serves its own clients meanwhile. Then 1,500 more asks whose
        fetches fail at once: the node remembers the last 256 failures
        only, and its memory stays where it was (each failure kept a file
        of 8 KiB or more, each for good where the node is the seed)."""
        self.start_cluster(max_jobs_per_user="0", max_downloads="300", max_per_host="300")
        holding = HoldingOrigin()
        self.addCleanup(holding.stop)
        a = 0
        addr = self.members[a]
        pid = self.nodes[a].proc.pid
        # Fewer under the sanitizers (each TLS handshake is much slower),
        # enough to pass each bound.
        n1, n2 = (300, 400) if SLOWED else (1000, 1500)
        shas = self.shas_seeded_by(a, n1 + n2)
        answered, count = self.ask_many(addr, shas[:n1], lambda sha: holding.base + "/" + sha)
        self.assertLessEqual(holding.most, 64)
        self.assertEqual(count.get("FETCHING", 0), 64, count)
        self.assertEqual(count.get("NONE", 0), n1 - 64, count)
        # Its own clients meanwhile: a download with a slot of its own.
        self.assert_serving(a)
        holding.release.set()
        wait_for(lambda: holding.now == 0, 30, "the held requests to end")
        # A failure is remembered: asked again, NONE (no second fetch).
        failed = [sha for sha, w in answered if w == "FETCHING"]
        wait_for(lambda: ask_torrent(addr, failed[0], holding.base + "/x")[0] == "NONE", 10,
                 "the fetch to fail and be remembered")
        rss0 = vm_rss_kib(pid)
        dead = "http://127.0.0.1:%d/" % free_port()
        answered, count = self.ask_many(addr, shas[n1:], lambda sha: dead + sha)
        self.assertGreater(count.get("FETCHING", 0), n2 - 100, count)
        last = [sha for sha, w in answered if w == "FETCHING"][-1]
        wait_for(lambda: ask_torrent(addr, last, dead + "x")[0] == "NONE", 10,
                 "the last failure to be remembered")
        time.sleep(1)
        rss1 = vm_rss_kib(pid)
        if not SLOWED:
            self.assertLess(rss1 - rss0, 8 << 10, "VmRSS %d -> %d KiB" % (rss0, rss1))
        # The first failures are forgotten: another fetch.
        self.assertEqual(ask_torrent(addr, failed[1], holding.base + "/x")[0], "FETCHING")
        self.assert_serving(a)

    # ---- 4. slow peers holding slots --------------------------------------------

    def test_members_that_read_at_a_drip_hold_no_slot_from_the_others(self):
        """Twelve members (as many addresses) connect to the seed first and
        ask for pieces, reading 1 KiB/s each: more than libtorrent's
        default unchoke slots (8). The honest nodes still get the file."""
        self.start_cluster()
        sha, url, order, torrent = self.seed_file("drip.bin", 16 << 20, seed=60)
        save = os.path.join(self.tmp, "drip")
        os.mkdir(save)
        slow = self.peer("drip", "127.0.0.71:0", torrent=torrent, save=save, sessions=12,
                         down_limit=1024, connect=[self.members[order[0]]])
        wait_for(lambda: slow.stats().get("seeds", 0) == 12 and slow.stats()["down"] > 0, 60,
                 "the slow members to connect and read")
        time.sleep(2)
        rest = self.honest_rest(order)
        res = self.fetch_all(rest, url, sha)
        for i in rest:
            self.assertEqual(res[i].returncode, 0, "node %d: %s" % (i, res[i].stderr))
            self.check_blob(i, sha)
        self.assert_once("/files/drip.bin")
        self.assertEqual(slow.stats()["state"], "downloading", "the slow members were not slow")
        for i in range(self.HONEST):
            self.assert_serving(i)

    # ---- 5. a tracker naming non-members --------------------------------------

    def start_tracker(self, port, info_hash):
        """Debian's opentracker on 127.0.0.1:port, tracking info_hash alone
        (its whitelist); run as root it chroots into its folder and drops
        to nobody."""
        tdir = os.path.join(self.tmp, "tracker")
        os.mkdir(tdir)
        os.chmod(tdir, 0o755)
        with open(os.path.join(tdir, "whitelist.txt"), "w") as f:
            f.write(info_hash + "\n")
        os.chmod(os.path.join(tdir, "whitelist.txt"), 0o644)
        log = open(os.path.join(self.tmp, "opentracker.log"), "wb")
        p = subprocess.Popen([OPENTRACKER, "-i", "127.0.0.1", "-p", str(port), "-P", str(port),
                              "-d", tdir, "-w", "whitelist.txt"], stdout=log, stderr=log)
        self.addCleanup(lambda: (stop_pid(p), log.close()))
        q = "".join("%%%s" % info_hash[i:i + 2] for i in range(0, 40, 2))
        probe = ("http://127.0.0.1:%d/announce?info_hash=%s&peer_id=-PROBE-0000000000000&port=1"
                 "&uploaded=0&downloaded=0&left=0&event=stopped" % (port, q))

        def admitted():
            try:
                with urllib.request.urlopen(probe, timeout=2) as r:
                    return b"failure reason" not in r.read()
            except OSError:
                return False
        wait_for(admitted, 10, "opentracker to admit the torrent")

    @unittest.skipUnless(os.path.exists(OPENTRACKER), "Debian's opentracker is not installed "
                         "(scripts/install-deps.sh)")
    def test_a_tracker_naming_a_non_member_gives_it_nothing(self):
        """The nodes announce to a tracker (fleet_tracker), and so does a
        stranger (another CA's certificate) holding the torrent's bytes:
        the tracker names the stranger to the nodes that join after it,
        their connections to it fail the TLS handshake (each side refuses
        the other's certificate), the stranger gets no byte, and the nodes
        finish as without it. (The tracker starts once the seed has made
        the torrent: it tracks only the v1 info-hash of its whitelist; the
        v2 announces are refused, as docs/FLEET.md says.)"""
        port = free_port()
        tracker = "http://127.0.0.1:%d/announce" % port
        self.start_cluster(fleet_tracker=tracker)
        sha, url, order, torrent = self.seed_file("t.bin", 4 << 20, seed=120)
        with open(torrent, "rb") as f:
            self.start_tracker(port, v1_info_hash(f.read()))
        save = os.path.join(self.tmp, "stranger")
        os.mkdir(save)
        stranger = self.peer("stranger", "127.0.0.81:%d" % two_ports("127.0.0.81"),
                             cert="stranger", torrent=torrent, save=save, tracker=tracker)
        wait_for(lambda: stranger.all("tracker"), 30, "the stranger's announce")
        rest = self.honest_rest(order)
        res = self.fetch_all(rest, url, sha)
        for i in rest:
            self.assertEqual(res[i].returncode, 0, "node %d: %s" % (i, res[i].stderr))
            self.check_blob(i, sha)
        self.assert_once("/files/t.bin")
        # The nodes learnt of the stranger from the tracker alone.
        wait_for(lambda: re.search(r"peer 127\.0\.0\.81:\d+: TLS refused",
                                   "".join(self.nodes[i].read_log() for i in rest)), 30,
                 "a node to try the stranger the tracker named")
        # Their side: the stranger's certificate refused by the nodes.
        wait_for(lambda: any(re.search(r"127\.0\.0\.5\d.*alert unknown ca", e["why"])
                             for e in stranger.all("peer_error")), 30,
                 "the nodes' handshakes with the stranger to fail")
        st = stranger.stats()
        self.assertEqual((st["down"], st["up"], st["most"]), (0, 0, 0), st)
        for i in range(self.HONEST):
            self.assert_serving(i)

    # ---- 6. certificates ---------------------------------------------------------

    def test_a_stranger_and_an_expired_member_get_neither_metadata_nor_pieces(self):
        """Another CA's certificate, and one of the cluster's CA whose dates
        are past: the metadata port ends their handshakes with an alert
        (no answer to TORRENT), and their libtorrent, with the real
        .torrent bytes, connects to every node's peer port and gets no
        byte; the honest nodes finish meanwhile."""
        self.start_cluster()
        sha, url, order, torrent = self.seed_file("c.bin", 8 << 20, seed=140)
        for cert in ("stranger", "expired"):
            for i in range(self.HONEST):
                with self.assertRaises(OSError, msg="%s at node %d" % (cert, i)) as cm:
                    meta_exchange(self.members[i], ("TORRENT %s\n" % sha).encode(), cert)
                self.assertIsInstance(cm.exception, (ssl.SSLError, ConnectionError), cm.exception)
        peers = []
        for k, cert in enumerate(("stranger", "expired")):
            save = os.path.join(self.tmp, cert)
            os.mkdir(save)
            ip = "127.0.0.%d" % (91 + k)
            peers.append(self.peer(cert, "%s:%d" % (ip, two_ports(ip)), cert=cert,
                                   torrent=torrent, save=save,
                                   connect=[self.members[i] for i in range(self.HONEST)]))
        rest = self.honest_rest(order)
        res = self.fetch_all(rest, url, sha)
        for i in rest:
            self.assertEqual(res[i].returncode, 0, "node %d: %s" % (i, res[i].stderr))
            self.check_blob(i, sha)
        self.assert_once("/files/c.bin")
        wait_for(lambda: all(len(p.all("disconnect")) >= self.HONEST for p in peers), 30,
                 "the refused peers to have tried every node")
        seed_ip = self.members[order[0]].rsplit(":", 1)[0]
        for p, alert in zip(peers, ("unknown ca", "certificate expired")):
            st = p.stats()
            self.assertEqual((st["down"], st["up"], st["most"]), (0, 0, 0), (p.name, st))
            # The seed had the torrent from the start: it refused the
            # certificate. A node that had not joined yet refused the
            # torrent's name (SNI) first.
            whys = [e["why"] for e in p.all("disconnect")]
            self.assertTrue(any(seed_ip in w and alert in w for w in whys), whys)
            for w in whys:
                self.assertTrue(alert in w or "unrecognized name" in w, w)
        refused = "".join(self.nodes[i].read_log() for i in range(self.HONEST))
        self.assertIn("fleet meta: a handshake failed", refused)
        for i in range(self.HONEST):
            self.assert_serving(i)


if __name__ == "__main__":
    if sys.argv[1:2] == ["peer"]:
        sys.exit(peer_main(sys.argv[2:]))
    unittest.main()
