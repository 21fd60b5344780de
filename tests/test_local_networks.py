"""The two-layer local predictors (GCN, GAT) against dense NumPy networks: in patches, on the graph, for new points."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

from fastprop import FastProp
from fastprop.adjacency import RandomWalk
from fastprop.baselines import gat, gcn
from fastprop.graph import build_knn_graph
from fastprop.local_networks import (
    GAT_HEADS,
    GAT_HIDDEN,
    GCN_HIDDEN,
    LocalGAT,
    LocalGCN,
    NetworkPatchPredictor,
    random_walk_matrix,
    training_problem,
)
from fastprop.scheduler import PatchSettings, PatchWorkspace, propagate
from reference import assert_own_rows_give_fitted_labels, dense_patch_operator
from test_scheduler import slow_propagate


def problem(seed=0, n=90, n_classes=3, dim=6):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 2
    truth = rng.integers(0, n_classes, n)
    X = centres[truth] + rng.normal(size=(n, dim))
    unit = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    graph = build_knn_graph(X, 5, method="exact")
    seed_class = np.full(n, -1)
    for k in range(n_classes):
        seed_class[np.flatnonzero(truth == k)[:2]] = k
    return unit, graph, seed_class, rng


def random_gcn(rng, dim, n_classes):
    return LocalGCN([rng.normal(size=(dim, GCN_HIDDEN)).astype(np.float32),
                     rng.normal(size=GCN_HIDDEN).astype(np.float32) * 0.3,
                     rng.normal(size=(GCN_HIDDEN, n_classes)).astype(np.float32) * 0.3,
                     rng.normal(size=n_classes).astype(np.float32)])


def random_gat(rng, dim, n_classes):
    width = GAT_HEADS * GAT_HIDDEN
    shapes = [(dim, width), (GAT_HEADS, GAT_HIDDEN), (GAT_HEADS, GAT_HIDDEN), (width,), (width, n_classes),
              (1, n_classes), (1, n_classes), (n_classes,)]
    return LocalGAT([rng.normal(size=shape).astype(np.float32) for shape in shapes])


def dense_gcn(network, unit, dense):
    """``S relu(S X W1 + b1) W2 + b2`` with ``S = D~^-1 (A + I)`` of a dense ``A``, in float64."""
    w1, b1, w2, b2 = (p.astype(np.float64) for p in network.params)
    operator = dense_patch_operator(dense, np.arange(dense.shape[0]))
    hidden = np.maximum(operator @ (unit.astype(np.float64) @ w1) + b1, 0.0)
    return operator @ (hidden @ w2) + b2


def dense_attention(inputs, weight, source, target, adjacency):
    """One GAT layer, vertex by vertex: heads of ``softmax_j LeakyReLU(t.Wh_i + s.Wh_j)`` over ``N(i) + i``."""
    n_heads, width = source.shape
    projected = (inputs @ weight).reshape(inputs.shape[0], n_heads, width)
    out = np.zeros_like(projected)
    for i in range(inputs.shape[0]):
        neighbours = np.union1d(np.flatnonzero(adjacency[i] > 0), [i])
        for h in range(n_heads):
            logits = projected[i, h] @ target[h] + projected[neighbours, h] @ source[h]
            logits = np.where(logits > 0, logits, 0.2 * logits)
            attention = softmax(logits)
            out[i, h] = attention @ projected[neighbours, h]
    return out


def dense_gat(network, unit, dense):
    w1, s1, t1, b1, w2, s2, t2, b2 = (p.astype(np.float64) for p in network.params)
    first = dense_attention(unit.astype(np.float64), w1, s1, t1, dense).reshape(unit.shape[0], -1) + b1
    hidden = np.where(first > 0, first, np.expm1(np.minimum(first, 0)))
    return dense_attention(hidden, w2, s2, t2, dense).mean(axis=1) + b2


NETWORKS = [(random_gcn, dense_gcn), (random_gat, dense_gat)]


@pytest.mark.parametrize("make, dense_network", NETWORKS, ids=["gcn", "gat"])
def test_a_patch_and_the_whole_graph_match_a_dense_network(make, dense_network):
    unit, graph, _, rng = problem()
    network = make(rng, unit.shape[1], 3)
    network.prepare(unit)
    dense = graph.toarray().astype(np.float64)
    members = np.array([5, 17, 3, 40, 41, 60, 2, 77, 11, 30])
    expected = dense_network(network, unit[members], dense[np.ix_(members, members)])
    assert_allclose(network.patch_logits(graph, members) + network.bias, expected, rtol=1e-4, atol=1e-4)
    whole = network.whole_graph_logits(RandomWalk(graph)) + network.bias
    assert_allclose(whole, dense_network(network, unit, dense), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("make, dense_network", NETWORKS, ids=["gcn", "gat"])
def test_a_new_point_is_a_vertex_of_the_graph_with_no_edge_back(make, dense_network):
    unit, graph, _, rng = problem(seed=1)
    network = make(rng, unit.shape[1], 3)
    network.prepare(unit)
    network.whole_graph_logits(RandomWalk(graph))
    new = rng.normal(size=(4, unit.shape[1]))
    new = (new / np.linalg.norm(new, axis=1, keepdims=True)).astype(np.float32)
    indices = np.stack([rng.choice(unit.shape[0], 5, replace=False) for _ in range(4)]).astype(np.int64)
    weights = rng.uniform(0.2, 1.0, size=(4, 5))
    weights[0, 2] = 0.0  # no edge: also ignored by the attention
    dense = np.zeros((unit.shape[0] + 4,) * 2)
    dense[: unit.shape[0], : unit.shape[0]] = graph.toarray()
    for r in range(4):
        dense[unit.shape[0] + r, indices[r]] = weights[r]
    expected = dense_network(network, np.vstack([unit, new]), dense)[unit.shape[0]:]
    assert_allclose(network.logits_of_rows(new, indices, weights), expected, rtol=1e-4, atol=1e-4)


def test_the_training_problem_puts_each_patch_in_a_block_of_its_own():
    _, graph, seed_class, _ = problem()
    patches = [np.array([0, 4, 9]), np.array([9, 20, 1, 33])]
    adjacency, rows, seeds, counts = training_problem(graph, seed_class, patches)
    dense = graph.toarray()
    assert_array_equal(rows, [0, 4, 9, 9, 20, 1, 33])
    assert_array_equal(counts, np.ones(seeds.size))
    assert_array_equal(adjacency[:3, :3].toarray(), dense[np.ix_(patches[0], patches[0])])
    assert_array_equal(adjacency[3:, 3:].toarray(), dense[np.ix_(patches[1], patches[1])])
    assert adjacency[:3, 3:].nnz == 0 and adjacency[3:, :3].nnz == 0
    assert_array_equal(seeds, np.flatnonzero(seed_class[rows] >= 0))
    whole, whole_rows, whole_seeds, whole_counts = training_problem(graph, seed_class, None)
    assert whole is graph
    assert_array_equal(whole_rows, np.arange(graph.shape[0]))
    assert_array_equal(whole_seeds, np.flatnonzero(seed_class >= 0))
    assert_array_equal(whole_counts, np.ones(whole_seeds.size))


def repeated_patches(seed_class):
    """Three patches with seeds in each, the first twice more (once in another order)."""
    seeds = np.flatnonzero(seed_class >= 0)
    first = np.array([seeds[0], 3, 7, seeds[1], 12])
    second = np.array([seeds[2], 40, seeds[3], 41])
    return [first, second, first[::-1].copy(), np.array([seeds[4], 50, 51]), first.copy()]


def test_repeated_training_patches_are_one_block_whose_seeds_count_for_each():
    _, graph, seed_class, _ = problem()
    patches = repeated_patches(seed_class)
    adjacency, rows, seeds, counts = training_problem(graph, seed_class, patches)
    assert_array_equal(rows, np.concatenate([patches[0], patches[1], patches[3]]))
    assert adjacency.shape == (rows.size, rows.size)
    assert_array_equal(seeds, np.flatnonzero(seed_class[rows] >= 0))
    assert_array_equal(counts, np.where(seeds < patches[0].size, 3, 1))


def repeated_blocks(graph, patches):
    """The training graph with a block for every patch, repeats included (what the counts stand for)."""
    return np.concatenate(patches), sp.block_diag([graph[m][:, m] for m in patches], format="csr")


@pytest.mark.parametrize("network", ["gcn", "gat"])
def test_counted_seeds_give_the_loss_and_gradients_of_repeated_blocks(network):
    """One block per distinct patch, its seeds counted, against the patches laid out one block each."""
    unit, graph, seed_class, rng = problem(seed=5)
    patches = repeated_patches(seed_class)
    n_classes = 3
    adjacency, rows, seeds, counts = training_problem(graph, seed_class, patches)
    counted_targets = np.eye(n_classes, dtype=np.float32)[seed_class[rows[seeds]]] * counts[:, None]
    all_rows, all_blocks = repeated_blocks(graph, patches)
    all_seeds = np.flatnonzero(seed_class[all_rows] >= 0)
    one_hot = np.eye(n_classes, dtype=np.float32)[seed_class[all_rows[all_seeds]]]
    if network == "gcn":
        params = random_gcn(rng, unit.shape[1], n_classes).params
        counted = gcn._gcn_loss_and_gradients(
            params, *gcn._training_problem(random_walk_matrix(adjacency, np.float32), unit[rows], seeds),
            counted_targets, 5e-4)
        repeated = gcn._gcn_loss_and_gradients(
            params, *gcn._training_problem(random_walk_matrix(all_blocks, np.float32), unit[all_rows], all_seeds),
            one_hot, 5e-4)
    else:
        params = random_gat(rng, unit.shape[1], n_classes).params
        counted = gat._gat_loss_and_gradients(
            params, *gat._training_problem(gat._closed_neighbourhoods(adjacency), unit[rows], seeds),
            counted_targets, 5e-4)
        repeated = gat._gat_loss_and_gradients(
            params, *gat._training_problem(gat._closed_neighbourhoods(all_blocks), unit[all_rows], all_seeds),
            one_hot, 5e-4)
    assert counted[0] == pytest.approx(repeated[0], rel=1e-5)
    for counted_gradient, repeated_gradient in zip(counted[1], repeated[1]):
        assert_allclose(counted_gradient, repeated_gradient, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("make, dense_network", NETWORKS, ids=["gcn", "gat"])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_the_scheduler_with_a_network_matches_the_slow_reference(make, dense_network, batch_size):
    unit, graph, seed_class, rng = problem(seed=2, n=120)
    network = make(rng, unit.shape[1], 3)
    network.prepare(unit)
    dense = graph.toarray().astype(np.float64)
    settings = PatchSettings(min_gain=15.0, max_patch_size=40, exclusion_hops=1, depth=2)
    workspace = PatchWorkspace(graph, settings, 3, n_slots=batch_size)
    tie_rank = rng.permutation(unit.shape[0])
    state = propagate(workspace, NetworkPatchPredictor(network, graph), seed_class, tie_rank,
                      confident_threshold=0.6, single_view_confidence=1e-3)
    sums, counts, confidence, frozen, n_patches = slow_propagate(
        dense, np.zeros((unit.shape[0], 3)), None, seed_class, tie_rank, settings, 0.6, 1e-3, batch_size=batch_size,
        patch_scores=lambda patch: dense_network(network, unit[patch], dense[np.ix_(patch, patch)]),
    )
    assert state.n_patches == n_patches > 0
    assert_array_equal(state.view_count, counts)
    assert_array_equal(state.frozen, frozen)
    assert_allclose(state.probability_sum, sums, atol=1e-5)  # GAT runs in float32


def clusters_and_outliers(seed=0):
    rng = np.random.default_rng(seed)
    centres = 4.0 * np.eye(8)[:3]
    X = np.vstack([centres[c] + rng.normal(size=(60, 8)) for c in range(3)] + [rng.normal(size=(40, 8)) - 3.0])
    truth = np.r_[np.repeat(np.arange(3), 60), np.full(40, -1)]
    y = np.full(truth.size, -1)
    y[[0, 1, 60, 61, 120, 121]] = [0, 0, 1, 1, 2, 2]
    return X.astype(np.float32), y, truth


@pytest.fixture(scope="module", params=[("gcn", "graph"), ("gat", "patches")], ids=["gcn-graph", "gat-patches"])
def fitted(request):
    local_predictor, training = request.param
    X, y, truth = clusters_and_outliers()
    model = FastProp(n_neighbors=8, local_predictor=local_predictor, predictor_training=training, min_gain=40,
                     max_patch_size=120, random_state=0).fit(X, y)
    return X, y, truth, model


def test_fastprop_with_a_network_labels_the_clusters(fitted):
    X, y, truth, model = fitted
    in_class = truth >= 0
    assert np.mean(model.label_distributions_.argmax(axis=1)[in_class] == truth[in_class]) > 0.95
    assert model.n_iter_ > 0 and (model.view_count_ > 0).mean() > 0.5
    assert (model.n_training_patches_ == 0) == (model.predictor_training == "graph")
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0)
    assert np.isfinite(model.confidence_).all()


def test_fastprop_with_a_network_is_deterministic(fitted):
    X, y, _, model = fitted
    again = FastProp(**model.get_params()).fit(X, y)
    assert_array_equal(again.label_distributions_, model.label_distributions_)
    assert_array_equal(again.confidence_, model.confidence_)


def test_a_fitted_sample_given_its_own_graph_row_gets_its_label(fitted):
    X, y, _, model = fitted
    assert_own_rows_give_fitted_labels(model, X, y, step=11)
    assert model.predict(X[[0, 60, 120]]).tolist() == [0, 1, 2]


def test_a_network_trained_on_patches_sees_each_seed_once_per_patch():
    X, y, _ = clusters_and_outliers()
    model = FastProp(n_neighbors=8, local_predictor="gcn", predictor_training="patches", min_gain=40,
                     max_patch_size=120, random_state=0).fit(X, y)
    assert model.n_training_patches_ >= 1
    with pytest.raises(ValueError, match="local_predictor='mlp' is not supported"):
        FastProp(local_predictor="mlp").fit(X, y)


def test_sparse_and_dense_patches_agree_on_a_patch_with_an_isolated_vertex():
    """A patch member without in-patch neighbours keeps only its self loop (GCN) or attends to itself (GAT)."""
    unit, graph, _, rng = problem(seed=3)
    members = np.array([0, 1])
    dense = np.zeros((2, 2))  # whatever the graph says, these two are not linked here
    graph = sp.csr_matrix(graph.shape, dtype=np.float32)
    for make, dense_network in NETWORKS:
        network = make(rng, unit.shape[1], 3)
        network.prepare(unit)
        assert_allclose(network.patch_logits(graph, members) + network.bias,
                        dense_network(network, unit[members], dense), rtol=1e-4, atol=1e-4)
