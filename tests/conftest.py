"""Fixtures several test modules share."""

import numpy as np
import pytest

from fastprop import build_knn_graph


@pytest.fixture(scope="session")
def two_clusters():
    """``(X, y, graph)``: two separated clusters of 100 samples in 8 dimensions, three seeds each."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(loc, 0.3, size=(100, 8)) for loc in (-1.0, 1.0)]).astype(np.float32)
    y = np.full(200, -1)
    y[[0, 1, 2]] = 0
    y[[100, 101, 102]] = 1
    return X, y, build_knn_graph(X, 10, random_state=0)
