"""The call fast paths (resident.jit.Chain.__call__ through _core._jit_dispatch, a program object's
chain key kept in p.__dict__, an op's program kept on it): misuse gives the error the slow path gives,
whatever the chain's cache holds; nothing a fast path runs differs from what the slow path would run; a
capsule is taken once and one refused stays unconsumed. CPU only (python/tests/test_streams.py has the GPU
half, PyTorch and CuPy arrays read from their attributes)."""
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import resident as rs
from resident import _core
from _support import DlpackOnly, needs_numba

CPU = ("cpu", 0, 0)


def _map(t="float", name="rs_f"):
    return rs.jit.map(f"{t} {name}({t} v) {{ return 2 * v + 1; }}", name)


def _warm(chain, dtype=np.float32):
    x = np.arange(4, dtype=dtype)
    chain(x)
    return chain


def _slow(chain, *inputs, out=None, n=0, device=None, stream=None):
    """The slow path alone (what every call ran before the fast path)."""
    return chain._call(inputs, out, n, device, stream)


def _outcome(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


def _readonly(a):
    a.setflags(write=False)
    return a


def _twice(v):
    return v * 2.0


# ---- capsules, dtypes, stages that do not compile -------------------------------------------------


def test_a_capsule_a_cold_chain_refuses_stays_unconsumed():
    """docs/python.md: "A capsule is taken once; one refused is left unconsumed". The fast path takes
    (consumes) the capsule, misses the empty cache, and the slow path then refuses it (its dtype name is
    read from a .dtype attribute a capsule lacks): the capsule is gone and the call failed."""
    ch = _map()
    x = np.arange(4, dtype=np.float32)
    cap = x.__dlpack__()
    try:
        ch(cap)
    except rs.InvalidArgument:
        a = rs.from_dlpack(cap)  # refused: still a capsule to take
        np.testing.assert_array_equal(np.asarray(a.to_host()), np.arange(4, dtype=np.float32))
    else:
        np.testing.assert_array_equal(x, 2 * np.arange(4, dtype=np.float32) + 1)


def test_a_capsule_gets_the_same_answer_from_a_cold_and_a_warm_chain():
    """The same call's outcome must not depend on what an earlier call left in the chain's cache: a
    warm chain runs on a capsule (the fast path reads its dtype from DLPack) that a cold one refuses."""
    cold, warm = _map(), _warm(_map())
    got = []
    for ch in (cold, warm):
        cap = np.arange(4, dtype=np.float32).__dlpack__()
        got.append(_outcome(lambda: ch(cap)))
    assert got[0] == got[1], got


@needs_numba
def test_a_warm_python_stage_chain_on_the_cpu_takes_a_capsule_once():
    """A Python-stage chain on the CPU: _jit_dispatch takes the arrays, answers "guard", and is called
    again inside _guarded, taking them a second time. A capsule is consumed by the first take, so the
    second says "consumed already" while a C++ chain in the same state runs on it."""
    py = rs.stage(_twice)
    py(np.arange(4, dtype=np.float32))
    cpp = _warm(rs.jit.map("float rs_tw(float v) { return v * 2; }", "rs_tw"))
    got = []
    for ch in (cpp, py):
        cap = np.arange(4, dtype=np.float32).__dlpack__()
        got.append(_outcome(lambda: ch(cap)))
    assert got[0] == got[1], got


@needs_numba
def test_chains_take_an_object_that_speaks_dlpack_alone():
    h = np.arange(4, dtype=np.float32)
    for call in (rs.stage(lambda v: v + 1), rs.fuse(lambda v: v + 1), rs.jit.map("float p1(float v) { return v + 1; }", "p1")):
        call(DlpackOnly(h))
    np.testing.assert_array_equal(h, np.arange(4, dtype=np.float32) + 3)
    assert (rs.stage(lambda v: v * 2) | rs.jit.sum())(DlpackOnly(h)) == 2 * float(h.sum())
    # The object given comes back, on the first (compiling) call and on the warm ones alike; a
    # capsule, spent, gives the array taken from it.
    ch = rs.jit.map("float p2(float v) { return v + 2; }", "p2")
    for _ in range(3):
        given = DlpackOnly(h)
        assert ch(given) is given
        o = DlpackOnly(np.zeros(4, np.float32))
        assert ch(given, out=o) is o
    for _ in range(2):
        assert isinstance(ch(h.__dlpack__()), rs.Array)


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.complex64, np.int8])
def test_an_unsupported_dtype_is_the_same_error_on_the_fast_and_the_slow_path(dtype):
    """The slow path (_dtype_name) raises InvalidArgument; the fast path's from_dlpack raises InvalidType
    (a subclass, and also a TypeError) before the slow path is reached, cold chain or warm."""
    x = np.ones(4, dtype=dtype)
    fast = _outcome(lambda: _map()(x))
    slow = _outcome(lambda: _slow(_map(), x))
    assert fast is not None and issubclass(fast, rs.InvalidArgument)
    assert fast is slow, (fast, slow)


