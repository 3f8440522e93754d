"""Flows of Python callables and captured graphs: stages run in dependency order with resident's work on
their streams, values against FP64, a capture replays the same work, errors name the stage, and the
arrays and callables a flow or graph holds stay alive after the caller lets go. Work that cannot be
called bare, async and generator functions (their call runs none of the body) and after= numbers naming
no stage are refused when given; captured work that raises at a replay is a StageError. The same tests
on the CPU and, where a GPU answers, on CUDA."""
import functools
import gc
import math
import warnings

import numpy as np
import pytest

import resident as rs

DEVICES = ["cpu"] + (["cuda:0"] if rs.cuda_device_count() > 0 else [])
SEED_PROGRAM = rs.op.affine(1.5, 0.5) | rs.op.square() | rs.op.add(1) | rs.op.sqrt() | rs.op.sin() | rs.op.mul(0.5)


def seed_reference(v):
    return 0.5 * math.sin(math.sqrt((1.5 * v + 0.5) ** 2 + 1.0))


@pytest.mark.parametrize("device", DEVICES)
def test_a_flow_of_python_stages_runs_in_order_and_matches_fp64(device):
    n = 100_003
    x = rs.empty(n, "float64", device=device)
    y = rs.empty(n, "float64", device=device)
    f = rs.Flow(device=device)
    a = f.add("fill x", lambda: rs.random.fill_uniform(x, seed=11), writes=[x])
    b = f.add("fill y", lambda: rs.random.fill_uniform(y, seed=12, low=-1, high=1), writes=[y])  # independent of a
    f.add("seed x", lambda: SEED_PROGRAM(x), reads=[x], writes=[x])
    f.add("scale y", lambda: (rs.op.mul(2.0) | rs.op.add(0.0))(y), reads=[y], writes=[y], after=[a])
    assert len(f) == 4 and b == 1
    f.run()
    u = rs.empty(n, "float64", device=device)
    rs.random.fill_uniform(u, seed=11)
    ref = np.array([seed_reference(v) for v in u.to_host()])
    assert np.max(np.abs(x.to_host() - ref)) < 1e-12
    v = rs.empty(n, "float64", device=device)
    rs.random.fill_uniform(v, seed=12, low=-1, high=1)
    assert np.array_equal(y.to_host(), 2.0 * v.to_host())
    report = f.report()
    assert [r["name"] for r in report] == ["fill x", "fill y", "seed x", "scale y"]
    assert all(r["kernels"] == 1 for r in report)


@pytest.mark.parametrize("device", DEVICES)
def test_a_captured_flow_replays_the_same_work(device):
    n = 4099
    x = rs.to_device(np.zeros(n, dtype=np.float32), device=device)
    f = rs.Flow(device=device)
    f.add("add one", lambda: (rs.op.add(1.0) | rs.op.mul(1.0))(x), reads=[x], writes=[x])
    g = f.capture()
    assert np.array_equal(x.to_host(), np.zeros(n, dtype=np.float32)), "nothing runs during the capture"
    for _ in range(3):
        g.replay()
    assert np.array_equal(x.to_host(), np.full(n, 3.0, dtype=np.float32))
    # Standalone capture of Python-issued work.
    h = rs.capture(lambda: (rs.op.mul(2.0) | rs.op.add(0.0))(x), device=device)
    h.replay()
    h.replay()
    assert np.array_equal(x.to_host(), np.full(n, 12.0, dtype=np.float32))
    for wrong in (lambda: h.replay(None, None), lambda: h.replay(streams=None)):
        with pytest.raises(rs.InvalidType, match="Graph.replay"):
            wrong()
    # Kernels one replay launches (on the CPU, known once a replay ran the stored work), as the ledger
    # counts them.
    assert g.kernels == 1 and h.kernels == 1, "one fused kernel each"

    def two_programs():
        rs.op.mul(1.0)(x)
        rs.op.add(0.0)(x)

    two = rs.capture(two_programs, device=device)
    before = rs.ledger()[device]["kernels"]
    two.replay()
    x.to_host()
    assert rs.ledger()[device]["kernels"] - before == 2
    assert two.kernels == 2


@pytest.mark.parametrize("device", DEVICES)
def test_a_replay_follows_the_work_queued_before_it(device):
    # Replays run where arrays' own work runs: after a fill queued just before, never beside it.
    n = 1 << 22 if device != "cpu" else 10_007
    x = rs.empty(n, device=device)
    ref = rs.empty(n, device=device)
    rs.random.fill_uniform(ref, seed=41)
    expect = 2.0 * ref.to_host()
    h = rs.capture(lambda: rs.op.mul(2.0)(x), device=device)
    f = rs.Flow(device=device)
    f.add("halve", lambda: rs.op.mul(0.5)(x), reads=[x], writes=[x])
    g = f.capture()
    for _ in range(3):
        x.to_host()  # nothing queued on x now
        rs.random.fill_uniform(x, seed=41)
        h.replay()
        assert np.array_equal(x.to_host(), expect)
        rs.random.fill_uniform(x, seed=41)
        h.replay()
        g.replay()
        assert np.array_equal(x.to_host(), ref.to_host())


@pytest.mark.parametrize("device", DEVICES)
def test_what_a_graph_holds_outlives_the_caller(device):
    n = 1000
    x = rs.to_device(np.ones(n, dtype=np.float32), device=device)
    f = rs.Flow(device=device)
    f.add("double", lambda a=x: (rs.op.mul(2.0) | rs.op.add(0.0))(a), reads=[x], writes=[x])
    g = f.capture()
    keep = rs.from_dlpack(x)  # a view to read back through
    del f, x
    gc.collect()
    g.replay()
    assert np.array_equal(keep.to_host(), np.full(n, 2.0, dtype=np.float32))
    del g
    gc.collect()


