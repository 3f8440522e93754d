"""The seed's pipeline over a host array larger than the device: func1, func2 and func3 fused into ONE
kernel per chunk, streamed from a NumPy array through a few chunks of device memory and back, the
uploads, kernels and downloads of different chunks overlapped; then a streamed sum of the same values.

    python3 examples/python/streamed_seed.py            # 64 MiB (what scripts/test.sh runs)
    python3 examples/python/streamed_seed.py --large    # twice the GPU's memory (a quarter of the
                                                        # host's memory on the CPU)
    RESIDENT_EXAMPLE_BYTES=8GiB python3 examples/python/streamed_seed.py
"""
import os
import sys
import time

import numpy as np

import resident as rs

func1 = rs.op.affine(1.5, 0.5)                           # 1.5 * v + 0.5
func2 = rs.op.square() | rs.op.add(1) | rs.op.sqrt()     # sqrt(v * v + 1)
func3 = rs.op.sin() | rs.op.mul(0.5)                     # 0.5 * sin(v)
master = func1 | func2 | func3


def size_in_bytes(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * m)
    return int(text)


device = rs.default_device()
if "--large" in sys.argv:
    if device.startswith("cuda"):
        import subprocess
        total = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i",
                                device.split(":")[1]], capture_output=True, text=True, check=True).stdout
        nbytes = 2 * int(total.split()[0]) << 20         # twice the GPU's memory
    else:
        nbytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
else:
    nbytes = size_in_bytes(os.environ.get("RESIDENT_EXAMPLE_BYTES", "64MiB"))
n = nbytes // 4

x = np.empty(n, dtype=np.float32)                        # pageable host memory
step = 1 << 24
rng = np.random.default_rng(7)
for i in range(0, n, step):                              # filled in pieces: no second copy of x
    x[i:i + step] = rng.random(min(step, n - i), dtype=np.float32)

before = rs.ledger().get(device, {})
t0 = time.perf_counter()
rs.stream(master, x, out=x, progress=None)               # in place, chunk by chunk
seconds = time.perf_counter() - t0
s = rs.streaming.last_summary()
after = rs.ledger().get(device, {})
total = rs.stream(rs.op.mul(1), x, reduce="sum")         # a streamed reduction: one partial per chunk

# Checked against FP64 on a sample (regenerated from the same seed).
rng = np.random.default_rng(7)
sample = rng.random(min(step, n), dtype=np.float32).astype(np.float64)
ref = 0.5 * np.sin(np.sqrt((1.5 * sample + 0.5) ** 2 + 1.0))
err = float(np.max(np.abs(x[:sample.size] - ref)))
print(f"{master.name}\n{nbytes / 2**30:.2f} GiB on {device} in {s['chunks']} chunks of {s['chunk_elements']} "
      f"elements, {s['depth']} in flight, {s['device_bytes'] / 2**20:.0f} MiB of device staging: "
      f"{2 * nbytes / seconds / 1e9:.2f} GB/s (bytes up + down per second); "
      f"{after.get('kernels', 0) - before.get('kernels', 0)} kernels; max error against FP64 {err:.2e}; sum {total:.6g}")
assert err < 1e-5
assert after.get("h2d_bytes", 0) - before.get("h2d_bytes", 0) == nbytes // 4 * 4
