"""Poisson learning (Calder, Cook, Thorpe & Slepčev, ICML 2020): sources and sinks at the seeds."""

from typing import Callable, NamedTuple

import numpy as np

from .._kernels.components import component_roots
from .._kernels.poisson import row_sums, transition_rows
from .._validation import check_bool, check_real
from ..sharing import ThreadSharingBySize
from ._common import GraphBaseline, check_iterations, warn_not_converged

#: Fewest iterations before the paper's stopping rule may stop (``min_iter`` of the authors' code).
MIN_MIXING_ITER = 50
#: Distributions are ``softmax(SHARPNESS * u / sigma)``, ``sigma`` the RMS of the potentials.
SHARPNESS = 2.0
#: The volume-constrained label projection: steps, step size and bounds of the class weights.
VOLUME_ITER = 100
VOLUME_STEP = 10.0
VOLUME_BOUNDS = (0.1, 10.0)
#: Whether a step's rows are shared among the threads, learnt for each size of step
#: (see :mod:`fastprop.sharing`); the choice changes the time of a step, never its result.
STEP_SHARING = ThreadSharingBySize()


class _Rule(NamedTuple):
    """A stopping rule: stop once ``measure(previous, current) <= threshold``, not before ``min_iter``."""

    measure: Callable
    threshold: float
    min_iter: int
    what: str


def _check_tol(tol):
    """``"mixing"``, None or a real number ``>= 0``."""
    if tol is None or (isinstance(tol, str) and tol == "mixing"):
        return tol
    if isinstance(tol, str):
        raise ValueError(f"tol={tol!r} is not supported; choose 'mixing', None or a real number >= 0.")
    return check_real("tol", tol, low=0.0)


