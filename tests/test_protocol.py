"""Tests of the noisy transductive protocol and of the outlier threshold rule."""

import math
import statistics
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from fastprop.evaluation.protocol import NoisyTask, evaluate, make_noisy_task, outlier_auroc
from fastprop.threshold import accuracy_with_rejection, choose_threshold, smoothed_threshold, smoothing_bandwidth


def _pool(seed=0, n_classes=30, n_background=300):
    """A pool with uneven classes (20..119 samples) and some samples of no class."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 120, size=n_classes)
    y = np.concatenate([np.repeat(np.arange(n_classes) * 3 + 5, sizes), np.full(n_background, -1)])
    return y[rng.permutation(y.size)]


def _task_sets(task, y_all):
    """Pool-index sets D, D_l, D_o, D_u, D_v and the evaluation set of a task."""
    idx = task.indices
    D = set(np.flatnonzero(np.isin(y_all, task.classes)))
    seeds = set(idx[task.seed_mask])
    outliers = set(idx[task.truth == -1])
    validation = set(idx[task.validation[0]])
    evaluation = set(idx[task.evaluation])
    return D, seeds, outliers, (D - seeds) | outliers, validation, evaluation


# ---------------------------------------------------------------- make_noisy_task


@pytest.mark.parametrize("noise_ratio", [0.0, 0.1, 0.3, 0.5, 0.6])
@pytest.mark.parametrize("seed", [0, 1])
def test_task_sets_follow_the_protocol(noise_ratio, seed):
    y_all = _pool(seed)
    task = make_noisy_task(y_all, 10, label_ratio=0.05, noise_ratio=noise_ratio, random_state=seed)
    D, seeds, outliers, unlabelled, validation, evaluation = _task_sets(task, y_all)

    assert set(task.indices) == D | outliers
    assert np.all(np.diff(task.indices) > 0)
    assert not (outliers & D)
    # Seeds: round(label_ratio * |D|), plus one per class the uniform draw missed.
    assert len(seeds) >= round(0.05 * len(D))
    assert len(seeds) <= round(0.05 * len(D)) + 10
    assert set(np.unique(task.truth[task.seed_mask])) == set(range(10))
    # Exact noise ratio: |D_o| = round(rho / (1 - rho) * |D \ D_l|).
    assert len(outliers) == round(noise_ratio / (1 - noise_ratio) * len(D - seeds))
    assert abs(task.actual_noise_ratio - noise_ratio) <= 0.5 / len(unlabelled)
    # Validation: |D_l| samples of D_u; evaluation: the rest of D_u.
    assert len(validation) == len(seeds)
    assert not (validation & seeds) and not (validation & evaluation)
    assert validation | evaluation == unlabelled
    assert task.evaluation.size == len(evaluation)


def test_seed_draw_is_topped_up_with_one_seed_per_missing_class():
    y_all = _pool(3)
    # round(0.001 * |D|) is 0 or 1 here: nearly every class needs its extra seed.
    task = make_noisy_task(y_all, 12, label_ratio=0.001, noise_ratio=0.2, random_state=0)
    n_D = np.isin(y_all, task.classes).sum()
    assert round(0.001 * n_D) <= 1
    assert task.seed_mask.sum() == 12
    assert_array_equal(np.sort(task.truth[task.seed_mask]), np.arange(12))


def test_labels_are_remapped_to_task_classes():
    y_all = _pool(1)
    task = make_noisy_task(y_all, 7, label_ratio=0.05, noise_ratio=0.3, random_state=4)
    assert task.n_classes == 7 and np.all(np.diff(task.classes) > 0)
    original = y_all[task.indices]
    in_class = task.truth >= 0
    assert_array_equal(task.classes[task.truth[in_class]], original[in_class])
    assert not np.isin(original[~in_class], task.classes).any()
    assert_array_equal(task.y[task.seed_mask], task.truth[task.seed_mask])
    assert np.all(task.y[~task.seed_mask] == -1)
    positions, truth = task.validation
    assert_array_equal(truth, task.truth[positions])
    assert np.all(np.diff(positions) > 0) and np.all(np.diff(task.evaluation) > 0)


def test_background_samples_can_be_outliers_but_never_a_class():
    y_all = np.concatenate([np.repeat([0, 1], 200), np.full(5000, -1)])
    task = make_noisy_task(y_all, 2, label_ratio=0.05, noise_ratio=0.5, random_state=0)
    assert_array_equal(task.classes, [0, 1])
    assert np.all(y_all[task.indices[task.truth == -1]] == -1)
    assert (task.truth == -1).sum() == round(1.0 * (400 - task.seed_mask.sum()))


def test_same_random_state_gives_the_same_task_and_others_differ():
    y_all = _pool(2)
    kwargs = dict(label_ratio=0.02, noise_ratio=0.3)
    a = make_noisy_task(y_all, 8, random_state=11, **kwargs)
    b = make_noisy_task(y_all, 8, random_state=11, **kwargs)
    c = make_noisy_task(y_all, 8, random_state=12, **kwargs)
    for name in ("indices", "y", "truth", "seed_mask", "evaluation", "classes"):
        assert_array_equal(getattr(a, name), getattr(b, name))
    assert_array_equal(a.validation[0], b.validation[0])
    assert not np.array_equal(a.indices, c.indices) or not np.array_equal(a.y, c.y)
    gen = make_noisy_task(y_all, 8, random_state=np.random.default_rng(11), **kwargs)
    assert_array_equal(gen.indices, a.indices)


def test_task_arrays_are_read_only_and_subset_takes_rows():
    y_all = _pool(0)
    task = make_noisy_task(y_all, 3, noise_ratio=0.1, random_state=0)
    with pytest.raises(ValueError, match="read-only"):
        task.y[0] = 5
    with pytest.raises(AttributeError):
        task.noise_ratio = 0.5
    X = np.arange(y_all.size * 2).reshape(-1, 2)
    assert_array_equal(task.subset(X), X[task.indices])
    with pytest.raises(ValueError, match="pool of"):
        task.subset(X[:-1])


def test_too_few_outliers_warns_and_uses_all():
    y_all = np.concatenate([np.repeat([0, 1, 2], 100), np.full(10, -1)])
    with pytest.warns(UserWarning, match="noise ratio is"):
        task = make_noisy_task(y_all, 2, label_ratio=0.05, noise_ratio=0.5, random_state=0)
    # Outside D: the 100 samples of the third class and the 10 of no class.
    assert (task.truth == -1).sum() == 110
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_noisy_task(y_all, 2, label_ratio=0.05, noise_ratio=0.3, random_state=0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_classes=0), r"n_classes=0 is out of range"),
        (dict(n_classes=31), r"n_classes=31 is larger than the 30 class"),
        (dict(n_classes=2.0), r"n_classes must be an integer"),
        (dict(label_ratio=0.0), r"label_ratio=0.0 is out of range; allowed: \(0, 1\]"),
        (dict(label_ratio=1.5), r"label_ratio=1.5 is out of range"),
        (dict(label_ratio=0.6), r"label_ratio=0.6 leaves no evaluation samples"),
        (dict(noise_ratio=1.0), r"noise_ratio=1.0 is out of range; allowed: \[0, 1\)"),
        (dict(noise_ratio=-0.1), r"noise_ratio=-0.1 is out of range"),
        (dict(random_state="a"), r"random_state must be"),
    ],
)
def test_make_noisy_task_rejects_bad_arguments(kwargs, match):
    arguments = dict(n_classes=5, label_ratio=0.01, noise_ratio=0.1, random_state=0) | kwargs
    n_classes = arguments.pop("n_classes")
    with pytest.raises(ValueError, match=match):
        make_noisy_task(_pool(0), n_classes, **arguments)


@pytest.mark.parametrize(
    "y_all, match",
    [
        (np.zeros((4, 2), dtype=int), r"y_all must be 1-D"),
        (np.array([0, 1, -2, 1]), r"y_all has labels below -1 \(e.g. -2\)"),
        (np.array([0.5, 1.0]), r"y_all must hold integer labels"),
        (np.array([], dtype=int), r"y_all is empty"),
        (np.full(5, -1), r"n_classes=1 is larger than the 0 class"),
    ],
)
def test_make_noisy_task_rejects_bad_pools(y_all, match):
    with pytest.raises(ValueError, match=match):
        make_noisy_task(y_all, 1, noise_ratio=0.0, random_state=0)


# ---------------------------------------------------------------- choose_threshold


def _naive_threshold(confidence, predicted, truth):
    """O(n^2) reference: score every candidate directly, then apply the tie rule."""
    values = np.unique(confidence)
    candidates = [-np.inf] + [(a + b) / 2 for a, b in zip(values[:-1], values[1:])] + [np.inf]
    scores = []
    for t in candidates:
        right = 0
        for c, p, g in zip(confidence, predicted, truth):
            right += (c >= t and p == g) or (c < t and g == -1)
        scores.append(right)
    best = max(scores)
    first = scores.index(best)
    last = first
    while last + 1 < len(scores) and scores[last + 1] == best:
        last += 1
    # Candidates first..last cover the thresholds in (values[first-1], values[last]].
    if first == 0:
        return -np.inf, best
    if last == len(values):
        return np.inf, best
    return (values[first - 1] + values[last]) / 2, best


@pytest.mark.parametrize("seed", range(40))
def test_choose_threshold_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    # Few distinct confidences on some seeds, to exercise ties and plateaus.
    confidence = rng.random(n)
    if seed % 2:
        confidence = np.round(confidence * rng.integers(1, 6)) / 5
    truth = rng.integers(-1, 3, size=n)
    predicted = np.where(rng.random(n) < 0.6, np.maximum(truth, 0), rng.integers(0, 3, size=n))
    threshold = choose_threshold(confidence, predicted, truth)
    expected, best = _naive_threshold(confidence, predicted, truth)
    assert threshold == pytest.approx(expected, rel=1e-12, abs=0)
    assert accuracy_with_rejection(confidence, predicted, truth, threshold) == best / n


def _naive_smoothed_threshold(confidence, predicted, truth):
    """Reference for smoothed_threshold: Silverman's bandwidth and the smoothed accuracy, one term at a time."""
    n = len(confidence)
    quartiles = statistics.quantiles(confidence, n=4, method="inclusive")
    spread = statistics.stdev(confidence)
    if quartiles[2] > quartiles[0]:
        spread = min(spread, (quartiles[2] - quartiles[0]) / 1.349)
    bandwidth = 0.9 * spread * n ** -0.2
    grid = [k / 1024 for k in range(1025)]
    scores = [sum(p == g for p, g in zip(predicted, truth))]  # -inf: every sample accepted
    for t in grid:
        score = 0.0
        for c, p, g in zip(confidence, predicted, truth):
            accepted = 1 / (1 + math.exp(-(c - t) / bandwidth))
            score += accepted * (p == g) + (1 - accepted) * (g == -1)
        scores.append(score)
    scores.append(sum(g == -1 for g in truth))  # +inf: every sample rejected
    best = max(scores)
    first = next(k for k, score in enumerate(scores) if score >= best - 1e-9)
    return ([-math.inf] + grid + [math.inf])[first]


