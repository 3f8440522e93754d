"""Random numbers generated INTO existing arrays: resident's, or any array that speaks DLPack or the
CUDA Array Interface (NumPy, PyTorch, CuPy, Numba), in place, with no copy. Value i of a random stream
(seed, offset) is the same on the CPU and the GPU. The fill is queued on ``stream`` when given (an
object with ``__cuda_stream__``, a PyTorch, CuPy or Numba stream, or an int handle), else on the
current stream of the array's library; it does not wait for the device (see docs/python.md, Streams).
A stream is a cycle of 2^64 values: value i is value (offset + i) mod 2^64, so a fill running past the
last value goes on from value 0 (as the C++ generators do)."""
import operator

from . import _core
from ._typed import shown as _shown

# (resident.dist.ShardedArray,) once resident.dist is imported: a sharded array is filled by
# resident.dist.random, each shard at its place in the whole (an empty tuple matches nothing).
_SHARDED = ()


def _sharded():
    from . import _dist_random
    return _dist_random


def _offset(v, what):
    """An offset as an int from 0 to 2^64 - 1, refused as the core refuses it (the sharded fills add the
    shards' places to it, so it is checked before)."""
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise _core.InvalidType(f"{what}: offset={_shown(v)} is not an integer")
    try:
        i = operator.index(v)
    except Exception as e:  # noqa: BLE001 (the object's own __index__: named)
        raise _core.InvalidType(f"{what}: offset={_shown(v)}: its __index__() raised {type(e).__name__}") from None
    if not 0 <= i < 1 << 64:
        raise _core.InvalidArgument(f"{what}: offset={i} is out of range: give 0 to {(1 << 64) - 1}")
    return i


def fill_uniform(x, seed, offset=0, low=0.0, high=1.0, stream=None):
    """x[i] = value (offset + i) of the uniform stream `seed`, in [low, high). float32 or float64. A
    resident.dist.ShardedArray is filled as one array (resident.dist.random.fill_uniform)."""
    if isinstance(x, _SHARDED):
        return _sharded().fill_uniform(x, seed, offset, low, high, stream)
    _core.fill_uniform(x, seed, offset, low, high, stream)


def fill_normal(x, seed, offset=0, mean=0.0, sd=1.0, stream=None):
    """x[i] = value (offset + i) of the normal stream `seed`. float32 or float64 (a ShardedArray too)."""
    if isinstance(x, _SHARDED):
        return _sharded().fill_normal(x, seed, offset, mean, sd, stream)
    _core.fill_normal(x, seed, offset, mean, sd, stream)


def fill_bits(x, seed, offset=0, stream=None):
    """x[i] = raw Philox word (offset + i) of stream `seed`. uint32 (a ShardedArray too)."""
    if isinstance(x, _SHARDED):
        return _sharded().fill_bits(x, seed, offset, stream)
    _core.fill_bits(x, seed, offset, stream)


def fill_integers(x, seed, low, high, offset=0, stream=None):
    """x[i] = value (offset + i) of the integer stream `seed`, uniform in [low, high) (high excluded, and
    at most one past the type's largest: 2**31 for int32, 2**32 for uint32, every value of the type).
    int32 or uint32. @raises InvalidArgument for other bounds outside the element type's range or
    low >= high, before any work.
    A ShardedArray is filled as one array."""
    if isinstance(x, _SHARDED):
        return _sharded().fill_integers(x, seed, low, high, offset, stream)
    _core.fill_integers(x, seed, low, high, offset, stream)


__all__ = ["fill_uniform", "fill_normal", "fill_bits", "fill_integers"]


from ._typed import python_signature as _python_signature  # noqa: E402

# A missing seed or an unknown keyword: InvalidType, as the core's functions raise.
fill_uniform = _python_signature(fill_uniform, "resident.random.fill_uniform")
fill_normal = _python_signature(fill_normal, "resident.random.fill_normal")
fill_bits = _python_signature(fill_bits, "resident.random.fill_bits")
fill_integers = _python_signature(fill_integers, "resident.random.fill_integers")
