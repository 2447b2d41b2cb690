"""The line codec of hubd's socket protocol (docs/PROTOCOL.md, "Framing").

Contract: ``_build_line(verb, [(key, value), ...])`` gives the bytes of one
request line (values percent-encoded as the protocol requires; ValueError
for a value that cannot go on a line, a NUL byte); ``_parse_line(raw)``
reads one reply line into ``(verb, {key: value})`` (ValueError if it does
not parse). The limits below are the protocol's: callers check them
before sending, so hubd never has to answer an ERR without an id for a
line of ours. Pure functions: no I/O, nothing of the package imported.
"""

import urllib.parse

# Protocol limits (docs/PROTOCOL.md). Checking them before sending means the
# daemon never has to answer an ERR without an id for our FETCH line.
LINE_MAX = 16384          # bytes, newline included
URL_MAX = 8192            # bytes of the decoded URL
FIELDS_MAX = 32           # key=value fields per line
FETCH_ID = "py1"          # one FETCH per connection, so any id will do


def _encode_value(value):
    """Percent-encodes what PROTOCOL.md requires: space, control bytes, DEL,
    '%' and non-ASCII. Everything else, '=' included, goes as it is."""
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    if b"\0" in value:
        raise ValueError("a NUL byte cannot be sent (values are C strings)")
    out = []
    for b in value:
        if b <= 0x20 or b >= 0x7F or b == 0x25:
            out.append("%%%02X" % b)
        else:
            out.append(chr(b))
    return "".join(out)


def _parse_line(line):
    """b'VERB k=v k=v' -> (verb, {key: value}); values decoded to str (bytes
    that are not UTF-8 become surrogates, as os.fsdecode does, so a path
    round-trips). The first occurrence of a repeated key wins. Raises
    ValueError on a line that does not parse."""
    parts = line.split()
    if not parts:
        raise ValueError("empty line")
    verb = parts[0].decode("ascii")
    fields = {}
    for p in parts[1:]:
        key, eq, value = p.partition(b"=")
        if not eq or not key:
            raise ValueError("field without key=: %r" % p)
        k = key.decode("ascii")
        if k not in fields:
            fields[k] = urllib.parse.unquote_to_bytes(value).decode("utf-8", "surrogateescape")
    return verb, fields


def _build_line(verb, fields):
    """fields: a list of (key, value) pairs, repeated keys allowed."""
    line = " ".join([verb] + ["%s=%s" % (k, _encode_value(v)) for k, v in fields])
    return (line + "\n").encode("ascii")
