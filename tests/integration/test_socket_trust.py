"""Whom the clients trust on the other end of the socket: per-user daemons
started by racing hubctls, sockets and folders planted by another user, and
a hostile daemon answering the Python client."""

import os
import signal
import socket
import struct
import subprocess
import time
import unittest

from unittest import mock

from harness import HUBCTL, HUBD, HubTestCase, SLOW, answers, wait_for

PYCLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "client", "python")
PY_FETCH = ("import sys, hubd\n"
            "try:\n"
            "    print(hubd.fetch(sys.argv[1], headers={'Authorization': 'Bearer SECRET'},\n"
            "                     progress=False))\n"
            "except hubd.HubdError as e:\n"
            "    print('HubdError', e.code, e.msg, file=sys.stderr)\n"
            "    sys.exit(3)\n")

NOBODY = 65534    # the victim, when it is not root
ATTACKER = 65533  # another ordinary uid


def as_uid(uid):
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]


# A daemon that lies, run by whoever plants it: it records every byte a
# client sends (argv[2]) and answers FETCH per argv[3]: "done" (a DONE with a
# descriptor of argv[4], and its size), "garbage", "huge" (an endless line),
# "silent" (never answers), "fifo", "dir", "socket" (a DONE whose descriptor
# is one of those), "short" (the file, announced 1 byte longer).
FAKE_DAEMON = r"""
import array, os, re, socket, sys, threading
path, record, how = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4] if len(sys.argv) > 4 else None
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o666)
srv.listen(16)
print("ready", flush=True)
def serve(c):
    got = b""
    while True:
        data = c.recv(65536)
        if not data:
            return
        with open(record, "ab") as f:
            f.write(data)
        got += data
        if b"FETCH" not in got or not got.endswith(b"\n"):
            continue
        if how == "silent":
            continue
        c.sendall(b"HELLO proto=1\n")
        if how == "garbage":
            c.sendall(b"\x00\xff garbage = = =\nDONE nonsense\n")
            return c.close()
        if how == "huge":
            try:
                while True:
                    c.sendall(b"A" * 65536)
            except OSError:
                return
        if how == "dir":
            fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
            size = 10
        elif how == "fifo":
            fd = os.open(extra, os.O_RDWR)
            size = 10
        elif how == "socket":
            fd = c.fileno()
            size = 10
        else:
            fd = os.open(extra, os.O_RDONLY)
            size = os.fstat(fd).st_size + (how == "short")
        rid = re.search(rb"FETCH id=(\S+)", got).group(1).decode()
        line = ("DONE id=%s path=%s sha256=%s size=%d source=hit\n"
                % (rid, extra or "/", "0" * 64, size)).encode()
        c.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        c.recv(1)
        return c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def live_daemons(sock):
    """The pids of live (not zombie) hubd processes serving sock."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/stat" % p) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"--user-mode" in argv and sock.encode() in argv:
            pids.append(int(p))
    return pids


class UserEnvCase(HubTestCase):
    def user_env(self, run=None):
        """hubctl's environment for a per-user daemon: no system daemon, a
        fresh 0700 runtime folder (run), HOME in the test's folder."""
        env = dict(os.environ)
        env.pop("HUBD_SOCKET", None)
        env.pop("XDG_CACHE_HOME", None)
        if run is None:
            run = os.path.join(self.tmp, "run")
            os.makedirs(run, 0o700, exist_ok=True)
        env.update(XDG_RUNTIME_DIR=run, HOME=os.path.join(self.tmp, "home"),
                   HUBD_SYSTEM_SOCKET=os.path.join(self.tmp, "no-system.sock"),
                   HUBD_SYSTEM_UNIT="", HUBD_BIN=HUBD)
        return env

    def kill_daemons_later(self, sock):
        def kill():
            for pid in live_daemons(sock):
                os.kill(pid, signal.SIGKILL)
        self.addCleanup(kill)

    def user_log(self, env):
        """The per-user daemons' log, for a failure's message."""
        try:
            with open(os.path.join(env["XDG_RUNTIME_DIR"], "hubd.log"), errors="replace") as f:
                return "\n--- per-user hubd.log ---\n" + f.read()[-8000:]
        except OSError as e:
            return "\n(no per-user hubd.log: %s)" % e

    def run_ctl(self, env, *args, pre=(), cwd=None):
        return subprocess.run(list(pre) + [HUBCTL] + list(args), env=env, capture_output=True,
                              text=True, timeout=120 * SLOW, cwd=cwd)


