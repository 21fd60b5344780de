"""A batch of disjoint patches processed in parallel: smoothing and view updates."""

import numba

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS
from .patches import smooth_one_patch, smooth_patch_rows
from .views import update_views


@numba.njit(**PARALLEL_JIT_OPTIONS)
def process_patch_batch(n_patches, patches, sizes, indptr, indices, data, batch_slot, local_index, row_begin, row_end,
                        local_indices, local_weights, logits, bias, depth, first, second, frozen, probability_sum,
                        view_count, confidence, single_view_confidence, confident_threshold, joined, unfrozen_rows,
                        newly_confident, n_newly_confident):
    """Smooth each patch of the batch and add its predictions to its vertices' views.

    Patch ``b`` is ``patches[b, :sizes[b]]``, smoothed with ``logits`` as
    values and ``depth`` steps, using row ``b`` of every buffer; each
    vertex's update is :func:`~fastprop._kernels.views.update_views`.
    Several patches are shared among the threads patch by patch, so that a
    patch's buffers stay in one core's cache; a single patch is shared row
    by row (:func:`~fastprop._kernels.patches.smooth_patch_rows`). The
    patches are disjoint, so every row writes only its own buffers and its
    own vertex's entries in the shared state, with the same arithmetic on
    both paths: the result depends neither on the path nor on the thread
    count. The vertices that join the confident set through patch ``b`` are
    ``newly_confident[b, :n_newly_confident[b]]``, in patch order.
    ``joined`` and ``unfrozen_rows`` are scratch for the row path.
    """
    if n_patches == 1:
        n_newly_confident[0] = _process_patch_rows(
            patches[0], sizes[0], indptr, indices, data, batch_slot, local_index, row_begin[0], row_end[0],
            local_indices[0], local_weights[0], logits, bias, depth, first[0], second[0], frozen, probability_sum,
            view_count, confidence, single_view_confidence, confident_threshold, joined, unfrozen_rows,
            newly_confident[0],
        )
        return
    for batch_index in numba.prange(n_patches):
        patch = patches[batch_index]
        size = sizes[batch_index]
        smoothed = smooth_one_patch(
            patch, size, batch_index + 1, indptr, indices, data, batch_slot, local_index, row_begin[batch_index],
            row_end[batch_index], local_indices[batch_index], local_weights[batch_index], logits, depth,
            first[batch_index], second[batch_index], frozen,
        )
        n_new = 0
        for row in range(size):
            vertex = patch[row]
            batch_slot[vertex] = 0
            if update_views(vertex, row, smoothed, bias, frozen, probability_sum, view_count, confidence,
                            single_view_confidence, confident_threshold):
                newly_confident[batch_index, n_new] = vertex
                n_new += 1
        n_newly_confident[batch_index] = n_new


@numba.njit(**PARALLEL_JIT_OPTIONS)
def _process_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
                        local_weights, logits, bias, depth, first, second, frozen, probability_sum, view_count,
                        confidence, single_view_confidence, confident_threshold, joined, unfrozen_rows,
                        newly_confident):
    """One patch, every loop shared among the threads by rows; returns how many of its vertices joined S."""
    smoothed, n_unfrozen = smooth_patch_rows(
        patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
        local_weights, logits, depth, first, second, frozen, unfrozen_rows,
    )
    for row in numba.prange(size):
        batch_slot[patch[row]] = 0
    for listed in numba.prange(n_unfrozen):
        row = unfrozen_rows[listed]
        joined[listed] = update_views(patch[row], row, smoothed, bias, frozen, probability_sum, view_count,
                                      confidence, single_view_confidence, confident_threshold)
    n_new = 0
    for listed in range(n_unfrozen):
        if joined[listed]:
            newly_confident[n_new] = patch[unfrozen_rows[listed]]
            n_new += 1
    return n_new