def test_a_stage_that_does_not_compile_is_compiled_once_per_call(tmp_path):
    """A chain whose C++ does not compile: each call after the first runs the compiler twice (the fast
    path's run raises CompileError, which it swallows, and the slow path runs the same entry again)."""
    if shutil.which("c++") is None:
        pytest.skip("no c++ on PATH for the counting wrapper")
    log = tmp_path / "calls.log"
    wrapper = tmp_path / "cxx.sh"
    wrapper.write_text(f"#!{sys.executable}\nimport os, shutil, sys\n"
                       f"if sys.argv[1:2] != ['--version']:\n    open({str(log)!r}, 'a').write('x\\n')\n"
                       "cxx = shutil.which('c++')\nos.execv(cxx, [cxx] + sys.argv[1:])\n")
    wrapper.chmod(0o755)
    script = textwrap.dedent("""
        import numpy as np, resident as rs
        ch = rs.jit.map("float rs_bad(float v) { return v + not_declared; }", "rs_bad")
        for _ in range(3):
            try:
                ch(np.ones(4, np.float32))
            except rs.CompileError:
                pass
    """)
    env = dict(os.environ, RESIDENT_JIT_CXX=str(wrapper), RESIDENT_JIT_CACHE=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    compiles = len(log.read_text().splitlines()) if log.exists() else 0
    assert compiles == 3, f"{compiles} compiler runs for 3 calls"


# ---- pinned: the fast path's key is the slow path's ----------------------------------------------


@pytest.mark.parametrize("dtype,t", [("float32", "float"), ("float64", "double"), ("int32", "int"),
                                     ("uint32", "unsigned int"), ("int64", "long long"),
                                     ("uint64", "unsigned long long")])
def test_the_key_made_in_cpp_is_the_key_the_slow_path_built_under(dtype, t):
    ch = rs.jit.map(f"{t} rs_inc({t} v) {{ return v + 1; }}", "rs_inc")
    x = np.arange(4, dtype=dtype)
    ch(x)
    assert list(ch._built) == [((dtype,), CPU)]
    a = rs.to_device(np.arange(4, dtype=dtype), device="cpu")
    assert _core._jit_dispatch(ch._built, (x,), None, None, False) is None  # a hit: it ran
    assert _core._jit_dispatch(ch._built, (a,), None, None, False) is None
    np.testing.assert_array_equal(x, np.arange(4, dtype=dtype) + 2)
    np.testing.assert_array_equal(np.asarray(a.to_host()), np.arange(4, dtype=dtype) + 1)


def test_mixed_dtypes_are_keyed_in_order_and_never_run_a_kernel_built_for_others():
    ch = rs.jit.map("double rs_m(float a, double b) { return a + b; }", "rs_m")
    a, b, o = np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float64), np.zeros(4)
    ch(a, b, out=o)
    np.testing.assert_array_equal(o, 2 * np.arange(4.0))
    assert list(ch._built) == [(("float32", "float64"), CPU)]
    for args in ((b, a), (a, a.copy()), (b, b.copy())):
        with pytest.raises(rs.InvalidArgument, match="make the types agree"):
            ch(*args, out=o)


