"""The seed's three functions, written as plain Python with math calls and unchanged, fused by
resident.stage into ONE kernel over a CuPy array (a NumPy array where no GPU answers or CuPy is not
installed): Numba compiles each function (LTO-IR linked into the kernel on the GPU; a native function
called by the compiled loop on the CPU), resident compiles the kernel around them and caches it on disk.

    python3 examples/python/seed_stages.py
"""
import math

import numpy as np

import resident as rs


@rs.stage
def func1(v):
    return 1.5 * v + 0.5


@rs.stage
def func2(v):
    return math.sqrt(v * v + 1.0)


@rs.stage
def func3(v):
    return 0.5 * math.sin(v)


master = func1 | func2 | func3

n = 1 << 22
cp = None
if rs.cuda_device_count() > 0:
    try:
        import cupy as cp
    except ImportError:
        print("cupy is not installed: a NumPy array on the CPU instead")
if cp is not None:
    data = cp.random.random(n, dtype=cp.float32)
    host = cp.asnumpy(data)
    device = "cuda:0"
else:
    data = np.random.default_rng().random(n, dtype=np.float32)
    host = data.copy()
    device = "cpu"

before = rs.ledger().get(device, {})
master(data)                                             # in place: ONE kernel
after = rs.ledger().get(device, {})
kernels = after.get("kernels", 0) - before.get("kernels", 0)
moved = sum(after.get(k, 0) - before.get(k, 0) for k in ("h2d_bytes", "d2h_bytes"))

got = data.get() if device != "cpu" else data
v = host.astype(np.float64) * 1.5 + 0.5
err = float(np.max(np.abs(got - 0.5 * np.sin(np.sqrt(v * v + 1.0)))))
print(f"{master.name}\n{n} floats on {device}: {kernels} kernel, {moved} bytes across the bus, "
      f"max error against FP64 {err:.2e}; cache: {rs.jit.stats()}")
assert err < 1e-5 and kernels == 1 and moved == 0
