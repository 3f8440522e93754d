#!/usr/bin/env python3
"""What `with resident.profile()` adds per call from Python: the same small in-place program call made
`calls` times back to back (then one synchronization) outside and inside a profile, wall clock per call;
the median of `reps` each, interleaved; and the same call from C++ alike (the core's share). The target is
<= 2 us per call on a GPU while collecting.

usage: python_profile_cost.py [--device cuda:0] [--calls 20000] [--reps 7] [--json FILE|-]"""
import argparse
import sys
import time

import numpy as np

import resident as rs
from seed_stages import write_json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=rs.default_device())
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default="-")
    a = ap.parse_args()
    x = rs.to_device(np.ones(1024, np.float32), a.device)
    p = rs.op.mul(1.0)

    def per_call_us():
        p(x)
        rs.synchronize(a.device)
        t0 = time.perf_counter()
        for _ in range(a.calls):
            p(x)
        rs.synchronize(a.device)
        return (time.perf_counter() - t0) / a.calls * 1e6

    off, on = [], []
    for _ in range(a.reps):
        off.append(per_call_us())
        with rs.profile() as prof:
            on.append(per_call_us())
        calls = sum(r.calls for r in prof.rows if r.name != "(outside any call)")
        if calls != a.calls + 1:
            sys.exit(f"python_profile_cost: the profile counted {calls} calls, made {a.calls + 1}")
    # The same program called from C++ in a loop, outside and inside a profile: the core's own share of
    # the cost (its call sites are C++ lines; no Python frame is looked up).
    program = rs.program([p])
    cpp_off, cpp_on = [], []
    for _ in range(a.reps):
        cpp_off.append(rs._core._time_cpp_calls(program, x, a.calls))
        with rs.profile():
            cpp_on.append(rs._core._time_cpp_calls(program, x, a.calls))
    med = lambda v: sorted(v)[len(v) // 2]
    out = {"benchmark": "python_profile_cost", "device": a.device, "calls": a.calls, "reps": a.reps,
           "per_call_us_off": med(off), "per_call_us_on": med(on), "added_us": med(on) - med(off), "target_us": 2.0,
           "cpp_per_call_us_off": med(cpp_off), "cpp_per_call_us_on": med(cpp_on),
           "cpp_added_us": med(cpp_on) - med(cpp_off)}
    print(f"{a.device}: {out['per_call_us_off']:.2f} us per call, {out['per_call_us_on']:.2f} us while a profile "
          f"collects: +{out['added_us']:.2f} us (target <= 2); from C++: {out['cpp_per_call_us_off']:.2f} us, "
          f"{out['cpp_per_call_us_on']:.2f} us, +{out['cpp_added_us']:.2f} us", file=sys.stderr)
    write_json(out, a.json)


if __name__ == "__main__":
    main()
