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


@numba.njit(**JIT_OPTIONS, inline="always")
def induced_row(vertex, row, indptr, indices, data, batch_slot, slot_mark, local_index, local_indices, local_weights,
                begin):
    """Row ``row`` of a patch's ``D~^-1 (A_P + I)``, written from entry ``begin`` on.

    The row is that of ``vertex``: its own entry first, then its in-patch
    neighbours in global CSR order. A vertex is in the patch when
    ``batch_slot`` holds ``slot_mark`` for it (and only then);
    ``local_index`` gives its row. Needs room for ``1 + degree(vertex)``
    entries.

    Returns
    -------
    int
        One past the row's last entry.
    """
    local_indices[begin] = row
    local_weights[begin] = 1.0
    degree = 1.0
    end = begin + 1
    for edge in range(indptr[vertex], indptr[vertex + 1]):
        neighbour = indices[edge]
        if batch_slot[neighbour] == slot_mark:
            weight = data[edge]
            local_indices[end] = local_index[neighbour]
            local_weights[end] = weight
            degree += weight
            end += 1
    inverse = 1.0 / degree
    for entry in range(begin, end):
        local_weights[entry] *= inverse
    return end


@numba.njit(**JIT_OPTIONS, inline="always")
def smooth_row(row, begin, end, local_indices, local_weights, signal, out):
    """One SGC step for one row: ``out[row] = sum_e weight_e * signal[index_e]`` over entries ``begin:end``."""
    n_columns = signal.shape[1]
    for column in range(n_columns):
        out[row, column] = 0.0
    for entry in range(begin, end):
        weight = local_weights[entry]
        source = local_indices[entry]
        for column in range(n_columns):
            out[row, column] += weight * signal[source, column]


@numba.njit(**JIT_OPTIONS)
def smooth_one_patch(patch, size, slot_mark, indptr, indices, data, batch_slot, local_index, row_begin, row_end,
                     local_indices, local_weights, values, depth, first, second, frozen):
    """``S_P^depth values[P]`` for the patch ``P = patch[:size]``, on one thread.

    ``S_P`` is the patch's row-normalised induced affinity with unit self
    loops, its rows (:func:`induced_row`) stored one after the other. The
    members are marked with ``slot_mark`` in ``batch_slot`` and stay marked
    on return; the patches of a batch are disjoint and each tests only its
    own mark, so several may be smoothed at the same time. The last step
    skips the rows of frozen vertices (undefined in the result).

    Returns
    -------
    ndarray of shape (rows, n_columns)
        ``first`` or ``second``: the buffer that holds the result.
    """
    for row in range(size):
        batch_slot[patch[row]] = slot_mark
    end = 0
    for row in range(size):
        vertex = patch[row]
        row_begin[row] = end
        end = induced_row(vertex, row, indptr, indices, data, batch_slot, slot_mark, local_index, local_indices,
                          local_weights, end)
        row_end[row] = end
        for column in range(values.shape[1]):
            first[row, column] = values[vertex, column]
    for step in range(depth):
        last = step == depth - 1
        for row in range(size):
            if last and frozen[patch[row]]:
                continue
            smooth_row(row, row_begin[row], row_end[row], local_indices, local_weights, first, second)
        first, second = second, first
    return first


@numba.njit(**PARALLEL_JIT_OPTIONS)
def smooth_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
                      local_weights, values, depth, first, second, frozen, unfrozen_rows):
    """:func:`smooth_one_patch` (with ``slot_mark`` 1) with every step shared among the threads by rows.

    Each row writes only its own entries (``row_begin[r]:row_end[r]``,
    laid out from the degrees before the rows are built) and its own row of
    the buffers, with the same arithmetic as :func:`smooth_one_patch`: the
    result is the same, bit for bit, for every thread count. The loop bodies
    index the arrays and never slice them: inside a parallel loop each view
    would update its parent's reference count, an atomic write that the
    threads would contend for at every row. The last step runs over the
    rows of unfrozen vertices only, listed in ``unfrozen_rows`` (in patch
    order), so the threads share them evenly wherever they sit in the
    patch. The members stay marked in ``batch_slot`` on return.

    Returns
    -------
    smoothed : ndarray of shape (rows, n_columns)
        ``first`` or ``second``: the buffer that holds the result.
    n_unfrozen : int
        How many rows ``unfrozen_rows`` lists.
    """
    for row in numba.prange(size):
        vertex = patch[row]
        batch_slot[vertex] = 1
        row_end[row] = indptr[vertex + 1] - indptr[vertex] + 1  # the room the row needs
    n_unfrozen = 0
    begin = 0
    for row in range(size):
        if not frozen[patch[row]]:
            unfrozen_rows[n_unfrozen] = row
            n_unfrozen += 1
        row_begin[row] = begin
        begin += row_end[row]
    for row in numba.prange(size):
        vertex = patch[row]
        row_end[row] = induced_row(vertex, row, indptr, indices, data, batch_slot, 1, local_index, local_indices,
                                   local_weights, row_begin[row])
        for column in range(values.shape[1]):
            first[row, column] = values[vertex, column]
    for step in range(depth):
        last = step == depth - 1
        for listed in numba.prange(n_unfrozen if last else size):
            row = unfrozen_rows[listed] if last else listed
            smooth_row(row, row_begin[row], row_end[row], local_indices, local_weights, first, second)
        first, second = second, first
    return first, n_unfrozen
