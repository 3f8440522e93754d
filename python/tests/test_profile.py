"""resident.profile as an object: the rows of the calls made inside the block, under this file's lines,
with their counts and rates; advice; JSON; a table; nothing collected outside the block. Per backend."""
import json

import numpy as np
import pytest

import resident as rs
from resident.profile import Advice, Row
from _support import GPU

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])
SEED = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)


def line_of(marker):
    """The line of this file holding `marker` (a comment on the call)."""
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "line_of" not in text:
                return i
    raise AssertionError(marker)


@pytest.mark.parametrize("device", DEVICES)
def test_rows_count_the_calls_of_the_block_under_the_users_lines(device, tmp_path):
    host = np.random.default_rng(3).uniform(-1, 1, 1 << 16).astype(np.float32)
    x = rs.to_device(host, device)
    SEED(x)  # warm: outside the block
    with rs.profile() as p:
        for _ in range(3):
            SEED(x)  # mark:map
        rs.stream(SEED, host, chunk=1 << 14, device=device)  # mark:stream
        inside = len(p.rows)
    SEED(x)  # after the block: not counted
    rows = {(r.file.rsplit("/", 1)[-1], r.line): r for r in p.rows}
    here = __file__.rsplit("/", 1)[-1]
    m = rows[(here, line_of("# mark:map"))]
    assert m.calls == 3 and m.kernels == 3 and m.device == device
    assert m.bytes == 3 * 2 * host.nbytes and m.seconds > 0 and m.gbps > 0
    assert m.copy_fraction is None or m.copy_fraction > 0
    assert m.shape != "" and m.site.endswith(f"{here}:{line_of('# mark:map')}")
    s = rows[(here, line_of("# mark:stream"))]
    assert s.name == "stream" and s.calls == 1 and s.h2d_bytes == host.nbytes and s.d2h_bytes == host.nbytes
    assert sum(r.kernels for r in p.rows) == 3 + 4  # the maps, and one per streamed chunk
    assert inside >= 2
    assert all(isinstance(r, Row) for r in p.rows)
    for a in p.advice:
        assert isinstance(a, Advice) and a.kind and a.message and a.site
    assert p.table() == str(p)
    text = str(p)
    assert f"{here}:{line_of('# mark:map')}" in text
    path = tmp_path / "profile.json"
    p.to_json(path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == "resident.profile"
    assert json.loads(p.json()) == doc
    assert device in p.copy_rates and p.copy_rates[device] > 0


def test_a_profile_not_started_says_how_to_use_it():
    p = rs.profile()
    with pytest.raises(rs.InvalidArgument, match="with resident.profile"):
        p.rows
    assert "not started" in repr(p)


def test_an_unwritable_json_path_is_a_typed_error(tmp_path):
    with rs.profile() as p:
        rs.to_device(np.ones(8, np.float32), "cpu")
    with pytest.raises(rs.InvalidArgument):
        p.to_json(tmp_path / "missing" / "dir" / "p.json")
