"""Every kind of array is taken by every entry point alike: host memory through the buffer protocol
(memoryview, array.array, bytearray) or NumPy's array interface, DLPack capsules, resident's and NumPy's
arrays; what is no array is InvalidType everywhere, a ShardedArray is named with what to use instead,
and from_dlpack's stream= reaches the producer's __dlpack__ (the DLPack handshake). Buffers whose
exporter leaves out the strides (ctypes), strided and Fortran-ordered memoryviews and DLPack capsules
given to chains are read as NumPy reads them, dtypes as NumPy names them; an element type resident has
no arrays of, more than 32 dimensions and a masked array (its mask would be lost) are refused."""
import array
import ctypes

import numpy as np
import pytest

import resident as rs
from _support import DEVICES, needs_numba

VALUES = np.array([1.0, 4.0, 9.0, 16.0, 2.25, 0.5], np.float64)


class InterfaceOnly:
    """An object NumPy reads through __array_interface__ alone (no buffer protocol, no DLPack)."""

    def __init__(self, a, readonly=False):
        self._a = a  # keeps the memory alive
        d = dict(a.__array_interface__)
        d["data"] = (d["data"][0], readonly)
        self.__array_interface__ = d


def _memoryview(a):
    return memoryview(a)


def _array_array(a):
    return array.array(a.dtype.char, a.tobytes())  # a copy: written through its own buffer


def _interface(a):
    return InterfaceOnly(a)


def _capsule(a):
    return a.__dlpack__()


KINDS = {"memoryview": _memoryview, "array.array": _array_array, "array interface": _interface,
         "capsule": _capsule}


def _values(k, backing):
    """The values a kind holds now (its own memory where it copied: array.array)."""
    if isinstance(k, array.array):
        return np.frombuffer(k, backing.dtype)
    return backing


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("reduce_, ref", [(rs.sum, np.sum), (rs.min, np.min), (rs.max, np.max)])
def test_reductions_take_every_kind(kind, reduce_, ref):
    a = VALUES.copy()
    assert reduce_(KINDS[kind](a)) == ref(VALUES)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_memoryview_sum_of_float32_ones_is_four(kind):
    assert rs.sum(KINDS[kind](np.ones(4, np.float32))) == 4.0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_from_dlpack_and_to_device_take_every_kind(kind):
    a = VALUES.copy()
    x = rs.from_dlpack(KINDS[kind](a))
    np.testing.assert_array_equal(np.asarray(x), VALUES)
    np.testing.assert_array_equal(rs.to_device(KINDS[kind](a)).to_host(), VALUES)


@pytest.mark.parametrize("kind", ["memoryview", "array.array", "array interface"])
def test_fills_and_programs_write_into_every_writable_kind(kind):
    a = VALUES.copy()
    k = KINDS[kind](a)
    rs.op.sqrt()(k)
    np.testing.assert_allclose(_values(k, a), np.sqrt(VALUES), rtol=1e-15)
    p = rs.op.square() | rs.op.add(1.0)
    assert abs(p.sum(k) - float(np.sum(VALUES + 1.0))) < 1e-12
    b = np.zeros(6)
    rs.random.fill_uniform(b, seed=3)
    rs.random.fill_uniform(k, seed=3)
    np.testing.assert_array_equal(_values(k, a), b)


@pytest.mark.parametrize("kind", ["memoryview", "array interface"])
def test_writes_into_read_only_buffers_are_refused_and_write_nothing(kind):
    frozen = VALUES.tobytes()
    a = np.frombuffer(frozen, np.float64)
    k = memoryview(frozen).cast("d") if kind == "memoryview" else InterfaceOnly(a, readonly=True)
    for write in (lambda: rs.op.sqrt()(k), lambda: rs.random.fill_uniform(k, seed=1),
                  lambda: rs.dist.copy(rs.to_device(np.zeros(6)), k)):
        with pytest.raises(rs.InvalidArgument, match="read-only"):
            write()
    assert frozen == VALUES.tobytes()
    assert rs.sum(k) == float(np.sum(VALUES))  # reading stays allowed


def test_matmul_chains_and_flows_take_memoryviews():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    out = np.zeros((2, 4))
    rs.matmul(memoryview(a), memoryview(b), out=memoryview(out))
    np.testing.assert_allclose(out, a @ b, rtol=1e-15)
    c = VALUES.copy()
    chain = rs.jit.map("double rs_h(double v) { return 2 * v + 1; }", "rs_h")
    chain(memoryview(c))
    np.testing.assert_array_equal(c, 2 * VALUES + 1)
    chain(memoryview(c))  # the warm path too
    np.testing.assert_array_equal(c, 2 * (2 * VALUES + 1) + 1)
    d = VALUES.copy()
    m = memoryview(d)
    f = rs.Flow(device="cpu")
    f.add("halve", lambda: rs.op.mul(0.5)(m), reads=[m], writes=[m])
    f.run()
    np.testing.assert_array_equal(d, VALUES * 0.5)


