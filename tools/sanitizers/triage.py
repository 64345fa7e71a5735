#!/usr/bin/env python3
"""Reads the sanitizer report files of a `tools/test --sanitize` run and decides: exit 1 when any report is a
finding (printed whole), 0 when there is none.

Every report counts except one kind of LeakSanitizer entry: a 32-byte block allocated by the Swift runtime's
`formWeakReference`, the side table of an object that ever had a weak reference. The object points to its side
table only through its reference-count word, where the pointer is stored shifted, so LeakSanitizer sees no
pointer to the side table of an object still alive at exit and calls it a direct leak. A side table of an object
that really leaked is still reported with that object, which is its own entry ("Indirect leak" of the object,
allocated by our code): that entry fails the run. Suppressing these entries in lsan.supp instead would hide the
leaked objects too (LeakSanitizer treats a suppressed block as a root, so everything it points to counts as
reachable).
"""
import re
import sys
from pathlib import Path


def leak_entries(text):
    """The "Direct/Indirect leak of ..." entries of a LeakSanitizer report, each with its stack."""
    return re.findall(r"^(?:Direct|Indirect) leak of .*?(?=^\S|\Z)", text, flags=re.M | re.S)


def is_side_table(entry):
    frames = re.findall(r"^\s+#\d+ .*$", entry, flags=re.M)
    return entry.startswith("Direct leak of") and any("formWeakReference" in f for f in frames[:4])


def main(directory):
    findings = 0
    side_tables = 0
    for path in sorted(Path(directory).glob("*")):
        text = path.read_text(errors="replace")
        if not text.strip():
            continue
        if "ERROR: LeakSanitizer" in text and "ERROR: AddressSanitizer" not in text:
            entries = leak_entries(text)
            real = [e for e in entries if not is_side_table(e)]
            side_tables += len(entries) - len(real)
            if not real and entries:
                continue
        findings += 1
        print(f"== {path}\n{text}")
    if side_tables:
        print(f"tools/test: {side_tables} LeakSanitizer entries were Swift side tables of live objects "
              "(not leaks: see tools/sanitizers/triage.py)")
    if findings:
        print(f"tools/test: sanitizer reports from {findings} process(es) in {directory}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
