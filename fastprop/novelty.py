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
every sample, and the largest known-class probability (with a validation
set, or with many classes, the two or three largest summed:
:func:`known_top`) says how much of a sample a known class can claim.
Without a validation set the classes are built again for what that
confidence rejects (:func:`refined_confidence`), and every build is
fitted again with more rows of each class, its most confident samples
(:func:`refit_rows`), but none for a provisional class that looks like a
fragment of a known one: the builds that only choose the next one's samples
too, so that they choose what a model like the last one rejects.

Everything is computed on the SGC rows of the few vertices involved and on
``X W`` (known + provisional columns, in blocks: :mod:`fastprop.column_scores`),
never an (n, n_features) smoothed copy.
"""

import numpy as np

from .column_scores import known_class_confidence, most_probable_columns
from .linear import fit_softmax_regression, one_hot
from .threshold import MANY_CLASSES, PROBABILITY_CUT

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
#: How many times the provisional classes are built without a validation set
#: (:func:`refined_confidence`): the first from what the automatic threshold
#: rejects, each next one from what the last blend puts below
#: :data:`fastprop.threshold.PROBABILITY_CUT`.
AUTO_ROUNDS = 3
#: From this many known classes up, ``"auto"`` with neither a validation set
#: nor an outlier share counts each sample's second largest label probability
#: in its final confidence (:func:`blended_confidence`'s ``runner_up``).
#: Measured with 30-32 and 50 intents (won) and MNIST's five digits (see
#: :func:`blended_confidence`); no set in between.
RUNNER_UP_FROM = 20
#: Rows of label distributions :func:`second_largest` partitions at a time.
RUNNER_UP_BLOCK_ROWS = 65_536
#: Every known class is trained on at least this many rows in the
#: provisional step: its seeds, topped up with its most confident
#: pseudo-labels (:func:`top_up_rows`), so that fewer of its own samples are
#: claimed by provisional classes. Measured (bench/RESULTS.md, issue #16;
#: three data sets, 0.5 / 1 / 5% seeds, 5 task seeds) against the seeds
#: alone: without a validation set +0.39 points of accuracy on average
#: (+0.57 / +0.58 / +0.02), up to +2.2 on the sentence sets at 10-30%
#: outliers; with one, over three draws of the fit, +0.16 / +0.28 / 0.00,
#: and +0.02 to +0.75 on tasks of 15 to 60 intents; MNIST and 5% seeds,
#: whose classes have 5 seeds or more, as before. 10 rows gained +0.79 at
#: 1% seeds without a validation set for 1.33x the fit's time on Banking77
#: (5 rows: 1.10x; with a validation set 1.02-1.06x).
TOP_UP_ROWS = 5
#: Where :func:`known_top` says so, the known-class confidence is the sum of a
#: sample's two largest known-class probabilities, not the largest alone.
KNOWN_TOP = 2
#: From this many classes up, ``"auto"`` with neither a validation set nor an
#: outlier share sums a sample's :data:`AUTO_TOP_MOST` largest known-class
#: probabilities (:func:`known_top`).
MOST_CLASSES = 48
AUTO_TOP_MOST = 3
#: Without a validation set (and no ``outlier_share`` given) every build's
#: softmax regression is fitted again with more rows (:func:`refit_rows`):
#: each known class's :data:`REFIT_ROWS_KNOWN` and each provisional class's
#: :data:`REFIT_ROWS_PROVISIONAL` unlabeled samples it is most confident of.
#: A provisional class is placed with one row, so the known classes absorb
#: much of its cluster; with rows of its own it claims more of it. A
#: provisional class on a fragment of a known class would grow as well, so
#: the known classes get more rows, and a provisional class that looks like
#: a fragment (:data:`FRAGMENT_EDGE_SHARE`) gets none. Measured
#: (bench/RESULTS.md, issue #16 item 2; three data sets, 0.5 / 1 / 5% seeds,
#: 5 task seeds, no validation): see there. When only the last build was
#: fitted again, the scouting builds chose its samples with a model unlike
#: it; refitting them too gained +0.02 / +1.02 / +0.48 points a cell
#: at 0.5 / 1 / 5% seeds (MNIST at 30-50% outliers up to +7.1 and +7.8
#: in two draws, every task seed up at 1%), a tie with 50 intents; the
#: scouts' known classes with fewer rows (0 or 20) lost 15-17 points on all
#: ten MNIST digits.
REFIT_ROWS_KNOWN = 80
#: See :data:`REFIT_ROWS_KNOWN`.
REFIT_ROWS_PROVISIONAL = 20
#: A provisional class whose samples' graph edges to the other classes' samples
#: lead to known classes for at least this share of their weight (the rest to
#: other provisional classes; :func:`known_edge_share`) is taken for a
#: fragment of a known class and gets no refit rows: an unseeded cluster is
#: mostly split among several provisional classes, which border each other.
FRAGMENT_EDGE_SHARE = 0.9
#: No refit when the provisional classes hold less than this share of what
#: they win with a probability above one half: they stand on diffuse
#: outliers, not on clusters, and the known classes' rows would only let
#: them grow into those. Measured: 0 on the scale bench's synthetic mixture
#: (isotropic outliers; at 100k the refit took its accuracy from 0.731 to
#: 0.685), 0.04 or more on every real-set task where the provisional classes
#: won 30 samples or more (bench/RESULTS.md).
MIN_HELD_SHARE = 0.02
#: Gradient tolerance of that refit, which starts from the first fit: 1e-6
#: took 0.9 s on a Banking77 task (3,591 rows, 88 classes), 1e-3 0.04-0.25 s,
#: with the same accuracy (bench/RESULTS.md).
REFIT_TOL = 1e-3
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
        :func:`fastprop.column_scores.known_class_confidence`.
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


def blended_confidence(first, known, label_probability, reached, validation_truth, unlabeled, share=None,
                       runner_up=None):
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
        :func:`fastprop.column_scores.known_class_confidence`, None when no provisional class was due.
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
    runner_up : ndarray of shape (n,) or None, default=None
        Each sample's second largest label probability (:func:`second_largest`):
        with it, ``rest`` is ``label_probability + (1 - w)^2 * runner_up``
        where a patch reached the sample. An in-class sample between two
        similar known classes splits its probability between them and, by
        the largest alone, fell below ``"auto"``'s cut of 0.5 even where no
        outlier was: the runner-up counts fully where the provisional classes
        claim nothing, not at all where they claim half the samples.
        Measured without a validation set (bench/RESULTS.md, issue #16 item
        2; 5 task seeds, 0-50% outliers): with 30-32 intents +0.47 / +0.45 /
        +0.50 points a cell at 0.5 / 1 / 5% seeds (+1.3 to +1.9 with no
        outlier, +0.04 to -0.29 at 30%), with 50 intents +0.94 at 0-30%; on
        the scale bench's 1M mixture (20 classes, 50% diffuse outliers)
        -0.84. Times ``1 - w`` it gained +0.51 / +0.55 / +0.52 but lost more
        at 30% (to -0.69) and 2.5-2.7 points at 1M; counted whole, -1.77 at
        0.5% seeds and 30%.

    Returns
    -------
    ndarray of shape (n,), in [0, 1]
    """
    if known is None and validation_truth is None:
        return np.array(first, dtype=np.float64)
    if known is None:
        return np.where(reached, label_probability, first)
    weight = known_class_weight(validation_truth, known, unlabeled, share)
    settled = label_probability if runner_up is None else label_probability + (1.0 - weight) ** 2 * runner_up
    rest = np.where(reached, settled, first)
    return np.clip((1.0 - weight) * rest + weight * known, 0.0, 1.0)


