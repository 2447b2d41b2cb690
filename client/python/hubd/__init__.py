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

Which socket (hubd/_conn.py): ``$HUBD_SOCKET`` if set (and nothing
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

Layout: this file holds the public functions (``fetch``, ``cancel``, and
torch.hub's ``download_url_to_file`` and ``patch_torch_hub``); the rest is
in private modules, each with its contract in its doc: ``_errors.py``
(HubdError), ``_codec.py`` (the line codec), ``_conn.py`` (which socket,
the session), ``_fetchreq.py`` (one FETCH), ``_interrupt.py`` (Ctrl-C),
``_progress.py`` (the bar), ``_trust.py`` (whom to send to); ``hf.py`` and
the ``_hf*.py`` modules for huggingface_hub.
"""

import errno
import os
import shutil
import tempfile
import uuid

__all__ = ["HubdError", "HubdFallbackWarning", "fetch", "cancel", "download_url_to_file",
           "patch_torch_hub", "hf_hub_download", "snapshot_download", "HfHubHTTPError",
           "RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError",
           "EntryNotFoundError", "RemoteEntryNotFoundError", "LocalEntryNotFoundError",
           "HFValidationError", "DryRunError", "DryRunFileInfo"]
# Before the modules below are imported: _fetchreq.py and _hfsession.py
# send it in HELLO.
__version__ = "0.1.0"

# Where the system daemon and the machine's client settings are. Read from
# here at each call (hubd/_conn.py), so setting hubd.SYSTEM_SOCKET still works.
SYSTEM_SOCKET = "/run/hubd/hubd.sock"
CLIENT_CONF = "/etc/hubd/client.conf"

# The machinery's names stay importable as hubd.NAME: hubd/hf.py and the
# _hf*.py modules import some with `from . import`, and callers and tests
# reach some by that name. Only SYSTEM_SOCKET, CLIENT_CONF and _fetch are
# looked up here when used: patching another private name here does not
# reach the module that uses it (patch it there).
from ._errors import _CODE_TEXT, _NO_SPACE_NOTE, HubdError, HubdFallbackWarning  # noqa: F401,E402
from ._codec import (FETCH_ID, FIELDS_MAX, LINE_MAX, URL_MAX,  # noqa: F401,E402
                     _build_line, _encode_value, _parse_line)
from ._conn import (_ANSWER_TIMEOUT, _CONNECT_TIMEOUT, _FDS_PER_READ,  # noqa: F401,E402
                    _READ_SIZE, _START_TIMEOUT, _Conn, _answer_timeout, _check_blob_fd,
                    _connect, _hubctl_start, _open_conn, _refused_hint, _service_hint,
                    _system_socket, _system_unit_installed, _try_connect, _user_daemon_off,
                    _user_socket, _why)
from ._progress import _TextBar, _TqdmBar, _fmt_bytes, _make_bar  # noqa: F401,E402
from ._interrupt import _INTERRUPT_ID, _INTERRUPT_WAIT, _interrupted, _size_text  # noqa: F401,E402
from ._fetchreq import _Done, _fetch, _fetch_line  # noqa: F401,E402

_COPY_CHUNK = 1 << 20


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
# end: hf.py and its modules import names above from here (the codec, the
# session, _copy_range).
from .hf import DryRunFileInfo, hf_hub_download, snapshot_download  # noqa: E402
# huggingface_hub's exception classes, as those two raise them (hubd/_hferrors.py).
from ._hferrors import (DryRunError, EntryNotFoundError, GatedRepoError,  # noqa: E402
                        HFValidationError, HfHubHTTPError, LocalEntryNotFoundError,
                        RemoteEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)
