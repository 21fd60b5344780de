"""Provisional classes (fastprop.novelty) against slow references and a hand-built case."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

from fastprop import FastProp, build_knn_graph, column_scores
from fastprop.adjacency import RandomWalk
from fastprop.column_scores import (
    COLUMN_BLOCK,
    COLUMN_BLOCK_BYTES,
    column_block,
    known_class_confidence,
    most_probable_columns,
)
from fastprop.novelty import (
    AUTO_ROUNDS,
    AUTO_TOP_MOST,
    FULL_ITERATIONS,
    SCOUT_ITERATIONS,
    blended_confidence,
    claimed_share,
    KNOWN_TOP,
    MOST_CLASSES,
    MAX_PROVISIONAL,
    MIN_HELD_SHARE,
    REFIT_ROWS_KNOWN,
    REFIT_ROWS_PROVISIONAL,
    REFIT_TOL,
    RUNNER_UP_FROM,
    SCOUT_FROM,
    SCOUT_ROWS,
    TOP_UP_ROWS,
    farthest_first,
    known_class_weight,
    known_edge_share,
    known_top,
    most_confident_rows,
    n_provisional_classes,
    provisional_class_confidence,
    refined_confidence,
    refit_rows,
    scouting_rows,
    second_largest,
    top_up_rows,
)
from fastprop.evaluation.protocol import outlier_auroc
from fastprop.feature_rows import FeatureRows
from fastprop.linear import fit_softmax_regression
from fastprop.threshold import RANKING_SMOOTHING, REJECT_ALL, share_threshold, smoothed_ranking
from reference import dense_random_walk


def unit(rows):
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def slow_farthest_first(anchors, candidates, n_chosen):
    """Recompute every candidate's nearest chosen point from scratch at each step."""
    chosen = []
    for _ in range(n_chosen):
        best, best_value = None, np.inf
        for i, row in enumerate(candidates):
            if i in chosen:
                continue
            centres = [*anchors, *(candidates[j] for j in chosen)]
            value = max(float(row @ c) for c in centres) if centres else -np.inf
            if value < best_value:
                best, best_value = i, value
        chosen.append(best)
    return chosen


@pytest.mark.parametrize("n_anchors", [0, 1, 4])
def test_farthest_first_matches_the_slow_traversal(n_anchors):
    rng = np.random.default_rng(n_anchors)
    anchors = unit(rng.normal(size=(n_anchors, 5)))
    candidates = unit(rng.normal(size=(40, 5)))
    chosen = farthest_first(anchors, candidates, 12)
    assert_array_equal(chosen, slow_farthest_first(anchors, candidates, 12))
    assert len(set(chosen.tolist())) == 12


def test_farthest_first_never_takes_a_candidate_twice_even_among_duplicates():
    candidates = unit(np.repeat(np.eye(3), 2, axis=0))
    chosen = farthest_first(np.zeros((0, 3)), candidates, 6)
    assert sorted(chosen.tolist()) == list(range(6))


@pytest.mark.parametrize(
    ("n_identified", "n_seeds", "n_samples", "expected"),
    [(0, 10, 1000, 0), (500, 10, 1000, 10), (100, 10, 1000, 1), (40, 10, 1000, 0),
     (900, 100, 1000, MAX_PROVISIONAL), (3, 900, 1000, 3), (10, 0, 100, 0)],
)
def test_provisional_classes_get_the_seeds_density(n_identified, n_seeds, n_samples, expected):
    assert n_provisional_classes(n_identified, n_seeds, n_samples) == expected


def dense_softmax(X, graph, scale, coef, intercept, depth):
    """softmax(S^depth diag(scale) X W + b) with a dense S, as float64 throughout (W rounded to float32)."""
    dense = graph.toarray().astype(np.float64) + np.eye(X.shape[0])
    operator = np.linalg.matrix_power(dense / dense.sum(axis=1, keepdims=True), depth)
    logits = operator @ ((X.astype(np.float64) * scale[:, None]) @ coef.astype(np.float32).astype(np.float64))
    return softmax(logits + intercept, axis=1)


@pytest.fixture(params=["every column at once", "blocks of COLUMN_BLOCK"])
def column_blocks(request, monkeypatch):
    """Runs a test with the columns smoothed all at once (small n), then COLUMN_BLOCK at a time."""
    if request.param != "every column at once":
        monkeypatch.setattr(column_scores, "COLUMN_BLOCK_BYTES", 0)
    return request.param


def test_column_block_grows_with_the_budget_down_to_its_floor():
    assert column_block(13_083) == COLUMN_BLOCK_BYTES // (8 * 13_083) > 141  # a whole real set: every column
    assert column_block(100_000) == 41
    assert column_block(1_000_000) == column_block(10**8) == COLUMN_BLOCK


@pytest.mark.parametrize("n_columns", [3, COLUMN_BLOCK + 5, 2 * COLUMN_BLOCK + 1])
@pytest.mark.parametrize("depth", [0, 2])
@pytest.mark.parametrize("n_known", [1, 2, COLUMN_BLOCK + 2])
@pytest.mark.parametrize("n_top", [1, 2, 3])
def test_known_class_confidence_matches_a_dense_softmax(n_columns, depth, n_known, n_top, column_blocks):
    rng = np.random.default_rng(n_columns + depth)
    X = rng.normal(size=(80, 6)).astype(np.float32)
    graph = build_knn_graph(X, 6, method="exact")
    walk = RandomWalk(graph)
    coef = rng.normal(size=(6, n_columns)) * 3
    intercept = rng.normal(size=n_columns)
    scale = 1 / np.linalg.norm(X.astype(np.float64), axis=1)
    n_known = min(n_known, n_columns)
    got = known_class_confidence(FeatureRows(walk, X, scale), coef, intercept, n_known, depth, n_top=n_top)
    # the n_top largest known-class probabilities of each row, summed (all of them with fewer known classes)
    expected = -np.sort(-dense_softmax(X, graph, scale, coef, intercept, depth)[:, :n_known], axis=1)[:, :n_top]
    assert_allclose(got, expected.sum(axis=1), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("n_columns", [4, COLUMN_BLOCK + 5])
@pytest.mark.parametrize("depth", [0, 2])
def test_most_probable_columns_match_a_dense_softmax(n_columns, depth, column_blocks):
    rng = np.random.default_rng(10 * n_columns + depth)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    graph = build_knn_graph(X, 6, method="exact")
    coef, intercept = rng.normal(size=(6, n_columns)) * 3, rng.normal(size=n_columns)
    scale = 1 / np.linalg.norm(X.astype(np.float64), axis=1)
    rows = np.sort(rng.choice(120, size=90, replace=False))
    column, probability = most_probable_columns(FeatureRows(RandomWalk(graph), X, scale), coef, intercept, depth, rows)
    expected = dense_softmax(X, graph, scale, coef, intercept, depth)[rows]
    assert_array_equal(column, expected.argmax(axis=1))
    assert_allclose(probability, expected.max(axis=1), rtol=1e-6)
    empty = most_probable_columns(FeatureRows(RandomWalk(graph), X, scale), coef, intercept, depth,
                                  np.empty(0, dtype=np.int64))
    assert empty[0].size == empty[1].size == 0


def kept_level(walk, X, scale, depth):
    """A FeatureRows that keeps the level for ``depth`` (every row asked for once)."""
    feature_rows = FeatureRows(walk, X, scale)
    feature_rows.smooth(np.arange(X.shape[0]), depth)
    assert feature_rows.keeps(depth)
    return feature_rows


@pytest.mark.parametrize("n_columns", [4, 2 * COLUMN_BLOCK + 1])  # more than 6 features / depth
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("n_top", [1, 2])
def test_scores_from_the_kept_level_match_a_dense_softmax(n_columns, depth, n_top, column_blocks, monkeypatch):
    """(S^depth X) W from the level, a few rows of blocks at a time, is S^depth (X W) to rounding."""
    import fastprop.adjacency

    monkeypatch.setattr(fastprop.adjacency, "BLOCK_ROWS", 32)
    rng = np.random.default_rng(n_columns + depth)
    X = rng.normal(size=(100, 6)).astype(np.float32)
    graph = build_knn_graph(X, 6, method="exact")
    walk = RandomWalk(graph)
    coef, intercept = rng.normal(size=(6, n_columns)) * 3, rng.normal(size=n_columns)
    scale = 1 / np.linalg.norm(X.astype(np.float64), axis=1)
    feature_rows = kept_level(walk, X, scale, depth)
    dense = graph.toarray().astype(np.float64) + np.eye(100)
    operator = np.linalg.matrix_power(dense / dense.sum(axis=1, keepdims=True), depth)
    expected = softmax(operator @ (X.astype(np.float64) * scale[:, None]) @ coef + intercept, axis=1)  # W in float64
    n_known = min(2, n_columns)
    got = known_class_confidence(feature_rows, coef, intercept, n_known, depth, n_top=n_top)
    top = -np.sort(-expected[:, :n_known], axis=1)[:, :n_top]
    assert_allclose(got, top.sum(axis=1), rtol=1e-10, atol=1e-12)
    rows = np.sort(rng.choice(100, size=40, replace=False))
    assert_allclose(known_class_confidence(feature_rows, coef, intercept, n_known, depth, rows, n_top), got[rows],
                    rtol=1e-12)
    column, probability = most_probable_columns(feature_rows, coef, intercept, depth, rows)
    assert_array_equal(column, expected[rows].argmax(axis=1))
    assert_allclose(probability, expected[rows].max(axis=1), rtol=1e-10)
    # and the walk of X W's columns (W rounded to float32 there) agrees with it
    assert_allclose(got, known_class_confidence(FeatureRows(walk, X, scale), coef, intercept, n_known, depth,
                                                n_top=n_top), rtol=1e-5, atol=1e-9)


def test_scores_without_a_kept_level_are_the_walks_bit_for_bit():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(90, 5)).astype(np.float32)
    walk = RandomWalk(build_knn_graph(X, 6, method="exact"))
    coef, intercept = rng.normal(size=(5, 7)) * 3, rng.normal(size=7)
    feature_rows = FeatureRows(walk, X, None)
    feature_rows.smooth(np.arange(2), 2)  # two rows' neighbourhoods: no level
    assert not feature_rows.keeps(2)
    assert_array_equal(known_class_confidence(feature_rows, coef, intercept, 3, 2),
                       known_class_confidence(FeatureRows(walk, X, None), coef, intercept, 3, 2))
    level = kept_level(walk, X, None, 2)  # a level for depth 2 serves no other depth
    assert_array_equal(known_class_confidence(level, coef, intercept, 3, 1),
                       known_class_confidence(FeatureRows(walk, X, None), coef, intercept, 3, 1))
    # with more features than depth x columns, X W's columns are walked, level or not
    wide = rng.normal(size=(90, 14)).astype(np.float32)
    wide_coef = rng.normal(size=(14, 7))
    rows = np.array([5, 60, 61])
    for asked in [None, rows]:
        assert_array_equal(
            known_class_confidence(kept_level(walk, wide, None, 2), wide_coef, intercept, 3, 2, asked),
            known_class_confidence(FeatureRows(walk, wide, None), wide_coef, intercept, 3, 2, asked))


