"""uint64 mixed with signed integers in a stage: Numba types such a pair as int64 (or float64 where
branches join), where NumPy 2 gives a Python int the uint64's type. The bits of + - * & | ^ << stay
right, so those pass (and % by a power of two, // 1); what reads the sign or converts (// % / >>
comparisons, abs, max, min, float, ufuncs, a join with a float) is wrong from 2**63, so it is refused when
the stage is compiled."""
import operator

# Operations whose result has the same bits whichever sign the operands are read with.
_SAME_BITS = {operator.add, operator.sub, operator.mul, operator.and_, operator.or_, operator.xor, operator.lshift,
              operator.iadd, operator.isub, operator.imul, operator.iand, operator.ior, operator.ixor,
              operator.ilshift, operator.neg, operator.invert, operator.pos, operator.pow, operator.ipow}
# Read right by Numba when a uint64 meets a signed integer as given (not one computed as int64 before).
_MIXED_RIGHT = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge, operator.truediv,
                operator.itruediv, operator.rshift, operator.irshift}
_SYMBOLS = {operator.floordiv: "//", operator.mod: "%", operator.truediv: "/", operator.rshift: ">>",
            operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==",
            operator.ne: "!=", operator.pow: "**", operator.ifloordiv: "//=", operator.imod: "%=",
            operator.itruediv: "/=", operator.irshift: ">>=", operator.ipow: "**="}


def mentions_uint64(fn, depth=0, seen=None):
    """Whether fn's code (or a plain function it names, a few levels down) names uint64 or writes a
    constant in [2**63, 2**64) (Numba's uint64): only then can a stage on signed values mix the two."""
    import types
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen or depth > 4:
        return False
    seen.add(id(code))
    stack, names = [code], set()
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                stack.append(k)
            elif isinstance(k, int) and not isinstance(k, bool) and k >= 2**63:
                return True
    if "uint64" in names or "uint" in names:
        return True
    g = getattr(fn, "__globals__", {})
    return any(mentions_uint64(g[n], depth + 1, seen) for n in names if isinstance(g.get(n), types.FunctionType))


