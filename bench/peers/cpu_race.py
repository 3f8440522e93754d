#!/usr/bin/env python3
"""The CPU race: the seed pipeline (1.5 v + 0.5, sqrt(v^2 + 1), 0.5 sin v) as a map (y = seed(x)) and
as a map + sum over float32 arrays of 2^lo .. 2^hi, on 1 thread and on all cores, in one process per
side, against a copy of the same bytes:

  resident  C++ fused, C++ text stage, op program (bench/peers/cpu_race.cpp, run here; it times its own
            copy with the same loop), and through the Python package when it imports: rs.stage of the
            seed's Python functions, rs.stage of C++ text, rs.op program (on fewer threads than the
            last count, in a child process started with OMP_NUM_THREADS)
  NumPy     the ufunc chain in place (w = x*1.5+0.5; sqrt(w*w+1, out=w); sin(w, out=w); w *= 0.5), one
            thread; its sum np.sum(w); copy np.copyto
  NumExpr   one expression (optional: skipped when not installed)
  Numba     @njit(parallel=True) prange loops, set_num_threads(t)

Times: the fastest of `reps` calls after a warm-up (reps shrink with n; the package's three map ways
interleaved, so that a shared host's slow spell falls on all three); GB/s counts the bytes a map
reads and writes (8 per element) and a sum reads (4), the copy's rate is the map's yardstick. Every
output is checked against FP64 before it is timed. JSON (--json FILE, or - for stdout) holds the
machine, commit, command and date.

usage: cpu_race.py [--lo 16] [--hi 26] [--threads 1,N] [--cpp build/cpu/bench/cpu_race] [--json FILE]"""
import argparse, datetime, json, os, platform, subprocess, sys, time

import numpy as np

from json_out import write_text

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def fastest(f, reps):
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def fastest_each(fs, reps):
    """The fastest of `reps` calls of each of fs, their calls interleaved (one of each per round, after
    two warm-up rounds): a slow spell of a shared host falls on every way alike, not on whichever way
    ran then."""
    for _ in range(2):
        for f in fs:
            f()
    best = [float("inf")] * len(fs)
    for _ in range(reps):
        for k, f in enumerate(fs):
            t0 = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def reference(x):
    v = 1.5 * x.astype(np.float64) + 0.5
    return 0.5 * np.sin(np.sqrt(v * v + 1.0))


