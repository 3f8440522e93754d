"""A Python stage's function rewritten for Numba: its float literals as float32 for float32 values, and
the plain functions it calls compiled along with it."""
import numpy as _np

from ._stage_body import LIBRARIES, chain_function
from ._stage_check import _is_plain_function, _overload_impls

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


def _compiled_along(fn, jit, convert, done=None):
    """fn with the plain Python functions it calls (through its globals, its closure and the attributes
    of modules among them, at any depth) given to it compiled by `jit` (numba.njit or a CUDA device jit),
    each first passed through `convert` (the float-literal rule): the called functions need no decorator
    of their own. A chain of one Python stage (rs.stage(f), rs.fuse(f)) called as a function is its f."""
    import types
    done = {} if done is None else done
    if fn in done:
        return done[fn]
    names = set(fn.__code__.co_names)
    plain = {k: _python_of(v) for k, v in fn.__globals__.items() if k in names and _python_of(v) is not None}
    modules = {k: v for k, v in fn.__globals__.items() if k in names and _calls_in(v, names)}
    cells = fn.__closure__
    if not plain and not modules and not (cells and any(_python_of(_cell_value(c)) is not None or
                                                        _calls_in(_cell_value(c), names) for c in cells)):
        g = convert(fn)
        done[fn] = g
        return g
    glb = dict(fn.__globals__)
    done[fn] = None  # recursion: Numba types a recursive function through its own dispatcher
    for k, v in plain.items():
        if v is fn:
            continue
        inner = _compiled_along(v, jit, convert, done)
        glb[k] = jit(inner if inner is not None else v)
    for k, m in modules.items():
        glb[k] = _module_along(m, names, jit, convert, done)

    def along(c):
        v = _cell_value(c)
        if _python_of(v) is not None:
            return types.CellType(jit(_compiled_along(_python_of(v), jit, convert, done)))
        if _calls_in(v, names):
            return types.CellType(_module_along(v, names, jit, convert, done))
        return c
    if cells:
        cells = tuple(along(c) for c in cells)
    g = convert(types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__, cells))
    g.__kwdefaults__ = fn.__kwdefaults__
    done[fn] = g
    return g


def _calls_in(m, names, depth=0):
    """Whether module m (or a module it holds, at a few levels) has an attribute among `names` that is
    compiled along (helpers.func1(d)): Numba reads a module's attributes as they are, and a plain
    function among them it cannot call."""
    import types
    if not isinstance(m, types.ModuleType) or depth > 4 or m.__name__.split(".")[0] in LIBRARIES:
        return False
    held = _attributes(m, names)
    return any(_python_of(held.get(n)) is not None or _calls_in(held.get(n), names, depth + 1) for n in names)


def _attributes(m, names):
    """m's attributes among names, as the call reads them: a package's lazy ones (PEP 562 __getattr__)
    are made as they would be at the call."""
    held = dict(vars(m))
    if "__getattr__" in held:
        for n in names:
            if n not in held:
                try:
                    held[n] = getattr(m, n)
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException:  # noqa: BLE001 (not an attribute of m: Numba says so if it is read)
                    pass
    return held


def _module_along(m, names, jit, convert, done, depth=0):
    """A stand-in for module m whose attributes among `names` that are plain functions (or modules holding
    them) are compiled along; its other attributes are m's own."""
    import types
    key = ("module", m)
    if key in done:
        return done[key]
    stand_in = types.ModuleType(m.__name__, m.__doc__)
    done[key] = stand_in  # a module that holds itself (through a submodule) gets the same stand-in
    held = _attributes(m, names)
    stand_in.__dict__.update(held)
    for n in names:
        v = held.get(n)
        f = _python_of(v)
        if f is not None:
            inner = _compiled_along(f, jit, convert, done)
            stand_in.__dict__[n] = jit(inner if inner is not None else f)
        elif _calls_in(v, names, depth + 1):
            stand_in.__dict__[n] = _module_along(v, names, jit, convert, done, depth + 1)
    return stand_in


def _python_of(v):
    """The Python function v is, or the one a Numba dispatcher (numba.njit(f)) or a chain of one Python
    stage (rs.stage(f), rs.fuse(f)) compiles, else None: what is compiled along with a stage for each
    target, under the stage's float-literal rule. A function given to numba.extending.overload is None:
    Numba compiles its implementations in its place."""
    if _is_plain_function(v):
        return v if _overload_impls(v) is None else None
    is_chain, inner = chain_function(v)
    if is_chain:
        return inner
    f = getattr(v, "py_func", None)
    return f if _is_plain_function(f) and type(v).__module__.startswith("numba") else None


def _cell_value(c):
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return None
