"""Linear models on fixed features: multinomial and binary logistic regression.

Both are fitted with L-BFGS (:mod:`fastprop.lbfgs`) on the exact loss and
gradient, in float64, from a zero start unless a start is given (FastProp's
refits start from its first fit), so a fit is deterministic. The loss
is the mean (optionally weighted) cross-entropy plus ``0.5 * l2 *
||coef||^2``; the intercept is not penalised.
"""

import copy

import numpy as np
from scipy.special import expit, log_expit, softmax

from .lbfgs import minimise
from .products import matmul

#: A feature whose standard deviation is at most this share of its largest magnitude varies by
#: rounding alone (float32 inputs carry ~6e-8 of it; a graph of equal weights ~1e-16) and counts as
#: constant: standardised, its rounding would become values of ~1e8-1e16.
ROUNDING_SPREAD = 1e-6
#: The float64 logits :func:`write_softmax_rows` turns into probabilities at once (at most), and its rows.
SOFTMAX_BLOCK_BYTES = 64 * 2**20
SOFTMAX_BLOCK_ROWS = 65_536


def feature_spread(values, axis=None):
    """The standard deviation of ``values`` (along ``axis``), 0 where it is only rounding error.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.linear import feature_spread
    >>> float(feature_spread(np.array([0.7, 0.7 + 1e-16, 0.7]))), round(float(feature_spread(np.array([0.5, 0.7]))), 3)
    (0.0, 0.1)
    """
    spread = values.std(axis=axis)
    return np.where(spread <= ROUNDING_SPREAD * np.abs(values).max(axis=axis), 0.0, spread)


class SoftmaxLoss:
    """Multinomial cross-entropy and its gradient, as a function of the flattened parameters.

    The products of the targets with the weights are taken once, not at
    every evaluation, and the softmax is worked in place: 6-59% less time an
    evaluation than with :func:`scipy.special.log_softmax` and fresh
    temporaries (FastProp's softmax regressions, issue #17). The two large
    products run on two threads (:func:`fastprop.products.matmul`), in
    float32 when ``float32_products`` is set: 1.8-3.6x faster than in float64
    on FastProp's regressions (440-7,700 rows of 384 features, 77-126
    classes), the loss, the softmax and the parameters staying float64.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features), float64
    targets : ndarray of shape (n_samples, n_classes)
        Target distributions (one-hot for hard labels); rows sum to 1 (or
        less: a row's loss is scaled by its mass).
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights that sum to 1.
    l2 : float
        Ridge penalty on ``coef``.
    float32_products : bool, default=False
        Take the two products ``features @ coef`` and ``features.T @
        residual`` in float32: the loss and gradient are then exact to
        float32's rounding of ``features``, ``coef`` and the residual
        (relative ~1e-7), which is enough for features that were float32
        data to begin with.
    """

    def __init__(self, features, targets, sample_weight, l2, float32_products=False):
        self.features, self.l2 = features, l2
        self.product_features = features.astype(np.float32) if float32_products else features
        self.weighted_targets = sample_weight[:, None] * targets
        self.row_mass = self.weighted_targets.sum(axis=1)

    def with_float32_products(self):
        """This loss with ``float32_products`` set, sharing its targets and row masses (no second copy)."""
        rounded = copy.copy(self)
        rounded.product_features = self.features.astype(np.float32)
        return rounded

    def __call__(self, params):
        """``(loss, gradient)`` at ``params``: ``coef`` (n_features, n_classes) then ``intercept``, flattened."""
        n_coef = self.features.shape[1] * self.weighted_targets.shape[1]
        coef = params[:n_coef].reshape(self.features.shape[1], -1)
        product_type = self.product_features.dtype
        logits = matmul(self.product_features, coef.astype(product_type, copy=False)).astype(np.float64, copy=False)
        logits += params[n_coef:]
        largest = logits.max(axis=1)
        fitted = np.vdot(self.weighted_targets, logits)
        logits -= largest[:, None]
        np.exp(logits, out=logits)
        totals = logits.sum(axis=1)
        loss = np.dot(self.row_mass, np.log(totals) + largest) - fitted + 0.5 * self.l2 * np.vdot(coef, coef)
        residual = logits
        residual *= (self.row_mass / totals)[:, None]  # probabilities times each row's weighted mass
        residual -= self.weighted_targets
        gradient = np.empty_like(params)
        if product_type == np.float64:
            matmul(self.features.T, residual, out=gradient[:n_coef].reshape(coef.shape))
        else:
            gradient[:n_coef] = matmul(self.product_features.T, residual.astype(product_type)).ravel()
        gradient[:n_coef] += self.l2 * params[:n_coef]
        gradient[n_coef:] = residual.sum(axis=0)
        return loss, gradient


