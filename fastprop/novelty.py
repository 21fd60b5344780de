"""Provisional classes for the regions no seed reaches.

Outliers are not scattered noise: they come in clusters of classes nobody
seeded, and a predictor that only knows the seeded classes spreads them over
the nearest known class. The paper's supplement suggests clustering the
samples identified as outliers to discover new classes. Here the samples the
first outlier threshold rejects get *provisional classes*: as many
provisional seeds as the seeds' own density gives them (``n_seeds`` per
``n_samples - n_identified`` samples), placed by a farthest-first traversal
of their SGC features away from the seeds and from each other. A softmax
regression over the known and the provisional classes then competes for
every sample, and the largest known-class probability says how much of a
sample a known class can claim. Without a validation set the classes are
built again for what that confidence rejects (:func:`refined_confidence`).

Everything is computed on the SGC rows of the few vertices involved and on
``X W`` (known + provisional columns, in blocks), never an (n, n_features)
smoothed copy.
"""

import numpy as np

from .linear import fit_softmax_regression
from .threshold import PROBABILITY_CUT

#: At most this many provisional classes (their columns cost time in every
#: product of the known-class confidence).
MAX_PROVISIONAL = 64
#: Identified samples the farthest-first traversal looks at, at most (a random
#: sample of them beyond), so that its cost does not grow with N. Their SGC
#: rows are the step's largest smoothing after the known-class confidence
#: (20,000 took ~5 s a build at 1M samples); none of the real-set tasks
#: measured had more (bench/RESULTS.md, issue #16 item 3).
MAX_CANDIDATES = 5_000
#: Seeds the provisional step works with, at most (a random sample of them
#: beyond, plus one of every class the sample misses): the farthest-first
#: anchors and the known classes' training rows, so that neither grows with N.
MAX_SEEDS = 2_000
#: Columns of ``X W`` smoothed at a time: at a million samples two float64
#: (n, 16) buffers are 256 MB.
COLUMN_BLOCK = 16
#: How many times the provisional classes are built without a validation set
#: (:func:`refined_confidence`): the first from what the automatic threshold
#: rejects, each next one from what the last blend puts below
#: :data:`fastprop.threshold.PROBABILITY_CUT`.
AUTO_ROUNDS = 3
#: Without a validation set every known class is trained on at least this
#: many rows in the provisional step: its seeds, topped up with its most
#: confident pseudo-labels (:func:`top_up_rows`), so that fewer of its own
#: samples are claimed by provisional classes. Measured (bench/RESULTS.md,
#: issue #16 item 2; three data sets, 0.5 / 1 / 5% seeds, 5 task seeds, no
#: validation) against the seeds alone: +0.39 points of accuracy on average
#: (+0.57 / +0.58 / +0.02), up to +2.2 on the sentence sets at 10-30%
#: outliers; MNIST and 5% seeds, whose classes have 5 seeds or more, as
#: before. 10 rows gained +0.79 at 1% seeds for 1.33x the fit's time on
#: Banking77 (5 rows: 1.10x). With a validation set 10 pseudo-labels a
#: class did no better than the seeds alone (HWU64's outlier AUROC -1 to -2).
TOP_UP_ROWS = 5
#: L-BFGS iterations of the provisional step's softmax regression.
FULL_ITERATIONS = 300
#: ... in a build that only chooses the next build's samples (the last one
#: gets :data:`FULL_ITERATIONS`). Measured against three full builds
#: (bench/RESULTS.md, issue #16): single runs' accuracy within 1.1 points,
#: averages within 0.2; the step's time on the scale bench's 10k mixture
#: 1.06 -> 0.50 s (one build: 0.22 s).
SCOUT_ITERATIONS = 50
#: A build that only chooses the next build's samples reads the known-class
#: confidence of every unlabeled sample when there are at most this many, and
#: of a random sample of :data:`SCOUT_ROWS` of them when there are more
#: (:func:`scouting_rows`), so that its cost stops growing with N: the next
#: build's samples are then a random sample of those it would choose,
#: standing for as many as the whole would give (``represented``). No
#: real-set task measured had more (<= 13k).
SCOUT_FROM = 20_000
#: The sample's size. A depth-2 smoothing of a row reads its neighbours'
#: first step, so a sample costs its closed neighbourhood: 20,000 rows of a
#: 1M-vertex graph reach about 60% of it, 5,000 about 20%. Measured at 1M
#: (bench/RESULTS.md, issue #16 item 3), two interleaved pairs: the two
#: scouting builds 5-8 s faster with 5,000 rows than with 20,000 (9.9 + 9.8
#: -> 6.0 + 5.4 s), the same accuracy.
SCOUT_ROWS = 5_000


