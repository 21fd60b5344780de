"""The confidence calibrated on the validation set (Platt scaling, fastprop.calibration)."""

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import brentq, minimize
from scipy.special import expit

from fastprop import FastProp, build_knn_graph
from fastprop.adjacency import RandomWalk
from fastprop.calibration import (
    CALIBRATION_L2,
    IN_CLASS_L2,
    MAX_VALIDATION_SOURCES,
    RIGHT_L2,
    SOURCE_BLOCK,
    calibrate_on_validation,
    calibrated,
    fit_calibration,
    in_class_reach,
    left_out_reach,
    log_odds,
    logistic_map_loss,
    local_density,
    ranking_with_graph_signals,
    seed_reach,
    standardised_log,
    validation_sources,
)
from fastprop.evaluation.protocol import calibration_error, evaluate, make_noisy_task
from fastprop.threshold import smoothed_threshold
from threads import run_on_threads

BANKING77 = Path(__file__).resolve().parents[2] / "shared" / "data" / "banking77_minilm.npz"


def platt_loss(params, odds, correct):
    """The loss fit_calibration minimises: summed log-loss plus CALIBRATION_L2 / 2 * ((a - 1)^2 + b^2)."""
    design = np.column_stack([odds, np.ones_like(odds)])
    return logistic_map_loss(np.asarray(params), design, correct, np.array([1.0, 0.0]), np.full(2, CALIBRATION_L2))


def expected_calibration_error(probability, correct, n_bins=10):
    """The slow reference: bin by bin, mean |confidence - accuracy| weighted by the bin's share of samples."""
    total = 0.0
    for b in range(n_bins):
        low, high = b / n_bins, (b + 1) / n_bins
        inside = (probability >= low) & ((probability < high) if b < n_bins - 1 else (probability <= high))
        if inside.any():
            total += inside.mean() * abs(probability[inside].mean() - correct[inside].mean())
    return total


@pytest.mark.parametrize("seed", [0, 1])
def test_calibration_error_against_the_slow_reference(seed):
    rng = np.random.default_rng(seed)
    probability = np.r_[rng.uniform(0, 1, 500), 0.0, 1.0, 0.5]
    correct = rng.uniform(0, 1, probability.size) < probability**2
    assert calibration_error(probability, correct) == pytest.approx(expected_calibration_error(probability, correct),
                                                                    abs=1e-12)
    assert calibration_error(probability, correct, n_bins=3) == pytest.approx(
        expected_calibration_error(probability, correct, n_bins=3), abs=1e-12)


@pytest.mark.parametrize("confidence, correct, message", [
    ([0.5, 1.2], [True, False], r"confidence must lie in \[0, 1\]"),
    ([0.5, np.nan], [True, False], r"confidence must lie in \[0, 1\]"),
    ([0.5, 0.2], [True], "must be 1-d of one length"),
])
def test_calibration_error_rejects_what_is_not_a_probability(confidence, correct, message):
    with pytest.raises(ValueError, match=message):
        calibration_error(confidence, correct)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_fit_is_the_penalised_loss_minimum_a_general_minimiser_finds(seed):
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(0, 1, 40)
    correct = rng.uniform(0, 1, 40) < confidence**2  # over-confident: the map must shrink
    slope, intercept = fit_calibration(confidence, correct)
    reference = minimize(platt_loss, [0.5, 0.5], args=(log_odds(confidence), correct), method="Nelder-Mead",
                         options={"xatol": 1e-11, "fatol": 1e-14, "maxiter": 10_000}).x
    assert_allclose([slope, intercept], reference, rtol=0, atol=1e-6)


def test_equal_confidences_leave_the_slope_to_the_prior_by_hand():
    # Every log-odds 0: the data only sees the intercept b, and the slope stays at the prior's 1.
    # Three of four right: the gradient in b, 4 expit(b) - 3 + L2 b, vanishes at the optimum.
    slope, intercept = fit_calibration(np.full(4, 0.5), np.array([True, True, True, False]))
    assert slope == pytest.approx(1.0, abs=1e-12)
    assert intercept == pytest.approx(brentq(lambda b: 4 * expit(b) - 3 + CALIBRATION_L2 * b, -10, 10), abs=1e-10)


def test_a_confidence_ranking_the_wrong_way_gets_no_map():
    confidence = np.linspace(0.01, 0.99, 200)
    assert fit_calibration(confidence, confidence < 0.5) is None


