"""HTTPS: verified like a browser would, resumed, kept alive, never downgraded,
and a cut stream is never a success. Certificates come from
tests/tls/make-certs.sh, made fresh for the test run."""

import json
import os
import shutil
import signal
import time
import unittest

import hits
from harness import TestCerts, write_config, HUBD as HUBD_BIN, Hubd, HubTestCase, Origin, sha256_file, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
CERTS = None


def setUpModule():
    global CERTS
    CERTS = TestCerts()


def tearDownModule():
    CERTS.remove()




class TLSTest(HubTestCase):
    server_cert = "server"

    def setUp(self):
        super().setUp()
        # The fixture's plain origin stays for redirects; this one speaks TLS.
        self.tls_origin = Origin(self.root, tls=CERTS.pair(self.server_cert), name=".tls-port")
        self.addCleanup(self.tls_origin.stop)
        self.restart_hubd()

    def restart_hubd(self, **config):
        self.hubd.stop()
        args = ["--ca-file", CERTS.path("ca.crt")]
        conf = write_config(os.path.join(self.tmp, "tls.conf"), **config) if config else None
        self.hubd = Hubd(os.path.join(self.tmp, "hub-tls-%d" % len(os.listdir(self.tmp))),
                         extra_args=args, config=conf)

    def https(self, path, host="127.0.0.1"):
        return "https://%s:%d%s" % (host, self.tls_origin.port, path)

    def test_verified_fetch_matches_sha256(self):
        digest = self.make_file("a.bin", 3 * 1024 * 1024 + 5)
        r = self.hubctl("fetch", "--sha256", digest, self.https("/files/a.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)
        # By name too: SNI and the dNSName check.
        r = self.hubctl("fetch", "--json", self.https("/files/a.bin", host="localhost"))
        self.assertEqual(json.loads(r.out)["sha256"], digest, r)

    def test_chunked_over_tls(self):
        digest = self.make_file("c.bin", 700001)
        r = self.hubctl("fetch", self.https("/chunked/c.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)

    def test_keepalive_over_tls(self):
        self.make_file("k1", 1000, seed=1)
        self.make_file("k2", 1000, seed=2)
        for name in ("k1", "k2"):
            self.assertEqual(self.hubctl("fetch", self.https("/files/" + name)).rc, 0)
        st = self.tls_origin.stats()
        self.assertEqual(st["connections"], 1)
        self.assertEqual(st["handshakes"], 1)

    def test_session_resumed_on_reconnect(self):
        self.restart_hubd(keepalive_timeout="1ms")  # every fetch reconnects
        for i in range(3):
            self.make_file("r%d" % i, 1000, seed=i)
            r = self.hubctl("fetch", self.https("/files/r%d" % i))
            self.assertEqual(r.rc, 0, r)
            wait_for(lambda: self.tls_origin.stats()["handshakes"] == i + 1,
                     what="handshake %d" % (i + 1))
        self.assertGreaterEqual(self.tls_origin.stats()["resumed"], 2)

    def test_eight_concurrent_https_fetches_one_transfer(self):
        digest = self.make_file("big.bin", 8 * 1024 * 1024)
        url = self.https("/files/big.bin?bps=%d" % (16 * 1024 * 1024))
        procs = [self.hubctl_bg("fetch", "--json", url) for _ in range(8)]
        results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
        self.assertTrue(all(r["ok"] and r["sha256"] == digest for r in results), results)
        self.assertEqual(self.tls_origin.requests_for("/files/big.bin"), 1)

    def test_truncated_tls_stream_is_an_error(self):
        self.make_file("t.bin", 500000)
        for path in ("/files/t.bin?truncate=100000", "/eof/t.bin?truncate=100000"):
            r = self.hubctl("fetch", self.https(path))
            self.assertEqual(r.rc, 1, (path, r))
            self.assertIn("truncated", r.err)
        self.assertEqual(self.hubd.blob_files(), [])
        self.hubd.wait_no_partials()

    def test_close_delimited_body_with_close_notify(self):
        digest = self.make_file("e.bin", 300000)
        r = self.hubctl("fetch", self.https("/eof/e.bin"))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)

    def test_redirect_https_to_http_refused(self):
        self.make_file("d.bin", 1000)
        target = self.origin.url("/files/d.bin")
        r = self.hubctl("fetch", self.https("/redirect-to?url=%s" % target))
        self.assertEqual(r.rc, 1, r)
        self.assertIn("redirect", r.err)
        self.assertIn("https to http", r.err)
        self.assertEqual(self.origin.requests_for("/files/d.bin"), 0)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_redirect_http_to_https_followed(self):
        digest = self.make_file("u.bin", 1000)
        r = self.hubctl("fetch", self.origin.url("/redirect-to?url=%s" % self.https("/files/u.bin")))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)
        self.assertEqual(self.tls_origin.requests_for("/files/u.bin"), 1)

    def test_backlog_is_bounded_and_drains(self):
        # Small plaintext buffers against a fast server: ciphertext arrives
        # faster than 4 KiB items drain it, so reading must stop at the cap
        # and start again, and the TLS state must not hoard the download.
        self.restart_hubd(read_buffer_size="4K")
        digest = self.make_file("l.bin", 128 * 1024 * 1024)
        r = self.hubctl("fetch", self.https("/files/l.bin"), timeout=120)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(os.path.basename(r.out.strip()), digest)
        if "asan" not in HUBD_BIN:  # ASan's own memory use would blur this
            with open("/proc/%d/status" % self.hubd.proc.pid) as f:
                hwm_kib = int(next(l for l in f if l.startswith("VmHWM")).split()[1])
            # max_inflight (16 MiB) and, per connection of the segmented
            # download, at most 1 MiB of ciphertext and 1 MiB of plaintext
            # in its decrypt item: well under the file.
            self.assertLess(hwm_kib, 56 * 1024, "peak RSS grows with the file")

    def test_backpressure_over_tls(self):
        # Tiny buffers: reading pauses with whole records still buffered in
        # TLS; resuming must decrypt them without waiting for the socket.
        self.restart_hubd(read_buffer_size="4K", max_inflight="64K")
        digest = self.make_file("b.bin", 5 * 1024 * 1024 + 7)
        r = self.hubctl("fetch", self.https("/files/b.bin"), timeout=60)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(sha256_file(r.out.strip()), digest)


class PlainAnswerTest(HubTestCase):
    def test_plain_http_on_the_port_is_named(self):
        # https:// to a plain http server: its answer to the ClientHello is
        # quoted, not mbedTLS's "invalid SSL record".
        self.make_file("p.bin", 1000)
        url = "https://127.0.0.1:%d/files/p.bin" % self.origin.port
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 1, r)
        err = json.loads(r.out)["error"]
        self.assertEqual(err["code"], "tls", err)
        # (Python's http.server answers a bad request line as HTTP/0.9: a
        # page, no status line.)
        self.assertIn('127.0.0.1: the answer is not TLS but begins "<!DOCTYPE HTML>" (plain HTTP',
                      err["message"])
        self.assertEqual(self.hubd.blob_files(), [])


class BadCertTest(HubTestCase):
    """Each bad certificate fails with its reason and stores nothing."""

    def fetch_with(self, cert_name, host="localhost", config=None):
        origin = Origin(self.root, tls=CERTS.pair(cert_name), name=".%s-port" % cert_name)
        self.addCleanup(origin.stop)
        self.origin_port = origin.port
        self.hubd.stop()
        conf = None
        if config:
            conf = write_config(os.path.join(self.tmp, "bad.conf"), **config)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-" + cert_name),
                         extra_args=["--ca-file", CERTS.path("ca.crt")], config=conf)
        self.make_file("x.bin", 1000)
        return self.hubctl("fetch", "https://%s:%d/files/x.bin" % (host, origin.port))

    def assert_refused(self, r, reason):
        self.assertEqual(r.rc, 1, r)
        self.assertIn("tls_verify", r.err)
        self.assertIn(reason, r.err)
        self.assertEqual(self.hubd.blob_files(), [])

    def test_unknown_ca(self):
        r = self.fetch_with("untrusted")
        self.assert_refused(r, "unable to get local issuer certificate (unknown CA")
        # Which bundle was used, and how to trust a CA.
        self.assertIn("CA bundle %s" % CERTS.path("ca.crt"), r.err)
        self.assertIn("to trust its CA, name it in ca_file", r.err)

    def test_self_signed(self):
        r = self.fetch_with("selfsigned")
        self.assert_refused(r, "self-signed certificate (not issued by any CA")
        self.assertIn("to trust its CA", r.err)

    def test_the_ca_bundle_is_read_again_on_sighup(self):
        # An admin adds the CA to the bundle (update-ca-certificates, or the
        # file ca_file names) and reloads: no restart, downloads go on.
        bundle = os.path.join(self.tmp, "bundle.pem")
        shutil.copy(CERTS.path("ca.crt"), bundle)
        origin = Origin(self.root, tls=CERTS.pair("untrusted"), name=".reload-port")
        self.addCleanup(origin.stop)
        self.origin_port = origin.port
        self.hubd.stop()
        self.hubd = Hubd(os.path.join(self.tmp, "hub-reload"),
                         config=write_config(os.path.join(self.tmp, "ca.conf"), ca_file=bundle))
        self.make_file("x.bin", 1000)
        r = self.hubctl("fetch", "https://localhost:%d/files/x.bin" % origin.port)
        self.assert_refused(r, "unknown CA")
        self.assertIn("CA bundle %s" % bundle, r.err)
        with open(bundle, "a") as f, open(CERTS.path("other-ca.crt")) as o:
            f.write(o.read())
        self.hubd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log(), what="the reload")
        r = self.hubctl("fetch", "https://localhost:%d/files/x.bin" % self.origin_port)
        self.assertEqual(r.rc, 0, r)

    def test_the_loop_answers_while_a_reload_reads_the_ca_bundle(self):
        # A large bundle (the test CA 6,000 times) takes hundreds of ms to
        # parse. Before, a SIGHUP parsed it on the event loop, and no client
        # was answered meanwhile (the system bundle: 5-7 ms of every hit's
        # time); now the pool parses it, and the reload is said done once
        # the bundle is in use. hubd starts with the test CA alone (a start
        # parses its bundle before it listens), then the reload takes the
        # large one.
        copies = 6000
        bundle = os.path.join(self.tmp, "big-bundle.pem")
        with open(CERTS.path("ca.crt")) as f:
            pem = f.read()
        with open(bundle, "w") as f:
            f.write(pem * copies)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "big.conf"), ca_file=CERTS.path("ca.crt"))
        self.hubd = Hubd(os.path.join(self.tmp, "hub-big-ca"), config=conf)
        s = hits.Session(self.hubd.socket)
        self.addCleanup(s.close)
        write_config(conf, ca_file=bundle)
        t0 = time.monotonic()
        self.hubd.proc.send_signal(signal.SIGHUP)
        slowest, answers = 0.0, 0
        while "configuration reloaded" not in self.hubd.read_log():
            t = time.monotonic()
            self.assertTrue(s.ask(b"STATS").startswith(b"STATS "))
            slowest, answers = max(slowest, time.monotonic() - t), answers + 1
            self.assertLess(t - t0, 120, "no reload")
        took = time.monotonic() - t0
        print("\n  reload of a %d KiB bundle: %.0f ms; %d STATS answered meanwhile, the slowest "
              "in %.1f ms" % (len(pem) * copies // 1024, took * 1e3, answers, slowest * 1e3))
        self.assertNotIn("not reloaded", self.hubd.read_log())
        self.assertGreater(took, 0.1, "the bundle parsed too fast to show anything")
        self.assertLess(slowest, took / 2)
        self.assertGreater(answers, 5)

    def distrust_after_reuse(self, keepalive, replace_ca=True):
        # A CA taken out of the bundle (compromised, or trusted by mistake)
        # and a reload: the origin it vouched for is refused at once, on a
        # pooled connection (keepalive) and on a new one that would resume
        # the TLS session (resumption skips the certificate check). Both
        # went on trusting it until the daemon restarted.
        bundle = os.path.join(self.tmp, "bundle.pem")
        shutil.copy(CERTS.path("ca.crt"), bundle)
        origin = Origin(self.root, tls=CERTS.pair("server"), name=".distrust-port")
        self.addCleanup(origin.stop)
        self.origin_port = origin.port
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "ca.conf"), ca_file=bundle,
                            keepalive_timeout=keepalive)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-distrust-" + keepalive), config=conf)
        for name in "abc":
            self.make_file(name, 1000, seed=ord(name))
        url = "https://localhost:%d/files/" % origin.port
        for name in "ab":
            r = self.hubctl("fetch", url + name)
            self.assertEqual(r.rc, 0, r)
        st = origin.stats()
        connects, resumed = st["connections"], st["resumed"]
        if replace_ca:
            with open(bundle, "w") as f, open(CERTS.path("other-ca.crt")) as o:
                f.write(o.read())
        else:  # another key changes, the bundle does not
            write_config(conf, ca_file=bundle, keepalive_timeout=keepalive, log_level="debug")
        self.hubd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in self.hubd.read_log(), what="the reload")
        r = self.hubctl("fetch", url + "c")
        if replace_ca:
            self.assert_refused_after(r)
        else:
            self.assertEqual(r.rc, 0, r)
        return connects, resumed, origin.stats()

    def assert_refused_after(self, r):
        self.assertEqual(r.rc, 1, r)
        self.assertIn("tls_verify", r.err)
        self.assertIn("unknown CA", r.err)

    def test_a_ca_taken_out_is_distrusted_on_pooled_connections(self):
        connects, _, _ = self.distrust_after_reuse("30s")
        self.assertEqual(connects, 1)  # b came on a's connection: the pool was used

    def test_a_ca_taken_out_is_distrusted_on_resumed_sessions(self):
        _, resumed, _ = self.distrust_after_reuse("0")
        self.assertEqual(resumed, 1)  # b resumed a's session: resumption was used

    def test_a_reload_that_keeps_the_bundle_keeps_pool_and_sessions(self):
        # A SIGHUP for another key must not cost every origin a new
        # connection and a full handshake: c goes on a's pooled connection,
        # and without keep-alive resumes its session.
        connects, _, after = self.distrust_after_reuse("30s", replace_ca=False)
        self.assertEqual((connects, after["connections"]), (1, 1))
        _, resumed, after = self.distrust_after_reuse("0", replace_ca=False)
        self.assertEqual((resumed, after["resumed"]), (1, 2))

    def test_expired(self):
        self.assert_refused(self.fetch_with("expired"), "expired")

    def test_wrong_name(self):
        self.assert_refused(self.fetch_with("wrongname"), "name mismatch")

    def test_wrong_ip(self):
        # The certificate names wrong.example only: no iPAddress SAN matches.
        self.assert_refused(self.fetch_with("wrongname", host="127.0.0.1"), "name mismatch")

    def test_insecure_host_opt_out_is_loud(self):
        r = self.fetch_with("untrusted", config={"tls_insecure_hosts": "localhost"})
        self.assertEqual(r.rc, 0, r)
        self.assertIn("VERIFICATION IS OFF for host localhost", self.hubd.read_log())


if __name__ == "__main__":
    unittest.main()
