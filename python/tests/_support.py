"""Shared by the Python tests: the GPU marker and a skip for a peer library that is missing or broken."""
import importlib

import pytest

import resident as rs

GPU = rs.cuda_device_count() > 0
gpu = pytest.mark.skipif(not GPU, reason="no CUDA device: " + rs.cuda_unavailable_reason())


def import_or_skip(name):
    """The module `name`, or a skip when it is not installed (a module that is installed but fails to
    import fails the test: that is a broken environment, not an absent library)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not (name == e.name or name.startswith(e.name + ".")):
            raise
        pytest.skip(f"{name} is not installed ({e.name} is absent)")