class UserDaemonTest(UserEnvCase):
    """Per-user daemons that hubctls start and stop at the same time."""

    def test_racing_autostarts_leave_one_daemon(self):
        env = self.user_env()
        sock = os.path.join(env["XDG_RUNTIME_DIR"], "hubd.sock")
        self.kill_daemons_later(sock)
        digest = self.make_file("a", 200000)
        procs = [subprocess.Popen([HUBCTL, "fetch", self.origin.url("/files/a")], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        outs = [p.communicate(timeout=120 * SLOW) + (p.returncode,) for p in procs]
        for out, err, rc in outs:
            self.assertEqual(rc, 0, err)
            self.assertTrue(out.strip().endswith(digest), out)
        wait_for(lambda: len(live_daemons(sock)) == 1, 10 * SLOW, "one daemon left")
        r = self.run_ctl(env, "stop")
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(live_daemons(sock), [])
        self.assertFalse(os.path.lexists(sock))
        self.assertEqual(sorted(os.listdir(env["XDG_RUNTIME_DIR"])), ["hubd.log"])

    def test_a_killed_daemons_socket_is_replaced(self):
        env = self.user_env()
        sock = os.path.join(env["XDG_RUNTIME_DIR"], "hubd.sock")
        self.kill_daemons_later(sock)
        self.make_file("a", 4000)
        r = self.run_ctl(env, "start")
        self.assertEqual(r.returncode, 0, r)
        (pid,) = live_daemons(sock)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not live_daemons(sock), 10 * SLOW, "the daemon's death")
        # Its main thread is a zombie before its last thread has gone: till
        # then the socket still takes connections, and resets them when the
        # process ends (a client there was told "closed the connection").
        wait_for(lambda: not answers(sock), 10 * SLOW, "the dead daemon's socket to refuse")
        self.assertTrue(os.path.exists(sock))  # stale: nobody listens
        procs = [subprocess.Popen([HUBCTL, "fetch", self.origin.url("/files/a")], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        outs = [p.communicate(timeout=120 * SLOW) + (p.returncode,) for p in procs]
        for out, err, rc in outs:
            self.assertEqual(rc, 0, err + self.user_log(env))
        # The daemons that lost the race to the socket exit on their own, a
        # moment after the clients they were started for are answered.
        wait_for(lambda: len(live_daemons(sock)) == 1, 10 * SLOW, "one daemon left")

    def test_a_fetch_racing_a_stop(self):
        env = self.user_env()
        sock = os.path.join(env["XDG_RUNTIME_DIR"], "hubd.sock")
        self.kill_daemons_later(sock)
        self.make_file("a", 4000)
        for i in range(5):
            r = self.run_ctl(env, "start")
            self.assertEqual(r.returncode, 0, r)
            stop = subprocess.Popen([HUBCTL, "stop"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            time.sleep(0.01 * i)
            t0 = time.monotonic()
            r = self.run_ctl(env, "fetch", self.origin.url("/files/a"))
            took = time.monotonic() - t0
            _, err = stop.communicate(timeout=60 * SLOW)
            self.assertEqual(stop.returncode, 0, err)
            # The fetch got the old daemon, a new one, or the old one's
            # clear "stopping" (or its close before it could say so, when
            # the stop came between the connect and HELLO's answer): never
            # a hang or a second daemon.
            if r.returncode:
                self.assertTrue("shutting_down: hubd is stopping" in r.stderr or
                                "closed the connection before answering" in r.stderr, r.stderr)
            self.assertLess(took, 10 * SLOW, r)
            self.assertLessEqual(len(live_daemons(sock)), 1)
            self.assertEqual(self.run_ctl(env, "stop").returncode, 0)
        self.assertEqual(live_daemons(sock), [])


class PlantCase(UserEnvCase):
    """Folders of two users in the test's folder, and fake daemons."""

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)  # the two users reach their folders in it

    def own_dir(self, name, uid, mode=0o700):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        os.chown(d, uid, uid)
        os.chmod(d, mode)
        return d

    def plant(self, sock, how="done", extra=None, uid=ATTACKER):
        """The fake daemon, as uid, on sock; returns the file it records to."""
        record = os.path.join(self.tmp, "record-%d" % len(os.listdir(self.tmp)))
        open(record, "wb").close()
        os.chown(record, uid, uid)
        argv = as_uid(uid) + ["python3", "-c", FAKE_DAEMON, sock, record, how]
        p = subprocess.Popen(argv + ([extra] if extra else []), stdout=subprocess.PIPE,
                             text=True)
        self.addCleanup(lambda: (p.kill(), p.wait(), p.stdout.close()))
        self.assertEqual(p.stdout.readline().strip(), "ready")
        return record

    def attackers_daemon_in_victims_folder(self):
        """The attacker's fake daemon (DONE with a file of its own), its
        socket moved (by root) into the victim's own 0700 folder: returns
        (its record, that folder)."""
        att = self.own_dir("att", ATTACKER, 0o755)
        with open(os.path.join(att, "secret"), "w") as f:
            f.write("the attacker's bytes")
        record = self.plant(os.path.join(att, "hubd.sock"), "done", os.path.join(att, "secret"))
        run = self.own_dir("victim-run", NOBODY)
        os.rename(os.path.join(att, "hubd.sock"), os.path.join(run, "hubd.sock"))
        return record, run

    def victim_env(self, uid, run):
        env = self.user_env(run)
        env["HOME"] = self.own_dir("home-%d" % uid, uid)
        return env

    def py_fetch(self, env, uid, cwd=None):
        env = dict(env, PYTHONPATH=PYCLIENT, HUBCTL=HUBCTL)
        return subprocess.run(as_uid(uid) + ["python3", "-c", PY_FETCH, self.origin.url("/files/a")],
                              env=env, capture_output=True, text=True, timeout=120 * SLOW, cwd=cwd)


class PlantedSocketTest(PlantCase):
    """Another user's socket where the per-user daemon would be: nothing of
    the victim's (a header with a token, the URL, even HELLO) may reach it."""

    def fetch_with_token(self, env, uid):
        pre = as_uid(uid) if uid else ()
        return self.run_ctl(env, "fetch", "-H", "Authorization: Bearer SECRET-TOKEN",
                            self.origin.url("/files/a"), pre=pre)

    def test_a_runtime_dir_of_another_user_is_refused(self):
        # su and sudo -E pass XDG_RUNTIME_DIR on: the first user's folder,
        # with that user's daemon in it, must not get the second's fetches.
        att = self.own_dir("att-run", ATTACKER, 0o755)
        sock = os.path.join(att, "hubd.sock")
        with open(os.path.join(att, "secret"), "w") as f:
            f.write("the attacker's bytes")
        record = self.plant(sock, "done", os.path.join(att, "secret"))
        for victim in (NOBODY, 0):
            env = self.victim_env(victim, att) if victim else self.user_env(att)
            r = self.fetch_with_token(env, victim)
            self.assertNotEqual(r.returncode, 0, r)
            self.assertIn("XDG_RUNTIME_DIR=%s is not a private folder of yours" % att, r.stderr)
            self.assertIn("owner uid %d" % ATTACKER, r.stderr)
            self.assertIn("point it at a folder of your own", r.stderr)
            for cmd in ("start", "status"):
                r = self.run_ctl(env, cmd, pre=as_uid(victim) if victim else ())
                self.assertNotEqual(r.returncode, 0, r)
                self.assertIn("not a private folder of yours", r.stderr)
            with open(record, "rb") as f:
                self.assertEqual(f.read(), b"", "the victim (uid %d) talked to it" % victim)

    def test_a_writable_runtime_dir_is_refused(self):
        # The user's own, but group- or world-writable: anyone could plant.
        run = self.own_dir("run-open", NOBODY, 0o777)
        env = self.victim_env(NOBODY, run)
        self.kill_daemons_later(os.path.join(run, "hubd.sock"))  # if one were started
        r = self.run_ctl(env, "start", pre=as_uid(NOBODY))
        self.assertNotEqual(r.returncode, 0, r)
        self.assertIn("mode 0777", r.stderr)
        self.assertEqual(os.listdir(run), [])

    def test_another_users_daemon_in_ones_own_folder_is_refused(self):
        # The folder is the victim's, yet another user's daemon answers in
        # it (root moved the socket there): the peer check refuses it.
        record, run = self.attackers_daemon_in_victims_folder()
        env = self.victim_env(NOBODY, run)
        for args in (["fetch", "-H", "Authorization: Bearer SECRET-TOKEN",
                      self.origin.url("/files/a")], ["start"], ["status"]):
            r = self.run_ctl(env, *args, pre=as_uid(NOBODY))
            self.assertNotEqual(r.returncode, 0, r)
            self.assertIn("is run by uid %d" % ATTACKER, r.stderr)
            self.assertIn("not by you (uid %d)" % NOBODY, r.stderr)
            self.assertNotIn("the attacker's bytes", r.stdout)
        with open(record, "rb") as f:
            self.assertEqual(f.read(), b"")
        # Named by the user (--socket) elsewhere, it is the user's choice
        # (at the per-user path, even --socket is checked: above).
        elsewhere = os.path.join(self.tmp, "att", "hubd.sock")  # the attacker's own folder
        os.rename(os.path.join(run, "hubd.sock"), elsewhere)
        # (The fake daemon never answers: 2 s, not the default 30, to say so.)
        r = self.run_ctl(dict(env, HUBD_ANSWER_TIMEOUT="2"), "--socket", elsewhere, "status",
                         pre=as_uid(NOBODY))
        with open(record, "rb") as f:
            self.assertIn(b"HELLO", f.read(), r)

    def test_a_planted_tmp_folder_or_symlink_is_refused(self):
        d = "/tmp/hubd-%d" % NOBODY
        if os.path.lexists(d):
            self.skipTest(d + " exists already")
        att = self.own_dir("att", ATTACKER, 0o755)
        record = self.plant(os.path.join(att, "hubd.sock"))
        env = self.victim_env(NOBODY, None)
        del env["XDG_RUNTIME_DIR"]
        for plant in ("symlink", "folder"):
            if plant == "symlink":
                os.symlink(att, d)
            else:
                os.mkdir(d, 0o700)
                os.chown(d, ATTACKER, ATTACKER)
            try:
                r = self.fetch_with_token(env, NOBODY)
            finally:
                os.rmdir(d) if plant == "folder" else os.unlink(d)
            self.assertNotEqual(r.returncode, 0, r)
            self.assertIn("%s is not a private folder of yours" % d, r.stderr)
            self.assertIn("a symlink" if plant == "symlink" else "owner uid %d" % ATTACKER,
                          r.stderr)
        with open(record, "rb") as f:
            self.assertEqual(f.read(), b"")

    def test_the_python_client_refuses_them_too(self):
        att = self.own_dir("att", ATTACKER, 0o755)
        with open(os.path.join(att, "secret"), "w") as f:
            f.write("the attacker's bytes")
        record = self.plant(os.path.join(att, "hubd.sock"), "done", os.path.join(att, "secret"))
        # Another user's XDG_RUNTIME_DIR, with their daemon in it.
        r = self.py_fetch(self.victim_env(NOBODY, att), NOBODY)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("HubdError no_daemon XDG_RUNTIME_DIR=%s is not a private folder of yours"
                      % att, r.stderr)
        # The user's own folder, another user's daemon in it.
        run = self.own_dir("victim-run", NOBODY)
        os.rename(os.path.join(att, "hubd.sock"), os.path.join(run, "hubd.sock"))
        env = self.victim_env(NOBODY, run)
        r = self.py_fetch(env, NOBODY)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("is run by uid %d (pid" % ATTACKER, r.stderr)
        # Even named by HUBD_SOCKET: the per-user path gets hubctl's check.
        r = self.py_fetch(dict(env, HUBD_SOCKET=os.path.join(run, "hubd.sock")), NOBODY)
        self.assertEqual(r.returncode, 3, r)
        self.assertIn("is run by uid %d (pid" % ATTACKER, r.stderr)
        with open(record, "rb") as f:
            self.assertEqual(f.read(), b"")


class RuntimeDirTest(PlantCase):
    """$XDG_RUNTIME_DIR as su, sudo -E and typing leave it: unreachable,
    root's, spelled with a trailing slash; the per-user socket named in
    another spelling."""

    def one_error(self, r):
        """hubctl failed with one message (no second, wrong one after it)."""
        self.assertNotEqual(r.returncode, 0, r)
        self.assertNotIn("cannot connect to hubd", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_a_runtime_dir_that_cannot_be_checked_is_one_clear_error(self):
        locked = self.own_dir("locked", 0, 0o700)
        with open(os.path.join(self.tmp, "plain"), "w"):
            pass
        os.symlink("loop", os.path.join(self.tmp, "loop"))
        for run, call, err in (
                (os.path.join(locked, "sub"), "make", "mkdir: Permission denied"),
                (os.path.join(self.tmp, "plain", "sub"), "make", "mkdir: Not a directory"),
                (os.path.join(self.tmp, "loop"), "check",
                 "stat: Too many levels of symbolic links")):
            env = self.victim_env(NOBODY, run)
            r = self.run_ctl(env, "fetch", self.origin.url("/files/a"), pre=as_uid(NOBODY))
            self.one_error(r)
            self.assertIn("cannot %s the per-user daemon's folder XDG_RUNTIME_DIR=%s (%s)"
                          % (call, run, err), r.stderr)
            self.assertIn("unset XDG_RUNTIME_DIR or point it at a folder of your own", r.stderr)
            r = self.py_fetch(env, NOBODY)
            self.assertEqual(r.returncode, 3, r)
            self.assertIn("HubdError no_daemon cannot check XDG_RUNTIME_DIR=%s: %s"
                          % (run, err.split(": ")[1]), r.stderr)

    def test_a_root_runtime_dir_the_user_cannot_write_is_refused(self):
        # `su user` from root keeps XDG_RUNTIME_DIR=/run/user/0.
        for mode in (0o700, 0o755):
            run = self.own_dir("root-run-%o" % mode, 0, mode)
            self.kill_daemons_later(os.path.join(run, "hubd.sock"))  # if one were started
            env = self.victim_env(NOBODY, run)
            for args in (["fetch", self.origin.url("/files/a")], ["start"]):
                r = self.run_ctl(env, *args, pre=as_uid(NOBODY))
                self.one_error(r)
                self.assertIn("XDG_RUNTIME_DIR=%s is not writable by you (owner uid 0, mode %04o; "
                              "you are uid %d)" % (run, mode, NOBODY), r.stderr)
                self.assertIn("unset XDG_RUNTIME_DIR or point it at a folder of your own",
                              r.stderr)
            r = self.py_fetch(env, NOBODY)
            self.assertEqual(r.returncode, 3, r)
            self.assertIn("HubdError no_daemon XDG_RUNTIME_DIR=%s is not writable by you" % run,
                          r.stderr)
            self.assertEqual(os.listdir(run), [])
            self.assertEqual(live_daemons(os.path.join(run, "hubd.sock")), [])

    def test_a_trailing_slash_names_the_same_folder(self):
        # The user's own folder, 0755: the rule for $XDG_RUNTIME_DIR holds
        # for both clients, whatever its spelling.
        run = self.own_dir("run-slash", NOBODY, 0o755)
        sock = os.path.join(run, "hubd.sock")
        self.kill_daemons_later(sock)
        self.kill_daemons_later(run + "//hubd.sock")
        digest = self.make_file("a", 4000)
        env = self.victim_env(NOBODY, run + "//")
        r = self.run_ctl(env, "start", pre=as_uid(NOBODY))
        self.assertEqual(r.returncode, 0, r)
        self.assertEqual(r.stdout.strip(), sock)
        self.assertIn("started a per-user hubd (pid", r.stderr)
        self.assertIn(" on %s\n" % sock, r.stderr)
        r = self.py_fetch(env, NOBODY)
        self.assertEqual(r.returncode, 0, r)
        self.assertIn(digest, r.stdout)
        self.assertEqual(self.run_ctl(env, "stop", pre=as_uid(NOBODY)).returncode, 0)
        self.assertEqual(live_daemons(sock), [])

    def test_the_per_user_socket_in_any_spelling_is_checked(self):
        record, run = self.attackers_daemon_in_victims_folder()
        os.symlink(run, os.path.join(self.tmp, "run-link"))
        os.symlink(os.path.join(run, "hubd.sock"), os.path.join(self.tmp, "sock-link"))
        spellings = [(run, run + "//hubd.sock", None), (run, run + "/./hubd.sock", None),
                     (run, os.path.join(self.tmp, "run-link", "hubd.sock"), None),
                     (run, os.path.join(self.tmp, "sock-link"), None),
                     (run, "hubd.sock", run), (run + "/", os.path.join(run, "hubd.sock"), None)]
        for xdg, named, cwd in spellings:
            env = dict(self.victim_env(NOBODY, xdg), HUBD_SOCKET=named)
            r = self.run_ctl(env, "fetch", "-H", "Authorization: Bearer SECRET-TOKEN",
                             self.origin.url("/files/a"), pre=as_uid(NOBODY), cwd=cwd)
            self.assertNotEqual(r.returncode, 0, (named, r))
            self.assertIn("is run by uid %d" % ATTACKER, r.stderr, named)
            r = self.py_fetch(env, NOBODY, cwd=cwd)
            self.assertEqual(r.returncode, 3, (named, r))
            self.assertIn("is run by uid %d (pid" % ATTACKER, r.stderr, named)
        with open(record, "rb") as f:
            self.assertEqual(f.read(), b"")

    def test_a_uid_past_2_31_is_read_unsigned(self):
        import sys
        sys.path.insert(0, PYCLIENT)
        self.addCleanup(sys.path.remove, PYCLIENT)
        from hubd import _trust
        big = 2 ** 31 + 7

        class Sock:
            def getsockopt(self, *args):
                return struct.pack("iII", 4242, big, big)

        path = os.path.join(self.tmp, "none.sock")
        with mock.patch("os.getuid", return_value=big):
            self.assertIsNone(_trust.peer_refusal(Sock(), path, path))
        with mock.patch("os.getuid", return_value=1000):
            self.assertIn("is run by uid %d (pid 4242)" % big,
                          _trust.peer_refusal(Sock(), path, path))


class HostileDaemonPythonTest(PlantCase):
    """The Python client against a daemon that lies ($HUBD_SOCKET names it:
    the user's choice, so no peer check; what it sends is checked)."""

    def setUp(self):
        super().setUp()
        import importlib
        import sys
        sys.path.insert(0, PYCLIENT)
        self.addCleanup(sys.path.remove, PYCLIENT)
        self.hubd_mod = importlib.import_module("hubd")

    def fetch_from(self, how, extra=None, env=None, call="download_url_to_file"):
        """Runs the call against a fake daemon (run by us); returns the
        HubdError it raised and the seconds it took."""
        sock = os.path.join(self.tmp, "fake-%s-%s.sock" % (how, call))
        self.plant(sock, how, extra, uid=0)
        dst = os.path.join(self.tmp, "dst-" + how)
        hubd = self.hubd_mod
        t0 = time.monotonic()
        with mock.patch.dict(os.environ, dict(env or {}, HUBD_SOCKET=sock)):
            with self.assertRaises(hubd.HubdError) as cm:
                if call == "fetch":
                    hubd.fetch(self.origin.url("/files/a"), progress=False)
                else:
                    hubd.download_url_to_file(self.origin.url("/files/a"), dst, progress=False)
        self.assertFalse(os.path.exists(dst))
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith("dst-")], [])
        return cm.exception, time.monotonic() - t0

    def test_a_descriptor_that_is_not_the_announced_file_is_refused(self):
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        short = os.path.join(self.tmp, "short")
        with open(short, "wb") as f:
            f.write(b"x" * 1000)
        for how, extra, kind in (("fifo", fifo, "not a regular file"),
                                 ("dir", None, "not a regular file"),
                                 ("socket", None, "not a regular file"),
                                 ("short", short, "a regular file of 1000 bytes")):
            for call in ("download_url_to_file", "fetch"):
                e, took = self.fetch_from(how, extra, call=call)
                self.assertEqual(e.code, "protocol", (how, e))
                self.assertIn("hubd passed a descriptor that is " + kind, str(e))
                self.assertLess(took, 10 * SLOW)

    def test_garbage_huge_and_silent_answers_end_in_clear_errors(self):
        e, took = self.fetch_from("garbage")
        self.assertEqual(e.code, "protocol", e)
        self.assertIn("unreadable line from hubd", str(e))
        e, took = self.fetch_from("huge")
        self.assertEqual(e.code, "protocol", e)
        self.assertIn("hubd sent a line longer than 16384 bytes", str(e))
        e, took = self.fetch_from("silent", env={"HUBD_ANSWER_TIMEOUT": "1"})
        self.assertEqual(e.code, "no_daemon", e)
        self.assertIn("took the connection but did not answer within 1 s", str(e))
        self.assertLess(took, 10 * SLOW)

    def test_hf_refuses_a_fifo_for_a_listing_or_a_file(self):
        from test_hf_download import FakeHubd
        hubd = self.hubd_mod
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)

        class OddFd(FakeHubd):
            """Passes the FIFO instead of the bytes with the verb `odd`."""
            odd = None

            def send(self, c, line, data=None):
                if data is None or not line.startswith(self.odd):
                    return FakeHubd.send(self, c, line, data)
                fd = os.open(fifo, os.O_RDWR)
                socket.send_fds(c, [line.encode() + b"\n"], [fd])
                os.close(fd)

        for odd, what in (("REPO", "a REPO descriptor that is not a regular file"),
                          ("DONE", "a descriptor that is not a regular file")):
            fake = OddFd(os.path.join(self.tmp, "hf-%s.sock" % odd), ("HFREPO", "FETCH"),
                         {"a.txt": b"alpha\n"})
            fake.odd = odd
            self.addCleanup(fake.stop)
            cache = os.path.join(self.tmp, "hf-cache-" + odd)
            t0 = time.monotonic()
            with mock.patch.dict(os.environ, {"HUBD_SOCKET": fake.path}):
                with self.assertRaises(hubd.HubdError) as cm:
                    hubd.snapshot_download("org/old", cache_dir=cache)
            self.assertEqual(cm.exception.code, "protocol", cm.exception)
            self.assertIn("hubd passed " + what, str(cm.exception))
            self.assertLess(time.monotonic() - t0, 10 * SLOW)
            blobs = os.path.join(cache, "models--org--old", "blobs")
            self.assertEqual(os.listdir(blobs) if os.path.isdir(blobs) else [], [])

    def test_a_socket_path_that_is_no_socket(self):
        hubd = self.hubd_mod
        plain = os.path.join(self.tmp, "plain")
        open(plain, "w").close()
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        for path in (plain, fifo, os.path.join(self.tmp, "none")):
            t0 = time.monotonic()
            with mock.patch.dict(os.environ, {"HUBD_SOCKET": path}):
                with self.assertRaises(hubd.HubdError) as cm:
                    hubd.fetch(self.origin.url("/files/a"), progress=False)
            self.assertEqual(cm.exception.code, "no_daemon")
            self.assertIn("no hubd answers on %s ($HUBD_SOCKET)" % path, str(cm.exception))
            self.assertLess(time.monotonic() - t0, 10 * SLOW)


if __name__ == "__main__":
    unittest.main()
