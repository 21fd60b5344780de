"""Validation of affinity graphs: a sparse matrix, CSR arrays read from a file, or directed kNN lists.

Each is checked structure first (``indptr``, every index), then weights,
and returned in the one form the kernels trust: canonical float32 CSR (or,
for kNN lists, contiguous index and float32 similarity arrays).
"""

import numpy as np
import scipy.sparse as sp

from .._kernels.csr import has_symmetric_weights
from ._common import _refusal
from .scalars import check_integer

#: Mirrored weights this close (relative to the larger) are equal for :func:`check_symmetric_graph`: float32
#: rounding of a kNN graph's weights computed in another order (an ulp is ~6e-8; within 1.3e-6 for cosines above
#: 0.1) is far inside it. Cosines near 0 summed in another order can differ more (a relative 6e-3).
SYMMETRY_TOLERANCE = 1e-5


def check_graph(graph, n_samples=None, *, name="graph"):
    """Validate an affinity graph and return it as canonical float32 CSR.

    The sparse structure is checked before anything reads through it:
    ``indptr`` starts at 0, never decreases and ends at the number of stored
    entries, every index lies in ``[0, n)``, and the weights are finite,
    non-negative and representable in float32 (none so small that it would
    become 0, none so large that it would become inf). All checks are
    vectorised and O(nnz); the kernels behind it trust the result.

    Parameters
    ----------
    graph : sparse matrix or ndarray of shape (n_samples, n_samples)
        Non-negative, finite edge weights, in any scipy.sparse format.
    n_samples : int or None
        Expected number of vertices (the number of rows of ``X``), if known.
    name : str, default="graph"
        Argument name used in error messages.

    Returns
    -------
    scipy.sparse.csr_matrix
        CSR with float32 weights, sorted indices, no explicit zeros and no
        self loops (the predictors add their own): ``graph`` itself when it
        already is all that, else a copy. The input is never modified.
    """
    if not sp.issparse(graph):
        dense = np.asarray(graph)
        if dense.ndim != 2 or not np.issubdtype(dense.dtype, np.number):
            raise _refusal(dense.dtype)(
                f"{name} must be a scipy.sparse matrix or a 2-D numeric array of edge weights, got "
                f"{type(graph).__name__} with shape {getattr(dense, 'shape', None)} and dtype {dense.dtype}."
            )
        graph = sp.csr_matrix(dense)
    shape = _check_graph_shape(graph.shape, n_samples, name)
    _check_weight_dtype(graph.dtype, name)
    if graph.format not in ("csr", "csc", "bsr", "coo"):
        # lil, dok and dia hold Python lists or dense diagonals: converting them reads through no index
        try:
            graph = graph.tocoo()
        except (ValueError, IndexError, TypeError) as error:
            raise ValueError(f"{name} is not a valid {graph.format} matrix: {error}.") from None
    _check_storage(graph, shape, name)
    original = graph if graph.format == "csr" else None
    if original is None:
        summed = graph.format == "coo" and np.isfinite(graph.data).all()
        graph = graph.tocsr()  # safe now, and the arrays it makes are new: they may be changed in place
        if summed and not np.isfinite(graph.data).all():  # the conversion summed duplicate entries
            raise _duplicates_overflow(name)
    indices, data = _used_entries(graph.indptr, graph.indices, graph.data)
    return _canonical_csr(shape, graph.indptr, indices, data, name, original=original, owned=original is None)


def check_symmetric_graph(graph, needed_by, reason):
    """Refuse a graph (the output of :func:`check_graph`) whose weights are not symmetric.

    ``needed_by`` names the method and ``reason`` says why it needs them so.
    Weights equal up to float32 rounding (:data:`SYMMETRY_TOLERANCE`, e.g.
    a kNN graph's cosines computed in another order) are symmetric.
    """
    if not has_symmetric_weights(graph.indptr, graph.indices, graph.data, SYMMETRY_TOLERANCE):
        raise ValueError(
            f"{needed_by} needs a graph with symmetric weights ({reason}), but an entry (i, j) of this one has "
            "no entry (j, i) of the same weight: a directed kNN graph, e.g. scikit-learn's kneighbors_graph, "
            "is not. Symmetrise it first, e.g. graph.maximum(graph.T) as fastprop.build_knn_graph does, or "
            "(graph + graph.T) / 2."
        )


