"""A compiled CPU stage that raises anyway (in code Numba compiled that the definition-time checks cannot
see) returns 0 to the loop; resident.jit._guarded turns the report of it into a StageError."""
import sys
import threading

from ._arguments import _core_error  # the one way an error of resident's is made here
from ._typed import shown as _shown


# Exceptions a compiled CPU stage raised anyway (from code Numba compiled that the definition-time checks cannot
# see): Numba's C wrapper hands them to sys.unraisablehook (its object a string naming Numba's CPU
# context or C callback, or "the print() function") and returns 0. Every such report while a call
# runs counts; the call then raises StageError instead of returning those zeros. The loop may call
# the stage on worker threads, so reports are not told apart by thread: a call that overlaps another
# one's failure raises too rather than risk returning its zeros.
_watch = threading.Lock()
_watched = {"active": 0, "count": 0, "last": None}
_previous_hook = None


def _from_numba(u):
    o = u.object
    return isinstance(o, str) and ("numba" in o.lower() or o == "the print() function")


def _unraisable(u):
    if _from_numba(u):
        with _watch:
            _watched["count"] += 1
            _watched["last"] = (u.object, u.exc_value)
            active = _watched["active"]
        if active:
            return
    (_previous_hook or sys.__unraisablehook__)(u)


def _hook():
    """Puts _unraisable in front of whatever hook is installed now (a test runner may have replaced it)."""
    global _previous_hook
    if sys.unraisablehook is not _unraisable:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable


_hook()


def _suspects(items):
    """The Python functions among a chain's items (("py", stage), ("pyred", (stage, init))) whose loop calls
    what Numba compiled on the CPU, which alone can raise there (C++ text written from a function cannot)."""
    stages = [v if k == "py" else v[0] for k, v in items if k in ("py", "pyred")]
    return [s.fn for s in stages if any(key[1][0] == "cpu" and made[1] is not None
                                        for key, made in list(s._compiled.items()))]


def _named(fn):
    code = getattr(fn, "__code__", None)
    where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
    return f"{getattr(fn, '__qualname__', fn.__name__)}{where}"


def _guarded(run, *args, stages=(), **kwargs):
    """run(*args, **kwargs), raising StageError when a compiled stage raised during it; `stages`: the
    chain's items, whose Python functions the error names (the report itself does not say which)."""
    _hook()
    with _watch:
        _watched["active"] += 1
        before = _watched["count"]
    try:
        r = run(*args, **kwargs)
    finally:
        with _watch:
            _watched["active"] -= 1
            raised = _watched["count"] > before
            where, exc = _watched["last"] or ("", None)
            if not _watched["active"]:
                _watched["last"] = None  # its traceback holds the call's frames and arrays
    if raised:
        fns = _suspects(stages)
        # None of this call's stages can raise: the report came from a call on another thread meanwhile.
        who = (f"the stage {_named(fns[0])}" if len(fns) == 1 else
               "one of the stages " + ", ".join(_named(f) for f in fns) if fns else
               f"a Python stage of a call running at the same moment on another thread (in {where})")
        e = _core_error("StageError", f"resident.jit: {who} raised {_shown(exc)}; the output holds unfinished values")
        if fns:
            e.stage = " or ".join(getattr(f, "__qualname__", f.__name__) for f in fns)
        raise e from exc
    return r