def test_the_map_is_increasing_and_a_probability():
    confidence = np.r_[0.0, np.linspace(1e-9, 1 - 1e-9, 1001), 1.0]
    mapped = calibrated(confidence, 0.6, -0.4)
    assert np.all(np.diff(mapped) >= 0) and np.all((mapped > 0) & (mapped < 1))
    assert mapped[500] == pytest.approx(expit(0.6 * log_odds(confidence[500]) - 0.4))


def mixture(seed=0, n_per=80):
    """Two seeded clusters, one unseeded cluster of outliers, and a validation set of 40 unlabeled samples."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[:3] * 3
    X = np.vstack([c + rng.normal(size=(n_per, 8)) for c in centres]).astype(np.float32)
    truth = np.repeat([0, 1, -1], n_per)
    y = np.full(len(X), -1)
    y[[0, 1, n_per, n_per + 1]] = [0, 0, 1, 1]
    validation = np.sort(rng.choice(np.flatnonzero(y < 0), size=40, replace=False))
    return X, y, truth, validation


def reference_reach(graph, seeds):
    """The seeds' reach by SciPy: sum_k 0.9^k S^k 1_seeds, k = 1..10, S = D~^-1 (W + I)."""
    closed = sp.csr_matrix(graph, dtype=np.float64) + sp.identity(graph.shape[0])
    walk = sp.diags(1 / np.asarray(closed.sum(axis=1)).ravel()) @ closed
    walked, reach = seeds.astype(np.float64), np.zeros(graph.shape[0])
    for step in range(1, 11):
        walked = walk @ walked
        reach += 0.9**step * walked
    return reach


def test_seed_reach_matches_scipy():
    X, y, _, _ = mixture()
    graph = build_knn_graph(X, 10, method="exact")
    assert_allclose(seed_reach(RandomWalk(graph), y >= 0), reference_reach(graph, y >= 0), rtol=1e-12, atol=0)


def reference_left_out_reach(graph, sources, seeds=None):
    """A source's reach from the others (and the seeds), every other sample's from all of them, by SciPy.

    One walk a source: the reach from everyone known but it, read at it.
    """
    n = graph.shape[0]
    everyone = np.zeros(n, dtype=bool) if seeds is None else seeds.copy()
    everyone[sources] = True
    expected = reference_reach(graph, everyone)
    for source in sources:
        others = everyone.copy()
        others[source] = False
        expected[source] = reference_reach(graph, others)[source]
    return expected


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


def test_with_capped_sources_the_same_random_state_gives_the_same_fit_bit_for_bit(monkeypatch):
    import fastprop.calibration

    X, y, truth, validation = mixture()
    known = (validation, truth[validation])
    every_source = FastProp(n_neighbors=10, random_state=0).fit(X, y, validation=known)
    monkeypatch.setattr(fastprop.calibration, "MAX_VALIDATION_SOURCES", 3)  # the mixture's set holds more of each
    first, second = (FastProp(n_neighbors=10, random_state=0).fit(X, y, validation=known) for _ in range(2))
    for name in ("confidence_", "transduction_", "outlier_threshold_"):
        assert_array_equal(getattr(first, name), getattr(second, name))
    assert not np.array_equal(first.confidence_, every_source.confidence_)  # the draw took fewer sources
    assert_array_equal(first.label_distributions_, every_source.label_distributions_)


def reference_density(graph, k):
    """Each row's mean of its k largest weights (all of a shorter row, 0 for an empty one), row by row."""
    graph = sp.csr_matrix(graph)
    means = np.zeros(graph.shape[0])
    for row in range(graph.shape[0]):
        weights = np.sort(graph.data[graph.indptr[row]:graph.indptr[row + 1]].astype(np.float64))[::-1][:k]
        means[row] = weights.mean() if weights.size else 0.0
    return means


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


def test_standardised_log_is_standardised_over_the_unlabeled_and_zero_when_flat():
    values = np.array([5.0, 1.0, 0.1, 0.01, 0.0])
    unlabeled = np.array([1, 2, 3, 4])
    z = standardised_log(values, unlabeled)
    assert z[unlabeled].mean() == pytest.approx(0, abs=1e-12) and z[unlabeled].std() == pytest.approx(1)
    assert np.all(np.diff(z) <= 0) and z[4] == z[3]  # 0 reads as the least positive value, not -inf
    assert_array_equal(standardised_log(np.full(5, 0.3), unlabeled), np.zeros(5))
    assert_array_equal(standardised_log(np.zeros(5), unlabeled), np.zeros(5))


