"""resident.jit: the seed's three Python functions, unchanged, fused into ONE kernel (Numba compiles
them: LTO-IR linked by nvJitLink on the GPU, native functions called by the compiled loop on the CPU),
C++ text stages, zipped arrays, generators and reductions, against FP64; compile errors typed. The CPU
part runs everywhere (NumPy and numba); the GPU part where a GPU answers and numba-cuda, cupy or torch
are installed."""
import math

import numpy as np
import pytest

import resident as rs
from _support import GPU, gpu, import_or_skip, needs_numba, sum_matches, sum_tolerance



@rs.stage
def func1(v):
    return 1.5 * v + 0.5


@rs.stage
def func2(v):
    return math.sqrt(v * v + 1.0)


@rs.stage
def func3(v):
    return 0.5 * math.sin(v)


master = func1 | func2 | func3


def reference(x):
    v = x.astype(np.float64) * 1.5 + 0.5
    return 0.5 * np.sin(np.sqrt(v * v + 1.0))


def kernels(device):
    return rs.ledger().get(device, {}).get("kernels", 0)


# ---- the CPU backend, with NumPy -------------------------------------------------------------------

@needs_numba
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_seed_functions_fuse_into_one_loop_matching_fp64(dtype):
    x = np.random.default_rng().random(100003).astype(dtype)
    ref = reference(x)
    y = np.full_like(x, -12345.0)
    before = kernels("cpu")
    master(x, out=y)
    assert kernels("cpu") - before == 1
    assert np.max(np.abs(y - ref)) < (1e-6 if dtype == "float32" else 1e-14)
    master(x)  # in place
    assert np.array_equal(x, y)
    # 1000 equal terms of 0.39 (each within a rounding of the map's value y[...] for 1), in dtype: the
    # bound of that fold sees one term go missing.
    term = float(master(np.ones(1, dtype=dtype))[0])
    s = (master | rs.jit.sum())(np.ones(1000, dtype=dtype))
    tol = sum_tolerance(1000, 1000 * term, dtype, 1000 * term * float(np.finfo(dtype).eps) / 2)
    ok, why = sum_matches(s, 1000 * term, tol, term)
    assert ok, why


@needs_numba
def test_python_and_cpp_stages_mix_and_zipped_arrays_feed_a_two_argument_stage():
    a = np.random.default_rng().random(5001)
    b = np.random.default_rng().random(5001)
    out = np.zeros(5001)

    @rs.stage
    def axpy(p, q):
        return 2.0 * p + q

    (axpy | rs.stage("double sq(double v) { return v * v; }") | func3)(a, b, out=out)
    assert np.max(np.abs(out - 0.5 * np.sin((2 * a + b) ** 2))) < 1e-14
    assert (axpy | rs.jit.max())(a, b) == np.max(2 * a + b)


@needs_numba
def test_a_python_reduction_operator_folds_every_value():
    x = np.random.default_rng().standard_normal(30011)

    def absmax(a, b):
        return max(abs(a), abs(b))

    assert (func1 | rs.jit.reduce(absmax, 0.0))(x) == np.max(np.abs(1.5 * x + 0.5))
    assert rs.jit.reduce(absmax, 7.0)(np.zeros(0)) == 7.0


def test_generators_give_resident_random_values():
    got = np.zeros(1003, dtype=np.float32)
    want = np.zeros(1003, dtype=np.float32)
    rs.jit.normal(11, 5, 1.0, 2.0)(out=got)
    rs.random.fill_normal(want, 11, 5, 1.0, 2.0)
    assert np.array_equal(got, want)


@needs_numba
def test_a_generator_feeds_python_stages():
    m = (rs.jit.uniform(3) | func1 | rs.jit.sum())(n=1 << 16)
    assert abs(m / (1 << 16) - 1.25) < 0.01  # the mean of 1.5 u + 0.5 for u uniform in [0, 1)


def test_source_chains_reduce_report_their_kernel_and_count_the_cache():
    # C++ text stages (no Numba): a map over every element, the least and greatest values exactly,
    # the kernel text the chain generates, and the cache's counts moving.
    x = (np.random.default_rng().random(10007) + 0.5).astype(np.float32)
    before = rs.jit.stats()
    assert set(before) == {"compiled", "disk_loads", "memory_hits", "rejected"}
    twice = rs.jit.map("float twice(float v) { return 2.0f * v; }")
    y = np.full_like(x, -12345.0)
    assert twice(x, out=y) is y
    assert np.array_equal(y, 2 * x)
    assert (twice | rs.jit.min())(x) == 2 * x.min()
    assert (twice | rs.jit.max())(x) == 2 * x.max()
    after = rs.jit.stats()
    assert sum(after.values()) > sum(before.values()), "three calls and the cache counted none"
    assert after["compiled"] + after["disk_loads"] >= before["compiled"] + before["disk_loads"] + 1
    src = twice.kernel_source(["float32"], "float32")
    assert "twice" in src and "2.0f * v" in src, src[:400]


