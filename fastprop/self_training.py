"""Self-training: the local predictor refitted on its most confident labels.

After the patch loop and ConfNet, FastProp knows which of its labels it
trusts most. Taking the most confident unlabeled samples of each class as
extra seeds (with the class it gave them; ``FastProp(pseudo_labels="auto")``
takes :func:`pseudo_label_total` of them, split evenly among the classes)
and fitting the SGC predictor again gives it tens of times more training
rows than 1% seeds, drawn from the region each class actually covers; the
labels of every sample then come from the refitted predictor. The paper
notes that its propagation "can be easily extended to the iterative
scheme"; this is one round of it, with the confident set filtered by the
final confidence (multi-view and ConfNet), not the raw multi-view one.

Measured (bench/RESULTS.md, issue #16) with a validation threshold, 5 task
seeds: see :class:`fastprop.FastProp`'s ``pseudo_labels``.
"""

import numpy as np

#: ``pseudo_labels="auto"`` takes this many pseudo-labels in all ...
AUTO_TOTAL = 3000
#: ... or this many a class, when that is more: about 0.6 of a class of the
#: sentence sets (~170 samples each), the best count measured on Banking77's
#: 30-class tasks (25 / 50 / 100 a class; 150 lost 0.5-0.7 points at 0-30%
#: outliers). With 50 intents 3000 left only 60 a class: 100 a class gained
#: +1.0 points a cell without a validation set (two draws; +0.65 to +1.59
#: with 40-60 classes, +5.3 / +2.5 on the whole Banking77 / HWU64 with no
#: outlier) and tied with one (+0.51 / -0.20; the whole sets +1.10 / +0.50),
#: for 1.04-1.44x the fit's time (bench/RESULTS.md, issue #16).
AUTO_PER_CLASS = 100
#: ... but never more than this many (the refit's softmax regression costs
#: rows x features x classes; 7,700 rows on Banking77's 77 classes is the
#: largest measured) ...
AUTO_MOST = 10_000
#: ... nor more than this share of the samples that may be taken (the total:
#: split evenly, a predicted class smaller than its share is still taken
#: whole, and the split's rounding up may add one a class). The counts above
#: are ~0.6 of a class where classes hold ~170-1000 samples, but with small
#: classes they are all of them (150 synthetic classes of ~32 samples:
#: 10,000 is every sample, each with the class it was given), and a refit on
#: every label, wrong ones included, lost 7 points of in-class accuracy
#: against none. Capped at 2/3 (bench/RESULTS.md, issue #16): there +6.1 /
#: +5.2 / +0.7 points at 0 / 30 / 50% outliers; with 15-16 intents +1.85 /
#: +0.46 / +0.02 a cell at 0.5 / 1 / 5% seeds (+0.37 without a validation
#: set); held-out digits -0.24 with a validation set, +1.09 without; every
#: task of the tuned sets (at least ~165 unlabeled samples a class)
#: unchanged bit for bit.
AUTO_CLASS_SHARE = 2 / 3


def pseudo_label_total(pseudo_labels, n_classes, n_candidates):
    """How many pseudo-labels self-training takes in all, for the ``pseudo_labels`` setting.

    Parameters
    ----------
    pseudo_labels : int or "auto"
        An int is the total itself; ``"auto"`` is :data:`AUTO_TOTAL`, or
        :data:`AUTO_PER_CLASS` a class when that is more, at most
        :data:`AUTO_MOST` and at most :data:`AUTO_CLASS_SHARE` of
        ``n_candidates`` (rounded down).
    n_classes : int
    n_candidates : int
        The samples that may be taken (unlabeled, not known outliers).

    Returns
    -------
    int
    """
    if pseudo_labels == "auto":
        return min(max(AUTO_TOTAL, min(AUTO_PER_CLASS * n_classes, AUTO_MOST)), int(AUTO_CLASS_SHARE * n_candidates))
    return int(pseudo_labels)


def most_confident_per_class(predicted, confidence, candidates, per_class, tie_rank):
    """The ``per_class`` most confident ``candidates`` of each predicted class.

    Parameters
    ----------
    predicted : ndarray of shape (n_samples,), int
        Class index of every sample.
    confidence : ndarray of shape (n_samples,)
    candidates : ndarray of int
        The samples that may be chosen (unlabeled, not known outliers).
    per_class : int
        At most this many a class (fewer when a class has fewer candidates).
    tie_rank : ndarray of shape (n_samples,)
        Breaks ties in confidence (the fit's random order of the samples).

    Returns
    -------
    ndarray of int64
        Sorted by class, most confident first within a class.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    if per_class <= 0 or candidates.size == 0:
        return np.empty(0, dtype=np.int64)
    order = candidates[np.lexsort((tie_rank[candidates], -confidence[candidates], predicted[candidates]))]
    classes = predicted[order]
    first_of_class = np.r_[0, np.flatnonzero(np.diff(classes)) + 1]
    position = np.arange(order.size) - np.repeat(first_of_class, np.diff(np.r_[first_of_class, order.size]))
    return order[position < per_class]
