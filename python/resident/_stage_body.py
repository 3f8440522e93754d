"""What one function of a stage would compute otherwise than Python, found in its code before Numba
compiles it: integers no 64-bit integer holds (written; or made past int64 from constants: Numba's
arithmetic wraps), text made by str, repr, format or f-strings (Numba's text of a number is not
Python's) and try/except; and the callees Numba cannot call (a chain of several stages, a class, a dict
or tuple of functions, a cached or partial function). _stage_check walks the functions and calls these."""
import dis
import functools
import math
import operator
import sys
import types

from ._arguments import _core_error
from ._typed import shown as _shown

_INT64 = (-(1 << 63), (1 << 63) - 1)

# Modules whose functions Numba knows by themselves (math.sin, np.sqrt): never stood in for.
LIBRARIES = ("builtins", "math", "cmath", "numpy", "numba", "llvmlite", "operator")

# Built-ins that make text: Numba's str() of a float is not Python's (len(str(0.1)) was 21).
_TEXT = {str, repr, format, ascii, chr, hex, oct, bin}

# The opcodes of f-strings (FORMAT_VALUE, BUILD_STRING; 3.13's FORMAT_SIMPLE, FORMAT_WITH_SPEC, CONVERT_VALUE).
_FORMAT_OPS = {"FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "BUILD_STRING"}

_BINOPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.pow,
           operator.lshift, operator.rshift, operator.and_, operator.or_, operator.xor}
_UNOPS = {operator.neg, operator.pos, operator.invert}
_POWS = (pow, operator.pow)


class _TooBig(int):
    """An integer made from constants too large to compute here (2**10**9): past int64 anyway."""


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _past_int64(v):
    return _is_int(v) and not _INT64[0] <= v <= _INT64[1]


def _past_64_bits(v):
    """Past every 64-bit integer: a constant in [2**63, 2**64) is Numba's uint64 (a 64-bit hash's
    multiplier), which wraps as the user of one expects."""
    return _is_int(v) and not _INT64[0] <= v < 1 << 64


def _as_float(v, how=None):
    """v written as a float, for the message: 2.0**70 for a power of two, else its double."""
    if isinstance(v, _TooBig) or abs(v).bit_length() > 1024:
        return "beyond a double's range too: rescale the computation"
    if how is not None:
        return how
    if v > 0 and v & (v - 1) == 0:
        return f"2.0**{v.bit_length() - 1}"
    return repr(float(v))


def _refuse_int(what, fn, line, value, how=None, label=None):
    shown = "an integer past 2**256" if isinstance(value, _TooBig) else f"the integer {_shown(value, 60)}"
    shown = f"{label}, {shown}" if label else shown
    raise _core_error("CompileError", f"{what}: {fn.__name__} uses {shown} ({line}), which a stage's integers "
                      "cannot hold: they are 64-bit and wrap, where Python's grow; write it as a float "
                      f"({_as_float(value, how)})")


_NUMBERS = frozenset((int, float, bool))
_PLAIN = frozenset((int, float, bool, complex, str, bytes, type(None)))


def _big_int_in(c, depth=0):
    """The first integer no 64-bit integer holds in a constant (inside tuples and frozensets), else None."""
    if _past_64_bits(c):
        return c
    if isinstance(c, (tuple, frozenset)) and depth < 8:
        # A table of plain numbers (200k of them named by a stage) bounded at C speed, walked only when
        # its bounds leave the 64-bit range.
        if c and set(map(type, c)) <= _NUMBERS and _INT64[0] <= min(c) and max(c) < 1 << 64:
            return None
        for x in c:
            found = _big_int_in(x, depth + 1)
            if found is not None:
                return found
    return None


# Numba builds a tuple constant element by element, in time and memory that grow with the square of its
# length (2 s and 0.3 GiB at 1000 elements, 72 s and 9 GiB at 8000): longer tables are refused.
_TUPLE_MAX = 1024


def _tuple_elements(c, depth=0):
    """How many elements a tuple (or frozenset) holds, those of the ones inside it counted too."""
    if not isinstance(c, (tuple, frozenset)) or depth > 8:
        return 0
    return len(c) + sum(_tuple_elements(x, depth + 1) for x in c
                        if isinstance(x, (tuple, frozenset))) if len(c) <= _TUPLE_MAX else len(c)


