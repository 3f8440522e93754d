"""Arguments whose own code raises: an __index__, __float__, __len__ or item of a number or a shape, a dtype
property, __fspath__, __eq__, __str__ or __iter__, an exporter's __dlpack__, __dlpack_device__ or buffer,
a stream's __cuda_stream__, a callable's __signature__. What such code raises comes out as a typed
resident error that says what it said (or, for a dtype, the array is read as the core reads it);
KeyboardInterrupt and SystemExit go on unchanged, and a conversion that failed once leaves the next one
of the same argument valid."""
import sys

import numpy as np
import pytest

import resident as rs
from _support import DlpackOnly, needs_numba


class Raises:
    """An object whose __index__, __float__, dtype and __fspath__ raise what it is given."""

    def __init__(self, e):
        self.e = e

    def __index__(self):
        raise self.e

    def __float__(self):
        raise self.e

    def __fspath__(self):
        raise self.e

    @property
    def dtype(self):
        raise self.e


@pytest.mark.parametrize("e", [ValueError("v"), ZeroDivisionError("z")], ids=["ValueError", "ZeroDivisionError"])
def test_what_an_argument_own_code_raises_is_typed(e, tmp_path):
    x = np.ones(8, np.float32)
    for call in (lambda: rs.stream(rs.op.sqrt(), x, chunk=Raises(e)),
                 lambda: rs.stream(rs.op.sqrt(), x, depth=Raises(e)),
                 lambda: rs.streaming.pinned_empty(Raises(e)), lambda: rs.streaming.pinned_empty((2, Raises(e))),
                 lambda: rs.streaming.pinned_empty(3, (np.float32, -1)),
                 lambda: rs.dist.shard(10, ["cpu"], dtype=(np.float32, -1)),
                 lambda: rs.jit.uniform(1, dtype=Raises(e))):
        with pytest.raises(rs.Error):
            call()
    with rs.profile() as prof:
        rs.op.sqrt()(x)
    with pytest.raises(rs.InvalidArgument, match="__fspath__"):
        prof.to_json(Raises(e))


def test_an_array_whose_dtype_raises_is_read_as_the_core_takes_it():
    # Its dtype property raises; its DLPack export says what it holds (as rs.sum reads it).
    class Odd(DlpackOnly):
        @property
        def dtype(self):
            raise ZeroDivisionError("dt")

    host = np.linspace(1, 4, 1000).astype(np.float32)
    a = host.copy()
    rs.op.sqrt()(Odd(a))
    np.testing.assert_allclose(a, np.sqrt(host.astype(np.float64)), rtol=1e-6)
    assert (rs.op.sqrt() | rs.op.neg()).sum(Odd(host)) == pytest.approx(-np.sqrt(host.astype(np.float64)).sum(), rel=1e-5)
    b = host.copy()
    rs.stage("float f(float v) { return 2 * v; }")(Odd(b))
    np.testing.assert_allclose(b, 2 * host)


class _Raises:
    """An object whose stream, index, ==, truth, iteration and str hooks each raise ValueError."""

    def __cuda_stream__(self):
        raise ValueError("closed")

    def __index__(self):
        raise ValueError("index")

    def __eq__(self, other):
        raise ValueError("eq")

    def __bool__(self):
        raise ValueError("bool")

    def __iter__(self):
        raise ValueError("iter")

    def __str__(self):
        raise ValueError("str")

    __hash__ = None


class _IndexRaises:
    def __index__(self):
        raise ValueError("index")


@pytest.mark.parametrize("call", [
    lambda: rs.op.sqrt()(np.ones(4), stream=_Raises()),
    lambda: rs.op.sqrt()(np.ones(4), stream=_IndexRaises()),
    lambda: rs.sum(np.ones(4), stream=_Raises()),
    lambda: rs.random.fill_uniform(np.ones(4), 1, stream=_Raises()),
    lambda: rs.stage("float f(float v) { return v; }", name=_Raises()),
    lambda: rs.stage(lambda v: v, float_literals=_Raises()),
    lambda: rs.dist.shard(np.ones(4), [_Raises()]),
    lambda: rs.dist.shard(np.ones(4), _Raises()),
    lambda: rs.stage("float f(float v) { return v; }").kernel_source(["float32"], "float32", device=_Raises()),
    lambda: rs.to_device(np.ones(3), device="cpu").__array__(copy=_Raises()),
], ids=["stream", "stream-index", "sum-stream", "fill-stream", "name", "float_literals", "device-name",
        "devices", "kernel_source-device", "array-copy"])
def test_what_an_arguments_own_code_raises_is_invalid_type(call):
    with pytest.raises(rs.InvalidType):
        call()


class _Index:
    """An integer-like whose __index__ returns `r`, or raises it when it is an exception class."""

    def __init__(self, r):
        self.r = r

    def __index__(self):
        if isinstance(self.r, type) and issubclass(self.r, BaseException):
            raise self.r("index")
        return self.r


class _BadItems:
    def __len__(self):
        return 2

    def __getitem__(self, i):
        raise ValueError("item")


