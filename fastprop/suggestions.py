"""What to annotate next: unlabeled samples chosen from the fitted confidence.

The paper (Table 4a, supplement) uses its confidence as the indicator of an
active-learning round: annotate as many samples as there are seeds, in-class
ones with their class and outliers as such, and propagate again. Two
indicators are offered; both skip graph neighbours of samples already taken,
so that a batch does not spend several annotations on one question (when too
few samples are left that way, the best of those skipped fill the batch).

``"boundary"``
    Confidence closest to the outlier threshold: the samples whose in / out
    decision is least sure.
``"lowest"``
    The least confident (the paper's). On noisy data these are mostly
    outliers.
"""

import numpy as np

from ._validation import check_choice, check_integer

ANNOTATION_STRATEGIES = ("boundary", "lowest")


def suggested_samples(model, n, strategy):
    """Indices of ``n`` unlabeled samples of a fitted FastProp, most useful first.

    Candidates are the unlabeled samples that are neither known outliers nor
    validation samples (their truth is known), ranked by ``strategy`` (ties
    by index); a candidate adjacent in ``model.graph_`` to one already taken
    is passed over while others remain, then taken in rank order.
    """
    check_choice("strategy", strategy, ANNOTATION_STRATEGIES)
    confidence = model.confidence_
    known = np.union1d(model.known_outliers_, model._validation_samples)
    candidates = np.setdiff1d(np.flatnonzero(~model.labeled_), known)
    n = check_integer("n", n, low=0)
    if n > candidates.size:
        raise ValueError(
            f"n={n} is more than the {candidates.size} samples that can be suggested (unlabeled, not known "
            "outliers and not in the validation set); ask for fewer."
        )
    if strategy == "boundary":
        key = np.abs(confidence[candidates] - model.outlier_threshold_)
    else:
        key = confidence[candidates]
    ranked = candidates[np.argsort(key, kind="stable")]
    graph = getattr(model, "graph_", None)
    if graph is None:
        raise ValueError(
            "suggest_annotations spreads its picks over the fitted graph, and graph_ was deleted; fit again "
            "(or set graph_ back) before asking for annotations."
        )
    covered = np.zeros(confidence.size, dtype=bool)
    taken, passed_over = [], []
    for sample in ranked:
        if len(taken) == n:
            break
        if covered[sample]:
            passed_over.append(sample)
            continue
        taken.append(sample)
        covered[graph.indices[graph.indptr[sample] : graph.indptr[sample + 1]]] = True
    taken += passed_over[: n - len(taken)]
    return np.asarray(taken, dtype=np.int64)
