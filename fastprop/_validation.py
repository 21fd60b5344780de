"""Validation of everything that crosses fastprop's public boundary.

Every public function routes its inputs through the helpers here, once, and
the kernels behind it trust what they receive. Each helper raises a
``ValueError`` whose message names the argument, shows the bad value and says
how to fix it.
"""

import math
import numbers
import os

import numpy as np
import scipy.sparse as sp

from ._kernels.csr import has_symmetric_weights

_MAX_SHOWN = 5
#: Rows checked at a time, so that checking a million embeddings never
#: allocates an (n_samples, n_features) temporary.
_ROWS_PER_BLOCK = 65536
#: ``check_features(..., rescale_rows=True)`` leaves rows whose largest
#: magnitude is within ``[2**-_SAFE_EXPONENT, 2**_SAFE_EXPONENT]`` as they are.
_SAFE_EXPONENT = 40
_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _shown(indices):
    """Format the first few of ``indices`` for an error message."""
    indices = [int(i) for i in indices[:_MAX_SHOWN]]
    return ", ".join(map(str, indices))


class NonNumericInputError(ValueError, TypeError):
    """An array that should hold numbers holds something else (a ValueError, and a TypeError
    as NumPy's own conversion raises)."""


#: Mirrored weights this close (relative to the larger) are equal for :func:`check_symmetric_graph`: float32
#: rounding of a kNN graph's weights computed in another order (an ulp is ~6e-8; within 1.3e-6 for cosines above
#: 0.1) is far inside it. Cosines near 0 summed in another order can differ more (a relative 6e-3).
SYMMETRY_TOLERANCE = 1e-5
#: ``check_features`` without ``rescale_rows`` refuses a row whose largest magnitude is below this:
#: float32's smallest normal number divided by 2**11, where its subnormals keep fewer than 12 bits.
_SMALLEST_FLOAT32_ROW = float(np.finfo(np.float32).tiny) * 2.0**-11


