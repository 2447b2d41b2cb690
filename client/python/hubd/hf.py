"""huggingface_hub's ``hf_hub_download`` and ``snapshot_download``, through hubd.

    import hubd
    path = hubd.hf_hub_download("org/name", "config.json")        # .../snapshots/{commit}/config.json
    folder = hubd.snapshot_download("org/name", allow_patterns="*.json")
    hubd.snapshot_download("org/data", repo_type="dataset", local_dir="data")

They take huggingface_hub's arguments and return the same paths, and they
write huggingface_hub's cache (or its ``local_dir`` layout) exactly, so that
huggingface_hub, transformers and @huggingface/hub find every file there and
download nothing. Every byte comes through hubd, as ``hubctl hf download``
does it:

- ``HFREPO`` asks hubd for the repo's file list at the revision (hubd asks
  the Hub's API with the token); ``REPO`` answers with the commit and a
  descriptor of one line per file (path, size, git blob id, LFS sha256).
- The files not already there are fetched with ``FETCH`` of their
  ``resolve/{commit}/`` URL (the token as ``header=Authorization: Bearer``;
  the LFS sha256 as ``sha256=``), pipelined on one session, at most
  ``max_workers`` (8) at once. A small file's bytes are checked against its git blob id (SHA-1 of
  ``blob N\\0`` + bytes, read from the passed descriptor by offset) before
  anything is placed.
- ``blobs/{etag}`` (etag: the LFS sha256, else the git blob id) is, in this
  order: kept when it opens for reading (a link whose read grant is gone
  is fetched and held again); a symlink into hubd's store once ``HOLD``
  answered ``readable=1`` (the blob is public, or hubd granted this uid a
  read ACL; while the link stays hubd does not evict the blob); a reflink
  (FICLONE) from the descriptor; a copy (said once on stderr, with why).
  ``snapshots/{commit}/{path}`` is a relative symlink to it, and
  ``refs/{revision}`` holds the commit when the revision is not the commit.
- With ``local_dir``: plain files (reflink, else copy) and
  ``{local_dir}/.cache/huggingface/download/{path}.metadata`` (commit, etag,
  time), as ``hf download --local-dir`` writes them, each under an O_EXCL
  temp name then renamed; a re-run with the same commit or etag and a file
  not modified since is a no-op. A Hub file under ``.cache/huggingface/``
  is refused there (``bad_request``), as is, anywhere, a name with a
  control byte, a backslash or an empty, ``.`` or ``..`` part.
- A file already in place is not fetched again (``N files already in the
  cache`` on stderr from snapshot_download).
- The cache folder or ``local_dir`` is the root the caller named, resolved
  as any path is; every folder below it (``{type}s--{org}--{name}`` and all
  under it; the local dir's sub folders and ``.cache/``) is opened one name
  at a time from its parent's descriptor with ``O_NOFOLLOW``, made first
  with ``mkdir(dir_fd=)`` when missing, and must belong to the running
  user. A link there, or another user's folder, raises ``unsafe_folder``
  naming it, and nothing is written through it: in a shared cache or
  local dir another user could otherwise plant ``sub -> ~victim/dir``
  (hubd/_hfdir.py). Every file is then made, renamed, linked by its name
  in that folder's descriptor.

Where the cache is: ``cache_dir``; else ``$HF_HUB_CACHE``; else
``$HF_HOME/hub``; else ``$XDG_CACHE_HOME/huggingface/hub``; else
``~/.cache/huggingface/hub``. The token: ``token`` (a str); else
``$HF_TOKEN``; else the file ``$HF_TOKEN_PATH``, else ``$HF_HOME/token``
(default ``~/.cache/huggingface/token``); ``token=False`` sends none.

With ``HF_HUB_OFFLINE`` set (``1``, ``on``, ``yes`` or ``true``, any case;
else ``TRANSFORMERS_OFFLINE``), as huggingface_hub then: no connection to
hubd at all, only what is on disk. A revision that is a commit is taken as
it is, else ``refs/{revision}`` names the commit; hf_hub_download returns
``snapshots/{commit}/{filename}`` if it exists and resolves (with
``local_dir``: ``{local_dir}/{filename}`` if it is a file), snapshot_download
the folder ``snapshots/{commit}`` if it exists (with ``local_dir``: that
folder, if it holds anything); anything else raises ``offline_not_cached``.

When the Hub gives no answer (hubd answers HFREPO with ``dns``, ``connect``,
``timeout``, ``tls``, ``truncated``, ``proxy``, ``http_408``, ``http_429`` or
``http_5NN``), they answer what HF_HUB_OFFLINE would, as huggingface_hub
falls back on its cache, and say so once (a warning logged on
``hubd._hfcache`` and a ``hubd: note: cannot reach the Hub (...)`` line on
stderr); when that is not cached either, hubd's error is raised, its
message saying so ("cannot reach the Hub (...) and model org/x at revision
main is not in the cache ..."). The Hub's 401, 403 and 404 are answers and
raise as always. A file whose FETCH gets such a code, the listing having
come, is answered by its copy at that commit on disk if there is one (a
``local_dir`` file changed since). hf_hub_download with a commit as the
revision returns the cached file without asking anything.

Errors raise :class:`hubd.HubdError` with hubd's code and message: the
Hub's refusals as ``http_NNN`` with the Hub's ``X-Error-Code: message``
(e.g. ``http_403`` ``GatedRepo: Access to model org/x is restricted...``),
wrong bytes as ``hash_mismatch`` (nothing is placed for that file), a name
that is not in the repo (hf_hub_download) as ``http_404`` ``EntryNotFound``.
The Hub's refusals, a file or snapshot not cached (offline, or the Hub not
answering) and a bad repo id are raised as huggingface_hub's exception
classes (``RepositoryNotFoundError``, ``GatedRepoError``,
``RevisionNotFoundError``, ``RemoteEntryNotFoundError`` /
``EntryNotFoundError``, ``HfHubHTTPError``, ``LocalEntryNotFoundError``,
``HFValidationError``), huggingface_hub's own when it can be imported,
each a :class:`hubd.HubdError` with its code all the same
(hubd/_hferrors.py).
"""

