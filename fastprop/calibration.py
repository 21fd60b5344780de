"""The final confidence as a probability, fitted on the validation set, with three graph signals.

FastProp's final confidence ranks samples well (it is what the outlier
threshold cuts), but it is not a probability: on the levers tasks with 30%
outliers and 1% seeds its mean over the evaluation samples is 0.71-0.77 where
57-68% of their most probable classes are right. With a validation set,
logistic fits replace it, before the outlier threshold is chosen on the
result:

1. :func:`ranking_with_graph_signals`, twice:
   ``expit(a * logit(confidence) + b * z_reach + e * z_density [+ g *
   z_outliers] + d)``, ``z`` standardised logs of signals of the graph that
   the confidence, judged sample by sample, does not see
   (:mod:`fastprop.graph_signals`): the in-class reach (how much of a short
   random walk from a sample ends on a seed or on one of the validation
   set's in-class samples, each of those left out of its own; a region none
   of them reaches is an unseeded cluster more often than not), the local
   density (the mean similarity to the nearest neighbours; a sample far from
   every other is an outlier more often than not) and, when the validation
   set holds outliers, *their* reach (each left out of its own: outliers
   come in clusters of classes nobody seeded, and a known one marks its
   cluster), pulled towards ``(1, 0, ...,
   0)`` by a ridge: the validation set says how much each adds on this
   task. One fit, ``r``, is of whether each validation sample's most
   probable class is its truth (an outlier's never is; ridge
   :data:`RIGHT_L2`), the other, ``q``, of whether it is in-class at all
   (:data:`IN_CLASS_L2`; left out when the validation set holds no outlier, or
   nothing else). Their mean ranks: ``(r + q) / 2 < 1/2`` is
   ``P(outlier) > P(right)``, where rejecting a sample pays (an in-class
   sample of a wrong class is wrong whether it is rejected or not).
2. :func:`fit_calibration`: Platt scaling of that mean to the probability of a
   right label, ``expit(slope * logit(p) + intercept)``, pulled towards the
   identity by :data:`CALIBRATION_L2`.

What was fitted is kept as a :class:`ConfidenceMap`, which new points go
through too, with their own graph signals (:mod:`fastprop.prediction`).

Why two fits: where in-class accuracy is low (many classes, one or two seeds
each) "right" is mostly about *which* known class, which the graph signals do
not see, so a fit of "right" alone gives them less weight than outliers call
for (the seeds' reach on HWU64 with 50 intents, 23% outliers: 0.0-0.5 against
0.3-0.9 for "in-class" under the same ridge); "in-class" alone ranks outliers
best but drops what the confidence says about the label, and loses accuracy
where in-class accuracy is high (bench/RESULTS.md).

Measured (bench/RESULTS.md; three data sets, 0.5 / 1 / 5% seeds, 0-50%
outliers, 5 task seeds): step 2 alone took the expected calibration error
from 0.110 / 0.087 / 0.091 to 0.068 / 0.050 / 0.027 on average (0.106 ->
0.048 with 50 intents) and left the ranking as it was; both steps with
``r`` alone gained +0.58 / +0.77 / +0.85 points of accuracy a cell with
outliers over the uncalibrated confidence, and ``q`` then added +0.42 /
-0.01 / +0.25 points a cell (-0.14 in a second draw of the 1% fits), +0.35
with 50 intents and +0.19 to +1.07 with 15-60 intents, outlier AUROC +0.29 /
+0.42 / +0.34 (+1.5 with 50 intents: HWU64 73.4 -> 76.8 at 23% outliers),
the calibration error within 0.2 points of the same. Choosing the threshold
on the result (its smoothing on the probability scale) gained +0.13 / +0.01
/ +0.43 points a cell at the model's own threshold. The validation
outliers' reach as a third signal of both fits then gained +0.17 / +0.44 /
+1.06 points a cell with outliers at 0.5 / 1 / 5% seeds, outlier AUROC
+0.43 / +0.90 / +1.50; with 50 intents +1.33 / +1.60 / +1.59 points, AUROC
+2.57 / +3.51 / +3.45 (in the "in-class" fit alone: +0.23 points and +0.76
AUROC at 1%); on the held-out LSA embedding -0.30 (a tie) with 30-32 intents
and +1.39 with 50. The validation set's in-class samples as sources of the
reach next to the seeds (one signal still: no weight more for ~30-130
validation samples to set) then gained +0.31 / +0.16 / +0.15 points a cell,
AUROC +0.44 / +0.38 / +0.19, +0.77 / AUROC +0.93 with 50 intents at 1%
seeds, and on the held-out sets +0.63 (LSA), +0.29 (LSA, 50 intents), +0.09
(digits); as a fourth signal of its own it gained less (+0.10 / +0.35 / +0.14,
+0.37 with 50 intents).
"""

