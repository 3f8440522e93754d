"""Python stages as C++ text for the CPU: a stage's function, typed by Numba, written out as one C++
function per Python function (its callees too), so that the host compiler inlines it into the chain's
loop and vectorizes it like a stage given as C++ text (vector math included) instead of calling
Numba's native function once per element.

The translation reads Numba's typed IR (every value's type as Numba inferred it, every call's
signature) and covers arithmetic, comparisons, branches and while loops, the math functions of ``math``
and NumPy's scalar ufuncs, ``abs``/``min``/``max``, numeric casts and calls to other plain Python
functions. Each value is converted exactly where Numba converts it, so the C++ computes the same
operations in the same precision (the math functions come from the C library, within its stated
ULP bounds, docs/cpu.md). Anything else raises ``Untranslatable`` and the stage keeps Numba's native
function, called per element.
"""
import math
import operator

import numpy as _np
from ._typed import shown as _shown


class Untranslatable(Exception):
    """The function uses something the translation does not cover."""


_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==",
           operator.ne: "!=", operator.and_: "&", operator.or_: "|", operator.xor: "^",
           operator.lshift: "<<", operator.rshift: ">>"}
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv, operator.iand: operator.and_, operator.ior: operator.or_,
            operator.ixor: operator.xor, operator.ipow: operator.pow}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.not_: "!"}

# The C library's functions of floating-point values, by the Python object that names them.
_MATH1 = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "exp",
          "expm1", "exp2", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "erf", "erfc", "fabs", "floor",
          "ceil", "trunc"]
_MATH2 = ["atan2", "hypot", "pow", "copysign", "fmod"]
_NP_ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh",
               "arctanh": "atanh", "arctan2": "atan2", "power": "pow", "absolute": "fabs"}
_FUNCTIONS = {}
for _name in _MATH1 + _MATH2:
    for _module in (math, _np):
        if _name in ("exp2", "cbrt") and _module is math and not hasattr(math, _name):
            continue
        _f = getattr(_module, _name, None)
        if _f is not None and not (_module is _np and _name in ("erf", "erfc")):
            _FUNCTIONS[id(_f)] = (_f, _name)
for _alias, _name in _NP_ALIASES.items():
    _FUNCTIONS[id(getattr(_np, _alias))] = (getattr(_np, _alias), _name)
_FUNCTIONS[id(abs)] = (abs, "abs")
_FUNCTIONS[id(_np.abs)] = (_np.abs, "abs")
_FUNCTIONS[id(min)] = (min, "min")
_FUNCTIONS[id(max)] = (max, "max")

# Integer powers as Numba computes them (repeated squaring; a negative exponent inverts).
_IPOW = """template <class T> static inline T rs_ipow(T a, long long b) {
  const bool invert = b < 0;
  unsigned long long e = invert ? 0ULL - (unsigned long long)b : (unsigned long long)b;
  if (e > 0x10000ULL) return (T)pow((double)a, (double)b);
  T r = (T)1;
  for (;;) {
    if (e & 1ULL) r *= a;
    e >>= 1;
    if (e == 0) break;
    a *= a;
  }
  return invert ? (T)1 / r : r;
}
"""


def _ctype(t):
    """The C++ spelling of a Numba scalar type, else None."""
    from numba.core import types
    t = types.unliteral(t)
    if isinstance(t, types.Boolean):
        return "bool"
    if isinstance(t, types.Float):
        return {32: "float", 64: "double"}.get(t.bitwidth)
    if isinstance(t, types.Integer):
        names = {8: "char", 16: "short", 32: "int", 64: "long long"}
        if t.bitwidth not in names:
            return None
        base = names[t.bitwidth]
        return ("signed " + base if base == "char" else base) if t.signed else "unsigned " + base
    return None


