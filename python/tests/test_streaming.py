"""resident.stream: host arrays through programs and stage chains in chunks, per backend: values
against FP64 NumPy, the ledger's counts per chunk, the pool's limit (in a subprocess: the limit is read
once per process), the typed errors (a bad RESIDENT_PROGRESS_BYTES among them), and Ctrl-C ending a
stream between chunks."""
import array
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import resident as rs
from _support import GPU, gpu, needs_numba

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])
SEED = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
F1 = rs.stage("float f1(float v) { return 1.5f * v + 0.5f; }")
F2 = rs.stage("float f2(float v) { return sqrtf(v * v + 1.0f); }")
F3 = rs.stage("float f3(float v) { return 0.5f * sinf(v); }")


def seed_ref(x):
    v = x.astype(np.float64)
    return 0.5 * np.sin(np.sqrt((1.5 * v + 0.5) ** 2 + 1.0))


def fresh(n, dtype=np.float32, seed=None):
    seed = np.random.SeedSequence().entropy if seed is None else seed
    return np.random.default_rng(seed).uniform(-1, 1, n).astype(dtype), seed


def delta(before, device):
    """The ledger's counts on device since the snapshot `before`."""
    was = before.get(device, {})
    return collections.defaultdict(int, {k: v - was.get(k, 0) for k, v in rs.ledger().get(device, {}).items()})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("work", ["program", "chain"])
def test_a_map_matches_fp64_with_one_kernel_and_one_copy_each_way_per_chunk(device, work):
    w = rs.program(list(SEED.ops)) if work == "program" else F1 | F2 | F3  # a program no call has run yet
    for n in (0, 1, 1024, 5 * 1024 + 7):
        x, seed = fresh(n)
        rs.stream(w, x[:1].copy() if n else x, chunk=1024, device=device)  # compiled before the counts
        before = rs.ledger()
        y = rs.stream(w, x, chunk=1024, device=device)
        d = delta(before, device)
        chunks = (n + 1023) // 1024
        assert y.shape == x.shape and y.dtype == np.float32
        np.testing.assert_allclose(y, seed_ref(x), rtol=2e-6, atol=2e-6, err_msg=f"n={n} seed={seed}")
        s = rs.streaming.last_summary()
        assert s["chunks"] == chunks and s["elements"] == n
        assert d["h2d_bytes"] == 4 * n and d["d2h_bytes"] == 4 * n
        assert d["stream_chunks"] == chunks and d["kernels"] == chunks
        if work == "program":  # streamed by its compiled chain, as its calls run it, not interpreted
            assert w.engine == "compiled"


@pytest.mark.parametrize("device", DEVICES)
def test_into_out_in_place_and_two_dimensional(device):
    x, seed = fresh(3000)
    ref = seed_ref(x)
    out = np.full(3000, -12345.0, dtype=np.float32)
    assert rs.stream(SEED, x, out, chunk=512, device=device) is out
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=2e-6, err_msg=f"seed={seed}")
    m = x.reshape(30, 100).copy()
    rs.stream(F1 | F2 | F3, m, out=m, chunk=512, device=device)
    np.testing.assert_allclose(m.reshape(-1), ref, rtol=2e-6, atol=2e-6)
    b = array.array("f", x.tobytes())  # the buffer protocol, with its element type
    rs.stream(SEED, b, out=b, device=device)
    np.testing.assert_allclose(np.frombuffer(b, dtype=np.float32), ref, rtol=2e-6, atol=2e-6)
    with pytest.raises(rs.InvalidArgument, match="type"):
        rs.stream(SEED, bytearray(x.tobytes()), device=device)  # bytes: no element type to stream


@pytest.mark.parametrize("device", DEVICES)
def test_a_zip_of_host_arrays_reads_them_in_step(device):
    a, seed = fresh(4099)
    b = np.random.default_rng(seed + 1).uniform(-1, 1, 4099)
    d = rs.stage("double d(float a, double b) { return double(a) - 2.0 * b; }")
    y = rs.stream(d, (a, b), chunk=1000, device=device)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, a.astype(np.float64) - 2.0 * b)


