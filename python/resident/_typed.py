"""Wrongly typed arguments as resident.InvalidType. nanobind refuses a call whose arguments match none
of a function's signatures with a plain TypeError ("incompatible function arguments"); the package's
functions of the compiled core (and the static functions of ``op``) raise InvalidType instead, a
resident.Error that is still a TypeError, with nanobind's message naming the signatures accepted."""
import functools
import types
import operator

_NANOBIND_MISMATCH = "incompatible function arguments"
# Python's refusal to turn an int of more than sys.get_int_max_str_digits() digits into text, met where a
# message quotes such an argument.
_DIGITS_LIMIT = "for integer string conversion"


def shown(v, most=200):
    """repr(v) for a message, at most `most` characters: never raises for v's sake (a __repr__ that raises,
    an int past Python's digits for text); KeyboardInterrupt and SystemExit pass as they are."""
    try:
        if isinstance(v, int) and v.bit_length() > 10_000:
            return f"an int of {v.bit_length()} bits"
        text = repr(v)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 (the object's own code: named, not raised)
        try:
            name = type(v).__name__
        except BaseException:  # noqa: BLE001
            name = "object"
        return f"a {name} (its __repr__ raised {type(e).__name__})"
    return text if len(text) <= most else text[:most] + "..."


def _digits_refusal(e, where):
    from . import _core
    return _core.InvalidArgument(f"{where}: an integer argument has more digits than Python turns into text "
                                 f"({e}); give a number within the call's range")


def _typed(f, where):
    @functools.wraps(f)
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except TypeError as e:
            if not _mismatch(e, f):
                raise
            if _conversions_now_succeed(args, kwargs):
                try:  # what failed the first time does not now: no body ran, so the call is made again
                    return f(*args, **kwargs)
                except TypeError as again:
                    if not _mismatch(again, f):
                        raise
                    e = again
            from . import _core
            huge = _beyond_every_number(args, kwargs)
            if huge is not None:
                raise _core.InvalidArgument(f"{where}: {shown(huge, 40)} is beyond the range of every number "
                                            "the call takes (a double reaches about 1.8e308)") from None
            raise _core.InvalidType(f"{where}: an argument's type does not fit: {e}") from None
        except ValueError as e:
            if type(e) is not ValueError or _DIGITS_LIMIT not in str(e):
                raise
            raise _digits_refusal(e, where) from None
    call.__wrapped_core__ = f
    return call


def python_signature(f, where):
    """f, with a call whose arguments do not bind to its signature (a missing argument, an unknown
    keyword) raising InvalidType: Python raises that TypeError in the caller's frame, before f runs."""
    @functools.wraps(f)
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except TypeError as e:
            if type(e) is not TypeError or e.__traceback__ is None or e.__traceback__.tb_next is not None:
                raise
            from . import _core
            raise _core.InvalidType(f"{where}: {e}") from None
        except ValueError as e:
            if type(e) is not ValueError or _DIGITS_LIMIT not in str(e):
                raise
            raise _digits_refusal(e, where) from None
    return call


def functions_typed(namespace, names, prefix):
    """The functions `names` of a module's namespace, each wrapped by python_signature."""
    for name in names:
        namespace[name] = python_signature(namespace[name], prefix + name)


def methods_typed(cls, prefix):
    """cls's public methods (and __init__, __enter__), each wrapped by python_signature in place."""
    for name, f in list(vars(cls).items()):
        if isinstance(f, types.FunctionType) and (not name.startswith("_") or name in ("__init__", "__enter__")):
            setattr(cls, name, python_signature(f, f"{prefix}.{name}"))
        elif isinstance(f, classmethod) and not name.startswith("_"):
            setattr(cls, name, classmethod(python_signature(f.__func__, f"{prefix}.{name}")))
    return cls


def _mismatch(e, f):
    """Whether e is nanobind refusing f's arguments (before any of f's work ran), not a TypeError raised
    inside the call (by a callback it made, say), which raised from deeper frames."""
    return (type(e) is TypeError and e.__traceback__ is not None and e.__traceback__.tb_next is None
            and str(e).startswith(f"{getattr(f, '__name__', '')}(): {_NANOBIND_MISMATCH}"))


def _beyond_every_number(args, kwargs):
    """An integer argument no C type holds, not even a double: refused for its value, not its type."""
    given = [*args, *kwargs.values()]
    given += [i for a in given if isinstance(a, (list, tuple)) for i in a[:64]]
    for a in given:
        if type(a) is int and a.bit_length() > 1000:
            try:
                float(a)
            except OverflowError:
                return a
    return None


def _conversions_now_succeed(args, kwargs):
    """nanobind's number casters clear what an argument's __float__ or __index__ raised and try the next
    signature. Each conversion is asked once more: an interrupt or exit it raises goes on unchanged;
    returns whether some argument has a conversion and each such argument converts now (what failed was
    passing, as an interrupt that nanobind cleared, and the call is worth making again)."""
    some, every = False, True
    given = [*args, *kwargs.values()]
    given += [i for a in given if isinstance(a, (list, tuple)) for i in a[:64]]  # after=[...]: an item's too
    for a in given:
        if isinstance(a, (int, float, str, bytes, list, tuple, dict)) or a is None:
            continue
        methods = [(c, m) for c, m in ((float, "__float__"), (operator.index, "__index__")) if hasattr(type(a), m)]
        converts = False
        for convert, _ in methods:
            try:
                convert(a)
                converts = True
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:  # noqa: BLE001 (the mismatch is the message)
                pass
        some = some or bool(methods)
        every = every and (converts or not methods)
    return some and every


def _made_once(f, cls):
    """cls.__init__ refusing an object already made: its state (a stream, a flow's stages) stays as it is."""
    @functools.wraps(f)
    def call(self, *args, **kwargs):
        from . import _core
        if _core._made(self):
            raise _core.InvalidType(f"resident.{cls.__name__} is made once: __init__ called again on one in use; "
                                    f"make a new one, e.g. rs.{cls.__name__}()")
        return f(self, *args, **kwargs)
    return call


def _is_core_function(f):
    return type(f).__name__ == "nb_func" and not hasattr(f, "__wrapped_core__")


_OP_CONSTANTS = ("add", "mul", "affine", "minimum", "maximum", "pow")


def _exact_constants(f, where):
    """f, refusing an operation's constant that is a bool (True was taken as 1.0) or an integer a double
    does not hold exactly (2**53 + 1 became 2**53 unsaid); numbers past a double's range are f's own
    refusal."""
    import numpy as np

    @functools.wraps(f)
    def call(*args, **kwargs):
        for c in (*args, *kwargs.values()):
            if isinstance(c, (bool, np.bool_)):
                from . import _core
                raise _core.InvalidType(f"{where}: the constant {c!r} is a bool; give a number (1.0 for True)")
            if isinstance(c, (int, np.integer)):
                try:
                    exact = float(c) == int(c)
                except OverflowError:
                    continue  # beyond every double: f refuses it
                if not exact:
                    from . import _core
                    raise _core.InvalidArgument(
                        f"{where}: the constant {shown(c, 40)} is not a double exactly (it would be "
                        f"{float(c)!r}); give a float where that rounding is meant")
        return f(*args, **kwargs)
    call.__wrapped_core__ = getattr(f, "__wrapped_core__", f)
    return call


def wrap_core(core):
    """Replaces the core module's functions, and op's static functions, by their typed wrappers. Runs
    before the package imports names from the core, so every path reaches the wrappers."""
    for name, f in list(vars(core).items()):
        if _is_core_function(f):
            setattr(core, name, _typed(f, "resident." + name.lstrip("_")))
    op = core.op
    for name, f in list(vars(op).items()):
        if not name.startswith("__") and _is_core_function(f):
            typed = _typed(f, "resident.op." + name)
            if name in _OP_CONSTANTS:
                typed = _exact_constants(typed, "resident.op." + name)
            setattr(op, name, staticmethod(typed))
    # The methods of the classes whose calls are not on a hot path (a wrapper is one Python frame more).
    # Graph.replay is hot and refuses a wrong call itself.
    for cls, names in ((core.Flow, None), (core.Array, ("to_host", "to_host_async", "__dlpack__", "__dlpack_device__")),
                       (core.Graph, ("update",)), (core.Stream, None), (core.Event, None)):
        for name, f in list(vars(cls).items()):
            if type(f).__name__ == "nb_method" and (name in names if names else not name.startswith("__") or
                                                    name == "__init__"):
                typed = _typed(f, f"resident.{cls.__name__}.{name}")
                setattr(cls, name, _made_once(typed, cls) if name == "__init__" else typed)


def raw(f):
    """The compiled function behind a typed wrapper: for the package's hot internal calls, whose
    arguments it made itself (no nanobind mismatch to translate; one Python frame less per call)."""
    return getattr(f, "__wrapped_core__", f)
