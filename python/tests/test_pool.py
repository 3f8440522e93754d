"""The memory pool's controls from Python, on the CPU device: figures, a limit that refuses an
allocation past it, trimming, caching off, the peak started again; bad values each a typed error."""
import gc

import numpy as np
import pytest

import resident as rs


@pytest.fixture
def pool():
    """The CPU pool, its limit and caching put back after the test (other tests share it)."""
    gc.collect()
    yield "cpu"
    rs.clear_pool_limit("cpu")
    rs.set_pool_caching(True, "cpu")


def test_stats_count_an_array_in_use_and_its_free(pool):
    before = rs.pool_stats(pool)
    assert isinstance(before, rs.PoolStats) and before.limit_bytes is None
    x = rs.empty(1000, "float64", pool)
    during = rs.pool_stats(pool)
    assert during.bytes_in_use - before.bytes_in_use == 8000
    assert during.outstanding - before.outstanding == 1
    assert during.allocations - before.allocations == 1
    assert during.bytes_reserved >= during.bytes_in_use and during.peak_bytes >= during.bytes_in_use
    del x
    after = rs.pool_stats(pool)
    assert after.bytes_in_use == before.bytes_in_use and after.outstanding == before.outstanding


def test_a_limit_refuses_an_allocation_past_it_and_is_lifted(pool):
    in_use = rs.pool_stats(pool).bytes_in_use
    rs.set_pool_limit(in_use + (1 << 20), pool)
    assert rs.pool_limit(pool) == in_use + (1 << 20) == rs.pool_stats(pool).limit_bytes
    x = rs.empty(1 << 16, "float64", pool)  # 512 KiB fits
    with pytest.raises(rs.OutOfMemory, match="limit"):
        rs.empty(1 << 17, "float64", pool)  # 1 MiB more does not
    assert rs.pool_stats(pool).bytes_in_use == in_use + (1 << 19)  # the refused one took nothing
    del x
    rs.set_pool_limit("64MiB", pool)  # the text RESIDENT_POOL_LIMIT takes
    assert rs.pool_limit(pool) == 64 << 20
    rs.clear_pool_limit(pool)
    assert rs.pool_limit(pool) is None
    rs.empty(1 << 18, "float64", pool)  # 2 MiB, freed at once: no limit now


@pytest.mark.parametrize("bad, error", [(-1, rs.InvalidArgument), (0, rs.InvalidArgument),
                                        (True, rs.InvalidType), (1.5, rs.InvalidType), (None, rs.InvalidType),
                                        ("lots", rs.InvalidArgument), (2 ** 64, rs.InvalidArgument),
                                        (np.float64(1e6), rs.InvalidType)])
def test_bad_limits_are_refused_and_leave_the_limit(pool, bad, error):
    rs.set_pool_limit(1 << 30, pool)
    with pytest.raises(error):
        rs.set_pool_limit(bad, pool)
    assert rs.pool_limit(pool) == 1 << 30


def test_a_limit_below_the_bytes_in_use_is_refused(pool):
    x = rs.empty(1 << 12, "float64", pool)
    with pytest.raises(rs.InvalidArgument, match="in use"):
        rs.set_pool_limit(16, pool)
    assert rs.pool_limit(pool) is None
    rs.set_pool_limit(np.int64(rs.pool_stats(pool).bytes_in_use), pool)  # NumPy's ints are ints
    del x


def test_trim_and_caching_off_return_cached_memory(pool):
    rs.empty(1 << 16, "float64", pool)  # freed at once
    assert rs.pool_caching(pool) is True
    rs.trim_pool(pool)
    s = rs.pool_stats(pool)
    assert s.bytes_reserved == s.bytes_in_use
    rs.set_pool_caching(False, pool)
    assert rs.pool_caching(pool) is False
    rs.empty(1 << 16, "float64", pool)  # freed at once
    s = rs.pool_stats(pool)
    assert s.bytes_reserved == s.bytes_in_use  # nothing kept once freed
    for bad in (1, "off", None):
        with pytest.raises(rs.InvalidType, match="True or False"):
            rs.set_pool_caching(bad, pool)
    assert rs.pool_caching(pool) is False


def test_reset_peak_starts_the_peak_from_the_bytes_in_use(pool):
    rs.empty(1 << 18, "float64", pool)  # freed at once
    assert rs.pool_stats(pool).peak_bytes >= 1 << 21
    rs.reset_pool_peak(pool)
    s = rs.pool_stats(pool)
    assert s.peak_bytes == s.bytes_in_use
    x = rs.empty(100, "float32", pool)
    assert rs.pool_stats(pool).peak_bytes == s.bytes_in_use + 400
    del x


def test_devices_are_named_as_elsewhere():
    with pytest.raises(rs.InvalidArgument, match="unknown device"):
        rs.pool_stats("tpu")
    with pytest.raises(rs.InvalidType):
        rs.pool_stats(3)
    with pytest.raises(rs.InvalidType):
        rs.trim_pool(device=0)
    assert rs.pool_stats() == rs.pool_stats(rs.default_device()) or rs.default_device() != "cpu"
