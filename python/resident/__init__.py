"""resident: GPU data pipelines whose data stays on the device.

Arrays are shared with NumPy, PyTorch, CuPy and Numba at zero copy (DLPack and the CUDA Array
Interface, with the stream handshake); data moves between host and device only through `to_device`,
`Array.to_host` and `copy`, each counted in the ledger; random numbers are generated into existing arrays, resident's
or another library's. Errors are `resident.Error` subclasses carrying the C++ message.

    import numpy as np, resident as rs
    x = rs.to_device(np.arange(10, dtype=np.float32))   # one counted upload
    rs.random.fill_uniform(x, seed=7)                    # in place, on the device
    y = torch.from_dlpack(x)                             # the same memory, no copy
    p = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    p(x)                                                 # ONE fused kernel, in place, on any library's array
    f = rs.Flow()                                        # stages of Python work, independent ones concurrent
    f.add("fill", lambda: rs.random.fill_uniform(x, 1), writes=[x])
    f.add("map", lambda: p(x), reads=[x], writes=[x])
    g = f.capture(); g.replay()                          # the whole flow as one CUDA graph launch
"""
import json as _json
import threading as _threading

import numpy as _np

from . import _compat
from . import _core
from . import _typed
from ._typed import wrap_core as _wrap_core

_wrap_core(_core)  # before any name is taken from the core: wrongly typed arguments raise InvalidType
from . import _program  # noqa: E402
from ._core import Array, cuda_device_count, cuda_unavailable_reason, default_device, empty, from_dlpack, synchronize
from ._core import to_device, sum, min, max  # noqa: A001 (resident's reductions, on any array)
from ._core import cumsum, cummin, cummax
from ._core import copy, copy_async
from ._core import matmul, op, program
from ._core import Flow, Graph, capture, Stream, Event
from ._core import set_pool_limit, clear_pool_limit, pool_limit, trim_pool, set_pool_caching, pool_caching
from ._core import reset_pool_peak
from ._pool import PoolStats, pool_stats
from ._device import DeviceProperties, device_properties
from ._core import cuda_compiled, debug_checks, debug_sync, library_version


# The exception classes (Error and its subclasses, with their hierarchy and documentation) are made by
# the compiled core from the C++ table of error kinds, RESIDENT_ERRORS in include/resident/error.hpp.
globals().update({_name: getattr(_core, _name) for _name in _core._error_names})
Error = _core.Error  # named here too, for readers and linters
InvalidArgument = _core.InvalidArgument


def _array_for_numpy(self, dtype=None, copy=None):
    """np.asarray(x): the same memory for an array on the CPU (np.from_dlpack's view); an array on a GPU is
    refused, since NumPy would need a copy to the host that resident makes only when asked."""
    if self.device != "cpu":
        raise InvalidType(f"resident.Array on {self.device}: NumPy reads host memory; copy it with x.to_host() "
                          "(a counted transfer)")
    if copy is not None and not isinstance(copy, (bool, _np.bool_)):
        raise InvalidType(f"resident.Array.__array__: copy is a {type(copy).__name__}; give True, False or None")
    a = _np.from_dlpack(self)
    try:
        dtype = None if dtype is None else _np.dtype(dtype)
    except Exception as e:  # noqa: BLE001 (NumPy's own error for a name it does not know)
        raise InvalidType(f"resident.Array: NumPy has no dtype {_typed.shown(dtype)} ({e})") from None
    if dtype is not None and dtype != a.dtype:
        if copy is False:
            raise InvalidArgument("resident.Array: a different dtype needs a copy, and copy=False forbids one")
        return a.astype(dtype)
    return a.copy() if copy else a


Array.__array__ = _array_for_numpy


def ledger():
    """Counts per device since the process started: {"cpu": {"h2d_bytes": ..., "kernels": ...}, ...}."""
    return _json.loads(_core._ledger_json())


class transfer_policy:
    """Within the `with` block, host<->device transfers are allowed ("allow"), logged to stderr ("log")
    or refused with TransferForbidden ("forbid"); the previous policy returns at the block's end."""

    def __init__(self, policy=None, *extra, **unknown):
        if not isinstance(policy, str) or extra or unknown:
            given = ", ".join([repr(policy)[:40], *(repr(e)[:40] for e in extra), *unknown])
            raise InvalidType("resident.transfer_policy(policy): an argument's type does not fit: give one of "
                              f'"allow", "log" or "forbid" (it was given {given})')
        if policy not in ("allow", "log", "forbid"):
            raise InvalidArgument(f"unknown transfer policy {_typed.shown(policy)}: use allow, log or forbid")
        self._policy = policy
        # Entries still open, in the order entered, each with its thread: an exit closes its own thread's
        # innermost entry, or where that thread has none (an ExitStack or a generator closed on another
        # thread), the one entry open (entries of several threads: which one is meant cannot be told);
        # the C++ scope closes on any thread.
        self._open, self._lock = [], _threading.Lock()

    def __enter__(self):
        scope = _core._open_policy(self._policy)
        with self._lock:
            self._open.append((_threading.get_ident(), scope))
        return self

    def __exit__(self, *exc):
        me = _threading.get_ident()
        with self._lock:
            if not self._open:
                raise InvalidArgument("resident.transfer_policy: __exit__ without __enter__ (use it in a with "
                                      "block)")
            mine = [i for i, (thread, _) in enumerate(self._open) if thread == me]
            if not mine and len({thread for thread, _ in self._open}) > 1:
                raise InvalidArgument("resident.transfer_policy: __exit__ on a thread that did not enter it, "
                                      "while threads entered it: which entry to close cannot be told; exit "
                                      "each block on the thread that entered it")
            _, scope = self._open.pop(mine[-1] if mine else -1)
        scope.close()
        return False

    def __reduce__(self):
        return (transfer_policy, (self._policy,))  # the policy it sets; no entry open in the copy

    def __copy__(self):
        return transfer_policy(self._policy)

    def __deepcopy__(self, memo):
        return transfer_policy(self._policy)

    def current():
        """The policy in force now: "allow", "log" or "forbid"."""
        return _core._current_policy()

    current = staticmethod(_typed.python_signature(current, "resident.transfer_policy.current"))


