"""New points: neighbourhood search, the fitted predictor on it, confidence, score; against dense references."""

import os
import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

import fastprop.prediction as prediction
from fastprop import FastProp
from fastprop._estimator_protocol import NotFittedError
from fastprop.rows import inverse_norms
from reference import assert_own_rows_give_fitted_labels


def clusters(seed=0, n_per_class=50, n_classes=3, dim=8, n_outliers=30):
    rng = np.random.default_rng(seed)
    centres = 4.0 * np.eye(dim)[:n_classes]
    X = np.vstack([centres[c] + rng.normal(size=(n_per_class, dim)) for c in range(n_classes)]
                  + [rng.normal(size=(n_outliers, dim)) - 3.0 * np.eye(dim)[-1]])
    truth = np.r_[np.repeat(np.arange(n_classes), n_per_class), np.full(n_outliers, -1)]
    y = np.full(truth.size, -1)
    y[np.arange(n_classes) * n_per_class] = np.arange(n_classes)
    return X.astype(np.float32), y, truth


@pytest.fixture(scope="module", params=[0, 1, 2], ids=["depth0", "depth1", "depth2"])
def fitted(request):
    X, y, truth = clusters()
    model = FastProp(n_neighbors=6, predictor_depth=request.param, random_state=0).fit(X, y)
    return X, y, truth, model


def dense_new_point_distributions(model, X, X_new):
    """The fitted graph plus the new points as vertices with out-edges only, smoothed densely."""
    n, depth = X.shape[0], int(model.predictor_depth)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    unit_new = X_new / np.linalg.norm(X_new, axis=1, keepdims=True)
    similarity = unit_new @ unit.T
    k = model.predictor_.n_neighbors
    rows = np.zeros((X_new.shape[0], n))
    for r in range(X_new.shape[0]):
        nearest = np.argsort(-similarity[r], kind="stable")[:k]
        rows[r, nearest] = np.maximum(similarity[r, nearest], 0)
    W = model.graph_.toarray().astype(np.float64)
    m = X_new.shape[0]
    big = np.zeros((n + m, n + m))
    big[:n, :n] = W
    big[n:, :n] = rows
    big += np.eye(n + m)
    walk = big / big.sum(axis=1, keepdims=True)
    coef, intercept = model.predictor_.scorer.coef.astype(np.float64), model.predictor_.scorer.intercept
    logits = np.vstack([unit, unit_new]) @ coef
    smoothed = np.linalg.matrix_power(walk, depth) @ logits
    return softmax(smoothed[n:] + intercept, axis=1)


def test_new_points_match_a_dense_augmented_graph(fitted):
    X, _, _, model = fitted
    rng = np.random.default_rng(1)
    X_new = (X[rng.choice(len(X), 25, replace=False)] + 0.3 * rng.normal(size=(25, X.shape[1]))).astype(np.float32)
    assert_allclose(model.predict_proba(X_new), dense_new_point_distributions(model, X, X_new), atol=1e-5)


def test_a_fitted_sample_with_its_own_graph_row_gets_its_transductive_label(fitted):
    X, y, _, model = fitted
    assert_own_rows_give_fitted_labels(model, X, y, step=7)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_linear_scorer_level_zero_is_the_unit_rows_logits_made_in_blocks_of_rows(depth, monkeypatch):
    from fastprop.adjacency import RandomWalk
    from fastprop.rows import float64_scaled_rows, inverse_norms

    X, y, _ = clusters(n_per_class=30)
    walk, row_scale = RandomWalk(FastProp(n_neighbors=6, random_state=0).fit(X, y).graph_), inverse_norms(X)
    coef = np.random.default_rng(0).normal(size=(X.shape[1], 7))
    intercept = np.arange(7.0)
    logits = float64_scaled_rows(X @ coef.astype(np.float32), row_scale)  # the fit's float64 level 0
    later = [walk.smooth(logits, None, k).astype(np.float32) for k in range(1, depth)]
    monkeypatch.setattr(prediction, "BLOCK_ROWS", 7)  # level 0's rows
    scorer = prediction.LinearScorer.from_later_levels(X, row_scale, coef, intercept, later if depth else None)
    assert len(scorer.logit_levels) == depth
    if depth:
        level = scorer.logit_levels[0]
        assert level.dtype == np.float32 and level.shape == (X.shape[0], 7)
        assert_array_equal(level, logits.astype(np.float32))  # bit for bit the fit's, in float32
        unit = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
        assert_allclose(level, unit @ coef, rtol=1e-5, atol=1e-5)
        assert all(kept is given for kept, given in zip(scorer.logit_levels[1:], later))
    assert_array_equal(scorer.intercept, intercept)


