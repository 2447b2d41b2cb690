"""The progress of hubd.hf_hub_download and hubd.snapshot_download
(hubd/hf.py), drawn as huggingface_hub draws it: snapshot_download's
``Fetching N files`` (N: the files the patterns keep, those already in
place counted as done at once) and, for both functions, a bar per file
being fetched, named by its path (its last 40 characters), in bytes.

Which bars, by huggingface_hub's rules:

- ``tqdm_class`` given: every bar is made with it, wherever stderr goes
  (``tqdm_class(total=N, desc="Fetching N files")``, then per file
  ``tqdm_class(desc=path, total=size, initial=0, unit="B",
  unit_scale=True)``; ``update(n)``, ``close()``).
- Otherwise none when ``HF_HUB_DISABLE_PROGRESS_BARS`` is set (``1``,
  ``on``, ``yes``, ``true``) or stderr is not a terminal (tqdm's
  ``disable=None``, which huggingface_hub passes), and no other line.
- On a terminal: ``tqdm.auto.tqdm`` when tqdm imports, else a display of
  hubd's own on stderr, redrawn in place at most 10 times a second: the
  ``Fetching N files: [k/N]`` line, and under it one line per running
  file (at most 8), as ``hubctl hf download`` draws it.
"""

import os
import sys
import time

from . import _fmt_bytes

MAX_FILE_LINES = 8


def progress_off():
    """huggingface_hub's HF_HUB_DISABLE_PROGRESS_BARS."""
    return os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "").upper() in ("1", "ON", "YES", "TRUE")


def bar_name(path):
    """huggingface_hub's name of a file's bar: the path, its end if long."""
    return path if len(path) <= 40 else "(…)" + path[-40:]


def make(tqdm_class, nfiles):
    """The progress of one call (nfiles: snapshot_download's file count,
    None for hf_hub_download's one file), or None when nothing is drawn."""
    if tqdm_class is not None:
        return _Bars(tqdm_class, nfiles)
    if progress_off():
        return None
    try:
        if not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):  # replaced, or closed
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Screen(sys.stderr, nfiles)
    return _Bars(tqdm, nfiles)


class _Bars:
    """Through a tqdm class (tqdm's own, or the caller's)."""

    def __init__(self, cls, nfiles):
        self.cls = cls
        self.files = cls(total=nfiles, desc="Fetching %d files" % nfiles) if nfiles else None
        self.bars = {}  # key -> [bar, bytes shown]

    def file_done(self, n=1):
        if self.files is not None and n:
            self.files.update(n)

    def start(self, key, path, size):
        bar = self.cls(desc=bar_name(path), total=size, initial=0, unit="B", unit_scale=True)
        self.bars[key] = [bar, 0]

    def update(self, key, done):
        b = self.bars.get(key)
        if b is not None and done > b[1]:
            b[0].update(done - b[1])
            b[1] = done

    def finish(self, key, size):
        b = self.bars.pop(key, None)
        if b is not None:
            self.update_to(b, size)
            b[0].close()

    @staticmethod
    def update_to(b, size):
        if size > b[1]:
            b[0].update(size - b[1])
            b[1] = size

    def close(self):
        for b, _ in self.bars.values():
            b.close()
        self.bars.clear()
        if self.files is not None:
            self.files.close()
            self.files = None

    fail = close


class _Screen:
    """hubd's own display on a terminal, when tqdm does not import: lines
    redrawn in place (cursor up, carriage return, clear to the end)."""

    INTERVAL = 0.1

    def __init__(self, stream, nfiles):
        self.stream = stream
        self.nfiles = nfiles
        self.finished = 0      # files done (in place before, or fetched)
        self.running = {}      # key -> [path, done, size], in start order
        self.bytes_done = 0    # of the files fetched so far
        self.lines = 0         # lines on screen now
        self.last = None       # monotonic time of the last draw

    def file_done(self, n=1):
        self.finished += n
        self.draw(True)

    def start(self, key, path, size):
        self.running[key] = [path, 0, size]
        self.draw(True)

    def update(self, key, done):
        f = self.running.get(key)
        if f is not None:
            f[1] = done
            self.draw(False)

    def finish(self, key, size):
        f = self.running.get(key)
        if f is None:
            return
        f[1] = size
        if not self.nfiles:  # the one file's line stays, at 100%
            self.draw(True)
        del self.running[key]
        self.bytes_done += size
        if self.nfiles:
            self.draw(True)

    def close(self):
        if self.lines or self.nfiles:
            self.draw(True)
            self.stream.write("\n")
            self.stream.flush()
        self.lines = 0

    def fail(self):
        if self.lines:  # the error starts on a line of its own
            self.stream.write("\n")
            self.stream.flush()
        self.lines = 0

    def _width(self):
        try:
            cols = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            cols = 0
        return cols - 1 if cols >= 20 else 79  # 0: a terminal that says no size

    def _file_line(self, f):
        path, done, size = f
        frac = min(1.0, done / size) if size else 1.0
        filled = int(frac * 20)
        return "%s  [%s%s] %s / %s %3d%%" % (bar_name(path), "#" * filled, "." * (20 - filled),
                                             _fmt_bytes(done), _fmt_bytes(size), int(frac * 100))

    def draw(self, force):
        now = time.monotonic()
        if not force and self.last is not None and now - self.last < self.INTERVAL:
            return
        self.last = now
        width = self._width()
        rows = []
        if self.nfiles:
            done = self.bytes_done + sum(f[1] for f in self.running.values())
            rows.append("Fetching %d files: [%d/%d]  %s" % (self.nfiles, self.finished,
                                                          self.nfiles, _fmt_bytes(done)))
            indent = "  "
        else:
            indent = ""
        for f in list(self.running.values())[:MAX_FILE_LINES]:
            rows.append(indent + self._file_line(f))
        if not rows:
            return
        out = "\033[%dA" % (self.lines - 1) if self.lines > 1 else ""
        out += "\r" + "\n".join(r[:width] + "\033[K" for r in rows) + "\033[J"
        self.stream.write(out)
        self.stream.flush()
        self.lines = len(rows)
