"""Counts, sizes, shapes, seeds and offsets: each read as NumPy reads it (a NumPy integer, a 0-d or 1-d
integer array, a sequence by its len), and out of range or of the wrong kind a typed resident error
naming the parameter, never a TypeError from the binding layer, a wrapped value or an exception of
another library; arrays of two shapes in one element-wise call are refused, a 1-D array of the same
count standing for any shape."""
import numpy as np
import pytest

import resident as rs
from _support import DEVICES, needs_numba


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


def test_pinned_empty_takes_numpy_integers_and_refuses_other_shapes_typed():
    assert rs.streaming.pinned_empty(np.int64(3)).shape == (3,)
    assert rs.streaming.pinned_empty((np.int32(2), 3)).shape == (2, 3)
    for bad in (2.5, None, "3", True, (2, 1.5)):
        with pytest.raises(rs.InvalidType):
            rs.streaming.pinned_empty(bad)
    with pytest.raises(rs.InvalidType):
        rs.streaming.pinned_empty(3, dtype="bogus")
    with pytest.raises(rs.InvalidArgument):
        rs.streaming.pinned_empty(-1)


def test_pinned_empty_reads_shapes_as_numpy_does():
    assert rs.streaming.pinned_empty(np.array(3)).shape == (3,)
    for bad in (b"3", {2: 0}):
        with pytest.raises(rs.InvalidType):
            rs.streaming.pinned_empty(bad)
    with pytest.raises(rs.InvalidArgument, match="byte order"):
        rs.streaming.pinned_empty(3, ">f4")


@pytest.mark.parametrize("streams", [0, -1, 2**31, 2**40])
def test_flow_streams_out_of_range(streams):
    with pytest.raises(rs.InvalidArgument, match="streams"):
        rs.Flow(device="cpu", streams=streams)


@pytest.mark.parametrize("shape", [-1, 2**64, (2**40, 2**40), (-1, 4)])
def test_empty_shapes_out_of_range(shape):
    with pytest.raises(rs.InvalidArgument):
        rs.empty(shape, device="cpu")


def test_a_numpy_integer_array_is_a_shape_as_numpy_reads_it():
    assert rs.empty(np.array([2, 3]), device="cpu").shape == (2, 3)
    assert rs.empty(np.array(4), device="cpu").shape == (4,)
    assert rs.empty(np.int64(5), device="cpu").shape == (5,)
    assert rs.streaming.pinned_empty(np.array([2, 3])).shape == (2, 3)


def test_shapes_are_read_by_len_and_capped_and_bool_is_no_shape():
    class Endless:
        def __len__(self):
            raise RuntimeError("no length")

        def __getitem__(self, i):
            return 2

    with pytest.raises((rs.InvalidType, rs.InvalidArgument), match="no length"):
        rs.empty(Endless())

    class Long:
        def __len__(self):
            return 10**6

        def __getitem__(self, i):
            return 1

    with pytest.raises(rs.InvalidArgument, match="dimensions"):
        rs.empty(Long())
    with pytest.raises((rs.InvalidType, rs.InvalidArgument)):
        rs.empty(True)
    with pytest.raises((rs.InvalidType, rs.InvalidArgument)):
        rs.empty((2, False))
    assert rs.empty([2, 3]).shape == (2, 3) and rs.empty(np.int64(4)).shape == (4,)
    assert rs.empty((1,) * 32).shape == (1,) * 32


@needs_numba
@pytest.mark.parametrize("device", DEVICES)
def test_arrays_of_two_shapes_in_one_element_wise_call_are_refused(device):
    # A (2, 3) array beside a (3, 2) one paired elements NumPy refuses to pair; a 1-D array of the same
    # count stands for any shape (its elements in C order).
    a = rs.to_device(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    b = rs.to_device(np.arange(6, dtype=np.float32).reshape(3, 2), device=device)
    flat = rs.to_device(np.arange(6, dtype=np.float32), device=device)
    add = rs.stage(lambda x, y: x + y)
    for call in (lambda: add(a, b, out=rs.empty((2, 3), device=device)),
                 lambda: add(a, b, out=rs.empty(6, device=device)),
                 lambda: rs.op.sqrt()(a, out=rs.empty((3, 2), device=device)),
                 lambda: (add | rs.jit.sum())(a, b),
                 lambda: rs.stream(add, [a.to_host(), b.to_host()], out=np.empty((2, 3), np.float32), device=device)):
        with pytest.raises(rs.ShapeMismatch, match=r"shapes? \((2, 3|3, 2)\) and"):
            call()
    np.testing.assert_array_equal(a.to_host(), np.arange(6, dtype=np.float32).reshape(2, 3))  # untouched
    got = add(a, flat, out=rs.empty(6, device=device)).to_host()
    np.testing.assert_array_equal(got, 2 * np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(rs.op.sqrt()(a, out=rs.empty(6, device=device)).to_host(),
                                  np.sqrt(np.arange(6, dtype=np.float32)))


@pytest.mark.parametrize("args", [(-8, 2, 0), (8, 0, 0), (8, 2, 2), (8, 2, -1), (8.0, 2, 0), (True, 2, 0)])
def test_extent_of_refuses_what_names_no_shard(args):
    with pytest.raises(rs.InvalidArgument):
        rs.dist.extent_of(*args)


def test_extent_of_cuts_like_the_cpp_sharded_array():
    assert [rs.dist.extent_of(10, 3, r) for r in range(3)] == [(0, 4), (4, 3), (7, 3)]
    assert [rs.dist.extent_of(2, 3, r) for r in range(3)] == [(0, 1), (1, 1), (2, 0)]


def test_a_numpy_integer_is_a_size_for_shard():
    s = rs.dist.shard(np.int64(10), ["cpu"] * 2)
    assert s.size == 10 and s.dtype == "float32"
    assert rs.dist.shard(10, ["cpu"], dtype=np.float64).dtype == "float64"
    with pytest.raises(rs.InvalidType):
        rs.dist.shard(10, ["cpu"], dtype="no such type")


def test_a_zero_d_array_of_devices_is_a_count():
    assert len(rs.dist.shard(np.arange(4, dtype=np.float32), np.array(2)).shards) == 2
    with pytest.raises(rs.InvalidType):
        rs.dist.shard(np.ones(4, np.float32), np.array(2.5))
