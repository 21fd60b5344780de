import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import approx_fprime, minimize

from fastprop.linear import (
    fit_logistic_regression,
    fit_softmax_regression,
    logistic_loss_and_gradient,
    sigmoid_proba,
    softmax_loss_and_gradient,
    softmax_proba,
)


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(40, 5))
    return rng, features


def test_softmax_gradient_matches_finite_differences(problem):
    rng, features = problem
    targets = rng.dirichlet(np.ones(3), size=40)
    weights = rng.uniform(0.5, 1.5, size=40)
    weights /= weights.sum()
    params = rng.normal(size=6 * 3)
    _, gradient = softmax_loss_and_gradient(params, features, targets, weights, 0.3)
    numeric = approx_fprime(params, lambda p: softmax_loss_and_gradient(p, features, targets, weights, 0.3)[0], 1e-7)
    assert_allclose(gradient, numeric, atol=1e-5)


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_softmax_loss_matches_the_cross_entropy_written_out(problem, scale):
    rng, features = problem
    targets = rng.dirichlet(np.ones(3), size=40) * rng.uniform(0.0, 1.0, size=(40, 1))  # rows of mass <= 1
    weights = rng.uniform(0.5, 1.5, size=40)
    weights /= weights.sum()
    params = scale * rng.normal(size=6 * 3)
    coef, intercept = params[:15].reshape(5, 3), params[15:]
    logits = np.asarray(features @ coef + intercept, dtype=np.longdouble)
    log_proba = logits - np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
    log_proba -= logits.max(axis=1, keepdims=True)
    expected = -np.sum(weights[:, None] * targets * log_proba) + 0.15 * np.sum(coef * coef)
    loss, gradient = softmax_loss_and_gradient(params, features, targets, weights, 0.3)
    assert np.isfinite(gradient).all()
    assert_allclose(loss, float(expected), rtol=1e-12)


def test_logistic_gradient_matches_finite_differences(problem):
    rng, features = problem
    targets = rng.uniform(size=40)
    weights = np.full(40, 1 / 40)
    params = rng.normal(size=6)
    _, gradient = logistic_loss_and_gradient(params, features, targets, weights, 0.2)
    numeric = approx_fprime(params, lambda p: logistic_loss_and_gradient(p, features, targets, weights, 0.2)[0], 1e-7)
    assert_allclose(gradient, numeric, atol=1e-5)


def test_softmax_regression_separates_a_separable_problem(problem):
    rng, _ = problem
    centres = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, -4.0]])
    labels = rng.integers(0, 3, 90)
    features = centres[labels] + rng.normal(size=(90, 2))
    coef, intercept = fit_softmax_regression(features, np.eye(3)[labels], l2=1e-3)
    proba = softmax_proba(features, coef, intercept)
    assert_allclose(proba.sum(axis=1), 1.0)
    assert np.mean(proba.argmax(axis=1) == labels) == 1.0


def test_softmax_regression_reaches_the_stationary_point(problem):
    rng, features = problem
    targets = np.eye(4)[rng.integers(0, 4, 40)]
    coef, intercept = fit_softmax_regression(features, targets, l2=0.5, tol=1e-10, max_iter=2000)
    params = np.concatenate([coef.ravel(), intercept])
    _, gradient = softmax_loss_and_gradient(params, features, targets, np.full(40, 1 / 40), 0.5)
    assert np.abs(gradient).max() < 1e-6


@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_regression_with_fewer_rows_than_features_reaches_the_full_stationary_point(weighted):
    # Fitted in the span of the rows: the full gradient must still vanish, and coef lie in that span.
    rng = np.random.default_rng(3)
    features = rng.normal(size=(12, 30))
    targets = np.eye(3)[rng.integers(0, 3, 12)]
    weights = rng.uniform(0.5, 2.0, size=12) if weighted else None
    coef, intercept = fit_softmax_regression(features, targets, l2=0.05, sample_weight=weights, tol=1e-10,
                                             max_iter=5000)
    normalised = np.full(12, 1 / 12) if weights is None else weights / weights.sum()
    params = np.concatenate([coef.ravel(), intercept])
    _, gradient = softmax_loss_and_gradient(params, features, targets, normalised, 0.05)
    assert np.abs(gradient).max() < 1e-7
    in_span = features.T @ np.linalg.lstsq(features.T, coef, rcond=None)[0]
    assert_allclose(in_span, coef, atol=1e-10)


