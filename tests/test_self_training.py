"""Self-training (``pseudo_labels``): the pseudo-labels chosen and the refitted predictor, against slow references."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

import fastprop.propagation as propagation
from fastprop import FastProp
from fastprop.linear import fit_softmax_regression
from fastprop.self_training import (AUTO_CLASS_SHARE, AUTO_MOST, AUTO_PER_CLASS, AUTO_TOTAL, most_confident_per_class,
                                    pseudo_label_total)
from reference import dense_patch_operator


def slow_most_confident(predicted, confidence, candidates, per_class, tie_rank):
    chosen = []
    for k in sorted(set(predicted[candidates].tolist())):
        members = [v for v in candidates if predicted[v] == k]
        members.sort(key=lambda v: (-confidence[v], tie_rank[v]))
        chosen.extend(members[:per_class])
    return np.array(chosen, dtype=np.int64)


@pytest.mark.parametrize("per_class", [0, 1, 3, 50])
def test_the_most_confident_of_each_class_match_a_slow_sort(per_class):
    rng = np.random.default_rng(per_class)
    predicted = rng.integers(0, 4, 60)
    confidence = rng.choice([0.2, 0.5, 0.9, 1.0], 60)  # many ties, broken by tie_rank
    tie_rank = rng.permutation(60)
    candidates = np.sort(rng.choice(60, 40, replace=False))
    got = most_confident_per_class(predicted, confidence, candidates, per_class, tie_rank)
    assert_array_equal(got, slow_most_confident(predicted, confidence, candidates, per_class, tie_rank))
    assert most_confident_per_class(predicted, confidence, candidates[:0], 5, tie_rank).size == 0


@pytest.mark.parametrize(("n_classes", "expected"), [(2, 3000), (30, 3000), (31, 3100), (50, 5000), (77, 7700),
                                                     (100, 10_000), (400, 10_000)])
def test_auto_takes_3000_pseudo_labels_or_100_a_class_at_most_10000(n_classes, expected):
    assert (AUTO_TOTAL, AUTO_PER_CLASS, AUTO_MOST) == (3000, 100, 10_000)  # the table above is for these
    assert pseudo_label_total("auto", n_classes, 10**6) == expected
    assert pseudo_label_total(1234, n_classes, 10) == 1234  # a number is the total itself
    assert pseudo_label_total(0, n_classes, 10**6) == 0


@pytest.mark.parametrize(("n_classes", "n_candidates", "expected"), [
    (150, 4_800, 3_200),  # small classes: 2/3 of the candidates, not 10,000 (every sample)
    (30, 4_500, 3_000),  # 150 a class: 3000 is below 2/3 of them
    (30, 4_499, 2_999),
    (77, 11_000, 7_333),
    (5, 0, 0),
])
def test_auto_takes_at_most_two_thirds_of_the_candidates(n_classes, n_candidates, expected):
    assert AUTO_CLASS_SHARE == pytest.approx(2 / 3)
    assert pseudo_label_total("auto", n_classes, n_candidates) == expected


def test_auto_passes_its_total_to_self_training(monkeypatch):
    totals = []
    original = propagation.pseudo_label_total

    def recording(setting, n_classes, n_candidates):
        totals.append((n_classes, original(setting, n_classes, n_candidates)))
        return totals[-1][1]

    monkeypatch.setattr(propagation, "pseudo_label_total", recording)
    rng = np.random.default_rng(0)
    n_classes = 40  # 100 a class is more than 3000, but 2/3 of the 200 unlabeled samples is less
    X = (3.0 * np.eye(n_classes)[np.repeat(np.arange(n_classes), 6)] + rng.normal(size=(6 * n_classes, n_classes)))
    y = np.full(X.shape[0], -1)
    y[::6] = np.arange(n_classes)
    FastProp(n_neighbors=5, random_state=0, outlier_threshold=None).fit(X.astype(np.float32), y)
    FastProp(n_neighbors=5, random_state=0, outlier_threshold=None, pseudo_labels=7).fit(X.astype(np.float32), y)
    assert totals == [(n_classes, 133), (n_classes, 7)]


def clusters(seed=0):
    rng = np.random.default_rng(seed)
    centres = 3.0 * np.eye(8)[:3]
    X = np.vstack([centres[c] + rng.normal(size=(70, 8)) for c in range(3)])
    y = np.full(210, -1)
    y[[0, 70, 140]] = [0, 1, 2]
    return X.astype(np.float32), y


def test_the_refit_is_softmax_regression_on_the_seeds_and_the_pseudo_labels(monkeypatch):
    monkeypatch.setattr(propagation, "REFIT_TOL", 1e-10)
    X, y = clusters()
    common = dict(n_neighbors=8, min_gain=30, max_patch_size=100, outlier_threshold=None, random_state=0)
    before = FastProp(pseudo_labels=0, **common).fit(X, y)
    after = FastProp(pseudo_labels=28, **common).fit(X, y)  # 10 a class: split evenly, rounded up
    # no provisional classes without a threshold: the confidence is the one the pseudo-labels were chosen by
    assert_array_equal(after.confidence_, before.confidence_)
    unlabeled = np.flatnonzero(y < 0)
    predicted = before.label_distributions_.argmax(axis=1)
    tie_rank = np.random.default_rng(0).permutation(X.shape[0])  # as fit draws it first
    chosen = slow_most_confident(predicted, before.confidence_, unlabeled, 10, tie_rank)
    assert chosen.size == 30
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    walk = dense_patch_operator(before.graph_.toarray(), np.arange(X.shape[0]))
    smoothed = walk @ walk @ unit.astype(np.float64)
    rows = np.r_[np.flatnonzero(y >= 0), chosen]
    targets = np.eye(3)[np.r_[y[y >= 0], predicted[chosen]]]
    coef, intercept = fit_softmax_regression(smoothed[rows], targets, l2=before.predictor_l2_, tol=1e-10)
    expected = softmax(smoothed @ coef + intercept, axis=1)
    assert_allclose(after.label_distributions_[unlabeled], expected[unlabeled], atol=1e-4)
    assert_allclose(after.predictor_.scorer.coef, coef, atol=1e-3)  # new points use the refitted predictor


def test_known_outliers_are_never_pseudo_labels(monkeypatch):
    seen = []

    def recording(predicted, confidence, candidates, per_class, tie_rank):
        seen.append(candidates)
        return most_confident_per_class(predicted, confidence, candidates, per_class, tie_rank)

    monkeypatch.setattr(propagation, "most_confident_per_class", recording)
    X, y = clusters()
    FastProp(n_neighbors=8, pseudo_labels=15, random_state=0).fit(X, y, outliers=[3, 80])
    assert len(seen) == 1 and not np.isin([3, 80], seen[0]).any() and np.isin([4, 81], seen[0]).all()


@pytest.mark.parametrize("params", [{"local_predictor": "gcn"}, {"labels": "views"}])
def test_pseudo_labels_apply_to_the_sgc_labels_of_the_whole_graph_only(params):
    X, y = clusters()
    common = dict(n_neighbors=8, random_state=0, **params)
    with_pseudo = FastProp(pseudo_labels=20, **common).fit(X, y)
    without = FastProp(pseudo_labels=0, **common).fit(X, y)
    assert_array_equal(with_pseudo.label_distributions_, without.label_distributions_)


@pytest.mark.parametrize("value, message", [(-1, "pseudo_labels=-1 is out of range"),
                                            (2.5, "pseudo_labels must be an integer")])
def test_bad_pseudo_labels(value, message):
    X, y = clusters()
    with pytest.raises(ValueError, match=message):
        FastProp(pseudo_labels=value).fit(X, y)


def test_samples_whose_classes_tie_exactly_are_nobody_s_pseudo_labels(monkeypatch):
    # Indistinguishable samples, seeds of three classes among them: every class is as likely, and the argmax
    # took class 0 for all of them; the refit then learnt class 0 from its own tie (0.94 where 1/3 is right).
    X = np.tile(np.random.default_rng(0).normal(size=(1, 8)), (300, 1))
    y = np.full(300, -1)
    y[:6] = [0, 1, 2, 0, 1, 2]
    taken = []
    refit = propagation._LinearLocalPredictor.refit

    def recording(self, context, options, pseudo, pseudo_class):
        taken.append(pseudo.size)
        return refit(self, context, options, pseudo, pseudo_class)

    monkeypatch.setattr(propagation._LinearLocalPredictor, "refit", recording)
    model = FastProp(random_state=0).fit(X, y)
    assert taken == [0]
    assert_allclose(model.label_distributions_[y < 0], 1 / 3, atol=1e-9)
