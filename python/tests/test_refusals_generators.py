"""Generator chains (a chain rs.jit.uniform or rs.jit.normal starts makes its n values itself and reads no
array): composed wrongly, refused where composed; given arrays, an out= or a count or device the array
contradicts, a count that is no number, too large or missing, refused before anything is filled or any
work runs."""
import time

import numpy as np
import pytest

import resident as rs
from _support import needs_numba


def test_generator_chains_composed_wrongly_are_refused_where_composed():
    s = rs.jit.map("float f(float v) { return v + 1.0f; }")
    with pytest.raises(rs.InvalidArgument, match="a generator .* starts a chain; it cannot follow uniform"):
        rs.jit.uniform(1) | rs.jit.uniform(2)
    with pytest.raises(rs.InvalidArgument, match="starts a chain; it cannot follow"):
        s | rs.jit.normal(1)
    with pytest.raises(rs.InvalidArgument, match="sum ends in a reduction; nothing can follow it"):
        rs.jit.sum() | rs.jit.sum()
    with pytest.raises(rs.InvalidArgument, match="ends in a reduction"):
        rs.jit.sum() | s
    with pytest.raises(rs.InvalidArgument, match="n=-1 is negative"):
        (rs.jit.uniform(1) | rs.jit.sum())(n=-1)
    assert (rs.jit.uniform(1, low=1.0, high=1.0 + 2**-20) | rs.jit.sum())(n=4) == pytest.approx(4.0, rel=1e-5)


def test_a_generator_chain_given_two_arrays_is_refused_and_fills_neither():
    a, b = np.zeros(3, np.float32), np.zeros(5, np.float32)
    with pytest.raises(rs.InvalidArgument, match="fills one"):
        rs.jit.uniform(1)(a, b)
    assert not a.any() and not b.any()
    rs.jit.uniform(1)(a)
    assert a.all()


def test_a_generator_chains_reduction_given_an_array_is_refused():
    # It read no array and summed no values: 0.0 came back.
    with pytest.raises(rs.InvalidArgument, match="reads no array"):
        (rs.jit.uniform(1) | rs.jit.sum())(np.ones(10, np.float32))
    with pytest.raises(rs.InvalidArgument):
        rs.dist.sum(rs.dist.shard(np.ones(10, np.float32), ["cpu"] * 2), rs.jit.uniform(1))
    assert (rs.jit.uniform(1) | rs.jit.sum())(n=1000) > 0  # usable after


def test_a_generator_chains_reduction_given_out_is_refused():
    with pytest.raises(rs.InvalidArgument, match="reads no array"):
        (rs.jit.uniform(1) | rs.jit.sum())(out=np.ones(10, np.float32))


def test_a_generator_chains_reduction_without_a_count_is_refused():
    with pytest.raises(rs.InvalidArgument, match="count of values"):
        (rs.jit.uniform(1) | rs.jit.sum())()
    assert (rs.jit.uniform(1) | rs.jit.sum())(n=0) == 0.0


def test_a_generator_fill_refuses_a_count_or_device_the_array_contradicts():
    u = rs.jit.uniform(1)
    y = np.empty(2, np.float32)
    with pytest.raises(rs.InvalidArgument, match="n=1000"):
        u(out=y, n=1000)
    with pytest.raises(rs.InvalidArgument):
        u(out=y, device="bogus")
    u(out=y, n=2, device="cpu")
    assert ((0 <= y) & (y < 1)).all()


@pytest.mark.parametrize("call", [
    lambda a: rs.jit.uniform(1)(out=a, n=np.array([3, 3])),
    lambda a: (rs.jit.uniform(1) | rs.jit.sum())(n=np.array([3]), device="cpu"),
    lambda a: (rs.jit.uniform(1) | rs.jit.sum())(n=3.0, device="cpu"),
    lambda a: rs.jit.map("float f(float v) { return v; }")(a, n=np.array([1, 2])),
])
def test_a_count_that_is_no_number_is_invalid_type(call):
    a = np.zeros(3, np.float32)
    with pytest.raises(rs.InvalidType, match="n is a"):
        call(a)
    assert not a.any()


@needs_numba
def test_a_generated_count_is_checked_before_any_work():
    chain = rs.jit.uniform(1) | rs.jit.sum()
    start = time.monotonic()
    with pytest.raises(rs.InvalidArgument, match="largest size"):
        chain(n=2**64 - 1)
    with pytest.raises(rs.InvalidArgument):
        chain(n=-1)
    with pytest.raises(rs.InvalidType):
        chain(n=3.5)
    with pytest.raises(rs.InvalidType):
        chain(n=3, device=0)
    with pytest.raises(rs.InvalidArgument, match="input arrays"):
        rs.stage(lambda v: v)(np.ones(3, np.float32), n=2**70)
    assert time.monotonic() - start < 30, "refused before any work"
    assert chain(n=1000) == pytest.approx(500, abs=60)
