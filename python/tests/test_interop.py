"""resident's Python package: zero-copy exchange (pointer equality and a write seen on the other side),
lifetimes in both orders, the stream handshake, counted transfers, random fills into other libraries'
arrays, reductions against FP64, and every bad input a typed exception. The CPU part runs everywhere
(NumPy); the GPU part runs where a GPU answers and torch / cupy / numba are installed."""
import gc
import inspect
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import resident as rs
from _support import GPU, gpu, import_or_skip, sum_matches, sum_tolerance



def transfers(device="cpu"):
    c = rs.ledger().get(device, {})
    return c.get("h2d_copies", 0) + c.get("d2h_copies", 0) + c.get("d2d_copies", 0), \
        c.get("h2d_bytes", 0) + c.get("d2h_bytes", 0)


# ---- the CPU backend, with NumPy -------------------------------------------------------------------

def test_numpy_round_trip_is_counted_once_each_way():
    h = np.random.default_rng().random(1001, dtype=np.float32)
    before, before_bytes = transfers()
    a = rs.to_device(h, device="cpu")
    assert (a.shape, a.dtype, a.device, a.size, a.nbytes) == ((1001,), "float32", "cpu", 1001, 4004)
    back = a.to_host()
    after, after_bytes = transfers()
    assert np.array_equal(back, h)
    assert back.ctypes.data != a.data_ptr, "to_host makes a copy the caller owns"
    assert (after - before, after_bytes - before_bytes) == (2, 2 * 4004)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint32", "uint64"])
def test_export_to_numpy_shares_memory(dtype):
    a = rs.empty((3, 5), dtype, device="cpu")
    before = transfers()
    v = np.from_dlpack(a)
    assert transfers() == before, "an exchange moves no bytes"
    assert v.ctypes.data == a.data_ptr and v.shape == (3, 5) and v.dtype == np.dtype(dtype)
    v[...] = np.arange(15).reshape(3, 5)
    assert np.array_equal(a.to_host(), np.arange(15, dtype=dtype).reshape(3, 5)), "a write on one side is seen on the other"


def test_import_from_numpy_shares_memory_and_fills_in_place():
    h = np.full(1000, -7.0, dtype=np.float64)
    a = rs.from_dlpack(h)
    assert a.data_ptr == h.ctypes.data and a.shape == (1000,)
    rs.random.fill_uniform(h, seed=11, low=2.0, high=3.0)  # another library's array, in place
    assert np.all((h >= 2.0) & (h < 3.0))
    # The same values as a fill of resident's own array with the same stream.
    mine = rs.empty(1000, "float64", device="cpu")
    rs.random.fill_uniform(mine, seed=11, low=2.0, high=3.0)
    assert np.array_equal(mine.to_host(), h)
    # Offsets select later values of the same stream.
    tail = np.empty(990)
    rs.random.fill_uniform(tail, seed=11, offset=10, low=2.0, high=3.0)
    assert np.array_equal(tail, h[10:])


def test_lifetimes_in_both_orders():
    a = rs.to_device(np.arange(6, dtype=np.float32), device="cpu")
    v = np.from_dlpack(a)
    del a
    gc.collect()
    assert np.array_equal(v, np.arange(6, dtype=np.float32)), "the consumer keeps the producer's memory alive"
    h = np.arange(4, dtype=np.int64)
    b = rs.from_dlpack(h)
    del h
    gc.collect()
    assert np.array_equal(np.from_dlpack(b), np.arange(4)), "resident keeps another library's memory alive"
    c = rs.to_device(np.ones(3), device="cpu")
    w = np.from_dlpack(c)
    del w
    gc.collect()
    assert np.array_equal(c.to_host(), np.ones(3)), "the producer is intact after the consumer lets go"


