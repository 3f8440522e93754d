"""Loaded by pytest before any test module: resident first, so that its NumPy alias for numba-cuda
(resident._compat) is in place whichever test imports numba.cuda first."""
import resident  # noqa: F401
