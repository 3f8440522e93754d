"""Random numbers generated INTO arrays that other libraries own, with no copy and no new array:
a NumPy array on the CPU, and a PyTorch tensor and a CuPy array on the GPU where one answers.
The ledger shows that nothing crossed the bus.

    python3 examples/python/fill_in_place.py
"""
import numpy as np

import resident as rs

h = np.empty(1 << 20, dtype=np.float32)
rs.random.fill_uniform(h, seed=2024)  # NumPy's memory, filled where it lies
print(f"numpy: mean {h.mean():.4f} (expected 0.5), sum by resident {rs.sum(h):.1f}")

if rs.cuda_device_count() > 0:
    before = rs.ledger().get("cuda:0", {})
    try:
        import torch
        t = torch.empty(1 << 24, device="cuda")
        rs.random.fill_normal(t, seed=7, mean=0.0, sd=1.0)  # PyTorch's tensor, in place
        print(f"torch: mean {float(t.mean()):+.4f}, std {float(t.std()):.4f} (expected 0, 1)")
    except ImportError:
        print("torch: not installed")
    try:
        import cupy as cp
        c = cp.empty(1 << 24, dtype=cp.float64)
        rs.random.fill_uniform(c, seed=7, low=-1.0, high=1.0)  # CuPy's array, in place
        print(f"cupy: min {float(c.min()):+.4f}, max {float(c.max()):+.4f} (within [-1, 1))")
    except ImportError:
        print("cupy: not installed")
    after = rs.ledger().get("cuda:0", {})
    moved = sum(after.get(k, 0) - before.get(k, 0) for k in ("h2d_bytes", "d2h_bytes"))
    print(f"bytes across the bus for the GPU fills: {moved}")
else:
    print("no GPU here:", rs.cuda_unavailable_reason())
