"""`hubctl fleet status` (FLEET, docs/PROTOCOL.md): on a cluster of three
nodes on loopback (swarm_fixture.py), a file that went through the swarm is
shown seeding, whole, on the node that took it from the swarm, with the
bytes that crossed each peer; the table says what the JSON says; only
admins may ask; a hubd that is not in a swarm says so."""
import json
import os
import re
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HUBCTL, HubTestCase, wait_for, write_random_file  # noqa: E402
from swarm_fixture import SwarmCase, rendezvous, setUpModule, tearDownModule  # noqa: E402,F401


def human(n):
    """hubctl's sizes (out_bytes): "512 B", "1.5 KiB", "48.0 MiB"."""
    if n < 1024:
        return "%d B" % n
    v, units = n / 1024, ["KiB", "MiB", "GiB", "TiB"]
    u = 0
    while v >= 1023.95 and u + 1 < len(units):
        v /= 1024
        u += 1
    return "%.1f %s" % (v, units[u])


def tables(text):
    """The text form's tables: {first heading: [row cells]}; cells are
    apart by two spaces or more (a size is "48.0 MiB")."""
    out, cur = {}, None
    for line in text.splitlines():
        cells = re.split(r" {2,}", line.strip())
        if cells[0] in ("SHA256", "PEER"):
            cur = out.setdefault(cells[0], [])
            continue
        if not line.strip():
            cur = None
        elif cur is not None:
            cur.append(cells)
    return out


class SwarmStatusTest(SwarmCase):
    NODES = 3

    def status(self, i, *args, json_out=True):
        r = subprocess.run([HUBCTL, "--socket", self.nodes[i].socket, "fleet", "status"]
                           + (["--json"] if json_out else []) + list(args),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r)
        return json.loads(r.stdout) if json_out else r.stdout

    def file_row(self, i, sha):
        rows = [f for f in self.status(i)["files"] if f["sha256"] == sha]
        return rows[0] if rows else None

    def test_a_file_through_the_swarm_is_shown_with_its_peers(self):
        size = 48 << 20
        sha = write_random_file(os.path.join(self.root, "st.bin"), size, seed=21)
        url = self.origin.url("/files/st.bin")
        seed, taker = rendezvous(sha, self.members)[:2]
        self.assertEqual(self.fetch(seed, url, sha).returncode, 0)
        wait_for(lambda: (self.file_row(seed, sha) or {}).get("state") == "seeding", 30,
                 "the seed to seed")
        # The peers' bytes are counted on the connections open now: looked
        # at while the file crosses, and after.
        samples, stop = [], threading.Event()

        def watch():  # a failure here shows as no sample, asserted below
            while not stop.is_set():
                for i in (taker, seed):
                    r = subprocess.run([HUBCTL, "--socket", self.nodes[i].socket, "fleet",
                                        "status", "--json"], capture_output=True, text=True)
                    if r.returncode == 0:
                        samples.append((i, json.loads(r.stdout)))
        t = threading.Thread(target=watch)
        t.start()
        try:
            r = self.fetch(taker, url, sha)
        finally:
            stop.set()
            t.join(60)
        self.assertEqual(r.returncode, 0, r.stderr)
        samples.append((seed, self.status(seed)))
        self.assertTrue(any(p["down"] > 0 for i, s in samples if i == taker for p in s["peers"])
                        or any(p["up"] > 0 for i, s in samples if i == seed for p in s["peers"]),
                        samples[-6:])

        wait_for(lambda: (self.file_row(taker, sha) or {}).get("state") == "seeding", 30,
                 "the taker to seed what it took")
        st = self.status(taker)
        f = [f for f in st["files"] if f["sha256"] == sha][0]
        self.assertEqual((f["size"], f["done"]), (size, size), f)
        self.assertEqual(st["node"]["listen"], self.members[taker])
        self.assertEqual(st["node"]["members"], self.NODES)
        self.assertEqual(st["node"]["from_swarm"], 1, st)
        self.assertGreater(st["node"]["down"], 0, st)
        self.assertEqual(st["files_left_off"], 0)
        st = self.status(seed)
        f = [f for f in st["files"] if f["sha256"] == sha][0]
        self.assertRegex(f["info_hash_v1"], "^[0-9a-f]{40}$")  # a tracker's whitelist names it
        self.assertRegex(f["info_hash"], "^[0-9a-f]{64}$")
        self.assertEqual(st["node"]["seeded_from_origin"], 1, st)
        self.assertGreater(st["node"]["up"], 0, st)

        # The table shows the same rows: each file by its digest's first
        # 12 digits, state, size and done; the peers by address. A peer
        # may come and go between two looks (a node seeding it too connects
        # and is let go): looked at again until the JSON before and after
        # the table agree.
        for i in (taker, seed):
            for _ in range(20):
                before, text, after = self.status(i), self.status(i, json_out=False), self.status(i)
                self.assertIn("node %s, one of 3 members" % self.members[i], text)
                got = tables(text)
                want = [[f["sha256"][:12], f["state"], human(f["size"]), human(f["done"])]
                        for f in before["files"]]
                self.assertEqual([row[:4] for row in got.get("SHA256", [])], want, text)
                peers = sorted(p["addr"] for p in before["peers"])
                if peers == sorted(p["addr"] for p in after["peers"]) and \
                        peers == sorted(row[0] for row in got.get("PEER", [])):
                    break
            else:
                self.fail("the table's peers are not the JSON's: %s\n%s" % (before, text))
            if not peers:
                self.assertIn("no peer connected", text)

    def test_only_admins_see_the_swarm(self):
        """FLEET names the files of every user's downloads: root, hubd's
        user and the admin group only."""
        node = self.nodes[0]
        for d in (self.tmp, node.workdir):  # let another user reach the socket
            os.chmod(d, 0o755)
        os.chmod(node.socket, 0o666)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            HUBCTL, "--socket", node.socket, "fleet", "status", "--json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r)
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "permission_denied", r)
        self.assertIn("admin group", r.stderr)
        self.assertIn("FLEET refused", node.read_log())
        self.assertEqual(self.status(0)["node"]["listen"], self.members[0])  # root may


class NoSwarmTest(HubTestCase):
    def test_a_hubd_not_in_a_swarm_says_so(self):
        r = self.hubctl("fleet", "status")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("not_in_swarm", r.err)
        self.assertIn("this hubd is not in a swarm", r.err)
        self.assertEqual(r.out, "")
        r = self.hubctl("fleet", "status", "--json")
        self.assertEqual(r.rc, 1, r)
        err = json.loads(r.out)["error"]
        self.assertEqual(err["code"], "not_in_swarm")
        self.assertIn("not in a swarm", err["message"])

    def test_fleet_needs_its_subcommand(self):
        for args, says in ((["fleet"], "fleet takes a subcommand: status"),
                           (["fleet", "peers"], "unknown subcommand 'peers'"),
                           (["fleet", "status", "x"], "fleet takes a subcommand: status")):
            r = self.hubctl(*args)
            self.assertEqual(r.rc, 2, r)
            self.assertIn(says, r.err)
        r = self.hubctl("fleet", "status", "--help")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("Usage: hubctl [--socket PATH] fleet status [--json]", r.out)


if __name__ == "__main__":
    unittest.main()
