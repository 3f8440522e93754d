"""The figures C++ errors carry, read from the Python exceptions: a stage's name and the exception it
raised (chained as __cause__), a vendor library's name and status, an allocation's byte counts, a
compiler's log; None on the classes, for errors raised from Python."""
import numpy as np
import pytest

import resident as rs


class Boom(Exception):
    pass


def test_a_flow_stage_error_names_the_stage_and_chains_what_it_raised():
    f = rs.Flow(device="cpu")

    def explode():
        raise Boom("the stage's own error")

    f.add("explodes", explode)
    with pytest.raises(rs.StageError) as e:
        f.run()
    assert e.value.stage == "explodes"
    assert isinstance(e.value.__cause__, Boom) and str(e.value.__cause__) == "the stage's own error"
    assert e.value.__cause__.__traceback__ is not None  # where in the stage it was raised


def test_a_resident_error_inside_a_stage_is_chained_as_itself():
    x = rs.empty(4, "int32", device="cpu")
    f = rs.Flow(device="cpu")
    f.add("fill", lambda: rs.random.fill_uniform(x, seed=1), writes=[x])  # uniform fills take floats
    with pytest.raises(rs.StageError) as e:
        f.run()
    assert e.value.stage == "fill" and isinstance(e.value.__cause__, rs.InvalidArgument)


def test_a_captured_function_raising_at_a_cpu_replay_chains_its_error():
    calls = []

    def work():
        calls.append(1)
        if len(calls) > 1:
            raise KeyError("second")

    g = rs.capture(work, device="cpu")
    g.replay()
    with pytest.raises(rs.StageError) as e:
        g.replay()
    assert e.value.stage == "captured work" and isinstance(e.value.__cause__, KeyError)


def test_out_of_memory_carries_the_figures_of_the_failed_allocation():
    rs.set_pool_limit("1MiB", device="cpu")
    try:
        with pytest.raises(rs.OutOfMemory) as e:
            rs.empty(1 << 20, "float64", device="cpu")
    finally:
        rs.clear_pool_limit(device="cpu")
    o = e.value
    assert isinstance(o, MemoryError)
    assert o.requested_bytes == 8 << 20 and o.pool_limit_bytes == 1 << 20
    assert o.pool_in_use_bytes <= o.pool_limit_bytes and o.pool_reserved_bytes >= 0 and o.free_bytes >= 0
    assert o.largest_free_block_bytes is None or o.largest_free_block_bytes >= 0


def test_a_failed_vendor_call_carries_the_library_its_status_and_name():
    with pytest.raises(rs.LibraryError) as e:
        rs._core._raise_library_error("cuBLAS", 13, "CUBLAS_STATUS_EXECUTION_FAILED")
    assert (e.value.library, e.value.code, e.value.name) == ("cuBLAS", 13, "CUBLAS_STATUS_EXECUTION_FAILED")
    assert type(e.value) is rs.LibraryError
    with pytest.raises(rs.CudaError) as e:
        rs._core._raise_library_error("CUDA", 2, "cudaErrorMemoryAllocation")
    assert (e.value.library, e.value.code, e.value.name) == ("CUDA", 2, "cudaErrorMemoryAllocation")


def test_a_cpp_stage_that_does_not_compile_carries_the_compilers_log():
    x = rs.to_device(np.ones(8, np.float32), device="cpu")
    with pytest.raises(rs.CompileError) as e:
        rs.stage("float g(float v) { return v +; }")(x)
    assert isinstance(e.value.log, str) and e.value.log  # the compiler's own lines


def test_errors_raised_from_python_have_the_attributes_as_none():
    assert rs.StageError("x").stage is None
    assert (rs.CudaError("x").library, rs.LibraryError("x").code, rs.LibraryError("x").name) == (None, None, None)
    o = rs.OutOfMemory("x")
    assert o.requested_bytes is None and o.pool_limit_bytes is None
    assert rs.CompileError("x").log is None
