"""Programs of built-in operations (resident.op, resident.program) compiled by the run-time compiler.

A program called on an array becomes one C++ function of the array's element type, compiled with
resident's kernel template by the same compiler and cache as run-time stages (NVRTC for the GPU, the
host compiler for the CPU): one kernel, the operations inlined. Where no run-time compiler is
available the program's operations are interpreted (one kernel all the same: per element on a GPU, a
block of values per operation on the CPU);
``program.engine`` says which ran last ("compiled" or "interpreted"). Operations and stages compose
in either order (``rs.stage(f) | rs.op.sqrt()``, ``rs.op.sqrt() | rs.stage(f)``): the operations then
become a stage of the chain running the same C++ text as the program's own calls.
"""
import atexit
import math
import threading

import numpy as _np

from . import _core
from . import _typed
from ._arguments import _dtype_said as _dtype_of

# Each operation as C++ (float and double spellings: the GPU has no std:: maths) and as Python.
_CPP = {
    "add": ("v + {a}", "v + {a}"),
    "mul": ("v * {a}", "v * {a}"),
    "affine": ("{a} * v + {b}", "{a} * v + {b}"),
    "square": ("v * v", "v * v"),
    "sqrt": ("sqrtf(v)", "sqrt(v)"),
    "rsqrt": ("1.0f / sqrtf(v)", "1.0 / sqrt(v)"),
    "exp": ("expf(v)", "exp(v)"),
    "log": ("logf(v)", "log(v)"),
    "sin": ("sinf(v)", "sin(v)"),
    "cos": ("cosf(v)", "cos(v)"),
    "tanh": ("tanhf(v)", "tanh(v)"),
    "abs": ("fabsf(v)", "fabs(v)"),
    "neg": ("-v", "-v"),
    "recip": ("1.0f / v", "1.0 / v"),
    "minimum": ("fminf(v, {a})", "fmin(v, {a})"),
    "maximum": ("fmaxf(v, {a})", "fmax(v, {a})"),
    "pow": ("powf(v, {a})", "pow(v, {a})"),
}
def _code(o):
    return o.name.split("(")[0]


def _literal(c, dtype):
    """c exactly as a C++ expression of dtype: a hexadecimal float of the value the interpreter would use
    (a constant past float32's range is its infinity there too). Infinities and NaN have no literal: an
    overflowing product (rounds to infinity) and infinity minus itself, which every compiler folds."""
    with _np.errstate(over="ignore"):
        v = float(_np.float32(c)) if dtype == "float32" else float(c)
    f, big = ("f", "0x1p127f") if dtype == "float32" else ("", "0x1p1023")
    if math.isinf(v):
        return f"({'-' if v < 0 else ''}({big} * 2.0{f}))"
    if math.isnan(v):
        return f"(({big} * 2.0{f}) - ({big} * 2.0{f}))"
    return v.hex() + f


def source(p, dtype):
    """The C++ function that computes program p over values of dtype (float32 or float64)."""
    t = "float" if dtype == "float32" else "double"
    body = "".join(f"  v = {_CPP[_code(o)][0 if t == 'float' else 1].format(a=_literal(o.a, dtype), b=_literal(o.b, dtype))};\n"
                   for o in p.ops)
    return f"{t} rs_program({t} v) {{\n{body}  return v;\n}}\n"


def chain_of(p, dtype):
    """Program p as one run-time map stage over values of dtype: a chain a reduction can follow."""
    if dtype not in _FLOATS:
        import resident
        raise resident.InvalidType(f"a resident.op program runs on float32 or float64 arrays, not {dtype}")
    from . import jit
    return jit.map(source(p, dtype), "rs_program")


def as_program(x):
    """x as a program when it is an operation or a program, else None."""
    if isinstance(x, _core.program):
        return x
    if isinstance(x, _core.op):
        return _core.program([x])
    return None


def refuse_uncomposable(self, other, op, left=False):
    """other where it can be a stage (a function, C++ text, an operation, a program, a chain), else an
    InvalidType saying what composes: `rs.op.sqrt() | 3` is a mistake, not a bitwise or."""
    if callable(other) or isinstance(other, str) or as_program(other) is not None:
        return other
    import resident
    a, b = (type(other).__name__, type(self).__name__) if left else (type(self).__name__, type(other).__name__)
    raise resident.InvalidType(f"resident: {a} {op} {b}: a chain composes operations, programs, stages, plain "
                               f"Python functions and C++ source text, not a {type(other).__name__}")


def _composing(cls):
    """cls's `|` with a plain function, a chain or C++ text on either side: a chain of stages, the
    operations one stage of it (as rs.stage(f) | rs.op.sqrt() already is)."""
    base = cls.__or__

    def __or__(self, other):
        r = base(self, other)
        if r is NotImplemented:
            from . import jit
            return jit.stage(self) | jit.stage(refuse_uncomposable(self, other, "|"))
        return r

    def __ror__(self, other):
        from . import jit
        return jit.stage(refuse_uncomposable(self, other, "|", left=True)) | jit.stage(self)

    cls.__or__, cls.__ror__ = __or__, __ror__


for _cls in (_core.op, _core.program):
    _composing(_cls)