def check(name, got, ref, n):
    """Maps: the largest error against FP64 below 1e-5. Sums: the relative error below 5% (a float32 sum
    accumulated in one running total, as Numba's per-thread sums are, loses digits at large n)."""
    got = np.asarray(got, dtype=np.float64)
    err = float(np.max(np.abs(got - ref))) if got.ndim else abs(float(got) - float(ref)) / abs(float(ref))
    if not err < (1e-5 if got.ndim else 5e-2):
        sys.exit(f"cpu_race: {name} at n = {n} is wrong: error {err:.3g} against FP64")


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": os.cpu_count(), "load_average_at_start": load, "python": platform.python_version(),
            "numpy": np.__version__}


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def python_peers(lo, hi, threads, rows, notes, peers=True):
    ne = numba = None
    if peers:
        try:
            import numexpr as ne
        except ImportError:
            notes.append("NumExpr not installed: skipped")
        try:
            import numba
            from numba import njit, prange
        except ImportError:
            notes.append("Numba not installed: skipped")
    try:
        import resident as rs
        from seed_stages import master
    except ImportError as e:
        rs = None
        notes.append(f"resident's Python package not importable ({e}): its ways skipped")

    if numba:
        @njit(parallel=True, fastmath=False, cache=False)
        def nb_seed(x, y):
            for i in prange(x.size):
                v = np.float32(1.5) * x[i] + np.float32(0.5)
                v = np.sqrt(v * v + np.float32(1.0))
                y[i] = np.float32(0.5) * np.sin(v)

        @njit(parallel=True, fastmath=False, cache=False)
        def nb_seed_sum(x):  # a float64 total: a float32 one saturates at large n
            s = 0.0
            for i in prange(x.size):
                v = np.float32(1.5) * x[i] + np.float32(0.5)
                v = np.sqrt(v * v + np.float32(1.0))
                s += np.float32(0.5) * np.sin(v)
            return s

    if rs:
        cpp_text = (rs.stage("float func1(float v) { return 1.5f * v + 0.5f; }") |
                    rs.stage("float func2(float v) { return sqrtf(v * v + 1.0f); }") |
                    rs.stage("float func3(float v) { return 0.5f * sinf(v); }"))
        builtin = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)

    def row(way, shape, lg, t, s, copy_s):
        n = 1 << lg
        nbytes = 8 * n if shape == "map" else 4 * n
        rows.append({"way": way, "shape": shape, "log2_n": lg, "threads": t, "seconds": s,
                     "gb_per_s": nbytes / s * 1e-9, "copy_gb_per_s": 8 * n / copy_s * 1e-9})

    for t in threads:
        if ne:
            ne.set_num_threads(t)
        if numba:
            numba.set_num_threads(min(t, numba.config.NUMBA_NUM_THREADS))
        for lg in range(lo, hi + 1, 2):
            n = 1 << lg
            reps = int(min(100, max(5, (3 << 24) // n)))
            x = (np.arange(n, dtype=np.float32) % 4093) / np.float32(4093)
            y = np.empty_like(x)
            ref = reference(x)
            ref_sum = float(np.sum(ref))
            copy_s = fastest(lambda: np.copyto(y, x), reps)
            if t == 1 and peers:  # NumPy's ufuncs run on one thread whatever t is
                row("copy (NumPy copyto)", "map", lg, t, copy_s, copy_s)

                def np_seed():
                    np.multiply(x, np.float32(1.5), out=y)
                    np.add(y, np.float32(0.5), out=y)
                    np.multiply(y, y, out=y)
                    np.add(y, np.float32(1), out=y)
                    np.sqrt(y, out=y)
                    np.sin(y, out=y)
                    np.multiply(y, np.float32(0.5), out=y)
                np_seed()
                check("NumPy", y, ref, n)
                row("NumPy", "map", lg, t, fastest(np_seed, reps), copy_s)
                row("NumPy", "map+sum", lg, t, fastest(lambda: (np_seed(), np.sum(y)), reps), copy_s)
            if ne:
                expr = "0.5 * sin(sqrt((1.5 * x + 0.5) ** 2 + 1))"
                ne.evaluate(expr, local_dict={"x": x}, out=y, casting="same_kind")
                check("NumExpr", y, ref, n)
                row("NumExpr", "map", lg, t, fastest(lambda: ne.evaluate(expr, local_dict={"x": x}, out=y, casting="same_kind"), reps), copy_s)
                row("NumExpr", "map+sum", lg, t, fastest(lambda: ne.evaluate("sum(" + expr + ")", local_dict={"x": x}), reps), copy_s)
            if numba:
                nb_seed(x, y)
                check("Numba parallel", y, ref, n)
                row("Numba parallel", "map", lg, t, fastest(lambda: nb_seed(x, y), reps), copy_s)
                check("Numba parallel sum", nb_seed_sum(x), ref_sum, n)
                row("Numba parallel", "map+sum", lg, t, fastest(lambda: nb_seed_sum(x), reps), copy_s)
            if rs and t == threads[-1]:  # the package's loops take OMP_NUM_THREADS at start: other counts, a child
                rx = rs.to_device(x, device="cpu")
                ry = rs.to_device(y, device="cpu")
                ways = (("resident Python stages (package)", lambda: master(rx, out=ry)),
                        ("resident C++ text stage (package)", lambda: cpp_text(rx, out=ry)),
                        ("resident op program (package)", lambda: builtin(rx, ry)))
                for way, f in ways:
                    f()
                    check(way, np.asarray(ry.to_host()), ref, n)
                for (way, _), s in zip(ways, fastest_each([f for _, f in ways], reps)):
                    row(way, "map", lg, t, s, copy_s)
                summed = master | rs.jit.sum()  # one chain, its kernel built at the first call
                row("resident Python stages (package)", "map+sum", lg, t, fastest(lambda: summed(rx), reps), copy_s)


def package_at(a, t, out):
    """The package's ways on t threads: a child process whose OpenMP team is t threads from its start."""
    env = dict(os.environ, OMP_NUM_THREADS=str(t))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--package-only", "--lo", str(a.lo), "--hi",
                        str(a.hi), "--threads", str(t), "--json", "-"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"cpu_race: the package's ways on {t} threads failed: {r.stderr.strip()[-2000:]}")
    child = json.loads(r.stdout)
    out["rows"] += child["rows"]
    out["notes"] += [n for n in child["notes"] if n not in out["notes"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lo", type=int, default=16)
    ap.add_argument("--hi", type=int, default=26)
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--cpp", default=os.path.join(ROOT, "build", "cpu", "bench", "cpu_race"))
    ap.add_argument("--json", default="-")
    ap.add_argument("--package-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not 10 <= a.lo <= a.hi <= 30:
        sys.exit("cpu_race: give 10 <= --lo <= --hi <= 30")
    threads = sorted({int(t) for t in a.threads.split(",")})
    sys.path.insert(0, HERE)
    out = {"benchmark": "cpu_race", "machine": machine(), "commit": commit(),
           "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "notes": [], "rows": []}
    if a.package_only:
        pass
    elif os.path.exists(a.cpp):
        r = subprocess.run([a.cpp, "--lo", str(a.lo), "--hi", str(a.hi), "--threads", ",".join(map(str, threads))],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"cpu_race: {a.cpp} failed: {r.stderr.strip()}")
        cpp = json.loads(r.stdout)
        out["simd_path"] = cpp["simd_path"]
        out["rows"] += cpp["rows"]
    else:
        out["notes"].append(f"{a.cpp} not built (cmake --build ... --target cpu_race): resident's C++ ways skipped")
    if a.package_only:  # a child of the race, started with OMP_NUM_THREADS set to its one thread count
        python_peers(a.lo, a.hi, threads, out["rows"], out["notes"], peers=False)
    else:
        python_peers(a.lo, a.hi, threads, out["rows"], out["notes"])
        for t in threads[:-1]:
            package_at(a, t, out)
    out["machine"]["load_average_at_end"] = os.getloadavg()
    for note in out["notes"]:
        print("cpu_race: " + note, file=sys.stderr)
    write_text(a.json, json.dumps(out, indent=1) + ("" if a.json == "-" else "\n"))
    if a.json != "-":
        print(summary(out), file=sys.stderr)


def summary(out):
    lines = [f"{'way':36} {'shape':8} {'n':>5} {'thr':>3} {'ms':>9} {'GB/s':>7} {'/copy':>6}"]
    for r in out["rows"]:
        lines.append(f"{r['way']:36} {r['shape']:8} 2^{r['log2_n']:<3} {r['threads']:3} {r['seconds'] * 1e3:9.3f} "
                     f"{r['gb_per_s']:7.2f} {r['gb_per_s'] / r['copy_gb_per_s']:6.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
