"""The agreeing share of neighbour confidence of every graph row (see :mod:`fastprop.prediction`)."""

import numba

from .._config import PARALLEL_JIT_OPTIONS


@numba.njit(**PARALLEL_JIT_OPTIONS)
def agreement_rows(indptr, indices, data, confidence, fitted_class, out):
    """``out[i] = sum_j w_ij c_j [class_j == class_i] / sum_j w_ij`` (0 for a row without weight).

    Rows are independent (one output each, summed in edge order), so the
    result does not depend on the number of threads.
    """
    for row in numba.prange(indptr.shape[0] - 1):
        agreeing = 0.0
        total = 0.0
        own = fitted_class[row]
        for entry in range(indptr[row], indptr[row + 1]):
            weight = data[entry]
            neighbour = indices[entry]
            total += weight
            if fitted_class[neighbour] == own:
                agreeing += weight * confidence[neighbour]
        out[row] = agreeing / total if total > 0 else 0.0
