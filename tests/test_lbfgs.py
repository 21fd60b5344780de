import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import minimize

from fastprop.lbfgs import MAX_BACKTRACKS, minimise
from fastprop.linear import SoftmaxLoss


def _quadratic(matrix, vector):
    return lambda x: (0.5 * x @ matrix @ x - vector @ x, matrix @ x - vector)


@pytest.fixture
def softmax_problem():
    rng = np.random.default_rng(4)
    features = rng.normal(size=(60, 7))
    targets = np.eye(4)[rng.integers(0, 4, 60)]
    weights = rng.uniform(0.5, 1.5, size=60)
    return SoftmaxLoss(features, targets, weights / weights.sum(), 0.05), 8 * 4


def test_quadratic_minimum_is_the_linear_solve():
    rng = np.random.default_rng(0)
    root = rng.normal(size=(12, 12))
    matrix = root @ root.T + 0.1 * np.eye(12)  # condition number in the hundreds
    vector = rng.normal(size=12)
    params, n_iter = minimise(_quadratic(matrix, vector), np.zeros(12), max_iter=500, gtol=1e-10, ftol=0.0)
    assert_allclose(params, np.linalg.solve(matrix, vector), rtol=1e-7, atol=1e-8)
    assert 0 < n_iter < 500


def test_softmax_optimum_matches_scipy_lbfgsb(softmax_problem):
    loss, n_params = softmax_problem
    params, _ = minimise(loss, np.zeros(n_params), max_iter=2000, gtol=1e-9, ftol=0.0)
    reference = minimize(loss, np.zeros(n_params), jac=True, method="L-BFGS-B",
                         options={"maxiter": 2000, "gtol": 1e-9, "ftol": 0.0}).x
    # Near the optimum the loss's decrease falls below float64's resolution of ~1.2 (the line search then
    # stops where it is): how close to 1e-9 the gradient gets depends on the BLAS's rounding, the optimum not.
    assert np.abs(loss(params)[1]).max() <= 1e-8
    assert loss(params)[0] <= loss(reference)[0] * (1 + 1e-14)
    assert_allclose(params, reference, atol=1e-6)


def test_start_at_the_optimum_takes_no_iteration():
    matrix, vector = np.diag([1.0, 4.0]), np.array([1.0, 2.0])
    params, n_iter = minimise(_quadratic(matrix, vector), np.array([1.0, 0.5]), max_iter=10, gtol=1e-12, ftol=0.0)
    assert n_iter == 0
    assert_array_equal(params, [1.0, 0.5])


def test_stops_after_max_iter(softmax_problem):
    loss, n_params = softmax_problem
    calls = []
    params, n_iter = minimise(lambda p: calls.append(1) or loss(p), np.zeros(n_params), max_iter=3, gtol=0.0, ftol=0.0)
    assert n_iter == 3
    assert 4 <= len(calls) <= 4 + 3 * MAX_BACKTRACKS
    assert loss(params)[0] < loss(np.zeros(n_params))[0]


def test_ftol_stops_when_the_loss_stalls(softmax_problem):
    loss, n_params = softmax_problem
    _, loose = minimise(loss, np.zeros(n_params), max_iter=2000, gtol=0.0, ftol=1e-3)
    _, tight = minimise(loss, np.zeros(n_params), max_iter=2000, gtol=0.0, ftol=1e-12)
    assert loose < tight


def test_line_search_backs_off_where_the_loss_is_not_finite():
    # A quadratic with its minimum at 3 behind a wall at 1: the loss is inf beyond it.
    def walled(x):
        if x[0] >= 1.0:
            return np.inf, np.array([np.nan])
        return 0.5 * (x[0] - 3.0) ** 2 - np.log(1.0 - x[0]), np.array([x[0] - 3.0 + 1.0 / (1.0 - x[0])])

    params, _ = minimise(walled, np.array([-5.0]), max_iter=200, gtol=1e-9, ftol=0.0)
    assert_allclose(params, [2.0 - np.sqrt(2.0)], rtol=1e-7)  # the root of (x - 3)(1 - x) + 1 = 0 below 1


def test_a_gradient_that_disagrees_with_the_loss_ends_the_search():
    # The gradient claims descent, the loss never falls: the start comes back, no endless loop.
    calls = []

    def lying(x):
        calls.append(1)
        return 1.0, np.ones_like(x)

    params, n_iter = minimise(lying, np.zeros(3), max_iter=50, gtol=1e-6, ftol=0.0)
    assert n_iter == 0
    assert_array_equal(params, np.zeros(3))
    assert len(calls) == 1 + MAX_BACKTRACKS


def test_results_are_bit_identical_across_runs(softmax_problem):
    loss, n_params = softmax_problem
    first, _ = minimise(loss, np.zeros(n_params), max_iter=40, gtol=0.0, ftol=0.0)
    second, _ = minimise(loss, np.zeros(n_params), max_iter=40, gtol=0.0, ftol=0.0)
    assert_array_equal(first, second)


def test_an_exact_objective_takes_the_search_on_to_gtol_where_the_rounded_one_stalls():
    # The rounded objective: the loss rounded to a grid of 1e-7 (as float32 products round it), its gradient
    # exact. Its line searches find no decrease once the steps' gains fall below the grid.
    rng = np.random.default_rng(2)
    root = rng.normal(size=(10, 10))
    matrix, vector = root @ root.T + 0.5 * np.eye(10), rng.normal(size=10)
    exact = _quadratic(matrix, vector)

    def rounded(x):
        loss, gradient = exact(x)
        return np.round(loss, 7), gradient

    alone, _ = minimise(rounded, np.zeros(10), max_iter=500, gtol=1e-7, ftol=0.0)
    assert np.abs(exact(alone)[1]).max() > 1e-5  # it stalls short of gtol ...
    calls = []
    finished, n_iter = minimise(rounded, np.zeros(10), max_iter=500, gtol=1e-7, ftol=0.0,
                                exact=lambda x: calls.append(1) or exact(x))
    assert np.abs(exact(finished)[1]).max() <= 1e-7  # ... which the exact objective then reaches
    solution = np.linalg.solve(matrix, vector)
    assert np.abs(finished - solution).max() < 1e-3 * np.abs(alone - solution).max()
    assert 0 < len(calls) and n_iter < 500


def test_an_exact_objective_is_not_called_when_the_rounded_one_reaches_gtol(softmax_problem):
    loss, n_params = softmax_problem
    calls = []
    params, _ = minimise(loss, np.zeros(n_params), max_iter=2000, gtol=1e-5, ftol=0.0,
                         exact=lambda x: calls.append(1) or loss(x))
    assert not calls and np.abs(loss(params)[1]).max() <= 1e-5
