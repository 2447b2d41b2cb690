"""Python client for hubd, the per-machine download cache (standard library only).

    import hubd
    path = hubd.fetch("https://example.org/model.safetensors")   # the cached blob
    hubd.download_url_to_file(url, "model.pth", hash_prefix="5c106cde")
    hubd.patch_torch_hub()      # torch.hub's loaders now download through hubd
    hubd.cancel(url)            # stop a download of yours (for all its waiters)
    hubd.hf_hub_download("org/name", "config.json")   # huggingface_hub's, through hubd
    hubd.snapshot_download("org/name", allow_patterns="*.json")

``hf_hub_download`` and ``snapshot_download`` (in hubd/hf.py, whose module
doc says how) take huggingface_hub's arguments, return its paths and write
its cache layout, every byte through hubd; they raise :class:`HubdError` too,
as huggingface_hub's exception classes (``RepositoryNotFoundError``,
``EntryNotFoundError``, ``LocalEntryNotFoundError``... hubd/_hferrors.py).

It speaks the line protocol of docs/PROTOCOL.md over hubd's Unix socket: one
connection per call, ``HELLO``, then one ``FETCH``, then the replies until
``DONE`` (which carries an open read-only descriptor of the blob) or ``ERR``.

Errors: every failure that hubd reports, and every failure to reach it, raises
:class:`HubdError`, a subclass of :class:`OSError` (like urllib's
``URLError``, so code that already catches network errors from
``torch.hub.download_url_to_file`` with ``except OSError`` keeps working).
It carries ``.code`` (the protocol's error code, e.g. ``http_404``,
``hash_mismatch``, or one of the client-side codes below), ``.msg`` and
``.url``. Client-side codes:

- ``no_daemon``: no hubd answers on any socket (and auto-start failed).
- ``bad_request``: the request was refused before it was sent (a malformed
  ``sha256``, a URL or header that cannot go on a protocol line); the daemon
  uses the same code for the same mistakes.
- ``disconnected``: hubd closed the connection before the final reply.
- ``protocol``: hubd's reply made no sense to this client.
- ``offline_not_cached``: ``HF_HUB_OFFLINE`` is set and the file or snapshot
  asked of ``hf_hub_download`` or ``snapshot_download`` is not on disk.
- ``unsafe_folder``: a folder below the HF cache folder or ``local_dir``
  named is a symbolic link, or not the running user's: ``hf_hub_download``
  and ``snapshot_download`` write nothing through it (hubd/hf.py).

Which socket (see :func:`_connect`): ``$HUBD_SOCKET`` if set (and nothing
else); else the system daemon's ``/run/hubd/hubd.sock`` if it answers; else
the per-user socket, ``$XDG_RUNTIME_DIR/hubd.sock`` or
``/tmp/hubd-<uid>/hubd.sock``; if that does not answer either, ``hubctl
start`` (``$HUBCTL``, else ``hubctl`` on PATH) starts a per-user daemon and
prints its socket. A system daemon that refuses the user is named on
stderr (a :class:`HubdFallbackWarning`, with the group to join) before the
fallback, as hubctl does. The fallback is turned off by
``HUBD_NO_USER_DAEMON=1`` in the environment or ``user_daemon = no`` in
``/etc/hubd/client.conf`` (``$HUBD_CLIENT_CONF``), the file hubctl reads:
then ``no_daemon`` is raised instead, and nothing is written to the home
folder. As hubctl, the client sends nothing to a per-user socket whose
folder, or whose daemon (``SO_PEERCRED``), is another user's (root's
counts as the user's): ``no_daemon`` says who owns what (hubd/_trust.py).
A descriptor passed with ``DONE`` must be a regular file of the announced
size, else ``protocol``.

Time: the daemon's first answer must come within ``$HUBD_ANSWER_TIMEOUT``
seconds (default 30): a system daemon that systemd cannot start leaves the
connection waiting in the socket's backlog. ``no_daemon`` then says where to
look (``systemctl status hubd``, ``journalctl -u hubd``). After the first
answer there is no timeout: a download may take hours.

Progress: with ``progress=True`` a bar is drawn on stderr whether or not
stderr is a terminal, as torch.hub does (through ``tqdm`` when it is
importable, else a one-line text bar redrawn with ``\\r`` at most 10 times a
second). ``progress=False`` prints nothing.
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
import time
import urllib.parse
import uuid
import warnings

from . import _trust

__all__ = ["HubdError", "HubdFallbackWarning", "fetch", "cancel", "download_url_to_file",
           "patch_torch_hub", "hf_hub_download", "snapshot_download", "HfHubHTTPError",
           "RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError",
           "EntryNotFoundError", "RemoteEntryNotFoundError", "LocalEntryNotFoundError",
           "HFValidationError", "DryRunError", "DryRunFileInfo"]
__version__ = "0.1.0"

SYSTEM_SOCKET = "/run/hubd/hubd.sock"
CLIENT_CONF = "/etc/hubd/client.conf"

# Protocol limits (docs/PROTOCOL.md). Checking them before sending means the
# daemon never has to answer an ERR without an id for our FETCH line.
LINE_MAX = 16384          # bytes, newline included
URL_MAX = 8192            # bytes of the decoded URL
FIELDS_MAX = 32           # key=value fields per line
FETCH_ID = "py1"          # one FETCH per connection, so any id will do

_FDS_PER_READ = 16        # room for descriptors in every recvmsg
_READ_SIZE = 65536
_CONNECT_TIMEOUT = 5.0    # a blocking connect waits while the backlog is full
_START_TIMEOUT = 60.0     # for `hubctl start`
_ANSWER_TIMEOUT = 30.0    # from connect to the daemon's first line
_COPY_CHUNK = 1 << 20

# Used when an ERR line has no msg (it would not fit on a line).
_CODE_TEXT = {
    "bad_request": "the request was malformed",
    "line_too_long": "the request line was too long",
    "unknown_verb": "unknown verb",
    "proto_version": "unsupported protocol version",
    "bad_url": "the URL does not parse",
    "unsupported_scheme": "the URL's scheme is neither http nor https",
    "dns": "the host name did not resolve",
    "connect": "no address of the host accepted a connection",
    "timeout": "connect or idle timeout expired",
    "redirect": "too many or unusable redirects",
    "tls_verify": "the server's certificate failed verification",
    "tls": "the TLS handshake or a TLS record failed",
    "http_parse": "the origin's response did not parse as HTTP/1.1",
    "truncated": "the connection ended before the body was complete",
    "hash_mismatch": "the SHA-256 of the download differs from the expected one",
    "io": "the cache could not be written",
    "no_space": "the file system of hubd's cache is full",
    "shutting_down": "the daemon is stopping",
    "internal": "internal error in hubd (see its log)",
}


# Said with every no_space: whose disk is full, and who can free it.
_NO_SPACE_NOTE = ("this is hubd's cache, not your disk or output folder: ask hubd's admin to "
                  "free room: hubctl gc, max_cache_size, min_free_space")


class HubdFallbackWarning(RuntimeWarning):
    """The system daemon refused this user, and a per-user one (with its own
    cache, in the home folder) is used instead."""


class HubdError(OSError):
    """A fetch that hubd refused or failed, or a daemon that could not be
    reached. ``code`` is the machine-readable reason (see the module doc),
    ``msg`` the human one, ``url`` the URL asked for (or None)."""

    def __init__(self, code, msg, url=None):
        if not msg:
            msg = _CODE_TEXT.get(code, "")
            if not msg and code.startswith("http_"):
                msg = "the origin answered HTTP " + code[5:]
        if code == "no_space" and _NO_SPACE_NOTE not in msg:
            # The full disk is not the caller's, nor theirs to clean.
            msg = "%s (%s)" % (msg, _NO_SPACE_NOTE) if msg else _NO_SPACE_NOTE
        self.code = code
        self.msg = msg
        self.url = url
        text = "%s: %s" % (code, msg)
        if url is not None and url not in msg:
            text += " (url: %s)" % url
        # One argument: OSError would otherwise read (code, msg) as
        # (errno, strerror).
        super().__init__(text)

    def __str__(self):
        return self.args[0]


# ---- the line codec (docs/PROTOCOL.md, "Framing") ---------------------------

def _encode_value(value):
    """Percent-encodes what PROTOCOL.md requires: space, control bytes, DEL,
    '%' and non-ASCII. Everything else, '=' included, goes as it is."""
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    if b"\0" in value:
        raise ValueError("a NUL byte cannot be sent (values are C strings)")
    out = []
    for b in value:
        if b <= 0x20 or b >= 0x7F or b == 0x25:
            out.append("%%%02X" % b)
        else:
            out.append(chr(b))
    return "".join(out)


def _parse_line(line):
    """b'VERB k=v k=v' -> (verb, {key: value}); values decoded to str (bytes
    that are not UTF-8 become surrogates, as os.fsdecode does, so a path
    round-trips). The first occurrence of a repeated key wins. Raises
    ValueError on a line that does not parse."""
    parts = line.split()
    if not parts:
        raise ValueError("empty line")
    verb = parts[0].decode("ascii")
    fields = {}
    for p in parts[1:]:
        key, eq, value = p.partition(b"=")
        if not eq or not key:
            raise ValueError("field without key=: %r" % p)
        k = key.decode("ascii")
        if k not in fields:
            fields[k] = urllib.parse.unquote_to_bytes(value).decode("utf-8", "surrogateescape")
    return verb, fields


def _build_line(verb, fields):
    """fields: a list of (key, value) pairs, repeated keys allowed."""
    line = " ".join([verb] + ["%s=%s" % (k, _encode_value(v)) for k, v in fields])
    return (line + "\n").encode("ascii")


# ---- connection --------------------------------------------------------------

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
    return os.environ.get("HUBD_SYSTEM_SOCKET") or SYSTEM_SOCKET


def _user_daemon_off():
    """Why the per-user daemon is turned off, or None when it may be used:
    HUBD_NO_USER_DAEMON in the environment, or user_daemon = no in the
    machine's client.conf (keys before any section, as hubctl reads it; a
    bad value counts as no)."""
    env = os.environ.get("HUBD_NO_USER_DAEMON", "")
    if env and env != "0":
        return "HUBD_NO_USER_DAEMON=%s in the environment" % env
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


# ---- progress ----------------------------------------------------------------

def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


class _TextBar:
    """`name: [#####.....]  12.0 MiB / 24.0 MiB  50%  30.1 MiB/s` on one
    line of stderr, redrawn with '\\r' at most every 0.1 s."""

    INTERVAL = 0.1

    def __init__(self, name, stream):
        self.name = name
        self.stream = stream
        self.last = None
        self.width = 0

    def _draw(self, text):
        pad = " " * max(0, self.width - len(text))  # wipe a longer previous line
        self.width = len(text)
        self.stream.write("\r" + text + pad)
        self.stream.flush()

    def update(self, done, total, rate):
        now = time.monotonic()
        if self.last is not None and now - self.last < self.INTERVAL:
            return
        self.last = now
        if total:
            frac = min(1.0, done / total)
            filled = int(frac * 20)
            text = "%s: [%s%s] %s / %s %3d%% %s/s" % (
                self.name, "#" * filled, "." * (20 - filled), _fmt_bytes(done),
                _fmt_bytes(total), int(frac * 100), _fmt_bytes(rate))
        else:
            text = "%s: %s %s/s" % (self.name, _fmt_bytes(done), _fmt_bytes(rate))
        self._draw(text)

    def finish(self, size, source, elapsed, seen=None):
        """seen: the bytes that arrived while this request waited (an
        attacher joined a download part way through): its average rate."""
        if source == "hit":
            how = "from the cache"
        else:
            got = size if seen is None else seen
            how = "%s/s" % _fmt_bytes(got / elapsed if elapsed > 0 else 0)
        self._draw("%s: [%s] %s / %s 100%% %s" % (self.name, "#" * 20, _fmt_bytes(size),
                                                  _fmt_bytes(size), how))
        self.stream.write("\n")
        self.stream.flush()

    def fail(self):
        if self.last is not None:  # end our line so the error starts on its own
            self.stream.write("\n")
            self.stream.flush()


class _TqdmBar:
    """The same through tqdm, which does its own rate limiting."""

    def __init__(self, tqdm, name, stream):
        self.bar = tqdm(total=None, desc=name, unit="B", unit_scale=True, unit_divisor=1024,
                        file=stream)

    def _to(self, done, total):
        if total is not None and self.bar.total != total:
            self.bar.total = total
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def update(self, done, total, rate):
        if self.bar.n == 0 and done and hasattr(self.bar, "initial"):
            # Joined part way: what came before is not this bar's rate.
            self.bar.n = self.bar.initial = self.bar.last_print_n = done
        self._to(done, total)

    def finish(self, size, source, elapsed, seen=None):
        self._to(size, size)
        self.bar.close()

    def fail(self):
        self.bar.close()


def _make_bar(url, stream):
    name = os.path.basename(urllib.parse.urlsplit(url).path) or "hubd"
    if len(name) > 40:
        name = name[:37] + "..."
    try:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            from tqdm import tqdm
    except ImportError:
        return _TextBar(name, stream)
    return _TqdmBar(tqdm, name, stream)


# ---- FETCH -------------------------------------------------------------------

_Done = collections.namedtuple("_Done", "path sha256 size source fd")


def _fetch_line(url, sha256, headers, refresh=False, rid=FETCH_ID):
    if not isinstance(url, str):
        raise TypeError("url must be a str, not %s" % type(url).__name__)
    try:
        if len(url.encode("utf-8", "surrogateescape")) > URL_MAX:
            raise HubdError("bad_request", "the URL is longer than %d bytes" % URL_MAX, url)
        fields = [("id", rid), ("url", url)]
        if sha256 is not None:
            if (not isinstance(sha256, str) or len(sha256) != 64
                    or any(c not in "0123456789abcdefABCDEF" for c in sha256)):
                raise HubdError("bad_request", "sha256 must be 64 hex digits, not %r" % (sha256,), url)
            fields.append(("sha256", sha256.lower()))
        if refresh:
            fields.append(("refresh", "1"))
        for name, value in (headers or {}).items():
            name, value = str(name), str(value)
            # A header must stay one header: no CR, LF or NUL anywhere, and a
            # name that is a plain token.
            if (not name or any(c in name for c in ":\r\n\0 \t")
                    or any(c in value for c in "\r\n\0")):
                # The value may be a token: never in a message.
                raise HubdError("bad_request", "malformed header %r (name or value)" % (name,),
                                url)
            fields.append(("header", "%s: %s" % (name, value)))
        if len(fields) > FIELDS_MAX:
            raise HubdError("bad_request", "too many headers (at most %d fit on a line)"
                            % (FIELDS_MAX - 3), url)
        line = _build_line("FETCH", fields)
    except ValueError as e:
        raise HubdError("bad_request", str(e), url)
    if len(line) > LINE_MAX:
        raise HubdError("bad_request", "the request does not fit on a %d-byte line" % LINE_MAX, url)
    return line


def _fetch(url, sha256=None, headers=None, progress=True, refresh=False):
    """One FETCH. Returns a _Done whose fd (an open read-only descriptor of
    the blob, or None if hubd sent none) the caller must close."""
    line = _fetch_line(url, sha256, headers, refresh)
    hello = _build_line("HELLO", [("proto", "1"), ("client", "hubd-python/" + __version__)])
    try:
        conn = _connect()
    except HubdError as e:
        raise HubdError(e.code, e.msg, url) from None
    bar = None
    started = time.monotonic()
    attached = False  # joined a running download: its bytes so far are not ours
    first_done = None  # an attacher's: the bytes already there at its first PROGRESS
    try:
        if progress:
            bar = _make_bar(url, sys.stderr)
        try:
            conn.send(hello + line)
        except OSError as e:
            raise HubdError("disconnected", "sending to hubd on %s: %s%s"
                            % (conn.path, _why(e), _service_hint(conn.path)), url)
        hello_answered = False
        while True:
            raw = conn.readline()
            if raw is None:
                raise HubdError("disconnected", "hubd on %s closed the connection before "
                                "answering" % conn.path, url)
            # A DONE (or REPO) line takes the next descriptor even if it does
            # not parse, so the queue stays in step with the lines.
            fd = conn.take_fd() if raw.split(b" ", 1)[0] in (b"DONE", b"REPO") else None
            try:
                try:
                    verb, f = _parse_line(raw)
                except ValueError as e:
                    raise HubdError("protocol", "unreadable line from hubd (%s): %r" % (e, raw[:200]), url)
                if verb == "HELLO" and not hello_answered:
                    hello_answered = True
                    continue
                if verb == "ERR" and "id" not in f:
                    if not hello_answered:
                        # Our HELLO was refused; the session stays at
                        # version 1, which is what we speak.
                        hello_answered = True
                        continue
                    raise HubdError(f.get("code", "protocol"), f.get("msg"), url)
                if f.get("id") != FETCH_ID:
                    continue  # not ours (nothing else is pending on this session)
                if verb == "ERR":
                    raise HubdError(f.get("code", "protocol"), f.get("msg"), url)
                if verb == "PROGRESS":
                    if attached and first_done is None:
                        first_done = int(f.get("done", 0))
                    if bar:
                        total = f.get("total")
                        bar.update(int(f.get("done", 0)), int(total) if total else None,
                                   int(f.get("rate", 0)))
                    continue
                if verb == "DONE":
                    try:
                        done = _Done(f["path"], f["sha256"].lower(), int(f["size"]), f["source"], fd)
                    except (KeyError, ValueError):
                        raise HubdError("protocol", "incomplete DONE line: %r" % raw[:200], url)
                    if sha256 is not None and done.sha256 != sha256.lower():
                        raise HubdError("protocol", "asked for sha256 %s, hubd answered %s"
                                        % (sha256.lower(), done.sha256), url)
                    if fd is not None:
                        _check_blob_fd(fd, done.size, url)
                    fd = None  # handed over to the caller
                    if bar:
                        bar.finish(done.size, done.source, time.monotonic() - started,
                                   done.size - (first_done or 0))
                        bar = None
                    return done
                attached = attached or verb == "ATTACHED"
                # HIT, QUEUED, and verbs of later versions: nothing to do.
            finally:
                if fd is not None:
                    os.close(fd)
    except BaseException as e:
        if bar:
            bar.fail()
        if isinstance(e, KeyboardInterrupt):
            _interrupted(conn)  # the download stops, or goes on for others: said
        raise
    finally:
        conn.close()


_INTERRUPT_ID = "interrupt"
_INTERRUPT_WAIT = 5.0  # seconds INTERRUPT's answer may take after Ctrl-C


def _size_text(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def _interrupted(conn, stream=None):
    """Ctrl-C (KeyboardInterrupt) while conn's FETCHes wait: INTERRUPT on the
    same session (PROTOCOL.md), so that a download this process alone waits
    for stops and keeps its partial, and one that others wait for goes on for
    them; then one line on stream (stderr) saying which. Never raises: the
    caller re-raises the KeyboardInterrupt. A process that is killed, or
    closes the session, stops nothing (the download goes on for the cache)."""
    stream = stream or sys.stderr
    stopped = fresh = going = waiters = 0
    kept, job, answered, unknown = 0, None, False, False
    try:
        conn.sock.settimeout(_INTERRUPT_WAIT)
        conn.send(_build_line("INTERRUPT", [("id", _INTERRUPT_ID)]))
        deadline = time.monotonic() + _INTERRUPT_WAIT
        while time.monotonic() < deadline:
            raw = conn.readline()
            if raw is None:
                break
            if raw.split(b" ", 1)[0] in (b"DONE", b"REPO"):
                fd = conn.take_fd()
                if fd is not None:
                    os.close(fd)
            try:
                verb, f = _parse_line(raw)
            except ValueError:
                continue
            if verb == "OK" and f.get("id") == _INTERRUPT_ID:
                answered = True
                break
            if verb == "ERR" and "id" not in f and f.get("code") == "unknown_verb":
                unknown = True  # a hubd older than INTERRUPT
                break
            if verb != "ERR" or f.get("code") != "interrupted" or "job" not in f:
                continue
            if f.get("stopped") == "1":
                if f.get("resumable") == "1":
                    stopped += 1
                    kept += int(f.get("done", 0))
                else:
                    fresh += 1
            else:
                going += 1
                waiters += int(f.get("waiters", 0))
                job = job or f["job"]
    except (OSError, HubdError, ValueError):
        pass
    line = "hubd: interrupted"
    if not answered:
        line += ("; %s: any download goes on for the cache"
                 % ("this hubd cannot stop one on request" if unknown else "hubd did not answer"))
    else:
        n = stopped + fresh
        if n:
            line += ": the download stopped" if n == 1 else ": %d downloads stopped" % n
            if stopped and kept:
                line += ", %s kept" % _size_text(kept)
            if stopped:
                line += ": run it again to resume"
            if fresh:
                line += (" (%d%s had no ETag or Last-Modified to resume with: nothing kept)"
                         % (fresh, " of them" if n > 1 else ""))
        if going:
            line += "; " if n else ": "
            line += ("the download (job %s) goes on" % job if going == 1
                     else "%d downloads go on (job %s, ...)" % (going, job))
            line += (" for %d other waiting request%s" % (waiters, "" if waiters == 1 else "s")
                     if waiters else " for the cache (a client that left it let it run)")
            line += "; hubd.cancel(%s) stops it%s" % (job, " for everyone" if waiters else "")
        if not n and not going:
            line += ": no download was running"
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def fetch(url, sha256=None, headers=None, progress=True, refresh=False):
    """Fetches ``url`` through hubd and returns the path of the cached blob.

    The path is inside the cache: read-only, named by its SHA-256, and it may
    be evicted later (copy it, or use :func:`download_url_to_file`, to keep
    it). ``sha256``: the expected digest, 64 hex digits; a blob with it in the
    cache is a hit whatever the URL, a download with another digest raises
    ``HubdError`` code ``hash_mismatch``. ``headers``: a dict of extra request
    headers (a token for a gated file), sent as repeated ``header=Name:
    value`` fields: they go to the first origin only, and a file fetched with
    Authorization or Cookie is served only to requests with the same ones,
    and its cache path is readable by hubd alone (use
    :func:`download_url_to_file`, which copies through the passed fd)
    (the daemon refuses headers that are its own to send, such as Host or
    Range, with ``bad_request``). ``progress``: draw a
    progress bar on stderr (see the module doc). ``refresh``: a cached URL is
    revalidated with the origin first (304: the cached file; else the new
    one is downloaded); without it, a cached URL is served as it is (unless
    the daemon's ``revalidate_after`` says it is too old).
    Raises :class:`HubdError`.
    """
    done = _fetch(url, sha256, headers, progress, refresh)
    if done.fd is not None:
        os.close(done.fd)
    return done.path


def cancel(target):
    """Stops a download for everyone waiting on it: ``target`` is its job
    number (as ``hubctl status`` shows it) or its URL. Returns ``{"job": N,
    "waiters": W}`` (W requests were told ``cancelled``; their partial file
    is discarded). Only a download of yours that no other user waits on, or
    any for an admin: otherwise :class:`HubdError` ``permission_denied``;
    ``not_found`` when none runs or is queued."""
    target = str(target)
    try:
        line = _build_line("CANCEL", [("id", FETCH_ID), ("target", target)])
    except ValueError as e:
        raise HubdError("bad_request", str(e), target)
    conn = _connect()
    try:
        try:
            conn.send(line)
        except OSError as e:
            raise HubdError("disconnected", "sending to hubd on %s: %s" % (conn.path, _why(e)),
                            target)
        while True:
            raw = conn.readline()
            if raw is None:
                raise HubdError("disconnected", "hubd on %s closed the connection before "
                                "answering" % conn.path, target)
            try:
                verb, f = _parse_line(raw)
            except ValueError as e:
                raise HubdError("protocol", "unreadable line from hubd (%s)" % e, target)
            if f.get("id") != FETCH_ID:
                continue
            if verb == "ERR":
                raise HubdError(f.get("code", "protocol"), f.get("msg"), target)
            if verb == "OK":
                try:
                    return {"job": int(f["job"]), "waiters": int(f["waiters"])}
                except (KeyError, ValueError):
                    raise HubdError("protocol", "incomplete OK line: %r" % raw[:200], target)
    finally:
        conn.close()


def _copy_range(src, dst, size):
    """Copies bytes [0, size) of src to dst at the same offsets, never using
    either descriptor's file offset (src's may be shared with other
    clients). copy_file_range first (in-kernel, reflinks on filesystems that
    can), then pread/pwrite."""
    off = 0
    use_cfr = hasattr(os, "copy_file_range")  # Python 3.8+, Linux
    while off < size:
        if use_cfr:
            try:
                n = os.copy_file_range(src, dst, size - off, off, off)
            except OSError as e:
                # Across filesystems, on old kernels, or where it is not
                # supported: fall back to plain reads.
                if e.errno in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP,
                               errno.EPERM, errno.EIO):
                    use_cfr = False
                    continue
                raise
            if n == 0:  # some filesystems say 0 rather than an error: ask pread
                use_cfr = False
                continue
        else:
            buf = os.pread(src, min(_COPY_CHUNK, size - off), off)
            if not buf:
                raise HubdError("io", "the cached blob ended after %d of its %d bytes" % (off, size))
            n = 0
            while n < len(buf):
                n += os.pwrite(dst, buf[n:], off + n)
        off += n


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """``torch.hub.download_url_to_file`` through hubd: the same signature
    and behaviour.

    The object at ``url`` is fetched into hubd's cache (or found there) and
    copied from the descriptor hubd passes, so it works even if the cache
    path is unreadable or the blob is evicted meanwhile, into a temporary
    file ``<dst>.<hex>.partial`` beside ``dst``, which is then moved over
    ``dst``. If ``hash_prefix`` is given and the SHA-256 hex digest does not
    start with it, ``RuntimeError('invalid hash value (expected "...", got
    "...")')`` is raised and ``dst`` is not touched (the digest is the one
    hubd verified while storing the blob). Errors from hubd raise
    :class:`HubdError` (an OSError, as urllib's errors are).
    """
    dst = os.path.expanduser(os.fspath(dst))
    done = _fetch(url, None, None, progress)
    src = done.fd
    try:
        if src is None:  # hubd always sends one; this is only a fallback
            src = os.open(done.path, os.O_RDONLY | os.O_CLOEXEC)
        if hash_prefix is not None and done.sha256[:len(hash_prefix)] != hash_prefix:
            raise RuntimeError('invalid hash value (expected "{}", got "{}")'
                               .format(hash_prefix, done.sha256))
        # Like torch: a unique name beside dst, mode 0666 minus the umask
        # (not NamedTemporaryFile's 0600).
        for _ in range(tempfile.TMP_MAX):
            tmp = dst + "." + uuid.uuid4().hex + ".partial"
            try:
                out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            except FileExistsError:
                continue
            break
        else:
            raise FileExistsError(errno.EEXIST, "No usable temporary file name found")
        try:
            try:
                _copy_range(src, out, done.size)
            finally:
                os.close(out)
            shutil.move(tmp, dst)
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)
    finally:
        if src is not None:
            os.close(src)


def patch_torch_hub():
    """Makes torch.hub download through hubd: replaces
    ``torch.hub.download_url_to_file`` (which ``load_state_dict_from_url``
    and ``torch.hub.load`` look up as a module global at each call) with
    :func:`download_url_to_file`. Calling it again does nothing new.

    Code that did ``from torch.hub import download_url_to_file`` before the
    patch keeps its own reference to the original. Raises ImportError if
    torch cannot be imported.
    """
    import importlib
    try:
        hub = importlib.import_module("torch.hub")
    except ImportError as e:
        raise ImportError("hubd.patch_torch_hub() needs PyTorch, but importing torch.hub "
                          "failed: %s" % e) from e
    if hub.download_url_to_file is not download_url_to_file:
        # Kept so the original can be restored by hand if ever needed.
        hub._hubd_original_download_url_to_file = hub.download_url_to_file
        hub.download_url_to_file = download_url_to_file


# huggingface_hub's two download functions, through hubd (hubd/hf.py). At the
# end: hf.py uses the connection and codec above.
from .hf import DryRunFileInfo, hf_hub_download, snapshot_download  # noqa: E402
# huggingface_hub's exception classes, as those two raise them (hubd/_hferrors.py).
from ._hferrors import (DryRunError, EntryNotFoundError, GatedRepoError,  # noqa: E402
                        HFValidationError, HfHubHTTPError, LocalEntryNotFoundError,
                        RemoteEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)
