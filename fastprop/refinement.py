"""The fit's stages after the propagation pass: the provisional classes, the calibration, the outliers.

:func:`decide_outliers` runs them in order. The first two turn the pass's
confidence into the final one, on which a threshold then rejects outliers.
The provisional classes (:func:`provisional_step`) give the samples the first
threshold rejects classes of their own that compete with the known ones
(:mod:`fastprop.novelty`); with a validation set, the calibration
(:func:`calibrated_confidence`) then ranks the samples by that confidence and
the graph signals (:mod:`fastprop.graph_signals`, :mod:`fastprop.calibration`)
and averages each with its rescoring as a new point at its place
(:mod:`fastprop.prediction`).
"""

import time
from dataclasses import dataclass

import numpy as np

from .calibration import calibrate_on_validation
from .graph_signals import in_class_reach, left_out_reach, local_density, onward_reach, validation_sources
from .novelty import (
    AUTO_ROUNDS,
    RUNNER_UP_FROM,
    known_top,
    provisional_class_confidence,
    refined_confidence,
    scouting_rows,
    second_largest,
)
from .prediction import NEIGHBOURHOOD_SHARE, NewPointCalibration, rescored_as_new_points
from .threshold import (FIRST_IDENTIFIED_BELOW, FIRST_IDENTIFIED_SHARE, fitted_threshold, share_threshold,
                        smoothed_ranking)

__all__ = ["Decision", "DecisionOptions", "calibrated_confidence", "decide_outliers", "first_threshold", "given_share",
           "provisional_step"]


@dataclass(frozen=True)
class DecisionOptions:
    """The estimator's settings the stages after the pass read (see :class:`fastprop.FastProp`)."""

    outlier_threshold: object  # "auto", a float or None
    outlier_share: object  # a float or None
    provisional_classes: bool
    confidence: str
    calibrate_confidence: bool
    validation_rule: str
    predictor_depth: int
    predictor_l2: float
    n_neighbors: int


@dataclass(frozen=True)
class Decision:
    """What :func:`decide_outliers` decided.

    Attributes
    ----------
    confidence : ndarray of shape (n_samples,)
        The final confidence (seeds 1, known outliers 0).
    fitted_class : ndarray of shape (n_samples,)
        Each sample's most probable class (the seeds' own), rejected or not.
    predicted : ndarray of shape (n_samples,)
        ``fitted_class`` with -1 where a sample is rejected.
    threshold : float
        The ``o_tau`` used.
    n_provisional : int
        Provisional classes of the last build.
    calibrated : (agreeing, new_points) or None
        :func:`calibrated_confidence`'s second output.
    timings : dict
        Seconds of ``"threshold"`` (the first one) and ``"provisional"`` (the rest).
    """

    confidence: np.ndarray
    fitted_class: np.ndarray
    predicted: np.ndarray
    threshold: float
    n_provisional: int
    calibrated: object
    timings: dict


def decide_outliers(context, found, unlabeled, validation, options, notify):
    """The final confidence, the outlier threshold and the labels, from a propagation pass.

    1. The first threshold (:func:`first_threshold`: the paper's rule on a
       validation set, else the setting) picks the samples given provisional
       classes.
    2. :func:`provisional_step` builds those classes and blends the
       confidence with them (unless ``provisional_classes=False``).
    3. With a validation set, :func:`calibrated_confidence` calibrates it.
    4. The final threshold (the setting, chosen on the validation set,
       or ``"auto"``'s rule, the confidence then smoothed over the graph
       without a validation set: :func:`fastprop.threshold.smoothed_ranking`)
       rejects the unlabeled samples below it;
       without a validation set ``"auto"`` also rejects the samples no
       patch reached (they have no view), unless ``outlier_share=0``.

    Parameters
    ----------
    context : fastprop.propagation.FitContext
    found : fastprop.propagation.PassResult
        Its ``confidence`` is used as the first confidence, and changed.
    unlabeled : ndarray of int
        Unlabeled samples, known outliers aside.
    validation : (indices, encoded truth) or None
    options : DecisionOptions
    notify : callable
        ``notify(stage)``: the progress reporter.

    Returns
    -------
    Decision
    """
    labeled = context.seed_class >= 0
    known_outliers = context.known_outliers
    timings = {}
    final = found.confidence
    final[known_outliers] = 0.0
    clock = time.perf_counter()
    predicted = found.distributions.argmax(axis=1)
    predicted[labeled] = context.seed_class[labeled]
    # The samples first given provisional classes are those the paper's rule rejects; the smoothed rule
    # (when chosen) only sets the final threshold (bench/RESULTS.md, issue #16).
    # "auto" reads the samples some patch reached: the others have no view, the paper's rule rejects them,
    # and a far-off cluster of them (junk) would move a split of everyone's confidences. A validation set
    # chooses the samples first identified even when the final threshold is given.
    reached, unreached = unlabeled[found.reached[unlabeled]], unlabeled[~found.reached[unlabeled]]
    identifying = first_threshold(options, final, predicted, reached, validation)
    timings["threshold"] = time.perf_counter() - clock
    clock = time.perf_counter()
    notify("provisional")
    blended, n_provisional = False, 0
    if options.provisional_classes and options.confidence != "random":
        final, blended, n_provisional = provisional_step(
            context, found, final, predicted, identifying, unlabeled, validation,
            outlier_threshold=options.outlier_threshold, outlier_share=options.outlier_share,
            predictor_depth=options.predictor_depth, predictor_l2=options.predictor_l2)
    calibrated = None
    if validation is not None and options.calibrate_confidence:
        # before the threshold: the validation rule's smoothing then works on the probability scale
        final, calibrated = calibrated_confidence(context, final, predicted, unlabeled, validation,
                                                  options.n_neighbors, unreached)
    share = given_share(options.outlier_threshold, options.outlier_share, validation)
    judged = unlabeled if share is not None else reached
    threshold = fitted_threshold(options.outlier_threshold, final, predicted, judged, validation,
                                 options.validation_rule, probabilities=blended, share=share)
    if blended and validation is None and isinstance(options.outlier_threshold, str):  # blended: share != 0
        final, threshold = smoothed_ranking(context.walk, final, threshold, judged, np.flatnonzero(labeled),
                                            known_outliers)
    timings["provisional"] = time.perf_counter() - clock

    fitted_class = predicted.copy()
    if threshold > 0:
        predicted[(final < threshold) & ~labeled] = -1
    if validation is None and isinstance(options.outlier_threshold, str) and share != 0:
        predicted[unreached] = -1  # "auto": no view, an outlier by the paper's rule (if none was reached, all)
    predicted[known_outliers] = -1
    return Decision(confidence=final, fitted_class=fitted_class, predicted=predicted, threshold=float(threshold),
                    n_provisional=n_provisional, calibrated=calibrated, timings=timings)


