"""resident.dist given what it cannot use: objects that only look like arrays, read-only memory,
timeouts that are not a usable number of seconds, empty shards in min and max, and device lists,
work and shard lists of the wrong kind, iterables that never end, shards of more than one dimension or
sharing memory, an out= whose shards lie over other shards' inputs, a read-only shard, work whose result
apply would get wrong; each a typed error before any shard is written. A closed communicator says so."""
import itertools
import os

import numpy as np
import pytest

import resident as rs
from _support import needs_numba


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


@pytest.mark.parametrize("make", [
    lambda x: rs.dist.shard(x, itertools.repeat("cpu")),
    lambda x: rs.dist.shard(x, itertools.count()),
    lambda x: rs.dist.from_shards(itertools.repeat(np.ones(2, np.float32))),
    lambda x: rs.dist.Communicator(itertools.repeat("cpu")),
    lambda x: rs.dist.shard(x, ["cpu"]).copy_to(itertools.repeat("cpu")),
], ids=["shard-repeat", "shard-count", "from_shards", "communicator", "copy_to"])
def test_an_iterable_that_never_ends_is_refused_not_read_forever(make):
    with pytest.raises(rs.InvalidArgument, match="never ends"):
        make(np.ones(8, np.float32))


def test_a_sharded_array_is_checked_where_it_is_made():
    a = rs.to_device(np.arange(3, dtype=np.float32), device="cpu")
    b = rs.to_device(np.arange(3, dtype=np.float32), device="cpu")
    with pytest.raises(rs.InvalidArgument, match="at least one shard"):
        rs.dist.ShardedArray([], 5)  # its to_host() gave 5 values never written
    with pytest.raises(rs.InvalidType, match="resident Arrays"):
        rs.dist.ShardedArray([1, 2], 5)
    with pytest.raises(rs.ShapeMismatch, match="shard 1"):
        rs.dist.ShardedArray([a, rs.to_device(np.ones(2, np.float32), device="cpu")], 6)
    with pytest.raises(rs.InvalidArgument, match="share memory"):
        rs.dist.ShardedArray([a, a], 6)  # each element-wise call would run twice there
    with pytest.raises(rs.InvalidType, match="size"):
        rs.dist.ShardedArray([a, b], 6.0)
    with pytest.raises(rs.InvalidArgument, match="no communicator"):
        rs.dist.ShardedArray([a], 6, 0, 2)  # rs.dist.sum of it gave one shard's sum as the whole's
    with pytest.raises(rs.InvalidType, match="comm is a str"):
        rs.dist.ShardedArray([a], 3, comm="nope")
    x = rs.dist.ShardedArray([a, b], 6)
    np.testing.assert_array_equal(x.to_host(), [0, 1, 2, 0, 1, 2])
    assert rs.dist.sum(x) == 6.0


def test_shards_of_more_than_one_dimension_are_refused_up_front():
    with pytest.raises(rs.InvalidArgument, match="one-dimensional"):
        rs.dist.from_shards([np.zeros((2, 2), np.float32), np.zeros(4, np.float32)])


def test_shard_names_itself_in_its_messages():
    with pytest.raises(rs.InvalidArgument, match="resident.dist.shard"):
        rs.dist.shard(4.0, ["cpu"])


def test_shards_sharing_memory_are_refused():
    a = np.ones(4, np.float32)
    with pytest.raises(rs.InvalidArgument, match="share memory"):
        rs.dist.from_shards([a, a])
    b = np.ones(5, np.float32)
    with pytest.raises(rs.InvalidArgument, match="share memory"):
        rs.dist.from_shards([b[0:3], b[2:4]])
    c = np.ones(6, np.float32)
    rs.dist.apply(rs.op.add(1.0), rs.dist.from_shards([c[:3], c[3:]]))
    np.testing.assert_array_equal(c, np.full(6, 2.0, np.float32))


def test_out_shards_that_are_another_shards_input_are_refused_before_any_work():
    # y's shard 0 is x's shard 1 and the reverse: shard 0's output was read by shard 1 after it was written.
    n = 1 << 12
    a = np.random.default_rng().standard_normal(2 * n)
    before = a.copy()
    x = rs.dist.from_shards([a[:n], a[n:]])
    y = rs.dist.from_shards([a[n:], a[:n]])
    with pytest.raises(rs.InvalidArgument, match="out's shard 0 is memory of x's shard 1"):
        rs.op.add(1.0)(x, out=y)
    np.testing.assert_array_equal(a, before)
    rs.op.add(1.0)(x, out=x)  # the same memory, shard for shard: in place
    np.testing.assert_allclose(a, before + 1.0, rtol=0, atol=1e-15)


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