def check_features(X, *, name="X", cosine=True, rescale_rows=False, computing_method=None):
    """Validate a feature matrix and return it as C-contiguous float32.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        Numeric features; float16/float64/integer input is converted.
    name : str, default="X"
        Argument name used in error messages.
    cosine : bool, default=True
        Reject all-zero rows, whose cosine similarity is undefined.
    rescale_rows : bool, default=False
        For callers that use only the rows' directions (cosine similarity,
        FastProp): scale every row whose largest magnitude is outside
        ``[2**-40, 2**40]`` by a power of two so that it lies in [0.5, 1).
        That is exact, changes no cosine, and keeps float32 sums of squares
        and products with the rows far from overflow and underflow (finite
        float32 rows as large as 1e38, or float64 rows as large as 1e300,
        would otherwise give inf or NaN). Rows inside the range, as every
        ordinary embedding is, are left as they are.
    computing_method : str or None, default=None
        For a method (named here) that computes on the features themselves,
        not their directions (a baseline's network): a row whose largest
        magnitude is above ``2**40``, where its products overflow, is
        refused, and so are features all below ``2**-40`` in magnitude,
        where float32 keeps few of their bits (a single small row, e.g. a
        centred sample at the mean, is fine).

    Returns
    -------
    ndarray of shape (n_samples, n_features), float32
        A converted copy, or ``X`` itself when it already is C-contiguous float32
        (and no row needed rescaling). It is never modified by fastprop.
    """
    if sp.issparse(X):
        raise ValueError(
            f"{name} is a sparse matrix; fastprop needs a dense array of embeddings. "
            f"Convert it with {name}.toarray() if it fits in memory."
        )
    if np.ma.is_masked(X):  # np.asarray would drop the mask and use the values under it
        raise ValueError(
            f"{name} is a masked array with {np.ma.count_masked(X)} masked value(s), which fastprop cannot "
            f"leave out; fill them ({name}.filled(value)) or drop their rows."
        )
    array = np.asarray(X)
    if array.dtype == object:
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise NonNumericInputError(
                f"{name} holds entries that are not numbers ({error}). Pass a numeric array such as "
                "float32 embeddings."
            ) from None
        except OverflowError:
            raise ValueError(
                f"{name} holds integers too large for float64 (beyond ~1.8e308). Scale {name} down, or "
                "pass it as floats."
            ) from None
    if np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"Complex data not supported: {name} has dtype {array.dtype}; pass real numbers.")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise ValueError(
            f"{name} must hold real numbers, got dtype {array.dtype}. "
            "Pass a numeric array such as float32 embeddings."
        )
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got shape {array.shape}. Reshape your data "
            f"either using {name}.reshape(-1, 1) if it has a single feature or {name}.reshape(1, -1) if "
            "it is a single sample."
        )
    for axis, what in ((0, "sample"), (1, "feature")):
        if array.shape[axis] == 0:
            raise ValueError(
                f"{name} is empty: 0 {what}(s) (shape={array.shape}) while a minimum of 1 is required."
            )
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        array = _within_float64(array, name)
    largest = _largest_magnitudes(array, name)
    exponents = None
    if rescale_rows:
        outside = (largest > 0) & ((largest < 2.0**-_SAFE_EXPONENT) | (largest > 2.0**_SAFE_EXPONENT))
        if outside.any():
            exponents = np.where(outside, np.frexp(largest)[1], 0)
    elif array.dtype.itemsize > 4 and np.issubdtype(array.dtype, np.floating):
        # Past float32's largest value a row would be inf; below _SMALLEST_FLOAT32_ROW it keeps under 12 bits
        # (at 1e-300: all zero) and would be computed on as what it is not.
        for beyond, what, direction in (
            (largest > np.finfo(np.float32).max, "with a value that overflows float32", "down"),
            ((largest > 0) & (largest < _SMALLEST_FLOAT32_ROW),
             f"too small for float32 (below {_SMALLEST_FLOAT32_ROW:.3g} it keeps fewer than 12 bits)", "up"),
        ):
            if beyond.any():
                bad = np.flatnonzero(beyond)
                raise ValueError(
                    f"{name} has {bad.size} row(s) {what}, the first is row {bad[0]} (largest magnitude "
                    f"{float(largest[bad[0]]):.3g}). fastprop computes in float32: scale {name} {direction} first."
                )
    if computing_method is not None:
        huge = np.flatnonzero(largest > 2.0**_SAFE_EXPONENT)
        scale = float(largest.max())
        if huge.size or 0 < scale < 2.0**-_SAFE_EXPONENT:
            where = (f"{huge.size} row(s) with a magnitude above 2**{_SAFE_EXPONENT} (~1e12), the first is row "
                     f"{huge[0]} ({float(largest[huge[0]]):.3g})" if huge.size else
                     f"no magnitude above 2**-{_SAFE_EXPONENT} (~1e-12; its largest is {scale:.3g})")
            raise ValueError(
                f"{name} has {where}: {computing_method} computes on the features as they are, and at that scale "
                f"its products overflow or float32 keeps few of their bits. Scale {name} first, e.g. divide it by "
                f"its largest magnitude (FastProp and the graph-only methods use the rows' directions and take "
                f"them as they are)."
            )
    if exponents is None:
        features = np.ascontiguousarray(array, dtype=np.float32)
    else:
        features = np.empty(array.shape, dtype=np.float32)
        for start in range(0, array.shape[0], _ROWS_PER_BLOCK):
            stop = start + _ROWS_PER_BLOCK
            features[start:stop] = np.ldexp(np.asarray(array[start:stop], dtype=np.float64),
                                            -exponents[start:stop, None])
    if cosine:
        zero_rows = ~features.any(axis=1)
        if zero_rows.any():
            bad = np.flatnonzero(zero_rows)
            raise ValueError(
                f"{name} has {bad.size} all-zero row(s) (rows {_shown(bad)}"
                f"{', ...' if bad.size > _MAX_SHOWN else ''}); their cosine similarity is "
                "undefined. Remove them or give them a non-zero embedding."
            )
    return features


def _within_float64(array, name):
    """An extended-precision ``array`` as float64; raises where a finite row leaves float64's range.

    Such a row would read as infinite (values above ~1.8e308) or as all zero
    (every value below ~4.9e-324) after the conversion, and be reported as
    what it is not.
    """
    with np.errstate(over="ignore", under="ignore"):
        converted = array.astype(np.float64)
    finite = np.isfinite(array).all(axis=1)
    overflow = finite & ~np.isfinite(converted).all(axis=1)
    underflow = finite & array.any(axis=1) & ~converted.any(axis=1)
    beyond = overflow | underflow
    if beyond.any():
        bad = np.flatnonzero(beyond)
        raise ValueError(
            f"{name} ({array.dtype}) has {bad.size} row(s) with values beyond float64's range, the first is row "
            f"{bad[0]}; fastprop computes in float64 and float32. Scale those rows into float64's range first "
            "(only their directions matter)."
        )
    return converted


