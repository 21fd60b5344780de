"""The confidence calibrated on the validation set (Platt scaling, fastprop.calibration)."""

import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import brentq, minimize
from scipy.special import expit

from fastprop import FastProp, build_knn_graph
from fastprop.calibration import (
    CALIBRATION_L2,
    IN_CLASS_L2,
    RIGHT_L2,
    SIGNAL_SIGNS,
    calibrate_on_validation,
    calibrated,
    fit_calibration,
    fit_logistic_map,
    log_odds,
    logistic_map_loss,
    ranking_with_graph_signals,
    LogStandardisation,
)
from fastprop.evaluation.protocol import calibration_error, evaluate, make_noisy_task, outlier_auroc
from fastprop.threshold import smoothed_threshold
from reference import reference_density, reference_left_out_reach, reference_reach
from reference import two_seeded_clusters_and_an_unseeded_one as mixture

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
    ([0.5, np.nan], [True, False], "confidence has 1 NaN or infinite value"),
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


def test_with_capped_sources_the_same_random_state_gives_the_same_fit_bit_for_bit(monkeypatch):
    import fastprop.graph_signals

    X, y, truth, validation = mixture()
    known = (validation, truth[validation])
    every_source = FastProp(n_neighbors=10, random_state=0).fit(X, y, validation=known)
    monkeypatch.setattr(fastprop.graph_signals, "MAX_VALIDATION_SOURCES", 3)  # the mixture's set holds more of each
    first, second = (FastProp(n_neighbors=10, random_state=0).fit(X, y, validation=known) for _ in range(2))
    for name in ("confidence_", "transduction_", "outlier_threshold_"):
        assert_array_equal(getattr(first, name), getattr(second, name))
    assert not np.array_equal(first.confidence_, every_source.confidence_)  # the draw took fewer sources
    assert_array_equal(first.label_distributions_, every_source.label_distributions_)


def test_the_log_standardisation_is_over_the_unlabeled_and_zero_when_flat():
    values = np.array([5.0, 1.0, 0.1, 0.01, 0.0])
    unlabeled = np.array([1, 2, 3, 4])
    z = LogStandardisation.fitted(values, unlabeled)(values)
    assert z[unlabeled].mean() == pytest.approx(0, abs=1e-12) and z[unlabeled].std() == pytest.approx(1)
    assert np.all(np.diff(z) <= 0) and z[4] == z[3]  # 0 reads as the least positive value, not -inf
    flat = np.full(5, 0.3)
    assert_array_equal(LogStandardisation.fitted(flat, unlabeled)(flat), np.zeros(5))
    assert_array_equal(LogStandardisation.fitted(np.zeros(5), unlabeled)(np.zeros(5)), np.zeros(5))


def test_a_signal_flat_up_to_rounding_standardises_to_zero():
    # log(0.7) over 100 samples whose sums of squares leave a std of ~1e-17: rounding, not a spread.
    rng = np.random.default_rng(0)
    flat = np.full(100, 0.7) * (1 + 1e-15 * rng.standard_normal(100))
    assert np.log(flat).std() > 0
    assert_array_equal(LogStandardisation.fitted(flat, np.arange(100))(flat), np.zeros(100))
    varied = np.full(100, 0.7) * (1 + 1e-3 * rng.standard_normal(100))
    assert LogStandardisation.fitted(varied, np.arange(100))(varied).std() == pytest.approx(1)


def test_a_graph_of_equal_weights_gives_new_points_density_no_say():
    # Every fitted sample has the same density; new points' own (cosine) density must not become a switch.
    X, y, truth, validation = mixture(seed=2)
    graph = build_knn_graph(X, 10, random_state=0)
    graph.data[:] = np.float32(0.7)
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph, validation=(validation, truth[validation]))
    density = model.predictor_.calibration.confidence_map.standardisations[1]
    assert density.spread == 0.0 and model.confidence_calibration_["right"][2] == 0.0  # its weight: the prior
    fresh, _, fresh_truth, _ = mixture(seed=3)
    confidence = model.predict_confidence(fresh)
    assert_array_equal(density(np.linspace(0.1, 1.0, 7)), np.zeros(7))  # ~1e15 for a cosine density before
    assert outlier_auroc(confidence, fresh_truth) > 0.9


def test_a_few_zeros_do_not_squash_the_others_spread():
    # One sample no seed reaches among 1000: the others' standardised values stay what they were.
    rng = np.random.default_rng(6)
    values = rng.lognormal(size=1000)
    with_zero = np.r_[values, 0.0]
    z = LogStandardisation.fitted(with_zero, np.arange(1001))(with_zero)
    reference = (np.log(values) - np.log(values).mean()) / np.log(values).std()
    assert_allclose(z[:1000], reference, atol=0.05)  # log(0) read as log(tiny) would shrink them ~20-fold
    assert z[1000] == z[:1000].min()


