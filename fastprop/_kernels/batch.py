"""A batch of disjoint patches processed in parallel: smoothing and view updates."""

import numba

from .._config import PARALLEL_JIT_OPTIONS
from .patches import induced_subgraph, mark_members, patch_sgc
from .views import accumulate_views


@numba.njit(**PARALLEL_JIT_OPTIONS)
def process_patch_batch(n_patches, patches, sizes, indptr, indices, data, batch_slot, local_index,
                        local_indptr, local_indices, local_weights, logits, bias, depth, first, second,
                        frozen, probability_sum, view_count, confidence, single_view_confidence,
                        confident_threshold, newly_confident, n_newly_confident):
    """Smooth each patch of the batch and add its predictions to its vertices' views.

    Patch ``b`` is ``patches[b, :sizes[b]]``
    (see :func:`~fastprop._kernels.patches.induced_subgraph`,
    :func:`~fastprop._kernels.patches.patch_sgc` and
    :func:`~fastprop._kernels.views.accumulate_views`). The patches are
    disjoint, so each iteration writes only its own buffers (row ``b``) and
    the rows of its own vertices in the shared state: the loop is race free
    and its result does not depend on the thread count. ``batch_slot`` marks
    the batch's members while it runs (see
    :func:`~fastprop._kernels.patches.smooth_patch_batch`). The vertices that
    join the confident set through patch ``b`` are
    ``newly_confident[b, :n_newly_confident[b]]``.
    """
    mark_members(n_patches, patches, sizes, batch_slot, False)
    for batch_index in numba.prange(n_patches):
        size = sizes[batch_index]
        members = patches[batch_index]
        induced_subgraph(members, size, indptr, indices, data, batch_slot, batch_index + 1, local_index,
                         local_indptr[batch_index], local_indices[batch_index], local_weights[batch_index])
        smoothed = patch_sgc(members, size, local_indptr[batch_index], local_indices[batch_index],
                             local_weights[batch_index], logits, depth, first[batch_index], second[batch_index],
                             frozen)
        n_newly_confident[batch_index] = accumulate_views(
            members, size, smoothed, bias, frozen, probability_sum, view_count, confidence,
            single_view_confidence, confident_threshold, newly_confident[batch_index],
        )
    mark_members(n_patches, patches, sizes, batch_slot, True)