@pytest.mark.parametrize("shape", [(2, _Index(2.5)), _Index(ValueError), _BadItems()])
def test_a_shape_whose_own_code_raises_is_invalid_type(shape):
    # The extent's __index__ and the sequence's items let their errors out bare before.
    with pytest.raises(rs.InvalidType, match="a shape's"):
        rs.empty(shape, device="cpu")
    with pytest.raises(KeyboardInterrupt):
        rs.empty(_Index(KeyboardInterrupt), device="cpu")


@pytest.mark.parametrize("n", [_Index(10.5), _Index("3"), _Index(ValueError)])
def test_dist_counts_are_read_through_operator_index(n):
    # extent_of returned floats for an __index__ giving 10.5, and compared str with int.
    with pytest.raises(rs.InvalidArgument, match="not an integer"):
        rs.dist.extent_of(n, 2, 0)
    with pytest.raises(rs.InvalidType, match="not an integer"):
        rs.dist.shard(np.ones(4, np.float32), n)
    assert rs.dist.extent_of(_Index(10), 3, 0) == (0, 4)


class _DeviceRaises:
    a = np.ones(3, np.float32)

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        raise ValueError("dev")


def test_a_dlpack_device_that_raises_is_invalid_argument():
    for call in (rs.from_dlpack, rs.op.sqrt(), lambda x: rs.random.fill_uniform(x, 1)):
        with pytest.raises(rs.InvalidArgument, match="__dlpack_device__ of a _DeviceRaises raised ValueError"):
            call(_DeviceRaises())


class _Producer:
    """An array whose protocol methods raise what they are given."""

    def __init__(self, exc):
        self.exc = exc

    def __dlpack__(self, *a, **k):
        raise self.exc

    def __dlpack_device__(self):
        return (1, 0)


def test_a_producers_own_error_is_in_the_message():
    with pytest.raises(rs.InvalidArgument, match="it said: .*no export today"):
        rs.sum(_Producer(ValueError("no export today")))

    class Float32(_Producer):  # a dtype resident takes: the producer's refusal is not a type's
        dtype = np.dtype(np.float32)
    for call in (rs.from_dlpack, rs.sum):
        with pytest.raises(rs.InvalidArgument, match="requires grad") as e:
            call(Float32(BufferError("it requires grad")))
        assert not isinstance(e.value, rs.InvalidType) and "astype" not in str(e.value)


def test_an_after_list_or_a_signature_whose_own_code_raises():
    class Bad(list):
        def __iter__(self):
            raise ValueError("no items today")

    class Sig:
        @property
        def __signature__(self):
            raise RuntimeError("no signature today")

        def __call__(self):
            return None

    f = rs.Flow()
    f.add("a", lambda: None)
    with pytest.raises(rs.InvalidType, match="could not be read.*no items today"):
        f.add("b", lambda: None, after=Bad([0]))
    assert f.add("c", Sig()) == 1  # no signature to read: taken as it is, called bare
    f.run()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_inside_a_conversion_goes_on_unchanged(stop):
    with pytest.raises(stop):
        rs.Flow(device="cpu", streams=Raises(stop()))
    f = rs.Flow(device="cpu")
    f.add("a", lambda: None)
    with pytest.raises(stop):
        f.add("b", lambda: None, after=[Raises(stop())])
    with pytest.raises(stop):
        rs.empty(3, dtype=Raises(stop()))
    f.add("b", lambda: None, after=[0])  # usable after
    f.run()


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_producer_goes_on_unchanged(exc):
    with pytest.raises(exc):
        rs.sum(_Producer(exc()))
    with pytest.raises(exc):
        rs.op.sqrt()(_Producer(exc()))

    class Interface:
        @property
        def __cuda_array_interface__(self):
            raise exc()
    with pytest.raises(exc):
        rs.from_dlpack(Interface())


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_numbers_conversion_goes_on_unchanged(exc):
    class Number:  # raises what it is given when converted to a float or an integer
        def __float__(self):
            raise exc()

        def __index__(self):
            raise exc()
    x = rs.empty(4, dtype="float32", device="cpu")
    for call in (lambda: rs.op.add(Number()), lambda: rs.op.affine(1.0, Number()),
                 lambda: rs.random.fill_uniform(x, seed=Number()), lambda: rs.random.fill_uniform(x, 1, low=Number())):
        with pytest.raises(exc):
            call()
    with pytest.raises(rs.InvalidType):
        rs.op.add("one")  # a mismatch that raised nothing is still the typed error


def test_a_conversion_that_failed_once_does_not_make_a_valid_argument_mistyped():
    class Once:  # fails its first conversion only (as an interrupt nanobind cleared would)
        calls = 0

        def __float__(self):
            Once.calls += 1
            if Once.calls == 1:
                raise KeyboardInterrupt
            return 2.0
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(rs.op.add(Once())(x.copy()), np.full(3, 3, np.float32))


@pytest.mark.skipif(sys.version_info < (3, 12), reason="a Python class exports a buffer from Python 3.12 on")
def test_an_interrupt_raised_by_a_buffer_exporter_goes_on_unchanged():
    class Interrupting:
        def __buffer__(self, flags):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rs.to_device(Interrupting(), device="cpu")


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