def test_a_few_zeros_do_not_squash_the_others_spread():
    # One sample no seed reaches among 1000: the others' standardised values stay what they were.
    rng = np.random.default_rng(6)
    values = rng.lognormal(size=1000)
    with_zero = np.r_[values, 0.0]
    z = standardised_log(with_zero, np.arange(1001))
    reference = (np.log(values) - np.log(values).mean()) / np.log(values).std()
    assert_allclose(z[:1000], reference, atol=0.05)  # log(0) read as log(tiny) would shrink them ~20-fold
    assert z[1000] == z[:1000].min()


def minimised_ranking(design, target, ridge):
    """The ranking fit by a general minimiser: the penalised log-loss, ridge towards (1, 0, ..., 0)."""
    prior = np.zeros(design.shape[1])
    prior[0] = 1.0
    return minimize(logistic_map_loss, np.full(design.shape[1], 0.5),
                    args=(design, target, prior, np.full(design.shape[1], ridge)),
                    method="Nelder-Mead", options={"xatol": 1e-11, "fatol": 1e-14, "maxiter": 40_000}).x


def reference_calibration(design, validation, right, in_class):
    """Both ranking fits, their mean and its Platt map, by a general minimiser (the fits' parameters, the result)."""
    fits = [minimised_ranking(design[validation], right, RIGHT_L2)]
    if in_class.any() and not in_class.all():
        fits.append(minimised_ranking(design[validation], in_class, IN_CLASS_L2))
    score = np.mean([expit(design @ fit) for fit in fits], axis=0)
    platt = minimize(platt_loss, [0.5, 0.5], args=(log_odds(score[validation]), right),
                     method="Nelder-Mead", options={"xatol": 1e-11, "fatol": 1e-14, "maxiter": 20_000}).x
    return fits, platt, calibrated(score, *platt)


@pytest.mark.parametrize("ridge", [RIGHT_L2, IN_CLASS_L2])
def test_the_ranking_fit_is_the_penalised_minimum_a_general_minimiser_finds(ridge):
    rng = np.random.default_rng(4)
    confidence, signals = rng.uniform(0, 1, 60), rng.normal(size=(60, 2))
    target = rng.uniform(0, 1, 60) < 0.3 * confidence + 0.5 * expit(2 * signals[:, 0])
    indices = np.arange(60)
    params = ranking_with_graph_signals(confidence, signals, indices, target, ridge)
    design = np.column_stack([log_odds(confidence), signals, np.ones(60)])
    assert_allclose(params, minimised_ranking(design, target, ridge), rtol=0, atol=1e-6)
    assert params[1] > 0  # the first signal tells the target here


def hand_built_validation(seed=5, n=400):
    """Confidence, two signals, predicted classes and truth where "right" and "in-class" part ways.

    Outliers (truth -1) have a low first signal; in-class samples of a low confidence are often of a wrong
    class whatever their signals.
    """
    rng = np.random.default_rng(seed)
    confidence, signals = rng.uniform(0.05, 0.95, n), rng.normal(size=(n, 2))
    outlier = rng.uniform(0, 1, n) < expit(-1.5 - 2.0 * signals[:, 0])
    wrong_class = rng.uniform(0, 1, n) > confidence
    truth = np.where(outlier, -1, np.where(wrong_class, 1, 0))
    return confidence, signals, np.zeros(n, dtype=np.int64), truth


def test_the_right_and_in_class_fits_are_averaged_and_the_mean_mapped_to_right_labels():
    confidence, signals, predicted, truth = hand_built_validation()
    n = confidence.size
    validation, unlabeled = np.arange(0, n, 2), np.arange(n)
    reach, density = np.exp(signals[:, 0]), np.exp(signals[:, 1])
    result, calibration = calibrate_on_validation(confidence.copy(), predicted, unlabeled,
                                                  (validation, truth[validation]), reach, density)
    # The reference: the standardised logs by NumPy, the fits by a general minimiser.
    z = np.column_stack([(np.log(v) - np.log(v).mean()) / np.log(v).std() for v in (reach, density)])
    design = np.column_stack([log_odds(confidence), z, np.ones(n)])
    in_class, right = truth[validation] >= 0, truth[validation] == 0
    (right_fit, in_class_fit), platt, expected = reference_calibration(design, validation, right, in_class)
    assert_allclose(calibration["right"], right_fit, rtol=0, atol=1e-6)
    assert_allclose(calibration["in_class"], in_class_fit, rtol=0, atol=1e-6)
    assert_allclose(calibration["calibration"], platt, rtol=0, atol=1e-6)
    assert_allclose(result, expected, rtol=0, atol=1e-6)
    # Reach tells the outliers, density nothing; on "right" the confidence takes more of the weight.
    assert calibration["in_class"][1] > 0.5 and abs(calibration["in_class"][2]) < 0.3
    assert calibration["right"][1] < calibration["in_class"][1] - 0.2
    assert calibration["right"][0] > calibration["in_class"][0] + 0.2


