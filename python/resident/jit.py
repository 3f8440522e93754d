"""Stages defined at run time, fused into ONE kernel with resident's own kernel template.

A stage is a plain Python function (compiled by Numba: to LTO-IR for the GPU, linked into the kernel
by nvJitLink; to a native function for the CPU, called by the compiled loop) or C++ source text
(compiled with the chain by NVRTC or the host compiler). Stages compose with ``|``; a chain may start
with a generator (``uniform``, ``normal``: the values of ``resident.random``) and end in a reduction
(``sum``, ``min``, ``max``, or ``reduce`` with a Python or C++ operator). Compiled kernels are cached in memory and
on disk (``RESIDENT_JIT_CACHE``, else ``$XDG_CACHE_HOME/resident/jit`` or ``~/.cache/resident/jit``).

    import math, resident as rs

    @rs.stage
    def func1(v):
        return 1.5 * v + 0.5

    @rs.stage
    def func2(v):
        return math.sqrt(v * v + 1.0)

    @rs.stage
    def func3(v):
        return 0.5 * math.sin(v)

    master = func1 | func2 | func3
    master(x)                     # in place on a resident, CuPy, PyTorch or NumPy array: ONE kernel
    master(x, out=y)
    s = (master | rs.jit.sum())(x)

A Python stage is compiled for the element type of the values it receives (the arrays' type, or the
previous stage's) and returns that type: its arguments are the zipped arrays' elements in order. Over
float32 values its float literals (and float default arguments) are float32 too, as NumPy 2 treats
Python numbers beside float32 values (NEP 50), so ``1.5 * v + 0.5`` and ``math.sin`` of it run in single
precision; a literal beside a float64 value (``np.float64(v) * 0.1``) is float32 too, and int
literals, globals and closure variables keep Numba's typing. ``rs.stage(f, float_literals="float64")``
keeps every literal double.
"""
import hashlib
import re
import threading

import numpy as _np

from . import _core

__all__ = ["Chain", "stage", "map", "uniform", "normal", "sum", "min", "max", "reduce", "stats"]

_DTYPES = ("float32", "float64", "int32", "uint32", "int64", "uint64")


_DTYPE_NAMES = {}  # a library's dtype object -> its name, so a call does not format it again


def _dtype_name(x):
    """The dtype name of an array of any library (resident, NumPy, CuPy, PyTorch)."""
    dt = getattr(x, "dtype", None)
    try:
        return _DTYPE_NAMES[dt]
    except (KeyError, TypeError):
        pass
    name = str(dt).replace("torch.", "") if dt is not None else None
    if name not in _DTYPES:
        raise _core_error("InvalidArgument", f"resident.jit: arrays of {name} are not supported; use one of {_DTYPES}")
    try:
        _DTYPE_NAMES[dt] = name
    except TypeError:  # an unhashable dtype object: formatted each time
        pass
    return name


def _core_error(kind, message):
    import resident
    return getattr(resident, kind)(message)


_F32_MAX = float(_np.finfo(_np.float32).max)
_F32_TINY = float(_np.finfo(_np.float32).tiny)


def _as_float32(c):
    """c's float literals as float32 where float32 holds them (0, or a magnitude in float32's normal
    range; others stay float64 rather than becoming inf or 0), inside tuples, frozensets and nested
    code objects (inner functions, lambdas, comprehensions) too."""
    import types
    if type(c) is float:
        return _np.float32(c) if c == 0.0 or _F32_TINY <= abs(c) <= _F32_MAX else c
    if type(c) is tuple:
        return tuple(_as_float32(x) for x in c)
    if type(c) is frozenset:
        return frozenset(_as_float32(x) for x in c)
    if isinstance(c, types.CodeType):
        return c.replace(co_consts=tuple(_as_float32(x) for x in c.co_consts))
    return c


def _single_precision(fn):
    """fn with its float literals (and float default arguments) as float32, for a stage over float32
    values: Python numbers beside float32 values keep float32, as NumPy 2 treats them (NEP 50). Numba
    types a literal as float64, which would carry ``1.5 * v`` and every call after it (``math.sin``) in
    double precision. Globals, closure variables and int literals are left as they are."""
    import types
    code = fn.__code__
    g = types.FunctionType(code.replace(co_consts=tuple(_as_float32(c) for c in code.co_consts)), fn.__globals__,
                           fn.__name__, _as_float32(fn.__defaults__), fn.__closure__)
    g.__kwdefaults__ = {k: _as_float32(v) for k, v in fn.__kwdefaults__.items()} if fn.__kwdefaults__ else None
    return g


