"""Python threads calling resident at once, each with data of its own: every value against a float64
reference, the ledger's totals against the bytes the threads moved, and the GIL released while a long
call runs (docs/threads.md)."""
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

import resident as rs
from _support import GPU, needs_numba

DEVICES = ["cpu"] + (["cuda"] if GPU else [])


def run_threads(count, body):
    """Runs body(i) on `count` threads at once; re-raises the first failure."""
    errors = [None] * count
    start = threading.Barrier(count)

    def wrapped(i):
        try:
            start.wait()
            body(i)
        except BaseException as e:  # noqa: BLE001 (handed to the main thread)
            errors[i] = e

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e


@pytest.mark.parametrize("device", DEVICES)
def test_threads_get_their_own_values_back(device):
    threads, rounds = 6, 5
    before = rs.ledger().get(device if device == "cpu" else "cuda:0", {})
    moved = [0] * threads

    def body(i):
        g = np.random.default_rng(1000 + i)
        p = rs.op.affine(1.5, 0.5) | rs.op.square()
        for r in range(rounds):
            n = 20000 + 3001 * i + 17 * r  # distinct sizes: a mix-up cannot line up
            h = g.uniform(-2, 2, n).astype(np.float32)
            x = rs.to_device(h, device=device)
            assert np.array_equal(x.to_host(), h), f"thread {i} round {r}: the round trip changed the data"
            p(x)
            got = x.to_host()
            want = np.square(np.float32(1.5) * h.astype(np.float64) + 0.5)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"thread {i} round {r}")
            s = float(rs.sum(x))
            assert abs(s - float(np.sum(got.astype(np.float64)))) <= 1e-4 * max(1.0, abs(s)), f"thread {i}"
            moved[i] += 3 * n * 4

    run_threads(threads, body)
    rs.synchronize(device)
    after = rs.ledger()[device if device == "cpu" else "cuda:0"]
    up = after["h2d_bytes"] - before.get("h2d_bytes", 0)
    down = after["d2h_bytes"] - before.get("d2h_bytes", 0)
    assert up == sum(m // 3 for m in moved), "the ledger's uploads are not the sum of the threads' own"
    # Downloads: two arrays a round, and at most a few bytes of each sum's value.
    assert 0 <= down - sum(2 * m // 3 for m in moved) <= 64 * threads * rounds


@pytest.mark.parametrize("device", DEVICES)
def test_threads_fill_and_multiply_their_own_arrays(device):
    threads = 4
    fills = [None] * threads

    def body(i):
        g = np.random.default_rng(2000 + i)
        m, k, n = 17 + i, 23 + 2 * i, 9 + 3 * i
        a = g.uniform(-1, 1, (m, k)).astype(np.float32)
        b = g.uniform(-1, 1, (k, n)).astype(np.float32)
        c = rs.matmul(rs.to_device(a, device=device), rs.to_device(b, device=device)).to_host()
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-5 * k)
        x = rs.empty(50000 + i, device=device)
        rs.random.fill_uniform(x, seed=77 + i)
        fills[i] = x.to_host()
        assert fills[i].min() >= 0 and fills[i].max() < 1

    run_threads(threads, body)
    # The same seeds again on one thread: the values each thread got were its own stream's.
    for i in range(threads):
        x = rs.empty(50000 + i, device=device)
        rs.random.fill_uniform(x, seed=77 + i)
        assert np.array_equal(x.to_host(), fills[i]), f"thread {i} got another stream's numbers"


def test_the_gil_is_released_during_a_long_call():
    # A program over a large array on the CPU: while it runs, the main thread keeps running Python.
    n = 1 << 23
    x = rs.to_device(np.linspace(-1, 1, n, dtype=np.float32), device="cpu")
    p = rs.op.sin() | rs.op.cos() | rs.op.exp() | rs.op.sqrt() | rs.op.log() | rs.op.tanh()
    span = {}

    def work():
        for _ in range(8):
            t0 = time.perf_counter()
            p(x)
            t1 = time.perf_counter()
            if t1 - t0 > span.get("t1", 0) - span.get("t0", 0):
                span["t0"], span["t1"] = t0, t1

    t = threading.Thread(target=work)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
    t.join()
    t0, t1 = span["t0"], span["t1"]
    if t1 - t0 < 0.02:
        pytest.skip(f"the longest call took {1e3 * (t1 - t0):.1f} ms: too short to tell")
    inside = sum(1 for s in ticks if t0 < s < t1)
    assert inside > 10, f"the main thread ran {inside} times during a {1e3 * (t1 - t0):.0f} ms call: the GIL was held"


_DAEMONS = r"""
import threading, time, numpy as np, resident as rs
x = np.ones(100000, np.float32)
p = rs.op.add(0.0)
flow = rs.Flow(device="cpu")
flow.add("touch", lambda: None)
works = [lambda: rs.sum(x), lambda: p(x), lambda: rs.stream(p, x, chunk=1 << 14), flow.run]
def loop(work):
    while True:
        work()
for w in works:
    threading.Thread(target=loop, args=(w,), daemon=True).start()
time.sleep(0.5)
print("exiting", flush=True)
"""


def _runs(script, times, timeout=120):
    """The script run `times` times in fresh CPU processes (a hang fails on the timeout), with nanobind's
    report of instances left at exit on."""
    for _ in range(times):
        yield subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                             env=dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_LEAK_WARNINGS="1"))


