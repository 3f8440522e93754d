"""Misuse a review found ending in a crash, a wrong value or a bare Python error: each is now a typed
resident error or the right value."""
import time

import numpy as np
import pytest

import resident as rs
from _support import needs_numba

TABLE = np.arange(5, dtype=np.float32)


def _lookup(v):
    return TABLE[int(v)]


@needs_numba
@pytest.mark.parametrize("index", [1e9, 101.0, 5.0])
def test_an_index_past_an_array_a_stage_reads_is_a_stage_error(index):
    # It crashed the interpreter (1e9) or read memory past the array (101) before.
    with pytest.raises(rs.StageError, match="out of bounds"):
        rs.stage(_lookup)(np.array([index], np.float32))
    np.testing.assert_array_equal(rs.stage(_lookup)(np.array([3.0, -1.0], np.float32)), [3.0, 4.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_least_of_infinities_is_infinite(dtype):
    assert rs.min(np.full(3, np.inf, dtype)) == np.inf
    assert rs.max(np.full(3, -np.inf, dtype)) == -np.inf
    x = rs.dist.shard(np.full(4, np.inf, dtype), ["cpu", "cpu"])
    assert rs.dist.min(x) == np.inf and rs.dist.max(x) == np.inf


def test_a_sharded_integer_sum_wraps_as_the_whole_sum_does():
    h = np.full(4, 2**62, np.int64)
    assert rs.dist.sum(rs.dist.shard(h, ["cpu", "cpu"])) == rs.sum(h) == int(h.sum())
    u = np.full(4, 2**63, np.uint64)
    assert rs.dist.sum(rs.dist.shard(u, ["cpu", "cpu"])) == rs.sum(u) == int(u.sum())


@needs_numba
def test_apply_refuses_what_it_would_get_wrong_and_takes_a_function_of_values():
    x = rs.dist.shard(np.zeros(6, np.float32), ["cpu", "cpu"])
    with pytest.raises(rs.InvalidArgument, match="generator"):
        rs.dist.apply(rs.jit.uniform(7), x)
    with pytest.raises(rs.InvalidArgument, match="reduction"):
        rs.dist.apply(rs.stage(lambda v: v * 2) | rs.jit.sum(), x)
    rs.dist.apply(lambda v: v + 1, x)
    np.testing.assert_array_equal(x.to_host(), np.ones(6, np.float32))


@needs_numba
def test_a_generated_count_is_checked_before_any_work():
    chain = rs.jit.uniform(1) | rs.jit.sum()
    start = time.monotonic()
    with pytest.raises(rs.InvalidArgument, match="largest size"):
        chain(n=2**64 - 1)
    with pytest.raises(rs.InvalidArgument):
        chain(n=-1)
    with pytest.raises(rs.InvalidType):
        chain(n=3.5)
    with pytest.raises(rs.InvalidType):
        chain(n=3, device=0)
    with pytest.raises(rs.InvalidArgument, match="input arrays"):
        rs.stage(lambda v: v)(np.ones(3, np.float32), n=2**70)
    assert time.monotonic() - start < 30, "refused before any work"
    assert chain(n=1000) == pytest.approx(500, abs=60)


@needs_numba
def test_a_device_other_than_the_arrays_is_refused():
    x = np.ones(3, np.float32)
    with pytest.raises(rs.Error):
        rs.stage(lambda v: v)(x.copy(), device="tpu")
    np.testing.assert_array_equal(rs.stage(lambda v: v * 2)(x.copy(), device="cpu"), 2 * x)


@needs_numba
def test_a_stage_written_in_a_loop_compiles_once():
    def double(v):
        return v * 2

    x = np.ones(8, np.float32)
    assert rs.stage(double)._items[0][1] is rs.stage(double)._items[0][1]
    rs.stage(double)(x.copy())
    before = rs.jit.stats()["compiled"]
    for _ in range(20):
        rs.stage(double)(x.copy())
    assert rs.jit.stats()["compiled"] == before


def test_a_transfer_policy_entered_again_stacks_and_an_exit_alone_is_refused():
    p = rs.transfer_policy("forbid")
    with p:
        with p:
            assert rs.transfer_policy.current() == "forbid"
        assert rs.transfer_policy.current() == "forbid"
    assert rs.transfer_policy.current() == "allow"
    with pytest.raises(rs.InvalidArgument):
        rs.transfer_policy("log").__exit__(None, None, None)


def test_bare_python_errors_became_typed():
    with pytest.raises(rs.InvalidArgument):
        rs.stream(lambda v: v, ())
    with pytest.raises(rs.InvalidType):
        rs.jit.reduce(lambda a, b: a + b, "x")
    with pytest.raises(rs.InvalidType):
        rs.dist.Communicator(5)


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


def test_numpy_reads_a_cpu_array_in_place_and_refuses_a_gpu_one():
    x = rs.to_device(np.arange(3, dtype=np.float32), "cpu")
    a = np.asarray(x)
    assert a.dtype == np.float32 and a.tolist() == [0.0, 1.0, 2.0]
    a[0] = 7.0
    assert x.to_host()[0] == 7.0, "the same memory"
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    if rs.cuda_device_count():
        with pytest.raises(rs.InvalidType, match="to_host"):
            np.asarray(rs.to_device(np.ones(2, np.float32), "cuda:0"))


def _slow(v):
    for _ in range(40):
        v = v * 0.999 + 0.001
    return v


@needs_numba
def test_ctrl_c_ends_a_stream_between_chunks():
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    # On the CPU, where a chunk's time is the stage's (a GPU's queue of chunks in flight is another test's).
    chunk = 1 << 18
    x = np.ones(64 * chunk, np.float32)
    rs.stream(_slow, x[:chunk].copy(), chunk=chunk, device="cpu")  # compiled before timing
    start = time.monotonic()
    rs.stream(_slow, x.copy(), chunk=chunk, progress=False, device="cpu")
    whole = time.monotonic() - start
    # Interrupted an eighth of the way in, it ends soon after (before, it ran every chunk first).
    timer = threading.Timer(whole / 8, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            rs.stream(_slow, x.copy(), chunk=chunk, progress=False, device="cpu")
    finally:
        timer.cancel()
    assert time.monotonic() - start < whole / 2


@needs_numba
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_a_chain_sum_of_32_bit_integers_adds_in_64_bits(dtype):
    x = np.full(4, np.iinfo(dtype).max, dtype)
    exact = 4 * int(np.iinfo(dtype).max)
    assert (rs.stage(lambda v: v) | rs.jit.sum())(x) == exact
    assert rs.jit.sum()(x) == exact
    assert rs.stream(lambda v: v, x, reduce="sum") == exact
    assert rs.dist.sum(rs.dist.shard(x, ["cpu", "cpu"]), lambda v: v) == exact
    assert rs.jit.max()(x) == np.iinfo(dtype).max


class _Index:
    """An integer-like whose __index__ returns `r`, or raises it when it is an exception class."""

    def __init__(self, r):
        self.r = r

    def __index__(self):
        if isinstance(self.r, type) and issubclass(self.r, BaseException):
            raise self.r("index")
        return self.r


class _BadItems:
    def __len__(self):
        return 2

    def __getitem__(self, i):
        raise ValueError("item")


@pytest.mark.parametrize("shape", [(2, _Index(2.5)), _Index(ValueError), _BadItems()])
def test_a_shape_whose_own_code_raises_is_invalid_type(shape):
    # The extent's __index__ and the sequence's items let their errors out bare before.
    with pytest.raises(rs.InvalidType, match="a shape's"):
        rs.empty(shape, device="cpu")
    with pytest.raises(KeyboardInterrupt):
        rs.empty(_Index(KeyboardInterrupt), device="cpu")


@pytest.mark.parametrize("n", [_Index(10.5), _Index("3"), _Index(ValueError)])
def test_dist_counts_are_read_through_operator_index(n):
    # extent_of returned floats for an __index__ giving 10.5, and compared str with int.
    with pytest.raises(rs.InvalidArgument, match="not an integer"):
        rs.dist.extent_of(n, 2, 0)
    with pytest.raises(rs.InvalidType, match="not an integer"):
        rs.dist.shard(np.ones(4, np.float32), n)
    assert rs.dist.extent_of(_Index(10), 3, 0) == (0, 4)


def test_a_zero_d_array_of_devices_is_a_count():
    assert len(rs.dist.shard(np.arange(4, dtype=np.float32), np.array(2)).shards) == 2
    with pytest.raises(rs.InvalidType):
        rs.dist.shard(np.ones(4, np.float32), np.array(2.5))


def test_a_captured_function_that_raises_at_a_cpu_replay_is_a_stage_error():
    # It gave the bare ValueError where a flow's captured graph gives StageError.
    g = rs.capture(lambda: (_ for _ in ()).throw(ValueError("x")), device="cpu")
    with pytest.raises(rs.StageError, match="captured work failed"):
        g.replay()
    g = rs.capture(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), device="cpu")
    with pytest.raises(KeyboardInterrupt):
        g.replay()


class _DeviceRaises:
    a = np.ones(3, np.float32)

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        raise ValueError("dev")


def test_a_dlpack_device_that_raises_is_invalid_argument():
    for call in (rs.from_dlpack, rs.op.sqrt(), lambda x: rs.random.fill_uniform(x, 1)):
        with pytest.raises(rs.InvalidArgument, match="__dlpack_device__ of a _DeviceRaises raised ValueError"):
            call(_DeviceRaises())


def _minus_one(v):
    return v - 1.0


@needs_numba
def test_operations_compose_with_plain_functions_and_cpp_text_either_way():
    # op | f and f | op were bare TypeErrors (a function has no __ror__).
    x = np.random.default_rng().uniform(1, 100, 4099).astype(np.float32)
    v = x.astype(np.float64)  # the reference in double precision
    close = lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # noqa: E731
    close((rs.op.sqrt() | _minus_one)(x.copy()), np.sqrt(v) - 1)
    close((_minus_one | rs.op.sqrt())(x.copy()), np.sqrt(v - 1))
    close(((rs.op.sqrt() | rs.op.mul(2.0)) | _minus_one)(x.copy()), 2 * np.sqrt(v) - 1)
    text = "float twice(float v) { return v * 2; }"
    close((rs.op.sqrt() | text)(x.copy()), 2 * np.sqrt(v))
    close((rs.stage(_minus_one) | text)(x.copy()), 2 * (v - 1))
    close((text | rs.stage(_minus_one))(x.copy()), 2 * v - 1)


@pytest.mark.parametrize("other", [3, 2.5, None, np.float32(1), np.arange(3)], ids=lambda o: type(o).__name__)
def test_a_chain_with_what_is_no_stage_is_invalid_type_either_way(other):
    # `rs.op.sqrt() | 3` is a mistake: a typed error naming what composes, from either side, and the
    # operations, programs and chains are usable after it.
    sq = rs.op.sqrt()
    for left in (sq, sq | rs.op.add(1), rs.stage("float f(float v) { return v + 1; }")):
        with pytest.raises(rs.InvalidType, match="composes"):
            left | other
        with pytest.raises(rs.InvalidType, match="composes"):
            other | left
    x = rs.to_device(np.full(4, 9.0, np.float32))
    np.testing.assert_allclose((sq | rs.op.add(1))(x).to_host(), np.full(4, 4.0))
