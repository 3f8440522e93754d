"""What a Python function given as a stage may be: checked when the stage is defined, before Numba
compiles it, so that nothing runs to a silent value or a hang (docs/python.md lists the refusals)."""
import hashlib
import inspect
import threading
import types

import numpy

from . import _stage_body
from ._arguments import _core_error  # the one way an error of resident's is made here
from ._typed import shown as _shown


# Built-ins that need the Python interpreter while they run: a stage runs inside a compiled loop or a
# kernel, where there is none (Numba's CPU callback would print "missing Environment" per element).
_INTERPRETER_ONLY = {print, input, open, exec, eval, compile, breakpoint, globals, locals, vars, help, __import__}


_numba_lock = threading.RLock()  # re-entrant: a __del__ run by a collection inside the import may call a stage
_numba_loaded = set()


def load_numba(cuda=False):
    """Imports Numba (and numba.cuda) once, under a lock: threads importing it for the first time at once
    see partly initialized modules (circular imports) and leave the process unable to use it."""
    want = "numba.cuda" if cuda else "numba"
    if want in _numba_loaded:
        return
    with _numba_lock:
        if want not in _numba_loaded:
            from ._compat import guard_numba_config
            guard_numba_config()  # before Numba reads its settings file
            try:
                import importlib
                for m in (("numba", "numba.core.compiler", "numba.core.ir", "numba.core.registry",
                           "numba.core.compiler_lock", "numba.extending") if not cuda else ("numba.cuda",)):
                    importlib.import_module(m)
            except ImportError:
                pass  # the compile says so, typed
            _numba_loaded.add(want)


def _is_plain_function(f):
    return isinstance(f, types.FunctionType)


def _check_function(fn, what, arity=None):
    """Refuses, before anything compiles, what cannot be a stage: a callable without Python code (a
    built-in such as math.sin, a class, a callable object), a signature other than plain positional
    parameters, a parameter count other than `arity`, and a body (or a plain function it calls) that
    raises, asserts or calls print() or another built-in that needs the interpreter."""
    name = getattr(fn, "__name__", type(fn).__name__)
    module = getattr(fn, "__module__", None)
    load_numba()
    if not _is_plain_function(fn):
        import functools
        if isinstance(fn, functools.partial):  # its arguments go into the function written out
            inner = getattr(fn.func, "__name__", "f")
            # The call written out: the bound positions, then the value, then the keywords (valid Python).
            bound = ", ".join([repr(a) for a in fn.args] + ["v"] + [f"{k}={_shown(v)}" for k, v in fn.keywords.items()])
            raise _core_error("InvalidType", f"{what}: a functools.partial of {inner} is not a Python function Numba "
                              f"can compile; write it out, e.g. rs.stage(lambda v: {inner}({bound}))")
        raise _core_error("InvalidType", f"{what}: {_not_a_function(fn, what, arity)}")
    code = fn.__code__
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or code.co_kwonlyargcount:
        raise _core_error("InvalidType", f"{what}: {name} takes *args, **kwargs or keyword-only parameters; a stage "
                          "takes plain positional parameters, one value per zipped array")
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise _core_error("InvalidType", f"{what}: {name} is a generator or coroutine; a stage returns one value")
    n = code.co_argcount
    if n == 0:
        raise _core_error("InvalidType", f"{what}: {name} takes no parameters; a stage takes one value per zipped "
                          "array (def f(v): ...)")
    if arity is not None and n != arity:
        raise _core_error("InvalidType", f"{what}: {name} takes {n} parameters; it must take {arity}")
    _check_body(fn, what, set())


