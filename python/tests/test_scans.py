"""Inclusive scans from Python: resident.cumsum, cummin and cummax over any library's array, on every
backend. Sums are held to their error bound against an FP64 reference (each prefix separately, the
bound tight enough to see one term go missing), integer sums and the extremes to equality with NumPy;
each misuse is refused before any work, leaving the output as it was."""
import numpy as np
import pytest

import resident as rs
from _support import DEVICES, gpu, import_or_skip, rng, sum_tolerance  # noqa: F401 (rng: a fixture)

SCANS = {"cumsum": rs.cumsum, "cummin": rs.cummin, "cummax": rs.cummax}


def _on(device, host):
    return rs.to_device(host, device=device)


def _back(x):
    return x.to_host() if isinstance(x, rs.Array) else np.asarray(x)


def _check_prefix_sums(got, values, dtype):
    """Each prefix within the bound of a sum of its terms folded in dtype in any order."""
    exact = np.cumsum(values.astype(np.float64))
    abs_sums = np.cumsum(np.abs(values.astype(np.float64)))
    smallest = float(np.min(np.abs(values)))
    for i in (0, 1, 2, len(values) // 3, len(values) - 2, len(values) - 1):
        tol = sum_tolerance(i + 1, abs_sums[i], dtype)
        assert 2 * tol < smallest, f"the tolerance {tol} at {i} cannot see a term of {smallest} go missing"
        assert abs(float(got[i]) - exact[i]) <= tol, f"prefix {i}: {got[i]} against {exact[i]} (tolerance {tol})"
    tols = np.array([sum_tolerance(i + 1, abs_sums[i], dtype) for i in range(len(values))])
    bad = np.flatnonzero(np.abs(got.astype(np.float64) - exact) > tols)
    assert bad.size == 0, f"{bad.size} prefixes outside their bound, the first at {bad[0]}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, n", [(np.float32, 1501), (np.float64, (1 << 17) + 3)])
def test_cumsum_of_floats_holds_every_prefix_to_its_bound(device, dtype, n, rng):
    values = (rng.random(n) * 0.5 + 0.5) * np.where(rng.random(n) < 0.3, -1, 1)
    values = values.astype(dtype)
    got = _back(rs.cumsum(_on(device, values)))
    assert got.dtype == dtype and got.shape == (n,)
    _check_prefix_sums(got, values, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_cumsum_into_float64_adds_float32_values_in_double(device):
    values = np.linspace(-2, 2, (1 << 16) + 1, dtype=np.float32) + np.float32(1e-3)
    out = rs.empty(values.size, "float64", device)
    assert rs.cumsum(_on(device, values), out) is out
    _check_prefix_sums(out.to_host(), values, np.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, low, high", [(np.int32, -2**31, 2**31 - 1), (np.uint32, 0, 2**32 - 1),
                                              (np.int64, -2**40, 2**40), (np.uint64, 0, 2**50)])
def test_cumsum_of_integers_is_exact_in_64_bits(device, dtype, low, high, rng):
    values = rng.integers(low, high, 100_003, dtype=dtype)
    got = rs.cumsum(_on(device, values))
    want = np.cumsum(values, dtype=np.uint64 if dtype in (np.uint32, np.uint64) else np.int64)
    assert got.dtype == want.dtype.name
    np.testing.assert_array_equal(_back(got), want)


