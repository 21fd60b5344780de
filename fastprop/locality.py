"""A spatial order of the samples, so that hnswlib's work touches memory that is already cached.

hnswlib stores its index in insertion order and answers queries in the
order given. At a million samples its index (~770 bytes a sample at
d = 128, M = 16) is far larger than the caches, and in a random order
nearly every vertex a search visits is a cache miss. Grouping the samples
by a coarse spherical k-means makes consecutive insertions and queries
visit the same part of the index. Measured on 1M x 128 with 2 cores
(bench/results/graph_scale_1000000.md): build 0.59x and queries 0.46x the
time of a random order on clustered data, 0.67x and 0.69x on the noisy
mixture, recall@30 unchanged (0.881 -> 0.878, 0.811 -> 0.814); the
k-means costs 3 s.

A strictly clustered insertion order lowers hnsw's recall (0.99 -> 0.96
on 200k clustered samples, measured while choosing this scheme: the first
samples of each cluster find only other clusters to link to), so a random
tenth of the samples is inserted first, in random order, as a skeleton,
and the rest cluster by cluster: recall then stays within 0.01 of a
random insertion (200k: 0.989 both; 1M, two seeds: 0.871 -> 0.888 and
0.881 -> 0.878), where eight random rounds, each in cluster order, gave
0.846 against 0.871.
"""

import numpy as np
import scipy.sparse as sp

from .rows import SIMILARITY_BLOCK_BYTES, unit_rows

#: About this many samples per cluster: a cluster's part of the hnsw index
#: (~770 kB at d = 128, M = 16) then fits a core's L2 cache.
SAMPLES_PER_CLUSTER = 1000
MAX_CLUSTERS = 1024
#: The k-means is fitted on this many samples per cluster, ``KMEANS_ITERATIONS`` Lloyd steps.
KMEANS_SAMPLES_PER_CLUSTER = 32
KMEANS_ITERATIONS = 4
#: Fraction of the samples inserted first, in random order (see the module docstring).
RANDOM_PREFIX = 0.1


def _nearest_centroid(features, centroids):
    """Index of each row's most cosine-similar centroid (unit centroids; rows need not be unit)."""
    n_samples = features.shape[0]
    nearest = np.empty(n_samples, dtype=np.int64)
    block = max(1, SIMILARITY_BLOCK_BYTES // (4 * centroids.shape[0]))
    for start in range(0, n_samples, block):
        rows = np.asarray(features[start : start + block], dtype=np.float32)
        nearest[start : start + rows.shape[0]] = np.argmax(rows @ centroids.T, axis=1)
    return nearest


def spherical_kmeans_centroids(features, n_clusters, rng):
    """Unit centroids of a spherical k-means fitted on a random sample of ``features``."""
    n_samples = features.shape[0]
    sample_size = min(n_samples, KMEANS_SAMPLES_PER_CLUSTER * n_clusters)
    sample = unit_rows(np.asarray(features[np.sort(rng.choice(n_samples, size=sample_size, replace=False))],
                                  dtype=np.float32))
    centroids = sample[rng.choice(sample_size, size=n_clusters, replace=False)]
    for _ in range(KMEANS_ITERATIONS):
        nearest = _nearest_centroid(sample, centroids)
        membership = sp.csr_matrix(
            (np.ones(sample_size, dtype=np.float32), (nearest, np.arange(sample_size))),
            shape=(n_clusters, sample_size),
        )
        sums = np.asarray(membership @ sample)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0  # an empty cluster keeps its centroid
        centroids[filled] = sums[filled] / norms[filled, None]
    return centroids


def spatial_order(features, rng):
    """A permutation of the samples that lists each k-means cluster's members together.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features)
        Rows with no all-zero row; they need not be normalised.
    rng : numpy.random.Generator
        Draws the k-means sample and initial centroids.

    Returns
    -------
    ndarray of shape (n_samples,), int64
        Cluster by cluster, each cluster's members in increasing index.
    """
    n_clusters = min(MAX_CLUSTERS, max(1, features.shape[0] // SAMPLES_PER_CLUSTER))
    centroids = spherical_kmeans_centroids(features, n_clusters, rng)
    return np.argsort(_nearest_centroid(features, centroids), kind="stable")


def insertion_order(order, rng):
    """A random ``RANDOM_PREFIX`` of the samples in random order, then the others in ``order``."""
    in_prefix = rng.random(order.shape[0]) < RANDOM_PREFIX
    return np.concatenate([rng.permutation(np.flatnonzero(in_prefix)), order[~in_prefix[order]]])
