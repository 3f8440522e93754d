"""The built-in operations give NumPy's values wherever they run: a program interpreted on the CPU gives the
compiled one's values (each operation rounded once, no fused multiply-add), pow gives every element the
same value whatever its place in the loop, non-finite and huge constants run compiled and compose with
stages, minimum and maximum keep fmin's NaN rule, a program used as a stage computes what its calls
compute, and rs.matmul with alpha = 0 reads neither input on any algorithm."""
import math
import sys
import warnings

import numpy as np
import pytest

import resident as rs
from _support import DEVICES, needs_numba


_INTERPRETED = r"""
import numpy as np, resident as rs
x = np.array([-0.3, 3.0])
p = rs.op.affine(1.5, 0.5) | rs.op.add(0.7)
p(x)
print(p.engine, repr(float(x[0])), repr(float(x[1])), flush=True)
"""


def test_an_interpreted_program_on_the_cpu_gives_the_compiled_ones_values(tmp_path):
    # a * v + b rounds twice in both engines (the interpreter's loop was contracted into one fma).
    import os
    import subprocess
    env = dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX="/bin/false", RESIDENT_JIT_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _INTERPRETED], capture_output=True, text=True, timeout=120, env=env)
    v = np.array([-0.3, 3.0])
    want = (1.5 * v + 0.5) + 0.7  # NumPy: each operation rounded once
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["interpreted", repr(float(want[0])), repr(float(want[1]))], r.stdout


_INTERPRETED_SUM = """
import numpy as np, resident as rs
z = np.full((1 << 24) + 5, 0.1, np.float32)
p = rs.op.add(0.0) | rs.op.mul(1.0)
print(p.sum(z), p.engine, rs.sum(z), flush=True)
"""


def test_an_interpreted_program_sums_float32_as_the_compiled_ones_do(tmp_path):
    # The interpreter's lanes added in float32: 1673576.375 for 2^24 + 5 values of 0.1 (0.25% off).
    import os
    import subprocess
    env = dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX="/bin/false", RESIDENT_JIT_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _INTERPRETED_SUM], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    got, engine, whole = r.stdout.split()
    want = float(np.float32(((1 << 24) + 5) * float(np.float32(0.1))))  # exact in double, rounded once
    assert engine == "interpreted" and float(got) == want == float(np.float32(whole)), r.stdout


_KILLED_ONCE = """
import numpy as np, resident as rs
p = rs.op.affine(1.5, 0.5) | rs.op.add(0.7)
x = np.array([-0.3, 3.0])
p(x)
print(p.engine, flush=True)
try:
    rs.jit.map("float rs_k(float v) { return v + 2; }", "rs_k")(np.ones(2, np.float32))
except rs.DeviceUnavailable as e:
    print("text stage:", e, flush=True)
"""