def test_an_entry_filed_under_the_wrong_key_is_refused_not_run():
    """Even a cache entry built for other dtypes is checked by the pipeline: an error, never values."""
    ch = rs.jit.map("double rs_g(double v) { return 2 * v + 1; }", "rs_g")
    ch._built[(("float32",), CPU)] = ch.build(["float64"], CPU)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(rs.InvalidArgument, match="make the types agree"):
        ch(x)
    np.testing.assert_array_equal(x, np.arange(4, dtype=np.float32))


def test_generator_and_reduction_chains_keep_the_slow_path():
    s = _map() | rs.jit.sum()
    x = np.ones(4, np.float32)
    assert not s._maps and s(x) == 12.0 and s(x) == 12.0
    np.testing.assert_array_equal(x, np.ones(4, np.float32))  # a reduction writes nothing
    g = rs.jit.uniform(1) | _map()
    assert not g._maps
    y, z = np.zeros(4, np.float32), np.zeros(4, np.float32)
    g(out=y)
    g(z)  # a generator chain's one array is its output
    np.testing.assert_array_equal(y, z)
    assert np.all(y >= 1.0) and np.all(y <= 3.0)


# ---- pinned: misuse is the same error, cold or warm, fast or slow -------------------------------------

MISUSE = {
    "a list": (lambda: ([1.0, 2.0],), {}),
    "an int": (lambda: (3,), {}),
    "a bytearray (uint8)": (lambda: (bytearray(16),), {}),
    "non-contiguous": (lambda: (np.ones(8, np.float32)[::2],), {}),
    "negative strides": (lambda: (np.ones(8, np.float32)[::-1],), {}),
    "big-endian": (lambda: (np.ones(4, ">f4"),), {}),
    "read-only in place": (lambda: (_readonly(np.ones(4, np.float32)),), {}),
    "read-only out": (lambda: (np.ones(4, np.float32),), {"out": lambda: _readonly(np.ones(4, np.float32))}),
    "out of float64": (lambda: (np.ones(4, np.float32),), {"out": lambda: np.zeros(4)}),
    "out of int32": (lambda: (np.ones(4, np.float32),), {"out": lambda: np.zeros(4, np.int32)}),
    "out a list": (lambda: (np.ones(4, np.float32),), {"out": lambda: [0.0] * 4}),
    "out shorter": (lambda: (np.ones(4, np.float32),), {"out": lambda: np.zeros(3, np.float32)}),
    "out partly over the input": (None, None),
    "stream a str": (lambda: (np.ones(4, np.float32),), {"stream": lambda: "s"}),
    "stream a float": (lambda: (np.ones(4, np.float32),), {"stream": lambda: 1.5}),
    "stream 1 on the cpu": (lambda: (np.ones(4, np.float32),), {"stream": lambda: 1}),
    "stream -1": (lambda: (np.ones(4, np.float32),), {"stream": lambda: -1}),
    "n=1": (lambda: (np.ones(4, np.float32),), {"n": lambda: 1}),
    "n=False": (lambda: (np.ones(4, np.float32),), {"n": lambda: False}),
    "n='0'": (lambda: (np.ones(4, np.float32),), {"n": lambda: "0"}),
    "device an int": (lambda: (np.ones(4, np.float32),), {"device": lambda: 0}),
    "device unknown": (lambda: (np.ones(4, np.float32),), {"device": lambda: "gpu7"}),
    "two arrays for one parameter": (lambda: (np.ones(4, np.float32), np.ones(4, np.float32)), {}),
}


