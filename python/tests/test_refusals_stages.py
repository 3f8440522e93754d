"""What cannot be a Python stage is refused when the stage is made or compiled, with a message that names a
call that works: a class, a builtin that needs the interpreter, a bound method or a callable object, a
partial (its suggested rewrite valid Python), a function that calls itself, writes a variable of an
enclosing function, nests its calls too deep for Numba, or fails inside Numba outside its error classes;
a device other than the arrays' and an output of another type are refused when called. A stage's
defaults are filled as Python fills them."""
import decimal
import re

import numpy as np
import pytest

import resident as rs
from _support import DEVICES, needs_numba


def test_a_class_is_no_work():
    class C:
        def __init__(self, *a, **k):
            pass
    with pytest.raises(rs.InvalidType):
        rs.dist.apply(C, rs.dist.shard(np.ones(4, np.float32), ["cpu"]))
    with pytest.raises(rs.InvalidType):
        rs.stage(float)
    with pytest.raises(rs.InvalidType):
        rs.stream(float, np.ones(3, np.float32))


@pytest.mark.parametrize("fn", [print, open, input])
def test_a_builtin_that_needs_the_interpreter_is_refused_with_advice_that_works(fn):
    with pytest.raises(rs.InvalidType, match="needs the Python interpreter") as e:
        rs.stage(fn)
    assert "rs.stage(lambda" not in str(e.value)


@pytest.mark.parametrize("items", ["x", [1, 2], [("nothing", None)], None, 3])
def test_a_chain_made_by_hand_is_refused_naming_what_makes_one(items):
    with pytest.raises(rs.InvalidArgument, match="made by resident.jit.stage"):
        rs.jit.Chain(items)


@needs_numba
def test_what_is_no_stage_is_told_with_a_call_that_works():
    import numba
    np.testing.assert_array_equal(rs.stage(numba.njit(lambda v: v + 1))(np.ones(2)), [2, 2])

    class C:
        def m(self, v):
            return v

        def __call__(self, v):
            return v
    for bad, said in ((min, "rs.stage(lambda v: min(v))"), (C().m, "bound method"), (C(), "not a Python function"),
                      (int, "is a class")):
        with pytest.raises(rs.InvalidType, match=re.escape(said)):
            rs.stage(bad)
    with pytest.raises(rs.InvalidType, match=re.escape("rs.jit.reduce(lambda a, b: min(a, b), init)")):
        rs.jit.reduce(min, 0)


def test_a_partials_suggested_rewrite_is_valid_python():
    import functools

    def h(v, k):
        return v * k
    with pytest.raises(rs.InvalidType) as e:
        rs.stage(functools.partial(h, k=5.0))
    suggestion = str(e.value).split("e.g. ")[1]
    compile(suggestion, "<suggestion>", "eval")  # a SyntaxError before
    assert "h(v, k=5.0)" in suggestion


@needs_numba
def test_a_stage_that_calls_itself_is_refused_when_defined():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    with pytest.raises(rs.CompileError, match="calls itself"):
        rs.fuse(fib)
    with pytest.raises(rs.CompileError, match="calls itself"):
        rs.stage(fib)


def _closing_over():
    k = 1.0

    def f(v):
        nonlocal k
        k = 5.0
        return v * k
    return f


def _inner_writes(v):
    acc = 0.0

    def add(x):
        nonlocal acc
        acc += x
    add(v)
    return acc


@needs_numba
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [_closing_over(), _inner_writes], ids=["nonlocal", "inner"])
def test_a_stage_that_writes_a_variable_of_an_enclosing_function_is_refused(device, fn):
    # Numba compiled the write as a local one: f(2.0) gave 2.0 where Python gives 10.0.
    x = rs.to_device(np.array([2.0, 3.0]), device=device)
    for make in (rs.stage, rs.fuse):
        with pytest.raises(rs.CompileError, match="of an enclosing function"):
            make(fn)(x)
    np.testing.assert_array_equal(x.to_host(), [2.0, 3.0])

    def reads(v):  # reading what it closes over is fine
        k = 2.0
        return (lambda y: y * k)(v)
    np.testing.assert_array_equal(rs.stage(reads)(x).to_host(), [4.0, 6.0])


def test_a_stage_whose_calls_nest_too_deep_for_numba_is_a_compile_error():
    pytest.importorskip("numba")
    source = "def f0(v):\n    return v + 1\n" + "".join(f"def f{i}(v):\n    return f{i - 1}(v)\n"
                                                          for i in range(1, 400))
    space = {}
    exec(source, space)  # noqa: S102 (a test's own text)
    x = np.ones(3, np.float32)
    with pytest.raises(rs.CompileError, match="nested too deeply"):
        rs.stage(space["f399"])(x)
    np.testing.assert_array_equal(x, np.ones(3))
    rs.stage(space["f3"])(x)  # a later stage still compiles
    np.testing.assert_array_equal(x, np.full(3, 2.0))


def _helper(v):
    return v + 1.0


@needs_numba
@pytest.mark.parametrize("fn, dtype", [
    (lambda v, h=_helper: h(v), np.float32),             # a default Numba has no type for
    (lambda v, d=object(): v, np.float32),
    (lambda v, d=decimal.Decimal(1): v + 1.0, np.float32),
    (lambda v, d={"a": 1}: v, np.float32),
    (lambda v: float("abc") + v, np.float32),             # a constant Numba folds and fails on
    (lambda v: sorted((v, 1.0))[0], np.int64),            # an assertion inside Numba
])
def test_numbas_failures_outside_its_error_classes_are_compile_errors(fn, dtype):
    x = rs.to_device(np.ones(3, dtype), device="cpu")
    with pytest.raises(rs.CompileError, match="Numba cannot compile"):
        rs.stage(fn)(x)
    np.testing.assert_array_equal(x.to_host(), np.ones(3, dtype))  # untouched


@needs_numba
def test_a_device_other_than_the_arrays_is_refused():
    x = np.ones(3, np.float32)
    with pytest.raises(rs.Error):
        rs.stage(lambda v: v)(x.copy(), device="tpu")
    np.testing.assert_array_equal(rs.stage(lambda v: v * 2)(x.copy(), device="cpu"), 2 * x)


@needs_numba
def test_an_output_of_another_type_names_a_conversion_that_works():
    with pytest.raises(rs.InvalidArgument, match="C\\+\\+ text") as e:
        rs.stage(lambda v: v * 2)(np.ones(3, np.int32), out=np.empty(3, np.float64))
    assert "Python stage" in str(e.value)


@needs_numba
def test_a_stage_fills_its_defaults_as_python_would():
    def f(v, k=2.5):
        return v * k
    np.testing.assert_array_equal(rs.stage(f)(np.ones(2, np.float32)), [2.5, 2.5])
    np.testing.assert_array_equal(rs.stage(lambda v: f(v, 3.0))(np.ones(2, np.float32)), [3.0, 3.0])
