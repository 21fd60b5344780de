"""A softmax over the graph-smoothed products ``X W``, a block of columns at a time.

The provisional step scores every sample against the known and the
provisional classes with ``softmax(S^depth diag(row_scale) X W + b)``, ``S``
the random walk. At a million samples and ~100 columns the (n, columns)
logits would be ~800 MB, so the columns are smoothed :func:`column_block` at a
time and folded into a running log-sum-exp: the known-class confidence
(:func:`known_class_confidence`) and each row's most probable column
(:func:`most_probable_columns`) never hold every column at once, and rows
asked for cost only their ``depth``-hop neighbourhood.
"""

import numpy as np

from .products import matmul

__all__ = ["COLUMN_BLOCK", "COLUMN_BLOCK_BYTES", "column_block", "fold_log_sum_exp", "known_class_confidence",
           "most_probable_columns", "smoothed_logit_blocks"]

#: Columns of ``X W`` smoothed at a time, at least: at a million samples two
#: float64 (n, 16) buffers are 256 MB.
COLUMN_BLOCK = 16
#: ... and more while one float64 (n, columns) buffer stays within this many
#: bytes (:func:`column_block`): every column at once on the real sets (13k
#: samples, up to 141 columns), where 16 at a time re-read the graph for each
#: block; the fit 4-8% faster there (bench/RESULTS.md, issue #17). 41 columns
#: at 100k samples, 16 at a million.
COLUMN_BLOCK_BYTES = 32 * 2**20


def known_class_confidence(feature_rows, coef, intercept, n_known, depth, rows=None, n_top=1):
    """The largest known-class probability (or the ``n_top`` largest, summed) of a softmax over smoothed ``X W``.

    ``p = softmax(S^depth diag(row_scale) X W + b)`` with ``S`` the walk
    and ``X`` the features of ``feature_rows``;
    returns ``max_{k < n_known} p_k`` for every row of ``rows`` (with
    ``n_top`` > 1, the sum of its ``n_top`` largest known-class
    probabilities). The columns are smoothed :func:`column_block` at a
    time with a running log-sum-exp, so memory stays O(n * column_block(n))
    whatever the number of classes.

    Parameters
    ----------
    feature_rows : fastprop.feature_rows.FeatureRows
        The fit's SGC rows of its features (``.walk``, ``.features`` of
        shape (n, d), float32, ``.row_scale``): where it keeps the level
        for ``depth``, the logits are its rows times ``W``, else the walk
        of ``X W`` (see :func:`smoothed_logit_blocks`).
    coef : ndarray of shape (d, n_columns)
    intercept : ndarray of shape (n_columns,)
    n_known : int
        The first ``n_known`` columns are the known classes.
    depth : int
    rows : ndarray of int or None
        The rows wanted (all when None); each is bit for bit the same as
        among all rows, and costs only its ``depth``-hop neighbourhood.
    n_top : int, default=1
        How many of the largest known-class probabilities are summed
        (:func:`fastprop.novelty.known_top`).

    Returns
    -------
    ndarray of shape (len(rows),) or (n,), float64, in [0, 1]
    """
    n_rows = feature_rows.features.shape[0] if rows is None else len(rows)
    largest_known = np.full((n_rows, n_top), -np.inf)  # the n_top largest known logits so far, in no order
    running_max = np.full(n_rows, -np.inf)
    running_sum = np.zeros(n_rows)
    for begin, end, first_row, logits in smoothed_logit_blocks(feature_rows, coef, depth, rows):
        at = slice(first_row, first_row + logits.shape[0])
        logits += intercept[begin:end]
        if n_known > begin:
            # A partition of a block of rows at a time: 0.13 s for 1M x 16 logits (a running maximum, 0.07 s).
            candidates = np.concatenate([largest_known[at], logits[:, : n_known - begin]], axis=1)
            largest_known[at] = np.partition(candidates, candidates.shape[1] - n_top, axis=1)[:, -n_top:]
        fold_log_sum_exp(logits, running_max[at], running_sum[at])
    return np.exp(largest_known - running_max[:, None]).sum(axis=1) / running_sum


def most_probable_columns(feature_rows, coef, intercept, depth, rows):
    """Each row's most probable column of a softmax over smoothed ``X W``, and its probability.

    Parameters
    ----------
    feature_rows, coef, intercept, depth
        As for :func:`known_class_confidence`.
    rows : ndarray of int64

    Returns
    -------
    column : ndarray of int64, shape (len(rows),)
        The first of the largest when tied.
    probability : ndarray of float64, shape (len(rows),)
    """
    best_logit = np.full(rows.size, -np.inf)
    column = np.zeros(rows.size, dtype=np.int64)
    running_max = np.full(rows.size, -np.inf)
    running_sum = np.zeros(rows.size)
    if rows.size:
        for begin, end, _, logits in smoothed_logit_blocks(feature_rows, coef, depth, rows):
            logits += intercept[begin:end]
            block_best = logits.max(axis=1)
            better = block_best > best_logit
            column[better] = begin + logits[better].argmax(axis=1)
            best_logit[better] = block_best[better]
            fold_log_sum_exp(logits, running_max, running_sum)
    return column, np.exp(best_logit - running_max) / running_sum


