"""Graph patches: BFS extraction, induced local CSR, SGC smoothing on it.

A patch is stored as an array ``patch[:size]`` of global vertex ids in BFS
order. ``stamp[v] == stamp_value`` marks membership of the current patch and
``local_index[v]`` gives v's position in it, so that a patch costs O(patch)
and never an O(N) reset: each new patch uses a fresh ``stamp_value``.

Building a patch's induced subgraph tests every neighbour of every member
(~50 per member, most of them outside). On large graphs each such random
read misses the cache, so membership is read from a byte map instead,
``batch_slot`` (N bytes: ``s + 1`` for the members of the patch in slot
``s`` of the batch being processed, 0 elsewhere, cleared after), and the
8-byte ``local_index`` only for members: about twice as fast as reading
``stamp`` and ``local_index`` for every neighbour at a million vertices.
"""

import numba
import numpy as np

from .._config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS

#: ``extract_patch`` outcomes.
PATCH_VIABLE = 0
PATCH_TOO_LARGE = 1
PATCH_COMPONENT_EXHAUSTED = 2
PATCH_OVERLAP = 3


@numba.njit(**JIT_OPTIONS)
def extract_patch(start, indptr, indices, confidence, min_gain, max_size, stamp, stamp_value, local_index, patch,
                  taken_from):
    """Grow a patch by BFS from ``start`` until its expected gain passes ``min_gain``.

    Parameters
    ----------
    start : int
        First vertex.
    indptr, indices : ndarray
        CSR structure of the graph.
    confidence : ndarray of shape (n,)
        Current vertex confidences; a vertex contributes ``1 - c`` to the gain.
    min_gain : float
        The patch is viable once ``sum(1 - c) > min_gain``.
    max_size : int
        The patch is not viable once it holds ``max_size`` vertices.
    stamp, local_index : ndarray of shape (n,), int64
        Membership stamps and positions; written for every vertex added.
    stamp_value : int
        This patch's stamp, different from every earlier one.
    patch : ndarray of shape (>= max_size,), int64
        Receives the vertices in BFS order (it doubles as the BFS queue).
    taken_from : int
        Vertices stamped with a value in ``[taken_from, stamp_value)`` belong
        to another patch of the current batch: meeting one stops the growth
        with ``PATCH_OVERLAP``. ``taken_from = stamp_value`` disables this.

    Returns
    -------
    size : int
    outcome : int
        ``PATCH_VIABLE``, ``PATCH_TOO_LARGE``, ``PATCH_COMPONENT_EXHAUSTED``
        (the BFS ran out of vertices first) or ``PATCH_OVERLAP``.
    gain : float
        The patch's expected confidence gain.
    """
    if stamp[start] >= taken_from and stamp[start] != stamp_value:
        return 0, PATCH_OVERLAP, 0.0
    patch[0] = start
    stamp[start] = stamp_value
    local_index[start] = 0
    size = 1
    gain = 1.0 - confidence[start]
    if gain > min_gain:
        return size, PATCH_VIABLE, gain
    if size >= max_size:
        return size, PATCH_TOO_LARGE, gain
    head = 0
    while head < size:
        vertex = patch[head]
        head += 1
        for edge in range(indptr[vertex], indptr[vertex + 1]):
            neighbour = indices[edge]
            if stamp[neighbour] == stamp_value:
                continue
            if stamp[neighbour] >= taken_from:
                return size, PATCH_OVERLAP, gain
            stamp[neighbour] = stamp_value
            local_index[neighbour] = size
            patch[size] = neighbour
            size += 1
            gain += 1.0 - confidence[neighbour]
            if gain > min_gain:
                return size, PATCH_VIABLE, gain
            if size >= max_size:
                return size, PATCH_TOO_LARGE, gain
    return size, PATCH_COMPONENT_EXHAUSTED, gain


@numba.njit(**JIT_OPTIONS)
def mark_members(n_patches, patches, sizes, batch_slot, clear):
    """Mark the members of the patch in slot ``s < n_patches`` with ``s + 1`` (with ``clear``: 0)."""
    for batch_index in range(n_patches):
        mark = 0 if clear else batch_index + 1
        for row in range(sizes[batch_index]):
            batch_slot[patches[batch_index, row]] = mark