def softmax_loss_and_gradient(params, features, targets, sample_weight, l2):
    """Multinomial cross-entropy and its gradient with respect to ``params``.

    Parameters
    ----------
    params : ndarray of shape ((n_features + 1) * n_classes,)
        ``coef`` (n_features, n_classes) followed by ``intercept`` (n_classes,), flattened.
    features, targets, sample_weight, l2
        See :class:`SoftmaxLoss`.

    Returns
    -------
    loss : float
    gradient : ndarray, same shape as ``params``
    """
    return SoftmaxLoss(features, targets, sample_weight, l2)(params)


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


def _minimise(objective, n_params, max_iter, tol, initial=None, exact=None):
    start = np.zeros(n_params) if initial is None else initial
    params, _ = minimise(objective, start, max_iter=max_iter, gtol=tol, ftol=tol * 1e-3, exact=exact)
    return params


def fit_softmax_regression(features, targets, *, l2=1e-4, sample_weight=None, max_iter=300, tol=1e-6, initial=None,
                           float32_products=False):
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
    float32_products : bool, default=False
        The loss's large products in float32 (see :class:`SoftmaxLoss`):
        FastProp's own fits, whose features are smoothed float32 data.

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
    n_params = (n_features + 1) * n_classes
    loss = SoftmaxLoss(features, targets, weights, l2)
    if float32_products:
        # float32's rounding of the loss (~1e-7 of it) can end the search before ``tol`` is met: the float64
        # loss takes it on from there.
        params = _minimise(loss.with_float32_products(), n_params, max_iter, tol, start, exact=loss)
    else:
        params = _minimise(loss, n_params, max_iter, tol, start)
    coef = params[: n_features * n_classes].reshape(n_features, n_classes)
    return (coef if basis is None else basis @ coef), params[n_features * n_classes :]


def softmax_proba(features, coef, intercept):
    """Class probabilities ``softmax(features @ coef + intercept)``, rows sum to 1."""
    return softmax(np.asarray(features, dtype=np.float64) @ coef + intercept, axis=1)


def write_softmax_rows(out, rows, logits_of, intercept, block_bytes=SOFTMAX_BLOCK_BYTES):
    """``out[rows] = softmax(logits_of(rows) + intercept)``, a block of rows at a time.

    ``logits_of(some_rows)`` gives the logits of those rows (e.g. a row
    lookup, or the last smoothing step of just those rows); each row's
    result is its own whatever the block. A block is at most
    :data:`SOFTMAX_BLOCK_ROWS` rows and ``block_bytes`` of float64 logits, so the softmax's (rows, n_classes)
    temporaries stay small: at a million samples and 20 classes five of them
    for all rows (~800 MB) were the fit's peak of memory, and with thousands
    of classes one block of 65,536 rows was several times the distributions.
    """
    block = max(1, min(SOFTMAX_BLOCK_ROWS, block_bytes // (8 * intercept.size)))
    for begin in range(0, rows.size, block):
        chunk = rows[begin : begin + block]
        out[chunk] = softmax(np.asarray(logits_of(chunk), dtype=np.float64) + intercept, axis=1)


def one_hot(labels, n_columns, dtype=np.float64):
    """Rows of the identity of size ``n_columns`` at ``labels``, without the identity itself (n_columns^2)."""
    labels = np.asarray(labels)
    rows = np.zeros((labels.size, n_columns), dtype=dtype)
    rows[np.arange(labels.size), labels] = 1
    return rows


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
    params = _minimise(lambda p: logistic_loss_and_gradient(p, features, targets, weights, l2), features.shape[1] + 1,
                       max_iter, tol)
    return params[:-1], float(params[-1])


def sigmoid_proba(features, coef, intercept):
    """Positive-class probability ``sigmoid(features @ coef + intercept)``."""
    return expit(np.asarray(features, dtype=np.float64) @ coef + intercept)
