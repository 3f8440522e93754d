"""What a stage would compute otherwise than Python is a CompileError when it is defined, naming the
function, its file:line and what to do, never silent values: an integer int64 cannot hold (written,
folded by Python or made from constants, in the body, a called function at any depth, a closure, a
global, a default, a tuple or an inner function: v * 2**70 gave 0.0); text (str, repr, format, ascii,
f-strings, a string constant used as a value: len(str(v)) gave 21 for every element); try/except (which
read as "can raise"). What stays allowed still runs: integers int64 holds, a written constant below
2**64 (Numba's uint64: a 64-bit hash's multiplier), floats past them, a string given to a call
(float("nan"), a dtype's name)."""
import types

import numpy as np
import pytest

import resident as rs
from _support import needs_numba

pytestmark = needs_numba

X = np.array([0.5, 1.0, 2.0, -3.0])


def _big_power(v):
    return v * 2**70  # not folded by Python (too many bits): Numba's int64 power wrapped to 0


def _folded(v):
    return v * 10**20  # folded by Python into one constant


def _calls_big(v):
    return _big_power(v) + 1.0


def _calls_big_at_depth_2(v):
    return _calls_big(v) * 2.0


def _closing_over_big():
    k = 2**70
    return lambda v: v * k


_BIG = 2**64


def _module_with_big():
    m = types.ModuleType("_with_big")
    exec("def f(v):\n    return v * 3**50\n", m.__dict__)  # noqa: S102 (the test's own text)
    return lambda v: m.f(v)


@pytest.mark.parametrize("fn, said", [
    (_big_power, "2.0**70"),
    (_folded, "1e+20"),
    (lambda v: v * (1 << 70), "2.0**70"),
    (lambda v: v * 2**10**6, "beyond a double's range"),   # past 2**256: not computed here
    (_calls_big_at_depth_2, "_big_power uses the integer 1180591620717411303424"),
    (_closing_over_big(), "k, the integer"),
    (lambda v: v * _BIG, "_BIG, the integer 18446744073709551616"),
    (lambda v, k=2**64: v * k, "a parameter's default"),
    (lambda v: v * (1.0, 2**64)[1], "18446744073709551616"),
    (lambda v: (lambda y: y * 2**70)(v), "2.0**70"),
    (_module_with_big(), "717897987691852588770249"),
], ids=["power", "folded", "shift", "huge", "depth 2", "closure", "global", "default", "tuple", "inner", "module"])
def test_an_integer_int64_cannot_hold_is_refused_when_defined(fn, said):
    for make in (rs.fuse, rs.stage):
        with pytest.raises(rs.CompileError, match="which a stage's integers cannot hold") as e:
            make(fn)
        assert said in str(e.value) and "write it as a float" in str(e.value)
        assert ".py:" in str(e.value) or "<string>:" in str(e.value)


_NUMBERS = tuple(range(1 << 17))


@pytest.mark.parametrize("table", [_NUMBERS + (2**70,), (float("nan"),) + _NUMBERS + (2**70,), (-2**63 - 1,) + _NUMBERS,
                                   _NUMBERS + (1e300, 2**64), ((1, 2**64),) + _NUMBERS],
                         ids=["last", "after a nan", "first", "past a big float", "nested"])
def test_a_big_integer_anywhere_in_a_large_table_is_refused(table):
    # A table of plain numbers is bounded at C speed (min, max); what its bounds cannot clear is walked.
    with pytest.raises(rs.CompileError, match="which a stage's integers cannot hold"):
        rs.stage(lambda v: v + table[3])


def test_a_table_of_1024_integers_runs_and_a_longer_one_is_refused_naming_an_array():
    # Numba compiled a 131072-element tuple for minutes until the kernel's memory ran out (9 GiB at 8000).
    table = tuple(range(1022)) + (2**63 - 1, -2**63)
    got = rs.fuse(lambda v: v + table[5])(rs.to_device(X.copy(), device="cpu")).to_host()
    np.testing.assert_array_equal(got, X + 5)
    for longer in (table + (7,), tuple((i, i) for i in range(400)), _NUMBERS):
        for make in (rs.fuse, rs.stage):
            with pytest.raises(rs.CompileError, match=r"names longer, a tuple of \d+ elements .*numpy.asarray"):
                make(lambda v: v + longer[5][0] if isinstance(longer[5], tuple) else v + longer[5])
    with pytest.raises(rs.CompileError, match=r"a tuple of 2000 elements"):
        rs.stage(lambda v, t=tuple(range(2000)): v + t[1])


