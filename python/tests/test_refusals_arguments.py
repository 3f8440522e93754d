"""Arguments a call cannot take are resident.InvalidType (a resident.Error, and a TypeError as Python's own
functions raise), never the binding layer's bare TypeError: a type none of the signatures takes, keywords
or counts of arguments that bind to none, a device, dtype, flow, stage, kernel_source or DLPack argument of
the wrong kind, each message naming what was refused and what fits; a number past every range is an
InvalidArgument. A TypeError the user's own code raises inside a call is left as it is."""
import numpy as np
import pytest

import resident as rs


def _x():
    return rs.to_device(np.arange(4, dtype=np.float32), "cpu")


CASES = {
    "to_device(device=int)": lambda: rs.to_device(np.ones(3, np.float32), device=5),
    "empty(dtype=int)": lambda: rs.empty(3, dtype=5),
    "fill_uniform(seed=str)": lambda: rs.random.fill_uniform(_x(), "a"),
    "fill_normal(mean=str)": lambda: rs.random.fill_normal(_x(), 1, 0, "mean"),
    "op.exp(str)": lambda: rs.op.exp("a"),
    "jit.uniform(seed=str)": lambda: rs.jit.uniform("a"),
    "transfer_policy(list)": lambda: rs.transfer_policy(["allow"]).__enter__(),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrongly_typed_argument_is_invalid_type(case):
    with pytest.raises(rs.InvalidType) as e:
        CASES[case]()
    assert isinstance(e.value, rs.Error) and isinstance(e.value, TypeError)
    assert "does not fit" in str(e.value) and "argument" in str(e.value)


def test_wrapped_functions_keep_their_names_documents_and_results():
    assert rs.to_device.__name__ == "to_device" and rs.to_device.__doc__
    assert rs.op.exp.__name__ == "exp"
    x = _x()
    assert rs.sum(x) == pytest.approx(6.0)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(4, dtype=np.float32))


def test_arguments_that_bind_to_no_signature_are_invalid_type():
    x = np.ones(8, np.float32)
    p = rs.op.sqrt() | rs.op.neg()
    for call in (lambda: rs.random.fill_uniform(x, 1, foo=1), lambda: rs.random.fill_uniform(x),
                 lambda: rs.random.fill_normal(x), lambda: rs.random.fill_bits(np.ones(4, np.uint32), 1, bar=2),
                 lambda: rs.jit.stats(1), lambda: rs.transfer_policy.current(1), lambda: rs.jit.sum(1),
                 lambda: rs.jit.uniform(), lambda: rs.stage(lambda v: v, 1, 2),
                 lambda: p.sum(None), lambda: rs.op.sqrt().sum(None), lambda: p.sum(x, None, None),
                 lambda: rs.to_device(x).__dlpack__(1), lambda: rs.to_device(x).__dlpack_device__(1),
                 lambda: rs.to_device(x).__dlpack__(max_version=("a", "b")),
                 lambda: rs.to_device(x).__dlpack__(max_version=(2 ** 70, 0)),
                 lambda: rs.stage("float f(float v) { return v; }").kernel_source(None, "float32"),
                 lambda: len(rs.to_device(np.array(3.0, np.float32)))):
        with pytest.raises(rs.InvalidType):
            call()
    np.testing.assert_allclose(p(np.full(4, 4.0, np.float32)), np.full(4, -2.0))  # usable after


@pytest.mark.parametrize("call", [
    lambda x: rs.stream(rs.op.sqrt(), x, reduc="sum"),
    lambda x: rs.stream(rs.op.sqrt()),
    lambda x: rs.stream(rs.op.sqrt(), x, None, "sum"),
    lambda x: rs.ledger(1),
    lambda x: rs.streaming.last_summary(1),
    lambda x: rs.to_numba(),
    lambda x: rs.dist.shard(),
    lambda x: rs.dist.shard(6, ["cpu"], foo=1),
    lambda x: rs.dist.sum(rs.dist.shard(x, ["cpu"]), wrk=None),
    lambda x: rs.profile().to_json(),
    lambda x: rs.stream(rs.op.sqrt(), x, reduce=np.array(["sum", "min"])),
    lambda x: rs.stream(rs.op.sqrt(), x, progress=lambda: None),
    lambda x: rs.Flow(device="cpu").add("a", lambda: None, reads=rs.to_device(x, device="cpu")),
    lambda x: rs.to_device(np.zeros(3, np.longdouble)),
])
def test_arguments_that_bind_to_no_signature_or_type_are_invalid_type(call):
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(rs.InvalidType):
        call(x)
    np.testing.assert_array_equal(x, np.arange(4))


