"""hubd.hf_hub_download and hubd.snapshot_download raise huggingface_hub's
exception classes (client/python/hubd/_hferrors.py), each a hubd.HubdError
with hubd's code, through a real hubd whose hf_upstream is the stand-in Hub
(tests/hubstub.py): a wrong token, a token not granted for a gated repo, a
missing repo, revision and file (caught as transformers catches an optional
file: ``except EntryNotFoundError``), a bad repo id (refused before any
request), offline or the Hub down and not cached. Without huggingface_hub
the classes are hubd's; with one importable (a stand-in package tree with
huggingface_hub 1.x's hierarchy and constructor, in a subprocess) its
classes are raised, and still carry hubd's code.
"""

import json
import os
import subprocess
import sys
import textwrap

from harness import HERE, HubTestCase
from hubstub_fixture import HubStub, clear_env, start_front

REPO = os.path.dirname(os.path.dirname(HERE))
CLIENT = os.path.join(REPO, "client", "python")
sys.path.insert(0, CLIENT)
import hubd  # noqa: E402
import hubd.hf  # noqa: E402

MAIN = "c" * 40
REPOS = {
    "tokens": {"hf_alice": "alice", "hf_carol": "carol"},
    "repos": [
        {"id": "org/public", "revisions": {"main": MAIN},
         "files": {"config.json": {"text": '{"model_type": "stub"}\n'}}},
        {"id": "org/gated", "gated": ["alice"], "files": {"g.txt": {"text": "gated\n"}}},
    ],
}
HF_ENV = ("HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_TOKEN_PATH", "XDG_CACHE_HOME",
          "HF_HUB_DISABLE_PROGRESS_BARS", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE",
          "TRANSFORMERS_OFFLINE", "HUBD_SOCKET")

# huggingface_hub 1.x's hierarchy (src/huggingface_hub/errors.py), its
# HfHubHTTPError constructor as the brief has it; httpx's HTTPError stood in
# by a class whose `request` property raises when unset, as httpx's does.
FAKE_ERRORS = '''
class HTTPError(Exception):
    def __init__(self, message):
        super().__init__(message)
        self._request = None

    @property
    def request(self):
        if self._request is None:
            raise RuntimeError("The .request property has not been set.")
        return self._request

    @request.setter
    def request(self, request):
        self._request = request


class HfHubHTTPError(HTTPError, OSError):
    def __init__(self, message, response=None, *, server_message=None):
        self.request_id = response.headers.get("x-request-id") if response is not None else None
        self.server_message = server_message
        self.response = response
        super().__init__(message)


class RepositoryNotFoundError(HfHubHTTPError):
    repo_id = None
    repo_type = None


class GatedRepoError(RepositoryNotFoundError):
    pass


class RevisionNotFoundError(HfHubHTTPError):
    pass


class EntryNotFoundError(Exception):
    pass


class RemoteEntryNotFoundError(HfHubHTTPError, EntryNotFoundError):
    pass


class LocalEntryNotFoundError(FileNotFoundError, EntryNotFoundError):
    def __init__(self, message):
        super().__init__(message)


class HFValidationError(ValueError):
    pass
'''

# Run in the subprocess: each case's class names (the MRO's), and its code.
CHILD = '''
import json, os, sys
import hubd
import huggingface_hub.errors as E

def case(name, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except Exception as e:
        out[name] = {"mro": [c.__module__ + "." + c.__name__ for c in type(e).__mro__],
                     "code": getattr(e, "code", None), "hubd": isinstance(e, hubd.HubdError),
                     "str": str(e)}
        checks = {"RepositoryNotFoundError": E.RepositoryNotFoundError,
                  "GatedRepoError": E.GatedRepoError, "RevisionNotFoundError":
                  E.RevisionNotFoundError, "EntryNotFoundError": E.EntryNotFoundError,
                  "RemoteEntryNotFoundError": E.RemoteEntryNotFoundError,
                  "LocalEntryNotFoundError": E.LocalEntryNotFoundError,
                  "HfHubHTTPError": E.HfHubHTTPError, "HFValidationError": E.HFValidationError,
                  "hubd.EntryNotFoundError": hubd.EntryNotFoundError,
                  "hubd.RepositoryNotFoundError": hubd.RepositoryNotFoundError}
        out[name]["is"] = sorted(k for k, c in checks.items() if isinstance(e, c))
        out[name]["response"] = getattr(e, "response", "unset")
        out[name]["server_message"] = getattr(e, "server_message", None)
    else:
        out[name] = None

out = {}
cache = sys.argv[1]
case("wrong_token", hubd.hf_hub_download, "org/public", "config.json", token="hf_nobody",
     cache_dir=cache)
case("gated", hubd.hf_hub_download, "org/gated", "g.txt", token="hf_carol", cache_dir=cache)
case("no_repo", hubd.snapshot_download, "org/nothing", cache_dir=cache)
case("no_revision", hubd.hf_hub_download, "org/public", "config.json", revision="v9",
     cache_dir=cache)
case("no_file", hubd.hf_hub_download, "org/public", "nope.json", cache_dir=cache)
case("bad_id", hubd.hf_hub_download, "org/a--b", "config.json", cache_dir=cache)
os.environ["HF_HUB_OFFLINE"] = "1"
case("offline", hubd.hf_hub_download, "org/public", "other.json", cache_dir=cache)
json.dump(out, sys.stdout)
'''