@pytest.mark.parametrize("seed", range(12))
def test_smoothed_threshold_matches_a_term_by_term_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    truth = rng.integers(-1, 3, size=n)
    # Outliers lower on average, as a useful confidence has them.
    confidence = np.clip(rng.normal(np.where(truth < 0, 0.35, 0.7), 0.2), 0, 1)
    predicted = np.where(rng.random(n) < 0.7, np.maximum(truth, 0), rng.integers(0, 3, size=n))
    threshold = smoothed_threshold(confidence, predicted, truth)
    assert threshold == _naive_smoothed_threshold(list(confidence), list(predicted), list(truth))


def test_smoothed_threshold_bandwidth_is_silverman():
    confidence = np.array([0.1, 0.2, 0.2, 0.4, 0.9, 0.95])
    spread = min(np.std(confidence, ddof=1), (np.quantile(confidence, 0.75) - np.quantile(confidence, 0.25)) / 1.349)
    assert smoothing_bandwidth(confidence) == pytest.approx(0.9 * spread * 6 ** -0.2, rel=1e-12)
    assert smoothing_bandwidth([0.5]) == 0.0 and smoothing_bandwidth([0.3, 0.3, 0.3]) == 0.0
    # More than half equal: the interquartile range is 0 and the standard deviation is used alone.
    tied = np.array([0.5, 0.5, 0.5, 0.5, 0.9])
    assert smoothing_bandwidth(tied) == pytest.approx(0.9 * np.std(tied, ddof=1) * 5 ** -0.2, rel=1e-12)


