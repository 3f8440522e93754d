"""Host arrays of any size through resident work, in chunks: ``resident.stream``.

The data is cut into chunks; each chunk goes up to the device, through the work (one kernel per chunk)
and back down, with the uploads, kernels and downloads of different chunks overlapped on three streams
and pageable memory staged through pinned buffers. Only a few chunks are on the device at once, so the
host array may be far larger than the device's memory (``RESIDENT_POOL_LIMIT`` caps the staging too).
On the CPU backend the same call runs the chunks over the host arrays in place, with the same results
and ledger counts.

    import numpy as np, resident as rs
    x = np.random.rand(1 << 30).astype(np.float32)              # 4 GiB on the host
    seed = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)
    y = rs.stream(seed, x)                                        # a new host array of the results
    rs.stream(seed, x, out=x)                                     # in place
    s = rs.stream(seed, x, reduce="sum")                          # a value: one partial per chunk
    s = rs.stream(func1 | func2 | func3 | rs.jit.sum(), x)        # resident.stage chains too
"""
import inspect
import operator
import os
import sys
import threading

import numpy as _np

from . import _core, _typed
from ._typed import shown as _shown

__all__ = ["stream", "last_summary", "pinned_empty"]

_REDUCTIONS = ("sum", "min", "max")
# Runs that stream at least this many bytes show a tqdm bar (when tqdm is installed and stderr is a
# terminal) unless progress=False.
_AUTO_PROGRESS_BYTES = None  # read at the first stream (a bad value is refused there, in resident's terms)


def _auto_progress_bytes():
    global _AUTO_PROGRESS_BYTES
    if _AUTO_PROGRESS_BYTES is None:
        text = os.environ.get("RESIDENT_PROGRESS_BYTES", "")
        n = _core._parse_bytes(text) if text else 1 << 30
        if n is None:
            raise _error("InvalidArgument", f"RESIDENT_PROGRESS_BYTES is {_shown(text)}: give a byte count such as 1GiB, "
                         "512MiB or 1000000 (or unset it for 1GiB)")
        _AUTO_PROGRESS_BYTES = n
    return _AUTO_PROGRESS_BYTES
_last = threading.local()
_COMPUTED = ("float32", "float64", "int32", "int64", "uint32", "uint64")
_MAX_DEPTH = 16  # the chunk loop's (src/out_of_core/chunk_loop.cpp)
_MAX_HOST_THREADS = 256  # the chunk loop's too


def _error(kind, message):
    import resident
    return getattr(resident, kind)(message)


def _host(a, what, writable=False, who="resident.stream"):
    """a as a 1-D NumPy view of the same host memory (no copy; a base-class ndarray, np.matrix's too),
    taken as every call takes arrays (the core's one check of what it points at; a NumPy scalar is no
    memory to write into). A NumPy array's own flags are named first, in NumPy's terms."""
    if isinstance(a, _np.ndarray):
        if a.dtype.name not in _COMPUTED:  # no type resident computes with: named before any stage sees it
            raise _error("InvalidType", f"{who}: {what} holds {a.dtype} values; stream float32, float64, int32, "
                         "int64, uint32 or uint64 values: convert with x.astype(...)")
        if not a.dtype.isnative:
            raise _error("InvalidType", f"{who}: {what} holds {a.dtype.str} values in the other byte "
                         "order; pass it as numpy.asarray(x, dtype=x.dtype.newbyteorder('='))")
        if not a.flags.c_contiguous:
            raise _error("InvalidArgument", f"{who}: {what} is not contiguous; pass "
                         "numpy.ascontiguousarray(...) of it (a copy)")
        if writable and not a.flags.writeable:
            raise _error("InvalidArgument", f"{who}: {what} is read-only; give a writable array for the results")
    taken = _core._taken(a, f"{who}: {what}", writable)
    if taken.device != "cpu":
        raise _error("InvalidArgument", f"{who}: {what} is on {taken.device}, not host memory; resident streams "
                     "host arrays: call the work on a device array directly")
    return _np.from_dlpack(taken).reshape(-1)


