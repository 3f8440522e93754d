"""What a stage may call: plain functions reached through a module's attribute (helpers.func1(d), at any
depth, a package's submodule, a module a closure holds) and a stage or fused function (rs.stage(f),
rs.fuse(f)) called as a function compile along with it, under its float-literal rule; what Numba cannot
call (a class's attributes, a dict or tuple of functions, a functools.lru_cache or partial, a chain of
several stages or of C++ text) is a CompileError when the stage is defined, naming it, its file:line
and what to do, never Numba's own text."""
import functools
import types

import numpy as np
import pytest

import resident as rs
from _support import DEVICES, needs_numba

pytestmark = needs_numba

X = np.array([0.5, 1.0, 2.0, -3.0])


def _module(name, source, **names):
    """A module of its own globals made from source (as an imported helpers.py is)."""
    m = types.ModuleType(name)
    m.__dict__.update(names)
    exec(compile(source, f"<{name}>", "exec"), m.__dict__)  # noqa: S102 (the test's own text)
    return m


_leaf = _module("_leaf", "SCALE = 3.0\ndef g(d):\n    return d * SCALE + 0.25\n")
_middle = _module("_middle", "def f(d):\n    return leaf.g(d) - 1.0\n", leaf=_leaf)
_package = _module("_package", "")
_package.sub = _module("_package.sub", "def h(d):\n    return 2.0 * d\n")
# A package whose functions come from its __getattr__ (PEP 562), made at first use.
_lazy = _module("_lazy", "def __getattr__(name):\n    if name == 'tri':\n        return _tri\n    raise AttributeError(name)\n"
                "def _tri(d):\n    return 3.0 * d\n")
_raising = _module("_raising", "def r(d):\n    if d > 1.0:\n        raise ValueError('large')\n    return d\n")


def _with_module_in_closure():
    m = _middle

    def master(d):
        return m.f(d) + 1.0
    return master


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, want", [
    (lambda d: _leaf.g(d), X * 3.0 + 0.25),                      # Numba: "Unknown attribute 'g' of type Module"
    (lambda d: _middle.f(d), X * 3.0 + 0.25 - 1.0),              # a module's function calling another's
    (lambda d: _package.sub.h(d), 2.0 * X),                      # a package's submodule
    (_with_module_in_closure(), X * 3.0 + 0.25),                 # a module a closure holds
    (lambda d: _leaf.SCALE * d, 3.0 * X),                        # a module's constant, as before
    (lambda d: _lazy.tri(d), 3.0 * X),                           # a lazy attribute (__getattr__)
], ids=["module", "depth 2", "submodule", "closure", "constant", "lazy"])
def test_a_function_reached_through_a_module_attribute_compiles_along(device, fn, want):
    x = rs.to_device(X.copy(), device=device)
    np.testing.assert_array_equal(rs.fuse(fn)(x).to_host(), want)


def test_a_module_attributes_function_is_checked_as_a_direct_one_is():
    with pytest.raises(rs.CompileError, match="can raise"):
        rs.fuse(lambda d: _raising.r(d))


@rs.fuse
def _fused(v):
    return v + 1.0


@rs.stage
def _staged(v):
    return _fused(v) * 2.0  # a fused function called inside a stage


_with_a_stage = _module("_with_a_stage", "import resident as rs\nq = rs.fuse(lambda v: v * 10.0)\n")


def _with_stage_in_closure():
    inner = rs.stage(lambda v: v * 5.0)
    return lambda v: inner(v) - 1.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, want", [
    (lambda v: _fused(v) * 2.0, (X + 1.0) * 2.0),        # Numba: "Cannot determine Numba type of Chain"
    (lambda v: _staged(v) - 1.0, (X + 1.0) * 2.0 - 1.0),  # at depth 2
    (_with_stage_in_closure(), X * 5.0 - 1.0),
    (lambda v: _with_a_stage.q(v), X * 10.0),
], ids=["fused", "depth 2", "closure", "module"])
def test_a_stage_or_fused_function_called_inside_another_compiles_along(device, fn, want):
    x = rs.to_device(X.copy(), device=device)
    np.testing.assert_array_equal(rs.fuse(fn)(x).to_host(), want)
    np.testing.assert_array_equal(rs.stage(fn)(rs.to_device(X.copy(), device=device)).to_host(), want)


def test_a_called_stage_takes_the_callers_float_literals():
    inner = rs.stage(lambda d: d * 0.1 + 0.3)
    x = (np.random.default_rng(2).random(4099) * 6 - 3).astype(np.float32)
    got = rs.fuse(lambda d: inner(d))(x.copy())
    np.testing.assert_array_equal(got, x * np.float32(0.1) + np.float32(0.3))


class _Holder:
    K = 4.0

    @staticmethod
    def twice(v):
        return 2.0 * v


def _thrice(v):
    return 3.0 * v


_TABLE = {"thrice": _thrice}
_FUNCTIONS = (_thrice, _thrice)


@functools.lru_cache
def _cached(v):
    return 2.0 * v


_PARTIAL = functools.partial(lambda v, k: v * k, k=2.0)
_TWO_STAGES = rs.stage(lambda v: v + 1.0) | rs.stage(lambda v: v * 2.0)
_TEXT_STAGE = rs.stage("double f(double v) { return v + 1; }")


@pytest.mark.parametrize("fn, said", [
    (lambda v: _Holder.twice(v), "the class _Holder"),
    (lambda v: v * _Holder.K, "the class _Holder"),
    (lambda v: _TABLE["thrice"](v), "_TABLE, a dict of functions"),
    (lambda v: _FUNCTIONS[0](v), "_FUNCTIONS, a tuple of functions"),
    (lambda v: _cached(v), "_cached.__wrapped__"),
    (lambda v: _PARTIAL(v), "_PARTIAL, a functools.partial"),
    (lambda v: _TWO_STAGES(v), "compose with |"),
    (lambda v: _TEXT_STAGE(v), "compose with |"),
    (lambda v: _thrice(v) + _middle.f(_TABLE["thrice"](v)), "_TABLE, a dict of functions"),
], ids=["static method", "class constant", "dict", "tuple", "lru_cache", "partial", "chain", "C++ chain", "mixed"])
def test_a_callee_numba_cannot_call_is_refused_when_defined(fn, said):
    with pytest.raises(rs.CompileError, match=r"test_stage_callees\.py:\d+") as e:
        rs.fuse(fn)
    assert said in str(e.value)
    assert "Untyped global" not in str(e.value) and "Numba cannot compile" not in str(e.value)


def _calls_a_class_at_depth_2(v):
    return _calls_the_class(v) + 1.0


def _calls_the_class(v):
    return _Holder.twice(v)


def test_a_callee_numba_cannot_call_is_refused_at_any_depth():
    with pytest.raises(rs.CompileError, match="_calls_the_class names the class _Holder"):
        rs.stage(_calls_a_class_at_depth_2)
