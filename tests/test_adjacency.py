"""RandomWalk (FastProp's D~^-1 (W + I), never stored) and the symmetric normalisation."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from reference import dense_random_walk

from fastprop import adjacency
from fastprop.adjacency import RandomWalk
from fastprop.sharing import ThreadSharing


def sparse_symmetric(n_samples, seed, keep=0.1):
    rng = np.random.default_rng(seed)
    dense = rng.uniform(size=(n_samples, n_samples)).astype(np.float32)
    dense[dense > keep] = 0
    dense = np.triu(dense, 1)
    dense = dense + dense.T
    dense[5] = dense[:, 5] = 0  # an isolated vertex: its walk is its self loop
    return dense


class ForcedSteps:
    """Stands in for ``adjacency.STEP_SHARING``: every walk step one way, counted."""

    def __init__(self, shared):
        self.sharing = ThreadSharing(forced=shared)

    def timed(self, run, work):
        return self.sharing.timed(run, work)


@pytest.fixture(params=[True, False], ids=["steps shared", "steps alone"])
def steps_shared(request, monkeypatch):
    """Every walk step shared among the threads, or run on the calling thread alone."""
    monkeypatch.setattr(adjacency, "STEP_SHARING", ForcedSteps(request.param))
    return request.param


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("value_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_smooth_matches_dense_powers(index_dtype, value_dtype, depth, steps_shared):
    dense = sparse_symmetric(40, seed=14)
    graph = sp.csr_matrix(dense)
    graph.indptr, graph.indices = graph.indptr.astype(index_dtype), graph.indices.astype(index_dtype)
    values = np.random.default_rng(15).normal(size=(40, 3)).astype(value_dtype)
    expected = np.linalg.matrix_power(dense_random_walk(dense), depth) @ values.astype(np.float64)
    walk = RandomWalk(graph)
    rows = np.array([3, 17, 17, 5, 25])
    assert_allclose(walk.smooth(values, rows, depth), expected[rows], rtol=1e-6, atol=1e-7)
    assert_allclose(walk.smooth(values, None, depth), expected, rtol=1e-6, atol=1e-7)
    assert walk.smooth(values, rows, depth).dtype == np.float64


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_row_scale_multiplies_the_values_as_read(depth):
    dense = sparse_symmetric(30, seed=21)
    rng = np.random.default_rng(22)
    values = rng.normal(size=(30, 4)).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, size=30)
    walk = RandomWalk(sp.csr_matrix(dense))
    expected = np.linalg.matrix_power(dense_random_walk(dense), depth) @ (scale[:, None] * values)
    rows = np.array([0, 5, 29, 11])
    assert_allclose(walk.smooth(values, None, depth, row_scale=scale), expected, rtol=1e-6, atol=1e-7)
    assert_allclose(walk.smooth(values, rows, depth, row_scale=scale), expected[rows], rtol=1e-6, atol=1e-7)


def test_smooth_in_chunks_equals_smooth_at_once(monkeypatch):
    dense = sparse_symmetric(60, seed=16, keep=0.05)
    walk = RandomWalk(sp.csr_matrix(dense))
    values = np.random.default_rng(17).normal(size=60)  # 1-D values keep their shape
    rows = np.random.default_rng(18).permutation(60)[:45]
    at_once = walk.smooth(values, rows, 2)  # 45 rows whose neighbourhoods cover the graph: one chunk
    assert walk._chunk_rows(45, 1) == 45
    monkeypatch.setattr(RandomWalk, "_chunk_rows", lambda self, n_rows, n_columns: 4)
    assert_array_equal(walk.smooth(values, rows, 2), at_once)
    assert at_once.shape == (45,)
    assert_allclose(at_once, (np.linalg.matrix_power(dense_random_walk(dense), 2) @ values)[rows], atol=1e-12)


def test_a_few_rows_of_a_large_graph_are_smoothed_in_chunks():
    walk = RandomWalk(sp.csr_matrix(sparse_symmetric(300, seed=23, keep=0.01)))
    assert walk._chunk_rows(3, 8) == RandomWalk.ROWS_PER_CHUNK
    assert walk._chunk_rows(300, 8) == 300
    # ... unless smoothing every row would hold more than ONE_CHUNK_BYTES
    assert walk._chunk_rows(300, RandomWalk.ONE_CHUNK_BYTES // (8 * 300) + 1) == RandomWalk.ROWS_PER_CHUNK


def test_walk_rows_sum_to_one_and_graph_is_untouched():
    graph = sp.csr_matrix(sparse_symmetric(30, seed=19))
    before = graph.copy()
    walk = RandomWalk(graph)
    assert_allclose(walk.smooth(np.ones((30, 2)), None, 2), 1.0)
    assert_array_equal(graph.data, before.data)
    assert_allclose(walk.inverse_degree, 1.0 / (1.0 + np.asarray(before.sum(axis=1)).ravel()), rtol=1e-6)


def test_shared_and_alone_steps_agree_bit_for_bit(monkeypatch):
    graph = sp.csr_matrix(sparse_symmetric(60, seed=3))
    values = np.random.default_rng(4).normal(size=(60, 5))
    results = []
    for shared in (True, False):
        steps = ForcedSteps(shared)
        monkeypatch.setattr(adjacency, "STEP_SHARING", steps)
        results.append(RandomWalk(graph).smooth(values, None, 3))
        assert (steps.sharing.n_shared, steps.sharing.n_alone) == ((3, 0) if shared else (0, 3))
    assert_array_equal(results[0], results[1])


def test_smooth_of_no_rows_is_empty():
    walk = RandomWalk(sp.csr_matrix(sparse_symmetric(10, seed=20)))
    assert walk.smooth(np.ones((10, 4)), np.array([], dtype=np.int64), 2).shape == (0, 4)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_some_rows_are_bit_for_bit_those_of_all_rows(depth):
    walk = RandomWalk(sp.csr_matrix(sparse_symmetric(80, seed=24, keep=0.04)))
    values = np.random.default_rng(25).normal(size=(80, 3)).astype(np.float32)
    rows = np.array([7, 0, 79, 41, 7])  # unsorted, repeated
    assert_array_equal(walk.smooth(values, rows, depth), walk.smooth(values, None, depth)[rows])


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("scaled", [False, True], ids=["unscaled", "row_scale"])
def test_smoothing_in_blocks_of_rows_is_bit_for_bit_smoothing_at_once(depth, scaled, monkeypatch):
    walk = RandomWalk(sp.csr_matrix(sparse_symmetric(50, seed=26, keep=0.06)))
    rng = np.random.default_rng(27)
    values = rng.normal(size=(50, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, size=50) if scaled else None
    monkeypatch.setattr(adjacency, "BLOCK_ROWS", 7)
    blocks = list(walk.smooth_in_blocks(values.copy(), depth, row_scale=scale))
    assert [begin for begin, _ in blocks] == list(range(0, 50, 7))
    assert [block.shape for _, block in blocks] == [(7, 3)] * 7 + [(1, 3)]
    assert_array_equal(np.vstack([block for _, block in blocks]), walk.smooth(values, None, depth, row_scale=scale))


def test_closed_neighbourhood_is_the_sorted_union_of_rows_and_their_neighbours():
    dense = sparse_symmetric(50, seed=26, keep=0.05)
    walk = RandomWalk(sp.csr_matrix(dense))
    rows = np.array([12, 3, 3, 49])
    expected = sorted(set(rows.tolist()) | {int(j) for i in rows for j in np.flatnonzero(dense[i])})
    got = walk._closed_neighbourhood(rows)
    assert got.tolist() == expected
    assert got.dtype == np.int64
    assert walk._closed_neighbourhood(np.empty(0, dtype=np.int64)).size == 0