import numpy as np
from scipy.special import expit, log_expit

from .linear import feature_spread

#: Ridge of ``(slope - 1, intercept)`` added to the validation samples' summed
#: log-loss. Measured 0.01 / 0.1 / 1 / 2 / 3 / 10: mean calibration error over
#: 44 cells 0.061 / 0.060 / 0.054 / 0.052 / 0.051 / 0.056 (0.5% seeds, ~27
#: validation samples, best at 3; 5% seeds, ~270, at 0.1-1).
CALIBRATION_L2 = 2.0
#: The identity map's ``(slope, intercept)``.
_IDENTITY = np.array([1.0, 0.0])
#: Confidences are clipped to ``[EDGE, 1 - EDGE]`` before their log-odds are taken.
EDGE = 1e-6
#: Newton steps at most; the fit stops when a step moves no parameter by more than :data:`STEP_TOL`.
MAX_STEPS = 100
STEP_TOL = 1e-12
#: Step halvings of one Newton step at most (the penalised loss is convex: a halving always helps).
MAX_HALVINGS = 30
#: Ridge of the "right" fit's ``(slope, signal weights, intercept)`` towards ``(1, 0, ..., 0)``
#: (:func:`ranking_with_graph_signals`). Measured 2 / 5 / 10 with reach alone (bench/RESULTS.md): the
#: weaker ones let the slope leave 1 where ~30-50 validation samples cannot tell, and reach, a poor
#: ranker on MNIST, took over there (outlier AUROC -3 to -5 points). 3 / 10 / 30 on the density's
#: weight, points a cell over reach alone: +0.41 / +0.35 / +0.36 at 0.5% seeds, +0.57 / +0.65 / +0.37
#: at 1%, +0.13 / +0.23 / +0.14 at 5%, -0.18 / -0.06 / +0.03 with 50 intents.
RIGHT_L2 = 10.0
#: Ridge of the "in-class" fit, the same way. Offline on captured fits (bench/RESULTS.md), 1 / 3 with
#: the right fit's 10: points a cell with outliers +0.05 / +0.42 at 0.5% seeds, -0.04 / -0.01 at 1%,
#: +0.38 / +0.25 at 5%, +0.34 / +0.51 with 50 intents; outlier AUROC at 1% +0.62 / +0.42, with 50
#: intents +2.2 / +1.8.
IN_CLASS_L2 = 3.0
#: The sign of each signal's weight in both fits, in :func:`calibrate_on_validation`'s order (0: either):
#: the in-class reach raises the probability of a right, in-class label, the validation outliers'
#: reach lowers it, by construction (:func:`ranking_with_graph_signals`); the local density goes either
#: way (unseeded clusters can be denser than the known classes). Measured against free signs
#: (bench/RESULTS.md): accuracy +0.31 / +0.16 / +0.00 points a cell with outliers at 0.5 / 1 / 5% seeds,
#: +0.07 with 50 intents, outlier AUROC +0.89 / +0.39 / +0.03 / +0.30; the density held >= 0 too:
#: +0.30 / +0.24 / -0.07 / -0.22.
SIGNAL_SIGNS = (1.0, 0.0, -1.0)


def log_odds(confidence):
    """``log(c / (1 - c))`` of the confidences clipped to ``[EDGE, 1 - EDGE]``."""
    clipped = np.clip(np.asarray(confidence, dtype=np.float64), EDGE, 1.0 - EDGE)
    return np.log(clipped) - np.log1p(-clipped)