def _refuse_long_tuple(c, what, fn, line, label=None):
    n = _tuple_elements(c)
    if n > _TUPLE_MAX:
        named = f"{label}, a tuple of {n} elements" if label else f"a tuple of {n} elements"
        raise _core_error("CompileError", f"{what}: {fn.__name__} names {named} ({line}); Numba compiles a tuple "
                          f"element by element, in time and memory that grow with the square of its length (up to "
                          f"{_TUPLE_MAX} elements are taken): make it a NumPy array (numpy.asarray(...)), which a "
                          "stage reads as constant data (on a GPU, up to 64 KiB of it)")


def check_code(code, what, fn):
    """Refuses, in code and the code written inside it (inner functions, lambdas, comprehensions), an
    f-string and an integer constant int64 cannot hold (Python folds 2**64 and 10**20 into one)."""
    where = f"{code.co_filename}:"
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if getattr(ins, "positions", None) and ins.positions.lineno else line
        if ins.opname in _FORMAT_OPS:
            _refuse_text(what, fn, f"{where}{line}", "an f-string")
        if ins.opcode in dis.hasconst:  # LOAD_CONST, 3.12's RETURN_CONST
            big = _big_int_in(ins.argval)
            if big is not None:
                _refuse_int(what, fn, f"{where}{line}", big)
            _refuse_long_tuple(ins.argval, what, fn, f"{where}{line}")
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            check_code(c, what, fn)


def _refuse_text(what, fn, line, how):
    raise _core_error("CompileError", f"{what}: {fn.__name__} makes or uses text ({line}: {how}); a stage computes "
                      "numbers, and Numba's text of a number is not Python's (len(str(0.1)) gives 21): compute "
                      "with the numbers themselves, and format the results on the host (x.to_host())")


def check_value(v, what, fn, line, label=None, deferred=None):
    """Refuses a value the body names (a global, a closure's value, a default, a module's attribute) that
    computes otherwise in a kernel or that Numba cannot call, with what to do instead; a text built-in
    goes into `deferred` where given (a raise's f-string message is said as the raise)."""
    big = _big_int_in(v)
    if big is not None:
        _refuse_int(what, fn, line, big, label=label)
    _refuse_long_tuple(v, what, fn, line, label)
    try:
        text = v in _TEXT
    except TypeError:  # unhashable
        text = False
    if text and deferred is not None:
        deferred.append((v, line))
    elif text:
        refuse_text_call(what, fn, v, line)
    why = _not_callable_there(v, label) if label is not None else None  # a default: Numba says it
    if why is not None:
        raise _core_error("CompileError", f"{what}: {fn.__name__} names {why[0]} ({line}), {why[1]}")


def refuse_text_call(what, fn, v, line):
    _refuse_text(what, fn, line, f"{v.__name__}()" + (" of an f-string" if _formats_on(fn, line) else ""))


def _formats_on(fn, line):
    """Whether fn's code formats an f-string on `line` ("file:n"), where Numba's IR calls str() or format()."""
    n = line.rsplit(":", 1)[-1]
    return any(ins.opname in _FORMAT_OPS and getattr(ins, "positions", None) and str(ins.positions.lineno) == n
               for ins in dis.get_instructions(fn.__code__))


def chain_function(v):
    """For a resident chain (rs.stage, rs.fuse): (True, the plain function of its one Python stage, or None
    where it is more than that); (False, None) for anything else."""
    jit = sys.modules.get("resident.jit")
    if jit is None or not isinstance(v, jit.Chain):
        return False, None
    items = v._items
    if len(items) == 1 and items[0][0] == "py":
        return True, items[0][1].fn
    return True, None


def _holds_callable(c, depth=0):
    if depth > 4 or not isinstance(c, (tuple, list, set, frozenset, dict)):
        return False
    items = list(c.values()) if isinstance(c, dict) else c
    if set(map(type, items)) <= _PLAIN:  # a table of numbers or text, seen at C speed
        return False
    return any(callable(x) and not isinstance(x, type) or _holds_callable(x, depth + 1) for x in items)