_lock = threading.RLock()  # re-entrant: a __del__ run by a collection inside a compile may call a program
_compiled = {}  # (program name, dtype, reduction or False) -> resident.jit chain (it holds a kernel per device target)
# Where no run-time compiler is available, per target: the host compiler missing on the CPU leaves the
# GPUs compiling, and NVRTC missing leaves the CPU. (program name, dtype, reduces, target) in each set.
_compiled_on, _uncompilable = set(), set()
_FLOATS = ("float32", "float64")
# The compiled core's, kept before the package puts total() in its place (a wrong argument: InvalidType).
_interpreted_sum = _typed._typed(_core.program.sum, "resident.program.sum")
# The compiled chains hold kernels of the core: dropped before the interpreter tears the core down,
# with the core's table of them (programs remember slots in it).
atexit.register(_compiled.clear)
atexit.register(_core._program_forget)


def _no_compiler(e):
    """Whether e says no run-time compiler is available (rather than a bad call)."""
    import resident
    return isinstance(e, (resident.DeviceUnavailable, resident.CompileError))


def _run(p, dtype, reduces, compiled, interpreted, target=None):
    """compiled(chain) through p's chain for dtype (built at its first use, compiled at its first use on
    target: the device's run-time target), or interpreted() where no run-time compiler is available
    for target; records which ran. reduces: False, or the reduction ending the chain ("sum", "min",
    "max")."""
    name = p.name
    key = (name, dtype, reduces)
    here = key + (target,)
    chain = _compiled.get(key, False) if dtype in _FLOATS and here not in _uncompilable else None
    first = here not in _compiled_on
    if first and _core._capturing():
        chain = None  # no compiling or loading inside a CUDA graph capture: the interpreter's kernel, this once
    if chain is not None:
        if chain is False:
            from . import jit
            chain = chain_of(p, dtype)
            if reduces:
                chain = chain | getattr(jit, reduces)()
        ran = False
        for attempt in range(2 if first else 1):
            try:
                r, ran = compiled(chain), True
                break
            except Exception as e:  # noqa: BLE001 (a missing compiler falls back; anything else is raised)
                if not (first and _no_compiler(e)):
                    raise
                # Tried twice before the program is interpreted for good: a passing failure (a compiler
                # ended by a Ctrl-C meant for another thread, a full TMPDIR) is not a missing compiler.
                if attempt == 1:
                    with _lock:
                        _uncompilable.add(here)
        if ran:
            if first:
                with _lock:
                    _compiled.setdefault(key, chain)
                    _compiled_on.add(here)
            p.__dict__["_engine"] = "compiled"
            return r
    r = interpreted()
    p.__dict__["_engine"] = "interpreted"
    return r


def call(p, x, out=None, stream=None):
    """out = p(x) as one kernel (out defaults to x: in place); float32 or float64 arrays of any library,
    queued on ``stream`` (else the current stream of x's library) without a host wait. Compiled by the
    run-time compiler where one is available (``p.engine`` says which ran).

    The first call on a dtype and device (and a call inside a capture, on a capsule, or into an output
    of another dtype) comes here; the chain it compiles is then remembered by the core, whose
    ``program.__call__`` runs later calls without this function (src/programs.cpp)."""
    from .jit import _on_shards
    on_shards = _on_shards(p, (x,), out, stream)
    if on_shards is not None:
        return on_shards
    # A capsule is taken once, here: the call then runs on (and returns) the array it held.
    if type(x).__name__ == "PyCapsule":
        x = _core.from_dlpack(x)
    if type(out).__name__ == "PyCapsule":
        out = _core.from_dlpack(out)
    dtype = _dtype_of(x)
    if out is not None and out is not x and _dtype_of(out) != dtype:
        dtype = None  # the interpreter names the mismatch
    target = None if dtype not in _FLOATS else _core._jit_target(x)
    _run(p, dtype, False, lambda c: c(x, out=out, stream=stream), lambda: _core._run_program(p, x, out, stream), target)
    key = (p.name, dtype, False)
    if target is not None:
        if key + (target,) in _uncompilable:
            _core._program_remember(p, dtype, target, None, key + (target,))
        elif key in _compiled:
            entry = _compiled[key]._built.get(((dtype,), target))
            if entry is not None:
                _core._program_remember(p, dtype, target, entry[0], key + (target,))
    return x if out is None else out


def of_op(o):
    """The program of one operation, made once per op object."""
    p = o.__dict__.get("program")
    if p is None:
        p = o.__dict__["program"] = _core.program([o])
    return p


def total(p, x, stream=None, unrounded=False):
    """The sum of p(x[i]) in one pass, through the run-time compiler where it is available; unrounded: a
    float32 sum compiled as its double accumulator (a shard's part of a whole rounded once)."""
    dtype = _dtype_of(x)
    target = None if type(x).__name__ == "PyCapsule" or dtype not in _FLOATS else _core._jit_target(x)
    compiled = (lambda c: c._unrounded(x, stream)) if unrounded else (lambda c: c(x, stream=stream))
    return _run(p, dtype, "sum", compiled, lambda: _interpreted_sum(p, x, stream), target)


def engine(p):
    """What p's last call used: "compiled", "interpreted", or None before its first call."""
    return p.__dict__.get("_engine")
