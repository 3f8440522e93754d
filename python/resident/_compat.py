"""NumPy as numba-cuda expects it, only while resident calls into numba-cuda: its compiler (its fp16
module) still calls ``np.row_stack``, which NumPy removed after deprecating it in 2.0; it was an alias of
``vstack``. Outside those calls NumPy is left as the user has it."""
import contextlib as _contextlib
import threading as _threading

import numpy as _np

_lock = _threading.Lock()
_inside = 0      # callers inside numpy_for_numba_cuda(), on any thread
_added = False   # whether the alias now in NumPy is the one added here


@_contextlib.contextmanager
def numpy_for_numba_cuda():
    """Gives NumPy the ``row_stack`` alias for the block, where NumPy lacks it, and takes it away after
    the last block (of any thread) ends; a NumPy that has it, or a numba-cuda that no longer calls it,
    sees no change. Blocks may nest and run on several threads at once."""
    global _inside, _added
    with _lock:
        if _inside == 0 and not hasattr(_np, "row_stack"):
            _np.row_stack = _np.vstack
            _added = True
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _added:
                if getattr(_np, "row_stack", None) is _np.vstack:  # still ours: nothing replaced it meanwhile
                    del _np.row_stack
                _added = False
