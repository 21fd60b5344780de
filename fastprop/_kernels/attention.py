"""Multi-head graph attention on CSR edges (GAT's layer), forward and backward, never dense.

A layer's edges are the entries of a CSR matrix whose row ``i`` lists the
columns ``j`` that vertex ``i`` attends to. For head ``h`` the logit of an edge is
``e_ij = LeakyReLU(t_ih + s_jh)`` (``t`` and ``s`` are the target and source
halves of ``a^T [W h_i || W h_j]``), the attention ``alpha_ij = softmax_j(e_ij)``
is taken over the row's entries, and the output is
``out_ih = sum_j alpha_ij m_ij x_jh`` with an optional dropout mask ``m``.

Attention arrays are ``(n_edges, n_heads)``, features ``(n_vertices, n_heads,
n_features)``; every sum is taken in the dtype of ``features`` (pass ``slope``
in it too). An empty ``mask`` (no rows) means no dropout. Each iteration
writes only its own row (or its own column) and sums in the order of the
stored edges, so the rows are shared among the threads (``in_parallel``) or
computed on the calling thread, to the same result.
"""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS


@numba.njit(**JIT_OPTIONS, inline="always")
def _leaky_relu(value, slope):
    return value if value > 0 else slope * value


@numba.njit(**JIT_OPTIONS, inline="always")
def _attend_row(row, indptr, indices, target_scores, source_scores, features, slope, mask, weights, out):
    """Row ``row`` of :func:`attend`."""
    masked = mask.shape[0] > 0
    stored = weights.shape[0] > 0
    n_heads, n_features = features.shape[1], features.shape[2]
    start, stop = indptr[row], indptr[row + 1]
    largest = np.empty(n_heads, dtype=features.dtype)
    total = np.empty(n_heads, dtype=features.dtype)
    accumulated = np.empty((n_heads, n_features), dtype=features.dtype)
    for head in range(n_heads):
        largest[head] = -np.inf
        total[head] = 0.0
        for feature in range(n_features):
            accumulated[head, feature] = 0.0
    for entry in range(start, stop):
        column = indices[entry]
        for head in range(n_heads):
            logit = _leaky_relu(target_scores[row, head] + source_scores[column, head], slope)
            largest[head] = max(largest[head], logit)
    for entry in range(start, stop):
        column = indices[entry]
        for head in range(n_heads):
            logit = _leaky_relu(target_scores[row, head] + source_scores[column, head], slope)
            weight = np.exp(logit - largest[head])
            total[head] += weight
            if stored:
                weights[entry, head] = weight
            if masked:
                weight *= mask[entry, head]
            for feature in range(n_features):
                accumulated[head, feature] += weight * features[column, head, feature]
    for head in range(n_heads):
        for feature in range(n_features):
            out[row, head, feature] = accumulated[head, feature] / total[head]
    if stored:
        for entry in range(start, stop):
            for head in range(n_heads):
                weights[entry, head] /= total[head]


@numba.njit(**PARALLEL_JIT_OPTIONS)
def attend(indptr, indices, target_scores, source_scores, features, slope, mask, weights, out, in_parallel):
    """Fill ``out[i, h] = sum_j alpha_ij m_ij features[j, h]`` over the entries of row ``i``.

    Parameters
    ----------
    indptr, indices : int arrays
        CSR structure of ``n_rows`` rows; every row has at least one entry.
    target_scores : (n_rows, n_heads)
    source_scores : (n_columns, n_heads)
    features : (n_columns, n_heads, n_features)
    slope : float
        Negative slope of the LeakyReLU.
    mask : (n_edges, n_heads) or (0, n_heads)
        Dropout multipliers of the attention coefficients, or empty for none.
    weights : (n_edges, n_heads) or (0, n_heads)
        Filled with ``alpha`` (before dropout) unless empty.
    out : (n_rows, n_heads, n_features)
        Filled.
    in_parallel : bool
        Share the rows among the threads.
    """
    if in_parallel:
        for row in numba.prange(indptr.shape[0] - 1):
            _attend_row(row, indptr, indices, target_scores, source_scores, features, slope, mask, weights, out)
    else:
        for row in range(indptr.shape[0] - 1):
            _attend_row(row, indptr, indices, target_scores, source_scores, features, slope, mask, weights, out)


