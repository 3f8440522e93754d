#!/usr/bin/env python3
"""Runs the CLI with `--json -` and checks its JSON: every figure is a JSON number (no "128.0 KiB",
"2^14" or "1.6e-07" strings; counts are integers), and the run record is there.

usage: check_json_numbers.py RESIDENT_CLI ARG... (the CLI's arguments, `--json -` appended)."""
import json
import re
import subprocess
import sys

# Text that is a figure written as a string: a number, a power of two, or a number with a unit.
FIGURE = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*([KMGT]i?B|B|ms|us|s|GB/s|%|x)?\s*$|^2\^\d+$")
# Keys whose values are versions or names, text by design.
TEXT_KEYS = {"version", "resident_version", "commit", "driver", "cuda_runtime", "compute_capability", "host", "date"}
# Keys that hold counts: their values must be integers.
COUNT_KEY = re.compile(r"(^|_)(bytes|kernels|log2_n|n|reps|repeat|copies|allocations|multiprocessors)$")
RUN_KEYS = ("resident_version", "commit", "device", "gpu", "driver", "cuda_runtime", "host", "date")


def walk(v, path, problems):
    if isinstance(v, dict):
        for k, x in v.items():
            where = f"{path}.{k}"
            if isinstance(x, str) and k not in TEXT_KEYS and FIGURE.match(x):
                problems.append(f"{where} = {x!r} is a figure written as a string")
            if isinstance(x, float) and COUNT_KEY.search(k):
                problems.append(f"{where} = {x!r} is a count written as a float")
            walk(x, where, problems)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            if isinstance(x, str) and FIGURE.match(x):
                problems.append(f"{path}[{i}] = {x!r} is a figure written as a string")
            walk(x, f"{path}[{i}]", problems)


def check(doc):
    problems = []
    walk(doc, "$", problems)
    run = doc.get("run") if isinstance(doc, dict) else None
    if not isinstance(run, dict):
        problems.append("no run record ($.run)")
    else:
        problems += [f"$.run lacks '{k}'" for k in RUN_KEYS if k not in run]
        if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", str(run.get("date"))):
            problems.append(f"$.run.date = {run.get('date')!r} is not UTC ISO 8601")
        if not run.get("commit") or not run.get("host"):
            problems.append("$.run.commit or $.run.host is empty")
    return problems


def self_test():
    """The check itself must catch what it is for."""
    bad = {"rows": [{"bytes": "128.0 KiB", "log2_n": "2^14", "max_rel_error": "1.6e-07", "kernels": 3.0}]}
    found = check(bad)
    assert len(found) == 5, found  # four figures and the missing run record
    good = {"run": {k: "x" for k in RUN_KEYS} | {"date": "2026-11-30T12:00:00Z"},
            "rows": [{"bytes": 131072, "log2_n": 14, "max_rel_error": 1.6e-07, "kernels": 3, "mode": "(c) fused"}]}
    assert not check(good), check(good)


def main(argv):
    self_test()
    cmd = argv[1:] + ["--json", "-"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}", file=sys.stderr)
        return 1
    problems = check(json.loads(p.stdout))
    for q in problems:
        print(f"{' '.join(argv[2:])}: {q}", file=sys.stderr)
    if not problems:
        print(f"{' '.join(argv[2:])}: every figure is a number; the run record is present")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
