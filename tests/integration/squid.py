"""Squid as the proxy tests' forward proxy, configured from the reference
file etc/fleet/squid.conf.

The test config is the reference file with a few lines rewritten: each
substitution must match exactly one line (or the reference changed and the
derivation fails loudly, rather than testing some other config). Squid runs
in the foreground (`squid -N`: no fork, so the Popen pid is Squid's), as
user `proxy` when started as root (Squid drops root itself), so its temp dir
belongs to that user; it is stopped by its pid.

Debian 12's Squid 5.7 is what this was written against (scripts/install-deps.sh).
"""

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE = os.path.join(REPO, "etc", "fleet", "squid.conf")
SQUID = os.environ.get("SQUID_BIN", "/usr/sbin/squid")
START_WAIT = 30.0  # seconds for Squid to listen (it rebuilds its cache index first)


def substitute(text, pattern, replacement):
    """Replaces the one line that matches pattern (a regex for a whole line);
    raises unless exactly one line does."""
    rx = re.compile("^" + pattern + "$", re.M)
    found = rx.findall(text)
    if len(found) != 1:
        raise AssertionError("etc/fleet/squid.conf: %d lines match %r (expected 1)" %
                             (len(found), pattern))
    return rx.sub(lambda _: replacement, text)


def derive_config(reference, port, workdir, cache=True, log_headers=False):
    """The test config for a Squid on 127.0.0.1:port keeping its files in
    workdir. cache=False: `cache deny all`, nothing stored (the benchmark
    measures the proxy path, not Squid's disk). log_headers: log_mime_hdrs,
    so the access log shows every request's headers (tests assert what the
    proxy could see)."""
    t = reference
    t = substitute(t, r"http_port .*", "http_port 127.0.0.1:%d" % port)
    # hubd, curl and the tests connect from loopback.
    t = substitute(t, r"acl localnet src .*", "acl localnet src 127.0.0.0/8 ::1")
    # The test origins listen on ephemeral ports, not 443.
    t = substitute(t, r"acl SSL_ports port .*", "acl SSL_ports port 443 1024-65535")
    # ...and on loopback, which the reference config refuses.
    t = substitute(t, r"http_access deny to_localhost",
                   "# test: loopback origins allowed (no 'http_access deny to_localhost')")
    if cache:
        t = substitute(t, r"cache_dir .*", "cache_dir aufs %s 1024 4 16" % os.path.join(workdir, "cache"))
        t = substitute(t, r"cache_mem .*", "cache_mem 64 MB")
    else:
        t = substitute(t, r"cache_dir .*", "cache deny all")
        t = substitute(t, r"cache_mem .*", "cache_mem 8 MB")
    t = substitute(t, r"access_log .*", "access_log stdio:%s squid" % os.path.join(workdir, "access.log"))
    t = substitute(t, r"cache_log .*", "cache_log %s" % os.path.join(workdir, "cache.log"))
    t = substitute(t, r"pid_filename .*", "pid_filename %s" % os.path.join(workdir, "squid.pid"))
    t = substitute(t, r"coredump_dir .*", "coredump_dir %s" % workdir)
    t = substitute(t, r"shutdown_lifetime .*", "shutdown_lifetime 1 seconds")
    t += "\n# test only\n"
    t += "pinger_enable off\n"  # no ICMP helper (needs privileges, not needed)
    t += "netdb_filename none\n"  # no state file in /var/spool/squid
    t += "visible_hostname hubd-test-squid\n"  # no hostname lookup
    t += "logfile_rotate 0\n"
    if log_headers:
        t += "log_mime_hdrs on\n"
    return t


