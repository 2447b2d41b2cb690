"""The cluster swarm on one machine: hubd nodes on loopback addresses of
their own (127.0.0.31, .32, ...), one cluster CA, one origin. Each file
crosses the origin once; the other nodes get it from the swarm, checked
against its SHA-256; a node of another CA gets nothing; a seed that is down
gives way to the next node; a node that restarts finishes; a full disk
fails that node only; a blob that leaves the cache is no longer seeded."""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (HUBCTL, Hubd, Origin, free_port, stop_pid, wait_for,  # noqa: E402
                     write_config, write_random_file)

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
    global CERTS
    if not HAVE_FLEET:
        return
    CERTS = tempfile.mkdtemp(prefix="hubd-fleet-certs-")
    make_ca(CERTS, "ca")
    make_ca(CERTS, "other")
    make_node(CERTS, "node", "ca")
    make_node(CERTS, "stranger", "other")


def tearDownModule():
    if CERTS:
        shutil.rmtree(CERTS, ignore_errors=True)


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
class SwarmTest(unittest.TestCase):
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

    def test_the_origin_sends_each_file_once(self):
        sha = write_random_file(os.path.join(self.root, "w.bin"), 24 << 20, seed=3)
        url = self.origin.url("/files/w.bin")
        res = self.fetch_all(range(self.NODES), url, sha)
        for i, r in res.items():
            self.assertEqual(r.returncode, 0, "node %d: %s" % (i, r.stderr))
            self.check_blob(i, sha)
        self.assert_once("/files/w.bin")
        seed = rendezvous(sha, self.members)[0]
        self.assertIn("is the file's seed", self.nodes[seed].read_log())
        for i in range(self.NODES):
            if i != seed:
                self.assertIn("bytes from the swarm", self.nodes[i].read_log())
        # The seed's copy is seeded: STATUS-free evidence in its log.
        wait_for(lambda: "seeding" in self.nodes[seed].read_log(), 20, "the seed to seed")

    def test_a_node_that_asks_late_gets_it_from_the_swarm(self):
        sha = write_random_file(os.path.join(self.root, "late.bin"), 4 << 20, seed=4)
        url = self.origin.url("/files/late.bin")
        order = rendezvous(sha, self.members)
        r = self.fetch(order[0], url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.fetch(order[1], url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(order[1], sha)
        self.assert_once("/files/late.bin")

    def test_the_seed_fetches_what_a_node_asks_for(self):
        """A public file only one node wants: its seed fetches it on that
        node's word (the URL came with the ask), and it still crosses the
        origin once."""
        sha = write_random_file(os.path.join(self.root, "one.bin"), 2 << 20, seed=5)
        url = self.origin.url("/files/one.bin")
        order = rendezvous(sha, self.members)
        r = self.fetch(order[1], url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(order[1], sha)
        self.assert_once("/files/one.bin")
        self.assertIn("fetching it to seed", self.nodes[order[0]].read_log())

    def test_a_seed_that_is_down_gives_way_to_the_next(self):
        sha = write_random_file(os.path.join(self.root, "d.bin"), 4 << 20, seed=6)
        url = self.origin.url("/files/d.bin")
        order = rendezvous(sha, self.members)
        self.nodes[order[0]].stop()
        self.nodes[order[0]] = None
        res = self.fetch_all(order[1:], url, sha)
        for i, r in res.items():
            self.assertEqual(r.returncode, 0, "node %d: %s" % (i, r.stderr))
            self.check_blob(i, sha)
        self.assert_once("/files/d.bin")
        self.assertIn("this node is its seed now", self.nodes[order[1]].read_log())

    def test_the_python_client_goes_through_the_swarm(self):
        """The Python client's fetch(sha256=) on a node that is not the
        seed: through the swarm, and the origin sends the file once (the
        HTTP front's /hf route: test_swarm_hub)."""
        sha = write_random_file(os.path.join(self.root, "p.bin"), 4 << 20, seed=12)
        url = self.origin.url("/files/p.bin")
        order = rendezvous(sha, self.members)
        self.assertEqual(self.fetch(order[0], url, sha).returncode, 0)
        py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client",
                          "python")
        r = subprocess.run([sys.executable, "-c",
                            "import sys, hubd; print(hubd.fetch(sys.argv[1], sha256=sys.argv[2], "
                            "progress=False))", url, sha],
                           env=dict(os.environ, PYTHONPATH=py,
                                    HUBD_SOCKET=self.nodes[order[1]].socket),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(order[1], sha)
        self.assertIn("bytes from the swarm", self.nodes[order[1]].read_log())
        self.assert_once("/files/p.bin")

    def test_a_wrong_digest_fails_and_nothing_is_kept(self):
        sha = write_random_file(os.path.join(self.root, "x.bin"), 1 << 20, seed=7)
        wrong = "0" * 64
        order = rendezvous(wrong, self.members)
        r = self.fetch(order[1], self.origin.url("/files/x.bin"), wrong)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("hash_mismatch", r.stderr + r.stdout)
        self.assertFalse(os.path.exists(
            os.path.join(self.nodes[order[1]].cache, "blobs", sha[:2], sha)))

    def test_a_stranger_gets_no_metadata(self):
        """A node of another cluster (its CA signed its certificate) that
        knows the members' addresses: every member refuses
        its asks, so it fetches the file itself; nothing reached it from
        the swarm."""
        sha = write_random_file(os.path.join(self.root, "s.bin"), 2 << 20, seed=8)
        url = self.origin.url("/files/s.bin")
        order = rendezvous(sha, self.members)
        i = order[1]
        self.nodes[i].stop()
        self.start_node(i, workdir=os.path.join(self.tmp, "stranger"), cert="stranger", ca="other")
        r = self.fetch(i, url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        log = self.nodes[i].read_log()
        self.assertNotIn("bytes from the swarm", log)
        self.assertIn("did not answer", log)

    def test_a_full_disk_fails_that_node_only(self):
        sha = write_random_file(os.path.join(self.root, "big.bin"), 24 << 20, seed=9)
        url = self.origin.url("/files/big.bin")
        order = rendezvous(sha, self.members)
        small = os.path.join(self.tmp, "small")
        os.mkdir(small)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", small], check=True)
        self.addCleanup(lambda: subprocess.run(["umount", "-l", small]))
        i = order[2]
        self.nodes[i].stop()
        self.start_node(i, workdir=os.path.join(small, "n"))
        self.addCleanup(lambda: self.nodes[i] and self.nodes[i].stop())
        res = self.fetch_all(range(self.NODES), url, sha)
        self.assertNotEqual(res[i].returncode, 0)
        self.assertIn("no_space", res[i].stderr)
        for k in range(self.NODES):
            if k != i:
                self.assertEqual(res[k].returncode, 0, "node %d: %s" % (k, res[k].stderr))
        self.assert_once("/files/big.bin")

    def test_a_node_killed_mid_swarm_finishes_after_a_restart(self):
        sha = write_random_file(os.path.join(self.root, "k.bin"), 32 << 20, seed=10)
        url = self.origin.url("/files/k.bin")
        order = rendezvous(sha, self.members)
        self.assertEqual(self.fetch(order[0], url, sha).returncode, 0)
        i = order[1]
        p = subprocess.Popen([HUBCTL, "--socket", self.nodes[i].socket, "fetch", "--sha256", sha,
                              url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: "bytes from the swarm" in self.nodes[i].read_log(), 30, "the swarm")
        self.nodes[i].kill9()
        p.wait(30)
        self.nodes[i].start()
        r = self.fetch(i, url, sha)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_blob(i, sha)
        self.assert_once("/files/k.bin")

    def test_a_model_of_more_files_than_download_slots(self):
        """Eight files on nodes that download two at a time: a download
        waiting for its seed holds no slot, so each node's own seeds start
        and no node waits for fleet_wait (60 s here) to go to the origin."""
        for i in range(self.NODES):
            self.nodes[i].stop()
            self.start_node(i, workdir=os.path.join(self.tmp, "slots%d" % i), max_downloads="2",
                            fleet_wait="60s")
        files = []
        for k in range(8):
            sha = write_random_file(os.path.join(self.root, "m%d.bin" % k), 1 << 20, seed=20 + k)
            files.append((self.origin.url("/files/m%d.bin" % k), sha))
        out = {}

        def node(i):
            # The files this node seeds asked for last: without the slot
            # given up, every node's two slots wait for seeds whose own
            # slots wait in turn.
            mine = sorted(files, key=lambda f: rendezvous(f[1], self.members)[0] == i)
            ps = []
            for url, sha in mine:
                ps.append(subprocess.Popen([HUBCTL, "--socket", self.nodes[i].socket, "fetch",
                                            "--sha256", sha, url], stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True))
                time.sleep(0.05)  # queued in this order
            out[i] = [(p.wait(120), p.stderr.read()) for p in ps]
        t0 = time.monotonic()
        threads = [threading.Thread(target=node, args=(i,)) for i in range(self.NODES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(150)
        for i, rs in out.items():
            for rc, err in rs:
                self.assertEqual(rc, 0, "node %d: %s" % (i, err))
        self.assertLess(time.monotonic() - t0, 50, "a node waited for fleet_wait")
        for k in range(8):
            self.assert_once("/files/m%d.bin" % k)

    def test_a_blob_removed_is_no_longer_seeded(self):
        sha = write_random_file(os.path.join(self.root, "r.bin"), 1 << 20, seed=11)
        url = self.origin.url("/files/r.bin")
        seed = rendezvous(sha, self.members)[0]
        self.assertEqual(self.fetch(seed, url, sha).returncode, 0)
        wait_for(lambda: "seeding" in self.nodes[seed].read_log(), 20, "seeding")
        r = subprocess.run([HUBCTL, "--socket", self.nodes[seed].socket, "rm", sha],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_for(lambda: "no longer seeded" in self.nodes[seed].read_log(), 30, "the sweep")


if __name__ == "__main__":
    unittest.main()
