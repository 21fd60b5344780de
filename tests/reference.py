"""Slow, obvious re-implementations shared by the kernel and scheduler tests, and small hand-built problems."""

from collections import deque

import numpy as np
import scipy.sparse as sp


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


def dense_random_walk(dense):
    """``D~^-1 (W + I)`` of a dense affinity, in float64."""
    closed = dense.astype(np.float64) + np.eye(len(dense))
    return closed / closed.sum(axis=1, keepdims=True)


def slow_structural_features(dense, distributions, view_count):
    """ConfNet's nine descriptors from a dense affinity, column by column with NumPy."""
    ordered = np.sort(distributions, axis=1)
    top = ordered[:, -1]
    second = ordered[:, -2] if distributions.shape[1] > 1 else np.zeros(len(ordered))
    entropy = -(distributions * np.log(np.clip(distributions, 1e-12, None))).sum(axis=1)
    neighbour_mean = dense_random_walk(dense) @ distributions
    degree = (dense > 0).sum(axis=1)
    max_weight = np.where(degree > 0, dense.max(axis=1), 0.0)
    mean_weight = dense.sum(axis=1) / np.maximum(degree, 1)
    return np.column_stack([top, top - second, entropy, neighbour_mean.max(axis=1),
                            (neighbour_mean * distributions).sum(axis=1), mean_weight, max_weight,
                            np.log1p(degree), np.log1p(view_count)])


def numeric_gradients(loss_at, params, eps=1e-6):
    """Central finite differences of ``loss_at`` at ``params`` (a list of arrays), entry by entry."""
    gradients = []
    for k, param in enumerate(params):
        numeric = np.zeros_like(param)
        for index in np.ndindex(param.shape):
            shifted = [p.copy() for p in params]
            shifted[k][index] += eps
            up = loss_at(shifted)
            shifted[k][index] -= 2 * eps
            numeric[index] = (up - loss_at(shifted)) / (2 * eps)
        gradients.append(numeric)
    return gradients


def assert_own_rows_give_fitted_labels(model, X, y, step):
    """Every ``step``-th unlabeled fitted sample, given its own graph row as a new point, gets its fitted label."""
    from numpy.testing import assert_allclose
    from scipy.special import softmax

    graph = model.graph_
    for i in np.flatnonzero(np.asarray(y) < 0)[::step]:
        row = slice(graph.indptr[i], graph.indptr[i + 1])
        unit = X[i : i + 1] / np.linalg.norm(X[i])
        logits = model.predictor_.scorer.logits_of_rows(
            unit, graph.indices[row][None, :].astype(np.int64), graph.data[row][None, :].astype(np.float64))
        assert_allclose(softmax(logits[0]), model.label_distributions_[i], atol=1e-5)


def many_small_clusters(n_classes, per_class, n_features, seed=0):
    """``(X, y, truth)``: ``n_classes`` tight clusters, the first sample of each a seed (``y`` -1 elsewhere)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, n_features))
    X = np.repeat(centres, per_class, axis=0) + 0.05 * rng.normal(size=(n_classes * per_class, n_features))
    truth = np.repeat(np.arange(n_classes), per_class)
    y = np.full(truth.size, -1)
    y[::per_class] = truth[::per_class]
    return X.astype(np.float32), y, truth


def two_seeded_clusters_and_an_unseeded_one(seed=0, n_per=80):
    """Two seeded clusters, one unseeded cluster of outliers, and a validation set of 40 unlabeled samples."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[:3] * 3
    X = np.vstack([c + rng.normal(size=(n_per, 8)) for c in centres]).astype(np.float32)
    truth = np.repeat([0, 1, -1], n_per)
    y = np.full(len(X), -1)
    y[[0, 1, n_per, n_per + 1]] = [0, 0, 1, 1]
    validation = np.sort(rng.choice(np.flatnonzero(y < 0), size=40, replace=False))
    return X, y, truth, validation


#: The walks' length in :func:`reference_reach` (fastprop's ``REACH_STEPS``, written out independently).
REFERENCE_REACH_STEPS = 10


def reference_reach(graph, seeds):
    """The seeds' reach by SciPy: sum_k 0.9^k S^k 1_seeds, k = 1..REFERENCE_REACH_STEPS, S = D~^-1 (W + I)."""
    closed = sp.csr_matrix(graph, dtype=np.float64) + sp.identity(graph.shape[0])
    walk = sp.diags(1 / np.asarray(closed.sum(axis=1)).ravel()) @ closed
    walked, reach = seeds.astype(np.float64), np.zeros(graph.shape[0])
    for step in range(1, REFERENCE_REACH_STEPS + 1):
        walked = walk @ walked
        reach += 0.9**step * walked
    return reach


def reference_left_out_reach(graph, sources, seeds=None):
    """A source's reach from the others (and the seeds), every other sample's from all of them, by SciPy.

    One walk a source: the reach from everyone known but it, read at it.
    """
    n = graph.shape[0]
    everyone = np.zeros(n, dtype=bool) if seeds is None else seeds.copy()
    everyone[sources] = True
    expected = reference_reach(graph, everyone)
    for source in sources:
        others = everyone.copy()
        others[source] = False
        expected[source] = reference_reach(graph, others)[source]
    return expected


def reference_density(graph, k):
    """Each row's mean of its k largest weights (all of a shorter row, 0 for an empty one), row by row."""
    graph = sp.csr_matrix(graph)
    means = np.zeros(graph.shape[0])
    for row in range(graph.shape[0]):
        weights = np.sort(graph.data[graph.indptr[row]:graph.indptr[row + 1]].astype(np.float64))[::-1][:k]
        means[row] = weights.mean() if weights.size else 0.0
    return means
