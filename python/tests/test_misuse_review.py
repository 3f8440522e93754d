"""Misuse that must end in a typed resident error or an exact value, never silent zeros, a rounded
integer, an infinity standing for "no values", a loop until memory runs out or a path made from a repr."""
import os
import re

import numpy as np
import pytest

import resident as rs
from _support import gpu, needs_numba


def _index_error(v):
    a = [1.0, 2.0]
    return a[int(v) + 5] + v


def _key_error(v):
    return {1.0: 2.0}[v + 100.0]


def _negative_size(v):
    return np.empty(int(v) - 10).size + v


def _twice(v):
    return 2.0 * v


def _pair(a, b):
    return [a][int(b) + 5]


ROUTES = {
    "stage": lambda f, x: rs.stage(f)(x),
    "stage into out": lambda f, x: rs.stage(f)(x, out=np.empty_like(x)),
    "stage | sum": lambda f, x: (rs.stage(f) | rs.jit.sum())(x),
    "stage | max": lambda f, x: (rs.stage(f) | rs.jit.max())(x),
    "after a translated stage": lambda f, x: (rs.stage(_twice) | rs.stage(f))(x),
    "generator | stage | min": lambda f, x: (rs.jit.uniform(1) | rs.stage(f) | rs.jit.min())(n=x.size),
    "generator | stage into out": lambda f, x: (rs.jit.uniform(1) | rs.stage(f))(out=np.empty_like(x)),
    "fuse": lambda f, x: rs.fuse(f)(x),
    "stream": lambda f, x: rs.stream(f, x, device="cpu"),
    "stream reduce": lambda f, x: rs.stream(f, x, reduce="sum", device="cpu"),
    "dist.apply": lambda f, x: rs.dist.apply(rs.stage(f), rs.dist.shard(x, ["cpu", "cpu"])),
    "dist.sum": lambda f, x: rs.dist.sum(rs.dist.shard(x, ["cpu", "cpu"]), rs.stage(f)),
}


@needs_numba
@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("fn", [_index_error, _key_error, _negative_size], ids=lambda f: f.__name__)
def test_a_stage_raising_at_run_time_is_a_stage_error_on_every_route(fn, route):
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(rs.StageError):
        ROUTES[route](fn, x)
    # The next call of a stage that does not raise is not blamed for the earlier one.
    np.testing.assert_array_equal(rs.stage(_twice)(x.copy()), 2 * x)


def _raises(v):
    if v > 2.0:
        raise ValueError("too large")
    return v


@needs_numba
@gpu
@pytest.mark.parametrize("fn", [_raises, _index_error, _key_error, _negative_size], ids=lambda f: f.__name__)
def test_a_stage_that_could_raise_on_the_gpu_is_refused_before_it_runs(fn):
    # A GPU kernel cannot hand an exception back: what could raise there does not compile, said as a
    # CompileError before any work, never values computed past the raise.
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(rs.CompileError):
        rs.stream(fn, x, device="cuda:0")
    with pytest.raises(rs.CompileError):
        rs.stage(fn)(rs.to_device(x, "cuda:0"))
    np.testing.assert_array_equal(rs.stream(_twice, x.copy(), device="cuda:0"), 2 * x)


@needs_numba
def test_a_reduction_operator_raising_and_zipped_inputs_are_stage_errors():
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(rs.StageError):
        rs.stage(_pair)(x, x.copy(), out=np.empty_like(x))
    with pytest.raises(rs.StageError):
        (rs.stage(_twice) | rs.jit.reduce(_pair, 0.0))(x)


def test_integer_reductions_are_exact_python_ints():
    big = np.array([2**53 + 1], np.int64)
    assert rs.sum(big) == 2**53 + 1 and isinstance(rs.sum(big), int)
    assert rs.min(big) == 2**53 + 1 and rs.max(big) == 2**53 + 1
    top = np.array([2**64 - 1, 5], np.uint64)
    assert rs.max(top) == 2**64 - 1 and isinstance(rs.max(top), int)
    assert rs.min(np.array([-(2**63), 0], np.int64)) == -(2**63)
    assert rs.sum(np.array([2**62, 2**62 - 1, 1], np.int64)) == np.array([2**62, 2**62 - 1, 1], np.int64).sum()
    assert rs.sum(np.array([3, 4], np.int32)) == 7 and isinstance(rs.sum(np.array([3], np.int32)), int)
    # A sum wraps modulo 2^64 past the 64-bit range, as NumPy's does.
    wraps = np.array([2**63 - 1, 2], np.int64)
    assert rs.sum(wraps) == int(wraps.sum())
    assert isinstance(rs.sum(np.ones(3, np.float32)), float)


@pytest.mark.parametrize("what", ["min", "max"])
def test_the_least_or_greatest_of_no_values_is_refused_everywhere(what):
    empty = np.zeros(0, np.float32)
    with pytest.raises(rs.InvalidArgument):
        getattr(rs, what)(empty)
    with pytest.raises(rs.InvalidArgument, match=what):
        (rs.stage("float f(float v) { return v; }") | getattr(rs.jit, what)())(empty)
    with pytest.raises(rs.InvalidArgument, match=what):
        rs.stream(rs.op.mul(2.0), empty, reduce=what)
    with pytest.raises(rs.InvalidArgument, match=what):
        (rs.jit.uniform(1) | getattr(rs.jit, what)())(n=0)
    assert (rs.jit.uniform(1) | rs.jit.sum())(n=0) == 0.0  # a sum of nothing is 0
    assert rs.stream(rs.op.mul(2.0), empty, reduce="sum") == 0.0


