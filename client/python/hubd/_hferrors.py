"""huggingface_hub's exceptions, for hubd.hf_hub_download and
hubd.snapshot_download (hubd/hf.py): code written for huggingface_hub
catches what they raise (transformers' ``except EntryNotFoundError`` for an
optional file, ``except RepositoryNotFoundError``, ``except
LocalEntryNotFoundError`` offline).

When ``huggingface_hub`` can be imported (``huggingface_hub.errors``, else
``huggingface_hub.utils`` for versions older than that module), the raised
object is an instance of huggingface_hub's class, of the class of the same
name below, and of :class:`hubd.HubdError` with hubd's ``.code``, ``.msg``
and ``.url``: a class made at run time from the three (one per class,
cached). huggingface_hub's ``__init__`` is not called (1.x requires a
``response`` and reads its headers): its attributes are set to what a
response-less error has (``response``, ``request``, ``request_id`` None;
``server_message`` the Hub's message; ``repo_id``, ``repo_type``).
Otherwise the classes below, of the same names and hierarchy, each a
:class:`hubd.HubdError` (an ``OSError``):

- ``HfHubHTTPError``: the Hub's refusal (``http_NNN``).
- ``RepositoryNotFoundError(HfHubHTTPError)``: ``RepoNotFound``, or a 401
  without an error code (a token the Hub does not know), as
  huggingface_hub's ``hf_raise_for_status`` for a repo's URL.
- ``GatedRepoError(RepositoryNotFoundError)``: ``GatedRepo``.
- ``RevisionNotFoundError(HfHubHTTPError)``: ``RevisionNotFound``.
- ``EntryNotFoundError``: the base of both below (huggingface_hub 1.x's
  ``EntryNotFoundError(Exception)``; in 0.x the remote one itself).
- ``RemoteEntryNotFoundError(HfHubHTTPError, EntryNotFoundError)``:
  ``EntryNotFound`` (a file not in the repo at that revision). With a
  huggingface_hub older than 1.0, its ``EntryNotFoundError`` is raised.
- ``LocalEntryNotFoundError(EntryNotFoundError, FileNotFoundError,
  ValueError)``: ``offline_not_cached``, and a Hub that gave no answer for
  what the cache does not hold (``.code`` then the outage's: ``connect``,
  ``http_503``...), from hf_hub_download and snapshot_download alike.
- ``HFValidationError(ValueError)``: a repo id that breaks the Hub's rules
  (huggingface_hub's ``validate_repo_id``), refused before anything is
  asked (``.code`` ``bad_request``).
- ``DryRunError``: snapshot_download's ``dry_run`` when the Hub cannot be
  asked (offline, ``local_files_only``, no answer; ``.code`` ``dry_run``).

Every other code stays a plain :class:`hubd.HubdError`.
"""

import re

from . import HubdError

__all__ = ["HfHubHTTPError", "RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError",
           "EntryNotFoundError", "RemoteEntryNotFoundError", "LocalEntryNotFoundError",
           "HFValidationError", "DryRunError"]


class _HfAttrs:
    """The attributes huggingface_hub's HTTP errors carry, for an error
    made from hubd's ERR (no HTTP response object)."""
    response = None
    request_id = None
    server_message = None
    repo_id = None
    repo_type = None


class HfHubHTTPError(_HfAttrs, HubdError):
    """The Hub refused (``http_NNN``); huggingface_hub's ``HfHubHTTPError``."""


class RepositoryNotFoundError(HfHubHTTPError):
    """No such repo, or not for this token (``RepoNotFound``, a 401)."""


class GatedRepoError(RepositoryNotFoundError):
    """A gated repo and a token not granted, or none (``GatedRepo``)."""


class RevisionNotFoundError(HfHubHTTPError):
    """No such branch, tag or commit (``RevisionNotFound``)."""


class EntryNotFoundError(HubdError):
    """A file that is not there, on the Hub or on disk: catch this one."""


class RemoteEntryNotFoundError(HfHubHTTPError, EntryNotFoundError):
    """The repo has no such file at that revision (``EntryNotFound``)."""


class LocalEntryNotFoundError(EntryNotFoundError, FileNotFoundError, ValueError):
    """Not in the cache, and the Hub not asked (HF_HUB_OFFLINE) or not
    answering."""


class HFValidationError(HubdError, ValueError):
    """A repo id the Hub would refuse; nothing was asked."""


class DryRunError(HubdError):
    """A dry run that needs the Hub, which cannot be asked."""


# ---- the repo id --------------------------------------------------------------

_PART = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
REPO_ID_MAX = 96