def _new_out(shape, dtype):
    """The new host array of the results; one the host cannot give is OutOfMemory, as resident's own are."""
    try:
        return _np.empty(shape, dtype=dtype)
    except MemoryError as e:
        err = _error("OutOfMemory", f"resident.stream: the results' host array of shape {shape} ({e}); pass "
                     "out= (x itself, in place) or stream fewer elements")
        err.requested_bytes = int(_np.prod(shape, dtype=object)) * _np.dtype(dtype).itemsize
        raise err from None


def _shape(a):
    """a's shape where it says one; None where reading it raises (a released memoryview: named where a is taken)."""
    try:
        return getattr(a, "shape", None)
    except Exception:  # noqa: BLE001
        return None


def _integer(v, name, what):
    """v as an int (any integer: int, NumPy's, anything with __index__), None kept; a bool is refused."""
    if v is None:
        return None
    if not isinstance(v, (bool, _np.bool_)):
        try:
            return operator.index(v)
        except Exception as e:  # noqa: BLE001 (no __index__, or one whose own code raised)
            raise _error("InvalidType", f"resident.stream: {name}={_shown(v)} ({type(e).__name__}: {str(e)[:120]}); "
                         f"give {what} as an int") from None
    raise _error("InvalidType", f"resident.stream: {name}={_shown(v)}; give {what} as an int")


def _between_chunks(done, total):
    """Called after each chunk when no progress is shown: the interpreter runs here, so a Ctrl-C (or
    another signal's handler) ends the call between chunks instead of after the last one."""


def _check_progress(progress):
    """A progress callable is called as progress(done, total): one that cannot be is refused before work."""
    try:
        inspect.signature(progress).bind(0, 0)
    except TypeError as e:
        raise _error("InvalidType", f"resident.stream: progress is called as progress(done, total), which "
                     f"{getattr(progress, '__name__', type(progress).__name__)} cannot take: {e}") from None
    except ValueError:
        pass  # a callable without a signature to read (a built-in): it is called as it is


def _progress_of(progress, total_bytes):
    """The callback (done, total) the C++ loop calls after each chunk."""
    if progress is False:
        return _between_chunks, None
    if callable(progress) and progress is not True:
        return progress, None
    if progress is None and (total_bytes < _auto_progress_bytes() or not sys.stderr.isatty()):
        return _between_chunks, None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if progress is True:
            def say(done, total):
                sys.stderr.write(f"\rresident.stream: {done}/{total} elements ({100.0 * done / max(total, 1):.0f}%)")
                if done == total:
                    sys.stderr.write("\n")
            return say, None
        return _between_chunks, None
    bar = tqdm(total=None, unit="el", unit_scale=True, desc="resident.stream")

    def update(done, total):
        if bar.total is None:
            bar.total = total
        bar.update(done - bar.n)
    return update, bar


def _work_chain(work, reduce):
    """work as a resident.jit Chain (and its reduction appended), or None for a program run as is."""
    from . import jit
    program = work if isinstance(work, _core.program) else _core.program([work]) if isinstance(work, _core.op) else None
    if program is not None:
        return program, None
    if isinstance(work, jit.Chain):
        chain = work
    elif callable(work):
        chain = jit.stage(work)
    else:
        raise _error("InvalidArgument", f"resident.stream: work is a {type(work).__name__}; give a resident.op "
                     "program, a resident.stage chain, or a function to compile as one")
    if reduce is not None:
        chain = chain | getattr(jit, reduce)()
    return None, chain