def test_smoothed_threshold_ends_and_degenerate_cases():
    # Every prediction right: rejecting nothing. Every sample an outlier: rejecting everything.
    assert smoothed_threshold([0.2, 0.5, 0.9], [0, 1, 1], [0, 1, 1]) == -np.inf
    assert smoothed_threshold([0.2, 0.5, 0.9], [0, 1, 1], [-1, -1, -1]) == np.inf
    # Outliers all near 0, a narrow bandwidth: far above them every ramp underflows to 0, which must not
    # tie with rejecting everything (it picked a threshold of ~0.8, accepting anything above it).
    low = np.linspace(0.0, 0.009, 60)  # bandwidth 0.001: a ramp underflows 0.78 above them
    assert smoothed_threshold(low, np.zeros(60, dtype=int), np.full(60, -1)) == np.inf
    # One confidence for all (bandwidth 0): the exact rule.
    args = ([0.4, 0.4, 0.4], [0, 0, 1], [-1, -1, 1])
    assert smoothed_threshold(*args) == choose_threshold(*args)
    # A denormal bandwidth (a fuzzing round: an overflow warning): the ramps are the steps themselves.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny = (np.array([5e-324, 0.0, 1.0, 0.0, 0.0]), [0, 0, 1, 0, 0], [-1, -1, 1, 0, -1])
        assert smoothing_bandwidth(tiny[0]) == 5e-324
        assert_array_equal(tiny[0] < smoothed_threshold(*tiny), tiny[0] < choose_threshold(*tiny))


