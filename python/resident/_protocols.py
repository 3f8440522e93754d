"""Python's own protocols on resident's objects: each either works or is refused as a resident.Error that
says what to do, never the interpreter's bare TypeError.

- copy.copy / copy.deepcopy of an Array: a new array on the same device with the same values (a device
  copy, ordered like any other work on the array); nothing crosses to the host.
- pickle of an op or a program: by value (its operations and their constants), so they go to other
  processes (multiprocessing, concurrent.futures); a copy of one is itself, as they do not change.
- pickle of an Array, a Flow, a Graph or a profile: refused; device memory, streams and captured work do
  not travel, an Array's values do as x.to_host().
- an Array's elements stay on the device: indexing, iteration, truth, float() and the arithmetic
  operators are refused, naming the way (x.to_host(), x.item(), rs.op programs, stages).
- x @ y is rs.matmul(x, y); x.item() reads the value of a one-element array (a counted transfer).
"""
import numpy as _np

from . import _core, _typed
from ._typed import shown as _shown

_NOT_PICKLED = {
    _core.Array: "an Array's memory stays on its device; pickle x.to_host() (a NumPy array, a counted "
                 "transfer) and rs.to_device it on the other side",
    _core.Flow: "a Flow holds streams and Python callables bound to this process; build it again there",
    _core.Graph: "a Graph holds work captured in this process; capture it again there",
    _core._Profile: "a profile's report travels as p.to_json(path) or the rows of p.rows",
    _core.Stream: "a Stream is a queue of this process's device; make one there (rs.Stream(device))",
    _core.Event: "an Event is a point in this process's stream; make one there (rs.Event(device))",
}


def _refuse_pickle(advice):
    def __reduce_ex__(self, protocol=None):
        what = "pickled" if isinstance(self, _core.Array) else "pickled or copied"
        raise _core.InvalidType(f"a resident.{type(self).__name__.lstrip('_')} is not {what}: {advice}")
    return __reduce_ex__


def _array_copy(self, memo=None):
    out = _core.empty(self.shape, self.dtype, self.device)
    _core._copy_array(self, out)
    return out


def _refuse(what, advice):
    def refused(self, *args):
        raise _core.InvalidType(f"{what} on a {_label(self)}: {advice}")
    return refused


def _refuse_operator(what, reflected):
    """A binary operator: the other operand's own reflected operator runs where it has one (NumPy's
    arrays, CuPy's: they read the array as they would without resident); else the refusal."""
    def refused(self, other=None, *rest):
        theirs = getattr(type(other), reflected, None) if reflected else None
        if theirs is not None and not getattr(theirs, "refuses", False) and _array_like(other):
            return NotImplemented
        raise _core.InvalidType(f"{what} on a {_label(self)}: {_ARITHMETIC}")
    refused.refuses = True  # resident's own: the other operand is no array of another library
    return refused


def _label(x):
    return "resident.dist.ShardedArray" if type(x).__name__ == "ShardedArray" else "resident.Array"


_ON_DEVICE = ("its elements stay on the device; x.to_host() copies them to a NumPy array (a counted "
              "transfer), rs.op programs and rs.stage functions compute on them where they are")
_ARITHMETIC = ("it has no element-wise operators; an rs.op program (rs.op.add(1.0) | rs.op.sqrt()) or an "
               "rs.stage function computes on its elements as one kernel, in place or into out=")
_OPERATORS = {"add": "x + y", "sub": "x - y", "mul": "x * y", "truediv": "x / y", "floordiv": "x // y",
              "mod": "x % y", "pow": "x ** y", "lshift": "x << y", "rshift": "x >> y", "and": "x & y",
              "xor": "x ^ y", "or": "x | y", "matmul": "x @ y", "divmod": "divmod(x, y)", "lt": "<", "le": "<=",
              "gt": ">", "ge": ">=", "neg": "-x", "pos": "+x", "abs": "abs(x)", "invert": "~x",
              "round": "round(x)", "trunc": "math.trunc(x)", "floor": "math.floor(x)", "ceil": "math.ceil(x)"}


def _array_like(x):
    """Another library's array (NumPy's, CuPy's, PyTorch's, ...): its operators read resident's arrays."""
    t = type(x)
    return hasattr(t, "__array_ufunc__") or hasattr(t, "__dlpack__") or hasattr(x, "__cuda_array_interface__")


_MIRRORED = {"<": "__gt__", "<=": "__ge__", ">": "__lt__", ">=": "__le__"}  # x < y is y > x


