"""Classic graph label propagation: Zhu & Ghahramani (2002) and Zhou et al. (2004)."""

import numpy as np
import scipy.sparse as sp

from .._validation import check_real
from ..adjacency import normalised_adjacency
from ._common import GraphBaseline, check_iterations, iterate, restart_step, warn_not_converged


def _check_iteration(max_iter, tol):
    return {
        "max_iter": check_iterations("max_iter", max_iter),
        "tol": check_real("tol", tol, low=0.0),
    }


def harmonic_solution(graph, seeds, targets, *, max_iter, tol):
    """Solve ``(D_uu - W_uu) F_u = W_ul Y_l`` by Jacobi-preconditioned conjugate gradients.

    One CG run per class, vectorised over the columns. The unlabeled vertices
    of zero degree are left out (their rows stay zero), and so, implicitly,
    are components without seeds: their right-hand side is zero, so CG never
    leaves the zero start there although their block is singular.

    Parameters
    ----------
    graph : csr_matrix of shape (n_samples, n_samples)
        Symmetric non-negative affinities ``W`` without self loops.
    seeds : ndarray of int
    targets : ndarray of shape (n_samples, n_classes)
        One-hot seed rows.
    max_iter : int
    tol : float
        Stop when every column's residual norm is at most ``tol`` times its
        right-hand side's norm.

    Returns
    -------
    scores : ndarray of shape (n_samples, n_classes)
        Seed rows one-hot, unlabeled rows the harmonic solution.
    n_iter : int
    """
    weights = sp.csr_matrix(graph, dtype=np.float64)
    degree = np.asarray(weights.sum(axis=1)).ravel()
    unknown = np.ones(weights.shape[0], dtype=bool)
    unknown[seeds] = False
    unknown &= degree > 0
    free = np.flatnonzero(unknown)
    scores = targets.copy()
    if free.size == 0:
        return scores, 0
    block = weights[free]
    system = sp.diags(degree[free]) - block[:, free]
    rhs = block[:, seeds] @ targets[seeds]
    solution, n_iter, residual = _block_cg(system, rhs, 1.0 / degree[free], max_iter=max_iter, tol=tol)
    if residual > tol:
        warn_not_converged(
            "LabelPropagation", max_iter, f"largest relative residual {residual:.3g} > tol={tol!r}"
        )
    scores[free] = solution
    return scores, n_iter


def _block_cg(system, rhs, inverse_diagonal, *, max_iter, tol):
    """Preconditioned CG on each column of ``rhs`` at once; returns (x, n_iter, worst relative residual)."""
    rhs_norm = np.linalg.norm(rhs, axis=0)
    rhs_norm[rhs_norm == 0] = 1.0
    solution = np.zeros_like(rhs)
    residual = rhs.copy()
    preconditioned = inverse_diagonal[:, None] * residual
    direction = preconditioned.copy()
    rz = np.sum(residual * preconditioned, axis=0)
    relative = np.linalg.norm(residual, axis=0) / rhs_norm
    n_iter = 0
    while relative.max() > tol and n_iter < max_iter:
        n_iter += 1
        product = system @ direction
        curvature = np.sum(direction * product, axis=0)
        active = (relative > tol) & (curvature > 0)
        step = np.divide(rz, curvature, out=np.zeros_like(rz), where=active)
        solution += step * direction
        residual -= step * product
        relative = np.linalg.norm(residual, axis=0) / rhs_norm
        preconditioned = inverse_diagonal[:, None] * residual
        rz_next = np.sum(residual * preconditioned, axis=0)
        beta = np.divide(rz_next, rz, out=np.zeros_like(rz), where=rz > 0)
        direction = preconditioned + beta * direction
        rz = rz_next
    return solution, n_iter, float(relative.max())


