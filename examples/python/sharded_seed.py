"""The seed's pipeline over several devices: a NumPy array cut into one shard per GPU (per CPU "device"
where no GPU answers), the three functions fused into ONE kernel per shard, every shard at once, then a
sum combined from the shards' partials; the map, and the map with its sum, timed against one device.

    python3 examples/python/sharded_seed.py              # 2^22 elements
    RESIDENT_EXAMPLE_ELEMENTS=1073741824 python3 examples/python/sharded_seed.py
"""
import os
import time

import numpy as np

import resident as rs

master = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
n = int(os.environ.get("RESIDENT_EXAMPLE_ELEMENTS", str(1 << 22)))
gpus = rs.cuda_device_count()
devices = [f"cuda:{i}" for i in range(gpus)] if gpus >= 2 else ["cpu", "cpu"]
host = np.random.default_rng(11).random(n, dtype=np.float32)


def timed(x, reps=5):
    rs.dist.apply(master, x)                             # warm
    for d in set(x.devices):
        rs.synchronize(d)
    t0 = time.perf_counter()
    for _ in range(reps):
        rs.dist.apply(master, x)                         # asynchronous per shard: all shards at once
    for d in set(x.devices):
        rs.synchronize(d)
    return (time.perf_counter() - t0) / reps


def timed_with_sum(x, reps=5):
    rs.dist.apply(master, x)                             # warm: each device's first sum loads its kernel
    rs.dist.sum(x)
    t0 = time.perf_counter()
    for _ in range(reps):
        rs.dist.apply(master, x)
        rs.dist.sum(x)                                   # partials per shard at once, then combined
    return (time.perf_counter() - t0) / reps


one = rs.dist.shard(host, devices[:1])
many = rs.dist.shard(host, devices)
t1, tn = timed(one), timed(many)
s1, sn = timed_with_sum(one), timed_with_sum(many)
many = rs.dist.shard(host, devices)                      # fresh, for the check: six applications
for _ in range(6):
    rs.dist.apply(master, many)
total = rs.dist.sum(many, rs.op.mul(1))
got = many.to_host()
ref = host.astype(np.float64)
for _ in range(6):                                       # six applications, as above
    ref = 0.5 * np.sin(np.sqrt((1.5 * ref + 0.5) ** 2 + 1.0))
err = float(np.max(np.abs(got - ref)))
# The sum adds float32 values in float32 (as rs.sum does): its error grows with the elements per thread.
sum_err = abs(total - ref.sum()) / ref.sum()
print(f"{n} floats over {devices}: map {t1 * 1e3:.2f} ms on one, {tn * 1e3:.2f} ms on {len(devices)} "
      f"({t1 / tn:.2f}x); map + sum {s1 * 1e3:.2f} ms on one, {sn * 1e3:.2f} ms on {len(devices)} ({s1 / sn:.2f}x); "
      f"sum {total:.6g} (relative error {sum_err:.1e}); max error against FP64 {err:.2e}")
assert err < 1e-5 and sum_err < 1e-3
