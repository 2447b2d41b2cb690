"""The connection to hubd: which socket, whether its peer may be sent to,
and a line reader that keeps the descriptors passed with the lines.

Contract: ``_connect()`` returns a ``_Conn`` on the first socket that
answers, in the order the package's doc gives ($HUBD_SOCKET alone; else the
system daemon's; else the per-user one, started with ``hubctl start`` when
nothing answers and the per-user daemon is not turned off), or raises
HubdError ``no_daemon`` saying what was tried and why each failed. A
``_Conn`` is one session: ``send(bytes)``, ``readline()`` (a line without
its end, None at the end of the stream; HubdError ``no_daemon`` when the
daemon takes the connection and never answers within $HUBD_ANSWER_TIMEOUT
seconds, ``protocol`` for a line past LINE_MAX or dropped descriptors),
``take_fd()`` (the next passed descriptor, the caller's to close, or None)
and ``close()`` (closes every descriptor not taken). Whom a request may go
to and which descriptor may be read is hubd/_trust.py's rule, as hubctl's.

``hubd.SYSTEM_SOCKET`` and ``hubd.CLIENT_CONF`` stay the package's (a
caller or a test may set them): they are read there at each call.
"""

import collections
import configparser
import errno
import grp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import warnings

from . import _trust
from ._codec import LINE_MAX
from ._errors import HubdError, HubdFallbackWarning

_FDS_PER_READ = 16        # room for descriptors in every recvmsg
_READ_SIZE = 65536
_CONNECT_TIMEOUT = 5.0    # a blocking connect waits while the backlog is full
_START_TIMEOUT = 60.0     # for `hubctl start`
_ANSWER_TIMEOUT = 30.0    # from connect to the daemon's first line


class _Conn:
    """A session: a line reader over recvmsg that keeps the descriptors passed
    with SCM_RIGHTS in a queue, in arrival order."""

    def __init__(self, sock, path):
        self.sock = sock
        self.path = path
        self.buf = bytearray()
        self.fds = collections.deque()
        self.eof = False
        self.answered = False  # a first line came: no timeout from then on
        self.timeout = _answer_timeout()
        sock.settimeout(self.timeout)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            if self.answered:
                raise
            # Closed before a word (systemd gave up starting hubd): the
            # read that follows sees the end and says so, as hubctl does.

    def readline(self):
        """The next line without its '\\n' (and a '\\r' before it), or None
        at end of stream."""
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 1]
                if not self.answered:
                    self.answered = True
                    self.sock.settimeout(None)
                return line[:-1] if line.endswith(b"\r") else line
            if self.eof:
                if not self.answered:
                    raise HubdError("no_daemon", "hubd at %s closed the connection before "
                                    "answering%s" % (self.path, _service_hint(self.path)))
                return None
            if len(self.buf) > LINE_MAX:
                raise HubdError("protocol", "hubd sent a line longer than %d bytes" % LINE_MAX)
            self._recv()

    def _recv(self):
        # MSG_CMSG_CLOEXEC: a descriptor must not leak into a child that
        # another thread forks and execs meanwhile.
        cloexec = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
        try:
            data, anc, flags, _ = self.sock.recvmsg(
                _READ_SIZE, socket.CMSG_SPACE(_FDS_PER_READ * 4), cloexec)
        except socket.timeout:
            raise HubdError("no_daemon", "hubd at %s took the connection but did not answer "
                            "within %g s%s" % (self.path, self.timeout, _service_hint(self.path)))
        except ConnectionResetError:  # closed with our request unread: an end all the same
            data, anc, flags = b"", [], 0
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                n = len(cdata) // 4
                for fd in memoryview(cdata)[:n * 4].cast("i"):
                    self.fds.append(fd)
                    if not cloexec:
                        os.set_inheritable(fd, False)
        if flags & socket.MSG_CTRUNC:
            raise HubdError("protocol", "descriptors from hubd were dropped (control data truncated)")
        if not data:
            self.eof = True
        self.buf += data

    def take_fd(self):
        return self.fds.popleft() if self.fds else None

    def close(self):
        while self.fds:
            os.close(self.fds.popleft())
        self.sock.close()