def test_exact_neighbours_are_the_cosine_top_k(fitted):
    X, _, _, model = fitted
    rng = np.random.default_rng(2)
    queries = rng.normal(size=(10, X.shape[1])).astype(np.float32)
    unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    indices, weights = model.predictor_.neighbours(unit)
    similarity = unit @ (X / np.linalg.norm(X, axis=1, keepdims=True)).T
    expected = np.argsort(-similarity, axis=1, kind="stable")[:, : model.predictor_.n_neighbors]
    assert_array_equal(indices, expected)
    assert_allclose(weights, np.maximum(np.take_along_axis(similarity, expected, axis=1), 0), atol=1e-6)


def test_agreement_is_the_agreeing_share_of_neighbour_confidence(fitted):
    X, y, _, model = fitted
    rng = np.random.default_rng(3)
    X_new = (X[:40] + 0.5 * rng.normal(size=(40, X.shape[1]))).astype(np.float32)
    unit = X_new / np.linalg.norm(X_new, axis=1, keepdims=True)
    indices, weights = model.predictor_.neighbours(unit)
    predicted = model.predict_proba(X_new).argmax(axis=1)
    fitted_class = model.label_distributions_.argmax(axis=1)
    expected = [np.sum(w * model.confidence_[j] * (fitted_class[j] == p)) / np.sum(w)
                for j, w, p in zip(indices, weights, predicted)]
    assert_allclose(prediction.agreement(predicted, indices, weights, model.confidence_, fitted_class),
                    expected, atol=1e-12)
    assert_allclose(model.predict_confidence(X_new), model.predictor_.on_confidence_scale(np.array(expected)), atol=1e-12)
    # the fitted samples' own agreement, from their graph rows, by a dense loop
    dense = model.graph_.toarray()
    own = [np.sum(dense[i] * model.confidence_ * (fitted_class == fitted_class[i])) / dense[i].sum()
           for i in range(len(X))]
    assert_allclose(prediction.graph_agreement(model.graph_, model.confidence_, fitted_class), own, atol=1e-6)


def test_agreement_quantiles_map_onto_confidence_quantiles(fitted):
    X, y, _, model = fitted
    predictor = model.predictor_
    unlabeled = y < 0
    fitted_class = model.label_distributions_.argmax(axis=1)
    own = prediction.graph_agreement(model.graph_, model.confidence_, fitted_class)[unlabeled]
    levels = [0.1, 0.25, 0.5, 0.75, 0.9]
    for level in levels:
        value = np.quantile(own, level)
        if np.sum(np.isclose(own, value)) > 1:  # a tie spans several quantiles: its middle is taken
            continue
        assert predictor.on_confidence_scale(np.array([value]))[0] == pytest.approx(
            np.quantile(model.confidence_[unlabeled], level), abs=1e-3)
    grid = np.linspace(-0.5, 1.5, 401)
    assert np.all(np.diff(predictor.on_confidence_scale(grid)) >= 0)  # order kept
    assert predictor.on_confidence_scale(grid)[0] == model.confidence_[unlabeled].min()
    assert predictor.on_confidence_scale(grid)[-1] == model.confidence_[unlabeled].max()


def test_without_calibration_a_point_further_out_than_every_fitted_sample_loses_confidence(fitted):
    X, y, _, model = fitted
    assert model.confidence_calibration_ is None
    k = model.predictor_.n_neighbors
    dense = model.graph_.toarray()
    density = np.array([np.sort(row[row > 0])[::-1][:k].mean() for row in dense])
    floor, inside = density.min(), int(np.argmax(density))  # the sparsest fitted neighbourhood, the densest
    # a fitted sample moved along a direction no sample has: its cosine to everything shrinks by 1 / sqrt(1 + t^2)
    padded = np.c_[X, np.zeros((X.shape[0], 1), dtype=np.float32)]
    model = FastProp(n_neighbors=6, predictor_depth=model.predictor_depth, random_state=0).fit(padded, y)
    start = padded[inside] / np.linalg.norm(padded[inside])
    moved = np.array([start + t * np.eye(padded.shape[1])[-1] for t in (0.0, 0.5, 2.0, 10.0, 100.0)],
                     dtype=np.float32)
    confidence = model.predict_confidence(moved)
    unit = moved / np.linalg.norm(moved, axis=1, keepdims=True)
    indices, weights = model.predictor_.neighbours(unit)
    predicted = model.predict_proba(moved).argmax(axis=1)
    fitted_class = model.label_distributions_.argmax(axis=1)
    agreeing = prediction.agreement(predicted, indices, weights, model.confidence_, fitted_class)
    expected = model.predictor_.on_confidence_scale(agreeing) * np.minimum(weights.mean(axis=1) / floor, 1.0)
    assert_allclose(confidence, expected, atol=1e-12)
    assert weights[0].mean() > floor  # in the data: the confidence as before
    assert np.all(np.diff(confidence[1:]) < 0) and confidence[-1] < 0.02


