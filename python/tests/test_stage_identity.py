"""A Python stage is compiled once per function and the values it takes: the same function made a stage in
a loop compiles once; a copy of a function (functools.wraps and update_wrapper copy its __dict__, where
resident keeps its compiled stages) or a function whose helpers differ only in a constant, in a nested
code object too, is a stage of its own; symbol names follow the values a function takes, so two such
stages link in one chain, and are the same from process to process."""
import functools
import types

import numpy as np
import pytest

import resident as rs
from _support import DEVICES, needs_numba


K = 2.0


def _times_k(v):
    return v * K


def _scaled(k):
    def deco(fn):
        @functools.wraps(fn)  # copies fn.__dict__, where resident keeps fn's compiled stages
        def w(v):
            return fn(v) * k
        return w
    return deco


@needs_numba
@pytest.mark.parametrize("device", DEVICES)
def test_a_function_copied_with_its_dict_compiles_its_own_stage(device):
    x = rs.to_device(np.ones(4, np.float32), device=device)
    assert rs.stage(_times_k)(x, out=rs.empty(4, device=device)).to_host()[0] == 2.0
    other = functools.update_wrapper(types.FunctionType(_times_k.__code__, {**_times_k.__globals__, "K": 3.0},
                                                        "_times_k"), _times_k)
    assert other(1.0) == 3.0
    assert rs.stage(other)(x, out=rs.empty(4, device=device)).to_host()[0] == 3.0
    assert rs.stage(_times_k)(x, out=rs.empty(4, device=device)).to_host()[0] == 2.0  # still its own
    w3, w5 = _scaled(3.0)(_times_k), _scaled(5.0)(_times_k)
    assert rs.fuse(w3)(x, out=rs.empty(4, device=device)).to_host()[0] == 6.0
    assert rs.fuse(w5)(x, out=rs.empty(4, device=device)).to_host()[0] == 10.0
    # One chain of both on a GPU links two functions of one code: their symbols must differ.
    both = rs.fuse(w3) | rs.fuse(w5)
    np.testing.assert_array_equal(both(x, out=rs.empty(4, device=device)).to_host(), np.full(4, 60.0, np.float32))


@needs_numba
def test_symbol_names_follow_the_values_a_function_takes_and_stay_from_process_to_process():
    from resident import jit
    w3, w3_again, w5 = _scaled(3.0)(_times_k), _scaled(3.0)(_times_k), _scaled(5.0)(_times_k)
    assert jit._PyStage(w3).abi_name == jit._PyStage(w3_again).abi_name
    assert jit._PyStage(w3).abi_name != jit._PyStage(w5).abi_name


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


@needs_numba
def test_a_stage_written_in_a_loop_compiles_once():
    def double(v):
        return v * 2

    x = np.ones(8, np.float32)
    assert rs.stage(double)._items[0][1] is rs.stage(double)._items[0][1]
    rs.stage(double)(x.copy())
    before = rs.jit.stats()["compiled"]
    for _ in range(20):
        rs.stage(double)(x.copy())
    assert rs.jit.stats()["compiled"] == before
