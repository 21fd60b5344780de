"""Row norms of feature matrices, and the memory budget of blocked similarity products.

Shared by the kNN search (:mod:`fastprop.graph`), the spatial order of its
hnsw inserts (:mod:`fastprop.locality`) and the estimator.
"""

import numpy as np

#: Float32 bytes of one block of a blocked similarity product (the exact kNN
#: search, the nearest-centroid assignment).
SIMILARITY_BLOCK_BYTES = 64 * 2**20
#: Rows whose norms are computed at a time: no (n, d) temporary of squares.
NORM_BLOCK_ROWS = 16384


def inverse_norms(features):
    """``1 / ||x_i||`` for every row, or None when every norm is already 1 (within 1e-4).

    ``features`` must have no all-zero row (validation ensures it).
    """
    norms = np.empty(features.shape[0])
    for start in range(0, features.shape[0], NORM_BLOCK_ROWS):
        block = features[start : start + NORM_BLOCK_ROWS].astype(np.float64)
        norms[start : start + block.shape[0]] = np.sqrt(np.einsum("ij,ij->i", block, block))
    if np.all(np.abs(norms - 1.0) <= 1e-4):
        return None
    return 1.0 / norms


def unit_rows(features):
    """Rows scaled to unit L2 norm; ``features`` itself when they already are.

    Embeddings usually arrive normalised, and a million-row copy is worth
    skipping.
    """
    scale = inverse_norms(features)
    if scale is None:
        return features
    return (features * scale[:, None]).astype(features.dtype, copy=False)
