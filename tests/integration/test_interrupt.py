"""Ctrl-C (SIGINT) of a client while its download runs: alone on it, the
download stops and keeps its partial, and the same command resumes it; with
other waiters it goes on for them. One line says which. hubctl fetch,
hubctl hf download and the Python client (KeyboardInterrupt)."""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

from harness import HUBCTL, HubTestCase, Hubd, wait_for, write_config
from hubstub_fixture import HubStub, lfs_bytes

MiB = 1024 * 1024
PYDIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "client", "python")


class InterruptTest(HubTestCase):
    def slow_file(self, name, size=8 * MiB, bps=2 * MiB):
        digest = self.make_file(name, size)
        return self.origin.url("/files/%s?bps=%d" % (name, bps)), digest

    def downloading(self, url, least=256 * 1024):
        """Waits until hubd's job of url has some bytes (STATUS)."""
        def going():
            r = self.hubctl("status", "--json")
            jobs = json.loads(r.out or "[]") if r.rc == 0 else []
            jobs = jobs["jobs"] if isinstance(jobs, dict) else jobs
            return any(j.get("url") == url and int(j.get("done", 0)) >= least for j in jobs)
        wait_for(going, 30, "the download to be under way")

    def interrupt(self, p):
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        return p.returncode, out.decode(), err.decode()

    def assert_resumes(self, path, url, digest, durable):
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.out)["sha256"], digest)
        starts = self.origin.resume_starts(path)
        self.assertEqual(len(starts), 1, starts)
        self.assertGreaterEqual(starts[0], durable)
        self.assertEqual(self.hubd.partials(), {})

    def stopped_partial(self, url):
        wait_for(lambda: self.hubd.partials().get(url, (0, 0))[1] > 0, 10, "the partial parked")
        return self.hubd.partials()[url][1]

    def test_lone_fetch_stops_keeps_its_partial_and_resumes(self):
        url, digest = self.slow_file("a.bin")
        p = self.hubctl_bg("fetch", url)
        self.downloading(url)
        rc, out, err = self.interrupt(p)
        self.assertEqual(rc, 130, err)
        self.assertEqual(out, "")
        self.assertIn("hubctl: interrupted: the download stopped", err)
        self.assertIn("run the same command again to resume", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        durable = self.stopped_partial(url)
        # Stopped: no job runs on for the cache.
        r = self.hubctl("status", "--json")
        self.assertNotIn(url, r.out)
        self.assert_resumes("/files/a.bin", url, digest, durable)

    def test_one_of_two_waiters_interrupted_the_other_completes(self):
        url, digest = self.slow_file("b.bin", 6 * MiB)
        first = self.hubctl_bg("fetch", "--json", url)
        self.downloading(url, 1)
        second = self.hubctl_bg("fetch", "--json", url)
        wait_for(lambda: '"waiters":2' in self.hubctl("status", "--json").out.replace(" ", ""),
                 30, "two waiters")
        rc, _, err = self.interrupt(first)
        self.assertEqual(rc, 130, err)
        self.assertRegex(err, r"the download \(job \d+\) goes on for 1 other waiting request; "
                              r"`hubctl cancel \d+` stops it")
        out, err2 = second.communicate(timeout=60)
        self.assertEqual(second.returncode, 0, err2)
        self.assertEqual(json.loads(out)["sha256"], digest)
        self.assertEqual(self.origin.resume_starts("/files/b.bin"), [])

    def test_a_long_list_is_interrupted_at_once(self):
        """hubd reads no more of a session than 64 waiting FETCHes: a list
        of 80 slow URLs, then Ctrl-C. INTERRUPT is not stuck behind FETCHes
        hubd has not read: it is answered, and nothing runs on."""
        url, _ = self.slow_file("many.bin", 2 * MiB, 256 * 1024)
        urls = ["%s&n=%d" % (url, i) for i in range(80)]
        listing = os.path.join(self.tmp, "urls.txt")
        with open(listing, "w") as f:
            f.write("\n".join(urls) + "\n")
        p = self.hubctl_bg("fetch", "-i", listing)
        self.downloading(urls[0], 1)
        rc, _, err = self.interrupt(p)
        self.assertEqual(rc, 130, err)
        self.assertNotIn("did not answer", err)
        self.assertIn("hubctl: interrupted: ", err)
        wait_for(lambda: not any(u in self.hubctl("status", "--json").out for u in urls), 10,
                 "every download to stop")

    def test_a_hung_up_client_stops_nothing(self):
        """SIGKILL is no Ctrl-C: the download goes on for the cache."""
        url, digest = self.slow_file("c.bin", 4 * MiB)
        p = self.hubctl_bg("fetch", url)
        self.downloading(url, 1)
        p.kill()
        p.communicate(timeout=30)
        wait_for(lambda: self.hubd.query("SELECT sha256 FROM entries WHERE url = ?", url), 60,
                 "the download to finish for the cache")
        self.assertEqual(self.hubd.query("SELECT sha256 FROM entries WHERE url = ?", url)[0][0],
                         digest)

    def python(self, code):
        env = dict(os.environ, HUBD_SOCKET=self.hubd.socket, PYTHONPATH=PYDIR)
        return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def test_python_keyboard_interrupt_stops_the_lone_download(self):
        url, digest = self.slow_file("d.bin")
        p = self.python("import hubd, sys\n"
                        "try:\n"
                        "    hubd.fetch(%r, progress=False)\n"
                        "except KeyboardInterrupt:\n"
                        "    print('KeyboardInterrupt')\n"
                        "    sys.exit(7)\n" % url)
        self.downloading(url)
        rc, out, err = self.interrupt(p)
        self.assertEqual(rc, 7, err)
        self.assertEqual(out.strip(), "KeyboardInterrupt")
        self.assertIn("hubd: interrupted: the download stopped", err)
        self.assertIn("run it again to resume", err)
        durable = self.stopped_partial(url)
        self.assert_resumes("/files/d.bin", url, digest, durable)

    def test_python_interrupted_waiter_leaves_the_other_its_download(self):
        url, digest = self.slow_file("e.bin", 6 * MiB)
        other = self.hubctl_bg("fetch", "--json", url)
        self.downloading(url, 1)
        p = self.python("import hubd\nhubd.fetch(%r, progress=False)\n" % url)
        wait_for(lambda: '"waiters":2' in self.hubctl("status", "--json").out.replace(" ", ""),
                 30, "two waiters")
        rc, _, err = self.interrupt(p)
        self.assertNotEqual(rc, 0)
        self.assertIn("KeyboardInterrupt", err)
        self.assertRegex(err, r"hubd: interrupted: the download \(job \d+\) goes on for 1 other")
        out, err2 = other.communicate(timeout=60)
        self.assertEqual(other.returncode, 0, err2)
        self.assertEqual(json.loads(out)["sha256"], digest)


class HfDownloadInterruptTest(HubTestCase):
    """hubctl hf download: the Hub's CDN is fast; hubd's max_rate slows it."""

    def test_hf_download_interrupted_then_resumed(self):
        size = 6 * MiB
        repos = {"repos": [{"id": "org/big", "files": {
            "model.safetensors": {"lfs": {"size": size, "seed": 4}},
            "config.json": {"text": "{}\n"}}}]}
        stub = HubStub(os.path.join(self.tmp, "stub"), repos)
        self.addCleanup(stub.stop)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "hf.conf"), hf_upstream=stub.hub_url,
                            max_rate="1500K")
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)
        cache = os.path.join(self.tmp, "hf-cache")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        argv = [HUBCTL, "--socket", self.hubd.socket, "hf", "download", "org/big",
                "--cache-dir", cache]
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def under_way():
            r = self.hubctl("status", "--json")
            return "model.safetensors" in r.out and '"done":0,' not in r.out.replace(" ", "")
        wait_for(under_way, 30, "the download to be under way")
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        err = err.decode()
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("hubctl: interrupted: the download stopped", err)
        self.assertIn("run the same command again to resume", err)
        wait_for(lambda: any(d > 0 for _, d in self.hubd.partials().values()), 10,
                 "the partial parked")
        before = stub.stats("cdn")
        p2 = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        self.assertEqual(p2.returncode, 0, p2.stderr)
        path = os.path.join(p2.stdout.decode().strip(), "model.safetensors")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), lfs_bytes(size, 4))
        after = stub.stats("cdn")
        ranged = [r for k, v in after["ranges"].items()
                  for r in v[len(before["ranges"].get(k, [])):] if not r.startswith("bytes=0-")]
        self.assertTrue(ranged, after)  # the re-run resumed: a Range from past byte 0

    def test_hf_download_flags_copied_from_the_hf_docs(self):
        repos = {"repos": [{"id": "org/small", "files": {
            "a.bin": {"lfs": {"size": 3000, "seed": 1}}, "b.json": {"text": "{}\n"}}}]}
        stub = HubStub(os.path.join(self.tmp, "stub"), repos)
        self.addCleanup(stub.stop)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "hf.conf"), hf_upstream=stub.hub_url)
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        argv = [HUBCTL, "--socket", self.hubd.socket, "hf", "download", "org/small",
                "--cache-dir", os.path.join(self.tmp, "hf-cache"), "--max-workers", "2"]
        p = subprocess.run(argv + ["--local-dir-use-symlinks", "False", "--resume-download"],
                           env=env, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        err = p.stderr.decode()
        self.assertIn("--local-dir-use-symlinks is deprecated and ignored", err)
        self.assertIn("--resume-download is deprecated and ignored", err)
        before = self.stats()
        p = subprocess.run(argv + ["--force-download"], env=env, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        after = self.stats()
        fetches = lambda s: s["hits"] + s["misses"] + s["attached"]
        self.assertEqual(fetches(after) - fetches(before), 2)  # both asked again
        bad = subprocess.run(argv[:-1] + ["0"], env=env, capture_output=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--max-workers is a number from 1 to 32", bad.stderr.decode())


if __name__ == "__main__":
    unittest.main()