def second_largest(distributions, block_rows=RUNNER_UP_BLOCK_ROWS):
    """Each row's second largest value (0 when it has one column: there is no runner-up).

    A block of :data:`RUNNER_UP_BLOCK_ROWS` rows partitioned at a time: no
    copy of every row (160 MB for a million samples and 20 classes).
    """
    n_rows, n_columns = distributions.shape
    out = np.zeros(n_rows)
    if n_columns == 1:
        return out
    for begin in range(0, n_rows, block_rows):
        block = distributions[begin : begin + block_rows]
        out[begin : begin + block.shape[0]] = np.partition(block, n_columns - 2, axis=1)[:, n_columns - 2]
    return out


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


def known_top(with_validation, unaided_auto, n_classes):
    """How many of a sample's largest known-class probabilities make its known-class confidence.

    :data:`KNOWN_TOP` (the two largest, summed) with a validation set; for
    ``"auto"`` with neither a validation set nor an outlier share, the two
    largest from :data:`fastprop.threshold.MANY_CLASSES` classes up and the
    :data:`AUTO_TOP_MOST` (three) largest from :data:`MOST_CLASSES` up; the
    largest alone otherwise. An in-class sample between similar known
    classes splits its probability between them and, counted by the largest
    alone, looks as unclaimed as an outlier a provisional class takes.

    Measured (bench/RESULTS.md, issue #16). With a validation set (three
    data sets, 0.5 / 1 / 5% seeds, three draws of the fit of 5 task seeds):
    outlier AUROC +0.30 / +0.31 / +0.58 points a cell (higher in 25 of 27
    cells), accuracy 0.00 / +0.09 / +0.29 (MNIST at 1% seeds and 30-50%
    outliers +0.81 to +0.85; worst HWU64 0.5% 30% -0.79 +- 0.62), the fit's
    time unchanged; three or all known classes did worse at 30-32 classes,
    and three tied with two at 48-60. Without one, where the share the
    provisional classes claim sets both the blend's weight and its cut,
    more of the largest make them claim less: with 15-32 classes the two
    largest make them claim far too little at 50% outliers (-1.2 a cell at 1% seeds,
    Banking77 at 50% -6.9, 15-class tasks -10.2); with 40-77 classes, where
    similar intents are many, the right amount more often (40 classes, two
    draws: +2.5 to +3.3 a cell, +4.6 to +7.5 with no outlier, -0.1 to -1.7
    at 50%; 48-60 classes +3.1 a cell at 1% seeds and +0.7 to +0.9 at 5%;
    the whole Banking77 / HWU64 with no outlier +3.7 / +5.6). The three
    largest against the two: with 40 classes a tie (-0.15 / +0.05 a cell,
    Banking77 at 50% -1.9), with 48-60 classes +0.19 to +0.84 a cell at 1%
    seeds (two draws each of 48, 50 and 60 classes; every cell with no
    outlier or 10% up), a tie at 5%, the whole sets +1.6 with no outlier;
    the four largest tied with the three at 60 classes.
    With an outlier share given the two largest tied with the largest at
    30-32 classes (one draw).

    Parameters
    ----------
    with_validation : bool
    unaided_auto : bool
        ``"auto"`` with neither a validation set nor an outlier share.
    n_classes : int
        The known classes.

    Returns
    -------
    int
        1, :data:`KNOWN_TOP` or :data:`AUTO_TOP_MOST`.
    """
    if with_validation:
        return KNOWN_TOP
    if unaided_auto and n_classes >= MOST_CLASSES:
        return AUTO_TOP_MOST
    if unaided_auto and n_classes >= MANY_CLASSES:
        return KNOWN_TOP
    return 1


