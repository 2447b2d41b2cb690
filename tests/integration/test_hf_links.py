"""Folder links planted in a shared HF cache or --local-dir: `hubctl hf
download` and the Python client's hf_hub_download / snapshot_download write
only below the cache folder or local dir the user named, and never through
a link another user planted there.

hubd runs as root with its socket open to all; the stand-in Hub
(tests/hubstub.py) serves test_hf_download's repos. A victim (VICTIM) and an
attacker (ATTACKER) are local users run through setpriv. The attacker
plants `sub -> ~victim/pN` in a shared cache (a root-owned 1777 folder, as
HF_HUB_CACHE on a shared machine), in the victim's own repo folder there
(group-writable, as huggingface_hub's shared-cache advice leaves it), and in
a shared --local-dir; then the victim runs each client. The victim's
folders must come out unchanged (content, type and inode of every entry,
nothing new), and the run fails naming the folder it refused. Root, run
with --local-dir in a user's folder that holds the user's link to a 0700
folder of root's, writes nothing there. Every test records how many
entries of the victim's folders were touched (printed at the end of the
module): the figures before and after the walk without links.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import unittest

from harness import HERE, HUBCTL, HubTestCase, Hubd, free_port, write_config
from hubstub_fixture import HubStub, file_bytes
from test_hf_download import MAIN, REPOS, etag_of

PYTHON_CLIENT = os.path.join(HERE, "..", "..", "client", "python")
VICTIM, ATTACKER = 1000, 1001  # users other than hubd's (root)
FILES = REPOS["repos"][0]["files"]
CONFIG_ETAG = etag_of(FILES["config.json"])

# What each test counted, printed at the end of the module.
MEASURED = []

# Runs one of hubd's HF functions as told (JSON: fn, args, keywords) and
# prints its answer as JSON: {"ok": path} or {"code": ..., "msg": ...}.
PY_RUN = r'''
import json, sys, hubd
kw = json.loads(sys.argv[1])
fn = getattr(hubd, kw.pop("fn"))
try:
    print(json.dumps({"ok": fn(*kw.pop("args"), **kw)}))
except hubd.HubdError as e:
    print(json.dumps({"code": e.code, "msg": e.msg}))
'''


def tearDownModule():
    for line in MEASURED:
        print(line)


def as_user(uid, argv, env=None):
    if uid is not None:
        argv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"] + argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def tree(top):
    """Every entry under top, not following links: {relative path: (type,
    content or link target, inode)}. A file replaced by rename gets a new
    inode, so an identical rewrite counts too."""
    out = {}
    for d, dirs, names in os.walk(top):
        for n in dirs + names:
            p = os.path.join(d, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                what = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                what = ("dir", None)
            else:
                with open(p, "rb") as f:
                    what = ("file", f.read())
            out[os.path.relpath(p, top)] = what + (st.st_ino,)
    return out


def touched(before, after):
    """The entries created, replaced, changed or removed."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


class PlantedLinksTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.hubd.stop()
        conf = write_config(os.path.join(self.tmp, "links.conf"), socket_mode="0666",
                            http_listen="127.0.0.1:%d" % free_port(), hf_upstream=self.stub.hub_url)
        self.hubd = Hubd(os.path.join(self.tmp, "hub-links"), config=conf)
        for d in (self.tmp, self.hubd.workdir):
            os.chmod(d, 0o755)
        self.homes = {uid: self.mkdir("home%d" % uid, uid, 0o700) for uid in (VICTIM, ATTACKER)}
        self.victim = self.homes[VICTIM]
        # the victim's own folders, which the attacker's links name
        self.p = {}
        for i, name, data in ((1, "config.json", b"the victim's config\n"),
                              (2, CONFIG_ETAG, b"the victim's blob\n"),
                              (3, "notes.txt", b"the victim's notes\n"),
                              (4, "main", b"the victim's ref\n"),
                              (5, "keep.txt", b"kept\n")):
            self.p[i] = self.mkdir(os.path.join(self.victim, "p%d" % i), VICTIM, 0o755)
            self.write(os.path.join(self.p[i], name), data, VICTIM)
        self.shared = self.mkdir("shared", 0, 0o1777)  # a cache every user writes in

    # ---- helpers -------------------------------------------------------------

    def mkdir(self, path, uid, mode):
        path = os.path.join(self.tmp, path)
        os.mkdir(path)
        os.chown(path, uid, uid)
        os.chmod(path, mode)
        return path

    @staticmethod
    def write(path, data, uid):
        with open(path, "wb") as f:
            f.write(data)
        os.chown(path, uid, uid)

    def plant(self, uid, target, link):
        r = as_user(uid, ["ln", "-s", target, link])
        self.assertEqual(r.returncode, 0, r)

    def env(self, uid):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
        env.update(HOME=self.homes.get(uid, "/root"), HF_HUB_DISABLE_PROGRESS_BARS="1",
                   HUBD_SOCKET=self.hubd.socket, PYTHONPATH=PYTHON_CLIENT)
        return env

    def hubctl(self, uid, *args):
        return as_user(uid, [HUBCTL, "--socket", self.hubd.socket, "hf", "download", "org/model"]
                       + list(args), self.env(uid))

    def python(self, uid, fn, *args, **kw):
        """hubd.fn("org/model", *args, **kw) run as uid: {"ok": path} or
        {"code", "msg"}."""
        r = as_user(uid, [sys.executable, "-c", PY_RUN,
                          json.dumps(dict(kw, fn=fn, args=["org/model"] + list(args)))],
                    self.env(uid))
        self.assertEqual(r.returncode, 0, r)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def repo_folder(self, owner):
        """models--org--model in the shared cache, owned by owner and open
        to every user (0777)."""
        return self.mkdir(os.path.join(self.shared, "models--org--model"), owner, 0o777)

    def assert_untouched(self, what, before, top=None):
        """Nothing under the victim's folders (or top) changed since before.
        A subTest: a failure is counted and said, and the test goes on to
        its next step, so that every step's figure is measured."""
        after = tree(top or self.victim)
        hit = touched(before, after)
        MEASURED.append("%s: %d entr%s touched through the planted links%s" % (
            what, len(hit), "y" if len(hit) == 1 else "ies", (": " + ", ".join(hit)) if hit else ""))
        with self.subTest(what):
            self.assertEqual(hit, [], "%s: touched through the planted links" % what)

    def assert_refused(self, out, folder, why):
        """A hubctl run (CompletedProcess) or a Python one (dict) that failed
        naming the folder refused and why (a subTest, as above)."""
        with self.subTest(refused=folder):
            if isinstance(out, dict):
                self.assertEqual(out.get("code"), "unsafe_folder", out)
                msg = out["msg"]
            else:
                self.assertEqual(out.returncode, 1, out)
                msg = out.stderr
            self.assertIn("refusing %s: %s" % (folder, why), msg)

    # ---- a shared cache --------------------------------------------------------

    def attacker_repo_folder(self):
        """The attacker made models--org--model first, with links to the
        victim's folders where the victim's run would write."""
        repo = self.repo_folder(ATTACKER)
        self.plant(ATTACKER, self.p[4], os.path.join(repo, "refs"))
        self.plant(ATTACKER, self.p[2], os.path.join(repo, "blobs"))
        snaps = os.path.join(repo, "snapshots")
        self.assertEqual(as_user(ATTACKER, ["mkdir", "-m", "0777", snaps]).returncode, 0)
        self.plant(ATTACKER, self.p[1], os.path.join(snaps, MAIN))
        return repo

    def test_hubctl_a_shared_cache_repo_folder_of_another_user_is_refused(self):
        repo = self.attacker_repo_folder()
        before = tree(self.victim)
        r = self.hubctl(VICTIM, "config.json", "tokenizer/vocab.txt", "--cache-dir", self.shared)
        self.assert_untouched("hubctl, shared cache, the attacker's repo folder", before)
        self.assert_refused(r, repo, "it is owned by uid %d, not by you (uid %d)"
                            % (ATTACKER, VICTIM))
        self.assertIn("use an HF cache folder of your own", r.stderr)  # what to do then
        self.assertEqual(self.stub.stats("hub")["requests"], {}, "refused before hubd asked")

    def test_python_a_shared_cache_repo_folder_of_another_user_is_refused(self):
        repo = self.attacker_repo_folder()
        before = tree(self.victim)
        out = self.python(VICTIM, "snapshot_download", cache_dir=self.shared,
                          allow_patterns=["config.json", "tokenizer/vocab.txt"])
        self.assert_untouched("python, shared cache, the attacker's repo folder", before)
        self.assert_refused(out, repo, "it is owned by uid %d, not by you (uid %d)"
                            % (ATTACKER, VICTIM))
        self.assertIn("use an HF cache folder of your own", out.get("msg", ""))

    def links_in_victims_repo_folder(self):
        """The victim's own repo folder, writable by others: the attacker
        put links in place of refs/, blobs/ and snapshots/{commit}/."""
        repo = self.repo_folder(VICTIM)
        snaps = self.mkdir(os.path.join(repo, "snapshots"), VICTIM, 0o777)
        self.plant(ATTACKER, self.p[4], os.path.join(repo, "refs"))
        self.plant(ATTACKER, self.p[2], os.path.join(repo, "blobs"))
        self.plant(ATTACKER, self.p[1], os.path.join(snaps, MAIN))
        return repo

    def test_hubctl_links_in_the_victims_repo_folder_are_refused(self):
        repo = self.links_in_victims_repo_folder()
        before = tree(self.victim)
        r = self.hubctl(VICTIM, "config.json", "tokenizer/vocab.txt", "--cache-dir", self.shared)
        self.assert_untouched("hubctl, shared cache, links in the victim's repo folder", before)
        self.assert_refused(r, os.path.join(repo, "refs"), "it is a symbolic link")

    def test_python_links_in_the_victims_repo_folder_are_refused(self):
        repo = self.links_in_victims_repo_folder()
        before = tree(self.victim)
        out = self.python(VICTIM, "hf_hub_download", "config.json", cache_dir=self.shared)
        self.assert_untouched("python, shared cache, links in the victim's repo folder", before)
        self.assert_refused(out, os.path.join(repo, "refs"), "it is a symbolic link")

    def link_deep_in_a_snapshot(self):
        """Every folder down to snapshots/{commit} is the victim's; the
        attacker put tokenizer -> ~victim/p3 in the snapshot."""
        repo = self.repo_folder(VICTIM)
        snap = os.path.join(repo, "snapshots", MAIN)
        for d in ("refs", "blobs", "snapshots", os.path.join("snapshots", MAIN)):
            self.mkdir(os.path.join(repo, d), VICTIM, 0o777)
        self.plant(ATTACKER, self.p[3], os.path.join(snap, "tokenizer"))
        return snap

    def test_hubctl_a_link_deep_in_a_snapshot_fails_that_file_alone(self):
        snap = self.link_deep_in_a_snapshot()
        before = tree(self.victim)
        r = self.hubctl(VICTIM, "config.json", "tokenizer/vocab.txt", "--cache-dir", self.shared)
        self.assert_untouched("hubctl, shared cache, a link in the victim's snapshot", before)
        self.assert_refused(r, os.path.join(snap, "tokenizer"), "it is a symbolic link")
        self.assertIn("tokenizer/vocab.txt: output: cannot link it in", r.stderr)
        with open(os.path.join(snap, "config.json"), "rb") as f:  # the other file is placed
            self.assertEqual(f.read(), file_bytes(FILES["config.json"]))

    def test_python_a_link_deep_in_a_snapshot_is_refused(self):
        snap = self.link_deep_in_a_snapshot()
        before = tree(self.victim)
        out = self.python(VICTIM, "snapshot_download", cache_dir=self.shared,
                          allow_patterns=["config.json", "tokenizer/vocab.txt"])
        self.assert_untouched("python, shared cache, a link in the victim's snapshot", before)
        self.assert_refused(out, os.path.join(snap, "tokenizer"), "it is a symbolic link")

    def test_hubctl_hf_rm_removes_nothing_through_a_planted_link(self):
        """hf rm removes snapshots, refs and blobs: through snapshots ->
        ~victim/p1 it would remove the victim's files."""
        repo = self.repo_folder(VICTIM)
        self.plant(ATTACKER, self.p[1], os.path.join(repo, "snapshots"))
        self.plant(ATTACKER, self.p[2], os.path.join(repo, "blobs"))
        before = tree(self.victim)
        r = as_user(VICTIM, [HUBCTL, "--socket", self.hubd.socket, "hf", "rm", "org/model",
                             "--cache-dir", self.shared], self.env(VICTIM))
        self.assert_untouched("hubctl hf rm, links in the victim's repo folder", before)
        self.assert_refused(r, os.path.join(repo, "snapshots"), "it is a symbolic link")
        # another user's repo folder: refused as a whole
        if os.path.lexists(repo):
            os.rename(repo, os.path.join(self.tmp, "aside"))
        for i, name in ((1, "config.json"), (2, CONFIG_ETAG)):  # whatever the first step did
            if not os.path.lexists(os.path.join(self.p[i], name)):
                self.write(os.path.join(self.p[i], name), b"the victim's, again\n", VICTIM)
        repo = self.attacker_repo_folder()
        before = tree(self.victim)
        r = as_user(VICTIM, [HUBCTL, "--socket", self.hubd.socket, "hf", "rm", "org/model",
                             "--cache-dir", self.shared], self.env(VICTIM))
        self.assert_untouched("hubctl hf rm, the attacker's repo folder", before)
        self.assert_refused(r, repo, "it is owned by uid %d, not by you (uid %d)"
                            % (ATTACKER, VICTIM))

    # ---- a shared --local-dir ------------------------------------------------

    def shared_local_dir(self):
        local = self.mkdir("shared-local", 0, 0o1777)
        self.plant(ATTACKER, self.p[3], os.path.join(local, "tokenizer"))
        self.plant(ATTACKER, self.p[5], os.path.join(local, ".cache"))
        return local

    def test_hubctl_links_in_a_shared_local_dir_are_refused(self):
        local = self.shared_local_dir()
        before = tree(self.victim)
        r = self.hubctl(VICTIM, "config.json", "tokenizer/vocab.txt", "--local-dir", local)
        self.assert_untouched("hubctl, shared --local-dir", before)
        self.assert_refused(r, os.path.join(local, ".cache"), "it is a symbolic link")
        # without the metadata link, the file under the planted folder alone fails
        before = tree(self.victim)
        os.unlink(os.path.join(local, ".cache"))
        r = self.hubctl(VICTIM, "config.json", "tokenizer/vocab.txt", "--local-dir", local)
        self.assert_untouched("hubctl, shared --local-dir, tokenizer link alone", before)
        self.assert_refused(r, os.path.join(local, "tokenizer"), "it is a symbolic link")
        with open(os.path.join(local, "config.json"), "rb") as f:
            self.assertEqual(f.read(), file_bytes(FILES["config.json"]))

    def test_python_links_in_a_shared_local_dir_are_refused(self):
        local = self.shared_local_dir()
        before = tree(self.victim)
        out = self.python(VICTIM, "snapshot_download", local_dir=local,
                          allow_patterns=["config.json", "tokenizer/vocab.txt"])
        self.assert_untouched("python, shared local_dir", before)
        self.assert_refused(out, os.path.join(local, ".cache"), "it is a symbolic link")
        before = tree(self.victim)
        os.unlink(os.path.join(local, ".cache"))
        out = self.python(VICTIM, "hf_hub_download", "tokenizer/vocab.txt", local_dir=local)
        self.assert_untouched("python, shared local_dir, tokenizer link alone", before)
        self.assert_refused(out, os.path.join(local, "tokenizer"), "it is a symbolic link")

    # ---- root in a user's folder ----------------------------------------------

    def users_local_dir(self):
        """A user's ~/models holding the user's link to a 0700 folder of
        root's, and a folder of the user's own."""
        secret = self.mkdir("root-only", 0, 0o700)
        self.write(os.path.join(secret, "vocab.txt"), b"root's own\n", 0)
        models = self.mkdir(os.path.join(self.victim, "models"), VICTIM, 0o755)
        self.plant(VICTIM, secret, os.path.join(models, "tokenizer"))
        self.assertEqual(as_user(VICTIM, ["mkdir", os.path.join(models, "shards")]).returncode, 0)
        return secret, models

    def test_hubctl_root_writes_nothing_through_a_users_link(self):
        secret, models = self.users_local_dir()
        before = tree(secret)
        r = self.hubctl(None, "config.json", "tokenizer/vocab.txt", "shards/part-1.bin",
                        "--local-dir", models)
        self.assert_untouched("hubctl as root, a user's --local-dir", before, secret)
        self.assert_refused(r, os.path.join(models, "tokenizer"), "it is a symbolic link")
        self.assert_refused(r, os.path.join(models, "shards"),
                            "it is owned by uid %d, not by you (uid 0)" % VICTIM)
        self.assertFalse(os.path.lexists(os.path.join(models, "shards", "part-1.bin")))
        with open(os.path.join(models, "config.json"), "rb") as f:  # the named root is fine
            self.assertEqual(f.read(), file_bytes(FILES["config.json"]))
        # the same user's HF cache: its repo folder is the user's, not root's
        cache = self.mkdir(os.path.join(self.victim, "hf"), VICTIM, 0o755)
        repo = self.mkdir(os.path.join(cache, "models--org--model"), VICTIM, 0o755)
        r = self.hubctl(None, "config.json", "--cache-dir", cache)
        self.assert_refused(r, repo, "it is owned by uid %d, not by you (uid 0)" % VICTIM)
        self.assertEqual(os.listdir(repo), [])

    def test_python_root_writes_nothing_through_a_users_link(self):
        secret, models = self.users_local_dir()
        before = tree(secret)
        out = self.python(None, "hf_hub_download", "tokenizer/vocab.txt", local_dir=models)
        self.assert_untouched("python as root, a user's local_dir", before, secret)
        self.assert_refused(out, os.path.join(models, "tokenizer"), "it is a symbolic link")
        out = self.python(None, "hf_hub_download", "shards/part-1.bin", local_dir=models)
        self.assert_refused(out, os.path.join(models, "shards"),
                            "it is owned by uid %d, not by you (uid 0)" % VICTIM)
        self.assertEqual(os.listdir(os.path.join(models, "shards")), [])

    # ---- without links, as before ------------------------------------------------

    def test_both_clients_fill_a_fresh_cache_and_local_dir(self):
        """The victim's own fresh cache and local dir, and a repo folder of
        their own in the shared cache: every file placed, as before."""
        paths = ["config.json", "tokenizer/deep/merges.txt", "model.safetensors"]
        for client in ("hubctl", "python"):
            cache = os.path.join(self.victim, client + "-cache")
            local = os.path.join(self.victim, client + "-local")
            for where in (cache, local, self.shared):
                args = ["--local-dir", local] if where == local else ["--cache-dir", where]
                if client == "hubctl":
                    r = self.hubctl(VICTIM, *(paths + args))
                    self.assertEqual(r.returncode, 0, r)
                    folder = r.stdout.strip()
                else:
                    kw = {"local_dir": local} if where == local else {"cache_dir": where}
                    out = self.python(VICTIM, "snapshot_download", allow_patterns=paths, **kw)
                    self.assertIn("ok", out, out)
                    folder = out["ok"]
                for p in paths:
                    with open(os.path.join(folder, p), "rb") as f:
                        self.assertEqual(f.read(), file_bytes(FILES[p]), (client, where, p))
            # the next client starts from a fresh repo folder in the shared cache
            shutil.rmtree(os.path.join(self.shared, "models--org--model"))


if __name__ == "__main__":
    unittest.main()
