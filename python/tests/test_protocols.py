"""Python's own protocols on resident's objects (resident/_protocols.py): copies and pickles that work
give the right values, on both backends; the others are refused as resident.Error subclasses that say what
to do, never the interpreter's bare TypeError: pickles of chains and communicators, a sharded array's
elements, `del x[i]`, the operators and formats Python calls, T.__new__(T). NumPy reads a CPU array in
place."""
import copy
import math
import pickle

import numpy as np
import pytest

import resident as rs
from _support import GPU, DlpackOnly

DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, lambda x: copy.deepcopy([x, x])[0]])
def test_a_copied_array_is_a_new_array_on_its_device_with_the_same_values(device, how):
    host = np.random.default_rng(3).standard_normal(1001).astype(np.float64)
    x = rs.to_device(host, device=device)
    before = rs.ledger()
    y = how(x)
    assert isinstance(y, rs.Array) and y is not x and y.data_ptr != x.data_ptr
    assert (y.shape, y.dtype, y.device) == (x.shape, x.dtype, x.device)
    after, before = rs.ledger()[device], before[device]
    assert after["h2d_bytes"] == before["h2d_bytes"] and after["d2h_bytes"] == before["d2h_bytes"]
    rs.op.mul(2.0)(x)  # the copy holds its own memory: a change to x leaves it as it was
    np.testing.assert_array_equal(y.to_host(), host)
    np.testing.assert_array_equal(x.to_host(), 2.0 * host)


@pytest.mark.parametrize("device", DEVICES)
def test_ops_and_programs_pickle_by_value_and_run_the_same_after(device):
    # The constants travel exactly (op.name rounds them for messages); the program runs the same.
    p = rs.op.affine(1 / 3, 2 / 7) | rs.op.square() | rs.op.add(0.1) | rs.op.pow(1 / 3) | rs.op.maximum(0.25)
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, rs.program) and q.name == p.name
    assert [(o.name, o.a, o.b) for o in q.ops] == [(o.name, o.a, o.b) for o in p.ops]
    o = pickle.loads(pickle.dumps(rs.op.mul(math.pi), protocol=2))
    assert isinstance(o, rs.op) and o.a == math.pi
    host = np.linspace(-2.0, 2.0, 4097)
    x, y = rs.to_device(host, device=device), rs.to_device(host, device=device)
    p(x)
    q(y)
    np.testing.assert_array_equal(x.to_host(), y.to_host())
    ref = np.maximum((((host / 3 + 2 / 7) ** 2) + 0.1) ** (1 / 3), 0.25)  # FP64 reference
    np.testing.assert_allclose(y.to_host(), ref, rtol=1e-14, atol=0)
    assert copy.copy(p) is p and copy.deepcopy(p) is p and copy.deepcopy(o) is o


def test_an_op_unpickled_from_a_forged_name_is_refused():
    from resident._protocols import _op_made
    for name in ("parse", "__class__", "nothing", "_private", "mro", "sum", "name"):
        with pytest.raises(rs.InvalidArgument, match="no operation named"):
            _op_made(name, 1.0, 0.0)


def test_what_holds_device_memory_streams_or_captured_work_is_not_pickled():
    x = rs.to_device(np.ones(8, np.float32), device="cpu")
    with pytest.raises(rs.InvalidType, match="to_host"):
        pickle.dumps(x)
    flow = rs.Flow(device="cpu")
    graph = rs.capture(lambda: None, device="cpu")
    for thing in (flow, graph):
        for how in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(rs.InvalidType, match="is not pickled or copied"):
                how(thing)
    with rs.profile() as prof:
        rs.sum(x)
    with pytest.raises(rs.InvalidType, match="to_json"):
        pickle.dumps(prof)


@pytest.mark.parametrize("thing", ["Array", "op", "Graph"])
def test_classes_made_by_functions_refuse_construction_naming_the_function(thing):
    with pytest.raises(rs.InvalidType, match=r"rs\.(to_device|op\.sqrt|capture)"):
        getattr(rs, thing)()
    with pytest.raises(rs.InvalidType):
        getattr(rs, thing)(1, key=2)