@needs_numba
def test_python_stages_and_fuse_take_memoryviews():
    @rs.stage
    def triple(v):
        return 3 * v

    def inner(v):
        return v - 1.0

    def master(v):
        return inner(v) * 2.0

    a = VALUES.copy()
    triple(memoryview(a))
    np.testing.assert_array_equal(a, 3 * VALUES)
    b = VALUES.copy()
    rs.fuse(master)(memoryview(b))
    np.testing.assert_array_equal(b, (VALUES - 1.0) * 2.0)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_dist_takes_every_kind(kind):
    whole = rs.dist.shard(KINDS[kind](VALUES.copy()), ["cpu", "cpu"], dtype="float64")
    np.testing.assert_array_equal(whole.to_host(), VALUES)
    dst = rs.empty(6, "float64", "cpu")
    rs.dist.copy(KINDS[kind](VALUES.copy()), dst)
    np.testing.assert_array_equal(dst.to_host(), VALUES)
    parts = rs.dist.from_shards([KINDS[kind](VALUES[:3].copy()), KINDS[kind](VALUES[3:].copy())])
    np.testing.assert_array_equal(parts.to_host(), VALUES)
    got = rs.stream(rs.op.sqrt(), KINDS[kind](VALUES.copy()))
    np.testing.assert_allclose(got, np.sqrt(VALUES), rtol=1e-15)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_all_reduce_takes_every_kind(kind):
    own = rs.to_device(VALUES.copy(), device="cpu")  # the ranks' device, with or without a GPU
    with rs.dist.Communicator(["cpu", "cpu"]) as c:
        c.all_reduce([KINDS[kind](VALUES.copy()), own])
    np.testing.assert_array_equal(own.to_host(), 2 * VALUES)


NOT_ARRAYS = [object(), "text", 3.5, None, {"a": 1}]


@pytest.mark.parametrize("thing", NOT_ARRAYS, ids=lambda t: type(t).__name__)
def test_what_is_no_array_is_invalid_type_everywhere(thing):
    calls = [rs.sum, rs.min, rs.max, rs.from_dlpack, rs.to_device, lambda t: rs.random.fill_uniform(t, seed=1),
             lambda t: rs.op.sqrt()(t), lambda t: (rs.op.sqrt() | rs.op.abs()).sum(t), lambda t: rs.matmul(t, t),
             lambda t: rs.dist.copy(t, rs.empty(3)), lambda t: rs.dist.shard(t, ["cpu"]),
             lambda t: rs.stream(rs.op.sqrt(), t), lambda t: rs.dist.from_shards([t])]
    for call in calls:
        with pytest.raises(rs.InvalidType):
            call(thing)
    with rs.dist.Communicator(["cpu"]) as c:
        with pytest.raises(rs.InvalidType):
            c.all_reduce([thing])


def test_a_sharded_array_is_named_with_what_to_use_instead():
    x = rs.dist.shard(VALUES.astype(np.float32), ["cpu", "cpu"])
    for call in (rs.sum, rs.min, rs.max, rs.from_dlpack, rs.to_device, lambda t: rs.copy(t, np.zeros(6, np.float32)),
                 lambda t: rs.matmul(t, t), lambda t: (rs.op.sqrt() | rs.op.abs()).sum(t),
                 lambda t: rs.dist.copy(t, rs.empty(6))):
        with pytest.raises(rs.InvalidType, match=r"ShardedArray.*rs\.dist\.sum.*x\.to_host\(\).*x\.shards"):
            call(x)
    with pytest.raises(rs.InvalidType, match="ShardedArray"):
        rs.Flow(device="cpu").add("s", lambda: None, reads=[x])
    assert rs.dist.sum(x) == pytest.approx(float(np.sum(VALUES)), rel=1e-6)  # the way it names works
    # A random fill is one fill of the whole (resident.dist.random; test_dist_random.py compares the values).
    rs.random.fill_uniform(x, seed=1)
    assert x.to_host().tobytes() != VALUES.astype(np.float32).tobytes()


