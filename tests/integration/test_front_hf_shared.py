"""A gated file comes down once per machine: through the
HTTP front's /hf route, two users whose different tokens the Hub accepts
for one gated repo share one download of an LFS file, one after the other
(a hit) or at once (one job), because the Hub named its SHA-256 to each of
them (X-Linked-Etag, asked with each client's own token). A token the Hub
refuses gets the Hub's error and never a byte, even when the refusal names
the digest; wrong bytes from the CDN are nobody's; and a download that
fails for the user who started it goes on for the other with the other's
own token. The stand-in Hub is tests/hubstub.py (its /control/hold and
/control/hostile switches).
"""

import hashlib
import http.client
import os
import random
import threading
import time
import urllib.parse

from harness import HubTestCase, wait_for
from hubstub_fixture import HubStub, start_front

ALICE = {"Authorization": "Bearer hf_alice"}
BOB = {"Authorization": "Bearer hf_bob"}
CAROL = {"Authorization": "Bearer hf_carol"}  # a valid token, not granted

GATED_SHA = hashlib.sha256(random.Random(22).randbytes(3 * 1024 * 1024)).hexdigest()
REPOS = {
    "tokens": {"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
    "repos": [
        {"id": "org/gated", "gated": ["alice", "bob"],
         "files": {"g.bin": {"lfs": {"size": 3 * 1024 * 1024, "seed": 22}},
                   "README.md": {"text": "gated\n"}}},
        # Anyone's public repo whose pointer names the gated file's digest,
        # its object never uploaded: the Hub names the digest, and the CDN
        # has nothing for this repo.
        {"id": "evil/borrow",
         "files": {"b.bin": {"lfs_pointer": {"sha256": GATED_SHA, "size": 3 * 1024 * 1024}}}},
    ],
}


def get(url, headers=None, method="GET"):
    """(status, headers, body, whole): whole is False when the body was cut
    short of its Content-Length (a streamed answer that failed)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request(method, u.path, headers=headers or {})
        r = conn.getresponse()
        try:
            body, whole = r.read(), True
        except http.client.IncompleteRead as e:
            body, whole = e.partial, False
        except (ConnectionError, OSError):
            body, whole = b"", False
        return r.status, r.headers, body, whole
    finally:
        conn.close()


class SharedGatedTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.port = start_front(self, self.stub)
        self.url = "http://127.0.0.1:%d/hf/org/gated/resolve/main/g.bin" % self.port
        self.data = self.stub.file_bytes("org/gated", "g.bin")
        self.sha = hashlib.sha256(self.data).hexdigest()
        self.cdn_path = "/cdn/" + self.sha

    def cdn_requests(self):
        return self.stub.stats("cdn")["requests"].get(self.cdn_path, 0)

    def assert_served(self, out, source=None):
        st, h, body, whole = out
        self.assertEqual((st, whole, len(body)), (200, True, len(self.data)), body[:200])
        self.assertEqual(hashlib.sha256(body).hexdigest(), self.sha)
        if source:
            self.assertEqual(h["X-Hubd-Source"], source)

    def assert_refused(self, out, status):
        st, h, body, _ = out
        self.assertEqual(st, status, body[:200])
        self.assertIsNone(h["X-Hubd-Sha256"])
        self.assertLess(len(body), 4096)
        self.assertNotIn(self.data[:64], body)

    def at_once(self, *calls, gap=0.3):
        """Runs each (headers) GET in a thread, gap seconds apart; their
        answers in order."""
        outs = [None] * len(calls)

        def run(i, hdrs):
            outs[i] = get(self.url, hdrs)
        threads = []
        for i, hdrs in enumerate(calls):
            t = threading.Thread(target=run, args=(i, hdrs))
            t.start()
            threads.append(t)
            time.sleep(gap)
        for t in threads:
            t.join(90)
        return outs

    def test_two_granted_tokens_one_after_the_other_download_once(self):
        self.assert_served(get(self.url, ALICE))
        self.assertEqual(self.cdn_requests(), 1)
        # bob's token is asked about, and accepted: alice's blob is his hit.
        self.assert_served(get(self.url, BOB), "hit")
        self.assertEqual(self.cdn_requests(), 1)
        auth = self.stub.stats("hub")["auth"]["/org/gated/resolve/main/g.bin"]
        self.assertEqual(auth, ["Bearer hf_alice", "Bearer hf_bob"])
        # the one entry is alice's; bob was served by digest
        self.assertEqual(len(self.hubd.blob_files()), 1)

    def test_two_granted_tokens_at_once_download_once(self):
        # alice's download waits a second at the Hub: bob asks meanwhile.
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        a, b = self.at_once(ALICE, BOB)
        self.assert_served(a)
        self.assert_served(b, "attached")
        self.assertEqual(self.cdn_requests(), 1)

    def test_a_token_not_granted_gets_the_hubs_error_and_no_bytes(self):
        # carol asks while alice's download runs, then once it is stored
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        a, c = self.at_once(ALICE, CAROL)
        self.assert_served(a)
        self.assert_refused(c, 403)
        self.assertEqual(c[1]["X-Error-Code"], "GatedRepo")
        for _ in range(2):  # the second time too (nothing remembered for carol)
            self.assert_refused(get(self.url, CAROL), 403)
            self.assert_refused(get(self.url), 401)
        self.assert_served(get(self.url, BOB), "hit")
        self.assertEqual(self.cdn_requests(), 1)

    def test_a_hub_that_names_the_digest_in_a_refusal_opens_nothing(self):
        self.stub.control("hostile", {"on": True})
        # the stub's own refusal names the file
        st, h, _, _ = get(self.stub.hub_url + "/org/gated/resolve/main/g.bin", CAROL)
        self.assertEqual((st, h["X-Linked-Etag"]), (403, '"%s"' % self.sha))
        self.assert_served(get(self.url, ALICE))
        out = get(self.url, CAROL)
        self.assert_refused(out, 403)
        self.assertIsNone(out[1]["X-Linked-Etag"])
        self.assert_refused(get(self.url), 401)
        self.assert_refused(get(self.url, CAROL, "HEAD"), 403)
        self.assertEqual(self.cdn_requests(), 1)

    def test_a_pointer_in_another_repo_naming_the_digest_opens_nothing(self):
        """A public repo's LFS pointer names the gated file's digest, its
        object never uploaded: the Hub names that digest to anyone, but
        the CDN holds nothing for that repo, so the digest vouches for
        nobody. Before, Carol (not granted) and a client without a token
        got the gated bytes from the cache through the other repo."""
        self.assertEqual(GATED_SHA, self.sha)
        self.assert_served(get(self.url, ALICE))
        borrow = "http://127.0.0.1:%d/hf/evil/borrow/resolve/main/b.bin" % self.port
        for hdrs in (CAROL, None):
            st, h, body, _ = out = get(borrow, hdrs)
            self.assertNotEqual(st, 200, h)
            self.assertNotIn(self.data[:4096], body)
            self.assertIsNone(h["X-Hubd-Sha256"])
        # The Hub did name the digest; the CDN was asked for one byte of
        # the other repo's object, and had none.
        st, h, _, _ = get(self.stub.hub_url + "/evil/borrow/resolve/main/b.bin")
        self.assertEqual((st, h["X-Linked-Etag"]), (302, '"%s"' % self.sha))
        self.assertGreaterEqual(self.stub.stats("cdn")["probes"].get(self.cdn_path, 0), 2)
        self.assertEqual(self.cdn_requests(), 3)  # Alice's download, then each refused try
        # Alice's own file still comes from the cache.
        self.assert_served(get(self.url, BOB), "hit")

    def test_wrong_bytes_from_the_cdn_are_served_and_kept_for_nobody(self):
        self.stub.corrupt(self.sha, "flip")
        self.stub.control("hold", {"user": "alice", "delay": 1.0, "status": None})
        outs = self.at_once(ALICE, BOB)
        outs.append(get(self.url, BOB))
        for st, h, body, whole in outs:
            # refused before the answer began (502 hash_mismatch), or cut
            # short of its length while streamed: never the file whole
            if whole:
                self.assertEqual((st, h["X-Hubd-Error"]), (502, "hash_mismatch"))
            self.assertLess(len(body), len(self.data))
        self.assertEqual(self.hubd.blob_files(), [])
        self.assertEqual(self.hubd.query("SELECT count(*) FROM entries")[0][0], 0)
        self.stub.corrupt(self.sha, None)
        self.stub.control("hold", {"user": None})
        self.assert_served(get(self.url, BOB))

    def test_a_download_that_fails_for_its_starter_goes_on_with_the_others_token(self):
        # alice's download is refused by the Hub after a second (her access
        # went meanwhile); bob, who joined it, goes on with his own token.
        self.stub.control("hold", {"user": "alice", "delay": 1.5, "status": 403})
        a, b = self.at_once(ALICE, BOB)
        self.assert_refused(a, 403)
        self.assert_served(b, "attached")
        self.assertEqual(self.cdn_requests(), 1)
        pinned = [p for p in self.stub.stats("hub")["auth"] if p != "/org/gated/resolve/main/g.bin"]
        self.assertEqual(len(pinned), 1, pinned)
        self.assertEqual(self.stub.stats("hub")["auth"][pinned[0]], ["Bearer hf_alice", "Bearer hf_bob"])
        wait_for(lambda: "goes on in job" in self.hubd.read_log(), what="the restart logged")
        self.assertIn("with its own credentials", self.hubd.read_log())
        self.assertNotIn("hf_bob", self.hubd.read_log())
        self.assertNotIn("hf_alice", self.hubd.read_log())


if __name__ == "__main__":
    import unittest
    unittest.main()
