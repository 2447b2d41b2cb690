"""One copy on disk, measured on real ext4, XFS and
btrfs file systems: each test makes one in a sparse image file in its temp
dir, attaches it to a loop device and mounts it, and puts hubd's cache and
the users' HF caches on it. Then `hubctl hf download` by users other than
hubd's (setpriv), each with a token of their own, of a public and a gated
repo of one 24 MiB file, and the file system's used space before and after
(statvfs, after a syncfs):

- the HF cache: blobs are symlinks into hubd's store (a read grant for the
  gated one), so two users' downloads add one copy, not three;
- --local-dir: plain files, reflinks on XFS and btrfs (almost nothing
  added), copies on ext4 (a copy added, and hubctl says so once);
- past the bound of 32 named users per blob (daemon/cache/grant.h), where
  HOLD answers readable=0: the blob in the 33rd user's HF cache is a
  reflink on XFS and btrfs, a copy said once on ext4;
- a mount without ACLs (`-o noacl`, where the kernel takes it: btrfs does;
  XFS has no such option, and ext4 on the 6.18 kernel this was written on
  says "Unknown parameter", so those two skip): HOLD cannot grant, and the
  blob is a reflink.

Needs root and a kernel that mounts loop devices; skipped otherwise. Every
mount and loop device is the test's own, undone in its cleanups (by the
mount point and the device it made) whatever the outcome.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import time
import unittest

from harness import HUBCTL, HubTestCase, Hubd, free_port, write_config
from hubstub_fixture import HubStub, file_bytes

MIB = 1 << 20
SIZE = 24 * MIB
IMAGE = 512 * MIB  # sparse; mkfs.xfs wants more than 300 MB
PUBLIC, GATED = "4" * 40, "5" * 40
BOUND = 32  # GRANT_MAX_USERS, daemon/cache/grant.h
UID_A, UID_B, UID_C = 1000, 1001, 1002
UID_MANY = 3000  # UID_MANY + i, i < BOUND + 1: the bound's users

REPOS = {
    "tokens": dict({"hf_alice": "alice", "hf_bob": "bob", "hf_carol": "carol"},
                   **{"hf_u%d" % i: "u%d" % i for i in range(BOUND + 1)}),
    "repos": [
        {"id": "org/public", "revisions": {"main": PUBLIC},
         "files": {"model.safetensors": {"lfs": {"size": SIZE, "seed": 41}}}},
        {"id": "org/gated", "revisions": {"main": GATED},
         "gated": ["alice", "bob"] + ["u%d" % i for i in range(BOUND + 1)],
         "files": {"model.safetensors": {"lfs": {"size": SIZE, "seed": 42}}}},
    ],
}
SHA = {r["id"]: hashlib.sha256(file_bytes(r["files"]["model.safetensors"])).hexdigest()
       for r in REPOS["repos"]}

MKFS = {"ext4": ["mkfs.ext4", "-q", "-F"], "xfs": ["mkfs.xfs", "-q", "-f"],
        "btrfs": ["mkfs.btrfs", "-q", "-f"]}

_libc = ctypes.CDLL(None, use_errno=True)

# What each test measured, printed at the end of the module (the numbers
# docs/ARCHITECTURE.md quotes).
MEASURED = []


def tearDownModule():
    for line in MEASURED:
        print(line)


def as_user(uid, argv, env=None, wait=True):
    argv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + argv
    if not wait:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def why(p):
    """A failed command's message, on one line."""
    return " ".join(l.strip() for l in (p.stderr or p.stdout).splitlines()) or (
        "exit %d" % p.returncode)


def kernel_says(fs):
    """The kernel's last word about fs (a refused mount option), where
    dmesg may be read."""
    p = run(["dmesg"])
    lines = [l for l in p.stdout.splitlines() if fs in l.lower()] if p.returncode == 0 else []
    return "; the kernel: " + lines[-1].split("] ", 1)[-1] if lines else ""


