"""``confidence="global"``: one view of the whole graph instead of the patch loop, and ``"auto"``'s choice of it."""

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import minimize
from scipy.sparse.csgraph import connected_components
from scipy.special import log_softmax, softmax

from fastprop import FastProp, build_knn_graph
from fastprop.refinement import DecisionOptions, first_threshold
from fastprop.threshold import FIRST_IDENTIFIED_BELOW, FIRST_IDENTIFIED_SHARE, automatic_threshold, choose_threshold
from reference import dense_random_walk, two_seeded_clusters_and_an_unseeded_one

#: Settings that read the outputs alone: no provisional classes, calibration, self-training or threshold.
PLAIN = dict(pseudo_labels=0, provisional_classes=False, calibrate_confidence=False, outlier_threshold=None)


def reference_sgc_probabilities(graph, X, seeds, seed_class, n_classes, depth, l2):
    """``softmax(S^depth X_unit W + b)`` with ``W, b`` minimising the seeds' mean cross-entropy + ``l2 / 2 |W|^2``."""
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    smoothed = np.linalg.matrix_power(dense_random_walk(graph.toarray()), depth) @ unit
    rows, targets = smoothed[seeds], np.eye(n_classes)[seed_class]

    def loss(params):
        coef = params[:-n_classes].reshape(X.shape[1], n_classes)
        log_probabilities = log_softmax(rows @ coef + params[-n_classes:], axis=1)
        return -np.mean(np.sum(targets * log_probabilities, axis=1)) + 0.5 * l2 * np.sum(coef**2)

    params = minimize(loss, np.zeros((X.shape[1] + 1) * n_classes), method="BFGS", options={"gtol": 1e-10}).x
    coef = params[:-n_classes].reshape(X.shape[1], n_classes)
    return softmax(smoothed @ coef + params[-n_classes:], axis=1)


def test_the_global_confidence_is_the_whole_graph_sgc_probability_of_a_dense_reference():
    X, y, _, _ = two_seeded_clusters_and_an_unseeded_one()
    model = FastProp(n_neighbors=10, random_state=0, confidence="global", predictor_l2=1e-2, **PLAIN).fit(X, y)
    graph = model.graph_
    assert connected_components(graph, directed=False)[0] == 1  # every sample in the seeds' component
    seeds = np.flatnonzero(y >= 0)
    expected = reference_sgc_probabilities(graph, X.astype(np.float64), seeds, y[seeds], 2, depth=2,
                                           l2=model.predictor_l2_)
    unlabeled = y < 0
    assert_allclose(model.label_distributions_[unlabeled], expected[unlabeled], rtol=0, atol=1e-5)
    assert_allclose(model.confidence_[unlabeled], expected[unlabeled].max(axis=1), rtol=0, atol=1e-5)
    assert_array_equal(model.confidence_[unlabeled], model.label_distributions_[unlabeled].max(axis=1))
    assert_array_equal(model.multiview_confidence_, model.confidence_)
    assert np.all(model.confidence_[~unlabeled] == 1.0)
    # no patch loop, no ConfNet: one view a sample
    assert model.n_iter_ == 0 and model.n_starts_ == 0 and np.isnan(model.confnet_confidence_).all()
    assert_array_equal(model.view_count_, np.where(unlabeled, 1, 0))


def test_a_component_without_a_seed_is_unreached_and_rejected():
    rng = np.random.default_rng(0)
    centres = 30 * np.eye(8)[:3]
    X = np.vstack([c + rng.normal(size=(40, 8)) for c in centres]).astype(np.float32)
    y = np.full(len(X), -1)
    y[[0, 1, 40, 41]] = [0, 0, 1, 1]
    graph = build_knn_graph(X, 10, random_state=0)
    assert connected_components(graph, directed=False)[0] == 3
    unseeded = np.arange(80, 120)
    model = FastProp(n_neighbors=10, random_state=0, confidence="global").fit(X, y, graph=graph)
    assert np.all(model.view_count_[unseeded] == 0) and np.all(model.multiview_confidence_[unseeded] == 0.0)
    assert np.all(model.transduction_[unseeded] == -1)  # "auto" rejects what nothing reached
    assert np.all(model.transduction_[(y < 0) & (np.arange(len(X)) < 80)] == np.repeat([0, 1], 40)[2:-2])


def test_auto_is_the_global_confidence_but_where_the_papers_was_measured_better():
    X, y, truth, validation = two_seeded_clusters_and_an_unseeded_one(n_per=60)
    given = (validation, truth[validation])
    graph = build_knn_graph(X, 10, random_state=0)
    cases = [  # (settings, with a validation set, the source "auto" resolves to)
        ({}, True, "global"), ({}, False, "global"),
        ({"outlier_share": 0.3}, True, "global"), ({"outlier_share": 0.3}, False, "both"),
        ({"provisional_classes": False}, False, "both"), ({"outlier_threshold": 0.4}, False, "both"),
    ]
    for settings, checked, same in cases:
        fits = [FastProp(n_neighbors=10, random_state=1, confidence=source, **settings).fit(
            X, y, graph=graph, validation=given if checked else None) for source in ("auto", same)]
        for attribute in ("confidence_", "label_distributions_", "transduction_", "view_count_"):
            assert_array_equal(getattr(fits[0], attribute), getattr(fits[1], attribute), err_msg=str(settings))
        assert (fits[0].n_iter_ == 0) == (same == "global")
    assert FastProp().confidence == "auto"


