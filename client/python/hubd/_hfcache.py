"""The HF cache on disk, for hubd/hf.py: where it is and which token goes
with it, as huggingface_hub finds them, and the answers found on disk alone
(hubd is not asked): HF_HUB_OFFLINE's, and a Hub that gave no answer.

A Hub that gave no answer is an HFREPO (or a file's FETCH) that hubd
answered with one of the codes of ``_OUTAGE``, or ``http_5NN``: the ones
hubctl's hf_offline.c lists, with why each is there and what is left out
(the Hub's 401, 403 and 404 are answers; ``tls_verify``, ``proxy_auth`` and
``proxy_refused`` are for the user to see, as huggingface_hub raises on
SSLError and ProxyError). Then the call answers what HF_HUB_OFFLINE would,
with one warning (logged on the ``hubd._hfcache`` logger, and a ``hubd:
note:`` line on stderr) naming the reason; when the cache does not hold it,
hubd's error is raised, its message saying what is not cached.
"""

import logging
import os
import re
import sys

from . import HubdError

REPO_TYPES = ("model", "dataset", "space")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_OUTAGE = frozenset(("dns", "connect", "timeout", "tls", "truncated", "proxy", "http_408",
                     "http_429"))
_HTTP_5XX = re.compile(r"^http_5[0-9][0-9]$")
_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())  # the app's handlers; else only the stderr line


# ---- where, and with which token ------------------------------------------

def _hf_home():
    home = os.environ.get("HF_HOME")
    if home:
        return os.path.expanduser(home)
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return os.path.join(os.path.expanduser(xdg), "huggingface")


def _cache_dir(cache_dir):
    if cache_dir is not None:
        return os.fspath(cache_dir)
    env = os.environ.get("HF_HUB_CACHE")
    if env:
        return os.path.expanduser(env)
    return os.path.join(_hf_home(), "hub")


def _token(token):
    """The token to send, or None: token=False none; a str as it is;
    None/True: $HF_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token."""
    if token is False:
        return None
    if isinstance(token, str):
        return token
    if token not in (None, True):
        raise TypeError("token must be a str, True, False or None, not %s" % type(token).__name__)
    found = (os.environ.get("HF_TOKEN") or "").strip()
    if not found:
        path = os.environ.get("HF_TOKEN_PATH") or os.path.join(_hf_home(), "token")
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as f:
                found = f.read().strip()
        except OSError:
            found = ""
    if not found and token is True:
        raise HubdError("bad_request", "token=True, but no token was found ($HF_TOKEN, "
                        "$HF_TOKEN_PATH or $HF_HOME/token)")
    return found or None


def _repo_args(repo_id, repo_type, revision):
    """(repo_type, revision) with their defaults, checked; ValueError or
    HubdError bad_request."""
    repo_type = "model" if repo_type is None else repo_type
    if repo_type not in REPO_TYPES:
        raise ValueError("Invalid repo type: %r (one of %s)" % (repo_type, ", ".join(REPO_TYPES)))
    if not isinstance(repo_id, str) or not repo_id:
        raise ValueError("repo_id must be a non-empty str")
    return repo_type, _safe_rel("main" if revision is None else str(revision), "revision")


def _repo_folder(repo_id, repo_type):
    return "%ss--%s" % (repo_type, repo_id.replace("/", "--"))


def _safe_rel(path, what):
    """A relative path made of plain segments (the Hub's file names, a
    revision under refs/), or HubdError: nothing may land outside the cache.
    The rule of hubctl's hf_path_safe: no control byte or backslash."""
    segs = path.split("/")
    if (not path or "\\" in path or any(ord(c) < 0x20 or c == "\x7f" for c in path)
            or any(s in ("", ".", "..") for s in segs)):
        raise HubdError("bad_request", "refusing the %s %r (not a plain relative path)" % (what, path))
    return path


# ---- offline ---------------------------------------------------------------------

def _offline():
    """huggingface_hub's HF_HUB_OFFLINE (else TRANSFORMERS_OFFLINE): 1, ON,
    YES or TRUE, any case."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return value is not None and value.upper() in ("1", "ON", "YES", "TRUE")


def _offline_lookup(repo_id, repo_type, revision, cache_dir, local_dir, filename=None,
                    why="HF_HUB_OFFLINE is set"):
    """What huggingface_hub returns offline (try_to_load_from_cache, and
    snapshot_download's offline branch), found on disk alone: the file
    (filename), else the snapshot folder. HubdError offline_not_cached when
    it is not there, its message beginning with why. hubd is not asked."""
    repo_type, revision = _repo_args(repo_id, repo_type, revision)
    cache = _cache_dir(cache_dir)
    if local_dir is not None:
        local = os.fspath(local_dir)
        where = "local dir " + local
        if filename is not None:
            found = os.path.join(local, *filename.split("/"))
            if os.path.isfile(found):
                return found
        elif os.path.isdir(local) and os.listdir(local):
            return os.path.realpath(local)
    else:
        where = "cache " + cache
        storage = os.path.join(cache, _repo_folder(repo_id, repo_type))
        commit = revision if _HEX40.match(revision) else None
        ref = os.path.join(storage, "refs", *revision.split("/"))
        if commit is None and os.path.isfile(ref):
            with open(ref) as r:
                commit = r.read()  # as huggingface_hub: whole, no strip
        if commit and "/" not in commit and commit not in (".", ".."):
            found = os.path.join(storage, "snapshots", commit)
            if filename is not None:
                found = os.path.join(found, *filename.split("/"))
            if os.path.exists(found):
                return found
    what = repo_id if filename is None else repo_id + " " + filename
    raise HubdError("offline_not_cached", "%s and %s %s at revision %s is not in the %s"
                    % (why, repo_type, what, revision, where))


def _is_outage(code):
    """Does hubd's code say that the Hub gave no answer (not reached, timed
    out, a 5xx), rather than an answer (401, 403, 404) or hubd's refusal?"""
    return code in _OUTAGE or bool(_HTTP_5XX.match(code or ""))


def _outage_note(err, cache_dir, local_dir):
    """The one warning of a call answered from the cache: logged, and on
    stderr as the module's other notes."""
    where = ("local dir " + os.fspath(local_dir) if local_dir is not None
             else "cache " + _cache_dir(cache_dir))
    text = "cannot reach the Hub (%s; %s): answered from the %s" % (err.msg, err.code, where)
    _log.warning("%s", text)
    sys.stderr.write("hubd: note: %s\n" % text)


def _from_cache(err, repo_id, repo_type, revision, cache_dir, local_dir, filename=None):
    """The answer of a call whose listing got err, an outage: what
    HF_HUB_OFFLINE answers, with the note; else err's code, its message
    saying what is not cached."""
    why = "cannot reach the Hub (%s; %s)" % (err.msg, err.code)
    try:
        found = _offline_lookup(repo_id, repo_type, revision, cache_dir, local_dir, filename, why)
    except HubdError as e:
        if e.code != "offline_not_cached":
            raise
        missing = HubdError(err.code, e.msg, err.url)
        missing.not_cached = True  # huggingface_hub's LocalEntryNotFoundError (hubd/_hferrors.py)
        raise missing from err
    _outage_note(err, cache_dir, local_dir)
    return found