def known_class_weight(validation_truth, known, unlabeled, share=None):
    """Weight of the known-class confidence in FastProp's final confidence.

    The known-class confidence says how much of a sample the known classes
    claim against the provisional ones; it is worth most when many outliers
    were identified to build those from. The weight is ``min(1, 2 * share)``
    (the mean at 25% outliers) for an estimate of the unlabeled samples'
    outlier share: a validation set's share of known outliers, or without
    one the share the user gave (``FastProp(outlier_share=...)``) or the share
    the provisional classes claim (:func:`claimed_share`).
    With a validation set that holds no outlier (the provisional step then
    ran for annotated outliers, and a share of 0 would discard them) it is
    0.5, the mean. Measured (bench/RESULTS.md, issue #16): weights 0.5 /
    0.75 / 1 at 1% seeds, then this rule at 0.5%, 1% and 5% seeds.

    Parameters
    ----------
    validation_truth : ndarray of int or None
        Encoded truth of the validation samples (-1 for a known outlier).
    known : ndarray of shape (n,)
        :func:`known_class_confidence`.
    unlabeled : ndarray of int
        The unlabeled samples.
    share : float or None, default=None
        The outlier share the user expects; used without a validation set.
    """
    if validation_truth is None:
        share = claimed_share(known, unlabeled) if share is None else share
    elif np.any(validation_truth < 0):
        share = float(np.mean(validation_truth < 0))
    else:
        return 0.5
    return min(1.0, 2.0 * share)


def claimed_share(known, unlabeled):
    """The share of ``unlabeled`` samples the provisional classes claim: known-class confidence below 0.5.

    An estimate of the outlier share when no validation set gives one. It
    grows with the true share but is biased by the samples the automatic
    threshold first rejects (bench/RESULTS.md, issue #16; 1% seeds, means
    over 5 task seeds): after one build 0.20-0.23 on the sentence sets and
    0.10 on MNIST with no outlier at all, 0.44-0.45 and 0.28 at 50%; after
    :func:`refined_confidence`'s three builds 0.15-0.18 and 0.05 with no
    outlier, 0.54-0.57 and 0.31 at 50%.
    """
    return float(np.mean(known[unlabeled] < 0.5)) if unlabeled.size else 0.0


def blended_confidence(first, known, label_probability, reached, validation_truth, unlabeled, share=None):
    """FastProp's final confidence, from the provisional step's parts.

    ``w * known + (1 - w) * rest`` with ``w`` = :func:`known_class_weight`
    and ``rest`` each sample's largest label probability, or the first (the
    paper's) confidence where no patch reached the sample: nothing propagated
    to it, and a linear predictor's probability far from every seed says
    nothing (a component no seed reaches would otherwise be labelled
    confidently). Where few outliers are, and the rest decides, the
    whole-graph predictor's probability ranks them better than the
    multi-view and ConfNet mean. When no provisional class was due, the
    rest alone with a validation set, and the first confidence unchanged
    without one (the automatic threshold then reads its shape). Measured
    (bench/RESULTS.md, issue #16; three data sets, 0.5 / 1 / 5% seeds, 5
    task seeds): with a validation set +0.5 to +0.7 points of accuracy on
    average, outlier AUROC +10 on MNIST at 10% outliers; without one, with
    :func:`fastprop.threshold.fitted_threshold`'s cut at 0.5, +1.9 to +2.7.

    Parameters
    ----------
    first : ndarray of shape (n,)
        The paper's confidence (:func:`fastprop.threshold.final_confidence`).
    known : ndarray of shape (n,) or None
        :func:`known_class_confidence`, None when no provisional class was due.
    label_probability : ndarray of shape (n,)
        Each sample's largest label probability.
    reached : ndarray of shape (n,), bool
        The samples some patch covered.
    validation_truth : ndarray of int or None
        Encoded truth of the validation samples (-1 for a known outlier).
    unlabeled : ndarray of int
        The unlabeled samples (those :func:`claimed_share` counts).
    share : float or None, default=None
        The outlier share the user expects (:func:`known_class_weight`).

    Returns
    -------
    ndarray of shape (n,), in [0, 1]
    """
    if known is None and validation_truth is None:
        return np.array(first, dtype=np.float64)
    rest = np.where(reached, label_probability, first)
    if known is None:
        return rest
    weight = known_class_weight(validation_truth, known, unlabeled, share)
    return np.clip((1.0 - weight) * rest + weight * known, 0.0, 1.0)


