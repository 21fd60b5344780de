"""Cosine kNN affinity graphs: exact blocked search, hnswlib, and their CSR form."""

from __future__ import annotations

import os

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from ._concurrency import serialised
from ._files import NpzArchive, write_atomically
from ._kernels.copies import spread_to_copies
from ._kernels.csr import knn_to_symmetric_csr
from ._kernels.topk import top_k_rows
from ._validation import (
    check_choice,
    check_features,
    check_graph,
    check_graph_arrays,
    check_integer,
    check_knn_lists,
    check_memory,
    check_n_neighbors,
    check_random_state,
)
from .copies import RowSubset, copy_groups
from .locality import insertion_order, spatial_order
from .rows import SIMILARITY_BLOCK_BYTES, unit_rows

#: Up to this many samples ``method="auto"`` searches exactly; above it, hnswlib.
#: Measured with ``bench/graph.py`` on 2 cores: hnsw (recall@30 >= 0.98)
#: overtakes the exact search between 31k and 43k synthetic samples (d = 128
#: and 384); at 30k either is at most ~1.5x slower than the other, and exact
#: is deterministic with recall 1.
EXACT_SEARCH_MAX_SAMPLES = 30_000

#: Rows handled at a time by hnsw insertion and queries. It bounds
#: their temporaries (a gathered copy, hnswlib's normalised copy, its labels and
#: distances: ~28 MB at d = 128), which add to the peak while the index and the kNN
#: lists are held (at 1M x 128, 65,536 rows added 110 MB to it).
_BLOCK_ROWS = 16384
_MAX_EF = 4096