def refuse_elements(cls):
    """Element access, truth, conversion to a number and the element-wise operators on cls's objects
    (arrays whose elements stay on their devices), refused naming the way."""
    cls.__getitem__ = _refuse("x[i]", _ON_DEVICE)
    cls.__setitem__ = _refuse("x[i] = v", _ON_DEVICE)
    cls.__delitem__ = _refuse("del x[i]", _ON_DEVICE)
    cls.__iter__ = _refuse("iter(x)", _ON_DEVICE)
    cls.__contains__ = _refuse("v in x", _ON_DEVICE)
    cls.__bool__ = _refuse("bool(x)", "the truth of an array is not defined; test rs.sum(x), rs.max(x) or "
                           "x.size instead")
    for name in ("float", "int", "complex", "index"):
        setattr(cls, f"__{name}__", _refuse(f"{name}(x)", "x.item() reads the value of a one-element array (a "
                                            "counted transfer)"))
    for name, sign in _OPERATORS.items():
        if sign.startswith(("x ", "divmod")):
            setattr(cls, f"__{name}__", _refuse_operator(f"`{sign}`", f"__r{name}__"))
            setattr(cls, f"__r{name}__", _refuse_operator(f"`{sign}`", None))
        elif sign in _MIRRORED:
            setattr(cls, f"__{name}__", _refuse_operator(f"`x {sign} y`", _MIRRORED[sign]))
        else:
            setattr(cls, f"__{name}__", _refuse(f"`{sign}`", _ARITHMETIC))
    cls.__format__ = _format


def _format(self, spec):
    if spec:
        raise _core.InvalidType(f"format spec {_shown(spec)} on a {_label(self)}: its elements stay on the device; "
                                "format x.to_host() (a counted transfer)")
    return str(self)


def _item(self):
    if self.size != 1:
        raise _core.InvalidArgument(f"x.item() reads the value of a one-element array; this one has {self.size} "
                                    "elements: x.to_host() copies them all (a counted transfer)")
    return self.to_host().item()


def _matmul(self, other):
    from . import matmul
    return matmul(self, other)


def _rmatmul(self, other):
    from . import matmul
    return matmul(other, self)


def _no_bare_instance(cls, *args, **kwargs):
    # T.__new__(T) would make an instance nanobind never initialized (every use a bare TypeError or a
    # std::bad_cast); T(...) and resident's functions do not come here.
    raise _core.InvalidType(f"resident.{cls.__name__}.__new__ makes no usable object; use the functions that make "
                            "one (rs.to_device, rs.empty, rs.Flow(), rs.capture, ...)")


def install():
    for name in dir(_core):  # every class of the compiled core
        cls = getattr(_core, name)
        if isinstance(cls, type) and type(cls).__name__ == "nb_type":
            cls.__new__ = _no_bare_instance
    for cls, advice in _NOT_PICKLED.items():
        cls.__reduce_ex__ = cls.__reduce__ = _refuse_pickle(advice)
    _core.Array.__copy__ = _core.Array.__deepcopy__ = _array_copy
    for cls in (_core.op, _core.program):
        cls.__copy__ = lambda self: self
        cls.__deepcopy__ = lambda self, memo: self
    _core.op.__reduce__ = lambda self: (_op_made, (self.name.partition("(")[0], self.a, self.b))
    _core.program.__reduce__ = lambda self: (_core.program, (list(self.ops),))
    A = _core.Array
    refuse_elements(A)
    A.__matmul__, A.__rmatmul__ = _matmul, _rmatmul
    A.item = _typed.python_signature(_item, "resident.Array.item")
    A.__array_ufunc__ = _array_ufunc


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """NumPy's ufuncs on arrays on the CPU work on the same memory as np.asarray(x) (out= too); an array
    on a GPU is refused as np.asarray refuses it."""
    def mine(v):
        return _np.asarray(v) if isinstance(v, _core.Array) else v
    if "out" in kwargs:
        kwargs["out"] = tuple(mine(o) for o in kwargs["out"])
    return getattr(ufunc, method)(*map(mine, inputs), **kwargs)


_ONE_CONSTANT = ("add", "mul", "minimum", "maximum", "pow")
_OP_NAMES = _ONE_CONSTANT + ("affine", "square", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh", "abs", "neg",
                             "recip")


def _op_made(base, a, b):
    """The op a pickle names: its function and constants (op.name rounds them for messages)."""
    if base not in _OP_NAMES:
        raise _core.InvalidArgument(f"resident.op: no operation named {_shown(base)} to unpickle")
    make = getattr(_core.op, base)
    return make(a, b) if base == "affine" else make(a) if base in _ONE_CONSTANT else make()
