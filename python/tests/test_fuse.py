"""rs.fuse: the seed's code as written (a master function calling three undecorated functions) runs as
ONE kernel, in place or into out=, reduces with | rs.jit.sum(), zips several arrays; against FP64."""
import math

import numpy as np
import pytest

import resident as rs
from _support import gpu, import_or_skip


def func1(d):
    return 1.5 * d + 0.5


def func2(d):
    return math.sqrt(d * d + 1.0)


def func3(d):
    return 0.5 * math.sin(d)


def master(d):
    d = func1(d)
    d = func2(d)
    return func3(d)


def combine(a, b):
    return func3(func1(a) - b)


def reference(x):
    v = x.astype(np.float64) * 1.5 + 0.5
    return 0.5 * np.sin(np.sqrt(v * v + 1.0))


def kernels(device):
    return rs.ledger().get(device, {}).get("kernels", 0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_seed_code_as_written_is_one_kernel_in_place_and_into_out(dtype):
    m = rs.fuse(master)
    x = np.random.default_rng(1).random(50021).astype(dtype)
    ref = reference(x)
    y = np.full_like(x, -12345.0)
    before = kernels("cpu")
    m(x, out=y)
    assert kernels("cpu") - before == 1
    assert np.max(np.abs(y - ref)) < (1e-6 if dtype == "float32" else 1e-14)
    m(x)
    assert np.array_equal(x, y)
    z = np.ones(1000, dtype=dtype)
    s = (m | rs.jit.sum())(z)
    assert abs(s - 1000 * reference(np.ones(1, dtype=dtype))[0]) < 1e-3


def test_fuse_is_a_decorator_and_zips_several_arrays():
    @rs.fuse
    def decorated(d):
        return func2(func1(d))

    a = np.random.default_rng(2).random(4099)
    b = np.random.default_rng(3).random(4099)
    out = np.zeros_like(a)
    rs.fuse(combine)(a, b, out=out)
    assert np.max(np.abs(out - 0.5 * np.sin(1.5 * a + 0.5 - b))) < 1e-14
    decorated(a, out=out)
    assert np.max(np.abs(out - np.sqrt((1.5 * a + 0.5) ** 2 + 1))) < 1e-14
    with pytest.raises(rs.InvalidType):
        rs.fuse(math.sin)


@gpu
def test_the_seed_code_as_written_on_a_gpu_array():
    import_or_skip("numba.cuda")
    m = rs.fuse(master)
    h = np.random.default_rng(4).random(1 << 20).astype(np.float32)
    x = rs.to_device(h)
    y = rs.empty(h.size, dtype="float32")
    before = kernels("cuda:0")
    m(x, out=y)
    assert kernels("cuda:0") - before == 1
    assert np.max(np.abs(y.to_host() - reference(h))) < 1e-6
    assert abs((m | rs.jit.sum())(x) - reference(h).sum()) < 1e-3 * h.size


def _callee(d):
    return d * 0.1 + 0.3


def _calls_callee(d):
    return _callee(d)


def test_the_literals_of_a_called_function_are_float32_for_float32_values():
    # As those of the fused function itself (NEP 50): a callee's 0.1 made float64 rounds differently.
    x = (np.random.default_rng(2).random(4099) * 6 - 3).astype(np.float32)
    got = rs.fuse(_calls_callee)(rs.to_device(x.copy(), device="cpu")).to_host()
    np.testing.assert_array_equal(got, x * np.float32(0.1) + np.float32(0.3))
