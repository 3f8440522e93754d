"""A device's properties (the C++ resident::properties) as a named tuple, and the build's switches."""
import os

import pytest

import resident as rs
from _support import GPU, gpu


def test_the_cpus_properties_are_the_machines():
    p = rs.device_properties("cpu")
    assert isinstance(p, rs.DeviceProperties) and isinstance(p, tuple)
    assert p.device == "cpu" and isinstance(p.name, str) and p.name
    assert p.multiprocessors == os.cpu_count()  # hardware threads, as the C++ reads them
    assert p.memory_bytes == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert p.compute_capability == (0, 0) and p.warp_size == 1
    assert len(p.max_block_dim) == 3 and len(p.max_grid_dim) == 3
    assert p.shared_per_block_optin >= p.shared_per_block > 0
    assert p._asdict()["l2_bytes"] == p.l2_bytes >= 0


def test_the_default_device_and_refusals():
    assert rs.device_properties().device == rs.default_device()
    with pytest.raises(rs.InvalidArgument):
        rs.device_properties("tpu")
    with pytest.raises(rs.InvalidType):
        rs.device_properties(0)
    if not GPU:
        with pytest.raises(rs.DeviceUnavailable):
            rs.device_properties("cuda:0")


def test_the_builds_switches_are_bools():
    for flag in (rs.cuda_compiled, rs.debug_checks, rs.debug_sync):
        assert isinstance(flag, bool)
    if GPU:
        assert rs.cuda_compiled
    if not rs.cuda_compiled:
        assert rs.cuda_device_count() == 0 and "backend" in rs.cuda_unavailable_reason()
    assert rs.library_version.count(".") == 2


@gpu
def test_a_gpus_properties():
    p = rs.device_properties("cuda:0")
    assert p.device == "cuda:0" and p.multiprocessors > 0 and p.memory_bytes > 0
    assert p.compute_capability >= (3, 0) and p.warp_size == 32 and p.max_threads_per_block >= 512
