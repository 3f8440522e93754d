"""rs.random.fill_integers: int32 and uint32 arrays of any library filled with integers uniform in
[low, high) (high excluded, and at most one past the type's largest value, as NumPy's integers), value
offset + i of stream seed in element i; other bounds or low >= high refused before anything is written."""
import numpy as np
import pytest

import resident as rs


@pytest.mark.parametrize("dtype, low, high", [(np.int32, -5, 5), (np.int32, 0, 1), (np.uint32, 3, 17),
                                              (np.int32, -2 ** 31, 2 ** 31 - 1), (np.uint32, 0, 2 ** 32 - 1),
                                              (np.int32, 0, 2 ** 31), (np.uint32, 2 ** 31, 2 ** 32)])
def test_values_are_integers_in_range_and_every_small_range_value_appears(dtype, low, high):
    x = np.zeros(20000, dtype)
    rs.random.fill_integers(x, 11, low, high)
    wide = x.astype(np.float64)  # compared in float64, beyond either type's range
    assert wide.min() >= low and wide.max() <= high - 1
    if high - low <= 20:
        assert set(np.unique(x).tolist()) == set(range(low, high))  # high itself never
    else:  # a wide range: the mean near the middle (2^31 / sqrt(3 * 20000) is its standard error)
        mid, se = (low + high - 1) / 2, (high - low) / np.sqrt(12 * x.size)
        assert abs(wide.mean() - mid) < 5 * se


def test_counts_are_uniform_by_a_chi_square_test():
    x = np.zeros(200000, np.int32)
    rs.random.fill_integers(x, 2024, 0, 10)
    counts = np.bincount(x, minlength=10).astype(np.float64)
    expected = x.size / 10
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 27.88  # the 0.999 quantile of chi-square with 9 degrees of freedom


def test_offset_continues_the_stream_and_arrays_of_any_library_agree():
    whole = np.zeros(64, np.int32)
    rs.random.fill_integers(whole, 5, -100, 100)
    tail = np.zeros(40, np.int32)
    rs.random.fill_integers(tail, 5, -100, 100, offset=24)
    np.testing.assert_array_equal(tail, whole[24:])
    r = rs.empty(64, "int32", "cpu")
    rs.random.fill_integers(r, seed=5, low=-100, high=100)
    np.testing.assert_array_equal(r.to_host(), whole)
    other = np.zeros(64, np.int32)
    rs.random.fill_integers(other, 6, -100, 100)
    assert not np.array_equal(other, whole)  # another seed, another stream


def test_the_largest_value_of_the_type_is_drawn_with_high_one_past_it():
    bits = np.zeros(4099, np.uint32)
    rs.random.fill_bits(bits, 9, offset=3)
    every = np.zeros(4099, np.uint32)
    rs.random.fill_integers(every, 9, 0, 2 ** 32, offset=3)  # every value: each word as it is
    np.testing.assert_array_equal(every, bits)
    signed = np.zeros(4099, np.int32)
    rs.random.fill_integers(signed, 9, -2 ** 31, 2 ** 31, offset=3)
    np.testing.assert_array_equal(signed.view(np.uint32), bits ^ np.uint32(0x80000000))
    for dtype, top in ((np.int32, 2 ** 31 - 1), (np.uint32, 2 ** 32 - 1)):
        x = np.zeros(4099, dtype)
        rs.random.fill_integers(x, 9, top - 1, top + 1)
        assert set(np.unique(x).tolist()) == {top - 1, top}


@pytest.mark.parametrize("dtype, low, high", [(np.int32, 5, 5), (np.int32, 6, 5), (np.int32, 0, 2 ** 31 + 1),
                                              (np.uint32, 0, 2 ** 32 + 1), (np.int32, 2 ** 31, 2 ** 31 + 1),
                                              (np.uint32, -1, 3), (np.int32, 0, 2 ** 70)])
def test_bad_bounds_are_refused_and_write_nothing(dtype, low, high):
    x = np.full(8, 7, dtype)
    with pytest.raises(rs.InvalidArgument):
        rs.random.fill_integers(x, 1, low, high)
    np.testing.assert_array_equal(x, np.full(8, 7, dtype))


def test_other_types_and_arguments_are_refused():
    for wrong in (np.zeros(4), np.zeros(4, np.int64), np.zeros(4, np.uint64)):
        with pytest.raises(rs.InvalidType, match="int32 or uint32"):
            rs.random.fill_integers(wrong, 1, 0, 3)
    x = np.zeros(4, np.int32)
    for bad in ((1, 0.5, 3), (1, 0, "3"), (1, True, 3), (1.5, 0, 3)):
        with pytest.raises(rs.InvalidType):
            rs.random.fill_integers(x, *bad)
    with pytest.raises(rs.InvalidType):
        rs.random.fill_integers(x, 1)  # no bounds
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        ro = np.zeros(4, np.int32)
        ro.flags.writeable = False
        rs.random.fill_integers(ro, 1, 0, 3)
    with pytest.raises(rs.InvalidArgument, match="takes no stream"):
        rs.random.fill_integers(x, 1, 0, 3, stream=1)