def refit_rows(feature_rows, coef, intercept, depth, candidates, n_known):
    """The rows a provisional build is fitted again with, and their column.

    Every candidate goes to its most probable column (:func:`fastprop.column_scores.most_probable_columns`).
    None when the provisional columns hold less than :data:`MIN_HELD_SHARE`
    of what they win with a probability above one half (no cluster to
    grow). Otherwise a known column takes :data:`REFIT_ROWS_KNOWN` of its
    candidates, a provisional one :data:`REFIT_ROWS_PROVISIONAL`, but none
    when it looks like a fragment of a known class
    (:func:`known_edge_share` at least :data:`FRAGMENT_EDGE_SHARE`), and no
    column more than half of what it wins (:func:`most_confident_rows`).

    Parameters
    ----------
    feature_rows, coef, intercept, depth
        As for :func:`fastprop.column_scores.known_class_confidence`.
    candidates : ndarray of int64
        The samples that may be taken, sorted.
    n_known : int
        The first ``n_known`` columns are the known classes'.

    Returns
    -------
    rows, columns : ndarray of int64
        As :func:`most_confident_rows` returns them.
    """
    column, probability = most_probable_columns(feature_rows, coef, intercept, depth, candidates)
    provisional = column >= n_known
    if not provisional.any() or np.mean(probability[provisional] > PROBABILITY_CUT) < MIN_HELD_SHARE:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    n_columns = coef.shape[1]
    per_column = np.r_[np.full(n_known, REFIT_ROWS_KNOWN), np.full(n_columns - n_known, REFIT_ROWS_PROVISIONAL)]
    fragment = known_edge_share(feature_rows.walk.graph, candidates, column, n_known, n_columns) >= FRAGMENT_EDGE_SHARE
    per_column[n_known:][fragment] = 0
    return most_confident_rows(candidates, column, probability, per_column)