REFUSED = {
    "x[i]": lambda x: x[0],
    "x[i] = v": lambda x: x.__setitem__(0, 1.0),
    "iter(x)": lambda x: list(x),
    "v in x": lambda x: 1.0 in x,
    "bool(x)": lambda x: bool(x),
    "float(x)": lambda x: float(x),
    "int(x)": lambda x: int(x),
    "index(x)": lambda x: range(x),
    "x + y": lambda x: x + 1,
    "x + y ": lambda x: 1 + x,
    "x * y": lambda x: x * x,
    "x / y": lambda x: 2 / x,
    "x ** y": lambda x: x ** 2,
    "<": lambda x: x < 1,
    "-x": lambda x: -x,
    "abs(x)": lambda x: abs(x),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("what", list(REFUSED))
def test_element_access_truth_and_operators_on_an_array_are_refused_naming_the_way(device, what):
    host = np.arange(6, dtype=np.float32)
    x = rs.to_device(host, device=device)
    with pytest.raises(rs.InvalidType, match=r"resident\.Array: .*(to_host|item|rs\.op|rs\.sum)"):
        REFUSED[what](x)
    np.testing.assert_array_equal(x.to_host(), host)  # nothing was lost
    with pytest.raises(rs.InvalidType):
        x += 1  # in place too
    assert isinstance(x, rs.Array)


@pytest.mark.parametrize("device", DEVICES)
def test_item_reads_a_one_element_array_and_refuses_more(device):
    assert rs.to_device(np.float64(2.5), device=device).item() == 2.5
    assert rs.to_device(np.array([7], np.int32), device=device).item() == 7
    with pytest.raises(rs.InvalidArgument, match="3 elements"):
        rs.to_device(np.ones(3, np.float32), device=device).item()
    with pytest.raises(rs.InvalidType, match=r"x\.item\(\)"):
        len(rs.to_device(np.float32(1), device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_operator_is_rs_matmul(device):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((33, 17)), rng.standard_normal((17, 9))
    got = (rs.to_device(a, device=device) @ rs.to_device(b, device=device)).to_host()
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    with pytest.raises(rs.ShapeMismatch):
        rs.to_device(a, device=device) @ rs.to_device(a, device=device)


def test_numpy_reads_a_cpu_array_and_a_dtype_it_cannot_view_without_a_copy_is_typed():
    x = rs.to_device(np.arange(4, dtype=np.float32), device="cpu")
    np.testing.assert_array_equal(np.asarray(x), np.arange(4))
    with pytest.raises(rs.InvalidArgument, match="copy=False"):
        x.__array__(np.float64, copy=False)


@pytest.mark.parametrize("device", DEVICES)
def test_an_operator_with_a_numpy_or_cupy_array_on_the_other_side_is_theirs(device):
    # x + n: NumPy's (or CuPy's) reflected operator reads x as it would without resident's refusal.
    x = rs.to_device(np.arange(4, dtype=np.float32), device=device)
    if device == "cpu":
        n = np.ones(4, np.float32)
    else:
        cp = pytest.importorskip("cupy")
        n = cp.ones(4, cp.float32)
    for got, want in ((x + n, np.arange(4) + 1), (x * n, np.arange(4)), (x < n, np.arange(4) < 1),
                      (n - x, 1 - np.arange(4)), (x >= n, np.arange(4) >= 1)):
        got = got.get() if hasattr(got, "get") else got
        np.testing.assert_array_equal(got, want)
    with pytest.raises(rs.InvalidType):
        x + x
    with pytest.raises(rs.InvalidType):
        x < 2.0


def test_item_given_arguments_is_invalid_type():
    x = rs.to_device(np.ones(1, np.float32), device="cpu")
    for call in (lambda: x.item(0), lambda: x.item(k=1)):
        with pytest.raises(rs.InvalidType):
            call()
    assert x.item() == 1.0


@pytest.mark.parametrize("make", [lambda: rs.jit.sum(), lambda: rs.jit.uniform(1),
                                  lambda: rs.jit.map("float f(float v) { return v; }"),
                                  lambda: rs.stage(rs.op.sqrt())])
def test_a_chain_is_not_pickled_and_its_copy_is_itself(make):
    import copy
    import pickle
    chain = make()
    with pytest.raises(rs.InvalidType, match="build it again"):
        pickle.dumps(chain)
    assert copy.copy(chain) is chain and copy.deepcopy(chain) is chain


def test_a_communicator_is_not_pickled():
    import pickle
    with rs.dist.Communicator(["cpu"]) as comm:
        with pytest.raises(rs.InvalidType, match="from_launcher"):
            pickle.dumps(comm)


@pytest.mark.parametrize("what", ["np.asarray", "x[0]", "list", "x + 1", "x @ x", "item", "bool", "pickle",
                                  "copy"])
def test_a_sharded_arrays_elements_stay_on_their_devices(what):
    import copy
    import pickle
    x = rs.dist.shard(np.arange(6, dtype=np.float32), ["cpu", "cpu"])
    call = {"np.asarray": np.asarray, "x[0]": lambda x: x[0], "list": list, "x + 1": lambda x: x + 1,
            "x @ x": lambda x: x @ x, "item": lambda x: x.item(), "bool": bool, "pickle": pickle.dumps,
            "copy": copy.deepcopy}[what]
    with pytest.raises(rs.InvalidType, match="to_host|rs.op|rs.sum"):
        call(x)
    np.testing.assert_array_equal(x.to_host(), np.arange(6))


def test_del_of_an_element_is_refused_as_indexing_is():
    x = rs.to_device(np.arange(4.0))
    s = rs.dist.shard(np.arange(4.0), ["cpu", "cpu"], dtype="float64")
    for a in (x, s):
        with pytest.raises(rs.InvalidType, match=r"del x\[i\]"):
            del a[0]
        with pytest.raises(rs.InvalidType, match=r"del x\[i\]"):
            del a[1:3]
    np.testing.assert_array_equal(x.to_host(), np.arange(4.0))
    np.testing.assert_array_equal(s.to_host(), np.arange(4.0))


def test_protocols_python_itself_calls_on_an_array():
    import math
    import weakref
    x = rs.to_device(np.arange(3, dtype=np.float32), device="cpu")
    assert weakref.ref(x)() is x
    for call in (lambda: x | 1, lambda: divmod(x, 2), lambda: round(x), lambda: math.trunc(x),
                 lambda: f"{x:.2f}", lambda: x.__array__(dtype="no such type")):
        with pytest.raises(rs.InvalidType):
            call()
    assert f"{x}" == repr(x)
    y = rs.to_device(np.zeros(3, np.float32), device="cpu")
    np.add(np.arange(3, dtype=np.float32), 1, out=y)  # a NumPy ufunc writes a CPU array in place
    np.testing.assert_array_equal(y.to_host(), [1, 2, 3])


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


@pytest.mark.parametrize("cls", [rs.Array, rs.Flow, rs.Graph, rs.op, rs.program])
def test_an_instance_nanobind_never_initialized_is_not_made(cls):
    with pytest.raises(rs.InvalidType, match="__new__ makes no usable object"):
        cls.__new__(cls)
    assert len(rs.Flow()) == 0 and rs.to_device(np.ones(2), device="cpu").size == 2  # the ways that make one


def test_a_reflected_product_keeps_the_operands_order():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = np.arange(12, dtype=np.float64).reshape(3, 4)
    product = DlpackOnly(a) @ rs.to_device(b, device="cpu")  # no @ of its own: x.__rmatmul__
    np.testing.assert_array_equal(product.to_host(), a @ b)


def test_numpys_copy_and_dtype_requests_are_kept():
    x = rs.to_device(np.arange(3.0), device="cpu")
    c = np.array(x, copy=True)
    c[0] = 42.0
    np.testing.assert_array_equal(x.to_host(), [0.0, 1.0, 2.0])
    assert not np.shares_memory(c, np.asarray(x))
    m = x.__array__(np.float32)  # the protocol as consumers other than NumPy's asarray call it
    assert m.dtype == np.float32
    np.testing.assert_array_equal(m, np.arange(3, dtype=np.float32))
