"""The progress bar of one fetch, drawn on a stream (stderr).

Contract: ``_make_bar(url, stream)`` gives a bar named after the URL's last
path segment: through ``tqdm`` when it is importable (looked up at each
call), else ``_TextBar``, one line redrawn with '\\r' at most every 0.1 s.
Either has ``update(done, total, rate)`` (total may be None),
``finish(size, source, elapsed, seen=None)`` (ends the line; ``source`` of
``hit`` says "from the cache", else the average rate of the ``seen`` bytes)
and ``fail()`` (ends the line so an error starts on its own). ``_fmt_bytes``
is a size as people read it (``12.0 MiB``); hubd/_hfprogress.py and the
Ctrl-C line (hubd/_interrupt.py) use it too.
"""

import os
import time
import urllib.parse


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