def n_provisional_classes(n_identified, n_seeds, n_samples):
    """How many provisional classes ``n_identified`` rejected samples get.

    As many as the seeds would have in as many samples of the known classes:
    ``round(n_identified * n_seeds / (n_samples - n_identified))``, at most
    :data:`MAX_PROVISIONAL` and at most ``n_identified``.
    """
    if n_identified == 0 or n_seeds == 0:
        return 0
    count = int(round(n_identified * n_seeds / max(n_samples - n_identified, 1)))
    return min(count, MAX_PROVISIONAL, n_identified)


def farthest_first(anchors, candidates, n_chosen):
    """Farthest-first traversal of unit rows, away from ``anchors``.

    Each step takes the candidate whose largest cosine similarity to the
    anchors and to the candidates already taken is smallest (the first
    candidate of equal ones).

    Parameters
    ----------
    anchors : ndarray of shape (n_anchors, d)
        Unit rows the traversal starts from (the seeds); may be empty.
    candidates : ndarray of shape (n_candidates, d)
        Unit rows.
    n_chosen : int
        How many to take, ``<= n_candidates``.

    Returns
    -------
    ndarray of int64, shape (n_chosen,)
        Positions in ``candidates``, in the order taken.
    """
    if anchors.shape[0]:
        nearest = (candidates @ anchors.T).max(axis=1)
    else:
        nearest = np.full(candidates.shape[0], -np.inf)
    chosen = np.empty(n_chosen, dtype=np.int64)
    for step in range(n_chosen):
        pick = int(np.argmin(nearest))
        chosen[step] = pick
        np.maximum(nearest, candidates @ candidates[pick], out=nearest)
        nearest[pick] = np.inf  # taken: never again
    return chosen


def known_class_confidence(walk, features, row_scale, coef, intercept, n_known, depth, rows=None):
    """The largest known-class probability of a softmax over smoothed ``X W``.

    ``p = softmax(S^depth diag(row_scale) X W + b)`` with ``S`` the walk;
    returns ``max_{k < n_known} p_k`` for every row of ``rows``. The columns
    are smoothed :data:`COLUMN_BLOCK` at a time with a running log-sum-exp,
    so memory stays O(n * COLUMN_BLOCK) whatever the number of classes.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
    features : ndarray of shape (n, d), float32
    row_scale : ndarray of shape (n,) or None
    coef : ndarray of shape (d, n_columns)
    intercept : ndarray of shape (n_columns,)
    n_known : int
        The first ``n_known`` columns are the known classes.
    depth : int
    rows : ndarray of int or None
        The rows wanted (all when None); each is bit for bit the same as
        among all rows, and costs only its ``depth``-hop neighbourhood.

    Returns
    -------
    ndarray of shape (len(rows),) or (n,), float64, in [0, 1]
    """
    n_rows = features.shape[0] if rows is None else len(rows)
    largest_known = np.full(n_rows, -np.inf)
    running_max = np.full(n_rows, -np.inf)
    running_sum = np.zeros(n_rows)
    for begin in range(0, coef.shape[1], COLUMN_BLOCK):
        end = min(begin + COLUMN_BLOCK, coef.shape[1])
        # X W's block is a temporary: freed after the first step. Every row's last step is taken a block
        # of rows at a time (at a million samples the (n, 16) float64 result would be 128 MB).
        if rows is None:
            blocks = walk.smooth_in_blocks(features @ coef[:, begin:end].astype(np.float32), depth,
                                           row_scale=row_scale)
        else:
            blocks = [(0, walk.smooth(features @ coef[:, begin:end].astype(np.float32), rows, depth,
                                      row_scale=row_scale))]
        for first_row, logits in blocks:
            at = slice(first_row, first_row + logits.shape[0])
            _log_sum_exp_update(logits, intercept[begin:end], n_known - begin, largest_known[at], running_max[at],
                                running_sum[at])
    return np.exp(largest_known - running_max) / running_sum