def first_threshold(options, confidence, predicted, reached, validation):
    """The first threshold: the unlabeled samples below it are first given provisional classes.

    The paper's rule on a validation set (:func:`fastprop.threshold.choose_threshold`),
    else the setting; ``"auto"`` without one reads the shape of the paper's
    confidence (half of Otsu's split), and cuts the global confidence
    (``confidence="global"``), which has no such shape, below its lowest
    :data:`fastprop.threshold.FIRST_IDENTIFIED_SHARE` of ``reached``, and
    never at or above :data:`fastprop.threshold.FIRST_IDENTIFIED_BELOW`.
    """
    if validation is None and isinstance(options.outlier_threshold, str) and options.confidence == "global":
        return min(share_threshold(confidence[reached], FIRST_IDENTIFIED_SHARE), FIRST_IDENTIFIED_BELOW)
    return fitted_threshold("auto" if validation is not None else options.outlier_threshold, confidence,
                            predicted, reached, validation, "max")


def given_share(outlier_threshold, outlier_share, validation):
    """``outlier_share`` where it applies (``"auto"`` without a validation set), else None."""
    unsupervised = validation is None and isinstance(outlier_threshold, str)
    return float(outlier_share) if unsupervised and outlier_share is not None else None


def provisional_step(context, found, first, predicted, identifying, unlabeled, validation, *, outlier_threshold,
                     outlier_share, predictor_depth, predictor_l2):
    """The final confidence after the provisional classes.

    Gives the samples ``identifying`` rejects provisional classes of their
    own and blends the known-class confidence with the label probability
    (:func:`fastprop.novelty.refined_confidence`). Without truth to
    choose a threshold on (``"auto"`` then rejects as many as the blend's
    cut at 0.5, or the outlier share given, by the blend smoothed over the
    graph: :func:`decide_outliers`) the classes are built ``AUTO_ROUNDS``
    times, and without a share given each build is fitted again with its
    classes' most confident samples as rows, and from
    :data:`fastprop.novelty.RUNNER_UP_FROM` known classes up the final
    blend counts each sample's second largest label probability too. The
    known classes are trained on their seeds topped up with self-training's
    labels.

    Parameters
    ----------
    context : fastprop.propagation.FitContext
    found : fastprop.propagation.PassResult
        The propagation pass (label distributions, views, pseudo-labels).
    first : ndarray of shape (n_samples,)
        The paper's confidence (0 for known outliers).
    predicted : ndarray of shape (n_samples,)
        Class indices (the seeds' own).
    identifying : float
        The first threshold: the unlabeled samples below it get provisional classes.
    unlabeled : ndarray of int
        Unlabeled samples, known outliers aside. Those no patch reached
        get no provisional class, are not counted in the share the
        provisional classes claim, and keep ``first``.
    validation : (indices, encoded truth) or None
    outlier_threshold, outlier_share, predictor_depth, predictor_l2
        The estimator's settings (see :class:`fastprop.FastProp`).

    Returns
    -------
    confidence : ndarray of shape (n_samples,)
    blended : bool
        Whether it is a blend of class probabilities (provisional classes
        were built): ``"auto"`` then rejects as many as its cut at 0.5
        (:func:`fastprop.threshold.fitted_threshold`), by the blend smoothed
        over the graph (:func:`fastprop.threshold.smoothed_ranking`).
    n_provisional : int
    """
    labeled = context.seed_class >= 0
    reached = found.reached
    # A sample no patch reached has no view: the paper's rule rejects it, and it says nothing of the outliers
    # among the samples the propagation did reach, which the provisional classes are for (a far-off cluster
    # of junk would otherwise raise the share they claim, and the in-class samples they take with it).
    unlabeled = unlabeled[reached[unlabeled]]
    unsupervised = validation is None and isinstance(outlier_threshold, str)
    share = given_share(outlier_threshold, outlier_share, validation)
    rounds = 0
    if (identifying > 0 or context.known_outliers.size) and share != 0:
        rounds = AUTO_ROUNDS if unsupervised else 1
    scout_rows = scouting_rows(unlabeled, rounds, context.rng)
    n_top = known_top(validation is not None, unsupervised and share is None, context.n_classes)
    # "auto"'s builds are fitted again, the scouts too: each then chooses the samples for a model like
    # the last build's (bench/RESULTS.md, issue #16 item 2).
    refit_candidates = scout_rows if unsupervised and share is None else None

    def build_classes(identified, represented, max_iter, rows):
        return provisional_class_confidence(
            context.feature_rows, context.seed_class, context.n_classes, identified, depth=predictor_depth,
            l2=predictor_l2, rng=context.rng, known_outliers=context.known_outliers, max_iter=max_iter,
            represented=represented, rows=rows, pseudo_labels=found.pseudo_labels,
            refit_candidates=refit_candidates, n_top=n_top,
        )

    runner_up = None
    if unsupervised and share is None and context.n_classes >= RUNNER_UP_FROM:
        runner_up = second_largest(found.distributions)
    final, known, n_provisional = refined_confidence(
        first, np.flatnonzero((first < identifying) & ~labeled & reached), found.distributions.max(axis=1),
        reached, None if validation is None else validation[1], unlabeled, rounds, build_classes, scout_rows, share,
        runner_up,
    )
    final[~reached] = first[~reached]  # the known-class confidence there extrapolates a linear model
    final[labeled] = 1.0
    final[context.known_outliers] = 0.0
    return final, known is not None, n_provisional


