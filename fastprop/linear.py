"""Linear models on fixed features: multinomial and binary logistic regression.

Both are fitted with SciPy's L-BFGS on the exact loss and gradient, in float64,
from a zero start, so a fit is deterministic. The loss is the mean (optionally
weighted) cross-entropy plus ``0.5 * l2 * ||coef||^2``; the intercept is not
penalised.
"""

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit, log_softmax, softmax


def softmax_loss_and_gradient(params, features, targets, sample_weight, l2):
    """Multinomial cross-entropy and its gradient with respect to ``params``.

    Parameters
    ----------
    params : ndarray of shape ((n_features + 1) * n_classes,)
        ``coef`` (n_features, n_classes) followed by ``intercept`` (n_classes,), flattened.
    features : ndarray of shape (n_samples, n_features)
    targets : ndarray of shape (n_samples, n_classes)
        Target distributions (one-hot for hard labels); rows sum to 1.
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights that sum to 1.
    l2 : float
        Ridge penalty on ``coef``.

    Returns
    -------
    loss : float
    gradient : ndarray, same shape as ``params``
    """
    n_features = features.shape[1]
    n_classes = targets.shape[1]
    coef = params[: n_features * n_classes].reshape(n_features, n_classes)
    intercept = params[n_features * n_classes :]
    log_proba = log_softmax(features @ coef + intercept, axis=1)
    loss = -np.sum(sample_weight[:, None] * targets * log_proba) + 0.5 * l2 * np.sum(coef * coef)
    residual = sample_weight[:, None] * (np.exp(log_proba) * targets.sum(axis=1, keepdims=True) - targets)
    grad_coef = features.T @ residual + l2 * coef
    grad_intercept = residual.sum(axis=0)
    return loss, np.concatenate([grad_coef.ravel(), grad_intercept])


def logistic_loss_and_gradient(params, features, targets, sample_weight, l2):
    """Binary cross-entropy and its gradient; ``params`` is ``coef`` then ``intercept``.

    ``targets`` holds values in [0, 1]; see :func:`softmax_loss_and_gradient`
    for the other arguments.
    """
    coef = params[:-1]
    intercept = params[-1]
    logits = features @ coef + intercept
    loss = -np.sum(sample_weight * (targets * log_expit(logits) + (1 - targets) * log_expit(-logits)))
    loss += 0.5 * l2 * np.dot(coef, coef)
    residual = sample_weight * (expit(logits) - targets)
    return loss, np.concatenate([features.T @ residual + l2 * coef, [residual.sum()]])


def _normalised_weights(n_samples, sample_weight):
    if sample_weight is None:
        return np.full(n_samples, 1.0 / n_samples)
    weights = np.asarray(sample_weight, dtype=np.float64)
    return weights / weights.sum()


def _minimise(objective, n_params, args, max_iter, tol, initial=None):
    result = minimize(
        objective,
        np.zeros(n_params) if initial is None else initial,
        args=args,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "gtol": tol, "ftol": tol * 1e-3},
    )
    return result.x


def fit_softmax_regression(features, targets, *, l2=1e-4, sample_weight=None, max_iter=300, tol=1e-6, initial=None):
    """Fit multinomial logistic regression.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features)
    targets : ndarray of shape (n_samples, n_classes)
        Target distributions, one-hot for hard labels.
    l2 : float, default=1e-4
        Ridge penalty on the coefficients.
    sample_weight : ndarray of shape (n_samples,), optional
        Relative weights (e.g. to balance classes); uniform when None.
    max_iter : int, default=300
        L-BFGS iterations.
    tol : float, default=1e-6
        Gradient tolerance.
    initial : (coef, intercept) or None
        Where L-BFGS starts (e.g. a fit on part of the rows); zeros when None.
        The optimum does not depend on it (the loss is convex; the intercept up to a
        constant added to every class), the iterations do.

    Returns
    -------
    coef : ndarray of shape (n_features, n_classes), float64
    intercept : ndarray of shape (n_classes,), float64
    """
    features = np.asarray(features, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    n_classes = targets.shape[1]
    weights = _normalised_weights(features.shape[0], sample_weight)
    basis = None
    if l2 > 0 and features.shape[0] < features.shape[1]:
        # The penalised optimum (l2 * coef = -features.T @ residual) lies in the span of the rows: fit
        # there, in an orthonormal basis that keeps ||coef||, with fewer parameters for L-BFGS.
        basis, _ = np.linalg.qr(features.T)
        features = features @ basis
    n_features = features.shape[1]
    start = None
    if initial is not None:
        initial_coef = np.asarray(initial[0], dtype=np.float64)
        start = np.concatenate([(initial_coef if basis is None else basis.T @ initial_coef).ravel(),
                                np.asarray(initial[1], dtype=np.float64)])
    params = _minimise(
        softmax_loss_and_gradient, (n_features + 1) * n_classes, (features, targets, weights, l2), max_iter, tol,
        start,
    )
    coef = params[: n_features * n_classes].reshape(n_features, n_classes)
    return (coef if basis is None else basis @ coef), params[n_features * n_classes :]


def softmax_proba(features, coef, intercept):
    """Class probabilities ``softmax(features @ coef + intercept)``, rows sum to 1."""
    return softmax(np.asarray(features, dtype=np.float64) @ coef + intercept, axis=1)


def write_softmax_rows(out, rows, logits_of, intercept, block=65_536):
    """``out[rows] = softmax(logits_of(rows) + intercept)``, ``block`` rows at a time.

    ``logits_of(some_rows)`` gives the logits of those rows (e.g. a row
    lookup, or the last smoothing step of just those rows). The same rows as
    one :func:`softmax_proba` of them all, without its (len(rows),
    n_classes) temporaries: at a million samples and 20 classes five of them
    (~800 MB) were the fit's peak of memory.
    """
    identity = np.eye(intercept.size)
    for begin in range(0, rows.size, block):
        chunk = rows[begin : begin + block]
        out[chunk] = softmax_proba(logits_of(chunk), identity, intercept)


def fit_logistic_regression(features, targets, *, l2=1e-4, sample_weight=None, max_iter=300, tol=1e-6):
    """Fit binary logistic regression; ``targets`` in [0, 1].

    See :func:`fit_softmax_regression` for the parameters.

    Returns
    -------
    coef : ndarray of shape (n_features,), float64
    intercept : float
    """
    features = np.asarray(features, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    weights = _normalised_weights(features.shape[0], sample_weight)
    params = _minimise(
        logistic_loss_and_gradient, features.shape[1] + 1, (features, targets, weights, l2), max_iter, tol
    )
    return params[:-1], float(params[-1])


def sigmoid_proba(features, coef, intercept):
    """Positive-class probability ``sigmoid(features @ coef + intercept)``."""
    return expit(np.asarray(features, dtype=np.float64) @ coef + intercept)
