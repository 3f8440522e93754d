#!/usr/bin/env python3
"""The seed pipeline as Python functions (rs.stage, compiled by numba-cuda to LTO-IR and linked into
resident's kernel) against the same math as a chain of resident's built-in operations (one compiled
kernel) and against a device-to-device copy of the same bytes, at large n, timed alike in one process:
`calls` calls queued back to back, then one synchronization, wall clock per call (the device's
throughput: the Python dispatch of a call overlaps the previous call's kernel); the median of `reps`.
Every output is checked against an FP64 reference first.

usage: python_stages.py [--json FILE|-] [--log2 26 28] [--calls 20] [--reps 9]"""
import argparse, json, sys

import numpy as np

import resident as rs  # first: NumPy as numba-cuda expects it (resident._compat)
from seed_stages import master, per_call_seconds, write_json


def per_call_ms(f, calls, reps, sync):
    return per_call_seconds(f, calls, sync, reps) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="-")
    ap.add_argument("--log2", type=int, nargs="+", default=[26, 28])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args()
    if rs.cuda_device_count() == 0:
        sys.exit("python_stages: no GPU: " + rs.cuda_unavailable_reason())
    try:
        import cupy as cp
    except ImportError:
        sys.exit("python_stages: needs CuPy for the device copy it compares with")
    for l in a.log2:
        if not 10 <= l <= 30:
            sys.exit(f"python_stages: --log2 {l}: give sizes from 2^10 to 2^30")
    sync = lambda: rs.synchronize("cuda:0")
    staged = master
    builtin = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    out = {"benchmark": "python_stages", "calls_per_timing": a.calls, "reps": a.reps, "rows": []}
    print(f"{'n':>5}  {'copy (ms)':>10}  {'built-in (ms)':>13}  {'rs.stage (ms)':>13}  "
          f"{'stage / built-in':>16}  {'stage / copy':>12}", file=sys.stderr)
    for l in a.log2:
        n = 1 << l
        host = np.random.default_rng().random(n, dtype=np.float32)
        # resident's own arrays for the pipelines (their calls are asynchronous on the array's stream),
        # CuPy's for the copy (the same number of bytes)
        x = rs.to_device(host, device="cuda:0")
        cx = cp.asarray(host)
        cy = cp.empty_like(cx)
        ref = 0.5 * np.sin(np.sqrt((1.5 * host.astype(np.float64) + 0.5) ** 2 + 1.0))
        errors = {}
        poison = np.full(n, -12345.678, dtype=np.float32)
        for name, run in (("built-in", lambda: builtin(x, y)), ("rs.stage", lambda: staged(x, out=y))):
            y = rs.to_device(poison, device="cuda:0")
            run()
            sync()
            got = np.asarray(y.to_host()).astype(np.float64)
            err = float(np.max(np.abs(got - ref) / (1 + np.abs(ref))))
            if not err < 1e-5:
                sys.exit(f"python_stages: {name} at n = 2^{l} is wrong: max relative error {err:.3g}")
            errors[name] = err
        stream = cp.cuda.get_current_stream()
        copy_ms = per_call_ms(lambda: cy.data.copy_from_device_async(cx.data, cx.nbytes, stream), a.calls, a.reps,
                              stream.synchronize)
        builtin_ms = per_call_ms(lambda: builtin(x, y), a.calls, a.reps, sync)
        staged_ms = per_call_ms(lambda: staged(x, out=y), a.calls, a.reps, sync)
        row = {"log2_n": l, "n": n, "copy_ms": copy_ms, "builtin_ms": builtin_ms, "stage_ms": staged_ms,
               "stage_over_builtin": staged_ms / builtin_ms, "stage_over_copy": staged_ms / copy_ms,
               "max_rel_error": max(errors.values())}
        out["rows"].append(row)
        print(f"2^{l:<3}  {copy_ms:10.4f}  {builtin_ms:13.4f}  {staged_ms:13.4f}  {row['stage_over_builtin']:16.3f}  "
              f"{row['stage_over_copy']:12.3f}", file=sys.stderr)
    write_json(out, a.json)


if __name__ == "__main__":
    main()