def column_block(n_samples):
    """Columns of ``X W`` :func:`smoothed_logit_blocks` smooths at a time for ``n_samples`` samples.

    :data:`COLUMN_BLOCK`, or as many as fit one float64 (n_samples, columns)
    buffer in :data:`COLUMN_BLOCK_BYTES` when that is more.
    """
    return max(COLUMN_BLOCK, COLUMN_BLOCK_BYTES // (8 * max(n_samples, 1)))


def smoothed_logit_blocks(feature_rows, coef, depth, rows):
    """Yield ``(begin, end, first_row, logits)``: ``S^depth diag(row_scale) X W[:, begin:end]`` at some rows.

    :func:`column_block` columns at a time; all rows a block of rows at a
    time (``first_row`` the first of them) when ``rows`` is None, else the
    rows of ``rows`` at once (``first_row`` 0). ``logits`` is float64 and
    the caller's to change.

    Where ``feature_rows`` keeps the level for ``depth``
    (:meth:`fastprop.feature_rows.FeatureRows.keeps`) and that walks fewer
    columns (:func:`_level_is_cheaper`), the smoothing, being linear, is
    taken on the features: each block of rows is the level's last step,
    ``S^depth diag(row_scale) X``, times ``W`` in float64, instead of
    ``depth`` steps over every block of columns of ``X W``. The same
    logits to rounding (the products' order differs). A fresh
    ``FeatureRows(walk, features, row_scale)``, not yet asked for many
    rows, keeps no level: then ``X W`` is walked.

    Parameters
    ----------
    feature_rows : fastprop.feature_rows.FeatureRows
        The fit's SGC rows of its features: ``S`` is its ``.walk``, ``X``
        its ``.features`` and ``row_scale`` its ``.row_scale``.
    coef : ndarray of shape (d, n_columns)
    depth : int
    rows : ndarray of int or None
    """
    walk, features, row_scale = feature_rows.walk, feature_rows.features, feature_rows.row_scale
    block = column_block(features.shape[0])
    if feature_rows.keeps(depth) and _level_is_cheaper(features.shape[1], coef.shape[1], depth):
        row_blocks = feature_rows.smooth_in_blocks(depth) if rows is None else [(0, feature_rows.smooth(rows, depth))]
        for first_row, smoothed in row_blocks:
            for begin in range(0, coef.shape[1], block):
                end = min(begin + block, coef.shape[1])
                yield begin, end, first_row, matmul(smoothed, np.ascontiguousarray(coef[:, begin:end]))
        return
    for begin in range(0, coef.shape[1], block):
        end = min(begin + block, coef.shape[1])
        # X W's block is a temporary: freed after the first step. Every row's last step is taken a block
        # of rows at a time (at a million samples the (n, 16) float64 result would be 128 MB).
        if rows is None:
            blocks = walk.smooth_in_blocks(features @ coef[:, begin:end].astype(np.float32), depth,
                                           row_scale=row_scale)
        else:
            blocks = [(0, walk.smooth(features @ coef[:, begin:end].astype(np.float32), rows, depth,
                                      row_scale=row_scale))]
        for first_row, logits in blocks:
            yield begin, end, first_row, logits


def _level_is_cheaper(n_features, n_columns, depth):
    """Whether one step of the features walks fewer columns than ``depth`` steps of ``X W``'s, for every row.

    Decided for all rows alike, whichever rows are asked for, so that a row
    is bit for bit the same in any set of rows. On the scale bench's 100k
    mixture (128 features, 84 columns, depth 2) the level's way wins, most
    where a scouting build reads 5,000 rows, whose walk of ``X W`` takes
    its first step over nearly the whole graph; on the real sets (384-784
    features, 40-100 columns) the walk of ``X W`` wins (bench/RESULTS.md,
    issue #17).
    """
    return n_features < depth * n_columns


def fold_log_sum_exp(logits, running_max, running_sum):
    """Fold a block of columns' logits (overwritten) into a running log-sum-exp (changed in place).

    ``running_max + log(running_sum)`` is the log-sum-exp of every column folded so far.
    """
    new_max = np.maximum(running_max, logits.max(axis=1))
    running_sum *= np.exp(running_max - new_max)
    logits -= new_max[:, None]
    running_sum += np.exp(logits, out=logits).sum(axis=1)
    running_max[:] = new_max