def test_with_no_outlier_in_the_validation_set_only_the_right_fit_ranks():
    confidence, signals, predicted, truth = hand_built_validation(seed=6)
    truth = np.where(truth < 0, 1, truth)  # every validation sample in-class
    validation, unlabeled = np.arange(0, confidence.size, 2), np.arange(confidence.size)
    reach, density = np.exp(signals[:, 0]), np.exp(signals[:, 1])
    result, calibration = calibrate_on_validation(confidence.copy(), predicted, unlabeled,
                                                  (validation, truth[validation]), reach, density)
    z = np.column_stack([(np.log(v) - np.log(v).mean()) / np.log(v).std() for v in (reach, density)])
    design = np.column_stack([log_odds(confidence), z, np.ones(confidence.size)])
    right = truth[validation] == 0
    (right_fit,), platt, expected = reference_calibration(design, validation, right, np.ones_like(right))
    assert calibration["in_class"] is None
    assert_allclose(calibration["right"], right_fit, rtol=0, atol=1e-6)
    assert_allclose(calibration["calibration"], platt, rtol=0, atol=1e-6)
    assert_allclose(result, expected, rtol=0, atol=1e-6)


def test_with_a_validation_set_the_confidence_is_re_ranked_with_graph_signals_calibrated_and_cut_there():
    X, y, truth, validation = mixture()
    known_outlier = int(np.setdiff1d(np.flatnonzero(truth < 0), validation)[0])
    fits = [FastProp(n_neighbors=10, random_state=0, calibrate_confidence=calibrate).fit(
        X, y, validation=(validation, truth[validation]), outliers=[known_outlier]) for calibrate in (False, True)]
    raw, model = fits
    assert raw.confidence_calibration_ is None
    predicted = raw.label_distributions_.argmax(axis=1)
    right = predicted[validation] == truth[validation]
    in_class = truth[validation] >= 0
    unlabeled = (y < 0) & (np.arange(len(y)) != known_outlier)
    # The reference: reach by SciPy, density row by row, the logistic fits by a general minimiser.
    assert np.any(truth[validation] < 0)  # so the known outliers' reach is the third signal
    signals = []
    in_class_validation = validation[truth[validation] >= 0]
    for values in (reference_left_out_reach(model.graph_, in_class_validation, y >= 0),
                   reference_density(model.graph_, 10),
                   reference_left_out_reach(model.graph_, validation[truth[validation] < 0])):
        logged = np.log(np.maximum(values, values[unlabeled][values[unlabeled] > 0].min()))
        signals.append((logged - logged[unlabeled].mean()) / logged[unlabeled].std())
    design = np.column_stack([log_odds(raw.confidence_), *signals, np.ones(len(y))])
    (right_fit, in_class_fit), platt, expected = reference_calibration(design, validation, right, in_class)
    assert_allclose(model.confidence_calibration_["right"], right_fit, rtol=0, atol=1e-6)
    assert_allclose(model.confidence_calibration_["in_class"], in_class_fit, rtol=0, atol=1e-6)
    assert_allclose(model.confidence_calibration_["calibration"], platt, rtol=0, atol=1e-6)
    assert_allclose(model.confidence_[unlabeled], expected[unlabeled], rtol=0, atol=1e-6)
    assert np.all(model.confidence_[y >= 0] == 1.0) and model.confidence_[known_outlier] == 0.0
    assert_array_equal(model.label_distributions_, raw.label_distributions_)
    # A sample the validation set's outliers reach is less likely in-class (their cluster is unseeded).
    assert model.confidence_calibration_["in_class"][3] < -0.3
    # The validation rule runs on the final confidence, and the fit rejects what falls below it.
    expected = smoothed_threshold(model.confidence_[validation], predicted[validation], truth[validation])
    assert 0 < model.outlier_threshold_ == expected < 1
    rejected = (model.confidence_ < model.outlier_threshold_) & (y < 0)
    assert_array_equal(model.transduction_ == -1, rejected | (np.arange(len(y)) == known_outlier))
    assert np.mean(model.transduction_ == truth) > 0.95


def test_without_a_validation_set_nothing_is_calibrated():
    X, y, _, _ = mixture(seed=1)
    raw = FastProp(n_neighbors=10, random_state=0, calibrate_confidence=False).fit(X, y)
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y)
    assert model.confidence_calibration_ is None
    assert_array_equal(model.confidence_, raw.confidence_)
    assert model.outlier_threshold_ == raw.outlier_threshold_


