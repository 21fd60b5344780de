"""The final confidence as a probability, fitted on the validation set (Platt scaling).

FastProp's final confidence ranks samples well (it is what the outlier
threshold cuts), but it is not a probability: on the levers tasks with 30%
outliers and 1% seeds its mean over the evaluation samples is 0.71-0.77 where
57-68% of their most probable classes are right. With a validation set, a
two-parameter logistic map of its log-odds,

    P(most probable class right) = expit(slope * logit(confidence) + intercept),

is fitted to whether each validation sample's most probable class is its
truth (an outlier's never is), and applied to every unlabeled sample's
confidence before the outlier threshold is chosen on it. For ``slope > 0``
the map is increasing, so the ranking and the outlier AUROC stay as they
were. The validation rule's smoothing then works on the probability
scale: the model's own threshold scored +0.13 / +0.01 / +0.43 points a cell
at 0.5 / 1 / 5% seeds over the same threshold chosen before the map (up to
+2.2 at 50% outliers with 5% seeds; no cell below its spread). The two parameters are pulled towards the identity
(slope 1, intercept 0) by a ridge of :data:`CALIBRATION_L2` on the summed
log-loss, so that a validation set of 20-60 samples cannot drive them far.
Measured (bench/RESULTS.md; three data sets, 0.5 / 1 / 5% seeds, 0-50%
outliers, 5 task seeds): expected calibration error 0.110 / 0.087 / 0.091 ->
0.068 / 0.050 / 0.027 on average (0.106 -> 0.048 with 50 intents), the
protocol's accuracy within 0.07 points in every cell.
"""

import numpy as np
from scipy.special import expit, log_expit

#: Ridge of ``(slope - 1, intercept)`` added to the validation samples' summed
#: log-loss. Measured 0.01 / 0.1 / 1 / 2 / 3 / 10: mean calibration error over
#: 44 cells 0.061 / 0.060 / 0.054 / 0.052 / 0.051 / 0.056 (0.5% seeds, ~27
#: validation samples, best at 3; 5% seeds, ~270, at 0.1-1).
CALIBRATION_L2 = 2.0
#: Confidences are clipped to ``[EDGE, 1 - EDGE]`` before their log-odds are taken.
EDGE = 1e-6
#: Newton steps at most; the fit stops when a step moves neither parameter by more than :data:`STEP_TOL`.
MAX_STEPS = 100
STEP_TOL = 1e-12
#: Step halvings of one Newton step at most (the penalised loss is convex: a halving always helps).
MAX_HALVINGS = 30


def log_odds(confidence):
    """``log(c / (1 - c))`` of the confidences clipped to ``[EDGE, 1 - EDGE]``."""
    clipped = np.clip(np.asarray(confidence, dtype=np.float64), EDGE, 1.0 - EDGE)
    return np.log(clipped) - np.log1p(-clipped)


def calibration_loss(params, odds, correct):
    """The penalised loss :func:`fit_calibration` minimises, at ``params = (slope, intercept)``.

    The validation samples' summed log-loss of ``expit(slope * odds +
    intercept)`` against ``correct``, plus ``CALIBRATION_L2 / 2 * ((slope -
    1)^2 + intercept^2)``.
    """
    slope, intercept = params
    score = slope * odds + intercept
    log_loss = -np.sum(np.where(correct, log_expit(score), log_expit(-score)))
    return log_loss + 0.5 * CALIBRATION_L2 * ((slope - 1.0) ** 2 + intercept**2)


def fit_calibration(confidence, correct):
    """Fit the map from confidence to the probability that a sample's most probable class is right.

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        The validation samples' final confidence, in [0, 1].
    correct : ndarray of bool, shape (n,)
        Whether each one's most probable class is its truth.

    Returns
    -------
    (slope, intercept) or None
        Minimising :func:`calibration_loss` (Newton's method with step
        halving); None when the slope is not positive, so that no increasing
        map fits the validation set.

    Examples
    --------
    >>> import numpy as np
    >>> slope, intercept = fit_calibration(np.array([0.9, 0.8, 0.9, 0.7]), np.array([True, False, True, False]))
    >>> bool(0 < slope < 1)  # the confidences claim more than half of them being right: shrunk
    True
    """
    odds = log_odds(confidence)
    correct = np.asarray(correct, dtype=bool)
    design = np.column_stack([odds, np.ones_like(odds)])
    params = np.array([1.0, 0.0])
    loss = calibration_loss(params, odds, correct)
    for _ in range(MAX_STEPS):
        probability = expit(design @ params)
        gradient = design.T @ (probability - correct) + CALIBRATION_L2 * (params - [1.0, 0.0])
        hessian = (design * (probability * (1.0 - probability))[:, None]).T @ design + CALIBRATION_L2 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        for _ in range(MAX_HALVINGS):
            trial = params - step
            trial_loss = calibration_loss(trial, odds, correct)
            if trial_loss <= loss:
                break
            step = 0.5 * step
        else:
            break  # no decrease left in float64: at the minimum
        params, loss = trial, trial_loss
        if np.abs(step).max() <= STEP_TOL:
            break
    slope, intercept = float(params[0]), float(params[1])
    return (slope, intercept) if slope > 0 else None


def calibrated(confidence, slope, intercept):
    """``expit(slope * logit(confidence) + intercept)``: the map :func:`fit_calibration` fits."""
    return expit(slope * log_odds(confidence) + intercept)


def calibrate_on_validation(confidence, predicted, unlabeled, validation):
    """A fit's final confidence mapped by the calibration its validation set gives.

    The outlier threshold is chosen afterwards, on the mapped confidence:
    the validation rule's smoothing (:func:`fastprop.threshold.smoothed_threshold`)
    then works on the probability scale (measured in bench/RESULTS.md).

    Parameters
    ----------
    confidence : ndarray of shape (n_samples,)
        The final confidence; its ``unlabeled`` entries are replaced in place
        (the seeds keep 1, known outliers 0).
    predicted : ndarray of shape (n_samples,)
        Every sample's most probable class.
    unlabeled : ndarray of int
        The samples whose confidence is mapped.
    validation : (indices, encoded truth)
        Truth is a class index, or -1 for an outlier.

    Returns
    -------
    confidence : ndarray of shape (n_samples,)
    calibration : (slope, intercept) or None
        None, and nothing mapped, when :func:`fit_calibration` finds no increasing map.
    """
    indices, truth = validation
    calibration = fit_calibration(confidence[indices], predicted[indices] == truth)
    if calibration is not None:
        confidence[unlabeled] = calibrated(confidence[unlabeled], *calibration)
    return confidence, calibration
