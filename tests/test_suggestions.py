"""suggest_annotations and known outliers: the ranking rules by hand, and outliers that change the fit."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from fastprop import FastProp
from fastprop.novelty import provisional_class_confidence


def data(seed=0):
    rng = np.random.default_rng(seed)
    dim = 10
    X = np.vstack([4.0 * np.eye(dim)[c] + rng.normal(size=(60, dim)) for c in range(3)]
                  + [4.0 * np.eye(dim)[c] + rng.normal(size=(40, dim)) for c in (6, 7)])
    truth = np.r_[np.repeat(np.arange(3), 60), np.full(80, -1)]
    y = np.full(truth.size, -1)
    y[[0, 1, 60, 61, 120, 121]] = [0, 0, 1, 1, 2, 2]
    return X.astype(np.float32), y, truth


@pytest.fixture(scope="module")
def fitted():
    X, y, truth = data()
    return X, y, truth, FastProp(n_neighbors=8, random_state=0).fit(X, y)


@pytest.mark.parametrize("strategy", ["boundary", "lowest"])
def test_suggestions_follow_the_ranking_and_skip_neighbours(fitted, strategy):
    X, y, _, model = fitted
    chosen = model.suggest_annotations(12, strategy=strategy)
    unlabeled = np.flatnonzero(y < 0)
    key = (np.abs(model.confidence_ - model.outlier_threshold_) if strategy == "boundary" else model.confidence_)
    ranked = unlabeled[np.argsort(key[unlabeled], kind="stable")]
    dense = model.graph_.toarray() > 0
    expected = []
    for sample in ranked:  # the rule, by hand
        if not any(dense[sample, other] for other in expected):
            expected.append(sample)
        if len(expected) == 12:
            break
    assert_array_equal(chosen, expected)
    assert not np.isin(chosen, np.flatnonzero(y >= 0)).any()


def test_suggestions_fall_back_to_neighbours_and_refuse_too_many(fitted):
    X, y, _, model = fitted
    n_unlabeled = int((y < 0).sum())
    everything = model.suggest_annotations(n_unlabeled)
    assert np.unique(everything).size == n_unlabeled
    with pytest.raises(ValueError, match="n=255 is more than the 254 samples that can be suggested"):
        model.suggest_annotations(n_unlabeled + 1)
    with pytest.raises(ValueError, match="strategy"):
        model.suggest_annotations(3, strategy="entropy")


def test_known_outliers_are_rejected_seed_provisional_classes_and_are_never_suggested(fitted):
    X, y, truth, model = fitted
    known = np.array([190, 205, 230, 245])
    refit = FastProp(n_neighbors=8, random_state=0).fit(X, y, outliers=known)
    assert (refit.transduction_[known] == -1).all() and (refit.confidence_[known] == 0).all()
    assert refit.n_provisional_classes_ >= known.size
    assert_array_equal(refit.known_outliers_, known)
    assert not np.isin(refit.suggest_annotations(20), known).any()
    # they make the outlier groups less claimable by the known classes: higher AUROC, not lower
    from fastprop.evaluation.protocol import outlier_auroc

    unlabeled = np.setdiff1d(np.flatnonzero(y < 0), known)
    assert (outlier_auroc(refit.confidence_[unlabeled], truth[unlabeled])
            >= outlier_auroc(model.confidence_[unlabeled], truth[unlabeled]))


def test_known_outliers_are_the_first_provisional_seeds():
    """With as many provisional classes as known outliers, the softmax is trained on the seeds and them."""
    from fastprop.adjacency import RandomWalk
    from fastprop.linear import fit_softmax_regression
    from fastprop.column_scores import known_class_confidence
    from fastprop.feature_rows import FeatureRows

    X, y, _ = data()
    walk = RandomWalk(FastProp(n_neighbors=8).fit(X, y).graph_)
    row_scale = 1 / np.linalg.norm(X.astype(np.float64), axis=1)
    known = np.array([200, 250])
    confidence, n = provisional_class_confidence(FeatureRows(walk, X, row_scale), y, 3, np.empty(0, dtype=np.int64),
                                                 depth=2, l2=3e-5, rng=np.random.default_rng(0), known_outliers=known)
    assert n == 2
    seeds = np.flatnonzero(y >= 0)
    rows = walk.smooth(X, np.r_[seeds, known], 2, row_scale=row_scale)
    coef, intercept = fit_softmax_regression(rows, np.eye(5)[np.r_[y[seeds], 3, 4]], l2=3e-5,
                                             float32_products=True)  # as FastProp fits it
    expected = known_class_confidence(FeatureRows(walk, X, row_scale), coef, intercept, 3, 2)
    # float32 products round the rows' sums in the order of the rows, which farthest-first may change
    np.testing.assert_allclose(confidence, expected, rtol=0, atol=1e-6)


def test_bad_outliers_say_what_is_wrong(fitted):
    X, y, _, _ = fitted
    with pytest.raises(ValueError, match="are labeled seeds"):
        FastProp().fit(X, y, outliers=[0])
    with pytest.raises(ValueError, match="outliers must be in"):
        FastProp().fit(X, y, outliers=[10_000])
    with pytest.raises(ValueError, match="also validation samples"):
        FastProp().fit(X, y, outliers=[200], validation=([200], [-1]))
    with pytest.raises(ValueError, match="outliers must be distinct"):
        FastProp().fit(X, y, outliers=[200, 200])


@pytest.mark.parametrize("strategy", ["boundary", "lowest"])
def test_validation_samples_are_never_suggested(strategy):
    X, y, truth = data()
    unlabeled = np.flatnonzero(y < 0)
    validation = unlabeled[::9]
    model = FastProp(n_neighbors=8, random_state=0).fit(X, y, validation=(validation, truth[validation]))
    candidates = np.setdiff1d(unlabeled, validation)
    key = (np.abs(model.confidence_ - model.outlier_threshold_) if strategy == "boundary" else model.confidence_)
    ranked = candidates[np.argsort(key[candidates], kind="stable")]
    dense = model.graph_.toarray() > 0
    expected = []
    for sample in ranked:  # the rule by hand, over the samples whose truth is not known
        if not any(dense[sample, other] for other in expected):
            expected.append(sample)
        if len(expected) == 10:
            break
    assert_array_equal(model.suggest_annotations(10, strategy=strategy), expected)
    with pytest.raises(ValueError, match=f"more than the {candidates.size} samples .* not in the validation set"):
        model.suggest_annotations(candidates.size + 1, strategy=strategy)
