"""The propagation loop against a slow, dense re-implementation of the paper's scheduler."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop.graph import build_knn_graph
from fastprop.scheduler import (
    LinearPatchPredictor,
    PatchSettings,
    PatchWorkspace,
    PropagationState,
    StartQueue,
    propagate,
    training_features,
)
from fastprop.sharing import ThreadSharing
from reference import dense_patch_operator, slow_accumulate, slow_bfs_patch
from threads import run_on_threads


def slow_propagate(dense, logits, bias, seed_class, tie_rank, settings, c_tau, eps, process_capped=False,
                   batch_size=1, patch_scores=None, restarts=False):
    """The scheduler, written plainly: batches of non-overlapping patches, then their updates in order.

    A patch's scores are ``patch_scores(patch)``, by default the SGC's ``S_P^depth logits[P] + bias``.
    With ``restarts``, when no start is left the vertices seen once (never queued so before) become
    candidates, their view's largest probability minus 1 their priority.
    """
    n, n_classes = logits.shape
    labeled = seed_class >= 0
    sums = np.zeros((n, n_classes))
    sums[labeled, seed_class[labeled]] = 1
    counts = np.zeros(n, dtype=int)
    confidence = labeled.astype(float)
    frozen = labeled.copy()
    excluded = np.zeros(n, dtype=bool)
    # candidates in S, each with the confidence it had when it joined
    candidates = {int(v): 1.0 for v in np.flatnonzero(labeled)}
    reach = np.linalg.matrix_power((dense > 0).astype(int) + np.eye(n, dtype=int), settings.exclusion_hops) > 0
    n_patches = 0
    restarted = set()
    while True:
        batch, taken, deferred = [], set(), set()
        for _ in range(4 * batch_size):
            usable = [v for v in candidates if not excluded[v] and v not in deferred]
            if len(batch) == batch_size or not usable:
                break
            start = min(usable, key=lambda v: (-candidates[v], tie_rank[v]))
            patch, outcome, gain = slow_bfs_patch(dense, start, confidence, settings.min_gain,
                                                  settings.max_patch_size)
            if taken.intersection(patch):
                deferred.add(start)  # stays a candidate, tried again in the next batch
                continue
            del candidates[start]
            excluded |= reach[start]
            if (outcome == "too large" and not process_capped) or gain <= 0:
                continue
            batch.append(patch)
            taken.update(patch)
        if not batch and not deferred:
            seen_once = {int(v) for v in np.flatnonzero((counts == 1) & ~frozen)} - restarted
            if not (restarts and seen_once):
                break
            restarted |= seen_once
            for vertex in seen_once:
                candidates[vertex] = sums[vertex].max() - 1.0
            continue
        for patch in batch:
            if patch_scores is None:
                operator = dense_patch_operator(dense, patch)
                scores = np.linalg.matrix_power(operator, settings.depth) @ logits[patch] + bias
            else:
                scores = patch_scores(patch)
            predictions = np.exp(scores - scores.max(axis=1, keepdims=True))
            predictions /= predictions.sum(axis=1, keepdims=True)
            for vertex in slow_accumulate(patch, predictions, frozen, sums, counts, confidence, eps, c_tau):
                candidates[vertex] = confidence[vertex]
            n_patches += 1
    return sums, counts, confidence, frozen, n_patches


def separated_clusters(seed, per_cluster=40, seeds_per_cluster=(6, 1, 1)):
    """Clusters far apart (a component each in the kNN graph), some with one seed."""
    rng = np.random.default_rng(seed)
    n_classes = len(seeds_per_cluster)
    truth = np.repeat(np.arange(n_classes), per_cluster)
    X = (np.eye(n_classes, 6) * 50)[truth] + rng.normal(size=(truth.size, 6))
    graph = build_knn_graph(X, 5, method="exact")
    seed_class = np.full(truth.size, -1)
    for k, n_seeds in enumerate(seeds_per_cluster):
        seed_class[np.flatnonzero(truth == k)[:n_seeds]] = k
    logits = np.eye(n_classes)[truth] * 3 + rng.normal(size=(truth.size, n_classes))
    return graph, seed_class, logits, np.zeros(n_classes), rng.permutation(truth.size), truth


@pytest.mark.parametrize("seed, seeds_per_cluster, batch_size, min_gain, hops", [
    (1, (6, 1, 1), 1, 15.0, 1), (3, (6, 1, 1), 3, 15.0, 1),
    # batches that set restarts aside for the next batch: they go back with their own priority, not epsilon's
    (5, (6, 1, 1), 2, 8.0, 1), (0, (6, 1, 1, 1, 1), 3, 8.0, 1), (2, (3, 2, 1, 1), 4, 8.0, 1),
    # a restart since made confident has two entries: once one is set aside, the other costs no look
    (11, (6, 1, 1), 2, 8.0, 0), (6, (2, 1), 3, 8.0, 0),
])
@pytest.mark.parametrize("restarts", [False, True])
def test_single_view_restarts_match_slow_reference(restarts, seed, seeds_per_cluster, batch_size, min_gain, hops):
    graph, seed_class, logits, bias, tie_rank, truth = separated_clusters(seed, seeds_per_cluster=seeds_per_cluster)
    settings = PatchSettings(min_gain=min_gain, max_patch_size=60, exclusion_hops=hops, depth=2)
    workspace = PatchWorkspace(graph, settings, logits.shape[1], n_slots=batch_size)
    state = propagate(workspace, LinearPatchPredictor(logits, bias), seed_class, tie_rank, confident_threshold=0.6,
                      single_view_confidence=1e-3, single_view_restarts=restarts)
    sums, counts, confidence, frozen, n_patches = slow_propagate(
        graph.toarray().astype(np.float64), logits, bias, seed_class, tie_rank, settings, 0.6, 1e-3,
        batch_size=batch_size, restarts=restarts,
    )
    assert state.n_patches == n_patches > 0
    assert_array_equal(state.view_count, counts)
    assert_array_equal(state.frozen, frozen)
    assert_allclose(state.probability_sum, sums, atol=1e-9)
    assert_allclose(state.confidence, confidence, atol=1e-12)
    # the unlabeled vertices of the clusters of one seed: the seed's patch alone sees them, or more patches do
    lone = np.isin(truth, np.flatnonzero(np.asarray(seeds_per_cluster) == 1)) & (seed_class < 0)
    if restarts:  # with small patches (min_gain 8) the start exclusion leaves fewer restarts, but some
        assert state.frozen[lone].mean() > (0.9 if min_gain == 15.0 else 0.1)
    else:
        assert state.frozen[lone].sum() == 0 and np.median(state.view_count[lone]) <= 1


def small_problem(seed, n=120, n_classes=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, 6)) * 2
    truth = rng.integers(0, n_classes, n)
    X = centres[truth] + rng.normal(size=(n, 6))
    graph = build_knn_graph(X, 5, method="exact")
    seed_class = np.full(n, -1)
    for k in range(n_classes):
        seed_class[np.flatnonzero(truth == k)[:2]] = k
    logits = rng.normal(size=(n, n_classes))
    bias = rng.normal(size=n_classes) * 0.1
    return graph, seed_class, logits, bias, rng.permutation(n)


@pytest.mark.parametrize("process_capped, batch_size", [(False, 1), (True, 1), (False, 4), (True, 3)])
@pytest.mark.parametrize("min_gain, max_size, hops, depth",
                         [(15.0, 40, 1, 2), (30.0, 200, 0, 1), (8.0, 12, 2, 2), (15.0, 40, 1, 0)])
@pytest.mark.parametrize("shared", [None, True, False], ids=["measured", "shared", "alone"])
def test_propagate_matches_slow_reference(min_gain, max_size, hops, depth, process_capped, batch_size, shared):
    graph, seed_class, logits, bias, tie_rank = small_problem(seed=int(min_gain))
    settings = PatchSettings(min_gain=min_gain, max_patch_size=max_size, exclusion_hops=hops, depth=depth)
    workspace = PatchWorkspace(graph, settings, logits.shape[1], n_slots=batch_size)
    workspace.sharing = ThreadSharing(forced=shared)
    state = propagate(workspace, LinearPatchPredictor(logits, bias), seed_class, tie_rank, confident_threshold=0.6,
                      single_view_confidence=1e-3, process_capped_patches=process_capped)
    sums, counts, confidence, frozen, n_patches = slow_propagate(
        graph.toarray().astype(np.float64), logits, bias, seed_class, tie_rank, settings, 0.6, 1e-3, process_capped,
        batch_size,
    )
    assert state.n_patches == n_patches > 0
    assert_array_equal(state.view_count, counts)
    assert_array_equal(state.frozen, frozen)
    assert_allclose(state.probability_sum, sums, atol=1e-9)
    assert_allclose(state.confidence, confidence, atol=1e-12)


@pytest.mark.parametrize("shared", [True, False])
def test_training_features_are_patch_sgc_rows_of_the_seeds(shared):
    graph, seed_class, _, _, tie_rank = small_problem(seed=3)
    features = np.random.default_rng(4).normal(size=(graph.shape[0], 6))
    settings = PatchSettings(min_gain=20.0, max_patch_size=60, exclusion_hops=1, depth=2)
    workspace = PatchWorkspace(graph, settings, 6)
    workspace.sharing = ThreadSharing(forced=shared)
    rows, labels, n_patches = training_features(workspace, features, seed_class, tie_rank)
    assert n_patches >= 1
    assert rows.shape == (labels.size, 6)
    assert set(labels.tolist()) <= {0, 1, 2}
    # every row is the depth-2 patch SGC of some seed: the first patch starts at
    # the best-ranked seed, which then is the first row of its own patch
    first_seed = min(np.flatnonzero(seed_class >= 0), key=lambda v: tie_rank[v])
    dense = graph.toarray().astype(np.float64)
    confidence = (seed_class >= 0).astype(float)
    patch, _, _ = slow_bfs_patch(dense, first_seed, confidence, 20.0, 60)
    operator = dense_patch_operator(dense, patch)
    expected = (operator @ operator @ features[patch])[0]
    assert_allclose(rows[0], expected, atol=1e-10)
    assert labels[0] == seed_class[first_seed]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two Numba threads")
@pytest.mark.parametrize("batch_threads, single_threads", [(2, 1), (1, 2)])
@pytest.mark.parametrize("batch_shared", [True, False])
def test_a_batch_by_patches_equals_its_patches_by_rows_bit_for_bit(batch_threads, single_threads, batch_shared):
    """Whole patches per thread, leftovers and lone patches by rows, all on one thread: the same arithmetic.

    Shared among 2 threads, a batch of 3 gives two patches a thread each and
    shares the third by rows; with 1 thread, or not shared, all three run
    whole, one after the other; lone patches shared among 2 threads run by
    rows.
    """
    graph, seed_class, logits, bias, tie_rank = small_problem(seed=5, n=300)
    settings = PatchSettings(min_gain=12.0, max_patch_size=80, exclusion_hops=1, depth=2)
    batch = PatchWorkspace(graph, settings, logits.shape[1], n_slots=3)
    batch.sharing = ThreadSharing(forced=batch_shared)
    initial_confidence = (seed_class >= 0).astype(np.float64)
    queue = StartQueue(tie_rank)
    queue.push(np.flatnonzero(seed_class >= 0), initial_confidence)
    n_batch, _, _ = batch.fill_batch(queue, np.zeros(seed_class.size, dtype=bool), initial_confidence, False)
    assert n_batch == 3
    starts = batch.patches[:3, 0].tolist()  # a patch lists its start first

    def batched():
        state, joined = PropagationState.from_seeds(seed_class, logits.shape[1]), []
        for _ in range(2):  # vertices join S from their second view on
            newly, n_newly = batch.process_batch(3, logits, bias, state, 1e-3, 0.6)
            joined += [newly[slot, : n_newly[slot]].tolist() for slot in range(3)]
        return state, joined

    single = PatchWorkspace(graph, settings, logits.shape[1])
    single.sharing = ThreadSharing(forced=not batch_shared)

    def one_by_one():
        state, joined = PropagationState.from_seeds(seed_class, logits.shape[1]), []
        for _ in range(2):
            for start in starts:
                single.grow(start, initial_confidence)
                newly, n_newly = single.process_batch(1, logits, bias, state, 1e-3, 0.6)
                joined.append(newly[0, : n_newly[0]].tolist())
        return state, joined

    together, joined_together = run_on_threads(batch_threads, batched)
    apart, joined_apart = run_on_threads(single_threads, one_by_one)
    assert joined_apart == joined_together
    assert sum(map(len, joined_apart)) > 0
    for field in ("probability_sum", "view_count", "confidence", "frozen"):
        assert_array_equal(getattr(apart, field), getattr(together, field))
    assert not batch.batch_slot.any() and not single.batch_slot.any()


def test_isolated_and_disconnected_vertices_get_no_views():
    graph = sp.block_diag([sp.csr_matrix(np.ones((4, 4)) - np.eye(4)), sp.csr_matrix((3, 3))]).tocsr()
    graph = graph.astype(np.float32)
    seed_class = np.array([0, -1, -1, -1, -1, -1, -1])
    settings = PatchSettings(min_gain=100.0, max_patch_size=50, exclusion_hops=0, depth=2)
    workspace = PatchWorkspace(graph, settings, 1)
    state = propagate(workspace, LinearPatchPredictor(np.zeros((7, 1)), np.zeros(1)), seed_class, np.arange(7),
                      confident_threshold=0.9, single_view_confidence=1e-3)
    assert state.view_count[4:].tolist() == [0, 0, 0]
    assert state.view_count[1:4].min() >= 1


@pytest.mark.parametrize("seed", [0, 1])
def test_start_queue_pops_in_heapq_order(seed):
    import heapq

    rng = np.random.default_rng(seed)
    n = 500
    tie_rank = rng.permutation(n)
    queue, reference = StartQueue(tie_rank, capacity=4), []  # grows from 4 entries
    excluded = np.zeros(n, dtype=bool)
    popped, expected = [], []
    for _ in range(300):
        if rng.random() < 0.6:
            vertices = rng.integers(0, n, size=rng.integers(0, 12))  # repeats and re-pushes included
            confidence = rng.choice([0.5, 0.9, 0.95, 1.0], size=n)  # many equal confidences: ties
            queue.push(vertices, confidence)
            for v in vertices:
                heapq.heappush(reference, (-float(confidence[v]), int(tie_rank[v]), int(v)))
        else:
            excluded[rng.integers(0, n, size=3)] = True
            popped.append(queue.pop(excluded))
            while reference and excluded[reference[0][2]]:
                heapq.heappop(reference)
            expected.append(heapq.heappop(reference)[2] if reference else -1)
    while expected[-1] != -1:  # drain both
        popped.append(queue.pop(excluded))
        while reference and excluded[reference[0][2]]:
            heapq.heappop(reference)
        expected.append(heapq.heappop(reference)[2] if reference else -1)
    assert popped == expected
    assert len(set(popped)) > 100


@pytest.mark.parametrize(("max_size", "n_slots"), [(30, 1), (500, 4)])
def test_bytes_needed_counts_what_the_workspace_allocates(max_size, n_slots):
    X = np.random.default_rng(0).normal(size=(200, 5)).astype(np.float32)
    graph = build_knn_graph(X, 8, method="exact")
    settings = PatchSettings(min_gain=20.0, max_patch_size=max_size, exclusion_hops=1, depth=2)
    workspace = PatchWorkspace(graph, settings, 5, n_slots=n_slots, batch_columns=3)
    allocated = sum(value.nbytes for value in vars(workspace).values() if isinstance(value, np.ndarray)
                    and not any(value is array for array in (graph.indptr, graph.indices, graph.data)))
    estimate = PatchWorkspace.bytes_needed(graph, settings, 5, n_slots=n_slots, batch_columns=3)
    assert 0.8 * allocated <= estimate <= 1.2 * allocated