def test_without_a_validation_set_the_global_confidence_first_identifies_its_lowest_share():
    confidence = np.array([0.9, 0.2, 0.95, 0.5, 0.99, 0.1, 0.7, 0.8, 0.6, 0.97, 0.3, 0.4, 0.85, 0.92, 0.65, 0.75,
                           0.88, 0.91, 0.96, 0.99])
    reached = np.arange(20)
    predicted = np.zeros(20, dtype=np.int64)
    unaided = DecisionOptions(outlier_threshold="auto", outlier_share=None, provisional_classes=True,
                              confidence="global", calibrate_confidence=True, validation_rule="smoothed",
                              predictor_depth=2, predictor_l2=3e-5, n_neighbors=10)
    cut = first_threshold(unaided, confidence, predicted, reached, None)
    assert FIRST_IDENTIFIED_SHARE == 0.15
    assert cut == 0.4 and np.array_equal(np.flatnonzero(confidence < cut), [1, 5, 10])  # 0.15 x 20: the 3 lowest
    # never at or above the paper's confident-set bar: a sure predictor identifies nothing
    assert FIRST_IDENTIFIED_BELOW == 0.9
    sure = np.r_[np.full(10, 0.999), 0.95, 0.92, 0.5, 0.6]
    cut = first_threshold(unaided, sure, predicted[:14], np.arange(14), None)
    assert cut == 0.9 and np.array_equal(np.flatnonzero(sure < cut), [12, 13])  # 2 of 14: 0.15 x 14 rounds to 2
    assert first_threshold(unaided, np.full(14, 0.999), predicted[:14], np.arange(14), None) == 0.9
    # The paper's confidence keeps "auto"'s half of Otsu's split; a validation set or a number, their own.
    papers = replace(unaided, confidence="both")
    assert first_threshold(papers, confidence, predicted, reached, None) == automatic_threshold(confidence)
    assert first_threshold(replace(unaided, outlier_threshold=0.42), confidence, predicted, reached, None) == 0.42
    truth = np.where(confidence < 0.45, -1, 0)
    assert first_threshold(unaided, confidence, predicted, reached, (reached, truth)) == choose_threshold(
        confidence, predicted, truth)


@pytest.mark.parametrize("setting", [
    dict(min_gain=3.0), dict(max_patch_size=5), dict(process_capped_patches=True), dict(patch_batch_size=7),
    dict(exclusion_hops=3), dict(confident_threshold=0.3), dict(single_view_confidence=0.5),
    dict(single_view_restarts=False), dict(confnet_depth=4), dict(confnet_l2=10.0), dict(eta=0.4),
    dict(confnet_features="embedding"),
])
def test_the_patch_and_confnet_settings_are_inert_under_the_global_confidence(setting):
    X, y, truth, validation = two_seeded_clusters_and_an_unseeded_one(n_per=50)
    graph = build_knn_graph(X, 10, random_state=0)
    fit = [FastProp(n_neighbors=10, random_state=0, confidence="global", **params).fit(
        X, y, graph=graph, validation=(validation, truth[validation])) for params in ({}, setting)]
    assert_array_equal(fit[0].confidence_, fit[1].confidence_)
    assert_array_equal(fit[0].transduction_, fit[1].transduction_)


def test_the_global_confidence_trains_on_patches_when_asked_and_holds_for_int32_graphs():
    X, y, truth, validation = two_seeded_clusters_and_an_unseeded_one(n_per=50)
    graph = build_knn_graph(X, 10, random_state=0)
    small = sp.csr_matrix((graph.data, graph.indices.astype(np.int32), graph.indptr.astype(np.int32)),
                          shape=graph.shape)
    given = (validation, truth[validation])
    wide, narrow = (FastProp(n_neighbors=10, random_state=0, confidence="global").fit(X, y, graph=g, validation=given)
                    for g in (graph, small))
    assert_array_equal(wide.confidence_, narrow.confidence_)
    patches = FastProp(n_neighbors=10, random_state=0, confidence="global", predictor_training="patches").fit(
        X, y, graph=graph, validation=given)
    assert patches.n_training_patches_ > 0 and patches.n_iter_ == 0
    assert np.mean(patches.transduction_[truth >= 0] == truth[truth >= 0]) > 0.9


@pytest.mark.parametrize("seed", range(4))
def test_component_roots_match_scipys_weak_components(seed):
    """The union-find kernel against ``scipy.sparse.csgraph.connected_components``: same partition, smallest roots."""
    from fastprop._kernels.components import component_roots

    rng = np.random.default_rng(seed)
    n = 300
    rows, cols = rng.integers(0, n, size=(2, 250))  # sparse, one-way edges, isolated vertices, self loops
    graph = sp.csr_matrix((np.ones(250), (rows, cols)), shape=(n, n))
    for indices_dtype in (np.int64, np.int32):
        roots = component_roots(graph.indptr.astype(indices_dtype), graph.indices.astype(indices_dtype))
        n_components, labels = connected_components(graph, directed=True, connection="weak")
        assert np.unique(roots).size == n_components
        for label in range(n_components):
            members = np.flatnonzero(labels == label)
            assert np.all(roots[members] == members.min())
