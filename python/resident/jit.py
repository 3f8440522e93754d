"""Stages defined at run time, fused into ONE kernel with resident's own kernel template.

A stage is a plain Python function (compiled by Numba: to LTO-IR for the GPU, linked into the kernel
by nvJitLink; for the CPU written out as C++ text from Numba's typed IR and compiled into the loop,
or where that does not cover the function, a native function the loop calls) or C++ source text
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
import atexit
import hashlib
import numbers as _numbers
import re
import sys
import threading
import weakref

import numpy as _np

from . import _compat, _core, _cpu_text, _ieee_pow, _program, _stage_signs, _typed
from ._arguments import _DTYPES, _as_given, _capsules_taken, _core_error, _dtype_name, _first
from ._rewrite import _compiled_along, _python_of, _single_precision
from ._stage_check import bound_values as _bound_values
from ._stage_check import _check_function, _is_plain_function
from ._stage_check import load_numba as _load_numba
from ._typed import shown as _shown

__all__ = ["Chain", "stage", "fuse", "map", "uniform", "normal", "sum", "min", "max", "reduce", "stats"]

# Python stages on the CPU as C++ text inlined into the loop (False: Numba's function called per element).
_inline_cpu = True

def _filled(fn, k):
    """fn called with its first k parameters, the rest at their defaults: a plain function of k
    parameters (what Numba compiles for a stage's k values), fn compiled along with it."""
    calls = {1: lambda a: fn(a), 2: lambda a, b: fn(a, b), 3: lambda a, b, c: fn(a, b, c),
             4: lambda a, b, c, d: fn(a, b, c, d), 5: lambda a, b, c, d, e: fn(a, b, c, d, e),
             6: lambda a, b, c, d, e, f: fn(a, b, c, d, e, f),
             7: lambda a, b, c, d, e, f, g: fn(a, b, c, d, e, f, g),
             8: lambda a, b, c, d, e, f, g, h: fn(a, b, c, d, e, f, g, h)}
    g = calls.get(k)
    if g is None:
        raise _core_error("InvalidType", f"resident.stage: {fn.__name__} would receive {k} values, and its parameters' "
                          "defaults fill at most 8; write it with exactly as many parameters as values")
    g.__name__ = g.__qualname__ = fn.__name__
    return g


# The stages and chains holding compiled chains. A stage is kept on its function, which Numba's
# registries keep past the interpreter's teardown of resident's core: at exit, after the program's own
# exit functions (registered later, run earlier), they let their compiled chains go. A call made later
# than that compiles again.
_HOLDERS = weakref.WeakSet()


def _let_go():
    for h in list(_HOLDERS):
        h._let_go()


atexit.register(_let_go)


class _PyStage:
    """A Python function compiled per element type and target, each compilation kept for the process."""

    _lock = threading.RLock()  # re-entrant: a __del__ that calls a stage may run inside a compile (GC)

    def __init__(self, fn, float_literals="values", what="resident.stage", arity=None):
        fn = _python_of(fn) or fn  # a function given to numba.njit: its Python function, compiled along
        _check_function(fn, what, arity)
        self.fn, self.float_literals = fn, float_literals
        self.code = code = fn.__code__  # the code compiled (fn.__code__ may be replaced later)
        digest = hashlib.sha1(repr((code.co_code, code.co_consts, code.co_names, code.co_varnames,
                                    float_literals, _bound_values(fn))).encode()).hexdigest()
        self.abi_name = "rs_py_" + re.sub(r"\W", "_", fn.__name__) + "_" + digest[:12]
        self._compiled = {}
        self._translated = set()  # keys of _compiled that are C++ text written from the function
        self._untranslatable = set()  # keys whose text the host compiler refused: Numba's function
        _HOLDERS.add(self)

    def _let_go(self):
        with self._lock:
            self._compiled.clear()
            self._translated.clear()

    def part(self, dtypes, target, init=None):
        """The C++ external stage for arguments of dtypes on target ("cpu", major, minor); with init, the
        external reduction operator of two values of dtypes[0] starting from init."""
        key = (tuple(dtypes), target, init, _inline_cpu)  # the switch too: a stage is kept per function
        with self._lock:
            if key not in self._compiled:
                self._compiled[key] = self._compile(dtypes, target, init, key not in self._untranslatable)
                if self._compiled[key][1] is None:
                    self._translated.add(key)
            return self._compiled[key][0]

    def calls_numba(self, dtypes, target, init=None):
        """Whether the loop built for these calls Numba's compiled function (which may raise there), rather
        than C++ text written from the function (which cannot)."""
        with self._lock:
            made = self._compiled.get((tuple(dtypes), target, init, _inline_cpu))
        return made is None or made[1] is not None

    def untranslate(self, log):
        """Forgets the C++ text written from this function when the compiler's log names it (the text
        did not compile), so that the next build takes Numba's function; whether it did."""
        with self._lock:
            if self.abi_name not in log or not self._translated:
                return False
            for key in self._translated:
                self._compiled.pop(key, None)
                self._untranslatable.add(key)
            self._translated.clear()
            return True

    def _compile(self, dtypes, target, init=None, translate=True):
        _load_numba()  # once, under the lock, Numba's settings file judged first
        try:
            import numba
        except ImportError as e:
            raise _core_error("DeviceUnavailable", f"resident.stage compiles Python functions with Numba, which "
                              f"is not importable here ({e}): pip install numba") from None
        name = self.fn.__name__
        params = self.fn.__code__.co_argcount
        defaults = len(self.fn.__defaults__ or ())
        if not params - defaults <= len(dtypes) <= params:
            takes = f"{params - defaults} to {params}" if defaults else str(params)
            raise _core_error("InvalidType", f"resident.stage: {name} takes {takes} parameters but receives "
                              f"{len(dtypes)} value{'s' if len(dtypes) != 1 else ''} (one per zipped array; a "
                              f"stage after another receives one)")
        # Parameters past the values keep their defaults (Numba fills them in, as Python would).
        source = self.fn if params == len(dtypes) else _filled(self.fn, len(dtypes))
        args = [numba.from_dtype(_np.dtype(d)) for d in dtypes]
        res = args[0]
        sig = res(*args)
        single = self.float_literals == "values" and all(d == "float32" for d in dtypes)
        convert = _single_precision if single else (lambda f: f)
        kind, major, minor = target
        try:
            _stage_signs.check_stage(source, sig, name, convert, _core_error, dtypes)  # uint64 with signed ints
            if kind == "cuda":
                with _compat.numpy_for_numba_cuda():
                    _load_numba(cuda=True)
                    from numba import cuda
                    fn = _compiled_along(source, lambda f: cuda.jit(device=True)(f), convert)
                    ltoir, _ = cuda.compile(fn, sig, device=True, abi="c", output="ltoir",
                                            abi_info={"abi_name": self.abi_name}, cc=(major, minor))
                part = self._external(dtypes, init, bytes(ltoir), 0)
                return part, ltoir
            # The CPU: NumPy's error model, as on the GPU: a division by zero gives inf or nan, it raises
            # nothing. The function as C++ text, inlined into the loop like a C++ stage (_cpu_text), or
            # where the translation does not cover it, Numba's native function with the C calling
            # convention, called by the compiled loop per element.
            njit = numba.njit(error_model="numpy", boundscheck=True)
            fn = _compiled_along(source, njit, convert)
            if _inline_cpu and translate:
                d = numba.njit(error_model="numpy", boundscheck=True)(fn)
                d.compile(sig)
                try:
                    text = _cpu_text.translate(d, sig.args, sig.return_type, self.abi_name)
                except _cpu_text.Untranslatable:
                    text = None
                if text is not None:
                    if init is None:
                        return _core._jit_map(text, self.abi_name), None
                    return _core._jit_reduce(text, float(init), self.abi_name), None
            # Numba's own function: copies whose float ** int gives NumPy's inf, not ZeroDivisionError (_ieee_pow).
            fn = _compiled_along(source, njit, lambda f: _ieee_pow.marked(convert(f)))
            c = numba.cfunc(sig, nopython=True, error_model="numpy", boundscheck=True)(fn)
        except numba.core.errors.NumbaError as e:
            raise self._typing_error(fn, args, e) from None
        except RecursionError:  # Numba's type inference descends once per nested call
            raise _core_error("CompileError", f"resident.stage: {name} calls functions nested too deeply for Numba "
                              "to compile; call fewer levels deep (inline some of them)") from None
        except NotImplementedError as e:  # numba-cuda: "Python exceptions are unsupported in the CUDA C/C++ ABI"
            raise _core_error("CompileError", f"resident.stage: Numba cannot compile {name} for {kind}: {e} (a GPU "
                              "kernel cannot raise: check the values before the call instead)") from None
        except _core.Error:
            raise
        except ImportError as e:  # numba-cuda's NVVM / NVRTC / driver support missing: the environment
            raise _core_error("DeviceUnavailable", f"resident.stage: Numba cannot compile {name} for {kind} "
                              f"here: {type(e).__name__}: {e}") from None
        except MemoryError:
            raise
        except Exception as e:  # Numba's own failures outside its error classes (a default it has no type
            # for: "Cannot determine Numba type", a constant it folds and fails on, an internal assertion)
            raise _core_error("CompileError", f"resident.stage: Numba cannot compile {name} for {kind}: "
                              f"{type(e).__name__}: {e}") from None
        part = self._external(dtypes, init, b"", c.address)
        return part, c  # c keeps the function's code alive

    def _typing_error(self, fn, args, e):
        """The resident error for a Numba compile failure: InvalidType when the function returns other
        than one number (a tuple, None), CompileError with Numba's message otherwise."""
        import numba
        name = self.fn.__name__
        try:
            d = numba.njit(fn)
            d.compile(tuple(args))
            made = d.nopython_signatures[-1].return_type
        except Exception:
            made = None
        if made is not None and not isinstance(made, (numba.types.Number, numba.types.Boolean)):
            return _core_error("InvalidType", f"resident.stage: {name} returns {made}; a stage returns one number "
                               f"(of the values' type, {args[0]})")
        first = str(e).strip().split("\n")[0]
        return _core_error("CompileError", f"resident.stage: Numba cannot compile {name} for {args}: {first}\n{e}")

    def _external(self, dtypes, init, ltoir, address):
        if init is None:
            return _core._jit_external(self.abi_name, list(dtypes), dtypes[0], ltoir, address)
        return _core._jit_external_reduce(self.abi_name, dtypes[0], float(init), ltoir, address)


from ._guard import _guarded  # noqa: E402 (StageError for a stage that raised inside compiled code)
from ._typed import raw as _raw  # noqa: E402

_dispatch = _raw(_core._jit_dispatch)


def _on_shards(work, inputs, out, stream):
    """work's call on sharded arrays (resident.dist.apply), or None where no argument is one (none can be
    before resident.dist is imported)."""
    d = sys.modules.get("resident.dist")
    return None if d is None else d._called_on_shards(work, inputs, out, stream)


def _item_name(kind, value):
    return value.fn.__name__ if kind == "py" else value[0].fn.__name__ if kind == "pyred" else value.name


class Chain:
    """Run-time stages in order: an optional generator, maps, an optional reduction.

    ``chain(*inputs, out=None, stream=None)``: writes chain(inputs) into ``out`` (default: the first
    input, in place) as one kernel on the device the arrays live on, queued on ``stream`` (else the
    current stream of the arrays' library) without waiting for it, and returns ``out``; a chain ending
    in a reduction returns its value instead (a Python number; waits for that stream). A chain starting
    with a generator takes no inputs: ``chain(out=y)`` fills y, ``chain(n=..., device=...)`` reduces n
    generated values.
    """

    def __init__(self, items):
        try:
            self._items = [(k, v) for k, v in items]
        except (TypeError, ValueError):
            self._items = None
        if self._items is None or any(k not in ("cpp", "prog", "py", "gen", "red", "pyred") for k, _ in self._items):
            raise _core_error("InvalidArgument", "resident.jit.Chain: chains are made by resident.jit.stage, "
                              "fuse, map, uniform, normal, sum, min, max and reduce, and joined with |")
        for i, (kind, value) in enumerate(self._items):  # refused where composed, as in C++
            if kind == "gen" and i:
                raise _core_error("InvalidArgument", "resident.jit: a generator (uniform, normal) starts a chain; "
                                  f"it cannot follow {_item_name(*self._items[i - 1])}")
            if kind in ("red", "pyred") and i + 1 < len(self._items):
                raise _core_error("InvalidArgument", f"resident.jit: {_item_name(kind, value)} ends in a "
                                  "reduction; nothing can follow it")
        self._built = {}  # (dtypes, target) -> (C++ chain, value dtype): repeated calls reuse its kernel
        kinds = [k for k, _ in self._items]
        # A map over input arrays takes the fast path (_core._jit_dispatch); Python stages on the CPU may
        # raise from compiled code, which _guarded watches for there.
        self._maps = bool(kinds) and kinds[0] != "gen" and kinds[-1] not in ("red", "pyred")
        self._python_stages = "py" in kinds or "pyred" in kinds
        self._lock = threading.RLock()

    def __or__(self, other):
        if not isinstance(other, Chain):
            other = stage(_program.refuse_uncomposable(self, other, "|"))
        return Chain(self._items + other._items)

    def __ror__(self, other):
        return stage(_program.refuse_uncomposable(self, other, "|", left=True)) | self

    @property
    def name(self):
        return " | ".join(_item_name(k, v) for k, v in self._items) or "identity"

    def __repr__(self):
        return f"resident.jit.Chain({self.name})"

    def __reduce_ex__(self, protocol=None):
        raise _core_error("InvalidType", "a resident.jit chain is not pickled: it holds kernels compiled in this "
                          "process; build it again there from its functions (rs.stage(f) | ...)")

    def __copy__(self):
        return self  # a chain does not change: a copy is itself

    def __deepcopy__(self, memo):
        return self

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
            _HOLDERS.add(self)
        return built[0], built[1]

    def _let_go(self):
        with self._lock:
            self._built.clear()

    def _build(self, dtypes, target):
        """(C++ chain, value dtype, whether its loop calls a function Numba compiled: the fast path then
        runs it inside the guard on the CPU)."""
        pipe = None
        current = list(dtypes)
        numba_calls = False
        for kind, value in self._items:
            if kind == "py":
                part = value.part(current, target)
                numba_calls = numba_calls or value.calls_numba(current, target)
                current = [current[0]]
            elif kind == "prog":
                # A program as a stage runs the text its own calls run (one writer of its arithmetic).
                if len(current) != 1 or current[0] not in _program._FLOATS:
                    raise _core_error("InvalidType", f"a resident.op program runs on float32 or float64 "
                                      f"arrays, not {', '.join(current)}")
                part = _core._jit_map(_program.source(value, current[0]), "rs_program")
            elif kind == "pyred":
                fn, init = value
                part = fn.part([current[0], current[0]], target, init)
                numba_calls = numba_calls or fn.calls_numba([current[0], current[0]], target, init)
            else:
                part = value
                if kind == "red" and part.name == "sum" and current[0] in _WIDER and len(current) == 1:
                    # A sum of 32-bit integers adds in 64 bits, as resident.sum does (no wrap at 2^31).
                    widen = _core._jit_map(_WIDER[current[0]], "")
                    pipe = widen if pipe is None else pipe | widen
                    current = [widen.result_dtype]
                made = part.result_dtype
                if made is not None and kind != "red":
                    current = [made]
            pipe = part if pipe is None else pipe | part
        if pipe is None:
            raise _core_error("InvalidArgument", "resident.jit: the chain is empty")
        return pipe, current[0] if len(current) == 1 else None, numba_calls

    def __call__(self, *inputs, out=None, n=None, device=None, stream=None, **unknown):
        if unknown:
            raise _core_error("InvalidType", f"resident.jit: a chain takes (*arrays, out=None, n=None, device=None, "
                              f"stream=None), not {', '.join(unknown)}")
        if self._maps and inputs and device is None and n is None:
            try:
                missing = _dispatch(self._built, inputs, out, stream, self._python_stages)
                if missing == "capsule":
                    given = _first(inputs, out)
                    inputs, out = _capsules_taken(inputs, out)
                    missing = _dispatch(self._built, inputs, out, stream, self._python_stages)
                    if missing is None:
                        return _as_given(_first(inputs, out), given, _first(inputs, out))
                if missing == "guard":
                    missing = _guarded(_dispatch, self._built, inputs, out, stream, False, stages=self._items)
            except _core.CompileError as e:
                if not self._untranslate(str(e)):  # else the slow path below builds the other translation
                    raise
                missing = True
            except _core.InvalidArgument:
                on_shards = _on_shards(self, inputs, out, stream)  # not arrays: sharded ones?
                if on_shards is None:
                    raise
                return on_shards
            if missing is None:
                return inputs[0] if out is None else out
        on_shards = _on_shards(self, inputs, out, stream)
        if on_shards is not None:
            return on_shards
        given = _first(inputs, out)
        inputs, out = _capsules_taken(inputs, out)  # once: a retry below takes the same arrays
        try:
            return _as_given(self._call(inputs, out, n, device, stream), given, _first(inputs, out))
        except _core.CompileError as e:
            # Text written from a Python stage that the host compiler refused (a gap in the
            # translation, not the user's code): the stage takes Numba's function instead, once.
            if not self._untranslate(str(e)):
                raise
        return _as_given(self._call(inputs, out, n, device, stream), given, _first(inputs, out))

    def _untranslate(self, log):
        stages = [v if k == "py" else v[0] for k, v in self._items if k in ("py", "pyred")]
        dropped = [s for s in stages if s.untranslate(log)]
        if dropped:
            with self._lock:
                self._built.clear()
        return bool(dropped)

    def _call(self, inputs, out, n, device, stream):
        if n is not None and (isinstance(n, bool) or not isinstance(n, _numbers.Real)):
            raise _core_error("InvalidType", f"resident.jit: n is a {type(n).__name__}; give a whole number of values")
        if device is not None and not isinstance(device, str):
            raise _core_error("InvalidType", f"resident.jit: device is a {type(device).__name__}; give a name such as "
                              "'cpu' or 'cuda:0'")
        if self._generates():
            if self._reduces() and (inputs or out is not None):
                raise _core_error("InvalidArgument", "resident.jit: a generator chain's reduction reads no array and "
                                  "returns its value; give the count of values: chain(n=..., device=...)")
            if inputs:
                if out is not None or len(inputs) > 1:
                    raise _core_error("InvalidArgument", f"resident.jit: a generator chain reads no array and fills "
                                      f"one; it was given {len(inputs) + (out is not None)}: pass chain(y) or out=y")
                out, inputs = inputs[0], ()
            if not self._reduces() and out is not None:
                # A fill: the array gives the count and the device; others given must agree (not be dropped).
                import resident
                if n is not None and (isinstance(n, bool) or n != resident.from_dlpack(out).size):
                    raise _core_error("InvalidArgument", f"resident.jit: n={_shown(n)} with an array to fill; the array "
                                      "gives the count (leave n out, or fill a slice of the length you want)")
                if device is not None:
                    on = resident.from_dlpack(out).device
                    if device != on and resident.empty(0, device=device).device != on:
                        raise _core_error("DeviceMismatch", f"resident.jit: device={_shown(device)} but the array to fill "
                                          f"is on {on}; leave device out (the array decides)")
            if self._reduces():
                device = "cpu" if device is None else device
                pipe, value_dtype = self.build([], _target_of_device(device))
                _check_count(n, value_dtype)
                return _guarded(pipe.result, [], value_dtype, n, device, stream, stages=self._items)
            if out is None:
                raise _core_error("InvalidArgument", "resident.jit: give the array to fill: chain(out=y)")
            pipe, _ = self.build([], _core._jit_target(out))
            _guarded(pipe.run, [], out, stream, stages=self._items)
            return out
        if not inputs:
            raise _core_error("InvalidArgument", "resident.jit: give the input arrays: chain(x) or chain(a, b, out=y)")
        if n is not None and (isinstance(n, bool) or n != 0):
            raise _core_error("InvalidArgument", f"resident.jit: n={_shown(n)} with input arrays; n counts a generator "
                              "chain's values, an array chain takes its size from the arrays")
        if device is not None:  # the arrays say where the chain runs; a different device is a mistake
            import resident
            on = resident.from_dlpack(inputs[0]).device
            if device != on and resident.empty(0, device=device).device != on:
                raise _core_error("DeviceMismatch", f"resident.jit: device={_shown(device)} but the input arrays are on {on}; "
                                  "leave device out (the arrays decide) or move them with resident.to_device")
        dtypes = [_dtype_name(x) for x in inputs]
        target = tuple(_core._jit_target(inputs[0]))
        pipe, value_dtype = self.build(dtypes, target)
        if self._reduces():
            if out is not None:
                raise _core_error("InvalidArgument", "resident.jit: a reduction returns its value; out= is not used")
            return _guarded(pipe.result, list(inputs), value_dtype or dtypes[0], stream=stream, stages=self._items)
        _guarded(pipe.run, list(inputs), out, stream, stages=self._items)
        return inputs[0] if out is None else out

    def _unrounded(self, x, stream=None):
        """The reduction over one array x, a float32 sum as its double accumulator (not rounded to float32):
        what a sharded array's shards join with, each unrounded, so that the whole is rounded once."""
        dtypes = [_dtype_name(x)]
        for attempt in (0, 1):
            try:
                pipe, value_dtype = self.build(dtypes, tuple(_core._jit_target(x)))
                dtype = value_dtype or dtypes[0]
                if dtype == "float32" and self._items[-1][0] == "red" and self._items[-1][1].name == "sum":
                    dtype = "float64"
                return _guarded(pipe.result, [x], dtype, stream=stream, stages=self._items)
            except _core.CompileError as e:
                if attempt or not self._untranslate(str(e)):
                    raise

    def kernel_source(self, dtypes, out, device="cpu"):
        """The kernel text this chain generates for inputs of dtypes writing out, on device."""
        if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, (list, tuple)):
            raise _core_error("InvalidType", f"kernel_source: dtypes is a {type(dtypes).__name__}; give a list of the "
                              "inputs' dtypes, such as ['float32']")
        dtypes = [_dtype_arg(d, "kernel_source") for d in dtypes]
        out = _dtype_arg(out, "kernel_source")
        for d in dtypes + [out]:
            if d not in _DTYPES:
                raise _core_error("InvalidType", f"kernel_source: dtype {_shown(d)}; a chain's arrays hold one of {_DTYPES}")
        pipe, _ = self.build(dtypes, _target_of_device(device, "kernel_source"))
        return pipe.kernel_source(dtypes, out, device)


