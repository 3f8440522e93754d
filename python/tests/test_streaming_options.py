"""resident.stream's out-of-core options that the C++ out_of_core_options has: host_threads (the
threads staging pageable memory on a GPU) and timeline (when each chunk crossed each stage)."""
import numpy as np
import pytest

import resident as rs
from _support import gpu


def _check_timeline(t, n, chunk, ordered):
    assert [c["index"] for c in t] == list(range(len(t)))
    assert [c["first"] for c in t] == list(range(0, n, chunk))
    assert sum(c["count"] for c in t) == n and all(0 < c["count"] <= chunk for c in t)
    for c in t:
        for stage in ("upload", "kernel", "download"):
            assert 0 <= c[f"{stage}_begin_ms"] <= c[f"{stage}_end_ms"]
        if ordered:  # the CPU runs a chunk's stages one after another
            assert c["upload_end_ms"] <= c["kernel_begin_ms"] and c["kernel_end_ms"] <= c["download_begin_ms"]


def test_a_timeline_has_one_entry_per_chunk_on_the_cpu():
    x = np.linspace(-1.0, 1.0, 1000)
    y = rs.stream(rs.op.mul(2.0), x, chunk=300, device="cpu", timeline=True)
    np.testing.assert_array_equal(y, 2.0 * x)
    s = rs.streaming.last_summary()
    assert s["chunks"] == 4 and len(s["timeline"]) == 4
    _check_timeline(s["timeline"], 1000, 300, ordered=True)
    v = rs.stream(lambda a: a * a, x, reduce="sum", chunk=256, device="cpu", timeline=True)
    assert v == pytest.approx(float(np.sum(x * x)), rel=1e-12)
    _check_timeline(rs.streaming.last_summary()["timeline"], 1000, 256, ordered=True)
    rs.stream(rs.op.mul(2.0), x, device="cpu")
    assert rs.streaming.last_summary()["timeline"] is None  # recorded only where asked for


def test_host_threads_are_taken_and_checked():
    x = np.arange(512, dtype=np.float32)
    np.testing.assert_array_equal(rs.stream(rs.op.add(1), x, device="cpu", host_threads=3), x + 1)
    assert rs.streaming.last_summary()["host_threads"] == 0  # the CPU stages nothing
    for bad in (257, -1):
        with pytest.raises(rs.InvalidArgument, match="host_threads"):
            rs.stream(rs.op.add(1), x, device="cpu", host_threads=bad)
    with pytest.raises(rs.InvalidType):
        rs.stream(rs.op.add(1), x, device="cpu", host_threads=1.5)
    with pytest.raises(rs.InvalidType):
        rs.stream(rs.op.add(1), x, device="cpu", timeline=1)


@gpu
def test_a_gpus_timeline_and_host_threads():
    x = np.random.default_rng(1).random(1 << 20)
    y = rs.stream(rs.op.mul(3.0), x, chunk=1 << 17, device="cuda:0", host_threads=2, timeline=True)
    np.testing.assert_array_equal(y, 3.0 * x)
    s = rs.streaming.last_summary()
    assert s["host_threads"] == 2 and not s["pinned_input"]
    _check_timeline(s["timeline"], 1 << 20, 1 << 17, ordered=False)
