"""NumPy's error model for ``float ** int`` in the functions resident gives Numba's CPU compiler.

Numba computes a float raised to an integer (``v ** -2``, ``v ** k``, ``pow(v, k)``) by repeated
multiplication and, for a negative exponent, ``1.0 / r`` compiled through ``compile_internal``, which
takes Python's error model whatever the function's own is: ``0.0 ** -2`` raises ZeroDivisionError
instead of giving inf as NumPy (and the C++ text of a translated stage) does. Here a rewrite of
Numba's untyped IR, applied only to the functions resident marks (copies it made of the stage's
functions: the user's own functions, compiled by the user's own ``numba.njit``, are left alone),
replaces each ``**`` (and ``**=``, and calls of ``pow`` / ``operator.pow`` / ``math.pow``) with a call of ``ieee_pow``,
whose implementation for a float and an integer inverts without dividing by zero, and for every other
pair of types is Numba's own ``a ** b``. The GPU needs none of it: numba-cuda compiles those helpers
under the kernel's (NumPy) error model.
"""
import builtins
import math
import operator
import threading
import types as _pytypes
import weakref

_marked = weakref.WeakSet()  # the functions (resident's copies) whose powers are rewritten
_lock = threading.Lock()
_registered = False


def ieee_pow(a, b):
    """a ** b with NumPy's IEEE result for a float and an integer (compiled by Numba only)."""
    return a ** b


def ieee_math_pow(a, b):
    """math.pow(a, b) with NumPy's IEEE result for an integer exponent (compiled by Numba only)."""
    import math
    return math.pow(a, b)


def ieee_ipow(a, b):
    """a **= b (compiled by Numba only): in place where Numba's ``**=`` is (an array)."""
    a **= b
    return a


def marked(fn):
    """A copy of the plain function fn whose ``**`` the rewrite replaces when Numba compiles it: a copy,
    so that the user's own function compiled elsewhere keeps Numba's behaviour."""
    _register()
    g = _pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    g.__kwdefaults__ = fn.__kwdefaults__
    g.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
    _marked.add(g)
    return g


def _float_int_impl(a, b):
    """The implementation of ieee_pow(a, b) for Numba types a (a float) and b (an integer), else None."""
    import math

    from numba.core import types
    if not (isinstance(a, types.Float) and isinstance(b, types.Integer)):
        return None
    t = a  # the value's float type: the result keeps it (float32 stays float32)
    if not b.signed:
        return lambda a, b: a ** b  # no negative exponent: Numba's multiplications divide by nothing

    def impl(a, b):
        if b >= 0:
            return a ** b
        if b < -0x10000:  # Numba's own cutoff: the C library's pow (it never raises)
            return t(math.pow(a, float(b)))
        r = a ** (-b)
        if r == 0:  # 1 / r: an infinity of r's sign, as IEEE division gives
            return t(math.copysign(math.inf, r))
        return t(1) / r
    return impl


def _register():
    """Registers the overloads and the rewrite with Numba, once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        from numba.core import ir
        from numba.core.rewrites import Rewrite, register_rewrite
        from numba.extending import overload

        # The functions resident compiles use NumPy's error model; the generic a ** b below does too, so
        # that integer powers keep what Numba gives them there (0 ** -1 is the integer's least value).
        @overload(ieee_pow, jit_options={"error_model": "numpy"})
        def _ov_pow(a, b):
            impl = _float_int_impl(a, b)
            return impl if impl is not None else (lambda a, b: a ** b)

        @overload(ieee_ipow, jit_options={"error_model": "numpy"})
        def _ov_ipow(a, b):
            impl = _float_int_impl(a, b)
            if impl is not None:
                return impl

            def generic(a, b):
                a **= b
                return a
            return generic

        # math.pow(x, k) of an integer k: Numba's integer power too (a double, as Python's math.pow).
        @overload(ieee_math_pow, jit_options={"error_model": "numpy"})
        def _ov_math_pow(a, b):
            import math

            import numpy as np
            from numba.core import types
            if isinstance(a, (types.Float, types.Integer, types.Boolean)) and isinstance(b, types.Integer):
                return lambda a, b: ieee_pow(np.float64(a), b)
            return lambda a, b: math.pow(a, b)

        names = {id(builtins.pow): ieee_pow, id(operator.pow): ieee_pow, id(operator.ipow): ieee_ipow,
                 id(math.pow): ieee_math_pow}
        modules = {"pow": (operator, math), "ipow": (operator,)}

        @register_rewrite("before-inference")
        class _IEEEPow(Rewrite):
            """In a marked function: ``a ** b`` as ``ieee_pow(a, b)``, ``a **= b`` as ``a = ieee_ipow(a, b)``,
            and the globals ``pow``, ``operator.pow``, ``operator.ipow`` as those helpers."""

            def match(self, func_ir, block, typemap, calltypes):
                func = getattr(func_ir.func_id, "func", None)
                if func is None or func not in _marked:
                    return False
                self.block, self.func_ir = block, func_ir
                return any(self._replaced(stmt) is not None for stmt in block.body)

            def _replaced(self, stmt):
                """The helper that stmt's value becomes, else None."""
                v = stmt.value if isinstance(stmt, ir.Assign) else None
                if isinstance(v, ir.Expr) and v.op == "binop" and v.fn is operator.pow:
                    return ieee_pow
                if isinstance(v, ir.Expr) and v.op == "inplace_binop" and v.fn is operator.ipow:
                    return ieee_ipow
                if isinstance(v, (ir.Global, ir.FreeVar)):
                    return names.get(id(v.value))
                if isinstance(v, ir.Expr) and v.op == "getattr" and v.attr in modules:
                    try:  # operator.pow, math.pow: the attribute of the module
                        m = self.func_ir.get_definition(v.value)
                    except Exception:  # noqa: BLE001 (no single definition: not the module)
                        return None
                    if isinstance(m, (ir.Global, ir.FreeVar)) and any(m.value is mod for mod in modules[v.attr]):
                        return names.get(id(getattr(m.value, v.attr)))
                return None

            def apply(self):
                block = self.block
                new = ir.Block(block.scope, block.loc)
                for stmt in block.body:
                    helper = self._replaced(stmt)
                    if helper is None:
                        new.append(stmt)
                        continue
                    v, glb = stmt.value, ir.Global(helper.__name__, helper, stmt.value.loc)
                    if isinstance(v, ir.Expr) and v.op in ("binop", "inplace_binop"):
                        var = block.scope.redefine("$resident_" + helper.__name__, v.loc)
                        new.append(ir.Assign(glb, var, v.loc))
                        new.append(ir.Assign(ir.Expr.call(var, [v.lhs, v.rhs], (), v.loc), stmt.target, stmt.loc))
                    else:  # pow itself, named: the helper in its place
                        new.append(ir.Assign(glb, stmt.target, stmt.loc))
                return new

        _registered = True
