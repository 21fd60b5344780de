"""Normalised forms of an affinity graph, and SGC smoothing with them.

``RandomWalk`` (FastProp's and SGC's ``D~^-1 (W + I)``, applied without a
copy of the graph) and ``normalised_adjacency`` (the symmetric
``D^-1/2 W D^-1/2`` the other baselines use, as a CSR copy) are shared, so
that every method normalises the same graph the same way.
"""

import numpy as np
import scipy.sparse as sp

from ._kernels.csr import has_symmetric_weights, scale_rows
from ._kernels.poisson import row_sums
from ._kernels.walk import inverse_closed_degree, walk_rows
from .rows import float64_scaled_rows
from .sharing import ThreadSharingBySize

#: The empty ``position`` array: every vertex reads its own row of the values.
_IDENTITY = np.empty(0, dtype=np.int64)
#: The empty ``value_scale`` array: values are read as they are.
_UNSCALED = np.empty(0, dtype=np.float64)
#: Rows of one block of :meth:`RandomWalk.smooth_in_blocks` (at a million samples and 16
#: columns, 8 MB a block against 128 MB for all rows at once).
BLOCK_ROWS = 65_536
#: Whether a walk step's rows are shared among the threads, learnt for each size of step
#: from every step this process runs (a fit takes a few dozen; SGC two): see
#: :mod:`fastprop.sharing`. Its choice changes the time of a step, never its result.
STEP_SHARING = ThreadSharingBySize()


def normalised_adjacency(graph, *, self_loops, dtype):
    """The symmetric normalisation ``D^-1/2 W D^-1/2`` as a CSR copy, scaled in place.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Non-negative weights (the output of ``check_graph``); not modified.
    self_loops : bool
        Use ``W + I`` instead of ``W`` (the renormalisation trick of GCN).
        ``D`` holds the row sums of the matrix used.
    dtype : numpy dtype
        Of the copy.

    Returns
    -------
    scipy.sparse.csr_matrix
        Rows and columns of zero-degree vertices (isolated, without self
        loops) stay zero.
    """
    adjacency = sp.csr_matrix(graph, dtype=dtype, copy=True)
    if self_loops:
        adjacency = (adjacency + sp.identity(adjacency.shape[0], dtype=dtype, format="csr")).tocsr()
    degree = np.empty(adjacency.shape[0])
    row_sums(adjacency.indptr, adjacency.data, degree)  # float64: float32 sums of weights ~1e38 overflow
    positive = degree > 0
    scale = np.zeros_like(degree)
    scale[positive] = degree[positive] ** -0.5
    scale = scale.astype(dtype)
    scale_rows(adjacency.indptr, adjacency.data, scale)
    adjacency.data *= scale[adjacency.indices]
    return adjacency


