import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from fastprop import locality
from fastprop.rows import unit_rows


def slow_spherical_kmeans(sample, centroids, iterations):
    """Lloyd's iterations on the sphere, one cluster at a time."""
    centroids = centroids.astype(np.float64)
    for _ in range(iterations):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        for cluster in range(len(centroids)):
            members = sample[nearest == cluster]
            if len(members):
                total = members.sum(axis=0)
                centroids[cluster] = total / np.linalg.norm(total)
    return centroids


def blobs(n_samples, n_features, n_clusters, seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, n_features)) * 5
    truth = rng.integers(0, n_clusters, n_samples)
    return (centres[truth] + rng.normal(size=(n_samples, n_features))).astype(np.float32), truth


def test_nearest_centroid_blockwise_matches_dense_argmax(monkeypatch):
    X, _ = blobs(300, 6, 5, seed=0)
    centroids = unit_rows(X[:7])
    monkeypatch.setattr(locality, "SIMILARITY_BLOCK_BYTES", 4 * 7 * 11)  # 11 rows a block
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    assert_array_equal(locality._nearest_centroid(X, centroids), np.argmax(unit @ centroids.T, axis=1))


def test_kmeans_matches_slow_lloyd_from_the_same_start():
    X, _ = blobs(2000, 8, 6, seed=1)
    n_clusters = 10
    centroids = locality.spherical_kmeans_centroids(X, n_clusters, np.random.default_rng(3))
    # the same draws as the function: its sample (sorted rows), then its initial centroids
    rng = np.random.default_rng(3)
    rows = np.sort(rng.choice(len(X), size=locality.KMEANS_SAMPLES_PER_CLUSTER * n_clusters, replace=False))
    sample = X[rows] / np.linalg.norm(X[rows], axis=1, keepdims=True)
    start = sample[rng.choice(len(sample), size=n_clusters, replace=False)]
    expected = slow_spherical_kmeans(sample.astype(np.float64), start, locality.KMEANS_ITERATIONS)
    assert_allclose(centroids, expected, atol=1e-5)
    assert_allclose(np.linalg.norm(centroids, axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spatial_order_lists_each_cluster_together(monkeypatch, seed):
    X, truth = blobs(3000, 16, 4, seed=2 + seed)
    # 30 k-means clusters for 4 blobs, so that every blob gets initial centroids of its
    # own: with 10 for 5 blobs, 4 seeds in 100 left a blob without one and mixed it into
    # another blob's cluster (200 data/seed pairs of this setting: no failure)
    monkeypatch.setattr(locality, "SAMPLES_PER_CLUSTER", 100)
    order = locality.spatial_order(X, np.random.default_rng(seed))
    assert_array_equal(np.sort(order), np.arange(len(X)))
    # the k-means clusters, in their order: contiguous runs, increasing index within a run
    centroids = locality.spherical_kmeans_centroids(X, 30, np.random.default_rng(seed))
    nearest = locality._nearest_centroid(X, centroids)[order]
    assert np.all(np.diff(nearest) >= 0)
    runs = np.split(order, np.flatnonzero(np.diff(nearest)) + 1)
    assert len(runs) > 4
    assert all(np.all(np.diff(run) > 0) for run in runs)
    # well-separated blobs: a cluster never mixes two of them
    assert all(np.unique(truth[run]).size == 1 for run in runs)


@pytest.mark.parametrize("n_samples", [1, 7, 999, 1000])
def test_spatial_order_on_few_samples_is_a_permutation(n_samples):
    X, _ = blobs(n_samples, 4, 2, seed=3)
    order = locality.spatial_order(X, np.random.default_rng(0))
    assert_array_equal(np.sort(order), np.arange(n_samples))


def test_insertion_order_puts_a_random_tenth_first_then_keeps_the_order():
    rng = np.random.default_rng(4)
    order = rng.permutation(20_000)
    inserted = locality.insertion_order(order, np.random.default_rng(5))
    assert_array_equal(np.sort(inserted), np.arange(order.size))
    in_prefix = np.random.default_rng(5).random(order.size) < locality.RANDOM_PREFIX
    n_prefix = int(in_prefix.sum())
    assert 0.08 * order.size < n_prefix < 0.12 * order.size
    assert_array_equal(np.sort(inserted[:n_prefix]), np.flatnonzero(in_prefix))
    assert_array_equal(inserted[n_prefix:], order[~in_prefix[order]])


def test_spatial_order_is_deterministic_and_leaves_input_alone():
    X, _ = blobs(2500, 8, 4, seed=6)
    before = X.copy()
    first = locality.spatial_order(X, np.random.default_rng(9))
    assert_array_equal(first, locality.spatial_order(X, np.random.default_rng(9)))
    assert_array_equal(X, before)