def test_smoothed_threshold_ignores_a_lone_spike():
    """The exact rule follows three validation samples onto a spike; the smoothed one stays off it.

    Outliers below 0.45 and right answers above, except three outliers at
    0.78-0.80 with only two right answers (0.55, 0.65) below them: rejecting
    below 0.81 is right on 38 of these 40 samples, one more than below 0.5,
    but a threshold a little above 0.81 would reject the 18 right answers at
    0.82-0.99.
    """
    outliers = list(np.linspace(0.05, 0.45, 17)) + [0.78, 0.79, 0.80]
    right = [0.55, 0.65] + list(np.linspace(0.82, 0.99, 18))
    confidence = np.array(outliers + right)
    truth = np.r_[np.full(20, -1), np.zeros(20, dtype=int)]
    predicted = np.zeros(40, dtype=int)
    assert choose_threshold(confidence, predicted, truth) == pytest.approx(0.81)
    assert 0.45 < smoothed_threshold(confidence, predicted, truth) < 0.7


def test_choose_threshold_tie_rule_takes_the_lowest_plateau_midpoint():
    # Sorted: 0.1 outlier, 0.2 outlier, 0.4 right, 0.6 outlier, 0.7 outlier, 0.9 right.
    # Right answers: reject none 2, reject <=0.1: 3, <=0.2: 4, <=0.4: 3, <=0.6: 4, <=0.7: 5,
    # all: 4. Best is rejecting up to 0.7: threshold midway between 0.7 and 0.9.
    confidence = [0.9, 0.1, 0.6, 0.4, 0.2, 0.7]
    predicted = [0, 0, 1, 1, 1, 0]
    truth = [0, -1, -1, 1, -1, -1]
    assert choose_threshold(confidence, predicted, truth) == pytest.approx(0.8)
    # Now 0.7 is a right prediction. Right answers: 3, 4, 5, 4, 5, 4, 3: two plateaus of 5,
    # (0.2, 0.4] and (0.6, 0.7]; the lower one wins, at its midpoint 0.3.
    truth = [0, -1, -1, 1, -1, 0]
    assert choose_threshold(confidence, predicted, truth) == pytest.approx(0.3)


