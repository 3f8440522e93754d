"""Trust boundaries of the Python package (docs/security.md): what Numba reads on resident's behalf."""
import importlib.util
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")


def _run_in(folder, mode, script):
    """script in a fresh Python whose current folder is `folder` (made with `mode`), no NUMBA_ settings."""
    folder.mkdir()
    os.chmod(folder, mode)
    r = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")})
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout

# A yaml stand-in (PyYAML may be absent): Numba applies what it returns as its settings.
_STAGE = r'''
import sys, types, warnings
y = types.ModuleType("yaml"); y.safe_load = lambda f: {"debuginfo": 1}; sys.modules["yaml"] = y
import numpy as np, resident as rs
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    x = rs.to_device(np.arange(4, dtype=np.float32), device="cpu")
    got = rs.stage(lambda v: v + 1.0)(x).to_host()
import numba.core.config as c
print("values", got.tolist())
print("debuginfo", c.DEBUGINFO_DEFAULT)
print("ignored", any("is ignored" in str(i.message) for i in w))
'''


@pytest.mark.parametrize("mode, read", [(0o666, False), (0o620, False), (0o600, True), (0o644, True)])
def test_numba_reads_its_settings_file_only_where_no_one_else_can_change_it(tmp_path, mode, read):
    # Numba reads .numba_config.yaml from the current folder (the CUDA driver library it loads, bounds
    # checks): one that others can write is another user's to plant, and is ignored with a warning.
    f = tmp_path / ".numba_config.yaml"
    f.write_text("DEBUGINFO: 1\n")
    os.chmod(f, mode)
    os.chmod(tmp_path, 0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["RESIDENT_DEVICE"] = "cpu"
    r = subprocess.run([sys.executable, "-c", _STAGE], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "values [1.0, 2.0, 3.0, 4.0]" in r.stdout
    assert f"debuginfo {int(read)}" in r.stdout, r.stdout
    assert f"ignored {not read}" in r.stdout, r.stdout


def test_a_settings_file_in_a_folder_others_can_write_is_ignored(tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o777)  # not sticky: another user could swap this user's file
    f = d / ".numba_config.yaml"
    f.write_text("DEBUGINFO: 1\n")
    os.chmod(f, 0o600)
    r = subprocess.run([sys.executable, "-c", _STAGE], cwd=d, capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "debuginfo 0" in r.stdout and "ignored True" in r.stdout, r.stdout


_LATER = r'''
import os, sys, types
y = types.ModuleType("yaml"); y.safe_load = lambda f: {"debuginfo": 1}; sys.modules["yaml"] = y
import numpy as np, resident as rs
s = rs.stage(lambda v: v + 1.0)  # Numba imported here, its settings file judged: none yet
with open(".numba_config.yaml", "w") as f:  # one appears (another user's, in a folder they can write)
    f.write("DEBUGINFO: 1\n")
x = rs.to_device(np.arange(4, dtype=np.float32), device="cpu")
print("values", s(x).to_host().tolist())
import numba.core.config as c
print("debuginfo", c.DEBUGINFO_DEFAULT)
'''


def test_a_settings_file_that_appears_later_where_others_can_write_is_never_read(tmp_path):
    # Numba reads the file again at every compile: one planted after resident looked is not read either.
    out = _run_in(tmp_path / "shared", 0o777, _LATER)
    assert "values [1.0, 2.0, 3.0, 4.0]" in out and "debuginfo 0" in out, out


_THREADS = r'''
import sys, threading, types
y = types.ModuleType("yaml"); y.safe_load = lambda f: {"debuginfo": 1}; sys.modules["yaml"] = y
import numpy as np, resident as rs
failed, done = [], threading.Event()
def importer():
    while not done.is_set():
        try:
            import yaml  # noqa: F401
        except ImportError as e:
            failed.append(e)
t = threading.Thread(target=importer)
t.start()
x = rs.to_device(np.arange(4, dtype=np.float32), device="cpu")
got = rs.stage(lambda v: v + 1.0)(x).to_host()  # Numba's first import, its settings file not read
done.set(); t.join()
import numba.core.config as c
print("values", got.tolist(), "debuginfo", c.DEBUGINFO_DEFAULT, "failed", len(failed))
'''


def test_another_threads_import_of_yaml_works_while_numba_is_imported_without_its_settings(tmp_path):
    # Numba's first import runs without yaml where a settings file could appear: in its own thread only.
    out = _run_in(tmp_path / "shared", 0o777, _THREADS)
    assert "values [1.0, 2.0, 3.0, 4.0] debuginfo 0 failed 0" in out, out


_RACE = r'''
import sys, types
read = []
y = types.ModuleType("yaml"); y.safe_load = lambda f: read.append(f.name) or {"debuginfo": 1}; sys.modules["yaml"] = y
class Plant:  # another user adds the file just before Numba's import reads it
    def find_spec(self, name, path=None, target=None):
        if name == "numba.core.config":
            with open(".numba_config.yaml", "w") as f:
                f.write("DEBUGINFO: 1\n")
        return None
sys.meta_path.insert(0, Plant())
import numpy as np, resident as rs
x = rs.to_device(np.arange(4, dtype=np.float32), device="cpu")
print("values", rs.stage(lambda v: v + 1.0)(x).to_host().tolist())
import numba.core.config as c
print("debuginfo", c.DEBUGINFO_DEFAULT, "read", read)
'''


def test_a_settings_file_added_to_a_sticky_folder_during_numbas_import_is_not_read(tmp_path):
    # A sticky folder (/tmp) keeps this user's files from being swapped, not others from adding one.
    out = _run_in(tmp_path / "sticky", 0o1777, _RACE)
    assert "values [1.0, 2.0, 3.0, 4.0]" in out and "debuginfo 0 read []" in out, out


def _json_out():
    """bench/peers/json_out.py, loaded by path (bench/peers is no package)."""
    spec = importlib.util.spec_from_file_location(
        "json_out", Path(__file__).resolve().parents[2] / "bench" / "peers" / "json_out.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_peers_fallback_writer_sets_the_mode_on_the_open_file_and_leaves_the_umask_alone(tmp_path, monkeypatch):
    # Where resident is not importable the benchmarks write their JSON themselves: os.chmod by the temporary
    # file's name followed a link another user who may write the folder put in its place (their file then
    # took the mode), and os.umask() set and restored changed the umask for every thread meanwhile.
    json_out = _json_out()

    def called(*args, **kwargs):
        raise AssertionError("called")

    monkeypatch.setattr(json_out, "_core_writer", lambda: None)  # as where resident is not importable
    monkeypatch.setattr(os, "chmod", called)
    monkeypatch.setattr(os, "umask", called)
    out = tmp_path / "out.json"
    json_out.write_text(str(out), "{}")
    assert out.read_text() == "{}"
    assert stat.S_IMODE(out.lstat().st_mode) == 0o666 & ~json_out._umask()
    fd = os.open(out, os.O_RDONLY)
    os.fchmod(fd, 0o640)
    os.close(fd)
    json_out.write_text(str(out), "{\"a\": 1}")  # this user's file keeps its mode
    assert stat.S_IMODE(out.lstat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_the_peers_fallback_writer_takes_077_where_the_umask_cannot_be_read(tmp_path):
    json_out = _json_out()
    assert json_out._umask(str(tmp_path / "missing")) == 0o077
    (tmp_path / "status").write_text("Name:\tx\nUmask:\t0027\n")
    assert json_out._umask(str(tmp_path / "status")) == 0o027


def test_the_peers_fallback_writer_refuses_a_link_or_a_folder_at_the_path(tmp_path):
    json_out = _json_out()
    target = tmp_path / "target.json"
    target.write_text("theirs")
    (tmp_path / "link.json").symlink_to(target)
    (tmp_path / "folder.json").mkdir()
    for name in ("link.json", "folder.json"):
        with pytest.raises(SystemExit, match="not a regular file"):
            json_out._write_aside(str(tmp_path / name), "{}")
    assert target.read_text() == "theirs" and (tmp_path / "link.json").is_symlink()
