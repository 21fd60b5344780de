"""One propagation pass of FastProp: the local predictor, the patch loop, ConfNet.

:func:`propagation_pass` is what ``FastProp.fit`` runs between validating its
inputs and choosing the outlier threshold. It trains the local predictor on
the seeds, lets :func:`fastprop.scheduler.propagate` process patches until no
viable start is left (or, with ``confidence="global"``, takes one view of the
whole graph instead: :func:`whole_graph_state`), turns the views into label
distributions and runs ConfNet. It also returns what :mod:`fastprop.prediction`
needs to label new points with the same predictor.
"""

import functools
import time
from dataclasses import dataclass

import numpy as np

from ._kernels.components import component_roots
from .adjacency import BLOCK_ROWS, RandomWalk
from .confnet import confnet_confidence, structural_features
from .feature_rows import FeatureRows
from .linear import fit_softmax_regression, one_hot, write_softmax_rows
from .local_networks import LOCAL_NETWORKS, NetworkPatchPredictor
from .prediction import LinearScorer
from .principal import principal_directions, projected_rows
from .rows import float64_scaled_rows, inverse_norms, unit_rows
from .scheduler import LinearPatchPredictor, PropagationState, propagate, training_features, training_patches
from .self_training import most_confident_per_class, pseudo_label_total
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
    known_outliers: np.ndarray  # unlabeled samples known to be of no class: never pseudo-labels
    # SGC rows of the SGC local predictor's features, for its every fit and the provisional step's: ``features``,
    # or ``features @ directions`` (their rows times ``row_scale`` the unit rows' projections)
    feature_rows: FeatureRows
    directions: object  # (n_features, n_kept) orthonormal, float64, or None (the features as they are)

    @classmethod
    def of(cls, graph, features, seed_class, n_classes, tie_rank, rng, known_outliers, feature_energy=None):
        """The context of a fit on ``graph`` (checked) and ``features``: its walk, inverse norms and feature rows.

        ``feature_energy``: the SGC local predictor's features are the unit
        rows' projections on their :func:`~fastprop.principal.principal_directions`
        keeping that share of their energy, when those are due and every row
        keeps enough of its own (:func:`~fastprop.principal.projected_rows`);
        None keeps the features.
        """
        walk, row_scale = RandomWalk(graph), inverse_norms(features)
        directions = principal_directions(features, row_scale, feature_energy)
        predictor_features = None if directions is None else projected_rows(features, row_scale, directions)
        if predictor_features is None:
            directions, predictor_features = None, features
        return cls(graph=graph, walk=walk, features=features, row_scale=row_scale, seed_class=seed_class,
                   n_classes=n_classes, tie_rank=tie_rank, rng=rng, known_outliers=known_outliers,
                   feature_rows=FeatureRows(walk, predictor_features, row_scale), directions=directions)


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
    single_view_restarts: bool
    confidence: str
    labels: str
    confnet_features: str
    confnet_depth: int
    confnet_l2: float
    eta: float
    pseudo_labels: object  # the setting: an int, or "auto" (self_training.pseudo_label_total)


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
    pseudo_labels : (ndarray of int64, ndarray of int64)
        The samples self-training added to the seeds and their classes
        (:func:`fastprop.self_training.most_confident_per_class`: by class,
        most confident first); both empty without self-training.
    make_scorer : callable
        Called without arguments, returns the local predictor as new points
        need it (LinearScorer, LocalGCN or LocalGAT): its ``logits_of_rows``
        labels a point from its own row and its graph row into the fitted
        samples (see :mod:`fastprop.prediction`). The SGC predictor's level 0
        is made by the call (at a million samples and 20 classes 76 MB):
        call it once the larger temporaries are gone.
    n_training_patches : int
    timings : dict
    """

    state: PropagationState
    distributions: np.ndarray
    multiview: np.ndarray
    confnet: object
    confidence: np.ndarray
    pseudo_labels: tuple
    make_scorer: object
    n_training_patches: int
    timings: dict

    @property
    def reached(self):
        """Whether some patch viewed each sample (bool, shape (n_samples,); False for the seeds, never viewed)."""
        return self.state.view_count > 0


def propagation_pass(context, workspace, options, notify):
    """Train the local predictor on the seeds, propagate, run ConfNet.

    Parameters
    ----------
    context : FitContext
    workspace : fastprop.scheduler.PatchWorkspace
        The patch buffers, passed as a temporary (the caller keeps no
        reference): the pass lets go of them after its loop, so that they are
        freed before the whole-graph products (~150 MB at a million samples).
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
        local = _LinearLocalPredictor(context, workspace, options)
    else:
        local = _NetworkLocalPredictor(context, workspace, options)
    timings["training"] = time.perf_counter() - clock

    clock = time.perf_counter()
    if options.confidence == "global":
        del workspace  # the training patches' buffers (None when the predictor trained on the whole graph)
        local.finish()  # every whole-graph step but the last, once: each block of rows then takes only that
        state = whole_graph_state(context, local.graph_logits, local.bias)
    else:
        override = None
        if options.confidence == "random":
            override = context.rng.random(context.features.shape[0]).__getitem__
        state = propagate(
            workspace, local.patches, context.seed_class, context.tie_rank,
            confident_threshold=options.confident_threshold,
            single_view_confidence=options.single_view_confidence,
            process_capped_patches=options.process_capped_patches,
            single_view_restarts=options.single_view_restarts,
            confidence_override=override,
            progress=notify.propagation if notify.active else None,
        )
        del workspace  # the loop's buffers, freed
    timings["propagation"] = time.perf_counter() - clock

    clock = time.perf_counter()
    labeled = context.seed_class >= 0
    distributions, multiview = distributions_from_views(state, local.graph_logits, local.bias, labeled)
    reached = state.view_count > 0  # samples some patch viewed (not the seeds)
    whole_graph_labels = options.labels == "graph"
    if whole_graph_labels:
        local.finish()
    confnet = None
    if options.confidence in ("both", "confnet"):
        notify("confnet")
        confnet = _confnet(context, options, distributions, state.view_count, reached, multiview, labeled)
    confidence = final_confidence(options.confidence, multiview, confnet, labeled)
    timings["confnet"] = time.perf_counter() - clock
    clock = time.perf_counter()
    pseudo_labels = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if whole_graph_labels and options.pseudo_labels and options.local_predictor == "sgc":
        pseudo_labels = _self_trained(context, options, local, _whole_graph_classes(local, labeled.size), confidence,
                                      reached)
    timings["self_training"] = time.perf_counter() - clock
    if whole_graph_labels:
        write_softmax_rows(distributions, np.flatnonzero(~labeled), local.graph_logits, local.bias)
    return PassResult(state=state, distributions=distributions, multiview=multiview, confnet=confnet,
                      confidence=confidence, pseudo_labels=pseudo_labels, make_scorer=local.make_scorer(),
                      n_training_patches=local.n_training_patches, timings=timings)