def test_reductions_match_fp64():
    rng = np.random.default_rng()
    for n in (1, 7, 100003):
        x = rng.random(n) + 0.5  # every term >= 0.5: one missing or doubled shows
        tol = sum_tolerance(n, float(np.abs(x).sum()), np.float64)
        got, ref = rs.sum(x), math.fsum(x)
        ok, why = sum_matches(got, ref, tol, 0.5)
        assert ok, why
        assert not sum_matches(got, ref - x[n // 2], tol, 0.5)[0], "a dropped term passed"
        assert not sum_matches(got, ref + x[-1], tol, 0.5)[0], "a doubled term passed"
        assert rs.max(x) == x.max() and rs.min(x) == x.min()
    i = rng.integers(-1000, 1000, 5001, dtype=np.int64)
    assert rs.sum(i) == float(i.sum()) and rs.min(i) == i.min() and rs.max(i) == i.max()


def test_normals_and_bits():
    x = np.empty(100000, dtype=np.float32)
    rs.random.fill_normal(x, seed=5, mean=1.0, sd=2.0)
    assert abs(x.mean() - 1.0) < 0.05 and abs(x.std() - 2.0) < 0.05
    b = np.empty(64, dtype=np.uint32)
    rs.random.fill_bits(b, seed=5)
    assert len(set(b.tolist())) > 60


def test_transfer_policy_scopes():
    assert rs.transfer_policy.current() == "allow"
    with rs.transfer_policy("forbid"):
        assert rs.transfer_policy.current() == "forbid"
        with pytest.raises(rs.TransferForbidden):
            rs.to_device(np.ones(3), device="cpu")
        with rs.transfer_policy("allow"):
            rs.to_device(np.ones(3), device="cpu")
        a = rs.empty(3, device="cpu")
        np.from_dlpack(a)[:] = 1  # sharing is not a transfer
    assert rs.transfer_policy.current() == "allow"
    with pytest.raises(rs.InvalidArgument, match="allow, log or forbid"):
        with rs.transfer_policy("sometimes"):
            pass


def test_a_forbidden_transfer_names_the_python_line_that_asked():
    with rs.transfer_policy("forbid"):
        with pytest.raises(rs.TransferForbidden) as e:
            line = inspect.currentframe().f_lineno + 1
            rs.to_device(np.ones(3), device="cpu")
    assert f"test_interop.py:{line}" in str(e.value), str(e.value)


def test_a_transfer_the_environment_forbids_names_the_python_line_that_asked(tmp_path):
    # The process default is read once by the bindings (a scope per call): a forbidden transfer still
    # names the script's line, on the first call and on later ones.
    script = tmp_path / "user_program.py"
    script.write_text("import numpy as np, resident as rs\n"
                      "for _ in range(2):\n"
                      "    try:\n"
                      "        rs.to_device(np.ones(3), device='cpu')\n"
                      "    except rs.TransferForbidden as e:\n"
                      "        print(e)\n")
    env = dict(os.environ, RESIDENT_TRANSFER_POLICY="forbid")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("user_program.py:4") == 2, r.stdout[-2000:]


def test_a_bad_transfer_policy_in_the_environment_is_an_error_not_an_abort():
    code = "import numpy as np, resident as rs\nrs.to_device(np.ones(3), device='cpu')\n"
    env = dict(os.environ, RESIDENT_TRANSFER_POLICY="sometimes")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "allow, log or forbid" in r.stderr, r.stderr[-2000:]


def test_the_profile_accounts_calls_to_the_python_lines_that_made_them(tmp_path):
    # RESIDENT_PROFILE=1 for a whole program: the report's sites are the script's lines, not the
    # binding's, and a program called from resident.jit's wrappers counts at the user's line too.
    script = tmp_path / "user_program.py"
    script.write_text(
        "import numpy as np\n"
        "import resident as rs\n"
        "x = rs.to_device(np.ones(1000, dtype=np.float32), device='cpu')\n"
        "p = rs.op.affine(1.5, 0.5) | rs.op.sqrt()\n"
        "for _ in range(3):\n"
        "    p(x)\n"
        "y = x.to_host()\n")
    report = tmp_path / "profile.json"
    env = dict(os.environ, RESIDENT_PROFILE="1", RESIDENT_PROFILE_JSON=str(report))
    subprocess.run([sys.executable, str(script)], check=True, env=env, capture_output=True, timeout=120)
    sites = json.loads(report.read_text())["sites"]
    lines = {(os.path.basename(s["file"]), s["line"]): s for s in sites}
    assert ("user_program.py", 3) in lines, sites
    assert lines[("user_program.py", 6)]["calls"] == 3, sites
    assert ("user_program.py", 7) in lines, sites
    assert not any(s["file"].endswith("module.cpp") for s in sites), sites


def test_the_exception_classes_form_one_hierarchy_and_the_version_is_the_packages():
    # Each class as the C++ table maps it: under resident.Error, with the Python built-in it stands for.
    for cls, bases in [(rs.DeviceMismatch, (rs.InvalidArgument, ValueError)),
                       (rs.InvalidLaunch, (rs.InvalidArgument, ValueError)),
                       (rs.LibraryError, (rs.Error,)), (rs.CudaError, (rs.LibraryError,)),
                       (rs.DeviceLost, (rs.CudaError, rs.LibraryError)), (rs.OutOfMemory, (MemoryError,))]:
        assert issubclass(cls, rs.Error) and all(issubclass(cls, b) for b in bases), cls
        assert cls.__doc__, cls
    assert not issubclass(rs.LibraryError, rs.InvalidArgument)
    # Raised from C++: a device mismatch and an invalid launch, as their own classes.
    with pytest.raises(rs.DeviceUnavailable):
        rs.empty(3, device="cuda:99")
    if GPU:
        with pytest.raises(rs.DeviceMismatch):
            rs.matmul(rs.empty((2, 2), device="cpu"), rs.empty((2, 2), device="cuda:0"))
    import importlib.metadata as md
    assert re.fullmatch(r"\d+\.\d+\.\d+", rs.__version__), rs.__version__
    try:
        assert rs.__version__ == md.version("resident")
    except md.PackageNotFoundError:
        pass  # run from a source tree without the installed metadata
    if "RESIDENT_DEVICE" not in os.environ:  # the first GPU that answers, else the CPU
        assert rs.default_device() == ("cuda:0" if rs.cuda_device_count() else "cpu")


def test_bad_input_is_a_typed_exception():
    with pytest.raises(rs.InvalidType, match="float32 or float64"):
        rs.random.fill_uniform(np.zeros(3, np.int32), seed=1)
    with pytest.raises(rs.InvalidArgument, match="strided"):
        rs.sum(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(rs.InvalidArgument, match="not supported"):
        rs.from_dlpack(np.zeros(3, np.float16))
    with pytest.raises(rs.InvalidArgument, match="element type bool8 is not supported"):
        rs.to_device(np.zeros(3, bool), device="cpu")
    with pytest.raises(rs.InvalidArgument, match="unknown dtype"):
        rs.empty(3, "float16")
    with pytest.raises(rs.InvalidArgument, match="negative"):
        rs.empty((2, -1))
    with pytest.raises(rs.InvalidArgument, match="unknown device"):
        rs.empty(3, device="tpu")
    with pytest.raises(rs.InvalidArgument):
        rs.from_dlpack(object())
    with pytest.raises(rs.InvalidArgument):
        rs.random.fill_uniform(np.zeros(3, np.float32), seed=1, low=1.0, high=1.0)
    with pytest.raises(BufferError):
        rs.empty(3, device="cpu").__dlpack__(copy=True)
    with pytest.raises(rs.InvalidArgument, match="takes no stream"):
        rs.empty(3, device="cpu").__dlpack__(stream=1)
    with pytest.raises(AttributeError):
        rs.empty(3, device="cpu").__cuda_array_interface__
    assert issubclass(rs.InvalidArgument, ValueError) and issubclass(rs.OutOfMemory, MemoryError)
    if not GPU:
        with pytest.raises(rs.DeviceUnavailable):
            rs.empty(3, device="cuda:0")


def read_only(a):
    a.flags.writeable = False
    return a


def test_memory_marked_read_only_is_read_but_never_written():
    ro = read_only(np.arange(8, dtype=np.float32))
    immutable = bytes(np.arange(8, dtype=np.float32).tobytes())
    backed = np.frombuffer(immutable, np.float32)  # the memory of a bytes object
    u32 = read_only(np.arange(8, dtype=np.uint32))
    m = read_only(np.ones((2, 2), np.float32))
    writers = {
        "fill_uniform": lambda x: rs.random.fill_uniform(x, seed=1),
        "fill_normal": lambda x: rs.random.fill_normal(x, seed=1),
        "program": lambda x: rs.op.neg()(x),
        "program out": lambda x: rs.op.neg()(np.ones(8, np.float32), out=x),
        "Flow.add": lambda x: rs.Flow(device="cpu").add("w", lambda: None, writes=[x]),
        "jit": lambda x: rs.stage("float twice(float v) { return 2 * v; }")(np.ones(8, np.float32), out=x),
    }
    for name, write in writers.items():
        for x in (ro, backed, rs.from_dlpack(ro)):
            with pytest.raises(rs.InvalidArgument, match="read-only"):
                write(x)
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.random.fill_bits(u32, seed=1)
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), out=m)
    assert np.array_equal(ro, np.arange(8, dtype=np.float32)) and np.array_equal(u32, np.arange(8))
    assert immutable == np.arange(8, dtype=np.float32).tobytes() and np.array_equal(m, np.ones((2, 2)))
    # Reading is fine, and a read-only array stays read-only when it is shared on.
    assert rs.sum(backed) == 28.0 and rs.max(ro) == 7.0
    out = np.zeros(8, np.float32)
    rs.op.neg()(ro, out=out)
    assert np.array_equal(out, -np.arange(8))
    a = rs.from_dlpack(ro)
    assert a.data_ptr == ro.ctypes.data
    view = np.from_dlpack(a)
    assert not view.flags.writeable and view.ctypes.data == ro.ctypes.data
    with pytest.raises(BufferError, match="read-only"):
        a.__dlpack__()  # an unversioned capsule cannot say read-only
    with pytest.raises(BufferError, match="read-only"):
        a.__dlpack__(max_version=(0, 8))


def test_min_and_max_of_an_empty_array_are_refused_and_its_sum_is_zero():
    for dtype in (np.float32, np.float64, np.int32, np.uint64):
        e = np.zeros(0, dtype)
        assert rs.sum(e) == 0.0
        with pytest.raises(rs.InvalidArgument, match="empty"):
            rs.min(e)
        with pytest.raises(rs.InvalidArgument, match="empty"):
            rs.max(rs.empty((3, 0), np.dtype(dtype).name, device="cpu"))


def test_a_shape_of_anything_but_ints_is_refused_before_allocating():
    for bad in (2.5, None, "3", [2, 1.5], (2, None), np.float64(4.0), {"a": 1}):
        with pytest.raises(rs.InvalidArgument, match="shape"):
            rs.empty(bad, device="cpu")
    for bad in (2 ** 63, (2, 2 ** 64)):
        with pytest.raises(rs.InvalidArgument, match="beyond"):
            rs.empty(bad, device="cpu")
    with pytest.raises(rs.InvalidArgument, match="negative"):
        rs.empty([3, -(2 ** 70)], device="cpu")
    with pytest.raises(rs.InvalidArgument, match="overflows"):
        rs.empty((2 ** 40, 2 ** 40), device="cpu")
    assert rs.empty([2, np.int64(3)], device="cpu").shape == (2, 3)
    assert rs.empty((), device="cpu").shape == () and rs.empty((4, 0), device="cpu").size == 0


def test_a_capsule_is_taken_once_and_a_refused_one_stays_unconsumed():
    h = np.arange(8, dtype=np.float64)
    cap = h.__dlpack__()
    assert rs.from_dlpack(cap).data_ptr == h.ctypes.data
    with pytest.raises(rs.InvalidArgument, match="consumed already"):
        rs.from_dlpack(cap)
    for src, why in ((np.zeros(4, np.float16), "not supported"), (np.arange(8.0)[::2], "strided")):
        cap = src.__dlpack__()
        for _ in range(2):  # refused each time: the capsule was not consumed by the refusal
            with pytest.raises(rs.InvalidArgument, match=why):
                rs.from_dlpack(cap)
    import datetime
    with pytest.raises(rs.InvalidArgument, match="not a DLPack tensor"):
        rs.from_dlpack(datetime.datetime_CAPI)
    with pytest.raises(rs.InvalidArgument, match="gave no tensor"):
        rs.from_dlpack(np.array([1, "a"], dtype=object))


class _FakeCAI:
    def __init__(self, desc):
        self.__cuda_array_interface__ = desc


def test_a_malformed_cuda_array_interface_is_refused_not_crashed_on():
    good = {"shape": (3, 4), "typestr": "<f4", "data": (0, False), "version": 3}
    bad = [
        (dict(good, strides=()), "strides"),  # fewer strides than dimensions (read past the tuple before)
        (dict(good, strides=(16, 4, 1)), "strides"),
        (dict(good, strides=(16, "4")), "strides"),
        (dict(good, strides=(16, 3)), "whole elements"),
        (dict(good, typestr=""), "typestr"),
        (dict(good, typestr="<f4x"), "typestr"),
        (dict(good, typestr=4), "typestr"),
        (dict(good, typestr=">f4"), "big-endian"),
        (dict(good, typestr="<f2"), "not supported"),
        (dict(good, data=None), "data"),
        (dict(good, data=("0", False)), "data"),
        (dict(good, shape=(3, 2.0)), "shape"),
        (dict(good, mask=(0, False)), "masked"),
        ({"shape": (3,), "typestr": "<f4"}, "no 'data'"),
        ({"typestr": "<f4", "data": (0, False)}, "no 'shape'"),
        (5, "is a dict"),
    ]
    for desc, why in bad:
        with pytest.raises(rs.InvalidArgument, match=why):
            rs.from_dlpack(_FakeCAI(desc))
    # A null pointer with elements, or memory this build cannot reach, is refused too.
    with pytest.raises(rs.Error):
        rs.from_dlpack(_FakeCAI(dict(good, data=(0, False))))


def test_a_program_output_overlapping_its_input_is_refused_and_exact_in_place_runs():
    buf = np.random.default_rng(1).random(1000).astype(np.float32)
    before = buf.copy()
    for x, out in ((buf[:-1], buf[1:]), (buf[1:], buf[:-1]), (buf[:600], buf[400:])):
        with pytest.raises(rs.InvalidArgument, match="overlaps"):
            rs.op.neg()(x, out=out)
        with pytest.raises(rs.InvalidArgument, match="overlaps"):
            rs.stage("float neg(float v) { return -v; }")(x, out=out)
    assert np.array_equal(buf, before), "nothing was written"
    rs.op.neg()(buf[:500], out=buf[500:])  # disjoint halves of one buffer
    assert np.array_equal(buf[500:], -before[:500])
    rs.op.neg()(buf, out=buf)  # exactly in place
    assert np.array_equal(buf[:500], -before[:500])


def test_to_numba_refuses_cpu_arrays_and_other_libraries_arrays():
    with pytest.raises(rs.InvalidArgument, match="on cpu"):
        rs.empty(3, device="cpu").to_numba()
    with pytest.raises(rs.InvalidArgument, match="takes a resident.Array"):
        rs.to_numba(np.zeros(3, np.float32))


def test_numpy_has_the_alias_numba_cuda_calls_only_while_resident_calls_numba_cuda(monkeypatch):
    from resident import _compat
    monkeypatch.delattr(np, "row_stack", raising=False)  # a NumPy that has removed it
    with _compat.numpy_for_numba_cuda():
        assert np.row_stack is np.vstack
        with _compat.numpy_for_numba_cuda():  # nested, as another thread's call may be
            assert np.row_stack is np.vstack
        assert np.row_stack is np.vstack
    assert not hasattr(np, "row_stack")  # NumPy as the user has it again
    mine = object()
    monkeypatch.setattr(np, "row_stack", mine, raising=False)  # a NumPy that has it: left alone
    with _compat.numpy_for_numba_cuda():
        assert np.row_stack is mine
    assert np.row_stack is mine


# ---- the GPU, with PyTorch, CuPy and Numba ----------------------------------------------------------



@gpu
def test_torch_both_ways_at_zero_copy():
    torch = import_or_skip("torch")
    a = rs.to_device(np.arange(1 << 20, dtype=np.float32), device="cuda:0")
    before = transfers("cuda:0")
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.data_ptr and t.is_cuda
    t.mul_(2)
    torch.cuda.synchronize()
    u = torch.arange(1000, dtype=torch.float64, device="cuda")
    b = rs.from_dlpack(u)
    assert b.data_ptr == u.data_ptr() and b.device == "cuda:0"
    rs.random.fill_uniform(u, seed=3)  # resident's Philox into a PyTorch tensor, in place
    assert transfers("cuda:0") == before
    assert np.array_equal(a.to_host(), 2 * np.arange(1 << 20, dtype=np.float32))
    mine = rs.empty(1000, "float64", device="cuda:0")
    rs.random.fill_uniform(mine, seed=3)
    assert np.array_equal(u.cpu().numpy(), mine.to_host())
    cpu = np.empty(1000)
    rs.random.fill_uniform(cpu, seed=3)
    assert np.array_equal(cpu, mine.to_host()), "the same values on the CPU and the GPU"


@gpu
def test_stream_handshake_with_torch():
    torch = import_or_skip("torch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.ones(1 << 24, device="cuda")
        for _ in range(20):
            x.add_(1)  # long work queued on a side stream
        cap = x.__dlpack__(stream=1)  # resident works on the legacy default stream
    a = rs.from_dlpack(cap)
    assert rs.min(a) == 21.0 and rs.max(a) == 21.0
    # The other way: resident's queued fill seen by torch on its own stream.
    b = rs.empty(1 << 24, device="cuda:0")
    rs.random.fill_uniform(b, seed=9)
    with torch.cuda.stream(side):
        t = torch.from_dlpack(b)
        m = float(t.max())
    assert 0.99 < m < 1.0


@gpu
def test_cupy_and_numba():
    cp = import_or_skip("cupy")
    c = cp.zeros(4096, dtype=cp.float32)
    rs.random.fill_normal(c, seed=1)
    assert float(cp.abs(c).max()) > 0
    a = rs.from_dlpack(c)
    assert a.data_ptr == c.data.ptr
    d = cp.asarray(a)  # through __cuda_array_interface__
    assert d.data.ptr == a.data_ptr
    e = rs.to_device(np.arange(10, dtype=np.float64), device="cuda:0")
    f = cp.from_dlpack(e)
    f += 1
    assert np.array_equal(e.to_host(), np.arange(10) + 1.0)
    numba_cuda = import_or_skip("numba.cuda")
    g = numba_cuda.as_cuda_array(e)
    assert g.__cuda_array_interface__["data"][0] == e.data_ptr
    h = rs.from_dlpack(g)
    assert h.data_ptr == e.data_ptr


@gpu
def test_cuda_array_interface_exports_the_stream_while_work_is_queued_and_none_after():
    cp = import_or_skip("cupy")
    n = 1 << 24
    x = rs.empty(n, device="cuda:0")
    ref = np.empty(n, np.float32)
    rs.random.fill_uniform(ref, seed=29)  # the same values on the CPU
    for seed in range(20, 30):
        rs.random.fill_uniform(x, seed=seed)  # milliseconds of work queued on x's stream
    cai = x.__cuda_array_interface__
    assert cai["stream"] in (1, None)  # 1 (the legacy default stream) while the fills run
    assert cai["version"] == 3 and cai["shape"] == (n,) and cai["typestr"] == "<f4" and cai["strides"] is None
    side = cp.cuda.Stream(non_blocking=True)
    with side:
        d = cp.asarray(x)  # CuPy synchronizes the exported stream, then works on its own
        back = cp.asnumpy(d, stream=side)
    assert d.data.ptr == x.data_ptr
    assert np.array_equal(back, ref), "the consumer on another stream saw the last fill"
    rs.synchronize("cuda:0")
    cai = x.__cuda_array_interface__
    assert cai["stream"] is None, "no queued work: the consumer need not synchronize"
    assert cai is not x.__cuda_array_interface__, "a dict of the consumer's own on each access"


@gpu
def test_to_numba_is_one_view_made_ready_on_each_call():
    numba_cuda = import_or_skip("numba.cuda")
    n = 1 << 24
    x = rs.empty(n, device="cuda:0")
    v = x.to_numba()
    assert v is rs.to_numba(x), "made once per Array"
    assert v.__cuda_array_interface__["data"][0] == x.data_ptr and v.shape == (n,) and v.dtype == np.float32
    ref = np.empty(n, np.float32)
    rs.random.fill_uniform(ref, seed=39)
    for seed in range(30, 40):
        rs.random.fill_uniform(x, seed=seed)
    assert x.to_numba() is v
    assert x.__cuda_array_interface__["stream"] is None, "to_numba returned with the fills finished"
    assert np.array_equal(v.copy_to_host(stream=numba_cuda.stream()), ref)
    # A write through Numba is seen by resident; the view keeps the memory after the Array is gone.
    v.copy_to_device(np.arange(n, dtype=np.float32))
    numba_cuda.synchronize()
    assert np.array_equal(x.to_host(), np.arange(n, dtype=np.float32))
    y = rs.to_device(np.arange(1000, dtype=np.float64), device="cuda:0")
    w = y.to_numba()
    del x, v, y
    gc.collect()
    assert np.array_equal(w.copy_to_host(), np.arange(1000, dtype=np.float64))
    # Numba's own route agrees on the memory.
    z = rs.to_device(np.ones(10, dtype=np.float32), device="cuda:0")
    assert numba_cuda.as_cuda_array(z).__cuda_array_interface__["data"][0] == z.data_ptr
    # Inside a capture nothing has run yet: handing the array over is refused.
    z.to_numba()
    with pytest.raises(rs.InvalidArgument, match="during a capture"):
        rs.capture(lambda: z.to_numba(), device="cuda:0")


# ---- run-time programs: one fused kernel over any library's array --------------------------------

SEED = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)


def seed_reference(x):
    v = x.astype(np.float64) * 1.5 + 0.5
    return 0.5 * np.sin(np.sqrt(v * v + 1.0))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float64, 1e-14)])
