"""The arguments of hubd.hf_hub_download and hubd.snapshot_download that
huggingface_hub's functions take and hubd answers in its own way (hubd/hf.py):

- ``endpoint`` and ``HF_ENDPOINT``: hubd asks one Hub, its ``hf_upstream``
  (which HELLO names, with ``hf_front``, the ``/hf`` endpoint of its HTTP
  front: docs/PROTOCOL.md). An ``endpoint`` that is neither raises
  ``ValueError`` naming both, before anything is asked of the Hub: the call
  would otherwise read another Hub's files silently. ``HF_ENDPOINT`` set to
  neither is said once per process (a ``hubd: note:`` line on stderr, and
  a warning logged on ``hubd._hfopts``): which Hub answers, and why.
- ``headers``: sent with the listing's and every file's request (hubd's
  ``header=``, as the token is): they reach the Hub, never the CDN it
  redirects to, and make those requests private to them, as a token does.
  Keys as huggingface_hub's: they take precedence over the token's
  ``Authorization``.
- ``user_agent``, ``library_name``, ``library_version`` (and a
  ``User-Agent`` among ``headers``): not sent. hubd's requests carry
  hubd's User-Agent; a user agent of each client's would also make every
  file private to that client (a header is a credential to hubd), so that
  no second user or program could share its bytes.
- ``etag_timeout`` (default 10 s, ``HF_HUB_ETAG_TIMEOUT`` wins when set, as
  in huggingface_hub): how long the repo's listing may take while the
  cache has an answer. Past it, that answer is given, as huggingface_hub's
  HEAD timing out falls back on its cache; when the cache has none, the
  call waits on for hubd's answer (huggingface_hub retries, longer).
- ``dry_run``: :class:`DryRunFileInfo` records, huggingface_hub's class
  when it imports.
"""

import logging
import os
import sys
import urllib.parse

from . import HubdError

DEFAULT_ETAG_TIMEOUT = 10.0
_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())
_told_endpoint = set()    # HF_ENDPOINT values said once per process


# ---- dry runs -------------------------------------------------------------------

class _DryRunFileInfo:
    """huggingface_hub's ``DryRunFileInfo``: what a call without ``dry_run``
    would do for one file."""

    __slots__ = ("commit_hash", "file_size", "filename", "local_path", "is_cached",
                 "will_download")

    def __init__(self, commit_hash, file_size, filename, local_path, is_cached, will_download):
        self.commit_hash, self.file_size, self.filename = commit_hash, file_size, filename
        self.local_path, self.is_cached, self.will_download = local_path, is_cached, will_download

    def __eq__(self, other):
        return isinstance(other, _DryRunFileInfo) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self):
        return "DryRunFileInfo(%s)" % ", ".join("%s=%r" % (k, getattr(self, k))
                                                for k in self.__slots__)


_DryRunFileInfo.__name__ = _DryRunFileInfo.__qualname__ = "DryRunFileInfo"
DryRunFileInfo = _DryRunFileInfo


def dry_run_info(**fields):
    """A DryRunFileInfo: huggingface_hub's class when it imports (its
    dataclass takes these fields by name), else hubd's."""
    for mod in ("huggingface_hub.file_download", "huggingface_hub"):
        try:
            import importlib
            cls = getattr(importlib.import_module(mod), "DryRunFileInfo", None)
        except Exception:
            continue
        if isinstance(cls, type):
            try:
                return cls(**fields)
            except Exception:
                break
    return _DryRunFileInfo(**fields)


# ---- headers ----------------------------------------------------------------------