def minimised_ranking(design, target, ridge):
    """The ranking fit by a general minimiser: the penalised log-loss, ridge towards (1, 0, ..., 0), each signal's
    weight of its sign (SIGNAL_SIGNS): the least loss over every set of signals held at 0 whose fit has them."""
    n_params = design.shape[1]
    prior, ridges = np.r_[1.0, np.zeros(n_params - 1)], np.full(n_params, ridge)
    signs = np.r_[0.0, SIGNAL_SIGNS[: n_params - 2], 0.0]
    best = None
    for held in itertools.product([False, True], repeat=n_params - 2):
        if np.any(np.array(held) & (signs[1:-1] == 0)):
            continue  # a weight of either sign is never held
        free = np.r_[True, ~np.array(held), True]
        params = np.zeros(n_params)
        params[free] = minimize(logistic_map_loss, np.full(free.sum(), 0.5),
                                args=(design[:, free], target, prior[free], ridges[free]), method="Nelder-Mead",
                                options={"xatol": 1e-11, "fatol": 1e-14, "maxiter": 40_000}).x
        loss = logistic_map_loss(params, design, target, prior, ridges)
        if np.all(signs * params >= 0) and (best is None or loss < best[0]):
            best = loss, params
        if not any(held) and np.all(signs * params >= 0):
            break  # the free fit has every sign: it is the minimum
    return best[1]


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
    params = ranking_with_graph_signals(confidence, signals, indices, target, ridge, SIGNAL_SIGNS[:2])
    design = np.column_stack([log_odds(confidence), signals, np.ones(60)])
    assert_allclose(params, minimised_ranking(design, target, ridge), rtol=0, atol=1e-6)
    assert params[1] > 0  # the first signal tells the target here


@pytest.mark.parametrize("seed", range(4))
def test_a_signal_weight_of_the_wrong_sign_is_held_at_zero_at_the_constrained_minimum(seed):
    # Three signals: the in-class reach (held >= 0; no say here), the density (either sign; negative here) and the
    # outliers' reach (held <= 0; positive here). The fit is the least penalised loss over every feasible choice
    # (a general minimiser).
    rng = np.random.default_rng(seed)
    confidence, signals = rng.uniform(0, 1, 50), rng.normal(size=(50, 3))
    target = rng.uniform(0, 1, 50) < expit(2 * log_odds(confidence) - 1.5 * signals[:, 1] + 1.5 * signals[:, 2])
    params = ranking_with_graph_signals(confidence, signals, np.arange(50), target, IN_CLASS_L2, SIGNAL_SIGNS)
    design = np.column_stack([log_odds(confidence), signals, np.ones(50)])
    assert_allclose(params, minimised_ranking(design, target, IN_CLASS_L2), rtol=0, atol=1e-6)
    assert params[2] < 0 and params[3] == 0.0  # the density free, the outliers' reach's weight <= 0
    free = fit_logistic_map(design, target, np.r_[1.0, 0, 0, 0, 0], np.full(5, IN_CLASS_L2))
    assert free[3] > 0  # what the fit would have said without the signs


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
    result, confidence_map = calibrate_on_validation(confidence.copy(), predicted, unlabeled,
                                                     (validation, truth[validation]), reach, density)
    calibration = confidence_map.description()
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
    # The fitted map, for any sample (new points use it): the same numbers, bit for bit, in any order.
    order = np.random.default_rng(0).permutation(n)
    assert_array_equal(confidence_map(confidence[order], [reach[order], density[order]]), result[order])


