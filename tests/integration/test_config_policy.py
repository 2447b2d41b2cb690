"""Timeouts of 0 are refused (at start, by
--check-config and on SIGHUP), and deny_hosts / allow_hosts hold for every
spelling of an IP address.

Every URL here names an IP address (in some spelling) or nothing: no test
sends a DNS query, whichever hubd it runs against. Spellings that only
browsers read as numbers (a final dot: "127.0.0.1.") would be a DNS name
to an older hubd's resolver, so they are left to tests/unit/test_url.c and
test_netpolicy.c.
"""

import json
import os
import signal
import subprocess
import unittest

from harness import ipv6_loopback_works, HUBD, Hubd, HubTestCase, Origin, wait_for, write_config

# Ways to write 127.0.0.1 in a URL's host that the resolver (inet_aton) and
# browsers (WHATWG URL) read as that address.
LOOPBACK_SPELLINGS = (
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "017700000001",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
)

TIMEOUT_KEYS = ("connect_timeout", "idle_timeout", "first_byte_timeout", "header_timeout")
ZERO_WHY = "a timeout of 0 would fail every download"


class PolicyCase(HubTestCase):
    def restart_with(self, name, **keys):
        """hubd again, with a fresh cache and these config keys."""
        self.assertEqual(self.hubd.stop(), 0, self.hubd.read_log()[-4000:])
        conf = write_config(os.path.join(self.tmp, name + ".conf"), **keys)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-" + name), config=conf)

    def url(self, host, path):
        return "http://%s:%d%s" % (host, self.origin.port, path)

    def fetch_error(self, url):
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 1, r)
        res = json.loads(r.out)
        return res["error"]["code"], res.get("error", {}).get("message", "")

    def fetch_ok(self, url):
        r = self.hubctl("fetch", "--json", url)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out)


class HostSpellingTest(PolicyCase):
    """Point 11: an IP address in a host list is the address, not a string."""

    def test_deny_hosts_holds_for_every_spelling_of_the_address(self):
        self.make_file("a", 1000)
        self.restart_with("deny", deny_hosts="127.0.0.1")
        for host in ("127.0.0.1",) + LOOPBACK_SPELLINGS:
            with self.subTest(host=host):
                code, msg = self.fetch_error(self.url(host, "/files/a"))
                self.assertEqual(code, "forbidden", msg)
                self.assertIn("network policy", msg)
                # The message names the host as it was checked: canonical.
                self.assertTrue("host 127.0.0.1 " in msg or "host ::ffff:127.0.0.1 " in msg, msg)
        self.assertEqual(self.origin.stats()["total_requests"], 0)

    def test_a_list_item_in_another_spelling_is_the_same_address(self):
        self.make_file("a", 1000)
        for i, item in enumerate(("2130706433", "127.1", "0x7f.0.0.1", "[::ffff:127.0.0.1]",
                                  "::ffff:7f00:1")):
            with self.subTest(deny_hosts=item):
                self.restart_with("item%d" % i, deny_hosts=item)
                for host in ("127.0.0.1", "[::ffff:127.0.0.1]"):
                    code, msg = self.fetch_error(self.url(host, "/files/a"))
                    self.assertEqual(code, "forbidden", (host, msg))
        self.assertEqual(self.origin.stats()["total_requests"], 0)

    def test_allow_hosts_admits_every_spelling_as_one_cache_entry(self):
        digest = self.make_file("a", 5000)
        self.restart_with("allow", allow_hosts="127.0.0.1")
        first = self.fetch_ok(self.url("127.1", "/files/a"))
        self.assertEqual((first["source"], first["sha256"]), ("download", digest))
        # One address, one cache key: the other spellings are hits.
        for host in ("127.0.0.1", "2130706433", "0x7f.0.0.1", "017700000001"):
            with self.subTest(host=host):
                self.assertEqual(self.fetch_ok(self.url(host, "/files/a"))["source"], "hit")
        self.assertEqual(self.origin.requests_for("/files/a"), 1)
        rows = json.loads(self.hubctl("ls", "--json").out)
        self.assertEqual([r["url"] for r in rows], [self.url("127.0.0.1", "/files/a")])
        # The IPv4-mapped IPv6 form of the listed address is that address
        # too (an IPv6 URL: a cache key of its own, the same blob).
        self.assertEqual(self.fetch_ok(self.url("[::ffff:7f00:1]", "/files/a"))["sha256"], digest)
        # Other loopback addresses are not on the list.
        code, _ = self.fetch_error(self.url("127.2", "/files/a"))
        self.assertEqual(code, "forbidden")

    @unittest.skipUnless(ipv6_loopback_works(), "no IPv6 loopback")
    def test_redirect_hops_are_checked_in_canonical_form(self):
        self.make_file("a", 1000)
        self.restart_with("hops", deny_hosts="127.0.0.1")
        # A second origin, on ::1 (not denied), redirects to the first under
        # another spelling of its address.
        other_root = os.path.join(self.tmp, "root6")
        os.mkdir(other_root)
        other = Origin(other_root, bind="::1")
        self.addCleanup(other.stop)
        code, msg = self.fetch_error(other.url(
            "/redirect-to?url=http://2130706433:%d/files/a" % self.origin.port))
        self.assertEqual(code, "forbidden", msg)
        self.assertEqual(other.stats()["total_requests"], 1)
        self.assertEqual(self.origin.stats()["total_requests"], 0)