def _log_sum_exp_update(logits, intercept, n_known, largest_known, running_max, running_sum):
    """Fold a block of columns' logits (changed in place) into the running statistics (changed in place).

    ``largest_known`` takes the largest of the block's first ``n_known``
    columns (none when ``n_known <= 0``); ``running_max`` and ``running_sum``
    keep ``log sum exp`` of every column so far as ``running_max + log(running_sum)``.
    """
    logits += intercept
    if n_known > 0:
        np.maximum(largest_known, logits[:, :n_known].max(axis=1), out=largest_known)
    new_max = np.maximum(running_max, logits.max(axis=1))
    running_sum *= np.exp(running_max - new_max)
    logits -= new_max[:, None]
    running_sum += np.exp(logits, out=logits).sum(axis=1)
    running_max[:] = new_max


def top_up_rows(seed_class, n_classes, pseudo, pseudo_class, excluded, rows_per_class):
    """The pseudo-labels that bring every class to ``rows_per_class`` training rows with its seeds.

    Each class takes its first ``rows_per_class - (its seeds)`` pseudo-labels
    (none when it has as many seeds) that are not in ``excluded``.

    Parameters
    ----------
    seed_class : ndarray of shape (n,), int64
        Class index of the seeds, -1 elsewhere.
    n_classes : int
    pseudo, pseudo_class : ndarray of int64
        Pseudo-labels and their classes, sorted by class (increasing), the
        best first within a class (as
        :func:`fastprop.self_training.most_confident_per_class` returns them).
    excluded : ndarray of int64
        Samples that may not be taken (those given provisional classes).
    rows_per_class : int

    Returns
    -------
    (ndarray of int64, ndarray of int64)
        The samples taken, and their classes.
    """
    pseudo = np.asarray(pseudo, dtype=np.int64)
    pseudo_class = np.asarray(pseudo_class, dtype=np.int64)
    allowed = ~np.isin(pseudo, excluded)
    pseudo, pseudo_class = pseudo[allowed], pseudo_class[allowed]
    wanted = np.maximum(rows_per_class - np.bincount(seed_class[seed_class >= 0], minlength=n_classes), 0)
    # Position within its class: pseudo_class is sorted, so a class begins where its value first appears.
    position = np.arange(pseudo.size) - np.searchsorted(pseudo_class, pseudo_class)
    taken = position < wanted[pseudo_class]
    return pseudo[taken], pseudo_class[taken]


