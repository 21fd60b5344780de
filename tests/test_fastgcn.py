"""FastGCN: the importance distribution, the unbiased sampled product, exact gradients, fits, bad input."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop.adjacency import normalised_adjacency
from fastprop.baselines.fastgcn import FastGCN, ImportanceSampler, sample_batch
from fastprop.baselines.gcn import _gcn_loss_and_gradients
from test_baselines import clusters, dense_knn_graph, random_graph, seed_labels
from reference import numeric_gradients


@pytest.fixture(scope="module")
def adjacency():
    """``Â`` of a random connected graph on 15 vertices, float64."""
    return normalised_adjacency(random_graph(15, seed=1, density=0.2), self_loops=True, dtype=np.float64)


# ---------------------------------------------------------------- the sampler


def test_importance_is_the_squared_column_norm(adjacency):
    dense = adjacency.toarray()
    expected = (dense**2).sum(axis=0)
    sampler = ImportanceSampler(adjacency)
    assert_allclose(sampler.probabilities, expected / expected.sum(), rtol=1e-12)
    vertices, counts = sampler.draw(200_000, np.random.default_rng(0))
    shares = np.zeros(15)
    shares[vertices] = counts / 200_000
    assert_allclose(shares, sampler.probabilities, atol=0.004)


def test_sampled_product_is_the_estimator_over_every_draw(adjacency):
    """Skipping the drawn vertices that no row reads changes nothing."""
    sampler = ImportanceSampler(adjacency)
    rows = adjacency[[0, 6]]
    values = np.random.default_rng(1).normal(size=(15, 3))
    drawn, counts = sampler.draw(5, np.random.default_rng(2))
    dense = rows.toarray()
    expected = sum(c / (5 * sampler.probabilities[u]) * np.outer(dense[:, u], values[u]) for u, c in zip(drawn, counts))
    vertices, block = sampler.sample(rows, 5, np.random.default_rng(2))
    assert np.isin(vertices, rows.indices).all()
    assert_allclose(block @ values[vertices], expected, atol=1e-12)


def test_sampled_product_is_unbiased(adjacency):
    sampler = ImportanceSampler(adjacency)
    rows = adjacency[[0, 3, 7, 11]]
    values = np.random.default_rng(3).normal(size=(15, 2))
    rng = np.random.default_rng(4)
    estimates = []
    for _ in range(2000):
        vertices, block = sampler.sample(rows, 4, rng)
        estimates.append(block @ values[vertices])
    estimates = np.array(estimates)
    error = estimates.mean(axis=0) - rows @ values
    standard_error = estimates.std(axis=0) / np.sqrt(len(estimates))
    assert (np.abs(error) < 4 * standard_error + 1e-12).all()
    assert standard_error.max() > 1e-3  # the estimate really varies: the check is not vacuous


# ---------------------------------------------------------------- exact gradients


@pytest.mark.parametrize("dropout", [False, True])
def test_gradients_on_a_fixed_sample_match_finite_differences(adjacency, dropout):
    rng = np.random.default_rng(5)
    features = rng.normal(size=(15, 4))
    inputs, propagation = sample_batch(adjacency, features, np.array([0, 2, 9]), ImportanceSampler(adjacency),
                                       (6, 5), rng)
    assert propagation.shape[0] == 3 and inputs.shape == (propagation.shape[1], 4)
    params = (rng.normal(size=(4, 5)), rng.normal(size=5) * 0.1, rng.normal(size=(5, 3)), rng.normal(size=3) * 0.1)
    targets = np.eye(3)[[0, 2, 1]]
    masks = (None, None)
    if dropout:
        masks = tuple((rng.random(shape) < 0.6) / 0.6 for shape in [inputs.shape, (inputs.shape[0], 5)])

    def loss_at(candidate):
        return _gcn_loss_and_gradients(candidate, inputs, propagation, targets, 0.05, masks)[0]

    _, gradients = _gcn_loss_and_gradients(params, inputs, propagation, targets, 0.05, masks)
    for k, numeric in enumerate(numeric_gradients(loss_at, params)):
        assert_allclose(gradients[k], numeric, rtol=1e-5, atol=1e-8, err_msg=f"parameter {k}")


def test_sampled_batch_estimates_the_first_layer_at_the_hidden_vertices(adjacency):
    """With t1 large every vertex is a hidden vertex; its inputs average to ``(Â X)``."""
    features = np.random.default_rng(6).normal(size=(15, 2))
    sampler = ImportanceSampler(adjacency)
    rng = np.random.default_rng(7)
    estimates = []
    for _ in range(1000):
        inputs, propagation = sample_batch(adjacency, features, np.arange(15), sampler, (400, 3), rng)
        assert propagation.shape == (15, 15)
        estimates.append(inputs)
    estimates = np.array(estimates)
    standard_error = estimates.std(axis=0) / np.sqrt(len(estimates))
    assert (np.abs(estimates.mean(axis=0) - adjacency @ features) < 4 * standard_error + 1e-12).all()


# ---------------------------------------------------------------- fits


def test_learns_well_separated_blobs_from_a_few_seeds():
    X, labels = clusters(40, 10, 3, seed=6)
    y = seed_labels(labels, 2, seed=6)
    model = FastGCN(n_neighbors=8, hidden=16, max_epochs=60, random_state=0).fit(X, y)  # t clamped to 120
    assert_array_equal(model.transduction_, labels)
    assert model.n_iter_ == 60
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0, atol=1e-12)


def test_same_random_state_same_output_and_another_differs():
    X, labels = clusters(40, 10, 3, seed=7)
    graph, y = dense_knn_graph(X, 6), seed_labels(labels, 3, seed=7)

    def fit(random_state):
        return FastGCN(hidden=8, sample_sizes=(30, 20), batch_size=4, max_epochs=3, dropout=0.3,
                       random_state=random_state).fit(X, y, graph=graph)

    assert_array_equal(fit(0).label_distributions_, fit(0).label_distributions_)
    assert not np.array_equal(fit(0).label_distributions_, fit(1).label_distributions_)


def test_an_isolated_vertex_gets_finite_distributions():
    """(Tiny inputs clamp n_neighbors as FastProp does: tests/test_baselines.py, for every baseline.)"""
    X, labels = clusters(20, 6, 2, seed=9)
    dense = dense_knn_graph(X, 5).toarray()
    dense[3] = dense[:, 3] = 0
    y = seed_labels(labels, 2, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = FastGCN(hidden=8, max_epochs=5, random_state=0).fit(X, y, graph=sp.csr_matrix(dense))
    assert np.isfinite(model.label_distributions_).all()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("params, match", [
    ({"hidden": 0}, r"hidden=0 is out of range; allowed: \[1, 2\*\*63 - 1\]"),
    ({"sample_sizes": (6000,)}, r"sample_sizes must be a pair of integers .*, got \(6000,\)"),
    ({"sample_sizes": 6000}, r"sample_sizes must be a pair of integers .*, got 6000"),
    ({"sample_sizes": (6000, 0)}, r"sample_sizes\[1\]=0 is out of range; allowed: \[1, 2\*\*63 - 1\]"),
    ({"sample_sizes": (6000.5, 10)}, r"sample_sizes\[0\] must be an integer, got 6000.5"),
    ({"batch_size": 0}, r"batch_size=0 is out of range"),
    ({"dropout": 1.0}, r"dropout=1.0 is out of range; allowed: \[0.0, 1.0\)"),
    ({"weight_decay": -1.0}, r"weight_decay=-1.0 is out of range"),
    ({"learning_rate": 0.0}, r"learning_rate=0.0 is out of range"),
    ({"max_epochs": 10**9}, r"max_epochs=1000000000 is out of range; allowed: \[1, 100000\]"),
    ({"random_state": -3}, r"random_state=-3 must be a non-negative integer"),
    ({"n_neighbors": 0}, r"n_neighbors=0 is out of range"),
    ({"hidden": 10**12}, r"FastGCN\(hidden=1000000000000\) on 30 samples x 4 features needs about [\d,.]+ GiB"),
])
def test_bad_parameters_are_clear_value_errors(params, match):
    X, labels = clusters(15, 4, 2, seed=10)
    y = seed_labels(labels, 1, seed=10)
    with pytest.raises(ValueError, match=match):
        FastGCN(**params).fit(X, y)
