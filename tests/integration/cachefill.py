"""A cache of many blobs, made fast: n small public blobs under blobs/
(blob i holds the bytes of str(i)) and a hubd.db that is no database at
all, so that hubd's start-up sets it aside and records every blob again
(reconcile_rebuild). Used by test_scale and bench/scale.py."""

import hashlib
import os


def digest_of(i):
    return hashlib.sha256(b"%d" % i).hexdigest()


def fill(cache, n):
    """Writes the n blobs and the database to rebuild; their total bytes."""
    os.makedirs(os.path.join(cache, "blobs"), exist_ok=True)
    total = 0
    for i in range(n):
        data = b"%d" % i
        h = digest_of(i)
        sub = os.path.join(cache, "blobs", h[:2])
        if not os.path.isdir(sub):
            os.mkdir(sub, 0o755)
        p = os.path.join(sub, h)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, 0o444)
        total += len(data)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(os.path.join(cache, "hubd.db" + suffix)):
            os.unlink(os.path.join(cache, "hubd.db" + suffix))
    with open(os.path.join(cache, "hubd.db"), "wb") as f:
        f.write(b"no database at all" * 512)
    return total
