"""The random walk ``D~^-1 (W + I)`` applied to dense values row by row, never stored."""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS


@numba.njit(**JIT_OPTIONS)
def inverse_closed_degree(indptr, data, out):
    """``out[i] = 1 / (1 + sum_j W_ij)``: the walk's row scale (self loop included)."""
    for row in range(indptr.shape[0] - 1):
        total = 1.0
        for entry in range(indptr[row], indptr[row + 1]):
            total += data[entry]
        out[row] = 1.0 / total


@numba.njit(**JIT_OPTIONS, inline="always")
def _walk_row(row, indptr, indices, data, inverse_degree, values, value_scale, position, rows, out):
    """Row ``row`` of :func:`walk_rows`."""
    identity = position.shape[0] == 0
    scaled = value_scale.shape[0] > 0
    n_columns = values.shape[1]
    vertex = rows[row]
    source = vertex if identity else position[vertex]
    factor = value_scale[source] if scaled else 1.0
    for column in range(n_columns):
        out[row, column] = factor * values[source, column]
    for entry in range(indptr[vertex], indptr[vertex + 1]):
        neighbour = indices[entry]
        source = neighbour if identity else position[neighbour]
        weight = np.float64(data[entry])
        if scaled:
            weight *= value_scale[source]
        for column in range(n_columns):
            out[row, column] += weight * values[source, column]
    scale = inverse_degree[vertex]
    for column in range(n_columns):
        out[row, column] *= scale


@numba.njit(**PARALLEL_JIT_OPTIONS)
def walk_rows(indptr, indices, data, inverse_degree, values, value_scale, position, rows, out, in_parallel):
    """``out[r] = ((D~^-1 (W + I)) @ V)[rows[r]]`` in float64.

    Vertex ``v`` reads its value from ``values[position[v]]``, or from
    ``values[v]`` when ``position`` is empty; every vertex in the closed
    neighbourhood of ``rows`` must have one. When ``value_scale`` is not
    empty, ``V`` is ``values`` with row ``s`` multiplied by
    ``value_scale[s]``. Each iteration writes its own row of ``out`` only,
    so the rows are shared among the threads (``in_parallel``) or computed
    on the calling thread, with no parallel launch, to the same result.
    """
    if in_parallel:
        for row in numba.prange(rows.shape[0]):
            _walk_row(row, indptr, indices, data, inverse_degree, values, value_scale, position, rows, out)
    else:
        for row in range(rows.shape[0]):
            _walk_row(row, indptr, indices, data, inverse_degree, values, value_scale, position, rows, out)
