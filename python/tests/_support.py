"""Shared by the Python tests: the GPU marker and the devices to run on, a skip for a peer library that is
missing or broken, and the error bound of a sum (the twin of tests/support.hpp's sum_tolerance)."""
import importlib
import importlib.util
import math
import os

import numpy as np

import pytest

import resident as rs

GPU = rs.cuda_device_count() > 0
gpu = pytest.mark.skipif(not GPU, reason="no CUDA device: " + rs.cuda_unavailable_reason())
# The CPU, and the first GPU where there is one.
DEVICES = ["cpu"] + (["cuda:0"] if GPU else [])
# Python-function stages compile with Numba, an optional dependency of the package.
needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                 reason="numba is not installed: Python-function stages compile with it")


@pytest.fixture
def rng():
    """A generator of fresh random inputs for the test (as tests/support.hpp's fresh_seed); its seed is
    printed, so a failure's report names it."""
    seed = int.from_bytes(os.urandom(8), "little")
    print(f"random inputs from seed {seed} (np.random.default_rng)")
    return np.random.default_rng(seed)


def import_or_skip(name):
    """The module `name`, or a skip when it is not installed (a module that is installed but fails to
    import fails the test: that is a broken environment, not an absent library)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not (name == e.name or name.startswith(e.name + ".")):
            raise
        pytest.skip(f"{name} is not installed ({e.name} is absent)")



def gamma(k, u):
    """k u / (1 - k u): the relative error bound of k roundings of unit roundoff u (Higham, lemma 3.1)."""
    return k * u / (1 - k * u) if k * u < 1 else math.inf


def sum_tolerance(n, abs_sum, dtype, term_error=0.0):
    """A bound on |computed - exact| for a sum of n terms (their |.| adding to abs_sum) folded in dtype
    in any order (no term passes through more than n - 1 additions), each term carrying errors that
    add to term_error, the result rounded once to dtype."""
    u = float(np.finfo(dtype).eps) / 2
    terms = abs_sum + term_error
    fold = gamma(max(n - 1, 0), u) * terms
    return term_error + fold + u * (terms + fold)


def sum_matches(got, ref, tol, smallest_term):
    """got within tol of ref, with tol tight enough that one term of smallest_term going missing or
    counting twice falls outside it (2 tol < smallest_term). Returns (ok, why)."""
    if not 2 * tol < smallest_term:
        return False, f"the tolerance {tol} cannot see a term of {smallest_term} go missing"
    if not abs(got - ref) <= tol:
        return False, f"sum {got} is {got - ref} from {ref} (tolerance {tol})"
    return True, ""


class DlpackOnly:
    """An array of another library that speaks DLPack and nothing else (no dtype, no shape, no @)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()