def _confnet(context, options, distributions, view_count, reached, multiview, labeled):
    """ConfNet's confidence of every sample (its inputs freed on return: 70 MB at a million samples)."""
    if options.confnet_features == "structure":
        inputs = structural_features(context.walk, distributions, view_count)
    else:
        inputs = unit_rows(context.features)
    # It learns from, and judges, the unlabeled samples some patch viewed: one no patch reached has no views
    # (a far-off cluster of junk would otherwise be every negative and the in-class samples all alike
    # positive, or, left out of training, be scored by extrapolation), so its confidence is 0 as the views'.
    learnt = confnet_confidence(
        context.walk, inputs, multiview, np.flatnonzero(~labeled & reached), eta=options.eta,
        depth=options.confnet_depth, l2=options.confnet_l2, tie_rank=context.tie_rank,
    )
    if learnt is not None:
        learnt[~reached] = 0.0
    return learnt


def _whole_graph_classes(local, n_samples):
    """The class ``local`` gives every sample on the whole graph, :data:`BLOCK_ROWS` rows at a time.

    Returns the classes, -1 where the largest logit is tied exactly (the
    argmax would take the first of the tied classes: no class for
    self-training to take it as).
    """
    predicted = np.empty(n_samples, dtype=np.int64)
    for begin in range(0, n_samples, BLOCK_ROWS):
        rows = np.arange(begin, min(begin + BLOCK_ROWS, n_samples))
        logits = local.graph_logits(rows) + local.bias
        best = logits.argmax(axis=1)
        top = logits[np.arange(rows.size), best]
        logits[np.arange(rows.size), best] = -np.inf
        predicted[rows] = np.where(logits.max(axis=1, initial=-np.inf) == top, -1, best)
    return predicted


