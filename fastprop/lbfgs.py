"""Limited-memory BFGS for the smooth convex losses of :mod:`fastprop.linear`.

The losses have no bounds, so SciPy's L-BFGS-B does work they do not need:
its step (the compact form of the bounded method) cost 2.3 ms an iteration
on FastProp's largest softmax regression of a whole Banking77 fit (449 rows
of 384 features, 141 classes: 54,285 parameters), as much as the loss and
gradient themselves (1.9 ms). Here the step is the textbook two-loop
recursion (Nocedal & Wright, *Numerical Optimization*, Algorithm 7.4): 20
vector products of that length, ~0.5 ms. Measured on every softmax
regression of six FastProp fits (``bench/solver.py``; bench/RESULTS.md,
issue #17): 0.79x SciPy's time in total, the same optimum where a 1e-6
tolerance is reached, in about as many evaluations.

The line search is a backtracking one (Armijo's sufficient decrease,
safeguarded quadratic interpolation), enough for a convex loss: every step
then has positive curvature along it, so the BFGS update stays positive
definite without Wolfe's curvature condition. A pair with no curvature (a
flat direction) is not stored. Everything is in float64 and sequential, so
a fit is deterministic.
"""

import numpy as np

#: Correction pairs kept (SciPy's ``maxcor`` default).
MEMORY = 10
#: Armijo's sufficient-decrease constant.
SUFFICIENT_DECREASE = 1e-4
#: Backtracks before the line search gives up (the loss cannot decrease along
#: the direction in float64: the current point is returned).
MAX_BACKTRACKS = 40


def minimise(objective, start, *, max_iter, gtol, ftol, exact=None):
    """Minimise a smooth convex function with L-BFGS.

    Parameters
    ----------
    objective : callable
        ``objective(params)`` returns ``(loss, gradient)`` (float, ndarray
        of the shape of ``params``).
    start : ndarray of shape (n_params,)
    max_iter : int
        Iterations at most (one line search each).
    gtol : float
        Stop when the largest gradient entry is at most this.
    ftol : float
        Stop when an iteration lowers the loss by at most ``ftol`` times
        ``max(|loss before|, |loss after|, 1)`` (SciPy's ``ftol`` for
        L-BFGS-B).
    exact : callable, optional
        The same function as ``objective``, computed more exactly (e.g.
        with float64 products where ``objective`` takes float32 ones): where
        the search would stop on ``ftol`` or on a line search that finds no
        decrease, the loss and gradient are computed again with it, and the
        search goes on with it from there, keeping its correction pairs, to
        ``gtol`` (``ftol`` no longer ends it; a line search that finds no
        decrease does). ``objective``'s rounding then decides only the way,
        not where the search ends.

    Returns
    -------
    params : ndarray of shape (n_params,), float64
    n_iter : int
        Iterations done.
    """
    params = np.array(start, dtype=np.float64)
    loss, gradient = objective(params)
    pairs = []  # (step, gradient change, 1 / curvature), oldest first
    scratch = np.empty_like(params)
    for iteration in range(max_iter):
        if np.abs(gradient).max() <= gtol:
            return params, iteration
        direction = _two_loop_direction(gradient, pairs, scratch)
        slope = np.dot(gradient, direction)
        if not slope < 0:  # rounding lost descent: start again from the gradient
            pairs.clear()
            direction, slope = -gradient, -np.dot(gradient, gradient)
        length = 1.0 if pairs else min(1.0, 1.0 / np.sqrt(-slope))
        found = _backtrack(objective, params, loss, direction, slope, length)
        if found is None:
            if exact is None:
                return params, iteration
            objective, exact, ftol = exact, None, 0.0
            loss, gradient = objective(params)
            continue
        new_params, new_loss, new_gradient = found
        step, change = new_params - params, new_gradient - gradient
        curvature = np.dot(step, change)
        if curvature > 0:
            pairs.append((step, change, 1.0 / curvature))
            if len(pairs) > MEMORY:
                pairs.pop(0)
        converged = loss - new_loss <= ftol * max(abs(loss), abs(new_loss), 1.0)
        params, loss, gradient = new_params, new_loss, new_gradient
        if converged:
            if exact is None:
                return params, iteration + 1
            objective, exact, ftol = exact, None, 0.0
            loss, gradient = objective(params)
    return params, max_iter


def _two_loop_direction(gradient, pairs, scratch):
    """``-H @ gradient`` for the L-BFGS inverse Hessian ``H`` of ``pairs`` (see :func:`minimise`).

    ``scratch`` (of the gradient's shape) takes each scaled vector: a fresh
    one each time, at FastProp's 30-50 thousand parameters, cost a third of
    the step in page faults; the values are the same.
    """
    direction = -gradient
    alphas = []
    for step, change, rho in reversed(pairs):
        alpha = rho * np.dot(step, direction)
        direction -= np.multiply(change, alpha, out=scratch)
        alphas.append(alpha)
    if pairs:
        last_step, last_change, _ = pairs[-1]
        direction *= np.dot(last_step, last_change) / np.dot(last_change, last_change)
    for (step, change, rho), alpha in zip(pairs, reversed(alphas)):
        direction += np.multiply(step, alpha - rho * np.dot(change, direction), out=scratch)
    return direction


def _backtrack(objective, params, loss, direction, slope, length):
    """The first ``length`` shortened until Armijo's condition holds: ``(params, loss, gradient)`` there, or None."""
    for _ in range(MAX_BACKTRACKS):
        trial = params + length * direction
        trial_loss, trial_gradient = objective(trial)
        if trial_loss <= loss + SUFFICIENT_DECREASE * length * slope:
            return trial, trial_loss, trial_gradient
        # Minimum of the quadratic through loss, slope and trial_loss, kept within [0.1, 0.5] of length.
        excess = trial_loss - loss - length * slope
        shorter = -slope * length * length / (2.0 * excess) if excess > 0 else 0.5 * length
        length = min(max(shorter, 0.1 * length), 0.5 * length)
    return None
