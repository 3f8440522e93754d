#!/usr/bin/env python3
"""Peers on resident's pipeline benchmark: the seed pipeline f3(f2(f1(x))) in float32, timed with CUDA
events (median of many, after warm-up) next to a device-to-device copy of the same bytes measured in
the same process, at the same sizes as `resident bench pipeline`; and the n = 10^4 small pipeline.

Every system and the copy are timed two ways, both reported:
  back_to_back   BATCH calls queued between two events, time per call: the device's throughput
  one_per_pair   one call between two events: latency, the host's dispatch (Python) included
`over_memcpy` is the back-to-back figure (the like-for-like one for device throughput).
With --device-peers PATH (the `device_peers` program of a CUDA build), resident and CUB's
DeviceTransform / TransformReduce are timed the same two ways and their rows join the JSON.

usage: peers.py --sizes 20,22,24,26,28 --json peers.json [--device-peers build/gpu/bench/device_peers]
Each peer that fails to import or run is reported as skipped with its reason; the rest still run."""
import argparse, json, math, statistics, sys, traceback

import numpy as np

from json_out import write_text

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack  # numba-cuda 0.30 still calls it; numpy 2.5 removed it


def ref(x):
    v = x.astype(np.float64) * 1.5 + 0.5
    v = np.sqrt(v * v + 1.0)
    return np.sin(v) * 0.5


def check(name, y, x):
    r = ref(x)
    err = float(np.max(np.abs(y.astype(np.float64) - r)) / np.max(np.abs(r)))
    if not err <= 1e-5:
        raise RuntimeError(f"{name}: wrong result, max rel. error {err:.2e}")
    return err