class RandomWalk:
    """The random walk ``D~^-1 (W + I)`` of an affinity graph, applied without storing it.

    FastProp's propagation matrix (and SGC's): a weighted mean over each
    vertex's closed neighbourhood. Only the graph's CSR arrays and one
    inverse degree per vertex are kept, so a million-vertex graph costs no
    normalised copy; products are parallel Numba kernels that accumulate in
    float64 and read float32 values without converting them first.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Non-negative weights (the output of ``check_graph``); not modified.
    """

    #: Rows smoothed together by :meth:`smooth`; bounds its memory to about
    #: this many rows' (depth - 1)-hop neighbourhood.
    ROWS_PER_CHUNK = 2048
    #: Bytes of one float64 (n_samples, n_columns) buffer up to which :meth:`smooth`
    #: takes rows covering the graph in one chunk (it holds two such buffers).
    ONE_CHUNK_BYTES = 128 * 2**20

    def __init__(self, graph):
        self.graph = graph
        self.inverse_degree = np.empty(graph.shape[0])
        inverse_closed_degree(graph.indptr, graph.data, self.inverse_degree)
        self._symmetric = None

    @property
    def symmetric(self):
        """Whether the graph's weights are symmetric: then ``S^T = D~ S D~^-1`` (checked once, O(nnz))."""
        if self._symmetric is None:
            graph = self.graph  # the one-pass check needs sorted rows (``check_graph``'s are)
            self._symmetric = bool(graph.has_sorted_indices
                                   and has_symmetric_weights(graph.indptr, graph.indices, graph.data))
        return self._symmetric

    def smooth(self, values, rows=None, depth=1, row_scale=None):
        """Rows ``rows`` of ``(D~^-1 (W + I))^depth @ diag(row_scale) @ values``, in float64.

        Parameters
        ----------
        values : ndarray of shape (n_samples,) or (n_samples, n_columns)
        rows : ndarray of int or None
            The rows wanted (all when None). They are computed in chunks of
            ``ROWS_PER_CHUNK``, each step restricted to the rows the next one
            reads, so a few seeds never cost an (n_samples, n_columns) product.
        depth : int
            Number of steps, ``>= 0``.
        row_scale : ndarray of shape (n_samples,) or None
            Factors applied to the rows of ``values`` as they are read (e.g.
            inverse norms, so that unnormalised embeddings need no
            normalised copy); None means 1.

        Returns
        -------
        ndarray of shape (len(rows), ...) with the trailing shape of ``values``
        """
        trailing = np.shape(values)[1:]
        columns, scale = _columns_and_scale(values, row_scale)
        del values  # ``columns`` holds it: a temporary argument is freed once no step reads it
        if rows is None:
            everything = np.arange(self.graph.shape[0])
            if depth == 0:
                result = _scaled_rows(columns, everything, scale)
            else:
                result = self._step(columns, everything, scale=scale)
                columns = None
                for _ in range(depth - 1):
                    result = self._step(result, everything)
        else:
            rows = np.asarray(rows, dtype=np.int64)
            result = np.empty((rows.size, columns.shape[1]))
            position = np.full(self.graph.shape[0] if depth > 1 else 0, -1, dtype=np.int64)
            chunk_rows = self._chunk_rows(rows.size, columns.shape[1])
            for begin in range(0, rows.size, chunk_rows):
                chunk = rows[begin : begin + chunk_rows]
                result[begin : begin + chunk.size] = self._smooth_chunk(columns, chunk, depth, position, scale)
        return result.reshape((result.shape[0],) + trailing)

    def smooth_in_blocks(self, values, depth=1, row_scale=None):
        """``smooth(values, None, depth, row_scale)``, :data:`BLOCK_ROWS` rows at a time.

        The first ``depth - 1`` steps are taken for every row, the last one a
        block of rows at a time as the blocks are asked for, so the whole
        result is never held: one (n_samples, n_columns) float64 level and one
        block are, and the input (a temporary one only until the first step
        has read it, when ``depth > 1``). Every row is bit for bit the same as
        in :meth:`smooth`.

        Yields
        ------
        begin : int
            The first row of the block.
        smoothed : ndarray of shape (n_block_rows, n_columns), float64
        """
        columns, scale = _columns_and_scale(values, row_scale)
        del values
        if depth > 1:
            columns, scale = self.smooth(columns, None, depth - 1, row_scale=row_scale), _UNSCALED
        for begin in range(0, columns.shape[0], BLOCK_ROWS):
            rows = np.arange(begin, min(begin + BLOCK_ROWS, columns.shape[0]))
            yield begin, (_scaled_rows(columns, rows, scale) if depth == 0 else self._step(columns, rows, scale=scale))

    def _chunk_rows(self, n_rows, n_columns):
        """Rows smoothed together: all of them once their neighbourhoods would cover the graph anyway.

        A chunk's cost is a step over its rows' (depth - 1)-hop neighbourhood,
        which on a small graph is the whole graph for every chunk; then one
        chunk costs what one of ``ROWS_PER_CHUNK`` would, and holds what
        smoothing every row holds, which ``ONE_CHUNK_BYTES`` bounds.
        """
        n_vertices = self.graph.shape[0]
        mean_closed_degree = self.graph.nnz / max(n_vertices, 1) + 1
        covering = n_rows * mean_closed_degree >= n_vertices
        affordable = 8 * n_vertices * n_columns <= self.ONE_CHUNK_BYTES
        return max(n_rows, 1) if covering and affordable else self.ROWS_PER_CHUNK

    def _smooth_chunk(self, values, rows, depth, position, scale):
        """``smooth`` for one chunk; ``position`` is an (n_samples,) scratch array when depth > 1."""
        if depth == 0:
            return _scaled_rows(values, rows, scale)
        # needed[k + 1]: the closed neighbourhood of needed[k]; needed[0] = rows.
        needed = [rows]
        for _ in range(depth - 1):
            needed.append(self._closed_neighbourhood(needed[-1]))
        smoothed = self._step(values, needed[-1], scale=scale)
        for level in range(depth - 2, -1, -1):
            position[needed[level + 1]] = np.arange(needed[level + 1].size)
            smoothed = self._step(smoothed, needed[level], position)
        return smoothed

    def _closed_neighbourhood(self, rows):
        """The vertices ``rows`` and their neighbours, sorted (a mask, not a sort: ~30x less at 1M vertices)."""
        member = np.zeros(self.graph.shape[0], dtype=bool)
        member[rows] = True
        member[self.graph[rows].indices] = True
        return np.flatnonzero(member)

    def _step(self, values, rows, position=_IDENTITY, scale=_UNSCALED):
        """One product, rows ``rows``; vertex ``v`` reads ``values[position[v]]`` (or ``values[v]``).

        Shared among the threads or not as :data:`STEP_SHARING` finds faster.
        """
        out = np.empty((rows.size, values.shape[1]))

        def run(shared):
            walk_rows(self.graph.indptr, self.graph.indices, self.graph.data, self.inverse_degree,
                      values, scale, position, rows, out, shared)

        STEP_SHARING.timed(run, rows.size * values.shape[1])
        return out


def _columns_and_scale(values, row_scale):
    """``values`` as a C-contiguous (n_samples, n_columns) array and ``row_scale`` as the kernels read it."""
    values = np.asarray(values)
    columns = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    return columns, (_UNSCALED if row_scale is None else np.asarray(row_scale, dtype=np.float64))


def _scaled_rows(values, rows, scale):
    """``values[rows]`` in float64, row ``v`` times ``scale[v]`` unless ``scale`` is empty."""
    return float64_scaled_rows(values[rows], scale[rows] if scale.size else None)
