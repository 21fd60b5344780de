"""Identical rows in the hnsw search: the groups, the lists spread to copies, new points among copies."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fastprop.copies as copies_module
import fastprop.prediction as prediction
from fastprop import FastProp, knn_search
from fastprop.copies import copy_groups


def rows_with_copies(seed=0, n_distinct=300, dim=8):
    """Distinct rows, some of them repeated 2-40 times, shuffled."""
    rng = np.random.default_rng(seed)
    distinct = rng.normal(size=(n_distinct, dim)).astype(np.float32)
    repeats = np.ones(n_distinct, dtype=np.int64)
    repeats[:30] = rng.integers(2, 41, size=30)
    X = np.repeat(distinct, repeats, axis=0)
    return X[rng.permutation(len(X))]


def reference_groups(X):
    """Each row's group by sorting rows, numbered by first row."""
    _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse.ravel()], np.sort(first)


def test_groups_match_a_sort_of_the_rows():
    X = rows_with_copies()
    found = copy_groups(X)
    group, representatives = reference_groups(X)
    assert_array_equal(found.group, group)
    assert_array_equal(found.representatives, representatives)
    for g in range(representatives.size):
        members = found.group_rows[found.group_start[g] : found.group_start[g + 1]]
        assert_array_equal(members, np.flatnonzero(group == g))  # increasing rows
    assert copy_groups(np.unique(X, axis=0)) is None  # no two rows identical
    # -0.0 and 0.0 are other bits: not copies
    assert copy_groups(np.array([[0.0, 1.0], [-0.0, 1.0]], dtype=np.float32)) is None


def test_rows_that_share_a_hash_without_being_copies_are_told_apart(monkeypatch):
    def one_hash(words, hashes):
        hashes[:] = 7

    monkeypatch.setattr(copies_module, "row_hashes", one_hash)
    X = rows_with_copies(seed=1)
    found = copy_groups(X)
    group, representatives = reference_groups(X)
    assert_array_equal(found.group, group)
    assert_array_equal(found.representatives, representatives)
    assert copy_groups(np.unique(X, axis=0)) is None


def test_the_hnsw_search_lists_copies_first_as_the_exact_search_does():
    X = rows_with_copies(seed=2)
    group, _ = reference_groups(X)
    size = np.bincount(group)[group]
    exact, exact_similarities = knn_search(X, 10, method="exact")
    approximate, similarities = knn_search(X, 10, method="hnsw", random_state=0)
    for row in range(len(X)):
        n_copies = min(size[row] - 1, 10)
        assert_array_equal(approximate[row, :n_copies], exact[row, :n_copies])  # the same copies, in row order
        assert np.all(similarities[row, :n_copies] == 1.0)
        assert not np.isin(group[approximate[row, n_copies:]], group[row]).any()
    assert np.mean(approximate == exact) > 0.95
    same = approximate == exact
    assert np.abs(similarities[same] - exact_similarities[same]).max() < 1e-5


