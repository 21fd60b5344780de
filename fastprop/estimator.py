"""FastProp: reliable label propagation on noisy affinity graphs."""

import sys
import time
from dataclasses import dataclass

import numpy as np

from ._concurrency import serialised
from ._params import EstimatorParams
from ._validation import (
    check_bool,
    check_choice,
    check_features,
    check_graph,
    check_integer,
    check_labels,
    check_memory,
    check_random_state,
    check_real,
    check_validation,
)
from .adjacency import RandomWalk
from .confnet import confnet_confidence, structural_features
from .graph import fit_graph
from .linear import fit_softmax_regression, softmax_proba
from .novelty import provisional_class_confidence
from .rows import inverse_norms, unit_rows
from .scheduler import PatchSettings, PatchWorkspace, propagate, training_features
from .threshold import automatic_threshold, choose_threshold

CONFIDENCE_SOURCES = ("both", "multiview", "confnet", "random")
#: ``outlier_threshold_`` when every unlabeled sample is rejected: above any confidence in [0, 1].
REJECT_ALL = float(np.nextafter(1.0, 2.0))

#: From this many samples on, ``patch_batch_size="auto"`` processes patches in
#: parallel batches of 8 (measured on 2 cores: 1.5-1.8x at 1M vertices, no gain at 100k;
#: both before single patches were shared among the threads by rows).
BATCH_FROM_SAMPLES = 200_000


@dataclass(frozen=True)
class _FitContext:
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