def test_logistic_regression_matches_an_independent_newton_solve(problem):
    rng, features = problem
    targets = (features[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(float)
    l2 = 0.1
    coef, intercept = fit_logistic_regression(features, targets, l2=l2, tol=1e-10, max_iter=2000)
    # Newton's method on the same objective, with an augmented design matrix.
    design = np.hstack([features, np.ones((40, 1))])
    penalty = np.diag([l2] * 5 + [0.0])
    theta = np.zeros(6)
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ theta))
        gradient = design.T @ (p - targets) / 40 + penalty @ theta
        hessian = design.T @ (design * (p * (1 - p))[:, None]) / 40 + penalty
        theta -= np.linalg.solve(hessian, gradient)
    assert_allclose(np.append(coef, intercept), theta, atol=1e-5)
    assert np.all((sigmoid_proba(features, coef, intercept) >= 0) & (sigmoid_proba(features, coef, intercept) <= 1))


def test_fits_are_deterministic(problem):
    rng, features = problem
    targets = np.eye(3)[rng.integers(0, 3, 40)]
    first = fit_softmax_regression(features, targets)
    second = fit_softmax_regression(features, targets)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])


@pytest.mark.parametrize("n_samples", [40, 8])  # more rows than features, and fewer (the row-span basis)
def test_a_warm_start_reaches_the_same_optimum(n_samples):
    rng = np.random.default_rng(5)
    features = rng.normal(size=(n_samples, 12))
    targets = np.eye(3)[rng.integers(0, 3, n_samples)]
    cold = fit_softmax_regression(features, targets, l2=1e-2, tol=1e-10)
    start = (rng.normal(size=(12, 3)), rng.normal(size=3))
    warm = fit_softmax_regression(features, targets, l2=1e-2, tol=1e-10, initial=start)
    assert_allclose(warm[0], cold[0], atol=1e-5)
    # the intercept is not penalised: a constant added to every class leaves the softmax as it is
    assert_allclose(warm[1] - warm[1].mean(), cold[1] - cold[1].mean(), atol=1e-5)


def test_softmax_rows_written_in_blocks_are_those_of_one_softmax():
    from fastprop.linear import softmax_proba, write_softmax_rows

    rng = np.random.default_rng(7)
    logits = rng.normal(size=(50, 4)) * 30
    intercept = rng.normal(size=4)
    rows = np.array([3, 0, 49, 17, 22, 8, 31])
    out = np.full((50, 4), -1.0)
    asked = []

    def logits_of(some_rows):
        asked.append(some_rows.copy())
        return logits[some_rows]

    write_softmax_rows(out, rows, logits_of, intercept, block_bytes=3 * 4 * 8 + 7)  # 3 rows of 4 float64 a block
    assert [chunk.tolist() for chunk in asked] == [[3, 0, 49], [17, 22, 8], [31]]
    assert_array_equal(out[rows], softmax_proba(logits[rows], np.eye(4), intercept))
    expected = np.exp(logits[rows] + intercept)
    assert_allclose(out[rows], expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)
    untouched = np.setdiff1d(np.arange(50), rows)
    assert np.all(out[untouched] == -1.0)


def test_softmax_blocks_of_many_classes_hold_a_bounded_number_of_bytes():
    """Fuzzing round 14: with 5,000 classes one block of 65,536 rows was several times the
    distributions, and a product with a (5000, 5000) identity took 17 s of a fit."""
    from fastprop.linear import write_softmax_rows

    n_rows, n_classes = 40, 1000
    logits = np.random.default_rng(8).normal(size=(n_rows, n_classes))
    sizes = []

    def logits_of(some_rows):
        sizes.append(some_rows.size)
        return logits[some_rows]

    out = np.empty((n_rows, n_classes))
    write_softmax_rows(out, np.arange(n_rows), logits_of, np.zeros(n_classes), block_bytes=8 * n_classes * 16)
    assert sizes == [16, 16, 8]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    assert_allclose(out, expected / expected.sum(axis=1, keepdims=True), rtol=1e-12)