def test_messages_name_what_was_refused_and_the_range_that_holds():
    with pytest.raises(rs.InvalidArgument, match="give 1 to 256"):
        rs.Flow(device="cpu", streams=10**30)
    with pytest.raises(rs.InvalidType, match="float128|longdouble"):
        rs.to_device(np.zeros(3, np.longdouble))
    import array
    with pytest.raises(rs.InvalidType, match="buffer format 'u'|format 'w'"):
        rs.to_device(array.array("u", "ab"))


def test_kernel_source_of_a_device_that_is_no_name_says_so_as_itself():
    with pytest.raises(rs.InvalidType, match="kernel_source: device is a int"):
        rs.jit.map("float f(float v) { return v; }").kernel_source(["float32"], "float32", device=0)


def test_argument_mistakes_on_programs_chains_and_kernel_source_are_typed():
    p = rs.op.sqrt() | rs.op.sqrt()
    with pytest.raises(rs.InvalidType, match="bogus"):
        p.sum(np.ones(3), bogus=1)
    with pytest.raises(rs.InvalidType, match="one array"):
        p.sum()
    assert rs.op.sqrt().sum(np.full(3, 4.0)) == 6.0
    c = rs.stage("double f(double v) { return v; }")
    with pytest.raises(rs.InvalidType, match="bogus"):
        c(np.ones(3), bogus=1)
    for bad in ("bogus", "float16"):
        with pytest.raises(rs.InvalidType, match="kernel_source"):
            c.kernel_source([bad], "float64")


def test_flow_array_stage_and_pinned_arguments_of_the_wrong_kind_are_typed():
    for call in (lambda: rs.Flow(streams=1.5), lambda: rs.Flow(device=0), lambda: rs.Flow().add(None, lambda: None),
                 lambda: rs.Flow().add("a", lambda: None, after=["0"]), lambda: rs.Flow().add("a", lambda: None, reads=None),
                 lambda: rs.to_device(np.ones(2, np.float32), device="cpu").to_host(x=1), lambda: rs.stage(3),
                 lambda: rs.stage(b"float f(float v) { return v; }"),
                 lambda: rs.streaming.pinned_empty(4, "float16")):
        with pytest.raises(rs.InvalidType):
            call()
    with pytest.raises(rs.InvalidArgument, match="give 1 to 256"):
        rs.Flow(streams=2 ** 31)
    f = rs.Flow(device="cpu", streams=2)  # still usable
    f.add("a", lambda: None)
    f.run()


def test_dlpack_arguments_of_the_wrong_kind_are_typed_errors():
    x = rs.to_device(np.ones(3, np.float32))
    with pytest.raises(rs.InvalidType, match="max_version"):
        x.__dlpack__(max_version=1)
    with pytest.raises(rs.InvalidType, match="copy"):
        x.__dlpack__(copy="yes")
    assert rs.sum(x) == 3  # the refusals left x usable


def test_bare_python_errors_became_typed():
    with pytest.raises(rs.InvalidArgument):
        rs.stream(lambda v: v, ())
    with pytest.raises(rs.InvalidType):
        rs.jit.reduce(lambda a, b: a + b, "x")
    with pytest.raises(rs.InvalidType):
        rs.dist.Communicator(5)


def test_an_operations_constant_is_taken_exactly_or_refused():
    # True was taken as 1.0, 2**53 + 1 became 2**53, and parse("add(1e400)") gave inf, unsaid.
    for bad in (True, np.bool_(False)):
        with pytest.raises(rs.InvalidType, match="is a bool"):
            rs.op.add(bad)
        with pytest.raises(rs.InvalidType, match="is a bool"):
            rs.op.affine(1.0, bad)
    for inexact in (2**53 + 1, np.uint64(2**64 - 1), -(2**60) - 1):
        with pytest.raises(rs.InvalidArgument, match="is not a double exactly"):
            rs.op.mul(inexact)
    assert rs.op.add(2**53).a == 2.0**53 and rs.op.pow(np.int32(3)).a == 3.0
    assert rs.op.add(2**53 + 1.0).a == 2.0**53  # a float: its rounding is the caller's
    with pytest.raises(rs.InvalidArgument, match="beyond the range of a double"):
        rs.op.parse("add(1e400)")
    assert rs.op.parse("add(-inf)").a == -np.inf


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


def test_a_type_error_raised_by_user_code_is_left_as_it_is():
    def bad():
        raise TypeError("the user's own")

    f = rs.Flow(device="cpu")
    f.add("bad", bad)
    with pytest.raises(rs.Error) as e:
        f.run()
    assert not isinstance(e.value, rs.InvalidType)


