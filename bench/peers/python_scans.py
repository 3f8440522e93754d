#!/usr/bin/env python3
"""Inclusive scans from Python on the GPU: resident.cumsum / cummin / cummax against PyTorch's cumsum
and cummax and CuPy's cumsum on the same float32 memory (and int32 summed into int64), 2^20-2^28
elements, each timed between two CUDA events over `calls` calls back to back, beside a device copy of
the same bytes in batches that alternate with the row's (a clock dip falls on both). `--repeat`
repetitions in one call; a row's figure is its time over the copy's.

usage: python_scans.py [--json FILE|-] [--calls 20] [--repeat 3] [--sizes 20,24,26,28]"""
import argparse
import sys

import resident as rs
from seed_stages import write_json


def timed(torch, f, calls):
    """Microseconds per call of f: `calls` calls between two events on torch's current stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        f()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="-")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="20,24,26,28", help="log2 of the element counts, comma-separated")
    a = ap.parse_args()
    if rs.cuda_device_count() == 0:
        sys.exit("python_scans: no GPU: " + rs.cuda_unavailable_reason())
    import torch
    try:
        import cupy as cp
    except ImportError:
        cp = None
    out = {"benchmark": "python_scans", "calls": a.calls, "rows": []}
    for lg in (int(s) for s in a.sizes.split(",")):
        n = 1 << lg
        x = torch.rand(n, device="cuda")
        y = torch.empty_like(x)
        xi = torch.randint(-9, 9, (n,), device="cuda", dtype=torch.int32)
        yi = torch.empty(n, dtype=torch.int64, device="cuda")
        rows = [("resident cumsum float32", lambda: rs.cumsum(x, y)),
                ("torch.cumsum float32", lambda: torch.cumsum(x, 0, out=y)),
                ("resident cummax float32", lambda: rs.cummax(x, y)),
                ("resident cumsum int32 into int64", lambda: rs.cumsum(xi, yi)),
                ("torch.cumsum int32 into int64", lambda: torch.cumsum(xi, 0, out=yi))]
        if lg <= 20:  # PyTorch's cummax is not a single-pass scan: hundreds of copies' time and more
            rows.append(("torch.cummax float32", lambda: torch.cummax(x, 0)))
        if cp is not None:
            c, cy = cp.asarray(x), cp.asarray(y)
            rows.append(("cupy.cumsum float32", lambda: cp.cumsum(c, out=cy)))
        for rep in range(1, a.repeat + 1):
            for what, f in rows:
                f()
                copy = timed(torch, lambda: y.copy_(x), a.calls)
                us = timed(torch, f, a.calls)
                copy = min(copy, timed(torch, lambda: y.copy_(x), a.calls))
                out["rows"].append({"repeat": rep, "log2_n": lg, "what": what, "us": us, "copy_us": copy,
                                    "over_copy": us / copy})
                print(f"2^{lg} rep {rep} {what:34s} {us:10.1f} us {us / copy:7.2f} x copy", file=sys.stderr,
                      flush=True)
    write_json(out, a.json)


if __name__ == "__main__":
    main()