def _user_socket():
    """The per-user daemon's socket: $XDG_RUNTIME_DIR/hubd.sock, else
    /tmp/hubd-<uid>/hubd.sock."""
    return _trust.user_socket()


def _open_conn(sock, path):
    """A _Conn over sock, once its peer may get our requests (else closed,
    HubdError no_daemon; _trust.py has the rule)."""
    why = _trust.peer_refusal(sock, path, _user_socket())
    if why:
        sock.close()
        raise HubdError("no_daemon", why)
    return _Conn(sock, path)


def _check_blob_fd(fd, size, url):
    """HubdError protocol unless fd is a regular file of size bytes."""
    why = _trust.blob_fd_refusal(fd, size)
    if why:
        raise HubdError("protocol", why, url)


def _try_connect(path):
    """A connected socket, or the OSError that connecting raised."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(_CONNECT_TIMEOUT)
        s.connect(path)
        s.settimeout(None)
        return s
    except OSError as e:
        s.close()
        if isinstance(e, socket.timeout):
            return OSError(errno.ETIMEDOUT, "connect timed out")
        return e


def _why(e):
    return e.strerror or str(e)


def _answer_timeout():
    try:
        t = float(os.environ.get("HUBD_ANSWER_TIMEOUT", ""))
    except ValueError:
        t = 0
    return t if t > 0 else _ANSWER_TIMEOUT


def _service_hint(path):
    """Where to look when the system daemon takes a connection and does not
    answer (hubctl says the same)."""
    if path != _system_socket():
        return ""
    return ("; the system hubd may be failing to start: see `systemctl status hubd` and "
            "`journalctl -u hubd` (`hubctl doctor` checks the rest)")


def _system_socket():
    from . import SYSTEM_SOCKET  # the package's, as it is now (see the module doc)
    return os.environ.get("HUBD_SYSTEM_SOCKET") or SYSTEM_SOCKET


def _user_daemon_off():
    """Why the per-user daemon is turned off, or None when it may be used:
    HUBD_NO_USER_DAEMON in the environment, or user_daemon = no in the
    machine's client.conf (keys before any section, as hubctl reads it; a
    bad value counts as no)."""
    env = os.environ.get("HUBD_NO_USER_DAEMON", "")
    if env and env != "0":
        return "HUBD_NO_USER_DAEMON=%s in the environment" % env
    from . import CLIENT_CONF  # the package's, as it is now (see the module doc)
    path = os.environ.get("HUBD_CLIENT_CONF") or CLIENT_CONF
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        sys.stderr.write("hubd: cannot read %s: %s\n" % (path, _why(e)))
        return None
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cp.read_string("[_top]\n" + text, source=path)
    except configparser.Error as e:
        sys.stderr.write("hubd: %s: %s (ignored)\n" % (path, e))
        return None
    value = cp.get("_top", "user_daemon", fallback="yes").strip().lower()
    if value in ("yes", "true", "on", "1"):
        return None
    if value not in ("no", "false", "off", "0"):
        sys.stderr.write("hubd: %s: bad value '%s' for user_daemon (yes or no): taken as no\n"
                         % (path, value))
    return "user_daemon = no in %s" % path


def _system_unit_installed():
    """Whether this machine has a system hubd: its socket unit is installed
    ($HUBD_SYSTEM_UNIT names the file to look for instead; empty: none)."""
    env = os.environ.get("HUBD_SYSTEM_UNIT")
    if env is not None:
        return bool(env) and os.path.exists(env)
    return any(os.path.exists(d + "/hubd.socket") for d in
               ("/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"))


def _refused_hint(path):
    """hubctl's words for a system socket that refused the user."""
    try:
        group = grp.getgrgid(os.stat(path).st_gid).gr_name
    except (OSError, KeyError):
        group = None
    try:
        import pwd
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = "$USER"
    if group and group != "root":
        return "ask an admin to run `adduser %s %s`, then log in again" % (user, group)
    return "ask an admin to let you use it (socket_group in hubd.conf)"