_WIDER = {"int32": "long long rs_widen_i32(int v) { return v; }",
          "uint32": "unsigned long long rs_widen_u32(unsigned int v) { return v; }"}


def _check_count(n, dtype):
    """n values of a generator chain's reduction: a count whose bytes fit a signed 64-bit size, as the C++
    pipelines require (a count past that never finishes)."""
    if n is None:  # not a silent reduction of no values
        raise _core_error("InvalidArgument", "resident.jit: a generator chain's reduction needs the count of values: "
                          "chain(n=..., device=...)")
    if not isinstance(n, _numbers.Integral):
        raise _core_error("InvalidType", f"resident.jit: n is a {type(n).__name__}; give a whole number of values")
    size = _np.dtype(dtype).itemsize if dtype else 8
    if n < 0:
        raise _core_error("InvalidArgument", f"resident.jit: n={n} is negative; give the count of values (0 or more)")
    if n > (2**63 - 1) // size:
        raise _core_error("InvalidArgument", f"resident.jit: n={n} values of {size} bytes pass the largest size "
                          f"({(2**63 - 1) // size}); generate them in parts and combine the results")


def _target_of_device(device, what="resident.jit"):
    if isinstance(device, str) and device == "cpu":
        return ("cpu", 0, 0)
    if not isinstance(device, str):
        raise _core_error("InvalidType", f"{what}: device is a {type(device).__name__}; give a name such as 'cpu' "
                          "or 'cuda:0'")
    import resident
    x = resident.empty(1, dtype="float32", device=device)
    return tuple(_core._jit_target(x))


