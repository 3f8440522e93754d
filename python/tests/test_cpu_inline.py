"""Python stages on the CPU written out as C++ text and compiled into the loop (resident/_cpu_text.py):
which functions are translated, that they compute what Numba's own function computes (exactly, or
within the vector math's ULP bounds where a math function is called), that what is not translated
still runs through Numba's function, and that the refusals stay typed."""
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import resident as rs
from resident import jit as rs_jit

from _support import needs_numba

pytestmark = needs_numba


def _values(n=4099, dtype="float32", lo=-3.0, hi=3.0, seed=7):
    g = np.random.default_rng(seed)
    return (lo + (hi - lo) * g.random(n)).astype(dtype)


def _run(fn, *xs, inline=True, **kw):
    """fn as a stage over the host arrays xs on the CPU, through the translation or Numba's function."""
    saved = rs_jit._inline_cpu
    rs_jit._inline_cpu = inline
    try:
        chain = rs.stage(fn, **kw)
        ins = [rs.to_device(x, device="cpu") for x in xs]
        out = rs.empty(xs[0].size, dtype=str(xs[0].dtype), device="cpu")
        chain(*ins, out=out)
        source = chain.kernel_source([str(x.dtype) for x in xs], str(xs[0].dtype))
        return np.asarray(out.to_host()), source
    finally:
        rs_jit._inline_cpu = saved


def _translated(source, fn):
    return f"rs_py_{fn.__name__}_" in source and "p0)" in source and "fns[" not in source.split("rs_chain")[1]


def _ulps(a, b):
    a, b = np.asarray(a), np.asarray(b)
    spacing = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(a.dtype)).astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    d = np.abs(a.astype(np.float64) - b.astype(np.float64)) / spacing
    return float(np.max(np.where(both_nan | (a == b), 0.0, d)))


def helper(x):
    return x * x + 1.0


def branches(v):
    if v > 0.5:
        t = v * 3.0 - 1.0
    elif v < -1.0:
        t = -v
    else:
        t = abs(v) ** 3
    k = 0
    while k < 2:
        t = t + helper(t) * 0.125
        k += 1
    return min(t, 40.0) + max(v, 0.0) + int(2) + float(k)


def math_calls(v):
    return math.sin(v) + math.exp(-v * v) + math.sqrt(abs(v)) + np.tanh(v) + math.atan2(v, 2.0) + math.pi + abs(v) ** 0.5


def powers(v):
    return v ** 2 + v ** -1 + v ** 0 + v ** 5  # integer powers: multiplications, as Numba makes them


def integers(v):
    i = int(v * 100.0)
    j = i * 3 - 7
    return float(j) / 4.0 + (1.0 if i > j else 0.0)