def test_a_type_error_raised_inside_a_call_neither_repeats_it_nor_becomes_invalid_type():
    class Scalarish(np.ndarray):  # a size-1 array that converts to a float (NumPy before 2.4)
        def __float__(self):
            return float(np.asarray(self).reshape(-1)[0])
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 1:
            raise TypeError("other(): incompatible function arguments. The following argument types are supported")
    x = np.array([1.0]).view(Scalarish)
    with pytest.raises(TypeError, match="other") as raised:
        rs.stream(rs.op.add(1), x, out=x, progress=progress)
    assert type(raised.value) is TypeError and calls == [1] and np.asarray(x)[0] == 2.0  # the work ran once, the callback's error unchanged


class _SurrogateRepr:
    def __repr__(self):
        return "\udcff"


class _MinusOne(_SurrogateRepr):
    def __index__(self):
        return -1


class _IndexRaises:
    def __index__(self):
        raise ValueError("no index")


@pytest.mark.parametrize("call, error", [
    (lambda: rs.set_pool_limit("\udcff", "cpu"), rs.InvalidArgument),     # text that is not UTF-8
    (lambda: rs.set_pool_limit(_SurrogateRepr(), "cpu"), rs.InvalidType),
    (lambda: rs.set_pool_limit(_IndexRaises(), "cpu"), rs.InvalidType),
    (lambda: rs.set_pool_limit(10**5000, "cpu"), rs.InvalidArgument),      # past Python's digits for text
    (lambda: rs.Event("cpu").record(_MinusOne()), rs.InvalidArgument),
    (lambda: rs.Stream("cpu").wait_for(_MinusOne()), rs.InvalidArgument),
    (lambda: rs.Event("cpu").record(10**5000), rs.InvalidArgument),
    (lambda: rs.stream(rs.op.sqrt(), np.ones(8, np.float32), host_threads=10**5000), rs.InvalidArgument),
    (lambda: rs.stream(rs.op.sqrt(), np.ones(8, np.float32), depth=-10**5000), rs.InvalidArgument),
])
def test_arguments_whose_text_python_cannot_make_are_still_typed_errors(call, error):
    # Their messages quote the argument: a lone surrogate, a raising __repr__ or an int of more digits
    # than Python turns into text raised std::bad_cast or ValueError while the message was made.
    try:
        with pytest.raises(error):
            call()
    finally:
        rs.clear_pool_limit("cpu")
    assert rs.pool_limit("cpu") is None


def test_streams_and_events_refuse_a_second_init_and_take_weak_references():
    import weakref
    import gc
    import warnings
    for make in (lambda: rs.Stream("cpu"), lambda: rs.Event("cpu")):
        obj = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # refused by the package, before nanobind warns
            for again in ((), ("cpu",), ("cuda:0",), (1, 2)):
                with pytest.raises(rs.InvalidType, match=f"resident.{type(obj).__name__} is made once"):
                    obj.__init__(*again)
        assert obj.device == "cpu"  # still usable
        ref = weakref.ref(obj)
        del obj
        gc.collect()
        assert ref() is None


class _ReprRaises:
    def __repr__(self):
        raise ValueError("repr failed")


class _IndexAndReprRaise(_ReprRaises):
    def __index__(self):
        raise ValueError("index failed")


class _Producer:
    """A __dlpack__ that gives nothing, its dtype's name not UTF-8."""
    dtype = "float16\ud800"

    def __dlpack__(self, **kw):
        raise BufferError("no")

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("call, error", [
    (lambda: rs.empty((3,), "\ud800"), rs.InvalidType),
    (lambda: rs.cumsum(_Producer()), rs.InvalidType),
    (lambda: rs.Flow().add("a", lambda: None, after=_BadSeq()), rs.InvalidType),
    (lambda: rs.op.add(2**70000), rs.InvalidArgument),
    (lambda: rs.Flow().add(2**70000, lambda: None), rs.InvalidArgument),
    (lambda: rs.stream(rs.op.sqrt(), np.ones(8, np.float32), chunk=_ReprRaises()), rs.InvalidType),
    (lambda: rs.stream(rs.op.sqrt(), np.ones(8, np.float32), timeline=_ReprRaises()), rs.InvalidType),
    (lambda: rs.random.fill_uniform(rs.dist.shard(np.zeros(4, np.float32), ["cpu", "cpu"]), 1,
                                    _IndexAndReprRaise()), rs.InvalidType),
])
def test_text_python_cannot_make_in_the_package_s_own_checks_stays_typed(call, error):
    with pytest.raises(error):
        call()


class _BadSeq:
    def __len__(self):
        return 1

    def __getitem__(self, i):
        raise ValueError("bad \ud800")