def stage(fn=None, *, name=None, float_literals="values"):
    """A stage from a plain Python function (``@resident.stage`` or ``resident.stage(f)``), or from C++
    source text defining one function (``resident.stage("float f(float v) { return 2 * v; }")``;
    ``name`` picks the function when the text defines several). ``float_literals``: "values" (a Python
    function's float literals take float32 when its values are float32) or "float64" (Numba's own
    typing: every literal double)."""
    if not isinstance(float_literals, str) or float_literals not in ("values", "float64"):
        raise _core_error("InvalidArgument" if isinstance(float_literals, str) else "InvalidType",
                          f"resident.stage: float_literals={_shown(float_literals)}; use 'values' or 'float64'")
    if name is not None and not isinstance(name, str):
        raise _core_error("InvalidType", f"resident.stage: name is a {type(name).__name__}; give the function's name "
                          "as a string")
    if fn is None:
        return lambda f: stage(f, name=name, float_literals=float_literals)
    if isinstance(fn, str):
        return Chain([("cpp", _core._jit_map(fn, name or ""))])
    if isinstance(fn, Chain):
        return fn
    p = _program.as_program(fn)
    if p is not None:  # built-in operations as a stage of their own
        return Chain([("prog", p)])
    if not callable(fn):
        raise _core_error("InvalidType", f"resident.stage takes a Python function or C++ source text, not a "
                          f"{type(fn).__name__}")
    return Chain([("py", _py_stage(fn, float_literals))])


