import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop import build_knn_graph, knn_graph_from_lists, knn_search, load_graph, save_graph
from fastprop._kernels.csr import knn_to_symmetric_csr


def clustered(n_samples, n_features, n_clusters, seed, spread=0.3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, n_features))
    labels = rng.integers(0, n_clusters, n_samples)
    return (centres[labels] + spread * rng.normal(size=(n_samples, n_features))).astype(np.float32)


def dense_cosine(X):
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    return unit.astype(np.float64) @ unit.T.astype(np.float64)


def slow_symmetric_graph(indices, similarities, n_samples):
    """The obvious dictionary construction of the symmetric, max-weight union."""
    edges = {}
    for i in range(indices.shape[0]):
        for j, w in zip(indices[i], similarities[i]):
            if j < 0 or j == i or w <= 0:
                continue
            for a, b in ((i, j), (j, i)):
                edges[(a, b)] = max(edges.get((a, b), 0.0), float(w))
    dense = np.zeros((n_samples, n_samples), dtype=np.float32)
    for (a, b), w in edges.items():
        dense[a, b] = w
    return dense


def test_exact_search_matches_dense_reference():
    X = np.random.default_rng(1).normal(size=(300, 12))
    indices, similarities = knn_search(X, 7, method="exact")
    cosine = dense_cosine(X)
    np.fill_diagonal(cosine, -np.inf)
    expected = np.argsort(-cosine, axis=1, kind="stable")[:, :7]
    assert_array_equal(indices, expected)
    assert_allclose(similarities, np.take_along_axis(cosine, expected, axis=1), atol=1e-5)
    assert indices.dtype == np.int64 and similarities.dtype == np.float32