def logistic_map_loss(params, design, correct, prior, ridge):
    """The penalised loss :func:`fit_logistic_map` minimises at ``params``.

    The summed log-loss of ``expit(design @ params)`` against ``correct``,
    plus ``sum(ridge / 2 * (params - prior)^2)``.
    """
    score = design @ params
    log_loss = -np.sum(np.where(correct, log_expit(score), log_expit(-score)))
    return log_loss + 0.5 * np.sum(ridge * (params - prior) ** 2)


def fit_logistic_map(design, correct, prior, ridge):
    """Penalised logistic regression of ``correct`` on the columns of ``design``, by Newton's method.

    Parameters
    ----------
    design : ndarray of shape (n, n_params)
    correct : ndarray of bool, shape (n,)
    prior, ridge : ndarray of shape (n_params,)
        Where the ridge pulls each parameter, and how hard.

    Returns
    -------
    ndarray of shape (n_params,)
        The minimum of :func:`logistic_map_loss` (step halving keeps every
        step a decrease; it stops when a step moves no parameter by more than
        :data:`STEP_TOL`, or no halving decreases the loss).
    """
    correct = np.asarray(correct, dtype=bool)
    prior = np.asarray(prior, dtype=np.float64)
    ridge = np.asarray(ridge, dtype=np.float64)
    params = prior.copy()
    loss = logistic_map_loss(params, design, correct, prior, ridge)
    for _ in range(MAX_STEPS):
        probability = expit(design @ params)
        gradient = design.T @ (probability - correct) + ridge * (params - prior)
        hessian = (design * (probability * (1.0 - probability))[:, None]).T @ design + np.diag(ridge)
        step = np.linalg.solve(hessian, gradient)
        for _ in range(MAX_HALVINGS):
            trial = params - step
            trial_loss = logistic_map_loss(trial, design, correct, prior, ridge)
            if trial_loss <= loss:
                break
            step = 0.5 * step
        else:
            break  # no decrease left in float64: at the minimum
        params, loss = trial, trial_loss
        if np.abs(step).max() <= STEP_TOL:
            break
    return params


def fit_calibration(confidence, correct):
    """Fit the map from confidence to the probability that a sample's most probable class is right.

    Parameters
    ----------
    confidence : ndarray of shape (n,)
        The validation samples' confidence, in [0, 1].
    correct : ndarray of bool, shape (n,)
        Whether each one's most probable class is its truth.

    Returns
    -------
    (slope, intercept) or None
        Minimising the validation samples' summed log-loss of
        ``expit(slope * logit(confidence) + intercept)`` plus
        ``CALIBRATION_L2 / 2 * ((slope - 1)^2 + intercept^2)``
        (:func:`fit_logistic_map`); None when the slope is not positive, so that no increasing map fits the
        validation set.

    Examples
    --------
    >>> import numpy as np
    >>> slope, intercept = fit_calibration(np.array([0.9, 0.8, 0.9, 0.7]), np.array([True, False, True, False]))
    >>> bool(0 < slope < 1)  # the confidences claim more than half of them being right: shrunk
    True
    """
    odds = log_odds(confidence)
    design = np.column_stack([odds, np.ones_like(odds)])
    slope, intercept = fit_logistic_map(design, correct, _IDENTITY, np.full(2, CALIBRATION_L2))
    return (float(slope), float(intercept)) if slope > 0 else None


def calibrated(confidence, slope, intercept):
    """``expit(slope * logit(confidence) + intercept)``: the map :func:`fit_calibration` fits."""
    return expit(slope * log_odds(confidence) + intercept)


class LogStandardisation:
    """``(log(max(values, floor)) - mean) / spread``, with the three fitted over the unlabeled samples.

    A value of 0 (a component no seed reaches, a vertex without edges) is
    read as ``floor``, the smallest positive value of the unlabeled samples:
    the least of all, without a ``log(0)`` whose size would squash everyone
    else's spread in the standardisation. A signal that does not vary over
    them (up to rounding: :func:`fastprop.linear.feature_spread`, e.g. the
    density of a graph whose weights are all equal) standardises to 0 everywhere.

    Parameters
    ----------
    floor, mean, spread : float
    """

    def __init__(self, floor, mean, spread):
        self.floor, self.mean, self.spread = float(floor), float(mean), float(spread)

    @classmethod
    def fitted(cls, values, unlabeled):
        """The standardisation of ``log(values)`` over the ``unlabeled`` samples."""
        of_unlabeled = values[unlabeled]
        positive = of_unlabeled[of_unlabeled > 0]
        floor = positive.min() if positive.size else 1.0
        logged = np.log(np.maximum(of_unlabeled, floor))
        return cls(floor, logged.mean(), feature_spread(logged))

    def __call__(self, values):
        if not self.spread > 0:
            return np.zeros(np.shape(values))
        return (np.log(np.maximum(values, self.floor)) - self.mean) / self.spread