def test_one_hot_rows_are_the_identitys():
    from fastprop.linear import one_hot

    labels = np.array([2, 0, 2, 4])
    assert_array_equal(one_hot(labels, 5), np.eye(5)[labels])
    assert one_hot(labels, 5, np.float32).dtype == np.float32
    assert one_hot(np.array([], dtype=np.int64), 3).shape == (0, 3)


@pytest.mark.parametrize("l2", [0.0, 1e-12])
def test_regressions_without_ridge_on_separable_data_stay_finite(l2):
    # The optimum is at infinity: L-BFGS must stop (relative decrease) at finite parameters that separate.
    rng = np.random.default_rng(5)
    features = np.r_[rng.normal(3.0, 1.0, (30, 4)), rng.normal(-3.0, 1.0, (30, 4))]
    labels = np.repeat([0, 1], 30)
    coef, intercept = fit_softmax_regression(features, np.eye(2)[labels], l2=l2, max_iter=1000)
    assert np.isfinite(coef).all() and np.isfinite(intercept).all()
    assert_array_equal(softmax_proba(features, coef, intercept).argmax(axis=1), labels)
    coef, intercept = fit_logistic_regression(features, labels.astype(float), l2=l2, max_iter=1000)
    assert np.isfinite(coef).all() and np.isfinite(intercept)
    assert_array_equal(sigmoid_proba(features, coef, intercept) > 0.5, labels == 1)


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_float32_products_give_the_float64_loss_and_gradient_to_float32_rounding(scale):
    from fastprop.linear import SoftmaxLoss

    rng = np.random.default_rng(11)
    features = rng.normal(size=(300, 40))
    targets = np.eye(6)[rng.integers(0, 6, 300)]
    weights = np.full(300, 1 / 300)
    params = scale * rng.normal(size=41 * 6) / np.sqrt(40)
    loss64, gradient64 = SoftmaxLoss(features, targets, weights, 1e-3)(params)
    loss32, gradient32 = SoftmaxLoss(features, targets, weights, 1e-3, float32_products=True)(params)
    assert loss32 != loss64  # the products were taken in float32 ...
    assert_allclose(loss32, loss64, rtol=1e-6)  # ... to its rounding
    assert_allclose(gradient32, gradient64, rtol=0, atol=1e-6 * np.abs(gradient64).max())
    exact = SoftmaxLoss(features, targets, weights, 1e-3)
    rounded = exact.with_float32_products()  # the same loss, its arrays shared with the float64 one
    assert rounded.weighted_targets is exact.weighted_targets and rounded.row_mass is exact.row_mass
    shared_loss, shared_gradient = rounded(params)
    assert shared_loss == loss32
    assert_array_equal(shared_gradient, gradient32)
    assert exact(params)[0] == loss64  # and the float64 loss is left as it was


@pytest.mark.parametrize("n_samples", [200, 20])  # more rows than features, and fewer (the row-span basis)
def test_a_fit_with_float32_products_reaches_the_float64_stationary_point(n_samples):
    rng = np.random.default_rng(12)
    centres = rng.normal(size=(5, 30))
    labels = rng.integers(0, 5, n_samples)
    features = centres[labels] + rng.normal(size=(n_samples, 30))
    targets = np.eye(5)[labels]
    coef, intercept = fit_softmax_regression(features, targets, l2=1e-2, tol=1e-8, max_iter=3000,
                                             float32_products=True)
    params = np.concatenate([coef.ravel(), intercept])
    _, gradient = softmax_loss_and_gradient(params, features, targets, np.full(n_samples, 1 / n_samples), 1e-2)
    assert np.abs(gradient).max() <= 1e-8  # the float64 gradient: the float64 loss finished the search
    reference = minimize(softmax_loss_and_gradient, np.zeros_like(params), jac=True, method="L-BFGS-B",
                         args=(features, targets, np.full(n_samples, 1 / n_samples), 1e-2),
                         options={"maxiter": 5000, "gtol": 1e-10, "ftol": 0.0}).x
    expected = softmax_proba(features, reference[:-5].reshape(30, 5), reference[-5:])
    assert_allclose(softmax_proba(features, coef, intercept), expected, atol=1e-6)
