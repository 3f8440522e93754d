"""Misuse found by a seventh sweep: a function copied with functools.wraps / update_wrapper ran the
original's compiled stage (silently its values), Numba's failures outside its error classes came out
as bare ValueError / AssertionError, matmul's alpha = 0 read A on some algorithms, a DLPack tensor of
more than 32 dimensions came back as a wrong object, and dtype refusals differed in class by path."""
import decimal
import functools
import types

import numpy as np
import pytest

import resident as rs
from _support import GPU, needs_numba  # Python stages need Numba; the other cases do not

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])
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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_with_alpha_zero_reads_neither_input_on_any_algorithm(device, dtype):
    rng = np.random.default_rng()  # fresh inputs each run
    m, k, n = (int(v) for v in rng.integers(1, 40, 3))
    a = rng.standard_normal((m, k)).astype(dtype)
    a[rng.integers(m), rng.integers(k)] = np.inf  # read, it would make NaN of its row
    a[rng.integers(m), rng.integers(k)] = np.nan
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    beta = float(rng.uniform(-2, 2))
    want = (np.float64(beta) * c.astype(np.float64)).astype(dtype)  # FP64, rounded once as BLAS does
    algos = (["naive", "blocked", "vendor", "auto"] if device == "cpu" else
             ["naive", "shared", "tuned", "vendor", "auto"] if dtype == np.float32 else ["vendor", "auto"])
    for algo in algos:
        out = rs.to_device(c, device=device)
        rs.matmul(rs.to_device(a, device=device), rs.to_device(b, device=device), out=out, algo=algo, alpha=0.0,
                  beta=beta)
        got = out.to_host()
        assert np.isfinite(got).all(), algo
        np.testing.assert_allclose(got, want, rtol=np.finfo(dtype).eps, atol=0, err_msg=algo)


def test_a_tensor_of_more_than_32_dimensions_is_refused_where_it_is_taken_in():
    a = np.zeros((1,) * 40 + (4,), np.float32)
    for take in (rs.from_dlpack, lambda t: rs.to_device(t, device="cpu")):
        with pytest.raises(rs.InvalidArgument, match="41 dimensions; resident's arrays have at most 32"):
            take(a)
    assert rs.to_device(np.zeros((1,) * 31 + (4,), np.float32), device="cpu").to_host().shape == (1,) * 31 + (4,)


@pytest.mark.parametrize("make", [
    lambda: rs.empty(3, dtype="float16"),
    lambda: rs.from_dlpack(np.zeros(3, np.float16)),
    lambda: rs.to_device(np.zeros(3, bool), device="cpu"),
    lambda: rs.to_device(np.zeros(3, np.complex64), device="cpu"),
])
def test_an_element_type_resident_has_no_arrays_of_is_a_type_error_on_every_path(make):
    with pytest.raises(rs.InvalidType, match="float32, float64, int32, int64, uint32 or uint64"):
        make()


@needs_numba
@pytest.mark.parametrize("device", DEVICES)
def test_arrays_of_two_shapes_in_one_element_wise_call_are_refused(device):
    # A (2, 3) array beside a (3, 2) one paired elements NumPy refuses to pair; a 1-D array of the same
    # count stands for any shape (its elements in C order).
    a = rs.to_device(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    b = rs.to_device(np.arange(6, dtype=np.float32).reshape(3, 2), device=device)
    flat = rs.to_device(np.arange(6, dtype=np.float32), device=device)
    add = rs.stage(lambda x, y: x + y)
    for call in (lambda: add(a, b, out=rs.empty((2, 3), device=device)),
                 lambda: add(a, b, out=rs.empty(6, device=device)),
                 lambda: rs.op.sqrt()(a, out=rs.empty((3, 2), device=device)),
                 lambda: (add | rs.jit.sum())(a, b),
                 lambda: rs.stream(add, [a.to_host(), b.to_host()], out=np.empty((2, 3), np.float32), device=device)):
        with pytest.raises(rs.ShapeMismatch, match=r"shapes? \((2, 3|3, 2)\) and"):
            call()
    np.testing.assert_array_equal(a.to_host(), np.arange(6, dtype=np.float32).reshape(2, 3))  # untouched
    got = add(a, flat, out=rs.empty(6, device=device)).to_host()
    np.testing.assert_array_equal(got, 2 * np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(rs.op.sqrt()(a, out=rs.empty(6, device=device)).to_host(),
                                  np.sqrt(np.arange(6, dtype=np.float32)))


@pytest.mark.parametrize("device", DEVICES)
def test_a_macro_a_stage_defines_ends_with_that_stage(device):
    # `#define sqrtf(x) (x)` in a C++ stage made the built-in square root after it the identity.
    x = rs.to_device(np.array([4.0, 9.0], np.float32), device=device)
    chain = rs.stage("#define sqrtf(x) (x)\n#define K 2.0f\nfloat twice(float v) { return v * K; }") | rs.op.sqrt()
    np.testing.assert_allclose(chain(x, out=rs.empty(2, device=device)).to_host(), np.sqrt([8.0, 18.0]), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_define_a_stage_skips_or_comments_out_leaves_the_macro_as_it_was(device):
    # RESIDENT_HD: the prelude's macro for stage text on both targets; a header's `#ifndef` idiom or a
    # commented-out `#define` must not take it from the stages after.
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    guarded = rs.stage("#ifndef RESIDENT_HD\n#define RESIDENT_HD\n#endif\n"
                       "RESIDENT_HD float twice(float v) { return 2.0f * v; }")
    commented = rs.stage("/*\n#define RESIDENT_HD\n*/\nfloat same(float v) { return v; }")
    uses = rs.stage("RESIDENT_HD float plus_one(float v) { return v + 1.0f; }")
    got = (guarded | commented | uses)(x, out=rs.empty(2, device=device)).to_host()
    np.testing.assert_array_equal(got, np.array([3.0, 5.0], np.float32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("text", ["#undef RESIDENT_HD\n#define RESIDENT_HD\nfloat f(float v) { return v; }",
                                  "#define RESIDENT_HD __host__\nfloat f(float v) { return v; }",
                                  "#ifdef RESIDENT_HD\n#undef RESIDENT_HD\n#endif\nfloat f(float v) { return v; }"])
def test_a_stage_that_changes_a_macro_defined_before_it_is_refused_at_that_line(device, text):
    # Without push_macro (NVRTC) the macro could not be restored for the stages after: refused, not leaked.
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    with pytest.raises(rs.CompileError, match=r"stage 1(:[12]:|\([12]\)).*#(undef|define)s RESIDENT_HD, a macro defined"):
        rs.stage(text)(x)
    np.testing.assert_array_equal(x.to_host(), [1.0, 2.0])
    # A stage's own macros, redefined in it, end with it: the next stage may define the name again.
    first = rs.stage("#define K 3.0f\nfloat g(float v) { return v * K; }\n#undef K\n#define K 5.0f")
    then = rs.stage("#define K 2.0f\nfloat h(float v) { return v + K; }")
    np.testing.assert_array_equal((first | then)(x).to_host(), [5.0, 8.0])
