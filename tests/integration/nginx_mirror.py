"""nginx running etc/fleet/nginx-mirror.conf, the site cache tier of a fleet.

The reference file is copied and exactly its EDIT lines are rewritten (port,
paths, upstream, CA, resolver, logs, pid, user); each rewrite must happen
the number of times expected, so a changed reference file fails the test
loudly instead of silently testing something else. nginx runs in the
foreground as our child (daemon off), every file it writes inside the
test's directory, and is stopped by its pid.
"""

import os
import socket
import subprocess
import time

from harness import free_port, stop_pid, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "..", "etc", "fleet", "nginx-mirror.conf")
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")


def rewrite(text, old, new, count=1):
    """text with old replaced by new, which must occur exactly count times."""
    found = text.count(old)
    if found != count:
        raise AssertionError("etc/fleet/nginx-mirror.conf: expected %d of %r, found %d"
                             % (count, old, found))
    return text.replace(old, new)


def mirror_config(workdir, upstream, ca_file, tls_name, listen):
    """The reference file's text with its EDIT lines pointed inside workdir
    (pid, logs, cache and temp paths; workdir/cache/hub-temp must exist),
    at upstream (checked against tls_name and ca_file when it is https),
    listening on listen ("ADDR:PORT"). bench/fleet uses it too."""
    workdir = os.path.abspath(workdir)
    access_log = os.path.join(workdir, "access.log")
    error_log = os.path.join(workdir, "error.log")
    with open(REFERENCE) as f:
        text = f.read()
    if os.getuid() == 0:  # as root, workers switch users: to root, who owns the temp dir
        text = rewrite(text, "user www-data;", "user root root;")
    else:
        text = rewrite(text, "user www-data;", "# (no user: runs as the test's)")
    text = rewrite(text, "pid /run/nginx-hub-mirror.pid;", "pid %s/nginx.pid;" % workdir)
    text = rewrite(text, "error_log /var/log/nginx/hub-mirror.error.log warn;",
                   "error_log %s info;" % error_log)
    text = rewrite(text, "access_log /var/log/nginx/hub-mirror.access.log mirror;",
                   "access_log %s mirror;" % access_log)
    # The cache and the five temp paths.
    text = rewrite(text, " /var/cache/nginx/hub", " %s/cache/hub" % workdir, count=6)
    text = rewrite(text, "listen 8080;", "listen %s;" % listen)
    text = rewrite(text, "proxy_pass https://huggingface.co;", "proxy_pass %s;" % upstream)
    text = rewrite(text, "proxy_ssl_name huggingface.co;", "proxy_ssl_name %s;" % tls_name)
    # The test's CDN is an IP literal too: checked against the same name.
    text = rewrite(text, "proxy_ssl_name $proxy_host;", "proxy_ssl_name %s;" % tls_name)
    text = rewrite(text, "proxy_ssl_trusted_certificate /etc/ssl/certs/ca-certificates.crt;",
                   "proxy_ssl_trusted_certificate %s;" % ca_file, count=2)
    # Never asked here (every host is an IP literal), and loopback anyway.
    text = rewrite(text, "resolver 127.0.0.53 ", "resolver 127.0.0.1 ")
    return text


class NginxMirror:
    """The reference mirror config, pointed at a test upstream.

    upstream: the upstream's base URL (https://127.0.0.1:PORT); ca_file: the
    CA its certificate chains to; tls_name: the certificate's DNS name
    (nginx checks names, not IP addresses, so an IP-literal upstream is
    checked against the name its certificate carries)."""

    def __init__(self, workdir, upstream, ca_file, tls_name="localhost"):
        self.dir = os.path.abspath(workdir)
        os.makedirs(os.path.join(self.dir, "cache", "hub-temp"), exist_ok=True)
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.access_log = os.path.join(self.dir, "access.log")
        self.error_log = os.path.join(self.dir, "error.log")
        text = mirror_config(self.dir, upstream, ca_file, tls_name, "127.0.0.1:%d" % self.port)
        with open(self.conf, "w") as f:
            f.write(text)
        self.proc = None
        self.start()

    def start(self):
        self.stderr = open(os.path.join(self.dir, "nginx.stderr"), "ab")
        self.proc = subprocess.Popen(
            [NGINX, "-p", self.dir, "-e", self.error_log, "-c", self.conf, "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr)
        wait_for(self._listens, 10, "nginx to listen")

    def _listens(self):
        if self.proc.poll() is not None:
            raise AssertionError("nginx exited with %d:\n%s" % (self.proc.returncode, self.logs()))
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", self.port))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def logs(self):
        out = ""
        for p in (os.path.join(self.dir, "nginx.stderr"), self.error_log):
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out += "--- %s ---\n%s" % (p, f.read()[-4000:])
        return out

    def access(self):
        """The access log's lines (nginx writes each when a request ends)."""
        if not os.path.exists(self.access_log):
            return []
        with open(self.access_log) as f:
            return f.read().splitlines()

    def url(self, path):
        return self.base + path

    def stop(self):
        if self.proc and self.proc.poll() is None:
            stop_pid(self.proc)
        if self.proc and not self.stderr.closed:
            self.stderr.close()
