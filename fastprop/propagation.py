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
from .linear import fit_softmax_regression, softmax_proba, write_softmax_rows
from .local_networks import LOCAL_NETWORKS, NetworkPatchPredictor
from .prediction import LinearScorer
from .rows import unit_rows
from .scheduler import (LinearPatchPredictor, PatchWorkspace, PropagationState, propagate, training_features,
                        training_patches)
from .self_training import most_confident_per_class
from .threshold import final_confidence


#: Gradient tolerance of the self-training refit (:meth:`_LinearLocalPredictor.refit`). Measured on
#: Banking77 and HWU64 (10% outliers, 3 seeds, 100 pseudo-labels a class): accuracy within 0.13 points
#: of 1e-6's at 1e-4, in 0.19-0.39 s instead of 0.45-0.59; 1e-3 loses up to 1.1 points.
REFIT_TOL = 1e-4


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
    known_outliers: np.ndarray  # unlabeled samples known to be of no class: never pseudo-labels


@dataclass(frozen=True)
class PassOptions:
    """The estimator's settings one pass reads (see :class:`fastprop.FastProp`)."""

    local_predictor: str
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
    pseudo_labels: int


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
    confidence : ndarray of shape (n_samples,)
        The paper's final confidence of the two
        (:func:`fastprop.threshold.final_confidence`), seeds 1.
    scorer : LinearScorer, LocalGCN or LocalGAT
        The local predictor as new points need it: its ``logits_of_rows``
        labels a point from its own row and its graph row into the fitted
        samples (see :mod:`fastprop.prediction`).
    n_training_patches : int
    timings : dict
    """

    state: PropagationState
    distributions: np.ndarray
    multiview: np.ndarray
    confnet: object
    confidence: np.ndarray
    scorer: object
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
    if options.local_predictor == "sgc":
        local = _LinearLocalPredictor(context, options)
    else:
        local = _NetworkLocalPredictor(context, options)
    timings["training"] = time.perf_counter() - clock

    clock = time.perf_counter()
    override = None
    if options.confidence == "random":
        override = context.rng.random(context.features.shape[0]).__getitem__
    state = propagate(
        context.workspace, local.patches, context.seed_class, context.tie_rank,
        confident_threshold=options.confident_threshold,
        single_view_confidence=options.single_view_confidence,
        process_capped_patches=options.process_capped_patches,
        confidence_override=override,
        progress=notify.propagation if notify.active else None,
    )
    timings["propagation"] = time.perf_counter() - clock

    clock = time.perf_counter()
    labeled = context.seed_class >= 0
    distributions, multiview = distributions_from_views(state, local.graph_logits, local.bias, labeled)
    graph_logits = local.finish() if options.labels == "graph" else None
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
    confidence = final_confidence(options.confidence, multiview, confnet, labeled)
    timings["confnet"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if graph_logits is not None and options.pseudo_labels and options.local_predictor == "sgc":
        predicted = (graph_logits + local.bias).argmax(axis=1)
        graph_logits = None  # freed before the refit makes its own (160 MB at 1M samples)
        graph_logits = _self_trained(context, options, local, predicted, confidence)
    timings["self_training"] = time.perf_counter() - clock
    if graph_logits is not None:
        unlabeled = np.flatnonzero(~labeled)
        write_softmax_rows(distributions, unlabeled, graph_logits, local.bias)
    return PassResult(state=state, distributions=distributions, multiview=multiview, confnet=confnet,
                      confidence=confidence, scorer=local.scorer(), n_training_patches=local.n_training_patches,
                      timings=timings)


def _self_trained(context, options, local, predicted, confidence):
    """The whole-graph logits of ``local`` refitted on the seeds and its most confident labels.

    See :mod:`fastprop.self_training`: ``options.pseudo_labels`` split evenly
    among the classes, the most confident unlabeled samples of each
    ``predicted`` class (known outliers excepted), by ``confidence``, join the seeds.
    """
    candidates = np.setdiff1d(np.flatnonzero(context.seed_class < 0), context.known_outliers)
    per_class = -(-options.pseudo_labels // context.n_classes)
    chosen = most_confident_per_class(predicted, confidence, candidates, per_class, context.tie_rank)
    return local.refit(context, options, chosen, predicted[chosen])


class _LinearLocalPredictor:
    """The SGC local predictor of a pass: ``softmax(S^depth (X / |X|) W + b)``.

    Trained on the seeds' rows (of the training patches or of the whole
    graph) by softmax regression; on the patches it smooths the logits
    ``(X / |X|) W`` (:class:`~fastprop.scheduler.LinearPatchPredictor`).
    """

    def __init__(self, context, options):
        self.walk = context.walk
        self.depth = depth = options.predictor_depth
        self.seed_rows = None  # the seeds' whole-graph SGC rows, kept for a refit
        if options.predictor_training == "patches":
            rows, row_class, self.n_training_patches = training_features(
                context.workspace, unit_rows(context.features), context.seed_class, context.tie_rank
            )
        else:
            seeds = np.flatnonzero(context.seed_class >= 0)
            rows = self.seed_rows = context.walk.smooth(context.features, seeds, depth, row_scale=context.row_scale)
            row_class, self.n_training_patches = context.seed_class[seeds], 0
        self.coef, self.bias = fit_softmax_regression(rows, np.eye(context.n_classes)[row_class],
                                                      l2=options.predictor_l2)
        self.logits = self._logits(context)
        self.patches = LinearPatchPredictor(self.logits, self.bias)
        self.levels = []

    def refit(self, context, options, pseudo, pseudo_class):
        """Fit again on the seeds and the ``pseudo`` samples of classes ``pseudo_class``, from the current fit.

        The rows are whole-graph SGC rows, whatever ``predictor_training``
        says. Returns :meth:`finish` of the refitted predictor (its levels replace the old ones).
        """
        self.levels = []
        seeds = np.flatnonzero(context.seed_class >= 0)
        if self.seed_rows is None:
            self.seed_rows = self.walk.smooth(context.features, seeds, self.depth, row_scale=context.row_scale)
        pseudo_rows = self.walk.smooth(context.features, pseudo, self.depth, row_scale=context.row_scale)
        rows = np.vstack([self.seed_rows, pseudo_rows])
        targets = np.eye(context.n_classes)[np.r_[context.seed_class[seeds], pseudo_class]]
        self.coef, self.bias = fit_softmax_regression(rows, targets, l2=options.predictor_l2, tol=REFIT_TOL,
                                                      initial=(self.coef, self.bias))
        self.logits = self._logits(context)
        return self.finish()

    def _logits(self, context):
        # The cosine graph's predictor sees unit rows: scale X @ W rather than copy X normalised.
        logits = (context.features @ self.coef.astype(np.float32)).astype(np.float64)
        if context.row_scale is not None:
            logits *= context.row_scale[:, None]
        return logits

    def graph_logits(self, rows):
        """``S^depth (X / |X|) W`` at ``rows``."""
        return self.walk.smooth(self.logits, rows, self.depth)

    def finish(self):
        """``S^depth (X / |X|) W`` everywhere, keeping each level ``S^k (X / |X|) W`` (k < depth) for new points.

        Smoothed one step at a time (the same arithmetic as one smoothing of the whole depth).
        """
        smoothed = self.logits
        for _ in range(self.depth):
            self.levels.append(smoothed.astype(np.float32))
            smoothed = self.walk.smooth(smoothed, None, 1)
        self.logits = self.patches = None
        return smoothed

    def scorer(self):
        """The predictor for new points (:class:`~fastprop.prediction.LinearScorer`)."""
        if len(self.levels) < self.depth:
            self.finish()
        return LinearScorer(self.levels, self.coef, self.bias)


class _NetworkLocalPredictor:
    """A two-layer local network of a pass (:mod:`fastprop.local_networks`)."""

    def __init__(self, context, options):
        unit = unit_rows(context.features)
        patches = None
        if options.predictor_training == "patches":
            patches = [context.workspace.patch[:size].copy()
                       for size in training_patches(context.workspace, context.seed_class, context.tie_rank)]
        self.n_training_patches = 0 if patches is None else len(patches)
        self.network = LOCAL_NETWORKS[options.local_predictor].train(
            context.graph, unit, context.seed_class, context.n_classes, patches, context.rng
        )
        self.network.prepare(unit)
        self.bias = self.network.bias
        self.patches = NetworkPatchPredictor(self.network, context.graph)
        self.walk = context.walk
        self.whole_graph = None

    def graph_logits(self, rows):
        """The network on the whole graph, at ``rows``."""
        return self.finish()[rows]

    def finish(self):
        """The network on the whole graph, everywhere (computed once)."""
        if self.whole_graph is None:
            self.whole_graph = self.network.whole_graph_logits(self.walk)
        return self.whole_graph

    def scorer(self):
        """The network itself, with what the whole graph gave its layers (for new points)."""
        self.finish()
        return self.network


def distributions_from_views(state, graph_logits, bias, labeled):
    """Mean of views where there are any, the whole-graph predictor elsewhere.

    Computed in place in ``state.probability_sum`` (which it returns):
    the view sums are not needed afterwards, and at a million vertices
    each (n, n_classes) copy is worth saving.

    Parameters
    ----------
    state : PropagationState
    graph_logits : callable
        ``graph_logits(rows)``: the local predictor's logits (before ``bias``)
        of ``rows`` on their whole-graph neighbourhood.
    bias : ndarray of shape (n_classes,)
    labeled : ndarray of shape (n_samples,), bool

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
        distributions[unreached] = softmax_proba(graph_logits(unreached), np.eye(bias.size), bias)
    distributions /= distributions.sum(axis=1, keepdims=True)
    multiview = np.where(seen | labeled, state.confidence, 0.0)
    return distributions, multiview