def test_a_compiler_ended_by_a_signal_is_not_taken_for_a_missing_one(tmp_path):
    # A Ctrl-C sent to the process group ends the compiler another thread started: the program stayed
    # interpreted for the rest of the process, and a text stage called it a compile error of the chain.
    import os
    import subprocess
    runs = tmp_path / "runs"
    wrapper = tmp_path / "cxx.py"
    wrapper.write_text(f"#!{sys.executable}\nimport os, shutil, signal, sys\n"
                       f"if sys.argv[1:2] != ['--version']:\n"
                       f"    n = len(open({str(runs)!r}).read()) if os.path.exists({str(runs)!r}) else 0\n"
                       f"    open({str(runs)!r}, 'a').write('x')\n"
                       f"    if n in (0, 2):\n        signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
                       "        os.kill(os.getpid(), signal.SIGINT)\n"
                       "cxx = shutil.which('c++')\nos.execv(cxx, [cxx] + sys.argv[1:])\n")
    wrapper.chmod(0o755)
    env = dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX=str(wrapper), RESIDENT_JIT_CACHE=str(tmp_path / "c"))
    r = subprocess.run([sys.executable, "-c", _KILLED_ONCE], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "compiled", r.stdout  # compiled at the second try
    assert lines[1].startswith("text stage: jit: the host compiler") and "ended by signal 2" in lines[1], r.stdout
    assert "nothing is wrong with the chain: call again" in lines[1]


def test_a_compiler_exiting_with_a_status_past_128_is_a_compile_error_with_its_text(tmp_path):
    # `g++ "$@" || exit 255` was taken for a compiler ended by signal 127, its diagnostics dropped.
    import os
    import subprocess
    wrapper = tmp_path / "cxx.sh"
    wrapper.write_text('#!/bin/sh\nc++ "$@" || exit 255\n')
    wrapper.chmod(0o755)
    script = ("import numpy as np, resident as rs\n"
              "try:\n    rs.jit.map('float rs_u(float v) { return v + undefined_name; }', 'rs_u')(np.ones(2, np.float32))\n"
              "except rs.CompileError as e:\n    print('compile error', 'undefined_name' in str(e))\n")
    env = dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX=str(wrapper), RESIDENT_JIT_CACHE=str(tmp_path / "c"))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert r.stdout.strip() == "compile error True", (r.stdout, r.stderr[-2000:])


def test_a_relative_compiler_is_the_one_in_the_folder_it_was_named_from(tmp_path):
    # RESIDENT_JIT_CXX=./mycxx was looked up again at each compile: after a chdir into another user's
    # folder, their ./mycxx compiled the kernel, cached under the first one's key.
    import os
    import subprocess
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder, body in ((mine, 'exec c++ "$@"'), (theirs, f"touch {tmp_path / 'planted'}; exec c++ \"$@\"")):
        folder.mkdir()
        (folder / "mycxx").write_text(f"#!/bin/sh\n{body}\n")
        (folder / "mycxx").chmod(0o755)
    script = ("import os, numpy as np, resident as rs\n"
              "rs.jit.map('float rs_a(float v) { return v + 1; }', 'rs_a')(np.ones(2, np.float32))\n"
              f"os.chdir({str(theirs)!r})\n"
              "x = np.ones(2, np.float32)\n"
              "rs.jit.map('float rs_b(float v) { return v + 2; }', 'rs_b')(x)\n"
              "print(x.tolist())\n")
    env = dict(os.environ, RESIDENT_DEVICE="cpu", RESIDENT_JIT_CXX="./mycxx", RESIDENT_JIT_CACHE=str(tmp_path / "c"))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env, cwd=mine)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[3.0, 3.0]"
    assert not (tmp_path / "planted").exists(), "the compiler of the folder moved to ran"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pow_on_the_cpu_gives_every_element_its_value_wherever_it_lies(dtype):
    # The vector body called libmvec's pow and the loop's scalar tail libm's: an ulp apart on about a
    # quarter of the values, so equal inputs came out different by place (docs/cpu.md says they do not).
    import math
    pytest.importorskip("numba")
    v = np.random.default_rng(11).uniform(0.5, 50.0, 64).astype(dtype)
    for n in (9, 1025):
        for work in (rs.op.pow(2.5), rs.stage(lambda x: x ** 2.5)):
            for value in v:
                x = rs.to_device(np.full(n, value, dtype), device="cpu")
                work(x)
                got = x.to_host()
                assert (got == got[0]).all(), (value, np.unique(got))
                assert abs(float(got[0]) - math.pow(float(value), 2.5)) <= 4 * np.spacing(dtype(got[0])), value