@pytest.mark.parametrize("device", DEVICES)
def test_sum_min_max_combine_one_partial_per_chunk(device):
    x, seed = fresh(7 * 1024 + 3, np.float64)
    sq = rs.stage("double sq(double v) { return v * v; }")
    ref = x * x
    before = rs.ledger()
    s = rs.stream(sq | rs.jit.sum(), x, chunk=1024, device=device)
    d = delta(before, device)
    assert s == pytest.approx(ref.sum(), rel=1e-12), f"seed={seed}"
    assert d["d2h_bytes"] == 8 * 8 and d["h2d_bytes"] == 8 * x.size  # one partial per chunk
    assert rs.stream(sq, x, reduce="min", chunk=1024, device=device) == ref.min()
    assert rs.stream(sq, x, reduce="max", chunk=1024, device=device) == ref.max()
    # A program with a reduction: the same arithmetic as one run-time stage.
    xf = x.astype(np.float32)
    got = rs.stream(SEED, xf, reduce="sum", chunk=1024, device=device)
    assert got == pytest.approx(seed_ref(xf).sum(), rel=1e-5, abs=1e-4)
    assert rs.stream(SEED, xf, reduce="max", device=device) == pytest.approx(seed_ref(xf).max(), rel=1e-6)
    assert rs.stream(sq | rs.jit.sum(), np.zeros(0), device=device) == 0.0
    with pytest.raises(rs.InvalidArgument):  # no values have a least one (as rs.min of an empty array)
        rs.stream(sq | rs.jit.min(), np.zeros(0), device=device)
    nan = x.copy()
    nan[5000] = np.nan
    assert np.isnan(rs.stream(sq | rs.jit.max(), nan, chunk=1024, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_progress_is_called_after_each_chunk(device):
    x, _ = fresh(3 * 1024 + 5)
    seen = []
    rs.stream(SEED, x, chunk=1024, device=device, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1024, x.size), (2048, x.size), (3072, x.size), (x.size, x.size)]

    def stop(done, total):
        raise KeyboardInterrupt("stop")
    with pytest.raises(KeyboardInterrupt):
        rs.stream(SEED, x, chunk=1024, device=device, progress=stop)
    rs.stream(SEED, x, chunk=1024, device=device, progress=True)  # a bar or a line, never an error


@pytest.mark.parametrize("device", DEVICES)
def test_bad_calls_raise_typed_errors_before_any_data_moves(device):
    x, _ = fresh(100)
    before = rs.ledger()
    with pytest.raises(rs.ShapeMismatch):
        rs.stream(SEED, x, np.empty(99, np.float32), device=device)
    with pytest.raises(rs.InvalidArgument, match="float16|type"):
        rs.stream(SEED, x.astype(np.float16), device=device)
    ro = np.empty(100, np.float32)
    ro.flags.writeable = False
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.stream(SEED, x, ro, device=device)
    with pytest.raises(rs.InvalidArgument, match="byte order"):
        rs.stream(SEED, x.astype(">f4"), device=device)
    with pytest.raises(rs.InvalidArgument, match="contiguous"):
        rs.stream(SEED, np.ones((10, 20), np.float32)[:, ::2], device=device)
    with pytest.raises(rs.InvalidArgument, match="reduce"):
        rs.stream(SEED, x, reduce="mean", device=device)
    with pytest.raises(rs.InvalidArgument, match="depth"):
        rs.stream(SEED, x, depth=99, device=device)
    with pytest.raises(rs.InvalidArgument, match="negative"):
        rs.stream(SEED, x, chunk=-1, device=device)
    with pytest.raises(rs.InvalidArgument, match="init"):
        rs.stream(F1 | rs.jit.reduce("float add(float a, float b) { return a + b; }", 1.0), x, device=device)
    with pytest.raises(rs.InvalidArgument, match="generator"):
        rs.stream(rs.jit.uniform(1) | F1, x, device=device)
    with pytest.raises(rs.InvalidArgument, match="out= is not used"):
        rs.stream(F1 | rs.jit.sum(), x, np.empty(100, np.float32), device=device)
    with pytest.raises(rs.InvalidArgument, match="work"):
        rs.stream(42, x, device=device)
    with pytest.raises(rs.CompileError):
        rs.stream(rs.stage("float broken(float v) { return v +; }"), x, device=device)
    with rs.transfer_policy("forbid"):
        with pytest.raises(rs.TransferForbidden):
            rs.stream(SEED, x, device=device)
    d = delta(before, device)
    assert d.get("h2d_bytes", 0) == 0 and d.get("stream_chunks", 0) == 0


def test_a_device_that_does_not_answer_leaves_a_program_compiled():
    # Refused as the caller's mistake, not taken for a missing compiler: the program's later streams
    # and calls still run its compiled chain.
    p = rs.op.affine(1.25, 0.375) | rs.op.square() | rs.op.add(3)  # its first use in this process
    x, _ = fresh(100)
    with pytest.raises(rs.DeviceUnavailable):
        rs.stream(p, x, device=f"cuda:{rs.cuda_device_count()}")
    np.testing.assert_allclose(rs.stream(p, x, device="cpu"), (1.25 * x.astype(np.float64) + 0.375) ** 2 + 3,
                               rtol=2e-6)
    assert p.engine == "compiled"


def test_a_program_into_an_output_of_another_dtype_is_named_in_its_terms():
    x, _ = fresh(100)
    with pytest.raises(rs.InvalidArgument, match="programs run on float or double arrays of one type"):
        rs.stream(rs.program(list(SEED.ops)), x, np.empty(100, np.float64), device="cpu")


@gpu
def test_a_device_array_is_not_host_memory():
    x = rs.to_device(np.ones(10, np.float32), "cuda:0")
    with pytest.raises(rs.InvalidArgument, match="host"):
        rs.stream(SEED, x)


def run_child(code, limit, device="cpu"):
    env = dict(os.environ, RESIDENT_POOL_LIMIT=limit)
    r = subprocess.run([sys.executable, "-c", code, device], env=env, capture_output=True, text=True, timeout=300)
    return r


CHILD = r"""
import json, sys
import numpy as np
import resident as rs
dev = sys.argv[1]
x = np.random.default_rng(5).uniform(-1, 1, 2 << 20).astype(np.float32)   # 8 MiB
v = x.astype(np.float64)
ref = 0.5 * np.sin(np.sqrt((1.5 * v + 0.5) ** 2 + 1.0))
seed = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
y = rs.stream(seed, x, device=dev)
err = float(np.max(np.abs(y - ref)))
s = rs.streaming.last_summary()
total = rs.stream(seed, x, reduce="sum", device=dev)
print(json.dumps({"err": err, "summary": s, "ledger": rs.ledger()[dev], "sum_err": abs(total - ref.sum()) / ref.size}))
"""


@pytest.mark.parametrize("device", DEVICES)
def test_data_larger_than_the_pool_limit_streams_under_it(device):
    r = run_child(CHILD, "2MiB", device)  # a quarter of the data
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["err"] < 2e-6 and got["sum_err"] < 1e-5
    assert got["ledger"]["peak_bytes"] <= 2 << 20
    assert got["ledger"]["streamed_h2d_bytes"] >= 8 << 20
    if device != "cpu":
        assert got["summary"]["chunks"] > 4 and got["summary"]["device_bytes"] <= 2 << 20


def test_a_bad_pool_limit_is_refused():
    r = run_child(CHILD, "lots")
    assert r.returncode != 0 and "RESIDENT_POOL_LIMIT" in r.stderr and "InvalidArgument" in r.stderr


@pytest.mark.parametrize("device", DEVICES)
def test_pinned_host_arrays_stream_without_staging(device):
    x = rs.streaming.pinned_empty((4, 1000))
    x[:] = fresh(4000)[0].reshape(4, 1000)
    out = rs.streaming.pinned_empty(4000)
    rs.stream(SEED, x, out, chunk=1024, device=device)
    np.testing.assert_allclose(out, seed_ref(x.reshape(-1)), rtol=2e-6, atol=2e-6)
    s = rs.streaming.last_summary()
    assert s["pinned_input"] and s["pinned_output"] and s["host_threads"] == 0
    with pytest.raises(rs.InvalidArgument):
        rs.streaming.pinned_empty(-1)


@pytest.mark.parametrize("device", DEVICES)
def test_python_function_stages_stream(device):
    from _support import import_or_skip
    import_or_skip("numba")
    import math

    @rs.stage
    def g1(v):
        return 1.5 * v + 0.5

    @rs.stage
    def g2(v):
        return 0.5 * math.sin(math.sqrt(v * v + 1.0))

    x, seed = fresh(10_007)
    y = rs.stream(g1 | g2, x, chunk=4096, device=device)
    np.testing.assert_allclose(y, seed_ref(x), rtol=2e-6, atol=2e-6, err_msg=f"seed={seed}")
    assert rs.stream(g1 | g2 | rs.jit.sum(), x, device=device) == pytest.approx(seed_ref(x).sum(), rel=1e-5)
    assert rs.stream(lambda v: v * 2.0, x, reduce="max", device=device) == pytest.approx(2 * float(x.max()), rel=1e-7)


@pytest.mark.parametrize("device", ["cpu"] + (["cuda:0"] if GPU else []))
@pytest.mark.parametrize("pinned", [False, True])
def test_a_stream_its_progress_stops_leaves_counts_that_match_its_output(device, pinned):
    # A chunk is counted (and reported) once its results are on their way down: when the callback
    # raises, the ledger's copies and chunks and the values written in `out` tell the same story.
    x = np.arange(1000, dtype=np.float32)
    out = rs.streaming.pinned_empty(1000) if pinned else np.empty_like(x)
    out[:] = 0
    rs.stream(rs.op.add(1), x[:10], device=device, progress=False)  # compiled before counting
    seen = []

    def stop(done, total):
        seen.append(done)
        if done >= 300:
            raise KeyboardInterrupt
    before = rs.ledger().get(device, {})
    with pytest.raises(KeyboardInterrupt):
        rs.stream(rs.op.add(1), x, out=out, chunk=100, depth=2, device=device, progress=stop)
    after = rs.ledger()[device]
    moved = {k: after[k] - before.get(k, 0) for k in ("d2h_copies", "stream_chunks", "streamed_d2h_bytes")}
    written = int(np.count_nonzero(out == x + 1))
    assert seen[-1] == 300 and written == moved["streamed_d2h_bytes"] // 4 == 100 * moved["stream_chunks"], (moved, written)
    assert moved["d2h_copies"] == moved["stream_chunks"] >= 3
    assert rs.streaming.last_summary() is None  # not the warm-up's


def test_stream_options_and_arrays_are_checked_in_its_terms():
    x = np.ones(8, np.float32)
    with pytest.raises(rs.InvalidArgument, match="1 to 16 chunks"):
        rs.stream(rs.op.add(1), x, depth=2**31)
    with pytest.raises(rs.InvalidArgument, match="2\\^56"):
        rs.stream(rs.op.add(1), x, chunk=2**63)
    for dtype in (np.int8, np.bool_, np.complex64, np.float16):
        with pytest.raises(rs.InvalidType, match="float32, float64, int32"):
            rs.stream(rs.op.add(1), np.ones(8, dtype))
    two_d = rs.to_device(np.ones((2, 4), np.float32), device="cpu")
    assert rs.stream(rs.op.add(1), two_d).shape == (2, 4)
    assert rs.stream(rs.op.add(1), memoryview(np.ones((2, 4), np.float32))).shape == (2, 4)


def test_a_bad_progress_threshold_is_refused_in_residents_terms():
    code = ("import numpy as np, resident as rs\n"
            "try:\n    rs.stream(rs.op.sqrt(), np.ones(4, np.float32), progress=None)\n"
            "except rs.InvalidArgument as e:\n    print('refused:', e)\n")
    for bad in ("abc", "1.5", "1 GiB!"):
        env = dict(os.environ, RESIDENT_PROGRESS_BYTES=bad)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr  # the import itself works
        assert "refused:" in r.stdout and "RESIDENT_PROGRESS_BYTES" in r.stdout
    env = dict(os.environ, RESIDENT_PROGRESS_BYTES="1GiB")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "refused" not in r.stdout, r.stdout + r.stderr


def test_streams_odd_arguments_are_named_in_residents_terms():
    x = np.ones(8, np.float32)
    with pytest.raises(rs.InvalidType, match="device=0"):
        rs.stream(rs.op.sqrt(), x, device=0)
    for bad in (np.empty(8, object), np.array(["a"] * 8)):
        with pytest.raises(rs.InvalidType, match="holds"):
            rs.stream(rs.op.sqrt(), bad)
        with pytest.raises(rs.InvalidType, match="holds"):
            rs.stream(rs.op.sqrt(), x, out=bad)
    with pytest.raises(rs.InvalidArgument, match="program runs on float32 or float64"):
        rs.dist.min(rs.dist.shard(np.arange(4, dtype=np.int32), ["cpu"]), rs.op.sqrt())


def _slow(v):
    for _ in range(40):
        v = v * 0.999 + 0.001
    return v


@needs_numba
def test_ctrl_c_ends_a_stream_between_chunks():
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    # On the CPU, where a chunk's time is the stage's (a GPU's queue of chunks in flight is another test's).
    chunk = 1 << 18
    x = np.ones(64 * chunk, np.float32)
    rs.stream(_slow, x[:chunk].copy(), chunk=chunk, device="cpu")  # compiled before timing
    start = time.monotonic()
    rs.stream(_slow, x.copy(), chunk=chunk, progress=False, device="cpu")
    whole = time.monotonic() - start
    # Interrupted an eighth of the way in, it ends soon after (before, it ran every chunk first).
    timer = threading.Timer(whole / 8, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            rs.stream(_slow, x.copy(), chunk=chunk, progress=False, device="cpu")
    finally:
        timer.cancel()
    assert time.monotonic() - start < whole / 2


def test_the_given_depth_is_the_one_used_and_a_stage_keeps_the_shape():
    x = np.ones(10000, np.float32)
    for depth in (1, 2, 5):  # 3 is the depth chosen when none is given
        rs.stream(rs.op.add(1), x, chunk=1000, depth=depth, progress=False)
        s = rs.streaming.last_summary()
        assert s["depth"] == depth and s["chunks"] == 10
    assert rs.stream(rs.op.add(1), np.ones((2, 4), np.float32), progress=False).shape == (2, 4)


@needs_numba
def test_a_streamed_stage_keeps_the_inputs_shape():
    out = rs.stream(lambda v: v + 1, np.ones((2, 4), np.float32), progress=False)
    assert out.shape == (2, 4)
    np.testing.assert_array_equal(out, np.full((2, 4), 2, np.float32))


_INTERPRETED_REDUCE = """
import json, numpy as np, resident as rs, resident.streaming as st
p = rs.op.sqrt() | rs.op.add(1.0)
out = []
for dt in ("float32", "float64"):
    x = np.linspace(0, 100, 100003).astype(dt)
    x[500] = -1.0 if dt == "float64" else x[500]  # a NaN in one piece: min, max and sum say so
    for red in ("sum", "min", "max"):
        v = rs.stream(p, x, reduce=red, chunk=7777, timeline=True)
        s = st.last_summary()
        out.append([dt, red, v, p.engine, s["chunks"], len(s["timeline"]), s["h2d_bytes"]])
print(json.dumps(out))
"""


def test_a_streamed_program_reduces_where_no_compiler_is_available(tmp_path):
    # With no host compiler, rs.stream(program, reduce=...) raised DeviceUnavailable; the interpreter reduces.
    env = dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX="/bin/false", RESIDENT_JIT_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _INTERPRETED_REDUCE], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    for dt, red, v, engine, chunks, timeline, h2d in json.loads(r.stdout):
        x = np.linspace(0, 100, 100003).astype(dt).astype(np.float64)
        assert (engine, chunks, timeline, h2d) == ("interpreted", 13, 13, x.size * np.dtype(dt).itemsize)
        if dt == "float64":
            assert v is None or np.isnan(v), (red, v)  # json writes NaN as NaN: read back as nan
            continue
        want = getattr(np.sqrt(x) + 1.0, red)()
        assert v == pytest.approx(want, rel=2e-7 if red == "sum" else 0), (red, v, want)


@needs_numba
@pytest.mark.parametrize("device", DEVICES)
def test_a_value_does_not_depend_on_where_its_chunk_ends(device):
    # The compiled CPU loops took the scalar libm function for a range's last partial vector and the
    # vector one elsewhere: 57776 of 100003 float32 values of sin(v) * exp(v / 100) differed by an ulp
    # between chunk=7 and one call. Now padded to a whole vector: the same bits at every chunk.
    import math
    x = np.random.default_rng(1).uniform(-50, 50, 100003).astype(np.float32)
    for work in (rs.stage(lambda v: math.sin(v) * math.exp(v * 0.01)), rs.op.sin() | rs.op.exp()):
        whole = work(rs.to_device(x.copy(), device=device)).to_host()
        for chunk in (1, 7, 1000, 4099):
            got = rs.stream(work, x, chunk=chunk, device=device)
            np.testing.assert_array_equal(got, whole, err_msg=f"chunk={chunk}")
        for red in ("min", "max"):  # exact whatever the order: the reduced values are those of the map
            assert rs.stream(work, x, reduce=red, chunk=7, device=device) == getattr(whole, red)()
