"""Slow, obvious re-implementations shared by the kernel and scheduler tests."""

from collections import deque

import numpy as np


def slow_bfs_patch(dense, start, confidence, min_gain, max_size):
    """Grow a patch by plain BFS over a dense adjacency, neighbours in increasing index order.

    Returns the patch (list of vertices), its outcome ("viable", "too large"
    or "exhausted") and its expected gain ``sum(1 - c)``.
    """
    patch, seen = [start], {start}
    gain = 1.0 - confidence[start]
    if gain > min_gain:
        return patch, "viable", gain
    if len(patch) >= max_size:
        return patch, "too large", gain
    queue = deque([start])
    while queue:
        vertex = queue.popleft()
        for neighbour in np.flatnonzero(dense[vertex]):
            if neighbour in seen:
                continue
            seen.add(int(neighbour))
            patch.append(int(neighbour))
            queue.append(neighbour)
            gain += 1.0 - confidence[neighbour]
            if gain > min_gain:
                return patch, "viable", gain
            if len(patch) >= max_size:
                return patch, "too large", gain
    return patch, "exhausted", gain


def dense_patch_operator(dense, patch):
    """``D~^-1 (A_P + I)`` of a patch by dense slicing."""
    block = dense[np.ix_(patch, patch)].astype(np.float64) + np.eye(len(patch))
    return block / block.sum(axis=1, keepdims=True)


def slow_accumulate(patch, predictions, frozen, sums, counts, confidence, eps, threshold):
    """The multi-view update of one patch, in place; returns the vertices that joined S."""
    joined = []
    for row, vertex in enumerate(patch):
        if frozen[vertex]:
            continue
        sums[vertex] += predictions[row]
        counts[vertex] += 1
        confidence[vertex] = sums[vertex].max() / counts[vertex] if counts[vertex] > 1 else eps
        if confidence[vertex] > threshold:
            frozen[vertex] = True
            joined.append(int(vertex))
    return joined
