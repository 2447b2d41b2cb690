"""hubd/hf.py's session with hubd: one connection, ``HELLO`` (whose answer
says which Hub hubd asks: ``hf_upstream``, ``hf_front``), then requests
with ids of our own, pipelined; ``HFREPO``'s answer, ``REPO``, and its
listing read from the passed descriptor (docs/PROTOCOL.md)."""

import os
import re
import select
import stat
import time
import urllib.parse

from . import HubdError, LINE_MAX, __version__, _build_line, _connect, _parse_line, _why
from ._hfcache import _HEX40, _safe_rel

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20


class File:
    __slots__ = ("path", "size", "blob", "sha256")

    @property
    def etag(self):
        return self.sha256 or self.blob


class Session:
    """One connection to hubd: HELLO, then requests with ids of our own; the
    descriptors of DONE and REPO lines taken in order."""

    def __init__(self):
        self.conn = _connect()
        self.n = 0
        self.hello = False
        self.hello_fields = {}  # HELLO's answer (hf_upstream, hf_front...): {} when refused
        self.send(_build_line("HELLO", [("proto", "1"), ("client", "hubd-python/" + __version__)]))

    def wait_hello(self):
        """Reads up to HELLO's answer: what the daemon says of itself."""
        while not self.hello:
            if self._line() is None:
                raise HubdError("disconnected", "hubd on %s closed the connection" % self.conn.path)
        return self.hello_fields

    def new_id(self, prefix):
        self.n += 1
        return "%s%d" % (prefix, self.n)

    def send(self, line):
        if len(line) > LINE_MAX:
            raise HubdError("bad_request", "the request does not fit on a %d-byte line" % LINE_MAX)
        try:
            self.conn.send(line)
        except OSError as e:
            raise HubdError("disconnected", "sending to hubd on %s: %s" % (self.conn.path, _why(e)))

    def reply(self, deadline=None):
        """(verb, fields, fd) of the next line that answers one of ours;
        None when deadline (time.monotonic()) passes before one comes."""
        while True:
            if deadline is not None and b"\n" not in self.conn.buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.conn.sock], [], [], left)[0]:
                    return None
            got = self._line()
            if got is None:
                raise HubdError("disconnected", "hubd on %s closed the connection" % self.conn.path)
            if got is not False:
                return got

    def _line(self):
        """The next line: (verb, fields, fd) for an answer to one of ours,
        False for one taken here (HELLO's), None at the end."""
        raw = self.conn.readline()
        if raw is None:
            return None
        fd = self.conn.take_fd() if raw.split(b" ", 1)[0] in (b"DONE", b"REPO") else None
        try:
            verb, f = _parse_line(raw)
        except ValueError as e:
            if fd is not None:
                os.close(fd)
            raise HubdError("protocol", "unreadable line from hubd (%s): %r" % (e, raw[:200]))
        if verb == "HELLO" and not self.hello:
            self.hello, self.hello_fields = True, f
            return False
        if verb == "ERR" and "id" not in f:
            if not self.hello:  # HELLO refused: we speak version 1 all the same
                self.hello = True
                return False
            # The answer to the oldest request that hubd could not
            # read (an older hubd's unknown_verb): the caller's to place.
            f["id"] = None
            return verb, f, fd
        if "id" not in f:
            if fd is not None:
                os.close(fd)
            return False
        return verb, f, fd

    def close(self):
        self.conn.close()


def _read_all(fd):
    """The whole of REPO's listing: a regular file (a FIFO or a socket a
    hostile daemon passed would block the read)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise HubdError("protocol", "hubd passed a REPO descriptor that is not a regular file")
    out, off = [], 0
    while True:
        b = os.pread(fd, _CHUNK, off)
        if not b:
            return b"".join(out)
        out.append(b)
        off += len(b)


def list_repo(sess, repo_id, repo_type, revision, headers, deadline=None, slow=None):
    """HFREPO: (commit, [File]). When no answer has come by deadline,
    slow() is called: it raises, or returns and the wait goes on."""
    fields = [("id", "r"), ("repo", repo_id), ("type", repo_type), ("revision", revision)]
    fields += [("header", h) for h in headers]
    try:
        line = _build_line("HFREPO", fields)
    except ValueError as e:
        raise HubdError("bad_request", str(e))
    sess.send(line)
    while True:
        got = sess.reply(deadline)
        if got is None:
            slow()
            deadline = None
            continue
        verb, f, fd = got
        try:
            if verb == "ERR" and f["id"] is None:
                msg = f.get("msg") or ""
                if f.get("code") == "unknown_verb":
                    msg = "this hubd does not know HFREPO (it is older than the HF functions)"
                raise HubdError(f.get("code", "protocol"), msg)
            if f["id"] != "r":
                continue
            if verb == "ERR":
                raise HubdError(f.get("code", "protocol"), f.get("msg"))
            if verb != "REPO":
                continue  # QUEUED, PROGRESS, later verbs
            commit = f.get("commit", "")
            if not _HEX40.match(commit) or fd is None:
                raise HubdError("protocol", "incomplete REPO line from hubd (commit %r)" % commit)
            files = []
            for raw in _read_all(fd).splitlines():
                if not raw.strip():
                    continue
                try:
                    _, g = _parse_line(b"FILE " + raw)
                    x = File()
                    x.path, x.size, x.blob = g["path"], int(g["size"]), g["blob"].lower()
                    x.sha256 = g["sha256"].lower() if "sha256" in g else None
                except (ValueError, KeyError) as e:
                    raise HubdError("protocol", "unreadable file line from hubd (%s): %r"
                                    % (e, raw[:200]))
                if not _HEX40.match(x.blob) or (x.sha256 and not _HEX64.match(x.sha256)):
                    raise HubdError("protocol", "bad blob id or sha256 in %r" % raw[:200])
                _safe_rel(x.path, "file name")
                files.append(x)
            if "files" in f and f["files"].isdigit() and int(f["files"]) != len(files):
                raise HubdError("protocol", "REPO said files=%s, its descriptor holds %d"
                                % (f["files"], len(files)))
            return commit, files, f.get("resolve", "")
        finally:
            if fd is not None:
                os.close(fd)


def quote_path(path):
    return "/".join(urllib.parse.quote(s, safe="") for s in path.split("/"))