import fnmatch
import os
import stat
import sys
import time

from . import HubdError, LINE_MAX, _build_line, _check_blob_fd, _fetch_line, _interrupted
from ._hfcache import (REPO_TYPES, _HEX40, _cache_dir, _from_cache, _is_outage, _offline,  # noqa: F401
                       _offline_lookup, _outage_note, _repo_args, _repo_folder, _safe_rel, _token)
from ._hfdir import folder as _folder, open_folder as _open_folder
from ._hfplace import (git_blob_sha1 as _git_blob_sha1, readable as _readable,
                       readable_at as _readable_at, say_copy as _say_copy,
                       symlink_over as _symlink_over, write_atomic as _write_atomic,
                       write_from_fd as _write_from_fd)
from ._hfsession import Session as _Session, list_repo as _list_repo, quote_path as _quote_path
from . import _hferrors, _hfopts, _hfprogress
from ._hfopts import DryRunFileInfo
from ._hferrors import (DryRunError, EntryNotFoundError, GatedRepoError,  # noqa: F401
                        HFValidationError, HfHubHTTPError, LocalEntryNotFoundError,
                        RemoteEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError)

__all__ = ["hf_hub_download", "snapshot_download", "DryRunFileInfo"] + _hferrors.__all__

MAX_IN_FLIGHT = 8          # FETCHes pipelined on the session at once, by default (max_workers)
SESSION_FETCHES = 64       # hubd's bound of a session's waiting FETCHes
_META = ".cache/huggingface"  # local_dir's metadata folder
_META_DIRS = [".cache", "huggingface", "download"]  # its download/ folder, by name
# What a user of a shared cache does when another user made the repo folder.
_OWN_CACHE = ("use an HF cache folder of your own (cache_dir= or HF_HUB_CACHE): its blobs are "
              "links into hubd's store, not a second copy")


def _is_meta(path):
    """Is a Hub file's path .cache/huggingface or under it, where local_dir
    keeps its metadata (another file's would be overwritten)?"""
    return path == _META or path.startswith(_META + "/")


def _add_wildcard(pattern):
    return pattern + "*" if pattern.endswith("/") else pattern


def filter_repo_files(paths, allow_patterns=None, ignore_patterns=None):
    """huggingface_hub's filter_repo_objects: fnmatch (``*`` matches ``/``
    too), a pattern that ends in ``/`` means everything under it; a str is a
    list of one."""
    if isinstance(allow_patterns, str):
        allow_patterns = [allow_patterns]
    if isinstance(ignore_patterns, str):
        ignore_patterns = [ignore_patterns]
    if allow_patterns is not None:
        allow_patterns = [_add_wildcard(p) for p in allow_patterns]
    if ignore_patterns is not None:
        ignore_patterns = [_add_wildcard(p) for p in ignore_patterns]
    for p in paths:
        if allow_patterns is not None and not any(fnmatch.fnmatch(p, a) for a in allow_patterns):
            continue
        if ignore_patterns is not None and any(fnmatch.fnmatch(p, i) for i in ignore_patterns):
            continue
        yield p


