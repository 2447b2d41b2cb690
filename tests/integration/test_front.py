"""The HTTP front: real clients (curl, wget, Python's urllib and
http.client) fetch through hubd's loopback listener with the generic form
`/<absolute URL>`, as a user whose uid hubd finds in the kernel's socket
table.
"""

import hashlib
import http.client
import os
import socket
import subprocess
import time
import unittest
import urllib.request

from harness import (free_port, HubTestCase, Hubd, ipv6_loopback_works, sha256_file, SLOW,
                     wait_for, WRAPPER, write_config)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class FrontTestCase(HubTestCase):
    """A hubd with the HTTP front on a free loopback port."""

    def setUp(self):
        super().setUp()
        self.restart_front()

    def restart_front(self, **keys):
        self.hubd.stop()
        self.port = free_port()
        keys.setdefault("http_listen", "127.0.0.1:%d" % self.port)
        conf = write_config(os.path.join(self.tmp, "front.conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)
        wait_for(self._front_answers, what="the HTTP front to listen")

    def _front_answers(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def front(self, url):
        return "http://127.0.0.1:%d/%s" % (self.port, url)

    def curl(self, *args, user=None):
        cmd = ["curl", "-sS", "--max-time", "60"] + list(args)
        if user is not None:
            cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
        return subprocess.run(cmd, capture_output=True, timeout=90)

    def head_of(self, out):
        """Status and lower-cased headers of the last response in curl -i/-D output."""
        text = out.decode("latin-1")
        blocks = [b for b in text.split("\r\n\r\n") if b.startswith("HTTP/")]
        lines = blocks[-1].split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers


class GenericFormTest(FrontTestCase):
    def test_curl_whole_file_then_a_hit(self):
        digest = self.make_file("a.bin", 3 * 1024 * 1024 + 17)
        out = os.path.join(self.tmp, "a.out")
        hdr = os.path.join(self.tmp, "a.hdr")
        r = self.curl("-D", hdr, "-o", out, self.front(self.origin.url("/files/a.bin")))
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(sha256_file(out), digest)
        status, h = self.head_of(read_bytes(hdr))
        self.assertEqual(status, 200)
        self.assertEqual(h["content-length"], str(3 * 1024 * 1024 + 17))
        self.assertEqual(h["accept-ranges"], "bytes")
        self.assertEqual(h["x-hubd-source"], "download")
        # (Streamed as it landed, or sent whole once stored: only a stored
        # file's answer names its digest, which a stream cannot know yet.)
        self.assertIn(h.get("x-hubd-sha256", digest), (digest,))
        r = self.curl("-D", hdr, "-o", out, self.front(self.origin.url("/files/a.bin")))
        self.assertEqual(r.returncode, 0, r)
        status, h = self.head_of(read_bytes(hdr))
        self.assertEqual((h["x-hubd-source"], h["x-hubd-sha256"]), ("hit", digest))
        self.assertEqual(h["etag"], '"%s"' % digest)
        self.assertEqual(sha256_file(out), digest)
        self.assertEqual(self.origin.requests_for("/files/a.bin"), 1)
        # The same entry as hubctl's: a hit there too.
        r = self.hubctl("fetch", "--json", self.origin.url("/files/a.bin"))
        self.assertIn('"source":"hit"', r.out.replace(" ", ""), r)
        # STATS (and Prometheus) count the front's requests and bytes.
        st = self.stats()
        self.assertEqual((st["http_requests"], st["http_bytes"]), (2, 2 * (3 * 1024 * 1024 + 17)))
        self.assertGreaterEqual(st["http_connections"], 2)
        r = self.hubctl("stats", "--prometheus")
        self.assertIn("hubd_http_requests_total 2\n", r.out)
        # hubctl status says it too, under the jobs.
        r = self.hubctl("status")
        self.assertRegex(r.out, r"\nhttp front: \d+ connections? open, 2 requests answered, 6\.0 MiB sent\n")

    def test_ranges_and_head(self):
        self.make_file("r.bin", 100000)
        data = read_bytes(os.path.join(self.root, "r.bin"))
        url = self.front(self.origin.url("/files/r.bin"))
        for rng, want, first, last in (("0-0", data[:1], 0, 0), ("100-199", data[100:200], 100, 199),
                                       ("-100", data[-100:], 99900, 99999),
                                       ("99990-", data[99990:], 99990, 99999)):
            with self.subTest(range=rng):
                r = self.curl("-i", "-r", rng, url)
                self.assertEqual(r.returncode, 0, r)
                head, _, body = r.stdout.partition(b"\r\n\r\n")
                status, h = self.head_of(head + b"\r\n\r\n")
                self.assertEqual(status, 206)
                self.assertEqual(h["content-range"], "bytes %d-%d/100000" % (first, last))
                self.assertEqual(body, want)
        r = self.curl("-i", "-r", "100000-", url)
        status, h = self.head_of(r.stdout)
        self.assertEqual(status, 416)
        self.assertEqual(h["content-range"], "bytes */100000")
        r = self.curl("-I", url)
        status, h = self.head_of(r.stdout)
        self.assertEqual((status, h["content-length"]), (200, "100000"))
        self.assertEqual(self.origin.requests_for("/files/r.bin"), 1)

    def test_wget_and_urllib_and_merged_slashes(self):
        digest = self.make_file("w.bin", 200000)
        out = os.path.join(self.tmp, "w.out")
        r = subprocess.run(["wget", "-q", "-O", out, self.front(self.origin.url("/files/w.bin"))],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(sha256_file(out), digest)
        # A client that merges slashes sends "http:/host".
        merged = "http:/" + self.origin.url("/files/w.bin")[len("http://"):]
        with urllib.request.urlopen(self.front(merged), timeout=30) as resp:
            self.assertEqual(hashlib.sha256(resp.read()).hexdigest(), digest)
        self.assertEqual(self.origin.requests_for("/files/w.bin"), 1)

    def test_keep_alive_serves_several_requests_on_one_connection(self):
        self.make_file("k1", 5000, seed=1)
        self.make_file("k2", 7000, seed=2)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            for name, size in (("k1", 5000), ("k2", 7000), ("k1", 5000)):
                conn.request("GET", "/" + self.origin.url("/files/" + name))
                resp = conn.getresponse()
                self.assertEqual((resp.status, len(resp.read())), (200, size))
            conn.request("GET", "/" + self.origin.url("/files/missing"))
            resp = conn.getresponse()
            body = resp.read()
            self.assertEqual(resp.status, 404)
            self.assertEqual(resp.getheader("X-Hubd-Error"), "http_404")
            self.assertEqual(body.count(b"\n"), 1, body)
        finally:
            conn.close()

    def test_a_cold_file_for_four_clients_is_fetched_once(self):
        digest = self.make_file("c.bin", 4 * 1024 * 1024)
        url = self.front(self.origin.url("/files/c.bin?bps=8000000"))
        outs = [os.path.join(self.tmp, "c%d.out" % i) for i in range(4)]
        procs = [subprocess.Popen(["curl", "-sS", "--max-time", "60", "-o", o, url])
                 for o in outs]
        for p in procs:
            self.assertEqual(p.wait(90), 0)
        for o in outs:
            self.assertEqual(sha256_file(o), digest)
        self.assertEqual(self.origin.requests_for("/files/c.bin"), 1)

    def test_a_download_is_streamed_while_it_lands(self):
        # 2 MiB at about 512 KiB/s: the first bytes reach the client long
        # before the download is done, and the whole file is right.
        digest = self.make_file("s.bin", 2 * 1024 * 1024)
        out = os.path.join(self.tmp, "s.out")
        r = self.curl("-o", out, "-w", "%{time_starttransfer} %{time_total} %{http_code}",
                      self.front(self.origin.url("/files/s.bin?bps=524288")))
        self.assertEqual(r.returncode, 0, r)
        first, total, code = r.stdout.decode().split()
        self.assertEqual(code, "200")
        self.assertLess(float(first), 1.5, r.stdout)
        self.assertGreater(float(total), 3.0, r.stdout)
        self.assertEqual(sha256_file(out), digest)

    def test_slow_readers_hold_no_memory_and_stall_no_one(self):
        # 16 clients read a 64 MiB answer at about 1 KiB/s (a 4 KiB receive
        # buffer, a read a second): 8 a hit, 8 a miss that downloads at 16
        # MiB/s meanwhile, plus a Range and 20 requests pipelined on one
        # connection that reads nothing. The front sends from the file on
        # disk (sendfile), never from a queue in memory: hubd's RSS grows by
        # a few KiB per connection, not with the file (as
        # measured: 23 readers of 256 MiB files, +1.9 MB), the download ends as fast
        # as alone, and another request keeps its normal latency.
        size = 64 * 1024 * 1024
        self.make_file("hit.bin", size, seed=2)
        miss_digest = self.make_file("miss.bin", size, seed=3)
        self.make_file("small.bin", 100000, seed=4)
        hit = "/" + self.origin.url("/files/hit.bin")
        r = self.curl("-o", "/dev/null", "-w", "%{http_code}", self.front(hit[1:]))
        self.assertEqual(r.stdout, b"200", r)

        def vm(key):
            with open("/proc/%d/status" % self.hubd.proc.pid) as f:
                return next(int(l.split()[1]) for l in f if l.startswith(key + ":")) * 1024

        def slow(path, extra=b"", after=b""):
            s = socket.socket()
            self.addCleanup(s.close)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(30)
            s.connect(("127.0.0.1", self.port))
            s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n%s"
                      % (path.encode(), self.port, extra, after))
            return s

        before = vm("VmRSS")
        miss = "/" + self.origin.url("/files/miss.bin?bps=16777216")
        t0 = time.monotonic()
        readers = [slow(miss) for _ in range(8)] + [slow(hit) for _ in range(8)]
        readers.append(slow(hit, b"Range: bytes=1000-\r\n"))
        readers.append(slow(hit, after=b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
                            % (hit.encode(), self.port) * 20))
        heads = []
        for s in readers:
            heads.append(s.recv(1024).split(b"\r\n")[0])
        self.assertEqual(heads.count(b"HTTP/1.1 200 OK"), 17, heads)
        self.assertEqual(heads.count(b"HTTP/1.1 206 Partial Content"), 1, heads)
        # Another request meanwhile: its normal latency.
        r = self.curl("-o", "/dev/null", "-w", "%{http_code} %{time_total}",
                      self.front(self.origin.url("/files/small.bin")))
        code, took = r.stdout.decode().split()
        self.assertEqual(code, "200")
        self.assertLess(float(took), 2.0 * SLOW, r.stdout)
        # The miss lands at the origin's pace (4 s alone), slow readers or not.
        wait_for(lambda: len(self.hubd.blob_files()) == 3, timeout=30 * SLOW,
                 what="the download to end")
        self.assertLess(time.monotonic() - t0, 20 * SLOW)
        out = os.path.join(self.tmp, "miss.out")
        r = self.curl("-o", out, self.front(miss[1:]))
        self.assertEqual((r.returncode, sha256_file(out)), (0, miss_digest))
        for _ in range(3):  # they read on, slowly
            time.sleep(1)
            for s in readers:
                self.assertTrue(s.recv(1024))
        grown = vm("VmRSS") - before
        if not WRAPPER:  # valgrind's own memory is no measure of hubd's
            self.assertLess(grown, 16 * 1024 * 1024, "RSS grew by %d bytes" % grown)

    def test_a_failed_download_cuts_the_answer_short(self):
        # The origin closes after 1 MiB of 2: the client gets the head and
        # part of the body, then a short close (curl: exit 18), never a file
        # it could take for whole; nothing is cached.
        self.make_file("f.bin", 2 * 1024 * 1024)
        out = os.path.join(self.tmp, "f.out")
        r = self.curl("-o", out, "-w", "%{http_code}",
                      self.front(self.origin.url("/files/f.bin?bps=1048576&truncate=1048576")))
        self.assertEqual(r.returncode, 18, r)
        self.assertEqual(r.stdout.decode(), "200")
        self.assertLess(os.path.getsize(out), 2 * 1024 * 1024 - 64 * 1024 + 1)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_head_of_a_cold_file_answers_from_the_announced_length(self):
        self.make_file("h.bin", 1024 * 1024)
        r = self.curl("-I", "-w", "%{time_total}",
                      self.front(self.origin.url("/files/h.bin?bps=131072")))
        self.assertEqual(r.returncode, 0, r)
        st, h = self.head_of(r.stdout)
        self.assertEqual((st, h["content-length"]), (200, str(1024 * 1024)))
        self.assertLess(float(r.stdout.decode().rsplit("\r\n", 1)[-1]), 4.0)
        # The download went on for the cache: the next GET is a hit.
        wait_for(lambda: len(self.hubd.blob_files()) == 1 and self.stats()["jobs_active"] == 0,
                 timeout=30, what="the download")
        r = self.curl("-I", self.front(self.origin.url("/files/h.bin?bps=131072")))
        self.assertEqual(self.head_of(r.stdout)[1]["x-hubd-source"], "hit")

    def test_credentials_reach_the_origin_and_scope_the_entry(self):
        token = "tok-" + "7" * 20
        h8 = hashlib.sha256(token.encode()).hexdigest()[:8]
        self.make_file("g.bin", 3000)
        url = self.front(self.origin.url("/files/g.bin?require_auth=" + h8))
        r = self.curl("-i", url)
        self.assertEqual(self.head_of(r.stdout)[0], 401)
        r = self.curl("-i", "-H", "Authorization: Bearer " + token, url)
        status, h = self.head_of(r.stdout)
        self.assertEqual(status, 200, r.stdout[:300])
        self.assertEqual(h["x-hubd-source"], "download")
        self.assertIn("Bearer " + token, self.origin.stats()["auth"]["/files/g.bin"])
        # Without the token it is not served from what the token fetched.
        r = self.curl("-i", url)
        self.assertEqual(self.head_of(r.stdout)[0], 401)

    def test_upstream_errors_map_to_statuses(self):
        closed = free_port()
        for url, status, code in (
                (self.origin.url("/files/none"), 404, "http_404"),
                ("http://127.0.0.1:%d/x" % closed, 502, "connect"),
                (self.origin.url("/files/none?fail_first=9&fail_status=500"), 502, "http_500")):
            with self.subTest(url=url):
                r = self.curl("-i", self.front(url))
                st, h = self.head_of(r.stdout)
                self.assertEqual((st, h.get("x-hubd-error")), (status, code), r.stdout[:400])
        r = self.curl("-i", "http://127.0.0.1:%d/not-a-url" % self.port)
        self.assertEqual(self.head_of(r.stdout)[0], 404)
        r = self.curl("-i", "-X", "POST", self.front(self.origin.url("/files/none")))
        st, h = self.head_of(r.stdout)
        self.assertEqual((st, h.get("allow")), (405, "GET, HEAD"))


class FrontSecurityTest(FrontTestCase):
    def test_only_a_host_naming_the_listener_is_served(self):
        self.make_file("h.bin", 1000)
        url = self.front(self.origin.url("/files/h.bin"))
        for host in ("evil.example:%d" % self.port, "127.0.0.1:1", "localhost.:%d" % self.port):
            with self.subTest(host=host):
                r = self.curl("-i", "-H", "Host: " + host, url)
                st, h = self.head_of(r.stdout)
                self.assertEqual((st, h.get("x-hubd-error")), (403, "forbidden"))
        for host in ("localhost:%d" % self.port, "127.0.0.1:%d" % self.port):
            r = self.curl("-i", "-H", "Host: " + host, url)
            self.assertEqual(self.head_of(r.stdout)[0], 200)
        self.assertEqual(self.origin.requests_for("/files/h.bin"), 1)

    def raw(self, request, half_close=False):
        """The whole answer to raw request bytes (the server closes after it)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        try:
            s.sendall(request)
            if half_close:  # done sending, still reading (nc -N)
                s.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = s.recv(65536)
                if not b:
                    return got
                got += b
        finally:
            s.close()

    def test_a_client_that_half_closes_still_gets_its_answer(self):
        digest = self.make_file("hc.bin", 300000)
        target = "/" + self.origin.url("/files/hc.bin?delay_ms=300")
        got = self.raw(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
                       % (target.encode(), self.port), half_close=True)
        head, _, body = got.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        self.assertEqual(hashlib.sha256(body).hexdigest(), digest)

    def test_two_hosts_or_none_are_refused_and_whitespace_is_not_the_host(self):
        self.make_file("d.bin", 100)
        target = ("/" + self.origin.url("/files/d.bin")).encode()
        ours = b"127.0.0.1:%d" % self.port
        for heads in (b"Host: evil.example\r\nHost: " + ours, b"Host: " + ours + b"\r\nHost: " + ours,
                      b"X-None: 1"):
            with self.subTest(heads=heads):
                got = self.raw(b"GET %s HTTP/1.1\r\n%s\r\nConnection: close\r\n\r\n"
                               % (target, heads))
                self.assertTrue(got.startswith(b"HTTP/1.1 403"), got[:100])
        got = self.raw(b"GET %s HTTP/1.1\r\nHost: %s  \r\nConnection: close\r\n\r\n"
                       % (target, ours))
        self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:100])

    def test_cross_site_requests_are_refused(self):
        self.make_file("x.bin", 1000)
        url = self.front(self.origin.url("/files/x.bin"))
        for hdr in ("Origin: http://evil.example", "Origin: null", "Sec-Fetch-Site: cross-site",
                    "Sec-Fetch-Site: same-site"):
            with self.subTest(header=hdr):
                r = self.curl("-i", "-H", hdr, url)
                self.assertEqual(self.head_of(r.stdout)[0], 403)
        self.assertEqual(self.origin.requests_for("/files/x.bin"), 0)
        r = self.curl("-i", "-H", "Origin: http://127.0.0.1:%d" % self.port, "-H",
                      "Sec-Fetch-Site: same-origin", url)
        self.assertEqual(self.head_of(r.stdout)[0], 200)

    def test_the_peer_is_the_user_who_connects(self):
        # A second local user (nobody) is found by the kernel's socket
        # table. Without allow_users/allow_groups the front admits who may
        # use the Unix socket (its file's owner, group and mode), the admins
        # and root (before, any local user got the system cache
        # through 127.0.0.1); the lists, when set, decide. The log names the
        # uid either way.
        self.make_file("u.bin", 1000)
        url = self.front(self.origin.url("/files/u.bin"))
        r = self.curl("-i", url, user=65534)  # the socket is 0660, not nobody's group
        st, h = self.head_of(r.stdout)
        self.assertEqual((st, h.get("x-hubd-error")), (403, "permission_denied"), r)
        self.assertIn(b"users of its socket", r.stdout)
        wait_for(lambda: "http front uid 65534: refused" in self.hubd.read_log(),
                 what="the uid in the log")
        self.assertEqual(self.origin.requests_for("/files/u.bin"), 0)
        for keys in ({"socket_group": "nogroup"}, {"admin_group": "nogroup"},
                     {"socket_mode": "0666"}, {"allow_users": "nobody"}):
            with self.subTest(**keys):
                self.restart_front(**keys)
                url = self.front(self.origin.url("/files/u.bin"))  # the front's new port
                r = self.curl("-i", url, user=65534)
                self.assertEqual(self.head_of(r.stdout)[0], 200, r)
        self.restart_front(allow_users="root", socket_mode="0666")
        url = self.front(self.origin.url("/files/u.bin"))
        r = self.curl("-i", url, user=65534)
        st, h = self.head_of(r.stdout)
        self.assertEqual((st, h.get("x-hubd-error")), (403, "permission_denied"))
        self.assertIn("http front uid 65534: refused", self.hubd.read_log())
        r = self.curl("-i", url)  # root always may
        self.assertEqual(self.head_of(r.stdout)[0], 200)

    def test_a_user_taken_out_by_a_reload_is_refused_on_a_kept_alive_connection(self):
        # The user was judged when the connection came only: one taken out
        # of allow_users (and SIGHUP) went on fetching through a kept-alive
        # connection for as long as it kept sending requests.
        import signal
        import sys
        for name in "ab":
            self.make_file(name, 1000, seed=ord(name))
        self.restart_front(allow_users="nobody", socket_mode="0666")
        code = ("import http.client, sys\n"
                "c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]), timeout=30)\n"
                "for u in sys.argv[2:]:\n"
                "    c.request('GET', '/' + u)\n"
                "    r = c.getresponse()\n"
                "    r.read()\n"
                "    print(r.status, r.getheader('X-Hubd-Error'), flush=True)\n"
                "    sys.stdin.readline()\n")
        p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              sys.executable, "-c", code, str(self.port),
                              self.origin.url("/files/a"), self.origin.url("/files/b")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        self.assertEqual(p.stdout.readline().split(), ["200", "None"])
        write_config(self.hubd.config, allow_users="root", socket_mode="0666",
                     http_listen="127.0.0.1:%d" % self.port)
        self.hubd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log(), what="the reload")
        p.stdin.write("\n")
        p.stdin.flush()
        self.assertEqual(p.stdout.readline().split(), ["403", "permission_denied"])
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait(30)
        self.assertEqual(self.origin.requests_for("/files/b"), 0)

    def test_the_peer_is_found_over_ipv6_and_any_127_source(self):
        # The same user over each way in: 127.0.0.1, another 127/8 source
        # address (curl --interface), a listener on 127.0.0.5, and ::1.
        # nobody is refused by allow_users=root and logged as uid 65534,
        # root is served: never root's or hubd's uid for nobody's
        # connection (a hostile test of this claim found it held: kept as
        # its regression test).
        self.make_file("v.bin", 1000)
        port = free_port()
        listen = "127.0.0.1:%d, 127.0.0.5:%d" % (port, port)
        if ipv6_loopback_works():
            listen += ", [::1]:%d" % port
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "fam.conf"), http_listen=listen,
                            allow_users="root", socket_mode="0666")
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)  # its log goes on
        log = self.hubd.read_log()
        judged = log.count("cannot be found") + log.count("http front uid 0: connected")
        self.port = port
        wait_for(self._front_answers, what="the HTTP front to listen")
        # That probe connected and left. It is judged either way: refused as
        # "cannot be found" if it had left before the lookup, else found as
        # root (a race the probe does not decide; the CI run saw both).
        wait_for(lambda: self.hubd.read_log().count("cannot be found")
                 + self.hubd.read_log().count("http front uid 0: connected") > judged,
                 what="the probe's judgement")
        start = len(self.hubd.read_log())
        ways = [("127.0.0.1", []), ("127.0.0.1", ["--interface", "127.0.0.9"]),
                ("127.0.0.5", [])]
        if ipv6_loopback_works():
            ways.append(("[::1]", []))
        for host, extra in ways:
            with self.subTest(host=host, extra=extra):
                url = "http://%s:%d/%s" % (host, port, self.origin.url("/files/v.bin"))
                args = ["-i", "-H", "Host: 127.0.0.1:%d" % port] + extra + [url]
                before = self.hubd.read_log().count("http front uid 65534: refused")
                r = self.curl(*args, user=65534)
                st, h = self.head_of(r.stdout)
                self.assertEqual((st, h.get("x-hubd-error")), (403, "permission_denied"), r)
                wait_for(lambda: self.hubd.read_log().count("http front uid 65534: refused")
                         > before, what="nobody's refusal in the log")
                r = self.curl(*args)
                self.assertEqual(self.head_of(r.stdout)[0], 200, r)
        log = self.hubd.read_log()[start:]
        self.assertNotIn("http front uid 0: refused", log)
        self.assertNotIn("cannot be found", log)

    def test_a_head_that_drips_ends_at_http_header_timeout(self):
        self.restart_front(http_header_timeout="1500ms")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            url = self.origin.url("/x")
            # A slowloris client: a byte now and then, never the whole head.
            s.sendall(("GET /%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % (url, self.port)).encode())
            start = time.monotonic()
            answer = b""
            while True:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass  # answered and shut: what it said is still to read
                try:
                    s.settimeout(0.3)
                    chunk = s.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                answer += chunk
            took = time.monotonic() - start
        self.assertTrue(answer.startswith(b"HTTP/1.1 408 "), answer)
        self.assertGreater(took, 1.2)
        self.assertLess(took, 8)
        self.assertIn("no complete request head within 1500 ms", self.hubd.read_log())

    def test_a_huge_head_is_refused(self):
        r = self.curl("-i", "-H", "X-Big: " + "a" * 20000, self.front(self.origin.url("/x")))
        self.assertIn(self.head_of(r.stdout)[0], (400, 431))
        long_url = self.origin.url("/" + "b" * 9000)
        r = self.curl("-i", self.front(long_url))
        self.assertIn(self.head_of(r.stdout)[0], (414, 431))

    def test_front_listens_on_loopback_only(self):
        conf = write_config(os.path.join(self.tmp, "bad.conf"), http_listen="0.0.0.0:%d" % free_port())
        from harness import HUBD
        r = subprocess.run([HUBD, "--check-config", "--config", conf], capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn(b"loopback", r.stderr)


if __name__ == "__main__":
    unittest.main()