_GOLDEN = 0x9E3779B97F4A7C15  # past int64, below 2**64


def test_a_written_constant_below_2_64_is_uint64_and_wraps_as_numpy_does():
    u = np.array([1, 2, 3, 2**64 - 1], np.uint64)
    got = rs.fuse(lambda v: v * _GOLDEN)(u.copy())
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, u * np.uint64(_GOLDEN))


def test_integers_int64_holds_and_floats_past_it_still_run():
    x = rs.to_device(X.copy(), device="cpu")
    np.testing.assert_array_equal(rs.fuse(lambda v: v * 2**62 + (-2**63))(x).to_host(), X * 2.0**62 - 2.0**63)
    np.testing.assert_array_equal(rs.fuse(lambda v: v * 2.0**70)(rs.to_device(X.copy(), device="cpu")).to_host(),
                                  X * 2.0**70)


def _text_at_depth_2(v):
    return _text(v) + 1.0


def _text(v):
    return len(str(v)) + 0.0


def _spec(v):
    return len(f"{v:.3f}") + 0.0  # Numba cannot read it at all: said as text too


_MODE = "fast"
_TABLE = bytes(range(256))


def _mode_switch(v):
    return v * 2.0 if _MODE == "fast" else v  # a configuration switch: Numba compares text as Python


@pytest.mark.parametrize("fn, said", [
    (lambda v: len(str(v)) + 0.0, "str()"),                  # gave 21.0 for every element
    (lambda v: len(repr(v)) + 0.0, "repr()"),
    (lambda v: len(format(v, ".2f")) + 0.0, "format()"),
    (lambda v: len(ascii(v)) + 0.0, "ascii()"),
    (lambda v: len(f"{v}") + 0.0, "of an f-string"),
    (_spec, "an f-string"),
    (_text_at_depth_2, "_text makes or uses text"),
    (lambda v: (lambda y: len(str(y)))(v) + 0.0, "str()"),
    (lambda v, s=str: len(s(v)) + 0.0, "str()"),
], ids=["str", "repr", "format", "ascii", "f-string", "format spec", "depth 2", "inner", "default"])
def test_text_in_a_stage_is_refused_when_defined(fn, said):
    x = rs.to_device(X.copy(), device="cpu")
    for make in (rs.fuse, rs.stage):
        with pytest.raises(rs.CompileError, match="makes or uses text") as e:
            make(fn)(x)
        assert said in str(e.value) and "on the host" in str(e.value)
    np.testing.assert_array_equal(x.to_host(), X)


def _raises_with_a_message(v):
    if v > 1.0:
        raise ValueError(f"{v} is too large")
    return v


def test_string_constants_and_bytes_tables_compute_as_in_python():
    for f, want in ((_mode_switch, X * 2.0), (lambda v: float(_TABLE[int(abs(v))]), np.abs(X).astype(int) * 1.0),
                    (lambda v: v + len("abc".upper()), X + 3.0), (lambda v: v if "a" in ("a", "b") else 0.0, X)):
        np.testing.assert_array_equal(rs.fuse(f)(rs.to_device(X.copy(), device="cpu")).to_host(), want)


@pytest.mark.parametrize("fn, said", [
    (lambda v: v * pow(2, 70), "2.0**70"),
    (lambda v: v * pow(10, 20), "10.0**20"),
], ids=["pow", "pow 10"])
def test_pow_of_constants_past_int64_is_refused_as_the_power_is(fn, said):
    # pow(2, 70) gave 0.0, pow(10, 20) 7.77e18: ** by another name.
    with pytest.raises(rs.CompileError, match="which a stage's integers cannot hold") as e:
        rs.fuse(fn)
    assert said in str(e.value)


