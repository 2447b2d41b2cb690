"""A cluster swarm on one machine, shared by the swarm's tests (test_swarm.py
and the others): hubd nodes on loopback addresses of their own (127.0.0.31,
.32, ...), one cluster CA (and a stranger's), one origin.

A test module takes setUpModule and tearDownModule from here (the
certificates, made once per module) and derives its cases from SwarmCase,
which skips them when hubd was built without libtorrent-rasterbar."""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HUBCTL, Hubd, Origin, free_port, write_config  # noqa: E402

HAVE_FLEET = subprocess.run(
    ["sh", "-c", "ldd '%s' | grep -q libtorrent" % os.environ.get("HUBD_BIN", "")]
).returncode == 0

CERTS = None


def make_ca(d, name):
    subprocess.run(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {n}.key "
        "-out {n}.pem -days 30 -subj /CN={n} 2>/dev/null".format(n=name),
        shell=True, cwd=d, check=True)


def make_node(d, name, ca):
    """A node certificate as docs/FLEET.md makes them: CN=*, no SAN."""
    subprocess.run(
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {n}.key "
        "-out {n}.csr -subj '/CN=*' 2>/dev/null && openssl x509 -req -in {n}.csr -CA {c}.pem "
        "-CAkey {c}.key -CAcreateserial -out {n}.pem -days 30 2>/dev/null".format(n=name, c=ca),
        shell=True, cwd=d, check=True)
    os.chmod(os.path.join(d, name + ".key"), 0o600)


def setUpModule():
    """The cluster's CA and node pair ("ca", "node"), and a stranger's
    ("other", "stranger"), in CERTS."""
    global CERTS
    if not HAVE_FLEET:
        return
    CERTS = tempfile.mkdtemp(prefix="hubd-fleet-certs-")
    make_ca(CERTS, "ca")
    make_ca(CERTS, "other")
    make_node(CERTS, "node", "ca")
    make_node(CERTS, "stranger", "other")


def tearDownModule():
    global CERTS
    if CERTS:
        shutil.rmtree(CERTS, ignore_errors=True)
    CERTS = None


def two_ports(ip):
    """A free port whose next one is free too: pieces, then metadata."""
    import socket
    for _ in range(50):
        p = free_port(ip)
        s = socket.socket()
        try:
            s.bind((ip, p + 1))
            return p
        except OSError:
            continue
        finally:
            s.close()
    raise AssertionError("no two free ports in a row on " + ip)


def rendezvous(sha, members):
    """fleet_peers.c's order: heaviest first, weight = SHA-256(sha "\\n" member)[:8]."""
    def weight(i):
        d = hashlib.sha256((sha + "\n" + members[i]).encode()).digest()
        return (-int.from_bytes(d[:8], "big"), i)
    return sorted(range(len(members)), key=weight)


@unittest.skipUnless(HAVE_FLEET, "hubd was built without libtorrent-rasterbar")
class SwarmCase(unittest.TestCase):
    """NODES members, each started with the cluster's certificate; every
    node must stop cleanly (exit 0, no sanitizer report) at the end."""
    NODES = 4

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hubd-swarm-")
        self.root = os.path.join(self.tmp, "root")
        os.mkdir(self.root)
        self.origin = Origin(self.root)
        self.addCleanup(self.origin.stop)
        self.members = []
        for i in range(self.NODES):
            ip = "127.0.0.%d" % (31 + i)
            port = two_ports(ip)
            self.members.append("%s:%d" % (ip, port))
        self.peers_file = os.path.join(self.tmp, "peers")
        with open(self.peers_file, "w") as f:
            f.write("# the test cluster\n" + "\n".join(self.members) + "\n")
        self.nodes = [None] * self.NODES
        for i in range(self.NODES):
            self.start_node(i)
        self.addCleanup(self.stop_all)

    def node_conf(self, i, cert="node", ca="ca", **extra):
        keys = dict(fleet_listen=self.members[i], fleet_peers=self.peers_file,
                    fleet_ca=os.path.join(CERTS, ca + ".pem"),
                    fleet_cert=os.path.join(CERTS, cert + ".pem"),
                    fleet_key=os.path.join(CERTS, cert + ".key"), fleet_wait="3s")
        keys.update(extra)
        return write_config(os.path.join(self.tmp, "node%d.conf" % i), **keys)

    def start_node(self, i, workdir=None, **kw):
        self.nodes[i] = Hubd(workdir or os.path.join(self.tmp, "node%d" % i),
                             config=self.node_conf(i, **kw))
        return self.nodes[i]

    def stop_all(self):
        for n in self.nodes:
            if n and n.proc.poll() is None:
                rc = n.stop()
                log = n.read_log()
                for bad in ("AddressSanitizer", "runtime error:", "handles still open"):
                    self.assertNotIn(bad, log, log[-6000:])
                self.assertEqual(rc, 0, log[-6000:])
        if self._outcome_ok():
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            for i, n in enumerate(self.nodes):
                if n:
                    sys.stderr.write("\n--- node %d log ---\n%s\n" % (i, n.read_log()[-5000:]))

    def _outcome_ok(self):
        result = getattr(getattr(self, "_outcome", None), "result", None)
        return result is None or not any(t is self for t, _ in result.failures + result.errors)

    def fetch(self, i, url, sha, timeout=120):
        return subprocess.run([HUBCTL, "--socket", self.nodes[i].socket, "fetch", "--sha256",
                               sha, url], capture_output=True, text=True, timeout=timeout)

    def fetch_all(self, which, url, sha):
        out = {}

        def one(i):
            out[i] = self.fetch(i, url, sha)
        threads = [threading.Thread(target=one, args=(i,)) for i in which]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        return out

    def assert_once(self, path):
        """The origin sent the file's bytes once (a seed's download may be
        segmented: several ranged requests, each byte once)."""
        st = self.origin.stats()
        size = os.path.getsize(os.path.join(self.root, path[len("/files/"):]))
        self.assertEqual(st["bytes"].get(path), size, st)

    def check_blob(self, i, sha):
        path = os.path.join(self.nodes[i].cache, "blobs", sha[:2], sha)
        with open(path, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), sha)
