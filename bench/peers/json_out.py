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
    _write_aside(path, text)


def _umask(status_path="/proc/self/status"):
    """The process's umask, read, not set: os.umask() changes it for every thread meanwhile. 0o077 (the
    owner alone) when it cannot be read."""
    try:
        with open(status_path) as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8) & 0o777
    except (OSError, ValueError, IndexError):
        pass
    return 0o077


def _write_aside(path, text):
    """The writer where resident's is not importable: written aside under a fresh name in the target's
    folder, its mode set on the open file (never by name: another user who may write the folder could put
    a link there), checked to be the file written, then renamed into place."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        sys.exit(f"cannot write '{path}': it is not a regular file (a link, FIFO, device or folder); give the "
                 "path of a regular file")
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path)[:64] + ".tmp-")
    # An existing file of this user's keeps its permission bits (never set-user-ID); else as a new file.
    mode = stat.S_IMODE(st.st_mode) & 0o777 if st is not None and st.st_uid == os.geteuid() else 0o666 & ~_umask()
    ours = True
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
            mine = os.fstat(f.fileno())
        there = os.lstat(temp)
        if (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            ours = False  # another user's file under the temporary name: not ours to rename or remove
            sys.exit(f"cannot write '{path}': the temporary file was replaced while it was written (another user "
                     "may rename files in that folder); the earlier file is kept: choose a folder only you may write")
        os.replace(temp, path)
    except BaseException:
        if ours:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
        raise
