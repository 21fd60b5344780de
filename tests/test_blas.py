"""Every OpenBLAS runs on one thread during a fit, and gets its own count back after."""

import os
import threading

import numpy as np
import pytest
import scipy.linalg  # noqa: F401  (SciPy's own OpenBLAS, loaded as a fit would)

from fastprop import FastProp
from fastprop._blas import blas_on_calling_thread, openblas_thread_counts
from fastprop.baselines import SGC
from fastprop.evaluation.datasets import make_noisy_mixture
from forks import status_of_forked_check

COUNTS = openblas_thread_counts()
needs_openblas = pytest.mark.skipif(not COUNTS, reason="no OpenBLAS with a known thread-count getter is loaded")


@pytest.fixture
def two_blas_threads():
    """Every OpenBLAS at two threads for the test (one would not tell the setting from the default)."""
    from fastprop._blas import _control, _loaded_openblas_paths

    setters = [_control(path)[1] for path in _loaded_openblas_paths() if _control(path) is not None]
    for setter in setters:
        setter(2)
    yield
    for path, count in COUNTS.items():
        _control(path)[1](count)


def problem():
    X, y = make_noisy_mixture(n_samples=300, n_classes=3, n_features=8, outlier_fraction=0.2, random_state=0)
    labels = np.full(y.size, -1)
    for label in range(3):
        labels[np.flatnonzero(y == label)[:3]] = label
    return X, labels


@needs_openblas
@pytest.mark.parametrize("estimator", [FastProp(n_neighbors=10, random_state=0), SGC(n_neighbors=10)],
                         ids=["FastProp", "SGC"])
def test_fit_runs_blas_on_one_thread_and_restores_the_count(two_blas_threads, estimator):
    seen = []
    X, labels = problem()
    if isinstance(estimator, FastProp):
        estimator.progress = lambda stage, done, total: seen.append(openblas_thread_counts())
        estimator.fit(X, labels)
    else:
        original = estimator._scores

        def scores(*args, **kwargs):
            seen.append(openblas_thread_counts())
            return original(*args, **kwargs)

        estimator._scores = scores
        estimator.fit(X, labels)
    assert seen
    for counts in seen:
        assert set(counts.values()) == {1}
    assert set(openblas_thread_counts().values()) == {2}


@needs_openblas
def test_overlapping_blocks_from_two_threads_give_the_count_back_once_both_end(two_blas_threads):
    inside, release = threading.Event(), threading.Event()

    def hold():
        with blas_on_calling_thread():
            inside.set()
            release.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    inside.wait(10)
    with blas_on_calling_thread():
        assert set(openblas_thread_counts().values()) == {1}
    assert set(openblas_thread_counts().values()) == {1}  # the other block is still open
    release.set()
    other.join()
    assert set(openblas_thread_counts().values()) == {2}


@needs_openblas
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_while_another_thread_fits_gets_its_counts_and_locks_back(two_blas_threads):
    """Fuzzing round 13: the child kept OpenBLAS on one thread for good, and under Numba's workqueue
    layer hung on the fit lock, both held by a thread that does not exist in the child."""
    from fastprop import _blas, _concurrency

    inside, release = threading.Event(), threading.Event()

    def fitting():
        with blas_on_calling_thread(), _concurrency._LOCK:
            inside.set()
            release.wait(30)

    def child_check():
        failures = (set(openblas_thread_counts().values()) != {2}) + 2 * bool(_blas._holders)
        return failures + 4 * (not _concurrency._LOCK.acquire(timeout=5))

    other = threading.Thread(target=fitting)
    other.start()
    try:
        assert inside.wait(30)
        status = status_of_forked_check(child_check)
    finally:
        release.set()
        other.join(30)
    assert status == 0
    assert set(openblas_thread_counts().values()) == {2}
