"""What the /hf front remembers of the Hub's answers is one user's, under one
token, and names only what was asked: a request with dot segments is
refused before any route reads it (the Hub would read another path than
the front's key), a HEAD's commit is remembered for its own uid and
credential tag only, and one uid's burst of questions cannot push out
what another uid was told. Users are root (the test) and nobody (65534)
through curl, which sends a path as it is with --path-as-is.
"""

import json
import os
import subprocess

from harness import HubTestCase, Hubd, free_port, wait_for, write_config
from hubstub_fixture import HubStub

MAIN = "1" * 40
OLD = "2" * 40
NEW = "3" * 40
NOBODY = 65534
FLOOD = 70  # more than the 64 answers the front once kept for everyone

REPOS = {
    "repos": [{"id": "org/model", "revisions": {"main": MAIN, "v1.0": OLD},
               "files": {"c.json": {"text": "{}\n"}, "w.bin": {"lfs": {"size": 5000, "seed": 9}}}},
              {"id": "org/other", "files": {"c.json": {"text": "other\n"}}}]
    + [{"id": "flood/r%d" % i, "files": {"c.json": {"text": "%d\n" % i}}} for i in range(FLOOD)],
}


class HfMemoTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        self.hubd.stop()
        self.port = free_port()
        # 0666: nobody may use the socket, so the front admits it too.
        conf = write_config(os.path.join(self.tmp, "hf.conf"), http_listen="127.0.0.1:%d" % self.port,
                            hf_upstream=self.stub.hub_url, socket_mode="0666")
        self.hubd = Hubd(os.path.join(self.tmp, "hub"), config=conf)
        wait_for(lambda: self.curl("-o", "/dev/null", self.url("")).returncode == 0,
                 what="the HTTP front to listen")

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def curl(self, *args, user=None):
        cmd = ["curl", "-sS", "--max-time", "60", "--path-as-is"] + list(args)
        if user is not None:
            cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
        return subprocess.run(cmd, capture_output=True, timeout=90)

    def ask(self, path, method="GET", user=None):
        """(status, X-Repo-Commit, body) of one request to the front."""
        r = self.curl(*(["-I"] if method == "HEAD" else ["-i"]), self.url(path), user=user)
        self.assertEqual(r.returncode, 0, r.stderr)
        head, _, body = r.stdout.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        commit = next((l.split(":", 1)[1].strip() for l in lines
                       if l.lower().startswith("x-repo-commit:")), None)
        return int(lines[0].split()[1]), commit, body

    def move_main(self, repo, commit):
        self.stub.control("branch", {"repo": repo, "rev": "main", "commit": commit})

    def test_dot_segments_are_refused_and_choose_no_commit(self):
        # Each form the Hub would read as the old commit's file (or as
        # another repo's) is refused, in the path of any route.
        for path in ["/hf/org/model/resolve/main/x/../../%s/c.json" % OLD,
                     "/hf/org/model/resolve/main/x/%%2e%%2e/%%2E%%2e/%s/c.json" % OLD,
                     "/hf/org/model/resolve/main/x/.%%2e/..%%2F/%s/c.json" % OLD,
                     "/hf/org/model/resolve/main/../../../org/other/resolve/main/c.json",
                     "/hf/api/models/org/model/../other",
                     "/hf/org/model/resolve/main/./c.json"]:
            for method in ("HEAD", "GET"):
                st, commit, body = self.ask(path, method, user=NOBODY)
                self.assertEqual(st, 400, (path, method, body))
                self.assertIsNone(commit, path)
        self.assertIn(b"segment", self.ask("/hf/org/model/resolve/main/./c.json")[2])
        asked = self.stub.stats("hub")["requests"]
        self.assertEqual(asked, {}, "nothing with dot segments reaches the Hub")
        # Another user's plain GETs come from main, as the Hub says.
        for name in ("c.json", "w.bin"):
            st, commit, _ = self.ask("/hf/org/model/resolve/main/" + name)
            self.assertEqual((st, commit), (200, MAIN), name)
        rows = {r[0] for r in self.hubd.query("SELECT url FROM entries")}
        self.assertEqual(rows, {"%s/org/model/resolve/%s/%s" % (self.stub.hub_url, MAIN, n)
                                for n in ("c.json", "w.bin")})

    def test_a_heads_commit_is_remembered_for_its_own_user_only(self):
        # nobody's HEAD is told main is MAIN; then main moves to NEW.
        self.assertEqual(self.ask("/hf/org/model/resolve/main/c.json", "HEAD", user=NOBODY)[:2],
                         (200, MAIN))
        self.move_main("org/model", NEW)
        # root never asked: its GET is what the Hub says now.
        self.assertEqual(self.ask("/hf/org/model/resolve/main/c.json")[:2], (200, NEW))
        # nobody's GET after its HEAD is the file its HEAD described.
        self.assertEqual(self.ask("/hf/org/model/resolve/main/c.json", user=NOBODY)[:2],
                         (200, MAIN))

    def test_one_users_burst_keeps_anothers_answer(self):
        # root's HEAD is told main is MAIN, then main moves.
        self.assertEqual(self.ask("/hf/org/model/resolve/main/c.json", "HEAD")[:2], (200, MAIN))
        self.move_main("org/model", NEW)
        # nobody asks about FLOOD other repos: each answer is remembered.
        for i in range(FLOOD):
            st, _, _ = self.ask("/hf/flood/r%d/resolve/main/c.json" % i, "HEAD", user=NOBODY)
            self.assertEqual(st, 200)
        # root's GET is still the file its HEAD described.
        st, commit, body = self.ask("/hf/org/model/resolve/main/c.json")
        self.assertEqual((st, commit, body), (200, MAIN, b"{}\n"))
        asked = self.stub.stats("hub")["requests"]
        self.assertEqual(asked.get("/org/model/resolve/main/c.json"), 1,
                         json.dumps(asked, sort_keys=True)[:400])
