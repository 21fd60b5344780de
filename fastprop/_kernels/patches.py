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
def induced_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
                       local_weights, values, first, frozen, unfrozen_rows):
    """The rows of :func:`smooth_one_patch`'s ``S_P`` (``slot_mark`` 1) and ``values[P]`` in ``first``, rows shared.

    The members are marked and the rows laid out from the degrees on the
    calling thread (O(size)), then built among the threads in one parallel
    loop. Each row writes only its own entries (``row_begin[r]:row_end[r]``)
    and its own row of ``first``, with the same arithmetic as
    :func:`smooth_one_patch`. The loop body indexes the arrays and never
    slices them: inside a parallel loop each view would update its parent's
    reference count, an atomic write that the threads would contend for at
    every row. The rows of unfrozen vertices are listed in
    ``unfrozen_rows`` (in patch order), so that the threads can share them
    evenly wherever they sit in the patch. The members stay marked in
    ``batch_slot`` on return.

    Returns
    -------
    int
        How many rows ``unfrozen_rows`` lists.
    """
    n_unfrozen = 0
    begin = 0
    for row in range(size):
        vertex = patch[row]
        batch_slot[vertex] = 1
        if not frozen[vertex]:
            unfrozen_rows[n_unfrozen] = row
            n_unfrozen += 1
        row_begin[row] = begin
        begin += indptr[vertex + 1] - indptr[vertex] + 1  # the room the row needs
    for row in numba.prange(size):
        vertex = patch[row]
        row_end[row] = induced_row(vertex, row, indptr, indices, data, batch_slot, 1, local_index, local_indices,
                                   local_weights, row_begin[row])
        for column in range(values.shape[1]):
            first[row, column] = values[vertex, column]
    return n_unfrozen


@numba.njit(**PARALLEL_JIT_OPTIONS)
def smooth_all_rows(size, row_begin, row_end, local_indices, local_weights, n_steps, first, second):
    """``n_steps`` SGC steps on every row of a patch built by :func:`induced_patch_rows`, rows shared.

    Starts from ``first``; returns the buffer that holds the result. One
    parallel loop per step.
    """
    for _ in range(n_steps):
        for row in numba.prange(size):
            smooth_row(row, row_begin[row], row_end[row], local_indices, local_weights, first, second)
        first, second = second, first
    return first


@numba.njit(**PARALLEL_JIT_OPTIONS)
def smooth_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end, local_indices,
                      local_weights, values, depth, first, second, frozen, unfrozen_rows):
    """:func:`smooth_one_patch` (with ``slot_mark`` 1) with every step shared among the threads by rows.

    :func:`induced_patch_rows`, then :func:`smooth_all_rows` but for the
    last step, which runs over the rows of unfrozen vertices only. The
    result is the same, bit for bit, for every thread count. The members
    stay marked in ``batch_slot`` on return.

    Returns
    -------
    smoothed : ndarray of shape (rows, n_columns)
        ``first`` or ``second``: the buffer that holds the result.
    n_unfrozen : int
        How many rows ``unfrozen_rows`` lists.
    """
    n_unfrozen = induced_patch_rows(patch, size, indptr, indices, data, batch_slot, local_index, row_begin, row_end,
                                    local_indices, local_weights, values, first, frozen, unfrozen_rows)
    if depth == 0:
        return first, n_unfrozen
    smoothed, other = last_step_buffers(depth, first, second)
    smooth_all_rows(size, row_begin, row_end, local_indices, local_weights, depth - 1, first, second)
    for listed in numba.prange(n_unfrozen):
        row = unfrozen_rows[listed]
        smooth_row(row, row_begin[row], row_end[row], local_indices, local_weights, other, smoothed)
    return smoothed, n_unfrozen


@numba.njit(**JIT_OPTIONS)
def last_step_buffers(depth, first, second):
    """Of the two buffers of a ``depth``-step smoothing from ``first``: the one the last step writes, the other."""
    if depth % 2 == 1:
        return second, first
    return first, second