def test_compile_errors_and_misuse_are_typed():
    x = np.ones(10, dtype=np.float32)
    with pytest.raises(rs.CompileError, match="stage 1:2"):
        rs.stage("float bad(float v) {\n  return v + nope;\n}")(x)
    with pytest.raises(rs.InvalidArgument, match="takes \\(double\\) but the arrays hold \\(float\\)"):
        rs.stage("double d(double v) { return v; }")(x)
    with pytest.raises(rs.InvalidArgument):
        rs.stage(42)
    # Bounds that differ as given but round to one float32 value: named as given.
    with pytest.raises(rs.InvalidArgument, match="are both 1 as float"):
        rs.jit.uniform(1, low=1.0, high=1.00000001)
    with pytest.raises(rs.InvalidArgument, match="beyond|finite"):
        rs.jit.uniform(1, low=0.0, high=1e300)



@rs.stage
def keeps_its_precision(v):
    return (v + 0.1) - v


@rs.stage
def literals_in_a_tuple(v):
    a, b = 0.1, 2.0
    return ((v + a) - v) * b


@rs.stage(float_literals="float64")
def keeps_double_literals(v):
    return (v + 0.1) - v


@needs_numba
def test_python_stage_misuse_is_typed():
    x = np.ones(10, dtype=np.float32)
    with pytest.raises(rs.ShapeMismatch):
        master(x, out=np.ones(11, dtype=np.float32))
    with pytest.raises(rs.InvalidArgument):
        master(np.ones(10, dtype=np.int8))


@needs_numba
def test_float_literals_in_tuples_are_float32_too_and_float64_keeps_them_double():
    x = np.array([1e8, 1.0, 3.0, 0.0, -2.5e7], dtype=np.float32)
    y = np.full_like(x, -12345.0)
    literals_in_a_tuple(x, out=y)
    assert np.array_equal(y, ((x + 0.1) - x) * 2.0), y
    keeps_double_literals(x, out=y)
    wide = x.astype(np.float64)
    assert np.array_equal(y, ((wide + 0.1) - wide).astype(np.float32)), y


def test_literals_float32_cannot_hold_stay_double_and_a_bad_mode_is_refused():
    from resident._rewrite import _as_float32
    assert type(_as_float32(1e39)) is float and type(_as_float32(1e-40)) is float
    assert type(_as_float32(0.5)) is np.float32 and type(_as_float32(-0.0)) is np.float32
    assert [type(c) for c in _as_float32((0.5, (1e39, 2.0)))[1]] == [float, np.float32]
    with pytest.raises(rs.InvalidArgument, match="float_literals"):
        rs.stage(lambda v: v, float_literals="float16")


@needs_numba
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_literals_take_the_values_precision_as_numpy_does(dtype):
    # NumPy 2 (NEP 50): 0.1 beside float32 values is float32, so (v + 0.1) - v loses 0.1 at v = 1e8;
    # in float64 it keeps it. The stage gives NumPy's values exactly, in either precision.
    x = np.array([1e8, 1.0, 3.0, 0.0, -2.5e7], dtype=dtype)
    y = np.full_like(x, -12345.0)
    keeps_its_precision(x, out=y)
    want = (x + 0.1) - x
    assert want.dtype == np.dtype(dtype)
    assert np.array_equal(y, want), (y, want)


def scaled(v, k=0.1, shift=1.0):
    return (v + k) - v + shift


@needs_numba
@pytest.mark.parametrize("device", ["cpu"] + (["cuda:0"] if GPU else []))
def test_parameters_past_the_values_take_their_defaults(device):
    # As Python would call it: scaled(v) with k and shift at their defaults (0.1 a float32 beside
    # float32 values, as NumPy 2 has it); scaled(v, w) with w for k.
    x = np.array([1e8, 1.0, 3.0, 0.0], dtype=np.float32)
    w = np.array([0.5, 0.25, 2.0, -1.0], dtype=np.float32)
    a, b = rs.to_device(x, device=device), rs.to_device(w, device=device)
    got = rs.stage(scaled)(a, out=rs.empty(4, "float32", device=device))
    assert np.array_equal(got.to_host(), (x + np.float32(0.1)) - x + np.float32(1.0))
    got = rs.stage(scaled)(a, b, out=rs.empty(4, "float32", device=device))
    assert np.array_equal(got.to_host(), (x + w) - x + np.float32(1.0))
    with pytest.raises(rs.InvalidType, match="1 to 3 parameters but receives 4"):
        rs.stage(scaled)(a, b, a, b)