class LabelPropagation(GraphBaseline):
    """Harmonic label propagation (Zhu & Ghahramani, 2002).

    The harmonic solution ``F_u = (D_uu - W_uu)^-1 W_ul Y_l``: every unlabeled
    sample's distribution is the affinity-weighted mean of its neighbours', the
    seeds clamped to their one-hot labels. It is the fixed point of the
    iteration ``F <- D^-1 W F`` with clamped seeds; this class reaches it by
    conjugate gradients with a Jacobi preconditioner, which needs roughly the
    square root of that iteration's number of steps (the plain iteration
    stalls when seeds are few).

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    max_iter : int, default=1000
        Iteration limit, in [1, 100_000].
    tol : float, default=1e-6
        Stop when each class's residual norm is at most ``tol`` times that of
        its right-hand side ``W_ul Y_l``; ``>= 0``.
    unlabeled : int, str or None, default=-1
        The label of an unlabeled sample in ``y``, as FastProp's ``unlabeled``:
        labels may be integers or class names (strings); with names, pass e.g.
        ``unlabeled=""`` or ``None`` (None marks missing labels: None, NaN or
        pandas' ``NA``). With the default -1, the string ``"-1"`` marks an
        unlabeled sample too. ``classes_`` leaves it out; every sample gets a
        class, so the marker never appears in ``transduction_``.

    Attributes
    ----------
    n_features_in_ : int
        Columns of ``X`` seen by ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,), object
        The column names of ``X`` seen by ``fit``, when they are all strings
        (a pandas DataFrame's); absent otherwise.
    classes_ : ndarray of shape (n_classes,)
        Sorted distinct seed labels.
    label_distributions_ : ndarray of shape (n_samples, n_classes)
        Rows sum to 1, columns in ``classes_`` order; seeds keep their one-hot row.
        Samples in a component without seeds (isolated vertices included) get
        the uniform distribution.
    confidence_ : ndarray of shape (n_samples,)
        Largest probability of each row.
    transduction_ : ndarray of shape (n_samples,)
        ``classes_[argmax]`` of each row; seeds keep their label.
    n_iter_ : int
        Conjugate-gradient iterations run.

    Notes
    -----
    The graph must be symmetric, as :func:`fastprop.build_knn_graph` makes it
    (conjugate gradients need a symmetric system): another is refused with a
    ValueError that says how to symmetrise it. A :class:`ConvergenceWarning`
    is emitted when ``tol`` is not reached in ``max_iter`` iterations.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import LabelPropagation
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[0], y[50] = 4, 9
    >>> model = LabelPropagation(n_neighbors=10).fit(X, y)
    >>> print((model.transduction_ == np.repeat([4, 9], 50)).mean())
    1.0
    """

    _reads_features = False  # the graph alone
    _needs_symmetric_weights = "conjugate gradients solve a symmetric system"

    def __init__(self, n_neighbors=30, *, max_iter=1000, tol=1e-6, unlabeled=-1):
        self.n_neighbors = n_neighbors
        self.max_iter = max_iter
        self.tol = tol
        self.unlabeled = unlabeled

    def _check_params(self):
        return _check_iteration(self.max_iter, self.tol)

    def _scores(self, problem, *, max_iter, tol):
        scores, self.n_iter_ = harmonic_solution(
            problem.graph, problem.seeds, problem.targets, max_iter=max_iter, tol=tol
        )
        return scores


class LabelSpreading(GraphBaseline):
    """Label spreading with a symmetric normalised graph (Zhou et al., 2004).

    Iterates ``F <- alpha S F + (1 - alpha) Y`` from ``F = Y`` with
    ``S = D^-1/2 W D^-1/2`` and ``Y`` the one-hot seed rows, which converges to
    ``(1 - alpha) (I - alpha S)^-1 Y``; rows are then normalised.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    alpha : float, default=0.9
        Weight of the neighbours against the seeds' own labels, in (0, 1).
        Zhou et al. use 0.99; 0.9 converges ten times faster and keeps more
        of the seed information on noisy kNN graphs.
    max_iter : int, default=1000
        Iteration limit, in [1, 100_000].
    tol : float, default=1e-6
        Stop when no row of ``F`` changes by more than ``tol`` in L1 norm
        relative to its own L1 norm; ``>= 0``. (A relative test: far from the
        seeds ``F`` is tiny, and an absolute one would stop before the labels
        reach it.)
    unlabeled : int, str or None, default=-1
        The label of an unlabeled sample in ``y``, as FastProp's ``unlabeled``:
        labels may be integers or class names (strings); with names, pass e.g.
        ``unlabeled=""`` or ``None`` (None marks missing labels: None, NaN or
        pandas' ``NA``). With the default -1, the string ``"-1"`` marks an
        unlabeled sample too. ``classes_`` leaves it out; every sample gets a
        class, so the marker never appears in ``transduction_``.

    Attributes
    ----------
    classes_, label_distributions_, confidence_, transduction_, n_iter_
        As in :class:`LabelPropagation`: seeds get their one-hot row, samples
        that no seed reaches (isolated vertices included) the uniform one.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import LabelSpreading
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[0], y[50] = 0, 1
    >>> model = LabelSpreading(n_neighbors=10).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    _reads_features = False  # the graph alone

    def __init__(self, n_neighbors=30, *, alpha=0.9, max_iter=1000, tol=1e-6, unlabeled=-1):
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.unlabeled = unlabeled

    def _check_params(self):
        alpha = check_real("alpha", self.alpha, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        return {"alpha": alpha, **_check_iteration(self.max_iter, self.tol)}

    def _scores(self, problem, *, alpha, max_iter, tol):
        spread = normalised_adjacency(problem.graph, self_loops=False, dtype=np.float64)
        step = restart_step(spread, alpha, problem.targets)
        scores, self.n_iter_ = iterate(
            step, problem.targets, max_iter=max_iter, tol=tol, name="LabelSpreading"
        )
        return scores
