"""Whom the Python client trusts, by hubctl's rules (docs/PROTOCOL.md):
the per-user socket's folder, the daemon answering on the per-user socket,
and the descriptor a DONE line passes. Each check returns why not (text for
the user: what is wrong and what to do), or None."""

import os
import socket
import stat
import struct


def user_dir():
    """The per-user daemon's folder, and whether $XDG_RUNTIME_DIR named it
    (else /tmp/hubd-<uid>). Trailing slashes are dropped, as hubctl does,
    so that both name the socket alike and apply the same rule."""
    run = os.environ.get("XDG_RUNTIME_DIR") or ""
    stripped = run.rstrip("/") or run[:1]
    if stripped:
        return stripped, True
    return "/tmp/hubd-%d" % os.getuid(), False


def user_socket():
    """The per-user daemon's socket, in user_dir()."""
    return os.path.join(user_dir()[0], "hubd.sock")


def dir_refusal(d, xdg):
    """Whether d, the folder of the per-user socket, is really the user's.
    In /tmp anyone could have made /tmp/hubd-<uid> first, with their own
    daemon in it: it must be the user's alone, mode 0700, not a symlink.
    $XDG_RUNTIME_DIR (xdg true), which su and sudo -E pass on from the first
    user, must be the user's or root's and writable by no one else. Either
    must let the user in and write (su from root keeps root's 0700
    /run/user/0). None also when d does not exist yet (hubctl start makes
    it, and checks)."""
    name = ("XDG_RUNTIME_DIR=" if xdg else "") + d
    try:
        st = os.stat(d) if xdg else os.lstat(d)
    except FileNotFoundError:
        return None
    except OSError as e:
        return ("cannot check %s: %s; refusing to use or start a daemon there; %s"
                % (name, e.strerror or e, "unset XDG_RUNTIME_DIR or point it at a folder of "
                   "your own" if xdg else "remove it, or set XDG_RUNTIME_DIR"))
    me = os.getuid()
    if xdg:
        ok = stat.S_ISDIR(st.st_mode) and st.st_uid in (me, 0) and not st.st_mode & 0o022
    else:
        ok = stat.S_ISDIR(st.st_mode) and st.st_uid == me and not st.st_mode & 0o077
    if not ok:
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a symlink"
                if stat.S_ISLNK(st.st_mode) else "not a folder")
        return ("%s is not a private folder of yours (%s, owner uid %d, mode %04o; you are uid "
                "%d): refusing to use or start a daemon there; %s"
                % (name, kind, st.st_uid, st.st_mode & 0o7777, me,
                   "point it at a folder of your own (mode 0700), or unset it" if xdg
                   else "remove it, or set XDG_RUNTIME_DIR"))
    if not os.access(d, os.W_OK | os.X_OK):
        return ("%s is not writable by you (owner uid %d, mode %04o; you are uid %d): no "
                "per-user daemon can run there; %s"
                % (name, st.st_uid, st.st_mode & 0o7777, me,
                   "unset XDG_RUNTIME_DIR or point it at a folder of your own" if xdg
                   else "remove it, or set XDG_RUNTIME_DIR"))
    return None


def _where(path):
    """path with its folder's symlinks resolved: how two spellings of a
    socket that is not there yet are compared."""
    return os.path.join(os.path.realpath(os.path.dirname(path) or "."), os.path.basename(path))


def is_user_socket(path, user_path):
    """Whether path names the per-user socket user_path, however spelled
    (double or trailing slashes, a symlink, a relative path): the same file
    (st_dev, st_ino) when both are there, else the same resolved folder and
    name."""
    try:
        a, b = os.stat(path), os.stat(user_path)
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    except OSError:
        return _where(path) == _where(user_path)


def parse_peercred(raw):
    """SO_PEERCRED's struct ucred: (pid, uid, gid); pid_t is signed, uid_t
    and gid_t unsigned (a uid past 2**31 is no negative number)."""
    return struct.unpack("iII", raw)


def peer_refusal(sock, path, user_path):
    """On the per-user socket (user_path, whichever way it was named), only
    a daemon run by the user or root (SO_PEERCRED) gets a request; another
    path (the system socket, or $HUBD_SOCKET naming another) is the
    caller's choice."""
    if not is_user_socket(path, user_path):
        return None
    try:
        pid, uid, _ = parse_peercred(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                     struct.calcsize("iII")))
    except OSError as e:
        return "cannot tell who runs the hubd on %s: %s" % (path, e.strerror or e)
    if uid in (os.getuid(), 0):
        return None
    return ("the hubd on %s is run by uid %d (pid %d), not by you (uid %d): refusing to send it "
            "anything; remove that socket, or ask root who planted it"
            % (path, uid, pid, os.getuid()))


def blob_fd_refusal(fd, size):
    """A descriptor passed with DONE must be a regular file of the size the
    line announced: anything else (a FIFO or a socket that blocks a read, a
    directory, a file cut short or grown) is refused before a byte is read
    from it, or a path is returned for it."""
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_size == size:
        return None
    return ("hubd passed a descriptor that is %s of %d bytes, not the announced %d-byte file"
            % ("a regular file" if stat.S_ISREG(st.st_mode) else "not a regular file",
               st.st_size, size))