# ---- one call --------------------------------------------------------------------

class _Want:
    """One blob to fetch, and the repo files that have it."""

    def __init__(self, f, url):
        self.file = f
        self.files = [f]
        self.url = url
        self.fd = None
        self.done = 0
        self.rate = 0


class _Run:
    """One call: the listing, what is present, the fetches and the placing."""

    def __init__(self, repo_id, repo_type, revision, token, cache_dir, local_dir, opts):
        repo_type, self.revision = _repo_args(repo_id, repo_type, revision)
        self.repo_id, self.repo_type = repo_id, repo_type
        self.o = opts  # the call's other arguments (_Opts)
        tok = _token(token)
        if tok is not None and any(c in tok for c in "\r\n\0"):
            raise HubdError("bad_request", "the token holds a line break or NUL")
        self.headers = _hfopts.request_headers(tok, opts.headers)
        self.local_dir = os.fspath(local_dir) if local_dir is not None else None
        self.top = _cache_dir(cache_dir)  # the root named, with local_dir its own
        self.repo_folder = _repo_folder(repo_id, repo_type)
        self.storage = os.path.join(self.top, self.repo_folder)
        self.label = "%ss/%s@%s" % (repo_type, repo_id, self.revision)
        self.present = 0
        self.told_outage = False  # a file answered from the cache was said
        self.sess = None
        self.prog = None          # the progress drawn (_hfprogress), or None

    def __enter__(self):
        self.check_folders()
        self.sess = _Session()
        try:
            # Which Hub hubd asks, before anything is asked of it.
            _hfopts.Hub(self.sess.wait_hello()).check(self.o.endpoint)
        except BaseException:
            self.sess.close()
            raise
        return self

    def check_folders(self):
        """The folders already there that every run writes in (the repo
        folder's, or local_dir's .cache/huggingface/download), walked before
        hubd is asked anything: HubdError unsafe_folder for a link or
        another user's. A missing one is no error."""
        hint = None
        if self.local_dir is not None:
            root, walks = self.local_dir, [_META_DIRS[:n] for n in (1, 2, 3)]
        else:
            root, walks = self.top, [[self.repo_folder]] + [
                [self.repo_folder, sub] for sub in ("refs", "blobs", "snapshots")]
            hint = _OWN_CACHE
        for names in walks:
            try:
                os.close(_open_folder(root, names, False, hint))
            except HubdError:
                raise
            except OSError:
                pass  # missing, or unreadable: the writes say so

    def folder(self, names, create=True):
        """_folder of names below the repo folder (the cache), or below
        local_dir."""
        if self.local_dir is not None:
            return _folder(self.local_dir, names, create)
        return _folder(self.top, [self.repo_folder] + names, create)

    def there(self, names, name):
        """Does names/name (below the repo folder, or local_dir) open for
        reading? A folder missing on the way: no; refused: HubdError."""
        try:
            with self.folder(names, False) as d:
                return _readable_at(d, name)
        except HubdError:
            raise
        except OSError:
            return False

    def __exit__(self, *exc):
        self.sess.close()

    def list(self):
        """HFREPO into self.commit, self.files, self.resolve. Returns None,
        or the HubdError of a Hub that gave no answer (the caller answers
        from the cache); raises any other. With force_download, to
        hf_hub_download, the Hub must answer (as huggingface_hub's)."""
        timeout = self.o.etag_timeout
        deadline = time.monotonic() + timeout if timeout is not None else None
        try:
            self.commit, self.files, self.resolve = _list_repo(
                self.sess, self.repo_id, self.repo_type, self.revision, self.headers, deadline,
                self.slow)
        except HubdError as e:
            if not _is_outage(e.code) or self.o.strict:
                raise
            return e
        return None

    def slow(self):
        """etag_timeout passed without the listing: a HubdError timeout
        when the cache has the answer (given instead), else the wait goes
        on (huggingface_hub retries then, with a longer timeout)."""
        if self.o.strict:
            return
        try:
            _offline_lookup(self.repo_id, self.repo_type, self.revision, self.top,
                            self.local_dir, self.o.filename)
        except HubdError:
            return
        raise HubdError("timeout", "the Hub's file list did not come within etag_timeout=%g s"
                        % self.o.etag_timeout)

    # -- the HF cache --
    def blob_path(self, f):
        return os.path.join(self.storage, "blobs", f.etag)

    def snap_path(self, f):
        return os.path.join(self.storage, "snapshots", self.commit, *f.path.split("/"))

    def blob_there(self, f):
        return self.there(["blobs"], f.etag)

    def snap_there(self, f):
        parts = f.path.split("/")
        return self.there(["snapshots", self.commit] + parts[:-1], parts[-1])

    def link_snapshot(self, f):
        parts = f.path.split("/")
        with self.folder(["snapshots", self.commit] + parts[:-1]) as d:
            _symlink_over("../" * (2 + f.path.count("/")) + "blobs/" + f.etag, d, parts[-1])

    def write_ref(self):
        if self.revision == self.commit:
            return
        parts = self.revision.split("/")
        with self.folder(["refs"] + parts[:-1]) as d:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                             dir_fd=d)
                with os.fdopen(fd) as r:
                    if r.read() == self.commit:
                        return
            except (OSError, ValueError):
                pass
            _write_atomic(d, parts[-1], self.commit)

    # -- local_dir --
    def local_ready(self):
        with self.folder(_META_DIRS):
            pass
        with self.folder(_META_DIRS[:2]) as hf:
            try:  # kept when it is a file; a link in its place is replaced
                keep = stat.S_ISREG(os.stat(".gitignore", dir_fd=hf, follow_symlinks=False).st_mode)
            except OSError:
                keep = False
            if not keep:
                _write_atomic(hf, ".gitignore", "*")

    def meta_names(self, f):
        """(folders, name) of f's metadata below local_dir."""
        parts = f.path.split("/")
        return _META_DIRS + parts[:-1], parts[-1] + ".metadata"

    def local_present(self, f, write=True):
        """Is f in local_dir as the metadata says (write: the metadata of
        the same bytes at a new commit is brought up to date)?"""
        parts = f.path.split("/")
        names, name = self.meta_names(f)
        try:
            with self.folder(names, False) as d:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                             dir_fd=d)
            with os.fdopen(fd) as m:
                commit, etag, stamp = m.readline().strip(), m.readline().strip(), float(m.readline())
            with self.folder(parts[:-1], False) as d:
                if os.stat(parts[-1], dir_fd=d).st_mtime > stamp:
                    return False
        except HubdError:
            raise
        except (OSError, ValueError):
            return False
        if commit == self.commit:
            return True
        if etag == f.etag:
            if write:
                self.write_meta(f)  # the same bytes at a new commit
            return True
        return False

    def write_meta(self, f):
        names, name = self.meta_names(f)
        with self.folder(names) as d:
            _write_atomic(d, name, "%s\n%s\n%s\n" % (self.commit, f.etag, time.time()))

    # -- what to fetch --
    def plan(self, files):
        """The _Wants for the files not already in place (one per etag);
        files already there are linked or counted."""
        wants = {}
        if self.local_dir is not None:
            for f in files:
                if _is_meta(f.path):
                    raise HubdError("bad_request", "the Hub names a file %r in %s, where local_dir "
                                    "keeps its metadata: leave it out (ignore_patterns=\".cache/*\")"
                                    % (f.path, _META))
            self.local_ready()
        for f in files:
            if self.o.force:
                pass  # fetched again, and placed over what is there
            elif self.local_dir is not None:
                if self.local_present(f):
                    self.present += 1
                    continue
            elif self.snap_there(f):
                self.present += 1
                continue
            elif self.blob_there(f):  # another revision's, or an earlier run's
                self.link_snapshot(f)
                self.present += 1
                continue
            if f.etag in wants:
                wants[f.etag].files.append(f)
            else:
                wants[f.etag] = _Want(f, self.resolve + _quote_path(f.path))
        return list(wants.values())

    def dry_run(self, files):
        """huggingface_hub's DryRunFileInfo of each file: nothing written."""
        out = []
        for f in files:
            if self.local_dir is not None:
                cached = self.local_present(f, write=False)
                where = os.path.join(self.local_dir, *f.path.split("/"))
            else:
                cached = self.snap_there(f) or self.blob_there(f)
                where = self.snap_path(f)
            out.append(_hfopts.dry_run_info(
                commit_hash=self.commit, file_size=f.size, filename=f.path, local_path=where,
                is_cached=cached, will_download=self.o.force or not cached))
        return out

    def fetch_all(self, wants):
        """FETCHes wants, at most max_workers at once, and places each as
        its DONE (and HELD) come; self.prog shows them."""
        queue = list(reversed(wants))
        running = {}   # id -> _Want waiting for DONE
        holding = {}   # id -> _Want waiting for HELD
        prog = self.prog
        hdrs = dict(h.split(": ", 1) for h in self.headers)
        try:
            while queue or running or holding:
                while queue and len(running) < self.o.max_workers:
                    w = queue.pop()
                    rid = self.sess.new_id("f")
                    self.sess.send(_fetch_line(w.url, w.file.sha256, hdrs, refresh=self.o.force,
                                               rid=rid))
                    running[rid] = w
                    if prog:
                        prog.start(rid, w.file.path, w.file.size)
                verb, f, fd = self.sess.reply()
                rid = f["id"]
                if rid is None:  # id-less ERR: only a HOLD (an older hubd's) can get one
                    if not holding:
                        raise HubdError(f.get("code", "protocol"), f.get("msg"))
                    rid = next(iter(holding))
                if rid in running:
                    w = running[rid]
                    if verb == "ERR":
                        if fd is not None:
                            os.close(fd)
                        err = HubdError(f.get("code", "protocol"), f.get("msg"), w.url)
                        if not self.cached_instead(w, err):
                            raise err
                        del running[rid]
                        if prog:
                            prog.finish(rid, w.file.size)
                            prog.file_done(len(w.files))
                        continue
                    if verb == "PROGRESS":
                        if prog:
                            prog.update(rid, int(f.get("done", 0)))
                        continue
                    if verb != "DONE":
                        continue
                    del running[rid]
                    w.fd = fd
                    self.check(w, f)
                    if prog:
                        prog.finish(rid, w.file.size)
                        prog.file_done(len(w.files))
                    hold = None
                    if self.local_dir is None and (self.o.force or not self.blob_there(w.file)):
                        hid = self.sess.new_id("h")
                        hold = _build_line("HOLD", [
                            ("id", hid), ("sha256", f["sha256"].lower()), ("label", self.label),
                            ("link", os.path.abspath(self.blob_path(w.file)))])
                    if hold and len(hold) <= LINE_MAX and len(self.label.encode()) <= 512:
                        self.sess.send(hold)
                        holding[hid] = w
                    else:  # local_dir, a blob placed meanwhile, or a hold that cannot be asked
                        self.place(w, None)
                elif rid in holding:
                    if fd is not None:
                        os.close(fd)
                    if verb not in ("HELD", "ERR"):
                        continue
                    w = holding.pop(rid)
                    self.place(w, f if verb == "HELD" else dict(f, readable="0", err=True))
        except BaseException as e:
            if prog:
                prog.fail()
                self.prog = None
            if isinstance(e, KeyboardInterrupt):
                _interrupted(self.sess.conn)  # each download stops, or goes on for others
            for w in list(running.values()) + list(holding.values()):
                if w.fd is not None:
                    os.close(w.fd)
                    w.fd = None
            raise

    def cached_instead(self, w, err):
        """A FETCH that got err: when the Hub gave no answer and each of w's
        files is on disk at this commit as HF_HUB_OFFLINE finds a file (a
        local_dir file changed since, say), that copy answers, said once."""
        if not _is_outage(err.code):
            return False
        for f in w.files:
            try:
                _offline_lookup(self.repo_id, self.repo_type, self.commit, self.top,
                                self.local_dir, f.path)
            except HubdError:
                return False
        if not self.told_outage:
            self.told_outage = True
            _outage_note(err, self.top, self.local_dir)
        return True

    def check(self, w, f):
        """The DONE's blob is the file's bytes, or HubdError (nothing placed)."""
        x = w.file
        try:
            if w.fd is None:
                raise HubdError("protocol", "hubd sent no descriptor with DONE", w.url)
            size = int(f.get("size", -1))
            if size != x.size:
                raise HubdError("hash_mismatch", "%s: the Hub listed %d bytes, hubd got %d"
                                % (x.path, x.size, size), w.url)
            _check_blob_fd(w.fd, size, w.url)
            if x.sha256:
                if f.get("sha256", "").lower() != x.sha256:
                    raise HubdError("hash_mismatch", "%s: expected sha256 %s, hubd answered %s"
                                    % (x.path, x.sha256, f.get("sha256")), w.url)
            else:
                got, n = _git_blob_sha1(w.fd, size)
                if n != size or got != x.blob:
                    raise HubdError("hash_mismatch", "%s: the git blob id of the bytes is %s, the "
                                    "Hub lists %s" % (x.path, got, x.blob), w.url)
        except BaseException:
            if w.fd is not None:
                os.close(w.fd)
                w.fd = None
            raise

    def place(self, w, held):
        """Puts w's bytes where its files go (held: HOLD's answer, or None)
        and closes its fd."""
        try:
            if self.local_dir is not None:
                for f in w.files:
                    parts = f.path.split("/")
                    with self.folder(parts[:-1]) as d, self.folder(self.meta_names(f)[0]) as m:
                        # the temp file in the metadata folder, as huggingface_hub's
                        why = _write_from_fd(w.fd, f.size, d, parts[-1], m)
                    if why:  # as hubctl says it: local_dir files are plain
                        _say_copy(self.local_dir, "this file system makes no " + why)
                    self.write_meta(f)
                return
            etag = w.file.etag
            with self.folder(["blobs"]) as blobs:
                if self.o.force or not _readable_at(blobs, etag):
                    store = held.get("path") if held else None
                    if (held and held.get("readable") == "1" and store
                            and os.access(store, os.R_OK)):
                        _symlink_over(store, blobs, etag)
                    else:
                        why = _write_from_fd(w.fd, w.file.size, blobs, etag)
                        if why:
                            if held is None or held.get("err"):
                                grant = "no hold (%s)" % (held.get("msg") or held.get("code")
                                                           if held else "not asked")
                            else:
                                grant = ("hubd could grant no read access to its copy "
                                         "(HELD readable=0)")
                            _say_copy(os.path.join(self.storage, "blobs"),
                                      "%s, and %s" % (grant, why))
            for f in w.files:
                self.link_snapshot(f)
        finally:
            os.close(w.fd)
            w.fd = None

    def say_present(self):
        if self.present and not _hfprogress.progress_off():
            sys.stderr.write("hubd: %d file%s already in the cache\n"
                             % (self.present, "" if self.present == 1 else "s"))


