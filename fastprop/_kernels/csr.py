"""Directed kNN lists -> symmetric CSR affinity, in O(N k)."""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS


_ROWS_PER_TASK = 1024


@numba.njit(**JIT_OPTIONS)
def _is_edge(i, j, weight):
    """An entry ``i -> j`` of the kNN lists is an edge unless missing, a self loop or not positive."""
    return j >= 0 and j != i and weight > 0


@numba.njit(**JIT_OPTIONS)
def _reverse_lists(neighbors, similarities, in_indptr, in_sources, in_weights):
    """Fill the transposed lists: ``in_sources[in_indptr[j]:in_indptr[j + 1]]`` point to ``j``.

    ``in_indptr`` must already hold the cumulated in-degrees.
    """
    n_rows, n_neighbors = neighbors.shape
    fill = in_indptr[:-1].copy()
    for i in range(n_rows):
        for slot in range(n_neighbors):
            j = neighbors[i, slot]
            if _is_edge(i, j, similarities[i, slot]):
                in_sources[fill[j]] = i
                in_weights[fill[j]] = similarities[i, slot]
                fill[j] += 1


@numba.njit(**PARALLEL_JIT_OPTIONS)
def _merge_rows(neighbors, similarities, in_indptr, in_sources, in_weights, row_sizes, indptr, columns, weights):
    """Row ``i`` of the symmetric graph: its out-list and in-list merged, sorted by column.

    A duplicate column keeps the larger weight. With ``indptr`` empty, only
    count: ``row_sizes[i]`` receives the merged length; otherwise write each
    row at ``indptr[i]``. Tasks of consecutive rows run in parallel, each
    with its own scratch and writing only its own rows: race free.
    """
    n_rows, n_neighbors = neighbors.shape
    count_only = indptr.shape[0] == 0
    longest = 0
    for i in range(n_rows):
        longest = max(longest, in_indptr[i + 1] - in_indptr[i])
    n_tasks = (n_rows + _ROWS_PER_TASK - 1) // _ROWS_PER_TASK
    for task in numba.prange(n_tasks):
        candidate_columns = np.empty(n_neighbors + longest, dtype=np.int64)
        candidate_weights = np.empty(n_neighbors + longest, dtype=np.float32)
        for i in range(task * _ROWS_PER_TASK, min(n_rows, (task + 1) * _ROWS_PER_TASK)):
            n_candidates = 0
            for slot in range(n_neighbors):
                j = neighbors[i, slot]
                if _is_edge(i, j, similarities[i, slot]):
                    candidate_columns[n_candidates] = j
                    candidate_weights[n_candidates] = similarities[i, slot]
                    n_candidates += 1
            for entry in range(in_indptr[i], in_indptr[i + 1]):
                candidate_columns[n_candidates] = in_sources[entry]
                candidate_weights[n_candidates] = in_weights[entry]
                n_candidates += 1
            order = np.argsort(candidate_columns[:n_candidates])
            write = 0 if count_only else indptr[i]
            size = 0
            previous = -1
            for position in range(n_candidates):
                column = candidate_columns[order[position]]
                weight = candidate_weights[order[position]]
                if column == previous:
                    if not count_only and weight > weights[write - 1]:
                        weights[write - 1] = weight
                    continue
                previous = column
                size += 1
                if not count_only:
                    columns[write] = column
                    weights[write] = weight
                    write += 1
            row_sizes[i] = size


def knn_to_symmetric_csr(neighbors, similarities, index_dtype=np.int64):
    """Symmetrise directed kNN lists into CSR arrays.

    Memory: the transposed lists (the size of the input) and the exact-size
    output, no unmerged ``2 * n * k`` buffer.

    Parameters
    ----------
    neighbors : ndarray of shape (n, k), int32 or int64
        Neighbour indices; negative entries are ignored.
    similarities : ndarray of shape (n, k), float32
        Edge weights; entries <= 0 are ignored (no explicit zeros are stored).
    index_dtype : numpy integer type, default=int64
        Type of the returned ``indptr`` and ``indices`` (int32 halves their
        memory when ``2 * n * k < 2**31``).

    Returns
    -------
    indptr, indices : ndarray of ``index_dtype``
    data : ndarray of float32
        The union of both directions, the larger weight kept where both exist,
        columns sorted within each row, no self loops.
    """
    n_rows = neighbors.shape[0]
    in_indptr = np.zeros(n_rows + 1, dtype=np.int64)
    _count_in_degrees(neighbors, similarities, in_indptr[1:])
    np.cumsum(in_indptr, out=in_indptr)
    in_sources = np.empty(in_indptr[-1], dtype=index_dtype)
    in_weights = np.empty(in_indptr[-1], dtype=np.float32)
    _reverse_lists(neighbors, similarities, in_indptr, in_sources, in_weights)
    row_sizes = np.empty(n_rows, dtype=np.int64)
    no_output = np.empty(0, dtype=index_dtype)
    _merge_rows(neighbors, similarities, in_indptr, in_sources, in_weights, row_sizes,
                no_output, no_output, np.empty(0, dtype=np.float32))
    indptr = np.zeros(n_rows + 1, dtype=index_dtype)
    np.cumsum(row_sizes, out=indptr[1:])
    columns = np.empty(indptr[-1], dtype=index_dtype)
    weights = np.empty(indptr[-1], dtype=np.float32)
    _merge_rows(neighbors, similarities, in_indptr, in_sources, in_weights, row_sizes, indptr, columns, weights)
    return indptr, columns, weights


@numba.njit(**JIT_OPTIONS)
def _count_in_degrees(neighbors, similarities, in_degree):
    n_rows, n_neighbors = neighbors.shape
    for i in range(n_rows):
        for slot in range(n_neighbors):
            j = neighbors[i, slot]
            if _is_edge(i, j, similarities[i, slot]):
                in_degree[j] += 1


@numba.njit(**JIT_OPTIONS)
def scale_rows(indptr, data, factors):
    """Multiply row ``i`` of a CSR matrix by ``factors[i]``, in place."""
    for row in range(indptr.shape[0] - 1):
        for entry in range(indptr[row], indptr[row + 1]):
            data[entry] *= factors[row]


@numba.njit(**JIT_OPTIONS)
def has_symmetric_weights(indptr, indices, data, tolerance=0.0):
    """Whether every entry ``(i, j, w)`` of a CSR matrix with sorted rows and no duplicate has a mirror ``(j, i, w')``.

    ``w'`` is ``w`` or differs from it by at most ``tolerance`` times the
    larger of the two (0: they must be equal; a NaN equals nothing). One pass in row order, no transposed copy:
    the mirrors of row ``i``'s entries above the diagonal are, in row ``j``,
    the entries left of the diagonal, met in column order as the rows go
    by; a cursor per row marks how many of them have been matched. O(nnz).
    """
    cursor = indptr[:-1].copy()
    for row in range(indptr.size - 1):
        for entry in range(indptr[row], indptr[row + 1]):
            column = indices[entry]
            if column <= row:  # left of the diagonal: matched from an earlier row; the diagonal: its own mirror
                if column == row and cursor[row] == entry:
                    cursor[row] += 1
                if cursor[row] <= entry:
                    return False
                continue
            mirror = cursor[column]
            if mirror == indptr[column + 1] or indices[mirror] != row:
                return False
            if not (data[mirror] == data[entry] or
                    abs(data[mirror] - data[entry]) <= tolerance * max(abs(data[mirror]), abs(data[entry]))):
                return False
            cursor[column] = mirror + 1
    return True
