"""hubctl fetch over HTTP: bodies, redirects, errors, and what gets stored."""

import json
import os
import unittest

from harness import HubTestCase, Origin, sha256_file


class FetchTest(HubTestCase):
    def test_fetch_content_length_body(self):
        digest = self.make_file("a.bin", 3 * 1024 * 1024 + 17)
        r = self.hubctl("fetch", self.origin.url("/files/a.bin"))
        self.assertEqual(r.rc, 0, r)
        path = r.out.strip()
        self.assertEqual(os.path.basename(path), digest)
        self.assertEqual(sha256_file(path), digest)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o444)
        self.assertEqual(self.hubd.tmp_files(), [])

    def test_fetch_chunked_body(self):
        digest = self.make_file("c.bin", 1024 * 1024 + 3)
        r = self.hubctl("fetch", "--json", self.origin.url("/chunked/c.bin"))
        self.assertEqual(r.rc, 0, r)
        res = json.loads(r.out)
        self.assertTrue(res["ok"])
        self.assertEqual(res["sha256"], digest)
        self.assertEqual(res["size"], 1024 * 1024 + 3)
        self.assertEqual(sha256_file(res["path"]), digest)

    def test_fetch_empty_file(self):
        digest = self.make_file("empty", 0)
        r = self.hubctl("fetch", self.origin.url("/files/empty"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)
        self.assertEqual(os.path.getsize(r.out.strip()), 0)

    def test_fetch_follows_redirect_chain(self):
        digest = self.make_file("r.bin", 200000)
        # Five hops: 301, 302, 303, 307, 308, absolute and relative Locations.
        r = self.hubctl("fetch", "--json", self.origin.url("/redirect/5/files/r.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        self.assertEqual(self.origin.requests_for("/files/r.bin"), 1)
        # The entry is under the URL that was asked for: a second fetch is a hit.
        r = self.hubctl("fetch", "--json", self.origin.url("/redirect/5/files/r.bin"))
        self.assertEqual(json.loads(r.out)["source"], "hit")

    def test_fetch_redirect_loop_fails(self):
        r = self.hubctl("fetch", self.origin.url("/redirect-loop"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("redirect", r.err)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_fetch_404_exit_1_with_code(self):
        r = self.hubctl("fetch", self.origin.url("/files/missing"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("http_404", r.err)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_fetch_500_exit_1(self):
        r = self.hubctl("fetch", "--json", self.origin.url("/status/500"))
        self.assertEqual(r.rc, 1, r)
        res = json.loads(r.out)
        self.assertFalse(res["ok"])
        self.assertEqual(res["error"]["code"], "http_500")

    def test_fetch_truncated_body_is_an_error(self):
        self.make_file("t.bin", 500000)
        r = self.hubctl("fetch", self.origin.url("/files/t.bin?truncate=100000"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("truncated", r.err)
        self.assertEqual(self.hubd.blob_files(), [])
        self.hubd.wait_no_partials()

    def test_fetch_hash_mismatch_stores_nothing(self):
        self.make_file("h.bin", 300000)
        wrong = "0" * 64
        r = self.hubctl("fetch", "--sha256", wrong, self.origin.url("/files/h.bin"))
        self.assertEqual(r.rc, 4, r)
        self.assertIn("hash_mismatch", r.err)
        self.assertEqual(self.hubd.blob_files(), [])
        self.assertEqual(self.hubd.tmp_files(), [])
        ls = self.hubctl("ls", "--json")
        self.assertEqual(json.loads(ls.out), [])

    def test_fetch_with_right_sha256(self):
        digest = self.make_file("ok.bin", 123456)
        r = self.hubctl("fetch", "--sha256", digest.upper(), self.origin.url("/files/ok.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)

    def test_fetch_connection_refused(self):
        port = self.origin.port
        self.origin.stop()
        r = self.hubctl("fetch", "http://127.0.0.1:%d/files/x" % port)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("connect", r.err)

    def test_fetch_unresolvable_host(self):
        r = self.hubctl("fetch", "http://no-such-host.invalid/x")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("dns", r.err)

    def test_fetch_several_urls_in_one_call(self):
        d1 = self.make_file("m1", 100000, seed=1)
        d2 = self.make_file("m2", 200000, seed=2)
        r = self.hubctl("fetch", self.origin.url("/files/m1"), self.origin.url("/files/m2"))
        self.assertEqual(r.rc, 0, r)
        paths = r.out.split()
        self.assertEqual([os.path.basename(p) for p in paths], [d1, d2])

    def test_fetch_output_file(self):
        digest = self.make_file("o.bin", 2 * 1024 * 1024)
        dest = os.path.join(self.tmp, "out.bin")
        r = self.hubctl("fetch", "-o", dest, self.origin.url("/files/o.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.out.strip(), dest)
        self.assertEqual(sha256_file(dest), digest)
        self.assertEqual(os.stat(dest).st_mode & 0o200, 0o200)  # the user's own, writable copy

    def test_keepalive_reuses_connection(self):
        self.make_file("k1", 1000, seed=1)
        self.make_file("k2", 1000, seed=2)
        for name in ("k1", "k2"):
            r = self.hubctl("fetch", self.origin.url("/files/" + name))
            self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.origin.stats()["connections"], 1)

    def test_fetch_localhost_name_resolves(self):
        # A host name goes through uv_getaddrinfo in the thread pool.
        digest = self.make_file("n.bin", 1000)
        r = self.hubctl("fetch", "http://localhost:%d/files/n.bin" % self.origin.port)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)


class FetchIPv6Test(HubTestCase):
    origin_bind = "::1"

    def test_fetch_over_ipv6_literal(self):
        digest = self.make_file("v6.bin", 65536 * 3)
        r = self.hubctl("fetch", self.origin.url("/files/v6.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)

if __name__ == "__main__":
    unittest.main()
