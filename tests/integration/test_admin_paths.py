"""The admin's and the user's paths around the system daemon. A
daemon that takes connections but never answers (systemd failing to start
it), a per-user fallback an admin or a job turns off, the Python client
saying what hubctl says, `hubctl doctor`, and a quiet log. Each test runs
the real hubctl, hubd and Python client; "the system socket" is one of the
test's own, named by HUBD_SYSTEM_SOCKET."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import HERE, HUBCTL, HUBD, HubTestCase

REPO = os.path.dirname(os.path.dirname(HERE))
PYCLIENT = os.path.join(REPO, "client", "python")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
HINT = "see `systemctl status hubd` and `journalctl -u hubd`"
PY_FETCH = ("import sys, hubd\n"
            "try:\n"
            "    print(hubd.fetch(sys.argv[1], progress=False))\n"
            "except hubd.HubdError as e:\n"
            "    print('HubdError', e.code, e.msg, file=sys.stderr)\n"
            "    sys.exit(3)\n")


class UserEnv:
    """A user's environment without a daemon of their own yet: a private
    runtime folder and a home, owned by uid."""

    def __init__(self, tmp, system_socket, uid=0, **extra):
        self.run, self.home = os.path.join(tmp, "run"), os.path.join(tmp, "home")
        for d in (self.run, self.home):
            os.makedirs(d, 0o700, exist_ok=True)
            os.chown(d, uid, uid)
        self.env = dict(os.environ)
        for k in ("HUBD_SOCKET", "XDG_CACHE_HOME", "HUBD_NO_USER_DAEMON", "HUBD_CLIENT_CONF",
                  "HUBD_SYSTEM_UNIT"):
            self.env.pop(k, None)
        self.env.update(XDG_RUNTIME_DIR=self.run, HOME=self.home, HUBD_SYSTEM_SOCKET=system_socket,
                        HUBD_BIN=HUBD, HUBCTL=HUBCTL, PYTHONPATH=PYCLIENT, **extra)
        self.prefix = NOBODY if uid == 65534 else []

    def hubctl(self, *args, timeout=60):
        return subprocess.run(self.prefix + [HUBCTL] + list(args), env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def python_fetch(self, url, timeout=60):
        return subprocess.run(self.prefix + ["python3", "-c", PY_FETCH, url], env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def no_user_daemon_traces(self):
        """Nothing of a per-user daemon: no socket, no cache in the home."""
        return (not os.path.exists(os.path.join(self.run, "hubd.sock")) and
                not os.path.exists(os.path.join(self.home, ".cache", "hubd")))

    def stop_user_daemon(self):
        subprocess.run(self.prefix + [HUBCTL, "stop"], env=self.env, capture_output=True,
                       timeout=30)


class SilentSystemSocketTest(unittest.TestCase):
    """A socket that takes connections and then says nothing (or closes
    them) is what clients see while systemd fails to start hubd: every
    client gives up within a bound, and says where to look."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hubd-admin-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.sock_path = os.path.join(self.tmp, "system.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(64)  # never accepted: the backlog holds them
        self.addCleanup(self.listener.close)
        self.user = UserEnv(self.tmp, self.sock_path, HUBD_ANSWER_TIMEOUT="2")

    def test_hubctl_gives_up_on_a_daemon_that_does_not_answer(self):
        for args in (["fetch", "http://127.0.0.1:1/x"], ["status"]):
            with self.subTest(args=args):
                t0 = time.monotonic()
                r = self.user.hubctl(*args, timeout=60)
                took = time.monotonic() - t0
                self.assertEqual(r.returncode, 3, r)
                self.assertIn("hubd at %s took the connection but did not answer within 2 s"
                              % self.sock_path, r.stderr)
                self.assertIn(HINT, r.stderr)
                self.assertLess(took, 20, r)

    def test_the_python_client_gives_up_on_a_daemon_that_does_not_answer(self):
        t0 = time.monotonic()
        r = self.user.python_fetch("http://127.0.0.1:1/x")
        self.assertLess(time.monotonic() - t0, 20, r)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("HubdError no_daemon hubd at %s took the connection but did not answer "
                      "within 2 s" % self.sock_path, r.stderr)
        self.assertIn(HINT, r.stderr)

    def test_a_daemon_that_closes_before_answering_is_named_with_where_to_look(self):
        stop = threading.Event()

        def accept_and_close():
            self.listener.settimeout(0.2)
            while not stop.is_set():
                try:
                    c, _ = self.listener.accept()
                    c.close()
                except OSError:
                    pass
        t = threading.Thread(target=accept_and_close)
        t.start()
        self.addCleanup(t.join)
        self.addCleanup(stop.set)
        r = self.user.hubctl("fetch", "http://127.0.0.1:1/x")
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("hubd at %s closed the connection before answering" % self.sock_path,
                      r.stderr)
        self.assertIn(HINT, r.stderr)
        r = self.user.python_fetch("http://127.0.0.1:1/x")
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("closed the connection before answering", r.stderr)
        self.assertIn(HINT, r.stderr)


