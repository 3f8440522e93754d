"""resident.dist given what it cannot use: objects that only look like arrays, read-only memory,
timeouts that are not a usable number of seconds, empty shards in min and max, and device lists,
work and shard lists of the wrong kind; each a typed error, with nothing written."""
import os

import numpy as np
import pytest

import resident as rs


class LooksLikeAnArray:
    """The attributes of a resident Array, over memory nobody allocated."""
    data_ptr = 16
    size = 1 << 20
    dtype = "float32"
    device = "cpu"
    stream = 1


class LooksLikeATorchTensor:
    def data_ptr(self):
        return 16

    size = 4
    dtype = "float32"
    device = "cpu"
    stream = 1


@pytest.mark.parametrize("fake", [LooksLikeAnArray(), LooksLikeATorchTensor(), 16, None])
def test_copy_and_all_reduce_take_arrays_only_through_the_checked_path(fake):
    dst = rs.empty(1 << 20)
    with pytest.raises(rs.InvalidType, match="not an array"):
        rs.dist.copy(fake, dst)
    with pytest.raises(rs.InvalidType, match="not an array"):
        rs.dist.copy(rs.to_device(np.ones(4, np.float32)), fake)
    with rs.dist.Communicator(["cpu", "cpu"]) as c:
        good = rs.to_device(np.ones(4, np.float32))
        with pytest.raises(rs.InvalidType, match="not an array"):
            c.all_reduce([fake, good])
        np.testing.assert_array_equal(good.to_host(), np.ones(4, np.float32))
    # Another library's array goes through from_dlpack as in the other calls.
    host = np.zeros(4, np.float32)
    rs.dist.copy(rs.to_device(np.full(4, 3.0, np.float32)), host)
    np.testing.assert_array_equal(host, np.full(4, 3.0, np.float32))


def test_copy_and_all_reduce_refuse_read_only_memory_and_write_nothing():
    frozen = b"\x00" * 16
    ro = rs.from_dlpack(np.frombuffer(frozen, np.float32))
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        rs.dist.copy(rs.to_device(np.full(4, 2.0, np.float32)), ro)
    with rs.dist.Communicator(["cpu", "cpu"]) as c:
        with pytest.raises(rs.InvalidArgument, match="read-only"):
            c.all_reduce([ro, rs.to_device(np.full(4, 2.0, np.float32))])
    assert frozen == b"\x00" * 16
    # Reading read-only memory stays allowed.
    out = rs.empty(4)
    rs.dist.copy(ro, out)
    np.testing.assert_array_equal(out.to_host(), np.zeros(4, np.float32))


