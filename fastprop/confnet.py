"""ConfNet: an SGC + logistic regression that learns in-class vs outlier.

It is trained on what propagation discovered: the top-eta most confident
unlabeled vertices are positives (likely genuine members), the top-eta least
confident are negatives (likely outliers). FastProp runs it inside ``fit``;
:func:`refine_confidence` runs it on the output of any method, as the
paper's Fig. 6 does.
"""

import numpy as np

from ._concurrency import serialised
from ._kernels.descriptors import N_DESCRIPTORS, structural_descriptors
from ._validation import (check_choice, check_confidence, check_distributions, check_graph, check_integer,
                          check_random_state, check_real)
from .adjacency import RandomWalk
from .linear import feature_spread, fit_logistic_regression, sigmoid_proba

__all__ = ["refine_confidence"]


@serialised
def refine_confidence(graph, label_distributions, confidence=None, *, labeled=None, combine="mean", eta=0.05,
                      depth=1, l2=1e-3, random_state=None):
    """ConfNet as a post-processing step: a better confidence for any method's labels.

    The paper (Yang et al., ECCV 2020, Fig. 6) shows that ConfNet, trained on
    a method's own most and least confident samples, lifts that method's
    outlier detection. ConfNet sees class-agnostic descriptors of each
    prediction (top probability, margin, entropy, neighbour agreement,
    similarity to neighbours, degree; :func:`structural_features`), smoothed
    ``depth`` steps over the graph, and a logistic regression separates the
    ``eta`` most confident unlabeled samples from the ``eta`` least confident.

    Parameters
    ----------
    graph : sparse matrix of shape (n_samples, n_samples)
        The affinity graph the method used (non-negative weights).
    label_distributions : array_like of shape (n_samples, n_classes)
        The method's class probabilities (or non-negative scores, normalised here).
    confidence : array_like of shape (n_samples,), optional
        The method's confidence; by default the row maximum of the distributions.
    labeled : array_like of bool (n_samples,) or of int, optional
        The seeds (a boolean mask, or distinct indices): never trained on, and they keep ``confidence``.
    combine : {"mean", "confnet"}, default="mean"
        ``"mean"``: the mean of ``confidence`` and ConfNet's (the paper's
        ConfNet-dagger, FastProp's default); ``"confnet"``: ConfNet's alone.
    eta : float in (0, 0.5], default=0.05
    depth : int, default=1
        SGC depth of ConfNet.
    l2 : float, default=1e-3
        Ridge penalty of its logistic regression.
    random_state : int, Generator or None
        Breaks ties between equally confident samples.

    Returns
    -------
    ndarray of shape (n_samples,)
        The refined confidence in [0, 1]; ``confidence`` itself (as float64)
        when fewer than two unlabeled samples leave nothing to learn from.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop import build_knn_graph
    >>> from fastprop.baselines import SGC
    >>> from fastprop.confnet import refine_confidence
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> G = build_knn_graph(X, 10)
    >>> model = SGC().fit(X, y, graph=G)
    >>> refined = refine_confidence(G, model.label_distributions_, labeled=y >= 0, random_state=0)
    >>> refined.shape, bool(((refined >= 0) & (refined <= 1)).all())
    ((100,), True)
    """
    distributions = check_distributions(label_distributions, _n_rows(graph))
    n_samples = distributions.shape[0]
    graph = check_graph(graph, n_samples)
    if confidence is None:
        scores = distributions.max(axis=1)
    else:
        scores = check_confidence(confidence)
        if scores.shape != (n_samples,):
            raise ValueError(
                f"confidence must be {n_samples} finite numbers, one per sample, got shape {np.shape(confidence)}."
            )
        if scores.min() < 0 or scores.max() > 1:
            raise ValueError(
                f"confidence must lie in [0, 1], got values from {scores.min():.6g} to {scores.max():.6g}; "
                "map the method's score there first (e.g. its rank divided by the number of samples)."
            )
    seeds = _seed_mask(labeled, n_samples)
    check_choice("combine", combine, ("mean", "confnet"))
    eta = check_real("eta", eta, low=0, high=0.5, low_inclusive=False)
    depth = check_integer("depth", depth, low=0, high=10)
    l2 = check_real("l2", l2, low=0)
    tie_rank = check_random_state(random_state).permutation(n_samples)
    walk = RandomWalk(graph)
    inputs = structural_features(walk, distributions, np.zeros(n_samples, dtype=np.int64))
    learnt = confnet_confidence(walk, inputs, scores, np.flatnonzero(~seeds), eta=eta, depth=depth, l2=l2,
                                tie_rank=tie_rank)
    if learnt is None:
        return scores.copy()
    refined = learnt if combine == "confnet" else 0.5 * (scores + learnt)
    refined = np.clip(refined, 0.0, 1.0)
    refined[seeds] = scores[seeds]
    return refined


def _n_rows(graph):
    shape = getattr(graph, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"graph must be a sparse (n_samples, n_samples) matrix, got {type(graph).__name__}.")
    return shape[0]


def _seed_mask(labeled, n_samples):
    """``labeled`` (None, a boolean mask or indices) as a boolean mask."""
    mask = np.zeros(n_samples, dtype=bool)
    if labeled is None:
        return mask
    labeled = np.asarray(labeled)
    if labeled.dtype == np.bool_:
        if labeled.shape != (n_samples,):
            raise ValueError(f"labeled as a mask must have shape ({n_samples},), got {labeled.shape}.")
        return labeled.copy()
    if labeled.ndim == 1 and labeled.size == 0:
        return mask  # an empty list: no seed (NumPy makes it float64)
    if labeled.ndim != 1 or not np.issubdtype(labeled.dtype, np.integer):
        raise ValueError("labeled must be a boolean mask or a 1-D array of sample indices.")
    if labeled.size and (labeled.min() < 0 or labeled.max() >= n_samples):
        raise ValueError(f"labeled indices must be in [0, {n_samples - 1}].")
    if np.unique(labeled).size != labeled.size:
        raise ValueError(
            "labeled indices repeat; if labeled is a 0/1 mask of integers, pass it as booleans "
            "(labeled.astype(bool)) or as indices (numpy.flatnonzero(labeled))."
        )
    mask[labeled] = True
    return mask


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
    centre, scale = _standardisation(rows)
    coef, intercept = fit_logistic_regression((rows - centre) / scale, targets, l2=l2)
    # Linear before the sigmoid: smooth the scores, not the features. The walk's rows sum to 1, so it
    # keeps the centre's constant as it is: the intercept takes it.
    weights = coef / scale
    scores = walk.smooth(features @ weights.astype(features.dtype), None, depth)
    return sigmoid_proba(scores[:, None], np.ones(1), intercept - centre @ weights)


def _standardisation(rows):
    """A per-feature centre and scale that keep the logistic regression well conditioned.

    Centred, the unpenalised intercept no longer trades off against every
    weight (the descriptors' means are 7-22 spreads from 0), and L-BFGS
    reaches the optimum; the optimum's scores are the same either way.
    """
    scale = feature_spread(rows, axis=0)
    scale[scale == 0] = 1.0  # a constant column (up to rounding) stays as it is
    return rows.mean(axis=0), scale


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
