"""Every call that takes an array takes it through one check, made before anything reads the array's
shape, strides or memory (python/src/intake.cpp): a malformed DLPack capsule (given bare, by a
producer's __dlpack__, or to to_device), an __array_interface__ that names no memory or cannot be read,
and a NumPy scalar given as memory to write into are the same typed refusal on every call; nothing is
written and the library works on after. Also: what used to escape as a builtin exception (a structured
masked array, a timedelta64 to shard, pinned_empty's shape, to_host out of host memory), np.matrix
sharded, and refusals that name the call and the way out."""
import ctypes
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import resident as rs
from _support import needs_numba

# ---- DLPack capsules made by hand, any field set ---------------------------------------------------


class _Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Managed(ctypes.Structure):
    _fields_ = [("tensor", _Tensor), ("ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class _Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("tensor", _Tensor)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_KEEP = []  # what the capsules point at lives as long as the tests


@_DELETER
def _deleted(_):
    pass


def capsule(buf, *, shape=None, ndim=None, strides=None, byte_offset=0, null_shape=False, major=None):
    """A capsule over float32 `buf` (kept alive) with the fields given; major: a versioned capsule of
    that DLPack major version (None: unversioned)."""
    shape = buf.shape if shape is None else shape
    shp = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    strd = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
    t = _Tensor(buf.ctypes.data, _Device(1, 0), len(shape) if ndim is None else ndim, _DType(2, 32, 1),
                None if null_shape else ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64)),
                None if strd is None else ctypes.cast(strd, ctypes.POINTER(ctypes.c_int64)), byte_offset)
    m = _Managed(t, None, _deleted) if major is None else _Versioned(major, 0, None, _deleted, 0, t)
    _KEEP.extend([buf, shp, strd, m])
    return _new_capsule(ctypes.addressof(m), b"dltensor" if major is None else b"dltensor_versioned", None)


class Producer:
    """An array of another library whose __dlpack__ gives what `make` makes."""

    def __init__(self, make):
        self.make = make

    def __dlpack__(self, **kwargs):
        return self.make()

    def __dlpack_device__(self):
        return (1, 0)


class ProducerWithoutDevice:
    def __init__(self, make):
        self.make = make

    def __dlpack__(self, **kwargs):
        return self.make()


# The memory the malformed arrays point into: six elements inside guards that a write past them changes.
GUARDED = np.arange(16, dtype=np.float32)
BUF = GUARDED[4:10]

MALFORMED_CAPSULES = {
    "byte_offset -4": dict(byte_offset=(1 << 64) - 4),
    "null shape": dict(shape=(2, 3), null_shape=True),
    "DLPack 2.0": dict(major=2),
    "DLPack 0.x versioned": dict(major=0),
    "ndim -1": dict(ndim=-1),
    "ndim 40": dict(shape=(1,) * 39 + (6,)),
    "negative extent": dict(shape=(-6,)),
    "stride 2^58 elements": dict(strides=(1 << 58,)),
    "negative stride reaching below 0": dict(strides=(-(1 << 55),)),
}
DELIVERIES = {"bare capsule": lambda make: make(), "producer": Producer,
              "producer without __dlpack_device__": ProducerWithoutDevice}


def _chain():
    return rs.jit.map("float rs_h(float v) { return 2 * v; }", "rs_h")


def _all_reduce(x):
    with rs.dist.Communicator(["cpu"]) as c:
        c.all_reduce([x])


