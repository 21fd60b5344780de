"""The random walk ``D^-1 W`` (no self loop) applied to dense values: Poisson learning's step."""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS


@numba.njit(**JIT_OPTIONS)
def row_sums(indptr, data, out):
    """``out[i] = sum_j W_ij`` accumulated in float64 (the degrees)."""
    for row in range(indptr.shape[0] - 1):
        total = 0.0
        for entry in range(indptr[row], indptr[row + 1]):
            total += data[entry]
        out[row] = total


@numba.njit(**JIT_OPTIONS, inline="always")
def _transition_row(row, indptr, indices, data, inverse_degree, values, out):
    """Row ``row`` of :func:`transition_rows`."""
    n_columns = values.shape[1]
    for column in range(n_columns):
        out[row, column] = 0.0
    for entry in range(indptr[row], indptr[row + 1]):
        neighbour = indices[entry]
        weight = np.float64(data[entry])
        for column in range(n_columns):
            out[row, column] += weight * values[neighbour, column]
    scale = inverse_degree[row]
    for column in range(n_columns):
        out[row, column] *= scale


@numba.njit(**PARALLEL_JIT_OPTIONS)
def transition_rows(indptr, indices, data, inverse_degree, values, out, in_parallel):
    """``out = D^-1 W @ values`` in float64, for every row of the CSR graph ``W``.

    ``inverse_degree[i]`` is ``1 / sum_j W_ij`` (0 for a vertex without
    edges, whose row of ``out`` is then 0). ``data`` may be float32: each
    weight is read as float64. Each iteration writes its own row of ``out``
    only, so the rows are shared among the threads (``in_parallel``) or
    computed on the calling thread, to the same result.
    """
    if in_parallel:
        for row in numba.prange(indptr.shape[0] - 1):
            _transition_row(row, indptr, indices, data, inverse_degree, values, out)
    else:
        for row in range(indptr.shape[0] - 1):
            _transition_row(row, indptr, indices, data, inverse_degree, values, out)
