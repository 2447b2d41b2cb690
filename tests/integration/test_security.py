"""Security: credentials never leak and never cross users, headers are
checked, hostile clients do not hurt others."""

import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import time
import unittest
import urllib.parse

from harness import Hubd, HubTestCase, Origin, wait_for

TOKEN = "tok-7f3a9c1e5b2d4068a1c3e5f7091b2d4f"  # unique: searched for byte by byte


def needs(token):
    """The origin's require_auth value for a token (not the token itself)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def all_bytes_under(root):
    """(path, content) of every regular file below root."""
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    yield path, f.read()


class CredentialTest(HubTestCase):
    def gated(self, name, size=3000, seed=1):
        digest = self.make_file(name, size, seed=seed)
        return self.origin.url("/files/%s?require_auth=%s" % (name, needs(TOKEN))), digest

    def fetch(self, *args):
        r = self.hubctl("fetch", "--json", *args)
        return r, (json.loads(r.out) if r.out.strip() else None)

    def test_token_is_never_stored_or_logged(self):
        url, digest = self.gated("g.bin")
        r, res = self.fetch("-H", "Authorization: Bearer " + TOKEN, url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(res["sha256"], digest)
        # A gated file is readable by hubd alone; its owner gets it through
        # the fd that DONE passes (-o copies from it).
        self.assertEqual(os.stat(res["path"]).st_mode & 0o777, 0o400)
        dest = os.path.join(self.tmp, "copy.bin")
        r2 = self.hubctl("fetch", "-H", "Authorization: Bearer " + TOKEN, "-o", dest, url)
        self.assertEqual(r2.rc, 0, r2)
        with open(dest, "rb") as f, open(os.path.join(self.root, "g.bin"), "rb") as g:
            self.assertEqual(f.read(), g.read())
        for args in (["status", "--json"], ["ls", "--json"], ["stats", "--json"]):
            self.assertNotIn(TOKEN, self.hubctl(*args).out)
        # A failing fetch with the token: not in the error either.
        r, res = self.fetch("-H", "Authorization: Bearer " + TOKEN,
                            self.origin.url("/status/403"))
        self.assertEqual(r.rc, 1)
        self.assertNotIn(TOKEN, r.out + r.err)
        self.assertEqual(self.hubd.stop(), 0)
        for path, data in all_bytes_under(self.hubd.workdir):  # cache, db, WAL, secret, log
            self.assertNotIn(TOKEN.encode(), data, path)
        secret = os.path.join(self.hubd.cache, "secret")
        self.assertEqual(os.stat(secret).st_mode & 0o777, 0o600)
        self.assertEqual(os.path.getsize(secret), 32)
        self.hubd.start()

    def test_entries_are_per_credential(self):
        url, digest = self.gated("g.bin")
        auth = "Authorization: Bearer " + TOKEN
        r, res = self.fetch("-H", auth, url)
        self.assertEqual((r.rc, res["source"]), (0, "download"), r)
        # The same token again: a hit. Spelled differently, still the same.
        r, res = self.fetch("-H", auth, url)
        self.assertEqual(res["source"], "hit")
        r, res = self.fetch("-H", "authorization:   Bearer " + TOKEN, url)
        self.assertEqual(res["source"], "hit")
        # No token, or another one: not A's entry; the origin is asked and says no.
        r, res = self.fetch(url)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(res["error"]["code"], "http_401")
        r, res = self.fetch("-H", "Authorization: Bearer other", url)
        self.assertEqual(res["error"]["code"], "http_401")
        # Nor by digest: knowing a gated file's sha256 opens nothing.
        r, res = self.fetch("--sha256", digest, self.origin.url("/files/g.bin?require_auth=x"))
        self.assertEqual(res["error"]["code"], "http_401", r)
        self.assertEqual(self.origin.stats()["auth"]["/files/g.bin"],
                         ["Bearer " + TOKEN, "", "Bearer other", ""])
        # A file fetched without credentials is shared with everyone.
        pub = self.make_file("p.bin", 2000, seed=2)
        self.fetch(self.origin.url("/files/p.bin"))
        r, res = self.fetch("-H", auth, self.origin.url("/files/p.bin"))
        self.assertEqual(res["source"], "download")  # a credentialed request is its own entry
        r, res = self.fetch("--sha256", pub, "-H", "Authorization: Bearer x",
                            self.origin.url("/files/elsewhere"))
        self.assertEqual((res["source"], res["sha256"]), ("hit", pub))  # public bytes by digest

    def test_any_header_makes_a_private_entry(self):
        # Tokens hide in many headers (PRIVATE-TOKEN, X-Api-Key...): every
        # header keys the entry, and -H @FILE keeps them out of argv.
        self.make_file("p.bin", 2000)
        hdr = os.path.join(self.tmp, "token.hdr")
        with open(hdr, "w") as f:
            f.write("# a comment\nPRIVATE-TOKEN: %s\n\n" % TOKEN)
        r, res = self.fetch("-H", "@" + hdr, self.origin.url("/files/p.bin"))
        self.assertEqual((r.rc, res["source"]), (0, "download"), r)
        self.assertEqual(os.stat(res["path"]).st_mode & 0o777, 0o400)
        r, res = self.fetch(self.origin.url("/files/p.bin"))
        self.assertEqual(res["source"], "download")  # not the PRIVATE-TOKEN entry
        r, res = self.fetch("-H", "@" + hdr, self.origin.url("/files/p.bin"))
        self.assertEqual(res["source"], "hit")
        self.assertEqual(self.origin.requests_for("/files/p.bin"), 2)

    def test_concurrent_requests_share_only_with_the_same_credentials(self):
        url, digest = self.gated("slow.bin", 2 << 20)
        url += "&bps=%d" % (4 << 20)
        a = self.hubctl_bg("fetch", "--json", "-H", "Authorization: Bearer " + TOKEN, url)
        wait_for(lambda: self.origin.requests_for("/files/slow.bin") == 1, what="the download")
        b = self.hubctl_bg("fetch", "--json", url)  # no token: must not attach
        out_b, _ = b.communicate(timeout=30)
        out_a, _ = a.communicate(timeout=30)
        self.assertEqual(json.loads(out_a)["sha256"], digest)
        self.assertEqual(json.loads(out_b)["error"]["code"], "http_401")

    def test_credentials_go_to_the_first_origin_only(self):
        other = Origin(self.root, name=".port2")
        self.addCleanup(other.stop)
        self.make_file("r.bin", 1000)
        auth = "Authorization: Bearer " + TOKEN
        # Same origin: the header follows the redirect.
        r = self.hubctl("fetch", "-H", auth, self.origin.url("/redirect/1/files/r.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.origin.stats()["auth"]["/files/r.bin"], ["Bearer " + TOKEN])
        # Another port: it does not.
        target = other.url("/files/r.bin")
        r = self.hubctl("fetch", "-H", auth, "-H", "Cookie: session=" + TOKEN,
                        self.origin.url("/redirect-to?url=" + target))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(other.stats()["auth"]["/files/r.bin"], [""])

    def test_a_retry_after_a_redirect_elsewhere_keeps_the_token_for_the_first(self):
        # A gated host that redirects to a CDN (another port here): the CDN
        # never gets the token; a retry goes back to the gated host, which
        # gets it again.
        from harness import write_config
        self.hubd.stop()
        self.hubd = Hubd(os.path.join(self.tmp, "hub-retry"), config=write_config(
            os.path.join(self.tmp, "retry.conf"), retries="3", retry_delay="20ms"))
        cdn = Origin(self.root, name=".port3")
        self.addCleanup(cdn.stop)
        digest = self.make_file("c.bin", 200000)
        target = cdn.url("/files/c.bin?cut=50000")
        url = self.origin.url("/redirect-to?require_auth=%s&url=%s" % (
            needs(TOKEN), urllib.parse.quote(target, safe="")))
        r = self.hubctl("fetch", "--json", "-H", "Authorization: Bearer " + TOKEN, url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        self.assertEqual(set(self.origin.stats()["auth"]["/redirect-to"]), {"Bearer " + TOKEN})
        self.assertEqual(set(cdn.stats()["auth"]["/files/c.bin"]), {""})

    def test_bad_headers_are_refused_and_the_session_goes_on(self):
        self.make_file("h.bin", 1000)
        url = self.origin.url("/files/h.bin")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        f = s.makefile("rwb")
        bad = ["Host: evil", "Content-Length: 5", "Transfer-Encoding: chunked", "Connection: close",
               "Range: bytes=0-", "X-A: 1%0D%0AX-Injected: 2", "X-A: 1%0AX-B: 2",
               "Bad Name: v", "NoColon", ":empty-name", "X-Long: " + "a" * 5000]
        for i, h in enumerate(bad):
            f.write(b"FETCH id=%d url=%s header=%s\n" % (i, url.encode(),
                                                        h.replace(" ", "%20").encode()))
        f.write(b"FETCH id=ok url=%s header=X-Trace:%%20fine\n" % url.encode())
        f.flush()
        got = {}
        while "ok" not in got or got["ok"].startswith("QUEUED") or got["ok"].startswith("PROGRESS"):
            line = f.readline().decode()
            self.assertTrue(line, "the session was closed")
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            got[fields.get("id")] = line
        s.close()
        for i in range(len(bad)):
            self.assertIn("code=bad_request", got[str(i)], bad[i])
        self.assertTrue(got["ok"].startswith("DONE"), got["ok"])
        self.assertEqual(self.origin.requests_for("/files/h.bin"), 1)


class NetworkPolicyTest(HubTestCase):
    def restart_with(self, **keys):
        from harness import write_config
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "np.conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-np"), config=conf)

    def fetch_code(self, url):
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 1, r)
        res = json.loads(r.out)
        return res["error"]["code"], res.get("error", {}).get("message", "")

    def test_metadata_and_link_local_are_denied_by_default(self):
        t = time.monotonic()
        for url in ("http://169.254.169.254/latest/meta-data/", "http://[fe80::1]:8080/x",
                    "http://100.100.100.200/", "http://0.0.0.0:%d/" % self.origin.port,
                    "http://[::ffff:169.254.169.254]/"):
            code, msg = self.fetch_code(url)
            self.assertEqual(code, "forbidden", (url, msg))
            self.assertIn("network policy", msg)
        self.assertLess(time.monotonic() - t, 5)  # refused, not timed out

    def test_every_resolved_address_and_every_hop_is_checked(self):
        self.restart_with(deny_networks="127.0.0.0/8, ::1/128")
        self.make_file("a", 100)
        # A name that resolves to a denied address (DNS rebinding's shape).
        code, msg = self.fetch_code("http://localhost:%d/files/a" % self.origin.port)
        self.assertEqual(code, "forbidden")
        self.assertIn("resolves only to addresses", msg)
        self.assertEqual(self.origin.stats()["total_requests"], 0)

    def test_redirect_hops_are_checked(self):
        self.make_file("a", 100)
        code, _ = self.fetch_code(self.origin.url("/redirect-to?url=http://169.254.169.254/x"))
        self.assertEqual(code, "forbidden")
        self.restart_with(allow_hosts="127.0.0.1")
        self.assertEqual(self.hubctl("fetch", self.origin.url("/files/a")).rc, 0)
        code, msg = self.fetch_code(self.origin.url(
            "/redirect-to?url=http://localhost:%d/files/a" % self.origin.port))
        self.assertEqual(code, "forbidden")
        self.assertIn("localhost", msg)
        self.restart_with(deny_hosts="localhost")
        code, _ = self.fetch_code("http://localhost:%d/files/a" % self.origin.port)
        self.assertEqual(code, "forbidden")


class ServerLimitsTest(HubTestCase):
    """What a server sends is bounded: header lines, encodings, file size."""

    def restart_with(self, **keys):
        from harness import write_config
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "lim.conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-lim"), config=conf)

    def code(self, url):
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 1, r)
        return json.loads(r.out)["error"]["code"]

    def test_header_count_and_encodings_and_size(self):
        self.assertEqual(self.code(self.origin.url("/bigheaders?n=200&len=20")), "http_parse")
        r = self.hubctl("fetch", self.origin.url("/bigheaders?n=100&len=20"))
        self.assertEqual(r.rc, 0, r)  # 100 small headers are fine
        self.make_file("z.bin", 5000)
        self.assertEqual(self.code(self.origin.url("/files/z.bin?encoding=gzip")), "http_parse")
        r = self.hubctl("fetch", self.origin.url("/files/z.bin?encoding=identity"))
        self.assertEqual(r.rc, 0, r)
        self.restart_with(max_file_size="4K")
        self.assertEqual(self.code(self.origin.url("/files/z.bin?x=1")), "too_large")
        self.assertEqual(self.code(self.origin.url("/chunked/z.bin")), "too_large")  # no length
        self.assertEqual(self.hubd.blob_files(), [])
        self.hubd.wait_no_partials()


class RawServer:
    """A one-shot TCP server on loopback that answers every connection with
    the same raw bytes, then closes it (for responses origin.py will not
    send). Stopped by the test's cleanup."""

    def __init__(self, test, response):
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.response = response
        threading.Thread(target=self.serve, daemon=True).start()
        test.addCleanup(self.sock.close)

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(self.response)


