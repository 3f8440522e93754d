"""rs.Stream and rs.Event: resident's own streams and events, usable as stream= wherever a call takes
one (the CUDA stream protocol); on the CPU valid objects whose handle is 0, where work runs as issued."""
import copy
import pickle
import time

import numpy as np
import pytest

import resident as rs
from _support import gpu


def test_a_cpu_stream_is_a_stream_of_handle_zero_that_every_call_takes():
    s = rs.Stream("cpu")
    assert s.handle == 0 and s.__cuda_stream__() == (0, 0) and s.device == "cpu"
    assert repr(s) == "resident.Stream(device=cpu, handle=0)"
    x = np.arange(8.0)
    assert rs.sum(x, stream=s) == 28.0
    y = np.zeros(8)
    rs.random.fill_uniform(y, 3, stream=s)
    ref = np.zeros(8)
    rs.random.fill_uniform(ref, 3)
    np.testing.assert_array_equal(y, ref)
    rs.op.sqrt()(x, stream=s)
    np.testing.assert_allclose(x, np.sqrt(np.arange(8.0)), rtol=1e-15)
    np.testing.assert_array_equal(rs.from_dlpack(x, stream=s).to_host(stream=s), x)
    s.synchronize()


def test_events_record_wait_and_time_on_the_cpu():
    s = rs.Stream("cpu")
    start = s.record()
    time.sleep(0.02)
    end = rs.Event("cpu")
    end.record(s)
    ms = start.elapsed_ms(end)
    assert 15.0 <= ms < 5000.0
    s.wait_for(start)
    s.wait_for(rs.Stream("cpu"))
    start.wait_for(s)
    end.synchronize()
    with pytest.raises(rs.InvalidArgument, match="never recorded"):
        rs.Event("cpu").elapsed_ms(end)


def test_misuse_is_typed():
    s, e = rs.Stream("cpu"), rs.Event("cpu")
    for bad in ((3,), ("cpu", 1), ()):
        if bad:
            with pytest.raises(rs.InvalidType):
                rs.Stream(*bad)
            with pytest.raises(rs.InvalidType):
                rs.Event(*bad)
    with pytest.raises(rs.InvalidArgument, match="unknown device"):
        rs.Stream("tpu")
    with pytest.raises(rs.InvalidType, match="stream="):
        s.wait_for("x")
    with pytest.raises(rs.InvalidArgument, match="takes no stream"):
        e.record(5)
    for f in (copy.copy, copy.deepcopy, pickle.dumps):
        for obj in (s, e):
            with pytest.raises(rs.InvalidType, match="not pickled or copied"):
                f(obj)


@gpu
def test_a_gpu_stream_orders_calls_and_its_events_time_them():
    s = rs.Stream("cuda:0")
    kind, handle = s.__cuda_stream__()
    assert kind == 0 and handle == s.handle and handle not in (0, 1, 2)
    x = rs.empty(1 << 20, "float32", "cuda:0")
    start = s.record()
    rs.random.fill_uniform(x, 5, stream=s)
    rs.op.mul(2.0)(x, stream=s)
    end = s.record()
    assert start.elapsed_ms(end) >= 0.0
    ref = rs.empty(1 << 20, "float32", "cpu")
    rs.random.fill_uniform(ref, 5)
    np.testing.assert_array_equal(x.to_host(), 2.0 * ref.to_host())