def test_most_confident_rows_by_hand():
    """Ties go to the smaller row; a column takes half of what it wins at most."""
    rows = np.array([10, 11, 12, 13, 14, 15, 16])
    column = np.array([0, 0, 0, 1, 0, 1, 1])
    probability = np.array([0.73, 0.73, 0.73, 0.73, 0.88, 0.88, 0.95])
    taken, taken_column = most_confident_rows(rows, column, probability, np.array([5, 5]))
    assert_array_equal(taken, [14, 10, 16])  # half of 4 (0.88, then the first 0.73), half of 3
    assert_array_equal(taken_column, [0, 0, 1])
    assert_array_equal(most_confident_rows(rows, column, probability, np.array([1, 0]))[0], [14])
    assert_array_equal(most_confident_rows(rows, column, probability, np.array([5, 5, 5]))[0], [14, 10, 16])
    for empty in (most_confident_rows(rows, column, probability, np.array([0, 0])),
                  most_confident_rows(rows[:0], column[:0], probability[:0], np.array([2, 2]))):
        assert empty[0].size == empty[1].size == 0


def slow_known_edge_share(graph, rows, column, n_known, n_columns):
    """Edge by edge: each provisional column's weight to known columns' rows over that to known or sibling rows."""
    owner = dict(zip(rows.tolist(), column.tolist()))
    known, sibling = np.zeros(n_columns - n_known), np.zeros(n_columns - n_known)
    dense = graph.toarray()
    for row, k in owner.items():
        if k < n_known:
            continue
        for other in np.flatnonzero(dense[row]):
            j = owner.get(int(other), -1)
            if 0 <= j < n_known:
                known[k - n_known] += dense[row, other]
            elif j >= n_known and j != k:
                sibling[k - n_known] += dense[row, other]
    return np.array([kn / (kn + sb) if kn + sb > 0 else 0.0 for kn, sb in zip(known, sibling)])


def test_known_edge_share_by_hand():
    """A path 0-1-2-3-4: provisional column 2 on {1, 2}, 3 on {3}; 0 and 4 known (columns 0 and 1)."""
    import scipy.sparse

    weight = {(0, 1): 1.0, (1, 2): 5.0, (2, 3): 3.0, (3, 4): 2.0}
    dense = np.zeros((6, 6))
    for (i, j), w in weight.items():
        dense[i, j] = dense[j, i] = w
    dense[4, 5] = dense[5, 4] = 7.0  # 5 is not among the rows: its edge does not count
    graph = scipy.sparse.csr_matrix(dense)
    share = known_edge_share(graph, np.arange(5), np.array([0, 2, 2, 3, 1]), 2, 5)
    # column 2: to 0 (known) 1.0, to 3 (sibling) 3.0; column 3: to 2 (sibling) 3.0, to 4 (known) 2.0; column 4 none
    assert_allclose(share, [1 / 4, 2 / 5, 0.0])
    alone = known_edge_share(graph, np.arange(5), np.full(5, 2), 2, 3)  # one provisional column, nothing bordered
    assert alone.dtype == np.float64 and alone.tolist() == [0.0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_known_edge_share_matches_a_slow_count(seed):
    rng = np.random.default_rng(seed)
    graph = build_knn_graph(rng.normal(size=(90, 5)).astype(np.float32), 6, method="exact")
    rows = np.sort(rng.choice(90, size=70, replace=False))
    column = rng.integers(0, 7, size=rows.size)
    got = known_edge_share(graph, rows, column, 3, 7)
    assert_allclose(got, slow_known_edge_share(graph, rows, column, 3, 7), rtol=1e-12)
    assert np.all((got > 0) & (got < 1))  # a mix of both at every column here


def slow_refit_rows(probability, rows, graph, n_known, rows_known, rows_provisional, fragment_share):
    """refit_rows' rules with a dense probability, one column at a time."""
    column = probability.argmax(axis=1)
    best = probability.max(axis=1)
    provisional = column >= n_known
    if not provisional.any() or np.mean(best[provisional] > 0.5) < MIN_HELD_SHARE:
        return [], []
    n_columns = probability.shape[1]
    share = slow_known_edge_share(graph, rows, column, n_known, n_columns)
    taken, taken_column = [], []
    for k in range(n_columns):
        wanted = rows_known if k < n_known else (0 if share[k - n_known] >= fragment_share else rows_provisional)
        mine = sorted((-best[i], rows[i]) for i in range(rows.size) if column[i] == k)
        for _, row in mine[: min(wanted, len(mine) // 2)]:
            taken.append(row)
            taken_column.append(k)
    return taken, taken_column


@pytest.mark.parametrize("fragment_share", [0.5, 0.8, 1.01])
def test_refit_rows_match_the_slow_rules(fragment_share, monkeypatch):
    import fastprop.novelty

    monkeypatch.setattr(fastprop.novelty, "FRAGMENT_EDGE_SHARE", fragment_share)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 6)).astype(np.float32)
    graph = build_knn_graph(X, 6, method="exact")
    coef, intercept = rng.normal(size=(6, 9)) * 4, rng.normal(size=9)
    rows = np.sort(rng.choice(150, size=120, replace=False))
    taken, taken_column = refit_rows(FeatureRows(RandomWalk(graph), X, None), coef, intercept, 1, rows, 4)
    probability = dense_softmax(X, graph, np.ones(150), coef, intercept, 1)[rows]
    expected, expected_column = slow_refit_rows(probability, rows, graph, 4, REFIT_ROWS_KNOWN,
                                                REFIT_ROWS_PROVISIONAL, fragment_share)
    assert_array_equal(taken, expected)
    assert_array_equal(taken_column, expected_column)
    assert np.any(np.asarray(expected_column) < 4)  # known columns take rows in every case


def test_refit_rows_take_no_provisional_rows_from_fragments_and_none_at_all_without_clusters(monkeypatch):
    import fastprop.novelty

    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 6)).astype(np.float32)
    walk = RandomWalk(build_knn_graph(X, 6, method="exact"))
    coef, intercept = rng.normal(size=(6, 9)) * 4, rng.normal(size=9)
    rows = np.arange(150)
    monkeypatch.setattr(fastprop.novelty, "FRAGMENT_EDGE_SHARE", 0.0)  # every provisional column a fragment
    _, taken_column = refit_rows(FeatureRows(walk, X, None), coef, intercept, 1, rows, 4)
    assert taken_column.size and np.all(taken_column < 4)
    monkeypatch.setattr(fastprop.novelty, "FRAGMENT_EDGE_SHARE", 1.01)  # none
    _, taken_column = refit_rows(FeatureRows(walk, X, None), coef, intercept, 1, rows, 4)
    assert np.any(taken_column >= 4)
    # Flat logits: no provisional column holds anything with probability above 1/2, so no refit at all.
    taken, taken_column = refit_rows(FeatureRows(walk, X, None), coef * 1e-3, intercept * 0, 1, rows, 4)
    assert taken.size == taken_column.size == 0


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("n_top", [1, 2, 3])
def test_known_class_confidence_of_all_rows_in_blocks_is_bit_for_bit_that_at_once(depth, n_top, monkeypatch):
    import fastprop.adjacency

    rng = np.random.default_rng(depth)
    X = rng.normal(size=(90, 5)).astype(np.float32)
    walk = RandomWalk(build_knn_graph(X, 6, method="exact"))
    coef, intercept = rng.normal(size=(5, COLUMN_BLOCK + 3)) * 3, rng.normal(size=COLUMN_BLOCK + 3)
    feature_rows = FeatureRows(walk, X, 1 / np.linalg.norm(X.astype(np.float64), axis=1))  # no level: X W walked
    at_once = known_class_confidence(feature_rows, coef, intercept, 4, depth, n_top=n_top)  # one block of 90 rows
    monkeypatch.setattr(fastprop.adjacency, "BLOCK_ROWS", 16)
    assert_array_equal(known_class_confidence(feature_rows, coef, intercept, 4, depth, n_top=n_top), at_once)
    rows = np.array([89, 3, 40])
    assert_array_equal(known_class_confidence(feature_rows, coef, intercept, 4, depth, rows, n_top), at_once[rows])


