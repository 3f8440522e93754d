"""Calls a review of the Python surfaces found wrong: each must give a typed resident error or the exact
value (FP64 or integer arithmetic), never a silent 0, a sum that does not wrap, data lost, or a value a
float32 fold over millions of values rounded away."""
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import resident as rs
from _support import needs_numba

U32 = 2.0 ** -24  # float32's unit roundoff


def test_a_generator_chains_reduction_given_an_array_is_refused():
    # It read no array and summed no values: 0.0 came back.
    with pytest.raises(rs.InvalidArgument, match="reads no array"):
        (rs.jit.uniform(1) | rs.jit.sum())(np.ones(10, np.float32))
    with pytest.raises(rs.InvalidArgument):
        rs.dist.sum(rs.dist.shard(np.ones(10, np.float32), ["cpu"] * 2), rs.jit.uniform(1))
    assert (rs.jit.uniform(1) | rs.jit.sum())(n=1000) > 0  # usable after


@needs_numba
@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_a_sharded_sum_through_work_wraps_64_bit_integers(dtype):
    top = np.iinfo(dtype).max
    a = np.array([top, top, 5], dtype)
    s = rs.dist.shard(a, ["cpu"] * 3)
    want = int(a.sum())  # NumPy's wrapping sum
    assert rs.dist.sum(s) == want
    assert rs.dist.sum(s, lambda v: v) == want


def test_a_numpy_integer_is_a_size_for_shard():
    s = rs.dist.shard(np.int64(10), ["cpu"] * 2)
    assert s.size == 10 and s.dtype == "float32"
    assert rs.dist.shard(10, ["cpu"], dtype=np.float64).dtype == "float64"
    with pytest.raises(rs.InvalidType):
        rs.dist.shard(10, ["cpu"], dtype="no such type")


def test_shards_of_more_than_one_dimension_are_refused_up_front():
    with pytest.raises(rs.InvalidArgument, match="one-dimensional"):
        rs.dist.from_shards([np.zeros((2, 2), np.float32), np.zeros(4, np.float32)])


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


def test_a_profile_open_already_is_not_entered_again_and_keeps_its_rows():
    q, x = rs.profile(), np.ones(8, np.float32)
    with q:
        rs.op.sqrt()(x)
        with pytest.raises(rs.InvalidArgument, match="collecting already"):
            with q:
                pass
        rs.op.neg()(x)
    assert sum(r.calls for r in q.rows) == 2  # both calls of the block
    with pytest.raises(rs.InvalidArgument, match="without __enter__"):
        rs.profile().__exit__(None, None, None)


def test_a_bad_progress_threshold_is_refused_in_residents_terms():
    code = ("import numpy as np, resident as rs\n"
            "try:\n    rs.stream(rs.op.sqrt(), np.ones(4, np.float32), progress=None)\n"
            "except rs.InvalidArgument as e:\n    print('refused:', e)\n")
    for bad in ("abc", "1.5", "1 GiB!"):
        env = dict(os.environ, RESIDENT_PROGRESS_BYTES=bad)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr  # the import itself works
        assert "refused:" in r.stdout and "RESIDENT_PROGRESS_BYTES" in r.stdout
    env = dict(os.environ, RESIDENT_PROGRESS_BYTES="1GiB")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "refused" not in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("c", [math.inf, -math.inf, math.nan, 1e300])