@numba.njit(**JIT_OPTIONS)
def induced_subgraph(patch, size, indptr, indices, data, batch_slot, slot_mark, local_index,
                     local_indptr, local_indices, local_weights):
    """Row-normalised induced affinity of a patch, with unit self loops.

    Row ``r`` of the output is ``D~^-1 (A_P + I)`` for vertex ``patch[r]``:
    its own entry first, then its in-patch neighbours in global CSR order.
    A vertex is in the patch when ``batch_slot`` holds ``slot_mark`` for it
    (and only then); ``local_index`` gives its row.
    ``local_indices``/``local_weights`` need room for ``size + sum(degree) + 1``
    entries.

    Returns
    -------
    int
        The number of stored entries.
    """
    local_indptr[0] = 0
    count = 0
    for row in range(size):
        vertex = patch[row]
        row_start = count
        local_indices[count] = row
        local_weights[count] = 1.0
        degree = 1.0
        count += 1
        for edge in range(indptr[vertex], indptr[vertex + 1]):
            neighbour = indices[edge]
            if batch_slot[neighbour] == slot_mark:
                weight = data[edge]
                local_indices[count] = local_index[neighbour]
                local_weights[count] = weight
                degree += weight
                count += 1
        inverse = 1.0 / degree
        for entry in range(row_start, count):
            local_weights[entry] *= inverse
        local_indptr[row + 1] = count
    return count


@numba.njit(**JIT_OPTIONS)
def smooth(local_indptr, local_indices, local_weights, size, signal, out, skip):
    """One SGC step on a local CSR: ``out[r] = (S @ signal)[r]`` for rows with ``not skip[r]``.

    Skipped rows are left as they were.
    """
    n_columns = signal.shape[1]
    for row in range(size):
        if skip[row]:
            continue
        for column in range(n_columns):
            out[row, column] = 0.0
        for entry in range(local_indptr[row], local_indptr[row + 1]):
            weight = local_weights[entry]
            source = local_indices[entry]
            for column in range(n_columns):
                out[row, column] += weight * signal[source, column]


@numba.njit(**JIT_OPTIONS)
def gather_rows(patch, size, values, out):
    """``out[:size] = values[patch[:size]]``."""
    for row in range(size):
        out[row, :] = values[patch[row], :]


@numba.njit(**JIT_OPTIONS)
def patch_sgc(patch, size, local_indptr, local_indices, local_weights, values, depth, first, second,
              frozen):
    """``S^depth values[patch]`` on a patch, using two (>= size, c) buffers.

    The last step skips the rows of frozen vertices (their prediction is
    never used), so those rows of the result are undefined. Returns the
    buffer that holds the result.
    """
    gather_rows(patch, size, values, first)
    compute_all = np.zeros(size, dtype=np.bool_)
    last_skip = np.empty(size, dtype=np.bool_)
    for row in range(size):
        last_skip[row] = frozen[patch[row]]
    for step in range(depth):
        smooth(local_indptr, local_indices, local_weights, size, first, second,
               last_skip if step == depth - 1 else compute_all)
        first, second = second, first
    return first


@numba.njit(**PARALLEL_JIT_OPTIONS)
def smooth_patch_batch(n_patches, patches, sizes, indptr, indices, data, batch_slot, local_index,
                       local_indptr, local_indices, local_weights, values, depth, first, second, frozen):
    """:func:`induced_subgraph` then :func:`patch_sgc` for a batch of disjoint patches, in parallel.

    Patch ``b`` is ``patches[b, :sizes[b]]``; it uses only row ``b`` of
    every buffer, and reads the shared arrays (``batch_slot``,
    ``local_index``, ``values``, ``frozen``) without writing them, so the
    loop is race free and its result does not depend on the thread count.
    ``batch_slot`` (all 0 on entry and on exit) marks each patch's members
    with its slot + 1 while the loop runs, set and cleared outside it. The
    result of patch ``b`` is in ``first[b]`` when ``depth`` is even, else in
    ``second[b]``.
    """
    mark_members(n_patches, patches, sizes, batch_slot, False)
    for batch_index in numba.prange(n_patches):
        size = sizes[batch_index]
        induced_subgraph(patches[batch_index], size, indptr, indices, data, batch_slot, batch_index + 1,
                         local_index, local_indptr[batch_index], local_indices[batch_index],
                         local_weights[batch_index])
        patch_sgc(patches[batch_index], size, local_indptr[batch_index], local_indices[batch_index],
                  local_weights[batch_index], values, depth, first[batch_index], second[batch_index], frozen)
    mark_members(n_patches, patches, sizes, batch_slot, True)
