"""Imported first by the package, before anything in it can import numba: numba-cuda's compiler (its
fp16 module) still calls ``np.row_stack``, which NumPy removed after deprecating it in 2.0; it was an
alias of ``vstack``. The alias is added only where NumPy lacks it, so a NumPy that still has it, or a
numba-cuda that no longer calls it, sees no change."""
import numpy as _np

if not hasattr(_np, "row_stack"):
    _np.row_stack = _np.vstack
