"""Reductions give the exact value, or one within a stated bound, on every route (rs.sum / min / max, chains
ending in rs.jit.sum / max / reduce, rs.stream's reduce=, rs.dist): integer reductions are Python ints and
sums wrap modulo 2^64 as NumPy's do (32-bit integers added in 64 bits, a sharded sum wrapping as the
values its work makes); float32 sums stay within a pairwise bound of the FP64 sum over 2^24 values and
over many streamed chunks, and past float32's range are inf without a warning; the least of infinities
is infinite, the least or greatest of no values is refused, and so is a reduction's start that a double
cannot hold."""
import numpy as np
import pytest

import resident as rs
from _support import needs_numba


U32 = 2.0 ** -24  # float32's unit roundoff


def test_integer_reductions_are_exact_python_ints():
    big = np.array([2**53 + 1], np.int64)
    assert rs.sum(big) == 2**53 + 1 and isinstance(rs.sum(big), int)
    assert rs.min(big) == 2**53 + 1 and rs.max(big) == 2**53 + 1
    top = np.array([2**64 - 1, 5], np.uint64)
    assert rs.max(top) == 2**64 - 1 and isinstance(rs.max(top), int)
    assert rs.min(np.array([-(2**63), 0], np.int64)) == -(2**63)
    assert rs.sum(np.array([2**62, 2**62 - 1, 1], np.int64)) == np.array([2**62, 2**62 - 1, 1], np.int64).sum()
    assert rs.sum(np.array([3, 4], np.int32)) == 7 and isinstance(rs.sum(np.array([3], np.int32)), int)
    # A sum wraps modulo 2^64 past the 64-bit range, as NumPy's does.
    wraps = np.array([2**63 - 1, 2], np.int64)
    assert rs.sum(wraps) == int(wraps.sum())
    assert isinstance(rs.sum(np.ones(3, np.float32)), float)


