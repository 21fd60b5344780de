"""Numba's kernels compiled (or loaded from its cache) before a service's first fit."""

import time

import numpy as np

from .estimator import FastProp

__all__ = ["warmup"]


def warmup() -> float:
    """Compile (or load from Numba's on-disk cache) every kernel FastProp uses.

    A service can call it once at start-up so that its first real ``fit``
    pays no compilation: the first call in a fresh environment takes a few
    seconds, later processes load the cache in well under a second.

    Returns
    -------
    float
        Seconds spent.
    """
    clock = time.perf_counter()
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(loc, 0.3, size=(30, 4)) for loc in (-2.0, 2.0)])
    y = np.full(60, -1)
    y[[0, 30]] = [0, 1]
    for training in ("graph", "patches"):
        FastProp(n_neighbors=5, predictor_training=training, random_state=0).fit(X, y).predict(X[:2])
    FastProp(n_neighbors=5, local_predictor="gat", random_state=0).fit(X, y)  # the networks' view updates, attention
    FastProp(n_neighbors=5, random_state=0).fit(X, y, validation=([1, 31], [0, 1]))  # the calibration's signals
    # the hnsw search of every fit above 30,000 samples (its copies' hashes; a contract audit found them left out)
    FastProp(n_neighbors=5, graph_method="hnsw", random_state=0).fit(X, y)
    return time.perf_counter() - clock
