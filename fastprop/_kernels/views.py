"""Scheduler bookkeeping: multi-view sums, the confident set, start exclusion."""

import numba
import numpy as np

from .._config import JIT_OPTIONS


@numba.njit(**JIT_OPTIONS, inline="always")
def update_views(vertex, row, scores, bias, frozen, probability_sum, view_count, confidence, single_view_confidence,
                 confident_threshold):
    """Add a patch's prediction ``softmax(scores[row] + bias)`` to the views of ``vertex``.

    Nothing happens for a vertex in the confident set (``frozen``).
    Otherwise its running sum gains the prediction, its count gains one, and
    its confidence becomes ``max_k mean_k`` when it has two or more views,
    else ``single_view_confidence``. A vertex whose confidence exceeds
    ``confident_threshold`` is frozen. ``scores[row]`` is overwritten with
    scratch values (indexed, not sliced: this runs once per row inside
    parallel loops, see :func:`~fastprop._kernels.patches.smooth_patch_rows`).

    Returns
    -------
    bool
        The vertex joined the confident set.
    """
    if frozen[vertex]:
        return False
    n_classes = scores.shape[1]
    largest = scores[row, 0] + bias[0]
    for k in range(1, n_classes):
        largest = max(largest, scores[row, k] + bias[k])
    total = 0.0
    for k in range(n_classes):
        scores[row, k] = np.exp(scores[row, k] + bias[k] - largest)
        total += scores[row, k]
    view_count[vertex] += 1
    best = 0.0
    for k in range(n_classes):
        probability_sum[vertex, k] += scores[row, k] / total
        if probability_sum[vertex, k] > best:
            best = probability_sum[vertex, k]
    if view_count[vertex] > 1:
        confidence[vertex] = best / view_count[vertex]
    else:
        confidence[vertex] = single_view_confidence
    if confidence[vertex] > confident_threshold:
        frozen[vertex] = True
        return True
    return False


@numba.njit(**JIT_OPTIONS)
def update_patch_views(patch, scores, bias, frozen, probability_sum, view_count, confidence, single_view_confidence,
                       confident_threshold, newly_confident):
    """:func:`update_views` for every vertex of ``patch``, row ``r`` of ``scores`` being ``patch[r]``'s.

    ``scores`` (float64, C-contiguous) is overwritten. Returns how many
    vertices joined the confident set, written to ``newly_confident`` in patch order.
    """
    n_new = 0
    for row in range(patch.shape[0]):
        if update_views(patch[row], row, scores, bias, frozen, probability_sum, view_count, confidence,
                        single_view_confidence, confident_threshold):
            newly_confident[n_new] = patch[row]
            n_new += 1
    return n_new


@numba.njit(**JIT_OPTIONS)
def exclude_neighbourhood(start, hops, indptr, indices, excluded, stamp, stamp_value, queue, depth):
    """Mark ``start`` and every vertex within ``hops`` edges of it as excluded.

    ``stamp``/``stamp_value`` mark visited vertices (fresh value per call);
    ``queue`` and ``depth`` are scratch arrays of length n.

    Returns
    -------
    int
        How many vertices were reached (``start`` included).
    """
    queue[0] = start
    depth[0] = 0
    stamp[start] = stamp_value
    excluded[start] = True
    size = 1
    head = 0
    while head < size:
        vertex = queue[head]
        level = depth[head]
        head += 1
        if level >= hops:
            continue
        for edge in range(indptr[vertex], indptr[vertex + 1]):
            neighbour = indices[edge]
            if stamp[neighbour] == stamp_value:
                continue
            stamp[neighbour] = stamp_value
            excluded[neighbour] = True
            queue[size] = neighbour
            depth[size] = level + 1
            size += 1
    return size