def test_non_finite_constants_run_compiled_and_compose_with_stages(c):
    x32, x64 = np.ones(5, np.float32), np.ones(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning leaks from writing the constant
        p = rs.op.add(c) | rs.op.mul(2.0)
        got = p(x32.copy())
        engine = p.engine
    with np.errstate(over="ignore"):
        want = (np.float32(1) + np.float32(c)) * np.float32(2)  # 1e300 is float32's infinity
    np.testing.assert_array_equal(got, np.full(5, want, np.float32))
    plain = rs.op.add(1.0) | rs.op.mul(2.0)
    plain(x32.copy())
    assert engine == plain.engine  # compiled wherever a plain program is (the constant fell back once)
    np.testing.assert_array_equal(p(x64.copy()), np.full(5, (1.0 + c) * 2.0))


@needs_numba
@pytest.mark.parametrize("c", [math.inf, math.nan])
def test_an_op_with_a_non_finite_constant_composes_with_a_stage(c):
    got = (rs.op.add(c) | rs.stage(lambda v: 2.0 * v))(np.ones(3))
    np.testing.assert_array_equal(got, np.full(3, (1.0 + c) * 2.0))


def test_pinned_empty_takes_numpy_integers_and_refuses_other_shapes_typed():
    assert rs.streaming.pinned_empty(np.int64(3)).shape == (3,)
    assert rs.streaming.pinned_empty((np.int32(2), 3)).shape == (2, 3)
    for bad in (2.5, None, "3", True, (2, 1.5)):
        with pytest.raises(rs.InvalidType):
            rs.streaming.pinned_empty(bad)
    with pytest.raises(rs.InvalidType):
        rs.streaming.pinned_empty(3, dtype="bogus")
    with pytest.raises(rs.InvalidArgument):
        rs.streaming.pinned_empty(-1)


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


def test_a_masked_array_is_refused_rather_than_its_mask_dropped():
    m = np.ma.array(np.ones(4, np.float32), mask=[0, 1, 0, 0])
    for call in (lambda: rs.stream(rs.op.sqrt(), m), lambda: rs.op.sqrt()(m), lambda: rs.sum(m),
                 lambda: rs.to_device(m)):
        with pytest.raises(rs.InvalidArgument, match="mask"):
            call()
    np.testing.assert_array_equal(rs.op.sqrt()(m.filled(4.0)), np.array([1, 2, 1, 1], np.float32))


def test_streams_odd_arguments_are_named_in_residents_terms():
    x = np.ones(8, np.float32)
    with pytest.raises(rs.InvalidType, match="device=0"):
        rs.stream(rs.op.sqrt(), x, device=0)
    for bad in (np.empty(8, object), np.array(["a"] * 8)):
        with pytest.raises(rs.InvalidType, match="holds"):
            rs.stream(rs.op.sqrt(), bad)
        with pytest.raises(rs.InvalidType, match="holds"):
            rs.stream(rs.op.sqrt(), x, out=bad)
    with pytest.raises(rs.InvalidArgument, match="program runs on float32 or float64"):
        rs.dist.min(rs.dist.shard(np.arange(4, dtype=np.int32), ["cpu"]), rs.op.sqrt())


def test_a_partials_suggested_rewrite_is_valid_python():
    import functools

    def h(v, k):
        return v * k
    with pytest.raises(rs.InvalidType) as e:
        rs.stage(functools.partial(h, k=5.0))
    suggestion = str(e.value).split("e.g. ")[1]
    compile(suggestion, "<suggestion>", "eval")  # a SyntaxError before
    assert "h(v, k=5.0)" in suggestion


def test_a_sharded_sum_wraps_as_the_values_the_work_makes():
    s = rs.dist.shard(np.array([-1, 0, 0], np.int64), ["cpu"] * 3)
    as_unsigned = rs.jit.map("unsigned long long f(long long v) { return v; }")
    assert rs.dist.sum(s, as_unsigned) == 2 ** 64 - 1 == (as_unsigned | rs.jit.sum())(np.array([-1, 0, 0], np.int64))
    s = rs.dist.shard(np.array([2 ** 63, 0, 0], np.uint64), ["cpu"] * 3)
    assert rs.dist.sum(s, rs.jit.map("long long f(unsigned long long v) { return v; }")) == -2 ** 63


def test_a_streamed_float32_sum_adds_many_chunks_partials_in_double():
    n = 1 << 22
    x = np.full(n, 0.1, np.float32)
    want = float(x.astype(np.float64).sum())
    got = rs.stream(rs.op.mul(1.0) | rs.op.add(0.0), x, reduce="sum", chunk=1024, progress=False)
    assert abs(got - want) <= 4 * U32 * want, got  # 646 units when the partials were added in float32


def test_a_generator_chains_reduction_given_out_is_refused():
    with pytest.raises(rs.InvalidArgument, match="reads no array"):
        (rs.jit.uniform(1) | rs.jit.sum())(out=np.ones(10, np.float32))


def test_masked_arrays_of_any_subclass_are_refused_and_unmasked_ones_taken():
    class M(np.ma.MaskedArray):
        pass
    sub = np.ma.array([1, 4, 9, 16], np.float32, mask=[0, 1, 0, 0]).view(M)
    for call in (lambda: rs.sum(sub), lambda: rs.to_device(sub), lambda: rs.stream(rs.op.sqrt(), sub)):
        with pytest.raises(rs.InvalidArgument, match="masked values"):
            call()
    whole = np.ma.array(np.array([1, 4, 9, 16], np.float32))  # nothing masked: nothing to lose
    assert rs.sum(whole) == 30.0
    np.testing.assert_array_equal(rs.stream(rs.op.sqrt(), whole), [1, 2, 3, 4])


def test_minimum_and_maximum_keep_fmins_nan_rule_wherever_they_run():
    x = np.array([1.0, 2.0, np.nan], np.float32)
    for c in (math.nan, 2.0):
        for op, ref in ((rs.op.minimum(c), np.fmin), (rs.op.maximum(c), np.fmax)):
            want = ref(x, np.float32(c))
            np.testing.assert_array_equal(op(x.copy()), want)
            np.testing.assert_array_equal(rs.stream(op, x), want)
            assert rs.stream(op, x, reduce="max") == np.nanmax(want) if not np.isnan(want).any() else True
            if importlib_numba():
                np.testing.assert_array_equal((op | rs.stage(lambda v: v))(x.copy()), want)
    s = rs.dist.shard(np.array([1.0, 2.0, 3.0], np.float32), ["cpu"])
    assert rs.dist.min(s, rs.op.minimum(math.nan)) == 1.0


def importlib_numba():
    import importlib.util
    return importlib.util.find_spec("numba") is not None


def test_dtypes_are_taken_as_numpy_reads_them():
    assert rs.empty(4, np.float64).dtype == "float64"
    assert rs.empty(4, "f4").dtype == "float32"
    with pytest.raises(rs.InvalidType):
        rs.empty(4, object())
    assert (rs.jit.uniform(1, dtype=np.float64) | rs.jit.sum())(n=10) > 0
    assert (rs.jit.normal(1, dtype=np.dtype("float32")) | rs.jit.max())(n=10) > -10
    assert "rs_" in rs.stage("float f(float v) { return v; }").kernel_source([np.float32], np.float32)
    with pytest.raises(rs.InvalidType):
        rs.jit.uniform(1, dtype=object())


def test_pinned_empty_reads_shapes_as_numpy_does():
    assert rs.streaming.pinned_empty(np.array(3)).shape == (3,)
    for bad in (b"3", {2: 0}):
        with pytest.raises(rs.InvalidType):
            rs.streaming.pinned_empty(bad)
    with pytest.raises(rs.InvalidArgument, match="byte order"):
        rs.streaming.pinned_empty(3, ">f4")


def test_shard_names_itself_in_its_messages():
    with pytest.raises(rs.InvalidArgument, match="resident.dist.shard"):
        rs.dist.shard(4.0, ["cpu"])


def test_a_reductions_start_that_a_double_cannot_hold_is_refused():
    add = "long long add(long long a, long long b) { return a + b; }"
    for bad in (2 ** 53 + 1, 2 ** 64 - 1, 10 ** 400, np.int64(2 ** 53 + 1), np.uint64(2 ** 64 - 1)):
        with pytest.raises(rs.InvalidArgument, match="not a double exactly"):
            rs.jit.reduce(add, bad, "add")
    assert (rs.jit.reduce(add, 2 ** 53, "add"))(np.array([1], np.int64)) == 2 ** 53 + 1


def test_a_generator_chains_reduction_without_a_count_is_refused():
    with pytest.raises(rs.InvalidArgument, match="count of values"):
        (rs.jit.uniform(1) | rs.jit.sum())()
    assert (rs.jit.uniform(1) | rs.jit.sum())(n=0) == 0.0


class _Producer:
    """An array whose protocol methods raise what they are given."""

    def __init__(self, exc):
        self.exc = exc

    def __dlpack__(self, *a, **k):
        raise self.exc

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_producer_goes_on_unchanged(exc):
    with pytest.raises(exc):
        rs.sum(_Producer(exc()))
    with pytest.raises(exc):
        rs.op.sqrt()(_Producer(exc()))

    class Interface:
        @property
        def __cuda_array_interface__(self):
            raise exc()
    with pytest.raises(exc):
        rs.from_dlpack(Interface())


def test_a_producers_own_error_is_in_the_message():
    with pytest.raises(rs.InvalidArgument, match="it said: .*no export today"):
        rs.sum(_Producer(ValueError("no export today")))

    class Float32(_Producer):  # a dtype resident takes: the producer's refusal is not a type's
        dtype = np.dtype(np.float32)
    for call in (rs.from_dlpack, rs.sum):
        with pytest.raises(rs.InvalidArgument, match="requires grad") as e:
            call(Float32(BufferError("it requires grad")))
        assert not isinstance(e.value, rs.InvalidType) and "astype" not in str(e.value)


def test_dlpack_arguments_of_the_wrong_kind_are_typed_errors():
    x = rs.to_device(np.ones(3, np.float32))
    with pytest.raises(rs.InvalidType, match="max_version"):
        x.__dlpack__(max_version=1)
    with pytest.raises(rs.InvalidType, match="copy"):
        x.__dlpack__(copy="yes")
    assert rs.sum(x) == 3  # the refusals left x usable


@needs_numba
def test_a_stage_that_calls_itself_is_refused_when_defined():
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    with pytest.raises(rs.CompileError, match="calls itself"):
        rs.fuse(fib)
    with pytest.raises(rs.CompileError, match="calls itself"):
        rs.stage(fib)


@needs_numba
def test_a_stage_fills_its_defaults_as_python_would():
    def f(v, k=2.5):
        return v * k
    np.testing.assert_array_equal(rs.stage(f)(np.ones(2, np.float32)), [2.5, 2.5])
    np.testing.assert_array_equal(rs.stage(lambda v: f(v, 3.0))(np.ones(2, np.float32)), [3.0, 3.0])


@needs_numba
def test_an_output_of_another_type_names_a_conversion_that_works():
    with pytest.raises(rs.InvalidArgument, match="C\\+\\+ text") as e:
        rs.stage(lambda v: v * 2)(np.ones(3, np.int32), out=np.empty(3, np.float64))
    assert "Python stage" in str(e.value)


def test_a_program_as_a_stage_computes_what_its_calls_compute():
    x32, x64 = np.ones(3, np.float32), np.zeros(3)
    for p, x in ((rs.op.mul(1e40) | rs.op.mul(1e-40), x32), (rs.op.add(1e-50) | rs.op.mul(1e50), x64),
                 (rs.op.add(1e300) | rs.op.add(-1e300), x32), (rs.op.minimum(math.nan) | rs.op.sqrt(), x32)):
        want = p(x.copy())
        np.testing.assert_array_equal(rs.stage(p)(x.copy()), want)
        np.testing.assert_array_equal((p | rs.jit.map("float same(float v) { return v; }"))(x.copy())
                                      if x.dtype == np.float32 else want, want)
    with pytest.raises(rs.InvalidArgument, match="program runs on float32 or float64"):
        rs.stage(rs.op.sqrt())(np.array([2, -4, 10], np.int32))


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_numbers_conversion_goes_on_unchanged(exc):
    class Number:  # raises what it is given when converted to a float or an integer
        def __float__(self):
            raise exc()

        def __index__(self):
            raise exc()
    x = rs.empty(4, dtype="float32", device="cpu")
    for call in (lambda: rs.op.add(Number()), lambda: rs.op.affine(1.0, Number()),
                 lambda: rs.random.fill_uniform(x, seed=Number()), lambda: rs.random.fill_uniform(x, 1, low=Number())):
        with pytest.raises(exc):
            call()
    with pytest.raises(rs.InvalidType):
        rs.op.add("one")  # a mismatch that raised nothing is still the typed error


def test_a_conversion_that_failed_once_does_not_make_a_valid_argument_mistyped():
    class Once:  # fails its first conversion only (as an interrupt nanobind cleared would)
        calls = 0

        def __float__(self):
            Once.calls += 1
            if Once.calls == 1:
                raise KeyboardInterrupt
            return 2.0
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(rs.op.add(Once())(x.copy()), np.full(3, 3, np.float32))


def test_flow_array_stage_and_pinned_arguments_of_the_wrong_kind_are_typed():
    for call in (lambda: rs.Flow(streams=1.5), lambda: rs.Flow(device=0), lambda: rs.Flow().add(None, lambda: None),
                 lambda: rs.Flow().add("a", lambda: None, after=["0"]), lambda: rs.Flow().add("a", lambda: None, reads=None),
                 lambda: rs.to_device(np.ones(2, np.float32), device="cpu").to_host(x=1), lambda: rs.stage(3),
                 lambda: rs.stage(b"float f(float v) { return v; }"),
                 lambda: rs.streaming.pinned_empty(4, "float16")):
        with pytest.raises(rs.InvalidType):
            call()
    with pytest.raises(rs.InvalidArgument, match="give 1 to 256"):
        rs.Flow(streams=2 ** 31)
    f = rs.Flow(device="cpu", streams=2)  # still usable
    f.add("a", lambda: None)
    f.run()


def test_a_type_error_raised_inside_a_call_neither_repeats_it_nor_becomes_invalid_type():
    class Scalarish(np.ndarray):  # a size-1 array that converts to a float (NumPy before 2.4)
        def __float__(self):
            return float(np.asarray(self).reshape(-1)[0])
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:
            raise TypeError("other(): incompatible function arguments. The following argument types are supported")
    x = np.array([1.0]).view(Scalarish)
    with pytest.raises(TypeError, match="other") as raised:
        rs.stream(rs.op.add(1), x, out=x, progress=progress)
    assert type(raised.value) is TypeError and calls == [1] and np.asarray(x)[0] == 2.0  # the work ran once, the callback's error unchanged
