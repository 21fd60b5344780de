"""Correct and Smooth (Huang et al., 2021): a linear base model, then two propagations."""

import numpy as np

from .._validation import check_bool, check_choice, check_real
from ..adjacency import normalised_adjacency
from ._common import GraphBaseline, check_depth, check_iterations, iterate, restart_step, seed_classifier_proba
from .sgc import check_linear_params, sgc_features

#: Rows whose autoscale factor exceeds this keep the unscaled propagated error
#: (the reference implementation's guard against rows that the error barely reaches).
_MAX_AUTOSCALE = 1000.0


def _correct(base, problem, operator, *, alpha, n_propagation, autoscale, scale):
    """Add the propagated seed residuals to the base predictions."""
    seeds = problem.seeds
    residual = np.zeros_like(base)
    residual[seeds] = problem.targets[seeds] - base[seeds]
    if autoscale:
        step = restart_step(operator, alpha, residual, clip=(-1.0, 1.0))
        spread, _ = iterate(step, residual, max_iter=n_propagation)
        sigma = np.abs(residual[seeds]).sum() / seeds.size
        norms = np.abs(spread).sum(axis=1, keepdims=True)
        factor = np.divide(sigma, norms, out=np.ones_like(norms), where=norms > 0)
        factor[factor > _MAX_AUTOSCALE] = 1.0
        return base + factor * spread
    step = restart_step(operator, alpha, residual, reset=(seeds, residual[seeds]))
    spread, _ = iterate(step, residual, max_iter=n_propagation)
    return base + scale * spread


def _smooth(guess, problem, operator, *, alpha, n_propagation):
    """Label-spread the corrected guesses, with the seeds reset to their labels."""
    start = guess.copy()
    start[problem.seeds] = problem.targets[problem.seeds]
    step = restart_step(operator, alpha, start, clip=(0.0, 1.0))
    smoothed, _ = iterate(step, start, max_iter=n_propagation)
    return smoothed


class CorrectAndSmooth(GraphBaseline):
    """Correct and Smooth (Huang et al., 2021) on a linear base model.

    1. **Base**: multinomial logistic regression fitted on the seeds predicts
       ``Z`` for every sample, from the raw features (``base="linear"``) or from
       the SGC features ``(D~^-1 A~)^depth X`` (``base="sgc"``).
    2. **Correct**: the seeds' residuals ``E_l = Y_l - Z_l`` (zero elsewhere) are
       spread by ``E <- a1 S E + (1 - a1) E0``, ``S = D^-1/2 W D^-1/2``. With
       ``autoscale`` (the paper's "autoscale") ``E`` is clipped to [-1, 1] each
       step, then each row with ``||E_i||_1 > 0`` is rescaled to L1 norm
       ``sigma``, the seeds' mean residual L1 norm, and added to ``Z``; without
       it (the paper's "FDiff-scale") the seeds' rows of ``E`` are reset to their
       residuals each step and ``scale * E`` is added to ``Z``.
    3. **Smooth**: the corrected guesses, with the seeds reset to their one-hot
       labels, are spread by ``G <- a2 S G + (1 - a2) G0``, clipped to [0, 1].

    The result is clipped at 0 and its rows normalised.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    base : {"linear", "sgc"}, default="linear"
        Features of the base model. Huang et al.'s "Linear" also appends spectral
        embeddings of the graph; here it sees ``X`` only.
    depth : int, default=2
        Propagation steps of the ``"sgc"`` base, in [0, 100]; ignored for ``"linear"``.
    l2 : float, default=1e-4
        Ridge penalty of the base logistic regression, ``>= 0``.
    max_iter : int, default=300
        L-BFGS iterations of the base model, in [1, 100_000].
    correction_alpha : float, default=0.98
        ``a1`` in (0, 1]: 0.98 is the authors' setting for Linear + C&S with autoscale
        on ogbn-arxiv (1.0 is their value for the fixed-scale variant).
    smoothing_alpha : float, default=0.8
        ``a2`` in (0, 1): the authors' configurations use 0.65-0.9, 0.8 most often.
    n_propagation : int, default=50
        Steps of each propagation, in [1, 100_000] (50 in all the paper's runs).
    autoscale : bool, default=True
        Rescale the spread error per row (see above) instead of by ``scale``.
    scale : float, default=1.0
        Factor of the spread error when ``autoscale=False``, ``>= 0``.
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
    label_distributions_ : ndarray of shape (n_samples, n_classes)
        Rows sum to 1; seeds get their one-hot row. An isolated vertex keeps its
        base model prediction.
    confidence_ : ndarray of shape (n_samples,)
    transduction_ : ndarray of shape (n_samples,)

    Notes
    -----
    Both propagations run exactly ``n_propagation`` steps, as in the paper;
    a :class:`ConvergenceWarning` can only come from the base model's L-BFGS.
    The residuals are measured on the same seeds the base model was fitted on,
    so a base model that fits its seeds perfectly leaves little to correct.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import CorrectAndSmooth
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> model = CorrectAndSmooth(n_neighbors=10).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    def __init__(
        self,
        n_neighbors=30,
        *,
        base="linear",
        depth=2,
        l2=1e-4,
        max_iter=300,
        correction_alpha=0.98,
        smoothing_alpha=0.8,
        n_propagation=50,
        autoscale=True,
        scale=1.0,
        unlabeled=-1,
    ):
        self.n_neighbors = n_neighbors
        self.base = base
        self.depth = depth
        self.l2 = l2
        self.max_iter = max_iter
        self.correction_alpha = correction_alpha
        self.smoothing_alpha = smoothing_alpha
        self.n_propagation = n_propagation
        self.autoscale = autoscale
        self.scale = scale
        self.unlabeled = unlabeled

    def _check_params(self):
        return {
            "base": check_choice("base", self.base, ("linear", "sgc")),
            "depth": check_depth("depth", self.depth),
            **check_linear_params(self.l2, self.max_iter),
            "correction_alpha": check_real(
                "correction_alpha", self.correction_alpha, low=0.0, high=1.0, low_inclusive=False
            ),
            "smoothing_alpha": check_real(
                "smoothing_alpha",
                self.smoothing_alpha,
                low=0.0,
                high=1.0,
                low_inclusive=False,
                high_inclusive=False,
            ),
            "n_propagation": check_iterations("n_propagation", self.n_propagation),
            "autoscale": check_bool("autoscale", self.autoscale),
            "scale": check_real("scale", self.scale, low=0.0),
        }

    def _scores(self, problem, *, base, depth, l2, max_iter, **propagation):
        features = problem.features
        if base == "sgc":
            features = sgc_features(features, problem.graph, depth)
        base_proba = seed_classifier_proba(features, problem, l2=l2, max_iter=max_iter, name="CorrectAndSmooth")
        operator = normalised_adjacency(problem.graph, self_loops=False, dtype=np.float64)
        steps = propagation["n_propagation"]
        corrected = _correct(
            base_proba,
            problem,
            operator,
            alpha=propagation["correction_alpha"],
            n_propagation=steps,
            autoscale=propagation["autoscale"],
            scale=propagation["scale"],
        )
        return _smooth(corrected, problem, operator, alpha=propagation["smoothing_alpha"], n_propagation=steps)
