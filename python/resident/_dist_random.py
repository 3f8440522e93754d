"""Random fills of sharded arrays, ``resident.dist.random`` (the C++ resident::dist::random): shard r is
filled at offset + the place of its first element in the whole array, so the values are exactly those of
a one-device fill of the same length with the same seed (the counter is global), whichever devices and
processes hold the shards. One fill per shard, each queued on its shard's stream (asynchronous on GPUs:
every shard fills at once)."""
from . import _typed
from . import random as _one
from .dist import _check, _writable
from . import InvalidArgument

__all__ = ["fill_uniform", "fill_normal", "fill_bits", "fill_integers"]

_WORDS = 1 << 64  # a stream is a cycle of 2^64 values, as the C++ uint64 offset wraps


def _fill(what, x, offset, fill, stream):
    _check(x, f"random.{what}")
    if stream is not None:
        raise InvalidArgument(f"resident.dist.random.{what}: the shards fill on their own devices' streams; "
                              "stream= is for an array on one device")
    _writable(x)
    start = _one._offset(offset, f"resident.dist.random.{what}")
    if not x.shards:  # no shard here: the parameters are checked all the same, as on the processes with some
        from . import empty
        fill(empty(0, dtype=x.dtype, device="cpu"), start)
    for s, (o, _) in zip(x.shards, x.extents):
        fill(s, (start + o) % _WORDS)


def fill_uniform(x, seed, offset=0, low=0.0, high=1.0, stream=None):
    """x[i] = value (offset + i) of the uniform stream `seed` in [low, high), i over the whole sharded array.
    float32 or float64. @raises InvalidArgument as resident.random.fill_uniform, before any shard is filled."""
    _fill("fill_uniform", x, offset, lambda s, o: _one.fill_uniform(s, seed, o, low, high), stream)


def fill_normal(x, seed, offset=0, mean=0.0, sd=1.0, stream=None):
    """x[i] = value (offset + i) of the normal stream `seed`, i over the whole sharded array."""
    _fill("fill_normal", x, offset, lambda s, o: _one.fill_normal(s, seed, o, mean, sd), stream)


def fill_bits(x, seed, offset=0, stream=None):
    """x[i] = raw Philox word (offset + i) of stream `seed`, i over the whole sharded array. uint32."""
    _fill("fill_bits", x, offset, lambda s, o: _one.fill_bits(s, seed, o), stream)


def fill_integers(x, seed, low, high, offset=0, stream=None):
    """x[i] = value (offset + i) of the integer stream `seed`, uniform in [low, high), i over the whole
    sharded array. int32 or uint32."""
    _fill("fill_integers", x, offset, lambda s, o: _one.fill_integers(s, seed, low, high, o), stream)


fill_uniform = _typed.python_signature(fill_uniform, "resident.dist.random.fill_uniform")
fill_normal = _typed.python_signature(fill_normal, "resident.dist.random.fill_normal")
fill_bits = _typed.python_signature(fill_bits, "resident.dist.random.fill_bits")
fill_integers = _typed.python_signature(fill_integers, "resident.dist.random.fill_integers")