def test_a_float32_sum_is_the_same_float32_value_on_every_route():
    # Added in double, rounded once to float32: rs.sum gave the unrounded double (4.000000000931323, or
    # 1.2e39 past float32's range) where a chain's, a program's and a sharded sum gave 4.0 (inf).
    import warnings
    for values, want in (([1.0, 2.0**-30, 3.0], 4.0), ([3e38] * 4, np.inf), ([-3e38] * 4, -np.inf)):
        h = np.array(values, np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = {"rs.sum": rs.sum(h), "rs.sum on the device": rs.sum(rs.to_device(h)),
                   "rs.dist.sum": rs.dist.sum(rs.dist.shard(h, ["cpu", "cpu"])),
                   "a program's sum": rs.program([rs.op.add(0.0)]).sum(h)}
        assert all(v == want for v in got.values()), got
        assert all(isinstance(v, float) for v in got.values())


def test_a_sharded_integer_sum_wraps_as_the_whole_sum_does():
    h = np.full(4, 2**62, np.int64)
    assert rs.dist.sum(rs.dist.shard(h, ["cpu", "cpu"])) == rs.sum(h) == int(h.sum())
    u = np.full(4, 2**63, np.uint64)
    assert rs.dist.sum(rs.dist.shard(u, ["cpu", "cpu"])) == rs.sum(u) == int(u.sum())


@needs_numba
@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_a_sharded_sum_through_work_wraps_64_bit_integers(dtype):
    top = np.iinfo(dtype).max
    a = np.array([top, top, 5], dtype)
    s = rs.dist.shard(a, ["cpu"] * 3)
    want = int(a.sum())  # NumPy's wrapping sum
    assert rs.dist.sum(s) == want
    assert rs.dist.sum(s, lambda v: v) == want


def test_a_sharded_sum_wraps_as_the_values_the_work_makes():
    s = rs.dist.shard(np.array([-1, 0, 0], np.int64), ["cpu"] * 3)
    as_unsigned = rs.jit.map("unsigned long long f(long long v) { return v; }")
    assert rs.dist.sum(s, as_unsigned) == 2 ** 64 - 1 == (as_unsigned | rs.jit.sum())(np.array([-1, 0, 0], np.int64))
    s = rs.dist.shard(np.array([2 ** 63, 0, 0], np.uint64), ["cpu"] * 3)
    assert rs.dist.sum(s, rs.jit.map("long long f(unsigned long long v) { return v; }")) == -2 ** 63


@needs_numba
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_a_chain_sum_of_32_bit_integers_adds_in_64_bits(dtype):
    x = np.full(4, np.iinfo(dtype).max, dtype)
    exact = 4 * int(np.iinfo(dtype).max)
    assert (rs.stage(lambda v: v) | rs.jit.sum())(x) == exact
    assert rs.jit.sum()(x) == exact
    assert rs.stream(lambda v: v, x, reduce="sum") == exact
    assert rs.dist.sum(rs.dist.shard(x, ["cpu", "cpu"]), lambda v: v) == exact
    assert rs.jit.max()(x) == np.iinfo(dtype).max


@pytest.mark.parametrize("data", ["tenth", "spread"])
def test_float32_chain_sums_stay_within_a_pairwise_bound(data):
    # A fold of float32 lanes over millions of values in order erred by 2.5e-3 of the sum (and by the
    # chunk size when streamed); NumPy's pairwise sum by about 1e-7.
    n = 1 << 24
    x = np.full(n, 0.1, np.float32) if data == "tenth" else np.linspace(-2, 2, n, dtype=np.float32)
    want, bound = float(x.astype(np.float64).sum()), 40 * U32 * float(np.abs(x.astype(np.float64)).sum())
    got = {
        "chain": (rs.jit.map("float same(float v) { return v; }") | rs.jit.sum())(x),
        "program": (rs.op.mul(1.0) | rs.op.add(0.0)).sum(x),
        "stream": rs.stream(rs.op.mul(1.0) | rs.op.add(0.0), x, reduce="sum", progress=False),
        "stream, small chunks": rs.stream(rs.op.mul(1.0) | rs.op.add(0.0), x, reduce="sum", chunk=1 << 16,
                                          progress=False),
    }
    for how, v in got.items():
        assert abs(float(v) - want) <= bound, f"{how}: {v} against {want}"


def test_a_streamed_float32_sum_adds_many_chunks_partials_in_double():
    n = 1 << 22
    x = np.full(n, 0.1, np.float32)
    want = float(x.astype(np.float64).sum())
    got = rs.stream(rs.op.mul(1.0) | rs.op.add(0.0), x, reduce="sum", chunk=1024, progress=False)
    assert abs(got - want) <= 4 * U32 * want, got  # 646 units when the partials were added in float32


def test_a_float32_sum_past_its_range_is_inf_without_a_warning():
    import warnings
    x = rs.dist.shard(np.full(4, 3e38, np.float32), ["cpu", "cpu"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rs.dist.sum(x, rs.op.mul(1.0)) == float("inf")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_least_of_infinities_is_infinite(dtype):
    assert rs.min(np.full(3, np.inf, dtype)) == np.inf
    assert rs.max(np.full(3, -np.inf, dtype)) == -np.inf
    x = rs.dist.shard(np.full(4, np.inf, dtype), ["cpu", "cpu"])
    assert rs.dist.min(x) == np.inf and rs.dist.max(x) == np.inf


@pytest.mark.parametrize("what", ["min", "max"])
def test_the_least_or_greatest_of_no_values_is_refused_everywhere(what):
    empty = np.zeros(0, np.float32)
    with pytest.raises(rs.InvalidArgument):
        getattr(rs, what)(empty)
    with pytest.raises(rs.InvalidArgument, match=what):
        (rs.stage("float f(float v) { return v; }") | getattr(rs.jit, what)())(empty)
    with pytest.raises(rs.InvalidArgument, match=what):
        rs.stream(rs.op.mul(2.0), empty, reduce=what)
    with pytest.raises(rs.InvalidArgument, match=what):
        (rs.jit.uniform(1) | getattr(rs.jit, what)())(n=0)
    assert (rs.jit.uniform(1) | rs.jit.sum())(n=0) == 0.0  # a sum of nothing is 0
    assert rs.stream(rs.op.mul(2.0), empty, reduce="sum") == 0.0


def test_a_reductions_start_that_a_double_cannot_hold_is_refused():
    add = "long long add(long long a, long long b) { return a + b; }"
    for bad in (2 ** 53 + 1, 2 ** 64 - 1, 10 ** 400, np.int64(2 ** 53 + 1), np.uint64(2 ** 64 - 1)):
        with pytest.raises(rs.InvalidArgument, match="not a double exactly"):
            rs.jit.reduce(add, bad, "add")
    assert (rs.jit.reduce(add, 2 ** 53, "add"))(np.array([1], np.int64)) == 2 ** 53 + 1