# ---- the GPU: Numba's LTO-IR linked into the kernel ------------------------------------------------



@gpu
def test_the_seed_functions_are_one_kernel_over_a_cupy_array():
    cp = import_or_skip("cupy")
    import_or_skip("numba.cuda")
    x = cp.random.random(1 << 22, dtype=cp.float32)
    ref = reference(cp.asnumpy(x))
    before = kernels("cuda:0")
    master(x)
    assert kernels("cuda:0") - before == 1
    assert np.max(np.abs(cp.asnumpy(x) - ref)) < 1e-5


@gpu
def test_the_seed_functions_are_one_kernel_over_a_torch_tensor_and_reduce():
    torch = import_or_skip("torch")
    import_or_skip("numba.cuda")
    x = torch.rand(1 << 20, device="cuda", dtype=torch.float64)
    ref = reference(x.cpu().numpy())
    y = torch.empty_like(x)
    master(x, out=y)
    assert np.max(np.abs(y.cpu().numpy() - ref)) < 1e-12
    # The float64 fold of the terms y holds (>= 0.39 each, one rounding apart in another kernel).
    terms = y.cpu().numpy()
    abs_sum = float(np.abs(terms).sum())
    tol = sum_tolerance(terms.size, abs_sum, np.float64, abs_sum * float(np.finfo(np.float64).eps) / 2)
    ok, why = sum_matches((master | rs.jit.sum())(x), math.fsum(terms), tol, 0.39)
    assert ok, why


@gpu
def test_float_literals_take_the_values_precision_on_the_gpu_too():
    import_or_skip("numba.cuda")
    for dtype in ("float32", "float64"):
        h = np.array([1e8, 1.0, 3.0, 0.0, -2.5e7] * 1000, dtype=dtype)
        x = rs.to_device(h, device="cuda:0")
        keeps_its_precision(x)
        assert np.array_equal(np.asarray(x.to_host()), (h + 0.1) - h), dtype


@pytest.mark.parametrize("device", ["cpu"] + (["cuda:0"] if GPU else []))
def test_a_repeated_call_takes_the_fast_path_with_the_values_of_the_first(device):
    """The second call of a chain finds the kernel the first one built, under the key the fast path
    computes (dtypes, device), for each dtype; a program object keeps its compiled chain."""
    from resident import _core
    for dtype, t in (("float32", "float"), ("float64", "double")):
        chain = rs.jit.map(f"{t} rs_f({t} v) {{ return 2 * v + 1; }}", "rs_f")
        h = np.arange(1000, dtype=dtype)
        x = rs.to_device(h, device=device)
        y = rs.empty(1000, dtype=dtype, device=device)
        chain(x, out=y)
        assert _core._jit_dispatch(chain._built, (x,), y, None, False) is None  # found, and ran again
        np.testing.assert_array_equal(y.to_host(), 2 * h + 1)
    p = rs.op.mul(3.0) | rs.op.add(1)
    x = rs.to_device(np.ones(10, dtype="float32"), device=device)
    p(x)
    p(x)
    np.testing.assert_array_equal(x.to_host(), np.full(10, 13, dtype="float32"))
    if p.engine == "compiled":
        assert "float32" in p.__dict__


def _negated_unless_small(v):
    flag = not (v > 0.5)
    return v * 2.0 if flag else -v


@needs_numba
def test_stages_follow_pythons_own_rules_for_ties_and_not():
    # min keeps the first of equal values (-0.0 against 0.0 keeps 0.0, as Python's min does), and `not`
    # of a comparison is a logical not, not a bitwise one.
    x = np.array([0.0, -0.0, 1.0, -2.0], np.float32)
    got = rs.stage(lambda v: min(v, -v))(rs.to_device(x, device="cpu")).to_host()
    want = np.array([min(v, -v) for v in x], np.float32)
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    y = np.linspace(-1, 1, 9).astype(np.float32)
    got = rs.stage(_negated_unless_small)(rs.to_device(y, device="cpu")).to_host()
    np.testing.assert_array_equal(got, np.array([_negated_unless_small(v) for v in y], np.float32))


def test_the_uniform_generator_takes_its_offset():
    got, want = np.zeros(1003, np.float32), np.zeros(1003, np.float32)
    rs.jit.uniform(11, 5, -1.0, 3.0)(out=got)
    rs.random.fill_uniform(want, 11, 5, -1.0, 3.0)
    np.testing.assert_array_equal(got, want)