class FastProp(EstimatorParams):
    """Propagate a few labels over a kNN affinity graph and reject outliers.

    The method of Yang et al., *Learn to Propagate Reliably on Noisy Affinity
    Graphs* (ECCV 2020): patches grown from confident vertices, an SGC local
    predictor, multi-view confidence with a confident set that freezes, and a
    ConfNet that refines the confidence; samples whose final confidence stays
    below the outlier threshold are labeled -1.

    Parameters
    ----------
    n_neighbors : int, default=30
        K of the kNN graph built when ``fit`` gets no ``graph`` (clamped to
        ``n_samples - 1`` on tiny inputs).
    min_gain : float, default=500
        A patch is viable once its expected confidence gain ``sum(1 - c)``
        passes this (the paper's Delta c_tau).
    max_patch_size : int, default=3000
        A patch that reaches this many vertices first is not viable (s).
    process_capped_patches : bool, default=False
        What to do with a patch that reaches ``max_patch_size`` before its
        gain passes ``min_gain``. False: it is not viable and is skipped (the
        paper's Sec. 3.2). True: it is processed anyway, as the patch
        extraction algorithm of the paper's supplement returns it; this is
        what makes ``max_patch_size <= min_gain`` meaningful (the supplement's
        s = 100 and 500 rows). At the defaults the two agree on Banking77.
    patch_batch_size : int in [1, 255] or "auto", default="auto"
        Up to this many non-overlapping patches are grown one after the
        other, then smoothed and updated in parallel, a patch per thread (the
        paper notes the propagation parallelises this way). 1 is the strictly
        sequential scheduler, whose single patches are shared among the
        threads row by row; a larger batch changes the order of starts
        slightly (a start whose patch would overlap the batch waits for the
        next one).
        ``"auto"``: 1 below ``BATCH_FROM_SAMPLES`` (200,000) samples, 8 above.
        Measured on 2 cores (bench/RESULTS.md), when a single patch still ran
        on one thread: batches of 8 sped the patch loop up 1.5-1.8x at 1M
        vertices, but not at all at 10k-100k, where they cost ~50% more wall
        time on Banking77 and, at s = 100, 5 points of accuracy. Since single
        patches are shared by rows, the sequential scheduler takes 1.4-1.5x
        less time on 2 threads than on 1. The result never depends on the
        number of threads.
    exclusion_hops : int, default=1
        After a vertex has started a patch, vertices within this many hops
        never start one (m).
    confident_threshold : float, default=0.9
        c_tau: a vertex whose multi-view confidence passes it joins the
        confident set and is never updated again.
    single_view_confidence : float, default=1e-3
        The confidence of a vertex seen by a single patch (epsilon).
    predictor_depth : int, default=2
        SGC depth of the local predictor.
    predictor_l2 : float, default=1e-3
        Ridge penalty of the local predictor's softmax regression.
    confnet_depth : int, default=1
        SGC depth of ConfNet.
    confnet_l2 : float, default=1e-3
        Ridge penalty of ConfNet's logistic regression.
    eta : float, default=0.05
        Fraction of the unlabeled vertices that ConfNet takes as positives
        (most confident) and as negatives (least confident).
    predictor_training : {"graph", "patches"}, default="graph"
        Where the local predictor's training rows come from. ``"patches"``
        (the paper): the SGC rows of the seeds in patches grown around the
        seeds. ``"graph"`` (ours): the seeds' SGC rows on the whole graph,
        the largest patch there is. Patch rows of seeds near a patch's edge
        are smoothed over a truncated neighbourhood, and training on them
        costs accuracy everywhere we measured: Banking77 (30 classes)
        +3 points at 0% and +0.5 at 50% outliers, MNIST +2 at 50%, the
        synthetic mixture +3 at 0% (bench/RESULTS.md).
    labels : {"graph", "views"}, default="graph"
        Where ``label_distributions_`` (and so the labels) come from.
        ``"views"`` (the paper): the mean of the patch views of each vertex.
        ``"graph"`` (ours): the local predictor applied to the vertex's
        whole-graph neighbourhood, which no patch edge truncates; the views
        still give the confidence. Measured with 1% seeds, 5 seeds each
        (bench/RESULTS.md): in-class accuracy +0.4 to +1.3 points on
        Banking77, HWU64 and MNIST at every outlier ratio.
    confnet_features : {"structure", "embedding"}, default="structure"
        ConfNet's input before its SGC smoothing. ``"embedding"`` is the
        paper's (the embeddings); ``"structure"`` (ours) describes each
        prediction without naming its class (top probability, margin,
        entropy, neighbour agreement, similarity to neighbours, degree,
        views), so that what ConfNet learns from the classes propagation
        finished first carries over to the others. Measured on Banking77
        at 50% outliers: outlier AUROC 0.75 vs 0.68 (see bench/RESULTS.md).
    confidence : {"both", "multiview", "confnet", "random"}, default="both"
        Final confidence: the mean of multi-view and ConfNet (the paper's
        ConfNet-dagger), either alone, or the random-score ablation (random
        scores also steer the scheduler).
    provisional_classes : bool, default=True
        Give the samples the first outlier threshold rejects classes of their
        own (:mod:`fastprop.novelty`): as many provisional seeds as the seeds'
        density gives them, placed farthest-first in SGC space; a softmax over
        the known and the provisional classes then competes for every sample,
        the final confidence becomes the mean of the first one and the largest
        known-class probability, and the threshold is chosen again. Nothing
        changes when the first threshold rejects no sample (e.g. no
        outliers) or too few to earn a class. Measured with a validation
        threshold against the same labels without them (bench/RESULTS.md, 5
        seeds): accuracy +3.0 / +3.3 / +6.3 points at 50% outliers on
        Banking77 / HWU64 / MNIST, -0.6 / +1.4 / +3.0 at 30%, -0.5 / -1.2 /
        +1.1 at 10%; outlier AUROC -0.1 to +7.4 at 30-50%. False is the
        paper's confidence.
    outlier_threshold : "auto", float or None, default="auto"
        o_tau. With ``validation`` given to ``fit``, the threshold that
        maximises accuracy on it is used instead. ``"auto"``: an
        unsupervised rule on the confidence distribution (see
        :func:`fastprop.threshold.automatic_threshold`). ``None``: no sample
        is rejected.
    graph_method : {"auto", "exact", "hnsw"}, default="auto"
        kNN search used when ``fit`` builds the graph.
    random_state : int, Generator or None
        Breaks ties between equally confident start vertices and seeds hnswlib.
    verbose : bool, default=False
        Report progress on stderr (when ``progress`` is None).
    progress : callable or None, default=None
        Called as ``progress(stage, done, total)`` as the fit goes: stage
        ``"graph"``, ``"training"``, ``"propagation"`` (after every batch of patches,
        with ``done`` confident vertices of ``total``; the loop stops when no
        viable start is left, usually before ``done`` reaches ``total``),
        ``"confnet"`` and ``"done"``; ``done``/``total`` are None where there
        is no count.

    Attributes
    ----------
    n_features_in_ : int
        Columns of ``X`` seen by ``fit``.
    classes_ : ndarray of shape (n_classes,)
        The distinct labels of ``y`` other than -1.
    transduction_ : ndarray of shape (n_samples,)
        A class for every sample, -1 for outliers; seeds keep their label.
    label_distributions_ : ndarray of shape (n_samples, n_classes)
        Rows sum to 1; seeds get their one-hot row. With ``labels="graph"``
        every other vertex gets the local predictor applied to its
        whole-graph neighbourhood; with ``"views"`` the mean of its patch
        views, and a vertex no viable patch reached the whole-graph
        prediction (with multi-view confidence 0).
    confidence_ : ndarray of shape (n_samples,)
        Final confidence in [0, 1]; 1 for seeds.
    multiview_confidence_, confnet_confidence_ : ndarray of shape (n_samples,)
        The two stages (ConfNet's is NaN when it could not be trained).
    view_count_ : ndarray of shape (n_samples,)
        How many processed patches covered each sample (0 for seeds).
    outlier_threshold_ : float
        The o_tau used (0.0 when ``outlier_threshold=None``); ``REJECT_ALL``,
        the smallest float above 1, when ``validation`` holds only known
        outliers and every unlabeled sample is rejected.
    n_iter_ : int
        Patches processed.
    n_starts_ : int
        Start vertices tried, viable or not.
    n_provisional_classes_ : int
        Provisional classes given to the samples the first threshold
        rejected (0 with ``provisional_classes=False``).
    n_training_patches_ : int
        Patches sampled around the seeds to train the local predictor (0
        with ``predictor_training="graph"``).
    graph_ : scipy.sparse.csr_matrix
        The affinity graph used.
    timings_ : dict
        Seconds spent in each phase.

    Notes
    -----
    ConfNet refines the end result only; it does not steer the loop. The
    local predictor reads features, never other vertices' labels or
    confidences, so excluding low-confidence vertices from later patches
    would change which patches are drawn (and so the view counts), but no
    prediction made on a patch. The paper's "both components drive the
    propagation" is kept through the multi-view confidence, which does steer:
    it decides the expected gain of a patch, the confident set and the order
    of starts.

    Memory: besides the embeddings and the graph (``~1.5 * n_neighbors``
    edges per sample, 8 bytes each), ``fit`` holds two (n_samples,
    n_classes) float64 arrays (the predictor's logits, smoothed over the
    whole graph with ``labels="graph"``, and the view sums, which become
    ``label_distributions_``), ConfNet's (n_samples, 9)
    descriptors and about ten per-sample vectors. It copies neither a
    canonical float32 CSR graph nor C-contiguous float32 embeddings
    (unnormalised rows are scaled as they are read; only the paper-mode
    ablations ``predictor_training="patches"`` and
    ``confnet_features="embedding"`` normalise a copy).
    Measured at 1M samples x 128 dims, 20 classes: about 0.5 GB on top of
    X, the graph and the interpreter (bench/RESULTS.md).

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop import FastProp
    >>> rng = np.random.default_rng(0)
    >>> centres = np.eye(8)[:2] * 5
    >>> X = np.vstack([centres[0] + rng.normal(size=(100, 8)), centres[1] + rng.normal(size=(100, 8))])
    >>> y = np.full(200, -1); y[0] = 0; y[100] = 1
    >>> model = FastProp(random_state=0, outlier_threshold=None).fit(X, y)
    >>> float(np.mean(model.transduction_[:100] == 0)) > 0.9
    True
    """

    def __init__(
        self,
        *,
        n_neighbors=30,
        min_gain=500.0,
        max_patch_size=3000,
        process_capped_patches=False,
        patch_batch_size="auto",
        exclusion_hops=1,
        confident_threshold=0.9,
        single_view_confidence=1e-3,
        predictor_depth=2,
        predictor_l2=3e-5,
        confnet_depth=1,
        confnet_l2=1e-3,
        eta=0.05,
        predictor_training="graph",
        labels="graph",
        confnet_features="structure",
        confidence="both",
        provisional_classes=True,
        outlier_threshold="auto",
        graph_method="auto",
        random_state=None,
        verbose=False,
        progress=None,
    ):
        self.n_neighbors = n_neighbors
        self.min_gain = min_gain
        self.max_patch_size = max_patch_size
        self.process_capped_patches = process_capped_patches
        self.patch_batch_size = patch_batch_size
        self.exclusion_hops = exclusion_hops
        self.confident_threshold = confident_threshold
        self.single_view_confidence = single_view_confidence
        self.predictor_depth = predictor_depth
        self.predictor_l2 = predictor_l2
        self.confnet_depth = confnet_depth
        self.confnet_l2 = confnet_l2
        self.eta = eta
        self.predictor_training = predictor_training
        self.labels = labels
        self.confnet_features = confnet_features
        self.confidence = confidence
        self.provisional_classes = provisional_classes
        self.outlier_threshold = outlier_threshold
        self.graph_method = graph_method
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress

    def _check_parameters(self):
        check_integer("n_neighbors", self.n_neighbors, low=1)
        check_real("min_gain", self.min_gain, low=0, low_inclusive=False)
        check_integer("max_patch_size", self.max_patch_size, low=2)
        check_integer("exclusion_hops", self.exclusion_hops, low=0)
        if not (isinstance(self.patch_batch_size, str) and self.patch_batch_size == "auto"):
            if isinstance(self.patch_batch_size, str):
                raise ValueError(
                    f"patch_batch_size={self.patch_batch_size!r} is not supported; use 'auto' or an "
                    "integer in [1, 255]."
                )
            check_integer("patch_batch_size", self.patch_batch_size, low=1, high=255)
        for name in ("process_capped_patches", "provisional_classes"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        check_real("confident_threshold", self.confident_threshold, low=0, high=1, low_inclusive=False)
        check_real("single_view_confidence", self.single_view_confidence, low=0, high=1)
        check_integer("predictor_depth", self.predictor_depth, low=0, high=10)
        check_real("predictor_l2", self.predictor_l2, low=0)
        check_integer("confnet_depth", self.confnet_depth, low=0, high=10)
        check_real("confnet_l2", self.confnet_l2, low=0)
        check_real("eta", self.eta, low=0, high=0.5, low_inclusive=False)
        check_choice("confidence", self.confidence, CONFIDENCE_SOURCES)
        check_choice("predictor_training", self.predictor_training, ("graph", "patches"))
        check_choice("confnet_features", self.confnet_features, ("structure", "embedding"))
        check_choice("labels", self.labels, ("graph", "views"))
        check_choice("graph_method", self.graph_method, ("auto", "exact", "hnsw"))
        check_bool("verbose", self.verbose)
        if self.progress is not None and not callable(self.progress):
            raise ValueError(
                f"progress must be a callable progress(stage, done, total) or None, got {self.progress!r}."
            )
        threshold = self.outlier_threshold
        if threshold is not None and not (isinstance(threshold, str) and threshold == "auto"):
            if isinstance(threshold, str):
                raise ValueError(
                    f"outlier_threshold={threshold!r} is not supported; use 'auto', a float in "
                    "[0, 1] or None."
                )
            check_real("outlier_threshold", threshold, low=0, high=1)

    @serialised
    def fit(self, X, y, graph=None, validation=None):
        """Propagate the labels of ``y`` to every sample of ``X``.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Embeddings.
        y : array_like of shape (n_samples,)
            Integer labels, -1 for unlabeled samples.
        graph : sparse matrix of shape (n_samples, n_samples), optional
            A precomputed non-negative affinity (e.g. from
            :func:`fastprop.build_knn_graph`); built with ``n_neighbors``
            otherwise.
        validation : tuple (indices, labels), optional
            Unlabeled samples whose truth is known (-1 for a known outlier),
            used only to choose the outlier threshold.

        Returns
        -------
        self
        """
        self._check_parameters()
        features = check_features(X, rescale_rows=True)  # only directions matter: cosine graph, unit rows
        n_samples = features.shape[0]
        classes, seed_class = check_labels(y, n_samples)
        labeled = seed_class >= 0
        if validation is not None:
            validation = check_validation(validation, n_samples, labeled, classes)
        rng = check_random_state(self.random_state)
        tie_rank = rng.permutation(n_samples)
        timings = {}
        clock = time.perf_counter()
        if graph is None:
            self._notify("graph")
            graph = self._build_graph(features, rng)
        else:
            graph = check_graph(graph, n_samples)
        settings = PatchSettings(
            min_gain=float(self.min_gain),
            max_patch_size=int(self.max_patch_size),
            exclusion_hops=int(self.exclusion_hops),
            depth=int(self.predictor_depth),
        )
        workspace_shape = dict(n_columns=features.shape[1], n_slots=self._batch_size(n_samples),
                               batch_columns=classes.size)
        check_memory(
            PatchWorkspace.bytes_needed(graph, settings, **workspace_shape),
            f"FastProp's patch buffers (max_patch_size={self.max_patch_size!r}, patch_batch_size="
            f"{self.patch_batch_size!r}, {features.shape[1]} features, {classes.size} classes)",
            "lower max_patch_size or patch_batch_size.",
        )
        context = _FitContext(
            graph=graph, walk=RandomWalk(graph), features=features, row_scale=inverse_norms(features),
            seed_class=seed_class, n_classes=classes.size, tie_rank=tie_rank, rng=rng,
            workspace=PatchWorkspace(graph, settings, **workspace_shape),
        )
        timings["graph"] = time.perf_counter() - clock  # building or checking it, and its CSR forms
        state, distributions, multiview, confnet, pass_timings = self._propagation_pass(context)
        timings.update(pass_timings)
        final = self._final_confidence(multiview, confnet, labeled)
        unlabeled = np.flatnonzero(~labeled)
        clock = time.perf_counter()
        predicted = distributions.argmax(axis=1)
        threshold = self._choose_threshold(final, predicted, unlabeled, validation)
        timings["threshold"] = time.perf_counter() - clock
        clock = time.perf_counter()
        self.n_provisional_classes_ = 0
        if self.provisional_classes and self.confidence != "random" and threshold > 0:
            known, self.n_provisional_classes_ = provisional_class_confidence(
                context.walk, features, context.row_scale, seed_class, classes.size,
                np.flatnonzero((final < threshold) & ~labeled), depth=int(self.predictor_depth),
                l2=float(self.predictor_l2), rng=rng,
            )
            if known is not None:
                final = np.clip(0.5 * (final + known), 0.0, 1.0)
                final[labeled] = 1.0
                threshold = self._choose_threshold(final, predicted, unlabeled, validation)
        timings["provisional"] = time.perf_counter() - clock

        transduction = classes[predicted]
        transduction[labeled] = classes[seed_class[labeled]]
        if threshold > 0:
            transduction[(final < threshold) & ~labeled] = -1
        self.n_features_in_ = features.shape[1]
        self.classes_ = classes
        self.label_distributions_ = distributions
        self.confidence_ = final
        self.multiview_confidence_ = multiview
        self.confnet_confidence_ = np.full(n_samples, np.nan) if confnet is None else np.where(labeled, 1.0, confnet)
        self.view_count_ = state.view_count
        self.transduction_ = transduction
        self.outlier_threshold_ = float(threshold)
        self.n_iter_ = state.n_patches
        self.n_starts_ = state.n_starts
        self.graph_ = graph
        self.timings_ = timings
        self._notify("done")
        return self

    def _propagation_pass(self, context):
        """Train the local predictor on the seeds, propagate, run ConfNet."""
        timings = {}
        clock = time.perf_counter()
        self._notify("training")
        if self.predictor_training == "patches":
            rows, row_class, self.n_training_patches_ = training_features(
                context.workspace, unit_rows(context.features), context.seed_class, context.tie_rank
            )
        else:
            seeds = np.flatnonzero(context.seed_class >= 0)
            rows = context.walk.smooth(context.features, seeds, int(self.predictor_depth),
                                       row_scale=context.row_scale)
            row_class, self.n_training_patches_ = context.seed_class[seeds], 0
        coef, intercept = fit_softmax_regression(
            rows, np.eye(context.n_classes)[row_class], l2=float(self.predictor_l2)
        )
        # The cosine graph's predictor sees unit rows: scale X @ W rather than copy X normalised.
        logits = (context.features @ coef.astype(np.float32)).astype(np.float64)
        if context.row_scale is not None:
            logits *= context.row_scale[:, None]
        timings["training"] = time.perf_counter() - clock

        clock = time.perf_counter()
        override = None
        if self.confidence == "random":
            override = context.rng.random(context.features.shape[0]).__getitem__
        state = propagate(
            context.workspace, logits, intercept, context.seed_class, context.tie_rank,
            confident_threshold=float(self.confident_threshold),
            single_view_confidence=float(self.single_view_confidence),
            process_capped_patches=self.process_capped_patches,
            confidence_override=override,
            progress=self._propagation_progress if self.verbose or self.progress else None,
        )
        timings["propagation"] = time.perf_counter() - clock

        clock = time.perf_counter()
        labeled = context.seed_class >= 0
        distributions, multiview = self._distributions(state, context.walk, logits, intercept, labeled)
        # (n, n_classes): ConfNet needs neither the logits nor, with labels="graph", their smoothing yet.
        smoothed_logits = None
        if self.labels == "graph":
            smoothed_logits = context.walk.smooth(logits, None, int(self.predictor_depth))
        del logits
        confnet = None
        if self.confidence in ("both", "confnet"):
            self._notify("confnet")
            if self.confnet_features == "structure":
                inputs = structural_features(context.walk, distributions, state.view_count)
            else:
                inputs = unit_rows(context.features)
            confnet = confnet_confidence(
                context.walk, inputs, multiview, np.flatnonzero(~labeled), eta=float(self.eta),
                depth=int(self.confnet_depth), l2=float(self.confnet_l2), tie_rank=context.tie_rank,
            )
        timings["confnet"] = time.perf_counter() - clock
        if smoothed_logits is not None:
            unlabeled = np.flatnonzero(~labeled)
            distributions[unlabeled] = softmax_proba(smoothed_logits[unlabeled], np.eye(context.n_classes), intercept)
        return state, distributions, multiview, confnet, timings

    def _batch_size(self, n_samples):
        if self.patch_batch_size == "auto":
            return 1 if n_samples < BATCH_FROM_SAMPLES else 8
        return int(self.patch_batch_size)

    def _build_graph(self, features, rng):
        """The kNN graph, with K clamped to n_samples - 1 on tiny inputs."""
        # With a random_state the result must be reproducible, so hnswlib builds on one
        # thread; without one, on all cores (see knn_search's n_jobs).
        n_jobs = None if self.random_state is not None else -1
        return fit_graph(features, self.n_neighbors, method=self.graph_method, random_state=rng, n_jobs=n_jobs)

    def _distributions(self, state, walk, logits, intercept, labeled):
        """Mean of views where there are any, the global predictor elsewhere.

        Computed in place in ``state.probability_sum`` (which it returns):
        the view sums are not needed afterwards, and at a million vertices
        each (n, n_classes) copy is worth saving.
        """
        seen = state.view_count > 0
        distributions = state.probability_sum
        mean_of_views = (seen & ~labeled)[:, None]  # seeds keep their one-hot row
        np.divide(distributions, state.view_count[:, None], out=distributions, where=mean_of_views)
        unreached = np.flatnonzero(~seen & ~labeled)
        if unreached.size:
            smoothed = walk.smooth(logits, unreached, int(self.predictor_depth))
            distributions[unreached] = softmax_proba(smoothed, np.eye(logits.shape[1]), intercept)
        distributions /= distributions.sum(axis=1, keepdims=True)
        multiview = np.where(seen | labeled, state.confidence, 0.0)
        return distributions, multiview

    def _final_confidence(self, multiview, confnet, labeled):
        if self.confidence == "confnet" and confnet is not None:
            final = confnet.copy()
        elif self.confidence == "both" and confnet is not None:
            final = 0.5 * (multiview + confnet)
        else:
            final = multiview.copy()
        final[labeled] = 1.0
        return np.clip(final, 0.0, 1.0)

    def _choose_threshold(self, confidence, predicted, unlabeled, validation):
        if validation is not None:
            indices, truth = validation
            # -inf (rejecting nothing is best) reads better as 0; +inf (rejecting everything is, e.g.
            # when every validation sample is a known outlier) as the smallest float above 1.
            return min(max(float(choose_threshold(confidence[indices], predicted[indices], truth)), 0.0),
                       REJECT_ALL)
        if self.outlier_threshold is None:
            return 0.0
        if isinstance(self.outlier_threshold, str):
            return float(automatic_threshold(confidence[unlabeled])) if unlabeled.size else 0.0
        return float(self.outlier_threshold)

    def _notify(self, stage, done=None, total=None):
        if self.progress is not None:
            self.progress(stage, done, total)
        elif self.verbose:
            if stage == "propagation":
                sys.stderr.write(f"\rfastprop: propagating, {done}/{total} confident")
            else:
                prefix = "\n" if stage == "confnet" else ""
                sys.stderr.write(f"{prefix}fastprop: {_STAGE_TEXT[stage]}\n")

    def _propagation_progress(self, n_confident, n_vertices):
        self._notify("propagation", n_confident, n_vertices)


_STAGE_TEXT = {
    "graph": "building the kNN graph",
    "training": "training the local predictor",
    "confnet": "training ConfNet",
    "done": "done",
}


def warmup():
    """Compile (or load from Numba's on-disk cache) every kernel FastProp uses.

    A service can call it once at start-up so that its first real ``fit``
    pays no compilation: the first call in a fresh environment takes a few
    seconds, later processes load the cache in well under a second.

    Returns
    -------
    float
        Seconds spent.
    """
    clock = time.perf_counter()
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(loc, 0.3, size=(30, 4)) for loc in (-2.0, 2.0)])
    y = np.full(60, -1)
    y[[0, 30]] = [0, 1]
    for training in ("graph", "patches"):
        FastProp(n_neighbors=5, predictor_training=training, random_state=0).fit(X, y)
    return time.perf_counter() - clock
