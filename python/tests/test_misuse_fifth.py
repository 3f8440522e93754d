"""Misuse found by a fifth sweep, each typed now: iterables that never end, arguments that bind to no
signature, dtype and path objects whose own code raises, and interrupts raised inside conversions."""
import itertools

import numpy as np
import pytest

import resident as rs


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


@pytest.mark.parametrize("make", [
    lambda x: rs.dist.shard(x, itertools.repeat("cpu")),
    lambda x: rs.dist.shard(x, itertools.count()),
    lambda x: rs.dist.from_shards(itertools.repeat(np.ones(2, np.float32))),
    lambda x: rs.dist.Communicator(itertools.repeat("cpu")),
    lambda x: rs.dist.shard(x, ["cpu"]).copy_to(itertools.repeat("cpu")),
], ids=["shard-repeat", "shard-count", "from_shards", "communicator", "copy_to"])
def test_an_iterable_that_never_ends_is_refused_not_read_forever(make):
    with pytest.raises(rs.InvalidArgument, match="never ends"):
        make(np.ones(8, np.float32))


def test_arguments_that_bind_to_no_signature_are_invalid_type():
    x = np.ones(8, np.float32)
    p = rs.op.sqrt() | rs.op.neg()
    for call in (lambda: rs.random.fill_uniform(x, 1, foo=1), lambda: rs.random.fill_uniform(x),
                 lambda: rs.random.fill_normal(x), lambda: rs.random.fill_bits(np.ones(4, np.uint32), 1, bar=2),
                 lambda: rs.jit.stats(1), lambda: rs.transfer_policy.current(1), lambda: rs.jit.sum(1),
                 lambda: rs.jit.uniform(), lambda: rs.stage(lambda v: v, 1, 2),
                 lambda: p.sum(None), lambda: rs.op.sqrt().sum(None), lambda: p.sum(x, None, None),
                 lambda: rs.to_device(x).__dlpack__(1), lambda: rs.to_device(x).__dlpack_device__(1),
                 lambda: rs.to_device(x).__dlpack__(max_version=("a", "b")),
                 lambda: rs.to_device(x).__dlpack__(max_version=(2 ** 70, 0)),
                 lambda: rs.stage("float f(float v) { return v; }").kernel_source(None, "float32"),
                 lambda: len(rs.to_device(np.array(3.0, np.float32)))):
        with pytest.raises(rs.InvalidType):
            call()
    np.testing.assert_allclose(p(np.full(4, 4.0, np.float32)), np.full(4, -2.0))  # usable after


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
    class Odd:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

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


def test_a_float32_sum_past_its_range_is_inf_without_a_warning():
    import warnings
    x = rs.dist.shard(np.full(4, 3e38, np.float32), ["cpu", "cpu"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rs.dist.sum(x, rs.op.mul(1.0)) == float("inf")