def refuse_mixed_signs(dispatcher, args, name, error):
    """Raises error(...) at the first sign-dependent use of a uint64 mixed with a signed integer in the
    compiled dispatcher's function (args: its argument types) or a function it calls."""
    from numba.core import ir, types as nt

    def u64(t):
        return isinstance(t, nt.Integer) and not t.signed and t.bitwidth == 64

    def signed(t):
        return isinstance(t, nt.Integer) and t.signed

    def place(d, st):
        return getattr(d.py_func, "__name__", "?"), f"{str(st.loc.filename).rsplit('/', 1)[-1]}:{st.loc.line}"

    def walk(d, args, tainted_params, seen):
        """(the first refused use or None, whether the function returns an int64 made from a uint64)."""
        key = (id(d), args, tainted_params)
        if key in seen or args not in d.overloads:
            return None, False
        seen.add(key)
        ta = d.overloads[args].type_annotation
        tm, ct = ta.typemap, ta.calltypes
        tainted, found, returns = set(), [None], [False]
        small = set()  # uint64 values below 2**63 held as int64 (v % 2**k): read right, wrong once computed on
        assigned = {}  # each variable's one definition (None where there are several)
        for block in ta.blocks.values():
            for st in block.body:
                if isinstance(st, ir.Assign):
                    assigned[st.target.name] = None if st.target.name in assigned else st.value

        def constant(v):  # the int a variable always holds, if it is a written constant
            d = assigned.get(v.name)
            c = d.value if isinstance(d, (ir.Const, ir.Global, ir.FreeVar)) else None
            return c if isinstance(c, int) and not isinstance(c, bool) else None
        # A uint64 returned as a float is wrong only where another return is a signed integer (the pair
        # unified to float64); beside a float return it converts as written.
        signed_returns = any(isinstance(st, ir.Assign) and isinstance(st.value, ir.Expr) and st.value.op == "cast"
                             and isinstance(tm.get(st.target.name), nt.Float) and signed(tm.get(st.value.value.name))
                             for block in ta.blocks.values() for st in block.body)

        def refuse(st, what):
            if found[0] is None:
                found[0] = (*place(d, st), what)

        for final in (False, True):  # to a fixed point (loops carry values back), then the checks
            while True:
                before = len(tainted) + len(small)
                for block in ta.blocks.values():
                    for st in block.body:
                        if isinstance(st, ir.Return):
                            returns[0] |= st.value.name in tainted or st.value.name in small
                        if not isinstance(st, ir.Assign):
                            continue
                        e, target = st.value, st.target.name
                        tt = tm.get(target)
                        if isinstance(e, ir.Arg):
                            if e.index in tainted_params:
                                tainted.add(target)
                        elif isinstance(e, ir.Var):
                            src = tm.get(e.name)
                            if e.name in tainted:
                                tainted.add(target)
                            elif e.name in small:
                                small.add(target)
                            if final and isinstance(tt, nt.Float) and isinstance(src, nt.Integer) and (
                                    u64(src) or e.name in tainted):
                                refuse(st, "one variable holding both (a float64 for Numba)")
                        elif isinstance(e, ir.Expr):
                            ins = [v for v in e.list_vars()]
                            hot = any(v.name in tainted for v in ins)
                            held = any(v.name in small for v in ins)
                            if e.op in ("binop", "inplace_binop", "unary"):
                                operands = [tm.get(v.name) for v in (e.lhs, e.rhs)] if e.op != "unary" else [
                                    tm.get(e.value.name)]
                                mixed = any(u64(t) for t in operands) and any(signed(t) for t in operands)
                                fn = e.fn
                                c = constant(e.rhs) if e.op != "unary" else None
                                if fn in (operator.mod, operator.imod) and c and 0 < c < 2**63 and not c & (c - 1):
                                    if mixed or hot or held:  # v % 2**k: the low k bits, whichever sign v is read with
                                        small.add(target)
                                elif (fn in _SAME_BITS or e.op == "unary" and fn in ("-", "~", "+") or
                                      fn in (operator.floordiv, operator.ifloordiv) and c == 1):
                                    if (mixed or hot or held) and signed(tt):
                                        tainted.add(target)  # NumPy computes on in uint64
                                    elif final and hot and isinstance(tt, nt.Float):
                                        refuse(st, f"{_SYMBOLS.get(fn, 'arithmetic')} with a float, after")
                                elif final and (hot or mixed and fn not in _MIXED_RIGHT):
                                    refuse(st, _SYMBOLS.get(fn, str(fn)))
                            elif e.op == "call":
                                ft = tm.get(e.func.name)
                                arg_types = [tm.get(v.name) for v in e.args]
                                mixed = any(u64(t) for t in arg_types) and any(signed(t) for t in arg_types)
                                arg_hot = tuple(i for i, v in enumerate(e.args) if v.name in tainted or v.name in small)
                                if isinstance(ft, nt.Dispatcher) and e in ct:
                                    sub, back = walk(ft.dispatcher, tuple(ct[e].args), arg_hot, seen)
                                    if sub and found[0] is None:
                                        found[0] = sub
                                    if back:
                                        tainted.add(target)
                                elif isinstance(ft, nt.NumberClass) and isinstance(ft.instance_type, nt.Integer):
                                    pass  # numpy.uint64(x), numpy.int64(x): the bits, as the cure asks
                                elif final and (arg_hot or mixed):
                                    what = getattr(ft, "typing_key", ft)
                                    refuse(st, f"{getattr(what, '__name__', what)}()")
                            elif e.op == "cast" and isinstance(tt, nt.Float) and (
                                    hot or u64(tm.get(e.value.name)) and signed_returns):
                                if final:  # returns of both joined (Python 3.12 returns in each branch)
                                    refuse(st, "one variable holding both (a float64 for Numba)")
                            elif e.op in ("cast", "build_tuple", "getitem", "static_getitem", "exhaust_iter",
                                          "pair_first", "pair_second") and (hot or held):
                                (tainted if hot else small).add(target)
                if final or len(tainted) + len(small) == before:
                    break
        return found[0], returns[0]

    hit, _ = walk(dispatcher, tuple(args), (), set())
    if hit:
        fn, where, what = hit
        at = where if fn == name else f"in {fn}, {where}"
        raise error("InvalidType", f"resident.stage: {name} ({at}): {what} of a uint64 and a signed integer, "
                    f"which Numba computes as int64 or float64, comes out wrong from 2**63; make the integers "
                    f"uint64 (numpy.uint64(3), numpy.uint64(v)), as NumPy's rule would")


def check_stage(source, sig, name, convert, error, dtypes):
    """Types the stage on the host (as Numba would on any target) and refuses what refuse_mixed_signs
    finds, when a uint64 can be in it; a function the host cannot type is left to the compile itself."""
    import numpy
    if numpy.dtype("uint64") not in [numpy.dtype(d) for d in dtypes] and not mentions_uint64(source):
        return
    import numba
    from ._rewrite import _compiled_along
    typed = numba.njit(error_model="numpy")
    try:
        d = typed(_compiled_along(source, typed, convert))
        d.compile(tuple(sig.args))
    except Exception:  # the compile for the target reports it, typed
        return
    refuse_mixed_signs(d, tuple(sig.args), name, error)
