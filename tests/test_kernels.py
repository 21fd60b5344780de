"""Each patch/scheduler kernel against a slow, obvious NumPy/Python reference."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop._kernels.patches import (
    PATCH_COMPONENT_EXHAUSTED,
    PATCH_OVERLAP,
    PATCH_TOO_LARGE,
    PATCH_VIABLE,
    extract_patch,
    smooth_one_patch,
    smooth_patch_rows,
)
from fastprop._kernels.views import exclude_neighbourhood, update_views
from reference import dense_patch_operator, slow_accumulate, slow_bfs_patch

OUTCOMES = {"viable": PATCH_VIABLE, "too large": PATCH_TOO_LARGE, "exhausted": PATCH_COMPONENT_EXHAUSTED}


def random_graph(n, seed, density=0.08, index_dtype=np.int32):
    rng = np.random.default_rng(seed)
    upper = sp.random(n, n, density=density, random_state=rng, format="csr")
    graph = (upper + upper.T).tocsr()
    graph.setdiag(0)
    graph.eliminate_zeros()
    graph.sort_indices()
    graph.indices = graph.indices.astype(index_dtype)
    graph.indptr = graph.indptr.astype(index_dtype)
    return graph.astype(np.float32)


def grow(graph, start, confidence, min_gain, max_size, stamp_value=1, stamp=None, taken_from=None):
    taken_from = stamp_value if taken_from is None else taken_from
    n = graph.shape[0]
    stamp = np.zeros(n, dtype=np.int64) if stamp is None else stamp
    local_index = np.full(n, -1, dtype=np.int64)
    patch = np.empty(max_size, dtype=np.int64)
    size, outcome, gain = extract_patch(
        start, graph.indptr, graph.indices, confidence, min_gain, max_size, stamp, stamp_value, local_index, patch,
        taken_from,
    )
    return patch[:size].copy(), outcome, gain, stamp, local_index


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("min_gain, max_size", [(5.0, 100), (1e9, 12), (1e9, 1000), (0.5, 10)])
def test_extract_patch_matches_slow_bfs(index_dtype, min_gain, max_size):
    graph = random_graph(80, seed=1, density=0.04, index_dtype=index_dtype)
    confidence = np.random.default_rng(2).uniform(size=80)
    for start in (0, 17, 55):
        patch, outcome, gain, stamp, local_index = grow(graph, start, confidence, min_gain, max_size)
        expected, expected_outcome, _ = slow_bfs_patch(graph.toarray(), start, confidence, min_gain, max_size)
        assert patch.tolist() == expected
        assert outcome == OUTCOMES[expected_outcome]
        assert_allclose(gain, np.sum(1 - confidence[patch]))
        assert_array_equal(local_index[patch], np.arange(patch.size))
        assert np.count_nonzero(stamp == 1) == patch.size


def test_extract_patch_stamps_are_reused_without_reset():
    graph = random_graph(60, seed=3)
    confidence = np.zeros(60)
    stamp = np.zeros(60, dtype=np.int64)
    first, *_ = grow(graph, 0, confidence, 1e9, 20, stamp_value=1, stamp=stamp)
    second, *_ = grow(graph, 0, confidence, 1e9, 20, stamp_value=2, stamp=stamp)
    assert first.tolist() == second.tolist()


def test_extract_patch_stops_at_a_vertex_of_another_patch_of_the_batch():
    graph = random_graph(60, seed=3)
    confidence = np.zeros(60)
    stamp = np.zeros(60, dtype=np.int64)
    first, *_ = grow(graph, 0, confidence, 1e9, 10, stamp_value=5, stamp=stamp)
    # stamp 6 in a batch that began at 5: meeting a vertex of the first patch is an overlap
    second, outcome, *_ = grow(graph, int(first[-1]), confidence, 1e9, 10, stamp_value=6, stamp=stamp, taken_from=5)
    assert outcome == PATCH_OVERLAP
    # the same start outside the batch (taken_from = its own stamp) grows over it
    third, outcome, *_ = grow(graph, int(first[-1]), confidence, 1e9, 10, stamp_value=7, stamp=stamp)
    assert outcome != PATCH_OVERLAP and np.intersect1d(third, first).size > 0


def test_isolated_start_exhausts_its_component():
    graph = sp.csr_matrix((5, 5), dtype=np.float32)
    patch, outcome, gain, *_ = grow(graph, 3, np.zeros(5), 10.0, 4)
    assert patch.tolist() == [3] and outcome == PATCH_COMPONENT_EXHAUSTED and gain == 1.0


def local_operator(row_begin, row_end, local_indices, local_weights, size):
    """The dense ``size x size`` matrix of a patch's rows, each stored at ``row_begin[r]:row_end[r]``."""
    dense = np.zeros((size, size))
    for row in range(size):
        entries = slice(row_begin[row], row_end[row])
        np.add.at(dense[row], local_indices[entries], local_weights[entries])
    return dense