def test_an_isolated_fitted_sample_does_not_turn_the_density_floor_off():
    from fastprop import build_knn_graph

    X, y, _ = clusters()
    graph = build_knn_graph(X, 6, random_state=0).tolil()
    graph[7, :] = 0
    graph[:, 7] = 0  # a vertex with no edge: its local density is 0
    graph = graph.tocsr()
    graph.eliminate_zeros()
    model = FastProp(n_neighbors=6, random_state=0).fit(X, y, graph=graph)
    dense = graph.toarray()
    densities = [np.sort(row[row > 0])[::-1][:6].mean() for row in dense if (row > 0).any()]
    assert model.predictor_.density_floor == pytest.approx(min(densities), rel=1e-12)
    padded = np.c_[X, np.zeros((X.shape[0], 1), dtype=np.float32)]
    model = FastProp(n_neighbors=6, random_state=0).fit(padded, y, graph=graph)
    far = (padded[:1] / np.linalg.norm(padded[0])).astype(np.float32)
    far[0, -1] = 30.0  # along the padded direction no sample has: cosine ~0.03 to everything
    assert model.predict_confidence(far)[0] < 0.1


def test_points_of_the_clusters_get_their_class_and_far_points_minus_one():
    X, y, truth = clusters()
    X = np.abs(X)  # every fitted sample in the positive orthant
    # Self-training takes every unlabeled sample here, as it did when this case was built: with the default's 2/3
    # of them the outliers' centre below is class 0 (confidence 0.327, threshold 0.252), in a fit that rejects
    # only 7 of its own 30 outliers either way; the paper's confidence, as then (the global one rejects 4 of the
    # 30, and scores the centre 0.508 against its cut at 0.5).
    model = FastProp(n_neighbors=6, pseudo_labels=3000, random_state=0, confidence="both").fit(X, y)
    X_new, _, truth_new = clusters(seed=5)
    X_new = np.abs(X_new)
    assert model.outlier_threshold_ > 0
    predicted = model.predict(X_new)
    in_class = truth_new >= 0
    assert np.mean(predicted[in_class] == truth_new[in_class]) > 0.95
    # a direction no fitted sample points to: every similarity is < 0, no neighbour weighs anything
    far = -np.ones((1, X.shape[1]), dtype=np.float32)
    assert model.predict_confidence(far)[0] == 0.0 and model.predict(far)[0] == -1
    # the centre of the outliers: among samples of no class
    assert model.predict(3.0 * np.eye(X.shape[1], dtype=np.float32)[-1:])[0] == -1
    expected = np.mean(np.where(model.predict_confidence(X_new) < model.outlier_threshold_, -1,
                                model.predict_proba(X_new).argmax(axis=1)) == truth_new)
    assert model.score(X_new, truth_new) == pytest.approx(expected)
    weights = np.r_[np.ones(50), np.zeros(truth_new.size - 50)]
    assert model.score(X_new, truth_new, sample_weight=weights) == pytest.approx(
        np.mean(predicted[:50] == truth_new[:50]))


def test_the_hnsw_index_agrees_with_the_exact_search_and_survives_pickling(monkeypatch):
    X, y, _ = clusters(n_per_class=150, dim=16)
    model = FastProp(n_neighbors=6, random_state=0).fit(X, y)
    X_new, _, _ = clusters(seed=7, n_per_class=20, dim=16)
    exact = model.predict_proba(X_new)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    approximate = model.predict_proba(X_new)
    assert model.predictor_.index is not None
    assert np.mean(np.abs(approximate - exact).max(axis=1) < 1e-6) > 0.9  # recall of hnsw, not 1
    restored = pickle.loads(pickle.dumps(model))
    assert_array_equal(restored.predict_proba(X_new), approximate)
    again = FastProp(n_neighbors=6, random_state=0).fit(X, y)
    assert_array_equal(again.predict_proba(X_new), approximate)  # the index is built reproducibly