def calibrated_confidence(context, final, predicted, unlabeled, validation, n_neighbors, unreached):
    """The final confidence calibrated on the validation set with the graph signals, and what new points need.

    The calibration (:func:`fastprop.calibration.calibrate_on_validation`),
    then its mean with the same samples rescored as new points at their
    places are (:func:`fastprop.prediction.rescored_as_new_points`, share
    :data:`fastprop.prediction.NEIGHBOURHOOD_SHARE`).

    Parameters
    ----------
    context : fastprop.propagation.FitContext
    final : ndarray of shape (n_samples,)
        The confidence to calibrate.
    predicted : ndarray of shape (n_samples,)
        Class indices (the seeds' own).
    unlabeled : ndarray of int
        Unlabeled samples, known outliers aside.
    validation : (indices, encoded truth)
    n_neighbors : int
        The local density's neighbour count (:func:`fastprop.graph_signals.local_density`).
    unreached : ndarray of int
        Unlabeled samples no patch reached: they have no view, so they keep
        confidence 0 whatever the calibration maps 0 to (about 0.03 on a
        seedless junk cluster, which a small threshold then accepted), and
        their neighbours' rescoring reads 0 there.

    Returns
    -------
    final : ndarray of shape (n_samples,)
        Calibrated in place (unchanged when no increasing map fits).
    calibrated : (agreeing, new_points) or None
        For :class:`fastprop.prediction.NeighbourhoodPredictor`: the
        calibrated confidence new points' agreement reads and their
        :class:`fastprop.prediction.NewPointCalibration`; None when
        nothing was calibrated.
    """
    seeds = context.seed_class >= 0
    in_class_sources, outlier_sources = validation_sources(validation, context.rng)
    signals = [in_class_reach(context.walk, seeds, in_class_sources), local_density(context.graph, n_neighbors)]
    if outlier_sources.size:
        signals.append(left_out_reach(context.walk, outlier_sources))
    method_confidence = final.copy()
    final, confidence_map = calibrate_on_validation(final, predicted, unlabeled, validation, *signals)
    if confidence_map is None:
        return final, None
    final[unreached] = 0.0
    agreeing = final.copy()
    rescored, to_method_scale = rescored_as_new_points(context.graph, agreeing, method_confidence, predicted,
                                                       unlabeled, confidence_map, signals)
    final[unlabeled] = (1.0 - NEIGHBOURHOOD_SHARE) * agreeing[unlabeled] + NEIGHBOURHOOD_SHARE * rescored
    final[unreached] = 0.0
    in_class_onward = onward_reach(context.walk, np.concatenate([np.flatnonzero(seeds), in_class_sources]))
    outlier_onward = onward_reach(context.walk, outlier_sources) if outlier_sources.size else None
    new_points = NewPointCalibration(confidence_map, to_method_scale, in_class_onward, outlier_onward)
    return final, (agreeing, new_points)