def test_daemon_threads_inside_calls_at_exit_leave_the_process_exiting_cleanly():
    # The interpreter ends a daemon thread that takes the GIL back while it finalizes; through C++
    # frames that aborted the process ("terminate called without an active exception").
    for r in _runs(_DAEMONS, 3):
        assert r.returncode == 0 and "exiting" in r.stdout, (r.returncode, r.stderr[-2000:])


_AT_EXIT = r"""
import atexit, numpy as np, resident as rs
x = rs.to_device(np.ones(1000, np.float32), device="cpu")
class Late:
    def __del__(self):
        print("del", rs.sum(x), flush=True)
keep = Late()            # dropped as the interpreter finalizes
atexit.register(lambda: print("atexit", rs.sum(x), flush=True))
cycle = [Late()]
cycle.append(cycle)      # collected by the garbage collector at exit
print("exiting", flush=True)
"""


def test_calls_made_by_the_finalizing_thread_at_exit_run():
    # A __del__ or atexit function calling resident while the interpreter finalizes runs on the thread
    # doing it: the call goes on (no other thread to wait for), and the process exits.
    r = subprocess.run([sys.executable, "-c", _AT_EXIT], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_LEAK_WARNINGS="1"))
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "exiting" in r.stdout and "atexit 1000.0" in r.stdout and "del 1000.0" in r.stdout, r.stdout
    assert "leak" not in r.stderr, r.stderr[-2000:]


_HELD_PAST_EXIT = r"""
import atexit, ctypes, math, numpy as np, resident as rs
def last():  # registered before resident's own exit function: runs after it let its chains go
    y = np.full(1000, 0.25, np.float32)
    f(y)
    print("last", float(y.sum()), flush=True)
atexit.register(last)
def f(v):
    return math.sqrt(v) * 2.0
f = rs.stage(f)
g = rs.stage(lambda v: v + 1.0) | rs.stage(lambda v: 2.0 * v)  # (a program or C++ text in it stays its own)
x = np.full(1000, 0.25, np.float32)
f(x)
g(x)
print("first", float(x.sum()), flush=True)
# References no one lets go, as another extension's caches keep the functions they compiled (Numba's
# do): the stage lives on its function, the chain on its own, past the core's teardown.
for o in (f, g):
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(o))
"""


def test_stages_and_chains_held_past_exit_let_their_compiled_chains_go():
    # At exit the stages and chains let their compiled chains go: one still held by another extension
    # then leaves no instance of the core alive (nanobind reported them leaked); a call made after that
    # compiles again and is right.
    for r in _runs(_HELD_PAST_EXIT, 1, timeout=300):
        assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
        assert "first 4000.0" in r.stdout and "last 1000.0" in r.stdout, (r.stdout, r.stderr[-2000:])
        assert "leak" not in r.stderr, r.stderr[-2000:]


_KEPT_BY_ANOTHER = r"""
import ctypes, numpy as np, resident as rs
a = rs.to_device(np.ones(8, np.float32), device="cpu")
ctypes.pythonapi.Py_IncRef(ctypes.py_object(a))  # as another extension's cache would keep it
print("kept", flush=True)
"""