def test_choose_threshold_unbounded_plateaus():
    # All predictions right and no outlier: rejecting nothing is best.
    assert choose_threshold([0.2, 0.5], [0, 1], [0, 1]) == -np.inf
    # Nothing ever right: every threshold ties, the lowest interval is unbounded below.
    assert choose_threshold([0.2, 0.5], [0, 0], [1, 1]) == -np.inf
    # Only outliers: rejecting everything is strictly best.
    assert choose_threshold([0.2, 0.5], [0, 0], [-1, -1]) == np.inf
    assert accuracy_with_rejection([0.2, 0.5], [0, 0], [-1, -1], np.inf) == 1.0


def test_choose_threshold_midpoint_of_adjacent_floats_stays_in_interval():
    low = 0.5
    high = np.nextafter(low, 1.0)
    threshold = choose_threshold([low, high], [0, 0], [-1, 0])
    assert low < threshold <= high


@pytest.mark.parametrize(
    "args, match",
    [
        (([], [], []), r"are empty"),
        (([0.1, 0.2], [0], [0, 0]), r"same length"),
        (([0.1, np.nan], [0, 0], [0, 0]), r"confidence has 1 NaN or infinite"),
        (([[0.1]], [0], [0]), r"confidence must be 1-D"),
        (([0.1], [0.5], [0]), r"predicted must hold integer labels"),
        (([0.1], [0], [-3]), r"truth has values below -1"),
        ((["a"], [0], [0]), r"confidence must hold real numbers"),
    ],
)
@pytest.mark.parametrize("rule", [choose_threshold, smoothed_threshold])
def test_threshold_rules_reject_bad_input(rule, args, match):
    with pytest.raises(ValueError, match=match):
        rule(*args)


def test_accuracy_with_rejection_rejects_nan_threshold():
    with pytest.raises(ValueError, match="threshold is NaN"):
        accuracy_with_rejection([0.5], [0], [0], float("nan"))
    with pytest.raises(ValueError, match="threshold must be a real number"):
        accuracy_with_rejection([0.5], [0], [0], "0.5")


# ---------------------------------------------------------------- outlier_auroc


