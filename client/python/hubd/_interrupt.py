"""Ctrl-C while FETCHes wait: INTERRUPT on the same session, and one line
on stderr saying what became of the downloads.

Contract: ``_interrupted(conn, stream=None)`` is called with the session
(a hubd/_conn.py ``_Conn``) when a KeyboardInterrupt reaches a call that
waits for hubd's replies (``hubd.fetch``, ``download_url_to_file``,
hubd/hf.py); it sends ``INTERRUPT`` (docs/PROTOCOL.md), reads the
``ERR code=interrupted`` lines and the ``OK`` for at most
``_INTERRUPT_WAIT`` seconds, closes any descriptor passed meanwhile, and
writes one line: which downloads stopped (and how much was kept to resume
with), which go on for other waiters (and how to cancel them), or that
hubd did not answer. It never raises: the caller re-raises the
KeyboardInterrupt, and closes the session.
"""

import os
import sys
import time

from ._codec import _build_line, _parse_line
from ._errors import HubdError
# Sizes in the progress bars' words.
from ._progress import _fmt_bytes as _size_text

_INTERRUPT_ID = "interrupt"
_INTERRUPT_WAIT = 5.0  # seconds INTERRUPT's answer may take after Ctrl-C


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
            line += "; hubd.cancel(%s) stops it%s" % (
                job, " for everyone (if those requests are yours; else an admin can)" if waiters else "")
        if not n and not going:
            line += ": no download was running"
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass
