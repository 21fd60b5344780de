"""Choosing the outlier threshold ``o_tau`` on samples of known truth.

Yang et al. (ECCV 2020, Sec. 4.1) reject a sample as an outlier when its
confidence is below a threshold ``o_tau`` picked on a small validation set.
This module holds that rule, so that the estimator and the evaluation protocol
share it, the accuracy it maximises, the smoothed version of it that FastProp
uses for its final threshold, and the rule without a validation set.

A prediction is *correct at threshold t* when

- ``confidence >= t`` (accepted) and ``predicted == truth``, or
- ``confidence < t`` (rejected) and ``truth == -1`` (a true outlier).
"""

import numbers
import warnings

import numpy as np
from scipy.special import expit

from ._validation import check_confidence, check_integer, check_scores

__all__ = ["choose_threshold", "smoothed_threshold", "smoothing_bandwidth", "accuracy_with_rejection",
           "automatic_threshold", "otsu_threshold", "OutlierThresholdWarning"]

#: The confidence sources of ``FastProp(confidence=...)``.
CONFIDENCE_SOURCES = ("both", "multiview", "confnet", "random", "global")
#: The thresholds :func:`smoothed_threshold` scores, and how many validation samples it smooths at a time.
SMOOTHING_GRID = np.linspace(0.0, 1.0, 1025)
SMOOTHING_BLOCK = 4096
#: Bandwidths above the largest validation confidence from which :func:`smoothed_threshold` leaves the
#: grid to its "reject everything" end: a ramp there is below ``sigmoid(-30) ~ 1e-13`` (and soon 0).
RAMP_REACH = 30.0
#: :func:`otsu_threshold`'s histogram bins at most.
MAX_OTSU_BINS = 2**20
#: ``outlier_threshold_`` when every unlabeled sample is rejected: above any confidence in [0, 1].
REJECT_ALL = float(np.nextafter(1.0, 2.0))
#: ``"auto"``'s threshold once the provisional classes have made the confidence a blend of class
#: probabilities: below it a sample is more likely an outlier (or mislabelled) than not. Measured
#: against half of Otsu's split on the same fits (bench/RESULTS.md, issue #16).
PROBABILITY_CUT = 0.5
#: Without a validation set (``"auto"``), the share of the reached unlabeled samples of lowest global
#: confidence (``confidence="global"``) first given provisional classes; the builds after choose the
#: rest (:func:`fastprop.novelty.refined_confidence`). Half of Otsu's split, the paper's confidence's
#: rule, identified 0.2-1.4% on MNIST (five classes, probabilities near 1) where the paper's confidence
#: had 9-17%, and lost 7-20 points at 30-50% outliers. Measured (bench/RESULTS.md, issues #16 / #17;
#: three data sets, 0-50% outliers, 0.5 / 1 / 5% seeds, 5 task seeds) against the paper's confidence:
#: -0.34 / -0.04 / -0.06 points a cell; on 3 task seeds at 1%, 12% / 15% / 20% / 25%: -0.32 / +0.12 / -0.02 / -0.31.
FIRST_IDENTIFIED_SHARE = 0.15
#: ... but none whose global confidence reaches this, the paper's bar for the confident set (Sec. 3.3,
#: ``FastProp(confident_threshold=0.9)``'s default): on separated clusters of one seed each, every sample
#: at 0.999, the lowest share alone gave two of three clusters to provisional classes.
FIRST_IDENTIFIED_BELOW = 0.9
#: From this many classes up, ``"auto"`` with neither a validation set nor an outlier share warns
#: (:func:`warn_if_many_classes`), and counts a sample's two largest known-class probabilities (three
#: from :data:`fastprop.novelty.MOST_CLASSES` up: :func:`fastprop.novelty.known_top`). Measured with no
#: outlier at all (bench/RESULTS.md, issue #16 item 2; sentence embeddings, 5 task seeds a cell),
#: counting the largest alone it rejected 2% of the in-class samples with 15-16 classes, 8-10% with
#: 30-32, 18-20% with 40, 28-30% with 48-60 and 31-34% with 64-77 at 1% seeds; counting the two
#: largest, 10% with 40 (4 points below a validation threshold), and the three largest 14% with 50,
#: 17% with 48 or 60 (12-13% at 5% seeds) and 18-23% with 64-77: 6-9 points below. With self-training's
#: 100 pseudo-labels a class (:func:`fastprop.self_training.pseudo_label_total`): 9-10% with 40, 10-12%
#: with 50, 13-14% with 48 or 60, 14-16% with 64-77, 3-5 points below.
MANY_CLASSES = 40


class OutlierThresholdWarning(UserWarning):
    """``outlier_threshold="auto"`` is used where it was measured to reject many in-class samples.

    Give ``fit`` a validation set, or ``FastProp(outlier_share=...)``; or,
    having decided to keep ``"auto"``, silence it with
    ``warnings.filterwarnings("ignore", category=fastprop.OutlierThresholdWarning)``.
    """


def accuracy_with_rejection(confidence, predicted, truth, threshold):
    """Top-1 accuracy when samples below ``threshold`` are predicted as outliers.

    Parameters
    ----------
    confidence : array_like of shape (n_samples,)
        Finite confidence of each prediction; higher means more reliable.
    predicted : array_like of shape (n_samples,)
        Predicted class index of each sample.
    truth : array_like of shape (n_samples,)
        True class index, or -1 for an outlier (a sample of no known class).
    threshold : float
        Samples with ``confidence < threshold`` are predicted as -1. ``-inf``
        rejects nothing, ``+inf`` rejects everything.

    Returns
    -------
    float
        Fraction of samples whose prediction after rejection equals ``truth``.

    Examples
    --------
    >>> from fastprop.threshold import accuracy_with_rejection
    >>> accuracy_with_rejection([0.9, 0.2, 0.8], [1, 0, 2], [1, -1, 0], threshold=0.5)
    0.6666666666666666
    """
    scores, predicted, truth = check_scores(confidence, predicted, truth)
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, numbers.Real):
        raise ValueError(f"threshold must be a real number, got {threshold!r}.")
    try:
        threshold = float(threshold)
    except OverflowError:  # an integer past float64's range: above or below every confidence
        threshold = np.inf if threshold > 0 else -np.inf
    if np.isnan(threshold):
        raise ValueError("threshold is NaN; pass a real number (-inf rejects nothing).")
    accepted = scores >= threshold
    correct = np.where(accepted, predicted == truth, truth == -1)
    return float(correct.mean())


def choose_threshold(confidence, predicted, truth):
    """Pick the outlier threshold ``o_tau`` that maximises accuracy with rejection.

    The accuracy of :func:`accuracy_with_rejection` only changes when the
    threshold crosses one of the distinct confidence values ``v_1 < ... < v_m``,
    so the candidates are one threshold per gap: below the minimum (reject
    nothing), the midpoints ``(v_k + v_{k+1}) / 2``, and above the maximum
    (reject everything). All ``m + 1`` candidates are scored in
    ``O(n log n)`` with one sort and cumulative sums.

    **Tie rule.** The thresholds that reach the best accuracy form runs of
    adjacent candidates, i.e. intervals ``(v_k, v_l]`` of the real line. The
    lowest such interval (the one that rejects fewest samples) is taken and its
    midpoint ``(v_k + v_l) / 2`` is returned: the threshold farthest from every
    validation sample whose side would change the accuracy. An interval
    unbounded below, where rejecting nothing is optimal, gives ``-inf``; one
    unbounded above (rejecting every sample is strictly best, e.g. when all are
    outliers) gives ``+inf``.

    Parameters
    ----------
    confidence : array_like of shape (n_samples,)
        Finite confidence of each prediction; higher means more reliable.
    predicted : array_like of shape (n_samples,)
        Predicted class index of each sample.
    truth : array_like of shape (n_samples,)
        True class index, or -1 for an outlier.

    Returns
    -------
    float
        The threshold ``o_tau``; predict -1 where ``confidence < o_tau``.

    Examples
    --------
    >>> from fastprop.threshold import choose_threshold
    >>> choose_threshold([0.9, 0.2, 0.3, 0.8], [1, 0, 1, 2], [1, -1, -1, 2])
    0.55
    """
    scores, predicted, truth = check_scores(confidence, predicted, truth)
    order = np.argsort(scores, kind="stable")
    scores = scores[order]
    right_if_accepted = (predicted == truth)[order]
    right_if_rejected = (truth == -1)[order]
    # Last position of each group of equal confidence: the distinct values v_1 < ... < v_m.
    group_end = np.append(np.flatnonzero(np.diff(scores) != 0), scores.size - 1)
    values = scores[group_end]
    # Candidate k (0..m) rejects the k lowest groups.
    accepted_right = np.cumsum(right_if_accepted)[group_end]
    rejected_right = np.cumsum(right_if_rejected)[group_end]
    n_right = np.empty(values.size + 1, dtype=np.int64)
    n_right[0] = accepted_right[-1]
    n_right[1:] = accepted_right[-1] - accepted_right + rejected_right
    best = n_right == n_right.max()
    first = int(np.argmax(best))
    after = np.flatnonzero(~best[first:])
    last = first + int(after[0]) - 1 if after.size else values.size
    # Candidates first..last are the thresholds t with v_first < t <= v_{last+1}.
    if first == 0:
        return -np.inf
    low = values[first - 1]
    if last == values.size:
        return np.inf
    high = values[last]
    with np.errstate(over="ignore"):  # high - low overflows only for ends near +-1.8e308: halved first then
        width = high - low
    middle = low + width / 2 if np.isfinite(width) else low / 2 + high / 2
    # Guard against rounding onto an end of the interval (only for adjacent floats).
    return float(middle) if low < middle <= high else float(high)


def smoothing_bandwidth(confidence):
    """Silverman's rule of thumb on ``confidence``: ``0.9 min(sd, IQR / 1.349) n^(-1/5)``.

    The IQR term is dropped when it is 0 (more than half the values equal);
    0 for fewer than two values or when all are equal.
    """
    confidence = check_confidence(confidence)
    if confidence.size < 2 or confidence.min() == confidence.max():
        return 0.0
    spread = confidence.std(ddof=1)
    low, high = np.quantile(confidence, [0.25, 0.75])
    if high > low:
        spread = min(spread, (high - low) / 1.349)
    return float(0.9 * spread * confidence.size ** -0.2)


def smoothed_threshold(confidence, predicted, truth):
    """The ``o_tau`` that maximises the validation accuracy smoothed over the threshold.

    :func:`choose_threshold` takes the best of a step function that a few
    tens of validation samples draw: where it peaks depends on which
    samples were drawn. Here each sample's step ``1[c_i >= t]`` becomes a
    logistic ramp ``sigmoid((c_i - t) / h)`` of Silverman's bandwidth ``h``
    (:func:`smoothing_bandwidth` of the validation confidences), so the
    accuracy a threshold earns is shared with the thresholds near it, and
    the maximum of the smoothed accuracy

    ``sum_i [sigmoid((c_i - t) / h) (right_i - outlier_i) + outlier_i]``

    is taken on a grid of 1025 thresholds on [0, 1], with ``-inf`` (reject
    nothing) and ``+inf`` (reject everything) as the ends; the lowest of
    equal maxima. With ``h = 0`` (fewer than two samples, or all of one
    confidence) it is :func:`choose_threshold`. The confidence is read on
    [0, 1] (FastProp's and every baseline's).

    Measured against :func:`choose_threshold` as FastProp's final threshold
    (bench/RESULTS.md, issue #16; 5 task seeds, three data sets, 0.5 / 1 / 5%
    seeds, 10-50% outliers): +0.47 points of accuracy on average, 22 of 27
    cells better.

    Parameters
    ----------
    confidence, predicted, truth : array_like of shape (n_samples,)
        As for :func:`choose_threshold`.

    Returns
    -------
    float
    """
    scores, predicted, truth = check_scores(confidence, predicted, truth)
    if scores.min() < 0 or scores.max() > 1:
        raise ValueError(
            "smoothed_threshold reads the confidence on [0, 1] (its grid of thresholds); got values in "
            f"[{float(scores.min())!r}, {float(scores.max())!r}]. Use choose_threshold for scores on another scale."
        )
    bandwidth = smoothing_bandwidth(scores)
    if bandwidth <= 0:
        return choose_threshold(scores, predicted, truth)
    # Accepting sample i instead of rejecting it changes the count of right answers by this much.
    worth = (predicted == truth).astype(np.float64) - (truth == -1)
    keep = worth != 0
    scores, worth = scores[keep], worth[keep]
    smoothed = np.zeros(SMOOTHING_GRID.size)
    for begin in range(0, scores.size, SMOOTHING_BLOCK):
        block = slice(begin, begin + SMOOTHING_BLOCK)
        with np.errstate(over="ignore"):  # a denormal bandwidth: +-inf, whose expit is the step itself
            ramps = expit((scores[None, block] - SMOOTHING_GRID[:, None]) / bandwidth)
        smoothed += ramps @ worth[block]
    # Past the ramps' reach every ramp has underflowed to 0 and the grid would tie with "reject
    # everything"; those thresholds reject every validation sample, which the +inf end says.
    reached = SMOOTHING_GRID <= scores.max(initial=-np.inf) + RAMP_REACH * bandwidth
    candidates = np.r_[-np.inf, SMOOTHING_GRID[reached], np.inf]
    return float(candidates[int(np.argmax(np.r_[worth.sum(), smoothed[reached], 0.0]))])


def otsu_threshold(confidence, n_bins=256):
    """Otsu's split of a confidence histogram on [0, 1].

    The threshold (a bin edge) that maximises the between-class variance of
    the two groups it makes; values outside [0, 1] are not counted.
    """
    n_bins = check_integer("n_bins", n_bins, low=1, high=MAX_OTSU_BINS)
    histogram, edges = np.histogram(check_confidence(confidence), bins=n_bins, range=(0.0, 1.0))
    centres = 0.5 * (edges[1:] + edges[:-1])
    weight_low = np.cumsum(histogram).astype(np.float64)
    weight_high = weight_low[-1] - weight_low
    mass_low = np.cumsum(histogram * centres)
    mean_low = mass_low / np.maximum(weight_low, 1)
    mean_high = (mass_low[-1] - mass_low) / np.maximum(weight_high, 1)
    between = weight_low * weight_high * (mean_low - mean_high) ** 2
    return float(edges[int(np.argmax(between)) + 1])


def automatic_threshold(confidence):
    """The unsupervised o_tau: half of Otsu's split of the unlabeled confidences.

    FastProp's confidence is bimodal whatever the outlier ratio (frozen
    vertices near 1, the rest low), so Otsu's split alone rejects a large
    share of the samples even when none is an outlier. Half of it rejects
    only the clearly unconfident. First measured (3 seeds each, the paper's
    confidence) on Banking77, MNIST and the synthetic mixture: within 0.14
    of a validation-chosen threshold where Otsu's split lost up to 0.47.
    With today's default FastProp it is ``"auto"``'s fallback when no
    provisional class is due (:func:`fitted_threshold`); on the three real
    sets with 5 task seeds it scored 6-15 points below a validation set at
    0% and 50% outliers (bench/RESULTS.md, issue #16).
    With a few samples of known truth, pass ``validation`` to ``fit`` instead.
    """
    confidence = check_confidence(confidence)
    if confidence.size == 0:
        return 0.0
    return 0.5 * otsu_threshold(np.clip(confidence, 0.0, 1.0))


def share_threshold(confidence, share):
    """The threshold below which ``round(share * len(confidence))`` of the confidences lie.

    The lowest ones (fewer where the confidence at the cut is shared by
    several samples: ties are kept); 0 for a share that rounds to none,
    :data:`REJECT_ALL` for one that rounds to all.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    n_rejected = int(round(share * confidence.size))
    if n_rejected == 0:
        return 0.0
    if n_rejected >= confidence.size:
        return REJECT_ALL
    return float(np.partition(confidence, n_rejected)[n_rejected])  # the value sorting would put there


#: ``"auto"``'s final confidence without a validation set (with or without an outlier share), once the
#: provisional classes blended it: ``(1 - w) c + w S c`` with this ``w`` (:func:`smoothed_ranking`).
RANKING_SMOOTHING = 0.4


def smoothed_ranking(walk, confidence, threshold, judged, seeds, known_outliers, smoothing=RANKING_SMOOTHING):
    """The confidence smoothed over the graph once, and the threshold that rejects as many as before.

    ``(1 - smoothing) c + smoothing S c``, ``S`` the walk ``D~^-1 (W + I)``:
    an outlier in a cluster of outliers keeps its low confidence, a sample
    whose neighbours the fit is sure of gains some of theirs. The count is
    kept: the new threshold rejects as many of ``judged`` as ``threshold``
    did (fewer where the smoothed confidence ties at the cut,
    :func:`share_threshold`), the lowest by the smoothed confidence.
    ``"auto"``'s count and its ranking err apart (bench/RESULTS.md, issue
    #16 item 2): the ranking alone moves here. Measured without a
    validation set (three data sets, 5 task seeds, 0-50% outliers):
    +0.11 / +0.08 / +0.20 points a cell at 0.5 / 1 / 5% seeds, every cell
    at 30-50% outliers +0.13 to +0.63, the sentence sets at 10% +0.01 to
    -0.57; outlier AUROC +0.41 to +0.52 a cell; 50 intents +0.18, held-out
    LSA +0.01, digits +0.11; the scale bench's mixture +0.3 / +1.5 / +1.9
    at 10k / 100k / 1M. With the true share given (``FastProp(outlier_share=...)``,
    whose count it keeps as well): +0.09 / +0.13 / +0.21, AUROC +0.42 to
    +0.50. Cut at 0.5 instead (the count moving too) it rejects fewer
    in-class samples with no outlier (+0.3 to +1.0 points there) and
    loses at 10-30%.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
    confidence : ndarray of shape (n,)
    threshold : float
        The threshold on ``confidence``.
    judged : ndarray of int
        The samples the threshold decides (unlabeled, reached).
    seeds, known_outliers : ndarray of int
        Samples whose smoothed confidence is set to 1 and 0.
    smoothing : float, default=RANKING_SMOOTHING

    Returns
    -------
    smoothed : ndarray of shape (n,), in [0, 1]
    threshold : float
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    n_rejected = int(np.count_nonzero(confidence[judged] < threshold))
    smoothed = (1.0 - smoothing) * confidence + smoothing * walk.smooth(confidence[:, None], None, 1)[:, 0]
    smoothed[seeds] = 1.0
    smoothed[known_outliers] = 0.0
    np.clip(smoothed, 0.0, 1.0, out=smoothed)
    if judged.size == 0:
        return smoothed, threshold
    return smoothed, share_threshold(smoothed[judged], n_rejected / judged.size)


def warn_if_many_classes(n_classes, stacklevel):
    """Emit :class:`OutlierThresholdWarning` when ``"auto"`` runs unaided on :data:`MANY_CLASSES` or more.

    For a fit whose threshold is ``"auto"`` with neither a validation set
    nor an outlier share: with many classes (and a few seeds a class) the
    in-class samples split between similar classes, the provisional classes
    are built on them and ``"auto"`` rejects about as many in-class samples
    as it mislabels, whether outliers exist or not.

    Parameters
    ----------
    n_classes : int
        The known classes of the fit.
    stacklevel : int
        Passed to :func:`warnings.warn`, counted from the caller.
    """
    if n_classes < MANY_CLASSES:
        return
    warnings.warn(
        f"outlier_threshold='auto' without a validation set on {n_classes} classes: from {MANY_CLASSES} "
        "classes up it was measured to reject 9-16% of the in-class samples of sentence-embedding tasks "
        "that had no outlier at all, 3-5 points of accuracy below a threshold chosen on a validation set, "
        "and with 150-500 small classes of about one seed each (synthetic) 31-85%, 3-38 points below; "
        "with 1,000 classes or more it can reject every sample (bench/RESULTS.md, issue #16). Give a "
        "validation set (fit's validation=(indices, labels); "
        "--validation on the command line) or the share of outliers you expect (FastProp(outlier_share=...); "
        "--outlier-share; 0 for none).",
        OutlierThresholdWarning, stacklevel=stacklevel + 1,
    )


