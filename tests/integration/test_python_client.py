"""The Python client (client/python/hubd) against a real hubd and origin:
fetch, errors, download_url_to_file, progress, socket choice, and
patch_torch_hub with the stand-in torch in fake_torch/."""

import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
import types
import unittest
from unittest import mock

from harness import HERE, HubTestCase, sha256_file

REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "client", "python"))
import hubd  # noqa: E402

FAKE_TORCH = os.path.join(HERE, "fake_torch")


def open_fds():
    return sorted(os.listdir("/proc/self/fd"))


def read_text(path):
    with open(path) as f:
        return f.read().strip()


def write_script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


class Listener:
    """A Unix socket that accepts connections (nobody reads them): enough for
    the client to see "a daemon answers"."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)

    def close(self):
        self.sock.close()


class IsolatedEnv:
    """Mixin: the client's environment points only at paths the test owns,
    never at the machine's real sockets or hubctl."""

    def isolate(self, tmp):
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        for k in ("HUBD_SOCKET", "XDG_RUNTIME_DIR", "HUBCTL"):
            os.environ.pop(k, None)
        # Any auto-start the test did not arrange leaves a marker and fails.
        self.stray_start = os.path.join(tmp, "stray-hubctl-start")
        os.environ["HUBCTL"] = write_script(os.path.join(tmp, "no-hubctl"),
                                            'touch "%s"; exit 9\n' % self.stray_start)
        sysock = mock.patch.object(hubd, "SYSTEM_SOCKET", os.path.join(tmp, "system", "hubd.sock"))
        sysock.start()
        self.addCleanup(sysock.stop)

    def listen(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lst = Listener(path)
        self.addCleanup(lst.close)
        return lst


class PythonClientTest(IsolatedEnv, HubTestCase):
    def setUp(self):
        super().setUp()
        self.isolate(self.tmp)
        os.environ["HUBD_SOCKET"] = self.hubd.socket
        self.fds_before = open_fds()
        self.addCleanup(self.check_no_fd_leak)

    def check_no_fd_leak(self):
        self.assertEqual(open_fds(), self.fds_before, "the client leaked descriptors")
        self.assertFalse(os.path.exists(self.stray_start), "hubctl start ran unexpectedly")

    def out_dir(self):
        d = os.path.join(self.tmp, "out")
        os.makedirs(d, exist_ok=True)
        return d

    # ---- fetch ---------------------------------------------------------------

    def test_fetch_returns_blob_path(self):
        digest = self.make_file("a.bin", 1024 * 1024 + 5)
        path = hubd.fetch(self.origin.url("/files/a.bin"), progress=False)
        self.assertEqual(os.path.basename(path), digest)
        with open(path, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), digest)
        with open(os.path.join(self.root, "a.bin"), "rb") as a, open(path, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_second_fetch_is_a_hit(self):
        digest = self.make_file("h.bin", 300000)
        url = self.origin.url("/files/h.bin")
        p1 = hubd.fetch(url, progress=False)
        p2 = hubd.fetch(url, progress=False)
        self.assertEqual(p1, p2)
        self.assertEqual(self.origin.requests_for("/files/h.bin"), 1)
        st = self.stats()
        self.assertEqual((st["misses"], st["hits"]), (1, 1))
        # By digest, any URL is a hit: this one would be a 404.
        p3 = hubd.fetch(self.origin.url("/files/missing"), sha256=digest.upper(), progress=False)
        self.assertEqual(p3, p1)
        self.assertEqual(self.origin.requests_for("/files/missing"), 0)

    def test_sha256_mismatch_raises_hash_mismatch(self):
        digest = self.make_file("m.bin", 200000)
        wrong = "0" * 64
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch(self.origin.url("/files/m.bin"), sha256=wrong, progress=False)
        e = cm.exception
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.code, "hash_mismatch")
        self.assertIn(wrong, str(e))
        self.assertIn(digest, str(e))
        self.assertEqual(self.hubd.blob_files(), [])

    def test_refresh_gets_a_changed_file(self):
        self.make_file("v.bin", 3000, seed=1)
        url = self.origin.url("/files/v.bin")
        p1 = hubd.fetch(url, progress=False)
        path = os.path.join(self.root, "v.bin")
        t = os.stat(path).st_mtime + 10
        v2 = self.make_file("v.bin", 3100, seed=2)
        os.utime(path, (t, t))
        self.assertEqual(hubd.fetch(url, progress=False), p1)  # served as it is
        p2 = hubd.fetch(url, progress=False, refresh=True)
        self.assertEqual(os.path.basename(p2), v2)

    def test_cancel_stops_a_download_of_ours(self):
        self.make_file("c.bin", 4 * 1024 * 1024)
        url = self.origin.url("/files/c.bin?bps=65536")
        p = self.hubctl_bg("fetch", url)
        self.addCleanup(p.wait)
        deadline = time.monotonic() + 10
        while not json.loads(self.hubctl("status", "--json").out):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        r = hubd.cancel(url)
        self.assertEqual(r["waiters"], 1)
        self.assertGreaterEqual(r["job"], 1)
        _, err = p.communicate(timeout=10)
        self.assertIn(b"cancelled", err)
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.cancel(r["job"])
        self.assertEqual(cm.exception.code, "not_found")

    def test_404_raises_http_404_with_url(self):
        url = self.origin.url("/files/nothing-here")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch(url, progress=False)
        self.assertEqual(cm.exception.code, "http_404")
        self.assertEqual(cm.exception.url, url)
        self.assertIn(url, str(cm.exception))
        self.assertIn("404", cm.exception.msg)

    def test_headers_reach_the_origin(self):
        digest = self.make_file("hd.bin", 1000)
        url = self.origin.url("/files/hd.bin?require_auth=%s"
                              % hashlib.sha256(b"tok").hexdigest()[:16])
        path = hubd.fetch(url, headers={"Authorization": "Bearer tok"}, progress=False)
        self.assertEqual(os.path.basename(path), digest)
        self.assertEqual(self.origin.stats()["auth"]["/files/hd.bin"], ["Bearer tok"])
        # Without the token the cached entry is not for this request.
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch(url, progress=False)
        self.assertEqual(cm.exception.code, "http_401")
        # A header that is hubd's to send is refused by the daemon.
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch(url, headers={"Range": "bytes=0-"}, progress=False)
        self.assertEqual(cm.exception.code, "bad_request")
        # So are the proxy's credentials: hubd's `proxy` setting holds them,
        # and a client's would reach the proxy, not the origin.
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch(url, headers={"Proxy-Authorization": "Basic eDp5"}, progress=False)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertIn("proxy setting", str(cm.exception))

    def test_malformed_requests_refused_before_sending(self):
        url = self.origin.url("/files/x")
        for kwargs in ({"sha256": "abc"}, {"headers": {"X-A": "1\r\nX-B: 2"}},
                       {"headers": {"Bad Name": "v"}}):
            with self.assertRaises(hubd.HubdError) as cm:
                hubd.fetch(url, progress=False, **kwargs)
            self.assertEqual(cm.exception.code, "bad_request", kwargs)
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch("http://127.0.0.1/" + "a" * 9000, progress=False)
        self.assertEqual(cm.exception.code, "bad_request")
        self.assertEqual(self.stats()["misses"], 0)

    def test_values_are_percent_encoded(self):
        # A space, '%' and non-ASCII in the path: the origin must see the very
        # file, so the URL went over the wire intact.
        name = "sp ace%25-\u00e9.bin"
        digest = self.make_file(name, 4096)
        url = self.origin.url("/files/" + "sp%20ace%2525-%C3%A9.bin")
        self.assertEqual(os.path.basename(hubd.fetch(url, progress=False)), digest)
        self.assertEqual(hubd._encode_value("a b%c=d\u00e9\x7f"), "a%20b%25c=d%C3%A9%7F")

    # ---- download_url_to_file ------------------------------------------------

    def test_download_url_to_file(self):
        self.make_file("d.bin", 2 * 1024 * 1024 + 1, seed=3)
        dst = os.path.join(self.out_dir(), "d.bin")
        self.assertIsNone(hubd.download_url_to_file(self.origin.url("/files/d.bin"), dst,
                                                    progress=False))
        with open(os.path.join(self.root, "d.bin"), "rb") as a, open(dst, "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(os.listdir(self.out_dir()), ["d.bin"])
        self.assertTrue(os.stat(dst).st_mode & stat.S_IWUSR, "dst is the caller's, writable")

    def test_download_replaces_existing_dst(self):
        digest = self.make_file("r.bin", 5000)
        dst = os.path.join(self.out_dir(), "r.bin")
        with open(dst, "w") as f:
            f.write("old")
        hubd.download_url_to_file(self.origin.url("/files/r.bin"), dst, digest[:8], False)
        self.assertEqual(sha256_file(dst), digest)
        self.assertEqual(os.listdir(self.out_dir()), ["r.bin"])

    def test_download_reads_through_the_fd(self):
        """The blob is unlinked between DONE and the copy: the bytes still
        come, through the descriptor."""
        digest = self.make_file("e.bin", 700000)
        real = hubd._fetch

        def fetch_then_evict(*a, **kw):
            done = real(*a, **kw)
            os.chmod(os.path.dirname(done.path), 0o755)
            os.unlink(done.path)
            return done

        dst = os.path.join(self.out_dir(), "e.bin")
        with mock.patch.object(hubd, "_fetch", fetch_then_evict):
            hubd.download_url_to_file(self.origin.url("/files/e.bin"), dst, progress=False)
        self.assertEqual(sha256_file(dst), digest)

    def test_download_copy_fallback_without_copy_file_range(self):
        digest = self.make_file("f.bin", 3 * 1024 * 1024 + 7)
        dst = os.path.join(self.out_dir(), "f.bin")
        with mock.patch.object(hubd.os, "copy_file_range",
                               side_effect=OSError(18, "Invalid cross-device link")):
            hubd.download_url_to_file(self.origin.url("/files/f.bin"), dst, progress=False)
        self.assertEqual(sha256_file(dst), digest)

    def test_download_right_hash_prefix(self):
        digest = self.make_file("ok.bin", 100000)
        dst = os.path.join(self.out_dir(), "ok.bin")
        hubd.download_url_to_file(self.origin.url("/files/ok.bin"), dst, hash_prefix=digest[:10],
                                  progress=False)
        self.assertEqual(sha256_file(dst), digest)

    def test_download_wrong_hash_prefix(self):
        digest = self.make_file("bad.bin", 100000)
        dst = os.path.join(self.out_dir(), "bad.bin")
        with self.assertRaises(RuntimeError) as cm:
            hubd.download_url_to_file(self.origin.url("/files/bad.bin"), dst,
                                      hash_prefix="deadbeef", progress=False)
        self.assertNotIsInstance(cm.exception, hubd.HubdError)
        self.assertEqual(str(cm.exception),
                         'invalid hash value (expected "deadbeef", got "%s")' % digest)
        self.assertEqual(os.listdir(self.out_dir()), [], "neither dst nor a temp file")

    def test_download_error_leaves_nothing(self):
        dst = os.path.join(self.out_dir(), "gone.bin")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.download_url_to_file(self.origin.url("/files/gone.bin"), dst, progress=False)
        self.assertEqual(cm.exception.code, "http_404")
        self.assertEqual(os.listdir(self.out_dir()), [])

    # ---- progress ------------------------------------------------------------

    def run_quiet(self, fn, *args, **kwargs):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            fn(*args, **kwargs)
        return err.getvalue()

    def test_progress_on_stderr_when_asked(self):
        size = 2 * 1024 * 1024
        self.make_file("p.bin", size)
        t0 = time.monotonic()
        out = self.run_quiet(hubd.fetch, self.origin.url("/files/p.bin?bps=%d" % (4 * size)),
                             progress=True)
        elapsed = time.monotonic() - t0
        self.assertTrue(out.startswith("\rp.bin: "), repr(out[:200]))
        self.assertTrue(out.endswith("\n"))
        self.assertEqual(out.count("\n"), 1, "one line, redrawn")
        self.assertIn("2.0 MiB / 2.0 MiB 100%", out)
        draws = out.count("\r")
        self.assertGreaterEqual(draws, 2, "PROGRESS lines were drawn: %r" % out)
        self.assertLessEqual(draws, elapsed * 10 + 3, "at most ~10 redraws a second")
        # A hit draws its final line too.
        out = self.run_quiet(hubd.fetch, self.origin.url("/files/p.bin?bps=%d" % (4 * size)))
        self.assertIn("from the cache", out)

    def test_an_attachers_rate_counts_only_what_came_after_it_joined(self):
        # A download at 1 MiB/s; the client joins at about 3 of its 4 MiB.
        # Its bar's rate is that of the last MiB (about 1 MiB/s), not the
        # whole file over its one second (4 MiB/s).
        size = 4 * 1024 * 1024
        self.make_file("j.bin", size)
        url = self.origin.url("/files/j.bin?bps=%d" % (1024 * 1024))
        p = self.hubctl_bg("fetch", url)
        self.addCleanup(p.wait)
        deadline = time.monotonic() + 20
        while True:
            jobs = json.loads(self.hubctl("status", "--json").out)
            if jobs and int(jobs[0]["done"]) >= 3 * 1024 * 1024:
                break
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        out = self.run_quiet(hubd.fetch, url, progress=True)
        import re
        # The last draw is padded with blanks to cover a longer one before
        # it ("936.3 KiB/s" then "1.0 MiB/s  "): a flake in CI before.
        m = re.search(r"100% ([0-9.]+) (KiB|MiB)/s *\n$", out)
        self.assertIsNotNone(m, repr(out[-200:]))
        rate = float(m.group(1)) * (1024 if m.group(2) == "KiB" else 1024 * 1024)
        self.assertLess(rate, 2.5 * 1024 * 1024, out[-120:])

    def test_no_progress_when_not_asked(self):
        self.make_file("q.bin", 1024 * 1024)
        out = self.run_quiet(hubd.fetch, self.origin.url("/files/q.bin?bps=4000000"),
                             progress=False)
        self.assertEqual(out, "")
        out = self.run_quiet(hubd.download_url_to_file, self.origin.url("/files/q.bin"),
                             os.path.join(self.out_dir(), "q"), progress=False)
        self.assertEqual(out, "")
        with self.assertRaises(hubd.HubdError):
            self.run_quiet(hubd.fetch, self.origin.url("/files/none"), progress=False)

    def test_progress_through_tqdm_when_importable(self):
        bars = []

        class FakeTqdm:
            def __init__(self, total=None, **kw):
                self.total, self.kw, self.n, self.closed = total, kw, 0, False
                bars.append(self)

            def update(self, n):
                self.n += n

            def close(self):
                self.closed = True

        auto = types.ModuleType("tqdm.auto")
        auto.tqdm = FakeTqdm
        size = 1024 * 1024
        self.make_file("t.bin", size)
        with mock.patch.dict(sys.modules, {"tqdm": types.ModuleType("tqdm"), "tqdm.auto": auto}):
            hubd.fetch(self.origin.url("/files/t.bin?bps=%d" % (4 * size)), progress=True)
        self.assertEqual(len(bars), 1)
        self.assertEqual((bars[0].n, bars[0].total, bars[0].closed), (size, size, True))
        self.assertEqual(bars[0].kw.get("unit"), "B")

    # ---- auto-start, end to end ----------------------------------------------

    def test_autostart_with_hubctl_start(self):
        del os.environ["HUBD_SOCKET"]
        os.environ["XDG_RUNTIME_DIR"] = os.path.join(self.tmp, "xdg")  # nothing there
        marker = os.path.join(self.tmp, "started")
        os.environ["HUBCTL"] = write_script(os.path.join(self.tmp, "hubctl-start"),
                                            'echo "$@" > "%s"; echo "%s"\n'
                                            % (marker, self.hubd.socket))
        digest = self.make_file("s.bin", 1000)
        path = hubd.fetch(self.origin.url("/files/s.bin"), progress=False)
        self.assertEqual(os.path.basename(path), digest)
        self.assertEqual(read_text(marker), "start")

    # ---- patch_torch_hub -----------------------------------------------------

    def import_fake_torch(self):
        saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
        for k in saved:
            del sys.modules[k]
        sys.path.insert(0, FAKE_TORCH)

        def restore():
            sys.path.remove(FAKE_TORCH)
            for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
                del sys.modules[k]
            sys.modules.update(saved)
        self.addCleanup(restore)
        import torch.hub
        self.assertTrue(torch.__file__.startswith(FAKE_TORCH), torch.__file__)
        return torch

    def load_quiet(self, torch, *args, **kwargs):
        with contextlib.redirect_stdout(io.StringIO()):
            return torch.hub.load_state_dict_from_url(*args, **kwargs)

    def test_patch_torch_hub(self):
        torch = self.import_fake_torch()
        digest = self.make_file("w.pth", 400000, seed=7)
        name = "resnet-%s.pth" % digest[:8]
        os.rename(os.path.join(self.root, "w.pth"), os.path.join(self.root, name))
        url = self.origin.url("/files/" + name)
        model_dir = os.path.join(self.tmp, "checkpoints")
        with self.assertRaisesRegex(RuntimeError, "stand-in"):
            self.load_quiet(torch, url, model_dir=model_dir, progress=False)

        misses = self.stats()["misses"]
        self.assertIsNone(hubd.patch_torch_hub())
        hubd.patch_torch_hub()  # twice is harmless
        self.assertIs(torch.hub.download_url_to_file, hubd.download_url_to_file)
        data = self.load_quiet(torch, url, model_dir=model_dir, progress=False, check_hash=True)
        self.assertEqual(hashlib.sha256(data).hexdigest(), digest)
        self.assertEqual(os.listdir(model_dir), [name])
        self.assertEqual(self.origin.requests_for("/files/" + name), 1)
        self.assertEqual(self.stats()["misses"], misses + 1)

    def test_patch_torch_hub_checks_hash_from_file_name(self):
        torch = self.import_fake_torch()
        digest = self.make_file("v-0123abcd.pth", 50000)
        self.assertFalse(digest.startswith("0123abcd"))
        hubd.patch_torch_hub()
        model_dir = os.path.join(self.tmp, "ckpt")
        with self.assertRaises(RuntimeError) as cm:
            self.load_quiet(torch, self.origin.url("/files/v-0123abcd.pth"), model_dir=model_dir,
                            progress=False, check_hash=True)
        self.assertEqual(str(cm.exception),
                         'invalid hash value (expected "0123abcd", got "%s")' % digest)
        self.assertEqual(os.listdir(model_dir), [])
        # Without check_hash torch does not look at the name.
        data = self.load_quiet(torch, self.origin.url("/files/v-0123abcd.pth"),
                               model_dir=model_dir, progress=False)
        self.assertEqual(hashlib.sha256(data).hexdigest(), digest)

    def test_patch_torch_hub_without_torch(self):
        with mock.patch.dict(sys.modules, {"torch": None, "torch.hub": None}):
            with self.assertRaisesRegex(ImportError, "needs PyTorch"):
                hubd.patch_torch_hub()


class SocketChoiceTest(IsolatedEnv, unittest.TestCase):
    """Which socket the client picks, with the candidate paths patched."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hubd-pysock-")
        self.addCleanup(lambda: shutil.rmtree(self.tmp, ignore_errors=True))
        self.isolate(self.tmp)
        self.xdg = os.path.join(self.tmp, "xdg")
        os.mkdir(self.xdg)
        os.environ["XDG_RUNTIME_DIR"] = self.xdg
        self.user = os.path.join(self.xdg, "hubd.sock")

    def chosen(self):
        conn = hubd._connect()
        conn.close()
        return conn.path

    def assert_no_daemon(self, *needles):
        with self.assertRaises(hubd.HubdError) as cm:
            hubd._connect()
        self.assertEqual(cm.exception.code, "no_daemon")
        for n in needles:
            self.assertIn(n, str(cm.exception))
        return cm.exception

    def test_env_socket_wins(self):
        env = os.path.join(self.tmp, "env.sock")
        self.listen(env)
        self.listen(hubd.SYSTEM_SOCKET)
        self.listen(self.user)
        os.environ["HUBD_SOCKET"] = env
        self.assertEqual(self.chosen(), env)

    def test_dead_env_socket_is_an_error_without_autostart(self):
        self.listen(hubd.SYSTEM_SOCKET)
        env = os.path.join(self.tmp, "env.sock")
        os.environ["HUBD_SOCKET"] = env
        self.assert_no_daemon(env, "HUBD_SOCKET")
        self.assertFalse(os.path.exists(self.stray_start))

    def test_system_socket_when_it_answers(self):
        self.listen(hubd.SYSTEM_SOCKET)
        self.listen(self.user)
        self.assertEqual(self.chosen(), hubd.SYSTEM_SOCKET)

    def test_user_socket_when_system_is_silent(self):
        self.listen(self.user)
        self.assertEqual(self.chosen(), self.user)
        # A stale system socket file (nobody listening) is passed over too.
        self.listen(hubd.SYSTEM_SOCKET).close()
        self.assertTrue(os.path.exists(hubd.SYSTEM_SOCKET))
        self.assertEqual(self.chosen(), self.user)

    def test_user_socket_paths(self):
        self.assertEqual(hubd._user_socket(), self.user)
        del os.environ["XDG_RUNTIME_DIR"]
        self.assertEqual(hubd._user_socket(), "/tmp/hubd-%d/hubd.sock" % os.getuid())

    def test_autostart_connects_where_hubctl_start_says(self):
        started = os.path.join(self.tmp, "started.sock")
        self.listen(started)
        marker = os.path.join(self.tmp, "args")
        os.environ["HUBCTL"] = write_script(os.path.join(self.tmp, "hubctl"),
                                            'echo "$@" > "%s"; echo "%s"\n' % (marker, started))
        self.assertEqual(self.chosen(), started)
        self.assertEqual(read_text(marker), "start")

    def test_autostart_failure_says_why(self):
        os.environ["HUBCTL"] = write_script(os.path.join(self.tmp, "hubctl"),
                                            'echo "cannot start: disk on fire" >&2; exit 1\n')
        self.assert_no_daemon(hubd.SYSTEM_SOCKET, self.user, "disk on fire", "exit status 1")

    def test_autostart_socket_that_does_not_answer(self):
        os.environ["HUBCTL"] = write_script(os.path.join(self.tmp, "hubctl"),
                                            'echo "%s/nowhere.sock"\n' % self.tmp)
        self.assert_no_daemon("nowhere.sock", "does not answer")

    def test_no_hubctl_on_path(self):
        del os.environ["HUBCTL"]
        os.environ["PATH"] = os.path.join(self.tmp, "empty-bin")
        self.assert_no_daemon("hubctl is not on PATH")

    def test_fetch_surfaces_no_daemon(self):
        os.environ["HUBD_SOCKET"] = os.path.join(self.tmp, "none.sock")
        with self.assertRaises(hubd.HubdError) as cm:
            hubd.fetch("http://127.0.0.1:9/x", progress=False)
        self.assertEqual(cm.exception.code, "no_daemon")
        self.assertIsInstance(cm.exception, OSError)
        self.assertIn("none.sock", str(cm.exception))
        self.assertIn("http://127.0.0.1:9/x", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