def clusters(seed=0, n_per=60, n_unseeded=2):
    """Two seeded clusters and ``n_unseeded`` clusters no seed reaches, on the sphere."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[: 2 + n_unseeded] * 4
    X = np.vstack([c + rng.normal(size=(n_per, 8)) for c in centres]).astype(np.float32)
    y = np.full(len(X), -1)
    y[[0, 1, n_per, n_per + 1]] = [0, 0, 1, 1]
    truth = np.repeat([0, 1, *([-1] * n_unseeded)], n_per)
    return X, y, truth


def test_unseeded_clusters_lose_known_class_confidence():
    X, y, truth = clusters()
    graph = build_knn_graph(X, 8, method="exact")
    walk = RandomWalk(graph)
    seed_class = y.copy()
    identified = np.flatnonzero(truth == -1)[::2]  # half of the outliers rejected at first
    confidence, n_provisional = provisional_class_confidence(
        FeatureRows(walk, X, 1 / np.linalg.norm(X.astype(np.float64), axis=1)), seed_class, 2, identified,
        depth=2, l2=1e-4, rng=np.random.default_rng(0),
    )
    assert n_provisional == n_provisional_classes(identified.size, 4, y.size) > 0
    assert confidence.shape == (y.size,)
    assert np.all((confidence >= 0) & (confidence <= 1))
    assert outlier_auroc(confidence[y < 0], truth[y < 0]) > 0.95


def test_a_sample_of_the_seeds_keeps_every_class(monkeypatch):
    import fastprop.novelty

    X, y, truth = clusters()
    y[np.flatnonzero(truth == 1)[:20]] = 1  # class 1 now has 22 seeds, class 0 two
    monkeypatch.setattr(fastprop.novelty, "MAX_SEEDS", 3)
    walk = RandomWalk(build_knn_graph(X, 8, method="exact"))
    confidence, _ = provisional_class_confidence(
        FeatureRows(walk, X, None), y, 2, np.flatnonzero(truth == -1)[::2], depth=2, l2=1e-4,
        rng=np.random.default_rng(0),
    )
    in_class_0 = np.flatnonzero((truth == 0) & (y < 0))
    assert np.median(confidence[in_class_0]) > 0.5  # class 0 kept a seed: its members are not outliers
    assert outlier_auroc(confidence[y < 0], truth[y < 0]) > 0.95


def test_top_up_rows_by_hand():
    seed_class = np.array([0, 1, 1, 1, -1, -1, -1])  # class 0: one seed, class 1: three, class 2: none
    pseudo = np.array([10, 11, 12, 13, 20, 21, 30, 31, 32, 33])  # by class, the best first
    pseudo_class = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    taken, taken_class = top_up_rows(seed_class, 3, pseudo, pseudo_class, np.array([11, 31]), 3)
    # class 0 needs 2 rows (11 excluded: 10, 12), class 1 none, class 2 three (31 excluded: 30, 32, 33)
    assert_array_equal(taken, [10, 12, 30, 32, 33])
    assert_array_equal(taken_class, [0, 0, 2, 2, 2])
    taken, _ = top_up_rows(seed_class, 3, pseudo, pseudo_class, np.empty(0, dtype=np.int64), 1)
    assert_array_equal(taken, [30])
    taken, taken_class = top_up_rows(seed_class, 3, pseudo[:0], pseudo_class[:0], np.array([11]), 5)
    assert taken.size == taken_class.size == 0


def test_pseudo_labels_are_training_rows_of_their_class_not_anchors():
    """The provisional step with self-training's labels against a dense reference of the whole step."""
    X, y, truth = clusters()
    graph = build_knn_graph(X, 8, method="exact")
    identified = np.flatnonzero(truth == -1)[::2]
    pseudo = np.r_[np.flatnonzero(truth == 0)[10:30], np.flatnonzero(truth == 1)[5:25]]
    pseudo_class = truth[pseudo]
    pseudo[3] = identified[0]  # one of them was rejected since: not taken, the next one is
    depth, n_classes = 2, 2
    confidence, n_provisional = provisional_class_confidence(
        FeatureRows(RandomWalk(graph), X, 1 / np.linalg.norm(X.astype(np.float64), axis=1)), y, n_classes,
        identified,
        depth=depth, l2=1e-4, rng=np.random.default_rng(0), pseudo_labels=(pseudo, pseudo_class),
    )
    # Reference: dense S^depth of the unit rows; each class has 2 seeds, so TOP_UP_ROWS - 2 of its labels join.
    walk = np.linalg.matrix_power(dense_random_walk(graph.toarray()), depth)
    smoothed = walk @ unit(X.astype(np.float64))
    seeds = np.flatnonzero(y >= 0)
    extra = np.r_[np.delete(pseudo[:20], 3)[: TOP_UP_ROWS - 2], pseudo[20 : 20 + TOP_UP_ROWS - 2]]
    degree = np.asarray(graph.sum(axis=1)).ravel()
    candidates = identified[degree[identified] >= np.median(degree)]
    picked = candidates[slow_farthest_first(unit(smoothed[seeds]), unit(smoothed[candidates]), n_provisional)]
    training = np.r_[seeds, extra, picked]
    targets = np.r_[y[seeds], truth[extra], n_classes + np.arange(n_provisional)]
    coef, intercept = fit_softmax_regression(smoothed[training], np.eye(n_classes + n_provisional)[targets],
                                             float32_products=True)  # as FastProp fits it
    expected = softmax(smoothed @ coef + intercept, axis=1)[:, :n_classes].max(axis=1)
    assert_allclose(confidence, expected, rtol=0, atol=1e-7)
    without, _ = provisional_class_confidence(
        FeatureRows(RandomWalk(graph), X, None), y, n_classes, identified, depth=depth, l2=1e-4,
        rng=np.random.default_rng(0),
    )
    assert np.max(np.abs(without - confidence)) > 1e-3  # the labels are used