class FileSystemCase(HubTestCase):
    FS = None     # "ext4", "xfs" or "btrfs"
    REFLINK = None  # whether the file system makes reflinks

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: makes and mounts a %s file system on a loop device"
                          % self.FS)
        if shutil.which(MKFS[self.FS][0]) is None:
            self.skipTest("%s missing (scripts/install-deps.sh installs it)" % MKFS[self.FS][0])
        if shutil.which("losetup") is None or shutil.which("setpriv") is None:
            self.skipTest("losetup or setpriv missing (util-linux)")
        super().setUp()
        os.chmod(self.tmp, 0o755)
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)

    # ---- the file system ---------------------------------------------------

    def make_fs(self, options=()):
        """A fresh file system of type FS mounted with options, hubd on it
        (its cache; its socket, log and config stay in the temp dir), and
        homes for the users. Skips when the loop mount cannot be made."""
        image = os.path.join(self.tmp, self.FS + ".img")
        with open(image, "wb") as f:
            f.truncate(IMAGE)
        self.addCleanup(os.unlink, image)  # last: after the detach
        p = run(MKFS[self.FS] + [image])
        if p.returncode:
            self.skipTest("%s failed: %s" % (MKFS[self.FS][0], why(p)))
        p = run(["losetup", "--find", "--show", image])
        if p.returncode:
            self.skipTest("no loop device: losetup: %s" % why(p))
        dev = p.stdout.strip()
        self.addCleanup(self.detach, dev, image)
        mnt = os.path.join(self.tmp, self.FS)
        os.mkdir(mnt)
        argv = ["mount", "-t", self.FS] + (["-o", ",".join(options)] if options else [])
        p = run(argv + [dev, mnt])
        if p.returncode:
            self.skipTest("cannot mount %s on %s%s: %s%s" % (
                self.FS, dev, " with -o " + ",".join(options) if options else "", why(p),
                kernel_says(self.FS)))
        self.addCleanup(self.unmount, mnt)
        os.chmod(mnt, 0o755)
        self.mnt = mnt
        # hubd's cache on it; stopped before the unmount (cleanups run last
        # first), and checked for a clean exit by the fixture afterwards
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "fs.conf"), socket_mode="0666",
                            http_listen="127.0.0.1:%d" % free_port(),
                            hf_upstream=self.stub.hub_url)
        self.hubd = HubdCacheOn(os.path.join(self.tmp, "hub-fs"), os.path.join(mnt, "hubd"),
                                config=conf)
        self.addCleanup(self.hubd.stop)
        os.chmod(self.hubd.workdir, 0o755)
        self.store = os.path.join(self.hubd.cache, "blobs")
        self.homes = {}

    def unmount(self, mnt):
        for _ in range(50):
            p = run(["umount", mnt])
            if p.returncode == 0:
                return
            time.sleep(0.1)
        run(["umount", "-l", mnt])  # not left mounted, whatever held it
        self.fail("umount %s: %s" % (mnt, why(p)))

    def detach(self, dev, image):
        p = run(["losetup", "-d", dev])
        if p.returncode:
            self.fail("losetup -d %s (%s): %s" % (dev, image, why(p)))

    def used(self):
        """Bytes in use on the file system, its writes committed first."""
        fd = os.open(self.mnt, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if _libc.syncfs(fd) != 0:
                raise OSError(ctypes.get_errno(), "syncfs")
        finally:
            os.close(fd)
        st = os.statvfs(self.mnt)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def note(self, what, grew):
        MEASURED.append("%s %s: used space grew %.2f MiB for a %d MiB file (%.3fx)" % (
            self.FS, what, grew / MIB, SIZE // MIB, grew / SIZE))

    # ---- users -------------------------------------------------------------

    def home(self, uid):
        if uid not in self.homes:
            home = os.path.join(self.mnt, "home", str(uid))
            os.makedirs(home)
            os.chown(home, uid, uid)
            os.chmod(home, 0o755)  # the third user can reach the link: the grant keeps them out
            self.homes[uid] = home
        return self.homes[uid]

    def dl(self, uid, token, *args, wait=True):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
        env.update(HOME=self.home(uid), HF_TOKEN=token)
        return as_user(uid, [HUBCTL, "--socket", self.hubd.socket, "hf", "download"] + list(args),
                       env, wait)

    def blob(self, uid, repo):
        return os.path.join(self.home(uid), ".cache", "huggingface", "hub",
                            "models--" + repo.replace("/", "--"), "blobs", SHA[repo])

    def sha_as(self, uid, path):
        p = as_user(uid, ["sha256sum", path])
        return p.stdout.split()[0] if p.returncode == 0 else p.stderr.strip()

    def readable(self, uid, path):
        return as_user(uid, ["sh", "-c", 'cat "$0" >/dev/null', path]).returncode == 0

    def copy_note(self, where, local=False):
        """What hubctl says, once, when it copies (hf_download.c, tell_copy)."""
        if local:
            return ("hubctl: note: files are copied into %s, taking their size again: this file "
                    "system makes no reflink (Operation not supported)\n" % where)
        return ("hubctl: note: files are copied into %s, taking their size again: no symlink "
                "into hubd's store (hubd could not grant you read access to its copy) and this "
                "file system makes no reflink (Operation not supported)\n" % where)

    def assert_reflink_or_copy(self, what, grew, stderr, where, local=False):
        """A plain file just placed: on a file system with reflinks it
        added next to nothing and hubctl said nothing; else a copy, said."""
        self.note(what, grew)
        if self.REFLINK:
            self.assertLess(grew, SIZE / 16, "%s on %s: a reflink adds no data" % (what, self.FS))
            self.assertNotIn("copied", stderr)
        else:
            self.assertGreater(grew, 0.95 * SIZE, "%s on %s: a copy" % (what, self.FS))
            self.assertLess(grew, 1.1 * SIZE)
            self.assertEqual(stderr.count("files are copied"), 1, stderr)
            self.assertIn(self.copy_note(where, local), stderr)

    # ---- the tests ---------------------------------------------------------

    def test_two_users_add_one_copy_and_local_dir_reflinks(self):
        self.make_fs()
        for repo in ("org/public", "org/gated"):
            before = self.used()
            for uid, token in ((UID_A, "hf_alice"), (UID_B, "hf_bob")):
                r = self.dl(uid, token, repo)
                self.assertEqual(r.returncode, 0, r)
                self.assertNotIn("copied", r.stderr)
                blob = self.blob(uid, repo)
                self.assertTrue(os.path.islink(blob), "%s: a symlink into hubd's store" % blob)
                self.assertEqual(os.readlink(blob), os.path.join(self.store, SHA[repo][:2],
                                                                 SHA[repo]))
                # through the link, as that user
                self.assertEqual(self.sha_as(uid, blob), SHA[repo])
            grew = self.used() - before
            self.note("%s, HF cache of 2 users" % repo, grew)
            self.assertGreater(grew, 0.95 * SIZE, "hubd's copy is on this file system")
            self.assertLess(grew, 1.1 * SIZE, "one copy, not three")
        # the gated blob: read by each granted uid through its link, not by a third
        target = os.readlink(self.blob(UID_A, "org/gated"))
        self.assertEqual(os.stat(target).st_mode & 0o004, 0, "private in the store")
        self.assertFalse(self.readable(UID_C, self.blob(UID_A, "org/gated")))
        self.assertFalse(self.readable(UID_C, target))
        self.assertTrue(self.readable(UID_B, target))
        # --local-dir: plain files; reflinks where the file system makes them
        for repo in ("org/public", "org/gated"):
            local = os.path.join(self.home(UID_A), "local-" + repo.split("/")[1])
            before = self.used()
            r = self.dl(UID_A, "hf_alice", repo, "--local-dir", local)
            self.assertEqual(r.returncode, 0, r)
            grew = self.used() - before
            f = os.path.join(local, "model.safetensors")
            self.assertFalse(os.path.islink(f))
            self.assertEqual(os.stat(f).st_uid, UID_A)
            self.assertEqual(self.sha_as(UID_A, f), SHA[repo])
            self.assert_reflink_or_copy("%s, --local-dir" % repo, grew, r.stderr, local,
                                        local=True)

    def test_past_the_bound_of_named_users_a_reflink(self):
        """32 users hold the gated blob, each with a read grant; the 33rd
        cannot be granted (HELD readable=0) and gets a reflink, else a copy."""
        self.make_fs()
        repo = "org/gated"
        for first in range(0, BOUND, 8):  # 8 at a time
            procs = [(i, self.dl(UID_MANY + i, "hf_u%d" % i, repo, wait=False))
                     for i in range(first, first + 8)]
            for i, p in procs:
                out, err = p.communicate(timeout=120)
                self.assertEqual(p.returncode, 0, "user %d: %s" % (i, err))
                self.assertTrue(os.path.islink(self.blob(UID_MANY + i, repo)))
        last = UID_MANY + BOUND
        before = self.used()
        r = self.dl(last, "hf_u%d" % BOUND, repo)
        self.assertEqual(r.returncode, 0, r)
        grew = self.used() - before
        blob = self.blob(last, repo)
        self.assertFalse(os.path.islink(blob), "no grant past the bound: not a link")
        self.assertEqual(os.stat(blob).st_uid, last)
        self.assertEqual(self.sha_as(last, blob), SHA[repo])
        self.assertIn("it has the most named users already", self.hubd.read_log())
        self.assert_reflink_or_copy("%s, 33rd user's HF cache" % repo, grew, r.stderr,
                                    os.path.dirname(os.path.dirname(blob)))

    def test_a_mount_without_acls_a_reflink(self):
        self.make_fs(("noacl",))  # skips where the kernel refuses the option
        repo = "org/gated"
        before = self.used()
        r = self.dl(UID_A, "hf_alice", repo)
        self.assertEqual(r.returncode, 0, r)
        grew = self.used() - before - SIZE  # hubd's copy came down too
        blob = self.blob(UID_A, repo)
        self.assertFalse(os.path.islink(blob), "no ACL, no grant: not a link")
        self.assertEqual(self.sha_as(UID_A, blob), SHA[repo])
        self.assertIn("the file system keeps no ACLs", self.hubd.read_log())
        self.assert_reflink_or_copy("%s, noacl mount" % repo, grew, r.stderr,
                                    os.path.dirname(os.path.dirname(blob)))


class HubdCacheOn(Hubd):
    """A Hubd whose cache is `cache` (on the test's file system) while its
    socket, log and config stay in workdir."""

    def __init__(self, workdir, cache, **kw):
        self.cache_on = cache
        super().__init__(workdir, **kw)

    def start(self):
        self.cache = self.cache_on
        super().start()


class Ext4Test(FileSystemCase):
    FS, REFLINK = "ext4", False


class XfsTest(FileSystemCase):
    FS, REFLINK = "xfs", True  # reflink=1: mkfs.xfs's default since xfsprogs 5.1


class BtrfsTest(FileSystemCase):
    FS, REFLINK = "btrfs", True


del FileSystemCase  # a base, not a test of its own

if __name__ == "__main__":
    unittest.main()
