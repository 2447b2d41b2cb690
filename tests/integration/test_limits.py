"""Settings that shape a download: buffers, backpressure, queueing, timeouts,
and the configuration file and environment they come from."""

import json
import os
import socket
import subprocess
import time
import unittest

from harness import write_config, free_port, HUBCTL, HUBD, Hubd, HubTestCase, sha256_file, wait_for




class LimitsTest(HubTestCase):
    def restart_with(self, **keys):
        """Replaces the fixture's hubd by one with these settings."""
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "hubd.conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub2"), config=conf)

    def test_small_buffers_and_backpressure(self):
        # 4 KiB reads and batches, at most 64 KiB queued for the pool: many
        # pauses and resumes, the bytes must still be right.
        self.restart_with(read_buffer_size="4K", max_inflight="64K")
        d1 = self.make_file("b1.bin", 5 * 1024 * 1024 + 11, seed=1)
        d2 = self.make_file("b2.bin", 3 * 1024 * 1024 + 5, seed=2)
        r = self.hubctl("fetch", "--json", self.origin.url("/files/b1.bin"),
                        self.origin.url("/chunked/b2.bin"))
        self.assertEqual(r.rc, 0, r)
        got = [json.loads(line) for line in r.out.splitlines()]
        self.assertEqual([g["sha256"] for g in got], [d1, d2])
        self.assertEqual(sha256_file(got[0]["path"]), d1)
        self.assertEqual(sha256_file(got[1]["path"]), d2)

    def test_buffer_larger_than_half_the_inflight_cap(self):
        # The unsealed batch alone exceeds the resume threshold: pausing must
        # hand it to the pool first, or nothing would ever resume the job.
        self.restart_with(read_buffer_size="256K", max_inflight="64K")
        digest = self.make_file("s.bin", 4 * 1024 * 1024)
        r = self.hubctl("fetch", self.origin.url("/files/s.bin"), timeout=30)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)

    def test_max_downloads_queues_the_rest(self):
        self.restart_with(max_downloads="1")
        self.make_file("q1.bin", 2 * 1024 * 1024, seed=1)
        d2 = self.make_file("q2.bin", 1000, seed=2)
        slow = self.hubctl_bg("fetch", self.origin.url("/files/q1.bin?bps=2000000"))
        wait_for(lambda: self.origin.requests_for("/files/q1.bin") == 1, what="the first job")
        second = self.hubctl_bg("fetch", "--json", self.origin.url("/files/q2.bin"))

        def queued():
            jobs = json.loads(self.hubctl("status", "--json").out)
            return [j["state"] for j in jobs] == ["downloading", "queued"] or \
                sorted(j["state"] for j in jobs) == ["downloading", "queued"]
        wait_for(queued, what="the second job to wait in the queue")
        self.assertEqual(self.origin.requests_for("/files/q2.bin"), 0)
        out, err = second.communicate(timeout=60)
        self.assertEqual(second.returncode, 0, err)
        self.assertEqual(json.loads(out)["sha256"], d2)
        self.assertEqual(slow.wait(timeout=60), 0)

    def test_first_byte_timeout(self):
        self.restart_with(first_byte_timeout="300ms")
        self.make_file("i.bin", 1000)
        t = time.monotonic()
        r = self.hubctl("fetch", self.origin.url("/files/i.bin?delay_ms=3000"))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("timeout", r.err)
        self.assertLess(time.monotonic() - t, 2.5)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_connect_timeout(self):
        self.restart_with(connect_timeout="300ms")
        # A listener whose accept queue is full: the kernel drops the SYN and
        # the connect hangs, as with a dead host, without leaving loopback.
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(0)
        self.addCleanup(lsock.close)
        fillers = []
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(lsock.getsockname())
            except BlockingIOError:
                pass
            fillers.append(c)
            self.addCleanup(c.close)
        t = time.monotonic()
        r = self.hubctl("fetch", "http://127.0.0.1:%d/x" % lsock.getsockname()[1])
        self.assertEqual(r.rc, 1, r)
        self.assertIn("timeout", r.err)
        self.assertLess(time.monotonic() - t, 2.5)

    def test_bad_config_names_file_line_key(self):
        conf = os.path.join(self.tmp, "bad.conf")
        with open(conf, "w") as f:
            f.write("[hubd]\nmax_downloads = 4\nmax_dowloads = 5\n")
        p = subprocess.run([HUBD, "--config", conf, "--socket", os.path.join(self.tmp, "x.sock")],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn(("%s:3: unknown key 'max_dowloads'" % conf).encode(), p.stderr)

    def test_shipped_config_starts(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "etc", "hubd.conf")) as f:
            text = f.read()
        # The shipped file turns the HTTP front on at a fixed port (issue
        # 13); a test takes a free one, so that runs side by side never meet.
        shipped = "\nhttp_listen = 127.0.0.1:8399, [::1]:8399\n"
        self.assertIn(shipped, text)
        port = free_port()
        conf = os.path.join(self.tmp, "shipped.conf")
        with open(conf, "w") as f:
            f.write(text.replace(shipped, "\nhttp_listen = 127.0.0.1:%d\n" % port))
        self.hubd.stop()
        self.hubd = Hubd(os.path.join(self.tmp, "hub3"), config=conf)
        self.assertIn("HTTP front listening on 127.0.0.1:%d" % port, self.hubd.read_log())
        digest = self.make_file("c.bin", 1000)
        r = self.hubctl("fetch", self.origin.url("/files/c.bin"))
        self.assertEqual(os.path.basename(r.out.strip()), digest, r)

    def test_socket_from_environment(self):
        sock = os.path.join(self.tmp, "env.sock")
        env = dict(os.environ, HUBD_SOCKET=sock)
        self.hubd.stop()
        log = open(os.path.join(self.tmp, "env.log"), "wb")
        self.addCleanup(log.close)
        proc = subprocess.Popen([HUBD, "--cache-dir", os.path.join(self.tmp, "envcache")],
                                env=env, stdout=log, stderr=log)
        try:
            wait_for(lambda: os.path.exists(sock), what="hubd on $HUBD_SOCKET")
            digest = self.make_file("e.bin", 1000)
            p = subprocess.run([HUBCTL, "fetch", self.origin.url("/files/e.bin")], env=env,
                               capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p)
            self.assertEqual(os.path.basename(p.stdout.decode().strip()), digest)
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(timeout=10), 0)
        self.hubd.start()  # for the fixture's clean-exit check


if __name__ == "__main__":
    unittest.main()
