"""FastProp's hyperparameters: their checks, and what they mean for one fit.

Kept apart from the estimator so that ``FastProp`` itself is a thin shell:
``fit`` calls :func:`check_settings` first (scikit-learn's rule: parameters
are stored as given by ``__init__`` and ``set_params`` and validated by
``fit``), then reads :func:`pass_options`, :func:`decision_options` and :func:`patch_workspace`.
"""

import numpy as np

from ._labels import check_unlabeled
from ._validation import check_bool, check_choice, check_integer, check_memory, check_real
from .local_networks import LOCAL_NETWORKS
from .propagation import PassOptions
from .refinement import DecisionOptions
from .scheduler import PatchSettings, PatchWorkspace
from .threshold import CONFIDENCE_SOURCES

#: From this many samples on, ``patch_batch_size="auto"`` processes patches in
#: parallel batches of 8 (measured on 2 cores: 1.5-1.8x at 1M vertices, no gain at 100k;
#: both before single patches were shared among the threads by rows).
BATCH_FROM_SAMPLES = 200_000
#: ``local_predictor`` values: the linear SGC, then the two-layer networks.
LOCAL_PREDICTORS = ("sgc", *LOCAL_NETWORKS)
#: Below this direction spread of the rows (:func:`predictor_penalty`) the predictor's penalty shrinks with it,
#: to this share of ``predictor_l2`` at the least.
PARALLEL_SPREAD = 0.25
MIN_PENALTY_SHARE = 1e-6


