"""A batch of disjoint patches processed in parallel: smoothing and view updates.

Two ways to share the work among the threads, with the same arithmetic for
every row, so that neither the way nor the thread count changes the result:
:func:`process_whole_patches` gives each thread whole patches (a patch's
buffers then stay in one core's cache), :func:`process_patch_rows` shares a
single patch's rows.
"""

import numba

from .._config import PARALLEL_JIT_OPTIONS
from .patches import smooth_one_patch, smooth_patch_rows
from .views import update_views


@numba.njit(**PARALLEL_JIT_OPTIONS)
def process_whole_patches(n_patches, patches, sizes, indptr, indices, data, batch_slot, local_index,
                          row_begin, row_end, local_indices, local_weights, logits, bias, depth, first, second,
                          frozen, probability_sum, view_count, confidence, single_view_confidence,
                          confident_threshold, newly_confident, n_newly_confident):
    """Smooth the patches of slots ``0..n_patches-1`` and add their predictions to their views.

    Patch ``b`` is ``patches[b, :sizes[b]]``, smoothed with ``logits`` as
    values and ``depth`` steps
    (:func:`~fastprop._kernels.patches.smooth_one_patch`, using row ``b`` of
    every buffer), each vertex's update
    :func:`~fastprop._kernels.views.update_views`. Each patch runs on one
    thread. The patches are disjoint, so each writes only its own buffers
    and its own vertices' entries in the shared state. The vertices that
    join the confident set through patch ``b`` are
    ``newly_confident[b, :n_newly_confident[b]]``, in patch order.
    """
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
def process_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
                       local_weights, logits, bias, depth, first, second, frozen, probability_sum, view_count,
                       confidence, single_view_confidence, confident_threshold, joined, unfrozen_rows,
                       newly_confident):
    """What :func:`process_whole_patches` does for one patch, with every loop shared among the threads by rows.

    The patch is ``patch[:size]`` with its own rows of the buffers
    (:func:`~fastprop._kernels.patches.smooth_patch_rows`); ``joined`` and
    ``unfrozen_rows`` are scratch. Returns how many of its vertices joined
    the confident set, written to ``newly_confident`` in patch order.
    """
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