@pytest.mark.parametrize("c", [math.inf, -math.inf, math.nan, 1e300])
def test_non_finite_constants_run_compiled_and_compose_with_stages(c):
    x32, x64 = np.ones(5, np.float32), np.ones(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning leaks from writing the constant
        p = rs.op.add(c) | rs.op.mul(2.0)
        got = p(x32.copy())
        engine = p.engine
    with np.errstate(over="ignore"):
        want = (np.float32(1) + np.float32(c)) * np.float32(2)  # 1e300 is float32's infinity
    np.testing.assert_array_equal(got, np.full(5, want, np.float32))
    plain = rs.op.add(1.0) | rs.op.mul(2.0)
    plain(x32.copy())
    assert engine == plain.engine  # compiled wherever a plain program is (the constant fell back once)
    np.testing.assert_array_equal(p(x64.copy()), np.full(5, (1.0 + c) * 2.0))


@needs_numba
@pytest.mark.parametrize("c", [math.inf, math.nan])
def test_an_op_with_a_non_finite_constant_composes_with_a_stage(c):
    got = (rs.op.add(c) | rs.stage(lambda v: 2.0 * v))(np.ones(3))
    np.testing.assert_array_equal(got, np.full(3, (1.0 + c) * 2.0))


def test_minimum_and_maximum_keep_fmins_nan_rule_wherever_they_run():
    x = np.array([1.0, 2.0, np.nan], np.float32)
    for c in (math.nan, 2.0):
        for op, ref in ((rs.op.minimum(c), np.fmin), (rs.op.maximum(c), np.fmax)):
            want = ref(x, np.float32(c))
            np.testing.assert_array_equal(op(x.copy()), want)
            np.testing.assert_array_equal(rs.stream(op, x), want)
            assert rs.stream(op, x, reduce="max") == np.nanmax(want) if not np.isnan(want).any() else True
            if importlib_numba():
                np.testing.assert_array_equal((op | rs.stage(lambda v: v))(x.copy()), want)
    s = rs.dist.shard(np.array([1.0, 2.0, 3.0], np.float32), ["cpu"])
    assert rs.dist.min(s, rs.op.minimum(math.nan)) == 1.0


def importlib_numba():
    import importlib.util
    return importlib.util.find_spec("numba") is not None


def test_a_program_as_a_stage_computes_what_its_calls_compute():
    x32, x64 = np.ones(3, np.float32), np.zeros(3)
    for p, x in ((rs.op.mul(1e40) | rs.op.mul(1e-40), x32), (rs.op.add(1e-50) | rs.op.mul(1e50), x64),
                 (rs.op.add(1e300) | rs.op.add(-1e300), x32), (rs.op.minimum(math.nan) | rs.op.sqrt(), x32)):
        want = p(x.copy())
        np.testing.assert_array_equal(rs.stage(p)(x.copy()), want)
        np.testing.assert_array_equal((p | rs.jit.map("float same(float v) { return v; }"))(x.copy())
                                      if x.dtype == np.float32 else want, want)
    with pytest.raises(rs.InvalidArgument, match="program runs on float32 or float64"):
        rs.stage(rs.op.sqrt())(np.array([2, -4, 10], np.int32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_with_alpha_zero_reads_neither_input_on_any_algorithm(device, dtype):
    rng = np.random.default_rng()  # fresh inputs each run
    m, k, n = (int(v) for v in rng.integers(1, 40, 3))
    a = rng.standard_normal((m, k)).astype(dtype)
    a[rng.integers(m), rng.integers(k)] = np.inf  # read, it would make NaN of its row
    a[rng.integers(m), rng.integers(k)] = np.nan
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    beta = float(rng.uniform(-2, 2))
    want = (np.float64(beta) * c.astype(np.float64)).astype(dtype)  # FP64, rounded once as BLAS does
    algos = (["naive", "blocked", "vendor", "auto"] if device == "cpu" else
             ["naive", "shared", "tuned", "vendor", "auto"] if dtype == np.float32 else ["vendor", "auto"])
    for algo in algos:
        out = rs.to_device(c, device=device)
        rs.matmul(rs.to_device(a, device=device), rs.to_device(b, device=device), out=out, algo=algo, alpha=0.0,
                  beta=beta)
        got = out.to_host()
        assert np.isfinite(got).all(), algo
        np.testing.assert_allclose(got, want, rtol=np.finfo(dtype).eps, atol=0, err_msg=algo)
