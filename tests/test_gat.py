"""The GAT baseline: its sparse attention against a dense reference, its hand-written
gradients against finite differences, and the estimator's behaviour."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from threads import run_on_threads

from fastprop._kernels.attention import attend
from fastprop.sharing import ThreadSharing
from fastprop.baselines.gat import (
    GAT,
    KERNEL_SHARING,
    _closed_neighbourhoods,
    _gat_loss_and_gradients,
    _initial_params,
    _layer_edges,
    _training_problem,
)
from reference import numeric_gradients

SLOPE = 0.2


def random_graph(n_samples, seed, density=0.2):
    """A symmetric random graph with positive weights; vertex 0 is isolated."""
    rng = np.random.default_rng(seed)
    weights = np.triu(rng.uniform(0.1, 1.0, (n_samples, n_samples)) * (rng.random((n_samples, n_samples)) < density), 1)
    weights[0] = 0
    return sp.csr_matrix(weights + weights.T)


def blobs(n_per_class, n_classes, seed, n_features=6):
    """Well-separated Gaussian blobs and 3 seeds per class; returns X, y (-1 = unlabeled), truth."""
    rng = np.random.default_rng(seed)
    centres = 6 * rng.normal(size=(n_classes, n_features))
    truth = np.repeat(np.arange(n_classes), n_per_class)
    X = centres[truth] + rng.normal(size=(truth.size, n_features))
    y = np.full(truth.size, -1)
    for c in range(n_classes):
        chosen = rng.choice(np.flatnonzero(truth == c), 3, replace=False)
        y[chosen] = c
    return X, y, truth


def dense_attention(dense_pattern, target_scores, source_scores, features, mask):
    """The masked attention of every head as dense (n_heads, n, n) matrices, and the layer's output."""
    logits = target_scores.T[:, :, None] + source_scores.T[:, None, :]
    logits = np.where(logits > 0, logits, SLOPE * logits)
    logits = np.where(dense_pattern[None], logits, -np.inf)
    alpha = np.exp(logits - logits.max(axis=2, keepdims=True))
    alpha /= alpha.sum(axis=2, keepdims=True)
    out = np.einsum("hij,jhf->ihf", alpha * mask, features)
    return alpha, out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("in_parallel", [False, True])
def test_sparse_attention_matches_dense_reference(index_dtype, dropout, in_parallel):
    rng = np.random.default_rng(1)
    n, n_heads, n_features = 14, 3, 4
    closed = _closed_neighbourhoods(random_graph(n, seed=1))
    indptr, indices = closed.indptr.astype(index_dtype), closed.indices.astype(index_dtype)
    target_scores, source_scores = rng.normal(size=(n, n_heads)), rng.normal(size=(n, n_heads))
    features = rng.normal(size=(n, n_heads, n_features))
    edge_mask = (rng.random((closed.nnz, n_heads)) < 0.5) * 2.0 if dropout else np.empty((0, n_heads))
    weights, out = np.empty((closed.nnz, n_heads)), np.empty((n, n_heads, n_features))
    attend(indptr, indices, target_scores, source_scores, features, SLOPE, edge_mask, weights, out, in_parallel)

    rows = np.repeat(np.arange(n), np.diff(closed.indptr))
    dense_mask = np.ones((n_heads, n, n))
    if dropout:
        dense_mask[:, rows, closed.indices] = edge_mask.T
    alpha, expected = dense_attention(closed.toarray() > 0, target_scores, source_scores, features, dense_mask)
    assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert_allclose(weights, alpha[:, rows, closed.indices].T, rtol=1e-12, atol=1e-14)
    assert_allclose(out[0], features[0] * (dense_mask[:, 0, 0, None] if dropout else 1))  # isolated: itself only


def _gradient_setup(seed, dropout):
    """A tiny float64 problem: inputs, both layers' edges, targets, random params and masks."""
    rng = np.random.default_rng(seed)
    n, n_features, n_classes, heads, hidden, output_heads = 16, 4, 3, 2, 3, 2
    closed = _closed_neighbourhoods(random_graph(n, seed=seed))
    seeds = np.array([0, 3, 7, 11])
    inputs, edges = _training_problem(closed, rng.normal(size=(n, n_features)), seeds)
    params = _initial_params(rng, n_features, heads, hidden, output_heads, n_classes, np.float64)
    params = [p + 0.3 * rng.normal(size=p.shape) for p in params]  # non-zero biases too
    targets = np.eye(n_classes)[rng.integers(0, n_classes, seeds.size)]
    masks = (None,) * 4
    if dropout:
        shapes = [inputs.shape, (edges[0].indices.size, heads), (edges[0].indptr.size - 1, heads * hidden),
                  (edges[1].indices.size, output_heads)]
        masks = tuple((rng.random(shape) < 0.6) / 0.6 for shape in shapes)
    return params, inputs, edges, targets, masks


