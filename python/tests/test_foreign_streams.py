"""The transfers, stream objects and integer fills on other libraries' arrays, on those libraries'
non-default streams: each call is ordered after the work already queued there and before the work
queued after it, with no host wait in between. Every check puts a long sleep kernel on the stream
first, so a call that went on another stream reads or writes before the values it must follow."""
import numpy as np
import pytest

import resident as rs
from _support import gpu, import_or_skip

N = 1 << 20
SLEEP_CYCLES = 200_000_000  # about 0.1 s at the H200's clock: far longer than any call here


def _torch():
    torch = import_or_skip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


def _cupy_spin(cp):
    """A one-thread kernel that spins SLEEP_CYCLES clocks on CuPy's current stream."""
    cp.RawKernel(r'''
    extern "C" __global__ void spin(long long cycles) {
      long long t = clock64();
      while (clock64() - t < cycles) {}
    }''', "spin")((1,), (1,), (np.int64(SLEEP_CYCLES),))


@gpu
@pytest.mark.parametrize("blocking", [True, False])
def test_copy_between_torch_tensors_follows_torchs_current_stream(blocking):
    torch = _torch()
    a = torch.full((N,), -1.0, device="cuda")
    b = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        a.fill_(3.0)                                  # queued behind the sleep
        (rs.copy if blocking else rs.copy_async)(a, b)
        total = b.sum()                               # torch on s, right after: no synchronization
    s.synchronize()
    assert float(total) == 3.0 * N
    assert bool((b == 3.0).all())


@gpu
def test_an_upload_from_pinned_memory_lands_after_torchs_earlier_write():
    torch = _torch()
    ref = (np.arange(N, dtype=np.float32) * 0.5 - 7.0)
    p = rs.streaming.pinned_empty(N, "float32")
    p[:] = ref
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        t.fill_(99.0)                                 # a copy on another stream would land before this
        rs.copy_async(p, t)
        doubled = t * 2
    s.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), ref)
    np.testing.assert_array_equal(doubled.cpu().numpy(), 2 * ref)


@gpu
def test_a_download_into_numpy_waits_for_torchs_stream():
    torch = _torch()
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    out = np.full(N, -1.0, np.float32)
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        t.fill_(5.0)
        rs.copy(t, out)                               # blocking: returns with the values in out
    assert (out == 5.0).all()


@gpu
def test_a_download_of_a_cupy_array_waits_for_cupys_current_stream():
    cp = import_or_skip("cupy")
    x = cp.zeros(N, cp.float32)
    cp.cuda.runtime.deviceSynchronize()
    s = cp.cuda.Stream(non_blocking=True)
    out = np.full(N, -1.0, np.float32)
    with s:
        _cupy_spin(cp)
        x.fill(7.0)
        rs.copy(x, out)
        y = rs.empty(N, "float32", "cuda:0")
        rs.copy_async(x, y)                           # device to device on cupy's stream
        back = np.empty(N, np.float32)
        y.to_host(out=back)
    assert (out == 7.0).all() and (back == 7.0).all()


@gpu
def test_a_resident_stream_and_its_events_order_torch_work():
    torch = _torch()
    rs_s = rs.Stream("cuda:0")
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    on_rs = torch.cuda.ExternalStream(rs_s.handle)
    with torch.cuda.stream(on_rs):
        torch.cuda._sleep(SLEEP_CYCLES)
        t.fill_(2.0)
    rs.op.mul(3.0)(t, stream=rs_s)                    # after the fill: 6
    done = rs_s.record()
    later = torch.cuda.Stream()
    done.wait_for(later)                              # later waits on the device, not the host
    with torch.cuda.stream(later):
        seen = t + 0.0
    later.synchronize()
    assert bool((seen == 6.0).all())

    # And the other way: a resident stream waits for torch's stream.
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        torch.cuda._sleep(SLEEP_CYCLES)
        t.fill_(-4.0)
    rs_s.wait_for(other)
    rs.op.add(1.0)(t, stream=rs_s)
    rs_s.synchronize()
    assert bool((t == -3.0).all())


