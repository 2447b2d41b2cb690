#!/usr/bin/env python3
"""A stand-in Hugging Face Hub and its CDN, for hubd's tests.

Python 3 standard library only. Two HTTP/1.1 servers (threaded, keep-alive)
on loopback, in one process: the Hub (resolve routes and the JSON API, as
huggingface_hub and @huggingface/hub use them) and a separate "CDN" origin
that the Hub redirects to for LFS files, with signed, expiring URLs.

    python3 tests/hubstub.py --repos FILE.json --port-file FILE
                             [--bind 127.0.0.1] [--page-size N] [--verbose]

The port file gets {"hub": P, "cdn": Q} (JSON, written by rename) once both
listen; SIGTERM or SIGINT ends the process with status 0.

Repo description (JSON):
  {"tokens": {"hf_alice": "alice", ...},          # valid tokens -> user
   "page_size": 50,                                # tree API page size
   "url_ttl": 3600,                                # CDN URL lifetime, s
   "repos": [{
     "id": "org/name", "type": "model|dataset|space",
     "revisions": {"main": SHA40, "v1.0": SHA40},  # branches and tags;
                                                   # default: main only
     "gated": ["alice"],    # users granted; gated repos need a token
     "private": ["alice"],  # users who can see it; others get RepoNotFound
     "xet": true,           # LFS files get xet hints and xetHash
     "renamed_from": "old-org/name",  # relative redirects from the old id
     "files": {"config.json": {"text": "..."},     # small (git) files
               "a.bin": {"b64": "..."},
               "model.safetensors": {"lfs": {"size": N, "seed": S}},
               "borrowed.bin": {"lfs_pointer": {"sha256": HEX64, "size": N}}}}]}
  An LFS file's bytes are random.Random(seed).randbytes(size) (seed 0 by
  default; past 64 MiB, such calls of 64 MiB each); it is LFS because of "lfs", whatever its size, as on the Hub.
  "lfs_pointer" is a pointer committed without its object (naming another
  repo's file, say): the Hub answers for it as for any LFS file, and the CDN,
  whose objects are each repo's own (as the Hub's CDN paths are), has none.

Hub routes (GET and HEAD unless said):
  /[datasets/|spaces/]{repo}/resolve/{rev}/{path}
      small file: 200 (206 for one "bytes=a-b" Range) with ETag = quoted git
      blob sha1, X-Repo-Commit, Content-Length, Accept-Ranges: bytes.
      LFS file: 302 to the CDN with X-Linked-Etag = quoted sha256,
      X-Linked-Size, X-Repo-Commit, ETag (quoted sha1 of the LFS pointer);
      on a xet repo also X-Xet-Hash, X-Xet-Refresh-Route and
      Link: <..>; rel="xet-auth", <..>; rel="xet-reconstruction-info", and
      when Accept names application/vnd.xet-fileinfo+json a 200 with that
      Content-Type and a JSON body instead of the 302 (as @huggingface/hub
      expects of a xet-backed file).
  /[datasets/|spaces/]{repo}/raw/{rev}/{path}   the git file (LFS pointer).
  /api/{models,datasets,spaces}/{repo}[/revision/{rev}]   repo info JSON
      (sha, siblings, gated, private, ...; ?blobs=true adds sizes and lfs).
  /api/{t}s/{repo}/tree/{rev}[/{path}]?recursive=&expand=&cursor=
      entries, page_size a page, Link: <http://HUB/...&cursor=..>; rel="next"
  POST /api/{t}s/{repo}/paths-info/{rev}   JSON or form body: paths, expand
  /api/{t}s/{repo}/xet-read-token/{rev}    200 with a made-up xet token
  Revisions: a branch or tag name, a full commit sha, "HEAD" (= main),
  percent-encoded ("refs%2Fpr%2F1"). Errors are JSON {"error": ...} with
  X-Error-Code / X-Error-Message as the Hub sends them: RepoNotFound (401
  without a valid token, 404 with one), RevisionNotFound (404), EntryNotFound
  (404, with X-Repo-Commit), GatedRepo (401 without a token, 403 with a token
  not granted), 401 "Invalid credentials in Authorization header" for an
  unknown token. A renamed repo's old id gets a relative 307 (Location: the
  same path with the new id; "rename_status" changes the code).

CDN routes: /cdn/{sha256}?X-Amz-...&Expires=T&X-Repo=R&X-Amz-Signature=S
(signature checked, 403 when wrong or expired; 404 when repo R stores no
such object), ETag = quoted sha256, one Range gives
206 + Content-Range, an unsatisfiable one 416.
--cdn-dir DIR --cdn-base URL (the benchmark's): every LFS file is also written
to DIR/{sha256}, and the Hub redirects to URL/{sha256}?... instead, a real
server (nginx capping each connection) serving DIR there; the query it
ignores, and its access log counts the bytes.

Both servers: /stats (JSON: requests, ranges, auth, agents (User-Agent),
x_headers (the X-* request headers), bytes per path without query; not counted; on the CDN a one-byte probe, Range: bytes=0-0, is
counted under probes alone, its byte in no bytes: it is no download), /reset (zero them), and POST /control/corrupt with JSON
{"oid": SHA256_OR_SHA1, "mode": "flip"|"short"|null}: every later response
carrying that file's bytes (LFS: by sha256 on the CDN; small: by git sha1 on
the Hub) is wrong: "flip" flips every byte in the middle third (same
length), "short" announces the whole length and closes after half the body.
POST /control/hold {"user": NAME, "delay": S, "status": 403|null} (user null:
off): the Hub's resolve requests with that user's token, except a client's
metadata question (Range: bytes=0-0), wait S seconds, then are refused as a
gated repo refuses (status) or answered as usual (null). With "api": true,
that user's API requests also wait S seconds first (status ignored there).
POST /control/branch {"repo": ID, "rev": NAME, "commit": SHA40}: the branch
(or tag) NAME of repo ID names commit SHA40 from now on (a push); the
commits it named before stay reachable by their hashes, as on the Hub.
POST /control/down {"status": 503} (status null: off): the Hub answers every
request but /stats, /reset and /control/* with that status and a JSON error
body, no X-Error-Code (an outage, not a refusal); counted in /stats as
usual. With "only": "resolve" or "api", only those routes are down. The CDN
is not affected.
POST /control/hostile {"on": true}: the Hub's refusals of a resolve (401,
403, gated or private) carry the file's X-Linked-Etag, X-Linked-Size and
X-Repo-Commit, as a Hub that leaks them would.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import random
import re
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.urandom(16)
XET_ACCEPT = "application/vnd.xet-fileinfo+json"


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_bytes(seed, size):
    """random.Random(seed)'s bytes, 64 MiB at a time past that (randbytes
    cannot make more than 256 MiB at once): the same bytes as one call
    for every size up to 64 MiB."""
    r, step = random.Random(seed), 1 << 26
    if size <= step:
        return r.randbytes(size)
    return b"".join(r.randbytes(min(step, size - i)) for i in range(0, size, step))


def fake_sha(*parts):
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


class File:
    def __init__(self, path, spec):
        self.path = path
        self.lfs = "lfs" in spec or "lfs_pointer" in spec
        # A pointer committed without its object: the repo stores no bytes.
        self.stored = "lfs" in spec
        if "lfs_pointer" in spec:
            p = spec["lfs_pointer"]
            self.data, self.sha256, self.size = None, p["sha256"], p["size"]
            self.pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                            % (self.sha256, self.size)).encode()
            self.xet_hash = hashlib.sha256(b"xet" + self.pointer).hexdigest()
        elif self.lfs:
            self.data = lfs_bytes(spec["lfs"].get("seed", 0), spec["lfs"]["size"])
            self.size = len(self.data)
            self.sha256 = hashlib.sha256(self.data).hexdigest()
            self.pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                            % (self.sha256, len(self.data))).encode()
            self.xet_hash = hashlib.sha256(b"xet" + self.data).hexdigest()
        else:
            self.data = spec["text"].encode() if "text" in spec else base64.b64decode(spec["b64"])
            self.size = len(self.data)
            self.pointer = self.data
        self.oid = git_blob_sha1(self.pointer)  # the git blob: the pointer for LFS


class Repo:
    def __init__(self, spec):
        self.id = spec["id"]
        self.type = spec.get("type", "model")
        self.revisions = spec.get("revisions") or {"main": fake_sha(self.type, self.id, "main")}
        self.commits = set(self.revisions.values())  # every commit a branch ever named
        self.gated = spec.get("gated")
        self.private = spec.get("private")
        self.xet = bool(spec.get("xet"))
        self.renamed_from = spec.get("renamed_from")
        self.files = {p: File(p, f) for p, f in sorted(spec.get("files", {}).items())}
        self.dirs = sorted({"/".join(p.split("/")[:i]) for p in self.files
                            for i in range(1, p.count("/") + 1)})

    def commit(self, rev):
        if rev == "HEAD":
            rev = "main"
        if rev in self.revisions:
            return self.revisions[rev]
        return rev if rev in self.commits else None


class HubError(Exception):
    def __init__(self, status, code, message, commit=None):
        super().__init__(message)
        self.status, self.code, self.message, self.commit = status, code, message, commit
        self.extra = []  # more headers (a hostile Hub's)


class State:
    """What both servers share: the repos, the counters, the corrupt switch."""

    def __init__(self, desc, page_size=None):
        self.repos = [Repo(r) for r in desc.get("repos", [])]
        self.tokens = desc.get("tokens", {})
        self.page_size = page_size or desc.get("page_size", 50)
        self.url_ttl = desc.get("url_ttl", 3600)
        self.rename_status = desc.get("rename_status", 307)
        self.blobs = {f.sha256: f for r in self.repos for f in r.files.values() if f.stored}
        # What each repo's storage holds, as the CDN's paths are the repo's
        # on the Hub: (repo key, sha256).
        self.stored = {(r.type + "/" + r.id, f.sha256) for r in self.repos
                       for f in r.files.values() if f.stored}
        self.corrupt = {}
        self.hold = {}  # user -> (delay s, status or None): /control/hold
        self.hostile = False  # refusals name the file: /control/hostile
        self.down = None  # (status, "resolve"|"api"|None) while the Hub is down: /control/down
        self.lock = threading.Lock()
        self.hub_base = self.cdn_base = None
        self.cdn_external = None  # --cdn-base: another server is the CDN
        self.stats = {"hub": self._zero(), "cdn": self._zero()}

    @staticmethod
    def _zero():
        return {"requests": {}, "ranges": {}, "auth": {}, "bytes": {}, "methods": {}, "probes": {},
                "agents": {}, "x_headers": {}}

    def count(self, side, path, method, headers):
        with self.lock:
            s = self.stats[side]
            # A one-byte probe of the CDN (hubd asks whether the repo holds
            # an LFS file's object) is no download: counted apart.
            probe = side == "cdn" and headers.get("Range") == "bytes=0-0"
            key = "probes" if probe else "requests"
            s[key][path] = s[key].get(path, 0) + 1
            if probe:
                return
            s["methods"].setdefault(path, []).append(method)
            s["auth"].setdefault(path, []).append(headers.get("Authorization", ""))
            s["agents"].setdefault(path, []).append(headers.get("User-Agent", ""))
            s["x_headers"].setdefault(path, []).append(
                {k: v for k, v in headers.items() if k.lower().startswith("x-")})
            if headers.get("Range") is not None:
                s["ranges"].setdefault(path, []).append(headers["Range"])

    def add_bytes(self, side, path, n):
        with self.lock:
            b = self.stats[side]["bytes"]
            b[path] = b.get(path, 0) + n

    def find(self, rtype, rid):
        for r in self.repos:
            if r.type == rtype and r.id == rid:
                return r
        return None

    def renamed(self, rtype, rid):
        for r in self.repos:
            if r.type == rtype and r.renamed_from == rid:
                return r
        return None

    def user(self, headers):
        """(token given, user or None)."""
        auth = headers.get("Authorization", "")
        if not auth:
            return False, None
        tok = auth[7:] if auth.lower().startswith("bearer ") else auth
        return True, self.tokens.get(tok)

    def check_access(self, repo, headers):
        given, user = self.user(headers)
        if given and user is None:
            raise HubError(401, None, "Invalid credentials in Authorization header")
        if repo.private is not None and user not in repo.private:
            raise repo_not_found(given)
        if repo.gated is not None and user not in repo.gated:
            what = "%s %s" % (repo.type, repo.id)
            if not given:
                raise HubError(401, "GatedRepo", "Access to %s is restricted. You must have access to "
                               "it and be authenticated to access it. Please log in." % what)
            raise HubError(403, "GatedRepo", "Access to %s is restricted and you are not in the "
                           "authorized list. Visit the repo page to ask for access." % what)

    def sign(self, sha, expires, repo=""):
        return hmac.new(SECRET, ("%s:%d:%s" % (sha, expires, repo)).encode(),
                        hashlib.sha256).hexdigest()

    def cdn_url(self, f, repo):
        expires = int(time.time()) + self.url_ttl
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        q = urllib.parse.urlencode([
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"), ("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"),
            ("X-Amz-Credential", "STUB/%s/us-east-1/s3/aws4_request" % now[:8]),
            ("X-Amz-Date", now), ("X-Amz-Expires", str(self.url_ttl)),
            ("X-Amz-Signature", self.sign(f.sha256, expires, repo)),
            ("X-Amz-SignedHeaders", "host"),
            ("response-content-disposition",
             "inline; filename*=UTF-8''%s;" % urllib.parse.quote(f.path.split("/")[-1])),
            ("x-id", "GetObject"), ("Expires", str(expires)), ("X-Repo", repo)])
        if self.cdn_external:
            return "%s/%s?%s" % (self.cdn_external, f.sha256, q)
        return "%s/cdn/%s?%s" % (self.cdn_base, f.sha256, q)


def repo_not_found(authenticated):
    return HubError(404 if authenticated else 401, "RepoNotFound", "Repository not found")


def parse_range(value, size):
    """(start, end inclusive) for one "bytes=a-b", "bytes=a-" or "bytes=-n";
    None for no usable range; "bad" when unsatisfiable."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", value or "")
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    if m.group(1) == "":
        n = int(m.group(2))
        return (max(0, size - n), size - 1) if n and size else "bad"
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) else size - 1
    if a >= size or b < a:
        return "bad"
    return a, min(b, size - 1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubstub"
    side = "hub"  # set per server class
    state = None
    verbose = False

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("%s %s\n" % (self.side, fmt % args))

    # --- plumbing ---------------------------------------------------------
    def send(self, status, body=b"", headers=(), ctype="application/json; charset=utf-8"):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def send_json(self, obj, status=200, headers=()):
        self.send(status, json.dumps(obj).encode(), headers)

    def send_error_hub(self, e):
        h = [("X-Error-Message", e.message)]
        if e.code:
            h.append(("X-Error-Code", e.code))
        if e.commit:
            h.append(("X-Repo-Commit", e.commit))
        h += e.extra
        self.send_json({"error": e.message}, e.status, h)

    def send_bytes(self, data, oid, headers, ctype="application/octet-stream"):
        """data with one optional Range, the corrupt switch applied."""
        size = len(data)
        rng = parse_range(self.headers.get("Range"), size)
        headers = list(headers) + [("Accept-Ranges", "bytes")]
        if rng == "bad":
            return self.send(416, b"", headers + [("Content-Range", "bytes */%d" % size)])
        start, end, status = 0, size - 1, 200
        if rng:
            (start, end), status = rng, 206
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end, size)))
        body = data[start:end + 1]
        mode = self.state.corrupt.get(oid)
        stop = len(body)
        if mode == "flip":
            lo, hi = size // 3, max(size // 3 + 1, 2 * size // 3)
            body = bytes(c ^ 0xFF if lo <= start + i < hi else c for i, c in enumerate(body))
        elif mode == "short":
            stop = len(body) // 2
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.write(body[:stop])
        if not (self.side == "cdn" and self.headers.get("Range") == "bytes=0-0"):  # a probe's
            self.state.add_bytes(self.side, self.path.split("?")[0], stop)
        if stop < len(body):
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self):
        path, _, query = self.path.partition("?")
        q = urllib.parse.parse_qs(query)
        if path == "/stats":
            with self.state.lock:
                return self.send_json(self.state.stats[self.side])
        if path == "/reset":
            self.read_body()
            with self.state.lock:
                self.state.stats[self.side] = State._zero()
            return self.send_json({"ok": True})
        if path == "/control/corrupt" and self.command == "POST":
            req = json.loads(self.read_body() or b"{}")
            with self.state.lock:
                if req.get("mode"):
                    self.state.corrupt[req["oid"]] = req["mode"]
                else:
                    self.state.corrupt.pop(req["oid"], None)
            return self.send_json({"ok": True})
        if path == "/control/hold" and self.command == "POST":
            req = json.loads(self.read_body() or b"{}")
            with self.state.lock:
                if req.get("user"):
                    self.state.hold[req["user"]] = (float(req.get("delay", 0)), req.get("status"),
                                                    bool(req.get("api")))
                else:
                    self.state.hold.clear()
            return self.send_json({"ok": True})
        if path == "/control/branch" and self.command == "POST":
            req = json.loads(self.read_body() or b"{}")
            with self.state.lock:
                repo = next(r for r in self.state.repos if r.id == req["repo"])
                repo.revisions[req["rev"]] = req["commit"]
                repo.commits.add(req["commit"])
            return self.send_json({"ok": True})
        if path == "/control/down" and self.command == "POST":
            req = json.loads(self.read_body() or b"{}")
            with self.state.lock:
                self.state.down = (int(req["status"]), req.get("only")) if req.get("status") else None
            return self.send_json({"ok": True})
        if path == "/control/hostile" and self.command == "POST":
            self.state.hostile = bool(json.loads(self.read_body() or b"{}").get("on"))
            return self.send_json({"ok": True})
        self.state.count(self.side, path, self.command, self.headers)
        down = self.state.down if self.side == "hub" else None
        if down and down[1] in (None, "api" if path.startswith("/api/") else "resolve"):
            if self.command == "POST":
                self.read_body()
            return self.send_json({"error": "the Hub is down (stub)"}, down[0])
        try:
            if self.side == "cdn":
                return self.cdn(path, q)
            return self.hub(path, q)
        except HubError as e:
            if self.command == "POST":
                self.read_body()
            return self.send_error_hub(e)

    do_GET = do_HEAD = do_POST = handle_any

    # --- CDN --------------------------------------------------------------
    def cdn(self, path, q):
        m = re.fullmatch(r"/cdn/([0-9a-f]{64})", path)
        f = m and self.state.blobs.get(m.group(1))
        repo = q.get("X-Repo", [""])[0]
        if not f or (repo, f.sha256) not in self.state.stored:
            return self.send(404, b"<Error><Code>NoSuchKey</Code></Error>", ctype="application/xml")
        try:
            expires = int(q["Expires"][0])
            good = hmac.compare_digest(q["X-Amz-Signature"][0],
                                       self.state.sign(f.sha256, expires, repo))
        except (KeyError, ValueError):
            good, expires = False, 0
        if not good or expires < time.time():
            why = "AccessDenied" if not good else "Request has expired"
            return self.send(403, ("<Error><Code>AccessDenied</Code><Message>%s</Message></Error>"
                                   % why).encode(), ctype="application/xml")
        disp = q.get("response-content-disposition", [None])[0]
        headers = [("ETag", '"%s"' % f.sha256), ("Cache-Control", "public, max-age=604800")]
        if disp:
            headers.append(("Content-Disposition", disp))
        self.send_bytes(f.data, f.sha256, headers)

    # --- Hub --------------------------------------------------------------
    def split_repo(self, segs, rtype, keywords):
        """(repo id, rest) where rest starts with one of keywords: the id
        is org/name, or one segment ("gpt2") when that is a known repo."""
        one = len(segs) > 1 and segs[1] in keywords
        if one and (self.state.find(rtype, segs[0]) or self.state.renamed(rtype, segs[0])):
            return segs[0], segs[1:]
        if len(segs) > 2 and segs[2] in keywords:
            return "/".join(segs[:2]), segs[2:]
        if one:
            return segs[0], segs[1:]
        return None, None

    def lookup(self, rtype, rid, rev, prefix, rest_path):
        """The repo and the commit for rev, or HubError / a rename redirect."""
        repo = self.state.find(rtype, rid)
        if repo is None:
            new = self.state.renamed(rtype, rid)
            if new is not None:
                loc = prefix + new.id + rest_path
                raise Redirect(loc)
            given, _ = self.state.user(self.headers)
            raise repo_not_found(given)
        self.state.check_access(repo, self.headers)
        if rev is None:
            return repo, None
        commit = repo.commit(rev)
        if commit is None:
            raise HubError(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        return repo, commit

    def hub(self, path, q):
        segs = path.lstrip("/").split("/")
        try:
            if segs[0] == "api":
                return self.api(segs[1:], q)
            return self.resolve(segs)
        except Redirect as r:
            if self.command == "POST":
                self.read_body()
            query = self.path.partition("?")[2]
            self.send(self.state.rename_status, b"", [("Location", r.loc + ("?" + query if query else ""))])

    def resolve(self, segs):
        rtype, prefix = "model", "/"
        if segs[0] in ("datasets", "spaces"):
            rtype, prefix, segs = segs[0][:-1], "/" + segs[0] + "/", segs[1:]
        rid, rest = self.split_repo(segs, rtype, ("resolve", "raw"))
        if rid is None or len(rest) < 3 or self.command not in ("GET", "HEAD"):
            raise HubError(404, None, "Not found")
        kind, rev = rest[0], urllib.parse.unquote(rest[1])
        fpath = urllib.parse.unquote("/".join(rest[2:]))
        held = self.state.hold.get(self.state.user(self.headers)[1])
        if held and self.headers.get("Range") != "bytes=0-0":
            time.sleep(held[0])
            if held[1]:
                raise HubError(held[1], "GatedRepo", "Access to this repo is restricted (held).")
        try:
            repo, commit = self.lookup(rtype, rid, rev, prefix, "/" + "/".join(rest))
        except HubError as e:
            repo = self.state.find(rtype, rid)
            f = repo and repo.files.get(fpath)
            if self.state.hostile and f is not None and f.lfs:
                e.extra = [("X-Linked-Etag", '"%s"' % f.sha256), ("X-Linked-Size", str(f.size)),
                           ("X-Repo-Commit", repo.commit(rev) or rev), ("ETag", '"%s"' % f.oid)]
            raise
        f = repo.files.get(fpath)
        if f is None:
            raise HubError(404, "EntryNotFound", "Entry not found", commit)
        headers = [("X-Repo-Commit", commit), ("Vary", "Origin, Accept")]
        if kind == "raw" or not f.lfs:
            return self.send_bytes(f.pointer, f.oid, headers + [("ETag", '"%s"' % f.oid)],
                                   "text/plain; charset=utf-8")
        headers += [("X-Linked-Etag", '"%s"' % f.sha256), ("X-Linked-Size", str(f.size)),
                    ("ETag", '"%s"' % f.oid)]
        if repo.xet:
            api = "%s/api/%ss/%s/xet-read-token/%s" % (self.state.hub_base, rtype, repo.id, commit)
            recon = "%s/v1/reconstructions/%s" % (self.state.cdn_base, f.xet_hash)
            headers += [("X-Xet-Hash", f.xet_hash),
                        ("X-Xet-Refresh-Route", api[len(self.state.hub_base):]),
                        ("Link", '<%s>; rel="xet-auth", <%s>; rel="xet-reconstruction-info"'
                         % (api, recon))]
            if XET_ACCEPT in self.headers.get("Accept", ""):
                body = {"hash": f.xet_hash, "etag": f.sha256, "size": f.size,
                        "refreshUrl": api, "reconstructionUrl": recon}
                return self.send(200, json.dumps(body).encode(), headers, XET_ACCEPT)
        loc = self.state.cdn_url(f, repo.type + "/" + repo.id)
        self.send(302, ("Found. Redirecting to %s" % loc).encode(),
                  headers + [("Location", loc)], "text/plain; charset=utf-8")

    # --- API --------------------------------------------------------------
    def api(self, segs, q):
        if not segs or segs[0] not in ("models", "datasets", "spaces"):
            raise HubError(404, None, "Sorry, we can't find the page you are looking for.")
        held = self.state.hold.get(self.state.user(self.headers)[1])
        if held and held[2]:
            time.sleep(held[0])
        rtype, prefix = segs[0][:-1], "/api/" + segs[0] + "/"
        segs = segs[1:]
        rid, rest = self.split_repo(segs, rtype, ("revision", "tree", "paths-info", "xet-read-token"))
        if rid is None:  # plain /api/models/{repo}
            rid, rest = "/".join(segs), []
        route = rest[0] if rest else "info"
        rev = urllib.parse.unquote(rest[1]) if len(rest) > 1 else ("main" if rest else None)
        tail = "/" + "/".join(rest) if rest else ""
        repo, commit = self.lookup(rtype, rid, rev if route != "info" else "main", prefix, tail)
        if route in ("info", "revision"):
            return self.send_json(self.info(repo, commit, q))
        if route == "tree":
            return self.tree(repo, commit, urllib.parse.unquote("/".join(rest[2:])), q)
        if route == "paths-info" and self.command == "POST":
            return self.paths_info(repo, commit)
        if route == "xet-read-token":
            exp = int(time.time()) + 3600
            tok = {"accessToken": "xet_stub_" + commit[:8], "exp": exp, "casUrl": self.state.cdn_base}
            return self.send_json(tok, headers=[("X-Xet-Access-Token", tok["accessToken"]),
                                                ("X-Xet-Cas-Url", tok["casUrl"]),
                                                ("X-Xet-Token-Expiration", str(exp))])
        raise HubError(404, None, "Sorry, we can't find the page you are looking for.")

    def info(self, repo, commit, q):
        blobs = q.get("blobs", [""])[0].lower() in ("1", "true")
        sib = []
        for f in repo.files.values():
            s = {"rfilename": f.path}
            if blobs:
                s.update(blobId=f.oid, size=f.size)
                if f.lfs:
                    s["lfs"] = {"sha256": f.sha256, "size": f.size, "pointerSize": len(f.pointer)}
            sib.append(s)
        out = {"_id": fake_sha("id", repo.id)[:24], "id": repo.id, "author": repo.id.split("/")[0],
               "sha": commit, "lastModified": "2024-01-02T03:04:05.000Z",
               "createdAt": "2024-01-01T00:00:00.000Z", "private": repo.private is not None,
               "gated": "manual" if repo.gated is not None else False, "disabled": False,
               "downloads": 0, "likes": 0, "tags": [], "siblings": sib,
               "usedStorage": sum(f.size for f in repo.files.values())}
        if repo.type == "model":
            out.update(modelId=repo.id, pipeline_tag=None, library_name=None)
        if repo.xet:
            out["xetEnabled"] = True
        return out

    def entry(self, repo, commit, p, expand):
        f = repo.files.get(p)
        if f is None:
            e = {"type": "directory", "oid": fake_sha("tree", repo.id, commit, p), "size": 0, "path": p}
        else:
            e = {"type": "file", "oid": f.oid, "size": f.size, "path": p}
            if f.lfs:
                e["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": len(f.pointer)}
                if repo.xet:
                    e["xetHash"] = f.xet_hash
        if expand:
            e["lastCommit"] = {"id": commit, "title": "Upload %s" % p, "date": "2024-01-02T03:04:05.000Z"}
            if f is not None:
                e["securityFileStatus"] = {"status": "safe"}
        return e

    def tree(self, repo, commit, sub, q):
        flag = lambda k: q.get(k, [""])[0].lower() in ("1", "true")
        recursive, expand = flag("recursive"), flag("expand")
        if sub and sub not in repo.dirs:
            raise HubError(404, "EntryNotFound" if sub not in repo.files else None,
                           "%s does not exist on \"%s\"" % (sub, commit), commit)
        base = sub + "/" if sub else ""
        names = [p for p in repo.dirs + list(repo.files) if p.startswith(base) and
                 (recursive or "/" not in p[len(base):])]
        # directories before files at each level, as the Hub lists them
        names.sort(key=lambda p: (p.split("/")[:-1], p not in repo.dirs, p))
        try:
            start = int(base64.urlsafe_b64decode(q.get("cursor", ["MA=="])[0]).decode())
        except ValueError:
            raise HubError(400, None, "Invalid cursor")
        page = names[start:start + self.state.page_size]
        headers = []
        if start + self.state.page_size < len(names):
            cur = base64.urlsafe_b64encode(str(start + self.state.page_size).encode()).decode()
            qq = [(k, v) for k, vs in q.items() if k != "cursor" for v in vs] + [("cursor", cur)]
            nxt = "%s%s?%s" % (self.state.hub_base, self.path.partition("?")[0],
                               urllib.parse.urlencode(qq))
            headers.append(("Link", '<%s>; rel="next"' % nxt))
        self.send_json([self.entry(repo, commit, p, expand) for p in page], headers=headers)

    def paths_info(self, repo, commit):
        raw = self.read_body()
        if "json" in self.headers.get("Content-Type", ""):
            req = json.loads(raw or b"{}")
            paths, expand = req.get("paths", []), bool(req.get("expand"))
        else:
            form = urllib.parse.parse_qs(raw.decode())
            paths = form.get("paths", [])
            expand = form.get("expand", [""])[0].lower() in ("1", "true")
        out = [self.entry(repo, commit, p, expand) for p in paths
               if p in repo.files or p in repo.dirs]
        self.send_json(out)


class Redirect(Exception):
    def __init__(self, loc):
        super().__init__(loc)
        self.loc = loc


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(state, side, bind, port, verbose):
    h = type(side.title() + "Handler", (Handler,), {"side": side, "state": state, "verbose": verbose})
    return Server((bind, port), h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repos", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="the Hub's port (the CDN's is free)")
    ap.add_argument("--page-size", type=int)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--cdn-dir", help="write each LFS file here as {sha256}")
    ap.add_argument("--cdn-base", help="redirect LFS files to URL/{sha256} (serving --cdn-dir)")
    a = ap.parse_args()
    if bool(a.cdn_dir) != bool(a.cdn_base):
        ap.error("--cdn-dir and --cdn-base go together")
    with open(a.repos) as f:
        state = State(json.load(f), a.page_size)
    if a.cdn_dir:
        state.cdn_external = a.cdn_base.rstrip("/")
        for sha, f in state.blobs.items():
            path = os.path.join(a.cdn_dir, sha)
            if not (os.path.exists(path) and os.path.getsize(path) == f.size):
                with open(path + ".tmp", "wb") as out:
                    out.write(f.data)
                os.rename(path + ".tmp", path)
    hub = make_server(state, "hub", a.bind, a.port, a.verbose)
    cdn = make_server(state, "cdn", a.bind, 0, a.verbose)
    host = "[%s]" % a.bind if ":" in a.bind else a.bind
    state.hub_base = "http://%s:%d" % (host, hub.server_address[1])
    state.cdn_base = "http://%s:%d" % (host, cdn.server_address[1])
    for s in (hub, cdn):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"hub": hub.server_address[1], "cdn": cdn.server_address[1]}, f)
    os.rename(tmp, a.port_file)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(3600):
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