@numba.njit(**JIT_OPTIONS, inline="always")
def _backward_row(row, indptr, indices, target_scores, source_scores, features, slope, mask, weights, grad_out,
                  grad_logits, grad_target):
    """Row ``row`` of :func:`attend_backward_rows`."""
    masked = mask.shape[0] > 0
    n_heads, n_features = features.shape[1], features.shape[2]
    start, stop = indptr[row], indptr[row + 1]
    expected = np.empty(n_heads, dtype=features.dtype)
    total = np.empty(n_heads, dtype=features.dtype)
    for head in range(n_heads):
        expected[head] = 0.0
        total[head] = 0.0
    for entry in range(start, stop):
        column = indices[entry]
        for head in range(n_heads):
            grad_alpha = grad_out[row, head, 0] * features[column, head, 0]
            for feature in range(1, n_features):
                grad_alpha += grad_out[row, head, feature] * features[column, head, feature]
            if masked:
                grad_alpha *= mask[entry, head]
            grad_logits[entry, head] = grad_alpha
            expected[head] += weights[entry, head] * grad_alpha
    for entry in range(start, stop):
        column = indices[entry]
        for head in range(n_heads):
            grad_score = weights[entry, head] * (grad_logits[entry, head] - expected[head])
            if target_scores[row, head] + source_scores[column, head] <= 0:
                grad_score *= slope
            grad_logits[entry, head] = grad_score
            total[head] += grad_score
    for head in range(n_heads):
        grad_target[row, head] = total[head]


@numba.njit(**PARALLEL_JIT_OPTIONS)
def attend_backward_rows(indptr, indices, target_scores, source_scores, features, slope, mask, weights, grad_out,
                         grad_logits, grad_target, in_parallel):
    """The row half of :func:`attend`'s backward pass: gradients of the edge logits and target scores.

    ``weights`` holds the ``alpha`` that :func:`attend` stored, ``grad_out`` the
    gradient of ``out``. Fills ``grad_logits`` (n_edges, n_heads) with the gradient
    of the score ``t_ih + s_jh`` of each edge (through the LeakyReLU) and
    ``grad_target`` (n_rows, n_heads) with its row sums.
    """
    if in_parallel:
        for row in numba.prange(indptr.shape[0] - 1):
            _backward_row(row, indptr, indices, target_scores, source_scores, features, slope, mask, weights,
                          grad_out, grad_logits, grad_target)
    else:
        for row in range(indptr.shape[0] - 1):
            _backward_row(row, indptr, indices, target_scores, source_scores, features, slope, mask, weights,
                          grad_out, grad_logits, grad_target)


@numba.njit(**JIT_OPTIONS, inline="always")
def _backward_column(column, column_indptr, column_entries, entry_rows, mask, weights, grad_out, grad_logits,
                     grad_features, grad_source):
    """Column ``column`` of :func:`attend_backward_columns`."""
    masked = mask.shape[0] > 0
    n_heads, n_features = grad_features.shape[1], grad_features.shape[2]
    for head in range(n_heads):
        grad_source[column, head] = 0.0
        for feature in range(n_features):
            grad_features[column, head, feature] = 0.0
    for position in range(column_indptr[column], column_indptr[column + 1]):
        entry = column_entries[position]
        row = entry_rows[entry]
        for head in range(n_heads):
            grad_source[column, head] += grad_logits[entry, head]
            alpha = weights[entry, head]
            if masked:
                alpha *= mask[entry, head]
            for feature in range(n_features):
                grad_features[column, head, feature] += alpha * grad_out[row, head, feature]


@numba.njit(**PARALLEL_JIT_OPTIONS)
def attend_backward_columns(column_indptr, column_entries, entry_rows, mask, weights, grad_out, grad_logits,
                            grad_features, grad_source, in_parallel):
    """The column half of :func:`attend`'s backward pass: gradients of ``features`` and source scores.

    The same edges grouped by column: column ``j`` owns the edges
    ``column_entries[column_indptr[j]:column_indptr[j + 1]]``, whose rows are
    ``entry_rows``. Fills ``grad_features`` (n_columns, n_heads, n_features) and
    ``grad_source`` (n_columns, n_heads) from ``grad_out`` and the ``grad_logits``
    of :func:`attend_backward_rows`.
    """
    if in_parallel:
        for column in numba.prange(column_indptr.shape[0] - 1):
            _backward_column(column, column_indptr, column_entries, entry_rows, mask, weights, grad_out,
                             grad_logits, grad_features, grad_source)
    else:
        for column in range(column_indptr.shape[0] - 1):
            _backward_column(column, column_indptr, column_entries, entry_rows, mask, weights, grad_out,
                             grad_logits, grad_features, grad_source)
