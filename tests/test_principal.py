"""The SGC models' features on their leading principal directions (``feature_energy``), against references."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from fastprop import FastProp, build_knn_graph
from fastprop.principal import (MAX_KEPT_SHARE, MIN_FEATURES, MIN_ROW_ENERGY, principal_directions,
                                projected_rows)
from fastprop.rows import inverse_norms
from threads import run_on_threads


def low_rank_clusters(n_per_class=60, n_classes=3, rank=6, n_features=MIN_FEATURES, noise=0.0, seed=0):
    """Clusters in a ``rank``-dimensional subspace of ``n_features`` (plus isotropic ``noise``), 3 seeds a class."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, rank)) * 3.0
    truth = np.repeat(np.arange(n_classes), n_per_class)
    coordinates = centres[truth] + rng.normal(size=(truth.size, rank))
    basis, _ = np.linalg.qr(rng.normal(size=(n_features, rank)))
    X = coordinates @ basis.T + noise * rng.normal(size=(truth.size, n_features))
    y = np.full(truth.size, -1)
    for k in range(n_classes):
        y[np.flatnonzero(truth == k)[:3]] = k
    return X.astype(np.float32), y, truth, coordinates, basis


def slow_kept_count(X, energy):
    """How many leading singular directions of the unit rows keep ``energy`` of their squares (an SVD)."""
    unit = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    squares = np.linalg.svd(unit, compute_uv=False) ** 2
    return int(np.searchsorted(np.cumsum(squares) / squares.sum(), energy) + 1), unit


@pytest.mark.parametrize("energy", [0.5, 0.8, 0.95])
def test_the_directions_span_the_leading_singular_vectors_of_the_unit_rows(energy):
    rng = np.random.default_rng(1)
    X = (rng.normal(size=(500, 160)) * np.geomspace(4.0, 0.01, 160)).astype(np.float32)  # decaying energy
    X[::7] *= 1000.0  # rows of other norms: only their directions count
    n_kept, unit = slow_kept_count(X, energy)
    directions = principal_directions(X, inverse_norms(X), energy)
    assert directions.shape == (160, n_kept)
    assert_allclose(directions.T @ directions, np.eye(n_kept), atol=1e-10)
    leading = np.linalg.svd(unit, full_matrices=False)[2][:n_kept].T
    # the same subspace: each projector maps the other's columns onto themselves
    assert_allclose(directions @ (directions.T @ leading), leading, atol=1e-6)
    kept_share = np.sum((unit @ directions) ** 2) / unit.shape[0]
    assert kept_share >= energy - 1e-9


def test_no_directions_below_min_features_or_when_they_would_keep_most_columns():
    rng = np.random.default_rng(2)
    narrow = rng.normal(size=(200, MIN_FEATURES - 1)).astype(np.float32)
    assert principal_directions(narrow, inverse_norms(narrow), 0.5) is None
    isotropic = rng.normal(size=(4000, MIN_FEATURES)).astype(np.float32)  # 95% of it needs ~120 columns
    assert slow_kept_count(isotropic, 0.95)[0] > MAX_KEPT_SHARE * MIN_FEATURES
    assert principal_directions(isotropic, inverse_norms(isotropic), 0.95) is None
    assert principal_directions(isotropic, inverse_norms(isotropic), None) is None
    assert principal_directions(isotropic, inverse_norms(isotropic), 0.3).shape[1] == slow_kept_count(isotropic,
                                                                                                      0.3)[0]


def test_projected_rows_are_the_product_and_refuse_a_row_left_without_energy():
    X, *_ = low_rank_clusters(noise=0.01)
    scale = inverse_norms(X)
    directions = principal_directions(X, scale, 0.95)
    assert directions.shape[1] <= 6
    projected = projected_rows(X, scale, directions)
    assert projected.dtype == np.float32
    assert_allclose(projected, X.astype(np.float64) @ directions, rtol=1e-5, atol=1e-5)
    orthogonal = np.linalg.qr(np.c_[directions, np.random.default_rng(3).normal(size=(MIN_FEATURES, 1))])[0][:, -1]
    X[5] = (orthogonal + 0.05 * directions[:, 0]).astype(np.float32)  # keeps 0.25% of its energy on them
    assert np.sum((X[5].astype(np.float64) @ directions) ** 2) / np.sum(X[5].astype(np.float64) ** 2) < MIN_ROW_ENERGY
    assert projected_rows(X, inverse_norms(X), directions) is None