def test_a_shift_to_the_top_bit_is_a_uint64_mask_as_written():
    sh = 63
    u = np.array([1, 2**63 + 5, 2**64 - 1, 7], np.uint64)
    got = rs.fuse(lambda v: v & (1 << sh))(u.copy())
    np.testing.assert_array_equal(got, u & np.uint64(1 << 63))


def test_a_string_given_to_a_call_still_runs_and_a_raise_is_said_as_one():
    x = rs.to_device(X.copy(), device="cpu")
    got = rs.fuse(lambda v: v + np.zeros(2, dtype="float64")[0] + (float("nan") if v > 9.0 else 0.0))(x)
    np.testing.assert_array_equal(got.to_host(), X)
    with pytest.raises(rs.CompileError, match="can raise"):
        rs.fuse(_raises_with_a_message)


def _try_except(v):
    try:
        return 1.0 / v
    except ZeroDivisionError:
        return 0.0


def _bare_except(v):
    try:
        return 1.0 / v
    except:  # noqa: E722
        return 0.0


def _try_finally(v):
    try:
        y = 1.0 / v
    finally:
        y = 2.0
    return y


def _calls_try(v):
    return _try_except(v) + 1.0


@pytest.mark.parametrize("fn", [_try_except, _bare_except, _try_finally, _calls_try],
                         ids=["except", "bare", "finally", "callee"])
def test_try_except_is_refused_as_such_not_as_a_raise(fn):
    # It was "can raise (a raise or assert)" for a body with neither.
    with pytest.raises(rs.CompileError, match=r"uses try/except \(.*test_refusals_stage_values\.py:\d+\)") as e:
        rs.fuse(fn)
    assert "can raise" not in str(e.value)
    assert "inf or nan" in str(e.value) and "integer one gives 0" in str(e.value)


def test_the_guide_says_integers_in_a_stage_are_64_bit_and_wrap():
    import pathlib
    guide = (pathlib.Path(__file__).parents[2] / "docs" / "python.md").read_text(encoding="utf-8")
    assert "64-bit and wraps" in guide and "factorial" in guide


def _mod_in_callee(v):
    return v % 7


def _floors_in_place(v):
    v //= 3
    return v


def _floors_in_a_loop(v):
    for i in range(2):
        v = v // (i + 2)
    return v


def _returns_both(v):  # one return of the uint64, one of a Python int: the function returns a float64
    if v > 3:
        return v
    return 3


def _hash_mod(v):  # an int64 array hashed in uint64, the modulus a Python int
    h = np.uint64(v) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h % 1000)


_U = np.array([2**64 - 1, 2**63 + 5, 10], np.uint64)


def _reads_past_20(x):
    return 1 if x - 20 > 0 else 0


def _low_bits_then_less(v):  # NumPy: the low bits stay uint64, so v % 16 - 20 wraps above 0
    v %= 16
    v -= 20
    return 1 if v > 0 else 0


