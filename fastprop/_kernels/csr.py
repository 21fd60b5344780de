"""Directed kNN lists -> symmetric CSR affinity, in O(N k)."""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS


@numba.njit(**JIT_OPTIONS)
def _scatter_both_directions(neighbors, similarities, row_counts, columns, weights):
    """Write every positive edge i->j into row i and row j of an unsorted CSR.

    ``row_counts`` holds the per-row offsets on entry and is advanced in place.
    Entries with a negative neighbour index, a self index or a weight <= 0
    are skipped.
    """
    n_rows, n_neighbors = neighbors.shape
    for i in range(n_rows):
        for slot in range(n_neighbors):
            j = neighbors[i, slot]
            weight = similarities[i, slot]
            if j < 0 or j == i or not weight > 0:
                continue
            columns[row_counts[i]] = j
            weights[row_counts[i]] = weight
            row_counts[i] += 1
            columns[row_counts[j]] = i
            weights[row_counts[j]] = weight
            row_counts[j] += 1


@numba.njit(**JIT_OPTIONS)
def _count_both_directions(neighbors, similarities, counts):
    n_rows, n_neighbors = neighbors.shape
    for i in range(n_rows):
        for slot in range(n_neighbors):
            j = neighbors[i, slot]
            if j < 0 or j == i or not similarities[i, slot] > 0:
                continue
            counts[i] += 1
            counts[j] += 1


@numba.njit(**PARALLEL_JIT_OPTIONS)
def _sort_and_merge_rows(starts, columns, weights, unique_counts):
    """Sort each row by column and merge duplicates keeping the larger weight.

    Each row is compacted to the front of its own segment; ``unique_counts[i]``
    receives its new length. Rows are independent, so the loop is race free.
    """
    n_rows = starts.shape[0] - 1
    for i in numba.prange(n_rows):
        begin = starts[i]
        end = starts[i + 1]
        if end == begin:
            unique_counts[i] = 0
            continue
        order = np.argsort(columns[begin:end], kind="mergesort")
        row_columns = columns[begin:end][order]
        row_weights = weights[begin:end][order]
        write = 0
        for read in range(row_columns.shape[0]):
            if write > 0 and row_columns[read] == row_columns[write - 1]:
                if row_weights[read] > row_weights[write - 1]:
                    row_weights[write - 1] = row_weights[read]
            else:
                row_columns[write] = row_columns[read]
                row_weights[write] = row_weights[read]
                write += 1
        columns[begin : begin + write] = row_columns[:write]
        weights[begin : begin + write] = row_weights[:write]
        unique_counts[i] = write


@numba.njit(**JIT_OPTIONS)
def _compact(starts, unique_counts, columns, weights, indptr, out_columns, out_weights):
    n_rows = starts.shape[0] - 1
    indptr[0] = 0
    for i in range(n_rows):
        indptr[i + 1] = indptr[i] + unique_counts[i]
        out_columns[indptr[i] : indptr[i + 1]] = columns[starts[i] : starts[i] + unique_counts[i]]
        out_weights[indptr[i] : indptr[i + 1]] = weights[starts[i] : starts[i] + unique_counts[i]]


def knn_to_symmetric_csr(neighbors, similarities, index_dtype=np.int64):
    """Symmetrise directed kNN lists into CSR arrays.

    Parameters
    ----------
    neighbors : ndarray of shape (n, k), integer
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
    counts = np.zeros(n_rows, dtype=np.int64)
    _count_both_directions(neighbors, similarities, counts)
    starts = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    columns = np.empty(starts[-1], dtype=index_dtype)
    weights = np.empty(starts[-1], dtype=np.float32)
    _scatter_both_directions(neighbors, similarities, starts[:-1].copy(), columns, weights)
    unique_counts = np.empty(n_rows, dtype=np.int64)
    _sort_and_merge_rows(starts, columns, weights, unique_counts)
    indptr = np.empty(n_rows + 1, dtype=index_dtype)
    n_edges = int(unique_counts.sum())
    out_columns = np.empty(n_edges, dtype=index_dtype)
    out_weights = np.empty(n_edges, dtype=np.float32)
    _compact(starts, unique_counts, columns, weights, indptr, out_columns, out_weights)
    return indptr, out_columns, out_weights


@numba.njit(**JIT_OPTIONS)
def scale_rows(indptr, data, factors):
    """Multiply row ``i`` of a CSR matrix by ``factors[i]``, in place."""
    for row in range(indptr.shape[0] - 1):
        for entry in range(indptr[row], indptr[row + 1]):
            data[entry] *= factors[row]