def test_exact_search_is_blocked_over_rows(monkeypatch):
    import fastprop.graph as graph_module

    X = np.random.default_rng(2).normal(size=(150, 5))
    whole = knn_search(X, 4, method="exact")
    monkeypatch.setattr(graph_module, "SIMILARITY_BLOCK_BYTES", 4 * 150 * 7)  # 7-row blocks
    blocked = knn_search(X, 4, method="exact")
    assert_array_equal(whole[0], blocked[0])
    assert_array_equal(whole[1], blocked[1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_csr_kernel_matches_slow_construction(seed):
    rng = np.random.default_rng(seed)
    n, k = 60, 6
    indices = rng.integers(-1, n, size=(n, k))
    similarities = rng.uniform(-0.3, 1.0, size=(n, k)).astype(np.float32)
    indices[0, 0] = 0  # a self entry is dropped
    indptr, columns, weights = knn_to_symmetric_csr(indices, similarities)
    got = sp.csr_matrix((weights, columns, indptr), shape=(n, n))
    assert_array_equal(got.toarray(), slow_symmetric_graph(indices, similarities, n))
    for row in range(n):
        assert np.all(np.diff(columns[indptr[row] : indptr[row + 1]]) > 0)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_csr_kernel_over_several_row_tasks_with_a_hub(index_dtype):
    rng = np.random.default_rng(7)
    n, k = 2500, 5  # more rows than one parallel task holds
    indices = rng.integers(0, n, size=(n, k)).astype(index_dtype)
    indices[::3, 0] = 1234  # a hub with a long in-list
    similarities = rng.uniform(0.05, 1.0, size=(n, k)).astype(np.float32)
    indptr, columns, weights = knn_to_symmetric_csr(indices, similarities, index_dtype)
    assert indptr.dtype == columns.dtype == index_dtype
    got = sp.csr_matrix((weights, columns, indptr), shape=(n, n))
    assert_array_equal(got.toarray(), slow_symmetric_graph(indices.astype(np.int64), similarities, n))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_csr_kernel_accepts_int32_and_int64(index_dtype):
    indices = np.array([[1, 2], [0, 2], [1, 0]], dtype=index_dtype)
    similarities = np.array([[0.5, 0.25], [0.75, 0.1], [0.2, 0.3]], dtype=np.float32)
    indptr, columns, weights = knn_to_symmetric_csr(indices, similarities)
    dense = sp.csr_matrix((weights, columns, indptr), shape=(3, 3)).toarray()
    expected = np.array([[0, 0.75, 0.3], [0.75, 0, 0.2], [0.3, 0.2, 0]], dtype=np.float32)
    assert_array_equal(dense, expected)


def test_graph_is_symmetric_with_cosine_weights_and_no_self_loops():
    X = clustered(400, 8, 5, seed=3)
    G = build_knn_graph(X, 10, method="exact")
    assert isinstance(G, sp.csr_matrix) and G.dtype == np.float32
    assert G.has_sorted_indices
    assert (G != G.T).nnz == 0
    assert np.all(G.diagonal() == 0)
    rows, cols = G.nonzero()
    cosine = dense_cosine(X)
    assert_allclose(np.asarray(G[rows, cols]).ravel(), np.maximum(cosine[rows, cols], 0), atol=1e-5)
    # every vertex keeps its own 10 neighbours
    assert np.all(np.diff(G.indptr) >= 10)


def test_negative_similarities_are_dropped_not_stored():
    X = np.array([[1.0, 0.0], [-1.0, 0.05], [0.9, 0.1], [-0.9, -0.1]])
    G = build_knn_graph(X, 2, method="exact")
    assert np.all(G.data > 0)
    assert G[0, 1] == 0


def test_duplicates_never_list_themselves():
    rng = np.random.default_rng(4)
    base = rng.normal(size=(50, 6))
    X = np.vstack([base, base, base[:10]])
    for method in ("exact", "hnsw"):
        indices, similarities = knn_search(X, 5, method=method, random_state=0, n_jobs=1)
        assert not np.any(indices == np.arange(len(X))[:, None])
        assert_allclose(similarities[:, 0], 1.0, atol=1e-5)  # its twin comes first
        G = build_knn_graph(X, 5, method=method, random_state=0, n_jobs=1)
        assert np.all(G.diagonal() == 0)


def test_hnsw_queries_in_chunks_equal_one_query(monkeypatch):
    import fastprop.graph as graph_module

    rng = np.random.default_rng(8)
    base = rng.normal(size=(200, 6))
    X = np.vstack([base, base[:30]])  # duplicates may list their twin before themselves
    whole = knn_search(X, 5, method="hnsw", random_state=0, n_jobs=1)
    monkeypatch.setattr(graph_module, "_BLOCK_ROWS", 17)
    chunked = knn_search(X, 5, method="hnsw", random_state=0, n_jobs=1)
    assert_array_equal(whole[0], chunked[0])
    assert_array_equal(whole[1], chunked[1])
    assert not np.any(chunked[0] == np.arange(len(X))[:, None])


def test_hnsw_query_order_does_not_change_the_lists(monkeypatch):
    import fastprop.graph as graph_module

    rng = np.random.default_rng(11)
    base = rng.normal(size=(300, 6)).astype(np.float32)
    X = np.vstack([base, base[:40]])
    index = graph_module._hnsw_index(X, rng.permutation(len(X)), M=8, ef_construction=40, seed=1, build_jobs=1)
    monkeypatch.setattr(graph_module, "_BLOCK_ROWS", 23)
    lists = []
    for order in (np.arange(len(X)), rng.permutation(len(X))):
        indices = np.full((len(X), 5), -1, dtype=np.int32)
        similarities = np.full((len(X), 5), np.nan, dtype=np.float32)
        graph_module._hnsw_query(index, X, order, 5, indices, similarities, ef=32, n_jobs=1)
        lists.append((indices, similarities))
    assert_array_equal(lists[0][0], lists[1][0])
    assert_array_equal(lists[0][1], lists[1][1])
    assert not np.any(lists[1][0] == np.arange(len(X))[:, None])
    # every row is written, with its own neighbours' similarities
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    expected = np.einsum("ij,ikj->ik", unit, unit[lists[1][0]])
    assert_allclose(lists[1][1], expected, atol=1e-5)


def test_hnsw_recall_against_exact():
    X = clustered(3000, 32, 30, seed=5, spread=0.5)
    exact, _ = knn_search(X, 30, method="exact")
    approximate, similarities = knn_search(X, 30, method="hnsw", random_state=0)
    hits = sum(np.intersect1d(a, b).size for a, b in zip(exact, approximate))
    assert hits / exact.size >= 0.95
    assert np.all(np.diff(similarities, axis=1) <= 1e-6)


@pytest.mark.parametrize("n_jobs", [1, None])
def test_hnsw_build_with_random_state_is_deterministic(n_jobs):
    X = clustered(1500, 16, 10, seed=6)
    first = build_knn_graph(X, 10, method="hnsw", random_state=3, n_jobs=n_jobs)
    second = build_knn_graph(X, 10, method="hnsw", random_state=3, n_jobs=n_jobs)
    assert (first != second).nnz == 0
    assert_array_equal(first.data, second.data)


def test_hnsw_too_few_neighbours_is_a_clear_error():
    # M=2 with a tiny beam leaves hnswlib's graph too sparse to return 50 neighbours.
    X = clustered(200, 8, 4, seed=7)
    advice = "fewer than 51 neighbours.*graph_method='exact'.*increase M or ef_construction"
    with pytest.raises(ValueError, match=advice):
        knn_search(X, 50, method="hnsw", M=2, ef_construction=2, ef=1, random_state=0)


def test_exact_path_is_deterministic_and_inputs_unchanged():
    X = clustered(500, 8, 5, seed=8).astype(np.float64)
    copy = X.copy()
    first = build_knn_graph(X, 8, method="exact")
    second = build_knn_graph(X, 8, method="exact")
    assert_array_equal(first.indptr, second.indptr)
    assert_array_equal(first.indices, second.indices)
    assert_array_equal(first.data, second.data)
    assert_array_equal(X, copy)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32])