def _not_callable_there(v, label=None):
    """(what v is, why and what to do) where v, named by a stage's body, is nothing Numba can compile in,
    else None (including what Numba's own checks report well enough)."""
    name = getattr(v, "__qualname__", None) or getattr(v, "__name__", None) or type(v).__name__
    is_chain, inner = chain_function(v)
    if is_chain:
        return None if inner is not None else (
            f"the resident chain {v.name}", "which is several stages, C++ text or a reduction: a stage calls "
            "functions, not chains; compose with | (rs.fuse(f) | g), or call the undecorated Python functions")
    if (isinstance(v, dict) or _holds_callable(v)) and not _numba_types(v):
        held = "functions" if _holds_callable(v) else "values"
        return (f"{label + ', ' if label else ''}a {type(v).__name__} of {held}", "which Numba cannot read in a "
                "stage: call each function by its own name (choose with if/elif), and keep constants in a tuple or "
                "a NumPy array")
    if isinstance(v, functools.partial):
        partial = f"a functools.partial of {getattr(v.func, '__name__', 'a function')}"
        return (f"{label + ', ' if label else ''}{partial}", "which Numba cannot call: write the call out "
                "(f(v, k=...)), or give the function those defaults")
    if not isinstance(v, type) and _from_a_library(type(v)):  # a Numba dispatcher or cfunc, a ufunc
        return None
    wrapped = getattr(v, "__wrapped__", None) if not isinstance(v, (types.FunctionType, type)) else None
    if wrapped is not None and isinstance(wrapped, types.FunctionType):
        return (f"{name}, a {type(v).__name__} object wrapping {wrapped.__name__}", "which Numba cannot call (a "
                "cache such as functools.lru_cache's needs the interpreter): call the function it wraps "
                f"(plain = {name}.__wrapped__ at module level, then plain(v))")
    if isinstance(v, type) and not _from_a_library(v) and not _numba_types(v):
        return (f"the class {name}", "which Numba cannot use in a stage (neither its attributes, its static "
                "methods nor its constructor): take what the stage needs into a module-level name "
                f"(f = {name}.method, c = {name}.constant) and use that")
    if callable(v) and not isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)) \
            and not _from_a_library(type(v)) and not _numba_types(v):
        return (f"{name}, a callable {type(v).__name__} object", "which Numba cannot call: give a plain Python "
                "function (compiled along)")
    return None


def _from_a_library(cls):
    """A class of Python, NumPy or Numba themselves: Numba's own typing decides."""
    module = getattr(cls, "__module__", None) or ""
    return module.split(".")[0] in ("builtins", "numpy", "numba", "math", "cmath", "ctypes", "cffi", "_cffi_backend",
                                    "llvmlite")


def _numba_types(v):
    """Whether Numba has a type for v (an Enum or a namedtuple class, a jitclass, an @overload's target)."""
    try:
        from numba.core.compiler_lock import global_compiler_lock  # a compile may refresh meanwhile
        from numba.core.registry import cpu_target
        ctx = cpu_target.typing_context
        with global_compiler_lock:
            ctx.refresh()
            ctx.resolve_value_type(v)
        return True
    except ImportError:
        return True  # no Numba: the compile says so
    except Exception:  # noqa: BLE001 (ValueError, TypingError: no type)
        return False


def _statements(fir):
    return [st for label in sorted(fir.blocks) for st in fir.blocks[label].body]


def check_try(fir, what, fn):
    """Refuses try/except (or finally) in one function's Numba IR: no exception is raised in a kernel."""
    from numba.core import ir
    try:
        from numba.core.unsafe.eh import mark_try_block  # what Numba's IR calls where a try block starts
    except ImportError:
        mark_try_block = None
    for st in _statements(fir):
        value = getattr(st, "value", None)
        if isinstance(value, ir.Global) and mark_try_block is not None and value.value is mark_try_block:
            raise _core_error("CompileError", f"{what}: {fn.__name__} uses try/except ({fn.__code__.co_filename}:"
                              f"{st.loc.line}), which a stage does not support: no Python exception is raised inside "
                              "a compiled loop or kernel (a float division by zero gives inf or nan there, an integer "
                              "one gives 0): test the value instead (0.0 if v == 0 else 1.0 / v)")