def _largest_magnitudes(array, name):
    """Each row's largest absolute value, in float64; raises on NaN or infinite values.

    Computed block by block from each row's minimum and maximum (NaN
    propagates into both), so no (n_samples, n_features) temporary is made.
    """
    largest = np.empty(array.shape[0])
    finite = np.empty(array.shape[0], dtype=bool)
    for start in range(0, array.shape[0], _ROWS_PER_BLOCK):
        block = array[start : start + _ROWS_PER_BLOCK]
        low = block.min(axis=1).astype(np.float64)
        high = block.max(axis=1).astype(np.float64)
        stop = start + block.shape[0]
        finite[start:stop] = np.isfinite(low) & np.isfinite(high)
        largest[start:stop] = np.maximum(np.abs(low), np.abs(high))
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValueError(
            f"{name} has {bad.size} row(s) with NaN or infinite values, the first is row "
            f"{bad[0]}. Remove or impute them before building the graph."
        )
    return largest


def check_n_neighbors(n_neighbors, n_samples):
    """Validate the number of neighbours of a kNN graph on ``n_samples`` points."""
    check_integer("n_neighbors", n_neighbors, low=1)
    if n_neighbors >= n_samples:
        raise ValueError(
            f"n_neighbors={n_neighbors!r} must be smaller than the number of samples "
            f"({n_samples}); the largest allowed value is {n_samples - 1}."
        )
    return int(n_neighbors)