# Every call that takes an array, f(x, src): x the array under test, src a good array of its size and type.
READS = {
    "sum": lambda x, src: rs.sum(x),
    "max": lambda x, src: rs.max(x),
    "cumsum": lambda x, src: rs.cumsum(x),
    "from_dlpack": lambda x, src: rs.from_dlpack(x),
    "to_device": lambda x, src: rs.to_device(x, device="cpu"),
    "copy src": lambda x, src: rs.copy(x, np.zeros_like(src)),
    "dist.copy src": lambda x, src: rs.dist.copy(x, rs.to_device(np.zeros_like(src), device="cpu")),
    "program.sum": lambda x, src: (rs.op.sqrt() | rs.op.abs()).sum(x),
    "op out=": lambda x, src: rs.op.mul(2.0)(x, out=np.zeros_like(src)),
    "chain": lambda x, src: _chain()(x, out=np.zeros_like(src)),
    "matmul": lambda x, src: rs.matmul(x, x),
    "stream": lambda x, src: rs.stream(rs.op.mul(2.0), x),
    "stream reduce": lambda x, src: rs.stream(rs.op.mul(2.0), x, reduce="sum"),
    "dist.shard": lambda x, src: rs.dist.shard(x, ["cpu", "cpu"]),
    "dist.from_shards": lambda x, src: rs.dist.from_shards([x]),
    "flow reads": lambda x, src: rs.Flow(device="cpu").add("s", lambda: None, reads=[x]),
}
WRITES = {
    "fill_uniform": lambda x, src: rs.random.fill_uniform(x, seed=1),
    "fill_normal": lambda x, src: rs.random.fill_normal(x, seed=1),
    "op in place": lambda x, src: rs.op.mul(2.0)(x),
    "program in place": lambda x, src: (rs.op.mul(2.0) | rs.op.add(1.0))(x),
    "into out=": lambda x, src: rs.op.mul(2.0)(src, out=x),
    "cumsum out=": lambda x, src: rs.cumsum(src, out=x),
    "chain out=": lambda x, src: _chain()(src, out=x),
    "matmul out=": lambda x, src: rs.matmul(src.reshape(-1, 1)[:1], src.reshape(1, -1)[:, :1], out=x),
    "copy dst": lambda x, src: rs.copy(src, x),
    "copy_async dst": lambda x, src: rs.copy_async(src, x),
    "to_host out=": lambda x, src: rs.to_device(src, device="cpu").to_host(out=x),
    "dist.copy dst": lambda x, src: rs.dist.copy(rs.to_device(src, device="cpu"), x),
    "stream out=": lambda x, src: rs.stream(rs.op.mul(2.0), src, out=x),
    "flow writes": lambda x, src: rs.Flow(device="cpu").add("s", lambda: None, writes=[x]),
    "all_reduce": lambda x, src: _all_reduce(x),
}
NUMBA = {
    "stage": lambda x, src: rs.stage(lambda v: v * 2.0)(x, out=np.zeros_like(src)),
    "stage in place": lambda x, src: rs.stage(lambda v: v * 2.0)(x),
    "stage out=": lambda x, src: rs.stage(lambda v: v * 2.0)(src, out=x),
    "fuse out=": lambda x, src: rs.fuse(lambda v: v + 1.0)(src, out=x),
}
CALLS = [pytest.param(n, f, id=n) for n, f in {**READS, **WRITES}.items()] + \
    [pytest.param(n, f, id=n, marks=needs_numba) for n, f in NUMBA.items()]
WRITING = [pytest.param(n, f, id=n) for n, f in WRITES.items()] + \
    [pytest.param(n, f, id=n, marks=needs_numba) for n, f in NUMBA.items() if n != "stage"]


def healthy():
    """The library still works after a refusal."""
    x = np.arange(4, dtype=np.float32)
    assert rs.sum(x) == 6.0
    y = rs.to_device(x, device="cpu")
    rs.op.mul(2.0)(y)
    assert np.array_equal(y.to_host(), x * 2)


@pytest.mark.parametrize("call_name, call", CALLS)
@pytest.mark.parametrize("kind", sorted(MALFORMED_CAPSULES))
def test_a_malformed_capsule_is_refused_alike_by_every_call_however_it_comes(kind, call_name, call):
    for delivery, wrap in DELIVERIES.items():
        x = wrap(lambda: capsule(BUF, **MALFORMED_CAPSULES[kind]))
        with pytest.raises(rs.InvalidArgument) as e:
            call(x, np.ones(6, np.float32))
        assert "refused to export" not in str(e.value), (delivery, str(e.value))
        assert np.array_equal(GUARDED, np.arange(16, dtype=np.float32)), f"{delivery}: written on refusal"
        healthy()


class Interface:
    """An object NumPy reads through __array_interface__ alone: six float32 values at `at`."""

    def __init__(self, at=None, **fields):
        self.__array_interface__ = {"shape": (6,), "typestr": "<f4", "version": 3,
                                    "data": (BUF.ctypes.data if at is None else at, False), **fields}


class RaisingInterface:
    @property
    def __array_interface__(self):
        raise ZeroDivisionError("boom")


def _released():
    m = memoryview(np.zeros(6, np.float32))
    m.release()
    return m


