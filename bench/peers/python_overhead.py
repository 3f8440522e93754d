#!/usr/bin/env python3
"""The Python package's costs on the GPU, measured in one process:
  exchange     torch / cupy / numba <-> resident through DLPack or the CUDA Array Interface, us per
               exchange (median of many), and the bytes the ledger saw move (must be 0)
  floor        the same consumers taking a CuPy array, in the same run: the consumer's own cost,
               whoever the producer is (numba's as_cuda_array also with sync=False: its device
               array's construction alone)
  call         the seed pipeline as a run-time program on n = 10^4 floats, us per call from Python
               against the same kernel called from C++ in a loop (the program's compiled chain; and the
               interpreter's), and CuPy's ElementwiseKernel of the same math called from Python
  graph        the seed pipeline over n = 10^4 floats captured once (rs.capture) and replayed from
               Python: as built-in operations and as rs.stage Python functions (numba-cuda), beside a
               fused Numba kernel launched from Python; us per call, wall clock over many calls with
               a final synchronization

usage: python_overhead.py [--json FILE|-] [--calls 2000]"""
import argparse, json, math, statistics, sys

import numpy as np

import resident as rs  # first: NumPy as numba-cuda expects it (resident._compat)
from seed_stages import per_call_seconds
from json_out import write_text


def per_call_us(f, calls, sync):
    return per_call_seconds(f, calls, sync) * 1e6


