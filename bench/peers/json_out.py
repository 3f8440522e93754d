"""The Python benchmarks' one file writer: resident's own (src/io/files.cpp) where the package is
installed, else the same rules here: only over a
regular file (a link, FIFO, device or folder at the path is refused by name), written aside under a fresh
name in the target's folder and renamed into place, so a failed write keeps the earlier file."""
import os
import stat
import sys
import tempfile


def _core_writer():
    """resident's own writer, where the package is installed (the one module every file goes through)."""
    try:
        from resident import _core
    except ImportError:  # a peers-only environment: the same rules below
        return None
    return getattr(_core, "_write_file", None)


def write_text(path, text):
    """text to stdout for "-", else into the file at path. Exits with a message when path cannot be written."""
    if path == "-":
        print(text)
        return
    writer = _core_writer()
    if writer is not None:
        why = writer(path, text.encode())
        if why:
            sys.exit(f"cannot write '{path}': {why}")
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        sys.exit(f"cannot write '{path}': it is not a regular file (a link, FIFO, device or folder); give the "
                 "path of a regular file")
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path)[:64] + ".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if st is not None and st.st_uid == os.geteuid():
            os.chmod(temp, stat.S_IMODE(st.st_mode) & 0o777)
        else:
            umask = os.umask(0o022)
            os.umask(umask)
            os.chmod(temp, 0o666 & ~umask)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
