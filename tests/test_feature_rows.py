import numpy as np
import pytest
from numpy.testing import assert_array_equal

from fastprop import build_knn_graph
from fastprop.adjacency import RandomWalk
from fastprop.feature_rows import FeatureRows
from reference import dense_random_walk


class RecordingWalk(RandomWalk):
    """A walk that records each smoothing it is asked for: (whole graph?, depth)."""

    def __init__(self, graph):
        super().__init__(graph)
        self.calls = []

    def smooth(self, values, rows=None, depth=1, row_scale=None):
        self.calls.append((rows is None, depth))
        return super().smooth(values, rows, depth, row_scale)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 12)).astype(np.float32)
    return X, build_knn_graph(X, 8, random_state=0)


@pytest.mark.parametrize("scaled", [False, True])
def test_rows_are_bit_for_bit_the_walks_and_match_a_dense_reference(problem, scaled):
    X, graph = problem
    row_scale = 1 / np.linalg.norm(X.astype(np.float64), axis=1) if scaled else None
    walk = RandomWalk(graph)
    rows = FeatureRows(walk, X, row_scale)
    dense = dense_random_walk(graph.toarray())
    scaled_X = X.astype(np.float64) * (1.0 if row_scale is None else row_scale[:, None])
    rng = np.random.default_rng(1)
    # few rows (their own steps), then many (the level kept), then few again (read from the level), depths 0-3
    for n_rows, depth in [(5, 2), (400, 2), (7, 2), (300, 3), (9, 3), (11, 1), (13, 0), (20, 2)]:
        chosen = np.sort(rng.choice(600, n_rows, replace=False))
        got = rows.smooth(chosen, depth)
        assert_array_equal(got, walk.smooth(X, chosen, depth, row_scale=row_scale))
        expected = (np.linalg.matrix_power(dense, depth) @ scaled_X)[chosen]
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_the_level_is_made_once_for_many_rows_and_read_for_every_later_set(problem):
    X, graph = problem
    walk = RecordingWalk(graph)
    rows = FeatureRows(walk, X, None)
    rows.smooth(np.arange(5), 2)  # 5 rows' neighbourhoods are far from the graph's 600 vertices: their own steps
    assert walk.calls == [(False, 2)]
    rows.smooth(np.arange(100), 2)  # 100 x (1 + 8 neighbours or more) covers it: the level, then one step
    rows.smooth(np.arange(3), 2)
    assert walk.calls[1:] == [(True, 1), (False, 1), (False, 1)]
    rows.smooth(np.arange(200), 3)  # another depth: its own level replaces the first
    assert walk.calls[4:] == [(True, 2), (False, 1)]


def test_no_level_is_kept_beyond_its_byte_budget(problem):
    X, graph = problem
    walk = RecordingWalk(graph)
    rows = FeatureRows(walk, X, None, level_bytes=8 * X.size - 1)
    rows.smooth(np.arange(600), 2)
    rows.smooth(np.arange(600), 2)
    assert walk.calls == [(False, 2), (False, 2)]
    assert_array_equal(FeatureRows(RandomWalk(graph), X, None).smooth(np.arange(600), 2),
                       RandomWalk(graph).smooth(X, np.arange(600), 2))


def test_every_row_in_blocks_from_the_level_is_bit_for_bit_its_rows(problem, monkeypatch):
    import fastprop.adjacency

    X, graph = problem
    row_scale = 1 / np.linalg.norm(X.astype(np.float64), axis=1)
    rows = FeatureRows(RandomWalk(graph), X, row_scale)
    assert not rows.keeps(2)
    with pytest.raises(ValueError, match="no level is kept for depth 2"):
        next(rows.smooth_in_blocks(2))
    every = rows.smooth(np.arange(600), 2)  # covers the graph: the level is kept
    assert rows.keeps(2) and not rows.keeps(3)
    monkeypatch.setattr(fastprop.adjacency, "BLOCK_ROWS", 128)
    blocks = list(rows.smooth_in_blocks(2))
    assert [begin for begin, _ in blocks] == [0, 128, 256, 384, 512]
    assert_array_equal(np.vstack([block for _, block in blocks]), every)
