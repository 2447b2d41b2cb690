"""Shared fixtures for hubd's integration tests.

Every test drives the real binaries over real sockets on loopback: a test
origin (tests/origin.py), a hubd on a temporary socket and cache, and hubctl.
Processes are started and stopped by pid; each test gets fresh temp dirs.

The binaries come from the environment (set by CTest): HUBD_BIN, HUBCTL_BIN.
"""

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ORIGIN_PY = os.path.join(os.path.dirname(HERE), "origin.py")
HUBD = os.environ.get("HUBD_BIN", "hubd")
HUBCTL = os.environ.get("HUBCTL_BIN", "hubctl")
# scripts/valgrind.sh: HUBD_WRAPPER="valgrind --tool=memcheck ..." runs each
# hubd under that command (slower: longer start and stop waits), and the
# end-of-test check also fails on memcheck's error and leak reports.
WRAPPER = __import__("shlex").split(os.environ.get("HUBD_WRAPPER", ""))
WRAPPER_WAIT = 120.0 if WRAPPER else 10.0
# hubd under valgrind or built with the sanitizers (CMake sets
# HUBD_SANITIZED): its latency and memory say little of the code's
# (slowdown, shadow memory, ASan's quarantine). Tests stretch their time
# bounds by SLOW and leave memory bounds out when SLOWED.
SLOWED = bool(WRAPPER) or os.environ.get("HUBD_SANITIZED") == "1"
SLOW = 10.0 if WRAPPER else 4.0 if SLOWED else 1.0

# curl's proxy variables, which hubd (and curl, urllib) read. The runner's
# own must not reach the daemons and clients the tests start: every test
# talks to loopback directly unless it sets a proxy itself (test_proxy).
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
              "no_proxy", "NO_PROXY")
for _v in PROXY_VARS:
    os.environ.pop(_v, None)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def write_random_file(path, size, seed=1):
    """size pseudo-random bytes (the same for the same seed) into path;
    returns their sha256."""
    rnd = __import__("random").Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(rnd.randbytes(n))
            left -= n
    return sha256_file(path)


