"""The seed's question in Python: data = func1(data); data = func2(data); data = func3(data) on a CuPy
array (a NumPy array where no GPU answers or CuPy is not installed), without the data leaving the
device: the three functions become ONE fused kernel over the array, in place, and the ledger shows no
transfer.

    python3 examples/python/seed_pipeline.py
"""
import numpy as np

import resident as rs

func1 = rs.op.affine(1.5, 0.5)                           # 1.5 * v + 0.5
func2 = rs.op.square() | rs.op.add(1) | rs.op.sqrt()     # sqrt(v * v + 1)
func3 = rs.op.sin() | rs.op.mul(0.5)                     # 0.5 * sin(v)
master = func1 | func2 | func3                           # one kernel: read once, written once

n = 1 << 24
cp = None
if rs.cuda_device_count() > 0:
    try:
        import cupy as cp
    except ImportError:
        print("cupy is not installed: a NumPy array on the CPU instead")
if cp is not None:
    data = cp.random.random(n, dtype=cp.float32)         # already on the GPU, owned by CuPy
    host = cp.asnumpy(data)                              # a copy for the check only
    device = "cuda:0"
else:
    data = np.random.default_rng().random(n, dtype=np.float32)
    host = data.copy()
    device = "cpu"

before = rs.ledger().get(device, {})
master(data)                                             # in place, on CuPy's (or NumPy's) memory
after = rs.ledger().get(device, {})
moved = sum(after.get(k, 0) - before.get(k, 0) for k in ("h2d_bytes", "d2h_bytes"))
kernels = after.get("kernels", 0) - before.get("kernels", 0)

got = data.get() if device != "cpu" else data
v = host.astype(np.float64) * 1.5 + 0.5
ref = 0.5 * np.sin(np.sqrt(v * v + 1.0))
err = float(np.max(np.abs(got - ref)))
print(f"{master.name}\n{n} floats on {device}: {kernels} kernel, {moved} bytes across the bus, "
      f"max error against FP64 {err:.2e}")
assert err < 1e-5 and kernels == 1 and moved == 0