class FallbackTest(HubTestCase):
    def test_the_per_user_daemon_is_turned_off_by_the_environment_or_client_conf(self):
        self.make_file("a.bin", 5000)
        url = self.origin.url("/files/a.bin")
        conf = os.path.join(self.tmp, "client.conf")
        with open(conf, "w") as f:
            f.write("# the machine's client settings\nuser_daemon = no\n")
        missing = os.path.join(self.tmp, "no-system.sock")
        for extra, why in (({"HUBD_NO_USER_DAEMON": "1"}, "HUBD_NO_USER_DAEMON=1 in the environment"),
                           ({"HUBD_CLIENT_CONF": conf}, "user_daemon = no in " + conf)):
            with self.subTest(why=why):
                user = UserEnv(self.tmp, missing, **extra)
                self.addCleanup(user.stop_user_daemon)
                r = user.hubctl("fetch", url)
                self.assertEqual(r.returncode, 3, r)
                self.assertIn("no system hubd answers at %s" % missing, r.stderr)
                self.assertIn("no per-user hubd either: it is turned off (%s)" % why, r.stderr)
                self.assertNotIn("started a per-user hubd", r.stderr)
                r = user.hubctl("start")
                self.assertEqual(r.returncode, 3, r)
                self.assertIn("turned off (%s)" % why, r.stderr)
                r = user.python_fetch(url)
                self.assertEqual(r.returncode, 3, r)
                self.assertIn("HubdError no_daemon", r.stderr)
                self.assertIn("it is turned off (%s)" % why, r.stderr)
                self.assertTrue(user.no_user_daemon_traces())
        self.assertEqual(self.origin.requests_for("/files/a.bin"), 0)

    def test_a_machine_whose_hubd_failed_gets_no_per_user_daemon(self):
        # systemd fails hubd.socket (and removes its file) after a bad
        # hubd.conf: with the unit installed, a fetch says where to look
        # instead of filling the home folder with a cache of its own.
        self.make_file("c.bin", 5000)
        url = self.origin.url("/files/c.bin")
        unit = os.path.join(self.tmp, "hubd.socket")
        open(unit, "w").close()
        missing = os.path.join(self.tmp, "gone.sock")
        user = UserEnv(self.tmp, missing, HUBD_SYSTEM_UNIT=unit)
        self.addCleanup(user.stop_user_daemon)
        r = user.hubctl("fetch", url)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("this machine's hubd (hubd.socket) does not answer at %s" % missing, r.stderr)
        self.assertIn(HINT, r.stderr)
        self.assertIn("no per-user hubd is started in its place", r.stderr)
        r = user.python_fetch(url)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("this machine's hubd (hubd.socket) does not answer", r.stderr)
        self.assertIn(HINT, r.stderr)
        self.assertTrue(user.no_user_daemon_traces())
        # Without the unit (no system hubd on this machine), the fallback.
        user.env["HUBD_SYSTEM_UNIT"] = ""
        r = user.hubctl("fetch", url)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("started a per-user hubd", r.stderr)

    def test_the_python_client_says_what_hubctl_says_before_falling_back(self):
        self.restart_with_group("daemon")
        digest = self.make_file("b.bin", 5000)
        url = self.origin.url("/files/b.bin")
        user = UserEnv(self.tmp, self.hubd.socket, uid=65534)
        self.addCleanup(user.stop_user_daemon)
        r = user.python_fetch(url)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(digest, r.stdout)
        self.assertIn("HubdFallbackWarning: the system hubd at %s refused you (permission "
                      "denied); ask an admin to run `adduser nobody daemon`, then log in again; "
                      "meanwhile, a per-user hubd with its own cache" % self.hubd.socket, r.stderr)
        user.stop_user_daemon()
        # Turned off: the same words, as the error, and nothing in the home.
        shutil.rmtree(os.path.join(user.home, ".cache"))
        user.env["HUBD_NO_USER_DAEMON"] = "1"
        r = user.python_fetch(url)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("the system hubd at %s refused you (permission denied); ask an admin to "
                      "run `adduser nobody daemon`" % self.hubd.socket, r.stderr)
        self.assertIn("it is turned off (HUBD_NO_USER_DAEMON=1", r.stderr)
        self.assertTrue(user.no_user_daemon_traces())
        r = user.hubctl("fetch", url)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("refused you (permission denied)", r.stderr)
        self.assertIn("turned off (HUBD_NO_USER_DAEMON=1", r.stderr)
        self.assertTrue(user.no_user_daemon_traces())