def timed(out, key, name, f, calls, sync, unit):
    """Times f into out[key] as {"what", "us"}, printing the row; a failure is recorded as skipped."""
    try:
        us = per_call_us(f, calls, sync)
    except Exception as e:
        out["skipped"][name] = repr(e)[:200]
        print(f"{name:62s} skipped: {e!r}"[:160], file=sys.stderr)
        return None
    out[key].append({"what": name, "us": us})
    print(f"{name:62s} {us:8.2f} us per {unit}", file=sys.stderr)
    return us


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="-")
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    if rs.cuda_device_count() == 0:
        sys.exit("python_overhead: no GPU: " + rs.cuda_unavailable_reason())
    out = {"benchmark": "python_overhead", "exchange": [], "exchange_floor": [], "call": [], "graph": [],
           "skipped": {}}
    sync = lambda: rs.synchronize("cuda:0")
    x = rs.to_device(np.random.default_rng().random(1 << 20, dtype=np.float32), device="cuda:0")
    before = rs.ledger()["cuda:0"]
    rows, floor = [], []
    torch = cp = ncuda = None
    try:
        import torch
        t = torch.rand(1 << 20, device="cuda")
        rows += [("resident -> torch (torch.from_dlpack)", lambda: torch.from_dlpack(x)),
                 ("torch -> resident (rs.from_dlpack)", lambda: rs.from_dlpack(t))]
    except Exception as e:
        torch = None
        out["skipped"]["torch"] = repr(e)[:200]
    try:
        import cupy as cp
        c = cp.random.random(1 << 20, dtype=cp.float32)
        rows += [("resident -> cupy (cp.from_dlpack)", lambda: cp.from_dlpack(x)),
                 ("resident -> cupy (cp.asarray, CUDA Array Interface)", lambda: cp.asarray(x)),
                 ("cupy -> resident (rs.from_dlpack)", lambda: rs.from_dlpack(c))]
        if torch is not None:
            floor.append(("cupy -> torch (torch.from_dlpack)", lambda: torch.from_dlpack(c)))
    except Exception as e:
        cp = None
        out["skipped"]["cupy"] = repr(e)[:200]
    try:
        from numba import cuda as ncuda
        nb_arr = ncuda.device_array(1 << 20, dtype=np.float32)
        rows += [("resident -> numba (as_cuda_array)", lambda: ncuda.as_cuda_array(x)),
                 ("resident -> numba (rs.to_numba)", lambda: rs.to_numba(x)),
                 ("numba -> resident (rs.from_dlpack)", lambda: rs.from_dlpack(nb_arr))]
        if hasattr(ncuda, "from_dlpack"):
            rows.append(("resident -> numba (numba.cuda.from_dlpack)", lambda: ncuda.from_dlpack(x)))
        if cp is not None:
            # Numba's own cost: a CuPy array exports stream 1 as resident's busy arrays do; sync=False
            # leaves out the stream synchronization, leaving the device array's construction.
            floor += [("cupy -> numba (as_cuda_array)", lambda: ncuda.as_cuda_array(c)),
                      ("cupy -> numba (as_cuda_array, sync=False)", lambda: ncuda.as_cuda_array(c, sync=False))]
            if hasattr(ncuda, "from_dlpack"):
                floor.append(("cupy -> numba (numba.cuda.from_dlpack)", lambda: ncuda.from_dlpack(c)))
    except Exception as e:
        ncuda = None
        out["skipped"]["numba"] = repr(e)[:200]
    for name, f in rows:
        timed(out, "exchange", name, f, a.calls, sync, "exchange")
    for name, f in floor:
        timed(out, "exchange_floor", name, f, a.calls, sync, "exchange (floor)")
    after = rs.ledger()["cuda:0"]
    out["exchange_bytes_moved"] = sum(after[k] - before[k] for k in ("h2d_bytes", "d2h_bytes", "d2d_bytes"))

    p = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    small = rs.to_device(np.random.default_rng().random(10000, dtype=np.float32), device="cuda:0")
    py_us = timed(out, "call", "resident program from Python, n = 10^4", lambda: p(small), a.calls, sync, "call")
    # The same kernel from C++: the program's compiled chain (what p(small) runs) called in a loop; and
    # the interpreter's program from C++ (what runs where no run-time compiler is).
    from resident import _program
    chain = _program._compiled.get((p.name, "float32", False))
    built = chain._built.get((("float32",), tuple(rs._core._jit_target(small)))) if chain else None
    cpp_us = None
    if built:
        cpp_us = statistics.median(rs._core._time_cpp_jit_calls(built[0], small, a.calls) for _ in range(7))
        out["call"].append({"what": "resident program from C++, n = 10^4", "us": cpp_us})
        print(f"{'resident program from C++, n = 10^4':62s} {cpp_us:8.2f} us per call", file=sys.stderr)
    interp_us = statistics.median(rs._core._time_cpp_calls(p, small, a.calls) for _ in range(7))
    out["call"].append({"what": "resident interpreted program from C++, n = 10^4", "us": interp_us})
    print(f"{'resident interpreted program from C++, n = 10^4':62s} {interp_us:8.2f} us per call", file=sys.stderr)
    if cp is not None:
        ek = cp.ElementwiseKernel("float32 x", "float32 y",
                                  "float v = x*1.5f+0.5f; v = sqrtf(v*v+1.0f); y = sinf(v)*0.5f;", "pipe3")
        cx = cp.random.random(10000, dtype=cp.float32)
        cy = cp.empty_like(cx)
        timed(out, "call", "cupy ElementwiseKernel from Python, n = 10^4", lambda: ek(cx, cy), a.calls,
              cp.cuda.Device().synchronize, "call")

    # Issue 19: the seed pipeline over 10^4 elements through a captured graph, replayed from Python.
    g = rs.capture(lambda: p(small), device="cuda:0")
    timed(out, "graph", "resident graph replay (built-in program), n = 10^4", g.replay, a.calls, sync, "call")
    cpp_replay = statistics.median(rs._core._time_cpp_replays(g, a.calls) for _ in range(7))
    out["graph"].append({"what": "resident graph replay from C++ (the same graph), n = 10^4", "us": cpp_replay})
    print(f"{'resident graph replay from C++ (the same graph), n = 10^4':62s} {cpp_replay:8.2f} us per call",
          file=sys.stderr)

    from seed_stages import master
    staged = rs.to_device(np.random.default_rng().random(10000, dtype=np.float32), device="cuda:0")
    try:
        master(staged)  # compiles (or loads from the cache) outside the capture
        gs = rs.capture(lambda: master(staged), device="cuda:0")
        timed(out, "graph", "resident graph replay (rs.stage Python functions), n = 10^4", gs.replay, a.calls, sync,
              "call")
        timed(out, "graph", "resident rs.stage chain called from Python (no graph), n = 10^4", lambda: master(staged),
              a.calls, sync, "call")
    except Exception as e:
        out["skipped"]["rs.stage graph"] = repr(e)[:200]
    if ncuda is not None:
        try:
            @ncuda.jit
            def fused(v):
                i = ncuda.grid(1)
                if i < v.size:
                    w = 1.5 * v[i] + 0.5
                    w = math.sqrt(w * w + 1.0)
                    v[i] = 0.5 * math.sin(w)

            nv = ncuda.to_device(np.random.default_rng().random(10000, dtype=np.float32))
            blocks = (10000 + 255) // 256
            timed(out, "graph", "numba fused kernel launched from Python, n = 10^4", lambda: fused[blocks, 256](nv),
                  a.calls, ncuda.synchronize, "call")
        except Exception as e:
            out["skipped"]["numba kernel"] = repr(e)[:200]
    replay = [r["us"] for r in out["graph"] if r["what"].startswith("resident graph replay (")]
    out["graph_replay_us"] = max(replay) if replay else None

    out["python_over_cpp"] = py_us / cpp_us if py_us and cpp_us else None
    if py_us and cpp_us:
        print(f"Python / C++ per call: {py_us / cpp_us:.2f}; bytes moved by the exchanges: "
              f"{out['exchange_bytes_moved']}", file=sys.stderr)
    if replay:
        print(f"graph replay from Python, n = 10^4: {max(replay):.2f} us per call (target <= 5 us)", file=sys.stderr)
    write_text(a.json, json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
