"""The wire protocol spoken directly over the socket, as socat would."""

import array
import os
import socket
import unittest
import urllib.parse

from harness import HubTestCase, sha256_file


class Session:
    """A raw protocol session; collects fds passed with DONE."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.buf = b""
        self.fds = []

    def send(self, line):
        self.sock.sendall(line if isinstance(line, bytes) else line.encode())

    def line(self):
        while b"\n" not in self.buf:
            fds = array.array("i")
            data, anc, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            self.fds += list(fds)
            if not data:
                raise EOFError("hubd closed the session")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def msg(self):
        parts = self.line().split(" ")
        fields = {}
        for p in parts[1:]:
            k, _, v = p.partition("=")
            fields[k] = urllib.parse.unquote(v)
        return parts[0], fields

    def until(self, verb, id=None):
        while True:
            v, f = self.msg()
            if v in (verb, "ERR") and (id is None or f.get("id") == id):
                return v, f

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.sock.close()


class ProtocolTest(HubTestCase):
    def session(self):
        s = Session(self.hubd.socket)
        self.addCleanup(s.close)
        return s

    def test_hello(self):
        s = self.session()
        s.send("HELLO proto=1 client=test\n")
        v, f = s.msg()
        self.assertEqual((v, f["proto"]), ("HELLO", "1"))
        s.send("HELLO proto=7\n")
        v, f = s.msg()
        self.assertEqual((v, f["code"]), ("ERR", "proto_version"))

    def test_bad_lines_get_errors_and_session_survives(self):
        s = self.session()
        for line, code in [
            (b"NOSUCHVERB\n", "unknown_verb"),
            (b"fetch lower case verb\n", "bad_request"),
            (b"FETCH id=1 url=%zz\n", "bad_request"),
            (b"FETCH url=http://x/\n", "bad_request"),
            (b"FETCH id=1 url=http://x/ sha256=abc\n", "bad_request"),
            (b"FETCH id=2 url=ftp://x/\n", "unsupported_scheme"),
            (b"FETCH id=3 url=not-a-url\n", "bad_url"),
            (b"X" * 20000 + b"\n", "line_too_long"),
        ]:
            s.send(line)
            v, f = s.msg()
            self.assertEqual((v, f.get("code")), ("ERR", code), line[:40])
        s.send("STATS\n")
        v, f = s.msg()
        self.assertEqual(v, "STATS")
        self.assertEqual(f["errors"], "0")

    def test_done_carries_a_readable_fd(self):
        digest = self.make_file("fd.bin", 777777)
        s = self.session()
        url = urllib.parse.quote(self.origin.url("/files/fd.bin"), safe=":/?=&")
        s.send("FETCH id=a url=%s\n" % url)
        v, f = s.msg()
        self.assertEqual(v, "QUEUED")
        v, f = s.until("DONE", "a")
        self.assertEqual(v, "DONE", f)
        self.assertEqual(f["sha256"], digest)
        self.assertEqual(f["source"], "download")
        self.assertEqual(len(s.fds), 1)
        with os.fdopen(os.dup(s.fds[0]), "rb") as fh:
            import hashlib
            self.assertEqual(hashlib.sha256(fh.read()).hexdigest(), digest)
        with self.assertRaises(OSError):
            os.write(s.fds[0], b"x")  # read-only

    def test_a_hits_fd_rides_on_the_first_byte_of_its_done_line(self):
        # A hit's HIT and DONE leave in one system call (two messages): the
        # bytes and the descriptor's place are what they were when each had
        # its own. Read one byte at a time, the fd comes with DONE's "D".
        self.make_file("h.bin", 4096)
        url = self.origin.url("/files/h.bin")
        s = self.session()
        s.send("FETCH id=warm url=%s\n" % url)
        self.assertEqual(s.until("DONE", "warm")[0], "DONE")
        for n in range(3):
            s.send("FETCH id=h%d url=%s\n" % (n, url))
            got, fd_at = b"", []
            while not got.endswith(b"\n") or got.count(b"\n") < 2:
                data, anc, _, _ = s.sock.recvmsg(1, socket.CMSG_SPACE(4 * 4))
                self.assertTrue(data, "hubd closed the session")
                for level, kind, payload in anc:
                    if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                        fds = array.array("i")
                        fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
                        fd_at += [len(got)] * len(fds)
                        for fd in fds:
                            self.assertEqual(os.fstat(fd).st_size, 4096)
                            os.close(fd)
                got += data
            hit, done = got.decode().splitlines()
            self.assertEqual(hit, "HIT id=h%d" % n)
            self.assertTrue(done.startswith("DONE id=h%d " % n), done)
            self.assertIn(" source=hit", done)
            self.assertEqual(fd_at, [len(hit) + 1], got)

    def test_pipelined_fetches_on_one_session(self):
        names = ["p%d" % i for i in range(5)]
        digests = {n: self.make_file(n, 50000 + i, seed=i) for i, n in enumerate(names)}
        s = self.session()
        s.send("".join("FETCH id=%s url=%s\n" % (n, self.origin.url("/files/" + n))
                       for n in names))
        done = {}
        while len(done) < len(names):
            v, f = s.msg()
            self.assertNotEqual(v, "ERR", f)
            if v == "DONE":
                done[f["id"]] = f["sha256"]
        self.assertEqual(done, digests)
        self.assertEqual(len(s.fds), len(names))

    def test_duplicate_id_refused(self):
        self.make_file("slow.bin", 2 * 1024 * 1024)
        s = self.session()
        url = self.origin.url("/files/slow.bin?bps=4000000")
        s.send("FETCH id=x url=%s\n" % url)
        self.assertEqual(s.msg()[0], "QUEUED")
        s.send("FETCH id=x url=%s\n" % url)
        v, f = s.until("ERR", "x")
        self.assertEqual(f["code"], "bad_request")
        v, f = s.until("DONE", "x")
        self.assertEqual(v, "DONE")

    def test_garbage_client_does_not_harm_others(self):
        digest = self.make_file("ok.bin", 100000)
        bad = self.session()
        bad.send(os.urandom(100000))
        r = self.hubctl("fetch", self.origin.url("/files/ok.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)


if __name__ == "__main__":
    unittest.main()
