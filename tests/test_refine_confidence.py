"""ConfNet as post-processing for any method (refine_confidence)."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import minimize
from scipy.special import log_expit

from fastprop import build_knn_graph
from fastprop.adjacency import RandomWalk
from fastprop.baselines import SGC
from fastprop.confnet import (_standardisation, confnet_confidence, extreme_vertices, refine_confidence,
                              structural_features)
from fastprop.evaluation.datasets import make_noisy_mixture
from fastprop.evaluation.protocol import make_noisy_task, outlier_auroc


@pytest.fixture(scope="module")
def noisy():
    X, y_pool = make_noisy_mixture(3000, 6, n_features=32, outlier_fraction=0.5, random_state=0)
    task = make_noisy_task(y_pool, 4, label_ratio=0.02, noise_ratio=0.5, random_state=0)
    features = task.subset(X)
    return features, task, build_knn_graph(features, 15, random_state=0)


def test_it_is_confnet_on_the_method_output(noisy):
    features, task, graph = noisy
    model = SGC().fit(features, task.y, graph=graph)
    seeds = task.y >= 0
    refined = refine_confidence(graph, model.label_distributions_, labeled=seeds, combine="confnet", random_state=3)
    walk = RandomWalk(graph)
    normalised = model.label_distributions_ / model.label_distributions_.sum(axis=1, keepdims=True)
    inputs = structural_features(walk, normalised, np.zeros(len(seeds), dtype=np.int64))
    tie_rank = np.random.default_rng(3).permutation(len(seeds))
    expected = confnet_confidence(walk, inputs, model.confidence_, np.flatnonzero(~seeds), eta=0.05, depth=1,
                                  l2=1e-3, tie_rank=tie_rank)
    expected[seeds] = model.confidence_[seeds]
    assert_allclose(refined, expected)
    mean = refine_confidence(graph, model.label_distributions_, labeled=np.flatnonzero(seeds), random_state=3)
    assert_allclose(mean[~seeds], 0.5 * (model.confidence_[~seeds] + expected[~seeds]))
    assert_array_equal(mean[seeds], model.confidence_[seeds])


def test_it_recovers_a_signal_the_distributions_carry_and_the_confidence_blurs(noisy):
    """In-class samples have peaked distributions, outliers flat ones; the method's confidence is that
    signal plus noise. ConfNet, trained on the confidence's extremes, reads the descriptors instead."""
    features, task, graph = noisy
    rng = np.random.default_rng(0)
    n, in_class = graph.shape[0], task.truth >= 0
    distributions = rng.dirichlet(np.ones(4), size=n) * 0.3
    distributions[np.arange(n), rng.integers(0, 4, n)] += np.where(in_class, 2.0, 0.2)
    distributions /= distributions.sum(axis=1, keepdims=True)
    blurred = np.clip(distributions.max(axis=1) + rng.normal(0, 0.25, n), 0, 1)
    refined = refine_confidence(graph, distributions, blurred, labeled=task.y >= 0, combine="confnet", random_state=0)
    before, after = outlier_auroc(blurred, task.truth), outlier_auroc(refined, task.truth)
    assert before < 0.85 and after > 0.95, (before, after)


def test_bad_inputs_say_what_is_wrong(noisy):
    features, task, graph = noisy
    n = graph.shape[0]
    good = np.full((n, 3), 1 / 3)
    with pytest.raises(ValueError, match="must have shape"):
        refine_confidence(graph, good[:-1])
    with pytest.raises(ValueError, match="negative values"):
        refine_confidence(graph, -good)
    with pytest.raises(ValueError, match="all-zero rows"):
        refine_confidence(graph, np.zeros((n, 3)))
    with pytest.raises(ValueError, match="confidence has 1 NaN or infinite value"):
        refine_confidence(graph, good, confidence=np.r_[np.nan, np.full(n - 1, 0.5)])
    with pytest.raises(ValueError, match="confidence must be 5 finite numbers"):
        refine_confidence(graph[:5, :5], good[:5], confidence=np.full(4, 0.5))
    with pytest.raises(ValueError, match="confidence must hold real numbers"):
        refine_confidence(graph, good, confidence=np.full(n, "0.5"))
    # a score outside [0, 1] came back as it was (5.0 for a seed, up to 5.0 elsewhere): the docstring's range
    with pytest.raises(ValueError, match=r"confidence must lie in \[0, 1\], got values from -5 to 5"):
        refine_confidence(graph, good, confidence=np.r_[-5.0, np.full(n - 1, 5.0)])
    with pytest.raises(ValueError, match="combine"):
        refine_confidence(graph, good, combine="max")
    with pytest.raises(ValueError, match="labeled indices must be in"):
        refine_confidence(graph, good, labeled=[n])
    # an empty list is no seed, as None is (NumPy makes it float64: it was refused as not indices)
    assert_array_equal(refine_confidence(graph, good, labeled=[], random_state=0),
                       refine_confidence(graph, good, labeled=None, random_state=0))
    with pytest.raises(ValueError, match="labeled must be a boolean mask or a 1-D array of sample indices"):
        refine_confidence(graph, good, labeled=[0.0, 1.0])
    tiny = build_knn_graph(features[:3], 2)
    assert_array_equal(refine_confidence(tiny, good[:3], confidence=np.array([0.2, 0.5, 0.9]), labeled=[0, 1]),
                       [0.2, 0.5, 0.9])  # one unlabeled sample: nothing to learn from


