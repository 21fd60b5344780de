"""ConfNet: an SGC + logistic regression that learns in-class vs outlier.

It is trained on what propagation discovered: the top-eta most confident
unlabeled vertices are positives (likely genuine members), the top-eta least
confident are negatives (likely outliers).
"""

import numpy as np

from ._kernels.descriptors import N_DESCRIPTORS, structural_descriptors
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


def confnet_confidence(walk, features, confidence, candidates, *, eta, depth, l2, tie_rank):
    """Fit ConfNet on the extremes of ``confidence`` and score every vertex.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
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
    rows = walk.smooth(features, training, depth)
    scale = _feature_scale(rows)
    coef, intercept = fit_logistic_regression(rows / scale, targets, l2=l2)
    # Linear before the sigmoid: smooth the scores, not the features.
    scores = walk.smooth(features @ (coef / scale).astype(features.dtype), None, depth)
    return sigmoid_proba(scores[:, None], np.ones(1), intercept)


def _feature_scale(rows):
    """A per-feature scale that keeps the logistic regression well conditioned."""
    scale = rows.std(axis=0)
    scale[scale == 0] = 1.0
    return scale


def structural_features(walk, distributions, view_count):
    """Class-agnostic descriptors of how trustworthy each vertex's prediction is.

    ConfNet on raw embeddings learns *which classes* propagation found
    confident first, and then calls the in-class members of slower classes
    outliers. These descriptors do not name a class, so what ConfNet learns
    transfers across classes: the prediction's top probability, margin and
    entropy, how much the neighbours agree with it (the largest entry of
    the walk's neighbour mean and its dot product with the prediction), how
    similar the vertex is to its neighbours (mean and max edge weight), its
    degree and its number of views. Computed row by row in one parallel
    kernel, with no (n, n_classes) temporary.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
    distributions : ndarray of shape (n, n_classes), float64
        Rows sum to 1.
    view_count : ndarray of shape (n,), int64

    Returns
    -------
    ndarray of shape (n, 9)
    """
    descriptors = np.empty((distributions.shape[0], N_DESCRIPTORS))
    graph = walk.graph
    structural_descriptors(graph.indptr, graph.indices, graph.data, walk.inverse_degree,
                           np.ascontiguousarray(distributions, dtype=np.float64), view_count, descriptors)
    return descriptors
