"""A device's properties as a named tuple (the C++ resident::properties)."""
from collections import namedtuple

from . import _core, _typed

DeviceProperties = namedtuple("DeviceProperties", [
    "device", "name", "multiprocessors", "memory_bytes", "compute_capability", "warp_size", "max_threads_per_block",
    "max_threads_per_multiprocessor", "max_blocks_per_multiprocessor", "max_block_dim", "max_grid_dim",
    "shared_per_block", "shared_per_block_optin", "l2_bytes"])
DeviceProperties.__doc__ = """What a device is and allows: its name ("cuda:0", "cpu") and model name, its
multiprocessors (SMs on a GPU, hardware threads on the CPU), memory in bytes (global on a GPU, physical on
the CPU), compute capability (major, minor; (0, 0) on the CPU), threads per warp (1 on the CPU), the most
threads per block and per multiprocessor, blocks per multiprocessor, block and grid extents (x, y, z),
shared memory per block without and with opt-in, and the L2 cache in bytes (0 where unknown)."""


def device_properties(device=None):
    """The properties of the device (the default device's when None), as a DeviceProperties.
    @raises DeviceUnavailable for a device this build or machine cannot provide."""
    return DeviceProperties(**_core._device_properties(device))


device_properties = _typed.python_signature(device_properties, "resident.device_properties")