def _not_a_function(fn, what, arity):
    """Why fn is no stage, with a call that would work written out (valid Python)."""
    params = ", ".join("v" if (arity or 1) == 1 else "ab"[i] if i < 2 else f"v{i}" for i in range(arity or 1))
    wrap = "rs.jit.reduce(lambda {p}: {{}}({p}), init)" if what.endswith("reduce") else "rs.stage(lambda {p}: {{}}({p}))"
    wrap = wrap.format(p=params)
    if isinstance(fn, type):
        return (f"{fn.__name__} is a class; a stage is a function of the values (def f(v): ...), which may build "
                "what it needs inside")
    if inspect.ismethod(fn):
        owner = type(fn.__self__).__name__
        return (f"{owner}.{fn.__func__.__name__} is a bound method, whose object Numba cannot pass into a kernel; "
                f"take what it needs from the object first (k = obj.k) and give a function of the values, e.g. "
                f"{wrap.format('f')} with f a plain function")
    name = getattr(fn, "__name__", None)
    if _is_plain_function(getattr(fn, "_pyfunc", None)):  # numba.cfunc: its module is Numba's
        return (f"{fn._pyfunc.__name__} is a numba.cfunc; give the Python function it compiles, or call it "
                f"from one, e.g. {wrap.format(fn._pyfunc.__name__)}")
    if name is None or not callable(fn):
        return (f"a {type(fn).__name__} object is not a Python function; give a function of the values "
                "(def f(v): ...)")
    module = getattr(fn, "__module__", None)
    full = f"{module}.{name}" if isinstance(module, str) and module not in ("builtins", "__main__") else name
    try:
        interpreter_only = fn in _INTERPRETER_ONLY
    except TypeError:  # unhashable
        interpreter_only = False
    if interpreter_only:
        return (f"{full} needs the Python interpreter, and a stage runs inside a compiled loop or kernel; compute "
                "the values in the stage and do this with its result on the host (x.to_host())")
    return (f"{full} is not a Python function Numba can compile (a built-in has no Python code); call it from "
            f"one, e.g. {wrap.format(full)}")


def _check_body(fn, what, seen, path=(), written_inside=False):
    """Walks fn's Numba IR (and that of the plain functions it calls) for what cannot run in a kernel.
    A function written inside an overload's body that Numba cannot read on its own is left alone."""
    if fn in path:
        raise _core_error("CompileError", f"{what}: {fn.__name__} calls itself (through "
                          f"{' -> '.join(f.__name__ for f in path + (fn,))}); a stage's functions are compiled "
                          "inline, without recursion: write it as a loop")
    if fn in seen:
        return
    seen.add(fn)
    path = path + (fn,)
    written = _writes_enclosing(fn.__code__)
    if written:
        raise _core_error("CompileError", f"{what}: {written[0]} assigns {_shown(written[1])} of an enclosing function "
                          f"(nonlocal, {fn.__code__.co_filename}:{written[2]}); a stage's functions are compiled with "
                          "the values they close over as constants, so the write would be lost: return the value "
                          "instead")
    try:
        from numba.core import compiler, ir
        fir = compiler.run_frontend(fn)
    except ImportError:
        return  # no numba: the compile reports it
    except Exception as e:  # Numba cannot read the function at all
        if written_inside:
            return
        _stage_body.check_code(fn.__code__, what, fn)  # an f-string with a format spec: said as such
        raise _core_error("CompileError", f"{what}: Numba cannot read {fn.__name__}: {e}") from None
    _stage_body.check_try(fir, what, fn)  # before the raise its handler reads as
    raising = tuple(getattr(ir, k) for k in ("Raise", "StaticRaise", "DynamicRaise", "TryRaise", "StaticTryRaise",
                                             "DynamicTryRaise") if hasattr(ir, k))
    where = f"{fn.__code__.co_filename}:"
    # What the body names, resolved: globals and closure values, attributes of modules among them
    # (builtins.print), and the defaults of its parameters (def f(v, p=print)).
    named = {}
    texts = []  # text built-ins named, refused after the loop: a raise or print() is said first
    for d in (fn.__defaults__ or ()):
        _check_value(d, fn, what, seen, path, f"{where}{fn.__code__.co_firstlineno} (a parameter's default)")
    for label in sorted(fir.blocks):
        for st in fir.blocks[label].body:
            line = f"{where}{st.loc.line}"
            if isinstance(st, raising):
                raise _core_error("CompileError", f"{what}: {fn.__name__} can raise ({line}: a raise or assert); a "
                                  "stage runs inside a compiled loop or kernel, which no Python exception leaves: "
                                  "return a value that marks the case (such as math.nan) instead")
            if isinstance(st, getattr(ir, "Print", ())):
                raise _core_error("CompileError", f"{what}: {fn.__name__} calls print() ({line}), which needs the "
                                  "Python interpreter: a stage runs inside a compiled loop or kernel")
            value = getattr(st, "value", None)
            v, label = _NOTHING, None
            if isinstance(value, (ir.Global, ir.FreeVar)):
                v, label = value.value, value.name
            elif isinstance(value, ir.Expr) and value.op == "make_function" and isinstance(value.code, types.CodeType):
                # A function written in the body (compiled inline): its code, the values it closes over unknown.
                c = value.code
                inner = types.FunctionType(c, fn.__globals__, c.co_name, None,
                                           tuple(types.CellType(None) for _ in c.co_freevars))
                _check_body(inner, what, seen, path, True)
            elif isinstance(value, ir.Expr) and value.op == "getattr" and value.value.name in named and \
                    isinstance(named[value.value.name], types.ModuleType):
                v, label = getattr(named[value.value.name], value.attr, _NOTHING), value.attr
            if v is _NOTHING:
                continue
            if isinstance(st, ir.Assign):
                named[st.target.name] = v
            _check_value(v, fn, what, seen, path, line, label, texts)
    for v, line in texts[:1]:
        _stage_body.refuse_text_call(what, fn, v, line)
    _stage_body.check_code(fn.__code__, what, fn)
    _stage_body.check_ir(fir, what, fn)