class PythonHfErrorsTest(HubTestCase):
    def setUp(self):
        super().setUp()
        self.stub = HubStub(os.path.join(self.tmp, "stub"), REPOS)
        self.addCleanup(self.stub.stop)
        start_front(self, self.stub)
        clear_env(self, HF_ENV)
        os.environ["HF_HOME"] = os.path.join(self.tmp, "hfhome")
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        os.environ["HUBD_SOCKET"] = self.hubd.socket
        self.cache = os.path.join(self.tmp, "hfcache")

    def raised(self, cls, code, fn, *a, **kw):
        """fn's exception: an instance of cls and of HubdError with code."""
        with self.assertRaises(cls) as cm:
            fn(*a, cache_dir=self.cache, **kw)
        e = cm.exception
        self.assertIsInstance(e, hubd.HubdError)
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.code, code, str(e))
        return e

    def test_the_hubs_refusals(self):
        # a token the Hub does not know: 401, no X-Error-Code, as huggingface_hub's
        # hf_raise_for_status for a repo's URL
        e = self.raised(hubd.RepositoryNotFoundError, "http_401", hubd.hf_hub_download,
                        "org/public", "config.json", token="hf_nobody")
        self.assertNotIsInstance(e, hubd.GatedRepoError)
        self.assertIsNone(e.response)
        self.assertEqual(e.repo_id, "org/public")
        self.raised(hubd.RepositoryNotFoundError, "http_401", hubd.snapshot_download,
                    "org/public", token="hf_nobody")
        # a token not granted for a gated repo; none at all
        e = self.raised(hubd.GatedRepoError, "http_403", hubd.hf_hub_download, "org/gated",
                        "g.txt", token="hf_carol")
        self.assertIsInstance(e, hubd.RepositoryNotFoundError)  # as huggingface_hub's
        self.assertIsInstance(e, hubd.HfHubHTTPError)
        self.assertIn("GatedRepo", e.msg)
        self.raised(hubd.GatedRepoError, "http_401", hubd.snapshot_download, "org/gated",
                    token=False)
        # a missing repo, a missing revision
        e = self.raised(hubd.RepositoryNotFoundError, "http_404", hubd.snapshot_download,
                        "org/nothing", token="hf_alice")
        self.assertNotIsInstance(e, hubd.GatedRepoError)
        self.raised(hubd.RepositoryNotFoundError, "http_401", hubd.hf_hub_download,
                    "org/nothing", "config.json")
        e = self.raised(hubd.RevisionNotFoundError, "http_404", hubd.hf_hub_download,
                        "org/public", "config.json", revision="v9")
        self.assertNotIsInstance(e, hubd.RepositoryNotFoundError)
        self.assertNotIsInstance(e, hubd.EntryNotFoundError)
        self.raised(hubd.RevisionNotFoundError, "http_404", hubd.snapshot_download,
                    "org/public", revision="v9")
        # the caught names are there in hubd.hf as well
        for name in hubd._hferrors.__all__:
            self.assertIs(getattr(hubd.hf, name), getattr(hubd, name))

    def test_a_missing_file_as_transformers_catches_it(self):
        """transformers' cached_files: ``except EntryNotFoundError`` for an
        optional file (generation_config.json, say), then goes on."""
        def optional(name):
            try:
                return hubd.hf_hub_download("org/public", name, cache_dir=self.cache)
            except hubd.EntryNotFoundError as e:
                self.assertIsInstance(e, hubd.RemoteEntryNotFoundError)
                self.assertIsInstance(e, hubd.HfHubHTTPError)
                self.assertNotIsInstance(e, hubd.LocalEntryNotFoundError)
                self.assertEqual(e.code, "http_404")
                self.assertIn("EntryNotFound", e.msg)
                return None
        self.assertIsNone(optional("generation_config.json"))
        self.assertTrue(optional("config.json").endswith("/config.json"))

    def test_a_bad_repo_id_is_refused_before_any_request(self):
        self.stub.reset()
        for bad in ("org/a--b", "org/a..b", "-org/x", "org/x.", "a/b/c", "org/x.git", "",
                    "o" * 97, "org/a b", "org/é"):
            for fn, a in ((hubd.hf_hub_download, (bad, "config.json")),
                          (hubd.snapshot_download, (bad,))):
                with self.assertRaises(hubd.HFValidationError, msg=bad) as cm:
                    fn(*a, cache_dir=self.cache)
                e = cm.exception
                self.assertIsInstance(e, ValueError)
                self.assertIsInstance(e, hubd.HubdError)
                self.assertEqual(e.code, "bad_request")
                for verb in ("HFREPO", "FETCH"):
                    self.assertNotIn(verb, str(e))
        with self.assertRaises(hubd.HFValidationError):
            hubd.snapshot_download(None, cache_dir=self.cache)
        self.assertEqual(self.stub.stats("hub")["requests"], {})
        self.assertEqual(self.stub.stats("cdn")["requests"], {})
        # offline too, as huggingface_hub's validate_hf_hub_args
        os.environ["HF_HUB_OFFLINE"] = "1"
        with self.assertRaises(hubd.HFValidationError):
            hubd.snapshot_download("org/a--b", cache_dir=self.cache)
        # what the Hub accepts is not refused
        for good in ("x", "org/x", "Org_1/x-y.z", "_a/b_"):
            hubd._hferrors.validate_repo_id(good)

    def test_not_cached_offline_or_hub_down(self):
        hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache)
        os.environ["HF_HUB_OFFLINE"] = "1"
        e = self.raised(hubd.LocalEntryNotFoundError, "offline_not_cached",
                        hubd.hf_hub_download, "org/public", "README.md")
        self.assertIsInstance(e, hubd.EntryNotFoundError)
        self.assertIsInstance(e, FileNotFoundError)
        self.assertIsInstance(e, ValueError)
        self.assertNotIsInstance(e, hubd.HfHubHTTPError)
        # snapshot_download: LocalEntryNotFoundError as well (huggingface_hub's)
        self.raised(hubd.LocalEntryNotFoundError, "offline_not_cached", hubd.snapshot_download,
                    "org/gated")
        # what is cached is still answered
        self.assertTrue(hubd.hf_hub_download("org/public", "config.json", cache_dir=self.cache))
        del os.environ["HF_HUB_OFFLINE"]
        # the Hub not answering: the outage's code, LocalEntryNotFoundError
        self.stub.control("down", {"status": 503})
        e = self.raised(hubd.LocalEntryNotFoundError, "http_503", hubd.hf_hub_download,
                        "org/public", "README.md")
        self.assertIn("not in the cache", e.msg)
        self.raised(hubd.LocalEntryNotFoundError, "http_503", hubd.snapshot_download, "org/gated")
        self.stub.stop()
        self.raised(hubd.LocalEntryNotFoundError, "connect", hubd.snapshot_download, "org/other")

    def test_huggingface_hubs_own_classes_when_it_imports(self):
        fake = os.path.join(self.tmp, "fakehf")
        os.makedirs(os.path.join(fake, "huggingface_hub"))
        with open(os.path.join(fake, "huggingface_hub", "__init__.py"), "w") as f:
            f.write('__version__ = "1.0.0.stub"\n')
        with open(os.path.join(fake, "huggingface_hub", "errors.py"), "w") as f:
            f.write(textwrap.dedent(FAKE_ERRORS))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([fake, CLIENT]),
                   PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([sys.executable, "-c", CHILD, self.cache], capture_output=True,
                           env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        out = json.loads(p.stdout)
        want = {
            "wrong_token": ("http_401", ["RepositoryNotFoundError", "HfHubHTTPError",
                                         "hubd.RepositoryNotFoundError"]),
            "gated": ("http_403", ["GatedRepoError", "RepositoryNotFoundError", "HfHubHTTPError",
                                   "hubd.RepositoryNotFoundError"]),
            "no_repo": ("http_401", ["RepositoryNotFoundError", "HfHubHTTPError",
                                     "hubd.RepositoryNotFoundError"]),
            "no_revision": ("http_404", ["RevisionNotFoundError", "HfHubHTTPError"]),
            "no_file": ("http_404", ["RemoteEntryNotFoundError", "EntryNotFoundError",
                                     "HfHubHTTPError", "hubd.EntryNotFoundError"]),
            "bad_id": ("bad_request", ["HFValidationError"]),
            "offline": ("offline_not_cached", ["LocalEntryNotFoundError", "EntryNotFoundError",
                                               "hubd.EntryNotFoundError"]),
        }
        for name, (code, classes) in want.items():
            got = out[name]
            self.assertIsNotNone(got, name)
            self.assertEqual((got["code"], got["hubd"]), (code, True), (name, got))
            self.assertEqual(got["is"], sorted(classes), (name, got))
            self.assertIn("huggingface_hub.errors." + got["mro"][0].rsplit(".", 1)[1],
                          got["mro"], (name, got))
            self.assertIn("hubd.HubdError", got["mro"], (name, got))
            self.assertTrue(got["str"].startswith(code + ": "), (name, got))
        self.assertIsNone(out["gated"]["response"])
        self.assertTrue(out["gated"]["server_message"].startswith("Access to"), out["gated"])
