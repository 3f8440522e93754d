#!/usr/bin/env python3
"""Runs `resident demo --json -` and checks each mode's rate against its time: gb_per_s is the bytes the
mode moves over its median time: the seed pipeline reads and writes 4 + 4 bytes per float element, a
sum (the sharded demo's `..._sum` modes) reads 4.

usage: check_demo_rates.py RESIDENT_CLI ARG... (the demo's arguments, `--json -` appended)."""
import json
import subprocess
import sys


def main():
    cli, args = sys.argv[1], sys.argv[2:]
    run = subprocess.run([cli, "demo", *args, "--json", "-"], capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        sys.exit(f"check_demo_rates: the demo failed ({run.returncode}): {run.stderr[-2000:]}")
    j = json.loads(run.stdout)
    bad = []
    for m in j["modes"]:
        per_element = 4.0 if m["key"].endswith("_sum") else 8.0
        want = per_element * j["n"] / (m["median_ms"] * 1e-3) / 1e9
        if not abs(m["gb_per_s"] - want) <= 1e-6 * want:
            bad.append(f"{m['key']}: gb_per_s {m['gb_per_s']} where {per_element * j['n']:.0f} bytes in {m['median_ms']} ms "
                       f"are {want}")
    if bad:
        sys.exit("check_demo_rates: " + "; ".join(bad))
    print(f"check_demo_rates: {len(j['modes'])} modes' rates agree with their times")


if __name__ == "__main__":
    main()