def _py_stage(fn, float_literals):
    """One _PyStage per function (and float_literals), kept on the function: rs.stage(f) written inside a
    loop reuses the first call's compilations instead of compiling, and keeping, new ones every time.
    As with Numba's own functions, what the function reads from globals and closures is taken at the
    first compilation."""
    kept = getattr(fn, "__dict__", None)
    if not isinstance(kept, dict):  # none, or a class's read-only mapping: made anew (and refused there)
        return _PyStage(fn, float_literals)
    stages = kept.get("__resident_stages__")
    if not isinstance(stages, dict) or stages.get("for") is not fn:
        # functools.wraps / update_wrapper copy the dict's entries to another function (of other
        # globals, closure or code): that one keeps stages of its own.
        stages = kept["__resident_stages__"] = {"for": fn}
    s = stages.get(float_literals)
    source = fn if _is_plain_function(fn) else _python_of(fn) or fn  # (a plain function is its own source)
    if s is None or s.code is not getattr(source, "__code__", None):  # code replaced: anew
        s = stages[float_literals] = _PyStage(fn, float_literals)
    return s


def fuse(fn=None, *, float_literals="values"):
    """The seed's code fused as written: ``rs.fuse(master)`` (or ``@rs.fuse``) for a plain Python
    function of one value per array whose body calls other plain Python functions (no decorator on
    any of them: they are compiled along with it, for the device the arrays live on). The result is a
    chain: ``m(x)`` runs ONE kernel in place, ``m(x, out=y)`` into y, ``m(a, b, out=y)`` zips arrays for
    ``master(a, b)``, and ``m | rs.jit.sum()`` reduces in the same kernel.

        def func1(d): return 1.5 * d + 0.5
        def func2(d): return math.sqrt(d * d + 1.0)
        def func3(d): return 0.5 * math.sin(d)
        def master(d):
            d = func1(d)
            d = func2(d)
            return func3(d)

        m = rs.fuse(master)
        m(x)                          # one kernel, in place
        total = (m | rs.jit.sum())(x)
    """
    if fn is None:
        return lambda f: fuse(f, float_literals=float_literals)
    if not _is_plain_function(fn):
        raise _core_error("InvalidType", f"resident.fuse takes a plain Python function, not {type(fn).__name__}")
    return stage(fn, float_literals=float_literals)


