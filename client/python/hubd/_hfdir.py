"""The folders below a root the caller named (the HF cache folder, or
local_dir), opened without following a link: hubd/hf.py's counterpart of
hubctl's hf_dir.c, with the same rule and the same words.

The root is the caller's own word and is resolved as any path is, links in
it included. Below it each folder is opened one name at a time from its
parent's descriptor with O_NOFOLLOW | O_DIRECTORY (made first with
``os.mkdir(dir_fd=)`` when asked, then opened the same way), and must belong
to the running user (``st_uid == os.geteuid()``; root gets no exception).
In a shared cache or local dir another user could otherwise plant ``sub ->
~victim/dir``, and the victim's own run would write there with the victim's
rights. Callers then create, rename, link and unlink by one name relative to
the descriptor they get. A refusal raises HubdError ``unsafe_folder`` naming
the folder and why (a link, not a folder, owned by uid N).
"""

import contextlib
import errno
import os
import stat

from . import HubdError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _open_below(at, name, shown):
    """The folder name in the folder at, not followed if it is a link:
    HubdError unsafe_folder when it is one, or is not a folder."""
    try:
        return os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=at)
    except OSError as e:
        # a link under O_NOFOLLOW | O_DIRECTORY is ENOTDIR (or ELOOP)
        if e.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        try:
            st = os.stat(name, dir_fd=at, follow_symlinks=False)
        except OSError:
            raise e
        if stat.S_ISLNK(st.st_mode):
            raise HubdError("unsafe_folder", "refusing %s: it is a symbolic link; below the "
                            "cache folder or local_dir named, no link is followed" % shown)
        raise HubdError("unsafe_folder", "refusing %s: it is not a folder" % shown)


def open_folder(root, names, create, hint=None):
    """The descriptor of the folder root/names[0]/names[1]/...: the root as
    the caller named it (links in its path followed, made when create);
    each name below it opened from its parent's descriptor without
    following a link, made first when create and missing, and the running
    user's (HubdError unsafe_folder names a link, a file, or another user's
    folder; hint, when given, is added to the last). FileNotFoundError when
    one is missing and not create. The caller closes it."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            raise
        os.makedirs(root, exist_ok=True)
        fd = os.open(root, _DIR_FLAGS)
    shown = root
    try:
        for name in names:
            shown = os.path.join(shown, name)
            try:
                nfd = _open_below(fd, name, shown)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = _open_below(fd, name, shown)  # a link may have taken its place
            os.close(fd)
            fd = nfd
            owner = os.fstat(fd).st_uid
            if owner != os.geteuid():
                raise HubdError("unsafe_folder", "refusing %s: it is owned by uid %d, not by you "
                                "(uid %d); below the cache folder or local_dir named, only "
                                "folders of your own are written in%s"
                                % (shown, owner, os.geteuid(), "; " + hint if hint else ""))
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def folder(root, names, create=True):
    """open_folder as a context: the descriptor, closed on leaving."""
    fd = open_folder(root, names, create)
    try:
        yield fd
    finally:
        os.close(fd)
