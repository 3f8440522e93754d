#!/usr/bin/env python3
"""The race of issue 37 (item 8): the seed pipeline in float32 from Python into another array, 2^16 .. 2^28
elements: rs.op (built-in operations), rs.stage (seed_stages.master) and rs.fuse (the seed's code as written)
on resident's arrays, PyTorch tensors and CuPy arrays (on that library's current stream); torch.compile,
cupy.fuse, a Numba kernel calling three device functions; a device copy of the same bytes (system "copy",
each library's own). over_copy's reference, copy_ms: cudaMemcpyAsync (through CuPy) from the row's input to
its output array, the same memory the row reads and writes, its batches alternating with the row's (over_copy:
the median of the row's batch over the copy's beside it), so that a GPU whose rate drifts during a size's
rows (clocks, power), or memory placed apart, is compared with itself; sm_mhz and copy_sm_mhz: the median SM
clock the row's batches and the copy's ran at, read by a one-thread kernel around each batch (cupy_copy_ms: the
same copy between CuPy's arrays, the reference of earlier records). back_to_back_ms: per call, `calls`
calls between two CUDA events on the stream the work goes on, after an untimed call that keeps the GPU
busy while they are issued, median of `reps` (host_ms: the same timed by the host clock to a
synchronization, as earlier records were); issue_us: median time for a call to return; gbs: bytes read + written; place: the row's
place in its size's order (the libraries take turns leading a size's rows, each library's systems its own; at 2^26 and above the copy
runs --settle-s seconds first, so that every row meets the clocks a sustained load settles at). Outputs are checked
against FP64 on a sample first (a wrong one: ok false). Past --budget-s the sizes left are skipped; a system
that cannot be set up or run is listed in `skipped` with its reason. --device cpu: resident on its CPU arrays
and NumPy's (a dry run). Exit 1 when resident fails. usage: python_race.py [--json FILE|-] [--log2 16 18 ..]
[--calls 20] [--reps 7] [--repeat 3] [--budget-s 170] [--settle-s 3] [--device cuda|cpu]"""
import argparse, json, math, platform, statistics, sys, time, traceback, types, warnings

import numpy as np

import resident as rs  # first: NumPy as numba-cuda expects it (resident._compat)
from seed_stages import master, per_call_seconds
from json_out import write_text

T0 = time.perf_counter()  # the budget counts the whole run: other libraries' imports and compilations too
TOL = 1e-5  # max |y - ref| / (1 + |ref|): float32 rounding through three functions, far below a mistake
RESIDENT = ("rs.op", "rs.stage", "rs.fuse")
NS = types.SimpleNamespace


# The seed's code as written, no decorator anywhere: what rs.fuse takes (seed_stages' are rs.stage chains).
def func1(d): return 1.5 * d + 0.5
def func2(d): return math.sqrt(d * d + 1.0)
def func3(d): return 0.5 * math.sin(d)
def seed(d): return func3(func2(func1(d)))
def reference(v): return 0.5 * np.sin(np.sqrt((1.5 * v.astype(np.float64) + 0.5) ** 2 + 1.0))


def issue_seconds(f, calls, sync, reps):
    """Median seconds for a call to return: `calls` calls timed one by one, then sync(), `reps` times."""
    times = []
    for _ in range(reps):
        sync()
        for _ in range(calls):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
    sync()
    return statistics.median(times)