class TestCerts:
    """tests/tls/make-certs.sh's test CA and certificates, in a temp dir
    (made once per test module: setUpModule, tearDownModule)."""

    MAKE_CERTS = os.path.join(os.path.dirname(HERE), "tls", "make-certs.sh")

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hubd-certs-")
        subprocess.run(["bash", self.MAKE_CERTS, self.dir], check=True, timeout=60)

    def path(self, name):
        return os.path.join(self.dir, name)

    def pair(self, name):
        """(certificate, key) of name, as Origin's tls= takes them."""
        return (self.path(name + ".crt"), self.path(name + ".key"))

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORTS = random.SystemRandom()
_PORT_DIR = os.path.join(tempfile.gettempdir(), "hubd-test-ports")


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _reserve(port):
    """Claims port for this process's life against every other test
    process's free_port (a file naming the claimant's pid; a dead one's
    claim is taken over by the next draw)."""
    path = os.path.join(_PORT_DIR, str(port))
    try:
        os.makedirs(_PORT_DIR, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            with open(path) as f:
                pid = int(f.read() or "0")
        except (OSError, ValueError):
            pid = 0
        if not pid or not _alive(pid):
            try:
                os.unlink(path)
            except OSError:
                pass
        return False
    except OSError:  # no claims here (another user's folder): the draw alone
        return True
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    return True


def _unused(family, host, port):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(host="127.0.0.1"):
    """A loopback port nobody uses just now, on any address of either
    family, for a server a test starts later (host is kept for the callers'
    sake: the port is free on both loopbacks). It is drawn at random from
    below the kernel's ephemeral range: a port the kernel picked (bind to 0)
    is also what every outgoing connection of the tests running beside this
    one may be given as its own local port, and one such connection made
    the server's later bind fail (CI). Each port drawn is claimed
    for this process (_reserve), so that no other test's draw meets it."""
    del host
    high = min(_ephemeral_low(), 65536)
    low = max(1024, high - 16384)
    v6 = ipv6_loopback_works()
    for _ in range(500):
        port = _PORTS.randrange(low, high)
        if (_unused(socket.AF_INET, "0.0.0.0", port) and
                (not v6 or _unused(socket.AF_INET6, "::", port)) and _reserve(port)):
            return port
    raise AssertionError("no free port below %d" % high)


def ipv6_loopback_works():
    """Whether ::1 can be bound here (some containers have no IPv6)."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def answers(path):
    """Whether a daemon accepts connections on the Unix socket path."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def stop_pid(proc, sig=signal.SIGTERM, timeout=10.0):
    """Stops a child by its pid and reaps it; SIGKILL if it lingers."""
    if proc.poll() is not None:
        return proc.returncode
    os.kill(proc.pid, sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        return proc.wait()


def write_config(path, **keys):
    """A hubd INI file. Tests want a failure to show at once, so retries are
    off unless a test turns them on; and the free-space floor (1 GiB by
    default) is off unless a test sets it, so the suite runs on a nearly full
    disk and on small tmpfs mounts."""
    keys.setdefault("retries", "0")
    keys.setdefault("min_free_space", "0")
    with open(path, "w") as f:
        f.write("[hubd]\n" + "".join("%s = %s\n" % kv for kv in keys.items()))
    return path


class Origin:
    """tests/origin.py serving a directory on loopback."""

    def __init__(self, root, bind="127.0.0.1", tls=None, name=".port"):
        """tls: (cert file, key file) to serve HTTPS."""
        self.root = root
        self.bind = bind
        self.port_file = os.path.join(root, name)
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        args = [sys.executable, ORIGIN_PY, "--root", root, "--bind", bind,
                "--port-file", self.port_file]
        if tls:
            args += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        self.ca_file = None
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(self.port_file) or self.proc.poll() is not None,
                 what="the origin to listen")
        if self.proc.poll() is not None:
            raise RuntimeError("origin exited with %d" % self.proc.returncode)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        host = "[%s]" % bind if ":" in bind else bind
        self.base = "%s://%s:%d" % ("https" if tls else "http", host, self.port)
        self.tls = tls

    def url(self, path):
        return self.base + path

    def stats(self):
        ctx = None
        if self.tls:  # the test's own view of the origin: no verification needed
            import ssl
            ctx = ssl._create_unverified_context()
        with urllib.request.urlopen(self.base + "/stats", timeout=10, context=ctx) as r:
            return json.load(r)

    def requests_for(self, path):
        return self.stats()["requests"].get(path, 0)

    def resume_starts(self, path, st=None):
        """The starts of path's ranged requests after byte 0: resumes (and a
        segmented download's chunks). A download's first request asks for
        its first chunk, a range from 0, which is left out."""
        st = st or self.stats()
        return [s for s in st["range_starts"].get(path, []) if s != 0]

    def stop(self):
        stop_pid(self.proc)


class Hubd:
    """A hubd on a temporary socket and cache dir."""

    def __init__(self, workdir, extra_args=(), config=None, env=None, preexec_fn=None):
        """env: variables added to hubd's environment; preexec_fn: run in
        the child before exec (resource limits)."""
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.socket = os.path.join(workdir, "hubd.sock")
        self.cache = os.path.join(workdir, "cache")
        self.log_path = os.path.join(workdir, "hubd.log")
        self.extra_args = list(extra_args)
        self.config = config
        self.env = dict(os.environ, **env) if env else None
        self.preexec_fn = preexec_fn
        self.proc = None
        self.start()

    def start(self, timeout=None):
        """timeout: seconds to wait for the socket (a start that rebuilds a
        big cache takes longer than the usual bound)."""
        args = WRAPPER + [HUBD, "--socket", self.socket, "--cache-dir", self.cache,
                          "--log-level", "debug"]  # HUBD_WRAPPER: see above
        if not self.config:
            self.config = write_config(os.path.join(self.workdir, "default.conf"))
        args += ["--config", self.config]
        args += self.extra_args
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env=self.env,
                                     preexec_fn=self.preexec_fn)
        try:
            wait_for(self._answers, max(timeout or 0, WRAPPER_WAIT), what="hubd to listen")
        except AssertionError:
            # Not left running: no test holds this object to stop it.
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            raise

    def _answers(self):
        if self.proc.poll() is not None:
            raise AssertionError("hubd exited with %d:\n%s" % (self.proc.returncode, self.read_log()))
        if not os.path.exists(self.socket):
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self, sig=signal.SIGTERM):
        rc = stop_pid(self.proc, sig, WRAPPER_WAIT)
        if not self.log.closed:
            self.log.close()
        return rc

    def blob_files(self):
        found = []
        for d, _, files in os.walk(os.path.join(self.cache, "blobs")):
            found += [os.path.join(d, f) for f in files]
        return found

    def tmp_files(self):
        return os.listdir(os.path.join(self.cache, "tmp"))

    def query(self, sql, *args):
        """Rows from the cache's database, read beside the running daemon
        (WAL: a reader does not disturb it)."""
        con = sqlite3.connect(os.path.join(self.cache, "hubd.db"), timeout=10)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()

    def partials(self):
        """{url: (id, durable)} of the recorded partial downloads."""
        return {url: (i, d) for i, url, d in self.query("SELECT id, url, durable FROM partials")}

    def kill9(self):
        """A crash: SIGKILL, reaped."""
        self.stop(signal.SIGKILL)

    def wait_no_partials(self, timeout=10.0):
        """After a failed download the partial goes in a pool work item that
        may finish just after the client heard ERR: wait for it (bounded)."""
        wait_for(lambda: self.tmp_files() == [], timeout, "the partial to be removed")


