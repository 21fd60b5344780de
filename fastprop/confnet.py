"""ConfNet: an SGC + logistic regression that learns in-class vs outlier.

It is trained on what propagation discovered: the top-eta most confident
unlabeled vertices are positives (likely genuine members), the top-eta least
confident are negatives (likely outliers).
"""

import numpy as np

from .adjacency import smooth_rows
from .linear import fit_logistic_regression, sigmoid_proba


def extreme_vertices(confidence, candidates, eta, tie_rank):
    """The top-eta most and least confident of ``candidates``.

    Returns
    -------
    positives, negatives : ndarray of int64
        Disjoint, each ``max(1, round(eta * len(candidates)))`` long (at most
        half of the candidates each); ties broken by ``tie_rank``.
    """
    n_each = min(max(1, int(round(eta * candidates.size))), candidates.size // 2)
    order = np.lexsort((tie_rank[candidates], -confidence[candidates]))
    ranked = candidates[order]
    return ranked[:n_each], ranked[ranked.size - n_each :]


def confnet_confidence(adjacency, features, confidence, candidates, *, eta, depth, l2, tie_rank):
    """Fit ConfNet on the extremes of ``confidence`` and score every vertex.

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix
        ``D~^-1 (A + I)`` of the whole graph.
    features : ndarray of shape (n, n_features)
    confidence : ndarray of shape (n,)
        Multi-view confidence.
    candidates : ndarray of int64
        The unlabeled vertices to draw positives and negatives from.
    eta : float
        Fraction of candidates taken as positives, and as negatives.
    depth : int
        SGC depth of ConfNet.
    l2 : float
        Ridge penalty of the logistic regression.
    tie_rank : ndarray of shape (n,)

    Returns
    -------
    ndarray of shape (n,), or None
        The probability of being a genuine member, for every vertex; None
        when there are fewer than two candidates to learn from.
    """
    if candidates.size < 2:
        return None
    positives, negatives = extreme_vertices(confidence, candidates, eta, tie_rank)
    training = np.concatenate([positives, negatives])
    targets = np.concatenate([np.ones(positives.size), np.zeros(negatives.size)])
    rows = smooth_rows(adjacency, features, training, depth)
    scale = _feature_scale(rows)
    coef, intercept = fit_logistic_regression(rows / scale, targets, l2=l2)
    # Linear before the sigmoid: smooth the scores, not the features.
    scores = smooth_rows(adjacency, features @ (coef / scale).astype(features.dtype), slice(None), depth)
    return sigmoid_proba(scores[:, None], np.ones(1), intercept)


def _feature_scale(rows):
    """A per-feature scale that keeps the logistic regression well conditioned."""
    scale = rows.std(axis=0)
    scale[scale == 0] = 1.0
    return scale


def structural_features(graph, adjacency, distributions, view_count):
    """Class-agnostic descriptors of how trustworthy each vertex's prediction is.

    ConfNet on raw embeddings learns *which classes* propagation found
    confident first, and then calls the in-class members of slower classes
    outliers. These descriptors do not name a class, so what ConfNet learns
    transfers across classes: the prediction's top probability, margin and
    entropy, how much the neighbours agree with it, how similar the vertex
    is to its neighbours, its degree and its number of views.

    Returns
    -------
    ndarray of shape (n, 9)
    """
    ordered = np.sort(distributions, axis=1)
    top, second = ordered[:, -1], ordered[:, -2] if distributions.shape[1] > 1 else np.zeros(len(ordered))
    entropy = -(distributions * np.log(np.clip(distributions, 1e-12, None))).sum(axis=1)
    neighbour_mean = adjacency @ distributions
    agreement = (neighbour_mean * distributions).sum(axis=1)
    degree = np.diff(graph.indptr)
    weight_sum = np.asarray(graph.sum(axis=1)).ravel()
    max_weight = np.zeros(len(degree))
    has_edges = degree > 0
    if has_edges.any():
        # reduceat over the non-empty rows only: an empty last row would index past the data
        max_weight[has_edges] = np.maximum.reduceat(graph.data, graph.indptr[:-1][has_edges])
    mean_weight = weight_sum / np.maximum(degree, 1)
    return np.column_stack([top, top - second, entropy, neighbour_mean.max(axis=1), agreement,
                            mean_weight, max_weight, np.log1p(degree), np.log1p(view_count)])