def _exact_search(unit, n_neighbors, indices, similarities):
    """Fill ``indices``/``similarities`` (n_samples, n_neighbors) by blocked brute force."""
    n_samples = unit.shape[0]
    block = max(1, min(n_samples, SIMILARITY_BLOCK_BYTES // (4 * n_samples)))
    for start in range(0, n_samples, block):
        stop = min(start + block, n_samples)
        top_k_rows(unit[start:stop] @ unit.T, n_neighbors, start, indices[start:stop], similarities[start:stop])


def _hnsw_search(features, n_neighbors, indices, similarities, *, M, ef_construction, ef, rng, build_jobs,
                 n_jobs):
    """Fill ``indices``/``similarities`` with hnswlib, inserting and querying in a spatial order.

    See :mod:`fastprop.locality` for why the order matters at scale. Rows
    with identical copies are indexed once, and each lists its copies first
    (:mod:`fastprop.copies`: hnswlib can cut a group of copies off from itself).
    """
    copies = copy_groups(features)
    if copies is None:
        _hnsw_search_distinct(features, n_neighbors, indices, similarities, M=M, ef_construction=ef_construction,
                              ef=ef, rng=rng, build_jobs=build_jobs, n_jobs=n_jobs)
        return
    n_groups = copies.n_groups
    k_groups = min(n_neighbors, n_groups - 1)
    near_groups = np.empty((n_groups, k_groups), dtype=np.int32 if n_groups < 2**31 else np.int64)
    near_similarities = np.empty((n_groups, k_groups), dtype=np.float32)
    if k_groups:
        _hnsw_search_distinct(RowSubset(features, copies.representatives), k_groups, near_groups, near_similarities,
                              M=M, ef_construction=ef_construction, ef=ef, rng=rng, build_jobs=build_jobs,
                              n_jobs=n_jobs)
    spread_to_copies(copies.group, copies.group, copies.group_start, copies.group_rows, near_groups,
                     near_similarities, indices, similarities)


def _hnsw_search_distinct(features, n_neighbors, indices, similarities, *, M, ef_construction, ef, rng, build_jobs,
                          n_jobs):
    """:func:`_hnsw_search` for rows of which no two are identical."""
    seed = int(rng.integers(0, 2**31 - 1))
    query_order = spatial_order(features, rng)
    index = _hnsw_index(features, insertion_order(query_order, rng), M=M, ef_construction=ef_construction,
                        seed=seed, build_jobs=build_jobs)
    _hnsw_query(index, features, query_order, n_neighbors, indices, similarities, ef=ef, n_jobs=n_jobs)


def _hnsw_index(features, order, *, M, ef_construction, seed, build_jobs):
    """An hnswlib cosine index of ``features`` (the cosine space normalises rows itself).

    Samples are inserted in ``order``, ``_BLOCK_ROWS`` at a time (a gathered
    copy of one block at a time), labelled with their row number.
    """
    import hnswlib

    n_samples, n_features = features.shape
    index = hnswlib.Index(space="cosine", dim=n_features)
    index.init_index(max_elements=n_samples, ef_construction=ef_construction, M=M, random_seed=seed)
    for start in range(0, n_samples, _BLOCK_ROWS):
        rows = order[start : start + _BLOCK_ROWS]
        index.add_items(features[rows], rows, num_threads=build_jobs)
    return index


def _hnsw_query(index, features, order, n_neighbors, indices, similarities, *, ef, n_jobs):
    """Fill ``indices``/``similarities`` with every sample's neighbours in ``index``.

    Samples are queried in ``order``, ``_BLOCK_ROWS`` at a time, so
    hnswlib's uint64 labels and float32 distances never exist for all
    samples at once.
    """
    n_samples = features.shape[0]
    n_query = min(n_neighbors + 1, n_samples)
    search_ef = max(ef, n_query)
    for start in range(0, n_samples, _BLOCK_ROWS):
        rows = order[start : start + _BLOCK_ROWS]
        block = features[rows]
        while True:
            index.set_ef(search_ef)
            try:
                labels, distances = index.knn_query(block, k=n_query, num_threads=n_jobs)
                break
            except RuntimeError as error:
                if search_ef >= _MAX_EF:
                    raise ValueError(
                        f"hnswlib found fewer than {n_query} neighbours for some points even with "
                        f"ef={search_ef} ({error}). Use method='exact' (FastProp(graph_method='exact')), "
                        "or increase M or ef_construction of build_knn_graph / knn_search."
                    ) from None
                search_ef = min(2 * search_ef, _MAX_EF)
        similarity = np.subtract(np.float32(1.0), distances, out=distances)
        found, found_similarities = _drop_self(labels.view(np.int64), similarity, rows)
        indices[rows] = found
        similarities[rows] = found_similarities


def _drop_self(labels, similarities, rows):
    """Each row's neighbours without itself (hnswlib may list a duplicate point first).

    Row ``r`` of ``labels`` lists the neighbours of sample ``rows[r]``. Rows
    that do not contain themselves keep their first ``k - 1`` entries.

    Returns
    -------
    labels, similarities : ndarray of shape (len(rows), k - 1)
    """
    n_rows, n_columns = labels.shape
    is_self = labels == rows[:, None]
    missing_self = ~is_self.any(axis=1)
    is_self[missing_self, -1] = True
    keep = ~is_self
    return labels[keep].reshape(n_rows, n_columns - 1), similarities[keep].reshape(n_rows, n_columns - 1)


def _resolve_n_jobs(n_jobs):
    """hnswlib's thread count: all cores for None or -1, never more than the cores (hnswlib starts each)."""
    cores = os.cpu_count() or 1
    if n_jobs is None or n_jobs == -1:
        return cores
    return min(check_integer("n_jobs", n_jobs, low=1), cores)


def knn_search(
    X: ArrayLike,
    n_neighbors: int = 30,
    *,
    method: str = "auto",
    M: int = 16,
    ef_construction: int = 100,
    ef: int | None = None,
    random_state: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Find each sample's ``n_neighbors`` most cosine-similar other samples.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        Embeddings; rows need not be normalised but must not be all zero.
    n_neighbors : int, default=30
        Neighbours per sample, in ``[1, n_samples - 1]``. A sample never lists
        itself, though it does list exact duplicates of itself, first and in
        increasing row order with either method (the hnsw search indexes one
        row of identical ones: :mod:`fastprop.copies`).
    method : {"auto", "exact", "hnsw"}, default="auto"
        ``"exact"``: blocked brute force in float32, memory bounded by a 64 MiB
        block. ``"hnsw"``: approximate search with hnswlib, inserting and
        querying the samples in a spatial order (:mod:`fastprop.locality`),
        which makes it ~1.5x faster at a million samples. ``"auto"``: exact
        up to ``EXACT_SEARCH_MAX_SAMPLES`` (30,000) samples, hnsw above.
    M, ef_construction : int, default=16, 100
        hnswlib graph degree and build-time beam width. The defaults are the
        cheapest setting measured with recall@30 >= 0.99 on embedding-like
        data at the sizes where ``"auto"`` uses hnsw (clustered 100k: 0.996,
        200k: 0.995; Banking77: 0.999), in 0.73x the time of M=32 at 200k
        and with a smaller index (bench/results/graph.md, graph_scale_200000.md).
        On data without low-dimensional structure (isotropic noise in 128
        dimensions) recall is lower (0.90 at 200k) at any cheap setting;
        FastProp's accuracy there did not change with recall between 0.79
        and 1. Recall falls with size: at 1M the same clustered data gets
        0.88 with M=16 and 0.95 with M=32, which costs 1.18x the time
        (bench/RESULTS.md); pass ``M=32`` where recall matters more.
    ef : int or None, default=None
        hnswlib query beam width; None means ``max(2 * n_neighbors, 64)``.
        It is always at least ``n_neighbors + 1``, and raised automatically if
        hnswlib cannot return enough neighbours.
    random_state : int, Generator or None
        Seeds hnswlib's level generator and the spatial order's k-means.
    n_jobs : int or None, default=None
        Threads for hnswlib (-1: all cores; more than the cores counts as
        all of them). hnswlib's multi-threaded
        insertion is not deterministic (hnswlib issues #65, #540), so None
        means: all cores for the queries, and for the insertion too unless
        ``random_state`` is given, in which case the index is built on one
        thread and the graph is bit-identical for the same ``random_state``
        (about 2x slower to build on 2 cores). Pass ``n_jobs=-1`` to build
        on all cores anyway.

    Returns
    -------
    indices : ndarray of shape (n_samples, n_neighbors), int64
        Most similar first.
    similarities : ndarray of shape (n_samples, n_neighbors), float32
        Cosine similarities, in [-1, 1].
    """
    return _knn_lists(X, n_neighbors, compact=False, method=method, M=M, ef_construction=ef_construction, ef=ef,
                      random_state=random_state, n_jobs=n_jobs)


@serialised
def _knn_lists(X, n_neighbors, *, compact, method="auto", M=16, ef_construction=100, ef=None,
               random_state=None, n_jobs=None):
    """:func:`knn_search`; with ``compact``, int32 indices whenever they fit (half the memory)."""
    features = check_features(X, rescale_rows=True)
    n_samples = features.shape[0]
    n_neighbors = check_n_neighbors(n_neighbors, n_samples)
    method = check_choice("method", method, ("auto", "exact", "hnsw"))
    M = check_integer("M", M, low=2)
    ef_construction = check_integer("ef_construction", ef_construction, low=1)
    ef = max(2 * n_neighbors, 64) if ef is None else check_integer("ef", ef, low=1)
    rng = check_random_state(random_state)
    deterministic_build = n_jobs is None and random_state is not None
    n_jobs = _resolve_n_jobs(n_jobs)
    if method == "auto":
        method = "exact" if n_samples <= EXACT_SEARCH_MAX_SAMPLES else "hnsw"
    # the lists (index + similarity), then a symmetric CSR of up to twice their edges and its
    # transposed lists while it is built
    check_memory(32 * n_samples * n_neighbors, f"a kNN graph with n_neighbors={n_neighbors} on {n_samples:,} samples",
                 "use fewer neighbours.")
    index_dtype = np.int32 if compact and n_samples < 2**31 else np.int64
    indices = np.empty((n_samples, n_neighbors), dtype=index_dtype)
    similarities = np.empty((n_samples, n_neighbors), dtype=np.float32)
    if method == "exact":
        _exact_search(unit_rows(features), n_neighbors, indices, similarities)
    else:
        _hnsw_search(
            features, n_neighbors, indices, similarities, M=M, ef_construction=ef_construction, ef=ef,
            rng=rng, build_jobs=1 if deterministic_build else n_jobs, n_jobs=n_jobs,
        )
    return indices, similarities


@serialised
def knn_graph_from_lists(indices: ArrayLike, similarities: ArrayLike, n_samples: int | None = None) -> sp.csr_matrix:
    """Symmetric CSR affinity from directed kNN lists.

    Parameters
    ----------
    indices : ndarray of shape (n_samples, k), integer
        Neighbour lists as returned by :func:`knn_search`, one per vertex;
        negative entries are ignored. Floats are accepted only when every
        value is integral.
    similarities : ndarray of shape (n_samples, k)
        Their cosine similarities: finite, and representable in float32.
    n_samples : int or None
        Number of vertices; must equal ``len(indices)`` if given.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_samples, n_samples), float32
        The union of both directions (the larger weight where both exist),
        weights clipped at 0 with zero-weight edges dropped, no self loops,
        sorted indices.
    """
    indices, similarities, n_samples = check_knn_lists(indices, similarities, n_samples)
    # int32 indices whenever they fit (as scipy would choose), allocated so by the kernel
    index_dtype = np.int32 if 2 * indices.size < 2**31 and n_samples < 2**31 else np.int64
    indptr, columns, weights = knn_to_symmetric_csr(indices, similarities, index_dtype)
    graph = sp.csr_matrix((weights, columns, indptr), shape=(n_samples, n_samples))
    graph.has_sorted_indices = True
    return graph


def build_knn_graph(
    X: ArrayLike,
    n_neighbors: int = 30,
    *,
    method: str = "auto",
    M: int = 16,
    ef_construction: int = 100,
    ef: int | None = None,
    random_state: int | np.random.Generator | None = None,
    n_jobs: int | None = None,
) -> sp.csr_matrix:
    """Build the symmetric cosine kNN affinity graph of ``X``.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        Embeddings.
    n_neighbors : int, default=30
        Neighbours per sample before symmetrisation (the paper's K).
    method : {"auto", "exact", "hnsw"}, default="auto"
        See :func:`knn_search`.
    M, ef_construction, ef, random_state, n_jobs
        See :func:`knn_search`.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n_samples, n_samples), float32
        Weight ``max(cos(x_i, x_j), 0)`` where ``j`` is among ``i``'s
        neighbours or ``i`` among ``j``'s; symmetric, no self loops, sorted
        indices, about ``n_samples * n_neighbors * 1.5`` stored edges.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop import build_knn_graph
    >>> X = np.random.default_rng(0).normal(size=(200, 16))
    >>> G = build_knn_graph(X, n_neighbors=10)
    >>> G.shape, (G != G.T).nnz
    ((200, 200), 0)
    """
    indices, similarities = _knn_lists(X, n_neighbors, compact=True, method=method, M=M,
                                       ef_construction=ef_construction, ef=ef, random_state=random_state,
                                       n_jobs=n_jobs)
    return knn_graph_from_lists(indices, similarities)


def fit_graph(features, n_neighbors, **options):
    """The graph a ``fit`` builds when given none: :func:`build_knn_graph` with K clamped to ``n_samples - 1``.

    A tiny input (fewer samples than ``n_neighbors + 1``) thus gets every
    other sample as a neighbour instead of an error, and a single sample a
    1 x 1 graph without edges. ``options`` go to :func:`build_knn_graph`.
    """
    n_samples = features.shape[0]
    if n_samples == 1:
        return sp.csr_matrix((1, 1), dtype=np.float32)
    return build_knn_graph(features, min(n_neighbors, n_samples - 1), **options)


def save_graph(path: str | os.PathLike, graph: sp.spmatrix | sp.sparray) -> None:
    """Save an affinity graph to ``path`` as ``.npz`` (CSR arrays, no pickle).

    What is saved is the graph as every fit reads it
    (:func:`fastprop._validation.graphs.check_graph`): float32 weights (a float64
    weight keeps float32's 24 bits) and no self loops (the methods add their
    own), so a fit on the loaded graph is the fit on ``graph``.

    The file is written under a hidden temporary name next to ``path``
    (``.<name>.<random>.tmp``, which no ``*.npz`` glob matches) and renamed,
    so an interrupted save never leaves a half-written file; the temporary
    file is removed on any exception, Ctrl-C included (a process killed with
    SIGKILL can leave it behind).

    Raises
    ------
    ValueError
        ``graph`` is not a valid graph, or the directory of ``path`` does not exist.
    OSError
        The file cannot be written; the message names ``path``.
    """
    csr = check_graph(graph)
    arrays = {"format": np.array("csr"), "shape": np.array(csr.shape, dtype=np.int64), "indptr": csr.indptr,
              "indices": csr.indices, "data": csr.data}
    write_atomically([(path, lambda stream: np.savez(stream, **arrays))])


def load_graph(path: str | os.PathLike, n_samples: int | None = None) -> sp.csr_matrix:
    """Load a graph written by :func:`save_graph` (or ``scipy.sparse.save_npz`` of a CSR matrix).

    The file is read defensively: nothing is unpickled, each array's declared
    size is checked against the archive and against the other arrays before
    it is read (a corrupt or hostile file cannot make it allocate more than
    the file could hold), and the graph is checked like every graph that
    crosses fastprop's boundary (see :func:`fastprop._validation.graphs.check_graph`).

    Parameters
    ----------
    path : str or os.PathLike
    n_samples : int or None
        The number of vertices expected (e.g. the rows of ``X``); checked
        before the large arrays are read.

    Returns
    -------
    scipy.sparse.csr_matrix, float32

    Raises
    ------
    ValueError
        The file is missing, unreadable, corrupt, no graph file, or holds an
        invalid graph; the message names ``path``.
    """
    path = os.fsdecode(path)
    if n_samples is not None:
        n_samples = check_integer("n_samples", n_samples, low=0)
    with NpzArchive(path) as archive:
        # the format first: scipy's file of a coo matrix has no indptr, and "convert it" is the answer there
        stored_format = _small_array(archive, "format", 0).tolist() if "format" in archive.names else "csr"
        if stored_format not in ("csr", b"csr"):
            if isinstance(stored_format, bytes):
                stored_format = stored_format.decode("ascii", "replace")
            raise ValueError(
                f"{path}: holds a {str(stored_format)[:20]!r} matrix; fastprop graph files hold CSR "
                "matrices (fastprop.save_graph, or scipy.sparse.save_npz of a csr_matrix: convert with .tocsr())."
            )
        missing = {"shape", "indptr", "indices", "data"} - set(archive.names)
        if missing:
            raise ValueError(
                f"{path}: is not a fastprop graph file: arrays {sorted(missing)} are missing "
                f"(found {archive.names}). Write it with fastprop.save_graph."
            )
        shape = _small_array(archive, "shape", 1)
        if shape.shape != (2,) or not np.issubdtype(shape.dtype, np.integer) or shape[0] != shape[1] or shape[0] < 0:
            raise ValueError(f"{path}: its shape must be two equal non-negative integers, got {shape.tolist()!r}.")
        n_vertices = int(shape[0])
        if n_samples is not None and n_vertices != n_samples:
            raise ValueError(
                f"{path}: has {n_vertices:,} vertices but X has {n_samples:,} samples; build it from "
                "the same features."
            )
        _expect_length(archive, "indptr", n_vertices + 1)
        indptr = archive.read("indptr")
        if not np.issubdtype(indptr.dtype, np.integer) or indptr[-1] < 0:
            raise ValueError(f"{path}: array 'indptr' must hold non-negative integers, got {indptr.dtype}.")
        _expect_length(archive, "indices", int(indptr[-1]))
        _expect_length(archive, "data", int(indptr[-1]))
        return check_graph_arrays(shape, indptr, archive.read("indices"), archive.read("data"), n_samples,
                                  name=path)


def _small_array(archive, name, ndim):
    """A header-checked array of at most 16 entries."""
    shape, _ = archive.header(name)
    if len(shape) != ndim or np.prod(shape) > 16:
        raise ValueError(f"{archive.path}: array {name!r} has shape {shape}; a graph file's is {ndim}-D and tiny.")
    return archive.read(name)


def _expect_length(archive, name, length):
    """Check, before reading it, that array ``name`` is 1-D with ``length`` entries."""
    shape, dtype = archive.header(name)
    if shape != (length,):
        raise ValueError(
            f"{archive.path}: array {name!r} has shape {shape} ({dtype}), but the graph's other arrays "
            f"say ({length},); the file is corrupt."
        )