def validate_repo_id(repo_id):
    """huggingface_hub's validate_repo_id (as hubctl's hf_repo_id_ok and
    hubd's HFREPO check it): ``name`` or ``namespace/name``, each of
    letters, digits, ``-``, ``_``, ``.``, neither starting nor ending with
    ``-`` or ``.``; no ``--`` or ``..``; not ending in ``.git``; at most 96
    characters. Else :class:`HFValidationError` (``bad_request``)."""
    if not isinstance(repo_id, str):
        raise _make("HFValidationError", "bad_request",
                    "Repo id must be a string, not %s: %r." % (type(repo_id).__name__, repo_id))
    if repo_id.count("/") > 1:
        raise _make("HFValidationError", "bad_request",
                    "Repo id must be in the form 'repo_name' or 'namespace/repo_name': %r. Use "
                    "`repo_type` argument if needed." % repo_id)
    if (not repo_id or len(repo_id) > REPO_ID_MAX
            or not all(_PART.match(p) for p in repo_id.split("/"))):
        raise _make("HFValidationError", "bad_request",
                    "Repo id must use alphanumeric chars, '-', '_' or '.'. The name cannot start "
                    "or end with '-' or '.' and the maximum length is %d: %r."
                    % (REPO_ID_MAX, repo_id))
    if "--" in repo_id or ".." in repo_id:
        raise _make("HFValidationError", "bad_request", "Cannot have -- or .. in repo_id: %r."
                    % repo_id)
    if repo_id.endswith(".git"):
        raise _make("HFValidationError", "bad_request", "Repo_id cannot end in `.git`: %r."
                    % repo_id)


def make_dry_run_error(msg):
    """huggingface_hub's DryRunError (and hubd's), code ``dry_run``."""
    return _make("DryRunError", "dry_run", msg)


# ---- hubd's codes to the classes ----------------------------------------------

_LOCAL = {c.__name__: c for c in (HfHubHTTPError, RepositoryNotFoundError, GatedRepoError,
                                  RevisionNotFoundError, EntryNotFoundError,
                                  RemoteEntryNotFoundError, LocalEntryNotFoundError,
                                  HFValidationError, DryRunError)}
# The Hub's X-Error-Code, first on an http_NNN message ("GatedRepo: ...").
_BY_HUB_CODE = {"RepoNotFound": "RepositoryNotFoundError", "GatedRepo": "GatedRepoError",
                "RevisionNotFound": "RevisionNotFoundError",
                "EntryNotFound": "RemoteEntryNotFoundError"}
_HUB_CODE = re.compile(r"^([A-Za-z]+): ")
_HTTP = re.compile(r"^http_[0-9]{3}$")
_combined = {}   # huggingface_hub's class -> the class raised for it


def _hf_class(name):
    """huggingface_hub's class of that name (RemoteEntryNotFoundError: its
    EntryNotFoundError before 1.0), or None when it cannot be imported."""
    import importlib
    for mod in ("huggingface_hub.errors", "huggingface_hub.utils"):
        try:
            m = importlib.import_module(mod)
        except Exception:  # not installed, or broken: hubd's classes
            continue
        cls = getattr(m, name, None)
        if cls is None and name == "RemoteEntryNotFoundError":
            cls = getattr(m, "EntryNotFoundError", None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return cls
    return None


def _init(self, code, msg, url=None, server_message=None):
    """The run-time classes' __init__: HubdError's (huggingface_hub's needs
    a response), then huggingface_hub's attributes."""
    HubdError.__init__(self, code, msg, url)
    self.response = None
    self.request_id = None
    self.server_message = server_message
    try:
        self.request = None  # httpx's HTTPError: a property, unset it raises
    except Exception:
        pass


def _runtime_class(hf_cls, local_cls):
    cls = _combined.get(hf_cls)
    if cls is None:
        ns = {"__init__": _init, "__module__": __name__, "__qualname__": hf_cls.__name__,
              "__doc__": hf_cls.__doc__}
        for bases in ((hf_cls, local_cls), (hf_cls, HubdError)):
            try:
                cls = type(hf_cls.__name__, bases, ns)
                break
            except TypeError:  # an MRO or layout that cannot be merged
                continue
        else:
            cls = local_cls
        _combined[hf_cls] = cls
    return cls


def _make(name, code, msg, url=None, server_message=None):
    """An instance of huggingface_hub's class name (and of hubd's) when
    huggingface_hub imports, else of hubd's class name."""
    local_cls = _LOCAL[name]
    hf_cls = _hf_class(name)
    if hf_cls is not None:
        try:
            return _runtime_class(hf_cls, local_cls)(code, msg, url, server_message)
        except Exception:
            pass
    e = local_cls(code, msg, url)
    e.server_message = server_message
    return e


def convert(err, repo_id=None, repo_type=None):
    """err (a HubdError from hubd/hf.py) as huggingface_hub raises it: an
    instance of the class for its code (the module doc), or err itself."""
    if isinstance(err, tuple(_LOCAL.values())) or not isinstance(err, HubdError):
        return err
    code, msg = err.code or "", err.msg or ""
    if code == "offline_not_cached" or getattr(err, "not_cached", False):
        name = "LocalEntryNotFoundError"
    elif _HTTP.match(code):
        m = _HUB_CODE.match(msg)
        name = _BY_HUB_CODE.get(m.group(1)) if m else None
        if name is None:
            # hf_raise_for_status: a 401 on a repo's URL is RepositoryNotFoundError
            name = "RepositoryNotFoundError" if code == "http_401" else "HfHubHTTPError"
    else:
        return err
    m = _HUB_CODE.match(msg)
    server = msg[m.end():] if m and _HTTP.match(code) else msg
    new = _make(name, code, msg, err.url, server)
    if isinstance(new, HfHubHTTPError):
        try:
            new.repo_id, new.repo_type = repo_id, repo_type or "model"
        except Exception:
            pass
    return new
