"""Misuse found by a sixth sweep: buffers whose exporter leaves out the strides (ctypes: the process
crashed), a transfer policy shared by threads, a generator chain given two arrays (the second was
ignored), counts and reductions given as arrays, and arguments that bind to no signature."""
import ctypes
import threading

import numpy as np
import pytest

import resident as rs


@pytest.mark.parametrize("make, want", [
    (lambda: (ctypes.c_float * 3)(1, 2, 3), np.array([1, 2, 3], np.float32)),
    (lambda: (ctypes.c_int * 4)(4, 3, 2, 1), np.array([4, 3, 2, 1], np.int32)),
    (lambda: ((ctypes.c_double * 2) * 3)(*[(ctypes.c_double * 2)(i, -i) for i in range(3)]),
     np.array([[0, 0], [1, -1], [2, -2]], np.float64)),
])
def test_to_device_of_a_buffer_without_strides_copies_its_values(make, want):
    # ctypes leaves a C-contiguous buffer's strides out, which nanobind read through a null pointer.
    x = rs.to_device(make(), device="cpu")
    assert x.dtype == want.dtype.name and x.shape == want.shape
    np.testing.assert_array_equal(x.to_host(), want)


class _RefusingDLPack(ctypes.Array):
    _type_ = ctypes.c_float
    _length_ = 3

    def __dlpack__(self, **kwargs):
        raise BufferError("no")

    def __dlpack_device__(self):
        return (1, 0)


def test_from_dlpack_of_a_buffer_without_strides_whose_dlpack_refuses_takes_the_buffer():
    a = _RefusingDLPack()
    a[0] = 5.0
    x = rs.from_dlpack(a)
    rs.op.add(1.0)(x)  # the same memory
    assert list(a) == [6.0, 1.0, 1.0]


def test_one_transfer_policy_entered_on_two_threads_keeps_each_threads_blocks_apart():
    forbid = rs.transfer_policy("forbid")
    entered, main_left, seen = threading.Event(), threading.Event(), []

    def worker():
        with forbid:
            entered.set()
            main_left.wait(30)
            seen.append(rs.transfer_policy.current())
            try:
                rs.to_device(np.ones(2, np.float32), device="cpu")
                seen.append("allowed")
            except rs.TransferForbidden:
                seen.append("forbidden")
        seen.append(rs.transfer_policy.current())

    with forbid:
        t = threading.Thread(target=worker)
        t.start()
        assert entered.wait(30)
    after_main = rs.transfer_policy.current()
    main_left.set()
    t.join(30)
    assert after_main == "allow"
    assert seen == ["forbid", "forbidden", "allow"]
    with pytest.raises(rs.InvalidArgument, match="without __enter__"):
        forbid.__exit__(None, None, None)


@pytest.mark.parametrize("args", [(), ("allow", "log"), (["allow"],), (None,)])
def test_transfer_policy_of_no_single_name_is_invalid_type(args):
    with pytest.raises(rs.InvalidType, match="does not fit"):
        rs.transfer_policy(*args)
    with pytest.raises(rs.InvalidArgument, match="unknown transfer policy"):
        rs.transfer_policy("sometimes")


def test_a_generator_chain_given_two_arrays_is_refused_and_fills_neither():
    a, b = np.zeros(3, np.float32), np.zeros(5, np.float32)
    with pytest.raises(rs.InvalidArgument, match="fills one"):
        rs.jit.uniform(1)(a, b)
    assert not a.any() and not b.any()
    rs.jit.uniform(1)(a)
    assert a.all()


@pytest.mark.parametrize("call", [
    lambda a: rs.jit.uniform(1)(out=a, n=np.array([3, 3])),
    lambda a: (rs.jit.uniform(1) | rs.jit.sum())(n=np.array([3]), device="cpu"),
    lambda a: (rs.jit.uniform(1) | rs.jit.sum())(n=3.0, device="cpu"),
    lambda a: rs.jit.map("float f(float v) { return v; }")(a, n=np.array([1, 2])),
])
def test_a_count_that_is_no_number_is_invalid_type(call):
    a = np.zeros(3, np.float32)
    with pytest.raises(rs.InvalidType, match="n is a"):
        call(a)
    assert not a.any()


def test_kernel_source_of_a_device_that_is_no_name_says_so_as_itself():
    with pytest.raises(rs.InvalidType, match="kernel_source: device is a int"):
        rs.jit.map("float f(float v) { return v; }").kernel_source(["float32"], "float32", device=0)