# ---- the two functions ------------------------------------------------------------

class _Opts:
    """A call's arguments beyond the repo and where it goes (hubd/_hfopts.py)."""

    def __init__(self, filename, headers, force, etag_timeout, endpoint, max_workers, strict):
        self.filename = filename  # hf_hub_download's file, None for a snapshot
        self.headers = headers
        self.force = bool(force)
        self.etag_timeout = _hfopts.etag_timeout(etag_timeout)
        self.endpoint = endpoint
        if max_workers is None or int(max_workers) < 1:
            raise ValueError("max_workers must be at least 1, not %r" % (max_workers,))
        # hubd keeps a session's 64 waiting FETCHes; more would wait there
        self.max_workers = min(int(max_workers), SESSION_FETCHES)
        self.strict = strict      # no answer from the cache when the Hub gives none


def _raise_as_hf(err, repo_id, repo_type):
    """Raises err as huggingface_hub would (hubd/_hferrors.py), with err's
    traceback and cause."""
    new = _hferrors.convert(err, repo_id, repo_type)
    if new is err:
        raise err
    raise new.with_traceback(err.__traceback__) from err.__cause__


def _local_only(local_files_only):
    """Why the call stays on disk (local_files_only, HF_HUB_OFFLINE), or None."""
    if local_files_only:
        return "local_files_only=True"
    return "HF_HUB_OFFLINE is set" if _offline() else None