def ranking_with_graph_signals(confidence, signals, indices, target, ridge, signs):
    """The validation set's logistic fit of ``target`` on the confidence's log-odds and graph signals.

    ``P(target) = expit(slope * logit(c) + signals @ weights + intercept)``,
    pulled towards ``(1, 0, ..., 0)`` by ``ridge``: the validation set says
    how much each signal adds to the confidence's ranking on this task (the
    in-class reach: on HWU64 with 50 intents much, on MNIST little). What
    the two reaches say is known beforehand (:data:`SIGNAL_SIGNS`: more
    in-class reach, more likely right and in-class; more reach from known
    outliers, less); a weight the fit gives the other sign is noise of a few
    validation samples (with 3-6 outliers among ~40 it happened in 2 of 5
    HWU64 tasks at 0.5% seeds, outlier AUROC 79.0 -> 74.2 and 70.8 -> 65.8),
    so it is held at 0 at the constrained minimum (:func:`signed_logistic_map`).

    Parameters
    ----------
    confidence : ndarray of shape (n_samples,)
    signals : ndarray of shape (n_samples, n_signals)
        Standardised (:class:`LogStandardisation`).
    indices : ndarray of int
        The validation samples.
    target : ndarray of bool, shape (indices.size,)
        What is fitted: whether each one's most probable class is right, or
        whether it belongs to a known class.
    ridge : float
        :data:`RIGHT_L2` or :data:`IN_CLASS_L2`.
    signs : sequence of {1, 0, -1}, one per signal
        The sign each signal's weight must have (0: either).

    Returns
    -------
    ndarray of shape (n_signals + 2,) or None
        ``(slope, weights..., intercept)``; None when the slope is not positive.
    """
    design = np.column_stack([log_odds(confidence[indices]), signals[indices], np.ones(indices.size)])
    prior = np.zeros(design.shape[1])
    prior[0] = 1.0
    params = signed_logistic_map(design, target, prior, np.full(prior.size, ridge), np.r_[0.0, signs, 0.0])
    return params if params[0] > 0 else None


def signed_logistic_map(design, correct, prior, ridge, signs):
    """:func:`fit_logistic_map` with ``signs[j] * params[j] >= 0`` wherever ``signs[j]`` is not 0.

    An active set: a parameter the fit gives the wrong sign is held at 0 and
    the rest fitted again; one held at 0 whose loss would fall by moving it
    its allowed way (the gradient there says so) is let go again. The loss is
    convex and the constraints few, so this ends at the constrained minimum
    (the prior must satisfy them: every constrained parameter's prior is 0).
    """
    free = np.ones(design.shape[1], dtype=bool)
    for _ in range(2 ** int(np.count_nonzero(signs)) + 1):
        params = np.zeros(design.shape[1])
        params[free] = fit_logistic_map(design[:, free], correct, prior[free], ridge[free])
        wrong = signs * params < 0
        if wrong.any():
            free &= ~wrong
            continue
        gradient = design.T @ (expit(design @ params) - correct) + ridge * (params - prior)
        wanted = ~free & (signs * gradient < 0)  # moving it its allowed way lowers the loss
        if not wanted.any():
            return params
        free |= wanted
    return params


def ranked(odds, signals, params):
    """``expit(slope * odds + signals @ weights + intercept)`` for the ``params`` of a ranking fit.

    ``odds`` is the confidence's :func:`log_odds`, taken once for every fit.
    """
    return expit(params[0] * odds + signals @ params[1:-1] + params[-1])


