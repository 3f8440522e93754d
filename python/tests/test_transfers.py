"""Copies between existing arrays: Array.to_host(out=) and to_host_async into host memory the caller has,
resident.copy and copy_async between any two arrays (device to device, host to device and back), each
checked (element type, shape, writable C-contiguous destination, overlap) before any work."""
import numpy as np
import pytest

import resident as rs
from _support import gpu


def _values(shape, dtype=np.float64):
    return (np.arange(np.prod(shape), dtype=np.float64) * 0.75 - 3.0).astype(dtype).reshape(shape)


def _copies(device="cpu"):
    c = rs.ledger().get(device, {})
    return c.get("h2d_copies", 0) + c.get("d2h_copies", 0) + c.get("d2d_copies", 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64])
def test_to_host_into_an_existing_array_fills_it_and_returns_it(dtype):
    ref = _values((3, 5), dtype)
    x = rs.to_device(ref, device="cpu")
    out = np.full((3, 5), 7, dtype)
    assert x.to_host(out=out) is out
    np.testing.assert_array_equal(out, ref)
    before = _copies()
    out2 = np.zeros((3, 5), dtype)
    assert x.to_host_async(out2) is out2
    rs.synchronize("cpu")
    np.testing.assert_array_equal(out2, ref)
    assert _copies() == before + 1  # one counted transfer


def test_to_host_into_refuses_what_it_cannot_fill_before_writing():
    x = rs.to_device(_values((2, 3), np.float32), device="cpu")
    keep = np.full((2, 3), 9, np.float32)
    with pytest.raises(rs.ShapeMismatch):
        x.to_host(out=np.zeros((3, 2), np.float32))
    with pytest.raises(rs.InvalidArgument, match="element type"):
        x.to_host(out=np.zeros((2, 3), np.float64))
    with pytest.raises(rs.InvalidArgument, match="C-contiguous"):
        x.to_host(out=np.zeros((3, 2), np.float32).T)
    ro = keep.copy()
    ro.flags.writeable = False
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        x.to_host(out=ro)
    assert (ro == 9).all()
    with pytest.raises(rs.InvalidType):
        x.to_host(out=[0.0] * 6)
    with pytest.raises(rs.InvalidArgument, match="no stream"):
        x.to_host(1, out=keep)
    assert (keep == 9).all()
    # Into the array's own memory, shifted: refused rather than a memcpy over itself.
    h = np.arange(8.0)
    y = rs.from_dlpack(h[:4])
    with pytest.raises(rs.InvalidArgument, match="overlaps"):
        y.to_host(out=h[2:6])


def test_copy_between_existing_arrays_on_the_cpu():
    ref = _values((4, 3))
    a = rs.to_device(ref, device="cpu")
    b = rs.empty((4, 3), "float64", device="cpu")
    rs.copy(a, b)
    np.testing.assert_array_equal(b.to_host(), ref)
    h = np.zeros((4, 3))
    rs.copy(b, h)  # into a NumPy array
    np.testing.assert_array_equal(h, ref)
    c = rs.empty((4, 3), "float64", device="cpu")
    rs.copy(-h, c)  # from one
    np.testing.assert_array_equal(c.to_host(), -ref)
    rs.copy_async(h * 2, c)
    rs.synchronize("cpu")
    np.testing.assert_array_equal(c.to_host(), 2 * ref)
    rs.copy(c, c)  # onto itself: nothing to do
    np.testing.assert_array_equal(c.to_host(), 2 * ref)


def test_copy_checks_types_shapes_overlap_and_streams_before_any_work():
    a = rs.to_device(_values(6), device="cpu")
    with pytest.raises(rs.ShapeMismatch):
        rs.copy(a, np.zeros((2, 3)))
    with pytest.raises(rs.ShapeMismatch):
        rs.copy(a, np.zeros(5))
    with pytest.raises(rs.InvalidArgument, match="element type"):
        rs.copy(a, np.zeros(6, np.float32))
    ro = np.zeros(6)
    ro.flags.writeable = False
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.copy(a, ro)
    h = np.arange(10.0)
    with pytest.raises(rs.InvalidArgument, match="overlap"):
        rs.copy(h[0:5], h[2:7])
    np.testing.assert_array_equal(h, np.arange(10.0))
    with pytest.raises(rs.InvalidArgument, match="no stream"):
        rs.copy(a, np.zeros(6), stream=1)
    with pytest.raises(rs.InvalidType):
        rs.copy(a, None)
    with pytest.raises(rs.InvalidType):
        rs.copy(rs.dist.shard(np.zeros(6), ["cpu", "cpu"]), np.zeros(6))


def test_pinned_host_memory_takes_an_asynchronous_copy_both_ways():
    ref = _values(1000, np.float32)
    p = rs.streaming.pinned_empty(1000, "float32")
    p[:] = ref
    x = rs.empty(1000, "float32", device="cpu")
    rs.copy_async(p, x)
    back = rs.streaming.pinned_empty(1000, "float32")
    x.to_host_async(back)
    rs.synchronize("cpu")
    np.testing.assert_array_equal(back, ref)


@gpu
def test_copies_with_a_gpu_on_given_streams():
    ref = _values(1 << 16, np.float32)
    s = rs.Stream("cuda:0")
    x = rs.to_device(ref, device="cuda:0")
    y = rs.empty(1 << 16, "float32", device="cuda:0")
    rs.copy(x, y, stream=s)
    out = np.empty_like(ref)
    y.to_host(stream=s, out=out)
    np.testing.assert_array_equal(out, ref)
    p = rs.streaming.pinned_empty(1 << 16, "float32")
    p[:] = -ref
    rs.copy_async(p, y, stream=s)
    back = rs.streaming.pinned_empty(1 << 16, "float32")
    y.to_host_async(back, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back, -ref)
    with pytest.raises(rs.InvalidArgument, match="host memory"):
        x.to_host(out=y)


def test_a_round_trip_past_the_parallel_copys_pieces_keeps_every_element():
    # Host copies are split into MiB pieces over threads: a length of no whole MiB has a short last piece.
    values = np.arange((5 << 20) // 4 + 3, dtype=np.float32)
    np.testing.assert_array_equal(rs.to_device(values, device="cpu").to_host(), values)
