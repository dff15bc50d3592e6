#!/usr/bin/env python3
"""Compares two folders written by tests/same_draws.sh row for row.

Every CSV must have the same rows (header comments that name paths, dates or times masked), and
every stdout the same lines once seconds, rates and paths are masked. Prints one line per
difference and exits 1 if there is any.
"""

import re
import sys
from pathlib import Path

# Lines that carry a time, a date, a path or a rate derived from seconds.
MASKS = [
    re.compile(r".*(per second|wall time|/s\b|Elapsed Time|start_datetime|file =).*"),
    re.compile(r"\d+(\.\d+)?(e[+-]?\d+)? ?(seconds|s|ms|us|µs)\b"),
    re.compile(r"/[^\s]*"),
    re.compile(r"\d+ %"),
]


def masked(line: str) -> str:
    for mask in MASKS:
        line = mask.sub("<masked>", line)
    return line


def lines(path: Path) -> list[str]:
    return [masked(line) for line in path.read_text().splitlines()]


def main(old: Path, new: Path) -> int:
    differences = 0
    files = sorted(p.relative_to(old) for p in old.rglob("*") if p.is_file())
    if not files:
        print(f"{old}: no files")
        return 1
    for name in files:
        a, b = old / name, new / name
        if not b.exists():
            print(f"{name}: missing in {new}")
            differences += 1
            continue
        if name.suffix not in (".csv", ".stdout"):
            continue
        la, lb = lines(a), lines(b)
        for i, (x, y) in enumerate(zip(la, lb)):
            if x != y:
                print(f"{name}:{i + 1}: {x!r} != {y!r}")
                differences += 1
                break
        if len(la) != len(lb):
            print(f"{name}: {len(la)} lines against {len(lb)}")
            differences += 1
    print(f"{len(files)} files compared, {differences} differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
