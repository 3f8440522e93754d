"""stream= on every launching call: what names a stream (the CUDA stream protocol, PyTorch, CuPy and
Numba streams, int handles), the errors for anything else, and on a GPU the ordering rule: work on
another library's array is queued on that library's current stream, with no host wait."""
import ctypes
import math
import time

import numpy as np
import pytest

import resident as rs
from _support import gpu, import_or_skip


class _Protocol:
    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        return self.value


class _TorchLike:
    cuda_stream = 0x7f00


class _CupyLike:
    ptr = 0x7f10


class _NumbaLike:
    handle = ctypes.c_void_p(0x7f20)


def test_every_kind_of_stream_names_its_handle():
    h = rs._core._stream_handle
    assert h(None) is None
    assert h(0) == 0 and h(1) == 1 and h(2) == 2 and h(0x1234) == 0x1234
    assert h(np.int64(7)) == 7
    assert h(_Protocol((0, 0x5678))) == 0x5678
    assert h(_TorchLike()) == 0x7f00 and h(_CupyLike()) == 0x7f10 and h(_NumbaLike()) == 0x7f20


def test_what_is_no_stream_is_a_typed_error():
    h = rs._core._stream_handle
    for bad in (True, 1.5, "1", object(), _Protocol(5), _Protocol((0,)), _Protocol((0, "x"))):
        with pytest.raises(rs.InvalidType):
            h(bad)
        with pytest.raises(TypeError):
            h(bad)
    with pytest.raises(rs.InvalidArgument, match="not a stream"):
        h(-3)


def test_a_cpu_array_takes_no_stream_and_none_is_the_default():
    x = np.ones(16, dtype=np.float32)
    for call in (lambda s: rs.sum(x, stream=s), lambda s: rs.random.fill_uniform(x, 1, stream=s),
                 lambda s: rs.op.sqrt()(x, stream=s), lambda s: rs.stage(lambda v: v + 1)(x, stream=s),
                 lambda s: (rs.op.add(1) | rs.op.sqrt()).sum(x, stream=s)):
        call(None)
        with pytest.raises(rs.InvalidArgument, match="takes no stream"):
            call(1)
        with pytest.raises(rs.InvalidType):
            call("default")
    a = rs.to_device(x, device="cpu", stream=None)
    g = rs.capture(lambda: None, device="cpu")
    for call in (lambda s: a.to_host(stream=s), lambda s: rs.to_device(x, device="cpu", stream=s),
                 lambda s: g.replay(stream=s)):
        call(None)
        with pytest.raises(rs.InvalidArgument, match="takes no stream"):
            call(1)
    rs.random.fill_uniform(x, 3)
    assert 0 <= rs.min(x) and rs.max(x) < 1  # usable after each refusal


@gpu
def test_torch_work_on_a_non_default_stream_sees_resident_results_without_a_host_wait():
    torch = import_or_skip("torch")
    n = 1 << 24
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.zeros(n, device="cuda")
        rs.random.fill_uniform(t, seed=5)           # queued on s, torch's current stream
        p = rs.op.affine(2.0, 1.0) | rs.op.sqrt()
        p(t)                                       # queued on s
        total = t.sum()                            # torch, on s, right after: no synchronization between
    u = torch.empty(n, device="cuda")
    rs.random.fill_uniform(u, seed=5, stream=s)
    with torch.cuda.stream(s):
        u = torch.sqrt(2 * u + 1)
    s.synchronize()
    assert torch.allclose(t, u) and abs(float(total) - float(u.sum())) < 1e-3 * n


@gpu
def test_a_call_on_a_large_torch_tensor_returns_before_its_kernel_ends():
    torch = import_or_skip("torch")
    t = torch.ones(1 << 26, device="cuda")
    p = rs.op.affine(1.0001, 0.5) | rs.op.sqrt() | rs.op.sin()
    p(t)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        p(t)
    t0 = time.perf_counter()
    p(t)
    host = time.perf_counter() - t0
    end.record()
    torch.cuda.synchronize()
    device_per_call = start.elapsed_time(end) / 21 / 1e3
    assert host < device_per_call, (host, device_per_call)


def _f1(v):
    return v * 1.5 + 0.5


def _seed(v):
    return math.sin(math.sqrt(_f1(v) * _f1(v) + 1.0)) * 0.5


@gpu
@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("way", ["op", "stage", "fuse"])
def test_a_call_into_another_librarys_output_returns_before_its_kernel_ends(lib, way):
    """x -> out=y on 2^26 floats of PyTorch or CuPy: queued on the library's current stream, no host wait
    (neither for the call's own kernel nor for the ones queued before it), and the values right."""
    m = import_or_skip(lib)
    n = 1 << 26
    if lib == "torch":
        x = m.rand(n, device="cuda")
        y = m.empty_like(x)
        event = lambda: m.cuda.Event(enable_timing=True)  # noqa: E731
        elapsed, sync, host = (lambda a, b: a.elapsed_time(b)), m.cuda.synchronize, (lambda a: a.cpu().numpy())
    else:
        x = m.random.random(n, dtype=m.float32)
        y = m.empty_like(x)
        event = m.cuda.Event
        elapsed, sync, host = m.cuda.get_elapsed_time, m.cuda.Device().synchronize, m.asnumpy
    f = {"op": rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5),
         "stage": rs.stage(_seed), "fuse": rs.fuse(_seed)}[way]
    f(x, out=y)
    sync()
    start, end = event(), event()
    start.record()
    for _ in range(20):
        f(x, out=y)
    t0 = time.perf_counter()
    f(x, out=y)
    took = time.perf_counter() - t0
    end.record()
    sync()
    per_call = elapsed(start, end) / 21 / 1e3
    assert took < per_call, (took, per_call)
    v = host(x).astype(np.float64)
    ref = np.sin(np.sqrt((v * 1.5 + 0.5) ** 2 + 1.0)) * 0.5
    assert np.max(np.abs(host(y) - ref)) < 1e-5


@gpu
def test_cupy_work_goes_on_cupys_current_stream():
    cp = import_or_skip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(1 << 22, dtype=cp.float32)
        rs.random.fill_uniform(x, seed=9)
        y = x * 2                                   # cupy on s, after resident's fill
    s.synchronize()
    assert float(cp.abs(y - 2 * x).max()) == 0 and float(x.min()) >= 0 and float(x.max()) > 0.5