def stream(work, x, out=None, *, reduce=None, chunk=None, depth=None, device=None, progress=None,
           host_threads=None, timeline=False):
    """Streams host data through ``work`` in chunks and returns the result.

    work: a ``resident.op`` program (compiled as its calls are: ``program.engine`` says whether it was),
    a ``resident.stage`` / ``resident.jit`` chain (maps, optionally
    ending in ``rs.jit.sum()``, ``min()`` or ``max()``), or a plain function (compiled as a stage).
    x: a host array of any size (NumPy, the buffer protocol, DLPack on the CPU; pageable or pinned), or a
    tuple of host arrays of one size read in step (the first stage takes one argument per array).
    out: a writable host array of x's size for the results (it may be x itself: in place); by default a
    new NumPy array. reduce: "sum", "min" or "max" appended to the work; a reducing call returns its
    value (a Python number, in the values' type) and takes no out. chunk: elements per chunk; depth:
    chunks in flight (1 to 16); both chosen when None, as in C++ (out_of_core_options). device: where the
    chunks run (default: the default device). progress: a callable (elements done, total) called after
    each chunk; True for a bar (tqdm, else a line on stderr); None shows a tqdm bar on runs of 1 GiB or
    more when tqdm is installed and stderr is a terminal; False never. host_threads: threads that copy
    pageable host memory to and from the pinned staging on a GPU (1 to 256; None or 0: chosen, as in C++).
    timeline: True records when each chunk crossed each stage (``last_summary()["timeline"]``: per chunk
    its index, first element, count and the upload, kernel and download begin and end in ms since the
    call started; GPU events, the host clock on the CPU).

    Releases the GIL while the chunks run; synchronizes (returns when out is written). How the call ran
    (chunks, depth, bytes, seconds) is ``resident.streaming.last_summary()``.
    @raises InvalidArgument (work, arrays, options; a chain with reduce(op, init)), ShapeMismatch,
    CompileError, TransferForbidden (under transfer_policy("forbid")), OutOfMemory (the staging does
    not fit under the pool's limit), DeviceUnavailable.
    """
    if reduce is not None and not isinstance(reduce, str):
        raise _error("InvalidType", f"resident.stream: reduce is a {type(reduce).__name__}; use 'sum', 'min' or 'max'")
    if reduce is not None and reduce not in _REDUCTIONS:
        raise _error("InvalidArgument", f"resident.stream: reduce={_shown(reduce)}; use 'sum', 'min' or 'max'")
    _last.summary = None  # not the previous call's, should this one end early
    chunk = _integer(chunk, "chunk", "elements per chunk")
    depth = _integer(depth, "depth", "chunks in flight")
    if depth is not None and not 0 <= depth <= _MAX_DEPTH:
        raise _error("InvalidArgument", f"resident.stream: depth={depth}{' is negative' if depth < 0 else ''}; give 1 "
                     f"to {_MAX_DEPTH} chunks in flight, or "
                     "0 (or None) to let the call choose")
    if chunk is not None and not 0 <= chunk < 1 << 56:
        raise _error("InvalidArgument", f"resident.stream: chunk={chunk}{' is negative' if chunk < 0 else ''}; give "
                     "elements per chunk from 1 to 2^56 - 1, "
                     "or 0 (or None) to let the call choose")
    threads = _integer(host_threads, "host_threads", "host copy threads") or 0
    if not 0 <= threads <= _MAX_HOST_THREADS:
        raise _error("InvalidArgument", f"resident.stream: host_threads={threads}; give 1 to {_MAX_HOST_THREADS} host "
                     "copy threads, or 0 (or None) to let the call choose")
    if not isinstance(timeline, bool):
        raise _error("InvalidType", f"resident.stream: timeline={_shown(timeline)}; give True or False")
    if progress is not None and not isinstance(progress, bool) and not callable(progress):
        raise _error("InvalidType", f"resident.stream: progress={_shown(progress)}; give a callable (done, total), True, "
                     "False or None")
    if callable(progress) and not isinstance(progress, bool):
        _check_progress(progress)
    xs = list(x) if isinstance(x, (tuple, list)) else [x]
    if not xs:
        raise _error("InvalidArgument", "resident.stream: x is an empty list; give a host array (or a list of them "
                     "for the work's zipped inputs)")
    hosts = [_host(a, f"input {i}" if len(xs) > 1 else "x") for i, a in enumerate(xs)]
    shape = _shape(xs[0])  # kept as x has it (NumPy, resident, a memoryview ...)
    shape = tuple(shape) if isinstance(shape, tuple) and _np.prod(shape, dtype=object) == hosts[0].size else hosts[0].shape
    for i, h in enumerate(hosts[1:], 1):
        if h.size != hosts[0].size:
            raise _error("ShapeMismatch", f"resident.stream: input {i} holds {h.size} elements, input 0 {hosts[0].size}")
    # One shape, as for a call on device arrays (nothing broadcasts; a 1-D array stands for any shape).
    shapes = [(f"input {i}", _shape(a)) for i, a in enumerate(xs)] + [("out", _shape(out))]
    shapes = [(w, tuple(sh)) for w, sh in shapes if isinstance(sh, tuple) and len(sh) > 1]
    for w, sh in shapes[1:]:
        if sh != shapes[0][1]:
            raise _error("ShapeMismatch", f"resident.stream: {shapes[0][0]} has shape {shapes[0][1]} and {w} {sh}; give "
                         "arrays of one shape (or reshape one to 1-D)")
    c, d = chunk or 0, depth or 0
    if device is not None and not isinstance(device, str):
        raise _error("InvalidType", f"resident.stream: device={_shown(device)}; give a device name such as 'cpu' or "
                     "'cuda:0' (or leave it out for the default device)")
    dev = device if device is not None else _core.default_device()
    program, chain = _work_chain(work, reduce)
    if program is not None and len(hosts) != 1:
        raise _error("InvalidArgument", "resident.stream: a program reads one array; zip arrays with a stage chain")
    total_bytes = sum(h.nbytes for h in hosts)
    callback, bar = _progress_of(progress, total_bytes)
    try:
        from .jit import _dtype_name, _guarded, _target_of_device
        if program is not None and reduce is not None:
            if out is not None:
                raise _error("InvalidArgument", "resident.stream: a reduction returns its value; out= is not used")
            from . import _program
            dtype = hosts[0].dtype.name
            if dtype not in _program._FLOATS:
                _program.chain_of(program, dtype)  # the program's own refusal of the type
            target = _target_of_device(dev)

            def compiled_reduce(chain):
                pipe, _ = chain.build([dtype], target)
                return _guarded(_core._stream_chain_reduce, pipe, hosts, dtype, c, d, dev, callback, threads, timeline)
            value, _last.summary = _program._run(
                program, dtype, reduce, compiled_reduce,
                lambda: _interpreted_reduce(program, hosts[0], reduce, c, dev, callback, threads, timeline), target)
            return value
        if program is not None:
            o = _new_out(shape, hosts[0].dtype) if out is None else out
            ov = _host(o, "out", writable=True)
            # The program's compiled chain where a run-time compiler is available (as its calls run it),
            # else the interpreter's kernel; program.engine says which streamed. The device is asked
            # first: one that does not answer is the caller's mistake, not a missing compiler (which
            # would leave the program interpreted from then on). An output of another dtype goes to the
            # interpreter, which names the mismatch in a program's terms.
            from . import _program
            target = _target_of_device(dev)
            dtype = hosts[0].dtype.name if ov.dtype == hosts[0].dtype else None

            def compiled(chain):
                pipe, _ = chain.build([dtype], target)
                return _guarded(_core._stream_chain, pipe, hosts, ov, c, d, dev, callback, threads, timeline)
            _last.summary = _program._run(program, dtype, False, compiled,
                                          lambda: _core._stream_program(program, hosts[0], ov, c, d, dev, callback, threads,
                                                                                timeline),
                                          target)
            return o
        dtypes = [_dtype_name(h) for h in hosts]
        pipe, value_dtype = chain.build(dtypes, _target_of_device(dev))
        if chain._reduces():
            if out is not None:
                raise _error("InvalidArgument", "resident.stream: a reduction returns its value; out= is not used")
            value, _last.summary = _guarded(_core._stream_chain_reduce, pipe, hosts, value_dtype or dtypes[0], c, d,
                                            dev, callback, threads, timeline, stages=chain._items)
            return value
        o = _new_out(shape, value_dtype or dtypes[0]) if out is None else out
        ov = _host(o, "out", writable=True)
        _last.summary = _guarded(_core._stream_chain, pipe, hosts, ov, c, d, dev, callback, threads, timeline,
                                 stages=chain._items)
        return o
    finally:
        if bar is not None:
            bar.close()


