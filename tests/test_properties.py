"""Property-based checks over small random inputs (hypothesis): fit either refuses with a
ValueError/TypeError, or returns distributions whose rows sum to 1, confidences in [0, 1],
no NaN, and seeds that keep their labels, whatever the magnitude of the rows."""

import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

# Hypothesis caches what it learns in ./.hypothesis; keep the working tree clean.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "fastprop-hypothesis")

from fastprop import FastProp  # noqa: E402
from fastprop.baselines import SGC, LabelPropagation, LabelSpreading  # noqa: E402

#: Derandomized and without an example database: the same examples on every run.
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None)


@st.composite
def problems(draw):
    n_samples = draw(st.integers(2, 24))
    n_features = draw(st.integers(1, 4))
    # rows of every magnitude float32 holds, from subnormal (1e-40) to huge (1e38)
    base = draw(hnp.arrays(np.float64, (n_samples, n_features), elements=st.floats(-1.0, 1.0)))
    magnitude = draw(hnp.arrays(np.int64, n_samples, elements=st.sampled_from([0, -40, -20, 20, 37, 38])))
    X = (base * 10.0 ** magnitude[:, None]).astype(np.float32)
    if draw(st.integers(0, 9)):  # mostly no all-zero row, whose cosine is undefined (a ValueError)
        X[~X.any(axis=1), 0] = 1.0
    y = draw(hnp.arrays(np.int64, n_samples, elements=st.sampled_from([-1, -1, 0, 1, 2])))
    graph = None
    if draw(st.booleans()):
        dense = draw(hnp.arrays(np.float64, (n_samples, n_samples),
                                elements=st.one_of(st.just(0.0), st.floats(1e-30, 1e30))))
        graph = sp.csr_matrix(dense + dense.T if draw(st.booleans()) else dense)
    return X, y, graph


def check_invariants(model, y):
    distributions = model.label_distributions_
    assert np.isfinite(distributions).all() and np.isfinite(model.confidence_).all()
    np.testing.assert_allclose(distributions.sum(axis=1), 1.0, atol=1e-6)
    assert np.all((model.confidence_ >= 0) & (model.confidence_ <= 1))
    seeds = y != -1
    assert np.array_equal(model.transduction_[seeds], y[seeds])
    assert set(np.unique(model.transduction_)) <= set(model.classes_) | {-1}


def fit_or_refuse(estimator, X, y, graph):
    """The fitted estimator, or None if it refused the input with a ValueError or TypeError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the baselines on degenerate inputs
        try:
            return estimator.fit(X, y, graph=graph)
        except (ValueError, TypeError):
            return None


@PROPERTY_SETTINGS
@given(problems(), st.integers(1, 6))
def test_fastprop_invariants(problem, n_neighbors):
    X, y, graph = problem
    model = fit_or_refuse(FastProp(n_neighbors=n_neighbors, random_state=0), X, y, graph)
    if model is not None:
        check_invariants(model, y)
        assert np.isfinite(model.multiview_confidence_).all()
        assert np.isfinite(model.outlier_threshold_)


@PROPERTY_SETTINGS
@given(problems(), st.sampled_from([LabelPropagation, LabelSpreading, SGC]))
def test_baseline_invariants(problem, estimator):
    X, y, graph = problem
    model = fit_or_refuse(estimator(n_neighbors=3), X, y, graph)
    if model is not None:
        check_invariants(model, y)