def warn_if_validation_is_only_outliers(validation_truth, stacklevel):
    """Emit :class:`OutlierThresholdWarning` when ``"auto"`` is chosen on a validation set of known outliers only.

    Rejecting everything is then right on every validation sample, so the
    threshold rejects every unlabeled sample (found by fuzzing round 14: one
    outlier as the whole validation set rejected 99% of the samples).

    Parameters
    ----------
    validation_truth : ndarray of int
        The validation samples' encoded truth (-1 for a known outlier).
    stacklevel : int
        Passed to :func:`warnings.warn`, counted from the caller.
    """
    if np.any(validation_truth >= 0):
        return
    warnings.warn(
        f"validation holds only known outliers ({validation_truth.size} of them), so outlier_threshold='auto' "
        "chosen on it rejects every unlabeled sample. Add in-class samples with their classes to validation, "
        "or pass the known outliers as fit(..., outliers=...) instead.",
        OutlierThresholdWarning, stacklevel=stacklevel + 1,
    )


def final_confidence(source, multiview, confnet, labeled):
    """FastProp's confidence from its two stages: ``source`` is its ``confidence`` setting.

    ``"both"`` is their mean (the paper's ConfNet-dagger); without a ConfNet
    (not run, or not trainable) the multi-view confidence stands alone.
    Seeds get 1; the result is clipped to [0, 1].
    """
    if source == "confnet" and confnet is not None:
        final = confnet.copy()
    elif source == "both" and confnet is not None:
        final = 0.5 * (multiview + confnet)
    else:
        final = multiview.copy()
    final[labeled] = 1.0
    return np.clip(final, 0.0, 1.0)


def fitted_threshold(setting, confidence, predicted, unlabeled, validation, rule, probabilities=False, share=None):
    """The ``o_tau`` a fit uses.

    Parameters
    ----------
    setting : "auto", float or None
        ``FastProp(outlier_threshold=...)``. A number or None is the
        threshold whatever else is given (None: 0, nothing rejected).
    confidence : ndarray of shape (n_samples,)
    predicted : ndarray of shape (n_samples,)
        Class indices.
    unlabeled : ndarray of int
        Indices of the unlabeled samples (the ones ``"auto"`` looks at).
    validation : (indices, encoded truth) or None
        When given, ``"auto"`` is the threshold that maximises accuracy on it.
    rule : {"smoothed", "max"}
        ``FastProp(validation_rule=...)``: how the validation accuracy is
        maximised (:func:`smoothed_threshold` or :func:`choose_threshold`).
    probabilities : bool, default=False
        The confidence is a blend of class probabilities (the provisional
        classes' known-class probability and the label probability, see
        :func:`fastprop.novelty.blended_confidence`): ``"auto"`` then rejects
        what is more likely an outlier than not, below
        :data:`PROBABILITY_CUT`, instead of :func:`automatic_threshold`.
    share : float or None, default=None
        ``FastProp(outlier_share=...)``: ``"auto"`` then rejects that share of
        the unlabeled samples (:func:`share_threshold`) instead.

    Returns
    -------
    float
        In [0, ``REJECT_ALL``]: ``-inf`` (rejecting nothing is best) reads as 0,
        ``+inf`` (rejecting everything is, e.g. when every validation sample
        is a known outlier) as ``REJECT_ALL``.
    """
    if setting is None:
        return 0.0
    if isinstance(setting, str):
        if validation is not None:
            indices, truth = validation
            choose = smoothed_threshold if rule == "smoothed" else choose_threshold
            return min(max(float(choose(confidence[indices], predicted[indices], truth)), 0.0), REJECT_ALL)
        if share is not None:
            return share_threshold(confidence[unlabeled], share)
        if probabilities:
            return PROBABILITY_CUT
        return float(automatic_threshold(confidence[unlabeled])) if unlabeled.size else 0.0
    return float(setting)
