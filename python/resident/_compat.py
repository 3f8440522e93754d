"""What the package needs from its surroundings: NumPy as numba-cuda expects it, only while resident calls
into numba-cuda (its compiler, its fp16 module, still calls ``np.row_stack``, which NumPy removed after
deprecating it in 2.0; it was an alias of ``vstack``; outside those calls NumPy is left as the user has
it); whether a folder or file is this user's alone; the ranks' rendezvous folder."""
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


def no_one_else_can_swap(folder):
    """Whether no user but this one and root can rename what lies in folder: resident's one judge of
    that (untrusted_path, src/io/files.cpp), which the C++ private folders and kernel cache use."""
    from . import _core
    return _core._untrusted_path(folder) == ""


def _ours_alone(path):
    """Whether path is a regular file of this user's that no one else can change, in a folder whose
    whole path no other user can swap."""
    import os
    import stat
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022 and
            no_one_else_can_swap(os.path.dirname(path)))


def _no_one_else_can_add(folder):
    """Whether no user but this one and root can make a file in folder (a sticky folder such as /tmp
    lets anyone add one, though not swap this user's), and none can swap the folder itself."""
    import os
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return st.st_uid in (0, os.geteuid()) and not st.st_mode & 0o022 and no_one_else_can_swap(folder)


def _user_stacklevel():
    """The stacklevel of the first frame outside resident's package, for a warning about the user's call."""
    import os
    import sys
    here, level = os.path.dirname(os.path.abspath(__file__)), 1
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == here:
        f, level = f.f_back, level + 1
    return level


_numba_config_pinned = False


def guard_numba_config():
    """Numba reads ``.numba_config.yaml`` from the current folder at its import and again at every compile:
    its settings choose the CUDA driver library Numba loads and whether bounds are checked. Where another
    user could write that file (or plant it later: a folder on the way they can write), it is theirs.
    Numba reads it here only where it is this user's own (``_ours_alone``), and then only that file, by
    its absolute path, for the rest of the process (a later change of folder changes nothing); a file
    elsewhere is ignored with a warning, and where one could still appear Numba's first import runs
    without yaml in this thread. Call before Numba is
    imported, with its import lock held; idempotent."""
    global _numba_config_pinned
    if _numba_config_pinned:
        return
    import os
    import sys
    import warnings
    try:
        folder = os.getcwd()
    except OSError:  # the current folder was removed: there is no file to read
        folder = None
    path = os.path.join(folder, _NUMBA_CONFIG) if folder else _NOWHERE
    trusted = folder is not None and _ours_alone(path)
    if folder is not None and os.path.lexists(path) and not trusted:
        warnings.warn(f"resident: Numba's settings file {path} is ignored: it is not a regular file of this "
                      "user's that no one else can change (docs/security.md)", RuntimeWarning,
                      stacklevel=_user_stacklevel())
    # Numba says so too, misleadingly ("YAML parsing capabilities appear to be missing"): once is ours.
    warnings.filterwarnings("ignore", message="A Numba config file is found but YAML", category=UserWarning)
    if "numba.core.config" not in sys.modules and not trusted and not (folder and _no_one_else_can_add(folder)
                                                                        and not os.path.lexists(path)):
        # Numba's import reads the file when it can import yaml: it cannot, in this thread, for that
        # import. The import statement asks builtins.__import__, so other threads still import yaml.
        import builtins
        import threading
        real_import, me = builtins.__import__, threading.get_ident()

        def without_yaml(name, *args, **kwargs):
            if name == "yaml" and threading.get_ident() == me:
                raise ImportError("resident: Numba's settings file is not read (docs/security.md)")
            return real_import(name, *args, **kwargs)

        builtins.__import__ = without_yaml
        try:
            import numba.core.config  # noqa: F401
        except ImportError:
            pass  # no Numba: the compile says so
        finally:
            if builtins.__import__ is without_yaml:
                builtins.__import__ = real_import
            else:  # another wrapper went on top meanwhile: ours stays beneath it and passes every name on
                me = None
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


def rendezvous_folder():
    """A folder of this user's alone for the ranks' rendezvous on one host: $XDG_RUNTIME_DIR, else
    resident-<uid> in the temporary folder, made 0700 and checked (another user's, or a link, is refused:
    in a shared folder they could plant the file other ranks read). Where another user made that name
    first, ~/.cache/resident-rendezvous instead (so they cannot stop this user's jobs)."""
    import os
    import stat
    import tempfile
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = runtime if runtime and os.path.isabs(runtime) else tempfile.gettempdir()
    if not no_one_else_can_swap(base):  # as resident's private folders: /tmp instead (docs/security.md)
        base = "/tmp"
    tried, home = [], os.path.expanduser("~")
    folders = [os.path.join(os.path.realpath(base), f"resident-{os.geteuid()}")]
    if os.path.isabs(home):  # no HOME and no passwd entry: "~" as it is, which names no folder
        folders.append(os.path.join(home, ".cache", "resident-rendezvous"))
    for folder in folders:
        try:
            if folder.startswith(home + os.sep):
                os.makedirs(os.path.dirname(folder), 0o700, exist_ok=True)
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            tried.append(f"'{folder}': {e.strerror}")
            continue
        st = os.lstat(folder)
        if (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
                and no_one_else_can_swap(os.path.dirname(folder))):
            return folder
        tried.append(f"'{folder}' is not a folder of this user's alone (another user's, a link, or open to others)")
    from . import InvalidArgument  # made after this module is imported
    raise InvalidArgument("resident.dist: no folder of this user's alone for the rendezvous (" + "; ".join(tried) +
                          "); set RESIDENT_RENDEZVOUS to a fresh file path in one")