def _misuse_call(name):
    make, kw = MISUSE[name]
    if make is None:  # out= over a shifted view of the input's buffer
        b = np.arange(8, dtype=np.float32)
        return (b[:4],), {"out": b[1:5]}
    return make(), {k: v() for k, v in kw.items()}


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_misuse_is_the_same_typed_error_cold_warm_and_on_the_slow_path(name):
    outcomes = []
    for chain in (_map(), _warm(_map())):
        args, kw = _misuse_call(name)
        outcomes.append(_outcome(lambda: chain(*args, **kw)))
    args, kw = _misuse_call(name)
    outcomes.append(_outcome(lambda: _slow(_map(), *args, **kw)))
    assert outcomes[0] is not None and issubclass(outcomes[0], rs.Error), outcomes
    assert outcomes[0] is outcomes[1] is outcomes[2], outcomes


def test_misuse_leaves_the_arrays_untouched():
    ch = _warm(_map())
    b = np.arange(8, dtype=np.float32)
    with pytest.raises(rs.InvalidArgument, match="overlaps"):
        ch(b[:4], out=b[1:5])
    ro = _readonly(np.arange(4, dtype=np.float32))
    with pytest.raises(rs.InvalidArgument, match="read-only"):
        ch(ro)
    np.testing.assert_array_equal(b, np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(ro, np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("warm", [False, True])
def test_edge_arrays_run_alike_on_both_paths(warm):
    ch = _warm(_map()) if warm else _map()
    empty = np.ones(0, np.float32)
    assert ch(empty) is empty
    zero_d = np.array(3.0, np.float32)
    ch(zero_d)
    assert zero_d == 7.0
    m = np.ones((2, 3), np.float32)
    ch(m)
    np.testing.assert_array_equal(m, np.full((2, 3), 3.0, np.float32))
    ro = _readonly(np.arange(4, dtype=np.float32))  # read, never written: allowed
    y = np.zeros(4, np.float32)
    assert ch(ro, out=y) is y
    np.testing.assert_array_equal(y, 2 * np.arange(4, dtype=np.float32) + 1)
    x = np.arange(4, dtype=np.float32)
    assert ch(x, out=x) is x  # exactly in place
    np.testing.assert_array_equal(x, 2 * np.arange(4, dtype=np.float32) + 1)
    for n in (0, 0.0, None, np.int64(0)):
        x = np.zeros(2, np.float32)
        ch(x, n=n)
        np.testing.assert_array_equal(x, np.ones(2, np.float32))


@needs_numba
def test_a_warm_python_stage_chain_on_the_cpu_still_raises_stage_error():
    table = np.arange(5, dtype=np.float32)

    def lookup(v):
        return table[int(v)]

    for ch, first in ((rs.stage(lookup), lambda v: v), (_map() | rs.stage(lookup), lambda v: 2 * v + 1)):
        ch(np.array([0.0, 1.0], np.float32))  # warm: the next calls find the built chain
        with pytest.raises(rs.StageError, match="out of bounds"):
            ch(np.array([1e9], np.float32))
        x = np.array([1.0], np.float32)
        ch(x)  # the next call is not blamed for the earlier one
        np.testing.assert_array_equal(x, [table[int(first(1.0))]])


@needs_numba
def test_only_chains_whose_loop_calls_numba_code_run_inside_the_guard(monkeypatch):
    # Stages written out as C++ text cannot raise in the loop: their warm calls skip the guard (its
    # locks and frames cost a call microseconds); a stage left to Numba's function keeps it.
    import resident.jit as jit
    table = np.arange(5, dtype=np.float32)

    def lookup(v):
        return table[int(v)]

    guarded = []
    real = jit._guarded
    monkeypatch.setattr(jit, "_guarded", lambda *a, **k: guarded.append(1) or real(*a, **k))
    for ch, want, values in ((rs.stage(_twice) | rs.stage(_twice), 0, [2.0, 4.0]),
                             (rs.stage(_twice) | rs.stage(lookup), 3, [table[1], table[2]])):
        ch(np.array([0.5, 1.0], np.float32))  # cold: the slow path (guarded) builds the chain
        guarded.clear()
        for _ in range(3):
            x = np.array([0.5, 1.0], np.float32)
            ch(x)
            assert x.tolist() == values, ch
        assert len(guarded) == want, ch


# ---- pinned: programs and ops keep their compiled chain -------------------------------------------


def test_a_program_keeps_one_chain_per_dtype_with_the_right_values():
    p = rs.op.mul(3.0) | rs.op.add(1)
    for dtype in (np.float32, np.float64, np.float32):
        x = np.ones(4, dtype)
        assert p(x) is x
        np.testing.assert_array_equal(x, np.full(4, 4.0, dtype))
    if p.engine == "compiled":
        assert set(k for k in p.__dict__ if k in ("float32", "float64")) == {"float32", "float64"}


def test_a_program_whose_remembered_chains_were_forgotten_compiles_again():
    # The core's table of remembered chains is emptied at exit; a call after that (or any stale slot)
    # takes the slow path and gives the same values.
    p, q = rs.op.mul(3.0) | rs.op.add(1), rs.op.add(100)
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    p(x)
    _core._program_forget()
    q(y), p(x), p(x), q(y)  # q's chain remembered first: p's forgotten slot must not lead to it
    np.testing.assert_array_equal(x, np.full(4, 40.0, np.float32))
    np.testing.assert_array_equal(y, np.full(4, 200.0, np.float32))
    if p.engine == "compiled":
        assert len(p.__dict__["float32"]) == 1  # remembered again, under a new slot


def test_programs_whose_constants_differ_in_the_last_digit_are_not_confused():
    a, b = rs.op.add(0.1), rs.op.add(0.1 + 2**-40)
    x, y = np.zeros(2, np.float64), np.zeros(2, np.float64)
    a(x), b(y), a(x), b(y)
    np.testing.assert_array_equal(x, np.full(2, 0.2))
    np.testing.assert_array_equal(y, np.full(2, 2 * (0.1 + 2**-40)))
    neg, pos = rs.op.mul(-0.0), rs.op.mul(0.0)
    neg(np.ones(2)), pos(np.ones(2))  # warm: the next calls take the kept chains
    u, v = np.ones(2), np.ones(2)
    neg(u), pos(v)
    assert np.all(np.signbit(u)) and not np.any(np.signbit(v))


def test_a_warm_program_gives_the_cold_programs_errors():
    def misuse(p):
        return [
            _outcome(lambda: p(np.ones(4, np.int32))),
            _outcome(lambda: p(np.ones(4, np.float32), out=np.zeros(4, np.float64))),
            _outcome(lambda: p(_readonly(np.ones(4, np.float32)))),
            _outcome(lambda: p(np.ones(4, np.float32), out=np.zeros(3, np.float32))),
            _outcome(lambda: p(np.ones(4, np.float32), stream="s")),
            _outcome(lambda: p(np.ones(4, np.float32), stream=1)),
            _outcome(lambda: p([1.0, 2.0])),
        ]
    cold = misuse(rs.op.mul(2.0) | rs.op.add(1))
    warm_p = rs.op.mul(2.0) | rs.op.add(1)
    warm_p(np.ones(4, np.float32))
    warm = misuse(warm_p)
    assert all(c is not None and issubclass(c, rs.Error) for c in cold), cold
    assert cold == warm


def test_a_program_or_op_called_with_other_arguments_is_invalid_type():
    x = np.ones(4, np.float32)
    for f in (rs.op.mul(2.0) | rs.op.add(1), rs.op.sqrt()):
        f(x)  # warm: the call's own overload has run
        for call in (lambda: f(), lambda: f(x, None, None, 4), lambda: f(x, bogus=1)):
            with pytest.raises(rs.InvalidType, match="takes one array"):
                call()
    np.testing.assert_array_equal(x, np.full(4, 3.0, np.float32) ** 0.5)
    for cls in (rs.op, rs.program):  # the method called on the class: x arrives as self
        with pytest.raises(rs.InvalidType, match=r"rs\.sum\(x\)"):
            cls.sum(x)
        with pytest.raises(rs.InvalidType, match=r"rs\.sum\(x\)"):
            cls.sum()


def test_the_cpp_timing_helpers_refuse_read_only_memory():
    p = rs.op.add(1) | rs.op.mul(1.0)
    x = _readonly(np.zeros(8, np.float32))
    p(np.zeros(8, np.float32))
    pipe = _program_chain(p, "float32")
    for call in (lambda: _core._time_cpp_calls(p, x, 3), lambda: _core._time_cpp_jit_calls(pipe, x, 3)):
        with pytest.raises(rs.InvalidArgument, match="read-only"):
            call()
    assert not x.any()


def _program_chain(p, dtype):
    from resident import _program
    return _program._compiled[(p.name, dtype, False)]._built[((dtype,), CPU)][0]


def test_an_op_keeps_its_program_and_a_capsule_is_still_taken():
    o = rs.op.add(1)
    x = np.zeros(3, np.float32)
    o(x), o(x)
    assert isinstance(o.__dict__["program"], rs.program)
    np.testing.assert_array_equal(x, np.full(3, 2.0, np.float32))
    h = np.zeros(3, np.float32)
    got = o(h.__dlpack__())  # programs take capsules, cold or warm, and return the array taken
    np.testing.assert_array_equal(h, np.ones(3, np.float32))
    assert isinstance(got, rs.Array) and got.data_ptr == h.ctypes.data


# ---- pinned: lifetimes, threads, call sites ----------------------------------------------------------


def test_fast_path_calls_leak_no_references():
    ch = _warm(_map())
    p = rs.op.mul(1.0)
    x, y = np.ones(16, np.float32), np.empty(16, np.float32)
    a = rs.to_device(np.ones(16, np.float32), device="cpu")
    ch(x, out=y), ch(a), p(x)
    key, entry = next(iter(ch._built.items()))
    watched = (x, y, a, p, entry, key, key[0][0], key[1])
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(2000):
        ch(x, out=y)
        ch(a)
        p(x)
        _core._jit_dispatch({}, (x,), None, None, False)  # a miss returns a fresh key
    assert [sys.getrefcount(o) for o in watched] == before


def test_the_cache_cleared_under_running_calls_from_threads():
    ch = _warm(_map())
    errors, stop = [], threading.Event()

    def caller(i):
        try:
            x = np.full(1 << 12, float(i), np.float32)
            for _ in range(200):
                y = np.empty_like(x)
                ch(x, out=y)
                if not np.array_equal(y, 2 * x + 1):
                    errors.append((i, y[:3]))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def clearer():
        while not stop.is_set():
            with ch._lock:
                ch._built.clear()

    c = threading.Thread(target=clearer)
    c.start()
    ts = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    c.join()
    assert not errors, errors[:3]


def test_a_profile_names_the_users_line_through_every_fast_path():
    ch, p, o = _warm(_map()), rs.op.mul(1.0) | rs.op.add(0), rs.op.sqrt()
    x = np.ones(8, np.float32)
    p(x), o(x)
    here = __file__.rsplit("/", 1)[-1]
    with rs.profile() as prof:
        for _ in range(3):
            ch(x); line_chain = sys._getframe().f_lineno  # noqa: E702
            p(x); line_program = sys._getframe().f_lineno  # noqa: E702
            o(x); line_op = sys._getframe().f_lineno  # noqa: E702
    rows = {(r.site, r.calls) for r in prof.rows}
    for line in (line_chain, line_program, line_op):
        assert (f"{here}:{line}", 3) in rows, rows


@needs_numba
def test_a_function_whose_code_is_replaced_is_compiled_anew():
    def h(v):
        return v + 1

    def other(v):
        return v * 10
    y = np.arange(3.0)
    rs.stage(h)(y)
    h.__code__ = other.__code__
    rs.stage(h)(y)
    np.testing.assert_array_equal(y, (np.arange(3.0) + 1) * 10)


def _numpy_kinds():
    """NumPy arrays of every kind a call may be given: each is taken through the buffer protocol or
    left to the __dlpack__ path, which copies or refuses it."""
    base = np.arange(12, dtype=np.float64).reshape(3, 4) - 5.5
    kinds = {f"{np.dtype(t).name} 2-d": base.astype(t) for t in
             (np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64, np.longlong, np.ulonglong)}
    kinds.update({
        "read-only": _readonly(base.astype(np.float32)),
        "Fortran order": np.asfortranarray(base),
        "strided view": base[:, ::2],
        "offset view": base.ravel()[1:],
        "broadcast, writable": np.broadcast_arrays(base[0], np.zeros((1, 4)))[0],  # read-only as a buffer
        "broadcast_to": np.broadcast_to(base[0], (3, 4)),
        "big-endian": base.astype(">f4"),
        "0-d": np.array(2.5),
        "empty": np.zeros((0, 3), np.float32),
        "float16": base.astype(np.float16),
        "bool": base > 0,
        "complex": base.astype(np.complex64),
        "misaligned": np.frombuffer(np.arange(9, dtype=np.uint8).tobytes(), np.uint8)[1:].view(np.float32),
    })
    return kinds


class _Sub(np.ndarray):
    """A subclass: never read through the buffer protocol, so it takes the __dlpack__ path."""


@pytest.mark.parametrize("kind", list(_numpy_kinds()))
def test_a_numpy_array_is_taken_as_the_dlpack_path_takes_it(kind):
    """A NumPy array is read through the buffer protocol (no capsule per call): what is taken (element
    type, shape, values, read-only) or the error is what the __dlpack__ path gives for the same array."""
    a = _numpy_kinds()[kind]

    def taken(x):
        try:
            r = rs.from_dlpack(x)
        except rs.Error as e:
            return type(e)
        return (r.dtype, tuple(r.shape), r._readonly, r.to_host().tobytes())

    got = taken(a)
    assert got == taken(a.view(_Sub))
    if isinstance(got, tuple):
        assert got == taken(DlpackOnly(a))  # the capsule itself
    expected = {"strided view": rs.InvalidArgument, "Fortran order": rs.InvalidArgument,
                "misaligned": rs.InvalidArgument, "big-endian": rs.InvalidType, "float16": rs.InvalidType,
                "bool": rs.InvalidType, "complex": rs.InvalidType}
    if kind in expected:
        assert got is expected[kind]
    elif kind.endswith("2-d") or kind in ("read-only", "broadcast, writable"):
        assert got[2] == (kind == "read-only") and got[1] == a.shape


def test_a_numpy_array_taken_in_stays_alive_and_a_call_writes_into_it():
    """The array from_dlpack takes keeps the NumPy array's memory (its owner) after the caller lets
    go; a call's out= NumPy array receives the values in place, against FP64."""
    import gc
    x = np.linspace(-2, 2, 1001, dtype=np.float32)
    want = np.sqrt(np.abs(x.astype(np.float64)))
    held = rs.from_dlpack(np.abs(x))
    gc.collect()
    y = np.full_like(x, np.nan)
    rs.op.sqrt()(held, out=y)
    assert np.max(np.abs(y - want)) <= 2e-7 * np.max(want)
    z = np.abs(x)
    rs.op.sqrt()(z, out=z)
    assert np.array_equal(z, y)
    with pytest.raises(rs.InvalidArgument):
        rs.op.sqrt()(x, out=_readonly(np.empty_like(x)))


def test_calls_take_arrays_with_no_numpy_module_to_be_found():
    """sys.modules holding None (or a stand-in) under 'numpy' leaves other arrays' calls working."""
    code = textwrap.dedent("""
        import sys
        import resident as rs
        x = rs.empty(4, dtype="float64")
        cap = x.__dlpack__()
        real = sys.modules["numpy"]
        for stand_in in (None, object()):
            sys.modules["numpy"] = stand_in
            rs.from_dlpack(cap if stand_in is None else x.__dlpack__())
            rs.op.sqrt()(x)
        sys.modules["numpy"] = real
        y = real.arange(4.0)
        rs.op.sqrt()(y)
        assert abs(y[3] - 3 ** 0.5) < 1e-15
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RESIDENT_DEVICE": "cpu"})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