def check_graph_arrays(shape, indptr, indices, data, n_samples=None, *, name):
    """:func:`check_graph` for a graph read from file ``name`` as its CSR arrays.

    The arrays are checked before a sparse matrix is made of them.
    """
    shape = np.asarray(shape)
    if shape.shape != (2,) or not np.issubdtype(shape.dtype, np.integer):
        raise ValueError(f"{name}: its shape must be two integers, got {shape.tolist()!r}.")
    shape = _check_graph_shape(tuple(int(s) for s in shape), n_samples, name)
    arrays = {"indptr": np.asarray(indptr), "indices": np.asarray(indices), "data": np.asarray(data)}
    for part, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"{name}: array {part!r} must be 1-D, got shape {array.shape}.")
    _check_weight_dtype(arrays["data"].dtype, name)
    _check_compressed(arrays["indptr"], arrays["indices"], arrays["data"].size, shape, name, file=True)
    indices, data = _used_entries(arrays["indptr"], arrays["indices"], arrays["data"])
    return _canonical_csr(shape, arrays["indptr"], indices, data, name)


def _used_entries(indptr, indices, data):
    """``indices`` and ``data`` up to ``indptr[-1]`` (scipy ignores entries past it)."""
    nnz = int(indptr[-1])
    if indices.size == nnz:
        return indices, data
    return indices[:nnz], data[:nnz]


def _check_graph_shape(shape, n_samples, name):
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 0:
        sliced = len(shape) == 2 and shape[0] == n_samples and shape[1] > shape[0]
        hint = (" Its rows look sliced to X's, as a scikit-learn splitter slices a fit parameter: let each "
                "fold's fit build its graph." if sliced else "")
        raise ValueError(f"{name} must be square (n_samples, n_samples), got shape {tuple(shape)}.{hint}")
    if n_samples is not None and shape[0] != n_samples:
        raise ValueError(
            f"{name} has shape {tuple(shape)} but X has {n_samples} samples; build the graph "
            f"from the same X (fastprop.build_knn_graph(X)) or pass the matching X."
        )
    return int(shape[0]), int(shape[1])


def _check_weight_dtype(dtype, name):
    if not np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.complexfloating):
        raise _refusal(dtype)(f"{name} must hold real weights, got dtype {dtype}.")