class StreamRecorder:
    """A producer that speaks DLPack without __dlpack_device__, recording the stream it is asked for."""

    def __init__(self, a):
        self._a, self.streams = a, []

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        return self._a.__dlpack__()


def test_from_dlpack_takes_a_stream_and_gives_it_to_the_producer():
    a = VALUES.copy()
    np.testing.assert_array_equal(np.asarray(rs.from_dlpack(a, stream=None)), VALUES)
    p = StreamRecorder(a)
    # The producer is asked on the call's stream (a CPU array then refuses the stream, as it does elsewhere).
    with pytest.raises(rs.InvalidArgument, match="takes no stream"):
        rs.from_dlpack(p, stream=5)
    assert p.streams and p.streams[0] == 5
    q = StreamRecorder(a)
    with pytest.raises(rs.InvalidArgument, match="takes no stream"):
        rs.sum(q, stream=7)
    assert q.streams and q.streams[0] == 7
    with pytest.raises(rs.InvalidType, match="stream="):
        rs.from_dlpack(a, stream="s")
    with pytest.raises(rs.InvalidArgument, match="takes no stream"):
        rs.from_dlpack(a, stream=1)
    r = StreamRecorder(a)
    np.testing.assert_array_equal(np.asarray(rs.from_dlpack(r)), VALUES)  # no stream given: asked without one
    assert r.streams == [None]


def test_flags_and_arguments_are_read_as_python_reads_them():
    # A NumPy-like output whose flags are NumPy's bools (or ints): read by truth, not refused as no bool.
    class Flags:
        c_contiguous = np.True_
        writeable = 1

    class Like:
        def __init__(self):
            self.a, self.flags, self.strides, self.dtype = np.zeros(3, np.float32), Flags(), (4,), "float32"

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    out = Like()
    rs.copy(np.arange(3, dtype=np.float32), out)
    np.testing.assert_array_equal(out.a, [0, 1, 2])
    x = rs.to_device(np.arange(4, dtype=np.float32), device="cpu")
    with pytest.raises(rs.InvalidType, match="out="):
        x.to_host(np.zeros(4, np.float32))  # the first argument is the stream
    with pytest.raises(rs.InvalidType):
        rs.Event("cpu").elapsed_ms(None)
    with pytest.raises(rs.InvalidType):
        rs.Stream("cpu").wait_for()
    was = rs.pool_caching("cpu")
    rs.set_pool_caching(np.False_, "cpu")
    assert rs.pool_caching("cpu") is False
    rs.set_pool_caching(was, "cpu")


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


@pytest.mark.parametrize("device", DEVICES)
def test_strided_and_fortran_memoryviews_are_copied_as_numpy_views_are(device):
    a = np.arange(12.0)
    np.testing.assert_array_equal(rs.to_device(memoryview(a)[::3], device=device).to_host(), a[::3])
    f = np.asfortranarray(a.reshape(3, 4))
    np.testing.assert_array_equal(rs.to_device(memoryview(f), device=device).to_host(), f)
    with pytest.raises(rs.InvalidType, match="not supported|buffer format"):  # the element type named
        rs.to_device(memoryview(b"abc").cast("c"), device=device)


@needs_numba
def test_chains_take_dlpack_capsules_as_from_dlpack_does():
    x = np.ones(3)
    rs.stage(lambda v: v + 1)(x.__dlpack__())
    np.testing.assert_array_equal(x, [2, 2, 2])
    assert (rs.stage(lambda v: v + 1) | rs.jit.sum())(np.ones(3).__dlpack__()) == 6


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


def test_a_masked_array_is_refused_rather_than_its_mask_dropped():
    m = np.ma.array(np.ones(4, np.float32), mask=[0, 1, 0, 0])
    for call in (lambda: rs.stream(rs.op.sqrt(), m), lambda: rs.op.sqrt()(m), lambda: rs.sum(m),
                 lambda: rs.to_device(m)):
        with pytest.raises(rs.InvalidArgument, match="mask"):
            call()
    np.testing.assert_array_equal(rs.op.sqrt()(m.filled(4.0)), np.array([1, 2, 1, 1], np.float32))


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


def test_a_read_only_versioned_capsule_is_not_written():
    # The capsule itself handed over (not the array): its DLPack 1.x read-only flag is the only sign.
    a = np.arange(8, dtype=np.float32)
    a.flags.writeable = False
    x = rs.from_dlpack(a.__dlpack__(max_version=(1, 0)))
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.op.add(1.0)(x)
    np.testing.assert_array_equal(a, np.arange(8, dtype=np.float32))
    assert rs.sum(x) == 28.0  # reading it is fine
