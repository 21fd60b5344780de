"""What the five baselines share: fit set-up, normalised adjacencies, the propagation
loop, the seed classifier and the fitted attributes.

Every estimator routes ``fit`` through :meth:`GraphBaseline.fit`, which validates
the hyperparameters, then ``X``, ``y`` and ``graph`` (building the kNN graph when
none is given), asks the subclass for class scores and turns them into the public
``*_`` attributes the same way for all of them.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
import scipy.sparse as sp

from .._concurrency import serialised
from .._estimator_protocol import TransductiveEstimator, rebuilt_with_twin, with_scikit_learn_twin
from .._labels import UNLABELED, check_labels, check_unlabeled
from .._validation import (check_features, check_graph, check_integer, check_random_state, check_real,
                           check_symmetric_graph)
from ..graph import fit_graph
from ..linear import fit_softmax_regression, softmax_loss_and_gradient, softmax_proba

#: Upper bound of every iteration count (``max_iter``, ``n_propagation``,
#: ``max_epochs``): far above what any of them needs, so that a typo such as
#: ``max_iter=10**9`` is a ValueError instead of a fit that runs until killed.
#: Every iteration runs in Python between kernel calls, so Ctrl-C interrupts a fit.
MAX_ITERATIONS = 100_000
#: Upper bound of a propagation depth (SGC's K): each step is one pass over the graph.
MAX_DEPTH = 100
#: Gradient tolerance handed to :func:`fastprop.linear.fit_softmax_regression`.
LBFGS_TOL = 1e-6
#: A fitted linear model whose largest gradient entry exceeds this is reported as
#: not converged. ``fit_softmax_regression`` does not say why L-BFGS stopped, so
#: this is a heuristic: on test problems, fits that converged (some on the
#: relative-decrease test, above ``LBFGS_TOL``) ended below 2e-5, fits cut off
#: after a few iterations between 1e-4 and 1e-1. The margin keeps the former quiet.
LBFGS_WARN_GRADIENT = 1e-3


def check_iterations(name, value):
    """An iteration count in [1, ``MAX_ITERATIONS``]."""
    return check_integer(name, value, low=1, high=MAX_ITERATIONS)


def check_training(estimator):
    """The training settings every neural baseline has (GCN, GAT, GraphSAGE, FastGCN), validated.

    Returns ``dropout``, ``weight_decay``, ``learning_rate``, ``max_epochs`` and ``rng``
    (the Generator of ``random_state``), for the estimator's ``_check_params``.
    """
    return {
        "dropout": check_real("dropout", estimator.dropout, low=0.0, high=1.0, high_inclusive=False),
        "weight_decay": check_real("weight_decay", estimator.weight_decay, low=0.0),
        "learning_rate": check_real("learning_rate", estimator.learning_rate, low=0.0, low_inclusive=False),
        "max_epochs": check_iterations("max_epochs", estimator.max_epochs),
        "rng": check_random_state(estimator.random_state),
    }


def check_depth(name, value):
    """A propagation depth in [0, ``MAX_DEPTH``]."""
    return check_integer(name, value, low=0, high=MAX_DEPTH)


class ConvergenceWarning(UserWarning):
    """An iterative baseline reached its iteration limit before converging.

    When scikit-learn is loaded, the warning is also its ``ConvergenceWarning``, so that its filters apply.
    """

    def __reduce__(self):  # the twin class is made at run time: pickled as this one, rebuilt as the receiver's
        return rebuilt_with_twin, (ConvergenceWarning, self.args)


class Problem(NamedTuple):
    """Validated inputs of one ``fit``.

    Attributes
    ----------
    features : ndarray of shape (n_samples, n_features), float32
        ``X`` as returned by ``check_features`` (possibly ``X`` itself: never write to it).
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples), float32
        Affinities without self loops.
    classes : ndarray of shape (n_classes,)
        Sorted distinct seed labels (int64, or the class names' dtype), the marker excluded.
    seeds : ndarray of shape (n_seeds,), int64
        Indices of the labeled samples.
    targets : ndarray of shape (n_samples, n_classes), float64
        One-hot rows for the seeds, zero rows for the unlabeled samples.
    """

    features: np.ndarray
    graph: sp.csr_matrix
    classes: np.ndarray
    seeds: np.ndarray
    targets: np.ndarray


def prepare_fit(X, y, graph, n_neighbors, reads_features=True, symmetric_for=None, method="this method",
                unlabeled=UNLABELED):
    """Validate ``X``, ``y`` and ``graph``; build the cosine kNN graph if ``graph`` is None.

    ``y`` is encoded as FastProp encodes it (:func:`fastprop._labels.check_labels`):
    integers or class names, ``unlabeled`` marking an unlabeled sample.

    All-zero rows of ``X`` are rejected only when the graph has to be built
    from cosine similarities; it is built as FastProp builds its own, with
    ``n_neighbors`` clamped to ``n_samples - 1`` on tiny inputs. A method
    that does not ``reads_features`` (it uses ``X`` only for the graph)
    gets its rows rescaled where their scale leaves float32's range, as
    the graph build reads them, rather than refused; a method that does
    (named ``method``) gets features far out of range refused
    (:func:`~fastprop._validation.features.check_features`'s ``computing_method``).
    ``symmetric_for`` is ``(method name, why)`` for a method whose
    equations need symmetric weights: a graph without them is refused.
    """
    check_integer("n_neighbors", n_neighbors, low=1)
    features = check_features(X, cosine=graph is None, rescale_rows=not reads_features,
                              computing_method=method if reads_features else None)
    n_samples = features.shape[0]
    classes, encoded = check_labels(y, n_samples, unlabeled, stacklevel=4)  # the user's line: past fit and its wrapper
    if graph is None:
        graph = fit_graph(features, n_neighbors)
    graph = check_graph(graph, n_samples)
    if symmetric_for is not None:
        check_symmetric_graph(graph, *symmetric_for)
    seeds = np.flatnonzero(encoded >= 0)
    targets = np.zeros((n_samples, classes.size))
    targets[seeds, encoded[seeds]] = 1.0
    return Problem(features, graph, classes, seeds, targets)


def restart_step(operator, alpha, anchor, *, clip=None, reset=None):
    """One propagation step ``F -> alpha * operator @ F + (1 - alpha) * anchor``.

    Parameters
    ----------
    operator : sparse matrix of shape (n_samples, n_samples)
    alpha : float in (0, 1]
        With ``alpha == 1`` the anchor term vanishes (plain diffusion).
    anchor : ndarray of shape (n_samples, n_classes)
    clip : (float, float) or None
        Clip every entry into this range after the step.
    reset : (indices, values) or None
        Then overwrite these rows (clamping the seeds).

    Returns
    -------
    callable
        ``step(F) -> new F``; never writes to ``F``.
    """
    restart = None if alpha == 1.0 else (1.0 - alpha) * anchor

    def step(current):
        updated = operator @ current
        if alpha != 1.0:
            updated *= alpha
            updated += restart
        if clip is not None:
            np.clip(updated, clip[0], clip[1], out=updated)
        if reset is not None:
            updated[reset[0]] = reset[1]
        return updated

    return step


def warn_not_converged(name, max_iter, detail, hint="Increase max_iter or tol."):
    """Emit the :class:`ConvergenceWarning` of an estimator that hit ``max_iter``."""
    warnings.warn(
        f"{name} did not converge in max_iter={max_iter} iterations ({detail}). {hint}",
        with_scikit_learn_twin(ConvergenceWarning),
        stacklevel=6,
    )


def row_change(previous, current):
    """Largest L1 change of a row relative to the row's new L1 norm (all-zero rows skipped).

    A row reached for the first time counts as a change of 1, so a propagation
    cannot stop while its front is still advancing.
    """
    norms = np.abs(current).sum(axis=1)
    changes = np.abs(current - previous).sum(axis=1)
    reached = norms > 0
    return float(np.max(changes[reached] / norms[reached])) if reached.any() else 0.0


def iterate(step, start, *, max_iter, tol=None, name="propagation"):
    """Apply ``step`` until no row changes by more than ``tol`` (relative L1, see :func:`row_change`).

    Parameters
    ----------
    step : callable
        ``F -> new F``.
    start : ndarray of shape (n_samples, n_classes)
    max_iter : int
        Iteration limit; with ``tol=None`` exactly this many steps run.
    tol : float or None
        Convergence threshold. When it is not reached in ``max_iter`` steps a
        :class:`ConvergenceWarning` is emitted.
    name : str
        Estimator name for the warning.

    Returns
    -------
    result : ndarray
    n_iter : int
        Steps taken.
    """
    current = start
    for n_iter in range(1, max_iter + 1):
        updated = step(current)
        if tol is not None:
            change = row_change(current, updated)
            if change <= tol:
                return updated, n_iter
        current = updated
    if tol is not None:
        warn_not_converged(name, max_iter, f"largest relative row change {change:.3g} > tol={tol!r}")
    return current, max_iter


def seed_classifier_proba(features, problem, *, l2, max_iter, name):
    """Fit multinomial logistic regression on the seeds' rows, predict every row.

    Warns with :class:`ConvergenceWarning` when L-BFGS stopped far from a
    stationary point (largest gradient entry above ``LBFGS_WARN_GRADIENT``),
    which in practice means it ran out of ``max_iter``.

    Returns
    -------
    ndarray of shape (n_samples, n_classes), float64
    """
    seed_features = np.asarray(features[problem.seeds], dtype=np.float64)
    seed_targets = problem.targets[problem.seeds]
    coef, intercept = fit_softmax_regression(
        seed_features, seed_targets, l2=l2, max_iter=max_iter, tol=LBFGS_TOL
    )
    weights = np.full(seed_features.shape[0], 1.0 / seed_features.shape[0])
    params = np.concatenate([coef.ravel(), intercept])
    _, gradient = softmax_loss_and_gradient(params, seed_features, seed_targets, weights, l2)
    largest = float(np.max(np.abs(gradient)))
    if largest > LBFGS_WARN_GRADIENT:
        warn_not_converged(
            f"{name}'s logistic regression", max_iter, f"largest gradient entry {largest:.3g}",
            hint="Increase max_iter or l2.",
        )
    return softmax_proba(features, coef, intercept)


def to_distributions(scores, problem):
    """Clip ``scores`` at 0 and normalise rows; all-zero rows become uniform; seeds one-hot."""
    distributions = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    totals = distributions.sum(axis=1, keepdims=True)
    uniform = np.full_like(distributions, 1.0 / distributions.shape[1])
    distributions = np.divide(distributions, totals, out=uniform, where=totals > 0)
    distributions[problem.seeds] = problem.targets[problem.seeds]
    return distributions


def _diverged(name, params):
    """The error for class scores that are not finite: training diverged (e.g. a learning rate of 1e20)."""
    steps = ", ".join(f"{key}={params[key]!r}" for key in ("learning_rate", "weight_decay") if key in params)
    advice = f" ({steps}): use a smaller learning_rate or weight_decay" if steps else ""
    return f"{name} gave class scores that are not finite, so its training diverged{advice}."


class GraphBaseline(TransductiveEstimator):
    """Common ``fit`` of the baselines; subclasses implement ``_check_params`` and ``_scores``.

    ``_check_params()`` returns the validated hyperparameters as a dict (it never
    writes to ``self``); ``_scores(problem, **params)`` returns class scores of
    shape (n_samples, n_classes), which :func:`to_distributions` clips at 0 and
    normalises, and may set ``n_iter_``. A method that reads the graph alone
    sets ``_reads_features = False`` (see :func:`prepare_fit`). Every subclass
    takes FastProp's ``unlabeled`` (default -1), which ``fit`` validates and
    reads here: the subclasses see class indices only.
    """

    _reads_features = True
    #: ``(why)`` for a method whose equations need a graph with symmetric weights (others take any).
    _needs_symmetric_weights = None

    @serialised
    def fit(self, X: ArrayLike, y: ArrayLike, graph: sp.spmatrix | sp.sparray | None = None) -> GraphBaseline:
        """Propagate the seed labels of ``y`` to every sample.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Embeddings. Graph-only methods use them only to build the graph.
        y : array_like of shape (n_samples,)
            Class labels (integers, which need not be contiguous, or names),
            ``unlabeled`` (default -1) for unlabeled samples.
        graph : sparse matrix of shape (n_samples, n_samples), optional
            Precomputed symmetric non-negative affinities; by default
            ``build_knn_graph(X, min(n_neighbors, n_samples - 1))``, as FastProp builds its own.

        Returns
        -------
        self
        """
        params = self._check_params()
        unlabeled = check_unlabeled(self.unlabeled)
        needs = self._needs_symmetric_weights
        problem = prepare_fit(X, y, graph, self.n_neighbors, reads_features=self._reads_features,
                              symmetric_for=None if needs is None else (type(self).__name__, needs),
                              method=type(self).__name__, unlabeled=unlabeled)
        scores = self._scores(problem, **params)
        if not np.isfinite(scores).all():
            raise ValueError(_diverged(type(self).__name__, params))
        distributions = to_distributions(scores, problem)
        self.n_features_in_ = problem.features.shape[1]
        self._record_feature_names(X)
        self.classes_ = problem.classes
        self.label_distributions_ = distributions
        self.confidence_ = distributions.max(axis=1)
        self.transduction_ = problem.classes[distributions.argmax(axis=1)]
        return self
