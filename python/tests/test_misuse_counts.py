"""Counts, sizes, seeds and offsets out of range: a typed resident error naming the parameter, never a
TypeError from the binding layer, a wrapped value or an exception of another library."""
import numpy as np
import pytest

import resident as rs

TOO_BIG = (2**64, 2**70, -(2**70))


@pytest.mark.parametrize("fill", ["fill_uniform", "fill_normal"])
@pytest.mark.parametrize("param", ["seed", "offset"])
@pytest.mark.parametrize("value", (-1,) + TOO_BIG)
def test_seeds_and_offsets_out_of_range_are_invalid_arguments(fill, param, value):
    a = rs.empty(8, device="cpu")
    rs.random.fill_uniform(a, 5)
    before = a.to_host().copy()
    args = {"seed": 1, "offset": 0}
    args[param] = value
    with pytest.raises(rs.InvalidArgument, match=param):
        getattr(rs.random, fill)(a, args["seed"], args["offset"])
    np.testing.assert_array_equal(a.to_host(), before)  # nothing written


def test_seeds_take_any_integer_in_range():
    a, b = rs.empty(16, device="cpu"), rs.empty(16, device="cpu")
    rs.random.fill_uniform(a, 2**64 - 1, offset=np.uint64(2**63))
    rs.random.fill_uniform(b, np.uint64(2**64 - 1), offset=2**63)
    np.testing.assert_array_equal(a.to_host(), b.to_host())
    with pytest.raises(TypeError):  # a float is no seed: the type is refused, not truncated
        rs.random.fill_uniform(a, 1.5)


@pytest.mark.parametrize("key,value", [("chunk", -1), ("chunk", 2**64), ("depth", -1), ("depth", 17),
                                       ("depth", 2**40), ("chunk", 1.5)])
def test_stream_chunk_and_depth_out_of_range_are_invalid_arguments(key, value):
    x = np.ones(64, np.float32)
    out = np.full_like(x, 7)
    with pytest.raises(rs.InvalidArgument, match=key):
        rs.stream(rs.op.affine(2.0, 1.0), x, out, device="cpu", **{key: value})
    assert (out == 7).all()


@pytest.mark.parametrize("n", [-1, 2**64, 2**63])
def test_pinned_empty_out_of_range(n):
    with pytest.raises(rs.InvalidArgument):
        rs.streaming.pinned_empty(n)


@pytest.mark.parametrize("streams", [0, -1, 2**31, 2**40])
def test_flow_streams_out_of_range(streams):
    with pytest.raises(rs.InvalidArgument, match="streams"):
        rs.Flow(device="cpu", streams=streams)


@pytest.mark.parametrize("shape", [-1, 2**64, (2**40, 2**40), (-1, 4)])
def test_empty_shapes_out_of_range(shape):
    with pytest.raises(rs.InvalidArgument):
        rs.empty(shape, device="cpu")


@pytest.mark.parametrize("args", [(-8, 2, 0), (8, 0, 0), (8, 2, 2), (8, 2, -1), (8.0, 2, 0), (True, 2, 0)])
def test_extent_of_refuses_what_names_no_shard(args):
    with pytest.raises(rs.InvalidArgument):
        rs.dist.extent_of(*args)


def test_extent_of_cuts_like_the_cpp_sharded_array():
    assert [rs.dist.extent_of(10, 3, r) for r in range(3)] == [(0, 4), (4, 3), (7, 3)]
    assert [rs.dist.extent_of(2, 3, r) for r in range(3)] == [(0, 1), (1, 1), (2, 0)]