UNADDRESSABLE = {  # NumPy reads these as views without complaint: the pointer or a stride names no memory
    "pointer wrapping around": lambda: Interface(at=-8),
    "stride 2^60": lambda: Interface(strides=(1 << 60,)),
}
UNREADABLE = {  # NumPy cannot read these as arrays at all
    "raising": RaisingInterface,
    "not a dict": lambda: type("NotDict", (), {"__array_interface__": [1, 2]})(),
    "negative shape": lambda: Interface(shape=(-6,)),
    "bad typestr": lambda: Interface(typestr="<x9"),
    "null pointer": lambda: Interface(at=0),
    "released memoryview": _released,
}


@pytest.mark.parametrize("call_name, call", CALLS)
@pytest.mark.parametrize("kind", sorted(UNADDRESSABLE))
def test_an_array_interface_naming_no_memory_is_refused_by_every_call(kind, call_name, call):
    with pytest.raises(rs.InvalidArgument, match="reach past any address"):
        call(UNADDRESSABLE[kind](), np.ones(6, np.float32))
    assert np.array_equal(GUARDED, np.arange(16, dtype=np.float32))
    healthy()


@pytest.mark.parametrize("call_name, call", CALLS)
@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_an_array_interface_numpy_cannot_read_is_a_type_error_on_every_call(kind, call_name, call):
    with pytest.raises(rs.InvalidType):
        call(UNREADABLE[kind](), np.ones(6, np.float32))
    healthy()


def _element():
    a = np.ones(3, np.float32)
    return a[1], a  # a NumPy scalar: its value, not a view of a


SCALARS = {"np.float32(5)": lambda: (np.float32(5.0), None), "arr[1]": _element}


@pytest.mark.parametrize("call_name, call", WRITING)
@pytest.mark.parametrize("kind", sorted(SCALARS))
def test_a_numpy_scalar_is_no_memory_to_write_into(kind, call_name, call):
    x, backing = SCALARS[kind]()
    with pytest.raises(rs.InvalidArgument, match=r"read-only.*np\.array\(v\) or np\.atleast_1d\(v\)"):
        call(x, np.ones(1, np.float32))
    assert x == 5.0 if backing is None else np.array_equal(backing, np.ones(3, np.float32))
    healthy()


class _Copier:
    """A producer whose __dlpack__ gives a copy (DLPack's IS_COPIED flag, as copy=True asks)."""

    def __init__(self):
        self.a = np.zeros(4, np.float32)

    def __dlpack__(self, **kw):
        kw.pop("stream", None)
        return self.a.__dlpack__(copy=True, **kw)

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("call_name, call", WRITING)
def test_a_copy_the_producer_made_is_no_memory_to_write_into(call_name, call):
    # Written into without a word, the results went with the copy (the producer's memory stayed 0).
    p = _Copier()
    if np.lib.NumpyVersion(np.__version__) < "2.1.0":
        pytest.skip("this NumPy exports no copy= capsule (NumPy 2.1 does)")
    with pytest.raises(rs.InvalidArgument, match="IS_COPIED"):
        call(p, np.ones(4, np.float32))
    assert not p.a.any()
    assert rs.sum(p) == 0.0  # read, it is the producer's values
    healthy()


def test_numpy_scalars_are_still_read_and_integer_fills_refuse_them_too():
    s = np.float64(5.0)
    assert rs.sum(s) == 5.0 and rs.to_device(s, device="cpu").to_host() == 5.0
    assert rs.stream(rs.op.mul(2.0), s) == 10.0
    assert rs.from_dlpack(s)._readonly  # what is taken in is a copy: nothing may write it
    for fill in (lambda: rs.random.fill_bits(np.uint32(0), seed=1),
                 lambda: rs.random.fill_integers(np.int32(0), seed=1, low=0, high=9)):
        with pytest.raises(rs.InvalidArgument, match=r"np\.atleast_1d"):
            fill()


def test_a_capsule_of_another_layout_is_copied_by_to_device_and_refused_in_place():
    a = np.arange(12, dtype=np.float32)
    np.testing.assert_array_equal(rs.to_device(a[::3].__dlpack__(), device="cpu").to_host(), a[::3])
    np.testing.assert_array_equal(rs.to_device(Producer(lambda: a[::-2].__dlpack__()), device="cpu").to_host(),
                                  a[::-2])
    with pytest.raises(rs.InvalidArgument, match="strided"):
        rs.sum(a[::3].__dlpack__())


def test_a_producer_returning_no_capsule_is_named_and_a_refused_capsule_stays_unconsumed():
    with pytest.raises(rs.InvalidType, match="returned a int, not a DLPack capsule"):
        rs.sum(Producer(lambda: 5))
    c = capsule(BUF, major=2)
    with pytest.raises(rs.InvalidArgument, match="DLPack 2.0"):
        rs.to_device(c, device="cpu")
    assert "used" not in repr(c)