def zipped(a, b):
    return a * b + min(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", [branches, powers, integers])
def test_translated_stages_compute_what_numbas_function_computes(fn, dtype):
    x = _values(dtype=dtype)
    got, source = _run(fn, x)
    want, fallback_source = _run(fn, x, inline=False)
    assert _translated(source, fn)
    assert not _translated(fallback_source, fn)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_calls_are_translated_within_the_vector_maths_bounds(dtype):
    x = _values(dtype=dtype)
    got, source = _run(math_calls, x)
    want, _ = _run(math_calls, x, inline=False)
    assert _translated(source, math_calls)
    assert _ulps(got, want) <= 24  # each function within 4 ULP (docs/cpu.md), six of them added


def test_the_seed_stages_are_translated_and_match_fp64():
    def func1(v):
        return 1.5 * v + 0.5

    def func2(v):
        return math.sqrt(v * v + 1.0)

    def func3(v):
        return 0.5 * math.sin(v)

    chain = rs.stage(func1) | rs.stage(func2) | rs.stage(func3)
    x = _values(1 << 16)
    rx = rs.to_device(x, device="cpu")
    y = chain(rx, out=rs.empty(x.size, device="cpu"))
    source = chain.kernel_source(["float32"], "float32")
    assert all(f"rs_py_{f.__name__}_" in source for f in (func1, func2, func3))
    v = 1.5 * x.astype(np.float64) + 0.5
    ref = 0.5 * np.sin(np.sqrt(v * v + 1.0))
    assert np.max(np.abs(np.asarray(y.to_host()) - ref)) < 1e-6
    total = (chain | rs.jit.sum())(rx)
    assert abs(total - ref.sum()) < 1e-3 * abs(ref).sum()


def test_two_argument_stages_and_reduction_operators_are_translated():
    a, b = _values(seed=1), _values(seed=2)
    got, source = _run(zipped, a, b)
    assert _translated(source, zipped)
    np.testing.assert_array_equal(got, a * b + np.minimum(a, b))

    def biggest(p, q):
        return p if p > q else q

    m = (rs.stage(lambda v: v * 2.0) | rs.jit.reduce(biggest, -math.inf))(rs.to_device(a, device="cpu"))
    assert m == pytest.approx(float(np.max(a * np.float32(2.0))))


def uses_a_tuple(v):
    t = (v, 2.0 * v)
    return t[0] + t[1]


def loops_over_a_range(v):
    s = v
    for i in range(3):
        s = s * 0.5 + i
    return s


@pytest.mark.parametrize("fn", [uses_a_tuple, loops_over_a_range])
def test_what_is_not_translated_runs_through_numbas_function(fn):
    x = _values()
    got, source = _run(fn, x)
    assert not _translated(source, fn)
    want = np.array([fn(np.float32(v)) for v in x[:64]], dtype=np.float32)
    np.testing.assert_allclose(got[:64], want, rtol=1e-6)


def test_constants_nan_inf_and_literal_rules_survive_the_translation():
    def special(v):
        if v > 1.0:
            return math.inf
        if v < -1.0:
            return -math.inf
        return math.nan if v == 0.25 else v * 0.1

    x = np.array([2.0, -2.0, 0.25, 0.5], dtype=np.float32)
    got, source = _run(special, x)
    assert _translated(source, special)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
    assert got[3] == np.float32(0.5) * np.float32(0.1)  # the literal in float32, as NumPy 2 keeps it
    got64, _ = _run(special, x, float_literals="float64")
    assert got64[3] == np.float32(0.5 * 0.1)


def test_refusals_stay_typed_with_the_translation():
    def shout(v):
        print(v)
        return v

    def raises(v):
        if v > 0:
            raise ValueError("positive")
        return v

    with pytest.raises(rs.CompileError):
        rs.stage(shout)
    with pytest.raises(rs.CompileError):
        rs.stage(raises)

    def pair(v):
        return v, v

    x = rs.to_device(_values(16), device="cpu")
    with pytest.raises(rs.InvalidType):
        rs.stage(pair)(x)

    def untyped(v):
        return v + "text"

    with pytest.raises(rs.CompileError):
        rs.stage(untyped)(x)


def test_text_the_compiler_refuses_falls_back_to_numbas_function(monkeypatch):
    from resident import _cpu_text

    def broken(dispatcher, args, ret, name):
        return f"float {name}(float p0) {{ return p0 +; }}\n"  # a gap in the translation, simulated

    monkeypatch.setattr(_cpu_text, "translate", broken)

    def twice(v):
        return v * 2.0

    chain = rs.stage(twice) | rs.stage("float f(float v) { return v + 1.0f; }")
    x = _values(64)
    y = chain(rs.to_device(x, device="cpu"), out=rs.empty(64, device="cpu"))
    np.testing.assert_array_equal(np.asarray(y.to_host()), x * np.float32(2) + np.float32(1))
    assert not _translated(chain.kernel_source(["float32"], "float32"), twice)
    # The user's own C++ text that does not compile is still the user's error.
    with pytest.raises(rs.CompileError):
        (rs.stage(twice) | rs.stage("float g(float v) { return v +; }"))(rs.to_device(x, device="cpu"))


@needs_numba
def test_pow_gives_one_value_at_every_place_in_the_array():
    # A vector loop once made pow(x, 0.5) a square root (nan at -inf, -0 at -0) and its scalar tail
    # called pow (+inf, +0): the value depended on the element's index. C99's pow at every place.
    for dtype in (np.float32, np.float64):
        x = np.array([-np.inf, -0.0, 4.0] * 11, dtype)
        want = np.array([math.pow(v, 0.5) for v in x.astype(np.float64)], dtype)
        for got in (rs.op.pow(0.5)(x.copy()), rs.stage(lambda v: v ** 0.5)(x.copy()),
                    rs.stage("double r(double v) { return pow(v, 0.5); }")(x.astype(np.float64)).astype(dtype),
                    rs.stage("float r(float v) { return std::pow(v, 0.5f); }")(x.astype(np.float32)).astype(dtype),
                    rs.stage("float r(float v) { return pow(v, 0.5f); }")(x.astype(np.float32)).astype(dtype)):
            np.testing.assert_array_equal(got, want)
            assert not np.signbit(got[1::3]).any(), got


@pytest.mark.skipif(shutil.which("clang++") is None, reason="clang++ is not installed")
def test_kernels_compile_with_clang_as_the_host_compiler(tmp_path):
    # The host prelude (pow among it) must compile with each host compiler docs/cpu.md names.
    code = ("import numpy as np, resident as rs\n"
            "x = rs.to_device(np.array([1.5, -2.0, 3.0], np.float32), device='cpu')\n"
            "y = rs.stage('float r(float v) { return std::pow(v, 2.0f) + pow(v, 3.0f) * 0; }')(x).to_host()\n"
            "assert (y == np.array([2.25, 4.0, 9.0], np.float32)).all(), y\n"
            "assert rs.jit.map('float p1(float v) { return v + 1; }', 'p1')(x).to_host()[0] == 3.25\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX="clang++",
                                RESIDENT_JIT_CACHE=str(tmp_path)))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def test_pow_in_cpp_text_folds_as_the_built_in_does():
    # pow there is a function of resident's (see above), and still a constant expression with constant
    # arguments; pow(v, 2) is v * v (one rounding either way) at every place, including inf, -0 and NaN.
    x = np.array([-np.inf, -0.0, 3.0, np.nan, 1e20, -1.5, 7.25] * 9, np.float32)
    for src, dtype in (("float r(float v) { return std::pow(v, 2.0f); }", np.float32),
                       ("float r(float v) { return pow(v, 2); }", np.float32),
                       ("double r(double v) { return std::pow(v, 2.0); }", np.float64)):
        v = x.astype(dtype)
        got = rs.stage(src)(rs.to_device(v, device="cpu")).to_host()
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, v * v, err_msg=src)
        assert not np.signbit(got[~np.isnan(got)]).any(), src
    got = rs.stage("float r(float v) { constexpr float c = std::pow(2.0f, 3.0f); static_assert(c == 8.0f); "
                   "return v * c; }")(rs.to_device(x, device="cpu")).to_host()
    np.testing.assert_array_equal(got, x * np.float32(8))
