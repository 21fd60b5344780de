"""The start queue's binary heap, in three plain arrays (no Python object per entry).

Entry ``e`` is ``(priority[e], rank[e], vertex[e])``; the heap pops the
lexicographically smallest, exactly the order of Python's ``heapq`` on the
same tuples.
"""

import numba

from .._config import JIT_OPTIONS


@numba.njit(**JIT_OPTIONS)
def _precedes(priority, rank, vertex, a, b):
    if priority[a] != priority[b]:
        return priority[a] < priority[b]
    if rank[a] != rank[b]:
        return rank[a] < rank[b]
    return vertex[a] < vertex[b]


@numba.njit(**JIT_OPTIONS)
def _swap(priority, rank, vertex, a, b):
    priority[a], priority[b] = priority[b], priority[a]
    rank[a], rank[b] = rank[b], rank[a]
    vertex[a], vertex[b] = vertex[b], vertex[a]


@numba.njit(**JIT_OPTIONS)
def heap_push(priority, rank, vertex, size, vertices, confidence, tie_rank):
    """Push ``(-confidence[v], tie_rank[v], v)`` for each ``v`` of ``vertices``.

    The arrays must have room for ``size + len(vertices)`` entries. Returns
    the new size.
    """
    return heap_push_keys(priority, rank, vertex, size, vertices, -confidence[vertices], tie_rank)


@numba.njit(**JIT_OPTIONS)
def heap_push_keys(priority, rank, vertex, size, vertices, keys, tie_rank):
    """Push ``(keys[j], tie_rank[v], v)`` for each ``v = vertices[j]``: entries popped before, put back as they were.

    The arrays must have room for ``size + len(vertices)`` entries. Returns
    the new size.
    """
    for new in range(vertices.shape[0]):
        v = vertices[new]
        child = size
        priority[child] = keys[new]
        rank[child] = tie_rank[v]
        vertex[child] = v
        size += 1
        while child > 0:
            parent = (child - 1) // 2
            if not _precedes(priority, rank, vertex, child, parent):
                break
            _swap(priority, rank, vertex, child, parent)
            child = parent
    return size


@numba.njit(**JIT_OPTIONS)
def heap_pop_start(priority, rank, vertex, size, excluded):
    """Pop entries until one whose vertex is not ``excluded``.

    Returns ``(vertex, key, new size)``, ``key`` the entry's priority; the
    vertex is -1 (and the key 0) when the heap ran empty.
    """
    while size > 0:
        top = vertex[0]
        key = priority[0]
        size -= 1
        if size > 0:
            priority[0] = priority[size]
            rank[0] = rank[size]
            vertex[0] = vertex[size]
            parent = 0
            while True:
                smallest = parent
                for child in (2 * parent + 1, 2 * parent + 2):
                    if child < size and _precedes(priority, rank, vertex, child, smallest):
                        smallest = child
                if smallest == parent:
                    break
                _swap(priority, rank, vertex, parent, smallest)
                parent = smallest
        if not excluded[top]:
            return top, key, size
    return -1, 0.0, size
