"""The SGC local predictor's features: the unit rows on their leading principal directions.

A softmax regression on smoothed rows spends its time in products with the
rows (every L-BFGS step of every fit of a fit: the local predictor, its refit
on the pseudo-labels, the provisional builds), and the smoothing itself walks
every column. Sentence embeddings and pixels keep most of their energy in far
fewer directions than they have columns (95% of it in 139 of Banking77's 384
MiniLM dimensions, 104 of MNIST's 784 pixels; bench/RESULTS.md), and a
penalised regression gives the weakest directions little weight anyway.
:func:`principal_directions` finds the fewest uncentred principal directions
of the unit rows that keep a share of their energy; :func:`projected_rows`
gives ``X P``, whose rows scaled by the inverse norms of ``X`` are the unit
rows' projections: the local predictor on them is the one on the unit rows
with its coefficients restricted to ``span(P)`` (``u P W = u (P W)``), so a
new point's logits take ``P W`` on its own unit row.
"""

import numpy as np

from .rows import NORM_BLOCK_ROWS, float64_scaled_rows

__all__ = ["MIN_FEATURES", "MIN_ROW_ENERGY", "MAX_KEPT_SHARE", "principal_directions", "projected_rows"]

#: Features with fewer columns are kept as they are: their products cost little (scikit-learn's 8 x 8 digits,
#: 64 columns on 16 directions: 0.94x the fit's time with a validation set, -1.36 +- 0.98 points at 30%).
MIN_FEATURES = 128
#: The directions are used only when they drop at least a quarter of the columns.
MAX_KEPT_SHARE = 0.75
#: ... and when every unit row keeps at least this share of its energy on them (a row
#: all but orthogonal to them would keep no direction of its own to be judged by).
MIN_ROW_ENERGY = 0.01


def principal_directions(features, row_scale, energy):
    """The fewest leading uncentred principal directions of the unit rows that keep ``energy``.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features), float32
    row_scale : ndarray of shape (n_samples,) or None
        The rows' inverse norms (:func:`fastprop.rows.inverse_norms`; None: unit rows).
    energy : float or None
        Share of the unit rows' sum of squares (``n_samples``) to keep, in
        (0, 1]; None keeps every column.

    Returns
    -------
    ndarray of shape (n_features, n_kept), float64, or None
        Orthonormal columns, the eigenvectors of ``U^T U`` (``U`` the unit
        rows) by decreasing eigenvalue; None when no projection is due:
        ``energy`` None, fewer than :data:`MIN_FEATURES` columns, or more than
        :data:`MAX_KEPT_SHARE` of them needed.
    """
    n_features = features.shape[1]
    if energy is None or n_features < MIN_FEATURES:
        return None
    gram = np.zeros((n_features, n_features))
    for start in range(0, features.shape[0], NORM_BLOCK_ROWS):
        rows = slice(start, start + NORM_BLOCK_ROWS)
        block = float64_scaled_rows(features[rows], None if row_scale is None else row_scale[rows])
        gram += block.T @ block
    values, vectors = np.linalg.eigh(gram)
    values, vectors = np.clip(values[::-1], 0.0, None), vectors[:, ::-1]
    kept = np.cumsum(values) >= energy * values.sum()
    n_kept = int(np.argmax(kept)) + 1 if kept.any() else n_features  # rounding can leave the sum a hair short
    if n_kept > MAX_KEPT_SHARE * n_features:
        return None
    return np.ascontiguousarray(vectors[:, :n_kept])


def projected_rows(features, row_scale, directions):
    """``features @ directions`` in float32, or None when a unit row keeps too little energy on them.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features), float32
    row_scale : ndarray of shape (n_samples,) or None
        As for :func:`principal_directions`.
    directions : ndarray of shape (n_features, n_kept)
        Orthonormal columns.

    Returns
    -------
    ndarray of shape (n_samples, n_kept), float32, or None
        None when some unit row keeps less than :data:`MIN_ROW_ENERGY` of
        its squared norm (1) on ``directions``.
    """
    projected = np.empty((features.shape[0], directions.shape[1]), dtype=np.float32)
    directions32 = directions.astype(np.float32)
    for start in range(0, features.shape[0], NORM_BLOCK_ROWS):
        rows = slice(start, start + NORM_BLOCK_ROWS)
        block = features[rows] @ directions32
        kept = float64_scaled_rows(block, None if row_scale is None else row_scale[rows])
        if np.einsum("ij,ij->i", kept, kept).min() < MIN_ROW_ENERGY:
            return None
        projected[rows] = block
    return projected