@pytest.mark.parametrize("timeout", [float("inf"), 1e16, 1e9 + 1])
def test_from_launcher_refuses_timeouts_too_long_to_hold(timeout, monkeypatch):
    for k in ("WORLD_SIZE", "RANK", "RESIDENT_WORLD_SIZE", "RESIDENT_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(rs.InvalidArgument, match="at most 1e9 seconds"):
        rs.dist.Communicator.from_launcher(timeout=timeout)
    with rs.dist.Communicator.from_launcher(timeout=1e9) as c:
        assert c.timeout == 1e9


@pytest.mark.parametrize("timeout", ["1", True, None, [1]])
def test_from_launcher_refuses_timeouts_that_are_not_numbers(timeout, monkeypatch):
    for k in ("WORLD_SIZE", "RANK", "RESIDENT_WORLD_SIZE", "RESIDENT_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(rs.InvalidType, match="not a number"):
        rs.dist.Communicator.from_launcher(timeout=timeout)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_min_and_max_skip_empty_shards(dtype):
    x = rs.dist.shard(np.array([5], dtype), ["cpu"] * 3)
    assert [c for _, c in x.extents] == [1, 0, 0]
    assert rs.dist.min(x) == 5 and rs.dist.max(x) == 5
    y = rs.dist.shard(np.array([4, -2, 7, 1], dtype), ["cpu"] * 6)
    assert rs.dist.min(y) == -2 and rs.dist.max(y) == 7 and rs.dist.sum(y) == 10
    empty = rs.dist.shard(np.array([], dtype), ["cpu"] * 3)
    with pytest.raises(rs.InvalidArgument) as whole:
        rs.min(rs.to_device(np.array([], dtype)))
    for reduce in (rs.dist.min, rs.dist.max):
        with pytest.raises(type(whole.value), match="empty"):
            reduce(empty)
    assert rs.dist.sum(empty) == 0


@pytest.mark.parametrize("devices", ["cpu", b"cpu", True, np.True_, None, 2.5, object()])
def test_shard_refuses_devices_that_are_no_list_of_devices(devices):
    with pytest.raises(rs.InvalidType, match="list of devices"):
        rs.dist.shard(np.ones(4, np.float32), devices)


def test_shard_refuses_more_devices_than_there_are_and_work_or_shards_of_the_wrong_kind():
    with pytest.raises(rs.InvalidArgument, match="give at most"):
        rs.dist.shard(np.ones(4, np.float32), 2 ** 40)
    x = rs.dist.shard(np.ones(4, np.float32), ["cpu", "cpu"])
    for work in (3, None, "sum"):
        with pytest.raises(rs.InvalidType, match="work"):
            rs.dist.apply(work, x)
    for arrays in (None, 3, "ab"):
        with pytest.raises(rs.InvalidType, match="list of arrays"):
            rs.dist.from_shards(arrays)


def test_shard_still_takes_device_lists_of_any_iterable_and_counts():
    for devices in (("cpu", "cpu"), np.array(["cpu", "cpu"]), iter(["cpu", "cpu"])):
        x = rs.dist.shard(np.arange(5, dtype=np.float32), devices)
        assert len(x.shards) == 2 and rs.dist.sum(x) == 10
    for count in (1, np.int64(1)):
        assert len(rs.dist.shard(np.arange(5, dtype=np.float32), count).shards) == 1


def test_float32_sums_join_their_parts_unrounded():
    # Parts of 2^24 + 1 (no float32) and -2^24 + 1: rounded to float32 each, the whole would be 1 off
    # per pair; joined in double, exact, as NumPy's sum of the whole is.
    y = np.zeros(16, np.float32)
    y[0], y[4], y[8], y[12] = 2**24, 1, -2**24, 1
    assert float(y.sum()) == 2.0
    assert rs.stream(rs.op.add(0), y, chunk=8, reduce="sum", progress=False) == 2.0
    assert rs.stream(lambda v: v, y, chunk=8, reduce="sum", progress=False) == 2.0
    x = rs.dist.shard(y, ["cpu", "cpu"])
    for work in (None, rs.op.add(0), lambda v: v, rs.stage(lambda v: v)):
        assert rs.dist.sum(x, work) == 2.0, work


def test_apply_refuses_work_whose_result_it_would_drop():
    x = rs.dist.shard(np.array([0.5, 1, 2], np.float32), ["cpu", "cpu"])
    with pytest.raises(rs.InvalidType, match="rs.op.sin"):
        rs.dist.apply(np.sin, x)
    with pytest.raises(rs.InvalidType, match="rs.op.sin"):
        rs.dist.apply(np.sin, x, out=rs.dist.shard(3, ["cpu", "cpu"]))

    class Copies:  # a callable that makes a new array (no out=): its result would be lost
        def __call__(self, a):
            return np.asarray(a) * 2
    with pytest.raises(rs.InvalidArgument, match="rather than writing"):
        rs.dist.apply(Copies(), x)
    np.testing.assert_array_equal(x.to_host(), [0.5, 1, 2])

    class Views:  # writes in place and returns another library's view of the same memory: kept
        def __call__(self, a):
            v = np.from_dlpack(a)
            v *= 2
            return v
    rs.dist.apply(Views(), x)
    np.testing.assert_array_equal(x.to_host(), [1, 2, 4])


def test_dist_arguments_of_the_wrong_kind_are_typed():
    with pytest.raises(rs.InvalidType, match="Communicator"):
        rs.dist.from_shards([np.ones(5, np.float32)], comm="x")
    c = rs.dist.Communicator(["cpu", "cpu"])
    a, b = (rs.to_device(np.ones(2, np.float32), "cpu") for _ in range(2))  # on the ranks' devices
    with pytest.raises(rs.InvalidType, match="'sum'"):
        c.all_reduce([a, b], None)
    c.all_reduce([a, b], "sum")
    np.testing.assert_array_equal(a.to_host(), [2, 2])
    x = rs.dist.shard(np.ones(4, np.float32), ["cpu", "cpu"])
    for op in (rs.dist.sum, rs.dist.min, rs.dist.max):
        with pytest.raises(rs.InvalidArgument, match="generator"):
            op(x, rs.jit.uniform(3) | rs.stage(lambda v: v))
        with pytest.raises(rs.InvalidArgument, match="reduction already"):
            op(x, rs.stage(lambda v: v) | rs.jit.sum())


@pytest.mark.parametrize("world, rank, named", [("x", "0", "WORLD_SIZE (torchrun's) is 'x'"),
                                               ("2", "y", "RANK (torchrun's)")])
def test_torchruns_variables_are_named_as_the_user_set_them(world, rank, named, monkeypatch):
    for k in ("RESIDENT_WORLD_SIZE", "RESIDENT_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setenv("RANK", rank)
    with pytest.raises(rs.InvalidArgument) as e:
        rs.dist.Communicator.from_launcher(timeout=5)
    assert named in str(e.value) and "RESIDENT_" not in str(e.value)


def test_a_resident_variable_the_user_set_survives_torchruns_translation(monkeypatch):
    for k in ("RESIDENT_WORLD_SIZE", "RESIDENT_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "x")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("RESIDENT_LOCAL_RANK", "7")
    with pytest.raises(rs.InvalidArgument, match="WORLD_SIZE \\(torchrun's\\)"):
        rs.dist.Communicator.from_launcher(timeout=5)
    assert os.environ["RESIDENT_LOCAL_RANK"] == "7"
    assert "RESIDENT_WORLD_SIZE" not in os.environ