def timer_torch():
    import torch
    def run(f, reps, warm=3, batch=1):
        for _ in range(warm):
            f()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(batch):
                f()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / batch)
        return statistics.median(times)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,22,24,26,28")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=20, help="calls per event pair, back-to-back timing")
    ap.add_argument("--json", default="-")
    ap.add_argument("--device-peers", default="", help="path of the device_peers program (resident and CUB)")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    import torch
    run = timer_torch()
    rows, small, skipped = [], [], {}
    rng = np.random.default_rng()

    def peer(name, make, log2n, host, x_t):
        """make(x_torch) -> (callable, result_fn)."""
        try:
            f, result = make(x_t)
            f()
            torch.cuda.synchronize()
            err = check(name, result(), host)
            b2b = run(f, a.reps, batch=a.batch)
            one = run(f, a.reps)
            return {"system": name, "log2_n": log2n, "back_to_back_ms": b2b, "one_per_pair_ms": one,
                    "max_rel_error": err}
        except Exception as e:  # a peer missing or broken is reported, not fatal
            skipped[name] = repr(e)[:300]
            traceback.print_exc(limit=2, file=sys.stderr)
            return None

    def torch_eager(x):
        out = {}
        def f():
            v = x * 1.5 + 0.5
            v = torch.sqrt(v * v + 1.0)
            out["y"] = torch.sin(v) * 0.5
        return f, lambda: out["y"].cpu().numpy()

    def torch_compile(x):
        # A fresh static-shape compile per size: the fastest torch.compile offers (no dynamic shapes).
        g = torch.compile(lambda v: torch.sin(torch.sqrt((v * 1.5 + 0.5) ** 2 + 1.0)) * 0.5, dynamic=False)
        out = {}
        def f():
            out["y"] = g(x)
        return f, lambda: out["y"].cpu().numpy()

    def cupy_ek(x):
        import cupy as cp
        ek = cp.ElementwiseKernel("float32 x", "float32 y",
                                  "float v = x*1.5f+0.5f; v = sqrtf(v*v+1.0f); y = sinf(v)*0.5f;", "pipe3")
        cx = cp.asarray(x)
        cy = cp.empty_like(cx)
        return (lambda: ek(cx, cy)), (lambda: cp.asnumpy(cy))

    def cupy_unfused(x):
        import cupy as cp
        cx = cp.asarray(x)
        out = {}
        def f():
            v = cx * 1.5 + 0.5
            v = cp.sqrt(v * v + 1.0)
            out["y"] = cp.sin(v) * 0.5
        return f, lambda: cp.asnumpy(out["y"])

    numba_k = {}
    def numba_kernels():
        if not numba_k:
            from numba import cuda
            @cuda.jit(device=True)
            def f1(v): return v * 1.5 + 0.5
            @cuda.jit(device=True)
            def f2(v): return math.sqrt(v * v + 1.0)
            @cuda.jit(device=True)
            def f3(v): return math.sin(v) * 0.5
            @cuda.jit
            def master(x, y):
                i = cuda.grid(1)
                if i < x.size: y[i] = f3(f2(f1(x[i])))
            @cuda.jit
            def k1(x, y):
                i = cuda.grid(1)
                if i < x.size: y[i] = x[i] * 1.5 + 0.5
            @cuda.jit
            def k2(y):
                i = cuda.grid(1)
                if i < y.size: y[i] = math.sqrt(y[i] * y[i] + 1.0)
            @cuda.jit
            def k3(y):
                i = cuda.grid(1)
                if i < y.size: y[i] = math.sin(y[i]) * 0.5
            numba_k.update(cuda=cuda, master=master, k1=k1, k2=k2, k3=k3)
        return numba_k

    def numba_fused(x):
        k = numba_kernels()
        dx = k["cuda"].as_cuda_array(x)
        dy = k["cuda"].device_array(x.numel(), np.float32)
        bpg = (x.numel() + 255) // 256
        return (lambda: k["master"][bpg, 256](dx, dy)), (lambda: dy.copy_to_host())

    def numba_three(x):
        k = numba_kernels()
        dx = k["cuda"].as_cuda_array(x)
        dy = k["cuda"].device_array(x.numel(), np.float32)
        bpg = (x.numel() + 255) // 256
        def f():
            k["k1"][bpg, 256](dx, dy); k["k2"][bpg, 256](dy); k["k3"][bpg, 256](dy)
        return f, (lambda: dy.copy_to_host())

    peers = [("torch.compile", torch_compile), ("torch eager", torch_eager), ("cupy ElementwiseKernel", cupy_ek),
             ("cupy unfused", cupy_unfused), ("numba fused", numba_fused), ("numba 3 kernels", numba_three)]
    for log2n in sizes:
        n = 1 << log2n
        host = rng.random(n, dtype=np.float32)
        x = torch.from_numpy(host).cuda()
        y = torch.empty_like(x)
        memcpy_b2b = run(lambda: y.copy_(x), a.reps, batch=a.batch)
        memcpy_one = run(lambda: y.copy_(x), a.reps)
        for name, make in peers:
            r = peer(name, make, log2n, host, x)
            if r:
                r["memcpy_back_to_back_ms"], r["memcpy_one_per_pair_ms"] = memcpy_b2b, memcpy_one
                r["over_memcpy_back_to_back"] = r["back_to_back_ms"] / memcpy_b2b
                r["over_memcpy_one_per_pair"] = r["one_per_pair_ms"] / memcpy_one
                r["over_memcpy"] = r["over_memcpy_back_to_back"]
                rows.append(r)
                print(f"{name:24s} 2^{log2n}: back-to-back {r['over_memcpy_back_to_back']:.3f} x memcpy, "
                      f"one per pair {r['over_memcpy_one_per_pair']:.3f}", file=sys.stderr)
        del x, y
        torch.cuda.empty_cache()
    # The small pipeline, launch-bound: time per call over batches of back-to-back calls.
    n = 10000
    host = rng.random(n, dtype=np.float32)
    x = torch.from_numpy(host).cuda()
    for name, make in peers:
        try:
            f, result = make(x)
            f()
            torch.cuda.synchronize()
            check(name, result(), host)
            us = run(f, a.reps, warm=5, batch=200) * 1e3
            small.append({"system": name, "n": n, "us_per_call": us})
        except Exception as e:
            skipped[name + " (small)"] = repr(e)[:300]
    out = {"benchmark": "peers", "device_name": torch.cuda.get_device_name(), "rows": rows, "small": small,
           "skipped": skipped, "versions": {"torch": torch.__version__}, "batch": a.batch, "reps": a.reps}
    if a.device_peers:
        # resident and CUB, timed the same two ways in their own process (C++: no Python dispatch).
        import subprocess
        try:
            p = subprocess.run([a.device_peers, "--sizes", a.sizes, "--reps", str(a.reps), "--batch", str(a.batch)],
                               capture_output=True, text=True, check=True)
            sys.stderr.write(p.stderr)
            out["device_peers"] = json.loads(p.stdout)
        except Exception as e:
            skipped["device_peers"] = repr(e)[:300]
    for mod in ("cupy", "numba"):
        try:
            out["versions"][mod] = __import__(mod).__version__
        except Exception:
            pass
    write_text(a.json, json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
