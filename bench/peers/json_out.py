"""The Python benchmarks' one file writer, as resident's C++ one writes (src/io/files.cpp): only over a
regular file (a link, FIFO, device or folder at the path is refused by name), written aside under a fresh
name in the target's folder and renamed into place, so a failed write keeps the earlier file."""
import os
import stat
import sys
import tempfile


def write_text(path, text):
    """text to stdout for "-", else into the file at path. Exits with a message when path cannot be written."""
    if path == "-":
        print(text)
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
