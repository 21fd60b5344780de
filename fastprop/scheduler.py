"""The propagation loop: patches from confident starts, multi-view updates.

Everything here trusts its inputs (the estimator validates them) and works
on the graph's CSR arrays through the kernels in ``_kernels``.
"""

import heapq
from dataclasses import dataclass

import numpy as np

from ._kernels.patches import PATCH_TOO_LARGE, extract_patch, induced_subgraph, patch_sgc
from ._kernels.views import accumulate_views, exclude_neighbourhood


@dataclass(frozen=True)
class PatchSettings:
    """How patches are grown and smoothed.

    Attributes
    ----------
    min_gain : float
        A patch is viable once its expected gain ``sum(1 - c)`` passes this.
    max_patch_size : int
        A patch that reaches this size first is not viable.
    exclusion_hops : int
        Once a vertex has been a start, vertices within this many hops never are.
    depth : int
        SGC depth of the local predictor.
    """

    min_gain: float
    max_patch_size: int
    exclusion_hops: int
    depth: int


class PatchWorkspace:
    """Reusable buffers for growing patches on one graph.

    The stamp arrays make each patch and each exclusion O(size of what they
    touch); buffers are allocated once per fit, never per patch.
    """

    def __init__(self, graph, settings, n_columns):
        """Allocate for ``graph``; smoothed signals may have up to ``n_columns`` columns."""
        n_vertices = graph.shape[0]
        self.indptr = graph.indptr
        self.indices = graph.indices
        self.data = graph.data
        self.settings = settings
        degrees = np.diff(graph.indptr)
        # A patch never holds more than n_vertices, whatever max_patch_size says.
        self.buffer_rows = min(settings.max_patch_size, n_vertices)
        largest = np.sort(degrees)[::-1][: self.buffer_rows]
        capacity = int(largest.sum()) + self.buffer_rows + 1
        self.patch = np.empty(self.buffer_rows, dtype=np.int64)
        self.stamp = np.zeros(n_vertices, dtype=np.int64)
        self.local_index = np.zeros(n_vertices, dtype=np.int64)
        self.local_indptr = np.empty(self.buffer_rows + 1, dtype=np.int64)
        self.local_indices = np.empty(capacity, dtype=np.int64)
        self.local_weights = np.empty(capacity, dtype=np.float64)
        self._first = np.empty(self.buffer_rows * n_columns, dtype=np.float64)
        self._second = np.empty_like(self._first)
        self.exclusion_stamp = np.zeros(n_vertices, dtype=np.int64)
        self.exclusion_queue = np.empty(n_vertices, dtype=np.int64)
        self.exclusion_depth = np.empty(n_vertices, dtype=np.int64)
        self._patches = 0
        self._exclusions = 0

    def grow(self, start, confidence):
        """Grow a patch from ``start``; returns ``(size, outcome, gain)``."""
        self._patches += 1
        return extract_patch(
            start, self.indptr, self.indices, confidence, self.settings.min_gain,
            self.settings.max_patch_size, self.stamp, self._patches, self.local_index, self.patch,
        )

    def smooth(self, size, values, frozen):
        """``(D~^-1 A~)^depth values[patch]`` on the patch just grown, shape (size, c).

        Rows of ``frozen`` vertices are not computed (undefined).
        """
        induced_subgraph(
            self.patch, size, self.indptr, self.indices, self.data, self.stamp, self._patches,
            self.local_index, self.local_indptr, self.local_indices, self.local_weights,
        )
        shape = (self.buffer_rows, values.shape[1])
        first = self._first[: shape[0] * shape[1]].reshape(shape)
        second = self._second[: shape[0] * shape[1]].reshape(shape)
        return patch_sgc(
            self.patch, size, self.local_indptr, self.local_indices, self.local_weights,
            values, self.settings.depth, first, second, frozen,
        )[:size]

    def exclude(self, start, excluded):
        """Exclude ``start`` and its ``exclusion_hops``-hop neighbours from being starts."""
        self._exclusions += 1
        exclude_neighbourhood(
            start, self.settings.exclusion_hops, self.indptr, self.indices, excluded,
            self.exclusion_stamp, self._exclusions, self.exclusion_queue, self.exclusion_depth,
        )


class StartQueue:
    """The confident set's vertices as start candidates, most confident first.

    Ties are broken by a random rank drawn once per vertex, so the order
    depends on ``random_state`` and on nothing else.
    """

    def __init__(self, tie_rank):
        self._heap = []
        self._tie_rank = tie_rank

    def push(self, vertices, confidence):
        for vertex in vertices:
            heapq.heappush(self._heap, (-float(confidence[vertex]), int(self._tie_rank[vertex]), int(vertex)))

    def pop(self, excluded):
        """The best candidate not excluded, or -1 when none is left."""
        while self._heap:
            vertex = heapq.heappop(self._heap)[2]
            if not excluded[vertex]:
                return vertex
        return -1


