"""The propagation loop: patches from confident starts, multi-view updates.

Everything here trusts its inputs (the estimator validates them) and works
on the graph's CSR arrays through the kernels in ``_kernels``.
"""

from dataclasses import dataclass

import numba
import numpy as np

from ._kernels.batch import process_patch_rows, process_whole_patches
from ._kernels.fill import fill_patch_batch
from ._kernels.heap import heap_pop_start, heap_push
from ._kernels.patches import extract_patch, smooth_one_patch, smooth_patch_rows
from ._kernels.views import exclude_neighbourhood
from .sharing import ThreadSharingBySize

#: Whether a batch of patches is shared among the threads, learnt for each size of batch from
#: every batch this process runs (see :mod:`fastprop.sharing`); the choice changes the time of a
#: batch, never its result.
BATCH_SHARING = ThreadSharingBySize()


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
    """Reusable buffers for growing patches on one graph, ``n_slots`` patches at a time.

    The stamp arrays make each patch and each exclusion O(size of what they
    touch); buffers are allocated once per fit, never per patch. Patches of
    one batch are grown one after the other (each in its own slot) and must
    not overlap; they are then smoothed, shared among the threads or on the
    calling thread alone, as ``sharing`` (by default :data:`BATCH_SHARING`)
    finds faster.
    """

    def __init__(self, graph, settings, n_columns, n_slots=1, batch_columns=None):
        """Allocate for ``graph``.

        One patch may be smoothed with up to ``n_columns`` columns (slot 0,
        :meth:`smooth`); a batch of ``n_slots`` patches with up to
        ``batch_columns`` (default ``n_columns``) each (:meth:`process_batch`).
        """
        self.sharing = BATCH_SHARING
        batch_columns = n_columns if batch_columns is None else batch_columns
        n_vertices = graph.shape[0]
        self.indptr = graph.indptr
        self.indices = graph.indices
        self.data = graph.data
        self.settings = settings
        self.n_slots = n_slots
        self.buffer_rows, capacity = self._sizes(graph, settings)
        self.patches = np.empty((n_slots, self.buffer_rows), dtype=np.int64)
        self.sizes = np.zeros(n_slots, dtype=np.int64)
        self.stamp = np.zeros(n_vertices, dtype=np.int64)
        self.local_index = np.zeros(n_vertices, dtype=np.int64)
        # slot + 1 for the members of the patches being smoothed, 0 elsewhere (slots <= 255)
        self.batch_slot = np.zeros(n_vertices, dtype=np.uint8)
        self.row_begin = np.empty((n_slots, self.buffer_rows), dtype=np.int64)
        self.row_end = np.empty((n_slots, self.buffer_rows), dtype=np.int64)
        self.local_indices = np.empty((n_slots, capacity), dtype=np.int64)
        self.local_weights = np.empty((n_slots, capacity), dtype=np.float64)
        self._first = np.empty(self.buffer_rows * max(n_columns, n_slots * batch_columns, 1), dtype=np.float64)
        self._second = np.empty_like(self._first)
        self.joined = np.empty(self.buffer_rows, dtype=np.bool_)
        self.unfrozen_rows = np.empty(self.buffer_rows, dtype=np.int64)
        self.newly_confident = np.empty((n_slots, self.buffer_rows), dtype=np.int64)
        self.n_newly_confident = np.zeros(n_slots, dtype=np.int64)
        self.exclusion_stamp = np.zeros(n_vertices, dtype=np.int64)
        self.exclusion_queue = np.empty(n_vertices, dtype=np.int64)
        self.exclusion_depth = np.empty(n_vertices, dtype=np.int64)
        self._deferred = np.empty(4 * n_slots, dtype=np.int64)  # starts set aside while filling a batch
        self._deferred_keys = np.empty(4 * n_slots, dtype=np.float64)  # and their heap keys
        self._patches = 0
        self._exclusions = 0

    @staticmethod
    def _sizes(graph, settings):
        """Rows of a patch buffer and entries of an induced patch, at most."""
        # A patch never holds more than n_vertices, whatever max_patch_size says.
        buffer_rows = min(settings.max_patch_size, graph.shape[0])
        largest = np.sort(np.diff(graph.indptr))[::-1][:buffer_rows]
        return buffer_rows, int(largest.sum()) + buffer_rows + 1

    @classmethod
    def bytes_needed(cls, graph, settings, n_columns, n_slots=1, batch_columns=None):
        """What :meth:`__init__` allocates with these arguments, in bytes (the large buffers)."""
        batch_columns = n_columns if batch_columns is None else batch_columns
        buffer_rows, capacity = cls._sizes(graph, settings)
        smoothing = 2 * 8 * buffer_rows * max(n_columns, n_slots * batch_columns, 1)
        induced = 16 * n_slots * capacity + 40 * n_slots * buffer_rows
        per_vertex = 8 * 5 * graph.shape[0]
        return smoothing + induced + per_vertex

    @property
    def patch(self):
        """Slot 0's patch buffer, where :meth:`grow` puts its patch."""
        return self.patches[0]

    def grow(self, start, confidence):
        """Grow a patch from ``start`` into slot 0; returns ``(size, outcome, gain)``."""
        self._patches += 1
        size, outcome, gain = extract_patch(
            start, self.indptr, self.indices, confidence, self.settings.min_gain, self.settings.max_patch_size,
            self.stamp, self._patches, self.local_index, self.patches[0], self._patches,
        )
        self.sizes[0] = size
        return size, outcome, gain

    def fill_batch(self, queue, excluded, confidence, process_capped_patches):
        """Grow a batch of up to ``n_slots`` disjoint patches from the best starts of ``queue``.

        See :func:`~fastprop._kernels.fill.fill_patch_batch`: at most
        ``4 * n_slots`` starts are looked at; one whose patch would overlap
        the batch waits in the queue for the next batch.

        Returns
        -------
        n_batch : int
            Viable patches grown, in slots ``0..n_batch-1``.
        exhausted : bool
            The queue ran out of starts.
        n_starts : int
            Starts tried (set-aside ones are not counted).
        """
        n_batch, exhausted, queue.size, self._patches, self._exclusions, n_starts = fill_patch_batch(
            queue.priority, queue.rank, queue.vertex, queue.size, queue.tie_rank, excluded, confidence,
            self.indptr, self.indices, self.settings.min_gain, self.settings.max_patch_size,
            self.settings.exclusion_hops, process_capped_patches, self.stamp, self._patches, self.local_index,
            self.patches, self.sizes, self.exclusion_stamp, self._exclusions, self.exclusion_queue,
            self.exclusion_depth, self._deferred, self._deferred_keys,
        )
        return n_batch, exhausted, n_starts

    def _buffers(self, n_slots, n_columns):
        shape = (n_slots, self.buffer_rows, n_columns)
        count = shape[0] * shape[1] * shape[2]
        return self._first[:count].reshape(shape), self._second[:count].reshape(shape)

    def smooth(self, size, values, frozen):
        """``(D~^-1 A~)^depth values[patch]`` on slot 0's patch, shape (size, c).

        Rows of ``frozen`` vertices are not computed (undefined).
        """
        first, second = self._buffers(1, values.shape[1])

        def run(shared):
            if shared:
                return smooth_patch_rows(
                    self.patches[0], size, self.indptr, self.indices, self.data, self.batch_slot, self.local_index,
                    self.row_begin[0], self.row_end[0], self.local_indices[0], self.local_weights[0], values,
                    self.settings.depth, first[0], second[0], frozen, self.unfrozen_rows,
                )[0]
            return smooth_one_patch(
                self.patches[0], size, 1, self.indptr, self.indices, self.data, self.batch_slot, self.local_index,
                self.row_begin[0], self.row_end[0], self.local_indices[0], self.local_weights[0], values,
                self.settings.depth, first[0], second[0], frozen,
            )

        smoothed = self.sharing.timed(run, size)
        self.batch_slot[self.patches[0, :size]] = 0
        return smoothed[:size]

    def process_batch(self, n_patches, logits, bias, state, single_view_confidence, confident_threshold):
        """Smooth the patches in slots ``0..n_patches-1`` and update their views.

        Shared among the threads (when :attr:`sharing` finds it faster),
        whole patches go to the threads as long as each thread gets one
        (:func:`~fastprop._kernels.batch.process_whole_patches`); the patches
        left over, fewer than the threads, are shared among them row by row,
        one after the other (:func:`~fastprop._kernels.batch.process_patch_rows`).
        Otherwise the calling thread processes every patch whole, with no
        parallel launch. Every way gives the same result, whatever the
        thread count.

        Returns ``(newly_confident, n_newly_confident)``: per slot, the
        vertices that joined the confident set.
        """
        first, second = self._buffers(n_patches, logits.shape[1])
        shared_state = (state.frozen, state.probability_sum, state.view_count, state.confidence,
                        single_view_confidence, confident_threshold)

        def whole(n_whole, in_parallel):
            process_whole_patches(
                n_whole, in_parallel, self.patches, self.sizes, self.indptr, self.indices, self.data,
                self.batch_slot, self.local_index, self.row_begin, self.row_end, self.local_indices,
                self.local_weights, logits, bias, self.settings.depth, first, second, *shared_state,
                self.newly_confident, self.n_newly_confident,
            )

        def run(shared):
            if not shared:
                whole(n_patches, False)
                return
            n_whole = n_patches - n_patches % numba.get_num_threads()
            if n_whole:  # an empty launch would still cost ~20 us a batch
                # Whole patches differ in size and a batch holds a handful: threads take them one at a
                # time, not in equal contiguous shares (at 1M vertices: patch loop 0.93x the time).
                with numba.parallel_chunksize(1):
                    whole(n_whole, True)
            for slot in range(n_whole, n_patches):
                self.n_newly_confident[slot] = process_patch_rows(
                    self.patches[slot], self.sizes[slot], self.indptr, self.indices, self.data, self.batch_slot,
                    self.local_index, self.row_begin[slot], self.row_end[slot], self.local_indices[slot],
                    self.local_weights[slot], logits, bias, self.settings.depth, first[slot], second[slot],
                    *shared_state, self.joined, self.unfrozen_rows, self.newly_confident[slot],
                )

        self.sharing.timed(run, int(self.sizes[:n_patches].sum()))
        return self.newly_confident, self.n_newly_confident

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
    depends on ``random_state`` and on nothing else. A binary heap in three
    arrays (:mod:`fastprop._kernels.heap`), doubled when full: at a million
    vertices it holds hundreds of thousands of entries, which as Python
    tuples would cost ~150 bytes each. The heap is ``priority``, ``rank``,
    ``vertex`` and ``size`` (:meth:`PatchWorkspace.fill_batch` works on them).
    """

    def __init__(self, tie_rank, capacity=1024):
        self.tie_rank = tie_rank
        self.priority = np.empty(capacity, dtype=np.float64)
        self.rank = np.empty(capacity, dtype=tie_rank.dtype)
        self.vertex = np.empty(capacity, dtype=np.int64)
        self.size = 0

    def push(self, vertices, confidence):
        vertices = np.asarray(vertices, dtype=np.int64)
        needed = self.size + vertices.size
        if needed > self.vertex.size:
            capacity = max(needed, 2 * self.vertex.size)
            self.priority = _grown(self.priority, capacity, self.size)
            self.rank = _grown(self.rank, capacity, self.size)
            self.vertex = _grown(self.vertex, capacity, self.size)
        self.size = heap_push(self.priority, self.rank, self.vertex, self.size, vertices, confidence, self.tie_rank)

    def pop(self, excluded):
        """The best candidate not excluded, or -1 when none is left."""
        vertex, _, self.size = heap_pop_start(self.priority, self.rank, self.vertex, self.size, excluded)
        return int(vertex)


def _grown(array, capacity, used):
    """A copy of ``array[:used]`` with room for ``capacity`` entries."""
    grown = np.empty(capacity, dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


def training_patches(workspace, seed_class, tie_rank):
    """Grow the local predictor's training patches around the seeds, one after the other.

    Patches are grown like the propagation's (confident starts, the initial
    confidences: 1 for seeds, 0 elsewhere, with start exclusion), so the
    predictor is trained on the kind of patch it will see.

    Yields
    ------
    int
        The size of the patch just grown, in ``workspace.patch[:size]`` until the next one.
    """
    labeled = seed_class >= 0
    confidence = labeled.astype(np.float64)
    excluded = np.zeros(labeled.size, dtype=bool)
    queue = StartQueue(tie_rank)
    queue.push(np.flatnonzero(labeled), confidence)
    while True:
        start = queue.pop(excluded)
        if start < 0:
            return
        workspace.exclude(start, excluded)
        size, _, _ = workspace.grow(start, confidence)
        yield size


def training_features(workspace, features, seed_class, tie_rank):
    """SGC features of the labeled vertices of the :func:`training_patches`.

    Returns
    -------
    rows : ndarray of shape (n_rows, n_features), float64
        One row per (patch, labeled vertex in it).
    labels : ndarray of shape (n_rows,), int64
        The class index of each row's vertex.
    n_patches : int
    """
    labeled = seed_class >= 0
    nothing_frozen = np.zeros(labeled.size, dtype=bool)
    rows, labels = [], []
    for size in training_patches(workspace, seed_class, tie_rank):
        members = workspace.patch[:size]
        in_patch_seeds = np.flatnonzero(labeled[members])
        smoothed = workspace.smooth(size, features, nothing_frozen)
        rows.append(smoothed[in_patch_seeds].copy())
        labels.append(seed_class[members[in_patch_seeds]])
    return np.concatenate(rows), np.concatenate(labels), len(rows)


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

    @classmethod
    def from_seeds(cls, seed_class, n_classes):
        """The state before any patch: seeds one-hot, confident and frozen; nothing else seen."""
        labeled = seed_class >= 0
        state = cls(
            probability_sum=np.zeros((seed_class.size, n_classes), dtype=np.float64),
            view_count=np.zeros(seed_class.size, dtype=np.int64),
            confidence=labeled.astype(np.float64),
            frozen=labeled.copy(),
        )
        state.probability_sum[np.flatnonzero(labeled), seed_class[labeled]] = 1.0
        return state


class LinearPatchPredictor:
    """The SGC local predictor on a patch: its logits ``X W`` smoothed on the patch, plus ``bias``.

    The predictor is linear before its softmax, so smoothing ``X W`` equals
    applying ``W`` to smoothed features, at ``n_classes`` columns instead of
    ``n_features`` (:meth:`PatchWorkspace.process_batch`).
    """

    def __init__(self, logits, bias):
        self.logits = logits
        self.bias = bias

    def process_batch(self, workspace, n_batch, state, single_view_confidence, confident_threshold):
        """Update the views of the batch's patches; returns ``(newly_confident, n_newly_confident)`` per slot."""
        return workspace.process_batch(n_batch, self.logits, self.bias, state, single_view_confidence,
                                       confident_threshold)


