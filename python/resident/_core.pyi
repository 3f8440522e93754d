"""resident's compiled core; use the resident package"""

from collections.abc import Sequence
from typing import overload


class Array:
    """
    A C-contiguous array on one device (resident's own memory or another library's, taken in place). Shares memory through __dlpack__ and __cuda_array_interface__.
    """

    @property
    def shape(self) -> tuple: ...

    @property
    def dtype(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def device(self) -> str: ...

    @property
    def data_ptr(self) -> int: ...

    @property
    def _readonly(self) -> bool: ...

    @property
    def stream(self) -> int:
        """
        the stream handle work on the array is ordered on (1 = the legacy default stream)
        """

    def __len__(self) -> int: ...

    def __repr__(self) -> str: ...

    def to_host(self, stream: object | None = None, *, out: object | None = None) -> object:
        """
        Copies the array into a new NumPy array, or into out= (an existing C-contiguous, writable host array of the same shape and dtype, returned): one counted transfer. Synchronizes.
        """

    def to_host_async(self, out: object, *, stream: object | None = None) -> object:
        """
        Starts copying the array into out (a host array of the same shape and dtype) and returns it: from page-locked memory (resident.streaming.pinned_empty) the copy runs while the host goes on; read out and let it go only after the stream (stream=, else the array's) is synchronized. Into pageable memory it is finished when this returns.
        """

    def __dlpack__(self, *, stream: object | None = None, max_version: object | None = None, dl_device: object | None = None, copy: object | None = None) -> object: ...

    def __dlpack_device__(self) -> tuple: ...

    @property
    def __cuda_array_interface__(self) -> dict:
        """
        Version 3; "stream" is None when the array's queued work has finished, else the stream it is queued on.
        """

    def to_numba(self) -> object:
        """
        A Numba CUDA device array over the same memory, made once per Array; x's work finished first (resident.to_numba).
        """

    def item(self) -> float | int:
        """
        The value of a one-element array (a counted transfer to the host); resident/_protocols.py.
        """

    def __matmul__(self, other: object) -> Array: ...

    def __copy__(self) -> Array: ...

    def __deepcopy__(self, memo: object) -> Array: ...

def empty(shape: object, dtype: object = 'float32', device: str | None = None) -> Array:
    """A new uninitialized array from the device's pool."""

def to_device(host: object, device: str | None = None, stream: object | None = None) -> Array:
    """
    Copies a host (NumPy) array into a new array on the device: one counted transfer.
    """

def copy(src: object, dst: object, *, stream: object | None = None) -> None:
    """
    dst[...] = src between two existing arrays of one shape and element type, of any library, on any devices: device to device (ordered on the arrays' streams), between two GPUs (a peer copy), or host memory to a device and back (a counted transfer, finished when this returns). stream= orders the copy on a stream of the device.
    """

def copy_async(src: object, dst: object, *, stream: object | None = None) -> None:
    """
    As copy, but a copy with host memory on one side returns once queued: page-locked host memory (resident.streaming.pinned_empty) is copied while the host goes on; keep it alive and unchanged until the stream (stream=, else the device array's) is synchronized. Pageable memory is staged: an upload returns once the host memory was read, a download once it is done.
    """

def from_dlpack(obj: object, stream: object | None = None) -> Array:
    """
    Takes another library's array in place (DLPack, the CUDA Array Interface, or host memory through the buffer protocol or the array interface): no copy. `stream`: the stream the array is worked on, given to the producer's __dlpack__ (the DLPack handshake).
    """

def default_device() -> str: ...

def cuda_device_count() -> int: ...

def cuda_unavailable_reason() -> str: ...

def synchronize(device: str | None = None) -> None: ...

class op:
    """
    One built-in element-wise operation; compose them with | into a program.
    """

    @staticmethod
    def add(c: float) -> op:
        """v + c"""

    @staticmethod
    def mul(c: float) -> op:
        """v * c"""

    @staticmethod
    def affine(a: float, b: float) -> op:
        """a * v + b"""

    @staticmethod
    def square() -> op:
        """v * v"""

    @staticmethod
    def sqrt() -> op:
        """sqrt(v)"""

    @staticmethod
    def rsqrt() -> op:
        """1 / sqrt(v)"""

    @staticmethod
    def exp() -> op:
        """e^v"""

    @staticmethod
    def log() -> op:
        """ln(v)"""

    @staticmethod
    def sin() -> op:
        """sin(v)"""

    @staticmethod
    def cos() -> op:
        """cos(v)"""

    @staticmethod
    def tanh() -> op:
        """tanh(v)"""

    @staticmethod
    def abs() -> op:
        """|v|"""

    @staticmethod
    def neg() -> op:
        """-v"""

    @staticmethod
    def recip() -> op:
        """1 / v"""

    @staticmethod
    def minimum(c: float) -> op:
        """min(v, c)"""

    @staticmethod
    def maximum(c: float) -> op:
        """max(v, c)"""

    @staticmethod
    def pow(c: float) -> op:
        """v ** c"""

    @staticmethod
    def parse(text: str) -> op:
        """An operation from its name: 'sqrt', 'add(1)', 'affine(1.5, 0.5)'."""

    @property
    def name(self) -> str: ...

    def __repr__(self) -> str: ...

    @overload
    def __or__(self, arg: op, /) -> program: ...

    @overload
    def __or__(self, arg: program, /) -> program: ...

    @property
    def a(self) -> float:
        """the operation's first constant"""

    @property
    def b(self) -> float:
        """its second constant"""

    def __call__(self, x: object, out: object | None = None, stream: object | None = None) -> object: ...

class program:
    """
    A chain of built-in operations run as ONE fused kernel: p(x) in place, p(x, out), p.sum(x).
    """

    @overload
    def __init__(self) -> None: ...

    @overload
    def __init__(self, ops: Sequence[op]) -> None: ...

    @overload
    def __or__(self, arg: op, /) -> program: ...

    @overload
    def __or__(self, arg: program, /) -> program: ...

    @property
    def ops(self) -> list[op]: ...

    @property
    def name(self) -> str: ...

    def __repr__(self) -> str: ...

    def __len__(self) -> int: ...

    @property
    def engine(self) -> str | None:
        """What the last call used: 'compiled', 'interpreted', or None."""

    def __call__(self, x: object, out: object | None = None, stream: object | None = None) -> object:
        """
        out = p(x) as one kernel (out defaults to x: in place); float32 or float64 arrays of any library.
        """

    def sum(self, x: object, stream: object | None = None) -> float:
        """The sum of p(x[i]) in one pass, in x's precision. Synchronizes."""

def matmul(a: object, b: object, out: object | None = None, algo: str = 'auto', alpha: float = 1.0, beta: float = 0.0, stream: object | None = None) -> object:
    """
    out = alpha * a @ b + beta * out (2-D float32 / float64 arrays of any library, one device) by one of the ladder's algorithms: auto, naive, blocked, shared, tuned, vendor, vendor_tf32. Asynchronous on out's stream for resident's arrays; finished before returning for other libraries' arrays.
    """

def fill_uniform(x: object, seed: int, offset: int = 0, low: float = 0.0, high: float = 1.0, stream: object | None = None) -> None: ...

def fill_normal(x: object, seed: int, offset: int = 0, mean: float = 0.0, sd: float = 1.0, stream: object | None = None) -> None: ...

def fill_bits(x: object, seed: int, offset: int = 0, stream: object | None = None) -> None: ...

def fill_integers(x: object, seed: int, low: int, high: int, offset: int = 0, stream: object | None = None) -> None: ...

def sum(x: object, stream: object | None = None) -> int | float: ...

def cumsum(x: object, out: object | None = None, *, stream: object | None = None) -> object:
    """out[i] = x[0] + ... + x[i] over x's elements in C order, added in out's type (made when not given: x's type, 64-bit for integers)."""

def cummin(x: object, out: object | None = None, *, stream: object | None = None) -> object:
    """out[i] = min(x[0], ..., x[i]) over x's elements in C order (NaN propagates)."""

def cummax(x: object, out: object | None = None, *, stream: object | None = None) -> object:
    """out[i] = max(x[0], ..., x[i]) over x's elements in C order (NaN propagates)."""

def _pool_stats(device: str | None = None) -> dict: ...
def _device_properties(device: str | None = None) -> dict: ...

# What this build of the C++ library contains (config.hpp) and its version.
cuda_compiled: bool
debug_checks: bool
debug_sync: bool
library_version: str

def set_pool_limit(bytes: int | str, device: str | None = None) -> None:
    """Caps the bytes the device's pool may have in use at once (an int, or a text such as '512MiB'); an allocation past it raises OutOfMemory. 0 is refused: clear_pool_limit lifts a limit."""

def clear_pool_limit(device: str | None = None) -> None:
    """Lifts the device pool's limit (also one RESIDENT_POOL_LIMIT set)."""

def pool_limit(device: str | None = None) -> int | None:
    """The device pool's limit in bytes, or None when there is none."""

def trim_pool(device: str | None = None) -> None:
    """Returns the memory the device's pool caches to the system. Synchronizes."""

def set_pool_caching(enabled: bool, device: str | None = None) -> None:
    """Turns caching of freed memory on or off for the device's pool (off: every free returns its memory)."""

def pool_caching(device: str | None = None) -> bool:
    """Whether the device's pool caches freed memory."""

def reset_pool_peak(device: str | None = None) -> None:
    """Starts the device's peak figures again from the bytes in use now."""

def min(x: object, stream: object | None = None) -> int | float: ...

def max(x: object, stream: object | None = None) -> int | float: ...

class Stream:
    """A stream resident makes on one device (non-blocking on a GPU): queue calls on it with stream=s. Speaks the CUDA stream protocol (__cuda_stream__); its handle is 0 on the CPU."""
    def __init__(self, device: str | None = None) -> None: ...
    @property
    def device(self) -> str: ...
    @property
    def handle(self) -> int: ...
    def __cuda_stream__(self) -> tuple[int, int]: ...
    def synchronize(self) -> None: ...
    def wait_for(self, before: object | None) -> None: ...
    def record(self) -> Event: ...

class Event:
    """A point in a stream to wait on and to time between (timing enabled)."""
    def __init__(self, device: str | None = None) -> None: ...
    @property
    def device(self) -> str: ...
    def record(self, stream: object | None = None) -> None: ...
    def synchronize(self) -> None: ...
    def wait_for(self, stream: object | None) -> None: ...
    def elapsed_ms(self, end: Event) -> float: ...

class Graph:
    """Captured resident work: replay() runs it again as one launch (CUDA)."""

    def replay(self, stream: object | None = None) -> None:
        """
        Runs the captured work again, asynchronously, on the device's default stream (where arrays' own work runs): after the work queued before it, and later work sees its results.
        """

    def update(self, work: object) -> None:
        """
        Records the resident work that work() issues into this graph in place, keeping its instantiation (the way to change scalars between replays): on CUDA the new work must launch the same kernels in the same order and dependencies (else InvalidArgument: capture a new graph); on the CPU a replay calls work() from now on.
        """

    @property
    def kernels(self) -> int:
        """Kernels one replay launches."""

class Flow:
    """
    Named stages of Python work with dependencies, independent ones on concurrent streams; resident calls inside a stage run on the stage's stream.
    """

    def __init__(self, device: str | None = None, streams: int = 4) -> None: ...

    def add(self, name: str, work: object, reads: Sequence[object] = [], writes: Sequence[object] = [], after: Sequence[int] = [], infer: bool = True) -> int:
        """
        Adds a stage calling work() (no arguments); returns its id. Edges are inferred from the declared reads and writes (arrays of any library) in the order stages are added, plus `after`.
        """

    def run(self) -> None:
        """Runs every stage in dependency order and waits for them."""

    def capture(self) -> Graph:
        """The whole flow as one Graph (nothing runs during the capture)."""

    def report(self) -> list:
        """The last run's per-stage figures: name, stream, ms, kernels, bytes."""

    def __len__(self) -> int: ...

def capture(work: object, device: str | None = None) -> Graph:
    """
    The resident work that work() issues, captured into a Graph on a stream of its own (nothing runs during the capture on CUDA; on the CPU a replay calls work() again).
    """

# The exception classes, made from the C++ table of error kinds (RESIDENT_ERRORS in error.hpp).
class Error(RuntimeError): ...
class InvalidArgument(Error, ValueError): ...
class InvalidType(InvalidArgument, TypeError): ...
class InvalidLaunch(InvalidArgument): ...
class ShapeMismatch(InvalidArgument): ...
class DeviceMismatch(InvalidArgument): ...
class FlowError(InvalidArgument): ...
class CompileError(InvalidArgument):
    log: str | None  # the compiler's log (None when raised from Python)
class OutOfMemory(Error, MemoryError):
    # The figures at the failure, in bytes (None when raised from Python; the last two also where unknown).
    requested_bytes: int | None
    free_bytes: int | None
    pool_reserved_bytes: int | None
    pool_in_use_bytes: int | None
    pool_limit_bytes: int | None
    largest_free_block_bytes: int | None
class DeviceUnavailable(Error): ...
class TransferForbidden(Error): ...
class StageError(Error):
    stage: str | None  # the failing stage's name; __cause__ is what the stage raised
class LibraryError(Error):
    library: str | None  # "CUDA", "cuBLAS", "cuRAND", "NVRTC", "nvJitLink", "NCCL"
    code: int | None  # the library's status code
    name: str | None  # the status's name, e.g. "cudaErrorMemoryAllocation"
class CudaError(LibraryError): ...
class DeviceLost(CudaError): ...

_error_names: tuple[str, ...]