@pytest.mark.parametrize("seed", range(10))
def test_outlier_auroc_matches_pairwise_count(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    confidence = np.round(rng.random(n), 1)  # many ties
    truth = rng.integers(-1, 2, size=n)
    truth[0], truth[1] = -1, 0
    positive = confidence[truth >= 0]
    negative = confidence[truth == -1]
    above = (positive[:, None] > negative[None]).sum()
    tied = (positive[:, None] == negative[None]).sum()
    pairs = above + 0.5 * tied
    expected = pairs / (positive.size * negative.size)
    assert outlier_auroc(confidence, truth) == pytest.approx(expected, rel=1e-12)


def test_outlier_auroc_is_nan_with_one_group():
    assert math.isnan(outlier_auroc([0.1, 0.2], [0, 1]))
    assert math.isnan(outlier_auroc([0.1, 0.2], [-1, -1]))


# ---------------------------------------------------------------- evaluate


def _hand_task():
    """Ten samples, two classes: seeds 0 and 1, validation 2 and 3, evaluation 4..9."""
    truth = np.array([0, 1, 0, -1, 0, 0, 1, 1, -1, -1])
    seed_mask = np.zeros(10, dtype=bool)
    seed_mask[:2] = True
    return NoisyTask(
        indices=np.arange(10), y=np.where(seed_mask, truth, -1), truth=truth,
        seed_mask=seed_mask, validation=(np.array([2, 3]), truth[[2, 3]]),
        evaluation=np.arange(4, 10), classes=np.array([3, 8]), noise_ratio=0.375,
        label_ratio=0.2, n_pool=10,
    )


def test_evaluate_on_a_hand_worked_example():
    task = _hand_task()
    predicted = np.array([0, 1, 0, 1, 0, 1, 1, 1, 0, 1])
    confidence = np.array([1.0, 1.0, 0.9, 0.3, 0.95, 0.7, 0.65, 0.5, 0.8, 0.4])
    distributions = np.eye(2)[predicted] * 0.6 + 0.2
    # Validation: position 2 (class 0, predicted 0, conf 0.9) and 3 (outlier, conf 0.3).
    # Reject none: 1 right; reject conf <= 0.3: 2 right; reject all: 1 right.
    # So o_tau = (0.3 + 0.9) / 2 = 0.6.
    # Evaluation (positions 4..9), truth 0, 0, 1, 1, -1, -1:
    #   4: conf 0.95 kept, predicts 0     -> right
    #   5: conf 0.70 kept, predicts 1     -> wrong
    #   6: conf 0.65 kept, predicts 1     -> right
    #   7: conf 0.50 rejected (-1)        -> wrong (its argmax 1 was right)
    #   8: conf 0.80 kept, predicts 0     -> wrong (an outlier)
    #   9: conf 0.40 rejected (-1)        -> right
    # accuracy 3/6; in-class argmax accuracy (4, 5, 6, 7) 3/4;
    # AUROC: in-class {0.95, 0.7, 0.65, 0.5} over outliers {0.8, 0.4}: 2 + 1 + 1 + 1 = 5 of 8.
    # In hindsight, from the lowest up (0.4 outlier, 0.5 right, 0.65 right, 0.7 wrong, 0.8 outlier,
    # 0.95 right): rejecting 0.4 alone gives 4 right of 6; rejecting 0.5 too 3, up to 0.8 3, all 2.
    result = evaluate(task, distributions, confidence)
    assert result["outlier_threshold"] == pytest.approx(0.6)
    assert result["validation_accuracy"] == 1.0
    assert result["accuracy"] == pytest.approx(0.5)
    assert result["in_class_accuracy"] == pytest.approx(0.75)
    assert result["outlier_auroc"] == pytest.approx(0.625)
    assert result["best_threshold_accuracy"] == pytest.approx(4 / 6)
    assert result["n_evaluated"] == 6


def test_evaluate_defaults_confidence_to_the_row_maximum():
    y_all = _pool(0)
    task = make_noisy_task(y_all, 4, label_ratio=0.05, noise_ratio=0.3, random_state=0)
    rng = np.random.default_rng(0)
    distributions = rng.dirichlet(np.ones(4), size=task.n_samples)
    assert evaluate(task, distributions) == evaluate(task, distributions, distributions.max(axis=1))


def test_evaluate_perfect_method_scores_one():
    task = make_noisy_task(_pool(5), 6, label_ratio=0.05, noise_ratio=0.5, random_state=0)
    distributions = np.eye(6)[np.maximum(task.truth, 0)] * (task.truth >= 0)[:, None]
    result = evaluate(task, distributions)
    assert result["accuracy"] == 1.0 and result["outlier_auroc"] == 1.0
    assert result["n_evaluated"] == task.evaluation.size


def test_evaluate_rejects_outputs_that_do_not_match_the_task():
    task = _hand_task()
    good = np.full((10, 2), 0.5)
    with pytest.raises(ValueError, match=r"shape \(9, 2\) but the task needs \(10, 2\)"):
        evaluate(task, good[:9])
    with pytest.raises(ValueError, match=r"label_distributions has shape \(10, 3\)"):
        evaluate(task, np.full((10, 3), 0.3))
    with pytest.raises(ValueError, match=r"confidence has shape \(9,\)"):
        evaluate(task, good, np.ones(9))
    with pytest.raises(ValueError, match="NaN or infinite"):
        evaluate(task, np.where(np.eye(10, 2) > 0, np.nan, 0.5))
    with pytest.raises(ValueError, match="task must be a NoisyTask"):
        evaluate({"indices": []}, good)