_NOTHING = object()


def _writes_enclosing(code):
    """(function name, variable, line) where code (or a function written inside it) assigns or deletes
    a variable of an enclosing function (`nonlocal`), else None: Numba compiles that write as a local
    one, silently."""
    import dis
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if getattr(ins, "positions", None) and ins.positions.lineno else line
        if ins.opname in ("STORE_DEREF", "DELETE_DEREF") and ins.argval in code.co_freevars:
            return code.co_name, ins.argval, line
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            found = _writes_enclosing(c)
            if found:
                return found
    return None


def _check_value(v, fn, what, seen, path, line, label=None, texts=None):
    """Refuses a value a stage's body names that needs the interpreter; walks the plain functions."""
    try:
        interp = v in _INTERPRETER_ONLY or _is_objmode(v)
    except TypeError:  # unhashable
        interp = False
    if interp:
        called = "numba.objmode" if _is_objmode(v) else getattr(v, "__name__", repr(v))
        raise _core_error("CompileError", f"{what}: {fn.__name__} calls {called}() ({line}), which "
                          "needs the Python interpreter: a stage runs inside a compiled loop or kernel")
    _stage_body.check_value(v, what, fn, line, label, texts)
    is_chain, inner = _stage_body.chain_function(v)
    if is_chain:  # rs.stage(f) / rs.fuse(f) called as a function: f compiles along
        _check_body(inner, what, seen, path)
        return
    if _is_plain_function(v):
        impls = _overload_impls(v)
        for f in impls if impls is not None else (v,):  # an @overload's implementations compile in its place
            _check_body(f, what, seen, path, impls is not None)
        return
    for attr in ("py_func", "_pyfunc"):  # a function the user gave to numba.jit, numba.cfunc
        inner = getattr(v, attr, None)
        if _is_plain_function(inner):
            _check_body(inner, what, seen, path)
            return


def _overload_impls(f):
    """The implementations Numba compiles for a function given to numba.extending.overload (written in
    the overload's body), or None where f has none: f itself is then what compiles."""
    import sys
    if "numba" not in sys.modules:
        return None
    load_numba()  # another thread may be importing it: wait for the whole of it
    contexts = []
    try:
        from numba.core.registry import cpu_target
        contexts.append(cpu_target.typing_context)
        if "numba.cuda" in sys.modules:
            from numba.cuda.descriptor import cuda_target
            contexts.append(cuda_target.typing_context)
    except Exception:  # noqa: BLE001 (a Numba without these: f is what compiles)
        pass
    builders = []
    try:
        from numba.core.compiler_lock import global_compiler_lock as lock  # a compile may refresh meanwhile
    except Exception:  # noqa: BLE001
        import contextlib
        lock = contextlib.nullcontext()
    for ctx in contexts:
        try:
            with lock:
                ctx.refresh()
                t = ctx._lookup_global(f)
        except Exception:  # noqa: BLE001
            continue
        builders += [b for b in (getattr(tp, "_overload_func", None) for tp in getattr(t, "templates", ()))
                     if _is_plain_function(b)]
    if not builders:
        return None
    # Each function written inside an overload's body (the implementations it returns, at any depth),
    # its free variables left empty: what is checked is what its code names; and the plain functions
    # its closure holds (numba.extending.register_jitable returns the function it was given).
    def written(code):
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                if c.co_name == "<lambda>" or not c.co_name.startswith("<"):
                    yield c
                yield from written(c)
    impls = [types.FunctionType(c, b.__globals__, c.co_name, None, tuple(types.CellType(None) for _ in c.co_freevars))
             for b in builders for c in written(b.__code__)]
    for b in builders:
        for cell in b.__closure__ or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if _is_plain_function(v):
                impls.append(v)
    return impls