def to_numba(x):
    """A Numba CUDA device array over the same memory as the resident Array x (no copy): the fastest
    way to hand x to Numba kernels. The view is made once per Array object and kept on it (the same
    object is returned each time; it holds the memory, not x, so no reference cycle); each call only
    makes sure x's queued work is finished (a query when it is; else x's stream is synchronized, as
    ``numba.cuda.as_cuda_array`` does), so Numba may use the view on any stream. ``x.to_numba()`` is
    the same. @raises InvalidArgument for an array on the CPU (NumPy takes it: ``np.from_dlpack``)."""
    try:
        view = x.__dict__["_numba_view"]
    except (KeyError, AttributeError):
        if not isinstance(x, Array):
            raise InvalidArgument("resident.to_numba takes a resident.Array; other libraries' arrays go to "
                                  "numba.cuda.as_cuda_array directly") from None
        if not x.device.startswith("cuda"):
            raise InvalidArgument(f"resident.to_numba: the array is on {x.device}; Numba's CPU functions "
                                  "take NumPy arrays (numpy.from_dlpack(x))") from None
        from ._stage_check import load_numba
        with _compat.numpy_for_numba_cuda():
            load_numba(cuda=True)  # once, under the lock, Numba's settings file judged first
            from numba import cuda
        desc = dict(x.__cuda_array_interface__)
        desc["stream"] = None  # the readiness is made below on every call, not only this once
        # The view's owner is a second handle on the memory (from_dlpack of a resident Array shares it).
        view = cuda.from_cuda_array_interface(desc, owner=_core.from_dlpack(x), sync=False)
        x.__dict__["_numba_view"] = view
    _core._ready_for_any_stream(x)
    return view


ledger = _typed.python_signature(ledger, "resident.ledger")
to_numba = _typed.python_signature(to_numba, "resident.to_numba")
Array.to_numba = to_numba
from . import _protocols  # noqa: E402
_protocols.install()  # copy, pickle, indexing and operators on resident's objects


_NOTHING = object()


def _program_sum(self=_NOTHING, x=_NOTHING, stream=None, *extra, **unknown):
    """The sum of p(x[i]) in one pass (one kernel), in x's precision; waits for the stream it ran on."""
    if not isinstance(self, (program, op)):  # rs.op.sum(x): called on the class, x arrived as self
        raise InvalidType("sum is a method of an operation or a program: rs.op.sqrt().sum(x), p.sum(x); "
                          "the plain sum of an array is rs.sum(x)")
    if x is _NOTHING or unknown or extra:
        raise InvalidType(f"{'program' if isinstance(self, program) else 'op'}.sum(x, stream=None) takes one "
                          f"array and optionally a stream{'; not ' + ', '.join(unknown) if unknown else ''}"
                          f"{f'; not {len(extra)} more' if extra else ''}")
    return _program.total(self if isinstance(self, program) else _program.of_op(self), x, stream)


program.sum = _program_sum
op.sum = _program_sum  # an operation is a program of one: its sum too
program.engine = property(_program.engine, doc="What the last call used: 'compiled', 'interpreted', or None.")

from . import random  # noqa: E402  (after the exception types are registered)
from . import jit  # noqa: E402
from .jit import fuse, stage  # noqa: E402
from . import streaming, dist  # noqa: E402
from .streaming import stream  # noqa: E402
from .profile import profile  # noqa: E402

__all__ = ["Array", "Flow", "Graph", "capture", "Stream", "Event", "matmul", "op", "program", "empty", "to_device", "from_dlpack",
           "copy", "copy_async",
           "to_numba",
           "default_device", "cuda_device_count", "cuda_unavailable_reason", "synchronize", "ledger", "transfer_policy",
           "sum", "min", "max", "cumsum", "cummin", "cummax", "pool_stats", "PoolStats", "device_properties", "DeviceProperties", "cuda_compiled",
           "debug_checks", "debug_sync", "library_version", "set_pool_limit", "clear_pool_limit", "pool_limit",
           "trim_pool", "set_pool_caching", "pool_caching", "reset_pool_peak", "random", "jit", "stage", "fuse", "stream", "streaming", "profile", "dist",
           *_core._error_names]
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("resident")  # from include/resident/config.hpp, through pyproject.toml
except _metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "unknown"