class ResponseShapeTest(HubTestCase):
    def assert_http_parse(self, response):
        """A fetch from a server that sends `response` fails with http_parse
        and stores nothing; returns the error's message."""
        srv = RawServer(self, response)
        r = self.hubctl("fetch", "--json", "http://127.0.0.1:%d/f" % srv.port)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(json.loads(r.out)["error"]["code"], "http_parse")
        self.assertEqual(self.hubd.blob_files(), [])
        return json.loads(r.out)["error"]["message"]

    def test_a_status_below_100_is_not_informational(self):
        # Found by fuzz_http: llhttp takes any three digits, and the body of
        # "099" used to reach the file before the real response's headers.
        self.assert_http_parse(b"HTTP/1.1 099 X\r\nContent-Length: 8\r\n\r\nINJECTED"
                               b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello")

    def test_a_content_length_beyond_int64_is_refused(self):
        # Found by fuzz_http: llhttp reads the length as a uint64, which
        # turned negative ("unknown") on its way to the job.
        msg = self.assert_http_parse(b"HTTP/1.1 200 OK\r\n"
                                     b"Content-Length: 10248191152060862009\r\n\r\nhello")
        self.assertIn("Content-Length is too large", msg)


class AccessTest(HubTestCase):
    def restart_with(self, **keys):
        from harness import write_config
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "acc.conf"), socket_mode="0666", **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-acc"), config=conf)
        for d in (self.tmp, self.hubd.workdir):  # let another user reach the socket
            os.chmod(d, 0o755)

    def as_nobody(self, *args):
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                              + self.hubctl_args(*args), capture_output=True, text=True,
                              timeout=60)

    def test_sessions_are_logged_with_peer_credentials(self):
        self.hubctl("stats")
        self.assertRegex(self.hubd.read_log(), r"session pid \d+ uid 0 gid 0: connected")

    def test_allow_list(self):
        self.make_file("a", 1000)
        self.restart_with(allow_users="root, 1234", allow_groups="")
        r = self.as_nobody("fetch", self.origin.url("/files/a"))
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("permission_denied", r.stderr + r.stdout)
        self.assertIn("refused (not in allow_users", self.hubd.read_log())
        self.assertEqual(self.origin.requests_for("/files/a"), 0)
        self.restart_with(allow_users="65534")
        r = self.as_nobody("fetch", self.origin.url("/files/a"))
        self.assertEqual(r.returncode, 0, r)

    def test_a_user_taken_out_of_allow_users_is_refused_on_an_open_session(self):
        # allow_users was checked when a session was accepted only: a user
        # taken out of it (and SIGHUP) who kept a session open went on
        # fetching through it for as long as it stayed open.
        from harness import write_config
        for name in "ab":
            self.make_file(name, 1000, seed=ord(name))
        self.restart_with(allow_users="nobody")
        code = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "buf = b''\n"
            "def ask(i, u):\n"
            "    global buf\n"
            "    s.sendall(b'FETCH id=%d url=%s\\n' % (i, u.encode()))\n"
            "    while True:\n"
            "        while b'\\n' not in buf:\n"
            "            buf += s.recv(65536)\n"
            "        line, buf = buf.split(b'\\n', 1)\n"
            "        if line.startswith((b'DONE', b'ERR')):\n"
            "            return line.decode()\n"
            "print(ask(1, sys.argv[2]), flush=True)\n"
            "sys.stdin.readline()\n"
            "print(ask(2, sys.argv[3]), flush=True)\n")
        p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "python3", "-c", code, self.hubd.socket,
                              self.origin.url("/files/a"), self.origin.url("/files/b")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        self.assertTrue(p.stdout.readline().startswith("DONE id=1 "))
        write_config(os.path.join(self.tmp, "acc.conf"), socket_mode="0666", allow_users="root")
        self.hubd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log(), what="the reload")
        p.stdin.write("\n")
        p.stdin.flush()
        line = p.stdout.readline()
        self.assertTrue(line.startswith("ERR id=2 code=permission_denied "), line)
        self.assertIn("allow_users", urllib.parse.unquote(line))
        p.wait(30)
        self.assertEqual(self.origin.requests_for("/files/b"), 0)

    def test_per_user_limits(self):
        self.restart_with(max_requests_per_user="2", max_jobs_per_user="1")
        for name in "abc":
            self.make_file(name, 1 << 20)
        slow = [self.hubctl_bg("fetch", self.origin.url("/files/%s?bps=%d" % (n, 1 << 20)))
                for n in "ab"]
        wait_for(lambda: len(self.status()) == 2, what="two jobs")
        states = sorted(j["state"] for j in self.status())
        self.assertEqual(states[1], "queued")  # one transfer at a time for this uid
        r = self.hubctl("fetch", self.origin.url("/files/c"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("too_many_requests", r.err)
        # Another user is not held up by this one's queue.
        r = self.as_nobody("fetch", self.origin.url("/files/c"))
        self.assertEqual(r.returncode, 0, r)
        for p in slow:
            self.assertEqual(p.wait(timeout=30), 0)

    def test_hanging_up_does_not_escape_the_limits(self):
        # A client that asks and closes leaves its job running: the jobs one
        # uid created count as well.
        self.restart_with(max_requests_per_user="3", max_jobs_per_user="1")
        codes = []
        for i in range(6):
            self.make_file("h%d" % i, 1 << 20, seed=i + 1)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.hubd.socket)
            f = s.makefile("rwb")
            f.write(b"FETCH id=1 url=%s\n" % self.origin.url(
                "/files/h%d?bps=%d" % (i, 256 << 10)).encode())
            f.flush()
            codes.append(f.readline().split()[0].decode())
            s.close()
        self.assertEqual(codes[:3], ["QUEUED"] * 3)
        self.assertEqual(codes[3:], ["ERR"] * 3)
        self.assertLessEqual(len(self.status()), 3)

    def test_subordinate_uids_share_their_users_limits(self):
        """A user's subordinate uids (subuid_file, as newuidmap grants them)
        reach the socket from a user namespace as uids of their own: each
        counts as its user for the per-user bounds. Before, 65,536 of them
        had 65,536 times the bounds: here six asked where three may."""
        subuid = os.path.join(self.tmp, "subuid")
        with open(subuid, "w") as f:
            f.write("1000:100000:65536\n")
        self.restart_with(max_requests_per_user="3", max_jobs_per_user="8", subuid_file=subuid)
        client = ("import socket, sys\n"
                  "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                  "s.connect(sys.argv[1])\n"
                  "f = s.makefile('rwb')\n"
                  "f.write(b'FETCH id=1 url=' + sys.argv[2].encode() + b'\\n')\n"
                  "f.flush()\n"
                  "print(f.readline().decode().strip(), flush=True)\n"
                  "sys.stdin.read()\n")
        procs, lines = [], []
        for i in range(6):  # six subordinate uids of uid 1000, each its own request
            self.make_file("s%d" % i, 1 << 20, seed=i + 1)
            p = subprocess.Popen(["setpriv", "--reuid=%d" % (100000 + i), "--regid=%d" % (100000 + i),
                                  "--clear-groups", "python3", "-c", client, self.hubd.socket,
                                  self.origin.url("/files/s%d?bps=%d" % (i, 128 << 10))],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(p)
            self.addCleanup(p.kill)
            lines.append(p.stdout.readline())
        self.assertEqual([l.split()[0] for l in lines], ["QUEUED"] * 3 + ["ERR"] * 3, lines)
        self.assertIn("uid 1000 has 3 requests waiting", urllib.parse.unquote(lines[3]))
        # Another user is not held up by them.
        r = self.as_nobody("fetch", self.origin.url("/files/s0"))
        self.assertEqual(r.returncode, 0, r)
        for p in procs:
            p.kill()
            p.wait(30)

    def status(self):
        r = self.hubctl("status", "--json")
        return json.loads(r.out) if r.rc == 0 else []


class HostileClientTest(HubTestCase):
    def test_an_endless_line_is_cut_off(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        s.settimeout(10)
        closed = False
        try:
            for _ in range(64):  # 4 MiB without a newline
                s.sendall(b"A" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        if not closed:
            data = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            self.assertIn(b"line_too_long", data)
        s.close()
        self.assertIn("cut off (overlong lines)", self.hubd.read_log())
        self.assertEqual(self.hubctl("stats").rc, 0)

    def test_a_client_that_does_not_read_is_not_read_either(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        s.setblocking(False)
        sent = 0
        deadline = time.monotonic() + 10
        line = b"STATS\n" * 1000
        while time.monotonic() < deadline:
            try:
                sent += s.send(line)
            except BlockingIOError:
                break  # hubd stopped reading us: the socket buffers are full
        self.assertLess(time.monotonic(), deadline, "hubd kept reading a client that never reads")
        rss = int(open("/proc/%d/statm" % self.hubd.proc.pid).read().split()[1]) * 4096
        self.assertLess(rss, 200 << 20)
        self.assertEqual(self.hubctl("stats").rc, 0)  # others are served meanwhile
        s.close()

    def test_hits_for_a_client_that_does_not_read_do_not_pile_up_fds(self):
        # Each DONE passes a blob fd: queued ones count in the backpressure.
        self.make_file("c.bin", 1000)
        url = self.origin.url("/files/c.bin")
        self.assertEqual(self.hubctl("fetch", url).rc, 0)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        s.setblocking(False)
        lines = b"".join(b"FETCH id=%d url=%s\n" % (i, url.encode()) for i in range(6000))
        deadline = time.monotonic() + 5
        while lines and time.monotonic() < deadline:
            try:
                lines = lines[s.send(lines):]
            except BlockingIOError:
                time.sleep(0.01)
        time.sleep(0.5)
        nfds = len(os.listdir("/proc/%d/fd" % self.hubd.proc.pid))
        self.assertLess(nfds, 600)
        self.assertEqual(self.hubctl("fetch", url).rc, 0)  # others are served
        s.close()

    def test_random_protocol_lines_leave_the_daemon_serving(self):
        rnd = random.Random(10000)
        verbs = [b"FETCH", b"STATUS", b"STATS", b"LIST", b"HELLO", b"RM", b"GC", b"PIN", b"X"]
        keys = [b"id", b"url", b"sha256", b"header", b"target", b"proto", b"max_size", b"zz"]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.hubd.socket)
        s.setblocking(False)
        sent = 0
        out = bytearray()
        for i in range(10000):
            kind = rnd.random()
            if kind < 0.3:  # random bytes, newline-ended
                line = bytes(rnd.randrange(1, 256) for _ in range(rnd.randrange(0, 80)))
                line = line.replace(b"\n", b"") + b"\n"
            else:
                fields = [rnd.choice(keys) + b"=" + bytes(rnd.choice(b"abc%0A%00:/ =")
                                                         for _ in range(rnd.randrange(0, 30)))
                          for _ in range(rnd.randrange(0, 6))]
                line = b" ".join([rnd.choice(verbs)] + fields) + b"\n"
            # Keep fetches off the network: no real URL is ever formed.
            out += line.replace(b"http", b"hxxp")
            sent += 1
            while out:
                try:
                    n = s.send(out)
                    del out[:n]
                except BlockingIOError:
                    try:
                        while s.recv(65536):  # drain replies so neither side blocks
                            pass
                    except BlockingIOError:
                        pass
                    except ConnectionError:
                        break
        s.close()
        # Whatever that session got, hubd serves the next client.
        self.make_file("ok.bin", 1000)
        r = self.hubctl("fetch", self.origin.url("/files/ok.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.stats()["misses"], 1)  # no random line reached an origin


if __name__ == "__main__":
    unittest.main()
