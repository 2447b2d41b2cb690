"""Origins that lie or crawl in their response heads: headers dripped a byte at a time, endless informational (1xx)
responses, 1xx headers taken for the final response's, transfer codings
hubd would store undecoded; and lengths no disk holds, announced to size
hubd's memory. Each origin here is a ScriptedServer:
raw bytes on a timetable, from a thread, on 127.0.0.1."""

import json
import os
import re
import resource
import socket
import subprocess
import threading
import sys
import time
import unittest

from harness import SLOW, SLOWED, Hubd, HubTestCase, stop_pid, write_config

MiB = 1 << 20


class ScriptedServer:
    """A TCP server on 127.0.0.1 for responses origin.py will not send. The
    n-th request it reads (any connection) is answered by scripts[n], the
    last script for every later one. A script is a function of the request
    number that returns an iterable of (bytes, seconds to wait after them);
    an endless generator drips for ever. The connection is closed when the
    script ends (or hubd goes away). Each request's head is kept in
    `requests`. Stopped by the test's cleanup."""

    def __init__(self, test, *scripts):
        self.scripts = scripts
        self.requests = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        t = threading.Thread(target=self.accept_loop, daemon=True)
        t.start()
        self.threads.append(t)
        test.addCleanup(self.stop)

    def url(self, path="/f"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        self.stopping.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept(); close alone does not
        except OSError:
            pass
        self.sock.close()
        for t in list(self.threads):
            t.join(5)

    def accept_loop(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self.serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def serve(self, conn):
        with conn:
            conn.settimeout(0.1)  # to notice stop() while waiting for a request
            head = b""
            while b"\r\n\r\n" not in head:
                if self.stopping.is_set():
                    return
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                head += data
            conn.settimeout(10)
            with self.lock:
                n = len(self.requests)
                self.requests.append(head.decode("latin-1"))
            script = self.scripts[min(n, len(self.scripts) - 1)]
            try:
                for data, wait in script(n):
                    if self.stopping.is_set():
                        return
                    if data:
                        conn.sendall(data)
                    if wait and self.stopping.wait(wait):
                        return
            except OSError:
                return  # hubd closed the connection: what these tests want


def once(data):
    """A script that sends data at once, then closes."""
    return lambda n: [(data, 0)]


def ok_response(body=b"hello"):
    return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % len(body) + body)


def chunked(body, size=7):
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b"%x\r\n%s\r\n" % (len(part), part)
    return out + b"0\r\n\r\n"


# Whether the tests that need a header deadline put header_timeout in their
# config. (False: left out, to watch a binary without it hold the job: the
# fails-before check.)
WITH_HEADER_TIMEOUT = True


def header_timeout(ms=1500):
    return {"header_timeout": "%dms" % ms} if WITH_HEADER_TIMEOUT else {}


class OriginFaultTest(HubTestCase):
    def restart(self, **keys):
        """hubd again with short idle and first-byte timeouts, and keys."""
        self.hubd.stop()
        keys.setdefault("idle_timeout", "1s")
        keys.setdefault("first_byte_timeout", "1s")
        self.hubd = Hubd(os.path.join(self.tmp, "hub-faults"), config=write_config(
            os.path.join(self.tmp, "faults.conf"), **keys))

    def fetch(self, url, limit=20):
        """hubctl fetch --json url: (exit status, its JSON answer, seconds
        taken). A fetch still running after `limit` seconds fails the test
        (the job is being held: what these tests are about)."""
        t = time.monotonic()
        p = subprocess.Popen(self.hubctl_args("fetch", "--json", url), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            stop_pid(p)
            self.fail("the fetch of %s still ran after %d s: the job is held" % (url, limit))
        res = json.loads(out) if out.strip() else {"stderr": err.decode()}
        return p.returncode, res, time.monotonic() - t

    def assert_fails(self, url, code, limit=20):
        rc, res, took = self.fetch(url, limit)
        self.assertEqual(rc, 1, res)
        self.assertEqual(res.get("error", {}).get("code"), code, res)
        self.assertEqual(self.hubd.blob_files(), [])
        return res.get("error", {}).get("message", ""), took

    # ---- the header phase is bounded ----------------------------------------

    def test_headers_dripped_byte_by_byte_end_at_header_timeout(self):
        # One byte per 0.25 s (under idle_timeout) for ever: each byte used
        # to restart the idle timeout, holding the job for as long as the
        # server liked. Now the header phase has a deadline, and a timeout
        # is transient: retried once here, then the job fails.
        self.restart(retries="1", retry_delay="20ms", **header_timeout())

        def endless(n):
            yield b"HTTP/1.1 200 OK\r\n", 0.25
            while True:
                yield b"X", 0.25

        srv = ScriptedServer(self, endless)
        msg, took = self.assert_fails(srv.url(), "timeout")
        self.assertIn("header_timeout", msg)
        self.assertEqual(len(srv.requests), 2)  # retried as a transient failure
        self.assertGreaterEqual(took, 2 * 1.5)  # not cut before header_timeout, either time

    def test_informational_responses_count_toward_header_timeout(self):
        # A 102 Processing every 0.3 s, each a complete (and harmless)
        # response, 15 of them (under the count limit), then the real one:
        # the deadline is on the whole header phase, not one message.
        def processing(n):
            for _ in range(15):
                yield b"HTTP/1.1 102 Processing\r\n\r\n", 0.3
            yield ok_response(), 0

        self.restart(**header_timeout())
        srv = ScriptedServer(self, processing)
        msg, _ = self.assert_fails(srv.url(), "timeout")
        self.assertIn("header_timeout", msg)

    def test_header_timeout_does_not_bound_the_body(self):
        # The deadline ends with the final response's headers, and the idle
        # timeout takes over from there: headers complete at 1.2 s of a 2 s
        # header_timeout, the body's first bytes 1.2 s later (after the
        # deadline, within idle_timeout of the headers), the rest as slowly.
        body = b"0123456789" * 3
        head = ok_response(body)[:-len(body)].split(b"\r\n")

        def slow(n):
            yield b"\r\n".join(head[:2]) + b"\r\n", 0.4
            yield head[2] + b"\r\n", 0.4
            yield b"X-Late: 1\r\n", 0.4
            yield b"\r\n", 1.2  # the headers are in
            for i in range(0, len(body), 10):
                yield body[i:i + 10], 0.3

        self.restart(idle_timeout="1500ms", **header_timeout(2000))
        srv = ScriptedServer(self, slow)
        rc, res, took = self.fetch(srv.url())
        self.assertEqual(rc, 0, res)
        self.assertEqual(res["size"], len(body))
        self.assertGreater(took, 2.0)  # the body did outlast the header deadline

    # ---- 1xx responses count against the header limits --------------------------

    def test_endless_100_continue_is_refused(self):
        # Without a count, an endless run of 1xx (each resetting the header
        # limits) kept the job reading for ever. 16 are fine, the 17th is not.
        def continues(count):
            return lambda n: [(b"HTTP/1.1 100 Continue\r\n\r\n" * count + ok_response(), 0)]

        def endless(n):
            while True:
                yield b"HTTP/1.1 100 Continue\r\n\r\n", 0.01

        msg, _ = self.assert_fails(ScriptedServer(self, endless).url(), "http_parse")
        self.assertIn("informational", msg)
        msg, _ = self.assert_fails(ScriptedServer(self, continues(17)).url(), "http_parse")
        self.assertIn("informational", msg)
        rc, res, _ = self.fetch(ScriptedServer(self, continues(16)).url())
        self.assertEqual(rc, 0, res)
        self.assertEqual(res["size"], 5)

    def test_1xx_header_lines_and_bytes_count_toward_the_limits(self):
        # 128 lines and 64 KiB are for the whole header phase of a request:
        # three 103s of 50 lines and a 200 of 10 lines is 160 lines...
        lines = b"".join(b"Link: </s%d.css>; rel=preload\r\n" % i for i in range(50))
        hints = b"HTTP/1.1 103 Early Hints\r\n" + lines + b"\r\n"
        msg, _ = self.assert_fails(ScriptedServer(self, once(hints * 3 + ok_response())).url(),
                                   "http_parse")
        self.assertIn("header lines", msg)
        # ...and two 103s of 40 KiB each are 80 KiB.
        big = b"HTTP/1.1 103 Early Hints\r\nLink: <" + b"a" * (40 << 10) + b">\r\n\r\n"
        msg, _ = self.assert_fails(ScriptedServer(self, once(big * 2 + ok_response())).url(),
                                   "http_parse")
        self.assertIn("too large", msg)
        # One such 103 and a final response within what is left: fine.
        rc, res, _ = self.fetch(ScriptedServer(self, once(hints + ok_response())).url())
        self.assertEqual(rc, 0, res)

    # ---- 1xx headers are not the final response's -------------------------------

    def test_1xx_validators_do_not_leak_into_the_retry(self):
        # A 103 with an ETag and a Last-Modified, then a 200 with neither,
        # cut short: the 200 gave no validator, so the retry must start over
        # (no If-Range, no Range but a new download's first one, from byte
        # 0), not resume on the 103's "x".
        body = bytes(range(256)) * 400  # 102400 bytes
        cut = (b"HTTP/1.1 103 Early Hints\r\nETag: \"x\"\r\n"
               b"Last-Modified: Tue, 01 Jan 2030 00:00:00 GMT\r\n\r\n"
               b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)) + body[:50000]
        srv = ScriptedServer(self, once(cut), once(ok_response(body)))
        self.restart(retries="2", retry_delay="20ms")
        rc, res, _ = self.fetch(srv.url())
        self.assertEqual(rc, 0, res)
        self.assertEqual(res["size"], len(body))
        for retry in srv.requests[1:]:
            self.assertNotIn("if-range:", retry.lower(), srv.requests)
            self.assertNotRegex(retry.lower(), r"range: bytes=[1-9]", srv.requests)
        self.assertEqual(len(srv.requests), 2, srv.requests)  # one retry, from byte 0

    # ---- transfer codings -----------------------------------------------------------

    def test_only_chunked_transfer_coding_is_accepted(self):
        # hubd never decodes a transfer coding but chunked: with any other the
        # bytes it would store are not the file. llhttp alone accepts a list
        # that ends in chunked.
        body = b"the file's own bytes, not a coding of them\n"
        for te in (b"Transfer-Encoding: gzip, chunked\r\n",
                   b"Transfer-Encoding: identity, chunked\r\n",
                   b"Transfer-Encoding: chunked, chunked\r\n",
                   b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
                   b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                   b"Transfer-Encoding: x-chunked\r\n",
                   # Valid whitespace, but llhttp does not frame it as
                   # chunked: refused rather than stored with its chunk sizes.
                   b"Transfer-Encoding: chunked\t\r\n"):
            resp = b"HTTP/1.1 200 OK\r\n" + te + b"Connection: close\r\n\r\n" + chunked(body)
            msg, _ = self.assert_fails(ScriptedServer(self, once(resp)).url(), "http_parse")
            self.assertIn("transfer coding", msg, te)
            self.assertIn("not supported", msg, te)
        # chunked alone, in any case and with optional whitespace, is fine.
        for te in (b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: CHUNKED\r\n",
                   b"Transfer-Encoding: \t Chunked  \r\n"):
            resp = b"HTTP/1.1 200 OK\r\n" + te + b"Connection: close\r\n\r\n" + chunked(body)
            rc, res, _ = self.fetch(ScriptedServer(self, once(resp)).url())
            self.assertEqual(rc, 0, (te, res))
            self.assertEqual(res["size"], len(body))
            with open(res["path"], "rb") as f:
                self.assertEqual(f.read(), body)


# ---- lying lengths ----------------------------------------------


class Lying206:
    """A script: the range each request asks for (1 MiB at most) as part of
    a file of `total` zero bytes, paced, then the connection held. It reads
    the request from its server (`srv`, set once that is made)."""

    def __init__(self, total, hold=30):
        self.total, self.hold, self.srv = total, hold, None

    def __call__(self, n):
        m = re.search(r"range: bytes=(\d+)-(\d*)", self.srv.requests[n].lower())
        start = int(m.group(1)) if m else 0
        end = int(m.group(2)) + 1 if m and m.group(2) else start + MiB
        end = min(end, start + MiB)
        yield (b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\n"
               b"Content-Length: %d\r\nETag: \"lie\"\r\n\r\n"
               % (start, end - 1, self.total, end - start)), 0
        for _ in range((end - start) // (64 << 10)):
            yield b"\0" * (64 << 10), 0.005
        yield b"", self.hold


def lying_200(total, hold=30):
    """A script: a 200 announcing `total` bytes, 1 MiB of them, then held."""
    def script(n):
        yield (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"lie\"\r\n\r\n"
               % total), 0
        for _ in range(16):
            yield b"\0" * (64 << 10), 0.005
        yield b"", hold
    return script


def proc_kib(pid, key):
    """VmRSS, VmHWM... of a process, in KiB (0 once it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class StatsPoller:
    """Another client: STATS over a connection of its own every 10 ms, from
    a thread, while the test runs; each answer's latency kept (s). A
    daemon gone (or silent for 10 s) counts as an answer of 10 s."""

    def __init__(self, test, path):
        self.path = path
        self.latencies = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        test.addCleanup(self.stop)

    def ask(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        t = time.monotonic()
        try:
            s.connect(self.path)
            s.sendall(b"STATS\n")
            line = b""
            while not line.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    return 10.0
                line += chunk
            return time.monotonic() - t
        except OSError:
            return 10.0
        finally:
            s.close()

    def run(self):
        while not self.stopping.wait(0.01):
            self.latencies.append(self.ask())

    def stop(self):
        self.stopping.set()
        self.thread.join(15)
        return max(self.latencies or [0.0])


class LyingLengthTest(HubTestCase):
    """A length an origin announces (a first 206's Content-Range total, a
    200's Content-Length) is judged against max_file_size and the file
    system before anything is sized by it; the chunk table is cut as lanes
    take it. Before: a total of 10^15 made segs_begin calloc a chunk per
    MiB on the loop thread until the OOM killer came."""

    CAP = 3000000000  # RLIMIT_AS for hubd: a regression fails here, not the machine

    def restart(self, **keys):
        self.hubd.stop()
        keys = dict(dict(segment_min_size="2M", segment_chunk_size="1M", idle_timeout="10s"),
                    **keys)
        cap = None
        if not SLOWED:  # ASan reserves TiBs
            def cap():
                resource.setrlimit(resource.RLIMIT_AS, (self.CAP, self.CAP))
        self.hubd = Hubd(os.path.join(self.tmp, "hub-lie%d" % len(os.listdir(self.tmp))),
                         config=write_config(os.path.join(self.tmp, "lie.conf"), **keys),
                         preexec_fn=cap)

    def fetch(self, url, limit=20):
        """(exit status, the error's JSON, seconds taken); a fetch still
        running after `limit` seconds is stopped: (None, {}, limit)."""
        t = time.monotonic()
        p = subprocess.Popen(self.hubctl_args("fetch", "--json", url), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            stop_pid(p)
            return None, {}, limit
        res = json.loads(out) if out.strip() else {"stderr": err.decode()}
        return p.returncode, res.get("error", res), time.monotonic() - t

    def lies(self, cases, code, named=True, at_once=1.0):
        """Each (script, total, what) fails with `code` within `at_once`
        seconds, its message naming the total (named); meanwhile hubd's
        peak RSS does not grow by more than a few MiB, and another
        client's STATS is answered within 50 ms throughout. The figures go
        to stderr before anything is asserted (the closing note's)."""
        pid = self.hubd.proc.pid
        self.stats()  # warm: a session served once
        rss0, hwm0 = proc_kib(pid, "VmRSS"), proc_kib(pid, "VmHWM")
        poller = StatsPoller(self, self.hubd.socket)
        time.sleep(0.1)
        got = []
        for i, (script, total, what) in enumerate(cases):
            srv = ScriptedServer(self, script)
            script.srv = srv  # a Lying206 reads the requests
            rc, err, took = self.fetch(srv.url("/lie%d" % i))
            got.append((what, total, rc, err, took))
            if self.hubd.proc.poll() is not None:
                break
        time.sleep(0.1)
        worst = poller.stop()
        grew = (proc_kib(pid, "VmRSS") - rss0, proc_kib(pid, "VmHWM") - hwm0)
        print("\n" + "\n".join("  %s: %s in %.3f s" % (w, e.get("code"), t)
                                for w, _, _, e, t in got) +
              "\n  hubd %s; RSS %+d KiB, peak RSS %+d KiB; STATS at worst %.1f ms (%d asked)" %
              ("alive" if self.hubd.proc.poll() is None else "DEAD", grew[0], grew[1],
               worst * 1000, len(poller.latencies)), file=sys.stderr)
        self.assertIsNone(self.hubd.proc.poll(), "hubd died")
        self.assertEqual(len(got), len(cases))
        for what, total, rc, err, took in got:
            self.assertEqual((rc, err.get("code")), (1, code), (what, err))
            if named:
                self.assertIn("announced %d bytes" % total, err.get("message", ""), what)
            self.assertLess(took, at_once * SLOW, what)
        if not SLOWED:  # valgrind's slowdown, the sanitizers' shadow and quarantine
            self.assertLess(worst, 0.050, "another client's STATS (s)")
            self.assertLess(grew[1], 8 << 10, "hubd's peak RSS grew (KiB)")
        self.assertEqual(self.hubd.blob_files(), [])

    @staticmethod
    def lying_cases(totals):
        out = []
        for total in totals:
            out.append((Lying206(total), total, "206 bytes 0-1048575/%d" % total))
            out.append((lying_200(total), total, "200 Content-Length %d" % total))
        return out

    def test_a_lying_total_is_refused_before_it_sizes_anything(self):
        # No max_file_size, a large free disk: the file system's size alone
        # refuses 10^15 bytes and 2^63-1, at the head, before segments
        # start. Before: a calloc per MiB of the total on the loop thread.
        self.restart()
        self.lies(self.lying_cases((10 ** 15, 2 ** 63 - 1)), "no_space")

    def test_a_lying_total_over_max_file_size_is_too_large(self):
        self.restart(max_file_size="1G")
        self.lies(self.lying_cases((10 ** 15, 2 ** 63 - 1)), "too_large")

    def test_a_total_that_fits_the_disk_but_not_its_free_space(self):
        # Not refused at the head (eviction might make room): the write
        # item's check of the free space fails it after its first batch,
        # and meanwhile the chunk table holds the chunks taken, not one
        # per MiB of the total (before: a quarter of a million for this).
        v = os.statvfs(self.tmp)
        total = v.f_blocks * v.f_frsize - 64 * MiB
        if v.f_bavail * v.f_frsize >= total - 64 * MiB:
            self.skipTest("the file system is nearly empty: the total would fit")
        self.restart()
        self.lies([(Lying206(total), total, "206 bytes 0-1048575/%d" % total)], "no_space",
                  named=False, at_once=5.0)


if __name__ == "__main__":
    unittest.main()