def test_a_group_of_copies_hnswlib_cut_off_from_itself_lists_its_copies():
    """Fuzzing round 10: four groups of 1,000 copies among 6,000 rows; with this seed, hnswlib linked
    every copy of one group to far points (similarity 0.35) and to none of its copies."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 8)).astype(np.float32)
    X = np.vstack([np.repeat(centres, 1000, axis=0), rng.normal(size=(2000, 8)).astype(np.float32)])
    indices, similarities = knn_search(X, 30, method="hnsw", random_state=6)
    for centre in range(4):
        rows = slice(1000 * centre, 1000 * (centre + 1))
        assert np.all(indices[rows] // 1000 == centre) and np.all(similarities[rows] == 1.0)


@pytest.mark.parametrize("n_neighbors", [3, 10])
def test_new_points_among_copies_get_the_copies_as_neighbours(n_neighbors, monkeypatch):
    X = rows_with_copies(seed=3, dim=16)
    group, _ = reference_groups(X)
    rng = np.random.default_rng(3)
    y = np.full(len(X), -1)
    y[rng.choice(len(X), 40, replace=False)] = rng.integers(0, 3, size=40)
    model = FastProp(n_neighbors=n_neighbors, random_state=0).fit(X, y)
    queries = np.vstack([X[:50], rng.normal(size=(20, 16)).astype(np.float32)])
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    predictor = model.predictor_
    unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    approximate, similarities = predictor._approximate_neighbours(unit)
    assert predictor.copies is not None and predictor.index.get_current_count() == predictor.copies.n_groups
    assert not hasattr(predictor.copies, "group")  # the rows' groups are not needed to list a group's rows
    exact, _ = predictor._exact_neighbours(unit)
    size = np.bincount(group)[group]
    for row in range(50):  # a copy of a fitted row: that row's group first, in row order
        n_copies = min(size[row], n_neighbors)
        assert_array_equal(approximate[row, :n_copies], exact[row, :n_copies])
        assert np.all(group[approximate[row, :n_copies]] == group[row])
    assert np.mean(approximate == exact) > 0.9


@pytest.mark.parametrize("n_groups", [1, 4])
def test_fewer_groups_than_neighbours(n_groups):
    """Every other group is listed; all rows identical: every row lists the others."""
    rng = np.random.default_rng(4)
    X = np.repeat(rng.normal(size=(n_groups, 8)).astype(np.float32), 30, axis=0)
    exact, _ = knn_search(X, 20, method="exact")
    approximate, similarities = knn_search(X, 20, method="hnsw", random_state=0)
    group = np.arange(len(X)) // 30
    for row in range(len(X)):
        n_copies = min(29, 20)
        assert_array_equal(approximate[row, :n_copies], exact[row, :n_copies])
        assert np.all(similarities[row, :n_copies] == 1.0)
        assert row not in approximate[row] and len(set(approximate[row])) == 20
        assert np.all(group[approximate[row, n_copies:]] != group[row])


def test_new_points_when_hnswlib_fails_on_rows_among_copies(monkeypatch):
    """One feature rounded to 0.01 (few distinct rows, many copies) and K = n - 1: hnswlib fails on rows,
    which get the exact search's neighbours; the rest are spread from groups (a review: the failed rows'
    unset lists were spread, reading memory out of bounds). Predictions equal the exact-search model's."""
    rng = np.random.default_rng(0)
    X = np.round(np.vstack([rng.normal(c, 0.3, (100, 1)) for c in (-1.0, 1.0)]), 2).astype(np.float32)
    y = np.full(200, -1)
    y[[0, 100]] = [0, 1]
    exact = FastProp(n_neighbors=199, random_state=0).fit(X, y)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 0)
    approximate = FastProp(n_neighbors=199, random_state=0).fit(X, y)
    queries = np.vstack([X[:20], np.array([[0.5], [-2.0]], dtype=np.float32)])
    assert_array_equal(approximate.predict_proba(queries), exact.predict_proba(queries))
    assert_array_equal(approximate.predict_confidence(queries), exact.predict_confidence(queries))
    assert approximate.predictor_.copies is not None
    one_at_a_time = np.vstack([approximate.predict_proba(queries[row : row + 1]) for row in range(len(queries))])
    assert_array_equal(one_at_a_time, approximate.predict_proba(queries))


def model_predicting_by_hnsw(seed, monkeypatch):
    """A model of rows with copies, three seeds, whose new points go through the hnsw index."""
    X = rows_with_copies(seed=seed, dim=16)
    y = np.full(len(X), -1)
    y[:3] = [0, 1, 2]
    model = FastProp(n_neighbors=5, random_state=0).fit(X, y)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    return X, model


def test_a_predictor_pickled_before_copies_existed_still_predicts(monkeypatch):
    """Such a pickle has an index of every row and no ``copies`` attribute (a review: AttributeError)."""
    X, model = model_predicting_by_hnsw(5, monkeypatch)
    monkeypatch.setattr(prediction, "copy_groups", lambda features: None)  # the index the old code built
    before = model.predict_proba(X[:20])
    del model.predictor_.__dict__["copies"]
    restored = pickle.loads(pickle.dumps(model))
    assert "copies" not in restored.predictor_.__dict__
    assert_array_equal(restored.predict_proba(X[:20]), before)


def test_a_predictor_holding_every_rows_group_still_predicts(monkeypatch):
    """Pickles of the version that kept the whole :class:`CopyGroups` predict as the group lists do."""
    X, model = model_predicting_by_hnsw(6, monkeypatch)
    before = model.predict_proba(X[:20])
    model.predictor_.copies = copy_groups(model.predictor_.features)  # the older predictor's state
    restored = pickle.loads(pickle.dumps(model))
    assert_array_equal(restored.predict_proba(X[:20]), before)


def test_new_points_among_fewer_groups_than_neighbours_need_no_exact_search(monkeypatch):
    rng = np.random.default_rng(6)
    X = np.repeat(rng.normal(size=(4, 8)).astype(np.float32), 30, axis=0)
    y = np.full(len(X), -1)
    y[[0, 30, 60, 90]] = [0, 1, 2, 3]
    model = FastProp(n_neighbors=20, random_state=0).fit(X, y)
    exact = model.predict_proba(X[::7])
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 10)
    searched = []
    monkeypatch.setattr(prediction.NeighbourhoodPredictor, "_exact_neighbours",
                        lambda self, unit: searched.append(1) or (_ for _ in ()).throw(AssertionError("exact search")))
    # 4 groups asked for, not 20 rows (the copies' similarity is 1 exactly, the exact search's float32 product
    # may be an ulp off it)
    assert_allclose(model.predict_proba(X[::7]), exact, rtol=1e-6, atol=1e-12)
    assert not searched
