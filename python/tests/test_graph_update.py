"""Graph.update(work): the C++ graph::update, new work recorded into a captured graph in place; a replay
after it runs the new work (the CPU calls it; CUDA refuses work of another shape)."""
import numpy as np
import pytest

import resident as rs
from _support import gpu


def _uniform(n, seed, device):
    y = rs.empty(n, "float64", device=device)
    rs.random.fill_uniform(y, seed=seed)
    return y.to_host()


def test_a_replay_after_an_update_runs_the_new_work_on_the_cpu():
    x = rs.empty(64, "float64", device="cpu")
    seeds = []

    def fill(seed):
        def work():
            seeds.append(seed)
            rs.random.fill_uniform(x, seed=seed)
        return work

    g = rs.capture(fill(1), device="cpu")
    g.replay()
    np.testing.assert_array_equal(x.to_host(), _uniform(64, 1, "cpu"))
    g.update(fill(2))
    assert seeds == [1]  # an update records; the CPU runs nothing until a replay
    g.replay()
    g.replay()
    np.testing.assert_array_equal(x.to_host(), _uniform(64, 2, "cpu"))
    assert seeds == [1, 2, 2] and g.kernels == 1


def test_a_flows_graph_takes_an_update_too():
    x = rs.empty(32, "float64", device="cpu")
    f = rs.Flow(device="cpu")
    f.add("fill", lambda: rs.random.fill_uniform(x, seed=3), writes=[x])
    g = f.capture()
    g.update(lambda: rs.random.fill_uniform(x, seed=4))
    g.replay()
    np.testing.assert_array_equal(x.to_host(), _uniform(32, 4, "cpu"))


def test_an_update_refuses_what_is_not_work_and_never_waits_for_itself():
    x = rs.empty(8, "float64", device="cpu")
    g = rs.capture(lambda: rs.random.fill_uniform(x, seed=5), device="cpu")
    for bad in (None, 3, lambda v: v):
        with pytest.raises(rs.InvalidType):
            g.update(bad)
    with pytest.raises(rs.InvalidType):
        g.update()
    g.replay()  # the captured work is still there
    np.testing.assert_array_equal(x.to_host(), _uniform(8, 5, "cpu"))

    def updates_itself():
        g.update(lambda: None)

    g.update(updates_itself)
    with pytest.raises(rs.StageError) as e:  # refused by the graph's turn, not a wait
        g.replay()
    assert isinstance(e.value.__cause__, rs.InvalidArgument)


@gpu
def test_a_cuda_update_changes_the_recorded_values_and_refuses_another_shape():
    x = rs.empty(1 << 12, "float64", device="cuda:0")
    g = rs.capture(lambda: rs.random.fill_uniform(x, seed=1), device="cuda:0")
    g.update(lambda: rs.random.fill_uniform(x, seed=9))
    g.replay()
    rs.synchronize("cuda:0")
    np.testing.assert_array_equal(x.to_host(), _uniform(1 << 12, 9, "cuda:0"))

    def two_kernels():
        rs.random.fill_uniform(x, seed=2)
        rs.random.fill_normal(x, seed=3)

    with pytest.raises(rs.InvalidArgument, match="shape"):
        g.update(two_kernels)
    g.replay()  # the graph is still the last one recorded
    rs.synchronize("cuda:0")
    np.testing.assert_array_equal(x.to_host(), _uniform(1 << 12, 9, "cuda:0"))
