"""One propagation pass of FastProp: the local predictor, the patch loop, ConfNet.

:func:`propagation_pass` is what ``FastProp.fit`` runs between validating its
inputs and choosing the outlier threshold. It trains the local predictor on
the seeds, lets :func:`fastprop.scheduler.propagate` process patches until no
viable start is left, turns the views into label distributions and runs
ConfNet. It also returns what :mod:`fastprop.prediction` needs to label new
points with the same predictor.
"""

import time
from dataclasses import dataclass

import numpy as np

from .adjacency import RandomWalk
from .confnet import confnet_confidence, structural_features
from .linear import fit_softmax_regression, softmax_proba
from .rows import unit_rows
from .scheduler import PatchWorkspace, PropagationState, propagate, training_features


@dataclass(frozen=True)
class FitContext:
    """What every propagation pass of one ``fit`` shares."""

    graph: object
    walk: RandomWalk
    features: np.ndarray
    row_scale: object  # inverse row norms, None when the rows are unit vectors already
    seed_class: np.ndarray
    n_classes: int
    tie_rank: np.ndarray
    rng: np.random.Generator
    workspace: PatchWorkspace


@dataclass(frozen=True)
class PassOptions:
    """The estimator's settings one pass reads (see :class:`fastprop.FastProp`)."""

    predictor_training: str
    predictor_depth: int
    predictor_l2: float
    confident_threshold: float
    single_view_confidence: float
    process_capped_patches: bool
    confidence: str
    labels: str
    confnet_features: str
    confnet_depth: int
    confnet_l2: float
    eta: float


@dataclass(frozen=True)
class PassResult:
    """What a pass found.

    Attributes
    ----------
    state : PropagationState
        The patch loop's counters and per-vertex views.
    distributions : ndarray of shape (n_samples, n_classes)
        Label distributions (seeds one-hot).
    multiview : ndarray of shape (n_samples,)
        Multi-view confidence (0 where no patch reached, 1 for seeds).
    confnet : ndarray of shape (n_samples,) or None
        ConfNet's confidence, None when it was not run or could not be trained.
    coef, intercept : ndarray
        The local predictor: ``softmax(S^depth (X / |X|) @ coef + intercept)``.
    logit_levels : tuple of ndarray of shape (n_samples, n_classes), float32
        ``S^k (X / |X|) @ coef`` for ``k = 0 .. depth - 1``: what a new
        point's neighbours contribute to each of its own smoothing steps
        (see :mod:`fastprop.prediction`).
    n_training_patches : int
    timings : dict
    """

    state: PropagationState
    distributions: np.ndarray
    multiview: np.ndarray
    confnet: object
    coef: np.ndarray
    intercept: np.ndarray
    logit_levels: tuple
    n_training_patches: int
    timings: dict


def propagation_pass(context, options, notify):
    """Train the local predictor on the seeds, propagate, run ConfNet.

    Parameters
    ----------
    context : FitContext
    options : PassOptions
    notify : fastprop._progress.Reporter
        Told each stage as it starts; its ``propagation`` method is the patch loop's progress.

    Returns
    -------
    PassResult
    """
    timings = {}
    clock = time.perf_counter()
    notify("training")
    depth = options.predictor_depth
    if options.predictor_training == "patches":
        rows, row_class, n_training_patches = training_features(
            context.workspace, unit_rows(context.features), context.seed_class, context.tie_rank
        )
    else:
        seeds = np.flatnonzero(context.seed_class >= 0)
        rows = context.walk.smooth(context.features, seeds, depth, row_scale=context.row_scale)
        row_class, n_training_patches = context.seed_class[seeds], 0
    coef, intercept = fit_softmax_regression(rows, np.eye(context.n_classes)[row_class], l2=options.predictor_l2)
    # The cosine graph's predictor sees unit rows: scale X @ W rather than copy X normalised.
    logits = (context.features @ coef.astype(np.float32)).astype(np.float64)
    if context.row_scale is not None:
        logits *= context.row_scale[:, None]
    timings["training"] = time.perf_counter() - clock

    clock = time.perf_counter()
    override = None
    if options.confidence == "random":
        override = context.rng.random(context.features.shape[0]).__getitem__
    state = propagate(
        context.workspace, logits, intercept, context.seed_class, context.tie_rank,
        confident_threshold=options.confident_threshold,
        single_view_confidence=options.single_view_confidence,
        process_capped_patches=options.process_capped_patches,
        confidence_override=override,
        progress=notify.propagation if notify.active else None,
    )
    timings["propagation"] = time.perf_counter() - clock

    clock = time.perf_counter()
    labeled = context.seed_class >= 0
    distributions, multiview = distributions_from_views(state, context.walk, logits, intercept, labeled, depth)
    # Smoothed one step at a time (the same arithmetic as one smoothing of the whole depth),
    # keeping each level for new points; ConfNet needs none of them.
    levels, smoothed_logits = [], logits
    for _ in range(depth):
        levels.append(smoothed_logits.astype(np.float32))
        smoothed_logits = context.walk.smooth(smoothed_logits, None, 1)
    del logits
    if options.labels != "graph":
        smoothed_logits = None
    confnet = None
    if options.confidence in ("both", "confnet"):
        notify("confnet")
        if options.confnet_features == "structure":
            inputs = structural_features(context.walk, distributions, state.view_count)
        else:
            inputs = unit_rows(context.features)
        confnet = confnet_confidence(
            context.walk, inputs, multiview, np.flatnonzero(~labeled), eta=options.eta,
            depth=options.confnet_depth, l2=options.confnet_l2, tie_rank=context.tie_rank,
        )
    timings["confnet"] = time.perf_counter() - clock
    if smoothed_logits is not None:
        unlabeled = np.flatnonzero(~labeled)
        distributions[unlabeled] = softmax_proba(smoothed_logits[unlabeled], np.eye(context.n_classes), intercept)
    return PassResult(state=state, distributions=distributions, multiview=multiview, confnet=confnet,
                      coef=coef, intercept=intercept, logit_levels=tuple(levels),
                      n_training_patches=n_training_patches, timings=timings)


def distributions_from_views(state, walk, logits, intercept, labeled, depth):
    """Mean of views where there are any, the whole-graph predictor elsewhere.

    Computed in place in ``state.probability_sum`` (which it returns):
    the view sums are not needed afterwards, and at a million vertices
    each (n, n_classes) copy is worth saving.

    Returns
    -------
    distributions : ndarray of shape (n_samples, n_classes)
    multiview : ndarray of shape (n_samples,)
        The multi-view confidence, 0 where no view was taken, 1 for seeds.
    """
    seen = state.view_count > 0
    distributions = state.probability_sum
    mean_of_views = (seen & ~labeled)[:, None]  # seeds keep their one-hot row
    np.divide(distributions, state.view_count[:, None], out=distributions, where=mean_of_views)
    unreached = np.flatnonzero(~seen & ~labeled)
    if unreached.size:
        smoothed = walk.smooth(logits, unreached, depth)
        distributions[unreached] = softmax_proba(smoothed, np.eye(logits.shape[1]), intercept)
    distributions /= distributions.sum(axis=1, keepdims=True)
    multiview = np.where(seen | labeled, state.confidence, 0.0)
    return distributions, multiview
