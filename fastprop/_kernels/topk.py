"""Row-wise top-k selection of a block of similarity scores."""

import numba

from .._config import PARALLEL_JIT_OPTIONS


@numba.njit(**PARALLEL_JIT_OPTIONS)
def top_k_rows(scores, k, first_row, indices, values):
    """The ``k`` largest entries of each row of ``scores``, largest first.

    Row ``r`` of the block is sample ``first_row + r``; its own column is
    skipped. Equal scores keep increasing column order, so the result is
    deterministic. Rows are independent (one output row each), so the
    parallel loop is race free and thread-count independent.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_columns), float32
    k : int
        ``k < n_columns``.
    first_row : int
        Global index of the block's first row.
    indices : ndarray of shape (n_rows, k), int64
    values : ndarray of shape (n_rows, k), float32
        Outputs.
    """
    n_rows, n_columns = scores.shape
    for row in numba.prange(n_rows):
        own = first_row + row
        count = 0
        for column in range(n_columns):
            if column == own:
                continue
            score = scores[row, column]
            if count == k and not score > values[row, k - 1]:
                continue
            # insertion into the sorted buffer, after any equal score
            position = count if count < k else k - 1
            while position > 0 and values[row, position - 1] < score:
                if position < k:
                    values[row, position] = values[row, position - 1]
                    indices[row, position] = indices[row, position - 1]
                position -= 1
            values[row, position] = score
            indices[row, position] = column
            if count < k:
                count += 1
