"""Shared by the Python tests: the GPU marker and a skip for a peer library that is missing or broken."""
import importlib

import pytest

import resident as rs

GPU = rs.cuda_device_count() > 0
gpu = pytest.mark.skipif(not GPU, reason="no CUDA device: " + rs.cuda_unavailable_reason())


def import_or_skip(name):
    """The module `name`, or a skip saying why it cannot be used here."""
    try:
        return importlib.import_module(name)
    except Exception as e:  # missing or broken on this machine
        pytest.skip(f"{name} is not usable here: {e!r}"[:200])