def propagate(workspace, predictor, seed_class, tie_rank, *, confident_threshold,
              single_view_confidence, process_capped_patches=False, single_view_restarts=False,
              confidence_override=None, progress=None):
    """Run the path scheduler until no viable start remains.

    Patches are taken in batches of up to ``workspace.n_slots`` disjoint
    patches (see :meth:`PatchWorkspace.fill_batch`), processed in parallel,
    and their newly confident vertices enter the start queue in slot order.

    Parameters
    ----------
    workspace : PatchWorkspace
    predictor : LinearPatchPredictor or fastprop.local_networks.NetworkPatchPredictor
        The local predictor: its ``process_batch`` labels the patches of a
        batch and updates their views.
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
    single_view_restarts : bool
        When no start is left, queue the vertices seen by one patch only
        (:func:`_push_single_view_starts`) and go on; the loop ends when
        none is left to queue either. False here, the paper's loop;
        ``FastProp`` passes its own setting (True by default).
    confidence_override : callable or None
        For the ``confidence="random"`` ablation: given the vertices just
        updated, returns the confidences the scheduler uses for them.
    progress : callable or None
        Called as ``progress(n_confident, n_vertices)`` after each batch of patches.

    Returns
    -------
    PropagationState
    """
    n_vertices, n_classes = seed_class.size, predictor.bias.size
    labeled = seed_class >= 0
    state = PropagationState.from_seeds(seed_class, n_classes)
    excluded = np.zeros(n_vertices, dtype=bool)
    queue = StartQueue(tie_rank)
    queue.push(np.flatnonzero(labeled), state.confidence)
    n_confident = int(labeled.sum())
    restarted = np.zeros(n_vertices, dtype=bool) if single_view_restarts else None
    while True:
        n_batch, exhausted, n_starts = workspace.fill_batch(queue, excluded, state.confidence, process_capped_patches)
        state.n_starts += n_starts
        if n_batch == 0:
            if exhausted:
                if single_view_restarts and _push_single_view_starts(queue, state, restarted):
                    continue
                break
            continue
        # Even when the queue ran out while this batch was filled, the vertices its patches make
        # confident are starts too: the loop ends only at a fill that finds nothing to grow.
        newly_confident, n_newly_confident = predictor.process_batch(
            workspace, n_batch, state, single_view_confidence, confident_threshold
        )
        for slot in range(n_batch):
            n_new = n_newly_confident[slot]
            if confidence_override is not None:
                members = workspace.patches[slot, : workspace.sizes[slot]]
                n_new = _override(members, state, confidence_override, confident_threshold,
                                  newly_confident[slot], n_new)
            state.n_patches += 1
            queue.push(newly_confident[slot, :n_new], state.confidence)
            n_confident += n_new
        if progress is not None:
            progress(n_confident, n_vertices)
    return state


def _push_single_view_starts(queue, state, restarted):
    """Queue the vertices seen by one patch only, never queued so, as starts; returns whether there were any.

    A cluster that holds a single seed sees one patch, the seed's: its
    vertices keep the single-view confidence, none becomes confident, and
    the loop would end with the rest of the cluster unseen. Their priority
    is their view's largest probability minus 1, below every confident
    vertex's, so the confident starts the new patches make go first.
    """
    vertices = np.flatnonzero((state.view_count == 1) & ~state.frozen & ~restarted)
    if vertices.size == 0:
        return False
    restarted[vertices] = True
    priority = np.zeros(state.view_count.size)
    priority[vertices] = state.probability_sum[vertices].max(axis=1) - 1.0
    queue.push(vertices, priority)
    return True


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