@pytest.mark.skipif(not BANKING77.is_file(), reason=f"real data not found at {BANKING77}")
def test_on_banking77_the_calibrated_confidence_is_far_closer_to_the_share_of_right_labels():
    # The levers protocol's task 0 (30 intents, 1% seeds, 30% outliers): the uncalibrated confidence claims
    # ~0.14 more than the share of right labels (bench/RESULTS.md).
    data = np.load(BANKING77)
    task = make_noisy_task(data["y"], 30, label_ratio=0.01, noise_ratio=0.3, random_state=0)
    X = task.subset(data["X"])
    graph = build_knn_graph(X, 30, random_state=0)
    raw, model = [FastProp(random_state=0, calibrate_confidence=calibrate).fit(X, task.y, graph=graph,
                                                                                validation=task.validation)
                  for calibrate in (False, True)]
    evaluation = task.evaluation
    correct = raw.label_distributions_.argmax(axis=1)[evaluation] == task.truth[evaluation]
    before = calibration_error(raw.confidence_[evaluation], correct)
    after = calibration_error(model.confidence_[evaluation], correct)
    assert before > 0.1 and after < 0.5 * before
    scores = [evaluate(task, fit.label_distributions_, fit.confidence_) for fit in (raw, model)]
    # Density tells the right labels, and density and the in-class reach (the seeds' and the validation set's
    # in-class samples') the outliers (weights 0.05 and 0.21 in the "right" fit, 0.34 and 0.37 in the "in-class"
    # one); the validation outliers' own reach tells the wrong labels (-0.33; -0.08 in the "in-class" fit). The
    # outlier AUROC 0.846 -> 0.877, the in-class labels unchanged. The accuracy at the protocol's threshold,
    # chosen on this task's few validation samples, is 0.754 -> 0.736 on this task seed (this cell's mean over
    # 5 task seeds rose, bench/RESULTS.md): the test holds it to no large loss.
    right, in_class = (np.array(model.confidence_calibration_[fit][1:4]) for fit in ("right", "in_class"))
    assert 0.0 < right[0] < 0.15 and 0.1 < right[1] < 0.4 and right[2] < -0.2
    assert np.all((in_class[:2] > 0.2) & (in_class[:2] < 0.5)) and in_class[2] < 0
    assert scores[1]["outlier_auroc"] > scores[0]["outlier_auroc"] + 0.02
    assert scores[1]["accuracy"] > scores[0]["accuracy"] - 0.03
    assert scores[1]["in_class_accuracy"] == scores[0]["in_class_accuracy"]


def test_new_points_are_scored_on_the_calibrated_scale():
    X, y, truth, validation = mixture(seed=2)
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y, validation=(validation, truth[validation]))
    raw = FastProp(n_neighbors=10, random_state=0, calibrate_confidence=False).fit(
        X, y, validation=(validation, truth[validation]))
    unlabeled = y < 0
    # New points' confidence is put on the fitted confidence's scale by its quantiles: the calibrated one's.
    levels = np.linspace(0, 1, model.predictor_.confidence_quantiles.size)
    assert_allclose(model.predictor_.confidence_quantiles, np.quantile(model.confidence_[unlabeled], levels))
    assert np.abs(model.predictor_.confidence_quantiles - raw.predictor_.confidence_quantiles).max() > 0.05
    X_new, _, truth_new, _ = mixture(seed=3, n_per=30)
    confidence = model.predict_confidence(X_new)
    low, high = model.confidence_[unlabeled].min(), model.confidence_[unlabeled].max()
    assert np.all((confidence >= low) & (confidence <= high))
    # Nearly the same ranking; the threshold is chosen on the new scale, so points near it may fall otherwise.
    assert np.mean(model.predict(X_new) == raw.predict(X_new)) >= 0.95
    assert np.mean(model.predict(X_new) == truth_new) > 0.9


def test_a_confidence_ranking_the_wrong_way_leaves_the_fit_s_confidence_as_it_is():
    confidence = np.linspace(0.01, 0.99, 500)
    indices = np.arange(500)
    assert ranking_with_graph_signals(confidence, np.zeros((500, 2)), indices, confidence < 0.5, RIGHT_L2) is None
    unlabeled = np.arange(500)
    same, calibration = calibrate_on_validation(confidence.copy(), np.zeros(500, dtype=np.int64), unlabeled,
                                                (indices, np.where(confidence < 0.5, 0, -1)), np.ones(500),
                                                np.ones(500))
    assert calibration is None
    assert_array_equal(same, confidence)