@pytest.mark.parametrize("fragment_share", [0.0, 1.01])
def test_a_build_is_fitted_again_on_every_class_s_most_confident_samples(fragment_share, monkeypatch):
    """The provisional step with its refit against a dense reference of the whole step."""
    import fastprop.novelty

    monkeypatch.setattr(fastprop.novelty, "REFIT_ROWS_KNOWN", 6)
    monkeypatch.setattr(fastprop.novelty, "REFIT_ROWS_PROVISIONAL", 3)
    monkeypatch.setattr(fastprop.novelty, "FRAGMENT_EDGE_SHARE", fragment_share)
    X, y, truth = clusters()
    graph = build_knn_graph(X, 8, method="exact")
    identified = np.flatnonzero(truth == -1)[::2]
    unlabeled = np.flatnonzero(y < 0)
    depth, n_classes = 2, 2
    confidence, n_provisional = provisional_class_confidence(
        FeatureRows(RandomWalk(graph), X, 1 / np.linalg.norm(X.astype(np.float64), axis=1)), y, n_classes,
        identified,
        depth=depth, l2=1e-4, rng=np.random.default_rng(0), refit_candidates=unlabeled,
    )
    walk = np.linalg.matrix_power(dense_random_walk(graph.toarray()), depth)
    smoothed = walk @ unit(X.astype(np.float64))
    seeds = np.flatnonzero(y >= 0)
    degree = np.asarray(graph.sum(axis=1)).ravel()
    candidates = identified[degree[identified] >= np.median(degree)]
    picked = candidates[slow_farthest_first(unit(smoothed[seeds]), unit(smoothed[candidates]), n_provisional)]
    training = np.r_[seeds, picked]
    targets = np.r_[y[seeds], n_classes + np.arange(n_provisional)]
    n_columns = n_classes + n_provisional
    coef, intercept = fit_softmax_regression(smoothed[training], np.eye(n_columns)[targets],
                                             float32_products=True)  # as FastProp fits it
    probability = softmax(smoothed @ coef + intercept, axis=1)
    pool = np.setdiff1d(unlabeled, training)
    more, more_class = slow_refit_rows(probability[pool], pool, graph, n_classes, 6, 3, fragment_share)
    assert len(more) > 6 * n_classes if fragment_share > 1 else max(more_class) < n_classes  # all, or known only
    rows, row_targets = np.r_[training, more], np.r_[targets, more_class]
    coef, intercept = fit_softmax_regression(smoothed[rows], np.eye(n_columns)[row_targets], tol=REFIT_TOL,
                                             initial=(coef, intercept), float32_products=True)
    expected = softmax(smoothed @ coef + intercept, axis=1)[:, :n_classes].max(axis=1)
    assert_allclose(confidence, expected, rtol=0, atol=1e-7)
    once, _ = provisional_class_confidence(
        FeatureRows(RandomWalk(graph), X, None), y, n_classes, identified, depth=depth, l2=1e-4,
        rng=np.random.default_rng(0),
    )
    assert np.max(np.abs(once - confidence)) > 1e-3  # the refit is used
    rows = unlabeled[::3]  # a scouting build: the same refit, read at its rows only
    scouted, _ = provisional_class_confidence(
        FeatureRows(RandomWalk(graph), X, 1 / np.linalg.norm(X.astype(np.float64), axis=1)), y, n_classes,
        identified,
        depth=depth, l2=1e-4, rng=np.random.default_rng(0), refit_candidates=unlabeled, rows=rows,
    )
    assert_array_equal(scouted, confidence[rows])


def test_nothing_identified_means_no_provisional_class():
    X, y, _ = clusters()
    walk = RandomWalk(build_knn_graph(X, 8, method="exact"))
    confidence, n_provisional = provisional_class_confidence(
        FeatureRows(walk, X, None), y, 2, np.empty(0, dtype=np.int64), depth=2, l2=1e-4,
        rng=np.random.default_rng(0),
    )
    assert confidence is None and n_provisional == 0


def test_fastprop_with_provisional_classes_ranks_unseeded_clusters_lower():
    X, y, truth = clusters(n_per=80)
    unlabeled = np.flatnonzero(y < 0)
    rng = np.random.default_rng(1)
    known = np.sort(rng.choice(unlabeled, size=16, replace=False))
    auroc, rejected = {}, {}
    for provisional in (False, True):
        for validation in (None, (known, truth[known])):
            model = FastProp(n_neighbors=10, random_state=0, provisional_classes=provisional).fit(
                X, y, validation=validation
            )
            assert np.all(np.isfinite(model.confidence_))
            assert np.all((model.confidence_ >= 0) & (model.confidence_ <= 1))
            assert (model.n_provisional_classes_ > 0) == provisional
            assert_array_equal(model.transduction_[y >= 0], y[y >= 0])
            assert np.mean(model.transduction_[truth >= 0] == truth[truth >= 0]) > 0.9
            key = (provisional, validation is not None)
            auroc[key] = outlier_auroc(model.confidence_[unlabeled], truth[unlabeled])
            rejected[key] = np.mean(model.transduction_[truth == -1] == -1)
    # Without a validation set the known-class confidence joins the paper's: the unseeded cluster ranks lower.
    assert auroc[True, False] > auroc[False, False] > 0.95
    # With one, the threshold chosen on it rejects the unseeded cluster (the paper's confidence: 89% of it).
    assert auroc[True, True] > 0.99 and auroc[False, True] > 0.99
    assert rejected[True, True] > 0.95 > rejected[False, True]


def test_the_validation_rule_changes_the_final_threshold_only():
    """The provisional classes go to the samples the paper's rule rejects, whatever the rule."""
    X, y, truth = clusters(n_per=80)
    # A draw on which the two rules disagree: identifying by the smoothed one would make 3 classes, not 4.
    known = np.sort(np.random.default_rng(3).choice(np.flatnonzero(y < 0), size=16, replace=False))
    fits = [FastProp(n_neighbors=10, random_state=0, validation_rule=rule).fit(X, y, validation=(known, truth[known]))
            for rule in ("smoothed", "max")]
    assert fits[0].n_provisional_classes_ == fits[1].n_provisional_classes_ > 0
    assert_array_equal(fits[0].confidence_, fits[1].confidence_)
    assert_array_equal(fits[0].label_distributions_, fits[1].label_distributions_)


def test_known_class_weight_follows_the_outlier_share():
    def truth(n_outliers, n=20):
        return np.r_[np.full(n_outliers, -1), np.zeros(n - n_outliers, dtype=int)]

    known = np.array([0.9, 0.2, 0.7, 0.1, 0.5, 0.3])
    unlabeled = np.array([0, 1, 2, 3, 4])  # sample 5 is a seed: not counted
    # A validation set: its share of outliers.
    assert known_class_weight(truth(0), known, unlabeled) == 0.5  # none of its samples an outlier: it says nothing
    assert known_class_weight(truth(2), known, unlabeled) == pytest.approx(0.2)
    assert known_class_weight(truth(5), known, unlabeled) == 0.5
    assert known_class_weight(truth(10), known, unlabeled) == known_class_weight(truth(16), known, unlabeled) == 1.0
    # None: the share the provisional classes claim (known-class confidence below 0.5): 2 of 5.
    assert claimed_share(known, unlabeled) == pytest.approx(0.4)
    assert known_class_weight(None, known, unlabeled) == pytest.approx(0.8)
    assert known_class_weight(None, known, np.array([0, 2, 4])) == 0.0  # 0.5 is not below 0.5
    assert known_class_weight(None, known, np.array([1, 3, 5])) == 1.0
    assert claimed_share(known, np.empty(0, dtype=np.int64)) == 0.0


@pytest.mark.parametrize("with_validation", [True, False, "no outlier in it"])
def test_final_confidence_weighs_the_known_class_confidence(monkeypatch, with_validation):
    import fastprop.refinement as refinement

    X, y, truth = clusters(n_per=80)
    rng = np.random.default_rng(2)
    known = rng.random(X.shape[0])

    def fixed_known(*args, rows=None, **kwargs):
        return (known if rows is None else known[rows]).copy(), 3

    monkeypatch.setattr(refinement, "provisional_class_confidence", fixed_known)
    validation = np.sort(rng.choice(np.flatnonzero(y < 0), size=20, replace=False))
    if with_validation == "no outlier in it":  # the step runs for an annotated outlier
        in_class = validation[truth[validation] >= 0]
        outlier = np.flatnonzero(truth < 0)[0]
        model = FastProp(n_neighbors=10, random_state=0, calibrate_confidence=False).fit(
            X, y, validation=(in_class, truth[in_class]), outliers=[outlier])
        weight = 0.5
    elif with_validation:
        model = FastProp(n_neighbors=10, random_state=0, calibrate_confidence=False).fit(
            X, y, validation=(validation, truth[validation]))
        weight = min(1.0, 2 * np.mean(truth[validation] < 0))
    else:
        model = FastProp(n_neighbors=10, random_state=0).fit(X, y)
        weight = min(1.0, 2 * np.mean(known[y < 0] < 0.5))  # the share the provisional classes claim
    assert 0 < weight <= 1
    unlabeled = (y < 0) & ~np.isin(np.arange(len(y)), model.known_outliers_)
    # the rest is the largest label probability where a patch reached the sample, else the paper's confidence
    rest = np.where(model.view_count_ > 0, model.label_distributions_.max(axis=1),
                    0.5 * (model.multiview_confidence_ + model.confnet_confidence_))
    expected = np.clip((1 - weight) * rest + weight * known, 0, 1)
    if with_validation is False:  # "auto": the blend smoothed over the graph once, as many rejected as at 0.5
        assert np.all(model.view_count_[y < 0] > 0)
        blend = np.where(y >= 0, 1.0, expected)
        walk = dense_random_walk(model.graph_.toarray())
        expected = (1 - RANKING_SMOOTHING) * blend + RANKING_SMOOTHING * walk @ blend
        assert np.count_nonzero(model.confidence_[y < 0] < model.outlier_threshold_) == np.count_nonzero(
            blend[y < 0] < 0.5) > 0
    assert_allclose(model.confidence_[unlabeled], expected[unlabeled], rtol=0, atol=1e-12)


