#!/usr/bin/env python3
"""Compare two output directories of `hugescope demo` (or any experiment) file by file.

Used to prove that a refactoring leaves results byte-identical: build the old and
the new commit, run `hugescope demo --out A` with the old and `--out B` with the
new, then `scripts/compare_outputs.py A B`. Text files (JSON, CSV, HTML, plan
files) are compared after replacing each directory's own path with a placeholder,
since results name the files they wrote; every other file is compared byte for
byte. Exit status 0 when every file matches and both directories list the same
files, 1 otherwise (each difference is printed).
"""
import os
import sys

TEXT = (".json", ".csv", ".html", ".txt", ".md", ".plan", ".log")


def files(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def normalised(path, root):
    data = open(path, "rb").read()
    if path.endswith(TEXT):
        for form in {root, os.path.abspath(root), os.path.realpath(root)}:
            data = data.replace(form.rstrip("/").encode(), b"<OUT>")
    return data


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: compare_outputs.py DIR_A DIR_B", file=sys.stderr)
        return 2
    a, b = argv[1], argv[2]
    for d in (a, b):
        if not os.path.isdir(d):
            print(f"error: {d}: not a directory", file=sys.stderr)
            return 2
    fa, fb = files(a), files(b)
    bad = 0
    for f in sorted(fa ^ fb):
        print(f"only in {a if f in fa else b}: {f}")
        bad += 1
    for f in sorted(fa & fb):
        if normalised(os.path.join(a, f), a) != normalised(os.path.join(b, f), b):
            print(f"differs: {f}")
            bad += 1
    print(f"{len(fa & fb)} files compared, {bad} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
