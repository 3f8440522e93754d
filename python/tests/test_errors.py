"""Errors from Python: one typed resident.Error subclass per misuse, at definition where it can be
known there, never a hang or silent values; the classes come from the C++ table of error kinds; a
Flow and a Graph take part in garbage collection; ops, stages, plain functions and C++ text compose
in either order, and what is no stage is refused from either side; rs.sum's error bound."""
import datetime
import gc
import math
import weakref

import numpy as np
import pytest

import resident as rs
from _support import needs_numba


def test_the_classes_come_from_one_table_with_their_hierarchy():
    assert issubclass(rs.InvalidArgument, rs.Error) and issubclass(rs.InvalidArgument, ValueError)
    assert issubclass(rs.InvalidType, rs.InvalidArgument) and issubclass(rs.InvalidType, TypeError)
    assert issubclass(rs.OutOfMemory, MemoryError) and issubclass(rs.Error, RuntimeError)
    assert issubclass(rs.DeviceLost, rs.CudaError) and issubclass(rs.CudaError, rs.LibraryError)
    assert issubclass(rs.CompileError, rs.InvalidArgument) and issubclass(rs.FlowError, rs.InvalidArgument)
    for name in rs._core._error_names:
        cls = getattr(rs, name)
        assert cls.__module__ == "resident" and cls.__doc__ and name in rs.__all__
    # A C++ error keeps the file:line of the code that raised it.
    with pytest.raises(rs.Error, match=r"\[(src|include)/.*:\d+\]"):
        rs.synchronize("nonsense")


def _typed(exc_type, fn, *args, **kwargs):
    with pytest.raises(exc_type) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, rs.Error)
    return str(e.value)


def test_stages_that_cannot_be_stages_are_refused_with_a_type_error():
    x = np.ones(8)
    assert "not a Python function" in _typed(TypeError, rs.stage, math.sin)
    _typed(TypeError, rs.stage, lambda: 1.0)
    _typed(TypeError, rs.stage, lambda *v: v[0])

    three = rs.stage(lambda a, b, c: a + b + c)
    assert "takes 3 parameters but receives 1" in _typed(rs.InvalidType, three, x)

    def pair(v):
        return v, v

    def nothing(v):
        v + 1

    assert "returns" in _typed(rs.InvalidType, rs.stage(pair), x)
    assert "returns" in _typed(rs.InvalidType, rs.stage(nothing), x)
    assert "must take 2" in _typed(rs.InvalidType, rs.jit.reduce, lambda a, b, c: a, 0.0)
    # The state is usable after each refusal.
    y = np.arange(8.0)
    rs.stage(lambda v: 2 * v)(y)
    assert np.array_equal(y, 2 * np.arange(8.0))


def test_a_stage_that_prints_or_raises_is_refused_at_definition_never_run():
    def shout(v):
        print(v)
        return v

    def helper(v):
        if v < 0:
            raise ValueError("negative")
        return v

    def calls_a_raising_helper(v):
        return helper(v) + 1

    def asserts(v):
        assert v > 0
        return v

    assert "print" in _typed(rs.CompileError, rs.stage, shout)
    assert "can raise" in _typed(rs.CompileError, rs.stage, calls_a_raising_helper)
    _typed(rs.CompileError, rs.stage, asserts)

    import builtins

    def through_builtins(v):
        builtins.print(v)
        return v

    def through_a_default(v, p=print):
        p(v)
        return v
    for fn in (through_builtins, through_a_default):  # print however it is reached: once a hang
        assert "print" in _typed(rs.CompileError, rs.stage, fn)


def _stub(v):  # Numba compiles the @overload below in its place; its own body never runs
    raise NotImplementedError


def _shouting_stub(v):
    raise NotImplementedError


@needs_numba
def test_numba_cfuncs_and_overloads_are_checked_as_what_compiles():
    import numba
    from numba.extending import overload

    @overload(_stub)
    def _stub_impl(v):
        def impl(v):
            return v * 2
        return impl

    @overload(_shouting_stub)
    def _shouting_impl(v):
        def impl(v):
            print(v)
            return v
        return impl

    @numba.cfunc("float64(float64)")
    def loud(v):
        print(v)
        return v

    x = np.arange(4.0)
    np.testing.assert_array_equal(rs.stage(lambda v: _stub(v) + 1)(x.copy()), 2 * x + 1)  # not "can raise"
    assert "print" in _typed(rs.CompileError, rs.stage, lambda v: _shouting_stub(v))
    assert "print" in _typed(rs.CompileError, rs.stage, lambda v: loud(v))
    assert "numba.cfunc" in _typed(rs.InvalidType, rs.stage, loud)

    @numba.extending.register_jitable
    def jitable_raises(v):
        if v > 2.5:
            raise ValueError("too big")
        return v * 2
    assert "can raise" in _typed(rs.CompileError, rs.stage, lambda v: jitable_raises(v))