def test_dtypes_and_non_contiguous_input(dtype):
    X = (np.random.default_rng(9).normal(size=(80, 10)) * 10).astype(dtype)
    reference = build_knn_graph(X.astype(np.float32), 5, method="exact")
    assert (build_knn_graph(X, 5, method="exact") != reference).nnz == 0
    wide = np.repeat(X, 2, axis=1)[:, ::2]
    assert not wide.flags.c_contiguous
    assert (build_knn_graph(wide, 5, method="exact") != reference).nnz == 0


def test_auto_uses_exact_below_threshold(monkeypatch):
    import fastprop.graph as graph_module

    X = clustered(300, 8, 3, seed=10)
    exact = knn_search(X, 5, method="exact")
    assert_array_equal(knn_search(X, 5, method="auto")[0], exact[0])
    calls = []
    monkeypatch.setattr(graph_module, "EXACT_SEARCH_MAX_SAMPLES", 100)
    monkeypatch.setattr(graph_module, "_hnsw_search", lambda *a, **k: calls.append(1) or exact)
    knn_search(X, 5, method="auto")
    assert calls == [1]


def test_knn_graph_from_lists_checks_shapes():
    with pytest.raises(ValueError, match="same shape"):
        knn_graph_from_lists(np.zeros((3, 2), dtype=int), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="smaller than n_samples"):
        knn_graph_from_lists(np.array([[5], [0]]), np.ones((2, 1)))


def test_save_and_load_round_trip(tmp_path):
    G = build_knn_graph(clustered(200, 6, 4, seed=11), 6, method="exact")
    path = tmp_path / "graph.npz"
    save_graph(path, G)
    loaded = load_graph(path)
    assert (loaded != G).nnz == 0 and loaded.dtype == np.float32
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.npz"]


def test_load_graph_errors(tmp_path):
    with pytest.raises(ValueError, match=r"missing.npz: cannot be read \(No such file"):
        load_graph(tmp_path / "missing.npz")
    other = tmp_path / "other.npz"
    np.savez(other, X=np.zeros(3))
    with pytest.raises(ValueError, match="other.npz: is not a fastprop graph file"):
        load_graph(other)
    plain = tmp_path / "plain.npy"
    np.save(plain, np.zeros(3))
    with pytest.raises(ValueError, match="plain.npy: is an .npy file, not an .npz archive"):
        load_graph(plain)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match=r"garbage.npz: is not a NumPy .npy or .npz file \(it starts with b'not a zi"):
        load_graph(garbage)