def _literal(v):
    """v as a C++ literal of its own type (a NumPy float32 as float, a Python float as double)."""
    if isinstance(v, (bool, _np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, _np.integer)):
        v = int(v)
        if not -(1 << 63) <= v < (1 << 64):
            raise Untranslatable(f"the integer {v} has no C++ type")
        return f"(long long)({v}ULL)" if v >= 0 else f"(-(long long)({-v}ULL))"
    if isinstance(v, (float, _np.floating)):
        single = isinstance(v, _np.float32)
        f = float(v)
        if math.isnan(f):
            return "__builtin_nanf(\"\")" if single else "__builtin_nan(\"\")"
        if math.isinf(f):
            return ("-" if f < 0 else "") + ("__builtin_inff()" if single else "__builtin_inf()")
        return f.hex() + ("f" if single else "")
    raise Untranslatable(f"the constant {_shown(v)} is not a number")


def _is_number(v):
    return isinstance(v, (bool, int, float, _np.bool_, _np.integer, _np.floating))


class _Translator:
    def __init__(self, base):
        self.base = base
        self.functions = []   # C++ definitions, callees before callers
        self.names = {}       # (id of the Python function, argument types) -> C++ name
        self.active = set()   # functions being translated: recursion is not translated
        self.uses_ipow = False
        self.count = 0

    def function(self, dispatcher, args, ret):
        """The C++ name of the function dispatcher compiles for argument types args, returning ret."""
        key = (id(dispatcher), tuple(args))
        if key in self.names:
            return self.names[key]
        if key in self.active:
            raise Untranslatable("a recursive function")
        cres = dispatcher.overloads.get(tuple(args))
        if cres is None:
            raise Untranslatable("a callee Numba did not compile for these types")
        name = self.base if self.count == 0 else f"{self.base}_{self.count}"
        self.count += 1
        self.active.add(key)
        body = _Body(self, cres, name, ret if ret is not None else cres.signature.return_type).text()
        self.active.discard(key)
        self.names[key] = name
        self.functions.append(body)
        return name


