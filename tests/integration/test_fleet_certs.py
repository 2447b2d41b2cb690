"""scripts/fleet-certs.sh: the cluster swarm's CA and node certificates.

The script runs in a temporary folder; the openssl command checks what it
made (chain, subject, extensions, key, validity), and two node certificates
complete a mutual TLS handshake on loopback with Python's ssl module, as
two nodes' metadata exchange would. No hubd is started.
"""

import datetime
import os
import shutil
import socket
import ssl
import stat
import subprocess
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "fleet-certs.sh")
SH = shutil.which("sh") or "/bin/sh"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def openssl(*args):
    """Runs openssl; returns its stdout, failing the test with its stderr."""
    p = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError("openssl %s: %s" % (" ".join(args), p.stderr))
    return p.stdout


class FleetCertsTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hubd-fleet-certs.")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.pki = os.path.join(self.tmp, "pki")

    def run_script(self, *args, env=None):
        return subprocess.run([SH, SCRIPT, *args], capture_output=True, text=True,
                              cwd=self.tmp, env=env, timeout=60)

    def ok(self, *args):
        p = self.run_script(*args)
        self.assertEqual(p.returncode, 0, "fleet-certs.sh %s: %s" % (" ".join(args), p.stderr))
        return p

    def path(self, name, pki=None):
        return os.path.join(pki or self.pki, name)

    def test_a_node_certificate_verifies_against_the_ca(self):
        self.ok("ca", self.pki)
        p = self.ok("node", self.pki, "gpu01")
        out = openssl("verify", "-CAfile", self.path("ca.pem"), self.path("gpu01.pem"))
        self.assertIn("gpu01.pem: OK", out)
        # It says where the files go on the node, and that ca.key stays.
        self.assertIn("/etc/hubd/fleet/node.key", p.stdout)
        self.assertIn("never ca.key", p.stdout)
        # The key is the certificate's.
        self.assertEqual(openssl("pkey", "-in", self.path("gpu01.key"), "-pubout"),
                         openssl("x509", "-in", self.path("gpu01.pem"), "-noout", "-pubkey"))
        # Not by another CA.
        other = os.path.join(self.tmp, "other")
        self.ok("ca", other)
        p = subprocess.run(["openssl", "verify", "-CAfile", self.path("ca.pem", other),
                            self.path("gpu01.pem")], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0, p.stdout)

    def test_a_node_certificate_is_cn_star_p256_without_san(self):
        self.ok("ca", self.pki)
        self.ok("node", self.pki, "gpu01")
        self.ok("node", self.pki, "gpu02")
        cert = self.path("gpu01.pem")
        subject = openssl("x509", "-in", cert, "-noout", "-subject", "-nameopt", "RFC2253")
        self.assertTrue(subject.strip().startswith("subject=CN=*,"), subject)
        text = openssl("x509", "-in", cert, "-noout", "-text")
        self.assertNotIn("Subject Alternative Name", text)
        self.assertIn("NIST CURVE: P-256", text)
        self.assertIn("CA:FALSE", text)
        self.assertIn("TLS Web Server Authentication, TLS Web Client Authentication", text)
        # 825 days, from now.
        dates = dict(line.split("=", 1) for line in
                     openssl("x509", "-in", cert, "-noout", "-dates").splitlines())
        start = ssl.cert_time_to_seconds(dates["notBefore"])
        end = ssl.cert_time_to_seconds(dates["notAfter"])
        self.assertEqual(end - start, 825 * 86400)
        self.assertLess(abs(start - datetime.datetime.now().timestamp()), 3600)
        # Random serials: 16 bytes, and two certificates' differ.
        serials = [openssl("x509", "-in", self.path(n + ".pem"), "-noout", "-serial").strip()
                   for n in ("gpu01", "gpu02")]
        self.assertNotEqual(serials[0], serials[1])
        self.assertGreaterEqual(len(serials[0].split("=", 1)[1]), 30, serials[0])
        # The CA is a CA that signs end certificates only.
        ca_text = openssl("x509", "-in", self.path("ca.pem"), "-noout", "-text")
        self.assertIn("CA:TRUE, pathlen:0", ca_text)
        self.assertIn("NIST CURVE: P-256", ca_text)

    def test_keys_are_0600(self):
        self.ok("ca", self.pki)
        self.ok("node", self.pki, "gpu01")
        for name in ("ca.key", "gpu01.key"):
            mode = stat.S_IMODE(os.stat(self.path(name)).st_mode)
            self.assertEqual(mode, 0o600, "%s is %04o" % (name, mode))
        # Nothing left behind but the four files.
        self.assertEqual(sorted(os.listdir(self.pki)),
                         ["ca.key", "ca.pem", "gpu01.key", "gpu01.pem"])

    def test_ca_twice_keeps_the_ca(self):
        self.ok("ca", self.pki)
        before = [read(self.path(n)) for n in ("ca.pem", "ca.key")]
        p = self.ok("ca", self.pki)
        self.assertIn("kept", p.stdout)
        after = [read(self.path(n)) for n in ("ca.pem", "ca.key")]
        self.assertEqual(before, after)
        # A half CA is not completed over: the admin decides.
        os.unlink(self.path("ca.pem"))
        p = self.run_script("ca", self.pki)
        self.assertEqual(p.returncode, 1)
        self.assertIn("ca.key exists without its pair", p.stderr)
        self.assertEqual(read(self.path("ca.key")), before[1])

    def test_node_without_a_ca_fails_clearly(self):
        os.mkdir(self.pki)
        p = self.run_script("node", self.pki, "gpu01")
        self.assertEqual(p.returncode, 1)
        self.assertIn("no CA in %s" % self.pki, p.stderr)
        self.assertIn("fleet-certs.sh ca %s" % self.pki, p.stderr)
        self.assertEqual(os.listdir(self.pki), [])

    def test_a_node_certificate_is_never_replaced(self):
        self.ok("ca", self.pki)
        self.ok("node", self.pki, "gpu01")
        key = read(self.path("gpu01.key"))
        p = self.run_script("node", self.pki, "gpu01")
        self.assertEqual(p.returncode, 1)
        self.assertIn("exists: kept", p.stderr)
        self.assertEqual(read(self.path("gpu01.key")), key)

    def test_bad_names_and_usage(self):
        self.ok("ca", self.pki)
        for name in ("ca", "../gpu01", "-x", ".hidden", "a b", ""):
            p = self.run_script("node", self.pki, name)
            self.assertEqual(p.returncode, 1, name)
            self.assertIn("bad node name", p.stderr)
        for args in ((), ("ca",), ("node", self.pki), ("sign", self.pki)):
            p = self.run_script(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn("usage:", p.stderr)
        self.assertEqual(sorted(os.listdir(self.pki)), ["ca.key", "ca.pem"])

    def test_no_openssl_is_said(self):
        empty = os.path.join(self.tmp, "empty-bin")
        os.mkdir(empty)
        p = self.run_script("ca", self.pki, env={"PATH": empty})
        self.assertEqual(p.returncode, 1)
        self.assertIn("openssl not found", p.stderr)
        self.assertFalse(os.path.exists(self.pki))

    def test_two_nodes_complete_a_mutual_tls_handshake(self):
        """Each node is a TLS server to some peers and a client of others:
        both usages must pass OpenSSL's checks (extended key usage), and a
        certificate of another CA must not."""
        self.ok("ca", self.pki)
        self.ok("node", self.pki, "gpu01")
        self.ok("node", self.pki, "gpu02")
        other = os.path.join(self.tmp, "other")
        self.ok("ca", other)
        self.ok("node", other, "stranger")

        def context(side, pki, name):
            ctx = ssl.SSLContext(side)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.path("ca.pem"))
            ctx.load_cert_chain(self.path(name + ".pem", pki), self.path(name + ".key", pki))
            return ctx

        server_ctx = context(ssl.PROTOCOL_TLS_SERVER, self.pki, "gpu01")
        lsock = socket.socket()
        self.addCleanup(lsock.close)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(4)
        lsock.settimeout(30)
        seen = []

        def serve(n):
            for _ in range(n):
                conn, _ = lsock.accept()
                conn.settimeout(30)
                try:
                    with server_ctx.wrap_socket(conn, server_side=True) as tls:
                        peer = tls.getpeercert()
                        seen.append(dict(x[0] for x in peer["subject"]).get("commonName"))
                        tls.sendall(b"HAVE\n")
                except (ssl.SSLError, OSError) as e:
                    seen.append(e)

        t = threading.Thread(target=serve, args=(2,), daemon=True)
        t.start()
        with socket.create_connection(lsock.getsockname(), timeout=30) as raw:
            with context(ssl.PROTOCOL_TLS_CLIENT, self.pki, "gpu02").wrap_socket(raw) as tls:
                self.assertEqual(tls.recv(5), b"HAVE\n")
                self.assertEqual(dict(x[0] for x in tls.getpeercert()["subject"])["commonName"], "*")
        # The stranger's chain is not the cluster's: the server refuses it.
        with socket.create_connection(lsock.getsockname(), timeout=30) as raw:
            with self.assertRaises((ssl.SSLError, OSError)):
                with context(ssl.PROTOCOL_TLS_CLIENT, other, "stranger").wrap_socket(raw) as tls:
                    tls.recv(5)
                    tls.recv(5)
        t.join(30)
        self.assertEqual(seen[0], "*")
        self.assertIsInstance(seen[1], ssl.SSLError)


if __name__ == "__main__":
    unittest.main()
