"""How a run-time chain reads its arguments: the element type of any library's array, DLPack capsules
(taken once, as resident.from_dlpack takes them) and the object a call returns (the one it was given)."""
from . import _core

_DTYPES = ("float32", "float64", "int32", "uint32", "int64", "uint64")

_DTYPE_NAMES = {}  # a library's dtype object -> its name, so a call does not format it again


def _dtype_said(x):
    """The dtype name an array of any library says (None where it has no dtype, or one whose own code
    raises: the array is then read as the core takes it), formatted once per dtype object."""
    try:
        dt = getattr(x, "dtype", None)
    except Exception:  # noqa: BLE001
        dt = None
    try:
        return _DTYPE_NAMES[dt]
    except (KeyError, TypeError):
        pass
    name = str(dt).replace("torch.", "") if dt is not None else None
    try:
        _DTYPE_NAMES[dt] = name
    except TypeError:  # an unhashable dtype object: formatted each time
        pass
    return name


def _dtype_name(x):
    """The dtype name of an array of any library (resident, NumPy, CuPy, PyTorch), one resident computes on."""
    name = _dtype_said(x)
    if name not in _DTYPES:
        if type(x).__name__ != "PyCapsule":  # a capsule stays untaken
            _core.from_dlpack(x)  # what resident cannot take: the core's typed error, as the fast path raises
        raise _core_error("InvalidType", f"resident.jit: arrays of {name} are not supported; use one of {_DTYPES}")
    return name


def _core_error(kind, message):
    import resident
    return getattr(resident, kind)(message)


def _bare(x):
    """A DLPack capsule, or an object with no dtype to read that speaks DLPack, the buffer protocol
    (memoryview, array.array) or the array interface: taken as the core takes them."""
    if type(x).__name__ == "PyCapsule":
        return True
    if x is None or _has_dtype(x):
        return False
    return _speaks(x, "__dlpack__") or _speaks(x, "__array_interface__") or _has_buffer(x)


def _speaks(x, name):
    """Whether x has the protocol's attribute; one whose own code raises counts (the core names what it raised)."""
    try:
        getattr(x, name)
        return True
    except AttributeError:
        return False
    except Exception:  # noqa: BLE001
        return True


def _has_buffer(x):
    """Whether x exports the buffer protocol."""
    try:
        memoryview(x).release()
        return True
    except Exception:  # noqa: BLE001 (TypeError, or the exporter's own error)
        return False


def _has_dtype(x):
    """Whether x has a dtype it can say (one whose own code raises counts as none: DLPack says it)."""
    try:
        getattr(x, "dtype")
        return True
    except Exception:  # noqa: BLE001
        return False


def _first(inputs, out):
    """The array a map chain returns: out, else its first input."""
    return out if out is not None else inputs[0] if inputs else None


def _as_given(result, given, taken):
    """What a chain returns: the object it was given where the result is that array (the same object on
    every path), except for a capsule, which is spent: the array taken from it."""
    if result is taken and given is not None and type(given).__name__ != "PyCapsule":
        return given
    return result


def _capsules_taken(inputs, out):
    """DLPack capsules and objects that speak DLPack alone among the arguments as resident arrays (views
    of the same memory): a capsule is taken once, as resident.from_dlpack takes it."""
    if not any(_bare(x) for x in inputs + (out,)):
        return inputs, out
    inputs = tuple(_core._taken(x, "a run-time chain") if _bare(x) else x for x in inputs)
    return inputs, (_core._taken(out, "a run-time chain") if _bare(out) else out)