def _dry_found(path, filename, commit, force):
    """A file found on disk as a DryRunFileInfo (its commit as known)."""
    return _hfopts.dry_run_info(commit_hash=commit, file_size=os.path.getsize(path),
                                filename=filename, local_path=path, is_cached=True,
                                will_download=force)


def _commit_of(path, filename):
    """The commit of a snapshot path .../snapshots/{commit}/{filename}."""
    parts = path.split(os.sep)
    n = len(filename.split("/"))
    return parts[-n - 1] if len(parts) > n and _HEX40.match(parts[-n - 1]) else None


def hf_hub_download(repo_id, filename, *, subfolder=None, repo_type=None, revision=None,
                    library_name=None, library_version=None, cache_dir=None, local_dir=None,
                    user_agent=None, force_download=False,
                    etag_timeout=_hfopts.DEFAULT_ETAG_TIMEOUT, token=None,
                    local_files_only=False, headers=None, endpoint=None, tqdm_class=None,
                    dry_run=False):
    """huggingface_hub's ``hf_hub_download`` through hubd.

    Returns the file's path in the HF cache,
    ``{cache}/{type}s--{org}--{name}/snapshots/{commit}/{filename}`` (a
    symlink to ``../../blobs/{etag}``), or with ``local_dir`` the plain file
    ``{local_dir}/{filename}``. ``repo_type``: "model" (default), "dataset"
    or "space"; ``revision``: a branch, tag, commit or ``refs/pr/N``
    (default "main"); ``subfolder``: a folder of the repo the filename is
    in; ``token``: see the module doc; ``cache_dir`` and ``local_dir`` as
    huggingface_hub's. A file already in place is not fetched again, unless
    ``force_download``: then it is fetched again (hubd revalidates its own
    copy with the Hub, ``refresh=1``) and placed over it, and the Hub must
    answer (no answer from the cache). ``local_files_only``: as
    ``HF_HUB_OFFLINE`` for this call (below). ``headers``, ``user_agent``,
    ``etag_timeout``, ``endpoint`` (hubd's Hub or a ``ValueError``) and
    ``HF_ENDPOINT``: hubd/_hfopts.py. ``tqdm_class``: its progress bar
    (hubd/_hfprogress.py). ``dry_run``: a :class:`DryRunFileInfo` of what
    would be done, and nothing is fetched or written.
    Raises :class:`hubd.HubdError` (``http_404``
    ``EntryNotFound`` when the repo has no such file at that revision).
    With ``HF_HUB_OFFLINE`` set, hubd is not asked: the cached file (found
    as huggingface_hub's ``try_to_load_from_cache`` finds it: ``refs/``,
    then ``snapshots/{commit}/{filename}``), or with ``local_dir`` the local
    file, is returned, else ``offline_not_cached`` is raised.

    The errors are huggingface_hub's classes (hubd/_hferrors.py), each a
    :class:`hubd.HubdError` too: ``RepositoryNotFoundError``,
    ``GatedRepoError``, ``RevisionNotFoundError``,
    ``RemoteEntryNotFoundError`` (an ``EntryNotFoundError``),
    ``HfHubHTTPError``, ``LocalEntryNotFoundError`` (offline or the Hub not
    answering, and not cached), ``HFValidationError`` (a bad repo id).
    """
    _hferrors.validate_repo_id(repo_id)
    if subfolder:
        filename = "%s/%s" % (subfolder, os.fspath(filename))
    opts = _Opts(None, headers, force_download, etag_timeout, endpoint, 1, force_download)
    try:
        return _hf_hub_download(repo_id, filename, repo_type, revision, token, cache_dir,
                                local_dir, opts, local_files_only, tqdm_class, dry_run)
    except HubdError as e:
        _raise_as_hf(e, repo_id, repo_type)