def check_settings(model):
    """Raise a ValueError naming the first invalid hyperparameter of ``model`` (a FastProp)."""
    check_integer("n_neighbors", model.n_neighbors, low=1)
    check_real("min_gain", model.min_gain, low=0, low_inclusive=False)
    check_integer("max_patch_size", model.max_patch_size, low=2)
    check_integer("exclusion_hops", model.exclusion_hops, low=0)
    _check_auto_or_integer("patch_batch_size", model.patch_batch_size, low=1, high=255)
    for name in ("process_capped_patches", "single_view_restarts", "provisional_classes", "calibrate_confidence"):
        if not isinstance(getattr(model, name), (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {getattr(model, name)!r}.")
    check_real("confident_threshold", model.confident_threshold, low=0, high=1, low_inclusive=False)
    check_real("single_view_confidence", model.single_view_confidence, low=0, high=1)
    check_integer("predictor_depth", model.predictor_depth, low=0, high=10)
    check_real("predictor_l2", model.predictor_l2, low=0)
    if model.feature_energy is not None:
        check_real("feature_energy", model.feature_energy, low=0, high=1, low_inclusive=False)
    check_integer("confnet_depth", model.confnet_depth, low=0, high=10)
    check_real("confnet_l2", model.confnet_l2, low=0)
    check_real("eta", model.eta, low=0, high=0.5, low_inclusive=False)
    _check_auto_or_integer("pseudo_labels", model.pseudo_labels, low=0)
    check_choice("confidence", model.confidence, ("auto", *CONFIDENCE_SOURCES))
    check_choice("local_predictor", model.local_predictor, LOCAL_PREDICTORS)
    check_choice("predictor_training", model.predictor_training, ("graph", "patches"))
    check_choice("confnet_features", model.confnet_features, ("structure", "embedding"))
    check_choice("labels", model.labels, ("graph", "views"))
    check_choice("graph_method", model.graph_method, ("auto", "exact", "hnsw"))
    check_choice("validation_rule", model.validation_rule, ("smoothed", "max"))
    check_unlabeled(model.unlabeled)
    check_bool("verbose", model.verbose)
    if model.progress is not None and not callable(model.progress):
        raise ValueError(
            f"progress must be a callable progress(stage, done, total) or None, got {model.progress!r}."
        )
    threshold = model.outlier_threshold
    if threshold is not None and not (isinstance(threshold, str) and threshold == "auto"):
        if isinstance(threshold, str):
            raise ValueError(
                f"outlier_threshold={threshold!r} is not supported; use 'auto', a float in [0, 1] or None."
            )
        check_real("outlier_threshold", threshold, low=0, high=1)
    if model.outlier_share is not None:
        check_real("outlier_share", model.outlier_share, low=0, high=1, high_inclusive=False)


def _check_auto_or_integer(name, value, *, low, high=None):
    """Raise a ValueError unless ``value`` is ``"auto"`` or an int in [low, high]."""
    if isinstance(value, str):
        if value != "auto":
            allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
            raise ValueError(f"{name}={value!r} is not supported; use 'auto' or {allowed}.")
        return
    check_integer(name, value, low=low, high=high)


def predictor_penalty(predictor_l2, spread):
    """The local predictor's L2 penalty for rows of :func:`fastprop.rows.direction_spread` ``spread``.

    ``predictor_l2`` times ``min(1, max(spread / PARALLEL_SPREAD, MIN_PENALTY_SHARE))``. The penalty
    holds the weights against rows' differences, which are small where every
    row points nearly the same way (embeddings with a large common offset):
    there the weights must grow as the differences shrink, and a fixed
    penalty left the predictor's probabilities near uniform (fuzzing round
    14: a mean cosine of 0.9988 made FastProp reject 99% of the samples,
    its argmax still right; bench/RESULTS.md). Every data set measured so
    far spreads 0.31-0.96, above :data:`PARALLEL_SPREAD`, and keeps
    ``predictor_l2`` as it is. Rows of two classes less than ~60 degrees
    apart, or non-negative features, can spread less and get a smaller
    penalty too (Banking77 and MNIST made anisotropic by an offset: +0.3 to
    +1.9 points where it applies, one tie below). The share never reaches 0
    (rows of one direction, a single row): the regression stays strictly
    convex.
    """
    return float(predictor_l2) * min(1.0, max(spread / PARALLEL_SPREAD, MIN_PENALTY_SHARE))


def confidence_source(model, has_validation):
    """The confidence source a fit of ``model`` uses: ``"auto"`` is ``"global"`` but where it measured worse or untried.

    ``"global"`` with a validation set, and without one for the unaided
    automatic threshold (``outlier_threshold="auto"``, no ``outlier_share``,
    provisional classes built), whose first identification then takes the
    global confidence's lowest :data:`fastprop.threshold.FIRST_IDENTIFIED_SHARE`
    (:func:`fastprop.refinement.first_threshold`); else the paper's ``"both"``.
    With a validation set the whole graph's label probability ranks as well
    as the paper's multi-view confidence and ConfNet (a tie in every cell of
    the levers tasks at 0.5 / 1 / 5% seeds) at half the fit's time; without
    one, a tie on average at 0.5 / 1 / 5% seeds at two thirds of it
    (bench/RESULTS.md, issues #16 / #17). With an ``outlier_share`` and no
    validation set it lost on MNIST (-1 to -3 points), and without
    provisional classes the automatic threshold reads the multi-view
    confidence's shape (half of Otsu's split), which the global confidence,
    near 1 almost everywhere, does not have. A GCN or GAT ``local_predictor``
    keeps the paper's loop, where it runs.
    """
    if model.confidence != "auto":
        return model.confidence
    if model.local_predictor != "sgc":
        return "both"  # a GCN or GAT asked for is a local predictor: it runs in the patch loop
    unaided = (isinstance(model.outlier_threshold, str) and model.outlier_share is None
               and bool(model.provisional_classes))
    return "global" if has_validation or unaided else "both"


def pass_options(model, spread, has_validation):
    """The settings of one propagation pass (``spread``: the rows' :func:`fastprop.rows.direction_spread`)."""
    return PassOptions(
        local_predictor=model.local_predictor,
        predictor_training=model.predictor_training,
        predictor_depth=int(model.predictor_depth),
        predictor_l2=predictor_penalty(model.predictor_l2, spread),
        confident_threshold=float(model.confident_threshold),
        single_view_confidence=float(model.single_view_confidence),
        process_capped_patches=bool(model.process_capped_patches),
        single_view_restarts=bool(model.single_view_restarts),
        confidence=confidence_source(model, has_validation),
        labels=model.labels,
        confnet_features=model.confnet_features,
        confnet_depth=int(model.confnet_depth),
        confnet_l2=float(model.confnet_l2),
        eta=float(model.eta),
        pseudo_labels=model.pseudo_labels,
    )


def decision_options(model, spread, has_validation):
    """The settings of the stages after the pass (:func:`fastprop.refinement.decide_outliers`)."""
    return DecisionOptions(
        outlier_threshold=model.outlier_threshold,
        outlier_share=model.outlier_share,
        provisional_classes=bool(model.provisional_classes),
        confidence=confidence_source(model, has_validation),
        calibrate_confidence=bool(model.calibrate_confidence),
        validation_rule=model.validation_rule,
        predictor_depth=int(model.predictor_depth),
        predictor_l2=predictor_penalty(model.predictor_l2, spread),
        n_neighbors=int(model.n_neighbors),
    )


def batch_size(patch_batch_size, n_samples):
    """Patches per batch: ``"auto"`` is 1 below ``BATCH_FROM_SAMPLES`` samples, 8 from there on."""
    if patch_batch_size == "auto":
        return 1 if n_samples < BATCH_FROM_SAMPLES else 8
    return int(patch_batch_size)


def patch_workspace(model, graph, n_features, n_classes, has_validation):
    """The patch loop's buffers for ``model``'s settings, refused up front when they would not fit in memory.

    None when the fit grows no patch: ``confidence="global"`` with a
    local predictor trained on the whole graph.
    """
    if confidence_source(model, has_validation) == "global" and model.predictor_training == "graph":
        return None
    settings = PatchSettings(
        min_gain=float(model.min_gain),
        max_patch_size=int(model.max_patch_size),
        exclusion_hops=int(model.exclusion_hops),
        depth=int(model.predictor_depth),
    )
    shape = dict(n_columns=n_features, n_slots=batch_size(model.patch_batch_size, graph.shape[0]),
                 batch_columns=n_classes)
    check_memory(
        PatchWorkspace.bytes_needed(graph, settings, **shape),
        f"FastProp's patch buffers (max_patch_size={model.max_patch_size!r}, patch_batch_size="
        f"{model.patch_batch_size!r}, {n_features} features, {n_classes} classes)",
        "lower max_patch_size or patch_batch_size.",
    )
    return PatchWorkspace(graph, settings, **shape)