def _check_class_prior(class_prior):
    """None, or the prior as float64 proportions summing to 1."""
    if class_prior is None:
        return None
    message = (
        f"class_prior must be None or a 1-D array of positive finite numbers, one per class, "
        f"got {class_prior!r}."
    )
    try:
        prior = np.asarray(class_prior, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if prior.ndim != 1 or prior.size == 0 or not (np.isfinite(prior).all() and (prior > 0).all()):
        raise ValueError(message)
    prior = prior / prior.max()
    return prior / prior.sum()


def _prior_of(class_prior, problem):
    """The prior over ``problem.classes``: ``class_prior``, or the seeds' class proportions."""
    seed_share = problem.targets[problem.seeds].mean(axis=0)
    if class_prior is None:
        return seed_share
    if class_prior.size != problem.classes.size:
        raise ValueError(
            f"class_prior has {class_prior.size} entries but y has {problem.classes.size} classes; "
            "give one per class, in the sorted order of the labels (classes_)."
        )
    return class_prior


def _walk_limit(graph, degree, start):
    """Where the walk ``p <- W D^-1 p`` started uniform on ``start`` ends.

    In each connected component, the mass that started there, spread in
    proportion to degree: on a connected graph ``D 1 / (1^T D 1)``.
    """
    component = component_roots(graph.indptr, graph.indices)  # each component named by its smallest vertex
    mass = np.bincount(component[start], minlength=component.size) / max(start.size, 1)
    volume = np.bincount(component, weights=degree, minlength=component.size)
    share = np.divide(mass, volume, out=np.zeros_like(volume), where=volume > 0)
    return share[component] * degree


def _stopping_rule(tol, graph, degree, start, max_iter):
    """The :class:`_Rule` of ``tol``, or None to run exactly ``max_iter`` steps.

    The state's last column is the walk's density divided by degree (see
    :func:`poisson_potentials`); the potentials are the other columns.
    """
    if tol is None:
        return None
    if tol == "mixing":
        limit = _walk_limit(graph, degree, start)

        def distance(previous, current):
            return float(np.max(np.abs(degree * current[:, -1] - limit), initial=0.0))

        return _Rule(distance, 1.0 / graph.shape[0], min(MIN_MIXING_ITER, max_iter),
                     "the random walk from the seeds is {:.3g} from its limit, above 1/n_samples")

    def change(previous, current):
        largest = np.max(np.abs(current[:, :-1]), initial=0.0)
        step = np.max(np.abs(current[:, :-1] - previous[:, :-1]), initial=0.0)
        return float(step / largest) if largest > 0 else 0.0

    return _Rule(change, tol, 1, f"largest change relative to the largest potential {{:.3g}} > tol={tol!r}")


def _step(graph, inverse_degree, values, out):
    """``out = D^-1 W @ values``, the rows shared among the threads as :data:`STEP_SHARING` finds faster."""

    def run(shared):
        transition_rows(graph.indptr, graph.indices, graph.data, inverse_degree, values, out, shared)

    STEP_SHARING.timed(run, values.size)


def poisson_potentials(graph, seeds, targets, *, max_iter, tol="mixing"):
    """Solve the Poisson equation ``L u = sum_j (y_j - ybar) delta_{x_j}`` by the paper's iteration.

    ``u <- u + D^-1 (b - L u) = D^-1 b + D^-1 W u`` from ``u = 0`` (Algorithm
    1 of Calder et al.), ``L = D - W``, ``b`` the seeds' one-hot rows minus
    their mean ``ybar``. Every step keeps ``sum_i d_i u(x_i) = 0``, the
    paper's normalisation, since ``b`` and ``L``'s columns sum to zero; the
    fixed point is the solution with that normalisation. Alongside runs the
    walk ``p <- W D^-1 p`` of the paper's stopping rule, stored divided by
    degree as one more column, which then follows the same step.

    Seeds without edges take no part (their potentials would be infinite).

    Parameters
    ----------
    graph : csr_matrix of shape (n_samples, n_samples)
        Symmetric non-negative affinities ``W`` without self loops.
    seeds : ndarray of int
    targets : ndarray of shape (n_samples, n_classes)
        One-hot seed rows.
    max_iter : int
    tol : "mixing", float or None
        See :class:`PoissonLearning`.

    Returns
    -------
    potentials : ndarray of shape (n_samples, n_classes)
    n_iter : int
    """
    degree = np.empty(graph.shape[0])
    row_sums(graph.indptr, graph.data, degree)
    inverse_degree = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    sources = seeds[degree[seeds] > 0]
    labels = targets[sources]
    source = (labels - labels.sum(axis=0) / max(sources.size, 1)) * inverse_degree[sources, None]
    current = np.zeros((graph.shape[0], targets.shape[1] + 1))
    current[sources, -1] = inverse_degree[sources] / max(sources.size, 1)
    previous = np.empty_like(current)
    rule = _stopping_rule(tol, graph, degree, sources, max_iter)
    for n_iter in range(1, max_iter + 1):
        previous, current = current, previous
        _step(graph, inverse_degree, previous, current)
        current[sources, :-1] += source
        if rule is not None and n_iter >= rule.min_iter:
            measure = rule.measure(previous, current)
            if measure <= rule.threshold:
                return current[:, :-1], n_iter
    if rule is not None:
        warn_not_converged("PoissonLearning", max_iter, rule.what.format(measure))
    return current[:, :-1], max_iter


def _counted_rows(potentials, seeds):
    """The unlabeled samples some source reached (a non-zero potential)."""
    counted = np.any(potentials != 0, axis=1)
    counted[seeds] = False
    return counted


def potential_scores(potentials, counted):
    """``exp(z - max_k z_k)`` row by row, ``z = SHARPNESS * u / sigma``; normalised, the softmax of ``z``.

    ``sigma`` is the root mean square of the ``counted`` rows' potentials;
    without any (no counted row, or all potentials zero) every row is uniform.
    """
    sigma = np.sqrt(np.mean(np.square(potentials[counted]))) if counted.any() else 0.0
    if sigma == 0:
        return np.ones_like(potentials)
    z = potentials * (SHARPNESS / sigma)
    return np.exp(z - z.max(axis=1, keepdims=True))


def volume_weights(scores, prior):
    """Class weights ``w`` that bring the proportions of ``argmax_k w_k scores_k`` towards ``prior``.

    The volume-constrained label projection of the authors' code: ``w <-
    clip(w + VOLUME_STEP * (prior - proportions), *VOLUME_BOUNDS)`` from ``w =
    1``, at most ``VOLUME_ITER`` steps, stopping once every class count is
    within one sample of its target; returns the weights whose proportions
    came closest (largest absolute difference).

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_classes), non-negative
    prior : ndarray of shape (n_classes,), summing to 1

    Returns
    -------
    ndarray of shape (n_classes,)
    """
    n_rows, n_classes = scores.shape
    weights = best = np.ones(n_classes)
    best_error = np.inf
    for _ in range(VOLUME_ITER if n_rows else 0):
        proportions = np.bincount(np.argmax(scores * weights, axis=1), minlength=n_classes) / n_rows
        error = np.max(np.abs(proportions - prior))
        if error < best_error:
            best, best_error = weights, error
        if error * n_rows < 1:
            break
        weights = np.clip(weights + VOLUME_STEP * (prior - proportions), *VOLUME_BOUNDS)
    return best


class PoissonLearning(GraphBaseline):
    """Poisson learning (Calder, Cook, Thorpe & Slepčev, ICML 2020).

    Laplace learning (:class:`LabelPropagation`) clamps the seeds to their
    labels; at one or a few labels per class its solution is nearly constant
    with spikes at the seeds, and most samples go to one class. Poisson
    learning instead places a source ``y_j - ybar`` at each seed ``x_j``
    (``ybar`` the seeds' mean one-hot row) and solves the graph Poisson
    equation ``L u = sum_j (y_j - ybar) delta_{x_j}``, ``L = D - W``, with
    ``sum_i d_i u(x_i) = 0``, by the paper's Algorithm 1: ``u <- u + D^-1 (b -
    L u)`` from ``u = 0`` (:func:`poisson_potentials`).

    Variants of the paper, by parameter:

    - ``tol="mixing"`` (default): Algorithm 1 with the paper's number of
      iterations ``T``: the first ``T >= 50`` (the authors' code's minimum,
      or ``max_iter`` if smaller) at which the walk ``p <- W D^-1 p`` started
      uniform on the seeds is within ``1/n_samples`` of its limit in every
      entry (``D 1 / (1^T D 1)`` on a connected graph; per component
      otherwise). The labels settle once the walk has mixed; ``u`` itself
      converges much later.
    - ``tol=float``: iterate to the solution of the Poisson equation.
    - ``tol=None``: exactly ``max_iter`` iterations (Algorithm 1, ``T = max_iter``).
    - Label decision ``argmax_k s_k p_k(x)`` with ``p(x) = softmax(2 u(x) / sigma)``
      (below) and class weights ``s_k = b_k / ybar_k``, the weights the paper's
      label decision gives known class proportions ``b`` (``class_prior``; the
      authors' code divides by the seeds' proportions ``ybar`` and multiplies
      by ``b``). By default ``b = ybar``, so ``s = 1`` and the label is the
      plain ``argmax_k u_k(x)``.
    - ``volume_constraint=True``: the weights are further multiplied by
      ``w`` in ``[0.1, 10]^k`` chosen by the volume-constrained label
      projection that the paper's Poisson MBO applies after each step (the
      authors' code, there with bounds ``[1/2, 2]``, which on probabilities
      fall short of the prior on Banking77 and HWU64), so that the predicted
      class proportions of the unlabeled samples approach ``b``
      (:func:`volume_weights`). It is applied once, to the Poisson solution;
      the MBO steps themselves are not run.

    The paper multiplies the weights into the signed potentials,
    ``argmax_k s_k u_k(x)``. A sample's potentials sum to zero, so with two
    classes ``u_1 = -u_0`` and no weights can change a decision (``s_0 u_0 >
    -s_1 u_0`` exactly when ``u_0 > 0``); with more, only between classes
    whose potentials are positive. Weights on the probabilities act on every
    decision and are the usual correction of posteriors for a change of class
    prior from ``ybar`` to ``b``; ``argmax_k s_k p_k = argmax_k (u_k + (sigma/2)
    log s_k)``. With ``s = 1`` both rules are ``argmax_k u_k``.

    **Distributions.** ``label_distributions_`` is ``s * softmax(2 u /
    sigma)`` with rows normalised, ``sigma`` the root mean square of the
    unlabeled samples' potentials. ``u`` is signed and each row sums to
    zero, so clipping it at 0 and normalising (as the other baselines' scores
    are) would make the confidence depend on a row's shape only: a sample far
    from every seed, with tiny potentials, would be as confident as one next
    to a seed. One global scale keeps the magnitude (a class whose potential
    stands out by several ``sigma`` is confident; small or close potentials
    give near-uniform rows) and makes the result independent of the scale of
    the graph's weights (``u`` scales as ``1 / W``). The factor 2 puts the
    unlabeled samples' mean confidence near their accuracy: 0.65-0.83 against
    0.64-0.90 on MNIST pixels (K=10), Banking77 and HWU64 (K=30) with 1 and
    5 labels per class; how well the confidence ranks right above wrong
    labels (AUROC 0.76-0.84 there) hardly depends on it.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
        The paper uses K = 10 with Gaussian weights.
    max_iter : int, default=1000
        Iteration limit, in [1, 100_000] (the authors' code stops at 1000).
    tol : "mixing", float or None, default="mixing"
        Stopping rule: the paper's (``"mixing"``); a float ``>= 0``, to stop
        when no potential changes by more than ``tol`` times the largest
        potential; None for exactly ``max_iter`` iterations.
    volume_constraint : bool, default=False
        Choose class weights that bring the predicted class proportions
        towards ``class_prior`` (see above).
    class_prior : array-like of shape (n_classes,) or None, default=None
        Class proportions ``b``, positive, in the sorted order of the labels
        (``classes_``); normalised to sum to 1. None: the seeds' proportions.
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
        Rows sum to 1, columns in ``classes_`` order; seeds keep their
        one-hot row. Samples that no seed reaches (a component without
        seeds, isolated vertices) get the uniform distribution.
    confidence_ : ndarray of shape (n_samples,)
        Largest probability of each row.
    transduction_ : ndarray of shape (n_samples,)
        ``classes_[argmax]`` of each row; seeds keep their label.
    class_weights_ : ndarray of shape (n_classes,)
        The weights ``s`` of the label decision.
    n_iter_ : int
        Iterations run.

    Notes
    -----
    The graph must be symmetric, as :func:`fastprop.build_knn_graph` makes
    it: another is refused with a ValueError that says how to symmetrise it.
    Each iteration is one pass over the graph with ``n_classes + 1``
    columns (a parallel Numba kernel); a fit on 13k samples, K=30 and 77
    classes takes about a second on 2 cores. On a graph with several
    components the equation has a solution only if each component's sources
    balance; where they do not, ``u`` grows steadily with the iterations
    (towards the classes with more seeds there), and a float ``tol`` may not
    be reached. A :class:`ConvergenceWarning` is emitted when ``tol`` (or the
    mixing rule) is not met in ``max_iter`` iterations, e.g. on a bipartite
    graph, where the walk never settles.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import PoissonLearning
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[0], y[50] = 4, 9
    >>> model = PoissonLearning(n_neighbors=10).fit(X, y)
    >>> print((model.transduction_ == np.repeat([4, 9], 50)).mean())
    1.0
    """

    _reads_features = False  # the graph alone
    _needs_symmetric_weights = "the Poisson equation's zero-sum sources balance only on a symmetric Laplacian"

    def __init__(
        self,
        n_neighbors=30,
        *,
        max_iter=1000,
        tol="mixing",
        volume_constraint=False,
        class_prior=None,
        unlabeled=-1,
    ):
        self.n_neighbors = n_neighbors
        self.max_iter = max_iter
        self.tol = tol
        self.volume_constraint = volume_constraint
        self.class_prior = class_prior
        self.unlabeled = unlabeled

    def _check_params(self):
        return {
            "max_iter": check_iterations("max_iter", self.max_iter),
            "tol": _check_tol(self.tol),
            "volume_constraint": check_bool("volume_constraint", self.volume_constraint),
            "class_prior": _check_class_prior(self.class_prior),
        }

    def _scores(self, problem, *, max_iter, tol, volume_constraint, class_prior):
        prior = _prior_of(class_prior, problem)
        potentials, self.n_iter_ = poisson_potentials(
            problem.graph, problem.seeds, problem.targets, max_iter=max_iter, tol=tol
        )
        counted = _counted_rows(potentials, problem.seeds)
        scores = potential_scores(potentials, counted)
        weights = prior / problem.targets[problem.seeds].mean(axis=0)
        if volume_constraint:
            weights = weights * volume_weights(scores[counted] * weights, prior)
        self.class_weights_ = weights
        return scores * weights