def check_ir(fir, what, fn):
    """Refuses, in one function's Numba IR, an integer int64 cannot hold made from constants (v * 2**70,
    where Python does not fold 2**70: Numba's power wraps to 0; pow(2, 70)). String constants stay:
    Numba compares and indexes them as Python does (a mode switch, a bytes table); only text made from
    numbers differs, refused by name (str, format, f-strings)."""
    from numba.core import ir
    where = f"{fn.__code__.co_filename}:"
    statements = _statements(fir)
    defined = {}
    for st in statements:
        if isinstance(st, ir.Assign):
            defined.setdefault(st.target.name, []).append(st.value)
    _check_folded(statements, defined, what, fn, where, ir)


def _check_folded(statements, defined, what, fn, where, ir):
    known = {}

    def _callee(name):
        values = defined.get(name, ())
        return values[0].value if len(values) == 1 and isinstance(values[0], (ir.Global, ir.FreeVar)) else None

    def value_of(name, depth=0):
        """The int a variable assigned once holds, computed from constants, else None."""
        if name in known:
            return known[name]
        known[name] = None  # a cycle through copies: unknown
        values = defined.get(name, ())
        if len(values) != 1 or depth > 200:
            return None
        v = values[0]
        got = None
        if isinstance(v, (ir.Const, ir.Global, ir.FreeVar)) and _is_int(v.value):
            got = v.value
        elif isinstance(v, ir.Var):
            got = value_of(v.name, depth + 1)
        elif isinstance(v, ir.Expr) and v.op in ("binop", "inplace_binop"):
            op = v.fn if v.op == "binop" else v.immutable_fn
            a, b = value_of(v.lhs.name, depth + 1), value_of(v.rhs.name, depth + 1)
            if op in _BINOPS and a is not None and b is not None:
                got = _computed(op, a, b)
        elif isinstance(v, ir.Expr) and v.op == "call" and not v.kws and len(v.args) == 2 and \
                _callee(v.func.name) in _POWS:  # pow(2, 70), operator.pow: ** by another name
            a, b = value_of(v.args[0].name, depth + 1), value_of(v.args[1].name, depth + 1)
            if a is not None and b is not None:
                got = _computed(operator.pow, a, b)
        elif isinstance(v, ir.Expr) and v.op == "unary" and v.fn in _UNOPS:
            a = value_of(v.value.name, depth + 1)
            got = None if a is None else v.fn(a)
        known[name] = got
        return got

    for st in statements:
        if isinstance(st, ir.Assign) and isinstance(st.value, ir.Expr) and st.value.op in ("binop", "inplace_binop",
                                                                                           "unary", "call"):
            v = value_of(st.target.name)
            e = st.value
            op = (e.fn if e.op == "binop" else e.immutable_fn) if e.op in ("binop", "inplace_binop") else None
            if op is operator.lshift and v is not None and 0 <= v < 1 << 64:
                continue  # 1 << 63: int64's bits of a uint64 mask, as the uint64 constant would have them
            if v is not None and _past_int64(v):
                how = None
                a = b = None
                if op is operator.pow:
                    a, b = value_of(e.lhs.name), value_of(e.rhs.name)
                elif e.op == "call":
                    a, b = value_of(e.args[0].name), value_of(e.args[1].name)
                if a is not None and b is not None and 0 <= b < 10000:
                    how = f"{a}.0**{b}"
                _refuse_int(what, fn, f"{where}{st.loc.line}", v, how)


def _computed(op, a, b):
    """op(a, b) of two ints, or _TooBig where it would be huge; None where Python gives no int (a
    negative power, a division by zero)."""
    if _past_int64(a) or _past_int64(b):
        return None  # refused where it was made
    try:
        if op is operator.pow:
            if b < 0:
                return None
            if abs(a) > 1 and b * math.log2(abs(a)) > 256:
                return _TooBig(1 << 256)
        if op is operator.lshift and a and b > 256:
            return _TooBig(1 << 256)
        return op(a, b)
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
