"""Filling a batch of disjoint patches from the start queue, in one compiled call.

At a million vertices a fit tries ~330,000 starts for ~48,000 patches: most
patches run into another patch of their batch after a few hundred vertices
and wait for the next batch. Each try is a heap pop, a BFS and an exclusion,
done here without a trip through Python and Numba's dispatcher; the time
(~12 s of the patch loop at 1M, serial) is the BFS itself either way.
"""

import numba

from .._config import JIT_OPTIONS
from .heap import heap_pop_start, heap_push_keys
from .patches import PATCH_OVERLAP, PATCH_TOO_LARGE, extract_patch
from .views import exclude_neighbourhood


@numba.njit(**JIT_OPTIONS)
def fill_patch_batch(priority, rank, heap_vertex, heap_size, tie_rank, excluded, confidence, indptr, indices,
                     min_gain, max_size, exclusion_hops, process_capped, stamp, stamp_value, local_index, patches,
                     sizes, exclusion_stamp, exclusion_value, exclusion_queue, exclusion_depth, deferred,
                     deferred_keys):
    """Take starts in queue order and grow their patches until the batch is full.

    The queue is the binary heap ``priority``/``rank``/``heap_vertex`` of
    ``heap_size`` entries (:mod:`~fastprop._kernels.heap`); a start is the
    best entry not ``excluded``. Its patch
    (:func:`~fastprop._kernels.patches.extract_patch`, stamped
    ``stamp_value + 1``, ``+ 2``, ...) goes to the next free slot of
    ``patches`` (``patches.shape[0]`` slots). A start whose patch would
    overlap one already in the batch is set aside (in ``deferred``, its
    heap key in ``deferred_keys``) and pushed back with the key it had when
    the batch is done: it is tried again in the next one, in its place.
    Any other start is counted, and it and its ``exclusion_hops``-hop
    neighbours are excluded from being starts
    (:func:`~fastprop._kernels.views.exclude_neighbourhood`, stamped
    ``exclusion_value + 1``, ...). A patch that is not viable (it reached
    ``max_size`` first, unless ``process_capped``, or it gains nothing)
    gives its vertices back. At most ``deferred.shape[0]`` starts are looked
    at per batch. A vertex may have two entries (a restart that has since
    become confident, :func:`fastprop.scheduler._push_single_view_starts`):
    once one is set aside, the other is dropped without counting as a look,
    so the vertex goes back once, with its better key.

    Returns
    -------
    n_batch : int
        Viable patches grown, in slots ``0..n_batch-1`` (sizes in ``sizes``).
    exhausted : bool
        The queue ran out of starts, and none was set aside.
    heap_size, stamp_value, exclusion_value : int
        The new heap size and the last stamps used.
    n_starts : int
        Starts counted.
    """
    n_slots = patches.shape[0]
    batch_start = stamp_value + 1  # stamps from here on belong to this batch's patches
    n_batch = 0
    n_deferred = 0
    n_starts = 0
    exhausted = False
    n_tries = 0
    while n_tries < deferred.shape[0]:
        if n_batch == n_slots:
            break
        start, key, heap_size = heap_pop_start(priority, rank, heap_vertex, heap_size, excluded)
        if start < 0:
            exhausted = n_deferred == 0
            break
        if _set_aside(start, deferred, n_deferred):
            continue  # a second entry of a start already set aside (a restart since made confident): dropped
        n_tries += 1
        stamp_value += 1
        size, outcome, gain = extract_patch(start, indptr, indices, confidence, min_gain, max_size, stamp,
                                            stamp_value, local_index, patches[n_batch], batch_start)
        if outcome == PATCH_OVERLAP:
            _release(patches[n_batch], size, stamp)
            deferred[n_deferred] = start
            deferred_keys[n_deferred] = key
            n_deferred += 1
            continue
        n_starts += 1
        exclusion_value += 1
        exclude_neighbourhood(start, exclusion_hops, indptr, indices, excluded, exclusion_stamp, exclusion_value,
                              exclusion_queue, exclusion_depth)
        if (outcome == PATCH_TOO_LARGE and not process_capped) or gain <= 0.0:
            _release(patches[n_batch], size, stamp)
            continue
        sizes[n_batch] = size
        n_batch += 1
    heap_size = heap_push_keys(priority, rank, heap_vertex, heap_size, deferred[:n_deferred],
                               deferred_keys[:n_deferred], tie_rank)
    return n_batch, exhausted, heap_size, stamp_value, exclusion_value, n_starts


@numba.njit(**JIT_OPTIONS)
def _set_aside(vertex, deferred, n_deferred):
    """Whether ``vertex`` is among the ``n_deferred`` starts set aside in this batch."""
    for slot in range(n_deferred):
        if deferred[slot] == vertex:
            return True
    return False


@numba.njit(**JIT_OPTIONS)
def _release(patch, size, stamp):
    """Give back the vertices of a patch that will not be processed."""
    for row in range(size):
        stamp[patch[row]] = 0
