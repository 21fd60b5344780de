"""FastProp: reliable label propagation on noisy affinity graphs.

The estimator is a shell: hyperparameter checks live in :mod:`fastprop._settings`,
the propagation pass in :mod:`fastprop.propagation`, the provisional classes, the
calibration and the outlier decision in :mod:`fastprop.refinement` (over
:mod:`fastprop.novelty` and :mod:`fastprop.calibration`), the threshold rules in
:mod:`fastprop.threshold` and the labelling of new points in :mod:`fastprop.prediction`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from ._concurrency import serialised
from ._estimator_protocol import TransductiveEstimator
from ._labels import (check_known_outliers, check_labels, check_validation, decode_labels, encode_known,
                      warn_if_mostly_marked)
from ._reporting import Reporter
from ._settings import check_settings, decision_options, pass_options, patch_workspace
from ._validation import check_features, check_graph, check_memory, check_random_state, check_sample_weight
from .graph import fit_graph
from .prediction import NeighbourhoodPredictor
from .propagation import FitContext, propagation_pass
from .refinement import decide_outliers
from .rows import direction_spread
from .suggestions import suggested_samples
from .threshold import REJECT_ALL, warn_if_many_classes, warn_if_validation_is_only_outliers

__all__ = ["FastProp", "REJECT_ALL"]

#: (n_samples, n_classes) float64 arrays a fit holds at its peak, rounded up: 4.6 measured with
#: 1,000 classes on 20,000 samples (the distributions, a walk step's input and output, the
#: predictor's float32 levels; bench/RESULTS.md, fuzzing round 14).
PEAK_CLASS_ARRAYS = 5


class FastProp(TransductiveEstimator):
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
        passes this (the paper's Delta c_tau), or once it holds its whole
        connected component with any gain left: on a component smaller than
        ``max_patch_size`` whose remaining gain is below ``min_gain``, every
        later patch is the whole component.
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
        ``"auto"``: 1 below ``BATCH_FROM_SAMPLES`` (200,000) samples, 8 above
        (measured on 2 cores: bench/RESULTS.md). The result never depends on
        the number of threads.
    exclusion_hops : int, default=1
        After a vertex has started a patch, vertices within this many hops
        never start one (m).
    confident_threshold : float, default=0.9
        c_tau: a vertex whose multi-view confidence passes it joins the
        confident set and is never updated again.
    single_view_confidence : float, default=1e-3
        The confidence of a vertex seen by a single patch (epsilon).
    single_view_restarts : bool, default=True
        When no confident vertex is left to start a patch from, the vertices
        seen by a single patch become starts too, the most probable first
        (each once; confident starts still go before them). False: the loop
        ends there (the paper's). In a cluster that holds a single seed the
        seed's patch is the only one; its vertices keep epsilon, none
        becomes confident, and the paper's loop left the cluster unseen
        beyond that patch: three separated clusters, two of them with one
        seed, lost both to the outlier threshold (accuracy 0.33 against 1.00).
        On the real sets the restarts grow few patches or none (the vertices
        seen once sit next to confident regions): a tie on the levers tasks
        (+0.01 to +0.13 points a cell on average at 0.5 and 1% seeds, with
        and without a validation set; every cell inside its spread;
        bench/RESULTS.md).
    local_predictor : {"sgc", "gcn", "gat"}, default="sgc"
        The network that labels a patch (the paper's Table 2 columns).
        ``"sgc"``: ``softmax(S_P^depth X W + b)``, linear before its softmax
        (the paper's choice). ``"gcn"``: the paper's Eq. 2 with two blocks,
        ``softmax(S_P relu(S_P X W1 + b1) W2 + b2)`` with 64 hidden units;
        ``"gat"``: the two attention layers of :class:`fastprop.baselines.GAT`
        (8 heads of 8 units) on the patch's neighbourhoods. Both are trained
        as those baselines are (Adam, dropout, 200 epochs) on the seeds of
        ``predictor_training``'s problem, use the unit rows of ``X``, and
        ignore ``predictor_depth`` and ``predictor_l2``; their patches run one
        at a time on SciPy (see :mod:`fastprop.local_networks`). The
        provisional classes keep an SGC of ``predictor_depth``.
    pseudo_labels : int or "auto", default="auto"
        Self-training (:mod:`fastprop.self_training`): after the patch loop
        and ConfNet, the SGC local predictor is fitted again on the seeds
        plus this many of its own labels, split evenly among the classes
        (``ceil(pseudo_labels / n_classes)`` a class, fewer where a class has
        fewer): the most confident unlabeled samples of each class, by the
        final confidence, with the class it gave them (never a known
        outlier, nor a sample no patch reached). Every unlabeled sample's label then comes from the
        refitted predictor, which also labels new points; the confidence
        changes only through the provisional classes, whose known classes
        are topped up with the most confident of these labels
        (:data:`fastprop.novelty.TOP_UP_ROWS`). 0 is the paper's single round. Used with
        ``local_predictor="sgc"`` and ``labels="graph"`` only. ``"auto"``
        is 3000, or 100 a class when that is more, at most 10,000 and at most
        2/3 of the unlabeled samples some patch reached (known outliers aside), so that small
        classes are not taken whole on average; a predicted class smaller than
        its even share still is (:func:`fastprop.self_training.pseudo_label_total`): a count that
        does not grow with the samples keeps the refit (a softmax regression
        on that many rows) as cheap at a million samples as at ten thousand;
        3000 is 100 a class on Banking77 (30 classes) and 600 on MNIST (5),
        the best of those measured there (25-150 and 100-1200 a class); from
        40 classes up 100 a class gained +0.65 to +1.59 points a cell over
        3000 without a validation set, a tie with one. Measured with a validation threshold
        against 0 (bench/RESULTS.md, 1% seeds, 5 seeds): in-class accuracy
        +2.4 to +4.3 points on Banking77 and HWU64 and +1.2 on MNIST at
        every outlier ratio; accuracy with rejection +1.2 to +4.2 at 0%,
        ties at 30-50%; at 5% seeds ties, but MNIST loses 0.1-0.3; 0.2-0.3 s
        more on 10k 384-d samples.
    predictor_depth : int, default=2
        SGC depth of the local predictor.
    predictor_l2 : float, default=3e-5
        Ridge penalty of the local predictor's softmax regression, for rows
        whose directions spread as most embeddings' do; on rows that nearly
        all point one way (a mean cosine similarity above ~0.75) it shrinks
        with their spread, ``1 - ||mean unit row||^2`` over 0.25 (a common
        offset of the embeddings otherwise left the predictor's
        probabilities near uniform).
    feature_energy : float or None, default=0.95
        The SGC models (the local predictor, the provisional classes) read
        the unit rows on their fewest leading uncentred principal directions
        keeping this share of their energy (:mod:`fastprop.principal`: not
        with under 128 columns, or when that keeps over 3/4 of them): 139 of
        Banking77's 384 MiniLM dimensions, 104 of MNIST's 784 pixels, a tie
        in accuracy at 0.5-1.0x the time (bench/RESULTS.md). None: all (the paper's).
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
        synthetic mixture +3 at 0% (bench/RESULTS.md). With a GCN or GAT
        ``local_predictor`` the network trains on the training patches as
        disjoint blocks of one graph (a patch that repeats, one that took a
        small component whole, is one block, its seeds counted as often as
        it repeats): each epoch then costs the seeds' two-hop neighbourhoods
        summed over the patches, about the number of training patches times
        their size (at most ``max_patch_size``) when seeds are dense (3,000
        samples with 18% seeds: 290 patches of ~610 samples, 178k rows, GAT
        215 s; 10k samples with 1% seeds: GAT 23-38 s, GCN 5-8 s).
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
    confidence : {"auto", "both", "multiview", "confnet", "random", "global"}, default="auto"
        The pass's confidence: the mean of multi-view and ConfNet (``"both"``,
        the paper's ConfNet-dagger), either alone, the random-score ablation,
        or ``"global"``: no patch loop (its settings inert) and no ConfNet, the
        whole-graph predictor's largest label probability (0 in a component
        without a seed). ``"auto"`` (:func:`fastprop._settings.confidence_source`):
        ``"global"`` (a tie in less time), but ``"both"`` with a GCN or GAT ``local_predictor``,
        and without a validation set when ``outlier_share`` is given or ``provisional_classes=False``.
    provisional_classes : bool, default=True
        Give the samples the first threshold rejects (:func:`~fastprop.refinement.first_threshold`;
        without a validation set the lowest 15% of a global confidence) classes of their own
        (:mod:`fastprop.novelty`): as many provisional seeds as the seeds'
        density gives them, placed farthest-first in SGC space; a softmax over
        the known and the provisional classes then competes for every sample,
        and the threshold is chosen again on the final confidence
        (:func:`fastprop.novelty.blended_confidence`): the known-class
        probability (with a validation set, and for ``"auto"`` alone from
        40 classes up, the two largest summed, from 48 up the three:
        :func:`fastprop.novelty.known_top`) weighs
        ``min(1, 2 x`` an outlier share``)``
        (:func:`fastprop.novelty.known_class_weight`: the validation set's,
        or without one the share the provisional classes claim), and the
        rest is each sample's largest label probability (the first
        confidence where no patch reached it). With a validation set the
        rest is that probability also when no provisional class is due;
        without one nothing changes then (the first threshold rejected no
        sample, e.g. no outliers, or too few to earn a class). With
        ``"auto"`` and no validation set the classes are built
        :data:`fastprop.novelty.AUTO_ROUNDS` (3) times, each next build for
        the samples the last blend puts below 0.5
        (:func:`fastprop.novelty.refined_confidence`; beyond 20,000
        unlabeled samples the first two read a random 5,000 of them):
        +0.8 to +0.9 points on average at 0.5 / 1 / 5% seeds; each build
        is fitted again with its classes' most confident samples as rows
        (:func:`fastprop.novelty.refit_rows`). With or
        without a validation set every known class is trained there on 5
        rows at least, its seeds topped up with self-training's most
        confident labels (:data:`fastprop.novelty.TOP_UP_ROWS`): +0.4 points
        more without one, +0.16 / +0.28 / 0.00 with one (three draws of the
        fit). Measured
        (bench/RESULTS.md, issue #16) over the paper's confidence as the
        rest: +0.5 to +0.7 points of accuracy on average with a validation
        set, and with ``"auto"``'s cut at 0.5 +1.9 to +2.7 without. The
        provisional classes when first measured with a validation
        threshold, against the same labels without them (5 seeds): accuracy
        +3.0 / +3.3 / +6.3 points at 50% outliers on Banking77 / HWU64 /
        MNIST, -0.6 / +1.4 / +3.0 at 30%, -0.5 / -1.2 / +1.1 at 10%; outlier
        AUROC -0.1 to +7.4 at 30-50%. False is the paper's confidence.
    outlier_threshold : "auto", float or None, default="auto"
        o_tau. ``"auto"`` with ``validation`` given to ``fit``: the threshold
        that maximises accuracy on it (see ``validation_rule``); a number or
        ``None`` is kept as given even then (the validation set still
        calibrates ``confidence_``, so that e.g. 0.5 rejects the samples whose
        class is more likely wrong than right). ``"auto"`` without one: as
        many as 0.5 rejects of the blend of class probabilities the
        provisional classes make (see ``provisional_classes``), by that blend
        smoothed over the graph once (:func:`~fastprop.threshold.smoothed_ranking`), else half of Otsu's split
        of the reached samples' confidences (:func:`~fastprop.threshold.automatic_threshold`);
        a sample without a view is an outlier, as in the paper. It cannot know
        the outlier share as a validation set does: with no outlier it rejects
        1-9% of the in-class samples, and it scores 2.6 points a cell below
        a validation set at 1% seeds, up to 8.5 (MNIST at 30% outliers), 3-4
        on the sentence sets with no outlier (bench/RESULTS.md); with many
        classes and no outlier at all it rejects far more (see
        ``outlier_share``): from
        :data:`~fastprop.threshold.MANY_CLASSES` (40) classes up, ``fit``
        emits a :class:`~fastprop.threshold.OutlierThresholdWarning` when
        neither a validation set nor ``outlier_share`` is given. ``None``: no
        sample is rejected (but the known ``outliers`` given to ``fit``).
    outlier_share : float in [0, 1) or None, default=None
        The share of the unlabeled samples you expect to be outliers, if you
        know it roughly. With ``"auto"`` and no validation set, the
        known-class confidence is weighed by it (instead of the share the
        provisional classes claim) and that share of the unlabeled samples
        (known ``outliers`` aside, which are rejected besides), those of
        lowest confidence (smoothed over the graph once), is rejected
        (:func:`fastprop.threshold.share_threshold`), and so is every
        sample no patch reached; 0 rejects none (but the known outliers)
        and builds no provisional class. A validation set, or a threshold given (a number or None),
        overrides it. Measured (bench/RESULTS.md, issue #16
        item 2; three data sets, 0-50% outliers, 0.5 / 1 / 5% seeds, 5 task
        seeds) with the true share: within 1.5 points of a validation
        threshold in all 36 cells (+0.15 to +1.2 on average; ``"auto"``
        alone -1.7 to -2.2 when this was measured, -2.6 a cell at 1% seeds
        against today's validation path); at 1% seeds a share 0.1 too
        high lost up to 8.6 points where there was no outlier, 0.1 too low
        up to 2.7: when unsure, err low. With every class seeded and no
        outlier ``"auto"`` alone rejected 9-10% of the in-class samples of
        40-class tasks, 10-14% with 48-60 classes and 14-16% on the whole of
        Banking77 and HWU64 (64-77 classes) at 1% seeds; 0 rejects none.
    validation_rule : {"smoothed", "max"}, default="smoothed"
        How ``validation`` chooses the final o_tau. ``"max"`` (the paper's):
        the threshold of highest validation accuracy
        (:func:`fastprop.threshold.choose_threshold`). ``"smoothed"``: the
        highest validation accuracy once each sample's step is a logistic
        ramp of Silverman's bandwidth
        (:func:`fastprop.threshold.smoothed_threshold`), so that the peak a
        few tens of samples happen to draw moves the threshold less. The
        samples given provisional classes are those the paper's rule
        rejects either way, so the confidence does not depend on this.
        Measured (bench/RESULTS.md, issue #16; 5 task seeds, three data sets,
        0.5 / 1 / 5% seeds, 10-50% outliers): +0.47 points of accuracy on
        average, 22 of 27 cells better (up to +1.6), the worst -0.49 ± 1.89;
        identical without outliers.
    calibrate_confidence : bool, default=True
        With ``validation`` given to ``fit``: the final confidence of every
        unlabeled sample becomes the probability that its most probable
        class is right, fitted on the validation set in two logistic steps
        (:mod:`fastprop.calibration`): the probabilities that the sample's
        label is right and that it is no outlier, each from the confidence's
        log-odds and graph signals, the in-class reach (how much of a short
        walk from the sample ends on a seed or on one of the validation
        set's in-class samples, each of those left out of its own), the
        local density (its mean similarity to its ``n_neighbors`` most
        similar neighbours) and, when
        the validation set holds outliers, their reach (each left out of its
        own), whose weights the validation set sets under a ridge, then
        Platt scaling of their mean (below 1/2 exactly where an outlier is
        likelier than a right label); the outlier threshold is chosen on the
        result. Measured
        (bench/RESULTS.md; three data sets, 0.5 / 1 / 5% seeds, 0-50%
        outliers, 5 task seeds): expected calibration error 0.110 / 0.087 /
        0.091 -> 0.068 / 0.049 / 0.024 on average (today's code: 0.065 /
        0.047 / 0.023; the uncalibrated
        confidence claims 9-14 points too much at 30% outliers); accuracy
        +1.0 / +0.8 / +1.1 points a cell with outliers, +0.7 with 50
        intents; outlier AUROC +1.1 / +1.5 / +2.3 a cell, +3.6 with 50
        intents, with the first two signals; the validation outliers' reach
        then +0.17 / +0.44 / +1.06 points, AUROC +0.43 / +0.90 / +1.50 (+1.3
        to +1.6 points with 50 intents), and the validation set's in-class
        samples in the reach +0.31 / +0.16 / +0.15 points, AUROC +0.44 /
        +0.38 / +0.19 (+0.77 points with 50 intents at 1% seeds). The final
        confidence is then the mean of that and of each sample rescored as
        a new point at its place is (its neighbours' agreeing calibrated
        confidence through the same fits with its own signals;
        :func:`fastprop.prediction.rescored_as_new_points`): +0.44 / +0.74 /
        +0.33 points a cell, AUROC +0.42 / +0.42 / +0.33. Without a
        validation set nothing changes (no truth to fit on).
        False: the confidence as the method computes it (the paper's).
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
        ``"confnet"``, ``"provisional"`` (the provisional classes and the
        final threshold) and ``"done"``; ``done``/``total`` are None where there
        is no count. scikit-learn's ``clone`` (in ``GridSearchCV``) deep-copies
        a bound method with its instance, so a tracker object sees none of the
        copies' calls; a plain function or a closure does.
    unlabeled : int, str or None, default=-1
        The label of an unlabeled sample in ``y``, and the label of an
        outlier in ``transduction_`` and :meth:`predict`. Labels may be
        integers or class names (strings); with names, pass e.g.
        ``unlabeled=""`` or ``None`` (None marks missing labels: None, NaN
        or pandas' ``NA``). With the default -1, the string
        ``"-1"`` marks an unlabeled sample too (``numpy.asarray(["cat", -1])``
        holds ``"-1"``).

    Attributes
    ----------
    n_features_in_ : int
        Columns of ``X`` seen by ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,), object
        The column names of ``X`` seen by ``fit``, when they are all strings
        (a pandas DataFrame's); new points must then have the same columns
        in the same order. Absent otherwise.
    classes_ : ndarray of shape (n_classes,)
        The distinct labels of ``y`` other than ``unlabeled``, sorted.
    transduction_ : ndarray of shape (n_samples,)
        A class for every sample, ``unlabeled`` (-1) for outliers; seeds keep
        their label.
    label_distributions_ : ndarray of shape (n_samples, n_classes)
        Rows sum to 1; seeds get their one-hot row. With ``labels="graph"``
        every other vertex gets the local predictor applied to its
        whole-graph neighbourhood; with ``"views"`` the mean of its patch
        views, and a vertex no viable patch reached the whole-graph
        prediction (with multi-view confidence 0).
    confidence_ : ndarray of shape (n_samples,)
        Final confidence in [0, 1]; 1 for seeds. The paper's (see
        ``confidence``) with ``provisional_classes=False``; otherwise see
        ``provisional_classes``. With a validation set, calibrated with graph
        signals and averaged with its neighbourhood's (see
        ``calibrate_confidence``): the probability that the sample's most
        probable class is right.
    multiview_confidence_, confnet_confidence_ : ndarray of shape (n_samples,)
        The two stages (ConfNet's is NaN when it could not be trained).
    view_count_ : ndarray of shape (n_samples,)
        Processed patches that covered each sample (0 for seeds; under ``"global"`` 1 if reached).
    outlier_threshold_ : float
        The o_tau used (0.0 when ``outlier_threshold=None``); ``REJECT_ALL``,
        the smallest float above 1, when every unlabeled sample is rejected:
        rejecting every validation sample scored best (e.g. ``validation``
        holds only known outliers), or ``outlier_share`` rounds to all of
        them. Chosen on the calibrated ``confidence_`` when it is calibrated.
    confidence_calibration_ : dict or None
        How ``confidence_`` was made from the method's confidence
        (:func:`fastprop.calibration.calibrate_on_validation`): ``"right"``
        and ``"in_class"``, the ``(slope, in-class reach weight, density weight[,
        validation outliers' reach weight], intercept)`` of the two fits of
        :func:`fastprop.calibration.ranking_with_graph_signals` (``"in_class"``
        None when the validation set holds no outlier, or nothing else), and
        ``"calibration"``, the ``(slope, intercept)`` of the Platt map of
        their mean; None when nothing was calibrated (no validation set,
        ``calibrate_confidence=False``, or a fit found no increasing map of
        the confidence).
    n_iter_ : int
        Patches processed.
    n_starts_ : int
        Start vertices tried, viable or not.
    n_provisional_classes_ : int
        Provisional classes given to the samples the first threshold
        rejected (0 with ``provisional_classes=False``).
    predictor_l2_ : float
        The local predictor's ridge penalty used: ``predictor_l2``, smaller
        where the rows nearly all point one way (see ``predictor_l2``).
    n_predictor_features_ : int
        Columns the SGC models read (``feature_energy``'s directions).
    n_training_patches_ : int
        Patches sampled around the seeds to train the local predictor (0
        with ``predictor_training="graph"``).
    graph_ : scipy.sparse.csr_matrix
        The affinity graph used.
    timings_ : dict
        Seconds spent in each phase.
    labeled_ : ndarray of shape (n_samples,), bool
        The seeds (samples labeled in ``y``).
    known_outliers_ : ndarray of int64
        The ``outliers`` given to ``fit``, sorted (empty when none).
    predictor_ : fastprop.prediction.NeighbourhoodPredictor
        What :meth:`predict` uses: the fitted embeddings (``X`` itself when
        it is C-contiguous float32, else the float32 copy ``fit`` made), the
        local predictor, its logits smoothed ``0 .. depth - 1`` steps
        (``predictor_depth`` float32 (n_samples, n_classes) arrays; with a
        GCN or GAT local predictor, each layer's inputs at every sample),
        the fitted confidence and classes; with a calibrated confidence, the
        calibration and what a walk collects from each fitted sample on
        (one or two float64 (n_samples,) arrays: new points' reaches); above
        30,000 samples, also the hnswlib index it builds on first use. Not
        the graph: ``graph_`` may be deleted to save memory.
        ``predictor_.nbytes`` gives its size.

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
    edges per sample, 8 bytes each), ``fit`` holds at most three
    (n_samples, n_classes) float64 arrays at once (the label
    distributions, a walk step's input and its output), ConfNet's
    (n_samples, 9) descriptors and about twenty per-sample vectors, and it
    keeps for ``predict`` the predictor's float32 logit levels (the
    README's Limits). It copies neither a
    canonical float32 CSR graph nor C-contiguous float32 embeddings
    (unnormalised rows are scaled as they are read; only the paper-mode
    ablations ``predictor_training="patches"`` and
    ``confnet_features="embedding"`` normalise a copy).
    Measured at 1M samples x 128 dims, 20 classes: about 0.6-0.7 GB on top
    of X, the graph and the interpreter (bench/RESULTS.md, the scale
    bench's fit peak of 1,730 MB).

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
    >>> model.predict(centres).tolist()
    [0, 1]
    """

    _ESTIMATOR_TYPE = "classifier"

    def __init__(
        self,
        *,
        n_neighbors: int = 30,
        min_gain: float = 500.0,
        max_patch_size: int = 3000,
        process_capped_patches: bool = False,
        patch_batch_size: int | Literal["auto"] = "auto",
        exclusion_hops: int = 1,
        confident_threshold: float = 0.9,
        single_view_confidence: float = 1e-3,
        single_view_restarts: bool = True,
        predictor_depth: int = 2,
        predictor_l2: float = 3e-5,
        feature_energy: float | None = 0.95,
        confnet_depth: int = 1,
        confnet_l2: float = 1e-3,
        eta: float = 0.05,
        local_predictor: Literal["sgc", "gcn", "gat"] = "sgc",
        pseudo_labels: int | Literal["auto"] = "auto",
        predictor_training: Literal["graph", "patches"] = "graph",
        labels: Literal["graph", "views"] = "graph",
        confnet_features: Literal["structure", "embedding"] = "structure",
        confidence: Literal["auto", "both", "multiview", "confnet", "random", "global"] = "auto",
        provisional_classes: bool = True,
        outlier_threshold: float | Literal["auto"] | None = "auto",
        outlier_share: float | None = None,
        validation_rule: Literal["smoothed", "max"] = "smoothed",
        calibrate_confidence: bool = True,
        graph_method: Literal["auto", "exact", "hnsw"] = "auto",
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
        progress: Callable[[str, int | None, int | None], object] | None = None,
        unlabeled: int | str | None = -1,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.min_gain = min_gain
        self.max_patch_size = max_patch_size
        self.process_capped_patches = process_capped_patches
        self.patch_batch_size = patch_batch_size
        self.exclusion_hops = exclusion_hops
        self.confident_threshold = confident_threshold
        self.single_view_confidence = single_view_confidence
        self.single_view_restarts = single_view_restarts
        self.predictor_depth = predictor_depth
        self.predictor_l2 = predictor_l2
        self.feature_energy = feature_energy
        self.confnet_depth = confnet_depth
        self.confnet_l2 = confnet_l2
        self.eta = eta
        self.local_predictor = local_predictor
        self.pseudo_labels = pseudo_labels
        self.predictor_training = predictor_training
        self.labels = labels
        self.confnet_features = confnet_features
        self.confidence = confidence
        self.provisional_classes = provisional_classes
        self.outlier_threshold = outlier_threshold
        self.outlier_share = outlier_share
        self.validation_rule = validation_rule
        self.calibrate_confidence = calibrate_confidence
        self.graph_method = graph_method
        self.random_state = random_state
        self.verbose = verbose
        self.progress = progress
        self.unlabeled = unlabeled

    @serialised
    def fit(self, X: ArrayLike, y: ArrayLike, graph: sp.spmatrix | sp.sparray | None = None,
            validation: tuple[ArrayLike, ArrayLike] | None = None, outliers: ArrayLike | None = None) -> FastProp:
        """Propagate the labels of ``y`` to every sample of ``X``.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Embeddings.
        y : array_like of shape (n_samples,)
            Class labels (integers or names), ``unlabeled`` (default -1) for
            unlabeled samples.
        graph : sparse matrix of shape (n_samples, n_samples), optional
            A precomputed non-negative affinity (e.g. from
            :func:`fastprop.build_knn_graph`); built with ``n_neighbors``
            otherwise. Its weights are read on their own scale: each sample
            also weighs itself 1 in the walk ``D~^-1 (W + I)`` (SGC's), so a
            graph times a constant is another graph (times 0.001, 18% of the
            labels of a Banking77 task changed). The defaults were chosen on
            cosine weights in [0, 1], ``build_knn_graph``'s.
        validation : tuple (indices, labels), optional
            Unlabeled samples whose truth is known (``unlabeled`` for a known
            outlier): they choose the outlier threshold (of
            ``outlier_threshold="auto"``), with ``calibrate_confidence``
            calibrate ``confidence_``, and with ``confidence="auto"`` let
            the fit skip the patch loop.
        outliers : array_like of int, optional
            Indices of unlabeled samples known to belong to no class (e.g.
            annotated so after :meth:`suggest_annotations`). They are labelled
            ``unlabeled`` with confidence 0 (whatever the threshold), and each
            becomes a provisional class of its own (see ``provisional_classes``;
            64 at most, spread farthest first; none with
            ``provisional_classes=False`` or ``outlier_share=0``), so that
            samples like them lose their claim to the known classes.

        Returns
        -------
        self
        """
        check_settings(self)
        notify = Reporter(self.progress, self.verbose)
        features = check_features(X, rescale_rows=True)  # only directions matter: cosine graph, unit rows
        n_samples = features.shape[0]
        classes, seed_class = check_labels(y, n_samples, self.unlabeled, stacklevel=3)  # past the wrapper
        labeled = seed_class >= 0
        if validation is not None:
            validation = check_validation(validation, n_samples, labeled, classes, self.unlabeled)
        known_outliers = check_known_outliers(outliers, n_samples, labeled, validation)
        if validation is not None and isinstance(self.outlier_threshold, str):
            warn_if_validation_is_only_outliers(validation[1], stacklevel=3)
        if validation is None and isinstance(self.outlier_threshold, str) and self.outlier_share is None:
            warn_if_many_classes(classes.size, stacklevel=3)  # from fit's caller, past the serialising wrapper
        check_memory(PEAK_CLASS_ARRAYS * 8 * n_samples * classes.size,
                     f"FastProp on {n_samples:,} samples and {classes.size:,} classes (about {PEAK_CLASS_ARRAYS} "
                     f"float64 arrays of samples x classes at its peak)",
                     "fit on a sample of the rows and predict the rest, or on fewer classes at once.")
        rng = check_random_state(self.random_state)
        tie_rank = rng.permutation(n_samples)
        timings = {}
        clock = time.perf_counter()
        if graph is None:
            notify("graph")
            # reproducible with a random_state: hnswlib builds on one thread then, else on all cores
            graph = fit_graph(features, self.n_neighbors, method=self.graph_method, random_state=rng,
                              n_jobs=None if self.random_state is not None else -1)
        else:
            graph = check_graph(graph, n_samples)
        context = FitContext.of(graph, features, seed_class, classes.size, tie_rank, rng, known_outliers,
                                self.feature_energy)
        timings["graph"] = time.perf_counter() - clock  # building or checking it, its CSR forms, the SGC features
        unlabeled = np.setdiff1d(np.flatnonzero(~labeled), known_outliers)  # what self-training may take
        spread = direction_spread(features, context.row_scale)
        validated = validation is not None
        options = pass_options(self, spread, validated)
        found = propagation_pass(context, patch_workspace(self, graph, features.shape[1], classes.size, validated),
                                 options, notify)  # the patch buffers go to the pass alone: freed after its loop
        timings.update(found.timings)
        decided = decide_outliers(context, found, unlabeled, validation, decision_options(self, spread, validated),
                                  notify)
        timings.update(decided.timings)
        calibrated = decided.calibrated
        self.n_provisional_classes_ = decided.n_provisional
        self.predictor_l2_ = options.predictor_l2
        self.n_predictor_features_ = context.feature_rows.features.shape[1]
        self.confidence_calibration_ = None if calibrated is None else calibrated[1].confidence_map.description()
        self.n_features_in_ = features.shape[1]
        self._record_feature_names(X)
        self.classes_ = classes
        self.label_distributions_ = found.distributions
        self.confidence_ = decided.confidence
        self.multiview_confidence_ = found.multiview
        self.confnet_confidence_ = (np.full(n_samples, np.nan) if found.confnet is None
                                    else np.where(labeled, 1.0, found.confnet))
        self.view_count_ = found.state.view_count
        self._fitted_unlabeled = self.unlabeled  # predict's and score's marker, whatever set_params does later
        self.transduction_ = decode_labels(classes, decided.predicted, self.unlabeled)
        self.outlier_threshold_ = decided.threshold
        self.n_iter_ = found.state.n_patches
        self.n_starts_ = found.state.n_starts
        self.n_training_patches_ = found.n_training_patches
        self.labeled_ = labeled
        self.known_outliers_ = known_outliers
        # samples of known truth: suggest_annotations never asks for them
        self._validation_samples = np.empty(0, dtype=np.int64) if validation is None else validation[0].copy()
        self.graph_ = graph
        self.timings_ = timings
        agreeing, new_points = (decided.confidence, None) if calibrated is None else calibrated
        self.predictor_ = NeighbourhoodPredictor(
            features, context.row_scale, found.make_scorer(), n_neighbors=self.n_neighbors, confidence=agreeing,
            fitted_class=decided.fitted_class, graph=graph, unlabeled=unlabeled,
            seed=int(rng.integers(0, 2**31 - 1)), build_jobs=1 if self.random_state is not None else None,
            calibration=new_points, owns_features=features is not X,
        )
        notify("done")
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Label new points: a class of ``classes_``, or the fit's ``unlabeled`` marker (an outlier).

        Each point is placed by its ``n_neighbors`` nearest fitted samples
        and labelled by the fitted local predictor on that neighbourhood; its
        confidence (:meth:`predict_confidence`) below ``outlier_threshold_``
        rejects it. See :mod:`fastprop.prediction`. The fitted samples' own
        labels are ``transduction_``.

        Parameters
        ----------
        X : array_like of shape (n_points, n_features)

        Returns
        -------
        ndarray of shape (n_points,)
        """
        distributions, confidence = self._predict_new(X)
        predicted = distributions.argmax(axis=1)
        predicted[confidence < self.outlier_threshold_] = -1
        return decode_labels(self.classes_, predicted, self._fitted_unlabeled)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class distributions of new points (rows sum to 1; columns in the order of ``classes_``).

        Parameters
        ----------
        X : array_like of shape (n_points, n_features)

        Returns
        -------
        ndarray of shape (n_points, n_classes)
        """
        return self._predict_new(X)[0]

    def predict_confidence(self, X: ArrayLike) -> np.ndarray:
        """Confidence of new points in [0, 1], comparable with ``confidence_`` and ``outlier_threshold_``.

        Parameters
        ----------
        X : array_like of shape (n_points, n_features)

        Returns
        -------
        ndarray of shape (n_points,)
        """
        return self._predict_new(X)[1]

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Accuracy of :meth:`predict` on points of known truth, the fit's ``unlabeled`` marking a true outlier.

        A rejected point is right when it is an outlier, an accepted one when
        its class is right (the paper's accuracy with rejection). A point of a
        class no seed had is wrong, as in ``sklearn.metrics.accuracy_score``.

        The marker is a *known* outlier here: a semi-supervised ``y`` in
        ``GridSearchCV`` or ``cross_val_score`` would reward the model that
        rejects the most, so a warning says so when 90% of the points are
        marked (test on seeds only: README, Model selection).

        Parameters
        ----------
        X : array_like of shape (n_points, n_features)
        y : array_like of shape (n_points,)
            Labels of the fit's ``y`` (classes of ``classes_`` or others), or the ``unlabeled`` marker the
            model was fitted with for a point of no known class (a later ``set_params`` does not change it).
        sample_weight : array_like of shape (n_points,), optional
            Finite non-negative weights, not all zero.

        Returns
        -------
        float
        """
        self._check_fitted()
        truth = encode_known(y, self.classes_, self._fitted_unlabeled, name="y", unknown_is_wrong=True)
        distributions, confidence = self._predict_new(X)
        if truth.size != confidence.size:
            raise ValueError(f"y has {truth.size} labels but X has {confidence.size} points.")
        warn_if_mostly_marked(truth, self._fitted_unlabeled, stacklevel=2)
        weights = check_sample_weight(sample_weight, truth.size)
        predicted = distributions.argmax(axis=1)
        predicted[confidence < self.outlier_threshold_] = -1
        return float(np.average(predicted == truth, weights=weights))

    def set_score_request(self, **requests) -> FastProp:
        """Request metadata for :meth:`score` under scikit-learn's routing (``sample_weight=True``, False, None or
        an alias); see :meth:`set_fit_request`. Returns self."""
        return self._set_metadata_request("score", requests)

    def suggest_annotations(self, n: int, strategy: Literal["boundary", "lowest"] = "boundary") -> np.ndarray:
        """The unlabeled samples whose labels would help the next fit most, from the fitted confidence.

        Annotate them (a class, or ``unlabeled`` for a sample of no class),
        then fit again with the classes in ``y`` and the outliers in
        ``outliers=``. See :mod:`fastprop.suggestions` and
        bench/RESULTS.md for the measured gains.

        Parameters
        ----------
        n : int
            How many (at most the number of candidates: unlabeled samples
            that are neither known outliers nor samples of the fit's
            validation set, whose truth is known already).
        strategy : {"boundary", "lowest"}, default="boundary"
            ``"boundary"``: the confidence closest to ``outlier_threshold_``,
            where the decision in / out is least sure; ``"lowest"``: the
            least confident (the paper's indicator, Table 4a). Either way no
            two suggestions are graph neighbours, so one annotation does not
            answer the question another asks, as long as the candidates allow:
            when ``n`` is more than the samples that can be spread out so, the
            rest are the best of the samples passed over, neighbours or not.

        Returns
        -------
        ndarray of int64, shape (n,)
            Sample indices, most useful first.
        """
        self._check_fitted()
        return suggested_samples(self, n, strategy)

    @serialised
    def _predict_new(self, X):
        self._check_fitted()
        self._check_feature_names(X)
        features = check_features(X, rescale_rows=True)
        self._check_n_features(features)
        return self.predictor_.predict(features)