def known_edge_share(graph, rows, column, n_known, n_columns):
    """How much of what each provisional column's rows border is a known column's.

    Over the graph's edges from a row of provisional column ``p`` to another
    of ``rows``: the weight of those reaching a row of a known column,
    divided by that of those reaching a row of either a known column or a
    provisional column other than ``p``. An unseeded cluster split among
    several provisional columns borders its siblings; a provisional column
    on a fragment of a known class, reached by no seed, borders that class.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n, n)
        The affinity graph.
    rows : ndarray of int64
        Distinct samples.
    column : ndarray of int64, shape (len(rows),)
        Their column, in ``0..n_columns-1``.
    n_known : int
        Columns below it are known classes, the rest provisional.
    n_columns : int

    Returns
    -------
    share : ndarray of float64, shape (n_columns - n_known,)
        0 for a provisional column that borders neither.
    """
    owner = np.full(graph.shape[0], -1, dtype=np.int64)
    owner[rows] = column
    bordering = graph[rows]  # the rows' edges, row by row
    source = np.repeat(column, np.diff(bordering.indptr))
    target = owner[bordering.indices]
    weight = bordering.data.astype(np.float64)
    from_provisional = source >= n_known
    to_known = from_provisional & (target >= 0) & (target < n_known)
    to_sibling = from_provisional & (target >= n_known) & (target != source)
    n_provisional = n_columns - n_known  # (bincount of nothing is int64, whatever the weights)
    known = np.bincount(source[to_known] - n_known, weight[to_known], n_provisional).astype(np.float64)
    sibling = np.bincount(source[to_sibling] - n_known, weight[to_sibling], n_provisional).astype(np.float64)
    bordered = known + sibling
    return np.divide(known, bordered, out=np.zeros_like(known), where=bordered > 0)


