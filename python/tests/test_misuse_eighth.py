"""Misuse found by an eighth sweep: sharded arrays whose shards are each other's memory gave wrong values,
a read-only shard was found only after the shards before it were written, a `nonlocal` write in a
stage was dropped, and an argument's own code (a stream's __cuda_stream__, a name's __eq__, a device's
__str__) raised through resident as a bare exception; T.__new__(T) made objects nothing could use."""
import numpy as np
import pytest

import resident as rs
from _support import GPU, needs_numba

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])


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


def _closing_over():
    k = 1.0

    def f(v):
        nonlocal k
        k = 5.0
        return v * k
    return f


def _inner_writes(v):
    acc = 0.0

    def add(x):
        nonlocal acc
        acc += x
    add(v)
    return acc


@needs_numba
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [_closing_over(), _inner_writes], ids=["nonlocal", "inner"])
def test_a_stage_that_writes_a_variable_of_an_enclosing_function_is_refused(device, fn):
    # Numba compiled the write as a local one: f(2.0) gave 2.0 where Python gives 10.0.
    x = rs.to_device(np.array([2.0, 3.0]), device=device)
    for make in (rs.stage, rs.fuse):
        with pytest.raises(rs.CompileError, match="of an enclosing function"):
            make(fn)(x)
    np.testing.assert_array_equal(x.to_host(), [2.0, 3.0])

    def reads(v):  # reading what it closes over is fine
        k = 2.0
        return (lambda y: y * k)(v)
    np.testing.assert_array_equal(rs.stage(reads)(x).to_host(), [4.0, 6.0])


class _Raises:
    def __cuda_stream__(self):
        raise ValueError("closed")

    def __index__(self):
        raise ValueError("index")

    def __eq__(self, other):
        raise ValueError("eq")

    def __bool__(self):
        raise ValueError("bool")

    def __iter__(self):
        raise ValueError("iter")

    def __str__(self):
        raise ValueError("str")

    __hash__ = None


class _IndexRaises:
    def __index__(self):
        raise ValueError("index")


@pytest.mark.parametrize("call", [
    lambda: rs.op.sqrt()(np.ones(4), stream=_Raises()),
    lambda: rs.op.sqrt()(np.ones(4), stream=_IndexRaises()),
    lambda: rs.sum(np.ones(4), stream=_Raises()),
    lambda: rs.random.fill_uniform(np.ones(4), 1, stream=_Raises()),
    lambda: rs.stage("float f(float v) { return v; }", name=_Raises()),
    lambda: rs.stage(lambda v: v, float_literals=_Raises()),
    lambda: rs.dist.shard(np.ones(4), [_Raises()]),
    lambda: rs.dist.shard(np.ones(4), _Raises()),
    lambda: rs.stage("float f(float v) { return v; }").kernel_source(["float32"], "float32", device=_Raises()),
    lambda: rs.to_device(np.ones(3), device="cpu").__array__(copy=_Raises()),
], ids=["stream", "stream-index", "sum-stream", "fill-stream", "name", "float_literals", "device-name",
        "devices", "kernel_source-device", "array-copy"])
def test_what_an_arguments_own_code_raises_is_invalid_type(call):
    with pytest.raises(rs.InvalidType):
        call()


@pytest.mark.parametrize("cls", [rs.Array, rs.Flow, rs.Graph, rs.op, rs.program])
def test_an_instance_nanobind_never_initialized_is_not_made(cls):
    with pytest.raises(rs.InvalidType, match="__new__ makes no usable object"):
        cls.__new__(cls)
    assert len(rs.Flow()) == 0 and rs.to_device(np.ones(2), device="cpu").size == 2  # the ways that make one


@pytest.mark.parametrize("fn", [print, open, input])
def test_a_builtin_that_needs_the_interpreter_is_refused_with_advice_that_works(fn):
    with pytest.raises(rs.InvalidType, match="needs the Python interpreter") as e:
        rs.stage(fn)
    assert "rs.stage(lambda" not in str(e.value)


_S = "float s(float v) { return v; }"
_AFTER = "float r(float v) { return sqrtf(v) + 1.0f; }"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("text", ["#define/**/sqrtf(v) v\n", "/**/#define sqrtf(v) v\n", "%:define sqrtf(v) v\n",
                                  "#def\\\nine sqrtf(v) v\n", "#define \\\nsqrtf(v) v\n", "#define\fsqrtf(v) v\n",
                                  "#define sqrtf(v) \\ \n v\n", "#define sqrtf(v) v /* a comment\n over lines */\n"],
                         ids=["comment-inside", "comment-before", "digraph", "spliced-name", "spliced-argument",
                              "form-feed", "splice-after-blank", "comment-across-lines"])
def test_a_macro_however_spelled_ends_with_its_stage(device, text):
    # The directives are found as the preprocessor finds them: each spelling made sqrtf the identity after.
    x = rs.to_device(np.array([4.0, 9.0], np.float32), device=device)
    if device != "cpu" and "\\ \n" in text:  # a blank after the backslash: a splice to GCC, not to NVRTC
        with pytest.raises(rs.CompileError):
            (rs.stage(text + _S) | rs.stage(_AFTER))(x)
        return
    got = (rs.stage(text + _S) | rs.stage(_AFTER))(x).to_host()
    np.testing.assert_allclose(got, [3.0, 4.0], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_nothing_is_inserted_into_a_raw_string_and_line_numbers_hold_after_a_comment(device):
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    text = 'float n(float v) { const char* s = R"(\n#define Q 1\n)"; int k = 0; while (s[k]) ++k; return v + k; }'
    np.testing.assert_array_equal(rs.stage(text)(x).to_host(), [14.0, 15.0])  # 13 characters, none added
    bad = "#define K 2.0f /* doubling\n factor */\nfloat t(float v) { return v * K; }\nfloat u(float v) { return nope; }"
    with pytest.raises(rs.CompileError, match=r"stage 1(:4:|\(4\))"):
        rs.stage(bad, name="t")(x)


@pytest.mark.parametrize("device", DEVICES)
def test_the_markers_names_are_kept_from_stages(device):
    # A stage naming the marker could have kept its redefinition of an earlier macro for the stages after.
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    with pytest.raises(rs.CompileError, match="RS_NEW_MACRO_, which resident keeps for itself"):
        rs.stage("#define RS_NEW_MACRO_0_K\n" + _S)(x)