@pytest.mark.parametrize("settings", [{}, {"predictor_training": "patches", "confidence": "both", "labels": "views"}],
                         ids=["default", "paper's loop"])
def test_a_fit_on_projections_is_the_fit_on_the_subspace_s_own_coordinates(settings):
    """Rows in a 6-d subspace of 128 columns: the fit reads their coordinates, in whatever orthonormal basis."""
    X, y, truth, coordinates, basis = low_rank_clusters()
    graph = build_knn_graph(X, 10, random_state=0)
    model = FastProp(n_neighbors=10, random_state=0, feature_energy=0.999999, **settings).fit(X, y, graph=graph)
    assert model.n_predictor_features_ == 6
    rotation = np.linalg.qr(np.random.default_rng(4).normal(size=(6, 6)))[0]
    reference = FastProp(n_neighbors=10, random_state=0, **settings).fit((coordinates @ rotation).astype(np.float32),
                                                                         y, graph=graph)
    assert reference.n_predictor_features_ == 6  # fewer than MIN_FEATURES columns: kept as they are
    assert_allclose(model.label_distributions_, reference.label_distributions_, atol=1e-4)
    assert_allclose(model.confidence_, reference.confidence_, atol=1e-4)
    assert_array_equal(model.transduction_, reference.transduction_)
    assert np.mean(model.transduction_ == truth) > 0.9
    new = low_rank_clusters(n_per_class=5, seed=0)[3][::3] + 0.1  # new points near the clusters, in coordinates
    assert_allclose(model.predict_proba((new @ basis.T).astype(np.float32)),
                    reference.predict_proba((new @ rotation).astype(np.float32)), atol=1e-4)


def test_every_column_is_kept_with_none_or_when_a_row_would_lose_its_direction():
    X, y, _, _, basis = low_rank_clusters(noise=0.01)
    graph = build_knn_graph(X, 10, random_state=0)
    assert FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph).n_predictor_features_ <= 6
    assert FastProp(n_neighbors=10, random_state=0, feature_energy=None).fit(
        X, y, graph=graph).n_predictor_features_ == MIN_FEATURES
    off = np.eye(MIN_FEATURES)[0] - basis @ basis[0]  # a direction orthogonal to the clusters' subspace
    X[7] = (off / np.linalg.norm(off)).astype(np.float32)  # an unlabeled row all off it
    assert y[7] == -1
    assert FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph).n_predictor_features_ == MIN_FEATURES


def test_a_projected_fit_is_the_same_to_the_bit_on_one_thread_or_two_and_again():
    X, y, *_ = low_rank_clusters(n_per_class=200, rank=40, noise=0.05)
    graph = build_knn_graph(X, 10, random_state=0)

    def fit():
        model = FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph)
        return model.n_predictor_features_, model.label_distributions_, model.confidence_, model.predict_proba(X[:50])

    first, one, two = fit(), run_on_threads(1, fit), run_on_threads(2, fit)
    assert 6 < first[0] < MIN_FEATURES
    for other in (one, two):
        assert other[0] == first[0]
        for got, expected in zip(other[1:], first[1:]):
            assert_array_equal(got, expected)


def test_a_pickled_projected_model_predicts_as_it_did():
    X, y, _, coordinates, basis = low_rank_clusters(noise=0.01)
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y)
    assert model.n_predictor_features_ < MIN_FEATURES
    new = (coordinates[::4] @ basis.T + 0.05).astype(np.float32)
    again = pickle.loads(pickle.dumps(model))
    assert again.n_predictor_features_ == model.n_predictor_features_
    assert_array_equal(again.predict_proba(new), model.predict_proba(new))
    assert_array_equal(again.predict(new), model.predict(new))


@pytest.mark.parametrize("value", [0.0, -0.1, 1.5, float("nan"), "all"])
def test_an_invalid_feature_energy_is_refused_by_name(value):
    X, y, *_ = low_rank_clusters()
    with pytest.raises(ValueError, match="feature_energy"):
        FastProp(feature_energy=value).fit(X, y)
