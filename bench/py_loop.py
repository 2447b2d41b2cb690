#!/usr/bin/env python3
"""The download loop of torch.hub's download_url_to_file, as measured in the
starting document (pytorch PR 116536), without the tqdm progress bar:
urlopen, read(CHUNK), write to a file, feed SHA-256, until EOF.

    python3 bench/py_loop.py URL DEST [CHUNK [CAFILE]]

CHUNK is the read size in bytes (default 131072, torch.hub's size since that
PR; 8192 before it). CAFILE, for an https URL, is the PEM file of the CA to
trust instead of the system's (verification stays on, as in torch.hub).
Prints the SHA-256 of the body as hex on stdout.
"""

import hashlib
import ssl
import sys
from urllib.request import Request, urlopen


def main(argv):
    if len(argv) not in (3, 4, 5):
        sys.stderr.write("usage: py_loop.py URL DEST [CHUNK [CAFILE]]\n")
        return 2
    url, dest = argv[1], argv[2]
    chunk = int(argv[3]) if len(argv) >= 4 else 131072
    # urlopen's own default for https is this same call without a cafile.
    context = ssl.create_default_context(cafile=argv[4]) if len(argv) == 5 else None
    req = Request(url, headers={"User-Agent": "torch.hub"})
    sha256 = hashlib.sha256()
    with urlopen(req, context=context) as u, open(dest, "wb") as f:
        while True:
            buffer = u.read(chunk)
            if len(buffer) == 0:
                break
            f.write(buffer)
            sha256.update(buffer)
    print(sha256.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