@gpu
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_integers_filled_into_another_librarys_array_on_its_stream_match_the_cpu(lib):
    low = -5 if lib == "torch" else 3                 # torch int32, cupy uint32
    ref = rs.empty(N, "int32" if lib == "torch" else "uint32", "cpu")
    rs.random.fill_integers(ref, 11, low, 1000)
    if lib == "torch":
        torch = _torch()
        t = torch.zeros(N, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(SLEEP_CYCLES)
            t.fill_(1)                                # a fill on another stream would be overwritten
            rs.random.fill_integers(t, 11, low, 1000)
        s.synchronize()
        got = t.cpu().numpy()
    else:
        cp = import_or_skip("cupy")
        t = cp.zeros(N, cp.uint32)
        cp.cuda.runtime.deviceSynchronize()
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            _cupy_spin(cp)
            t.fill(1)
            rs.random.fill_integers(t, 11, low, 1000)
        s.synchronize()
        got = cp.asnumpy(t)
    np.testing.assert_array_equal(got, ref.to_host())


@gpu
def test_a_scan_of_a_torch_tensor_follows_torchs_current_stream():
    torch = _torch()
    t = torch.zeros(N, dtype=torch.int32, device="cuda")
    out = torch.full((N,), -1, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)
        t.fill_(2)
        rs.cumsum(t, out)
        last = out[-1].clone()                        # torch on s, right after: no synchronization
        made = rs.cummax(t)                           # a new resident array, after the fill
    s.synchronize()
    assert int(last) == 2 * N
    assert torch.equal(out, 2 * torch.arange(1, N + 1, dtype=torch.int64, device="cuda"))
    assert (made.to_host() == 2).all()


@gpu
def test_a_tensor_written_on_its_stream_right_after_a_scan_into_a_new_array_was_read_first():
    torch = _torch()
    t = torch.full((N,), 3, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP_CYCLES)               # the scan, on the new array's stream, waits for this
        made = rs.cumsum(t)
        t.fill_(-1)                                   # on s: must wait for the scan's read of t
    s.synchronize()
    rs.synchronize("cuda:0")
    np.testing.assert_array_equal(made.to_host(), 3 * np.arange(1, N + 1, dtype=np.int64))


@gpu
def test_the_pool_counts_and_limits_gpu_arrays():
    dev = "cuda:0"
    try:
        rs.trim_pool(dev)
        before = rs.pool_stats(dev)
        x = rs.empty(1 << 24, "float32", dev)
        assert rs.pool_stats(dev).bytes_in_use >= before.bytes_in_use + (4 << 24)
        rs.set_pool_limit(rs.pool_stats(dev).bytes_in_use + (1 << 20), dev)
        with pytest.raises(rs.OutOfMemory) as e:
            rs.empty(1 << 26, "float32", dev)
        assert e.value.requested_bytes >= 4 << 26
        del x
        rs.clear_pool_limit(dev)
        y = rs.empty(1 << 26, "float32", dev)         # usable again after the refusal
        rs.random.fill_uniform(y, 1)
        assert 0.0 <= rs.min(y) and rs.max(y) < 1.0
    finally:
        rs.clear_pool_limit(dev)


@gpu
def test_an_array_taken_in_on_a_resident_stream_keeps_that_stream():
    torch = _torch()
    import gc
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    s = rs.Stream("cuda:0")
    x = rs.from_dlpack(t, stream=s)
    handle = s.handle
    del s
    gc.collect()
    others = [rs.Stream("cuda:0") for _ in range(8)]   # a destroyed handle could be handed out again here
    assert x.stream == handle
    rs.op.add(2.0)(x)                                   # on the kept stream, valid after the Stream object went
    rs.synchronize("cuda:0")
    assert bool((t == 2.0).all()) and len(others) == 8