class Ctl:
    """Result of one hubctl run."""

    def __init__(self, proc, out, err):
        self.rc = proc.returncode
        self.out = out.decode()
        self.err = err.decode()

    def __repr__(self):
        return "hubctl rc=%d out=%r err=%r" % (self.rc, self.out, self.err)


class HubTestCase(unittest.TestCase):
    """Starts an origin over a fresh root dir and a hubd per test."""

    origin_bind = "127.0.0.1"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hubd-test-")
        self.addCleanup(self._cleanup_tmp)
        self.root = os.path.join(self.tmp, "root")
        os.mkdir(self.root)
        self.origin = Origin(self.root, self.origin_bind)
        self.addCleanup(lambda: self.origin.stop())
        self.hubd = None
        self.hubd = Hubd(os.path.join(self.tmp, "hub"))
        self.addCleanup(self._stop_hubd)

    def _stop_hubd(self):
        """Every test ends with a clean daemon exit: status 0 after SIGTERM,
        no sanitizer report, no handle left open by the loop."""
        rc = self.hubd.stop()
        log = self.hubd.read_log()
        for bad in ("AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "runtime error:",
                    "handles still open"):
            self.assertNotIn(bad, log, "hubd log:\n" + log[-8000:])
        if WRAPPER:  # HUBD_WRAPPER (valgrind): no memcheck error, no lost block
            import re
            for bad in (r"ERROR SUMMARY: [1-9]", r"(definitely|indirectly) lost: [1-9]",
                        r"are definitely lost in loss record"):
                self.assertIsNone(re.search(bad, log), "hubd log:\n" + log[-8000:])
        self.assertEqual(rc, 0, "hubd exit status; log:\n" + log[-8000:])

    def _cleanup_tmp(self):
        # Cleanups run last-in first-out: the processes are gone by now.
        if self._outcome_ok():
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self.hubd:
            sys.stderr.write("\n--- hubd log (%s) ---\n%s\n" % (self.tmp, self.hubd.read_log()[-8000:]))

    def _outcome_ok(self):
        outcome = getattr(self, "_outcome", None)
        result = getattr(outcome, "result", None)
        if result is None:
            return True
        return not any(t is self for t, _ in result.failures + result.errors)

    def hubd_on_tmpfs(self, size_mb, **keys):
        """Replaces the test's hubd with one whose cache is on a tmpfs of
        size_mb MiB (config keys as write_config takes them); returns the
        mount point. Needs root."""
        small = os.path.join(self.tmp, "small")
        os.mkdir(small)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % size_mb, "tmpfs", small],
                       check=True)

        def unmount():
            # Cleanups run last-in first-out: move the fixture's daemon off
            # the tmpfs (its clean-exit check reads the log) before it goes.
            if self.hubd.workdir.startswith(small):
                self.assertEqual(self.hubd.stop(), 0, self.hubd.read_log())
                self.hubd = Hubd(os.path.join(self.tmp, "hub-after"))
            subprocess.run(["umount", "-l", small])
        self.addCleanup(unmount)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "small.conf"), **keys)
        self.hubd = Hubd(os.path.join(small, "hub"), config=conf)
        return small

    def restart_with_group(self, group, **keys):
        """The fixture's hubd as a system daemon whose socket is 0660,
        root and `group`, reachable through its folders by anyone."""
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "sys.conf"), socket_group=group, **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "sys"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)

    def make_file(self, name, size, seed=1):
        """A file of pseudo-random bytes in the origin's root; returns its sha256."""
        return write_random_file(os.path.join(self.root, name), size, seed)

    def hubctl_args(self, *args):
        return [HUBCTL, "--socket", self.hubd.socket] + list(args)

    def hubctl(self, *args, timeout=60):
        p = subprocess.Popen(self.hubctl_args(*args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        out, err = p.communicate(timeout=timeout)
        return Ctl(p, out, err)

    def hubctl_bg(self, *args):
        return subprocess.Popen(self.hubctl_args(*args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)

    def stats(self):
        """The daemon's counters as STATS says them (the protocol's names;
        hubctl stats --json uses the Prometheus ones, test_ux checks it)."""
        from urllib.parse import unquote
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self.hubd.socket)
        try:
            s.sendall(b"STATS\n")
            line = b""
            while not line.endswith(b"\n"):
                chunk = s.recv(65536)
                self.assertTrue(chunk, "hubd closed the session before answering STATS")
                line += chunk
        finally:
            s.close()
        words = line.decode().split()
        self.assertEqual(words[0], "STATS", line)
        out = {}
        for w in words[1:]:
            k, _, v = w.partition("=")
            v = unquote(v)
            out[k] = int(v) if v.isdigit() else v
        return out
