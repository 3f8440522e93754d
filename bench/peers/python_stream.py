#!/usr/bin/env python3
"""resident.stream from Python against the C++ out-of-core pipeline and the bus, in one call: the seed's
pipeline streamed over host data larger than the pool's limit, as a program and as a stage chain,
pinned in/out (rs.streaming.pinned_empty) and pageable, and a streamed sum; then `resident bench
stream` on the same size and limit (the C++ out_of_core and the duplex copy rates it measures).
GB/s is data bytes per second (as bench stream counts them); ratios are to the duplex upload rate (the
sum: to the upload alone). Every output is checked against FP64 on a sample first.

usage: python_stream.py --cli build/cuda/tools/resident/resident [--size-gib 8] [--pool-limit-gib 2]
                        [--reps 5] [--json FILE|-]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--size-gib", type=float, default=8)
    ap.add_argument("--pool-limit-gib", type=float, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default="-")
    a = ap.parse_args()
    os.environ["RESIDENT_POOL_LIMIT"] = f"{int(a.pool_limit_gib * 1024)}MiB"  # read once, at import
    import numpy as np
    import resident as rs
    from seed_stages import write_json
    if rs.cuda_device_count() == 0:
        sys.exit("python_stream: no GPU: " + rs.cuda_unavailable_reason())
    n = int(a.size_gib * (1 << 30)) // 4
    seed = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    chain = (rs.stage("float f1(float v) { return 1.5f * v + 0.5f; }") |
             rs.stage("float f2(float v) { return sqrtf(v * v + 1.0f); }") |
             rs.stage("float f3(float v) { return 0.5f * sinf(v); }"))
    pin_in, pin_out = rs.streaming.pinned_empty(n), rs.streaming.pinned_empty(n)
    step = 1 << 24
    rng = np.random.default_rng(3)
    for i in range(0, n, step):
        pin_in[i:i + step] = rng.random(min(step, n - i), dtype=np.float32)
    page_in, page_out = np.empty(n, np.float32), np.empty(n, np.float32)
    page_in[:] = pin_in
    sample = slice(0, 1 << 20)
    ref = 0.5 * np.sin(np.sqrt((1.5 * pin_in[sample].astype(np.float64) + 0.5) ** 2 + 1.0))

    def timed(f, out=None):
        f()  # warm, then checked
        if out is not None:
            err = float(np.max(np.abs(out[sample] - ref)))
            if not err < 1e-5:
                sys.exit(f"python_stream: error {err:.2e} against FP64")
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return 4 * n / sorted(times)[len(times) // 2] / 1e9

    rows = {
        "python stream, program, pinned in/out": timed(lambda: rs.stream(seed, pin_in, pin_out, progress=False), pin_out),
        "python stream, stage chain, pinned in/out": timed(lambda: rs.stream(chain, pin_in, pin_out, progress=False), pin_out),
        "python stream, program, pageable in/out": timed(lambda: rs.stream(seed, page_in, page_out, progress=False), page_out),
        "python streamed sum, pinned": timed(lambda: rs.stream(seed, pin_in, reduce="sum", progress=False)),
    }
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stream.json")
        subprocess.run([a.cli, "bench", "stream", "--size", f"{int(a.size_gib * 1024)}MiB", "--pool-limit",
                        f"{int(a.pool_limit_gib * 1024)}MiB", "--pinned", "--json", path], check=True,
                       stdout=subprocess.DEVNULL)
        cpp = json.load(open(path))
    by = {r.get("measure"): r for r in cpp.get("rows", [])}
    duplex_up = cpp["duplex_upload_gbs"]
    upload = by.get("pinned upload alone", {}).get("gbs", duplex_up)
    cpp_stream = by.get("streamed, pinned in/out", {}).get("gbs", float("nan"))
    out = {"benchmark": "python_stream", "size_bytes": 4 * n, "pool_limit_bytes": int(a.pool_limit_gib * (1 << 30)),
           "duplex_upload_gbs": duplex_up, "upload_gbs": upload, "cpp_streamed_pinned_gbs": cpp_stream, "rows": []}
    print(f"{'measure':<44} {'GB/s':>8} {'ratio':>6} {'vs C++':>7} {'target':>7}", file=sys.stderr)
    for name, g in rows.items():
        reducing = "sum" in name
        ratio = g / (upload if reducing else duplex_up)
        target = 0.95 if reducing else 0.97 if "pinned" in name else None
        row = {"measure": name, "gbs": g, "ratio": ratio, "to_cpp": None if reducing else g / cpp_stream,
               "target": target, "met": None if target is None else bool(ratio >= target and (reducing or g >= cpp_stream))}
        out["rows"].append(row)
        print(f"{name:<44} {g:8.2f} {ratio:6.3f} {'' if reducing else f'{g / cpp_stream:7.3f}'} "
              f"{'' if target is None else target:>7}", file=sys.stderr)
    write_json(out, a.json)


if __name__ == "__main__":
    main()