def _interpreted_reduce(program, host, reduce, chunk, dev, callback, threads, timeline):
    """(value, summary) of a program's streamed reduction where no run-time compiler is available: piece
    by piece, the interpreter's kernel maps a piece on the device and resident's reduction reduces it;
    the pieces' values combine on the host (a sum in double, rounded once to the values' type)."""
    import time
    from . import _program
    n, item = host.size, host.dtype.itemsize
    if n == 0 and reduce != "sum":
        raise _error("InvalidArgument", f"resident.stream: {reduce} of no values: nothing has a least or greatest "
                     "element")
    piece = min(n, chunk or 1 << 24) or 1
    t0 = time.perf_counter()
    ms = lambda: (time.perf_counter() - t0) * 1e3  # noqa: E731
    values, times = [], [] if timeline else None
    for i, first in enumerate(range(0, n, piece)):
        count = min(piece, n - first)
        up = ms()
        d = _core.to_device(host[first:first + count], device=dev)
        run = ms()
        if reduce == "sum":
            values.append(_program._interpreted_sum(program, d))
        else:
            _core._run_program(program, d, None, None)
            values.append(getattr(_core, reduce)(d))
        if times is not None:
            end = ms()
            times.append({"index": i, "first": first, "count": count, "upload_begin_ms": up, "upload_end_ms": run,
                          "kernel_begin_ms": run, "kernel_end_ms": end, "download_begin_ms": end,
                          "download_end_ms": end})
        del d
        callback(first + count, n)
    if reduce == "sum":
        with _np.errstate(over="ignore"):  # a float32 sum past its range is inf, as the compiled one's
            value = float(_np.dtype(host.dtype).type(sum(values, 0.0)))
    else:
        value = getattr(_core, reduce)(_np.array(values, dtype=host.dtype))
    summary = {"elements": n, "chunks": len(values), "chunk_elements": piece, "depth": min(1, len(values)), "h2d_bytes": n * item,
               "d2h_bytes": 0, "device_bytes": piece * item, "pinned_input": False, "pinned_output": False,
               "host_threads": threads, "seconds": time.perf_counter() - t0, "timeline": times}
    return value, summary


