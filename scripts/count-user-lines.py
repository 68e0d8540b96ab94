#!/usr/bin/env python3
"""Counts the lines of user code in training programs: lines that hold code, not blank lines or comments.

    scripts/count-user-lines.py [--max N] FILE...

Prints each file's count and the total; with --max, exits 1 when a file has more (the engine's promise: a complete
fault-tolerant training program in at most 200 lines of user code).
"""
import argparse
import re
import sys


def code_lines(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # block comments
    count = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            count += 1
    return count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    worst = 0
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            n = code_lines(f.read())
        worst = max(worst, n)
        print(f"{n:5d}  {path}")
    if args.max is not None and worst > args.max:
        print(f"more than {args.max} lines of user code", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