def _is_objmode(v):
    """numba.objmode: a block run by the interpreter, which a kernel does not have."""
    try:
        import numba
    except ImportError:
        return False
    return v is getattr(numba, "objmode", None)


_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def _constant(c, depth=0):
    """A code object's constant as stable text: nested code by its digest, a frozenset's items sorted
    (their order follows string hashing, which changes from process to process)."""
    if isinstance(c, types.CodeType):
        return code_digest(c, depth + 1) if depth < 8 else "..."
    if isinstance(c, tuple):
        return "(" + ",".join(_constant(x, depth + 1) for x in c) + ")"
    if isinstance(c, frozenset):
        return "{" + ",".join(sorted(_constant(x, depth + 1) for x in c)) + "}"
    return type(c).__name__ + ":" + repr(c)


def code_digest(code, depth=0):
    """A digest of what a code object computes: its bytecode, constants (nested code objects' too) and
    the names it reads."""
    h = hashlib.sha1(code.co_code)
    h.update(_constant(code.co_consts, depth).encode("utf-8", "backslashreplace"))
    h.update(repr(code.co_names).encode("utf-8", "backslashreplace"))
    return h.hexdigest()[:12]


def bound_values(fn):
    """The values fn's compilation takes from outside its code (its defaults, closure cells and the
    globals it names: numbers, strings, tuples of them, NumPy scalars, functions by name and code), so
    that two functions of one code but other such values get other symbol names (two in one GPU chain
    would otherwise define one symbol twice). Other objects count by type: the names stay the same from
    process to process, as the kernel cache wants."""
    def plain(v, depth=0, names=()):
        if isinstance(v, _PLAIN):
            return v
        if depth > 4:
            return "..."
        if isinstance(v, tuple):
            return tuple(plain(x, depth + 1) for x in v[:64])
        if isinstance(v, numpy.generic):
            return (type(v).__name__, repr(v.item()) if v.size == 1 else "")
        if isinstance(v, numpy.ndarray):  # Numba takes a global array's values as constants
            return (v.dtype.str, v.shape, hashlib.sha1(v.tobytes()).hexdigest()[:12] if v.nbytes <= 1 << 20 else "")
        v = _stage_body.chain_function(v)[1] or v  # rs.stage(f) called as a function compiles f
        code = getattr(v, "__code__", None)
        if isinstance(code, types.CodeType):
            # A callee compiled along: its constants and the globals it names count as the caller's do
            # (two helpers differing only in a constant are two functions).
            g = getattr(v, "__globals__", None) or {}
            named = tuple((n, plain(g[n], depth + 1, code.co_names)) for n in code.co_names
                          if n in g and g[n] is not v)
            return (getattr(v, "__qualname__", ""), code_digest(code),
                    plain(getattr(v, "__defaults__", None), depth + 1), named)
        if isinstance(v, types.ModuleType) and v.__name__.split(".")[0] not in _stage_body.LIBRARIES:
            held = vars(v)  # the functions of it the code names (helpers.func1), by their code
            return (v.__name__,) + tuple((n, plain(held[n], depth + 1)) for n in names if n in held and
                                         (_is_plain_function(held[n]) or _stage_body.chain_function(held[n])[1]))
        return type(v).__qualname__
    try:
        names = fn.__code__.co_names
        cells = []
        for c in fn.__closure__ or ():
            try:
                cells.append(plain(c.cell_contents, 0, names))
            except ValueError:  # an empty cell
                cells.append(None)
        g = getattr(fn, "__globals__", {})
        named = [(n, plain(g[n], 0, names)) for n in names if n in g]
        return plain(fn.__defaults__ or ()), tuple(cells), tuple(named)
    except Exception:  # an object whose own code raises when looked at: its function's name alone
        return fn.__qualname__ if isinstance(getattr(fn, "__qualname__", None), str) else ""

