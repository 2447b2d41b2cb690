"""One FETCH: the request line, and the session that waits for its answer.

Contract: ``_fetch_line(url, sha256, headers, refresh=False, rid=FETCH_ID)``
checks a request against the protocol's limits and gives its FETCH line,
or raises HubdError ``bad_request`` saying what was wrong (TypeError for a
URL that is not a str); hubd/hf.py pipelines such lines on its own
session. ``_fetch(url, sha256, headers, progress, refresh)`` opens a
session (hubd/_conn.py), sends HELLO and the FETCH, draws the bar
(hubd/_progress.py), and returns a ``_Done`` (path, sha256, size, source,
fd) once DONE came, its fd a checked read-only descriptor of the blob (or
None if hubd sent none) that the caller must close; every failure raises
HubdError, and Ctrl-C says INTERRUPT first (hubd/_interrupt.py). The
session is closed on every path.
"""

import collections
import os
import sys
import time

from . import __version__
from ._codec import (FETCH_ID, FIELDS_MAX, LINE_MAX, URL_MAX, _build_line,
                     _parse_line)
from ._conn import _check_blob_fd, _connect, _service_hint, _why
from ._errors import HubdError
from ._interrupt import _interrupted
from ._progress import _make_bar

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
