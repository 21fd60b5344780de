"""Each vertex's mean weight to its most similar neighbours: the graph's local density."""

import numba
import numpy as np

from .._config import PARALLEL_JIT_OPTIONS


@numba.njit(**PARALLEL_JIT_OPTIONS)
def top_weight_means(indptr, data, k, out):
    """Fill ``out[i]`` with the mean of row ``i``'s ``k`` largest weights.

    All of the row's weights when it has fewer than ``k``; 0 for an empty
    row. Sums run in float64, largest weight last, so the result does not
    depend on the number of threads. Rows are independent (one output entry
    each): the parallel loop is race free.
    """
    for row in numba.prange(out.size):
        start, end = indptr[row], indptr[row + 1]
        taken = min(k, end - start)
        total = 0.0
        if taken > 0:
            weights = np.sort(data[start:end])
            for position in range(weights.size - taken, weights.size):
                total += weights[position]
            total /= taken
        out[row] = total