# ---- builtins that used to escape, np.matrix, the refusals' words ---------------------------------


def test_a_structured_masked_array_is_refused_by_every_call():
    m = np.ma.masked_array(np.zeros(6, dtype=[("a", "<f4"), ("b", "<i4")]))
    for name, call in {**READS, **WRITES}.items():
        with pytest.raises(rs.Error):
            call(m, np.ones(6, np.float32))
    masked = np.ma.masked_array(np.zeros(2, dtype=[("a", "<f4")]), mask=[(True,), (False,)])
    with pytest.raises(rs.InvalidArgument, match="masked values"):
        rs.sum(masked)


def test_to_device_of_a_stride_0_view_too_large_to_copy_is_out_of_memory():
    # NumPy's own _ArrayMemoryError (no figures) and ValueError came out of the copy to_device makes.
    with pytest.raises(rs.OutOfMemory, match="to_device") as e:
        rs.to_device(np.broadcast_to(np.float32(1), (2 ** 45,)), device="cpu")  # 128 TiB: no address space holds it
    assert e.value.requested_bytes == 2 ** 47
    with pytest.raises(rs.OutOfMemory) as e:
        rs.to_device(np.broadcast_to(np.float32(1), (2 ** 60,)), device="cpu")
    assert e.value.requested_bytes == 2 ** 62
    healthy()


def test_a_timedelta_is_no_size_to_shard_and_pinned_empty_refuses_what_numpy_cannot_hold():
    with pytest.raises(rs.InvalidType):
        rs.dist.shard(np.timedelta64(3, "ms"), ["cpu"])
    with pytest.raises(rs.InvalidArgument, match="pinned_empty.*2\\^63"):
        rs.streaming.pinned_empty((0, 2 ** 62))
    assert rs.streaming.pinned_empty((0, 2 ** 40)).shape == (0, 2 ** 40)
    assert rs.empty((0, 2 ** 62)).shape == (0, 2 ** 62)


def test_a_new_host_array_the_host_cannot_give_is_out_of_memory_with_the_bytes_asked_for():
    # In a process of its own: its address space is capped just above what it holds.
    script = textwrap.dedent("""
        import resource, numpy as np, resident as rs
        h = np.zeros(1 << 25, np.float32)                   # 128 MiB, pages never written
        x = rs.from_dlpack(h)
        rs.stream(rs.op.mul(2.0), h[:4])                    # the streaming machinery set up before the cap
        vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20), resource.RLIM_INFINITY))
        for what, call in (("to_host", x.to_host), ("resident.stream", lambda: rs.stream(rs.op.mul(2.0), h))):
            try:
                call()
            except rs.OutOfMemory as e:
                assert isinstance(e, MemoryError) and e.requested_bytes == 1 << 27, e
                assert what in str(e), e
                print("refused", what)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["refused", "to_host", "refused", "resident.stream"], \
        r.stdout + r.stderr


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's word on np.matrix itself
def test_a_matrix_is_sharded_as_its_elements_in_c_order():
    m = np.matrix(np.arange(6, dtype=np.float32).reshape(2, 3))
    x = rs.dist.shard(m, ["cpu", "cpu"])
    assert [s.shape for s in x.shards] == [(3,), (3,)]
    np.testing.assert_array_equal(x.to_host(), np.arange(6, dtype=np.float32))


def test_refusals_of_what_cannot_be_used_in_place_name_the_call_and_the_way_out():
    x = np.arange(8, dtype=np.float32)
    unaligned = np.zeros(17, np.uint8)[1:].view(np.float32)
    for arr, way in ((x[::2], "ascontiguousarray"), (np.zeros(3, np.float16), "astype"), (unaligned, r"x\.copy\(\)")):
        for name, call in {"sum": rs.sum, "fill_uniform": lambda a: rs.random.fill_uniform(a, seed=1),
                           "Flow.add": lambda a: rs.Flow(device="cpu").add("s", lambda: None, writes=[a])}.items():
            with pytest.raises(rs.InvalidArgument, match=way) as e:
                call(arr)
            assert not str(e.value).startswith(("DLPack", "element type")), str(e.value)
            assert ("reduction" if name == "sum" else name) in str(e.value), str(e.value)
    with pytest.raises(rs.InvalidType, match="the buffer of a memoryview cannot be read.*released"):
        rs.sum(_released())