def test_smoothed_ranking_matches_a_dense_walk_and_keeps_the_count():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 4)).astype(np.float32)
    graph = build_knn_graph(X, 5, method="exact")
    confidence = rng.random(60)
    judged = np.arange(10, 60)
    smoothed, threshold = smoothed_ranking(RandomWalk(graph), confidence, 0.4, judged, np.arange(5), np.array([7]))
    expected = 0.6 * confidence + 0.4 * dense_random_walk(graph.toarray()) @ confidence
    expected[:5], expected[7] = 1.0, 0.0
    assert_allclose(smoothed, expected, rtol=0, atol=1e-14)
    assert np.count_nonzero(smoothed[judged] < threshold) == np.count_nonzero(confidence[judged] < 0.4) > 0
    # the lowest by the smoothed confidence go, whatever they were before
    rejected = smoothed[judged] < threshold
    assert smoothed[judged][rejected].max() <= smoothed[judged][~rejected].min()
    none = np.empty(0, dtype=np.int64)
    assert smoothed_ranking(RandomWalk(graph), confidence, 0.0, judged, none, none)[1] == 0.0  # none rejected: none
    _, all_out = smoothed_ranking(RandomWalk(graph), confidence, 2.0, judged, none, none)
    assert all_out == REJECT_ALL


def test_share_threshold_by_hand():
    confidence = np.array([0.1, 0.5, 0.3, 0.9, 0.7])
    assert share_threshold(confidence, 0.4) == 0.5  # two of five below it: 0.1 and 0.3
    assert share_threshold(confidence, 0.5) == 0.5  # round(2.5) = 2 (halves to even)
    assert share_threshold(confidence, 0.7) == 0.9  # round(3.5) = 4: four of five below 0.9
    assert share_threshold(confidence, 0.0) == 0.0
    assert share_threshold(confidence, 0.05) == 0.0  # rounds to none
    assert share_threshold(confidence, 0.95) == REJECT_ALL  # rounds to all
    assert share_threshold(np.array([0.2, 0.2, 0.2, 0.8]), 0.25) == 0.2  # a tie at the cut: kept


def test_a_given_share_weighs_the_known_class_confidence():
    known = np.array([0.9, 0.2, 0.7, 0.1, 0.5, 0.3])
    unlabeled = np.array([0, 1, 2, 3, 4])
    assert known_class_weight(None, known, unlabeled, share=0.1) == pytest.approx(0.2)
    assert known_class_weight(None, known, unlabeled, share=0.0) == 0.0
    assert known_class_weight(None, known, unlabeled, share=0.7) == 1.0
    outliers = np.r_[np.full(2, -1), np.zeros(18, dtype=int)]
    assert known_class_weight(outliers, known, unlabeled, share=0.45) == pytest.approx(0.2)  # validation wins


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5])
def test_auto_with_a_given_share_rejects_that_share(share, monkeypatch):
    """A hand-built mixture: two seeded clusters, two no seed reaches (half the unlabeled samples)."""
    import fastprop.refinement as refinement

    smoothings, original = [], refinement.smoothed_ranking

    def recording(*args, **kwargs):
        smoothings.append(original(*args, **kwargs))
        return smoothings[-1]

    monkeypatch.setattr(refinement, "smoothed_ranking", recording)
    X, y, truth = clusters(n_per=80)
    unlabeled = np.flatnonzero(y < 0)
    model = FastProp(n_neighbors=10, random_state=0, outlier_share=share).fit(X, y)
    assert len(smoothings) == (share > 0)  # ranked by the blend smoothed over the graph, as many rejected
    if smoothings:
        assert_array_equal(smoothings[0][0], model.confidence_)
    rejected = model.transduction_[unlabeled] == -1
    assert rejected.sum() == round(share * unlabeled.size)
    assert model.outlier_threshold_ == share_threshold(model.confidence_[unlabeled], share)
    if share == 0:
        assert model.n_provisional_classes_ == 0
    else:  # the lowest confidences are the unseeded clusters' (half of the unlabeled samples: 160 of 316)
        assert model.n_provisional_classes_ > 0
        assert np.mean(truth[unlabeled][rejected] == -1) > 0.99
    kept = unlabeled[~rejected]
    assert np.mean(model.transduction_[kept][truth[kept] >= 0] == truth[kept][truth[kept] >= 0]) > 0.99


def test_a_validation_set_or_a_numeric_threshold_overrides_the_given_share():
    X, y, truth = clusters(n_per=80)
    validation = np.sort(np.random.default_rng(2).choice(np.flatnonzero(y < 0), size=20, replace=False))
    for kwargs, fit_kwargs in (({}, {"validation": (validation, truth[validation])}),
                               ({"outlier_threshold": 0.8}, {})):
        plain = FastProp(n_neighbors=10, random_state=0, **kwargs).fit(X, y, **fit_kwargs)
        shared = FastProp(n_neighbors=10, random_state=0, outlier_share=0.1, **kwargs).fit(X, y, **fit_kwargs)
        assert_array_equal(shared.confidence_, plain.confidence_)
        assert_array_equal(shared.transduction_, plain.transduction_)
        assert shared.outlier_threshold_ == plain.outlier_threshold_


def test_blended_confidence_by_hand():
    first = np.array([0.9, 0.2, 0.6])
    known = np.array([0.1, 0.8, 1.0])
    probability = np.array([0.5, 0.4, 0.3])
    reached = np.array([True, True, False])
    unlabeled = np.arange(3)
    # A validation set with 1 outlier in 10: weight 0.2 on the known-class confidence, 0.8 on the probability
    # where a patch reached the sample, on the paper's confidence where none did.
    truth = np.r_[-1, np.zeros(9, dtype=int)]
    assert_allclose(blended_confidence(first, known, probability, reached, truth, unlabeled), [0.42, 0.48, 0.68],
                    rtol=0, atol=1e-15)
    # ... and that alone when no provisional class was due.
    assert_array_equal(blended_confidence(first, None, probability, reached, truth, unlabeled), [0.5, 0.4, 0.6])
    # Half of it outliers or more: the known-class confidence alone.
    assert_array_equal(blended_confidence(first, known, probability, reached, np.r_[-1, 0], unlabeled), known)
    # No validation set: the provisional classes claim 1 sample in 3 (0.1 < 0.5), so the weight is 2/3.
    assert_allclose(blended_confidence(first, known, probability, reached, None, unlabeled),
                    [0.5 / 3 + 0.2 / 3, 0.4 / 3 + 1.6 / 3, 0.6 / 3 + 2 / 3], rtol=0, atol=1e-15)
    # ... and without provisional classes the paper's confidence, untouched.
    assert_array_equal(blended_confidence(first, None, probability, reached, None, unlabeled), first)


def test_the_runner_up_counts_as_much_as_the_provisional_classes_leave_to_the_rest_by_hand():
    first = np.array([0.9, 0.2, 0.6, 0.4])
    known = np.array([0.1, 0.8, 1.0, 0.9])
    probability = np.array([0.45, 0.4, 0.3, 0.5])
    runner_up = np.array([0.40, 0.3, 0.2, 0.1])
    reached = np.array([True, True, False, True])
    unlabeled = np.arange(4)
    # No validation set: the provisional classes claim 1 sample in 4, so w = 0.5 and the rest is
    # probability + 0.5^2 * runner_up where a patch reached the sample (the paper's confidence where none did).
    rest = np.array([0.45 + 0.1, 0.4 + 0.075, 0.6, 0.5 + 0.025])
    assert_allclose(blended_confidence(first, known, probability, reached, None, unlabeled, runner_up=runner_up),
                    0.5 * rest + 0.5 * known, rtol=0, atol=1e-15)
    # Sample 0 split between two known classes: 0.275 by its largest probability, 0.325 with the runner-up.
    # Where the provisional classes claim half the samples or more (w = 1) it counts nothing.
    claimed = np.array([0.1, 0.3, 1.0, 0.9])
    assert_array_equal(blended_confidence(first, claimed, probability, reached, None, unlabeled,
                                          runner_up=runner_up), claimed)
    # Without provisional classes there is no blend to add it to.
    assert_array_equal(blended_confidence(first, None, probability, reached, None, unlabeled, runner_up=runner_up),
                       first)