def provisional_class_confidence(walk, features, row_scale, seed_class, n_classes, identified, *, depth, l2, rng,
                                 known_outliers=None, max_iter=FULL_ITERATIONS, represented=None, rows=None,
                                 pseudo_labels=None):
    """Known-class confidence once the identified outliers have classes of their own.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
    features : ndarray of shape (n, d), float32
    row_scale : ndarray of shape (n,) or None
        Inverse row norms (None for unit rows).
    seed_class : ndarray of shape (n,), int64
        Class index of the seeds, -1 elsewhere.
    n_classes : int
    identified : ndarray of int64
        Unlabeled vertices the first threshold rejected.
    depth : int
        SGC depth (the local predictor's).
    l2 : float
        Ridge penalty of the softmax regression (the local predictor's).
    rng : numpy.random.Generator
        Draws the candidates when there are more than :data:`MAX_CANDIDATES`,
        and the seeds when there are more than :data:`MAX_SEEDS`.
    known_outliers : ndarray of int64, optional
        Samples known to belong to no class (annotated as such). Each is a
        provisional seed (farthest-first among them beyond
        :data:`MAX_PROVISIONAL`), taken before any identified sample, so
        there are at least as many provisional classes as known outliers.
    max_iter : int, default=FULL_ITERATIONS
        L-BFGS iterations of the softmax regression.
    represented : int, optional
        How many unlabeled samples ``identified`` stands for when it is a
        random sample of them (known outliers aside): the number of
        provisional classes follows it. Default ``len(identified)``.
    rows : ndarray of int or None
        The samples whose confidence is returned (all when None).
    pseudo_labels : (ndarray of int64, ndarray of int64), optional
        Self-training's pseudo-labels and their classes: with them every
        known class is trained on :data:`TOP_UP_ROWS` rows at least
        (:func:`top_up_rows`, none of ``identified``). They are training
        rows only: the provisional seeds are still placed away from the
        seeds alone.

    Returns
    -------
    confidence : ndarray of shape (n,) or (len(rows),), or None
        :func:`known_class_confidence`; None when no provisional class is
        due (nothing identified, or too few to earn one).
    n_provisional : int
    """
    seeds = np.flatnonzero(seed_class >= 0)
    known = np.empty(0, dtype=np.int64) if known_outliers is None else np.asarray(known_outliers, dtype=np.int64)
    identified = np.setdiff1d(identified, known)
    n_identified = identified.size if represented is None else represented
    n_known = min(known.size, MAX_PROVISIONAL)
    n_provisional = max(n_provisional_classes(n_identified + known.size, seeds.size, seed_class.size), n_known)
    n_provisional = min(n_provisional, n_known + identified.size)
    if n_provisional == 0:
        return None, 0
    # Dense candidates only: a provisional seed on a stray sample would claim nothing.
    weighted_degree = np.asarray(walk.graph.sum(axis=1), dtype=np.float64).ravel()
    dense = identified[weighted_degree[identified] >= np.median(weighted_degree)]
    candidates = dense if dense.size >= n_provisional else identified
    if candidates.size > MAX_CANDIDATES:
        candidates = np.sort(rng.choice(candidates, size=MAX_CANDIDATES, replace=False))
    extra, extra_class = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if pseudo_labels is not None:
        extra, extra_class = top_up_rows(seed_class, n_classes, *pseudo_labels, identified, TOP_UP_ROWS)
    if seeds.size > MAX_SEEDS:  # a random sample, and the first seed of every class it misses
        _, first_of_class = np.unique(seed_class[seeds], return_index=True)
        seeds = np.union1d(rng.choice(seeds, size=MAX_SEEDS, replace=False), seeds[first_of_class])
    if n_known == n_provisional:
        candidates = np.empty(0, dtype=np.int64)
    members = np.concatenate([seeds, extra])  # the known classes' training rows
    smoothed = walk.smooth(features, np.concatenate([members, known, candidates]), depth, row_scale=row_scale)
    unit = smoothed / np.maximum(np.linalg.norm(smoothed, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    anchors, known_rows = unit[: seeds.size], unit[members.size : members.size + known.size]
    picked_known = farthest_first(anchors, known_rows, n_known)
    picked = farthest_first(np.vstack([anchors, known_rows[picked_known]]), unit[members.size + known.size :],
                            n_provisional - n_known)
    training = np.concatenate([smoothed[: members.size], smoothed[members.size + picked_known],
                               smoothed[members.size + known.size + picked]])
    targets = np.concatenate([seed_class[seeds], extra_class, n_classes + np.arange(n_provisional)])
    coef, intercept = fit_softmax_regression(training, np.eye(n_classes + n_provisional)[targets], l2=l2,
                                             max_iter=max_iter)
    confidence = known_class_confidence(walk, features, row_scale, coef, intercept, n_classes, depth, rows)
    return confidence, n_provisional


def scouting_rows(unlabeled, rounds, rng):
    """The unlabeled samples a scouting build of :func:`refined_confidence` reads.

    All of them, or :data:`SCOUT_ROWS` drawn at random (sorted) when there
    are more than :data:`SCOUT_FROM`; nothing is drawn with fewer than two
    rounds (no scouting build).
    """
    if rounds < 2 or unlabeled.size <= max(SCOUT_FROM, SCOUT_ROWS):
        return unlabeled
    return np.sort(rng.choice(unlabeled, size=SCOUT_ROWS, replace=False))


def refined_confidence(first, identified, label_probability, reached, validation_truth, unlabeled, rounds,
                       build_classes, scout_rows=None, share=None):
    """FastProp's final confidence after ``rounds`` builds of the provisional classes.

    The first build gives provisional classes to ``identified`` (what the
    first threshold rejects); each next one to the unlabeled samples the last
    :func:`blended_confidence` puts below
    :data:`fastprop.threshold.PROBABILITY_CUT`, the samples ``"auto"`` would
    reject. Without a validation set the first threshold is a guess from the
    shape of the paper's confidence (half of Otsu's split), which rejects
    in-class samples when there are few outliers and too few when there are
    many; the blend separates the two better, so identifying again moves the
    provisional classes towards the unseeded clusters (fewer where no
    outlier is, more where many are). Every build but the last only scouts:
    :data:`SCOUT_ITERATIONS`, and the blend read on ``scout_rows`` only. A
    build that finds too few samples to earn a provisional class ends the
    rounds with the previous build's samples (their classes built again in
    full if it only scouted). Measured (bench/RESULTS.md,
    issue #16; three data sets, 0.5 / 1 / 5% seeds, 5 task seeds, no
    validation): 3 builds against 1, +0.8 to +0.9 points of accuracy on
    average, +0.4 to +2.7 with no outlier on the sentence sets and +1.2 to
    +4.5 at 50% outliers on all three, -0.2 to -2.1 on MNIST at 10-30% and
    -0.4 to -1.1 on the sentence sets at 30% with 0.5-1% seeds; 2 builds
    gained less, 5 lost more at 30%.

    Parameters
    ----------
    first : ndarray of shape (n,)
        The paper's confidence.
    identified : ndarray of int64
        Unlabeled samples the first threshold rejected.
    label_probability, reached, validation_truth, unlabeled
        See :func:`blended_confidence`.
    rounds : int
        How many builds at most; 0 gives the blend without provisional classes.
    build_classes : callable
        ``build_classes(identified, represented, max_iter, rows)`` returns
        ``(known, n_provisional)`` as :func:`provisional_class_confidence`
        does for those arguments (``represented`` None for the first
        build's samples, which are all there are); every build but the last gets
        :data:`SCOUT_ITERATIONS` and ``scout_rows``, the last
        :data:`FULL_ITERATIONS` and None (all rows).
    scout_rows : ndarray of int, optional
        The unlabeled samples a scouting build reads (:func:`scouting_rows`);
        default ``unlabeled``. The next build's samples are those of them
        below the cut, standing for ``len(unlabeled) / len(scout_rows)`` as
        many.
    share : float or None, default=None
        The outlier share the user expects (:func:`known_class_weight`).

    Returns
    -------
    confidence : ndarray of shape (n,)
        :func:`blended_confidence` with the last build's known-class confidence.
    known : ndarray of shape (n,) or None
        That confidence, None when no build gave a provisional class.
    n_provisional : int
    """
    scout_rows = unlabeled if scout_rows is None else scout_rows
    known, n_provisional = None, 0
    confidence = blended_confidence(first, None, label_probability, reached, validation_truth, unlabeled, share)
    represented = None  # the first build's samples are all there are
    scouted = None  # (identified, represented) of the last (scouting) build
    for build in range(rounds):
        last = build == rounds - 1
        built, n_built = build_classes(identified, represented, FULL_ITERATIONS if last else SCOUT_ITERATIONS,
                                       None if last else scout_rows)
        if built is None:
            if scouted is None:
                break
            last = True  # the scouting build's samples, in full
            built, n_built = build_classes(*scouted, FULL_ITERATIONS, None)
        if last:
            known, n_provisional = built, n_built
            confidence = blended_confidence(first, known, label_probability, reached, validation_truth, unlabeled,
                                            share)
            break
        scouted = identified, represented
        read = blended_confidence(first[scout_rows], built, label_probability[scout_rows], reached[scout_rows],
                                  validation_truth, np.arange(scout_rows.size), share)
        identified = scout_rows[read < PROBABILITY_CUT]
        represented = round(identified.size * unlabeled.size / max(scout_rows.size, 1))
    return confidence, known, n_provisional
