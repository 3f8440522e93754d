"""Misuse found by a ninth sweep: a sharded call refused one shard's partly overlapping output after the
shards before it were written; a flow stage or a captured callable that cannot be called bare failed
only at run, after earlier stages ran; a strided memoryview was refused as if its element type were
wrong; generator chains composed wrongly were refused only when called, or with a message about
something else; a constant past a double's range, a negative stage number and a non-integer chunk came
out as the wrong error."""
import numpy as np
import pytest

import resident as rs
from _support import GPU

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])


@pytest.mark.parametrize("how", ["apply", "op"])
def test_an_out_shard_partly_over_its_own_input_is_refused_before_any_shard_is_written(how):
    a0 = np.arange(5.0)
    big = np.arange(10.0, 16.0)
    before = big.copy()
    x = rs.dist.from_shards([a0, big[0:5]])
    o0 = np.full(5, 7.0)
    out = rs.dist.from_shards([o0, big[1:6]])  # out's shard 1 is x's shard 1 moved by one element
    with pytest.raises(rs.InvalidArgument, match="shard 1 overlaps x's shard 1"):
        rs.dist.apply(rs.op.neg(), x, out) if how == "apply" else rs.op.neg()(x, out=out)
    np.testing.assert_array_equal(o0, np.full(5, 7.0))
    np.testing.assert_array_equal(big, before)
    rs.dist.apply(rs.op.neg(), x, x)  # exactly in place: taken
    np.testing.assert_array_equal(big[0:5], -before[0:5])


@pytest.mark.parametrize("device", DEVICES)
def test_work_that_cannot_be_called_bare_is_refused_when_given(device):
    x = rs.to_device(np.zeros(4), device=device)
    f = rs.Flow(device=device)
    f.add("fill", lambda: rs.op.add(1.0)(x))
    with pytest.raises(rs.InvalidType, match="stage 'bad' is called with no arguments.*'a'"):
        f.add("bad", lambda a: None, after=[0])
    f.run()  # the flow as it was: one stage
    np.testing.assert_array_equal(x.to_host(), np.ones(4))
    with pytest.raises(rs.InvalidType, match="capture: the work is called with no arguments"):
        rs.capture(lambda a, b: None, device=device)
    with pytest.raises(rs.InvalidType, match="not callable"):
        f.add("none", 3)
    f.add("defaults", lambda a=1, *rest, **kw: None)  # callable bare: taken
    f.add("builtin", print)  # no signature to read: taken as it is


def test_stage_numbers_after_that_name_no_stage_are_flow_errors():
    f = rs.Flow()
    f.add("a", lambda: None)
    for bad in (-1, 2**80, 5):
        with pytest.raises(rs.FlowError, match=f"after stage {bad}, which does not exist"):
            f.add("b", lambda: None, after=[bad])
    for bad, says in ((["a"], "holds a str"), ([True], "holds a bool"), (0, "must be a list"), ("0", "must be a list")):
        with pytest.raises(rs.InvalidType, match=says):
            f.add("b", lambda: None, after=bad)
    assert f.add("b", lambda: None, after=(0, np.int64(0))) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_strided_and_fortran_memoryviews_are_copied_as_numpy_views_are(device):
    a = np.arange(12.0)
    np.testing.assert_array_equal(rs.to_device(memoryview(a)[::3], device=device).to_host(), a[::3])
    f = np.asfortranarray(a.reshape(3, 4))
    np.testing.assert_array_equal(rs.to_device(memoryview(f), device=device).to_host(), f)
    with pytest.raises(rs.InvalidType, match="not supported|buffer format"):  # the element type named
        rs.to_device(memoryview(b"abc").cast("c"), device=device)


def test_generator_chains_composed_wrongly_are_refused_where_composed():
    s = rs.jit.map("float f(float v) { return v + 1.0f; }")
    with pytest.raises(rs.InvalidArgument, match="a generator .* starts a chain; it cannot follow uniform"):
        rs.jit.uniform(1) | rs.jit.uniform(2)
    with pytest.raises(rs.InvalidArgument, match="starts a chain; it cannot follow"):
        s | rs.jit.normal(1)
    with pytest.raises(rs.InvalidArgument, match="sum ends in a reduction; nothing can follow it"):
        rs.jit.sum() | rs.jit.sum()
    with pytest.raises(rs.InvalidArgument, match="ends in a reduction"):
        rs.jit.sum() | s
    with pytest.raises(rs.InvalidArgument, match="n=-1 is negative"):
        (rs.jit.uniform(1) | rs.jit.sum())(n=-1)
    assert (rs.jit.uniform(1, low=1.0, high=1.0 + 2**-20) | rs.jit.sum())(n=4) == pytest.approx(4.0, rel=1e-5)


def test_values_out_of_range_and_wrong_types_get_the_right_error():
    with pytest.raises(rs.InvalidArgument, match="beyond the range of every number"):
        rs.op.add(10**400)
    assert rs.op.add(2**70) is not None  # a big integer a double holds: taken
    with pytest.raises(rs.InvalidType, match="not a function; a Python function is a stage"):
        rs.jit.map(lambda v: v + 1)
    for bad in (1.5, True, "3"):
        with pytest.raises(rs.InvalidType, match="chunk="):
            rs.stream(rs.op.neg(), np.ones(3), chunk=bad)
    with pytest.raises(rs.InvalidType, match="depth="):
        rs.stream(rs.op.neg(), np.ones(3), depth=2.0)


def test_an_after_list_or_a_signature_whose_own_code_raises():
    class Bad(list):
        def __iter__(self):
            raise ValueError("no items today")

    class Sig:
        @property
        def __signature__(self):
            raise RuntimeError("no signature today")

        def __call__(self):
            return None

    f = rs.Flow()
    f.add("a", lambda: None)
    with pytest.raises(rs.InvalidType, match="could not be read.*no items today"):
        f.add("b", lambda: None, after=Bad([0]))
    assert f.add("c", Sig()) == 1  # no signature to read: taken as it is, called bare
    f.run()


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
