#!/usr/bin/env python3
"""docs/SECURITY.md names the tests behind each promise, and they exist.

Every numbered promise must carry a "Tests:" line. Every test it names in
backquotes must be found in the tree, so a renamed or removed test cannot
leave a promise pointing at nothing:
- `test_NAME` is an integration module (tests/integration/test_NAME.py) or a
  method (`def test_NAME`) of one;
- `ClassTest` (or `module.ClassTest.test_x`) is a class of one;
- `unit_NAME` is a Check program (tests/unit/test_NAME.c), and the names in
  the parentheses after it (`unit_x` (`a`, `b_*`)) are its START_TESTs;
- `fuzz_NAME` is a fuzz target (tests/fuzz/fuzz_NAME.c).
Other backquoted words (settings, error codes, paths) are not checked.

Usage: check_security_tests.py SOURCE_DIR. Exits 1 naming what is missing.
"""
import fnmatch
import glob
import os
import re
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main(src):
    doc = read(os.path.join(src, "docs", "SECURITY.md"))
    integ = {}
    for path in glob.glob(os.path.join(src, "tests", "integration", "test_*.py")):
        integ[os.path.basename(path)[:-3]] = read(path)
    methods = set()
    classes = set()
    for text in integ.values():
        methods.update(re.findall(r"^\s*def (test_\w+)", text, re.M))
        classes.update(re.findall(r"^class (\w+)", text, re.M))
    units = {}
    for path in glob.glob(os.path.join(src, "tests", "unit", "test_*.c")):
        name = os.path.basename(path)[len("test_"):-2]
        units[name] = set(re.findall(r"^START_TEST\((\w+)\)", read(path), re.M))
    fuzz = {os.path.basename(p)[:-2] for p in glob.glob(os.path.join(src, "tests", "fuzz", "fuzz_*.c"))}

    missing = []

    # Each numbered promise, from its "N. **" line to the next one or heading.
    promises = re.split(r"\n(?=\d+\. \*\*|#)", doc)
    for block in promises:
        m = re.match(r"(\d+)\. \*\*", block)
        if m and "Tests:" not in block:
            missing.append("promise %s names no tests (no \"Tests:\")" % m.group(1))

    def test_exists(token):
        parts = token.split(".")
        for part in parts:
            if part in integ or part in methods or part in classes:
                continue
            return False
        return True

    for token in re.findall(r"`([A-Za-z_][\w.*]*)`", doc):
        if token.startswith("unit_"):
            if token[len("unit_"):] not in units:
                missing.append("`%s`: no tests/unit/test_%s.c" % (token, token[5:]))
        elif token.startswith("fuzz_"):
            if token not in fuzz:
                missing.append("`%s`: no tests/fuzz/%s.c" % (token, token))
        elif token.startswith("test_") or re.match(r"[A-Z]\w*Test\b", token):
            if not test_exists(token):
                missing.append("`%s`: no such integration module, class or method" % token)

    # `unit_x` (`a`, `b_*`): each name in the parentheses is one of its tests.
    for prog, inner in re.findall(r"`unit_(\w+)`\s*\(([^)]*)\)", doc):
        names = units.get(prog, set())
        for want in re.findall(r"`([\w*]+)`", inner):
            if not fnmatch.filter(names, want):
                missing.append("`%s` is not a test of unit_%s" % (want, prog))

    for line in missing:
        print("docs/SECURITY.md: " + line)
    if missing:
        return 1
    print("docs/SECURITY.md: every promise names its tests, and all %d named exist" %
          len(set(re.findall(r"`((?:test_|unit_|fuzz_)[\w.*]*|[A-Z]\w*Test[\w.]*)`", doc))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