class DoctorTest(HubTestCase):
    def test_doctor_says_why_and_what_to_do(self):
        self.restart_with_group("daemon")
        root = UserEnv(self.tmp, self.hubd.socket)
        r = root.hubctl("doctor")
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("the system hubd answers", r.stdout)
        self.assertIn("verdict: all is well", r.stdout)
        nobody = UserEnv(os.path.join(self.tmp, "n"), self.hubd.socket, uid=65534)
        os.chmod(os.path.join(self.tmp, "n"), 0o755)
        # Owned as the package's is (user hubd, its own group): the owner's
        # look-up must not be taken for the user's (getpwuid is static).
        os.chown(self.hubd.socket, 1, 1)  # daemon:daemon
        r = nobody.hubctl("doctor")
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("mode 0660, daemon:daemon", r.stdout)
        self.assertIn("no: nobody is not in group daemon", r.stdout)
        self.assertIn("ask an admin to run `adduser nobody daemon`, then log in again", r.stdout)
        self.assertIn("per-user   allowed", r.stdout)
        self.assertTrue(nobody.no_user_daemon_traces())  # doctor starts nothing
        gone = UserEnv(os.path.join(self.tmp, "g"), os.path.join(self.tmp, "none.sock"),
                       HUBD_NO_USER_DAEMON="1")
        r = gone.hubctl("doctor")
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("systemctl enable --now hubd.socket", r.stdout)
        self.assertIn("per-user   turned off (HUBD_NO_USER_DAEMON=1", r.stdout)
        self.assertLessEqual(len(r.stdout.splitlines()), 24)  # one screen


class QuietLogTest(HubTestCase):
    def connected_lines(self):
        return len(re.findall(r": connected", self.hubd.read_log()))

    def test_a_hubctl_call_is_logged_once(self):
        # hubctl first probes the system socket (connect, close), then
        # talks: only the session that says something is logged at info.
        user = UserEnv(self.tmp, self.hubd.socket)
        before = self.connected_lines()
        r = user.hubctl("stats")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(self.connected_lines(), before + 1, self.hubd.read_log())
        self.assertIn("connected (hubctl/", self.hubd.read_log())

    def test_a_refused_admin_command_names_the_group(self):
        self.restart_with_group("nogroup")
        r = subprocess.run(NOBODY + [HUBCTL, "--socket", self.hubd.socket, "gc"],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("membership of the admin group hubd-admin", r.stderr)
        self.assertIn("not root or in the admin group hubd-admin", self.hubd.read_log())


if __name__ == "__main__":
    unittest.main()