@unittest.skipUnless(ipv6_loopback_works(), "no IPv6 loopback")
class HostSpellingV6Test(PolicyCase):
    """The same for an IPv6 address: "::1" and its longer spellings."""

    origin_bind = "::1"

    def test_deny_hosts_holds_for_every_spelling_of_an_ipv6_address(self):
        self.make_file("a", 1000)
        self.restart_with("deny6", deny_hosts="::1")
        for host in ("[::1]", "[0:0::1]", "[0:0:0:0:0:0:0:1]", "[::0001]", "[0000::1]"):
            with self.subTest(host=host):
                code, msg = self.fetch_error(self.url(host, "/files/a"))
                self.assertEqual(code, "forbidden", msg)
                self.assertIn("host ::1 ", msg)
        self.assertEqual(self.origin.stats()["total_requests"], 0)


class ZeroTimeoutTest(PolicyCase):
    """Point 10: a timeout of 0 would fail every download, so it is refused
    where settings are read: at start (--check-config) and on SIGHUP."""

    def test_check_config_refuses_a_zero_timeout(self):
        for key in TIMEOUT_KEYS:
            with self.subTest(key=key):
                conf = os.path.join(self.tmp, "zero-%s.conf" % key)
                with open(conf, "w") as f:
                    f.write("[hubd]\n# a comment\nretries = 2\n%s = 0\n" % key)
                p = subprocess.run([HUBD, "--config", conf, "--check-config"],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, p)
                # File, line, key and why.
                self.assertIn("%s:4:" % conf, p.stderr)
                self.assertIn("'%s'" % key, p.stderr)
                self.assertIn(ZERO_WHY, p.stderr)
                self.assertEqual(p.stdout, "")
        # 1 ms is the smallest that works, and --check-config prints it.
        conf = write_config(os.path.join(self.tmp, "one.conf"), idle_timeout="1ms",
                            header_timeout="90s")
        p = subprocess.run([HUBD, "--config", conf, "--check-config"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn("idle_timeout = 1ms\n", p.stdout)
        self.assertIn("header_timeout = 90s\n", p.stdout)

    def reload_log(self, since):
        """The reload lines hubd logged after byte `since` of its log."""
        log = self.hubd.read_log()[since:]
        return [l for l in log.splitlines()
                if "reload refused" in l or "configuration reloaded" in l]

    def test_sighup_with_a_zero_timeout_is_refused_and_downloads_go_on(self):
        conf = self.hubd.config
        self.make_file("before", 1000)
        self.fetch_ok(self.origin.url("/files/before"))
        for n, key in enumerate(TIMEOUT_KEYS):
            with self.subTest(key=key):
                write_config(conf, **{key: "0"})  # "[hubd]", then key: line 2
                since = len(self.hubd.read_log())
                os.kill(self.hubd.proc.pid, signal.SIGHUP)
                wait_for(lambda: self.reload_log(since), what="hubd to handle SIGHUP")
                lines = self.reload_log(since)
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("reload refused, settings unchanged", lines[0])
                self.assertIn("%s:2:" % conf, lines[0])
                self.assertIn("'%s'" % key, lines[0])
                self.assertIn(ZERO_WHY, lines[0])
                # The settings in force still download (a new file: no hit).
                digest = self.make_file("after%d" % n, 2000, seed=n + 2)
                res = self.fetch_ok(self.origin.url("/files/after%d" % n))
                self.assertEqual((res["source"], res["sha256"]), ("download", digest))
        # A good file is taken again.
        write_config(conf, idle_timeout="45s")
        since = len(self.hubd.read_log())
        os.kill(self.hubd.proc.pid, signal.SIGHUP)
        wait_for(lambda: self.reload_log(since), what="hubd to handle SIGHUP")
        self.assertIn("configuration reloaded", self.reload_log(since)[0])


if __name__ == "__main__":
    unittest.main()
