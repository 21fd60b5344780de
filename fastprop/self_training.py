"""Self-training: the local predictor refitted on its most confident labels.

After the patch loop and ConfNet, FastProp knows which of its labels it
trusts most. Taking the most confident unlabeled samples of each class as
extra seeds (with the class it gave them; ``FastProp(pseudo_labels=3000)``
split evenly among the classes) and fitting the SGC predictor again gives
it tens of times more training rows than 1% seeds, drawn from the region
each class actually covers; the labels of every sample then come from the
refitted predictor. The paper notes that
its propagation "can be easily extended to the iterative scheme"; this is
one round of it, with the confident set filtered by the final confidence
(multi-view and ConfNet), not the raw multi-view one.

Measured (bench/RESULTS.md, issue #16) with a validation threshold, 5 task
seeds: see :class:`fastprop.FastProp`'s ``pseudo_labels``.
"""

import numpy as np


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
