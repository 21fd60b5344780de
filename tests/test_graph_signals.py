"""The calibration's graph signals (fastprop.graph_signals): reaches and density, at fitted samples and new points."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop import build_knn_graph
from fastprop._kernels.csr import has_symmetric_weights
from fastprop.adjacency import RandomWalk
from fastprop.graph_signals import (
    MAX_VALIDATION_SOURCES,
    REACH_DECAY,
    REACH_STEPS,
    SOURCE_BLOCK,
    density_from_neighbours,
    in_class_reach,
    left_out_reach,
    local_density,
    onward_reach,
    reach_from_neighbours,
    seed_reach,
    validation_sources,
)
from reference import reference_density, reference_left_out_reach, reference_reach
from reference import two_seeded_clusters_and_an_unseeded_one as mixture
from threads import run_on_threads


def test_seed_reach_matches_scipy():
    X, y, _, _ = mixture()
    graph = build_knn_graph(X, 10, method="exact")
    assert_allclose(seed_reach(RandomWalk(graph), y >= 0), reference_reach(graph, y >= 0), rtol=1e-12, atol=0)


@pytest.mark.parametrize("n_sources", [1, 5, SOURCE_BLOCK + 3])
def test_left_out_reach_leaves_each_source_s_own_walks_out(n_sources):
    X, y, truth, _ = mixture()
    graph = build_knn_graph(X, 10, method="exact")
    sources = np.flatnonzero(truth < 0)[:n_sources]
    reach = left_out_reach(RandomWalk(graph), sources)
    assert_allclose(reach, reference_left_out_reach(graph, sources), rtol=1e-10, atol=1e-15)
    if n_sources == 1:
        assert reach[sources[0]] < 1e-15  # no other source to reach it from
    # The unseeded cluster the sources sit in is reached far more than the seeded ones.
    assert np.median(reach[truth < 0]) > 10 * np.median(reach[truth >= 0])


@pytest.mark.parametrize("odd_steps", [False, True])
def test_left_out_reach_on_asymmetric_weights_and_an_odd_step_count(odd_steps, monkeypatch):
    # The symmetric graph's half-length walks (S^T = D S D^-1) and the asymmetric graph's full ones agree
    # with one walk a source; an odd REACH_STEPS leaves the half-length walks one term short of a pair.
    if odd_steps:
        monkeypatch.setattr("fastprop.graph_signals.REACH_STEPS", REACH_STEPS - 1)
        monkeypatch.setattr("reference.REFERENCE_REACH_STEPS", REACH_STEPS - 1)
    X, y, truth, _ = mixture()
    graph = build_knn_graph(X, 10, method="exact")
    rng = np.random.default_rng(0)
    asymmetric = sp.csr_matrix(sp.diags(rng.uniform(0.5, 2.0, graph.shape[0])) @ graph)
    sources = np.flatnonzero(truth < 0)[: SOURCE_BLOCK + 3]
    for weights, symmetric in ((graph, True), (asymmetric, False)):
        walk = RandomWalk(weights)
        assert walk.symmetric == symmetric
        assert_allclose(left_out_reach(walk, sources), reference_left_out_reach(weights, sources),
                        rtol=1e-10, atol=1e-15)


def test_symmetric_weights_are_told_as_scipy_tells_them():
    rng = np.random.default_rng(1)
    for trial in range(60):
        n = int(rng.integers(1, 40))
        upper = sp.random(n, n, density=rng.uniform(0.05, 0.5), random_state=rng, format="csr")
        upper.data = np.ceil(upper.data * 4)  # few distinct weights: a changed one may meet an equal one
        matrix = sp.csr_matrix(upper + upper.T if trial % 3 else upper)  # the diagonal too, now and then
        if trial % 2 and matrix.nnz:
            changed = rng.choice(matrix.nnz, size=int(rng.integers(1, 3)), replace=False)
            matrix.data[changed] = np.ceil(rng.uniform(0, 4, changed.size))  # weights changed, or entries dropped
            matrix.eliminate_zeros()
        matrix.sort_indices()
        assert RandomWalk(matrix).symmetric == ((matrix != matrix.T).nnz == 0)
    graph = sp.csr_matrix(upper + upper.T)
    graph.sort_indices()
    for half in (sp.triu(graph, k=1), sp.tril(graph, k=-1)):  # no entry's mirror: above, or below, the diagonal
        assert graph.nnz and not RandomWalk(sp.csr_matrix(half)).symmetric
    row = slice(graph.indptr[0], graph.indptr[1])
    graph.indices[row], graph.data[row] = graph.indices[row][::-1].copy(), graph.data[row][::-1].copy()
    graph.has_sorted_indices = False
    # told as asymmetric (walks of full length, still right): the one-pass check needs sorted rows
    assert not RandomWalk(graph).symmetric


def test_mirrored_weights_may_differ_by_a_relative_tolerance():
    graph = sp.csr_matrix(np.array([[0, 2, 0], [2, 0, 1], [0, 1, 0]], dtype=np.float32))
    for change, symmetric_within_1e_5 in ((1 + 1e-7, True), (1 + 1e-3, False)):
        changed = graph.copy()
        changed.data[0] *= change  # (0, 1) against (1, 0)
        arrays = changed.indptr, changed.indices, changed.data
        assert not has_symmetric_weights(*arrays) and has_symmetric_weights(*arrays, 1e-5) == symmetric_within_1e_5


@pytest.mark.parametrize("n_sources", [0, 1, SOURCE_BLOCK + 3])
def test_in_class_reach_is_the_seeds_and_the_other_validation_samples_reach(n_sources):
    X, y, truth, _ = mixture()
    graph = build_knn_graph(X, 10, method="exact")
    seeds = y >= 0
    sources = np.flatnonzero((truth >= 0) & ~seeds)[::7][:n_sources]
    reach = in_class_reach(RandomWalk(graph), seeds, sources)
    assert_allclose(reach, reference_left_out_reach(graph, sources, seeds), rtol=1e-10, atol=1e-15)
    if n_sources:
        # A validation sample reads less than its own walks would give it, more than the seeds alone give it.
        with_itself = reference_reach(graph, seeds | np.isin(np.arange(len(y)), sources))
        alone = reference_reach(graph, seeds)
        assert np.all(reach[sources] < with_itself[sources]) and np.all(reach[sources] >= alone[sources])


def test_validation_sources_are_each_kind_at_most_a_capped_random_few():
    indices = np.arange(10, 410)
    truth = np.where(indices % 3 == 0, -1, 1)
    few = (indices[:60], truth[:60])
    in_class, outliers = validation_sources(few, np.random.default_rng(0))
    assert_array_equal(outliers, few[0][few[1] < 0])
    assert_array_equal(in_class, few[0][few[1] >= 0])
    in_class, outliers = validation_sources((indices, truth), np.random.default_rng(0))
    for chosen, members in ((in_class, indices[truth >= 0]), (outliers, indices[truth < 0])):
        assert chosen.size == MAX_VALIDATION_SOURCES < members.size
        assert np.all(np.diff(chosen) > 0) and np.all(np.isin(chosen, members))
    again = validation_sources((indices, truth), np.random.default_rng(0))
    assert_array_equal(again[0], in_class) and assert_array_equal(again[1], outliers)
    # The outliers are drawn first: their choice does not depend on how many in-class samples there are.
    more_in_class = (np.append(indices, np.arange(500, 700)), np.append(truth, np.ones(200, dtype=int)))
    assert_array_equal(validation_sources(more_in_class, np.random.default_rng(0))[1], outliers)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_local_density_matches_a_row_by_row_reference(dtype):
    rng = np.random.default_rng(5)
    graph = sp.random(300, 300, density=0.05, random_state=rng, format="csr", dtype=dtype)
    graph = sp.csr_matrix(graph.multiply(graph > 0.1))  # rows of 6-20 edges
    graph = sp.csr_matrix(sp.diags((np.arange(300) >= 3).astype(dtype)) @ graph)  # and three empty ones
    graph.eliminate_zeros()
    lengths = np.diff(graph.indptr)
    assert lengths.min() == 0 and (lengths < 8).any() and (lengths > 8).any()
    expected = reference_density(graph, 8)
    assert_allclose(local_density(graph, 8), expected, rtol=1e-12, atol=0)
    # Its rows are independent: the result does not depend on the number of threads.
    assert_array_equal(run_on_threads(1, lambda: local_density(graph, 8)), local_density(graph, 8))


def test_local_density_on_a_knn_graph_is_the_mean_similarity_to_the_own_neighbours():
    X, _, _, _ = mixture()
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    own = np.sort(similarity, axis=1)[:, -10:]
    graph = build_knn_graph(X, 10, method="exact")
    assert_allclose(local_density(graph, 10), np.clip(own, 0, None).mean(axis=1), rtol=1e-6, atol=1e-7)


def test_onward_reach_is_what_a_walk_collects_and_one_step_of_it_the_reach():
    X, y, truth, _ = mixture()
    graph = build_knn_graph(X, 10, method="exact")
    sources = np.flatnonzero((y >= 0) | (np.arange(len(y)) % 9 == 0))
    onward = onward_reach(RandomWalk(graph), sources)
    closed = sp.csr_matrix(graph, dtype=np.float64) + sp.identity(len(y))
    walk = sp.diags(1 / np.asarray(closed.sum(axis=1)).ravel()) @ closed
    level, expected = np.isin(np.arange(len(y)), sources).astype(np.float64), np.zeros(len(y))
    for step in range(REACH_STEPS):
        expected += REACH_DECAY**step * level
        level = walk @ level
    assert_allclose(onward, expected, rtol=1e-12, atol=0)
    assert_allclose(REACH_DECAY * (walk @ onward), seed_reach(RandomWalk(graph), np.isin(np.arange(len(y)), sources)),
                    rtol=1e-12, atol=0)


def with_new_vertices(graph, indices, weights):
    """``graph`` with one vertex a row of ``(indices, weights)`` appended: edges out of it, none into it."""
    n, (rows, k) = graph.shape[0], indices.shape
    added = sp.csr_matrix((weights.ravel(), indices.ravel(), np.arange(0, rows * k + 1, k)), shape=(rows, n + rows))
    return sp.csr_matrix(sp.vstack([sp.hstack([graph, sp.csr_matrix((n, rows))]), added]))


@pytest.mark.parametrize("n_neighbors", [10, 30])
def test_new_vertices_read_the_reach_and_density_the_walk_with_them_added_gives(n_neighbors):
    X, y, truth, _ = mixture()
    graph = build_knn_graph(X, n_neighbors, method="exact")
    rng = np.random.default_rng(4)
    new = (X[rng.choice(len(X), 12)] + 0.5 * rng.normal(size=(12, X.shape[1]))).astype(np.float32)
    unit, fitted = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in (new, X))
    similarity = unit @ fitted.T
    indices = np.argsort(-similarity, axis=1)[:, :n_neighbors]
    weights = np.maximum(np.take_along_axis(similarity, indices, axis=1), 0.0).astype(np.float64)
    weights[0] = 0.0  # a vertex without an edge of positive weight reaches nothing
    augmented = with_new_vertices(graph, indices, weights)
    for sources in (np.flatnonzero(y >= 0), np.flatnonzero(truth < 0)[::5]):
        start = np.isin(np.arange(augmented.shape[0]), sources)
        expected = reference_reach(augmented, start)[len(X):]
        reach = reach_from_neighbours(onward_reach(RandomWalk(graph), sources), indices, weights)
        assert reach[0] == expected[0] == 0.0
        # The stays' geometric sum is taken to infinity: over by a factor 1 / (1 - REACH_DECAY * stay) at most.
        stay = 1.0 / (1.0 + weights.sum(axis=1))
        assert np.all(expected <= reach) and np.all(reach <= expected / (1.0 - REACH_DECAY * stay) + 1e-15)
        assert_allclose(reach, expected, rtol=0.03, atol=0)
    assert_allclose(density_from_neighbours(weights), reference_density(augmented, n_neighbors)[len(X):], rtol=1e-12)