@pytest.mark.parametrize("how", ["op", "apply", "stage", "out"])
def test_a_read_only_shard_is_refused_before_any_shard_is_written(how):
    if how == "stage":
        pytest.importorskip("numba")
    ro = np.ones(3)
    ro.setflags(write=False)
    rw = np.ones(3)
    s = rs.dist.from_shards([rw, ro])
    calls = {"op": lambda: rs.op.add(1.0)(s), "apply": lambda: rs.dist.apply(rs.op.add(1.0), s),
             "stage": lambda: rs.stage(lambda v: v + 1.0)(s),
             "out": lambda: rs.op.add(1.0)(rs.dist.from_shards([np.ones(3), np.ones(3)]), out=s)}
    with pytest.raises(rs.InvalidArgument, match="shard 1 is read-only"):
        calls[how]()
    np.testing.assert_array_equal(rw, np.ones(3))
    assert rs.dist.sum(s) == 6.0  # reading it is fine


@needs_numba
def test_apply_refuses_what_it_would_get_wrong_and_takes_a_function_of_values():
    x = rs.dist.shard(np.zeros(6, np.float32), ["cpu", "cpu"])
    with pytest.raises(rs.InvalidArgument, match="generator"):
        rs.dist.apply(rs.jit.uniform(7), x)
    with pytest.raises(rs.InvalidArgument, match="reduction"):
        rs.dist.apply(rs.stage(lambda v: v * 2) | rs.jit.sum(), x)
    rs.dist.apply(lambda v: v + 1, x)
    np.testing.assert_array_equal(x.to_host(), np.ones(6, np.float32))


def test_repr_of_a_closed_communicator_says_closed():
    c = rs.dist.Communicator(["cpu", "cpu"])
    assert not c.closed and "rank 0 of 2" in repr(c)
    c.close()
    assert c.closed and repr(c) == "resident.dist.Communicator(closed)"
    with pytest.raises(rs.InvalidArgument, match="closed"):
        c.size


def test_the_shards_and_their_layout_are_fixed_when_made():
    # A shard swapped in later (another type, another length) would skip the checks made at construction:
    # a fill of int32 shards wrote shard 0 and then refused a float32 shard 1.
    x = rs.dist.shard(np.full(10, -7, np.int32), ["cpu", "cpu"])
    for change in (lambda: x.shards.__setitem__(1, rs.empty(5, "float32", "cpu")),
                   lambda: x.shards.__delitem__(0), lambda: setattr(x, "shards", [x.shards[0]]),
                   lambda: delattr(x, "shards")):
        with pytest.raises(rs.InvalidType, match="fixed when it is made"):
            change()
    with pytest.raises((TypeError, AttributeError)):
        x.extents[0] = (0, 10)  # a tuple: Python's own refusal
    assert isinstance(x.shards, tuple) and x.extents == ((0, 5), (5, 5))
    rs.dist.random.fill_integers(x, 3, 0, 100)
    ref = rs.empty(10, "int32", "cpu")
    rs.random.fill_integers(ref, 3, 0, 100)
    np.testing.assert_array_equal(x.to_host(), ref.to_host())


def test_a_layout_is_fixed_and_a_second_init_changes_nothing():
    x = rs.dist.shard(np.arange(10, dtype=np.float32), ["cpu", "cpu"])
    for name, value in (("extents", ((0, 5), (0, 5))), ("size", 4), ("first", 1), ("shard_count", 3),
                        ("comm", 5)):
        with pytest.raises(rs.InvalidType, match="fixed when it is made"):
            setattr(x, name, value)
    s0 = x.shards[0]
    with pytest.raises(rs.InvalidType, match="fixed when it is made"):
        x.__init__([s0, s0], 10)
    np.testing.assert_array_equal(x.to_host(), np.arange(10, dtype=np.float32))
    assert x.extents == ((0, 5), (5, 5)) and x.size == 10 and rs.dist.sum(x) == 45.0


def test_to_host_refuses_an_out_over_a_shard_or_masked_before_any_download():
    big = np.arange(1000, 2000, dtype=np.float32)
    x = rs.dist.from_shards([np.arange(500, dtype=np.float32), big[:500]])
    for call in (lambda out: x.to_host(out=out), x.to_host_async):
        with pytest.raises(rs.InvalidArgument, match="overlaps shard 1"):
            call(big)
        np.testing.assert_array_equal(big, np.arange(1000, 2000, dtype=np.float32))  # shard 1 unchanged
        masked = np.ma.masked_array(np.zeros(1000, np.float32), mask=np.arange(1000) >= 500)
        with pytest.raises(rs.InvalidType, match="masked"):
            call(masked)
        assert (masked.data == 0).all()
    with pytest.warns(PendingDeprecationWarning):  # NumPy's own, for its matrix class
        matrix = np.asmatrix(np.zeros((1, 1000), np.float32))
    x.to_host(out=matrix)
    np.testing.assert_array_equal(np.asarray(matrix).ravel()[[0, 499, 500, 999]], [0, 499, 1000, 1499])