def _hf_hub_download(repo_id, filename, repo_type, revision, token, cache_dir, local_dir, opts,
                     local_files_only, tqdm_class, dry_run):
    filename = opts.filename = _safe_rel(os.fspath(filename), "file name")
    why = _local_only(local_files_only)
    if why:
        if opts.force:  # as huggingface_hub
            raise ValueError("Cannot pass 'force_download=True' and 'local_files_only=True' at "
                             "the same time." if local_files_only else "Cannot pass "
                             "'force_download=True' when offline mode is enabled.")
        found = _offline_lookup(repo_id, repo_type, revision, cache_dir, local_dir, filename, why)
        return _dry_found(found, filename, _commit_of(found, filename), False) if dry_run else found
    if (local_dir is None and not opts.force and revision is not None
            and _HEX40.match(str(revision))):
        # As huggingface_hub: a commit's file already in the cache needs no question.
        known = os.path.join(_cache_dir(cache_dir), _repo_folder(repo_id, repo_type or "model"),
                             "snapshots", str(revision), *filename.split("/"))
        if _readable(known):
            return _dry_found(known, filename, str(revision), False) if dry_run else known
    with _Run(repo_id, repo_type, revision, token, cache_dir, local_dir, opts) as run:
        outage = run.list()
        if outage is None:
            files = [f for f in run.files if f.path == filename]
            if not files:
                raise HubdError("http_404", "EntryNotFound: %s does not exist in %s %s at "
                                "revision %s" % (filename, repo_type or "model", repo_id,
                                                 run.revision))
            if dry_run:
                return run.dry_run(files)[0]
            wants = run.plan(files)
            run.prog = _hfprogress.make(tqdm_class, None) if wants else None
            run.fetch_all(wants)
            if run.prog:
                run.prog.close()
            if run.local_dir is None:
                run.write_ref()
                return run.snap_path(files[0])
            return os.path.join(run.local_dir, *filename.split("/"))
    found = _from_cache(outage, repo_id, repo_type, revision, cache_dir, local_dir, filename)
    return _dry_found(found, filename, _commit_of(found, filename), False) if dry_run else found