def last_summary():
    """How this thread's last ``stream`` call ran: elements, chunks, chunk_elements, depth, h2d_bytes,
    d2h_bytes, device_bytes, pinned_input, pinned_output, host_threads, seconds, and timeline (a list of
    one dict per chunk with timeline=True, else None); None before any call, and after one that ended
    early."""
    return getattr(_last, "summary", None)


def pinned_empty(shape, dtype="float32"):
    """A new uninitialized NumPy array in page-locked host memory (when a GPU answers; ordinary memory
    otherwise): streamed and copied directly by the copy engines, with no staging through pinned
    buffers. The memory is freed with the last reference to the array."""
    def extent(d):
        if isinstance(d, (bool, _np.bool_)):
            raise TypeError("a bool is no extent")
        return operator.index(d)

    try:
        if hasattr(shape, "__index__") and _np.ndim(shape) == 0:  # a whole number, NumPy's and 0-d arrays too
            dims = (extent(shape),)
        elif isinstance(shape, (tuple, list, _np.ndarray)):
            dims = tuple(extent(d) for d in shape)
        else:
            raise TypeError("no shape")
        dt = _np.dtype(dtype)
    except Exception as e:  # noqa: BLE001 (NumPy's TypeError or ValueError, or an extent's own __index__)
        raise _error("InvalidType", f"resident.streaming.pinned_empty: shape {_shown(shape)} and dtype {_shown(dtype)} "
                     f"({type(e).__name__}: {str(e)[:120]}): give a whole number or a tuple of them, and a NumPy "
                     "dtype such as 'float32'") from None
    if not dt.isnative:
        raise _error("InvalidArgument", f"resident.streaming.pinned_empty: dtype {dt.str} is in the other byte order; "
                     "give the native one")
    if dt.name not in _COMPUTED:
        raise _error("InvalidType", f"resident.streaming.pinned_empty: dtype {dt.name}; pinned arrays hold one of "
                     f"{', '.join(_COMPUTED)}")
    n = 1
    for d in dims:
        if d < 0:
            raise _error("InvalidArgument", f"resident.streaming.pinned_empty: negative extent in {shape}")
        n *= d
    # NumPy holds no array whose nonzero extents times the item size pass 2^63 - 1 bytes, even an empty one.
    reach = dt.itemsize
    for d in dims:
        reach *= d or 1
    if reach >= 1 << 63:
        raise _error("InvalidArgument", f"resident.streaming.pinned_empty: shape {_shown(shape)} of {dt.name}: NumPy "
                     "holds no array whose nonzero extents times the item size pass 2^63 - 1 bytes; give smaller "
                     "extents (rs.empty takes such a shape on a device)")
    return _core._pinned_empty(n, dt.name).reshape(dims)



# A missing argument or an unknown keyword: InvalidType, as the core's functions raise.
_typed.functions_typed(globals(), __all__, "resident.streaming.")