def test_unsupported_host_arrays_are_type_errors_naming_the_type():
    for bad in (np.array([object(), 1], dtype=object), np.array(["a", "b"]),
                np.array([datetime.datetime(2020, 1, 1)], dtype="datetime64[s]"),
                np.arange(4, dtype=">f4"), [1.0, 2.0]):
        _typed(rs.InvalidType, rs.to_device, bad)
        _typed(TypeError, rs.to_device, bad)
    assert "newbyteorder" in _typed(rs.InvalidType, rs.to_device, np.arange(4, dtype=">f8"))
    x = rs.to_device(np.arange(4, dtype="<f4"))  # still usable
    assert np.array_equal(x.to_host(), np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_system_exit_leave_flow_run_unchanged(exc):
    f = rs.Flow(device="cpu")

    def stop():
        raise exc()

    f.add("stop", stop)
    with pytest.raises(exc):
        f.run()
    g = rs.Flow(device="cpu")  # other stage errors stay StageError
    g.add("bad", lambda: 1 / 0)
    with pytest.raises(rs.StageError):
        g.run()


class _Sentinel:
    pass


def test_a_cycle_through_a_flow_or_a_graph_is_collected():
    def make():
        s = _Sentinel()
        f = rs.Flow(device="cpu")
        f.add("keep", lambda: (f, s))  # the stage's closure holds the flow: a cycle
        g = f.capture()
        f.add("graph", lambda: (g, s))  # and the graph
        return weakref.ref(s)

    def make_capture():
        s = _Sentinel()
        box = []
        box.append(rs.capture(lambda: (box, s), device="cpu"))
        return weakref.ref(s)

    refs = [make() for _ in range(3)] + [make_capture() for _ in range(3)]
    gc.collect()
    assert all(r() is None for r in refs)


def test_ops_and_stages_compose_in_either_order():
    x = np.linspace(0.5, 3.0, 1001)

    @rs.stage
    def twice(v):
        return 2.0 * v

    for chain, want in ((twice | rs.op.sqrt(), np.sqrt(2 * x)), (rs.op.sqrt() | twice, 2 * np.sqrt(x)),
                        ((rs.op.add(1) | rs.op.log()) | twice, 2 * np.log(x + 1)),
                        (twice | (rs.op.affine(1.5, 0.5) | rs.op.square()), (3 * x + 0.5) ** 2)):
        y = np.full_like(x, -1.0)
        chain(x, out=y)
        assert np.max(np.abs(y - want)) < 1e-12, chain
    assert abs((rs.op.square() | rs.jit.sum())(x) - np.sum(x * x)) < 1e-9 * np.sum(x * x)


def _minus_one(v):
    return v - 1.0


@needs_numba
def test_operations_compose_with_plain_functions_and_cpp_text_either_way():
    # op | f and f | op were bare TypeErrors (a function has no __ror__).
    x = np.random.default_rng().uniform(1, 100, 4099).astype(np.float32)
    v = x.astype(np.float64)  # the reference in double precision
    close = lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # noqa: E731
    close((rs.op.sqrt() | _minus_one)(x.copy()), np.sqrt(v) - 1)
    close((_minus_one | rs.op.sqrt())(x.copy()), np.sqrt(v - 1))
    close(((rs.op.sqrt() | rs.op.mul(2.0)) | _minus_one)(x.copy()), 2 * np.sqrt(v) - 1)
    text = "float twice(float v) { return v * 2; }"
    close((rs.op.sqrt() | text)(x.copy()), 2 * np.sqrt(v))
    close((rs.stage(_minus_one) | text)(x.copy()), 2 * (v - 1))
    close((text | rs.stage(_minus_one))(x.copy()), 2 * v - 1)


@pytest.mark.parametrize("other", [3, 2.5, None, np.float32(1), np.arange(3)], ids=lambda o: type(o).__name__)
def test_a_chain_with_what_is_no_stage_is_invalid_type_either_way(other):
    # `rs.op.sqrt() | 3` is a mistake: a typed error naming what composes, from either side, and the
    # operations, programs and chains are usable after it.
    sq = rs.op.sqrt()
    for left in (sq, sq | rs.op.add(1), rs.stage("float f(float v) { return v + 1; }")):
        with pytest.raises(rs.InvalidType, match="composes"):
            left | other
        with pytest.raises(rs.InvalidType, match="composes"):
            other | left
    x = rs.to_device(np.full(4, 9.0, np.float32))
    np.testing.assert_allclose((sq | rs.op.add(1))(x).to_host(), np.full(4, 4.0))


def test_programs_are_compiled_and_agree_with_the_interpreter():
    x = np.random.default_rng(3).random(10007).astype(np.float32)
    p = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    y = np.full_like(x, -1.0)
    p(x, out=y)
    assert p.engine == "compiled"
    z = np.full_like(x, -1.0)
    rs._core._run_program(p, x, z)
    ref = 0.5 * np.sin(np.sqrt((1.5 * x.astype(np.float64) + 0.5) ** 2 + 1))
    assert np.max(np.abs(y - ref)) < 4e-7 and np.max(np.abs(y - z)) < 4e-7
    q = rs.op.square() | rs.op.add(1)
    assert abs(q.sum(x) - np.sum(x.astype(np.float64) ** 2 + 1)) < 1e-5 * x.size and q.engine == "compiled"


def test_a_missing_compiler_on_one_device_leaves_the_others_compiling():
    # No run-time compiler for one target (NVRTC absent, say) is remembered for that target alone: the
    # same program's calls on the CPU still compile.
    from resident import _program
    p = rs.op.affine(1.75, 0.125) | rs.op.add(2)  # its first use in this process

    def no_compiler(chain):
        raise rs.CompileError("no run-time compiler here")
    assert _program._run(p, "float32", False, no_compiler, lambda: "interpreted", ("elsewhere", 0, 0)) == "interpreted"
    assert p.engine == "interpreted"
    x = np.arange(8, dtype=np.float32)
    y = np.full_like(x, -1.0)
    p(x, out=y)
    assert p.engine == "compiled"
    np.testing.assert_allclose(y, 1.75 * x.astype(np.float64) + 0.125 + 2, rtol=1e-6)
    assert p.sum(x) == pytest.approx(float(np.sum(1.75 * x.astype(np.float64) + 2.125)), rel=1e-6)
    assert p.engine == "compiled"


def test_a_float32_sum_is_as_accurate_as_numpys_pairwise_sum():
    # float32 values add in double: |error| <= (n - 1) * 2^-53 * sum|x| (then one rounding to float32,
    # as every float32 sum), far inside NumPy's pairwise bound.
    n = 10**6
    x = np.linspace(-2, 2, n, dtype=np.float32)
    exact = math.fsum(x.astype(np.float64))
    bound = (n - 1) * 2.0**-53 * float(np.sum(np.abs(x.astype(np.float64))))
    for a in (x, rs.to_device(x)):
        s = rs.sum(a)
        assert abs(s - exact) <= bound, (s, exact)
        assert abs(s) <= abs(float(np.sum(x))) + bound  # no worse than NumPy's
        assert abs(s) < 1e-4
    big = np.full(3, 2**31 - 1, dtype=np.int32)  # integers add in 64 bits
    assert rs.sum(big) == 3 * (2**31 - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_interpreter_gives_the_compiled_values_at_the_edges(dtype):
    # abs(-0) is +0, abs(-NaN) +NaN and a NaN constant loses to a number (fabs, fmin, fmax), whichever
    # engine runs.
    x = np.array([-0.0, 0.0, -1.5, 2.0, np.nan, -np.nan, -np.inf, np.inf], dtype)
    assert np.signbit(x[5])
    for o in (rs.op.abs(), rs.op.minimum(float("nan")), rs.op.maximum(float("nan")), rs.op.minimum(1.0),
              rs.op.maximum(-1.0)):
        p = rs.program([o])
        y = np.full_like(x, 7)
        p(x, out=y)
        assert p.engine == "compiled"
        z = np.full_like(x, 7)
        rs._core._run_program(p, x, z)
        np.testing.assert_array_equal(y, z, err_msg=o.name)
        real = ~np.isnan(y)
        assert (np.signbit(y[real]) == np.signbit(z[real])).all(), o.name
        if o.name == "abs":
            assert not np.signbit(y).any() and not np.signbit(z).any(), (y, z)