def check_integer(name, value, *, low=None, high=None):
    """Validate an integer parameter in the closed range ``[low, high]``.

    An open end is int64's: every integer fastprop takes reaches NumPy,
    Numba or hnswlib as a machine integer, where a larger Python int would
    fail deep inside with an OverflowError.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    low = _INT64_MIN if low is None else low
    high = _INT64_MAX if high is None else high
    _check_range(name, value, low, high, True, True)
    return int(value)


def check_bool(name, value):
    """Validate a True/False parameter."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def check_real(name, value, *, low=None, high=None, low_inclusive=True, high_inclusive=True):
    """Validate a finite real parameter in a range; open ends are ``None``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}.")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # a Python int beyond float64's range
        finite = False
    if not finite:
        if isinstance(value, numbers.Integral):  # e.g. 10**400: its size, not a prefix that reads as finite
            digits = int(abs(int(value)).bit_length() * math.log10(2)) + 1  # repr fails past 4,300 digits
            shown = f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"
        else:
            shown = repr(value)
            shown = shown if len(shown) <= 40 else f"{shown[:30]}..."
        raise ValueError(f"{name} must be finite, got {shown}.")
    _check_range(name, value, low, high, low_inclusive, high_inclusive)
    return float(value)


def _check_range(name, value, low, high, low_inclusive, high_inclusive):
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and (value > high if high_inclusive else value >= high)
    if too_low or too_high:
        left = "-inf" if low is None else "-2**63" if low == _INT64_MIN else f"{low}"
        right = "inf" if high is None else "2**63 - 1" if high == _INT64_MAX else f"{high}"
        bracket_left = "[" if low_inclusive and low is not None else "("
        bracket_right = "]" if high_inclusive and high is not None else ")"
        raise ValueError(
            f"{name}={value!r} is out of range; allowed: "
            f"{bracket_left}{left}, {right}{bracket_right}."
        )


def check_choice(name, value, choices):
    """Validate that ``value`` is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} is not supported; choose one of {allowed}.")
    return value


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
            raise ValueError(
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
        raise ValueError(f"{name} must hold real weights, got dtype {dtype}.")


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
            raise ValueError(f"{label[part]} must be a 1-D integer array, got {array.dtype} of shape {array.shape}.")
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
    if indices.size != n_data or indptr[-1] > indices.size:
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
    elif not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(f"indices must hold integer row numbers, got dtype {indices.dtype}.")
    if indices.size and indices.max() >= n_rows:
        raise ValueError(f"indices must be smaller than n_samples={n_rows}, got {indices.max().item()!r}.")
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    if not (np.issubdtype(similarities.dtype, np.number) or similarities.dtype == np.bool_) or \
            np.issubdtype(similarities.dtype, np.complexfloating):
        raise ValueError(f"similarities must hold real numbers, got dtype {similarities.dtype}.")
    flat = _as_float32(np.ascontiguousarray(similarities).reshape(-1), "similarities", "value")
    return np.ascontiguousarray(indices), flat.reshape(similarities.shape), n_rows


def check_memory(n_bytes, what, hint):
    """Refuse up front a request for more memory than the machine has.

    It would otherwise end in a ``MemoryError`` halfway, or, where the
    operating system overcommits, in the out-of-memory killer. No check where
    the physical memory is unknown (e.g. Windows).

    Parameters
    ----------
    n_bytes : int
        An estimate of what the request allocates.
    what : str
        The request, with the parameters that size it (``"GCN(hidden=10**9)"``).
    hint : str
        How to make it fit.
    """
    total = physical_memory()
    if total is not None and n_bytes > total:
        raise ValueError(
            f"{what} needs about {n_bytes / 2**30:,.1f} GiB of memory, more than this machine's "
            f"{total / 2**30:,.1f} GiB; {hint}"
        )


def physical_memory():
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_random_state(random_state):
    """Turn ``random_state`` into a ``numpy.random.Generator``.

    ``None`` gives fresh entropy, an int a reproducible stream; a Generator is
    used as it is.
    """
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state={random_state!r} must be a non-negative integer.")
        return np.random.default_rng(int(random_state))
    raise ValueError(
        f"random_state must be None, a non-negative int or a numpy.random.Generator, "
        f"got {random_state!r}."
    )


def fits_int64(value):
    """Whether the Python integer ``value`` is an int64."""
    return _INT64_MIN <= value <= _INT64_MAX


def as_integer_labels(labels, name):
    """Return ``labels`` as int64, rejecting non-integral values and values outside int64.

    A uint64 label of 2**64 - 1 used to wrap around to -1 (a seed silently
    dropped), and labels >= 2**63 to -9223372036854775808.
    """
    integral = np.issubdtype(labels.dtype, np.integer) or (labels.dtype == object and all(
        isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) for value in labels.flat))
    if np.issubdtype(labels.dtype, np.floating):
        integral = np.isfinite(labels).all() and np.array_equal(labels, np.round(labels))
    if integral:
        if labels.dtype.kind == "u":
            outside = labels > _INT64_MAX
        elif labels.dtype.kind == "f":
            outside = (labels >= 2.0**63) | (labels < -(2.0**63))
        elif labels.dtype == object:
            outside = np.fromiter((not fits_int64(value) for value in labels.flat), dtype=bool,
                                  count=labels.size).reshape(labels.shape)
        else:
            outside = np.zeros(labels.shape, dtype=bool)
        if outside.any():
            bad = labels[outside].flat[0]
            bad = bad.item() if isinstance(bad, np.generic) else bad  # a Python int already in an object array
            raise ValueError(
                f"{name} has label {bad!r}, outside int64 ([-2**63, 2**63 - 1]); fastprop's labels "
                "are int64. Encode the classes as small integers, e.g. with numpy.unique(..., return_inverse=True)."
            )
        return labels.astype(np.int64)
    raise ValueError(
        f"{name} must hold integer labels (-1 = unlabeled), got dtype {labels.dtype}"
        f"{' with non-integral values' if np.issubdtype(labels.dtype, np.floating) else ''}. "
        "Encode class names as integers first, e.g. with numpy.unique(..., return_inverse=True)."
    )


def check_sample_weight(sample_weight, n_samples):
    """``score``'s weights: None, or ``n_samples`` finite non-negative reals with a positive sum; float64."""
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight)
    if weights.dtype == object or not (np.issubdtype(weights.dtype, np.number) or weights.dtype == np.bool_) \
            or np.iscomplexobj(weights):
        raise ValueError(f"sample_weight must hold real numbers, got dtype {weights.dtype}.")
    if weights.shape != (n_samples,):
        raise ValueError(f"sample_weight must have shape ({n_samples},), one weight per point, got {weights.shape}.")
    weights = weights.astype(np.float64)
    if not np.isfinite(weights).all():
        raise ValueError("sample_weight has NaN or infinite values; all must be finite.")
    if (weights < 0).any():
        raise ValueError("sample_weight has negative values; weights must be >= 0.")
    if not weights.sum() > 0:
        raise ValueError("sample_weight sums to 0; give at least one point a positive weight.")
    return weights