def test_the_hnsw_index_of_a_fit_without_random_state_is_built_on_every_core(monkeypatch):
    """``random_state=None`` (the default) above the exact search's size: ``predict`` raised a TypeError.

    Fuzzing round 10: the index was asked for ``num_threads=None``, which hnswlib refuses.
    """
    X, y, _ = clusters(n_per_class=150, dim=16)
    model = FastProp(n_neighbors=6).fit(X, y)
    X_new, _, _ = clusters(seed=7, n_per_class=20, dim=16)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    probabilities = model.predict_proba(X_new)
    assert model.predictor_.index is not None
    assert_allclose(probabilities.sum(axis=1), 1.0)


def test_threads_predicting_at_once_for_the_first_time_build_one_index(monkeypatch):
    import threading
    import time

    X, y, _ = clusters(n_per_class=150, dim=16)
    model = FastProp(n_neighbors=6, random_state=0).fit(X, y)
    X_new, _, _ = clusters(seed=7, n_per_class=20, dim=16)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    builds, build = [], prediction._hnsw_index

    def slow_build(*args, **kwargs):
        builds.append(1)
        time.sleep(0.2)  # every thread reaches the missing index while this one builds it
        return build(*args, **kwargs)

    monkeypatch.setattr(prediction, "_hnsw_index", slow_build)
    results = [None] * 4

    def ask(slot):
        results[slot] = model.predict_proba(X_new)

    threads = [threading.Thread(target=ask, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(builds) == 1
    for result in results[1:]:
        assert_array_equal(result, results[0])


def test_one_models_index_build_does_not_hold_up_another_models(monkeypatch):
    import threading

    X, y, _ = clusters(n_per_class=150, dim=16)
    slow_model = FastProp(n_neighbors=6, random_state=0).fit(X, y)
    other_model = FastProp(n_neighbors=6, random_state=1).fit(X, y)
    X_new, _, _ = clusters(seed=7, n_per_class=20, dim=16)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    build, started, release = prediction._hnsw_index, threading.Event(), threading.Event()

    released_in_time = []

    def build_held_for_the_slow_model(*args, **kwargs):
        if threading.current_thread() is slow:
            started.set()
            released_in_time.append(release.wait(timeout=20))
        return build(*args, **kwargs)

    monkeypatch.setattr(prediction, "_hnsw_index", build_held_for_the_slow_model)
    slow = threading.Thread(target=slow_model.predict_proba, args=(X_new,))
    slow.start()
    try:
        assert started.wait(timeout=20)
        other_model.predict_proba(X_new)  # with one lock for every model it waited for the release
        assert not release.is_set() and slow.is_alive()
    finally:
        release.set()
        slow.join(timeout=60)
    assert released_in_time == [True]
    assert slow_model.predictor_.index is not None and other_model.predictor_.index is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_during_an_index_build_builds_its_own():
    """The review of round 13's fix: the per-model lock, held by a building thread at the fork, hung the child."""
    import threading

    from forks import status_of_forked_check

    X, y, _ = clusters(n_per_class=150, dim=16)
    model = FastProp(n_neighbors=6, random_state=0).fit(X, y)
    building, release = threading.Event(), threading.Event()

    def build():
        with prediction._index_build_lock(model.predictor_):
            building.set()
            release.wait(30)

    builder = threading.Thread(target=build)
    builder.start()
    try:
        assert building.wait(30)
        status = status_of_forked_check(lambda: 0 if prediction._index_build_lock(model.predictor_).acquire(timeout=5)
                                        else 1)
    finally:
        release.set()
        builder.join(30)
    assert status == 0


def test_prediction_errors_say_what_is_wrong(fitted):
    X, _, _, model = fitted
    with pytest.raises(NotFittedError, match="not fitted yet"):
        FastProp().predict(X)
    with pytest.raises(ValueError, match="X has 3 features, but FastProp is expecting 8 features"):
        model.predict(X[:, :3])
    with pytest.raises(ValueError, match="NaN or infinite"):
        model.predict(np.full((1, 8), np.nan))
    with pytest.raises(ValueError, match="dtype=object"):  # text for integer classes: a mistake, not a class
        model.score(X[:2], ["0", "7"])


def test_score_counts_a_class_no_seed_had_as_wrong(fitted):
    """Fuzzing round 15: it raised, so a cross-validation fold whose training part lacked a class scored NaN."""
    X, _, _, model = fitted
    truth = model.predict(X[:4])
    assert model.score(X[:4], truth) == 1.0
    truth[1] = 7  # no seed had it: wrong, as sklearn.metrics.accuracy_score counts it
    assert model.score(X[:4], truth) == 0.75


def test_score_warns_when_y_is_mostly_the_unlabeled_marker(fitted):
    """Fuzzing round 15: a semi-supervised y in GridSearchCV counted its unlabeled test points as outliers,
    and the search picked the model that rejected the most."""
    X, _, _, model = fitted
    with pytest.warns(UserWarning, match="GridSearchCV"):
        model.score(X[:10], np.full(10, -1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.score(X[:10], np.r_[np.full(8, -1), model.predict(X[8:10])])  # 80%: known outliers, no warning


# ------------------------------------------------ a graph of other weights than cosine similarities


def _edge_cosines(graph, X):
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    rows = np.repeat(np.arange(graph.shape[0]), np.diff(graph.indptr))
    return np.maximum(np.einsum("ij,ij->i", unit[rows].astype(np.float64), unit[graph.indices]), 0.0)


@pytest.mark.parametrize("method", ["exact", "hnsw"])
def test_a_cosine_graph_leaves_new_points_weights_as_they_are(method):
    from fastprop import build_knn_graph

    X, _, _ = clusters()
    graph = build_knn_graph(X, 6, method=method, random_state=0)
    assert prediction.graph_weight_map(graph, X, inverse_norms(X)) is None
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert prediction.graph_weight_map(graph, unit, None) is None


@pytest.mark.parametrize("kernel", [lambda c: 1e-3 * c, lambda c: 1e3 * c, lambda c: np.exp(-(2 - 2 * c) / 0.5)],
                         ids=["scaled down", "scaled up", "gaussian kernel"])
def test_new_points_weights_go_on_the_scale_of_the_graph_s_own(kernel):
    from fastprop import build_knn_graph

    X, _, _ = clusters()
    graph = build_knn_graph(X, 6, random_state=0)
    graph.data = kernel(graph.data.astype(np.float64)).astype(np.float32)
    mapping = prediction.graph_weight_map(graph, X, inverse_norms(X))
    cosine = _edge_cosines(graph, X)
    # An increasing function of the cosine: its quantiles are recovered, to the grid's interpolation.
    assert_allclose(mapping(cosine), graph.data, rtol=0.02, atol=1e-3 * graph.data.max())


def test_new_points_on_a_scaled_graph_are_judged_as_its_fitted_samples():
    # Scaled down 1000-fold, every new outlier got confidence 1 (a density 1000 times the fitted ones'),
    # and the fitted samples as new points a confidence uncorrelated with their own.
    from fastprop import build_knn_graph

    X, y, truth = clusters(seed=4)
    rng = np.random.default_rng(4)
    validation = np.sort(rng.choice(np.flatnonzero(y < 0), size=40, replace=False))
    graph = build_knn_graph(X, 6, random_state=0)
    graph.data *= np.float32(1e-3)
    model = FastProp(n_neighbors=6, random_state=0).fit(X, y, graph=graph, validation=(validation, truth[validation]))
    assert np.corrcoef(model.predict_confidence(X), model.confidence_)[0, 1] > 0.8
    X_new, _, truth_new = clusters(seed=5)
    fitted_rejected = np.mean(model.transduction_[truth < 0] == -1)
    assert np.mean(model.predict(X_new)[truth_new < 0] == -1) >= fitted_rejected - 0.15


def test_nbytes_counts_the_copy_of_x_the_fit_made_and_not_the_x_it_was_given():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8)).astype(np.float32)
    y = np.full(300, -1)
    y[:6] = [0, 1, 2, 0, 1, 2]
    given = FastProp(random_state=0).fit(X, y)  # C-contiguous float32: kept by reference
    copied = FastProp(random_state=0).fit(X.astype(np.float64), y)  # float64: the fit's own float32 copy
    assert given.predictor_.features is X and copied.predictor_.features is not X
    assert copied.predictor_.nbytes - given.predictor_.nbytes == X.nbytes