def test_program_in_place_and_out_of_place_match_fp64(dtype, tol):
    x = np.random.default_rng().random(100003).astype(dtype)
    ref = seed_reference(x)
    y = np.full_like(x, -12345.0)
    assert SEED(x, out=y) is y
    assert np.max(np.abs(y - ref)) <= tol
    # The sum adds the terms y holds (>= 0.39 each; its kernel may round a term once more), in dtype as
    # the C++ pipeline does. A float32 fold's bound sees one term go missing over 2048 terms (checked
    # on a prefix that long); a float64 fold over all of them.
    m = 2048 if dtype == np.float32 else x.size
    terms = y[:m].astype(np.float64)
    abs_sum = float(np.abs(terms).sum())
    tol = sum_tolerance(m, abs_sum, dtype, float(np.finfo(dtype).eps) / 2 * abs_sum)
    got = SEED.sum(np.ascontiguousarray(x[:m]))
    ok, why = sum_matches(got, math.fsum(terms), tol, 0.39)
    assert ok, why
    for k in (0, m // 2, m - 1):  # the check can fail: a term dropped or doubled in the reference
        for times in (0.0, 2.0):
            assert not sum_matches(got, math.fsum(terms) + (times - 1) * terms[k], tol, 0.39)[0], (k, times)
    a = rs.to_device(x, device="cpu")
    SEED(a)  # resident's own array, in place
    assert np.max(np.abs(a.to_host() - ref)) <= tol


def test_program_names_and_errors():
    assert SEED.name == "affine(1.5, 0.5) | square | add(1) | sqrt | sin | mul(0.5)"
    assert rs.program([rs.op.parse(o.name) for o in SEED.ops]).name == SEED.name
    with pytest.raises(rs.InvalidArgument, match="the operations are"):
        rs.op.parse("sqrtt")
    p = rs.program()
    for _ in range(16):
        p = p | rs.op.neg()
    with pytest.raises(rs.InvalidArgument, match="more than 16"):
        p | rs.op.neg()
    with pytest.raises(rs.InvalidArgument, match="float32 or float64"):
        SEED(np.zeros(3, np.int32))
    with pytest.raises(rs.InvalidArgument, match="input holds float32, the output float64"):
        SEED(np.zeros(3, np.float32), out=np.zeros(3, np.float64))
    with pytest.raises(rs.ShapeMismatch):
        SEED(np.zeros(3, np.float32), out=np.zeros(4, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_operation_matches_numpy_in_float64(dtype):
    # Each operation alone over every element, against NumPy in float64: within 4 units in the last
    # place of dtype (pow 8: its libraries allow more), relative to the value.
    rng = np.random.default_rng()
    # |x| in [0.25, 3.25), either sign; log, rsqrt and pow take |x|.
    x = ((rng.random(10007) * 3.0 + 0.25) * rng.choice([-1.0, 1.0], 10007)).astype(dtype)
    pos = np.abs(x).astype(np.float64)
    xs = x.astype(np.float64)
    cases = [
        (rs.op.rsqrt(), pos, 1.0 / np.sqrt(pos), 4),
        (rs.op.exp(), xs, np.exp(xs), 4),
        (rs.op.log(), pos, np.log(pos), 4),
        (rs.op.cos(), xs, np.cos(xs), 4),
        (rs.op.tanh(), xs, np.tanh(xs), 4),
        (rs.op.abs(), xs, np.abs(xs), 0),
        (rs.op.recip(), xs, 1.0 / xs, 4),
        (rs.op.minimum(1.0), xs, np.minimum(xs, 1.0), 0),
        (rs.op.maximum(1.0), xs, np.maximum(xs, 1.0), 0),
        (rs.op.pow(1.5), pos, np.power(pos, 1.5), 8),
    ]
    eps = float(np.finfo(dtype).eps)
    for o, inp, ref, ulps in cases:
        a = inp.astype(dtype)
        out = np.full_like(a, -12345.0)
        rs.program([o])(a, out=out)
        err = np.abs(out.astype(np.float64) - ref)
        # cos near its zeros: the ulps of the argument's size (its range reduction), not of the value
        scale = np.maximum(np.abs(ref), 1.0) if o.name == "cos" else np.abs(ref)
        bound = ulps * eps * scale
        bad = np.flatnonzero(~(err <= bound))
        assert bad.size == 0, f"{o.name}: {bad.size} elements off, the first at {bad[0]}: {out[bad[0]]} vs {ref[bad[0]]}"


@gpu
def test_program_on_torch_and_cupy_is_one_kernel():
    torch = import_or_skip("torch")
    t = torch.rand(1 << 20, device="cuda")
    ref = seed_reference(t.cpu().numpy())
    before = rs.ledger()["cuda:0"]["kernels"]
    SEED(t)
    assert rs.ledger()["cuda:0"]["kernels"] - before == 1
    assert np.max(np.abs(t.cpu().numpy() - ref)) <= 1e-6
    cp = import_or_skip("cupy")
    c = cp.random.random(1 << 20, dtype=cp.float64)
    ref = seed_reference(cp.asnumpy(c))
    SEED(c)
    assert np.max(np.abs(cp.asnumpy(c) - ref)) <= 1e-14


# ---- matmul on any library's 2-D arrays -------------------------------------------------------------

@pytest.mark.parametrize("algo", ["auto", "naive", "blocked", "vendor"])
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_matmul_matches_fp64_on_the_cpu(algo, dtype, tol):
    rng = np.random.default_rng()
    for m, k, n in [(1, 1, 1), (37, 5, 11), (64, 65, 63)]:
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + 1e-300
        c = np.from_dlpack(rs.matmul(a, b, algo=algo))
        assert np.max(np.abs(c - ref) / scale) <= tol
        out = np.full((m, n), 3.0, dtype=dtype)  # alpha and beta into another library's array
        assert rs.matmul(a, b, out=out, algo=algo, alpha=2.0, beta=0.5) is out
        assert np.max(np.abs(out - (2 * ref + 1.5)) / (2 * scale + 1.5)) <= tol


def test_matmul_bad_input_is_typed():
    a, b = np.ones((4, 5), np.float32), np.ones((5, 3), np.float32)
    with pytest.raises(rs.ShapeMismatch, match="columns must equal"):
        rs.matmul(a, a)
    with pytest.raises(rs.ShapeMismatch, match="2-D"):
        rs.matmul(a[0], b)
    with pytest.raises(rs.ShapeMismatch):
        rs.matmul(a, b, out=np.zeros((4, 4), np.float32))
    with pytest.raises(rs.InvalidArgument, match="float32, B float64"):
        rs.matmul(a, b.astype(np.float64))
    with pytest.raises(rs.InvalidArgument, match="does not run on cpu"):
        rs.matmul(a, b, algo="tuned")
    with pytest.raises(rs.InvalidArgument, match="unknown matmul algorithm"):
        rs.matmul(a, b, algo="fastest")
    with pytest.raises(rs.InvalidArgument, match="beta"):
        rs.matmul(a, b, beta=1.0)
    with pytest.raises(rs.InvalidArgument, match="float32 or float64"):
        rs.matmul(a.astype(np.int32), b.astype(np.int32))


@gpu
def test_matmul_on_torch_tensors():
    torch = import_or_skip("torch")
    a = torch.randn(300, 129, device="cuda")
    b = torch.randn(129, 257, device="cuda")
    ref = a.double().cpu().numpy() @ b.double().cpu().numpy()
    scale = np.abs(a.double().cpu().numpy()) @ np.abs(b.double().cpu().numpy())
    for algo in ("naive", "shared", "tuned", "vendor"):
        out = torch.full((300, 257), float("nan"), device="cuda")
        rs.matmul(a, b, out=out, algo=algo)
        assert np.max(np.abs(out.cpu().numpy() - ref) / scale) <= 1e-5, algo