def _check_storage(graph, shape, name):
    """Check the index arrays of a csr, csc, bsr or coo matrix against ``shape``."""
    if graph.format == "csr":
        _check_compressed(graph.indptr, graph.indices, graph.data.size, shape, name)
    elif graph.format == "csc":
        _check_compressed(graph.indptr, graph.indices, graph.data.size, shape[::-1], name, major="column")
    elif graph.format == "bsr":
        rows, columns = graph.blocksize
        if graph.data.ndim != 3 or graph.data.shape[1:] != (rows, columns):
            raise ValueError(f"{name}: its BSR data has shape {graph.data.shape}, not (n_blocks, {rows}, {columns}).")
        _check_compressed(graph.indptr, graph.indices, graph.data.shape[0],
                          (shape[0] // rows, shape[1] // columns), name, major="block row", minors="block columns")
    else:
        parts = {"row": np.asarray(graph.row), "col": np.asarray(graph.col)}
        for part, array in parts.items():
            if array.ndim != 1 or array.size != graph.data.size or not np.issubdtype(array.dtype, np.integer):
                raise ValueError(
                    f"{name}: its COO {part} array must be 1-D integers, one per weight "
                    f"({graph.data.size}), got {array.dtype} of shape {array.shape}."
                )
            _check_index_range(array, shape[0], f"{name}: its COO {part} array")


def _check_compressed(indptr, indices, n_data, shape, name, major="row", file=False, minors="vertices"):
    """Check compressed-sparse index arrays; ``shape`` is (n_major, n_minor), counted in ``major``s and ``minors``.

    ``indptr`` must have ``n_major + 1`` entries, start at 0, never decrease,
    and end at most at ``len(indices) == n_data`` (entries past its end are
    ignored, as scipy does); every used index must be in ``[0, n_minor)``.
    ``file``: ``name`` is a file, whose arrays are named as such in messages.
    """
    n_major, n_minor = shape
    label = {part: f"{name}: array {part!r}" if file else f"{name}.{part}" for part in ("indptr", "indices")}
    for part, array in (("indptr", indptr), ("indices", indices)):
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise _refusal(array.dtype)(
                f"{label[part]} must be a 1-D integer array, got {array.dtype} of shape {array.shape}.")
    if indptr.size != n_major + 1:
        raise ValueError(
            f"{label['indptr']} has {indptr.size} entries, but a graph of {n_major} {major}s needs "
            f"{n_major + 1}; rebuild the matrix with scipy.sparse (or fastprop.build_knn_graph)."
        )
    if indptr[0] != 0:
        raise ValueError(f"{label['indptr']} must start at 0, got {indptr[0].item()!r}.")
    decreasing = np.flatnonzero(np.diff(indptr.astype(np.int64, copy=False)) < 0)
    if decreasing.size:
        at = int(decreasing[0])
        raise ValueError(
            f"{label['indptr']} decreases from {indptr[at].item()!r} to {indptr[at + 1].item()!r} at "
            f"{major} {at}; it must never decrease (it is not a valid CSR matrix)."
        )
    if indices.size != n_data:
        blocks = " blocks" if major == "block row" else ""
        pair = (f"{name}: arrays 'indices' ({indices.size} entries) and 'data' ({n_data}{blocks})" if file else
                f"{name}.indices ({indices.size} entries) and {name}.data ({n_data}{blocks})")
        raise ValueError(
            f"{pair} differ in length; they must have one weight per index (len(indices) == len(data)), and "
            f"indptr, which ends at {indptr[-1].item()!r}, must end at most at that length. The matrix is corrupt; "
            "rebuild it with scipy.sparse (or fastprop.build_knn_graph)."
        )
    if indptr[-1] > indices.size:
        raise ValueError(
            f"{label['indptr']} ends at {indptr[-1].item()!r} stored entries, but indices has {indices.size} "
            f"and data {n_data}; they must agree (indptr[-1] <= len(indices) == len(data))."
        )
    _check_index_range(indices[: int(indptr[-1])], n_minor, label["indices"], minors)


def _check_index_range(indices, n_vertices, what, units="vertices"):
    if indices.size == 0:
        return
    low, high = indices.min(), indices.max()
    if low < 0 or high >= n_vertices:
        position = int(np.argmax((indices < 0) | (indices >= n_vertices)))
        raise ValueError(
            f"{what} holds {indices[position].item()!r} at position {position}, outside "
            f"[0, {n_vertices - 1}]: every index must be one of the graph's {n_vertices} {units}. "
            "The matrix is corrupt; rebuild it (fastprop.build_knn_graph)."
        )


def _canonical_csr(shape, indptr, indices, data, name, *, original=None, owned=False):
    """A canonical float32 CSR matrix of checked CSR arrays.

    ``original`` (a CSR input) is returned itself when it already is one.
    Unless the arrays are ``owned`` (made by a scipy conversion), they are
    copied before anything is changed in place.
    """
    weights = _float32_weights(data, name)
    # A fresh matrix over the same arrays: scipy caches whether a matrix is canonical,
    # and the cached flag of the input is stale if its arrays were changed in place.
    csr = sp.csr_matrix((weights, indices, indptr), shape=shape, copy=False)
    if csr.has_canonical_format and not csr.diagonal().any() and weights.all():
        # A canonical float32 CSR (what build_knn_graph returns) is used as it is, unless scipy
        # had to convert one of its index arrays: a million-vertex graph is worth not copying.
        # Nothing writes to its arrays.
        reusable = isinstance(original, sp.csr_matrix) and weights is original.data and (
            (csr.indices.dtype, csr.indptr.dtype) == (original.indices.dtype, original.indptr.dtype))
        return original if reusable else csr
    if not owned:
        csr = sp.csr_matrix((weights.copy() if weights is data else weights, indices.copy(), indptr.copy()),
                            shape=shape, copy=False)
    csr.setdiag(0)
    csr.eliminate_zeros()
    csr.sum_duplicates()
    csr.sort_indices()
    if not np.isfinite(csr.data).all():
        raise _duplicates_overflow(name)
    return csr


def _duplicates_overflow(name):
    return ValueError(
        f"{name} has duplicate entries whose summed weight overflows float32; sum them "
        "yourself (with smaller weights) or drop the duplicates."
    )


def _float32_weights(data, name):
    """``data`` as float32, raising if a weight is NaN, infinite, negative, or changes class in float32."""
    weights = _as_float32(data, name, "edge weight")
    if (weights < 0).any():
        bad = int((weights < 0).sum())
        raise ValueError(
            f"{name} has {bad} negative edge weight(s); affinities must be >= 0 "
            "(clip cosine similarities at 0, as build_knn_graph does)."
        )
    return weights


def _as_float32(values, name, what):
    """1-D ``values`` as float32; NaN, infinite values, overflow to inf and positives that would become 0 raise."""
    with np.errstate(over="ignore"):
        converted = values.astype(np.float32, copy=False)
    finite = np.isfinite(converted)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        if np.isfinite(values[bad]).all():
            raise ValueError(
                f"{name} has {bad.size} {what}(s) above float32's largest value "
                f"({float(np.finfo(np.float32).max):.3g}), e.g. {values[bad[0]].item()!r}; fastprop stores them "
                "as float32, where they would become inf. Scale them down (e.g. divide by their maximum)."
            )
        raise ValueError(
            f"{name} has {bad.size} NaN or infinite {what}(s), e.g. {values[bad[0]].item()!r}; "
            f"every {what} must be finite."
        )
    if converted is not values and np.issubdtype(values.dtype, np.floating):
        vanished = (converted == 0) & (values > 0)
        if vanished.any():
            bad = np.flatnonzero(vanished)
            raise ValueError(
                f"{name} has {bad.size} positive {what}(s) below float32's smallest positive value "
                f"({float(np.finfo(np.float32).smallest_subnormal):.3g}), e.g. {values[bad[0]].item()!r}; "
                "fastprop stores them as float32, where they would become 0 and their edges would vanish. "
                "Scale them up (e.g. divide by their maximum) or drop those edges."
            )
    return converted


def check_knn_lists(indices, similarities, n_samples=None):
    """Validate directed kNN lists, one per vertex (see :func:`fastprop.knn_graph_from_lists`).

    Returns
    -------
    indices : ndarray of shape (n_samples, k), C-contiguous int32 or int64
        Negative entries (no neighbour) are kept; the kernel ignores them.
    similarities : ndarray of shape (n_samples, k), C-contiguous float32
    n_samples : int
    """
    indices, similarities = np.asarray(indices), np.asarray(similarities)
    if indices.ndim != 2 or indices.shape != similarities.shape:
        raise ValueError(
            f"indices and similarities must be 2-D arrays of the same shape, got "
            f"{indices.shape} and {similarities.shape}."
        )
    n_rows = indices.shape[0]
    if n_samples is not None and check_integer("n_samples", n_samples) != n_rows:
        raise ValueError(
            f"n_samples={n_samples!r} must equal the number of neighbour lists, len(indices) = {n_rows}: "
            "the lists hold one row per vertex (pad a vertex without neighbours with -1)."
        )
    if np.issubdtype(indices.dtype, np.floating):
        if not (np.isfinite(indices).all() and np.array_equal(indices, np.round(indices))):
            bad = indices[~np.isfinite(indices) | (indices != np.round(indices))].flat[0]
            raise ValueError(
                f"indices must hold integer row numbers, got {indices.dtype} with {bad.item()!r}; "
                "pass the integer lists of knn_search."
            )
        # Checked in float, before the cast: below int64 a value would become its minimum, read as "no neighbour"
        if indices.size and indices.min() < -(2.0**63):
            raise ValueError(
                f"indices must be at least -2**63 (int64's smallest; a negative index marks no neighbour, "
                f"e.g. -1), got {indices.min().item()!r}."
            )
    elif not np.issubdtype(indices.dtype, np.integer):
        raise _refusal(indices.dtype)(f"indices must hold integer row numbers, got dtype {indices.dtype}.")
    if indices.size and indices.max() >= n_rows:
        raise ValueError(f"indices must be smaller than n_samples={n_rows}, got {indices.max().item()!r}.")
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    if not (np.issubdtype(similarities.dtype, np.number) or similarities.dtype == np.bool_) or \
            np.issubdtype(similarities.dtype, np.complexfloating):
        raise _refusal(similarities.dtype)(f"similarities must hold real numbers, got dtype {similarities.dtype}.")
    flat = _as_float32(np.ascontiguousarray(similarities).reshape(-1), "similarities", "value")
    return np.ascontiguousarray(indices), flat.reshape(similarities.shape), n_rows
