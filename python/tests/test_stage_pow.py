"""A float raised to an integer power in a Python stage gives NumPy's IEEE result (0.0 ** -2 is inf,
(-0.0) ** -3 is -inf) whichever way the stage is compiled: written out as C++ text, or Numba's own
function (where Numba's ``float ** int`` would raise ZeroDivisionError: resident/_ieee_pow.py), on the
CPU and on the GPU; the value's float type is kept, integer powers keep Numba's semantics, and the
user's own Numba functions are left as Numba compiles them."""
import math
from math import pow as pow_of_math

import numpy as np
import pytest

import resident as rs
from resident import jit as rs_jit

from _support import GPU, needs_numba

pytestmark = needs_numba

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])
BASES = [0.0, -0.0, 2.0, -3.0, 0.5]
EXPONENTS = [-3, -2, -1, 0, 1, 2]


def power_of(v, k):  # translated to C++ on the CPU (or Numba's function when the translation is off)
    return v ** k


def power_in_tuple(v, k):  # a tuple: not translated, Numba's function
    t = (v, k)
    return t[0] ** t[1]


def pow_called(v, k):
    t = (v, 1.0)
    return pow(t[0], k)


def power_in_place(v, k):
    t = (v, 1.0)
    x = t[0]
    x **= k
    return x


# Literal exponents, plain (translated) and in a tuple (Numba's function).
LITERAL = {-3: lambda v: v ** -3, -2: lambda v: v ** -2, -1: lambda v: v ** -1, 0: lambda v: v ** 0,
           1: lambda v: v ** 1, 2: lambda v: v ** 2}
LITERAL_IN_TUPLE = {-3: lambda v: (v, 1.0)[0] ** -3, -2: lambda v: (v, 1.0)[0] ** -2,
                    -1: lambda v: (v, 1.0)[0] ** -1, 0: lambda v: (v, 1.0)[0] ** 0,
                    1: lambda v: (v, 1.0)[0] ** 1, 2: lambda v: (v, 1.0)[0] ** 2}


K = -3  # a global exponent


def power_of_global(v):
    t = (v, 1.0)
    return t[0] ** K


def captured(k):
    """A stage whose exponent is an int of its closure."""
    def power_captured(v):
        t = (v, 1.0)
        return t[0] ** k
    return power_captured


def _grid(dtype):
    """Every base with every exponent: the values and the int64 exponents, zipped."""
    v = np.array([b for b in BASES for _ in EXPONENTS], dtype=dtype)
    k = np.array([e for _ in BASES for e in EXPONENTS], dtype=np.int64)
    return v, k


def _numpy(v, k):
    """NumPy's result in v's float type: each value to its power (a Python int, as NEP 50 keeps the type)."""
    with np.errstate(divide="ignore"):
        return np.array([x ** int(e) for x, e in zip(v, k)], dtype=v.dtype)


def _same(got, want):
    """Equal values of one dtype, the signs of zeros and infinities included."""
    return (got.dtype == want.dtype and np.array_equal(got, want) and
            np.array_equal(np.signbit(got), np.signbit(want)))


def _run(fn, arrays, device, inline=True):
    """fn as a stage over arrays on device (on the CPU translated to C++ or not, as inline says): its
    values, and whether the CPU's loop calls Numba's function rather than translated text."""
    saved = rs_jit._inline_cpu
    rs_jit._inline_cpu = inline
    try:
        chain = rs.stage(fn)
        ins = [rs.to_device(a, device=device) for a in arrays]
        out = rs.empty(arrays[0].size, dtype=str(arrays[0].dtype), device=device)
        chain(*ins, out=out)
        calls_numba = None
        if device == "cpu":
            source = chain.kernel_source([str(a.dtype) for a in arrays], str(arrays[0].dtype))
            calls_numba = "fns[" in source.split("rs_chain")[1]
        return np.asarray(out.to_host()), calls_numba
    finally:
        rs_jit._inline_cpu = saved


def _paths(device):
    return [True, False] if device == "cpu" else [True]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fn", [power_of, power_in_tuple, pow_called, power_in_place])
def test_a_float_to_a_run_time_int_power_is_numpys(fn, dtype, device):
    v, k = _grid(dtype)
    want = _numpy(v, k)
    for inline in _paths(device):
        got, calls_numba = _run(fn, [v, k], device, inline)
        assert _same(got, want), (fn.__name__, inline, got, want)
        if device == "cpu":
            assert calls_numba == (not inline or fn is not power_of), (fn.__name__, inline)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("e", EXPONENTS)
def test_a_float_to_a_literal_or_captured_int_power_is_numpys(e, dtype, device):
    v = np.array(BASES, dtype=dtype)
    want = _numpy(v, [e] * v.size)
    for fn, translated in ((LITERAL[e], True), (LITERAL_IN_TUPLE[e], False), (captured(e), False)):
        for inline in _paths(device):
            got, calls_numba = _run(fn, [v], device, inline)
            assert _same(got, want), (e, translated, inline, got, want)
            if device == "cpu":
                assert calls_numba == (not (inline and translated)), (e, translated, inline)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_float_to_a_global_int_power_is_numpys(dtype, device):
    v = np.array(BASES, dtype=dtype)
    for inline in _paths(device):
        got, _ = _run(power_of_global, [v], device, inline)
        assert _same(got, _numpy(v, [K] * v.size)), (inline, got)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_powers_keep_numbas_semantics(device):
    import numba
    v = np.array([0, 0, 1, -1, 2, -3, 2, 0], dtype=np.int64)
    k = np.array([-1, 2, -5, -3, -1, 3, 10, 0], dtype=np.int64)
    own = numba.njit(error_model="numpy")(power_in_tuple)  # what Numba itself gives, under NumPy's error model
    want = np.array([own(a, b) for a, b in zip(v, k)], dtype=np.int64)
    got, _ = _run(power_in_tuple, [v, k], device, inline=False)
    assert np.array_equal(got, want), (got, want)


def test_the_users_own_numba_functions_are_left_as_numba_compiles_them():
    import numba

    from resident import _ieee_pow

    def users(v):
        t = (v, 1.0)
        return t[0] ** -2

    got, calls_numba = _run(users, [np.array([0.0, 2.0])], "cpu")
    assert calls_numba and _same(got, np.array([np.inf, 0.25]))

    def rewritten(f):
        d = numba.njit(error_model="numpy")(f)
        d.compile((numba.float64,))
        typemap = d.overloads[(numba.float64,)].type_annotation.typemap
        return any("ieee_pow" in str(t) for t in typemap.values())

    assert not rewritten(users)  # the function resident compiled, now the user's own
    assert rewritten(_ieee_pow.marked(users))  # (the check sees the rewrite where there is one)


def math_pow_called(v, k):  # math.pow: a double, as Python's
    t = (v, 1.0)
    return math.pow(t[0], k)


def math_pow_imported(v, k):
    return pow_of_math(v, k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fn", [math_pow_called, math_pow_imported])
def test_math_pow_to_an_int_power_is_ieee(fn, dtype, device):
    v, k = _grid(dtype)
    with np.errstate(divide="ignore"):
        want = np.array([np.float64(x) ** int(e) for x, e in zip(v, k)]).astype(dtype)
    for inline in _paths(device):
        got, _ = _run(fn, [v, k], device, inline)
        if device == "cpu":
            assert _same(got, want), (fn.__name__, inline, got, want)
        else:  # CUDA's pow: within 2 ulp of the C library's; infinities and the signs of zeros exact
            assert np.array_equal(np.signbit(got), np.signbit(want)) and np.array_equal(np.isinf(got), np.isinf(want))
            np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)
