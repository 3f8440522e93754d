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


_NUMBA_CONFIG = ".numba_config.yaml"
_NOWHERE = "/dev/null/" + _NUMBA_CONFIG  # a path that names no file, ever
_compat_missing = object()


def _ours_alone(path):
    """Whether path is a regular file of this user's that no one else can change or swap: not writable by
    group or others, in a folder that is this user's or root's and that others cannot write (or sticky,
    where they cannot rename this user's file)."""
    import os
    import stat
    try:
        st, folder = os.lstat(path), os.stat(os.path.dirname(path) or ".")
    except OSError:
        return False
    me = os.geteuid()
    return (stat.S_ISREG(st.st_mode) and st.st_uid == me and not st.st_mode & 0o022 and
            folder.st_uid in (me, 0) and (not folder.st_mode & 0o022 or bool(folder.st_mode & stat.S_ISVTX)))


_numba_config_pinned = False


def guard_numba_config():
    """Numba reads ``.numba_config.yaml`` from the current folder at its import and again at every compile:
    its settings choose the CUDA driver library Numba loads and whether bounds are checked. In a folder
    another user can write, that file is theirs to plant. Numba reads it here only where it is this user's
    own (``_ours_alone``), and then only that file, by its absolute path, for the rest of the process (a
    later change of folder changes nothing); elsewhere it is ignored with a warning. Call before Numba is
    imported, with its import lock held; idempotent."""
    global _numba_config_pinned
    if _numba_config_pinned:
        return
    import os
    import sys
    import warnings
    try:
        path = os.path.join(os.getcwd(), _NUMBA_CONFIG)
    except OSError:  # the current folder was removed: there is no file to read
        path = _NOWHERE
    present = os.path.lexists(path)
    trusted = present and _ours_alone(path)
    if present and not trusted:
        warnings.warn(f"resident: Numba's settings file {path} is ignored: it is not a regular file of this "
                      "user's that no one else can change (docs/security.md)", RuntimeWarning, stacklevel=3)
    if "numba.core.config" not in sys.modules and present and not trusted:
        # Numba's import reads the file when it can import yaml: it cannot, for that import.
        saved = sys.modules.get("yaml", _compat_missing)
        sys.modules["yaml"] = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Numba's "YAML parsing capabilities appear to be missing"
                import numba.core.config  # noqa: F401
        except ImportError:
            pass  # no Numba: the compile says so
        finally:
            if saved is _compat_missing:
                sys.modules.pop("yaml", None)
            else:
                sys.modules["yaml"] = saved
        config = sys.modules.get("numba.core.config")
        if config is not None:
            try:
                import yaml
                config.yaml, config._HAVE_YAML = yaml, True
            except ImportError:
                pass
    try:
        import numba.core.config as config
    except ImportError:
        return
    config._config_fname = path if trusted else _NOWHERE
    _numba_config_pinned = True