def check_distributions(distributions, n_samples, *, name="label_distributions"):
    """A method's class scores: (n_samples, n_classes), finite, non-negative, no all-zero row.

    Returns float64 rows normalised to sum 1.
    """
    array = np.asarray(distributions)
    if array.ndim != 2 or array.shape[0] != n_samples or array.shape[1] == 0:
        raise ValueError(
            f"{name} must have shape ({n_samples}, n_classes), one row per sample of the graph, got "
            f"shape {array.shape}."
        )
    if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}.")
    array = array.astype(np.float64)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} has NaN or infinite values; all must be finite.")
    if (array < 0).any():
        raise ValueError(f"{name} has negative values; pass class probabilities (or scores >= 0).")
    with np.errstate(over="ignore"):
        totals = array.sum(axis=1, keepdims=True)
    if (totals == 0).any():
        bad = np.flatnonzero(totals[:, 0] == 0)
        raise ValueError(f"{name} has all-zero rows (rows {_shown(bad)}); every row needs a positive score.")
    overflow = np.flatnonzero(np.isinf(totals[:, 0]))
    if overflow.size:  # finite scores whose sum overflows: over the row's largest first
        rows = array[overflow] / array[overflow].max(axis=1, keepdims=True)
        array[overflow], totals[overflow] = rows, rows.sum(axis=1, keepdims=True)
    return array / totals


def check_confidence(confidence):
    """Validate a confidence array: 1-D, real, finite (it may be empty). Returns it as float64."""
    if confidence is None:
        raise ValueError("confidence is None; pass an array of one value per sample.")
    scores = np.asarray(confidence)
    if scores.ndim != 1:
        raise ValueError(f"confidence must be 1-D (n_samples,), got shape {scores.shape}.")
    if not (np.issubdtype(scores.dtype, np.floating) or np.issubdtype(scores.dtype, np.integer)):
        raise ValueError(f"confidence must hold real numbers, got dtype {scores.dtype}.")
    scores = scores.astype(np.float64)
    if not np.isfinite(scores).all():
        bad = np.flatnonzero(~np.isfinite(scores))
        raise ValueError(
            f"confidence has {bad.size} NaN or infinite value(s), the first at position {bad[0]} "
            f"({float(scores[bad[0]])}); all confidences must be finite."
        )
    return scores


def check_scores(confidence, predicted, truth, *, ranking_only=False):
    """Validate a ``(confidence, predicted, truth)`` triple of scores against known truth.

    Used by the outlier-threshold rules and the benchmark protocol. With
    ``ranking_only`` (an AUROC) ``predicted`` is not needed and must be None.
    Returns float64 ``confidence`` and int64 ``predicted`` (or None) and ``truth``.
    """
    for name, value in (("confidence", confidence), ("truth", truth)) + (() if ranking_only else
                                                                       (("predicted", predicted),)):
        if value is None:
            raise ValueError(f"{name} is None; pass an array of one value per sample.")
    arrays = {"confidence": np.asarray(confidence), "predicted": predicted, "truth": truth}
    arrays = {name: np.asarray(a) for name, a in arrays.items() if a is not None}
    for name, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D (n_samples,), got shape {array.shape}.")
    sizes = {name: array.shape[0] for name, array in arrays.items()}
    names = ", ".join(sizes)
    if len(set(sizes.values())) != 1:
        raise ValueError(f"{names} must have the same length, got lengths {sizes}.")
    if sizes["confidence"] == 0:
        raise ValueError(f"{names} are empty; pass at least one sample.")
    scores = check_confidence(arrays["confidence"])
    labels = {"predicted": None}
    for name in [name for name in arrays if name != "confidence"]:
        values = as_integer_labels(arrays[name], name)
        if (values < -1).any():
            raise ValueError(
                f"{name} has values below -1 (e.g. {int(values.min())}); use class indices "
                ">= 0, and -1 for an outlier."
            )
        labels[name] = values
    return scores, labels["predicted"], labels["truth"]


def check_pool_labels(y_all):
    """Validate a labelled pool: 1-D, non-empty, integer labels >= -1 (-1 = no class)."""
    labels = np.asarray(y_all)
    if labels.ndim != 1:
        raise ValueError(f"y_all must be 1-D (n_pool,), got shape {labels.shape}.")
    if labels.size == 0:
        raise ValueError("y_all is empty; pass one label per sample of the pool.")
    labels = as_integer_labels(labels, "y_all")
    if (labels < -1).any():
        raise ValueError(
            f"y_all has labels below -1 (e.g. {int(labels.min())}); class ids must be >= 0, "
            "and -1 marks a sample of no class."
        )
    return labels