def _hubctl_start():
    """Runs `hubctl start` and returns the socket path it prints, or raises
    HubdError(no_daemon) saying why not."""
    exe = os.environ.get("HUBCTL") or shutil.which("hubctl")
    if not exe:
        raise HubdError("no_daemon", "cannot start one: hubctl is not on PATH (set $HUBCTL to it)")
    # Output goes to temporary files, not pipes: the daemon that hubctl
    # starts might keep a copy of hubctl's stdout open, and reading a pipe to
    # its end would then wait for the daemon to exit.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([exe, "start"], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, close_fds=True)
        except OSError as e:
            raise HubdError("no_daemon", "cannot run %s start: %s" % (exe, _why(e)))
        try:
            rc = proc.wait(_START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise HubdError("no_daemon", "%s start did not finish in %d s" % (exe, _START_TIMEOUT))
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "surrogateescape").strip()
        stderr = err.read().decode("utf-8", "replace").strip()
    if rc != 0:
        raise HubdError("no_daemon", "%s start failed (exit status %d)%s"
                        % (exe, rc, ": " + stderr if stderr else ""))
    if not stdout or "\n" in stdout:
        raise HubdError("no_daemon", "%s start printed %r, not one socket path" % (exe, stdout))
    return stdout


def _connect():
    """Connects to hubd. Returns a _Conn. The order is in the module doc."""
    env = os.environ.get("HUBD_SOCKET")
    if env:
        s = _try_connect(env)
        if isinstance(s, OSError):
            raise HubdError("no_daemon", "no hubd answers on %s ($HUBD_SOCKET): %s" % (env, _why(s)))
        return _open_conn(s, env)
    tried = []
    system = _system_socket()
    s = _try_connect(system)
    if not isinstance(s, OSError):
        return _Conn(s, system)
    tried.append("%s (%s)" % (system, _why(s)))
    refused = ""
    if isinstance(s, PermissionError):
        refused = "the system hubd at %s refused you (permission denied); %s" % (
            system, _refused_hint(system))
    off = _user_daemon_off()
    if off:
        raise HubdError("no_daemon", "%s; no per-user hubd either: it is turned off (%s)"
                        % (refused or "no system hubd answers at " + tried[0], off))
    if refused:
        # As hubctl says it: the per-user daemon has a cache of its own, in
        # the home folder, and downloads again what the machine has.
        warnings.warn(refused + "; meanwhile, a per-user hubd with its own cache",
                      HubdFallbackWarning, stacklevel=4)
    path = _user_socket()
    why = _trust.dir_refusal(*_trust.user_dir())
    if why:
        raise HubdError("no_daemon", why)
    s = _try_connect(path)
    if not isinstance(s, OSError):
        return _open_conn(s, path)
    tried.append("%s (%s)" % (path, _why(s)))
    prefix = "no hubd answers on " + ", ".join(tried)
    if not refused and _system_unit_installed():
        # The machine's hubd failed or was stopped: a per-user one in its
        # place would fill the home folder unnoticed (hubctl says the same).
        raise HubdError("no_daemon", "this machine's hubd (hubd.socket) does not answer at %s%s; "
                        "no per-user hubd is started in its place (to use one meanwhile: "
                        "export HUBD_SOCKET=\"$(hubctl start)\")"
                        % (tried[0], _service_hint(system)))
    try:
        path = _hubctl_start()
    except HubdError as e:
        raise HubdError("no_daemon", prefix + "; " + e.msg)
    s = _try_connect(path)
    if isinstance(s, OSError):
        raise HubdError("no_daemon", "%s; hubctl start said %s, which does not answer either: %s"
                        % (prefix, path, _why(s)))
    return _open_conn(s, path)

