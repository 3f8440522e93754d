"""Misuse found by a tenth sweep: async and generator functions given as a flow stage or captured work
did nothing (their call runs none of the body); copy.copy of a profile shared its live collector; repr of
a closed Communicator raised; `del x[i]` leaked a bare AttributeError; two stages whose helpers differ
only in a constant shared one symbol name."""
import copy
import functools
import warnings

import numpy as np
import pytest

import resident as rs
from _support import needs_numba


async def _halve_async(x):
    rs.op.mul(0.5)(x)


def _halve_generator(x):
    yield rs.op.mul(0.5)(x)


async def _halve_async_generator(x):
    yield rs.op.mul(0.5)(x)


@pytest.mark.parametrize("make", [_halve_async, _halve_generator, _halve_async_generator],
                         ids=["async", "generator", "async generator"])
def test_async_and_generator_functions_are_refused_as_stages_and_captured_work(make):
    x = np.ones(4)
    f = rs.Flow(device="cpu")
    # inspect reads through a partial to the function it calls.
    for work in (functools.partial(make, x), make):
        with pytest.raises(rs.InvalidType, match="runs none of its body"):
            f.add("halve", work, writes=[x])
        with pytest.raises(rs.InvalidType, match="runs none of its body"):
            rs.capture(work, device="cpu")
    f.run()
    np.testing.assert_array_equal(x, np.ones(4))


class _AsyncCall:
    def __init__(self, x):
        self.x = x

    async def __call__(self):
        rs.op.mul(0.5)(self.x)


class _GeneratorCall:
    def __init__(self, x):
        self.x = x

    def __call__(self):
        return _halve_generator(self.x)


@pytest.mark.parametrize("cls", [_AsyncCall, _GeneratorCall])
def test_work_returning_an_unstarted_coroutine_or_generator_fails_its_stage(cls):
    x = np.ones(4)
    f = rs.Flow(device="cpu")
    f.add("halve", cls(x), writes=[x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed: no "never awaited" warning
        with pytest.raises(rs.StageError, match="unstarted"):
            f.run()
        g = rs.capture(cls(x), device="cpu")
        with pytest.raises(rs.StageError, match="unstarted"):
            g.replay()
    np.testing.assert_array_equal(x, np.ones(4))


def test_copy_of_a_started_profile_is_refused_and_of_an_unstarted_one_is_fresh():
    x = np.ones(8)
    with rs.profile() as p:
        with pytest.raises(rs.InvalidType, match="not pickled or copied"):
            copy.copy(p)
        rs.sum(x)
    assert len(p.rows) == 1  # p's collection ran to its own end
    with pytest.raises(rs.InvalidType):
        copy.copy(p)
    q = copy.copy(rs.profile())
    assert isinstance(q, rs.profile) and repr(q) == "resident.profile(not started)"
    with q:
        rs.sum(x)
    assert len(q.rows) == 1


def test_repr_of_a_closed_communicator_says_closed():
    c = rs.dist.Communicator(["cpu", "cpu"])
    assert not c.closed and "rank 0 of 2" in repr(c)
    c.close()
    assert c.closed and repr(c) == "resident.dist.Communicator(closed)"
    with pytest.raises(rs.InvalidArgument, match="closed"):
        c.size


def test_del_of_an_element_is_refused_as_indexing_is():
    x = rs.to_device(np.arange(4.0))
    s = rs.dist.shard(np.arange(4.0), ["cpu", "cpu"], dtype="float64")
    for a in (x, s):
        with pytest.raises(rs.InvalidType, match=r"del x\[i\]"):
            del a[0]
        with pytest.raises(rs.InvalidType, match=r"del x\[i\]"):
            del a[1:3]
    np.testing.assert_array_equal(x.to_host(), np.arange(4.0))
    np.testing.assert_array_equal(s.to_host(), np.arange(4.0))


_HELPED = "def helper(v):\n    return v + {c}\n\ndef st(v):\n    return helper(v) * 3.0\n"


@needs_numba
def test_stages_whose_helpers_differ_only_in_a_constant_are_two_functions():
    from resident.jit import _PyStage
    ns1, ns2 = {}, {}
    exec(_HELPED.format(c="1.0"), ns1)
    exec(_HELPED.format(c="2.0"), ns2)
    assert _PyStage(ns1["st"]).abi_name != _PyStage(ns2["st"]).abi_name
    # A nested code object's constant counts too.
    ns3, ns4 = {}, {}
    exec("def helper(v):\n    f = lambda u: u + 1.0\n    return f(v)\n\ndef st(v):\n    return helper(v)\n", ns3)
    exec("def helper(v):\n    f = lambda u: u + 2.0\n    return f(v)\n\ndef st(v):\n    return helper(v)\n", ns4)
    assert _PyStage(ns3["st"]).abi_name != _PyStage(ns4["st"]).abi_name
    # One chain of both: each its own helper, compared with NumPy float64.
    x = np.arange(6.0)
    (rs.stage(ns1["st"]) | rs.stage(ns2["st"]))(x)
    np.testing.assert_array_equal(x, ((np.arange(6.0) + 1.0) * 3.0 + 2.0) * 3.0)