def map(source, name=""):  # noqa: A001 (resident.jit.map, as the C++ API names it)
    """A stage from C++ source text (see ``stage``)."""
    if not isinstance(source, str) or not isinstance(name, str):
        what = type(name if isinstance(source, str) else source).__name__
        raise _core_error("InvalidType", f"resident.jit.map takes C++ source text and a name, not a {what}; a "
                          "Python function is a stage: resident.stage(f)")
    return Chain([("cpp", _core._jit_map(source, name))])


def _dtype_arg(dtype, what):
    """A dtype given as a name or as anything NumPy reads as one, by its name."""
    if isinstance(dtype, str):
        return dtype
    try:
        return _np.dtype(dtype).name
    except Exception as e:  # noqa: BLE001 (NumPy's TypeError or ValueError, or what the object's own code raised)
        raise _core_error("InvalidType", f"{what}: dtype {_shown(dtype)} ({type(e).__name__}: {str(e)[:120]}); give a name "
                          "such as 'float32' or a NumPy dtype") from None


def uniform(seed, offset=0, low=0.0, high=1.0, dtype="float32"):
    """A generator: value i of the uniform stream (seed, offset) in [low, high), resident.random's values."""
    dtype = _dtype_arg(dtype, "resident.jit.uniform")
    if dtype not in ("float32", "float64"):
        raise _core_error("InvalidType", f"resident.jit.uniform makes float32 or float64 values, not {dtype}")
    return Chain([("gen", _core._jit_uniform(dtype, seed, offset, low, high))])


