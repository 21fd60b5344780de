"""ConfNet's class-agnostic vertex descriptors, one row at a time."""

import numba
import numpy as np

from .._config import PARALLEL_JIT_OPTIONS

#: Number of descriptors per vertex (the columns of ``structural_descriptors``' output).
N_DESCRIPTORS = 9

_ROWS_PER_TASK = 1024


@numba.njit(**PARALLEL_JIT_OPTIONS)
def structural_descriptors(indptr, indices, data, inverse_degree, distributions, view_count, out):
    """Fill ``out[i]`` with the descriptors of vertex ``i`` (see ``confnet.structural_features``).

    Columns: top probability, margin to the second, entropy, the largest
    entry of the walk's neighbour mean ``(D~^-1 (W + I) P)_i``, its dot
    product with ``P_i``, mean and max edge weight, ``log1p(degree)`` and
    ``log1p(view_count)``. Tasks of consecutive rows run in parallel, each
    with its own scratch row and writing only its own rows of ``out``.
    """
    n_rows, n_classes = distributions.shape
    n_tasks = (n_rows + _ROWS_PER_TASK - 1) // _ROWS_PER_TASK
    for task in numba.prange(n_tasks):
        mean = np.empty(n_classes)
        for row in range(task * _ROWS_PER_TASK, min(n_rows, (task + 1) * _ROWS_PER_TASK)):
            top = -np.inf
            second = 0.0 if n_classes == 1 else -np.inf
            entropy = 0.0
            for column in range(n_classes):
                probability = distributions[row, column]
                if probability > top:
                    if n_classes > 1:
                        second = top
                    top = probability
                elif probability > second:
                    second = probability
                entropy -= probability * np.log(max(probability, 1e-12))
                mean[column] = probability
            weight_sum = 0.0
            max_weight = 0.0
            for entry in range(indptr[row], indptr[row + 1]):
                neighbour = indices[entry]
                weight = np.float64(data[entry])
                weight_sum += weight
                max_weight = max(max_weight, weight)
                for column in range(n_classes):
                    mean[column] += weight * distributions[neighbour, column]
            scale = inverse_degree[row]
            largest = -np.inf
            agreement = 0.0
            for column in range(n_classes):
                value = mean[column] * scale
                largest = max(largest, value)
                agreement += value * distributions[row, column]
            degree = indptr[row + 1] - indptr[row]
            out[row, 0] = top
            out[row, 1] = top - second
            out[row, 2] = entropy
            out[row, 3] = largest
            out[row, 4] = agreement
            out[row, 5] = weight_sum / max(degree, 1)
            out[row, 6] = max_weight
            out[row, 7] = np.log1p(degree)
            out[row, 8] = np.log1p(view_count[row])