def snapshot_download(repo_id, *, repo_type=None, revision=None, cache_dir=None, local_dir=None,
                      library_name=None, library_version=None, user_agent=None,
                      etag_timeout=_hfopts.DEFAULT_ETAG_TIMEOUT, force_download=False,
                      token=None, local_files_only=False, allow_patterns=None,
                      ignore_patterns=None, max_workers=MAX_IN_FLIGHT, tqdm_class=None,
                      headers=None, endpoint=None, dry_run=False):
    """huggingface_hub's ``snapshot_download`` through hubd.

    Fetches the repo's files at ``revision`` (those that ``allow_patterns``
    match and ``ignore_patterns`` do not: fnmatch patterns, a str or a list,
    ``"dir/"`` meaning ``"dir/*"``) into the HF cache and returns the
    snapshot folder ``{cache}/{type}s--{org}--{name}/snapshots/{commit}``;
    with ``local_dir``, writes plain files there and returns
    ``os.path.realpath(local_dir)``. ``max_workers``: the files fetched at
    once (FETCHes pipelined on the session, at most 64). ``dry_run``: a
    list of :class:`DryRunFileInfo`, one per file, nothing fetched or
    written (``DryRunError`` when the Hub cannot be asked). Other arguments
    as :func:`hf_hub_download`'s (``force_download`` fetches every file
    again; with the Hub not answering, the cache still answers, as
    huggingface_hub's). Files already in place are not fetched again (a
    re-run sends no FETCH and says on stderr how many were there).
    Raises :class:`hubd.HubdError`. With ``HF_HUB_OFFLINE`` set (or
    ``local_files_only``), hubd is not
    asked: the snapshot folder of the revision (``refs/{revision}`` names its
    commit), or a ``local_dir`` that holds anything, is returned as it is
    (the patterns are not checked), else ``offline_not_cached`` is raised.
    The errors as :func:`hf_hub_download`'s (``LocalEntryNotFoundError``
    for a snapshot not cached, as huggingface_hub).
    """
    _hferrors.validate_repo_id(repo_id)
    opts = _Opts(None, headers, force_download, etag_timeout, endpoint, max_workers, False)
    try:
        return _snapshot_download(repo_id, repo_type, revision, allow_patterns, ignore_patterns,
                                  token, cache_dir, local_dir, opts, local_files_only,
                                  tqdm_class, dry_run)
    except HubdError as e:
        _raise_as_hf(e, repo_id, repo_type)


