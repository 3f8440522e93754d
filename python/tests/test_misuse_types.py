"""Arguments of the wrong type are resident.InvalidType (a resident.Error, and a TypeError as Python's
own functions raise), never the bare TypeError of the binding layer."""
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


def test_a_type_error_raised_by_user_code_is_left_as_it_is():
    def bad():
        raise TypeError("the user's own")

    f = rs.Flow(device="cpu")
    f.add("bad", bad)
    with pytest.raises(rs.Error) as e:
        f.run()
    assert not isinstance(e.value, rs.InvalidType)