def test_second_largest_matches_a_sort_block_by_block():
    rng = np.random.default_rng(3)
    distributions = rng.dirichlet(np.ones(7), size=50)
    distributions[4, [2, 5]] = distributions[4].max()  # a tie for the largest: the second is that value too
    expected = np.sort(distributions, axis=1)[:, -2]
    assert_array_equal(second_largest(distributions), expected)
    assert_array_equal(second_largest(distributions, block_rows=8), expected)
    assert second_largest(distributions)[4] == distributions[4].max()
    assert_array_equal(second_largest(distributions[:, :1]), np.zeros(50))


def test_only_the_final_blend_counts_the_runner_up():
    first = np.array([0.9, 0.2, 0.6, 0.3, 1.0])
    probability = np.array([0.8, 0.45, 0.7, 0.9, 1.0])
    runner_up = np.array([0.1, 0.45, 0.2, 0.05, 0.0])
    reached = np.ones(5, dtype=bool)
    unlabeled = np.array([0, 1, 2, 3])
    # Every build's known-class confidence claims sample 1 alone (1 in 4: w = 0.5). By the largest
    # probability sample 1's blend is 0.5 * 0.45 + 0.5 * 0.1 = 0.275, below the cut: the scout's read
    # identifies it again. With the runner-up it would be 0.5 * (0.45 + 0.25 * 0.45) + 0.05 = 0.33125: the
    # final blend has that.
    built = np.array([0.9, 0.1, 0.9, 0.8, 1.0])
    calls = []

    def build_classes(identified, represented, max_iter, rows):
        calls.append(identified.tolist())
        return (built if rows is None else built[rows]), 2

    confidence, _, _ = refined_confidence(first, np.array([1, 3]), probability, reached, None, unlabeled, 2,
                                          build_classes, runner_up=runner_up)
    assert calls == [[1, 3], [1]]
    settled = probability + 0.25 * runner_up
    assert_allclose(confidence[unlabeled], (0.5 * settled + 0.5 * built)[unlabeled], rtol=0, atol=1e-15)
    assert_allclose(confidence[1], 0.33125, rtol=0, atol=1e-15)


def test_refined_confidence_identifies_again_below_the_cut_by_hand():
    first = np.array([0.9, 0.2, 0.6, 0.3, 1.0])
    probability = np.array([0.8, 0.4, 0.7, 0.9, 1.0])
    reached = np.ones(5, dtype=bool)
    unlabeled = np.array([0, 1, 2, 3])  # sample 4 is a seed
    builds = iter([np.array([0.9, 0.1, 0.2, 0.8, 1.0]), np.array([0.9, 0.1, 0.9, 0.8, 1.0]), None,
                   np.array([0.9, 0.1, 0.9, 0.8, 1.0])])
    calls, iterations, counts = [], [], []

    def build_classes(identified, represented, max_iter, rows):
        calls.append(identified.tolist())
        iterations.append(max_iter)
        counts.append(represented)
        if max_iter == SCOUT_ITERATIONS:
            assert_array_equal(rows, unlabeled)
        else:
            assert rows is None
        known = next(builds)
        return (None, 0) if known is None else (known if rows is None else known[rows], len(calls))

    confidence, known, n_provisional = refined_confidence(first, np.array([1]), probability, reached, None,
                                                          unlabeled, 3, build_classes)
    # Build 1 on the first rejection. Its known-class confidence claims 2 of 4 unlabeled samples (weight 1):
    # the blend is that confidence, below 0.5 at samples 1 and 2, which build 2 gets. Build 2 claims 1 of 4
    # (weight 0.5): blend [0.85, 0.25, 0.8, 0.85], below 0.5 at sample 1 only, for build 3, which finds
    # too few samples for a class: build 2's samples get their classes again, in full.
    assert calls == [[1], [1, 2], [1], [1, 2]]
    assert iterations == [SCOUT_ITERATIONS, SCOUT_ITERATIONS, FULL_ITERATIONS, FULL_ITERATIONS]
    # the first build's samples are all there are (None); the scouts read every unlabeled sample, so the
    # samples they choose stand for themselves; the fallback keeps its count
    assert counts == [None, 2, 1, 2]
    assert_array_equal(known, [0.9, 0.1, 0.9, 0.8, 1.0])
    assert n_provisional == 4
    assert_allclose(confidence[unlabeled], [0.85, 0.25, 0.8, 0.85], rtol=0, atol=1e-15)
    # One build: the first rejection's classes; none: the blend without provisional classes.
    builds = iter([np.array([0.9, 0.1, 0.2, 0.8, 1.0])])
    calls.clear()
    iterations.clear()
    confidence, known, _ = refined_confidence(first, np.array([1]), probability, reached, None, unlabeled, 1,
                                              build_classes)
    assert calls == [[1]] and iterations == [FULL_ITERATIONS]
    assert_array_equal(confidence[unlabeled], [0.9, 0.1, 0.2, 0.8])
    confidence, known, n_provisional = refined_confidence(first, np.array([1]), probability, reached, None,
                                                          unlabeled, 0, build_classes)
    assert known is None and n_provisional == 0 and calls == [[1]]
    assert_array_equal(confidence, first)
    # A first build with too few samples for a class: none, and no second try.
    builds = iter([None])
    confidence, known, n_provisional = refined_confidence(first, np.array([1]), probability, reached, None,
                                                          unlabeled, 3, build_classes)
    assert known is None and n_provisional == 0 and calls == [[1], [1]] and iterations[-1] == SCOUT_ITERATIONS
    assert_array_equal(confidence, first)


def test_scouting_builds_read_a_sample_that_stands_for_all_unlabeled_samples():
    first = np.full(10, 0.3)
    probability = np.linspace(0.05, 0.95, 10)
    reached = np.ones(10, dtype=bool)
    unlabeled = np.arange(10)
    scout_rows = np.array([1, 4, 6, 8, 9])
    # Each build's known-class confidence is the label probability itself, so every blend is that probability
    # whatever the known-class weight. Of the five rows read, 1 and 4 are below 0.5.
    calls = []

    def build_classes(identified, represented, max_iter, rows):
        calls.append((identified.tolist(), represented, max_iter, None if rows is None else rows.tolist()))
        return (probability if rows is None else probability[rows]), 3

    confidence, known, n_provisional = refined_confidence(first, np.array([0, 1, 2, 3]), probability, reached, None,
                                                          unlabeled, 3, build_classes, scout_rows)
    # 2 of 5 rows read stand for 4 of 10 unlabeled samples; the last build reads every row.
    assert calls == [([0, 1, 2, 3], None, SCOUT_ITERATIONS, [1, 4, 6, 8, 9]),
                     ([1, 4], 4, SCOUT_ITERATIONS, [1, 4, 6, 8, 9]),
                     ([1, 4], 4, FULL_ITERATIONS, None)]
    assert_array_equal(known, probability)
    assert n_provisional == 3
    # The final blend reads all unlabeled samples: the probability again.
    assert_allclose(confidence, probability, rtol=0, atol=1e-15)


def test_scouting_rows_are_a_sorted_sample_only_when_there_are_many(monkeypatch):
    import fastprop.novelty

    unlabeled = np.arange(3, 60, 2)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert scouting_rows(unlabeled, 3, rng) is unlabeled  # 29 <= SCOUT_FROM: all, nothing drawn
    monkeypatch.setattr(fastprop.novelty, "SCOUT_ROWS", 10)
    assert scouting_rows(unlabeled, 3, rng) is unlabeled  # still 29 <= SCOUT_FROM
    monkeypatch.setattr(fastprop.novelty, "SCOUT_FROM", 28)
    assert scouting_rows(unlabeled, 1, rng) is unlabeled  # no scouting build
    assert rng.bit_generator.state == state
    sample = scouting_rows(unlabeled, 3, rng)
    assert sample.size == 10 and np.all(np.diff(sample) > 0) and np.all(np.isin(sample, unlabeled))
    assert_array_equal(sample, scouting_rows(unlabeled, 3, np.random.default_rng(0)))
    monkeypatch.setattr(fastprop.novelty, "SCOUT_FROM", 5)
    monkeypatch.setattr(fastprop.novelty, "SCOUT_ROWS", 40)  # a sample larger than all of them: all
    assert scouting_rows(unlabeled, 3, rng) is unlabeled
    assert SCOUT_FROM >= 20_000  # the real sets' tasks (<= 13k unlabeled samples) are never sampled
    assert SCOUT_FROM >= SCOUT_ROWS