@pytest.mark.parametrize("fn,what", [
    (lambda v: v // 3, "//"), (lambda v: v % 7, "%"), (lambda v: max(v, 3), "max()"),
    (lambda v: _mod_in_callee(v) + 1, "in _mod_in_callee"), (_floors_in_place, "//="),
    (lambda v: divmod(v, 3)[0], "divmod()"), (lambda v: 1 if v + 1 > 5 else 0, ">"), (lambda v: abs(v - 1), "abs()"),
    (lambda v: v if v > 3 else 3, "one variable holding both"), (lambda v: np.maximum(v, 5), "maximum()"),
    (lambda v: np.mod(v, 7), "remainder()"), (lambda v: np.floor_divide(v, 3), "floor_divide()"),
    (_floors_in_a_loop, "_floors_in_a_loop"), (lambda v: 1 if float(v + 1) > 1e10 else 0, "float()"),
    (lambda v: (v + 1) * 0.5, "with a float"), (_returns_both, "one variable holding both"),
    (lambda v: v % 12, "%"), (lambda v: v % -16, "%"), (lambda v: v // 2, "//"), (lambda v: (v // 1) // 3, "//"),
    (lambda v: 1 if v % 16 - 20 > 0 else 0, ">"), (lambda v: (v % 16 - 20) // 3, "//"),
    (lambda v: abs(v % 16 - 20), "abs()"), (lambda v: 1 if (v % 2**62) * 4 > 5 else 0, ">"),
    (lambda v: _reads_past_20(v % 16), "in _reads_past_20"), (_low_bits_then_less, ">")])
def test_a_uint64_read_as_signed_after_meeting_a_signed_integer_is_refused(fn, what):
    # Numba types a uint64 with a signed integer as int64 (float64 where branches join): (2**64 - 1) // 3
    # gave 2**64 - 1, v + 1 > 5 was false for 2**63 + 5, max(v, 3) lost the low bits. Refused at the call,
    # naming the line and NumPy's cure; what keeps its bits (+ - * << & | ^) still runs.
    with pytest.raises(rs.InvalidType, match="uint64 and a signed integer") as e:
        rs.stage(fn)(rs.to_device(_U.copy()))
    assert what in str(e.value) and "numpy.uint64(3)" in str(e.value)


def _u64_or_half(v):
    if v > 3:
        return v
    return 0.5


def _u64_or_its_float(v):
    if v > 3:
        return v
    return float(v)


def _halved_or_u64(v):
    if v > np.uint64(3):
        return v * 0.5
    return v


def _float_or_u64_zero(x):
    if x > 0:
        return x
    return np.uint64(0)


def test_a_uint64_returned_beside_a_float_is_no_mix_of_signs():
    # Only a signed integer return beside a uint64 one makes Numba's float64 out of a sign mix.
    for fn, want in ((_u64_or_half, 10), (_u64_or_its_float, 10), (_halved_or_u64, 5)):
        assert rs.stage(fn)(rs.to_device(_U.copy())).to_host()[2] == want
    np.testing.assert_array_equal(rs.stage(_float_or_u64_zero)(rs.to_device(np.array([1.5, -1.0]))).to_host(),
                                  [1.5, 0.0])


def test_uint64_in_a_stage_on_signed_values_is_checked_too():
    i = np.array([-1, 12345, 7], np.int64)
    with pytest.raises(rs.InvalidType, match="_hash_mod"):
        rs.stage(_hash_mod)(rs.to_device(i.copy()))
    with pytest.raises(rs.InvalidType, match="uint64 and a signed integer"):  # a reduction's operator alike
        rs.jit.reduce(lambda a, b: a if a - 1 > b - 1 else b, 0)(rs.to_device(_U.copy()))
    with pytest.raises(rs.InvalidType, match="uint64 and a signed integer"):
        rs.jit.reduce(lambda a, b: a if a % 16 - 8 > b % 16 - 8 else b, 0)(rs.to_device(_U.copy()))


def test_uint64_operations_numba_computes_right_still_run():
    u, U = _U, np.uint64
    for fn, want in ((lambda v: v + 1, u + U(1)), (lambda v: v * 3, u * U(3)), (lambda v: v >> 1, u >> U(1)),
                     (lambda v: 1 if v > 5 else 0, (u > 5).astype(np.uint64)), (lambda v: v // U(3), u // U(3)),
                     (lambda v: 1 if v + U(1) > U(5) else 0, (u + U(1) > U(5)).astype(np.uint64)),
                     (lambda v: abs(v), u), (lambda v: U(v + 1) // U(3), (u + U(1)) // U(3)),
                     (lambda v: v % 2**4, u % U(16)), (lambda v: (v + 1) % 1024, (u + U(1)) % U(1024)),
                     (lambda v: v // 1 + 1, u + U(1)), (lambda v: 1 if v % 8 > 4 else 0, (u % U(8) > 4).astype(U))):
        np.testing.assert_array_equal(rs.stage(fn)(rs.to_device(u.copy())).to_host(), want)
    assert rs.jit.reduce(lambda a, b: a if a > b else b, 0)(rs.to_device(u.copy())) == 2**64 - 1
    i = np.array([-7, 7], np.int64)  # signed stages are not concerned
    np.testing.assert_array_equal(rs.stage(lambda v: v // 3)(rs.to_device(i)).to_host(), i // 3)


def test_a_uint64_stage_numba_cannot_type_is_a_compile_error():
    with pytest.raises(rs.CompileError):
        rs.stage(lambda v: v.nonexistent)(rs.to_device(_U.copy()))