def training_features(workspace, features, seed_class, tie_rank):
    """SGC features of the labeled vertices of patches grown around the seeds.

    Patches are grown like the propagation's (confident starts, the initial
    confidences: 1 for seeds, 0 elsewhere, with start exclusion), so the
    predictor is trained on the kind of patch it will see.

    Returns
    -------
    rows : ndarray of shape (n_rows, n_features), float64
        One row per (patch, labeled vertex in it).
    labels : ndarray of shape (n_rows,), int64
        The class index of each row's vertex.
    n_patches : int
    """
    labeled = seed_class >= 0
    confidence = labeled.astype(np.float64)
    excluded = np.zeros(labeled.size, dtype=bool)
    queue = StartQueue(tie_rank)
    queue.push(np.flatnonzero(labeled), confidence)
    nothing_frozen = np.zeros(labeled.size, dtype=bool)
    rows, labels = [], []
    n_patches = 0
    while True:
        start = queue.pop(excluded)
        if start < 0:
            break
        workspace.exclude(start, excluded)
        size, _, _ = workspace.grow(start, confidence)
        members = workspace.patch[:size]
        in_patch_seeds = np.flatnonzero(labeled[members])
        smoothed = workspace.smooth(size, features, nothing_frozen)
        rows.append(smoothed[in_patch_seeds].copy())
        labels.append(seed_class[members[in_patch_seeds]])
        n_patches += 1
    return np.concatenate(rows), np.concatenate(labels), n_patches


@dataclass
class PropagationState:
    """What the loop knows about every vertex.

    Attributes
    ----------
    probability_sum : ndarray of shape (n, n_classes)
        Sum of the predictions of every view of each vertex (seeds: one-hot).
    view_count : ndarray of shape (n,), int64
    confidence : ndarray of shape (n,)
        Multi-view confidence: 1 for seeds, ``max_k mean_k`` after two or
        more views, the single-view value after one, 0 before any.
    frozen : ndarray of shape (n,), bool
        The confident set S: seeds and vertices that passed the threshold.
    n_patches : int
        Viable patches processed.
    n_starts : int
        Start vertices tried, viable or not.
    """

    probability_sum: np.ndarray
    view_count: np.ndarray
    confidence: np.ndarray
    frozen: np.ndarray
    n_patches: int = 0
    n_starts: int = 0


def propagate(workspace, logits, bias, seed_class, tie_rank, *, confident_threshold,
              single_view_confidence, process_capped_patches=False, confidence_override=None, progress=None):
    """Run the path scheduler until no viable start remains.

    Parameters
    ----------
    workspace : PatchWorkspace
    logits : ndarray of shape (n, n_classes), float64
        ``X @ W``: the predictor is linear before its softmax, so smoothing
        ``X W`` equals applying ``W`` to smoothed features, at ``n_classes``
        columns instead of ``n_features``.
    bias : ndarray of shape (n_classes,)
    seed_class : ndarray of shape (n,), int64
        Class index of seeds, -1 elsewhere.
    tie_rank : ndarray of shape (n,)
        Random tie-breaking rank of each vertex.
    confident_threshold : float
        c_tau: a vertex whose confidence passes it joins S and freezes.
    single_view_confidence : float
        The confidence of a vertex seen by one patch (the paper's epsilon).
    process_capped_patches : bool
        Also process a patch that reached ``max_patch_size`` before its gain
        passed ``min_gain`` (otherwise it is not viable and skipped).
    confidence_override : callable or None
        For the ``confidence="random"`` ablation: given the vertices just
        updated, returns the confidences the scheduler uses for them.
    progress : callable or None
        Called as ``progress(n_confident, n_vertices)`` after each patch.

    Returns
    -------
    PropagationState
    """
    n_vertices, n_classes = logits.shape
    labeled = seed_class >= 0
    state = PropagationState(
        probability_sum=np.zeros((n_vertices, n_classes), dtype=np.float64),
        view_count=np.zeros(n_vertices, dtype=np.int64),
        confidence=labeled.astype(np.float64),
        frozen=labeled.copy(),
    )
    state.probability_sum[np.flatnonzero(labeled), seed_class[labeled]] = 1.0
    excluded = np.zeros(n_vertices, dtype=bool)
    newly_confident = np.empty(workspace.buffer_rows, dtype=np.int64)
    queue = StartQueue(tie_rank)
    queue.push(np.flatnonzero(labeled), state.confidence)
    n_confident = int(labeled.sum())
    while True:
        start = queue.pop(excluded)
        if start < 0:
            break
        state.n_starts += 1
        workspace.exclude(start, excluded)
        size, outcome, gain = workspace.grow(start, state.confidence)
        if (outcome == PATCH_TOO_LARGE and not process_capped_patches) or gain <= 0.0:
            continue
        n_new = accumulate_views(
            workspace.patch, size, workspace.smooth(size, logits, state.frozen), bias, state.frozen, state.probability_sum,
            state.view_count, state.confidence, single_view_confidence, confident_threshold,
            newly_confident,
        )
        if confidence_override is not None:
            n_new = _override(workspace.patch[:size], state, confidence_override, confident_threshold,
                              newly_confident, n_new)
        state.n_patches += 1
        queue.push(newly_confident[:n_new], state.confidence)
        n_confident += n_new
        if progress is not None:
            progress(n_confident, n_vertices)
    return state


def _override(members, state, confidence_override, confident_threshold, newly_confident, n_new):
    """Replace the confidences of a patch's unfrozen vertices (random-confidence ablation).

    Returns how many vertices joined the confident set; they are written to
    ``newly_confident``.
    """
    state.frozen[newly_confident[:n_new]] = False
    updated = members[~state.frozen[members]]
    state.confidence[updated] = confidence_override(updated)
    joined = updated[state.confidence[updated] > confident_threshold]
    state.frozen[joined] = True
    newly_confident[: joined.size] = joined
    return joined.size