def test_shapes_are_read_by_len_and_capped_and_bool_is_no_shape():
    class Endless:
        def __len__(self):
            raise RuntimeError("no length")

        def __getitem__(self, i):
            return 2

    with pytest.raises((rs.InvalidType, rs.InvalidArgument), match="no length"):
        rs.empty(Endless())

    class Long:
        def __len__(self):
            return 10**6

        def __getitem__(self, i):
            return 1

    with pytest.raises(rs.InvalidArgument, match="dimensions"):
        rs.empty(Long())
    with pytest.raises((rs.InvalidType, rs.InvalidArgument)):
        rs.empty(True)
    with pytest.raises((rs.InvalidType, rs.InvalidArgument)):
        rs.empty((2, False))
    assert rs.empty([2, 3]).shape == (2, 3) and rs.empty(np.int64(4)).shape == (4,)
    assert rs.empty((1,) * 32).shape == (1,) * 32


def test_profile_paths_progress_and_chunk_are_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with rs.profile() as p:
        rs.sum(np.ones(4, np.float32))
    for bad in (None, 3, 1.5):
        with pytest.raises(rs.InvalidType):
            p.to_json(bad)
    with pytest.raises(rs.InvalidArgument, match="NUL"):
        p.to_json(str(tmp_path / "a\0b.json"))
    assert sorted(os.listdir(tmp_path)) == []  # nothing written under a made-up name
    p.to_json(os.fsencode(tmp_path / "b.json"))
    p.to_json(tmp_path / "c.json")
    assert sorted(os.listdir(tmp_path)) == ["b.json", "c.json"]

    x = np.ones(64, np.float32)
    for bad in ("yes", 3):
        with pytest.raises(rs.InvalidType, match="progress"):
            rs.stream(rs.op.mul(2.0), x, progress=bad)
    np.testing.assert_array_equal(rs.stream(rs.op.mul(2.0), x, chunk=np.int64(3), depth=np.int32(2)), 2 * x)
    with pytest.raises(rs.InvalidArgument, match="chunk"):
        rs.stream(rs.op.mul(2.0), x, chunk=np.bool_(True))


def test_the_guide_says_a_stage_that_never_returns_hangs_the_call():
    guide = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")
    with open(guide, encoding="utf-8") as f:
        text = f.read()
    assert "never returns" in text


def test_a_dtype_no_kernel_takes_is_named_with_what_to_do():
    for dtype in (np.longdouble, np.complex128, np.float16):
        if np.dtype(dtype).itemsize == 8 and np.dtype(dtype).kind == "f":
            continue  # a platform whose long double is a double
        with pytest.raises(rs.InvalidType, match="astype|float32"):
            rs.sum(np.ones(3, dtype))
    with pytest.raises(rs.InvalidType, match="list of resident.op"):
        rs.program([1])
    with pytest.raises(rs.InvalidType, match="list of resident.op.*'bogus': 1"):
        rs.program(rs.op.sqrt(), bogus=1)
    with pytest.raises(rs.InvalidType, match="given \\(\\) and \\{'ops': 5\\}"):
        rs.program(ops=5)
    assert len(rs.program([rs.op.sqrt(), rs.op.add(1)])) == 2


def test_a_generator_fill_refuses_a_count_or_device_the_array_contradicts():
    u = rs.jit.uniform(1)
    y = np.empty(2, np.float32)
    with pytest.raises(rs.InvalidArgument, match="n=1000"):
        u(out=y, n=1000)
    with pytest.raises(rs.InvalidArgument):
        u(out=y, device="bogus")
    u(out=y, n=2, device="cpu")
    assert ((0 <= y) & (y < 1)).all()


@needs_numba
def test_chains_take_dlpack_capsules_as_from_dlpack_does():
    x = np.ones(3)
    rs.stage(lambda v: v + 1)(x.__dlpack__())
    np.testing.assert_array_equal(x, [2, 2, 2])
    assert (rs.stage(lambda v: v + 1) | rs.jit.sum())(np.ones(3).__dlpack__()) == 6


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


def test_argument_mistakes_on_programs_chains_and_kernel_source_are_typed():
    p = rs.op.sqrt() | rs.op.sqrt()
    with pytest.raises(rs.InvalidType, match="bogus"):
        p.sum(np.ones(3), bogus=1)
    with pytest.raises(rs.InvalidType, match="one array"):
        p.sum()
    assert rs.op.sqrt().sum(np.full(3, 4.0)) == 6.0
    c = rs.stage("double f(double v) { return v; }")
    with pytest.raises(rs.InvalidType, match="bogus"):
        c(np.ones(3), bogus=1)
    for bad in ("bogus", "float16"):
        with pytest.raises(rs.InvalidType, match="kernel_source"):
            c.kernel_source([bad], "float64")


@needs_numba
def test_an_interrupt_while_an_attribute_is_looked_up_goes_on_unchanged():
    class Stream:
        @property
        def __cuda_stream__(self):
            raise KeyboardInterrupt

    class Array:
        @property
        def __dlpack__(self):
            raise KeyboardInterrupt
    for call in (lambda: rs.stage(lambda v: v)(np.ones(3), stream=Stream()), lambda: rs.sum(np.ones(3), stream=Stream()),
                 lambda: rs.sum(Array()), lambda: rs.stage(lambda v: v)(Array())):
        with pytest.raises(KeyboardInterrupt):
            call()
    assert rs.sum(np.ones(3)) == 3  # usable after
