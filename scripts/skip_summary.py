#!/usr/bin/env python3
"""How many test cases skipped, and why: read from the JUnit XML that scripts/test.sh has CTest
(--output-junit), GoogleTest (GTEST_OUTPUT=xml:DIR/) and pytest (--junitxml) write.

    python3 scripts/skip_summary.py FILE_OR_DIR...

Prints, per source (CTest entries, GoogleTest cases, pytest cases), the cases run and skipped and the
skips grouped by reason, most frequent first. Exit status 0 (a summary, not a gate).
"""
import collections
import pathlib
import re
import sys
import xml.etree.ElementTree as ET


def reason_of(text):
    """The reason line of a skip message: GoogleTest puts 'file:line' first, pytest 'file:line: why'."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not re.fullmatch(r"\S+:\d+(: Skipped)?", ln)]
    why = lines[0] if lines else "(no reason given)"
    why = re.sub(r"^\S+\.py:\d+: ", "", why)
    why = re.sub(r"^Skipped: ", "", why)
    return why[:160]


def kind_of(root):
    """'gtest', 'pytest' or 'ctest' from the XML's shape."""
    first = root.find(".//testcase")
    if root.tag == "testsuites" and root.find("testsuite") is not None and first is not None and first.get("file") is not None:
        return "gtest"
    if root.get("name") == "pytest" or (root.find("testsuite") is not None and root.find("testsuite").get("name") == "pytest"):
        return "pytest"
    if first is not None and first.get("status") is not None and first.get("result") is not None:
        return "gtest"
    return "ctest"


def read(path, tally):
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        print(f"skip_summary: {path} could not be read ({e})")
        return
    kind = kind_of(root)
    t = tally[kind]
    for case in root.iter("testcase"):
        t["cases"] += 1
        skipped = case.find("skipped")
        if kind == "gtest":
            if case.get("result") != "skipped" and skipped is None:
                continue
            msg = skipped.get("message") if skipped is not None else ""
            msg = msg or (skipped.text if skipped is not None else "")
        elif kind == "ctest":
            if skipped is None and case.get("status") not in ("notrun", "disabled"):
                continue
            out = case.findtext("system-out") or ""
            m = re.search(r"every case skipped \((.*)\): reported to CTest as skipped", out)
            msg = m.group(1) if m else (skipped.get("message") if skipped is not None else case.get("status"))
        else:
            if skipped is None:
                continue
            msg = skipped.get("message") or skipped.text
        t["skipped"] += 1
        t["reasons"][reason_of(msg)] += 1


def main(argv):
    tally = collections.defaultdict(lambda: {"cases": 0, "skipped": 0, "reasons": collections.Counter()})
    files = []
    for a in argv:
        p = pathlib.Path(a)
        files += sorted(p.rglob("*.xml")) if p.is_dir() else ([p] if p.exists() else [])
    for f in files:
        read(f, tally)
    print(f"== skipped tests ({len(files)} JUnit files)")
    names = {"ctest": "CTest entries", "gtest": "GoogleTest cases", "pytest": "pytest cases"}
    for kind in ("ctest", "gtest", "pytest"):
        if kind not in tally:
            continue
        t = tally[kind]
        print(f"{names[kind]}: {t['cases']} run or skipped, {t['skipped']} skipped")
        for why, n in t["reasons"].most_common():
            print(f"  {n:5d}  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