def test_a_descriptor_flat_up_to_rounding_does_not_switch_confnet_off(noisy):
    # A graph of equal weights: the mean and largest edge weight descriptors are 0.3 everywhere, up to
    # ~1e-17 of rounding; divided by that "spread" they reached ~1e16 and the fit stopped at its start.
    features, task, graph = noisy
    flat = graph.copy()
    flat.data[:] = np.float32(0.3)
    model = SGC().fit(features, task.y, graph=flat)
    seeds = task.y >= 0
    refined = refine_confidence(flat, model.label_distributions_, labeled=seeds, combine="confnet", random_state=0)
    unlabeled = refined[~seeds]
    assert np.ptp(unlabeled) > 0.5
    assert outlier_auroc(unlabeled, task.truth[~seeds]) > 0.6
    centre, scale = _standardisation(np.c_[np.full(50, 0.3) + 1e-17 * np.arange(50), np.arange(50.0)])
    assert scale[0] == 1.0 and scale[1] == pytest.approx(np.arange(50.0).std())
    assert_allclose(centre, [0.3, 24.5])


def test_confnet_reaches_its_optimum_whatever_the_descriptors_offset():
    # The descriptors sit 7-22 spreads from 0. Uncentred, the unpenalised intercept traded off against every weight
    # and L-BFGS stopped on its relative tolerance far from the optimum: a 1-ulp change of the distributions
    # (D against 3 D, normalised back) moved the refined confidence by up to 0.17.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 8))[np.arange(300) % 3] * 3 + rng.normal(size=(300, 8))
    graph = build_knn_graph(X, 10, random_state=0)
    distributions = np.random.default_rng(0).dirichlet(np.ones(3), size=300)
    refined = refine_confidence(graph, distributions, random_state=0)
    for same in (3.0 * distributions, distributions / distributions.sum(axis=1, keepdims=True)):
        assert_allclose(refine_confidence(graph, same, random_state=0), refined, rtol=0, atol=1e-9)
    # ConfNet's scores against the penalised optimum found by SciPy on the same rows, uncentred
    walk = RandomWalk(graph)
    candidates = np.arange(300)
    inputs = structural_features(walk, distributions, np.zeros(300, dtype=np.int64))
    tie_rank = np.random.default_rng(5).permutation(300)
    positives, negatives = extreme_vertices(distributions.max(axis=1), candidates, 0.05, tie_rank)
    rows = walk.smooth(inputs, np.concatenate([positives, negatives]), 1)
    targets = np.r_[np.ones(positives.size), np.zeros(negatives.size)]
    l2 = 1e-3
    scaled = rows / _standardisation(rows)[1]  # the ridge is on the weights of features of unit spread

    def loss(params):
        scores = scaled @ params[:-1] + params[-1]
        log_loss = -np.mean(targets * log_expit(scores) + (1 - targets) * log_expit(-scores))
        return log_loss + 0.5 * l2 * params[:-1] @ params[:-1]

    optimum = minimize(loss, np.zeros(rows.shape[1] + 1), method="BFGS", options={"gtol": 1e-10, "maxiter": 100000}).x
    weights = optimum[:-1] / _standardisation(rows)[1]
    expected = 1 / (1 + np.exp(-(walk.smooth(inputs @ weights, None, 1) + optimum[-1])))
    found = confnet_confidence(walk, inputs, distributions.max(axis=1), candidates, eta=0.05, depth=1, l2=l2,
                               tie_rank=tie_rank)
    assert_allclose(found, expected, rtol=0, atol=1e-3)  # 0.33 away before