@pytest.mark.parametrize("device", DEVICES)
def test_stage_errors_name_the_stage_and_bad_stages_are_refused(device):
    f = rs.Flow(device=device)

    def boom():
        raise ValueError("no such thing")

    f.add("explodes", boom)
    with pytest.raises(rs.StageError, match="explodes"):
        f.run()
    with pytest.raises(rs.InvalidArgument, match="not callable"):
        rs.Flow(device=device).add("x", 42)
    with pytest.raises(rs.FlowError):
        rs.Flow(device=device).add("late", lambda: None, after=[3])
    with pytest.raises(rs.InvalidArgument):
        rs.Flow(device=device, streams=0)
    with pytest.raises(rs.InvalidArgument, match="not callable"):
        rs.capture(None, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_stages_added_without_inference_are_ordered_by_after_alone(device):
    # infer=False: the declared reads and writes make no edges; `after` does. Two writers of x without
    # inference and without `after` are refused (unordered writers), with `after` they run in order.
    n = 1000
    x = rs.to_device(np.ones(n, dtype=np.float32), device=device)
    f = rs.Flow(device=device)
    a = f.add("times 3", lambda: rs.op.mul(3.0)(x), reads=[x], writes=[x], infer=False)
    f.add("plus 1", lambda: rs.op.add(1.0)(x), reads=[x], writes=[x], infer=False, after=[a])
    f.run()
    assert np.array_equal(x.to_host(), np.full(n, 4.0, dtype=np.float32)), "(1 * 3) + 1, in that order"
    g = rs.Flow(device=device)
    g.add("w1", lambda: rs.op.mul(3.0)(x), writes=[x], infer=False)
    g.add("w2", lambda: rs.op.add(1.0)(x), writes=[x], infer=False)
    with pytest.raises(rs.FlowError):
        g.run()


def test_bad_devices_and_declarations_are_typed_errors():
    with pytest.raises(rs.DeviceUnavailable):
        rs.Flow(device="cuda:99")
    with pytest.raises(rs.InvalidArgument):
        rs.Flow(device="tpu")
    f = rs.Flow(device="cpu")
    with pytest.raises(rs.InvalidArgument):
        f.add("reads a number", lambda: None, reads=[42])
    assert len(f) == 0, "a refused stage is not added"
    f.add("one", lambda: None)
    with pytest.raises(rs.InvalidType, match="resident.Flow is made once"):
        f.__init__(device="cpu")  # would drop its stages
    assert len(f) == 1
    g = rs.Flow(device="cpu").capture()  # an empty flow: its graph replays nothing
    g.replay()


def test_a_flow_run_on_one_thread_while_another_adds_stages_and_reads_the_report():
    """Runs take the GIL back for each stage; adding a stage or reading the report meanwhile waits for
    the run without holding the GIL, so neither thread waits for the other forever."""
    import threading

    f = rs.Flow(device="cpu")
    calls = []
    f.add("first", lambda: calls.append(1))
    stop = threading.Event()

    def runner():
        while not stop.is_set():
            f.run()

    t = threading.Thread(target=runner)
    t.start()
    try:
        for i in range(200):
            f.add(f"added {i}", lambda: calls.append(1))
            f.report()
    finally:
        stop.set()
        t.join(timeout=60)
    assert not t.is_alive(), "the runner never finished"
    assert len(f) == 201
    calls.clear()
    f.run()
    assert len(calls) == 201


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


async def _halve_async(x):
    rs.op.mul(0.5)(x)


def _halve_generator(x):
    yield rs.op.mul(0.5)(x)


async def _halve_async_generator(x):
    yield rs.op.mul(0.5)(x)


@pytest.mark.parametrize("make", [_halve_async, _halve_generator, _halve_async_generator],
                         ids=["async", "generator", "async generator"])
def test_async_and_generator_functions_are_refused_as_stages_and_captured_work(make):
    x = np.ones(4)
    f = rs.Flow(device="cpu")
    # inspect reads through a partial to the function it calls.
    for work in (functools.partial(make, x), make):
        with pytest.raises(rs.InvalidType, match="runs none of its body"):
            f.add("halve", work, writes=[x])
        with pytest.raises(rs.InvalidType, match="runs none of its body"):
            rs.capture(work, device="cpu")
    f.run()
    np.testing.assert_array_equal(x, np.ones(4))


class _AsyncCall:
    def __init__(self, x):
        self.x = x

    async def __call__(self):
        rs.op.mul(0.5)(self.x)


class _GeneratorCall:
    def __init__(self, x):
        self.x = x

    def __call__(self):
        return _halve_generator(self.x)


@pytest.mark.parametrize("cls", [_AsyncCall, _GeneratorCall])
def test_work_returning_an_unstarted_coroutine_or_generator_fails_its_stage(cls):
    x = np.ones(4)
    f = rs.Flow(device="cpu")
    f.add("halve", cls(x), writes=[x])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed: no "never awaited" warning
        with pytest.raises(rs.StageError, match="unstarted"):
            f.run()
        g = rs.capture(cls(x), device="cpu")
        with pytest.raises(rs.StageError, match="unstarted"):
            g.replay()
    np.testing.assert_array_equal(x, np.ones(4))


def test_a_captured_function_that_raises_at_a_cpu_replay_is_a_stage_error():
    # It gave the bare ValueError where a flow's captured graph gives StageError.
    g = rs.capture(lambda: (_ for _ in ()).throw(ValueError("x")), device="cpu")
    with pytest.raises(rs.StageError, match="captured work failed"):
        g.replay()
    g = rs.capture(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), device="cpu")
    with pytest.raises(KeyboardInterrupt):
        g.replay()
