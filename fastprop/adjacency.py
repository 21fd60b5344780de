"""Normalised forms of an affinity graph and SGC smoothing with them.

Shared by FastProp (its ConfNet, the predictor's training rows) and the
baselines, so that every method normalises the same graph the same way.
"""

import numpy as np
import scipy.sparse as sp

from ._kernels.csr import scale_rows


def normalised_adjacency(graph, *, kind, self_loops, dtype):
    """Normalise an affinity matrix ``W`` (one CSR copy, scaled in place).

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Non-negative weights (the output of ``check_graph``); not modified.
    kind : {"row", "sym"}
        ``"row"``: ``D^-1 W`` (random walk, rows sum to 1);
        ``"sym"``: ``D^-1/2 W D^-1/2``. ``D`` holds the row sums of ``W``.
    self_loops : bool
        Use ``W + I`` instead of ``W`` (the renormalisation trick of GCN and
        SGC; FastProp's ``D~^-1 A~``).
    dtype : numpy dtype
        float32 keeps products with float32 embeddings free of float64 copies.

    Returns
    -------
    scipy.sparse.csr_matrix
        Rows of zero-degree vertices (isolated, without self loops) stay zero.
    """
    adjacency = sp.csr_matrix(graph, dtype=dtype, copy=True)
    if self_loops:
        adjacency = (adjacency + sp.identity(adjacency.shape[0], dtype=dtype, format="csr")).tocsr()
    degree = np.asarray(adjacency.sum(axis=1), dtype=np.float64).ravel()
    positive = degree > 0
    scale = np.zeros_like(degree)
    scale[positive] = degree[positive] ** (-1.0 if kind == "row" else -0.5)
    scale = scale.astype(dtype)
    scale_rows(adjacency.indptr, adjacency.data, scale)
    if kind == "sym":
        adjacency.data *= scale[adjacency.indices]
    return adjacency


def smooth_rows(adjacency, values, rows, depth):
    """Rows ``rows`` of ``adjacency^depth @ values``, computing only what they need.

    For an index array ``rows``, each product is restricted to the rows the
    next one reads (the ``depth - 1``-hop neighbourhood of ``rows``), so a
    few seeds never cost an (n, n_features) product. ``rows=slice(None)``
    computes every row.
    """
    if depth == 0:
        return np.asarray(values[rows], dtype=np.float64)
    if isinstance(rows, slice):
        smoothed = values
        for _ in range(depth):
            smoothed = adjacency @ smoothed
        return np.asarray(smoothed[rows], dtype=np.float64)
    # needed[k + 1]: the rows that the rows needed[k] read; needed[0] = rows.
    needed = [np.asarray(rows)]
    for _ in range(depth):
        needed.append(np.unique(adjacency[needed[-1]].indices))
    smoothed = values[needed[-1]]
    for level in range(depth - 1, -1, -1):
        smoothed = adjacency[needed[level]][:, needed[level + 1]] @ smoothed
    return np.asarray(smoothed, dtype=np.float64)