class _PyStage:
    """A Python function compiled per element type and target, each compilation kept for the process."""

    _lock = threading.Lock()

    def __init__(self, fn, float_literals="values"):
        self.fn = fn
        self.float_literals = float_literals
        code = fn.__code__
        digest = hashlib.sha1(repr((code.co_code, code.co_consts, code.co_names, code.co_varnames,
                                    float_literals)).encode()).hexdigest()
        self.abi_name = "rs_py_" + re.sub(r"\W", "_", fn.__name__) + "_" + digest[:12]
        self._compiled = {}

    def part(self, dtypes, target, init=None):
        """The C++ external stage for arguments of dtypes on target ("cpu", major, minor); with init, the
        external reduction operator of two values of dtypes[0] starting from init."""
        key = (tuple(dtypes), target, init)
        with self._lock:
            if key not in self._compiled:
                self._compiled[key] = self._compile(dtypes, target, init)
            return self._compiled[key][0]

    def _compile(self, dtypes, target, init=None):
        import numba
        args = [numba.from_dtype(_np.dtype(d)) for d in dtypes]
        res = args[0]
        sig = res(*args)
        single = self.float_literals == "values" and all(d == "float32" for d in dtypes)
        fn = _single_precision(self.fn) if single else self.fn
        kind, major, minor = target
        if kind == "cuda":
            from numba import cuda  # after resident._compat (the package's first import)
            ltoir, _ = cuda.compile(fn, sig, device=True, abi="c", output="ltoir",
                                    abi_info={"abi_name": self.abi_name}, cc=(major, minor))
            part = self._external(dtypes, init, bytes(ltoir), 0)
            return part, ltoir
        # The CPU: Numba's native function with the C calling convention, called by the compiled loop.
        c = numba.cfunc(sig, nopython=True)(fn)
        part = self._external(dtypes, init, b"", c.address)
        return part, c  # c keeps the function's code alive

    def _external(self, dtypes, init, ltoir, address):
        if init is None:
            return _core._jit_external(self.abi_name, list(dtypes), dtypes[0], ltoir, address)
        return _core._jit_external_reduce(self.abi_name, dtypes[0], float(init), ltoir, address)


class Chain:
    """Run-time stages in order: an optional generator, maps, an optional reduction.

    ``chain(*inputs, out=None)``: writes chain(inputs) into ``out`` (default: the first input, in place)
    as one kernel on the device the arrays live on, and returns ``out``; a chain ending in a reduction
    returns its value instead (a Python number; synchronizes). A chain starting with a generator takes
    no inputs: ``chain(out=y)`` fills y, ``chain(n=..., device=...)`` reduces n generated values.
    """

    def __init__(self, items):
        self._items = list(items)
        self._built = {}  # (dtypes, target) -> (C++ chain, value dtype): repeated calls reuse its kernel
        self._lock = threading.Lock()

    def __or__(self, other):
        if callable(other) and not isinstance(other, Chain):
            other = stage(other)
        if not isinstance(other, Chain):
            return NotImplemented
        return Chain(self._items + other._items)

    def __ror__(self, other):
        if callable(other) and not isinstance(other, Chain):
            return stage(other) | self
        return NotImplemented

    @property
    def name(self):
        names = []
        for kind, value in self._items:
            names.append(value.fn.__name__ if kind == "py" else value[0].fn.__name__ if kind == "pyred" else value.name)
        return " | ".join(names) or "identity"

    def __repr__(self):
        return f"resident.jit.Chain({self.name})"

    def _generates(self):
        return bool(self._items) and self._items[0][0] == "gen"

    def _reduces(self):
        return bool(self._items) and self._items[-1][0] in ("red", "pyred")

    def build(self, dtypes, target):
        """The C++ chain for input dtypes on target, and the dtype of its values."""
        key = (tuple(dtypes), tuple(target))
        built = self._built.get(key)  # a dict lookup is atomic; only filling it takes the lock
        if built is None:
            built = self._build(dtypes, target)
            with self._lock:
                built = self._built.setdefault(key, built)
        return built

    def _build(self, dtypes, target):
        pipe = None
        current = list(dtypes)
        for kind, value in self._items:
            if kind == "py":
                part = value.part(current, target)
                current = [current[0]]
            elif kind == "pyred":
                fn, init = value
                part = fn.part([current[0], current[0]], target, init)
            else:
                part = value
                made = part.result_dtype
                if made is not None and kind != "red":
                    current = [made]
            pipe = part if pipe is None else pipe | part
        if pipe is None:
            raise _core_error("InvalidArgument", "resident.jit: the chain is empty")
        return pipe, current[0] if len(current) == 1 else None

    def __call__(self, *inputs, out=None, n=0, device="cpu"):
        if self._generates():
            if inputs:
                if out is not None:
                    raise _core_error("InvalidArgument", "resident.jit: a generator chain reads no array; pass out= alone")
                out, inputs = inputs[0], ()
            if self._reduces():
                kind, value = self._items[0]
                pipe, value_dtype = self.build([], _target_of_device(device))
                return pipe.result([], value_dtype, n, device)
            if out is None:
                raise _core_error("InvalidArgument", "resident.jit: give the array to fill: chain(out=y)")
            pipe, _ = self.build([], _core._jit_target(out))
            pipe.run([], out)
            return out
        if not inputs:
            raise _core_error("InvalidArgument", "resident.jit: give the input arrays: chain(x) or chain(a, b, out=y)")
        dtypes = [_dtype_name(x) for x in inputs]
        target = tuple(_core._jit_target(inputs[0]))
        pipe, value_dtype = self.build(dtypes, target)
        if self._reduces():
            if out is not None:
                raise _core_error("InvalidArgument", "resident.jit: a reduction returns its value; out= is not used")
            return pipe.result(list(inputs), value_dtype or dtypes[0])
        pipe.run(list(inputs), out)
        return inputs[0] if out is None else out

    def kernel_source(self, dtypes, out, device="cpu"):
        """The kernel text this chain generates for inputs of dtypes writing out, on device."""
        pipe, _ = self.build(list(dtypes), _target_of_device(device))
        return pipe.kernel_source(list(dtypes), out, device)