@pytest.mark.parametrize("device", DEVICES)
def test_cumsum_into_the_inputs_unsigned_type_wraps_as_numpy(device):
    values = np.full(1000, 2**31 + 5, np.uint32)
    out = rs.empty(1000, "uint32", device)
    rs.cumsum(_on(device, values), out)
    np.testing.assert_array_equal(out.to_host(), np.cumsum(values, dtype=np.uint32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_cummin_and_cummax_equal_numpys_accumulate(device, dtype, rng):
    values = (rng.integers(0, 1_000_000, 50_001) - (0 if dtype in (np.uint32, np.uint64) else 500_000)).astype(dtype)
    x = _on(device, values)
    np.testing.assert_array_equal(_back(rs.cummin(x)), np.minimum.accumulate(values))
    np.testing.assert_array_equal(_back(rs.cummax(x)), np.maximum.accumulate(values))


@pytest.mark.parametrize("device", DEVICES)
def test_a_nan_propagates_through_every_scan(device):
    values = np.array([3.0, 1.0, np.nan, 0.5, 7.0], np.float32)
    x = _on(device, values)
    for name, want in (("cumsum", np.cumsum(values)), ("cummin", np.minimum.accumulate(values)),
                       ("cummax", np.maximum.accumulate(values))):
        np.testing.assert_array_equal(_back(SCANS[name](x)), want, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_shapes_and_lengths(device):
    values = np.arange(1, 13, dtype=np.float64).reshape(3, 4)
    x = _on(device, values)
    flat = rs.cumsum(x)                                   # NumPy's axis=None: C order, 1-D
    assert flat.shape == (12,)
    np.testing.assert_array_equal(flat.to_host(), np.cumsum(values))
    assert rs.cummax(x, x) is x                           # exactly in place
    np.testing.assert_array_equal(x.to_host(), values)
    shaped = rs.empty((3, 4), "float64", device)
    rs.cumsum(x, shaped)
    np.testing.assert_array_equal(shaped.to_host(), np.cumsum(values).reshape(3, 4))
    for n in (0, 1, 2, 31, 32, 33, 1023, 1025):
        v = np.arange(n, dtype=np.int32) - 7
        np.testing.assert_array_equal(_back(rs.cumsum(_on(device, v))), np.cumsum(v, dtype=np.int64))
        if n:
            np.testing.assert_array_equal(_back(rs.cummin(_on(device, v))), np.minimum.accumulate(v))


def test_other_libraries_arrays_on_the_cpu():
    values = np.arange(10, dtype=np.float32) * 0.5
    out = np.zeros(10, np.float32)
    assert rs.cumsum(values, out) is out
    np.testing.assert_array_equal(out, np.cumsum(values))
    torch = import_or_skip("torch")
    t = torch.arange(10, dtype=torch.int32)
    np.testing.assert_array_equal(rs.cummax(t).to_host(), np.maximum.accumulate(t.numpy()))
    tout = torch.zeros(10, dtype=torch.int64)
    rs.cumsum(t, tout)
    np.testing.assert_array_equal(tout.numpy(), np.cumsum(t.numpy(), dtype=np.int64))


@pytest.mark.parametrize("name", list(SCANS))
def test_misuse_is_refused_before_any_work(name):
    scan = SCANS[name]
    x = rs.to_device(np.arange(8, dtype=np.float32), device="cpu")
    out = np.full(8, -1.0, np.float32)
    bad = [
        (rs.InvalidArgument, lambda: scan(x, np.zeros(8, np.int32))),             # another type
        (rs.ShapeMismatch, lambda: scan(x, np.zeros(7, np.float32))),             # another length
        (rs.ShapeMismatch, lambda: scan(np.zeros((2, 4), np.float32), np.zeros((4, 2), np.float32))),  # another shape
        (rs.InvalidArgument, lambda: scan(x, np.zeros((2, 5), np.float32)[:, :4])),  # strided
        (rs.InvalidType, lambda: scan(np.zeros(8, np.float16))),                  # an element type not offered
        (rs.InvalidType, lambda: scan(x, out, axis=0)),                          # no axis: C order, as axis=None
        (rs.InvalidType, lambda: scan("x")),
        (rs.InvalidArgument, lambda: scan(x, out, stream=5)),                    # a CPU array takes no stream
        (rs.InvalidType, lambda: scan(rs.dist.shard(np.zeros(8, np.float32), ["cpu", "cpu"]))),
    ]
    if name != "cumsum":
        bad.append((rs.InvalidArgument, lambda: scan(x, np.zeros(8, np.float64))))  # the extremes keep their type
    for error, call in bad:
        with pytest.raises(error):
            call()
        assert (out == -1.0).all()
    ro = np.full(8, -1.0, np.float32)
    ro.flags.writeable = False
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        scan(x, ro)
    buf = np.arange(16, dtype=np.float32)
    with pytest.raises(rs.InvalidArgument, match="overlaps"):
        scan(buf[0:8], buf[4:12])
    np.testing.assert_array_equal(buf, np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(_back(scan(x)), {"cumsum": np.cumsum, "cummin": np.minimum.accumulate,
                                                   "cummax": np.maximum.accumulate}[name](np.arange(8, dtype=np.float32)))


@gpu
def test_the_backends_agree_and_a_device_scan_moves_nothing(rng):
    values = rng.integers(-1000, 1000, 1 << 20).astype(np.int32)
    before = rs.ledger().get("cuda:0", {})
    x = rs.to_device(values, device="cuda:0")
    up = rs.ledger()["cuda:0"]
    s, lo, hi = rs.cumsum(x), rs.cummin(x), rs.cummax(x)
    after = rs.ledger()["cuda:0"]
    assert after.get("h2d_copies", 0) == up.get("h2d_copies", 0) and after.get("d2h_copies", 0) == up.get("d2h_copies", 0)
    assert after.get("h2d_copies", 0) == before.get("h2d_copies", 0) + 1
    c = rs.to_device(values, device="cpu")
    for got, ref in ((s, rs.cumsum(c)), (lo, rs.cummin(c)), (hi, rs.cummax(c))):
        np.testing.assert_array_equal(got.to_host(), ref.to_host())
