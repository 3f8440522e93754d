#!/usr/bin/env python3
"""The Python package's costs on the GPU, measured in one process:
  exchange     torch / cupy / numba <-> resident through DLPack or the CUDA Array Interface, us per
               exchange (median of many), and the bytes the ledger saw move (must be 0)
  call         the seed pipeline as a run-time program on n = 10^4 floats, us per call from Python
               against the same call made from C++ in a loop, and CuPy's ElementwiseKernel of the same
               math called from Python

usage: python_overhead.py [--json FILE|-] [--calls 2000]"""
import argparse, json, statistics, sys, time

import numpy as np

import resident as rs


def per_call_us(f, calls, sync):
    f()
    sync()
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        sync()
        times.append((time.perf_counter() - t0) * 1e6 / calls)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="-")
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    if rs.cuda_device_count() == 0:
        sys.exit("python_overhead: no GPU: " + rs.cuda_unavailable_reason())
    out = {"benchmark": "python_overhead", "exchange": [], "call": [], "skipped": {}}
    sync = lambda: rs.synchronize("cuda:0")
    x = rs.to_device(np.random.default_rng().random(1 << 20, dtype=np.float32), device="cuda:0")
    before = rs.ledger()["cuda:0"]
    rows = []
    try:
        import torch
        t = torch.rand(1 << 20, device="cuda")
        rows += [("resident -> torch (torch.from_dlpack)", lambda: torch.from_dlpack(x)),
                 ("torch -> resident (rs.from_dlpack)", lambda: rs.from_dlpack(t))]
    except Exception as e:
        out["skipped"]["torch"] = repr(e)[:200]
    try:
        import cupy as cp
        c = cp.random.random(1 << 20, dtype=cp.float32)
        rows += [("resident -> cupy (cp.from_dlpack)", lambda: cp.from_dlpack(x)),
                 ("resident -> cupy (cp.asarray, CUDA Array Interface)", lambda: cp.asarray(x)),
                 ("cupy -> resident (rs.from_dlpack)", lambda: rs.from_dlpack(c))]
    except Exception as e:
        out["skipped"]["cupy"] = repr(e)[:200]
    try:
        from numba import cuda as ncuda
        rows += [("resident -> numba (as_cuda_array)", lambda: ncuda.as_cuda_array(x))]
    except Exception as e:
        out["skipped"]["numba"] = repr(e)[:200]
    for name, f in rows:
        us = per_call_us(f, a.calls, sync)
        out["exchange"].append({"what": name, "us": us})
        print(f"{name:55s} {us:8.2f} us per exchange", file=sys.stderr)
    after = rs.ledger()["cuda:0"]
    out["exchange_bytes_moved"] = sum(after[k] - before[k] for k in ("h2d_bytes", "d2h_bytes", "d2d_bytes"))

    p = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    small = rs.to_device(np.random.default_rng().random(10000, dtype=np.float32), device="cuda:0")
    py_us = per_call_us(lambda: p(small), a.calls, sync)
    cpp_us = statistics.median(rs._core._time_cpp_calls(p, small, a.calls) for _ in range(7))
    out["call"] += [{"what": "resident program from Python, n = 10^4", "us": py_us},
                    {"what": "resident program from C++, n = 10^4", "us": cpp_us}]
    try:
        import cupy as cp
        ek = cp.ElementwiseKernel("float32 x", "float32 y",
                                  "float v = x*1.5f+0.5f; v = sqrtf(v*v+1.0f); y = sinf(v)*0.5f;", "pipe3")
        cx = cp.random.random(10000, dtype=cp.float32)
        cy = cp.empty_like(cx)
        out["call"].append({"what": "cupy ElementwiseKernel from Python, n = 10^4",
                            "us": per_call_us(lambda: ek(cx, cy), a.calls, cp.cuda.Device().synchronize)})
    except Exception as e:
        out["skipped"]["cupy ElementwiseKernel"] = repr(e)[:200]
    for r in out["call"]:
        print(f"{r['what']:55s} {r['us']:8.2f} us per call", file=sys.stderr)
    out["python_over_cpp"] = py_us / cpp_us
    print(f"Python / C++ per call: {py_us / cpp_us:.2f}; bytes moved by the exchanges: {out['exchange_bytes_moved']}",
          file=sys.stderr)
    text = json.dumps(out, indent=2)
    if a.json == "-":
        print(text)
    else:
        open(a.json, "w").write(text)


if __name__ == "__main__":
    main()
