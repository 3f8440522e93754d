#!/usr/bin/env python3
"""Runs `resident demo --json -` and checks each mode's rate against its time: gb_per_s is the bytes the
seed pipeline reads and writes (4 + 4 per float element) over the mode's median time.

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
        want = 8.0 * j["n"] / (m["median_ms"] * 1e-3) / 1e9
        if not abs(m["gb_per_s"] - want) <= 1e-6 * want:
            bad.append(f"{m['key']}: gb_per_s {m['gb_per_s']} where {8 * j['n']} bytes in {m['median_ms']} ms "
                       f"are {want}")
    if bad:
        sys.exit("check_demo_rates: " + "; ".join(bad))
    print(f"check_demo_rates: {len(j['modes'])} modes' rates agree with their times")


if __name__ == "__main__":
    main()
