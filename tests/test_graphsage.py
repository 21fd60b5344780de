"""GraphSAGE: the neighbour sampler, the sampled layers, exact gradients, fits, determinism, bad input."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop.baselines.graphsage import (
    GraphSAGE,
    _l2_normalise,
    _l2_normalise_backward,
    _sage_loss_and_gradients,
    sample_neighbors,
    sample_network,
    sampled_layer,
)
from reference import numeric_gradients
from test_baselines import clusters, dense_knn_graph, random_graph, seed_labels


def small_graph_with_an_isolated_vertex():
    """A random connected graph on 12 vertices plus vertex 12 without neighbours."""
    dense = np.zeros((13, 13), dtype=np.float32)
    dense[:12, :12] = random_graph(12, seed=2, density=0.2).toarray()
    return sp.csr_matrix(dense)


# ---------------------------------------------------------------- the sampler


def test_sampled_neighbours_are_neighbours_drawn_with_replacement():
    graph = small_graph_with_an_isolated_vertex()
    vertices = np.arange(13)
    samples = sample_neighbors(graph, vertices, 15, np.random.default_rng(0))
    assert samples.shape == (13, 15) and samples.dtype == np.int64
    for vertex in range(12):
        neighbours = graph[vertex].indices
        assert np.isin(samples[vertex], neighbours).all()
        assert neighbours.size < 15  # so repeats are forced: drawn with replacement
    assert_array_equal(samples[12], -1)


def test_sampled_neighbours_are_uniform_whatever_the_weights():
    graph = sp.csr_matrix(np.array([[0, 0.1, 5.0, 1.0], [0.1, 0, 0, 0], [5.0, 0, 0, 0], [1.0, 0, 0, 0]]))
    samples = sample_neighbors(graph, np.array([0]), 30_000, np.random.default_rng(1))
    shares = np.bincount(samples[0], minlength=4)[1:] / samples.size
    assert_allclose(shares, 1 / 3, atol=0.015)


@pytest.mark.parametrize("aggregator", ["mean", "gcn"])
def test_sampled_layer_is_the_mean_over_the_samples(aggregator):
    graph = small_graph_with_an_isolated_vertex()
    rng = np.random.default_rng(3)
    vertices = np.array([12, 0, 5, 7])
    samples = sample_neighbors(graph, vertices, 4, rng)
    sources, layer = sampled_layer(vertices, samples, aggregator, np.float64)
    values = rng.normal(size=(13, 3))
    expected = []
    for vertex, drawn in zip(vertices, samples):
        drawn = drawn[drawn >= 0]
        if aggregator == "gcn":
            expected.append(values[np.append(drawn, vertex)].mean(axis=0))
        else:
            expected.append(values[drawn].mean(axis=0) if drawn.size else np.zeros(3))
    assert_array_equal(sources, np.unique(np.concatenate([vertices, samples[samples >= 0]])))
    assert_allclose(layer.operator @ values[sources], expected, atol=1e-12)
    if aggregator == "mean":
        assert_array_equal(sources[layer.own], vertices)
    else:
        assert layer.own is None


def test_sample_network_reads_two_hops():
    graph = small_graph_with_an_isolated_vertex()
    outputs = np.array([0, 3])
    inputs, (first, second) = sample_network(graph, outputs, 15, "mean", np.random.default_rng(4), np.float64)
    assert second.operator.shape[0] == 2 and first.operator.shape == (second.operator.shape[1], inputs.size)
    two_hops = (graph + graph @ graph + sp.identity(13)).tocsr()[outputs]
    assert np.isin(inputs, two_hops.indices).all()


# ---------------------------------------------------------------- exact gradients


def _sage_setup(aggregator, dropout, seed=8):
    rng = np.random.default_rng(seed)
    graph = small_graph_with_an_isolated_vertex()
    inputs, layers = sample_network(graph, np.array([0, 4, 9, 12]), 3, aggregator, rng, np.float64)
    n_features, hidden, n_classes = 5, 4, 3
    width = 2 if aggregator == "mean" else 1
    params = (
        rng.normal(size=(width * n_features, hidden)),
        rng.normal(size=hidden) * 0.1 + 0.3,
        rng.normal(size=(width * hidden, n_classes)),
        rng.normal(size=n_classes) * 0.1,
    )
    features = rng.normal(size=(inputs.size, n_features))
    targets = np.eye(n_classes)[rng.integers(0, n_classes, 4)]
    masks = (None, None)
    if dropout:
        n_hidden = layers[0].operator.shape[0]
        masks = tuple((rng.random(shape) < 0.6) / 0.6 for shape in [features.shape, (n_hidden, hidden)])
    return params, features, layers, targets, masks


@pytest.mark.parametrize("aggregator", ["mean", "gcn"])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dropout", [False, True])
def test_gradients_match_finite_differences(aggregator, normalize, dropout):
    params, features, layers, targets, masks = _sage_setup(aggregator, dropout)
    weight_decay = 0.05

    def loss_at(candidate):
        return _sage_loss_and_gradients(candidate, features, layers, targets, weight_decay, normalize, masks)[0]

    _, gradients = _sage_loss_and_gradients(params, features, layers, targets, weight_decay, normalize, masks)
    for k, numeric in enumerate(numeric_gradients(loss_at, params)):
        assert_allclose(gradients[k], numeric, rtol=1e-5, atol=1e-8, err_msg=f"parameter {k}")


@pytest.mark.parametrize("scale, eps", [(1.0, 1e-6), (1e-8, 1e-14)])  # 1e-8: below eps, clamped
def test_l2_normalisation_gradient(scale, eps):
    rng = np.random.default_rng(5)
    rows = scale * rng.normal(size=(3, 4))
    weights = rng.normal(size=rows.shape)
    normalised, clamp = _l2_normalise(rows)
    norms = np.linalg.norm(rows, axis=1)
    assert_allclose(np.linalg.norm(normalised, axis=1), norms / np.maximum(norms, 1e-6))
    analytic = _l2_normalise_backward(weights, normalised, clamp)
    numeric = numeric_gradients(lambda p: float(np.sum(weights * _l2_normalise(p[0])[0])), [rows], eps=eps)[0]
    assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9 / scale)


def test_l2_normalisation_of_float32_rows_whose_squares_overflow():
    rows = np.array([[3e20, -4e20, 0.0], [1e30, 1e30, 1e30], [0.6, 0.8, 0.0]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        normalised, (norms, clamped) = _l2_normalise(rows)
    reference = np.linalg.norm(rows.astype(np.float64), axis=1)
    assert_allclose(norms[:, 0], reference, rtol=1e-6)
    assert_allclose(normalised, rows.astype(np.float64) / reference[:, None], rtol=1e-6)
    assert not clamped.any()


def test_a_huge_learning_rate_ends_where_a_large_one_does():
    # Adam's steps are about +-learning_rate once it dwarfs the initial weights, so the weights
    # scale with it and the normalised network's labels do not; at 1e20 the float32 squares of
    # the hidden rows overflow (they collapsed to 0, and the weight penalty warned).
    X, labels = clusters(40, 10, 3, seed=6)
    y = seed_labels(labels, 2, seed=6)

    def fit(learning_rate):
        return GraphSAGE(n_neighbors=8, hidden=16, max_epochs=10, learning_rate=learning_rate,
                         random_state=0).fit(X, y)

    large = fit(1e10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        huge = fit(1e20)
    assert_array_equal(huge.transduction_, large.transduction_)
    assert_array_equal(huge.transduction_, labels)


# ---------------------------------------------------------------- fits


@pytest.mark.parametrize("aggregator", ["mean", "gcn"])
def test_learns_well_separated_blobs_from_a_few_seeds(aggregator):
    X, labels = clusters(40, 10, 3, seed=6)
    y = seed_labels(labels, 2, seed=6)
    model = GraphSAGE(n_neighbors=8, aggregator=aggregator, hidden=16, max_epochs=30, random_state=0).fit(X, y)
    assert_array_equal(model.transduction_, labels)
    assert model.n_iter_ == 30
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0, atol=1e-12)


def test_same_random_state_same_output_and_another_differs():
    X, labels = clusters(40, 10, 3, seed=7)
    graph, y = dense_knn_graph(X, 6), seed_labels(labels, 3, seed=7)

    def fit(random_state):
        return GraphSAGE(hidden=8, max_epochs=3, dropout=0.3, random_state=random_state).fit(X, y, graph=graph)

    assert_array_equal(fit(0).label_distributions_, fit(0).label_distributions_)
    assert not np.array_equal(fit(0).label_distributions_, fit(1).label_distributions_)


def test_an_isolated_vertex_gets_finite_distributions():
    """(Tiny inputs clamp n_neighbors as FastProp does: tests/test_baselines.py, for every baseline.)"""
    X, labels = clusters(20, 6, 2, seed=9)
    dense = dense_knn_graph(X, 5).toarray()
    dense[3] = dense[:, 3] = 0
    y = seed_labels(labels, 2, seed=9)
    for aggregator in ("mean", "gcn"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = GraphSAGE(aggregator=aggregator, hidden=8, max_epochs=5, random_state=0).fit(
                X, y, graph=sp.csr_matrix(dense))
        assert np.isfinite(model.label_distributions_).all()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("params, match", [
    ({"aggregator": "max"}, r"aggregator='max' is not supported; choose one of 'mean', 'gcn'"),
    ({"hidden": 0}, r"hidden=0 is out of range; allowed: \[1, 2\*\*63 - 1\]"),
    ({"sample_size": 0}, r"sample_size=0 is out of range"),
    ({"sample_size": 2.5}, r"sample_size must be an integer, got 2.5"),
    ({"batch_size": 0}, r"batch_size=0 is out of range"),
    ({"normalize": "yes"}, r"normalize must be True or False, got 'yes'"),
    ({"dropout": 1.0}, r"dropout=1.0 is out of range; allowed: \[0.0, 1.0\)"),
    ({"weight_decay": -1.0}, r"weight_decay=-1.0 is out of range"),
    ({"learning_rate": 0.0}, r"learning_rate=0.0 is out of range"),
    ({"max_epochs": 10**9}, r"max_epochs=1000000000 is out of range; allowed: \[1, 100000\]"),
    ({"random_state": -3}, r"random_state=-3 must be a non-negative integer"),
    ({"n_neighbors": 0}, r"n_neighbors=0 is out of range"),
    ({"hidden": 10**12}, r"GraphSAGE\(hidden=1000000000000, sample_size=15\) on 30 samples x 4 features needs "
                         r"about [\d,.]+ GiB of memory"),
    ({"sample_size": 10**12}, r"GraphSAGE\(hidden=256, sample_size=1000000000000\) on 30 samples .* needs about"),
])
def test_bad_parameters_are_clear_value_errors(params, match):
    X, labels = clusters(15, 4, 2, seed=10)
    y = seed_labels(labels, 1, seed=10)
    with pytest.raises(ValueError, match=match):
        GraphSAGE(**params).fit(X, y)
