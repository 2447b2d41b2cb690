"""The HTTP front's Hugging Face endpoint: resolve and the API
routes (info, tree, paths-info): hubd's /hf in front of the stand-in Hub
(tests/hubstub.py), asked by urllib as huggingface_hub asks, and by the
real @huggingface/hub from npm.
"""

import hashlib
import http.client
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
import unittest

from harness import SLOW, SLOWED, HubTestCase, Hubd, sha256_file, wait_for, write_config
from hubstub_fixture import HubStub, git_blob_sha1, start_front

from test_hubstub import JS_DIR, HUBCLIENT, REPOS, request

MAIN = "1" * 40
TAG = "2" * 40


def setUpModule():
    if shutil.which("node") is None or not os.path.isdir(
            os.path.join(JS_DIR, "node_modules", "@huggingface", "hub")):
        raise RuntimeError("node or tests/js/node_modules missing: run scripts/install-deps.sh")


def vm_bytes(pid, key):
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":")) * 1024


def read_head(s):
    """(status, head) of the answer on s, read no further than its head."""
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 4096:
        b = s.recv(1)
        if not b:
            break
        head += b
    return (int(head.split()[1]) if head else 0), head


class HfTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS, page_size=2)
        self.addCleanup(self.stub.stop)
        self.port = start_front(self, self.stub)
        self.hf = "http://127.0.0.1:%d/hf" % self.port

    def resolve(self, path, rev="main", repo="org/model"):
        return "%s/%s/resolve/%s/%s" % (self.hf, repo, rev, path)

    def js(self, cmd, *args, repo="org/model"):
        p = subprocess.run(["node", HUBCLIENT, cmd, "--hub-url", self.hf, "--repo", repo] + list(args),
                           capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def assert_no_hint(self, headers):
        self.assertIsNone(headers.get("Location"))
        for k in headers.keys():
            self.assertFalse(k.lower().startswith("x-xet"), k)
        self.assertNotIn("xet", headers.get("Link", ""))

    def test_head_answers_what_huggingface_hub_reads(self):
        small = self.stub.file_bytes("org/model", "config.json")
        st, h, _ = request(self.resolve("config.json"), "HEAD")
        self.assertEqual(st, 200)
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        self.assertEqual(h["ETag"], '"%s"' % git_blob_sha1(small))
        self.assertEqual(int(h["Content-Length"]), len(small))
        self.assert_no_hint(h)
        big = self.stub.file_bytes("org/model", "model.safetensors")
        sha = hashlib.sha256(big).hexdigest()
        st, h, _ = request(self.resolve("model.safetensors", rev="v1.0"), "HEAD")
        self.assertEqual(st, 200)  # never the Hub's 302: the front follows it
        self.assertEqual((h["X-Linked-Etag"], h["X-Linked-Size"]), ('"%s"' % sha, str(len(big))))
        self.assertEqual(h["X-Repo-Commit"], "2" * 40)
        self.assertEqual(int(h["Content-Length"]), len(big))
        self.assert_no_hint(h)
        self.assertEqual(self.stub.stats("cdn")["requests"], {})  # a HEAD fetches no body

    def test_get_is_pinned_to_the_commit_and_verified(self):
        big = self.stub.file_bytes("org/model", "model.safetensors")
        sha = hashlib.sha256(big).hexdigest()
        outs = [None] * 4

        def get(i):
            outs[i] = request(self.resolve("model.safetensors"))
        threads = [threading.Thread(target=get, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for st, h, body in outs:
            self.assertEqual((st, hashlib.sha256(body).hexdigest()), (200, sha))
            self.assertEqual(h["X-Repo-Commit"], MAIN)
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})
        # By a tag of the same commit... and as the same content anywhere: hits.
        st, h, body = request(self.resolve("model.safetensors", rev=MAIN))
        self.assertEqual((st, h["X-Hubd-Source"]), (200, "hit"))
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})
        rows = self.hubd.query("SELECT url FROM entries")
        self.assertIn(("%s/org/model/resolve/%s/model.safetensors" % (self.stub.hub_url, MAIN),),
                      rows)

    def test_a_get_after_a_head_is_served_from_what_the_head_was_told(self):
        st, h, _ = request(self.resolve("config.json"), "HEAD")
        self.assertEqual((st, h["X-Repo-Commit"]), (200, MAIN))
        st, h, body = request(self.resolve("config.json"))
        self.assertEqual((st, body), (200, self.stub.file_bytes("org/model", "config.json")))
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        asked = self.stub.stats("hub")["requests"]
        # The HEAD asked the Hub; the GET, with the same (no) credentials,
        # took the HEAD's answer and downloaded the commit it named.
        self.assertEqual(asked.get("/org/model/resolve/main/config.json"), 1, asked)
        self.assertEqual(asked.get("/org/model/resolve/%s/config.json" % MAIN, 0), 1, asked)
        self.assertEqual(self.stub.stats("hub")["methods"]["/org/model/resolve/%s/config.json"
                                                          % MAIN], ["GET"])
        # Other credentials are another asker: what the HEAD without them
        # was told is not theirs, so they ask the Hub for the revision.
        st, h, body = request(self.resolve("config.json"),
                              headers={"Authorization": "Bearer hf_alice"})
        self.assertEqual((st, h["X-Repo-Commit"]), (200, MAIN))
        asked = self.stub.stats("hub")["requests"]
        self.assertEqual(asked.get("/org/model/resolve/main/config.json"), 2, asked)
        self.assertEqual(self.stub.stats("hub")["auth"]["/org/model/resolve/main/config.json"],
                         ["", "Bearer hf_alice"])

    def test_a_token_the_hub_accepted_is_remembered_briefly_by_its_tag(self):
        path = "/org/gated/resolve/main/g.bin"
        alice = {"Authorization": "Bearer hf_alice"}
        for _ in range(3):
            st, h, body = request(self.resolve("g.bin", repo="org/gated"), headers=alice)
            self.assertEqual(st, 200)
        # The Hub was asked once for alice: her token stays accepted a moment.
        self.assertEqual(self.stub.stats("hub")["auth"][path], ["Bearer hf_alice"])
        # bob's and no token are asked, each time, and refused as the Hub refuses.
        for _ in range(2):
            st, h, _ = request(self.resolve("g.bin", repo="org/gated"),
                               headers={"Authorization": "Bearer hf_bob"})
            self.assertEqual((st, h["X-Error-Code"]), (403, "GatedRepo"))
            st, h, _ = request(self.resolve("g.bin", repo="org/gated"))
            self.assertEqual(st, 401)
        self.assertEqual(self.stub.stats("hub")["auth"][path],
                         ["Bearer hf_alice", "Bearer hf_bob", "", "Bearer hf_bob", ""])

    def test_errors_pass_with_the_hubs_codes(self):
        st, h, body = request(self.resolve("missing.txt"))
        self.assertEqual((st, h["X-Error-Code"]), (404, "EntryNotFound"))
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        st, h, _ = request(self.resolve("config.json", rev="nope"))
        self.assertEqual((st, h["X-Error-Code"]), (404, "RevisionNotFound"))
        st, h, _ = request(self.resolve("g.bin", repo="org/gated"))
        self.assertEqual(st, 401)
        st, h, body = request(self.resolve("g.bin", repo="org/gated"),
                              headers={"Authorization": "Bearer hf_alice"})
        self.assertEqual(st, 200)
        # bob's token is refused by the Hub: the file alice's fetch cached
        # is not his.
        st, h, _ = request(self.resolve("g.bin", repo="org/gated"),
                           headers={"Authorization": "Bearer hf_bob"})
        self.assertEqual((st, h["X-Error-Code"]), (403, "GatedRepo"))

    def test_a_renamed_repo_is_followed_by_the_front(self):
        st, h, body = request(self.resolve("m.txt", repo="old-org/moved"))
        self.assertEqual((st, body), (200, b"moved"))
        self.assert_no_hint(h)

    def test_a_corrupted_cdn_never_delivers_the_file_whole(self):
        data = self.stub.file_bytes("org/model", "shards/part-1.bin")
        sha = hashlib.sha256(data).hexdigest()
        self.stub.corrupt(sha, "flip")
        out = os.path.join(self.tmp, "c.out")
        r = subprocess.run(["curl", "-sS", "-o", out, "-w", "%{http_code}",
                            self.resolve("shards/part-1.bin")], capture_output=True, timeout=60)
        # Either the download was verified (and refused) before the answer
        # began: a 502 that says so; or it was being streamed: the body is
        # cut short of its Content-Length (curl: 18). Never the file.
        if r.returncode == 0:
            self.assertEqual(r.stdout, b"502")
            with open(out, "rb") as f:
                self.assertIn(b"sha256", f.read())
        else:
            self.assertEqual(r.returncode, 18, r)
        self.assertLess(os.path.getsize(out), len(data))
        self.assertEqual(self.hubd.blob_files(), [])
        self.stub.corrupt(sha, None)
        r = subprocess.run(["curl", "-sS", "-o", out, self.resolve("shards/part-1.bin")],
                           capture_output=True, timeout=60)
        self.assertEqual((r.returncode, sha256_file(out)), (0, sha))

    def test_a_small_file_is_checked_against_its_git_sha1(self):
        data = self.stub.file_bytes("org/model", "tokenizer/vocab.txt")
        self.stub.corrupt(git_blob_sha1(data), "flip")
        st, h, body = request(self.resolve("tokenizer/vocab.txt"))
        self.assertEqual((st, h["X-Hubd-Error"]), (502, "hash_mismatch"))
        self.assertNotEqual(body, data)
        # The refused file is forgotten (removed as hubctl rm does): the
        # next request downloads it again.
        wait_for(lambda: self.hubd.query(
            "SELECT count(*) FROM entries WHERE url LIKE '%vocab.txt'")[0][0] == 0,
            what="the refused entry to go")
        self.stub.corrupt(git_blob_sha1(data), None)
        st, h, body = request(self.resolve("tokenizer/vocab.txt", rev=MAIN))
        self.assertEqual((st, body), (200, data))

    def test_a_private_small_file_refused_is_forgotten_for_its_token(self):
        """The entry of a file fetched with a token (its credential tag) is
        the one forgotten."""
        data = self.stub.file_bytes("org/private", "p.txt")
        alice = {"Authorization": "Bearer hf_alice"}
        self.stub.corrupt(git_blob_sha1(data), "flip")
        st, h, _ = request(self.resolve("p.txt", repo="org/private"), headers=alice)
        self.assertEqual((st, h["X-Hubd-Error"]), (502, "hash_mismatch"))
        self.assertEqual(self.hubd.query(
            "SELECT count(*) FROM entries WHERE url LIKE '%p.txt'")[0][0], 0)
        self.stub.corrupt(git_blob_sha1(data), None)
        st, h, body = request(self.resolve("p.txt", repo="org/private"), headers=alice)
        self.assertEqual((st, body), (200, data))

    def test_huggingface_js_downloads_through_the_front(self):
        for path in ("config.json", "model.safetensors"):
            with self.subTest(path=path):
                data = self.stub.file_bytes("org/model", path)
                out = os.path.join(self.tmp, path.replace("/", "_"))
                r = self.js("download", "--path", path, "--out", out)
                self.assertTrue(r["ok"], r)
                self.assertEqual(sha256_file(out), hashlib.sha256(data).hexdigest())
                for _, url, _, _, final in r["requests"]:
                    self.assertTrue(final.startswith(self.hf), final)  # never around the front
        sha = hashlib.sha256(self.stub.file_bytes("org/model", "model.safetensors")).hexdigest()
        self.assertEqual(self.stub.stats("cdn")["requests"], {"/cdn/" + sha: 1})

    def test_huggingface_js_concurrent_downloads_through_the_front(self):
        """Two jobs, each with three copies of three files in flight at once
        (downloadFile under Promise.all): each LFS file comes from the CDN
        once, every copy is right."""
        paths = ["shards/part-1.bin", "shards/part-2.bin", "config.json"]
        args = []
        for p in paths:
            args += ["--path", p]
        procs = []
        for k in range(2):
            d = os.path.join(self.tmp, "js%d" % k)
            os.makedirs(d)
            procs.append(subprocess.Popen(
                ["node", HUBCLIENT, "download-many", "--hub-url", self.hf, "--repo", "org/model",
                 "--dir", d, "--copies", "3"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err.decode())
            r = json.loads(out.decode().strip().splitlines()[-1])
            self.assertTrue(r["ok"], r)
            self.assertEqual(len(r["results"]), 9)
            for res in r["results"]:
                data = self.stub.file_bytes("org/model", res["path"])
                self.assertEqual(res["sha256"], hashlib.sha256(data).hexdigest(), res["path"])
        cdn = self.stub.stats("cdn")["requests"]
        self.assertEqual(sorted(cdn.values()), [1, 1], cdn)
        self.assertEqual(self.stub.stats("cdn")["methods"].keys(), cdn.keys())
        for path, methods in self.stub.stats("cdn")["methods"].items():
            self.assertEqual(methods, ["GET"], path)

    # --- the API routes ------------------------------------------------------
    def both(self, path, method="GET", headers=None, data=None):
        """(front's answer, stub's answer) to the same API path."""
        return (request(self.hf + path, method, headers, data),
                request(self.stub.hub_url + path, method, headers, data))

    def test_api_info_with_and_without_revision(self):
        for path in ("/api/models/org/model", "/api/models/org/model?blobs=true",
                     "/api/models/org/model/revision/v1.0", "/api/models/org/model/revision/" + TAG,
                     "/api/datasets/org/data", "/api/models/org/xet"):
            with self.subTest(path=path):
                (st, h, body), (sst, _, sbody) = self.both(path)
                self.assertEqual((st, sst), (200, 200))
                self.assertTrue(h["Content-Type"].startswith("application/json"), h["Content-Type"])
                self.assertEqual(int(h["Content-Length"]), len(body))
                want = json.loads(sbody)
                want.pop("xetEnabled", None)
                self.assertEqual(json.loads(body), want)
                self.assertNotIn(b"xetEnabled", body)
                self.assert_no_hint(h)
        _, _, body = request(self.hf + "/api/models/org/model/revision/v1.0")
        self.assertEqual(json.loads(body)["sha"], TAG)
        self.assertIn(b"xetEnabled", request(self.stub.hub_url + "/api/models/org/xet")[2])

    def follow_tree(self, url):
        """Every entry of a paged tree, following each Link; asserts each
        Link points at the front."""
        entries, pages = [], 0
        while url:
            st, h, body = request(url)
            self.assertEqual(st, 200, body)
            entries += json.loads(body)
            pages += 1
            link = h["Link"]
            url = None
            if link:
                self.assertTrue(link.startswith("<%s/api/" % self.hf), link)
                self.assertTrue(link.endswith('>; rel="next"'), link)
                url = link[1:link.index(">")]
        return entries, pages

    def test_api_tree_pages_through_the_front(self):
        q = "/api/models/org/model/tree/main?recursive=true&expand=true"
        entries, pages = self.follow_tree(self.hf + q)
        self.assertEqual(pages, 5)
        want = []
        url = self.stub.hub_url + q
        while url:
            _, h, body = request(url)
            want += json.loads(body)
            url = h["Link"][1:h["Link"].index(">")] if h["Link"] else None
        self.assertEqual(entries, want)
        self.assertEqual(len(entries), 10)
        # a path, one page; a percent-encoded revision passes as it is
        st, _, body = request(self.hf + "/api/models/org/model/tree/v1.0/tokenizer")
        self.assertEqual([e["path"] for e in json.loads(body)], ["tokenizer/deep", "tokenizer/vocab.txt"])
        st, h, _ = request(self.hf + "/api/models/org/model/tree/refs%2Fpr%2F1")
        self.assertEqual((st, h["X-Error-Code"]), (404, "RevisionNotFound"))
        self.assertIn("/api/models/org/model/tree/refs%2Fpr%2F1", self.stub.stats("hub")["requests"])
        # the xet repo: no xetHash anywhere
        entries, _ = self.follow_tree(self.hf + "/api/models/org/xet/tree/main?recursive=true")
        self.assertEqual(sorted(e["path"] for e in entries), ["README.md", "weights.bin"])
        self.assertNotIn("xetHash", json.dumps(entries))
        self.assertIn(b"xetHash", request(self.stub.hub_url + "/api/models/org/xet/tree/main")[2])

    def test_api_paths_info_json_and_form(self):
        for repo in ("org/model", "org/xet"):
            path = "/api/models/%s/paths-info/main" % repo
            for body, ctype in ((json.dumps({"paths": ["model.safetensors", "weights.bin", "nope",
                                                       "shards"], "expand": True}), "application/json"),
                                ("paths=model.safetensors&paths=weights.bin&paths=nope&paths=shards"
                                 "&expand=True", "application/x-www-form-urlencoded")):
                with self.subTest(repo=repo, ctype=ctype):
                    (st, h, out), (sst, _, sout) = self.both(path, "POST", {"Content-Type": ctype},
                                                             body.encode())
                    self.assertEqual((st, sst), (200, 200))
                    got, want = json.loads(out), json.loads(sout)
                    for e in want:
                        e.pop("xetHash", None)
                    self.assertEqual(got, want)
                    self.assertTrue(got)
                    self.assertNotIn(b"xetHash", out)
        # keep-alive: a POST's body read, the next request on the same connection
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            for _ in range(2):
                conn.request("POST", "/hf/api/models/org/model/paths-info/main",
                             body=b'{"paths": ["config.json"]}',
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                self.assertEqual((r.status, [e["path"] for e in json.loads(r.read())]),
                                 (200, ["config.json"]))
        finally:
            conn.close()

    def test_api_errors_pass_with_the_hubs_codes(self):
        cases = [("/api/models/org/none", None, 401, "RepoNotFound"),
                 ("/api/models/org/none", "hf_alice", 404, "RepoNotFound"),
                 ("/api/models/org/private", "hf_bob", 404, "RepoNotFound"),
                 ("/api/models/org/model/revision/nope", None, 404, "RevisionNotFound"),
                 ("/api/models/org/model/tree/main/nope", None, 404, "EntryNotFound"),
                 ("/api/models/org/gated", None, 401, "GatedRepo")]
        for path, tok, status, code in cases:
            with self.subTest(path=path, tok=tok):
                hdrs = {"Authorization": "Bearer " + tok} if tok else {}
                (st, h, body), (_, sh, sbody) = self.both(path, headers=hdrs)
                self.assertEqual((st, h["X-Error-Code"]), (status, code))
                self.assertEqual(h["X-Error-Message"], sh["X-Error-Message"])
                self.assertEqual(json.loads(body), json.loads(sbody))
        _, h, _ = request(self.hf + "/api/models/org/model/tree/main/nope")
        self.assertEqual(h["X-Repo-Commit"], MAIN)
        st, _, body = request(self.hf + "/api/models/org/private", headers={"Authorization": "Bearer hf_alice"})
        self.assertEqual((st, json.loads(body)["id"]), (200, "org/private"))  # the token went on

    def test_api_xet_tokens_other_routes_and_methods(self):
        for path in ("/api/models/org/xet/xet-read-token/main", "/api/models/org/xet/xet-write-token/main"):
            st, h, body = request(self.hf + path)
            self.assertEqual((st, h["X-Error-Code"]), (404, "EntryNotFound"), path)
            self.assertIn(b"xet", body)
        self.assertEqual(self.stub.stats("hub")["requests"], {})  # never asked of the Hub
        for path in ("/api/whoami-v2", "/api/models", "/api/models/org/model/blame/main",
                     "/api/models/org/model/tree", "/api/models/org//model"):
            st, h, _ = request(self.hf + path)
            self.assertEqual((st, h["X-Hubd-Error"]), (404, "bad_url"), path)
        st, h, _ = request(self.hf + "/api/models/org/model/paths-info/main")
        self.assertEqual((st, h["Allow"]), (405, "POST"))
        st, h, _ = request(self.hf + "/api/models/org/model", "POST",
                           {"Content-Type": "application/json"}, b"{}")
        self.assertEqual(st, 405)
        st, h, _ = request(self.hf + "/api/models/org/model", "HEAD")
        self.assertEqual((st, h["Allow"]), (405, "GET"))
        self.assertEqual(self.stub.stats("hub")["requests"], {})

    def test_api_bodies_are_bounded(self):
        url = self.hf + "/api/models/org/model/paths-info/main"
        pad = 1024 * 1024 - len('{"paths": ["config.json"], "pad": ""}')
        body = ('{"paths": ["config.json"], "pad": "%s"}' % ("x" * pad)).encode()
        self.assertEqual(len(body), 1024 * 1024)
        st, _, out = request(url, "POST", {"Content-Type": "application/json"}, body)
        self.assertEqual((st, [e["path"] for e in json.loads(out)]), (200, ["config.json"]))
        st, h, _ = request(url, "POST", {"Content-Type": "application/json"}, body + b" ")
        self.assertEqual((st, h["X-Hubd-Error"]), (413, "bad_request"))
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/hf/api/models/org/model/paths-info/main", body=iter([b"{}"]),
                         headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
                         encode_chunked=True)
            self.assertEqual(conn.getresponse().status, 411)
        finally:
            conn.close()
        # The Hub's answer: at most 16 MiB, and a body that is not JSON passes as it is.
        root = os.path.join(self.tmp, "big")
        os.makedirs(os.path.join(root, "api", "models", "org"))
        with open(os.path.join(root, "api", "models", "org", "big"), "wb") as f:
            f.write(b"[" * (16 * 1024 * 1024 + 1))
        page = b"<html>not json, xetHash</html>"
        with open(os.path.join(root, "api", "models", "org", "page"), "wb") as f:
            f.write(page)
        from harness import Origin
        origin = Origin(root)
        self.addCleanup(origin.stop)
        # announced (Content-Length) or not (chunked): cut at the bound either way
        for i, under in enumerate(("/files", "/chunked")):
            self.hubd.stop()
            conf = write_config(os.path.join(self.tmp, "big%d.conf" % i),
                                http_listen="127.0.0.1:%d" % self.port, hf_upstream=origin.base + under)
            self.hubd = Hubd(os.path.join(self.tmp, "hub%d" % i), config=conf)
            st, h, body = request(self.hf + "/api/models/org/big")
            self.assertEqual((st, h["X-Hubd-Error"]), (502, "too_large"), under)
            self.assertIn(b"16 MiB", body)
            st, h, body = request(self.hf + "/api/models/org/page")
            self.assertEqual((st, body), (200, page), under)

    def slow_api_front(self, **keys):
        """Restarts hubd with hf_upstream at an origin whose API page is 4
        MiB (not JSON: it passes as it is); returns ask(), which opens a
        connection with a 4 KiB receive buffer and asks for the page."""
        root = os.path.join(self.tmp, "big")
        os.makedirs(os.path.join(root, "api", "models", "org"))
        with open(os.path.join(root, "api", "models", "org", "page"), "wb") as f:
            f.write(b"x" * (4 * 1024 * 1024))
        from harness import Origin
        self.big = Origin(root)
        self.addCleanup(self.big.stop)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "slow.conf"), socket_mode="0666",
                            http_listen="127.0.0.1:%d" % self.port,
                            hf_upstream=self.big.base + "/files", **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-slow"), config=conf)
        line = b"GET /hf/api/models/org/page HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % self.port

        def ask():
            s = socket.socket()
            self.addCleanup(s.close)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(30 * SLOW)
            s.connect(("127.0.0.1", self.port))
            s.sendall(line)
            return s
        return ask

    def park(self, ask):
        """ask(), once hubd has parked the request: the order of the turns is
        that of the requests' arrival, which the connections' own (their
        peer lookups run in the pool) does not fix."""
        n = self.hubd.read_log().count("waits its turn")
        s = ask()
        wait_for(lambda: self.hubd.read_log().count("waits its turn") > n, timeout=10 * SLOW,
                 what="the request parked")
        return s

    def hub_asked(self):
        """How many times the origin behind slow_api_front was asked for the page."""
        return self.big.requests_for("/files/api/models/org/page")

    def http_open(self):
        out = self.hubctl("status").out
        return int(re.search(r"http front: (\d+) connection", out).group(1))

    def test_api_answers_held_for_slow_readers_are_bounded_per_uid(self):
        # An API answer is held in memory until its client has read it. A
        # uid's slow readers hold at most 4 (before, one each
        # of its 64 connections: 64 readers of a 15 MiB answer held 1.2 GB
        # of hubd's RSS; after, 159 MB). Its further requests wait their
        # turn, asking nothing of the Hub and holding no answer, and are
        # answered in their order as readers go; another uid is not held up.
        ask = self.slow_api_front()
        rss0 = vm_bytes(self.hubd.proc.pid, "VmRSS")
        held = [ask() for _ in range(4)]
        self.assertEqual([read_head(s)[0] for s in held], [200] * 4)
        waiting = [self.park(ask) for _ in range(3)]
        more = [ask() for _ in range(20)]
        wait_for(lambda: self.hubd.read_log().count("waits its turn") == 23, timeout=10 * SLOW,
                 what="every request parked")
        if not SLOWED:
            # 4 answers of 4 MiB held, with the Hub's copies on their way
            # and the allocator's slack: 32-57 MB; one each of the 27: 195 MB.
            grown = vm_bytes(self.hubd.proc.pid, "VmRSS") - rss0
            self.assertLess(grown, 100 << 20, "RSS grew by %d bytes" % grown)
        self.assertEqual(self.hub_asked(), 4)  # the parked ask nothing of the Hub
        self.assertEqual(select.select(waiting + more, [], [], 1)[0], [])  # nor are answered
        t0 = time.monotonic()
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "curl",
                            "-sS", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code}",
                            self.hf + "/api/models/org/page"], capture_output=True, timeout=90)
        self.assertEqual(r.stdout, b"200", r)
        self.assertLess(time.monotonic() - t0, 10 * SLOW)
        # A reader that goes frees its slot: the first waiting one is
        # answered, the others wait on, one more each time.
        for i in range(3):
            held[i].close()
            self.assertEqual(read_head(waiting[i])[0], 200)
            self.assertEqual(select.select(waiting[i + 1:] + more, [], [], 0.5)[0], [])
        self.assertEqual(self.hub_asked(), 4 + 1 + 3)  # and the other uid's

    def test_api_requests_of_one_uid_beyond_4_wait_their_turn_and_all_succeed(self):
        # 8 training ranks of one user ask the Hub's API at once through the
        # front (snapshot_download), their requests overlapping the Hub's
        # round trip. huggingface_hub retries no 429 of an API call: each
        # must be answered (with a 429 past 4 open, 4 of the 8
        # failed).
        self.stub.control("hold", {"user": "alice", "delay": 1, "api": True})
        url = self.hf + "/api/models/org/model/revision/main"
        outs = [None] * 8

        def rank(i):
            st, h, body = request(url, headers={"Authorization": "Bearer hf_alice"})
            outs[i] = (st, h.get("X-Hubd-Error"), json.loads(body).get("sha") if st == 200 else body)
        threads = [threading.Thread(target=rank, args=(i,)) for i in range(8)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(outs, [(200, None, MAIN)] * 8)
        self.assertGreaterEqual(time.monotonic() - t0, 2)  # two rounds of 4: the Hub's 1 s each

    def test_a_waiting_api_request_whose_client_goes_leaves_nothing_behind(self):
        # A parked request whose client resets (or closes) is gone with its
        # connection: no slot is kept for it, hubd answers on (and under
        # ASan leaks or touches nothing freed).
        ask = self.slow_api_front()
        held = [ask() for _ in range(4)]
        self.assertEqual([read_head(s)[0] for s in held], [200] * 4)
        reset, closed, waiting = self.park(ask), self.park(ask), self.park(ask)
        reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        reset.close()  # a reset: the connection and its parked request go at once
        closed.close()  # a FIN: it may still read (nc -N); its turn comes, its answer fails
        time.sleep(0.5)
        held[0].close()
        self.assertEqual(read_head(waiting)[0], 200)
        for s in held[1:] + [waiting]:
            s.close()
        wait_for(lambda: self.http_open() == 0, timeout=20 * SLOW, what="every connection closed")
        outs = [None] * 8

        def fast(i):
            outs[i] = request(self.hf + "/api/models/org/page")[0]
        threads = [threading.Thread(target=fast, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(outs, [200] * 8)
        self.assertEqual(self.hub_asked(), 4 + 2 + 8)  # closed and waiting asked; reset never

    def test_an_api_request_that_waits_past_http_header_timeout_gets_429(self):
        # The wait is bounded: a uid whose 4 answers are not being read
        # (its own stalled readers) gets a 429 after http_header_timeout.
        ask = self.slow_api_front(http_header_timeout="2s")
        held = [ask() for _ in range(4)]
        self.assertEqual([read_head(s)[0] for s in held], [200] * 4)
        t0 = time.monotonic()
        st, head = read_head(ask())
        took = time.monotonic() - t0
        self.assertEqual(st, 429, head)
        self.assertIn(b"X-Hubd-Error: too_many_requests", head)
        self.assertGreaterEqual(took, 1.8)
        self.assertLess(took, 15 * SLOW)
        self.assertEqual(self.hub_asked(), 4)
        wait_for(lambda: "refused (429): waited 2.0 s" in self.hubd.read_log(), what="the log line")
        held[0].close()  # the slot is still there for the next
        self.assertEqual(read_head(ask())[0], 200)

    def test_huggingface_js_snapshot_and_list_through_the_front(self):
        work = os.path.join(self.tmp, "snap")
        os.mkdir(work)
        r = self.js("snapshot", "--dir", work)
        self.assertTrue(r["ok"], r)
        self.assertTrue(r["folder"].endswith("/snapshots/" + MAIN), r["folder"])
        want = {p: (len(self.stub.file_bytes("org/model", p)),
                    hashlib.sha256(self.stub.file_bytes("org/model", p)).hexdigest())
                for p in REPOS["repos"][0]["files"]}
        self.assertEqual({p: (f["size"], f["sha256"]) for p, f in r["files"].items()}, want)
        for _, url, _, _, final in r["requests"]:
            self.assertTrue(url.startswith(self.hf + "/"), url)
            self.assertTrue(final.startswith(self.hf + "/"), final)
        urls = [u for _, u, _, _, _ in r["requests"]]
        tree = [u for u in urls if "/tree/" in u]
        self.assertEqual(len(tree), 5)
        self.assertTrue(all("cursor=" in u for u in tree[1:]), tree)
        self.assertTrue(any("/api/models/org/model/revision/" in u for u in urls), urls)
        # each file's metadata by paths-info (a JSON POST), each answered 200
        posts = [(u, st) for m, u, _, st, _ in r["requests"] if "/paths-info/" in u]
        self.assertEqual(len(posts), len(want), posts)
        self.assertTrue(all(st == 200 for _, st in posts), posts)
        self.assertEqual(set(m for m, u, _, _, _ in r["requests"] if "/paths-info/" in u), {"POST"})
        r = self.js("list")
        self.assertEqual(len(r["entries"]), 10)
        entries = self.js("list", repo="org/xet")["entries"]
        self.assertEqual(sorted(e["path"] for e in entries), ["README.md", "weights.bin"])
        self.assertNotIn("xetHash", json.dumps(entries))

if __name__ == "__main__":
    unittest.main()
