"""Row norms of feature matrices, rows scaled by them, and the memory budget of blocked similarity products.

Shared by the kNN search (:mod:`fastprop.graph`), the spatial order of its
hnsw inserts (:mod:`fastprop.locality`), the local predictor's logits
(:mod:`fastprop.propagation`, :mod:`fastprop.prediction`) and the estimator.
"""

import numpy as np

#: Float32 bytes of one block of a blocked similarity product (the exact kNN
#: search, the nearest-centroid assignment).
SIMILARITY_BLOCK_BYTES = 64 * 2**20
#: Rows whose norms are computed at a time: no (n, d) temporary of squares.
NORM_BLOCK_ROWS = 16384
#: :func:`direction_spread` reads at most this many rows (every k-th).
SPREAD_SAMPLE_ROWS = 65536


def inverse_norms(features):
    """``1 / ||x_i||`` for every row, or None when every norm is already 1 (within 1e-4).

    When every norm is within 1e-4 of a power of two, ``2^k_i`` (unit rows
    times powers of two, as ``check_features`` rescales rows far out of
    range), the factors are ``2^-k_i`` exactly, and the rows are scaled
    back to the very bits of the unit rows: a fit on them is the fit on the
    unit rows, bit for bit (``1 / ||x_i||`` would not be). ``features``
    must have no all-zero row (validation ensures it).
    """
    norms = np.empty(features.shape[0])
    for start in range(0, features.shape[0], NORM_BLOCK_ROWS):
        block = features[start : start + NORM_BLOCK_ROWS].astype(np.float64)
        norms[start : start + block.shape[0]] = np.sqrt(np.einsum("ij,ij->i", block, block))
    powers = np.ldexp(1.0, np.round(np.log2(norms)).astype(np.int64))
    if np.all(np.abs(norms / powers - 1.0) <= 1e-4):  # dividing by a power of two is exact
        return None if np.all(powers == 1.0) else 1.0 / powers
    return 1.0 / norms


def direction_spread(features, row_scale):
    """``1 - ||mean unit row||^2``: how far the rows' directions spread around their mean.

    About one minus the mean cosine similarity of two rows: 0 when every row
    points the same way, 1 for directions spread evenly. Read on every k-th
    row, at most :data:`SPREAD_SAMPLE_ROWS` of them, in float64.

    Parameters
    ----------
    features : ndarray of shape (n, d)
    row_scale : ndarray of shape (n,) or None
        :func:`inverse_norms` of ``features`` (None: unit rows).

    Returns
    -------
    float
        In [0, 1]; 1 for no rows (nothing is known to be parallel). The rows
        must be finite and non-zero (as validation ensures).
    """
    if features.shape[0] == 0:
        return 1.0
    step = -(-features.shape[0] // SPREAD_SAMPLE_ROWS)
    sampled = np.arange(0, features.shape[0], step)
    total = np.zeros(features.shape[1])
    for start in range(0, sampled.size, NORM_BLOCK_ROWS):
        rows = sampled[start : start + NORM_BLOCK_ROWS]
        total += float64_scaled_rows(features[rows], None if row_scale is None else row_scale[rows]).sum(axis=0)
    mean = total / sampled.size
    return float(np.clip(1.0 - mean @ mean, 0.0, 1.0))


def unit_rows(features):
    """Rows scaled to unit L2 norm; ``features`` itself when they already are.

    Embeddings usually arrive normalised, and a million-row copy is worth
    skipping.
    """
    scale = inverse_norms(features)
    if scale is None:
        return features
    return (features * scale[:, None]).astype(features.dtype, copy=False)


def float64_scaled_rows(values, row_scale):
    """``values`` as a C-contiguous float64 copy with row ``i`` multiplied by ``row_scale[i]``.

    The logits of unit rows from those of raw rows (``(X / |X|) W =
    diag(1 / |X|) X W``), the same arithmetic wherever they are made, so that
    every copy of them is bit for bit the same. ``row_scale`` None: no scaling.
    """
    result = np.array(values, dtype=np.float64, order="C")
    if row_scale is not None:
        result *= row_scale[:, None]
    return result
