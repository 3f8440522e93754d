#!/usr/bin/env python3
"""Where a program call's host time goes, n = 1024 float32 on cuda:0: each layer between the Python
caller and the launch timed alone, the same kernel called from C++ in a loop, and the peers' calls of
the same size (PyTorch, CuPy ElementwiseKernel), in `--repeat` repetitions. Two figures a row: `us`,
calls queued back to back (`calls` of them, then one synchronization; the median of 7 batches: the
host's or the GPU's pace, whichever is slower, and any stall of the host within a batch), and
`issue_us`, the host cost of one call: the median of `calls` calls each timed alone, in batches of
200 with a synchronization between (the launch queue never fills, so no call waits for the GPU), the
rows taking turns batch by batch (a slow spell of the host falls on every row alike).

usage: python_call_layers.py [--json FILE|-] [--calls 2000] [--repeat 3]"""
import argparse, json, statistics, sys, time

import numpy as np

import resident as rs  # first: NumPy as numba-cuda expects it (resident._compat)
from resident import _core, _program
from seed_stages import per_call_seconds, write_json

N = 1024


def issue_times(rows, calls, batch=200):
    """Each row's seconds for one call to return, `calls` of them each timed alone: the rows take turns,
    `batch` calls at a time with a synchronization before each turn (the launch queue never fills, so
    no call waits for the GPU, and a spell of a slow host falls on every row alike)."""
    times = {what: [] for what, _, _ in rows}
    for what, f, sync in rows:
        f()
        sync()
    while len(times[rows[0][0]]) < calls:
        for what, f, sync in rows:
            sync()
            got = times[what]
            for _ in range(min(batch, calls - len(got))):
                t0 = time.perf_counter()
                f()
                got.append(time.perf_counter() - t0)
            sync()
    return {what: statistics.median(t) for what, t in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="-")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if rs.cuda_device_count() == 0:
        sys.exit("python_call_layers: no GPU: " + rs.cuda_unavailable_reason())
    out = {"benchmark": "python_call_layers", "n": N, "rows": []}

    x = rs.to_device(np.random.rand(N).astype(np.float32), device="cuda:0")
    p = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    p(x)
    chain = _program._compiled[(p.name, "float32", False)]
    built = chain._built[(("float32",), tuple(_core._jit_target(x)))]
    pipe, dispatch, one = built[0], _core._jit_dispatch, (x,)
    rows = [("p(x): program, resident array", lambda: p(x), rs.synchronize),
            ("chain(x): its chain through resident.jit", lambda: chain(x), rs.synchronize),
            ("_core._jit_dispatch: the chain's C++ fast path", lambda: dispatch(chain._built, one, None, None, False),
             rs.synchronize),
            ("pipeline.run: the C++ chain bound alone", lambda: pipe.run([x], None), rs.synchronize)]
    try:
        import torch
        t = torch.rand(N, device="cuda")
        rows += [("p(t): program, PyTorch tensor", lambda: p(t), torch.cuda.synchronize),
                 ("torch.sin(t, out=t)", lambda: torch.sin(t, out=t), torch.cuda.synchronize)]
    except ImportError as e:  # a missing peer: recorded, not fatal
        out.setdefault("skipped", {})["torch"] = repr(e)
    try:
        import cupy as cp
        c, cy = cp.random.random(N, dtype=cp.float32), cp.empty(N, dtype=cp.float32)
        ek = cp.ElementwiseKernel("float32 x", "float32 y",
                                  "float v = x*1.5f+0.5f; v = sqrtf(v*v+1.0f); y = sinf(v)*0.5f;", "pipe3")
        rows += [("p(c): program, CuPy array", lambda: p(c), cp.cuda.Device().synchronize),
                 ("CuPy ElementwiseKernel", lambda: ek(c, cy), cp.cuda.Device().synchronize)]
    except ImportError as e:
        out.setdefault("skipped", {})["cupy"] = repr(e)
    for rep in range(1, a.repeat + 1):
        print(f"--- repetition {rep}", file=sys.stderr)
        issue = issue_times(rows, a.calls)
        for what, f, sync in rows:
            us = per_call_seconds(f, a.calls, sync) * 1e6
            out["rows"].append({"repeat": rep, "what": what, "us": us, "issue_us": issue[what] * 1e6})
            print(f"{what:58s} {us:8.2f} us {issue[what] * 1e6:8.2f} us issue", file=sys.stderr, flush=True)
        cpp = statistics.median(_core._time_cpp_jit_calls(pipe, x, a.calls) for _ in range(7))
        out["rows"].append({"repeat": rep, "what": "C++: the same chain in a loop", "us": cpp})
        print(f"{'C++: the same chain in a loop':58s} {cpp:8.2f} us", file=sys.stderr)
    write_json(out, a.json)


main()
