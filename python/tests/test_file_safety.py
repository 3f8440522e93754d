"""Files and folders resident makes or writes for the user: the default rendezvous folder of a sharded job
is this user's alone (0700, never one another user made or a link), and the benchmarks' JSON goes
through resident's one writer, which does not write through a link."""
import pytest

import resident as rs


def test_the_default_rendezvous_folder_is_this_users_alone(tmp_path, monkeypatch):
    import os
    import stat
    run, home = tmp_path / "run", tmp_path / "home"
    run.mkdir(0o700)
    home.mkdir(0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("HOME", str(home))
    folder = rs.dist._own_folder()
    st = os.lstat(folder)
    assert folder.startswith(str(run)) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    os.chmod(folder, 0o777)  # open to others: another user could plant the file ranks read
    spare = str(home / ".cache" / "resident-rendezvous")  # so another user cannot stop this user's jobs
    assert rs.dist._own_folder() == spare and stat.S_IMODE(os.lstat(spare).st_mode) == 0o700
    os.rmdir(spare)
    os.symlink(tmp_path, spare)  # a link where the folder goes
    with pytest.raises(rs.InvalidArgument, match="RESIDENT_RENDEZVOUS"):
        rs.dist._own_folder()
    os.rmdir(folder)
    os.symlink(tmp_path, folder)
    with pytest.raises(rs.InvalidArgument, match="not a folder of this user's alone"):
        rs.dist._own_folder()


def test_the_benchmarks_json_goes_through_resident_s_one_writer(tmp_path):
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "json_out", os.path.join(os.path.dirname(__file__), "..", "..", "bench", "peers", "json_out.py"))
    json_out = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(json_out)
    assert json_out._core_writer() is not None
    json_out.write_text(str(tmp_path / "ok.json"), "{}")
    assert (tmp_path / "ok.json").read_text() == "{}"
    (tmp_path / "target").write_text("kept")
    os.symlink(tmp_path / "target", tmp_path / "link.json")
    with pytest.raises(SystemExit, match="resident does not write through links"):
        json_out.write_text(str(tmp_path / "link.json"), "{}")
    assert (tmp_path / "target").read_text() == "kept"