def test_with_no_outlier_in_the_validation_set_only_the_right_fit_ranks():
    confidence, signals, predicted, truth = hand_built_validation(seed=6)
    truth = np.where(truth < 0, 1, truth)  # every validation sample in-class
    validation, unlabeled = np.arange(0, confidence.size, 2), np.arange(confidence.size)
    reach, density = np.exp(signals[:, 0]), np.exp(signals[:, 1])
    result, confidence_map = calibrate_on_validation(confidence.copy(), predicted, unlabeled,
                                                     (validation, truth[validation]), reach, density)
    calibration = confidence_map.description()
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
    # the paper's confidence as the one calibrated: the reference below is the calibration's, whatever its input
    fits = [FastProp(n_neighbors=10, random_state=0, calibrate_confidence=calibrate, confidence="both").fit(
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
    # New points' agreement reads the calibrated confidence (the seeds 1, the known outlier 0).
    calibrated = np.where(unlabeled, expected, np.where(y >= 0, 1.0, 0.0))
    assert_allclose(model.predictor_.confidence, calibrated, rtol=0, atol=1e-6)
    # The final confidence: its mean with each sample rescored as a new point at its place is (its graph row's
    # agreeing calibrated confidence, row by row, on the uncalibrated scale by the predictor's quantile map,
    # then the same fits with its own signals).
    dense = model.graph_.toarray()
    agreeing = (dense * calibrated * (predicted[None, :] == predicted[:, None])).sum(axis=1) / dense.sum(axis=1)
    design[:, 0] = log_odds(model.predictor_.on_confidence_scale(agreeing))
    score = np.mean([expit(design @ fit) for fit in (right_fit, in_class_fit)], axis=0)
    rescored = expit(platt[0] * log_odds(score) + platt[1])
    assert_allclose(model.confidence_[unlabeled], 0.5 * (expected + rescored)[unlabeled], rtol=0, atol=1e-6)
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
    raw, model = [FastProp(random_state=0, calibrate_confidence=calibrate).fit(
        X, task.y, graph=graph, validation=task.validation) for calibrate in (False, True)]
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


def standardised_logs(fitted_values, values, unlabeled):
    """``log(values)`` standardised with the unlabeled fitted samples' floor, mean and spread, by NumPy."""
    floor = fitted_values[unlabeled][fitted_values[unlabeled] > 0].min()
    logged = np.log(np.maximum(fitted_values[unlabeled], floor))
    return (np.log(np.maximum(values, floor)) - logged.mean()) / logged.std()


def test_new_points_are_calibrated_with_their_own_graph_signals():
    X, y, truth, validation = mixture(seed=2)
    known = (validation, truth[validation])
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y, validation=known)
    raw = FastProp(n_neighbors=10, random_state=0, calibrate_confidence=False).fit(X, y, validation=known)
    unlabeled = y < 0
    # A new point's agreement is put on the scale of the confidence before calibration ...
    levels = np.linspace(0, 1, model.predictor_.confidence_quantiles.size)
    assert_allclose(model.predictor_.confidence_quantiles, np.quantile(raw.confidence_[unlabeled], levels))
    X_new, _, truth_new, _ = mixture(seed=3, n_per=30)
    unit = X_new / np.linalg.norm(X_new, axis=1, keepdims=True)
    indices, weights = model.predictor_.neighbours(unit)
    predicted = model.predict_proba(X_new).argmax(axis=1)
    fitted_class = model.label_distributions_.argmax(axis=1)
    calibrated = model.predictor_.confidence  # before the neighbourhood's share (the test above)
    agreeing = np.sum(weights * calibrated[indices] * (fitted_class[indices] == predicted[:, None]), axis=1)
    before = model.predictor_.on_confidence_scale(agreeing / weights.sum(axis=1))
    # ... then calibrated with its reaches by SciPy (the walk with the new points added, no edge back into the
    # fitted graph), its density, and the fitted samples' standardisation and fits.
    n = len(X)
    rows = sp.csr_matrix((weights.ravel(), indices.ravel(), np.arange(0, weights.size + 1, 10)), shape=(len(X_new), n))
    augmented = sp.csr_matrix(sp.vstack([sp.hstack([model.graph_, sp.csr_matrix((n, len(X_new)))]),
                                         sp.hstack([rows, sp.csr_matrix((len(X_new), len(X_new)))])]))
    in_class_sources, outlier_sources = validation[truth[validation] >= 0], validation[truth[validation] < 0]
    seeds = y >= 0
    starts = [seeds | np.isin(np.arange(n), in_class_sources), np.isin(np.arange(n), outlier_sources)]
    new_reach = [reference_reach(augmented, np.r_[start, np.zeros(len(X_new), dtype=bool)])[n:] for start in starts]
    fitted = [reference_left_out_reach(model.graph_, in_class_sources, seeds), reference_density(model.graph_, 10),
              reference_left_out_reach(model.graph_, outlier_sources)]
    z = np.column_stack([standardised_logs(f, v, unlabeled)
                         for f, v in zip(fitted, [new_reach[0], weights.mean(axis=1), new_reach[1]])])
    fits = [np.array(model.confidence_calibration_[name]) for name in ("right", "in_class")]
    score = np.mean([expit(fit[0] * log_odds(before) + z @ fit[1:-1] + fit[-1]) for fit in fits], axis=0)
    slope, intercept = model.confidence_calibration_["calibration"]
    expected = expit(slope * log_odds(score) + intercept)
    confidence = model.predict_confidence(X_new)
    # The new points' reach is a walk's with the stays summed to infinity (fastprop.graph_signals).
    assert_allclose(confidence, expected, rtol=0, atol=2e-3)
    assert np.all(model.predictor_.nbytes > raw.predictor_.nbytes + 2 * 8 * n - 1)
    assert np.mean(model.predict(X_new) == truth_new) > 0.9


def test_a_confidence_ranking_the_wrong_way_leaves_the_fit_s_confidence_as_it_is():
    confidence = np.linspace(0.01, 0.99, 500)
    indices = np.arange(500)
    assert ranking_with_graph_signals(confidence, np.zeros((500, 2)), indices, confidence < 0.5, RIGHT_L2,
                                      SIGNAL_SIGNS[:2]) is None
    unlabeled = np.arange(500)
    same, confidence_map = calibrate_on_validation(confidence.copy(), np.zeros(500, dtype=np.int64), unlabeled,
                                                   (indices, np.where(confidence < 0.5, 0, -1)), np.ones(500),
                                                   np.ones(500))
    assert confidence_map is None
    assert_array_equal(same, confidence)