def test_known_class_confidence_of_some_rows_is_bit_for_bit_that_of_all_rows():
    X, y, truth = clusters()
    walk = RandomWalk(build_knn_graph(X, 8, method="exact"))
    rng = np.random.default_rng(3)
    coef, intercept = rng.normal(size=(8, COLUMN_BLOCK + 3)), rng.normal(size=COLUMN_BLOCK + 3)
    rows = np.array([200, 3, 150, 3, 77])
    every = known_class_confidence(FeatureRows(walk, X, None), coef, intercept, 2, 2)
    assert_array_equal(known_class_confidence(FeatureRows(walk, X, None), coef, intercept, 2, 2, rows), every[rows])
    # ... and so is provisional_class_confidence's, for the same draws; `represented` sets how many classes.
    identified = np.flatnonzero(truth == -1)[::4]

    def build(**kwargs):  # a fresh FeatureRows and the same draws for each build
        return provisional_class_confidence(FeatureRows(walk, X, None), y, 2, identified, depth=2, l2=1e-4,
                                            rng=np.random.default_rng(0), **kwargs)

    full, n_full = build()
    some, n_some = build(rows=rows)
    assert_array_equal(some, full[rows]) and n_some == n_full
    _, n_more = build(represented=4 * identified.size)
    assert n_full == n_provisional_classes(identified.size, 4, y.size)
    assert n_more == n_provisional_classes(4 * identified.size, 4, y.size) > n_full


@pytest.mark.parametrize(("setting", "with_validation", "builds"),
                         [("auto", False, AUTO_ROUNDS), ("auto", True, 1), (0.8, False, 1)])
def test_only_auto_without_validation_builds_the_provisional_classes_again(monkeypatch, setting, with_validation,
                                                                           builds):
    import fastprop.refinement as refinement

    X, y, truth = clusters(n_per=80)
    identified = []

    def recording(*args, **kwargs):
        identified.append(args[3])
        return provisional_class_confidence(*args, **kwargs)

    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    validation = np.sort(np.random.default_rng(2).choice(np.flatnonzero(y < 0), size=20, replace=False))
    model = FastProp(n_neighbors=10, random_state=0, outlier_threshold=setting).fit(
        X, y, validation=(validation, truth[validation]) if with_validation else None)
    assert len(identified) == builds
    assert model.n_provisional_classes_ > 0
    if builds > 1:  # each build after the first gets what the fitted "auto" rejects (here as many)
        assert np.count_nonzero((model.transduction_ == -1) & (y < 0)) == len(identified[-1])


@pytest.mark.parametrize(("setting", "with_validation", "pseudo_labels", "passed_on"),
                         [("auto", False, 3000, "self-training's"), ("auto", False, 0, "none made"),
                          ("auto", True, 3000, "self-training's"), (0.8, False, 3000, "self-training's")])
def test_the_known_classes_are_trained_on_pseudo_labels_too_with_or_without_validation(
        monkeypatch, setting, with_validation, pseudo_labels, passed_on):
    import fastprop.refinement as refinement
    import fastprop.propagation as propagation

    X, y, truth = clusters(n_per=80)
    chosen, passed = [], []
    choose = propagation.most_confident_per_class

    def choosing(*args):
        chosen.append(choose(*args))
        return chosen[-1]

    def recording(*args, **kwargs):
        passed.append(kwargs["pseudo_labels"])
        return provisional_class_confidence(*args, **kwargs)

    monkeypatch.setattr(propagation, "most_confident_per_class", choosing)
    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    validation = np.sort(np.random.default_rng(2).choice(np.flatnonzero(y < 0), size=20, replace=False))
    FastProp(n_neighbors=10, random_state=0, outlier_threshold=setting, pseudo_labels=pseudo_labels).fit(
        X, y, validation=(validation, truth[validation]) if with_validation else None)
    assert passed and len(chosen) == (pseudo_labels > 0)
    for labels in passed:
        if passed_on == "none made":
            assert labels[0].size == labels[1].size == 0
        else:  # self-training's labels, by class, each with the class the first predictor gave it
            assert_array_equal(labels[0], chosen[0])
            assert np.all(y[labels[0]] < 0) and np.all(np.diff(labels[1]) >= 0)
            for k in (0, 1):  # the most confident of each class, those a top-up takes first, are right
                best = labels[0][labels[1] == k][:TOP_UP_ROWS]
                assert best.size == TOP_UP_ROWS and np.all(truth[best] == k)


def test_known_top_counts_two_classes_with_validation_and_more_for_auto_alone_the_more_classes():
    from fastprop.threshold import MANY_CLASSES

    assert (KNOWN_TOP, AUTO_TOP_MOST) == (2, 3) and MANY_CLASSES < MOST_CLASSES
    for n_classes in (2, MANY_CLASSES - 1, MANY_CLASSES, MOST_CLASSES - 1, MOST_CLASSES, 500):
        assert known_top(True, False, n_classes) == KNOWN_TOP
        assert known_top(False, False, n_classes) == 1  # a numeric threshold or a given share
        expected = AUTO_TOP_MOST if n_classes >= MOST_CLASSES else KNOWN_TOP if n_classes >= MANY_CLASSES else 1
        assert known_top(False, True, n_classes) == expected


@pytest.mark.parametrize(("share", "most", "expected"),
                         [(None, False, KNOWN_TOP), (None, True, AUTO_TOP_MOST), (0.3, True, 1)])
def test_auto_on_many_classes_passes_more_known_classes_to_the_provisional_step(monkeypatch, share, most, expected):
    import fastprop.refinement as refinement
    import fastprop.novelty

    X, y, _ = clusters(n_per=80)
    monkeypatch.setattr(fastprop.novelty, "MANY_CLASSES", 2)  # these two classes count as many
    if most:
        monkeypatch.setattr(fastprop.novelty, "MOST_CLASSES", 2)  # and as the most
    seen = []

    def recording(*args, **kwargs):
        seen.append(kwargs["n_top"])
        return provisional_class_confidence(*args, **kwargs)

    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    FastProp(n_neighbors=10, random_state=0, outlier_share=share).fit(X, y)
    assert seen and set(seen) == {expected}


@pytest.mark.parametrize(("setting", "with_validation", "share"),
                         [("auto", False, None), ("auto", False, 0.3), ("auto", True, None), (0.8, False, None)])
def test_only_auto_without_validation_or_share_fits_its_builds_again(monkeypatch, setting, with_validation, share):
    import fastprop.refinement as refinement

    X, y, truth = clusters(n_per=80)
    calls = []

    def recording(*args, **kwargs):
        calls.append((kwargs["rows"], kwargs["refit_candidates"]))
        # with a validation set the two largest known-class probabilities make the confidence; two classes here
        assert kwargs["n_top"] == (KNOWN_TOP if with_validation else 1)
        return provisional_class_confidence(*args, **kwargs)

    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    validation = np.sort(np.random.default_rng(2).choice(np.flatnonzero(y < 0), size=20, replace=False))
    FastProp(n_neighbors=10, random_state=0, outlier_threshold=setting, outlier_share=share).fit(
        X, y, validation=(validation, truth[validation]) if with_validation else None)
    assert calls
    refit = setting == "auto" and not with_validation and share is None
    assert len(calls) == (AUTO_ROUNDS if setting == "auto" and not with_validation else 1)
    assert all(rows is not None for rows, _ in calls[:-1]) and calls[-1][0] is None  # the scouts read rows
    for _, refit_candidates in calls:  # scouting builds and the last alike
        if refit:  # every unlabeled sample (there are few)
            assert_array_equal(refit_candidates, np.flatnonzero(y < 0))
        else:
            assert refit_candidates is None


def test_with_many_unlabeled_samples_the_scouting_builds_read_a_sample(monkeypatch):
    import fastprop.refinement as refinement
    import fastprop.novelty

    X, y, truth = clusters(n_per=80)
    calls = []

    def recording(*args, **kwargs):
        calls.append((args[3].size, kwargs["represented"], kwargs["rows"]))
        return provisional_class_confidence(*args, **kwargs)

    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    monkeypatch.setattr(fastprop.novelty, "SCOUT_ROWS", 100)
    monkeypatch.setattr(fastprop.novelty, "SCOUT_FROM", 100)
    models = [FastProp(n_neighbors=10, random_state=0).fit(X, y) for _ in range(2)]
    assert len(calls) == 2 * AUTO_ROUNDS
    scouts, last = calls[: AUTO_ROUNDS - 1], calls[AUTO_ROUNDS - 1]
    unlabeled = np.flatnonzero(y < 0)
    for _, _, rows in scouts:
        assert rows.size == 100 and np.all(np.isin(rows, unlabeled))
    assert last[2] is None
    # the builds after the first get the sample's samples below the cut, standing for 316 / 100 as many
    assert last[1] == round(last[0] * unlabeled.size / 100) > last[0]
    assert_array_equal(models[0].confidence_, models[1].confidence_)  # the same draw for the same random_state
    assert models[0].n_provisional_classes_ > 0
    monkeypatch.setattr(fastprop.novelty, "SCOUT_FROM", y.size)  # every unlabeled sample read
    every = FastProp(n_neighbors=10, random_state=0).fit(X, y)
    # both claim one unseeded cluster of two here and keep the classes (0.506 / 0.531 of the outliers rejected;
    # 0.500 / 0.513 when self-training took every unlabeled sample)
    for model in (models[0], every):
        assert abs(np.mean(model.transduction_[truth < 0] == -1) - 0.5) < 0.05
        assert np.mean(model.transduction_[truth >= 0] == truth[truth >= 0]) > 0.99