class ConfidenceMap:
    """The calibration :func:`calibrate_on_validation` fitted, for any sample: new points too.

    ``calibrated(mean over fits of ranked(logit(c), standardised signals),
    *calibration)``.

    Parameters
    ----------
    standardisations : list of LogStandardisation
        One a signal, in the fits' order.
    fits : list of ndarray
        The ``(slope, weights..., intercept)`` of each ranking fit ("right", then "in-class" when made).
    calibration : (slope, intercept)
        The Platt map of their mean.
    """

    def __init__(self, standardisations, fits, calibration):
        self.standardisations = list(standardisations)
        self.fits = [np.asarray(fit, dtype=np.float64) for fit in fits]
        self.calibration = calibration

    def __call__(self, confidence, signal_values):
        """The calibrated confidence of samples of ``confidence`` whose raw signals are ``signal_values``.

        Parameters
        ----------
        confidence : ndarray of shape (n,)
            The method's confidence (before calibration).
        signal_values : sequence of ndarray of shape (n,)
            Each signal's value (before standardisation), in the fits' order.
        """
        signals = np.column_stack([standardise(values)
                                   for standardise, values in zip(self.standardisations, signal_values)])
        odds = log_odds(confidence)
        return calibrated(np.mean([ranked(odds, signals, fit) for fit in self.fits], axis=0), *self.calibration)

    def description(self):
        """``{"right": params, "in_class": params or None, "calibration": (slope, intercept)}``, in floats."""
        described = [tuple(float(value) for value in fit) for fit in self.fits]
        return {"right": described[0], "in_class": described[1] if len(described) > 1 else None,
                "calibration": self.calibration}


def calibrate_on_validation(confidence, predicted, unlabeled, validation, reach, density, from_outliers=None):
    """A fit's final confidence re-ranked with graph signals and calibrated, both on its validation set.

    Two fits of :func:`ranking_with_graph_signals` on the in-class reach, the
    local density and, when the validation set holds outliers, their own
    reach (a ridge each: only what the validation set clearly shows moves
    the ranking): ``r``, the probability that a sample's most probable
    class is right, and ``q``, the probability that it is in-class (left out
    when every validation sample is in-class or none is: ``r`` alone ranks).
    Their mean ranks: ``(r + q) / 2 < 1/2`` is ``P(outlier) > P(right)``, where
    rejecting a sample pays. :func:`fit_calibration` then maps it to the
    probability of a right label (the calibration's own ridge). The outlier
    threshold is chosen afterwards, on the result: the validation rule's
    smoothing (:func:`fastprop.threshold.smoothed_threshold`) then works on
    the probability scale (measured in bench/RESULTS.md).

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
    reach : ndarray of shape (n_samples,)
        :func:`fastprop.graph_signals.in_class_reach`.
    density : ndarray of shape (n_samples,)
        :func:`fastprop.graph_signals.local_density`.
    from_outliers : ndarray of shape (n_samples,) or None, default=None
        :func:`fastprop.graph_signals.left_out_reach` from the validation set's
        outliers: a third signal of both fits when given (None when the set
        holds no outlier).

    Returns
    -------
    confidence : ndarray of shape (n_samples,)
    confidence_map : ConfidenceMap or None
        What was fitted (its ``description()``: ``{"right": (slope, reach
        weight, density weight[, known outliers' reach weight], intercept),
        "in_class": the same or None when skipped, "calibration": (slope,
        intercept)}``); None, and nothing changed, when a fit finds no
        increasing map of the confidence.
    """
    indices, truth = validation
    correct = predicted[indices] == truth
    in_class = truth >= 0
    measured = [reach, density] if from_outliers is None else [reach, density, from_outliers]
    signs = SIGNAL_SIGNS[: len(measured)]
    standardisations = [LogStandardisation.fitted(values, unlabeled) for values in measured]
    signals = np.column_stack([standardise(values) for standardise, values in zip(standardisations, measured)])
    fits = [ranking_with_graph_signals(confidence, signals, indices, correct, RIGHT_L2, signs)]
    if in_class.any() and not in_class.all():
        fits.append(ranking_with_graph_signals(confidence, signals, indices, in_class, IN_CLASS_L2, signs))
    if any(fit is None for fit in fits):
        return confidence, None
    odds = log_odds(confidence)
    score = np.mean([ranked(odds, signals, fit) for fit in fits], axis=0)
    calibration = fit_calibration(score[indices], correct)
    if calibration is None:
        return confidence, None
    confidence[unlabeled] = calibrated(score[unlabeled], *calibration)
    return confidence, ConfidenceMap(standardisations, fits, calibration)