def external(cp, handle):
    """CuPy's view of a raw stream handle; ExternalStream still takes an integer but warns in CuPy 14."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cp.cuda.ExternalStream(handle)


_PROBE = r"""extern "C" __global__ void rs_probe(unsigned long long* o) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  o[0] = clock64();
  o[1] = t;
}"""


class _Clock:
    """The SM clock a batch ran at, as nvbench measures a sample's: a one-thread kernel reads clock64()
    and the global timer before the batch and after it (outside its events), their quotient in MHz."""

    def __init__(self, cp):
        self.cp, self.kernel, self.at = cp, cp.RawKernel(_PROBE, "rs_probe"), cp.zeros(4, dtype=cp.uint64)
        self.slots = (self.at[0:2], self.at[2:4])

    def mark(self, st, k):
        self.kernel((1,), (1,), (self.slots[k],), stream=st)

    def mhz(self):  # after the stream's synchronization; None where the two reads disagree (another SM's clock)
        c0, t0, c1, t1 = (int(v) for v in self.cp.asnumpy(self.at))
        return (c1 - c0) / (t1 - t0) * 1e3 if t1 > t0 and 0 < (c1 - c0) / (t1 - t0) * 1e3 < 5000 else None


_clocks = {}


def device_seconds(f, calls, handle, reps, cp, copy=None, copy_handle=None):
    """Seconds per call of f between two CUDA events on the stream its work goes on (handle): `calls`
    calls after one untimed call that keeps the GPU busy while they are issued (a host slower than the
    kernels shows, a host's first-call and wake-up costs do not); the median of `reps` batches. Given
    `copy` (on copy_handle's stream), its batches alternate with f's, which goes first every other
    time: (f's median, copy's median, the median of f's batch over the copy's beside it), so that a GPU
    whose rate drifts (clocks, power) is compared with itself batch by batch."""
    clock = _clocks.setdefault(id(cp), _Clock(cp))
    mhz = {}

    def batch(g, st):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        g()
        clock.mark(st, 0)
        start.record(st)
        for _ in range(calls):
            g()
        end.record(st)
        clock.mark(st, 1)
        st.synchronize()
        mhz.setdefault(g, []).append(clock.mhz())
        return cp.cuda.get_elapsed_time(start, end) / 1e3 / calls
    st = external(cp, handle)
    f()
    st.synchronize()
    if copy is None:
        return statistics.median(batch(f, st) for _ in range(reps))
    cs = external(cp, copy_handle)
    copy()
    cs.synchronize()
    mine, ref = [], []
    for i in range(reps):
        if i % 2:
            mine.append(batch(f, st))
            ref.append(batch(copy, cs))
        else:
            ref.append(batch(copy, cs))
            mine.append(batch(f, st))
    clocks = [statistics.median(v) if (v := [m for m in mhz.get(g, []) if m]) else None for g in (f, copy)]
    return (statistics.median(mine), statistics.median(ref),
            statistics.median(a / b for a, b in zip(mine, ref)), *clocks)


def open_lib(lib, host, idx, m, dev):
    """x (host uploaded), y, sync(), take(a) (a[idx] on the host), poison(a) (values no system writes)."""
    if lib == "numpy":
        return NS(x=host, y=np.empty_like(host), sync=lambda: None, take=lambda a: a[idx],
                  poison=lambda a: a.fill(np.nan))
    if lib == "resident":  # checked through a whole download (no slices of resident arrays): a few per size
        x = rs.to_device(host, device=dev)
        return NS(x=x, y=rs.empty(host.size, dtype="float32", device=dev), stream=lambda: x.stream,
                  sync=lambda: rs.synchronize(dev), take=lambda a: a.to_host()[idx],
                  poison=lambda a: rs.random.fill_uniform(a, seed=0, low=1e3, high=2e3))
    if lib == "torch":
        t = m["torch"]
        x, i = t.from_numpy(host).to("cuda:0"), t.from_numpy(idx).to("cuda:0")
        return NS(x=x, y=t.empty_like(x), sync=t.cuda.synchronize, take=lambda a: a[i].cpu().numpy(),
                  stream=lambda: t.cuda.current_stream().cuda_stream,
                  poison=lambda a: a.fill_(float("nan")))
    cp = m["cupy"]
    x, i = cp.asarray(host), cp.asarray(idx)
    return NS(x=x, y=cp.empty_like(x), sync=cp.cuda.Device().synchronize, take=lambda a: a[i].get(),
              stream=lambda: cp.cuda.get_current_stream().ptr,
              poison=lambda a: a.fill(np.nan))


def peers(m):
    """(system, library, setup) of the peers here; setup() -> make(L, l) -> f, a call on L's arrays at 2^l."""
    torch, cp = m.get("torch"), m.get("cupy")
    def torch_compile():
        def seed_torch(v): return torch.sin(torch.sqrt((v * 1.5 + 0.5) ** 2 + 1.0)) * 0.5  # as peers.py
        per_size = {}
        def make(L, l):
            # A code object of its own per size: dynamo keeps compilations per code object, so each size
            # has one static-shape entry (no other size's guards walked per call, no recompile limit).
            if l not in per_size:
                code = seed_torch.__code__.replace(co_name=f"seed_torch_2_{l}")
                fn = types.FunctionType(code, seed_torch.__globals__, None, None, seed_torch.__closure__)
                per_size[l] = torch.compile(fn, dynamic=False)
            return lambda: per_size[l](L.x)
        return make

    def cupy_fuse():
        @cp.fuse()
        def seed_cupy(v):
            v = v * 1.5 + 0.5
            return cp.sin(cp.sqrt(v * v + 1.0)) * 0.5
        return lambda L, l: lambda: seed_cupy(L.x)

    def numba_fused():
        with rs._compat.numpy_for_numba_cuda():  # numba-cuda's compiler calls np.row_stack (not in NumPy 2.5)
            from numba import cuda
            warnings.filterwarnings("ignore", ".*Grid size")  # Numba: "low occupancy"; small grids are the point
            a, b, one, half = (np.float32(c) for c in (1.5, 0.5, 1.0, 0.5))  # Numba's literals: float64
            @cuda.jit(device=True)
            def f1(v): return a * v + b
            @cuda.jit(device=True)
            def f2(v): return math.sqrt(v * v + one)
            @cuda.jit(device=True)
            def f3(v): return half * math.sin(v)
            @cuda.jit("void(float32[::1], float32[::1])")  # compiled here, inside the NumPy block
            def kernel(x, y):
                i = cuda.grid(1)
                if i < x.size:
                    y[i] = f3(f2(f1(x[i])))
        def make(L, l):
            x, y = cuda.as_cuda_array(L.x), cuda.as_cuda_array(L.y)  # once: a launch on L.x wraps it each call
            return lambda: kernel[(x.size + 255) // 256, 256](x, y)
        return make
    return [p for p in (("torch.compile", "torch", torch_compile), ("cupy.fuse", "cupy", cupy_fuse),
                        ("numba.cuda", "cupy", numba_fused)) if p[1] in m]


def race_one(make, L, l, ref, a, cp=None, copy=None, copy_handle=None):
    f = make(L, l)
    L.poison(L.y)  # queued where the call runs (Numba's legacy default stream waits for CuPy's current one)
    y = f()
    L.sync()
    got = L.take(L.y if y is None else y)
    err = float(np.max(np.abs(got.astype(np.float64) - ref) / (1 + np.abs(ref))))
    host_ms = per_call_seconds(f, a.calls, L.sync, a.reps) * 1e3
    ms, copy_ms, over, mhz, copy_mhz = host_ms, None, None, None, None
    if cp and hasattr(L, "stream"):
        if copy is not None:
            ms, copy_ms, over, mhz, copy_mhz = device_seconds(f, a.calls, L.stream(), a.reps, cp, copy, copy_handle)
            ms, copy_ms = ms * 1e3, copy_ms * 1e3
        else:
            ms = device_seconds(f, a.calls, L.stream(), a.reps, cp) * 1e3
    return {"back_to_back_ms": ms, "host_ms": host_ms, "issue_us": issue_seconds(f, a.calls, L.sync, a.reps) * 1e6,
            "gbs": 8 * (1 << l) / ms / 1e6, "max_rel_error": err if math.isfinite(err) else str(err),
            "ok": bool(got.dtype == np.float32 and err <= TOL), "copy_ms": copy_ms, "over_copy": over,
            "sm_mhz": mhz, "copy_sm_mhz": copy_mhz}


def table(rows, repeat):
    groups, w = {}, max(23, 7 * repeat)
    for r in sorted(rows, key=lambda r: r["log2_n"]):
        groups.setdefault((r["system"], r["array_library"], r["log2_n"]), []).append(r)
    print(f"\n{'system':<13} {'arrays':<8} {'n':>5} {'ms/call':>9} {'issue us':>8} {'GB/s':>7} {'MHz':>5}  "
          f"{'x copy, each repetition':<{w}} {'max err':>8}", file=sys.stderr)
    for (system, lib, l), g in groups.items():
        med = lambda k: statistics.median(r[k] for r in g)
        by = {r["repeat"]: r["over_copy"] for r in g}  # a repetition that has no row shows "-"
        ratios = " ".join(f"{by[i]:6.3f}" if by.get(i) else "     -" for i in range(1, repeat + 1))
        err = max((float(r["max_rel_error"]) for r in g), key=lambda e: (math.isnan(e), e))  # NaN rows: "nan"
        mhz = [r["sm_mhz"] for r in g if r.get("sm_mhz")]  # the SM clock its batches ran at (GPU rows)
        mhz = f"{statistics.median(mhz):5.0f}" if mhz else "    -"
        print(f"{system:<13} {lib:<8} {'2^' + str(l):>5} {med('back_to_back_ms'):9.4f} {med('issue_us'):8.1f} "
              f"{med('gbs'):7.1f} {mhz}  {ratios:<{w}} {err:8.1e}{'' if all(r['ok'] for r in g) else ' WRONG'}",
              file=sys.stderr)


def race(a, dev, log2, out, skip):
    m = {}
    for name in ("torch", "cupy") if dev != "cpu" else ():
        try:
            mod = __import__(name)
            if name == "torch" and not mod.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
            m[name] = mod
        except Exception as e:  # a missing library leaves its systems out, and says so
            for system in RESIDENT + {"torch": ("torch.compile",), "cupy": ("cupy.fuse", "numba.cuda")}[name]:
                skip(system, name, f"{name}: {e!r}")
    libs = ["resident", *m] if dev != "cpu" else ["resident", "numpy"]
    out["device_name"] = (m["torch"].cuda.get_device_name(0) if "torch" in m else
                          m["cupy"].cuda.runtime.getDeviceProperties(0)["name"].decode() if "cupy" in m else dev)
    s = m["cupy"].cuda.get_current_stream() if "cupy" in m else None  # CuPy's copy: as python_stages.py times it
    copies = [("copy", lib, lambda L, l, c=c: lambda: c(L)) for lib, c in (
        ("cupy", lambda L: L.y.data.copy_from_device_async(L.x.data, L.x.nbytes, s)),
        ("torch", lambda L: L.y.copy_(L.x)), ("numpy", lambda L: np.copyto(L.y, L.x))) if lib in libs]
    out["copy_reference"] = ("cudaMemcpyAsync between the row's own arrays" if "cupy" in m else
                             copies[0][1] if copies else None)

    def raw_copy(L, lib):  # the row's own arrays copied by the driver (no library's code between)
        ptr = {"cupy": lambda a: a.data.ptr, "torch": lambda a: a.data_ptr(),
               "resident": lambda a: a.__cuda_array_interface__["data"][0]}[lib]
        rt, src, dst = m["cupy"].cuda.runtime, ptr(L.x), ptr(L.y)
        return lambda: rt.memcpyAsync(dst, src, 4 * L.x.size if lib != "torch" else 4 * L.x.numel(),
                                      rt.memcpyDeviceToDevice, s.ptr)
    program = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    systems = [(name, lib, lambda L, l, fn=fn: lambda: fn(L.x, out=L.y))  # the same three objects on every library
               for lib in libs for name, fn in zip(RESIDENT, (program, master, rs.fuse(seed)))]
    for name, lib, setup in peers(m):
        try:
            systems.append((name, lib, setup()))
        except Exception as e:
            skip(name, lib, repr(e))
    frees = [m[k].cuda.empty_cache if k == "torch" else m[k].get_default_memory_pool().free_all_blocks for k in m]
    dead, data = set(), {}
    for r in range(1, a.repeat + 1):
        for l in log2:
            if time.perf_counter() - T0 > a.budget_s:
                skip("*", "*", f"the time budget of {a.budget_s:g} s is spent", repeat=r, log2_n=l)
                continue
            if l not in data:  # the data, and FP64 on a prefix, a spread and the tail (a short grid shows there)
                host = np.random.default_rng(l).random(n := 1 << l, dtype=np.float32)
                idx = np.unique(np.r_[0:min(n, 1 << 20), np.linspace(0, n - 1, 4096).astype(np.int64),
                                      max(0, n - 4096):n])
                data[l] = (host, idx, host[idx].astype(np.float64), reference(host[idx]))
            host, idx, x_ref, ref = data[l]
            opened, copy_ms, cupy_ms, paired = {}, None, None, None  # the last size's arrays let go here
            for free in frees:
                free()
            for lib in libs:
                try:
                    opened[lib] = open_lib(lib, host, idx, m, dev)
                except Exception as e:
                    skip("*", lib, f"arrays: {e!r}", repeat=r, log2_n=l)
            ref_copy = copies[0] if copies and copies[0][1] in opened else None
            # The libraries take turns at leading the size's rows, and each library's systems, peers too,
            # at leading its own (each order rotated by one a repetition): an effect of a row's place in
            # the order (the power cap engages seconds into a size's rows) shows as such, not as one
            # system's or one library's.
            rot = lambda g: g[(r - 1) % len(g):] + g[:(r - 1) % len(g)]
            groups = [g for g in [[w for w in systems if w[1] == lib] for lib in libs] +
                      [[w for w in systems if w[1] not in libs]] if g]
            ordered = [w for g in rot(groups) for w in rot(g)]
            if ref_copy and "cupy" in m and a.settle_s > 0 and l >= 26:
                # A GPU under a sustained load of this size lowers its clocks to its power cap within a
                # few seconds: the copy runs first until then, so that every row meets the same clocks.
                settle, t_end = raw_copy(opened[ref_copy[1]], ref_copy[1]), time.perf_counter() + a.settle_s
                while time.perf_counter() < t_end:
                    for _ in range(20):
                        settle()
                    s.synchronize()
            for place, (system, lib, make) in enumerate(copies + ordered):
                if (system, lib) in dead or lib not in opened:
                    continue
                try:
                    if system != "copy" and ref_copy:
                        # The reference: a copy of the row's own arrays, its batches alternating with the
                        # row's: a GPU whose rate drifts (clocks, power) or memory placed apart is compared with itself.
                        if "cupy" in m:  # on CuPy's stream
                            cp = m["cupy"]
                            paired = raw_copy(opened[lib], lib)
                            cupy_ms = device_seconds(raw_copy(opened["cupy"], "cupy"), a.calls, s.ptr, a.reps, cp) * 1e3
                        else:
                            c = ref_copy[2](opened[ref_copy[1]], l)
                            copy_ms = per_call_seconds(c, a.calls, opened[ref_copy[1]].sync, a.reps) * 1e3
                    row = race_one(make, opened[lib], l, x_ref if system == "copy" else ref, a, m.get("cupy"),
                                   paired if system != "copy" else None, s.ptr if s else None)
                except Exception as e:
                    skip(system, lib, repr(e), repeat=r, log2_n=l)
                    traceback.print_exc(limit=3, file=sys.stderr)
                    if not any(w["system"] == system and w["array_library"] == lib for w in out["rows"]):
                        dead.add((system, lib))  # never ran: it would fail alike at every size
                    continue
                copy_ms = row["copy_ms"] or copy_ms or (row["back_to_back_ms"] if system == "copy" else None)
                over = row["over_copy"] or (row["back_to_back_ms"] / copy_ms if copy_ms else None)
                out["rows"].append({"repeat": r, "system": system, "array_library": lib, "log2_n": l, "place": place, **row,
                                    "copy_ms": copy_ms, "cupy_copy_ms": cupy_ms, "over_copy": over})
            done = [w["ok"] for w in out["rows"] if w["repeat"] == r and w["log2_n"] == l]
            print(f"python_race: repeat {r}/{a.repeat} 2^{l}: {len(done)} rows, {done.count(False)} wrong, copy "
                  f"{copy_ms or 0:.4f} ms, at {time.perf_counter() - T0:.0f} s", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log2", type=int, nargs="+", help="sizes (default 16 18 .. 28; with --device cpu 10 .. 16)")
    for flag, default in (("--json", "-"), ("--calls", 20), ("--reps", 7), ("--repeat", 3), ("--budget-s", 170.0),
                          ("--settle-s", 3.0)):
        ap.add_argument(flag, type=type(default), default=default)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    a = ap.parse_args()
    dev = "cuda:0" if a.device == "cuda" else "cpu"
    log2 = a.log2 or (list(range(16, 29, 2)) if dev != "cpu" else [10, 12, 14, 16])
    if not all(8 <= l <= 30 for l in log2) or min(a.calls, a.reps, a.repeat) < 1:
        sys.exit("python_race: give --log2 from 8 to 30, and --calls, --reps, --repeat of at least 1")
    out = {"benchmark": "python_race", "device": dev, "device_name": platform.processor() or dev, "versions": {},
           "calls": a.calls, "reps": a.reps, "repeat": a.repeat, "budget_s": a.budget_s, "log2_n": log2,
           "copy_reference": None, "rows": [], "skipped": []}

    def skip(system, lib, reason, **at):
        out["skipped"].append({"system": system, "array_library": lib, "reason": reason[:300], **at})
        print(f"python_race: skipped {system} on {lib} {at or ''}: {reason}"[:300], file=sys.stderr, flush=True)

    try:
        if dev != "cpu" and rs.cuda_device_count() == 0:
            raise RuntimeError("no GPU: " + rs.cuda_unavailable_reason())
        race(a, dev, log2, out, skip)
    except BaseException as e:  # whatever ends the race early, what it measured is still written
        out["aborted"] = repr(e)[:300]
        traceback.print_exc(file=sys.stderr)
    out["versions"] = {k: getattr(sys.modules.get(k), "__version__", None)
                       for k in ("torch", "cupy", "numba", "numba_cuda")}  # those imported
    out["versions"].update(resident=rs.__version__, numpy=np.__version__, python=platform.python_version())
    table(out["rows"], a.repeat)
    write_text(a.json, json.dumps(out, indent=1) + ("" if a.json == "-" else "\n"))
    # resident's rows must be right and must run (a missing library is no failure); peers' are recorded only
    bad = {f"{r['system']} on {r['array_library']}" for r in out["rows"] if r["system"] in RESIDENT and not r["ok"]}
    bad |= {f"{s['system']} on {s['array_library']}" for s in out["skipped"] if "repeat" in s and
            (s["system"] in RESIDENT or s["array_library"] == "resident")}  # a run that failed, not a missing library
    if out.get("aborted") or bad or not out["rows"]:
        sys.exit(f"python_race: failed: {out.get('aborted') or ', '.join(sorted(bad)) or 'no rows'}")


if __name__ == "__main__":
    main()