class _Body:
    """One Python function's typed IR as a C++ function: a variable per IR variable, a label per block."""

    def __init__(self, tr, cres, name, ret):
        self.tr = tr
        self.ann = cres.type_annotation
        self.typemap = self.ann.typemap
        self.calltypes = self.ann.calltypes
        self.args = cres.signature.args
        self.name = name
        self.ret = _ctype(ret)
        if self.ret is None:
            raise Untranslatable(f"the function returns {ret}")
        self.vars = {}    # IR variable -> C++ name
        self.static = {}  # IR variable -> the Python object it holds (modules, functions, classes)

    def var(self, v):
        if v.name in self.static:
            value = self.static[v.name]
            if _is_number(value):
                return _literal(value)
            raise Untranslatable(f"{v.name} is not a number")
        if v.name not in self.vars:
            raise Untranslatable(f"{v.name} is read before it is set")
        return self.vars[v.name]

    def typed(self, v, t):
        """Variable v converted to Numba type t, as Numba converts an argument to its signature."""
        c = _ctype(t)
        if c is None:
            raise Untranslatable(f"a value of type {t}")
        return f"(({c})({self.var(v)}))"

    def text(self):
        from numba.core import ir
        blocks = self.ann.blocks
        labels = sorted(blocks)
        entry = min(labels)
        targets = set()
        lines = []
        # Declarations first (no initializer), so that a goto never crosses one.
        for name, t in self.typemap.items():
            if name.startswith("arg."):
                continue
            c = _ctype(t)
            if c is not None:
                cname = f"r{len(self.vars)}"
                self.vars[name] = cname
                lines.append(f"  {c} {cname};")
        code = []
        for label in [entry] + [b for b in labels if b != entry]:
            code.append(label)  # a label, written below where a jump goes to it
            for st in blocks[label].body:
                code.extend(self.statement(st, ir, targets))
        code = [f" L{c}:" if isinstance(c, int) else c for c in code if not isinstance(c, int) or c in targets]
        params = []
        for i, t in enumerate(self.args):
            c = _ctype(t)
            if c is None:
                raise Untranslatable(f"a parameter of type {t}")
            params.append(f"{c} p{i}")
        head = f"static inline {self.ret} {self.name}({', '.join(params)})" if self.name != self.tr.base else \
            f"{self.ret} {self.name}({', '.join(params)})"
        return head + " {\n" + "\n".join(lines + code) + "\n}\n"

    def statement(self, st, ir, targets):
        if isinstance(st, ir.Del):
            return []
        if isinstance(st, ir.Assign):
            return self.assign(st, ir)
        if isinstance(st, ir.Branch):
            targets.update((st.truebr, st.falsebr))
            return [f"  if ({self.var(st.cond)}) goto L{st.truebr}; else goto L{st.falsebr};"]
        if isinstance(st, ir.Jump):
            targets.add(st.target)
            return [f"  goto L{st.target};"]
        if isinstance(st, ir.Return):
            return [f"  return ({self.ret})({self.var(st.value)});"]
        raise Untranslatable(type(st).__name__)

    def assign(self, st, ir):
        target, value = st.target.name, st.value
        static = self.static_value(value, ir)
        if static is not _NONE:
            if _is_number(static) and target in self.vars:
                return [f"  {self.vars[target]} = ({_ctype(self.typemap[target])})({_literal(static)});"]
            self.static[target] = static
            return []
        if target not in self.vars:
            raise Untranslatable(f"{target} has type {self.typemap.get(target)}")
        c = _ctype(self.typemap[target])
        return [f"  {self.vars[target]} = ({c})({self.expr(value, ir)});"]

    def static_value(self, value, ir):
        """The Python object value names when it is no run-time value (a module, a function, a
        constant), else _NONE."""
        if isinstance(value, (ir.Global, ir.FreeVar)):
            return value.value
        if isinstance(value, ir.Const):
            return value.value
        if isinstance(value, ir.Var) and value.name in self.static:
            return self.static[value.name]
        if isinstance(value, ir.Expr) and value.op == "getattr" and value.value.name in self.static:
            owner = self.static[value.value.name]
            try:
                return getattr(owner, value.attr)
            except AttributeError:
                raise Untranslatable(f"{_shown(owner)} has no {value.attr}") from None
        return _NONE

    def expr(self, e, ir):
        if isinstance(e, ir.Arg):
            return f"p{e.index}"
        if isinstance(e, ir.Var):
            return self.var(e)
        if not isinstance(e, ir.Expr):
            raise Untranslatable(type(e).__name__)
        if e.op == "cast":
            return self.var(e.value)
        if e.op in ("binop", "inplace_binop"):
            fn = _INPLACE.get(e.fn, e.fn) if e.op == "inplace_binop" else e.fn
            return self.binop(e, fn)
        if e.op == "unary":
            if e.fn not in _UNARY:
                raise Untranslatable(f"the operator {e.fn}")
            sig = self.calltypes[e]
            return f"{_UNARY[e.fn]}{self.typed(e.value, sig.args[0])}"
        if e.op == "call":
            return self.call(e)
        raise Untranslatable(f"the expression {e.op}")

    def binop(self, e, fn):
        from numba.core import types
        sig = self.calltypes[e]
        a, b = sig.args
        r = types.unliteral(sig.return_type)
        if fn is operator.pow:
            if not isinstance(r, types.Float):
                raise Untranslatable("an integer power")
            rc = _ctype(r)
            if isinstance(types.unliteral(b), types.Integer):
                self.tr.uses_ipow = True
                return f"rs_ipow<{rc}>({self.typed(e.lhs, r)}, (long long)({self.var(e.rhs)}))"
            return f"{self._math('pow', r)}({self.typed(e.lhs, r)}, {self.typed(e.rhs, r)})"
        if fn not in _BINARY:
            raise Untranslatable(f"the operator {fn.__name__}")
        op = _BINARY[fn]
        ua, ub = types.unliteral(a), types.unliteral(b)
        if op == "/" and not isinstance(r, types.Float):
            raise Untranslatable("a division of integers to an integer")
        if op in ("<<", ">>", "&", "|", "^") and not (isinstance(ua, (types.Integer, types.Boolean))
                                                      and isinstance(ub, (types.Integer, types.Boolean))):
            raise Untranslatable(f"{op} of {a} and {b}")
        if op in ("<<", ">>"):
            raise Untranslatable("a shift")  # Numba's shifts past the width differ from C++'s
        if op in "+-*" and isinstance(r, types.Integer):
            # Numba's integers wrap: the operation in unsigned arithmetic, converted back.
            u = "unsigned long long"
            return f"({_ctype(r)})(({u}){self.typed(e.lhs, a)} {op} ({u}){self.typed(e.rhs, b)})"
        if op in "+-*/" and isinstance(r, types.Float) and (isinstance(ua, (types.Integer, types.Boolean)) or
                                                          isinstance(ub, (types.Integer, types.Boolean))):
            return f"{self.typed(e.lhs, r)} {op} {self.typed(e.rhs, r)}"
        if op in "+-*/" and (isinstance(ua, types.Boolean) or isinstance(ub, types.Boolean)):
            raise Untranslatable("arithmetic on booleans")
        return f"{self.typed(e.lhs, a)} {op} {self.typed(e.rhs, b)}"

    @staticmethod
    def _math(name, t):
        from numba.core import types
        t = types.unliteral(t)
        if not isinstance(t, types.Float):
            raise Untranslatable(f"{name} of {t}")
        return name + ("f" if t.bitwidth == 32 else "")

    def call(self, e):
        from numba.core import types
        if e.kws or e.vararg is not None or getattr(e, "varkwarg", None) is not None:
            raise Untranslatable("keyword or star arguments")
        if e.func.name not in self.static:
            raise Untranslatable("a call of a run-time value")
        f = self.static[e.func.name]
        sig = self.calltypes[e]
        r = types.unliteral(sig.return_type)
        rc = _ctype(r)
        if rc is None:
            raise Untranslatable(f"a call returning {r}")
        args = e.args
        if f in (float, int, bool) or isinstance(self.typemap[e.func.name], types.NumberClass):
            if len(args) != 1:
                raise Untranslatable("a conversion of other than one value")
            return f"({rc})({self.var(args[0])})"
        if hasattr(f, "py_func") and hasattr(f, "overloads"):
            name = self.tr.function(f, sig.args, sig.return_type)
            return f"{name}({', '.join(self.typed(v, t) for v, t in zip(args, sig.args))})"
        known = _FUNCTIONS.get(id(f))
        if known is None or known[0] is not f:
            raise Untranslatable(f"a call of {_shown(f)}")
        name = known[1]
        if name in ("min", "max"):
            if len(args) < 2:
                raise Untranslatable(f"{name} of an iterable")
            # Python's (and Numba's) rule: the first value unless a later one is strictly less (greater).
            acc = self.typed(args[0], r)
            cmp = "<" if name == "min" else ">"
            for v in args[1:]:
                x = self.typed(v, r)
                acc = f"rs_pick({x}, {acc}, {x} {cmp} {acc})"
            return acc
        if name == "abs":
            if len(args) != 1:
                raise Untranslatable("abs of other than one value")
            if isinstance(r, types.Float):
                return f"{self._math('fabs', r)}({self.typed(args[0], r)})"
            if isinstance(r, types.Integer) and r.signed:
                return f"rs_iabs<{rc}>({self.typed(args[0], r)})"
            raise Untranslatable(f"abs of {r}")
        if len(args) != (2 if name in _MATH2 else 1) or len(sig.args) != len(args):
            raise Untranslatable(f"{name} with {len(args)} arguments")
        return f"{self._math(name, r)}({', '.join(self.typed(v, r) for v in args)})"


_NONE = object()

# Each stage's text carries its own (the kernel puts each stage in a namespace of its own).
_HELPERS = """template <class T> static inline T rs_pick(T a, T b, bool first) { return first ? a : b; }
template <class T> static inline T rs_iabs(T a) { return a < 0 ? (T)(0ULL - (unsigned long long)a) : a; }
"""


def translate(dispatcher, args, ret, name):
    """C++ text defining `name`: the function dispatcher compiled for Numba types args, returning ret
    (its callees defined before it). @raises Untranslatable."""
    tr = _Translator(name)
    top = tr.function(dispatcher, tuple(args), ret)
    assert top == name
    return _HELPERS + (_IPOW if tr.uses_ipow else "") + "".join(tr.functions)