@pytest.mark.parametrize("dropout", [False, True])
def test_gradients_match_finite_differences(dropout):
    params, inputs, edges, targets, masks = _gradient_setup(5, dropout)
    weight_decay = 0.05

    def loss_at(candidate):
        return _gat_loss_and_gradients(candidate, inputs, edges, targets, weight_decay, masks)[0]

    _, gradients = _gat_loss_and_gradients(params, inputs, edges, targets, weight_decay, masks)
    for k, numeric in enumerate(numeric_gradients(loss_at, params)):
        assert_allclose(gradients[k], numeric, rtol=1e-6, atol=1e-9, err_msg=f"parameter {k}")


def test_receptive_field_gives_full_batch_loss_and_gradients():
    rng = np.random.default_rng(2)
    n = 40
    closed = _closed_neighbourhoods(random_graph(n, seed=2, density=0.06))
    features = rng.normal(size=(n, 5))
    seeds = np.array([4, 20, 33])
    params = _initial_params(rng, 5, 2, 3, 1, 2, np.float64)
    targets = np.eye(2)[[0, 1, 1]]
    inputs, edges = _training_problem(closed, features, seeds)
    assert inputs.shape[0] < n
    everything = np.arange(n)
    full_edges = (_layer_edges(closed, everything, everything), _layer_edges(closed, seeds, everything))
    full = _gat_loss_and_gradients(params, features, full_edges, targets, 0.01)
    restricted = _gat_loss_and_gradients(params, inputs, edges, targets, 0.01)
    assert_allclose(restricted[0], full[0], rtol=1e-12)
    for a, b in zip(restricted[1], full[1]):
        assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_learns_separated_blobs(n_classes):
    X, y, truth = blobs(40, n_classes, seed=n_classes)
    model = GAT(n_neighbors=8, max_epochs=100, random_state=0).fit(X, y)
    assert_array_equal(model.transduction_, truth)
    assert model.n_iter_ == 100
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0)
    assert model.label_distributions_.shape == (truth.size, n_classes)


def test_same_random_state_same_result_and_inputs_untouched():
    X, y, _ = blobs(30, 3, seed=7)
    X_before, y_before = X.copy(), y.copy()
    a = GAT(n_neighbors=6, max_epochs=20, random_state=3).fit(X, y).label_distributions_
    b = GAT(n_neighbors=6, max_epochs=20, random_state=3).fit(X, y).label_distributions_
    c = GAT(n_neighbors=6, max_epochs=20, random_state=4).fit(X, y).label_distributions_
    assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert_array_equal(X, X_before)
    assert_array_equal(y, y_before)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two Numba threads")
def test_sharing_rows_among_threads_does_not_change_the_result(monkeypatch):
    X, y, _ = blobs(30, 2, seed=8)

    def fit(shared):
        for kernel in KERNEL_SHARING:
            monkeypatch.setitem(KERNEL_SHARING, kernel, ThreadSharing(forced=shared))
        model = GAT(n_neighbors=6, max_epochs=10, random_state=0)
        return run_on_threads(2, lambda: model.fit(X, y).label_distributions_)

    assert_array_equal(fit(False), fit(True))


def test_index_dtype_and_isolated_vertex_do_not_matter():
    X, y, _ = blobs(20, 2, seed=4)
    graph = random_graph(X.shape[0], seed=4)  # vertex 0 isolated
    wide = graph.copy()
    wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
    model = GAT(max_epochs=10, random_state=0)
    a = model.fit(X, y, graph=graph).label_distributions_
    b = model.fit(X, y, graph=wide).label_distributions_
    assert_array_equal(a, b)
    assert np.isfinite(a).all()


def test_tiny_input_clamps_n_neighbors():
    X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    model = GAT(max_epochs=30, random_state=0).fit(X, [0, -1, 1, -1])
    assert model.label_distributions_.shape == (4, 2)
    assert model.get_params()["n_neighbors"] == 30


@pytest.mark.parametrize(
    "params, match",
    [
        ({"heads": 0}, r"heads=0 is out of range"),
        ({"heads": 2.5}, r"heads must be an integer, got 2.5"),
        ({"hidden": 0}, r"hidden=0 is out of range"),
        ({"output_heads": 0}, r"output_heads=0 is out of range"),
        ({"dropout": 1.0}, r"dropout=1.0 is out of range; allowed: \[0.0, 1.0\)"),
        ({"weight_decay": -1.0}, r"weight_decay=-1.0 is out of range"),
        ({"learning_rate": 0.0}, r"learning_rate=0.0 is out of range"),
        ({"max_epochs": 0}, r"max_epochs=0 is out of range"),
        ({"random_state": -3}, r"random_state=-3 must be a non-negative integer"),
        ({"n_neighbors": 0}, r"n_neighbors=0 is out of range"),
        ({"heads": 10**6, "hidden": 10**6}, r"GAT\(heads=1000000, hidden=1000000, output_heads=1\) on 40 samples"),
    ],
)
def test_bad_parameters(params, match):
    X, y, _ = blobs(20, 2, seed=0)
    with pytest.raises(ValueError, match=match):
        GAT(**params).fit(X, y)