class Squid:
    """A Squid on 127.0.0.1, its files in a temp dir of its own."""

    def __init__(self, cache=True, log_headers=False):
        self.dir = tempfile.mkdtemp(prefix="hubd-squid-")
        self.proc = None
        try:
            self._chown_to_squid_user()
            self.access_log = os.path.join(self.dir, "access.log")
            self.cache_log = os.path.join(self.dir, "cache.log")
            self.conf = os.path.join(self.dir, "squid.conf")
            with open(REFERENCE) as f:
                self.reference = f.read()
            self.cache = cache
            self.log_headers = log_headers
            self.start()
        except BaseException:
            self.close()
            raise

    def _chown_to_squid_user(self):
        """Run as root, Squid becomes its cache_effective_user (Debian:
        proxy) before it writes anything, so its dir must be that user's
        (mkdtemp's 0700 keeps others out). Otherwise it stays the caller."""
        self.user = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("proxy")
            self.user = pw
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

    def _write_config(self):
        with open(self.conf, "w") as f:
            f.write(derive_config(self.reference, self.port, self.dir, self.cache, self.log_headers))
        for name in ("access.log", "cache.log"):
            path = os.path.join(self.dir, name)
            open(path, "a").close()
            if self.user:
                os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def start(self):
        """Starts Squid and waits until its port accepts connections; a port
        taken between free_port() and Squid's bind is retried on another."""
        for attempt in range(3):
            self.port = free_port()
            self._write_config()
            if self.cache and not os.path.isdir(os.path.join(self.dir, "cache", "00")):
                # The aufs cache dir's tree, made once (runs and exits).
                z = subprocess.run([SQUID, "-z", "-N", "-f", self.conf], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=60)
                if z.returncode != 0:
                    raise RuntimeError("squid -z failed:\n" + z.stdout.decode("utf-8", "replace"))
            self.stderr = open(os.path.join(self.dir, "stderr.log"), "ab")
            self.proc = subprocess.Popen([SQUID, "-N", "-d1", "-f", self.conf],
                                         stdout=self.stderr, stderr=self.stderr)
            if self._wait_listening():
                self.url = "http://127.0.0.1:%d" % self.port
                return
            self.stop()
            if "Address already in use" not in self.read_cache_log() + self._read(self.stderr.name):
                break
        raise RuntimeError("squid did not start:\n" + self._read(self.stderr.name)[-4000:] +
                           self.read_cache_log()[-4000:])

    def _wait_listening(self):
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    @staticmethod
    def _read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def read_access_log(self):
        """The access log so far. A request is logged when it ends: a
        CONNECT when its tunnel closes (a kept-alive tunnel is not there
        yet)."""
        return self._read(self.access_log)

    def read_cache_log(self):
        return self._read(self.cache_log)

    def access_lines(self):
        """The access log as (method, url) pairs plus the whole line: the
        native 'squid' format is time elapsed client code/status bytes
        method URL user hierarchy type [headers]."""
        out = []
        for line in self.read_access_log().splitlines():
            f = line.split()
            if len(f) >= 7:
                out.append((f[5], f[6], line))
        return out

    def wait_logged(self, method, url_prefix, timeout=15.0):
        """Waits until a request of method whose URL starts with url_prefix
        is in the access log; returns its line."""
        deadline = time.monotonic() + timeout
        while True:
            for m, u, line in self.access_lines():
                if m == method and u.startswith(url_prefix):
                    return line
            if time.monotonic() >= deadline:
                raise AssertionError("squid logged no %s %s; access log:\n%s" %
                                     (method, url_prefix, self.read_access_log()))
            time.sleep(0.05)

    def stop(self):
        """SIGTERM by pid (Squid then takes shutdown_lifetime, 1 s here, to
        close its clients), SIGKILL if it lingers."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if not self.stderr.closed:
            self.stderr.close()
        rc, self.proc = self.proc.returncode, None
        return rc

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv):
    """The benchmark's (bench/bench.sh, BENCH_PROXY=1) way to the same
    derivation: squid.py [--no-cache] PORT DIR prints the config."""
    import argparse
    ap = argparse.ArgumentParser(description="print a Squid config derived from etc/fleet/squid.conf")
    ap.add_argument("--no-cache", action="store_true", help="cache deny all: measure the proxy path")
    ap.add_argument("port", type=int)
    ap.add_argument("dir", help="where Squid keeps its files (logs, pid, cache)")
    args = ap.parse_args(argv)
    with open(REFERENCE) as f:
        print(derive_config(f.read(), args.port, os.path.abspath(args.dir), cache=not args.no_cache), end="")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv[1:]))
