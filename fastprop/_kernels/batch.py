"""A batch of disjoint patches: smoothing and view updates, in parallel or on the calling thread.

Three ways to do the work, with the same arithmetic for every row, so that
neither the way nor the thread count changes the result:
:func:`process_whole_patches` gives each thread whole patches (a patch's
buffers then stay in one core's cache) or, with ``in_parallel=False``,
processes them one after the other on the calling thread without a
parallel launch; :func:`process_patch_rows` shares a single patch's rows
among the threads, in ``depth + 1`` parallel loops.
"""

import numba

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS
from .patches import induced_patch_rows, last_step_buffers, smooth_all_rows, smooth_one_patch, smooth_row
from .views import update_views


@numba.njit(**JIT_OPTIONS, inline="always")
def process_whole_patch(slot, patches, sizes, indptr, indices, data, batch_slot, local_index, row_begin, row_end,
                        local_indices, local_weights, logits, bias, depth, first, second, frozen, probability_sum,
                        view_count, confidence, single_view_confidence, confident_threshold, newly_confident,
                        n_newly_confident):
    """Smooth the patch of slot ``slot`` on the calling thread and add its predictions to its views.

    The patch is ``patches[slot, :sizes[slot]]``, smoothed with ``logits``
    as values and ``depth`` steps
    (:func:`~fastprop._kernels.patches.smooth_one_patch`, using row ``slot``
    of every buffer), each vertex's update
    :func:`~fastprop._kernels.views.update_views`. It writes only its own
    buffers and its own vertices' entries in the shared state. The vertices
    that join the confident set are ``newly_confident[slot, :n_newly_confident[slot]]``,
    in patch order.
    """
    patch = patches[slot]
    size = sizes[slot]
    smoothed = smooth_one_patch(
        patch, size, slot + 1, indptr, indices, data, batch_slot, local_index, row_begin[slot], row_end[slot],
        local_indices[slot], local_weights[slot], logits, depth, first[slot], second[slot], frozen,
    )
    n_new = 0
    for row in range(size):
        vertex = patch[row]
        batch_slot[vertex] = 0
        if update_views(vertex, row, smoothed, bias, frozen, probability_sum, view_count, confidence,
                        single_view_confidence, confident_threshold):
            newly_confident[slot, n_new] = vertex
            n_new += 1
    n_newly_confident[slot] = n_new


@numba.njit(**PARALLEL_JIT_OPTIONS)
def process_whole_patches(n_patches, in_parallel, patches, sizes, indptr, indices, data, batch_slot, local_index,
                          row_begin, row_end, local_indices, local_weights, logits, bias, depth, first, second,
                          frozen, probability_sum, view_count, confidence, single_view_confidence,
                          confident_threshold, newly_confident, n_newly_confident):
    """:func:`process_whole_patch` for slots ``0..n_patches-1``: a patch per thread, or all on the calling thread.

    ``in_parallel``: one parallel loop over the patches; otherwise a plain
    loop, with no parallel launch at all. The patches are disjoint, so
    either order gives the same result.
    """
    if in_parallel:
        for slot in numba.prange(n_patches):
            process_whole_patch(slot, patches, sizes, indptr, indices, data, batch_slot, local_index, row_begin,
                                row_end, local_indices, local_weights, logits, bias, depth, first, second, frozen,
                                probability_sum, view_count, confidence, single_view_confidence,
                                confident_threshold, newly_confident, n_newly_confident)
    else:
        for slot in range(n_patches):
            process_whole_patch(slot, patches, sizes, indptr, indices, data, batch_slot, local_index, row_begin,
                                row_end, local_indices, local_weights, logits, bias, depth, first, second, frozen,
                                probability_sum, view_count, confidence, single_view_confidence,
                                confident_threshold, newly_confident, n_newly_confident)


@numba.njit(**PARALLEL_JIT_OPTIONS)
def process_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
                       local_weights, logits, bias, depth, first, second, frozen, probability_sum, view_count,
                       confidence, single_view_confidence, confident_threshold, joined, unfrozen_rows,
                       newly_confident):
    """What :func:`process_whole_patch` does for one patch, with every step shared among the threads by rows.

    The patch is ``patch[:size]`` with its own rows of the buffers:
    :func:`~fastprop._kernels.patches.induced_patch_rows`,
    ``depth - 1`` steps of :func:`~fastprop._kernels.patches.smooth_all_rows`,
    then one parallel loop that smooths each unfrozen row a last time and
    updates its views at once: ``depth + 1`` parallel launches in all.
    ``joined`` and ``unfrozen_rows`` are scratch. Returns how many of its
    vertices joined the confident set, written to ``newly_confident`` in
    patch order.
    """
    n_unfrozen = induced_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end,
                                    local_indices, local_weights, logits, first, frozen, unfrozen_rows)
    scores, source = last_step_buffers(depth, first, second)
    if depth > 0:
        smooth_all_rows(size, row_begin, row_end, local_indices, local_weights, depth - 1, first, second)
    for listed in numba.prange(n_unfrozen):
        row = unfrozen_rows[listed]
        if depth > 0:
            smooth_row(row, row_begin[row], row_end[row], local_indices, local_weights, source, scores)
        joined[listed] = update_views(patch[row], row, scores, bias, frozen, probability_sum, view_count,
                                      confidence, single_view_confidence, confident_threshold)
    n_new = 0
    for row in range(size):
        batch_slot[patch[row]] = 0
    for listed in range(n_unfrozen):
        if joined[listed]:
            newly_confident[n_new] = patch[unfrozen_rows[listed]]
            n_new += 1
    return n_new