@pytest.mark.parametrize("rows_in_parallel", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_patch_smoothing_matches_dense_reference(index_dtype, rows_in_parallel):
    graph = random_graph(70, seed=4, index_dtype=index_dtype)
    patch, _, _, stamp, local_index = grow(graph, 5, np.zeros(70), 30.0, 70)
    size = patch.size
    capacity = size + graph.nnz + 1
    row_begin = np.empty(70, dtype=np.int64)
    row_end = np.empty(70, dtype=np.int64)
    local_indices = np.empty(capacity, dtype=np.int64)
    local_weights = np.empty(capacity, dtype=np.float64)
    buffer = np.empty(70, dtype=np.int64)
    buffer[:size] = patch
    reference = dense_patch_operator(graph.toarray(), patch)
    values = np.random.default_rng(5).normal(size=(70, 4))
    first = np.empty((70, 4))
    second = np.empty((70, 4))
    for depth in (0, 1, 2, 3):
        batch_slot = np.full(70, 2, dtype=np.uint8)  # the other vertices belong to another patch
        batch_slot[patch] = 0
        frozen = np.zeros(70, dtype=bool)
        frozen[patch[::3]] = True  # their rows of the last step are skipped
        if rows_in_parallel:
            unfrozen_rows = np.empty(70, dtype=np.int64)
            smoothed, n_unfrozen = smooth_patch_rows(
                buffer, size, graph.indptr, graph.indices, graph.data, batch_slot, local_index, row_begin, row_end,
                local_indices, local_weights, values, depth, first, second, frozen, unfrozen_rows,
            )
            assert_array_equal(unfrozen_rows[:n_unfrozen], np.flatnonzero(~frozen[patch]))
        else:
            smoothed = smooth_one_patch(
                buffer, size, 1, graph.indptr, graph.indices, graph.data, batch_slot, local_index, row_begin,
                row_end, local_indices, local_weights, values, depth, first, second, frozen,
            )
        assert_array_equal(batch_slot[patch], 1)  # marked, left for the caller to clear
        assert_allclose(local_operator(row_begin, row_end, local_indices, local_weights, size), reference, atol=1e-7)
        expected = np.linalg.matrix_power(reference, depth) @ values[patch]
        computed = ~frozen[patch] if depth > 0 else np.ones(size, dtype=bool)
        assert_allclose(smoothed[:size][computed], expected[computed], atol=1e-10)


def test_update_views_matches_slow_reference():
    rng = np.random.default_rng(6)
    n, n_classes = 30, 3
    sums = np.zeros((n, n_classes))
    counts = np.zeros(n, dtype=np.int64)
    frozen = np.zeros(n, dtype=bool)
    frozen[[2, 9]] = True
    confidence = np.zeros(n)
    for _ in range(4):
        patch = rng.choice(n, size=12, replace=False).astype(np.int64)
        predictions = rng.dirichlet([0.3] * n_classes, size=12)
        expected = [frozen.copy(), sums.copy(), counts.copy(), confidence.copy()]
        joined = slow_accumulate(patch, predictions, *expected, 1e-3, 0.8)
        bias = rng.normal(size=n_classes)
        scores = np.log(predictions) - bias  # softmax(scores + bias) == predictions
        newly = [int(vertex) for row, vertex in enumerate(patch)
                 if update_views(vertex, row, scores, bias, frozen, sums, counts, confidence, 1e-3, 0.8)]
        assert_array_equal(frozen, expected[0])
        assert_allclose(sums, expected[1])
        assert_array_equal(counts, expected[2])
        assert_allclose(confidence, expected[3])
        assert newly == joined
    assert counts[[2, 9]].tolist() == [0, 0]


@pytest.mark.parametrize("hops", [0, 1, 2, 3])
def test_exclude_neighbourhood_matches_matrix_powers(hops):
    graph = random_graph(50, seed=7, density=0.05)
    n = 50
    excluded = np.zeros(n, dtype=bool)
    stamp = np.zeros(n, dtype=np.int64)
    reached = exclude_neighbourhood(4, hops, graph.indptr, graph.indices, excluded, stamp, 1,
                                    np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))
    adjacency = (graph.toarray() > 0).astype(int) + np.eye(n, dtype=int)
    within = np.linalg.matrix_power(adjacency, hops)[4] > 0
    assert_array_equal(excluded, within)
    assert reached == within.sum()


def test_top_k_rows_matches_stable_argsort_with_ties():
    from fastprop._kernels.topk import top_k_rows

    rng = np.random.default_rng(8)
    scores = rng.integers(0, 5, size=(40, 60)).astype(np.float32)  # many ties
    first_row = 10
    indices = np.empty((40, 7), dtype=np.int64)
    values = np.empty((40, 7), dtype=np.float32)
    top_k_rows(scores, 7, first_row, indices, values)
    masked = scores.astype(np.float64).copy()
    masked[np.arange(40), np.arange(40) + first_row] = -np.inf
    expected = np.argsort(-masked, axis=1, kind="stable")[:, :7]
    assert_array_equal(indices, expected)
    assert_array_equal(values, np.take_along_axis(scores, expected, axis=1))
