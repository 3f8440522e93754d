"""The memory pool's figures as a named tuple (the controls are the core's functions, named in
resident/__init__.py)."""
from collections import namedtuple

from . import _core, _typed

PoolStats = namedtuple("PoolStats", ["bytes_in_use", "bytes_reserved", "peak_bytes", "allocations", "pool_hits",
                                     "outstanding", "limit_bytes"])
PoolStats.__doc__ = """A device pool's figures: bytes held by live arrays (bytes_in_use), bytes the pool holds
from the system, in use and cached (bytes_reserved), the most bytes in use at once (peak_bytes, since the
start or reset_pool_peak), allocations served, those served without growing (pool_hits), live allocations
now (outstanding), and the limit in bytes (limit_bytes; None: none)."""


def pool_stats(device=None):
    """The figures of the device's pool (the default device's when None), as a PoolStats."""
    return PoolStats(**_core._pool_stats(device))


pool_stats = _typed.python_signature(pool_stats, "resident.pool_stats")