def most_confident_rows(rows, column, probability, per_column):
    """Each column's most probable rows among those it wins.

    Column ``k`` keeps the ``per_column[k]`` of its rows with the largest
    probability, and at most half of them (ties to the smaller row index):
    with few rows (a scouting sample) the less confident half, where the
    samples of other classes it wins are, stays out.

    Parameters
    ----------
    rows : ndarray of int64
    column, probability : ndarray, shape (len(rows),)
        Each row's most probable column and its probability
        (:func:`fastprop.column_scores.most_probable_columns`).
    per_column : ndarray of int, shape (n_columns,)
        How many each column takes at most.

    Returns
    -------
    taken : ndarray of int64
        Sorted by column, the most probable first within a column.
    taken_column : ndarray of int64
        Their column.
    """
    order = np.lexsort((rows, -probability, column))
    sorted_column = column[order]
    first_of_column = np.flatnonzero(np.r_[True, np.diff(sorted_column) != 0])  # [0] when there is no row
    rank = np.arange(order.size) - np.repeat(first_of_column, np.diff(np.r_[first_of_column, order.size]))
    cap = np.minimum(per_column, np.bincount(column, minlength=len(per_column)) // 2)
    taken = order[rank < cap[sorted_column]]
    return rows[taken], column[taken]


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


def provisional_class_confidence(feature_rows, seed_class, n_classes, identified, *, depth, l2, rng,
                                 known_outliers=None, max_iter=FULL_ITERATIONS, represented=None, rows=None,
                                 pseudo_labels=None, refit_candidates=None, n_top=1):
    """Known-class confidence once the identified outliers have classes of their own.

    Parameters
    ----------
    feature_rows : fastprop.feature_rows.FeatureRows
        The fit's SGC rows of its features (``.walk``, ``.features`` of
        shape (n, d), float32, ``.row_scale``, the inverse row norms or
        None for unit rows): one kept level serves every build, and a fresh
        one keeps none until asked for many rows.
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
    refit_candidates : ndarray of int, optional
        With them, the softmax regression is fitted again (from the first
        fit) with the rows :func:`refit_rows` takes of these samples
        (training rows and known outliers aside), when it takes any.
    n_top : int, default=1
        See :func:`fastprop.column_scores.known_class_confidence`.

    Returns
    -------
    confidence : ndarray of shape (n,) or (len(rows),), or None
        :func:`fastprop.column_scores.known_class_confidence`; None when no provisional class is
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
    weighted_degree = np.asarray(feature_rows.walk.graph.sum(axis=1), dtype=np.float64).ravel()
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
    smoothed = feature_rows.smooth(np.concatenate([members, known, candidates]), depth)
    unit = smoothed / np.maximum(np.linalg.norm(smoothed, axis=1, keepdims=True), np.finfo(np.float64).tiny)
    anchors, known_rows = unit[: seeds.size], unit[members.size : members.size + known.size]
    picked_known = farthest_first(anchors, known_rows, n_known)
    picked = farthest_first(np.vstack([anchors, known_rows[picked_known]]), unit[members.size + known.size :],
                            n_provisional - n_known)
    training = np.concatenate([smoothed[: members.size], smoothed[members.size + picked_known],
                               smoothed[members.size + known.size + picked]])
    targets = np.concatenate([seed_class[seeds], extra_class, n_classes + np.arange(n_provisional)])
    n_columns = n_classes + n_provisional
    coef, intercept = fit_softmax_regression(training, one_hot(targets, n_columns), l2=l2, max_iter=max_iter,
                                             float32_products=True)
    if refit_candidates is not None:
        pool = np.setdiff1d(refit_candidates, np.concatenate([members, known, candidates[picked]]))
        more, more_column = refit_rows(feature_rows, coef, intercept, depth, pool, n_classes)
        if more.size:
            training = np.concatenate([training, feature_rows.smooth(more, depth)])
            targets = np.concatenate([targets, more_column])
            coef, intercept = fit_softmax_regression(training, one_hot(targets, n_columns), l2=l2,
                                                     max_iter=max_iter, tol=REFIT_TOL, initial=(coef, intercept),
                                                     float32_products=True)
    confidence = known_class_confidence(feature_rows, coef, intercept, n_classes, depth, rows, n_top)
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
                       build_classes, scout_rows=None, share=None, runner_up=None):
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
    runner_up : ndarray of shape (n,) or None, default=None
        For the final blend only (:func:`blended_confidence`); the scouting
        builds' reads go by the largest label probability. Counted whole in
        those reads as well, on all three sets, it made the next builds
        identify too few samples where many outliers are: -0.99 points a
        cell at 1% seeds against +0.05 for the final blend alone (Banking77
        at 30% -2.67, MNIST -7.6).

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
                                            share, runner_up)
            break
        scouted = identified, represented
        read = blended_confidence(first[scout_rows], built, label_probability[scout_rows], reached[scout_rows],
                                  validation_truth, np.arange(scout_rows.size), share)
        identified = scout_rows[read < PROBABILITY_CUT]
        represented = round(identified.size * unlabeled.size / max(scout_rows.size, 1))
    return confidence, known, n_provisional
