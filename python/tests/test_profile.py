"""resident.profile as an object: the rows of the calls made inside the block, under this file's lines,
with their counts and rates; advice; JSON; a table; nothing collected outside the block. Per backend.
A profile collecting already is not entered again, a started one is not copied, and JSON paths are
checked before anything is written."""
import copy
import json
import os

import numpy as np
import pytest

import resident as rs
from resident.profile import Advice, Row
from _support import GPU, needs_numba

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


def rows_of(p):
    """The rows whose site is this file's, by line (several devices' rows of a line in a list)."""
    here = __file__.rsplit("/", 1)[-1]
    mine = {}
    for r in p.rows:
        if r.file.rsplit("/", 1)[-1] == here:
            mine.setdefault(r.line, []).append(r)
    return mine


# Reductions that launch from Python, as builders of (callee, args, kwargs); each is one call.
REDUCING = [
    pytest.param(lambda x: (rs.program([rs.op.add(1)]) | rs.jit.sum(), (x,), {}), id="program|sum"),
    pytest.param(lambda x: (rs.op.mul(2) | rs.jit.max(), (x,), {}), id="op|max"),
    pytest.param(lambda x: (rs.program([rs.op.add(1)]).sum, (x,), {}), id="program.sum"),
    pytest.param(lambda x: (rs.jit.uniform(seed=1) | rs.jit.sum(), (), {"n": 1000, "device": x.device}),
                 id="generator|sum"),
    pytest.param(lambda x: (rs.stage(lambda v: v + 1) | rs.jit.sum(), (x,), {}), id="stage|sum", marks=needs_numba),
    pytest.param(lambda x: (rs.stage(lambda v: v * 2) | rs.jit.min(), (x,), {}), id="stage|min", marks=needs_numba),
    pytest.param(lambda x: (rs.fuse(lambda v: v - 1) | rs.jit.sum(), (x,), {}), id="fuse|sum", marks=needs_numba),
    pytest.param(lambda x: (rs.stage(lambda v: v + 1) | rs.jit.reduce(lambda a, b: a + b, 0.0), (x,), {}),
                 id="stage|reduce", marks=needs_numba),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("build", REDUCING)
def test_a_reducing_chain_is_one_call_at_the_users_line(device, build):
    x = rs.to_device(np.arange(1000, dtype=np.float32), device)
    callee, args, kwargs = build(x)
    callee(*args, **kwargs)  # warm: compiled outside the block
    with rs.profile() as p:
        callee(*args, **kwargs)  # mark:reduce
    mine = rows_of(p)
    assert sorted(mine) == [line_of("# mark:reduce")], [(r.site, r.calls, r.kernels) for r in p.rows]
    (r,) = mine[line_of("# mark:reduce")]
    assert r.calls == 1 and r.kernels >= 1 and r.device == device
    assert sum(r.kernels for r in p.rows) == r.kernels  # nothing left "(outside any call)"


DIST_WORK = [pytest.param(None, id="none"), pytest.param(rs.program([rs.op.add(1)]), id="program"),
             pytest.param("stage", id="stage", marks=needs_numba)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("op", ["sum", "min", "max"])
@pytest.mark.parametrize("work", DIST_WORK)
def test_sharded_reductions_are_the_calling_line_s_not_the_worker_threads(device, shards, op, work):
    if work == "stage":
        work = rs.stage(lambda v: v + 1)
    x = rs.dist.shard(np.arange(1000, dtype=np.float32), [device] * shards)
    getattr(rs.dist, op)(x, work)  # warm
    rs.dist._each(lambda s: None, list(x.shards))  # the pool exists (a reduction without work uses none)
    with rs.profile() as p:
        getattr(rs.dist, op)(x, work)  # mark:dist
        if shards > 1:  # the pin ends with the call: a pool thread's later call is its own line's
            rs.dist._POOL.submit(lambda: rs.sum(x.shards[0])).result()  # mark:pooled
    mine = rows_of(p)
    # Nothing outside any call: without work the shards' one-value partials are made within their calls.
    assert all(r.file.rsplit("/", 1)[-1] == __file__.rsplit("/", 1)[-1] for r in p.rows), \
        [(r.site, r.calls, r.allocations) for r in p.rows]
    at = mine[line_of("# mark:dist")]
    # A reduction per shard; without work, each partial read by a transfer of its own.
    assert sum(r.calls for r in at if not r.transfer) == shards and sum(r.kernels for r in at) >= shards
    if shards > 1:
        assert sum(r.calls for r in mine[line_of("# mark:pooled")]) == 1


def test_to_json_writes_under_a_path_of_bytes_that_are_not_utf8(tmp_path):
    with rs.profile() as p:
        rs.to_device(np.ones(8, np.float32), "cpu")
    folder = os.fsencode(tmp_path)
    p.to_json(folder + b"/\xff\xfe.json")
    p.to_json(os.fsdecode(folder) + "/\udcff.json")  # the str Python decodes the bytes b"\xff" to
    for name in (b"\xff\xfe.json", b"\xff.json"):
        with open(folder + b"/" + name, "rb") as f:
            assert json.loads(f.read())["schema"] == "resident.profile"
    # The writer's rules hold for such names: no link followed, nothing written into a missing folder.
    os.symlink(folder + b"/\xff.json", folder + b"/\xfelink.json")
    with pytest.raises(rs.InvalidArgument, match="link"):
        p.to_json(folder + b"/\xfelink.json")
    assert os.path.islink(folder + b"/\xfelink.json")
    with pytest.raises(rs.InvalidArgument, match="missing"):
        p.to_json(folder + b"/missing/\xff.json")
    with pytest.raises(rs.InvalidArgument):
        p.to_json("\ud800.json")  # a lone surrogate no byte stands for
    with pytest.raises(rs.InvalidType):
        p.to_json(3)


@pytest.mark.parametrize("args,kwargs", [((1,), {}), ((), {"device": "cpu"})])
def test_profile_takes_no_arguments(args, kwargs):
    with pytest.raises(rs.InvalidType, match=r"profile\(\) takes no arguments"):
        rs.profile(*args, **kwargs)


def test_a_profile_open_already_is_not_entered_again_and_keeps_its_rows():
    q, x = rs.profile(), np.ones(8, np.float32)
    with q:
        rs.op.sqrt()(x)
        with pytest.raises(rs.InvalidArgument, match="collecting already"):
            with q:
                pass
        rs.op.neg()(x)
    assert sum(r.calls for r in q.rows) == 2  # both calls of the block
    with pytest.raises(rs.InvalidArgument, match="without __enter__"):
        rs.profile().__exit__(None, None, None)


def test_copy_of_a_started_profile_is_refused_and_of_an_unstarted_one_is_fresh():
    x = np.ones(8)
    with rs.profile() as p:
        with pytest.raises(rs.InvalidType, match="not pickled or copied"):
            copy.copy(p)
        rs.sum(x)
    assert len(p.rows) == 1  # p's collection ran to its own end
    with pytest.raises(rs.InvalidType):
        copy.copy(p)
    q = copy.copy(rs.profile())
    assert isinstance(q, rs.profile) and repr(q) == "resident.profile(not started)"
    with q:
        rs.sum(x)
    assert len(q.rows) == 1


def test_profile_paths_progress_and_chunk_are_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with rs.profile() as p:
        rs.sum(np.ones(4, np.float32))
    for bad in (None, 3, 1.5):
        with pytest.raises(rs.InvalidType):
            p.to_json(bad)
    with pytest.raises(rs.InvalidArgument, match="NUL"):
        p.to_json(str(tmp_path / "a\0b.json"))
    assert sorted(os.listdir(tmp_path)) == []  # nothing written under a made-up name
    p.to_json(os.fsencode(tmp_path / "b.json"))
    p.to_json(tmp_path / "c.json")
    assert sorted(os.listdir(tmp_path)) == ["b.json", "c.json"]

    x = np.ones(64, np.float32)
    for bad in ("yes", 3):
        with pytest.raises(rs.InvalidType, match="progress"):
            rs.stream(rs.op.mul(2.0), x, progress=bad)
    np.testing.assert_array_equal(rs.stream(rs.op.mul(2.0), x, chunk=np.int64(3), depth=np.int32(2)), 2 * x)
    with pytest.raises(rs.InvalidArgument, match="chunk"):
        rs.stream(rs.op.mul(2.0), x, chunk=np.bool_(True))


@pytest.mark.parametrize("device", DEVICES)
def test_a_product_is_one_call_at_the_users_line_with_its_bytes(device):
    a = rs.to_device(np.ones((16, 8), np.float32), device)
    b = rs.to_device(np.ones((8, 4), np.float32), device)
    c = rs.empty((16, 4), "float32", device)
    rs.matmul(a, b, c)  # warm
    with rs.profile() as p:
        rs.matmul(a, b, c, beta=1.0)  # mark:matmul
    (product,) = rows_of(p)[line_of("# mark:matmul")]
    assert product.name == "matmul" and product.calls == 1 and product.kernels >= 1
    assert product.bytes_read == (16 * 8 + 8 * 4 + 16 * 4) * 4 and product.bytes_written == 16 * 4 * 4


def test_an_exception_inside_a_profile_block_propagates():
    with pytest.raises(ValueError, match="inside"):
        with rs.profile():
            raise ValueError("inside the block")
