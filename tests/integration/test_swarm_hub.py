"""Hugging Face Hub files through the cluster swarm: four hubd nodes on
loopback, the stand-in Hub (tests/hubstub.py) as hf_upstream. A gated
model downloaded on every node at once crosses the Hub's CDN once per
file; the Hub is asked about each file about once for the cluster (the
nodes share its verdict by a key made from the token), not once per node;
and a node whose user the Hub does not grant gets nothing."""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HUBCTL, Hubd, free_port, write_config  # noqa: E402
from hubstub_fixture import HubStub, clear_env  # noqa: E402
from swarm_fixture import HAVE_FLEET, SwarmCase, make_ca, make_node, two_ports  # noqa: E402

SHARDS = 6
REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
    "repos": [
        {"id": "org/gated", "gated": ["alice", "bob"], "revisions": {"main": "3" * 40},
         "files": dict({"config.json": {"text": "{}\n"}},
                       **{"model-%d.safetensors" % i: {"lfs": {"size": (1 << 20) + i, "seed": 10 + i}}
                          for i in range(SHARDS)})},
    ],
}


@unittest.skipUnless(HAVE_FLEET, "hubd was built without libtorrent-rasterbar")
class SwarmHubTest(unittest.TestCase):
    NODES = 4

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="hubd-swarm-hub-certs-")
        make_ca(cls.certs, "ca")
        make_node(cls.certs, "node", "ca")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certs, ignore_errors=True)

    def setUp(self):
        clear_env(self, ["HF_TOKEN", "HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "HF_HUB_OFFLINE"])
        self.tmp = tempfile.mkdtemp(prefix="hubd-swarm-hub-")
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.members = []
        for i in range(self.NODES):
            ip = "127.0.0.%d" % (41 + i)
            self.members.append("%s:%d" % (ip, two_ports(ip)))
        peers = os.path.join(self.tmp, "peers")
        with open(peers, "w") as f:
            f.write("\n".join(self.members) + "\n")
        self.nodes = []
        for i in range(self.NODES):
            conf = write_config(
                os.path.join(self.tmp, "node%d.conf" % i), hf_upstream=self.stub.hub_url,
                fleet_listen=self.members[i], fleet_peers=peers,
                fleet_ca=os.path.join(self.certs, "ca.pem"),
                fleet_cert=os.path.join(self.certs, "node.pem"),
                fleet_key=os.path.join(self.certs, "node.key"), fleet_wait="5s")
            self.nodes.append(Hubd(os.path.join(self.tmp, "node%d" % i), config=conf))
        self.addCleanup(self.stop_all)

    def stop_all(self):
        for n in self.nodes:
            rc = n.stop()
            log = n.read_log()
            self.assertNotIn("AddressSanitizer", log, log[-6000:])
            self.assertEqual(rc, 0, log[-6000:])
        if SwarmCase._outcome_ok(self):
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            for i, n in enumerate(self.nodes):
                sys.stderr.write("\n--- node %d log ---\n%s\n" % (i, n.read_log()[-5000:]))

    def download(self, i, token, out):
        return subprocess.run(
            [HUBCTL, "--socket", self.nodes[i].socket, "hf", "download", "org/gated",
             "--token", token, "--cache-dir", os.path.join(self.tmp, "hf%d" % i)],
            capture_output=True, text=True, timeout=180)

    def test_a_gated_model_comes_down_once_and_the_hub_is_asked_once_a_file(self):
        res = {}

        def one(i):
            res[i] = self.download(i, "hf_alice", None)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(self.NODES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(200)
        for i, r in res.items():
            self.assertEqual(r.returncode, 0, "node %d: %s" % (i, r.stderr))
        cdn = self.stub.stats("cdn")["requests"]
        hub = self.stub.stats("hub")["requests"]
        # The CDN names each object by its SHA-256: one download of each.
        self.assertEqual(sorted(cdn.values()), [1] * SHARDS, cdn)
        for k in range(SHARDS):
            name = "model-%d.safetensors" % k
            # One question for the cluster (shared by its key), and the
            # seed's own GET; a node each, without the sharing, asks once
            # itself: 4 + 1.
            asked = sum(v for p, v in hub.items() if "/resolve/" in p and p.endswith("/" + name))
            self.assertLessEqual(asked, 3, "%s asked of the Hub: %s" % (name, hub))
        swarmed = sum("bytes from the swarm" in n.read_log() for n in self.nodes)
        self.assertGreaterEqual(swarmed, 2)

    def test_the_hf_front_goes_through_the_swarm(self):
        """Unmodified clients (curl on each node's /hf front, the token in
        Authorization): one CDN download of the file for the cluster."""
        fronts = []
        for i in range(self.NODES):
            self.nodes[i].stop()
            port = free_port()
            conf = self.nodes[i].config
            with open(conf, "a") as f:
                f.write("http_listen = 127.0.0.1:%d\n" % port)
            self.nodes[i] = Hubd(os.path.join(self.tmp, "front%d" % i), config=conf)
            fronts.append(port)
        name = "model-2.safetensors"
        want = hashlib.sha256(self.stub.file_bytes("org/gated", name)).hexdigest()
        res = {}

        def one(i):
            out = os.path.join(self.tmp, "out%d" % i)
            p = subprocess.run(["curl", "-sS", "-f", "-L", "-o", out, "-H",
                                "Authorization: Bearer hf_alice",
                                "http://127.0.0.1:%d/hf/org/gated/resolve/main/%s" % (fronts[i],
                                                                                    name)],
                               capture_output=True, text=True, timeout=120)
            res[i] = (p, out)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(self.NODES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(150)
        for i, (p, out) in res.items():
            self.assertEqual(p.returncode, 0, "node %d: %s" % (i, p.stderr))
            with open(out, "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), want)
        cdn = self.stub.stats("cdn")["requests"]
        self.assertEqual(sum(v for p, v in cdn.items() if want in p), 1, cdn)
        self.assertGreaterEqual(sum("bytes from the swarm" in n.read_log() for n in self.nodes), 2)

    def test_a_user_the_hub_does_not_grant_gets_nothing(self):
        """Carol's token is refused by the Hub: a node holding (and seeding)
        the model does not give it to her."""
        r = self.download(0, "hf_alice", None)
        self.assertEqual(r.returncode, 0, r.stderr)
        for i in range(self.NODES):
            r = self.download(i, "hf_carol", None)
            self.assertNotEqual(r.returncode, 0, "node %d served carol" % i)
            self.assertIn("GatedRepo", r.stderr)


if __name__ == "__main__":
    unittest.main()