def _target_of_device(device):
    if device == "cpu":
        return ("cpu", 0, 0)
    import resident
    x = resident.empty(1, dtype="float32", device=device)
    return tuple(_core._jit_target(x))


def stage(fn=None, *, name=None, float_literals="values"):
    """A stage from a plain Python function (``@resident.stage`` or ``resident.stage(f)``), or from C++
    source text defining one function (``resident.stage("float f(float v) { return 2 * v; }")``;
    ``name`` picks the function when the text defines several). ``float_literals``: "values" (a Python
    function's float literals take float32 when its values are float32) or "float64" (Numba's own
    typing: every literal double)."""
    if float_literals not in ("values", "float64"):
        raise _core_error("InvalidArgument",
                          f"resident.stage: float_literals={float_literals!r}; use 'values' or 'float64'")
    if fn is None:
        return lambda f: stage(f, name=name, float_literals=float_literals)
    if isinstance(fn, str):
        return Chain([("cpp", _core._jit_map(fn, name or ""))])
    if isinstance(fn, Chain):
        return fn
    if not callable(fn):
        raise _core_error("InvalidArgument", "resident.stage takes a Python function or C++ source text")
    return Chain([("py", _PyStage(fn, float_literals))])


def map(source, name=""):  # noqa: A001 (resident.jit.map, as the C++ API names it)
    """A stage from C++ source text (see ``stage``)."""
    return Chain([("cpp", _core._jit_map(source, name))])


def uniform(seed, offset=0, low=0.0, high=1.0, dtype="float32"):
    """A generator: value i of the uniform stream (seed, offset) in [low, high), resident.random's values."""
    if dtype not in ("float32", "float64"):
        raise _core_error("InvalidArgument", f"resident.jit.uniform makes float32 or float64 values, not {dtype}")
    return Chain([("gen", _core._jit_uniform(dtype, seed, offset, low, high))])


def normal(seed, offset=0, mean=0.0, sd=1.0, dtype="float32"):
    """A generator: value i of the normal stream (seed, offset), resident.random's values."""
    if dtype not in ("float32", "float64"):
        raise _core_error("InvalidArgument", f"resident.jit.normal makes float32 or float64 values, not {dtype}")
    return Chain([("gen", _core._jit_normal(dtype, seed, offset, mean, sd))])


def sum():  # noqa: A001
    """A terminal: the sum of the chain's values (NaN propagates)."""
    return Chain([("red", _core._jit_sum())])


def min():  # noqa: A001
    """A terminal: the least value (NaN propagates)."""
    return Chain([("red", _core._jit_min())])


def max():  # noqa: A001
    """A terminal: the greatest value (NaN propagates)."""
    return Chain([("red", _core._jit_max())])


def reduce(op, init, name=""):
    """A terminal: a reduction by an operator of two values, from ``init``: a plain Python function
    (compiled by Numba for the chain's value type, as stages are) or C++ source text defining one."""
    if callable(op):
        return Chain([("pyred", (_PyStage(op), init))])
    return Chain([("red", _core._jit_reduce(op, float(init), name))])


def stats():
    """What the compile cache did in this process: compiled, disk_loads, memory_hits, rejected."""
    c, d, m, r = _core._jit_stats()
    return {"compiled": c, "disk_loads": d, "memory_hits": m, "rejected": r}