def _no_dry_run(why):
    return _hferrors.make_dry_run_error(
        "Dry run cannot be performed as the repository cannot be accessed (%s)" % why)


def _snapshot_download(repo_id, repo_type, revision, allow_patterns, ignore_patterns, token,
                       cache_dir, local_dir, opts, local_files_only, tqdm_class, dry_run):
    why = _local_only(local_files_only)
    if why:
        if dry_run:
            raise _no_dry_run(why)
        return _offline_lookup(repo_id, repo_type, revision, cache_dir, local_dir, None, why)
    with _Run(repo_id, repo_type, revision, token, cache_dir, local_dir, opts) as run:
        outage = run.list()
        if outage is None:
            keep = set(filter_repo_files([f.path for f in run.files], allow_patterns,
                                         ignore_patterns))
            chosen = [f for f in run.files if f.path in keep]
            if dry_run:
                return run.dry_run(chosen)
            wants = run.plan(chosen)
            run.prog = _hfprogress.make(tqdm_class, len(chosen))
            if run.prog:
                run.prog.file_done(len(chosen) - sum(len(w.files) for w in wants))
            run.fetch_all(wants)
            if run.prog:
                run.prog.close()
            run.say_present()
            if run.local_dir is not None:
                return os.path.realpath(run.local_dir)
            run.write_ref()
            with run.folder(["snapshots", run.commit]):
                pass
            return os.path.join(run.storage, "snapshots", run.commit)
    if dry_run:
        raise _no_dry_run("%s: %s" % (outage.code, outage.msg)) from outage
    return _from_cache(outage, repo_id, repo_type, revision, cache_dir, local_dir)