def test_an_array_kept_past_exit_by_another_extension_is_reported_only_where_asked():
    # nanobind reports instances left at exit; one another extension keeps is no fault of the user's,
    # so the report is ours to ask for (RESIDENT_LEAK_WARNINGS=1), and quiet otherwise.
    for asked, reported in (("1", True), ("0", False), (None, False)):
        env = dict(os.environ, RESIDENT_DEVICE="cpu")
        env.pop("RESIDENT_LEAK_WARNINGS", None)
        if asked is not None:
            env["RESIDENT_LEAK_WARNINGS"] = asked
        r = subprocess.run([sys.executable, "-c", _KEPT_BY_ANOTHER], capture_output=True, text=True,
                           timeout=120, env=env)
        assert r.returncode == 0 and "kept" in r.stdout, (r.returncode, r.stderr[-2000:])
        assert ("leaked" in r.stderr) == reported, (asked, r.stderr[-2000:])


_PARKED_HOLDER = r"""
import gc, threading, time, numpy as np, resident as rs
shared = rs.Flow(device="cpu")
a = rs.to_device(np.ones(1 << 16, np.float32), device="cpu")
shared.add("s", lambda: rs.sum(a), reads=[a])
def loop():
    while True:
        shared.run()
class D:
    def __init__(self): self.me = self
    def __del__(self):
        try:
            shared.run()
            print("del: ran", flush=True)
        except rs.Error as e:
            print("del: refused", flush=True)
for _ in range(4):
    threading.Thread(target=loop, daemon=True).start()
D()
gc.disable()
time.sleep(0.3)
print("exiting", flush=True)
"""


def test_a_call_at_exit_never_waits_on_a_thread_parked_holding_what_it_needs():
    # Daemon threads stopped at exit inside a flow's stage hold its turn; a __del__ of the final
    # collection running that flow is refused (a resident.Error) rather than waiting for good, also when
    # a thread parks only after the __del__ began waiting for the turn (about one run in 14 here; it
    # waited for good before the wait could give up: 1 of 16 runs hung).
    for r in _runs(_PARKED_HOLDER, 12, timeout=60):
        assert r.returncode == 0 and "exiting" in r.stdout and "del: " in r.stdout, (r.stdout, r.stderr[-2000:])


_FIRST_STAGES = r"""
import threading, numpy as np, resident as rs
errs = []
def go(k):
    try:
        x = rs.to_device(np.ones(1000, np.float32), device="cpu")
        assert (rs.stage(lambda v: v * 2.0 + k)(x).to_host() == 2.0 + k).all()
    except Exception as e:
        errs.append(repr(e)[:300])
ts = [threading.Thread(target=go, args=(k,)) for k in range(6)]
[t.start() for t in ts]; [t.join() for t in ts]
print("errors", errs)
"""


@needs_numba
def test_stages_defined_on_several_threads_first_thing_all_compile():
    # Numba imported for the first time by several threads at once left partly initialized modules
    # (every stage of the process failing after); it is imported once, under a lock.
    r = subprocess.run([sys.executable, "-c", _FIRST_STAGES], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, RESIDENT_DEVICE="cpu"))
    assert r.returncode == 0 and "errors []" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_one_profile_read_on_several_threads_and_closed_meanwhile_stays_whole():
    # A report read while another thread replaced or closed it read freed memory (a crash, or rows of
    # garbage bytes).
    x = np.ones(4096, np.float32)
    for _ in range(30):
        prof = rs.profile()
        prof.__enter__()
        rs.sum(rs.to_device(x, device="cpu"))
        seen = []
        readers = [threading.Thread(target=lambda: seen.extend(len(prof.rows) for _ in range(20))) for _ in range(4)]
        for t in readers:
            t.start()
        prof.__exit__(None, None, None)
        for t in readers:
            t.join(60)
        assert seen and all(n >= 1 for n in seen)
        assert prof.rows[0].file.endswith(".py")