def normal(seed, offset=0, mean=0.0, sd=1.0, dtype="float32"):
    """A generator: value i of the normal stream (seed, offset), resident.random's values."""
    dtype = _dtype_arg(dtype, "resident.jit.normal")
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
    import numbers
    if isinstance(init, bool) or not isinstance(init, numbers.Real):
        raise _core_error("InvalidType", f"resident.jit.reduce: init is a {type(init).__name__}; give a number")
    # The start travels as a double: a whole number it cannot hold exactly would start the fold elsewhere.
    if isinstance(init, numbers.Integral):
        init = int(init)  # a NumPy integer compares with its double in double (2^53 + 1 == 2^53 there)
    try:
        exact = float(init) == init
    except OverflowError:
        exact = False
    if not exact and not (isinstance(init, float) or isinstance(init, _np.floating)):
        raise _core_error("InvalidArgument", f"resident.jit.reduce: init {init} is not a double exactly (whole "
                          "numbers beyond 2^53 are rounded); use rs.jit.sum(), min() or max() (no start), or a start of at "
                          "most 2^53 in magnitude")
    if callable(op) and not isinstance(op, str):
        return Chain([("pyred", (_PyStage(op, what="resident.jit.reduce", arity=2), init))])
    return Chain([("red", _core._jit_reduce(op, float(init), name))])


def stats():
    """What the compile cache did in this process: compiled, disk_loads, memory_hits, rejected."""
    c, d, m, r = _core._jit_stats()
    return {"compiled": c, "disk_loads": d, "memory_hits": m, "rejected": r}


# A missing argument or an unknown keyword: InvalidType, as the core's functions raise.
for _name in ("stage", "fuse", "map", "uniform", "normal", "sum", "min", "max", "reduce", "stats"):
    globals()[_name] = _typed.python_signature(globals()[_name], "resident.jit." + _name)
del _name