def request_headers(token, headers):
    """The ``Name: value`` lines sent as ``header=`` with every request of
    the call: the token's Authorization, then ``headers`` over it (a name
    again, in any case, replaces it); a User-Agent is left out (the module
    doc). HubdError bad_request for a header that cannot be one."""
    out = {}
    if token:
        out["authorization"] = ("Authorization", "Bearer " + token)
    if headers is not None and not hasattr(headers, "items"):
        raise TypeError("headers must be a dict, not %s" % type(headers).__name__)
    for name, value in (headers or {}).items():
        name, value = str(name), str(value)
        if (not name or any(c in name for c in ":\r\n\0 \t")
                or any(c in value for c in "\r\n\0")):
            # the value may be a token: never in a message
            raise HubdError("bad_request", "malformed header %r (name or value)" % (name,))
        if name.lower() == "user-agent":
            continue
        out[name.lower()] = (name, value)
    return ["%s: %s" % nv for nv in out.values()]


def etag_timeout(value):
    """The listing's bound in seconds: HF_HUB_ETAG_TIMEOUT when set (an
    integer, as huggingface_hub reads it), else value; None: no bound."""
    env = os.environ.get("HF_HUB_ETAG_TIMEOUT")
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError("HF_HUB_ETAG_TIMEOUT must be an integer, not %r" % env)
    if value is None:
        return None
    value = float(value)
    if value <= 0:
        raise ValueError("etag_timeout must be a positive number of seconds, not %r" % value)
    return value


# ---- which Hub ----------------------------------------------------------------------

_DEFAULT_PORT = {"http": 80, "https": 443}
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def _norm(url):
    """(scheme, host, port, path) of a Hub URL, as the Hub would read it:
    lower case, default port, no trailing '/'. None when it is no URL."""
    try:
        u = urllib.parse.urlsplit(url.strip())
        port = u.port
    except (ValueError, AttributeError):
        return None
    scheme, host = u.scheme.lower(), (u.hostname or "").lower()
    if scheme not in _DEFAULT_PORT or not host:
        return None
    return scheme, host, port or _DEFAULT_PORT[scheme], u.path.rstrip("/")


def _is_loopback(host):
    return host in _LOOPBACK or host.startswith("127.") or host.endswith(".localhost")


class Hub:
    """The Hub hubd asks and its front's endpoints, from HELLO's fields."""

    def __init__(self, hello):
        self.upstream = (hello or {}).get("hf_upstream") or None
        self.fronts = [f for f in ((hello or {}).get("hf_front") or "").split(",") if f]

    def means_us(self, url):
        """Does url name hubd's Hub, or the /hf endpoint of hubd's front
        (any loopback name on its port)?"""
        want = _norm(url)
        if want is None or self.upstream is None:
            return False
        if want == _norm(self.upstream):
            return True
        for front in self.fronts:
            f = _norm(front)
            if (f and want[0] == "http" and want[2] == f[2] and want[3] == f[3]
                    and _is_loopback(want[1]) and _is_loopback(f[1])):
                return True
        return False

    def named(self):
        if self.upstream is None:
            return "the Hub of its hf_upstream (this hubd is too old to say which)"
        return "%s (its hf_upstream)" % self.upstream

    def check(self, endpoint):
        """endpoint (the argument; None: HF_ENDPOINT's, if any) against
        hubd's Hub: ValueError for an argument that is not it, the note
        for an environment that is not."""
        if endpoint is not None:
            if not self.means_us(str(endpoint)):
                raise ValueError("endpoint=%r is not the Hub hubd fetches from: hubd asks %s%s; "
                                 "leave endpoint out, or set hf_upstream in hubd.conf"
                                 % (str(endpoint), self.named(), self._front_text()))
            return
        env = os.environ.get("HF_ENDPOINT")
        if not env or self.means_us(env) or env in _told_endpoint:
            return
        _told_endpoint.add(env)
        text = ("HF_ENDPOINT=%s is not hubd's Hub: files come from %s, through hubd "
                "(hubd asks one Hub: hf_upstream in hubd.conf)" % (env, self.named()))
        _log.warning("%s", text)
        sys.stderr.write("hubd: note: %s\n" % text)

    def _front_text(self):
        return " or, through its HTTP front, %s" % " ".join(self.fronts) if self.fronts else ""