def test_with_a_validation_set_and_no_provisional_class_the_confidence_is_the_label_probability(monkeypatch):
    import fastprop.refinement as refinement

    X, y, truth = clusters(n_per=80)
    monkeypatch.setattr(refinement, "provisional_class_confidence", lambda *args, **kwargs: (None, 0))
    validation = np.sort(np.random.default_rng(2).choice(np.flatnonzero(y < 0), size=20, replace=False))
    model = FastProp(n_neighbors=10, random_state=0, calibrate_confidence=False).fit(
        X, y, validation=(validation, truth[validation]))
    assert model.n_provisional_classes_ == 0
    unlabeled = y < 0
    assert np.all(model.view_count_[unlabeled] > 0)  # every sample reached: the label probability everywhere
    assert_array_equal(model.confidence_[unlabeled], model.label_distributions_[unlabeled].max(axis=1))
    assert np.all(model.confidence_[~unlabeled] == 1.0)
    paper = FastProp(n_neighbors=10, random_state=0, provisional_classes=False, calibrate_confidence=False,
                     confidence="both").fit(X, y, validation=(validation, truth[validation]))
    assert_allclose(paper.confidence_[unlabeled],
                    0.5 * (paper.multiview_confidence_ + paper.confnet_confidence_)[unlabeled], rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", [0, 2])
def test_auto_reads_the_outlier_share_off_the_provisional_classes(monkeypatch, seed):
    """A hand-built mixture: two seeded clusters and an unseeded one, a third of the unlabeled samples."""
    import fastprop.refinement as refinement

    X, y, truth = clusters(seed=seed, n_per=80, n_unseeded=1)
    found = {}

    def recording(*args, **kwargs):
        found["known"], n_provisional = provisional_class_confidence(*args, **kwargs)
        return found["known"], n_provisional

    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y)  # no validation set: "auto"
    unlabeled = np.flatnonzero(y < 0)
    assert model.n_provisional_classes_ == 2  # the last build: all of the unseeded cluster, for 4 seeds in 240
    assert abs(claimed_share(found["known"], unlabeled) - np.mean(truth[unlabeled] < 0)) < 0.01
    assert abs(np.mean(model.transduction_[unlabeled] == -1) - np.mean(truth[unlabeled] < 0)) < 0.01
    assert np.mean(model.transduction_[truth < 0] == -1) > 0.98
    assert np.mean(model.transduction_[truth >= 0] == truth[truth >= 0]) > 0.99


def test_auto_without_provisional_classes_is_half_otsu():
    from fastprop.threshold import automatic_threshold

    X, y, truth = clusters(n_per=80, n_unseeded=0)  # no outlier: the first threshold earns no class
    model = FastProp(n_neighbors=10, random_state=0, confidence="both").fit(X, y)
    assert model.n_provisional_classes_ == 0
    assert model.outlier_threshold_ == automatic_threshold(model.confidence_[y < 0]) < 0.5
    assert np.mean(model.transduction_[y < 0] == -1) < 0.01
    default = FastProp(n_neighbors=10, random_state=0).fit(X, y)  # the global confidence: none below 0.9 here
    assert default.n_provisional_classes_ == 0 and not np.any(default.transduction_[y < 0] == -1)


def test_no_rejection_means_the_paper_path():
    X, y, _ = clusters()
    with_classes = FastProp(n_neighbors=10, random_state=0, outlier_threshold=None).fit(X, y)
    without = FastProp(n_neighbors=10, random_state=0, outlier_threshold=None, provisional_classes=False).fit(X, y)
    assert with_classes.n_provisional_classes_ == 0
    assert_array_equal(with_classes.confidence_, without.confidence_)


def test_provisional_classes_and_labels_are_validated():
    X, y, _ = clusters()
    with pytest.raises(ValueError, match="provisional_classes must be True or False, got 'yes'"):
        FastProp(provisional_classes="yes").fit(X, y)
    with pytest.raises(ValueError, match="labels.*'patches'"):
        FastProp(labels="patches").fit(X, y)


def test_graph_labels_are_the_predictor_on_the_whole_graph():
    X, y, _ = clusters(n_per=250)  # 1,000 samples: patches of 500 are viable, so the views differ
    graph = build_knn_graph(X, 8, method="exact")
    model = FastProp(random_state=0, outlier_threshold=None, pseudo_labels=0).fit(X, y, graph=graph)
    assert model.n_iter_ > 0
    dense = graph.toarray().astype(np.float64) + np.eye(y.size)
    walk2 = np.linalg.matrix_power(dense / dense.sum(axis=1, keepdims=True), 2)
    smoothed = walk2 @ unit(X.astype(np.float64))
    seeds = np.flatnonzero(y >= 0)
    coef, intercept = fit_softmax_regression(smoothed[seeds], np.eye(2)[y[seeds]], l2=model.predictor_l2_)
    expected = softmax(smoothed @ coef + intercept, axis=1)
    unlabeled = y < 0
    assert_allclose(model.label_distributions_[unlabeled], expected[unlabeled], atol=2e-3)
    views = FastProp(random_state=0, outlier_threshold=None, labels="views", pseudo_labels=0).fit(X, y, graph=graph)
    assert np.abs(views.label_distributions_[unlabeled] - expected[unlabeled]).max() > 2e-3
    assert_array_equal(views.confidence_, model.confidence_)  # the labels' source does not touch the confidence


def test_known_outliers_among_the_first_samples_are_counted_once(monkeypatch):
    """``outliers=`` samples are rejected at first too: the first build counts each of them once."""
    import fastprop.refinement as refinement

    X, y, truth = clusters(n_per=80)
    for cls in (0, 1):  # 20 seeds a class: the identified samples, not the known outliers, set the count
        y[np.flatnonzero(truth == cls)[:20]] = cls
    n_seeds = int(np.sum(y >= 0))
    counts = []

    def recording(*args, **kwargs):
        confidence, n_provisional = provisional_class_confidence(*args, **kwargs)
        known = kwargs["known_outliers"]
        if not counts:  # the first build: its samples include the known outliers
            assert np.all(np.isin(known, args[3]))
            once = np.setdiff1d(args[3], known).size + known.size
            counts.append((n_provisional, max(n_provisional_classes(once, n_seeds, y.size), known.size),
                           max(n_provisional_classes(once + known.size, n_seeds, y.size), known.size)))
        return confidence, n_provisional

    monkeypatch.setattr(refinement, "provisional_class_confidence", recording)
    FastProp(n_neighbors=10, random_state=0, confidence="both").fit(X, y, outliers=np.flatnonzero(truth < 0)[:3])
    n_provisional, counted_once, counted_twice = counts[0]
    assert counted_once != counted_twice  # the case tells the two apart
    assert n_provisional == counted_once


def test_from_runner_up_from_classes_up_auto_s_confidence_counts_the_runner_up(monkeypatch):
    import fastprop.refinement

    rng = np.random.default_rng(0)
    n_classes = RUNNER_UP_FROM + 4
    centres = rng.normal(size=(n_classes + 4, 16)) * 1.4  # four unseeded clusters: outliers
    truth = np.repeat(np.arange(n_classes + 4), 25)
    X = (centres[truth] + rng.normal(size=(truth.size, 16))).astype(np.float32)
    y = np.full(truth.size, -1)
    for label in range(n_classes):
        y[np.flatnonzero(truth == label)[:2]] = label
    graph = build_knn_graph(X, 10, random_state=0)
    model = FastProp(random_state=0).fit(X, y, graph=graph)
    monkeypatch.setattr(fastprop.refinement, "RUNNER_UP_FROM", n_classes + 1)
    without = FastProp(random_state=0).fit(X, y, graph=graph)
    assert model.n_provisional_classes_ == without.n_provisional_classes_ > 0
    unlabeled = np.flatnonzero((y < 0) & (model.view_count_ > 0))
    gain = model.confidence_[unlabeled] - without.confidence_[unlabeled]
    assert gain.min() >= 0 and gain.max() > 0.01  # the same builds, the runner-up added where w < 1
    assert_array_equal(model.label_distributions_, without.label_distributions_)
    rejected, rejected_without = model.transduction_ == -1, without.transduction_ == -1
    assert np.all(rejected <= rejected_without) and rejected.sum() < rejected_without.sum()