_DEL_DURING_COMPILE = r"""
import gc, math, threading, time, numpy as np, resident as rs
def inc(v):
    return v + 1.0
rs.stage(inc)(np.ones(8, np.float32))
class Resource:
    def __init__(self):
        self.me = self  # freed by the collector, wherever it runs: inside a compile too
    def __del__(self):
        rs.stage(inc)(np.ones(8, np.float32))
def churn():
    while True:
        Resource()
        time.sleep(0.001)
threading.Thread(target=churn, daemon=True).start()
for k in range(12):
    x = np.ones(8, np.float32)
    rs.stage(lambda v, k=k: math.sqrt(v) * 2.0 + k)(x)
    assert x[0] == 2.0 + k, x
print("done", flush=True)
"""


def test_a_finalizer_calling_a_stage_during_a_compile_on_its_thread_runs():
    pytest.importorskip("numba")
    # The stages' lock was held through Numba's compile, whose collections ran the __del__: it waited
    # on itself for good.
    for r in _runs(_DEL_DURING_COMPILE, 1, timeout=300):
        assert r.returncode == 0 and "done" in r.stdout, (r.returncode, r.stderr[-2000:])


_FORKED = r"""
import multiprocessing as mp, numpy as np, resident as rs
p = rs.op.affine(2.0, 1.0) | rs.op.sqrt()
def work(prog):
    x = np.arange(1 << 20, dtype=np.float32)
    prog(x)
    y = rs.to_device(np.arange(1 << 23, dtype=np.float32), device="cpu").to_host()  # a copy in parallel pieces
    return float(x[4]), float(y[-1])
if __name__ == "__main__":
    p(np.arange(1 << 20, dtype=np.float32))  # the parent's loops start OpenMP's team
    with mp.get_context("fork").Pool(2) as pool:
        print("got", pool.map_async(work, [p, p]).get(timeout=60), flush=True)
"""


def test_a_forked_child_runs_programs_after_the_parent_did():
    # OpenMP's team threads stay in the parent: a child's first loop waited for them for good.
    path = os.path.join(tempfile.mkdtemp(), "forked.py")
    with open(path, "w") as f:
        f.write(_FORKED)
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, RESIDENT_DEVICE="cpu"))
    assert r.returncode == 0 and f"got [(3.0, {float((1 << 23) - 1)}), (3.0, {float((1 << 23) - 1)})]" in r.stdout, \
        (r.stdout, r.stderr[-2000:])


def test_a_flow_declaring_another_librarys_array_that_holds_it_is_collected():
    import gc
    import weakref

    class Tagged(np.ndarray):
        pass
    refs = []
    for _ in range(10):
        a = np.ones(100, np.float32).view(Tagged)
        f = rs.Flow(device="cpu")
        a.flow = f  # a cycle through the declared array
        f.add("s", lambda: None, reads=[a])
        refs.append(weakref.ref(a))  # the array goes with its flow
        del a, f
    gc.collect()
    assert sum(r() is not None for r in refs) == 0


_DAEMONS_SLEEPING = r"""
import threading, time, numpy as np, resident as rs
f = rs.Flow(device="cpu")
f.add("nap", lambda: time.sleep(0.001))
threading.Thread(target=lambda: [f.run() for _ in iter(int, 1)], daemon=True).start()
g = rs.capture(lambda: time.sleep(0.001), device="cpu")
threading.Thread(target=lambda: [g.replay() for _ in iter(int, 1)], daemon=True).start()
x = np.ones(1 << 16, np.float32)
threading.Thread(target=lambda: [rs.stream(rs.op.sqrt(), x, chunk=1 << 12, progress=lambda d, t: time.sleep(0.001))
                                 for _ in iter(int, 1)], daemon=True).start()
time.sleep(0.5)
print("exiting", flush=True)
"""


def test_daemon_threads_whose_python_work_releases_the_gil_at_exit_leave_the_process_exiting_cleanly():
    # A stage, a replay's work or a progress callable that sleeps took the GIL back while the interpreter
    # finalized; Python ended the thread there, and its unwinding released a GIL the thread did not
    # hold: "Fatal Python error: PyGILState_Release", the process aborted.
    for r in _runs(_DAEMONS_SLEEPING, 3):
        assert r.returncode == 0 and "exiting" in r.stdout, (r.returncode, r.stderr[-2000:])
