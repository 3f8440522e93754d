"""resident: GPU data pipelines whose data stays on the device.

Arrays are shared with NumPy, PyTorch, CuPy and Numba at zero copy (DLPack and the CUDA Array
Interface, with the stream handshake); data moves between host and device only through `to_device` and
`Array.to_host`, each counted in the ledger; random numbers are generated into existing arrays, resident's
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

from . import _compat  # noqa: F401  (first: NumPy as numba-cuda expects it, before numba can be imported)
from . import _core
from ._core import Array, cuda_device_count, cuda_unavailable_reason, default_device, empty, from_dlpack, synchronize
from ._core import to_device, sum, min, max  # noqa: A001 (resident's reductions, on any array)
from ._core import matmul, op, program
from ._core import Flow, Graph, capture


class Error(RuntimeError):
    """Base of every error resident raises."""


class InvalidArgument(Error, ValueError):
    """A bad value: a moved or unusable array, an unknown name, a range that cannot be honoured."""


class ShapeMismatch(InvalidArgument):
    """Array extents that do not fit together."""


class DeviceMismatch(InvalidArgument):
    """Arrays or streams that must be on one device are on different ones."""


class InvalidLaunch(InvalidArgument):
    """A launch configuration beyond the device's limits."""


class FlowError(InvalidArgument):
    """A flow that cannot run: a cycle, two unordered writers, an unknown stage."""


class OutOfMemory(Error, MemoryError):
    """An allocation failed after the pool was trimmed and the allocation retried."""


class DeviceUnavailable(Error):
    """A device was asked for that this build or machine cannot provide."""


class TransferForbidden(Error):
    """A host<->device transfer inside transfer_policy("forbid")."""


class StageError(Error):
    """A flow stage raised."""


class LibraryError(Error):
    """A call into a vendor library (CUDA, cuBLAS, cuRAND, NVRTC, nvJitLink, NCCL) failed."""


class CudaError(LibraryError):
    """A CUDA runtime call failed."""


class DeviceLost(CudaError):
    """The device faulted; restart the process to use it again."""


class CompileError(InvalidArgument):
    """A run-time stage did not compile; the message holds the compiler's log (lines of the stage's text)."""


_core._set_exception_types({c.__name__: c for c in (
    Error, InvalidArgument, ShapeMismatch, DeviceMismatch, InvalidLaunch, FlowError, OutOfMemory,
    DeviceUnavailable, TransferForbidden, StageError, LibraryError, CudaError, DeviceLost, CompileError)})


def ledger():
    """Counts per device since the process started: {"cpu": {"h2d_bytes": ..., "kernels": ...}, ...}."""
    return _json.loads(_core._ledger_json())


class transfer_policy:
    """Within the `with` block, host<->device transfers are allowed ("allow"), logged to stderr ("log")
    or refused with TransferForbidden ("forbid"); the previous policy returns at the block's end."""

    def __init__(self, policy):
        self._policy = policy
        self._scope = None

    def __enter__(self):
        self._scope = _core._open_policy(self._policy)
        return self

    def __exit__(self, *exc):
        self._scope.close()
        self._scope = None
        return False

    @staticmethod
    def current():
        """The policy in force now: "allow", "log" or "forbid"."""
        return _core._current_policy()


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
        from numba import cuda  # after resident._compat
        desc = dict(x.__cuda_array_interface__)
        desc["stream"] = None  # the readiness is made below on every call, not only this once
        # The view's owner is a second handle on the memory (from_dlpack of a resident Array shares it).
        view = cuda.from_cuda_array_interface(desc, owner=_core.from_dlpack(x), sync=False)
        x.__dict__["_numba_view"] = view
    _core._ready_for_any_stream(x)
    return view


Array.to_numba = to_numba

from . import random  # noqa: E402  (after the exception types are registered)
from . import jit  # noqa: E402
from .jit import stage  # noqa: E402
from . import streaming, dist  # noqa: E402
from .streaming import stream  # noqa: E402
from .profile import profile  # noqa: E402

__all__ = ["Array", "Flow", "Graph", "capture", "matmul", "op", "program", "empty", "to_device", "from_dlpack",
           "to_numba",
           "default_device", "cuda_device_count", "cuda_unavailable_reason", "synchronize", "ledger", "transfer_policy",
           "sum", "min", "max", "random", "jit", "stage", "stream", "streaming", "profile", "dist",
           "Error", "InvalidArgument", "ShapeMismatch", "DeviceMismatch", "InvalidLaunch", "FlowError",
           "OutOfMemory", "DeviceUnavailable", "TransferForbidden", "StageError", "LibraryError", "CudaError",
           "DeviceLost", "CompileError"]
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("resident")  # from include/resident/config.hpp, through pyproject.toml
except _metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "unknown"