def _self_trained(context, options, local, predicted, confidence, reached):
    """Refit ``local`` on the seeds and its most confident labels, and :meth:`finish` it again.

    See :mod:`fastprop.self_training`: :func:`~fastprop.self_training.pseudo_label_total`
    of the unlabeled samples some patch ``reached`` (known outliers excepted)
    split evenly among the classes, the most confident of them in each
    ``predicted`` class, by ``confidence``, join the seeds. A sample no patch
    reached is no candidate: a class short of candidates would otherwise take
    it (a far-off cluster of junk, whole). Returns those samples and their
    classes (by class, most confident first).
    """
    eligible = reached & (context.seed_class < 0)
    eligible[context.known_outliers] = False
    total = pseudo_label_total(options.pseudo_labels, context.n_classes, int(np.count_nonzero(eligible)))
    if total == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    candidates = np.flatnonzero(eligible & (predicted >= 0))  # a sample whose classes tie exactly (-1) is nobody's
    per_class = -(-total // context.n_classes)
    chosen = most_confident_per_class(predicted, confidence, candidates, per_class, context.tie_rank)
    chosen_class = predicted[chosen]
    del candidates, predicted  # freed before the refit's whole-graph products (8 MB each at 1M samples)
    local.refit(context, options, chosen, chosen_class)
    return chosen, chosen_class


class _LinearLocalPredictor:
    """The SGC local predictor of a pass: ``softmax(S^depth (X / |X|) W + b)``.

    Trained on the seeds' rows (of the training patches or of the whole
    graph) by softmax regression; on the patches it smooths the logits
    ``(X / |X|) W`` (:class:`~fastprop.scheduler.LinearPatchPredictor`).
    """

    def __init__(self, context, workspace, options):
        self.walk = context.walk
        self.features = context.feature_rows.features  # the features, or their projections (FitContext)
        self.row_scale = context.row_scale
        self.directions = context.directions
        self.depth = depth = options.predictor_depth
        self.seed_rows = None  # the seeds' whole-graph SGC rows, kept for a refit
        if options.predictor_training == "patches":
            # the unit rows (unit_rows's arithmetic), or their projections
            scaled = (self.features if self.row_scale is None else
                      (self.features * self.row_scale[:, None]).astype(np.float32))
            rows, row_class, self.n_training_patches = training_features(
                workspace, scaled, context.seed_class, context.tie_rank
            )
        else:
            seeds = np.flatnonzero(context.seed_class >= 0)
            rows = self.seed_rows = context.feature_rows.smooth(seeds, depth)
            row_class, self.n_training_patches = context.seed_class[seeds], 0
        self.coef, self.bias = fit_softmax_regression(rows, one_hot(row_class, context.n_classes),
                                                      l2=options.predictor_l2, float32_products=True)
        self._start()
        self.patches = LinearPatchPredictor(self.level, self.bias)

    def refit(self, context, options, pseudo, pseudo_class):
        """Fit again on the seeds and the ``pseudo`` samples of classes ``pseudo_class``, from the current fit.

        The rows are whole-graph SGC rows, whatever ``predictor_training``
        says. The refitted predictor is :meth:`finish`-ed (its level replaces the old one).
        """
        self.level = self.later_levels = None  # freed before the refit makes its own (160 + 80 MB at 1M samples)
        seeds = np.flatnonzero(context.seed_class >= 0)
        if self.seed_rows is None:
            self.seed_rows = context.feature_rows.smooth(seeds, self.depth)
        pseudo_rows = context.feature_rows.smooth(pseudo, self.depth)
        rows = np.vstack([self.seed_rows, pseudo_rows])
        targets = one_hot(np.r_[context.seed_class[seeds], pseudo_class], context.n_classes)
        self.coef, self.bias = fit_softmax_regression(rows, targets, l2=options.predictor_l2, tol=REFIT_TOL,
                                                      initial=(self.coef, self.bias), float32_products=True)
        self._start()
        self.finish()

    def _start(self):
        """Level 0, ``L = (X / |X|) W`` in float64, with every step still to take."""
        # The cosine graph's predictor sees unit rows: scale X @ W rather than copy X normalised.
        self.level = float64_scaled_rows(self.features @ self.coef.astype(np.float32), self.row_scale)
        self.steps_left = self.depth  # self.level is S^(depth - steps_left) L
        self.later_levels = []  # float32 copies of S^k L, 0 < k < depth, kept for new points as they are made

    def graph_logits(self, rows):
        """``S^depth (X / |X|) W`` at ``rows``: the steps left from the current level, for these rows only."""
        return self.walk.smooth(self.level, rows, self.steps_left)

    def finish(self):
        """Take every whole-graph step but the last: :meth:`graph_logits` then takes it for the rows asked.

        One step at a time (the same arithmetic as one smoothing of the whole
        depth), each float64 level freed once the next is made (at a million
        samples each is 160 MB), its float32 copy kept for new points. The
        whole graph's logits are never held.
        """
        self.patches = None
        while self.steps_left > 1:
            self.level = self.walk.smooth(self.level, None, 1)
            self.steps_left -= 1
            self.later_levels.append(self.level.astype(np.float32))

    def make_scorer(self):
        """A function making the predictor for new points (:class:`~fastprop.prediction.LinearScorer`).

        It holds the float32 levels after the first, none in float64: level
        0 is made when it is called (``LinearScorer.from_later_levels``),
        which ``fit`` does last.
        """
        self.finish()
        return functools.partial(LinearScorer.from_later_levels, self.features, self.row_scale, self.coef,
                                 self.bias, self.later_levels if self.depth > 0 else None, self.directions)


class _NetworkLocalPredictor:
    """A two-layer local network of a pass (:mod:`fastprop.local_networks`)."""

    def __init__(self, context, workspace, options):
        unit = unit_rows(context.features)
        patches = None
        if options.predictor_training == "patches":
            patches = [workspace.patch[:size].copy()
                       for size in training_patches(workspace, context.seed_class, context.tie_rank)]
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
        self.finish()
        return self.whole_graph[rows]

    def finish(self):
        """The network on the whole graph, everywhere (computed once)."""
        if self.whole_graph is None:
            self.whole_graph = self.network.whole_graph_logits(self.walk)

    def make_scorer(self):
        """A function returning the network itself, with what the whole graph gave its layers (for new points)."""
        self.finish()
        network = self.network
        return lambda: network


def whole_graph_state(context, graph_logits, bias):
    """The state one view of the whole graph leaves: ``confidence="global"``, no patch loop.

    Every unlabeled sample of a connected component that holds a seed gets
    one view, the whole-graph local predictor's label distribution
    ``softmax(graph_logits + bias)``, and its largest probability as its
    confidence; a sample of a component without a seed gets none (no walk
    from a seed reaches it: it stays unreached, as the patch loop leaves it).
    On the levers tasks this confidence ranks as well as the multi-view one
    at half the fit's time (bench/RESULTS.md, issue #17).

    Parameters
    ----------
    context : FitContext
    graph_logits : callable
        ``graph_logits(rows)``: the local predictor's logits (before ``bias``) of ``rows``.
    bias : ndarray of shape (n_classes,)

    Returns
    -------
    PropagationState
        ``n_patches`` and ``n_starts`` 0; nothing frozen but the seeds.
    """
    labeled = context.seed_class >= 0
    state = PropagationState.from_seeds(context.seed_class, context.n_classes)
    viewed = np.flatnonzero(seeded_components(context.graph, labeled) & ~labeled)
    if viewed.size:
        write_softmax_rows(state.probability_sum, viewed, graph_logits, bias)
        state.view_count[viewed] = 1
        state.confidence[viewed] = state.probability_sum[viewed].max(axis=1)
    return state


def seeded_components(graph, labeled):
    """Whether each vertex lies in a connected component of ``graph`` (edges either way) that holds a seed."""
    roots = component_roots(graph.indptr, graph.indices)
    seeded = np.zeros(graph.shape[0], dtype=bool)
    seeded[roots[labeled]] = True
    return seeded[roots]


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
        write_softmax_rows(distributions, unreached, graph_logits, bias)
    distributions /= distributions.sum(axis=1, keepdims=True)
    multiview = np.where(seen | labeled, state.confidence, 0.0)
    return distributions, multiview
