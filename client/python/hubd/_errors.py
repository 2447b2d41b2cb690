"""HubdError, the one exception of the client, and HubdFallbackWarning.

Contract: ``HubdError(code, msg, url=None)`` is an :class:`OSError` whose
``.code`` is the protocol's (or a client-side) error code, ``.msg`` the
human text (filled in from the code when hubd sent none, and always saying
whose disk a ``no_space`` is) and ``.url`` the URL asked for. Both classes
are public as ``hubd.HubdError`` and ``hubd.HubdFallbackWarning`` (their
``__module__`` says so: tracebacks, pickles and huggingface_hub-style class
checks name them there); the codes are listed in the package's doc.
This module imports nothing of the package, so every other one may import it.
"""

# Used when an ERR line has no msg (it would not fit on a line).
_CODE_TEXT = {
    "bad_request": "the request was malformed",
    "line_too_long": "the request line was too long",
    "unknown_verb": "unknown verb",
    "proto_version": "unsupported protocol version",
    "bad_url": "the URL does not parse",
    "unsupported_scheme": "the URL's scheme is neither http nor https",
    "dns": "the host name did not resolve",
    "connect": "no address of the host accepted a connection",
    "timeout": "connect or idle timeout expired",
    "redirect": "too many or unusable redirects",
    "tls_verify": "the server's certificate failed verification",
    "tls": "the TLS handshake or a TLS record failed",
    "http_parse": "the origin's response did not parse as HTTP/1.1",
    "truncated": "the connection ended before the body was complete",
    "hash_mismatch": "the SHA-256 of the download differs from the expected one",
    "io": "the cache could not be written",
    "no_space": "the file system of hubd's cache is full",
    "shutting_down": "the daemon is stopping",
    "internal": "internal error in hubd (see its log)",
}


# Said with every no_space: whose disk is full, and who can free it.
_NO_SPACE_NOTE = ("this is hubd's cache, not your disk or output folder: ask hubd's admin to "
                  "free room: hubctl gc, max_cache_size, min_free_space")


class HubdFallbackWarning(RuntimeWarning):
    """The system daemon refused this user, and a per-user one (with its own
    cache, in the home folder) is used instead."""

    __module__ = "hubd"


class HubdError(OSError):
    """A fetch that hubd refused or failed, or a daemon that could not be
    reached. ``code`` is the machine-readable reason (see the module doc),
    ``msg`` the human one, ``url`` the URL asked for (or None)."""

    __module__ = "hubd"

    def __init__(self, code, msg, url=None):
        if not msg:
            msg = _CODE_TEXT.get(code, "")
            if not msg and code.startswith("http_"):
                msg = "the origin answered HTTP " + code[5:]
        if code == "no_space" and _NO_SPACE_NOTE not in msg:
            # The full disk is not the caller's, nor theirs to clean.
            msg = "%s (%s)" % (msg, _NO_SPACE_NOTE) if msg else _NO_SPACE_NOTE
        self.code = code
        self.msg = msg
        self.url = url
        text = "%s: %s" % (code, msg)
        if url is not None and url not in msg:
            text += " (url: %s)" % url
        # One argument: OSError would otherwise read (code, msg) as
        # (errno, strerror).
        super().__init__(text)

    def __str__(self):
        return self.args[0]
