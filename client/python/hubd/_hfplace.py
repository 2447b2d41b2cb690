"""How hubd/hf.py puts bytes on disk: in a folder's descriptor, by name,
each file through a temp name (``O_EXCL``: no planted link is followed) and
a rename over whatever was there; a blob's bytes as a reflink of hubd's
descriptor where the file system can, else a copy (said once)."""

import fcntl
import hashlib
import os
import stat
import sys
import uuid

from . import _copy_range

FICLONE = 0x40049409       # _IOW(0x94, 9, int), linux/fs.h
_CHUNK = 1 << 20
_said_copy = False         # "blobs are copied" is said once per process


def readable(path):
    """Opens path for reading: a blob link into hubd's store whose grant is
    gone (EACCES) is not there for its user, and is fetched and held again."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK))
        return os.path.isfile(path)
    except OSError:
        return False


def readable_at(dir_fd, name):
    """_readable of name in the folder dir_fd (its own link followed: a
    blob is one, into hubd's store)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def write_atomic(dir_fd, name, text):
    """name in the folder dir_fd gets text through a temp name (O_EXCL: no
    planted link is followed) and a rename over whatever was there."""
    tmp = tmp_name(name, ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "w") as w:
            w.write(text)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def git_blob_sha1(fd, size):
    h = hashlib.sha1(b"blob %d\0" % size)
    off = 0
    while off < size:
        b = os.pread(fd, min(_CHUNK, size - off), off)
        if not b:
            break
        h.update(b)
        off += len(b)
    return h.hexdigest(), off


def tmp_name(name, suffix=".incomplete"):
    return "%s.%s%s" % (name[:200], uuid.uuid4().hex[:12], suffix)


def write_from_fd(src, size, dir_fd, name, tmp_fd=None):
    """name in the folder dir_fd gets the bytes of src (a reflink when the
    file system can, else a copy), through a temp name (in the folder
    tmp_fd, else dir_fd) and a rename. Returns None for a reflink, else why
    not (text)."""
    tmp_fd = dir_fd if tmp_fd is None else tmp_fd
    tmp = tmp_name(name)
    why = None
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666, dir_fd=tmp_fd)
    try:
        try:
            try:
                fcntl.ioctl(out, FICLONE, src)
            except OSError as e:
                why = "reflink (FICLONE): %s" % (e.strerror or e)
                _copy_range(src, out, size)
        finally:
            os.close(out)
        os.replace(tmp, name, src_dir_fd=tmp_fd, dst_dir_fd=dir_fd)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=tmp_fd)
            except OSError:
                pass
    return why


def symlink_over(target, dir_fd, name):
    """name in the folder dir_fd becomes a link to target, made beside it
    and renamed over whatever was there."""
    tmp = tmp_name(name, ".tmp")
    os.symlink(target, tmp, dir_fd=dir_fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


def say_copy(where, why):
    global _said_copy
    if not _said_copy:
        _said_copy = True
        sys.stderr.write("hubd: files are copied into %s, which takes disk: %s\n" % (where, why))

