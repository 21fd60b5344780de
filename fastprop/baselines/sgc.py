"""Simple graph convolution (Wu et al., 2019): propagated features, then a linear model."""


from .._validation import check_real
from ..adjacency import RandomWalk
from ._common import GraphBaseline, check_depth, check_iterations, seed_classifier_proba


def sgc_features(features, graph, depth):
    """Return ``(D~^-1 A~)^depth X`` with ``A~ = A + I``, in float64.

    The row-normalised form (a mean over the closed neighbourhood, weighted by
    affinity) matches FastProp's local predictor. Isolated vertices keep their
    own features (their only neighbour is their self loop).
    """
    return RandomWalk(graph).smooth(features, None, depth)


def check_linear_params(l2, max_iter):
    """Validate the ridge penalty and iteration limit of the seed classifier."""
    return {"l2": check_real("l2", l2, low=0.0), "max_iter": check_iterations("max_iter", max_iter)}


class SGC(GraphBaseline):
    """Simple graph convolution: multinomial logistic regression on propagated features.

    Computes ``Z = (D~^-1 A~)^depth X`` with ``A~ = A + I``, fits multinomial
    logistic regression (:func:`fastprop.linear.fit_softmax_regression`) on the
    seeds' rows of ``Z`` and predicts every row.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    depth : int, default=2
        Propagation steps ``K``, in [0, 100] (0 is plain logistic regression on ``X``).
        Wu et al. use K = 2.
    l2 : float, default=1e-4
        Ridge penalty of the logistic regression, ``>= 0``.
    max_iter : int, default=300
        L-BFGS iterations, in [1, 100_000].
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
        Predicted probabilities; seeds get their one-hot row. An isolated
        vertex is predicted from its own features.
    confidence_ : ndarray of shape (n_samples,)
    transduction_ : ndarray of shape (n_samples,)

    Notes
    -----
    Wu et al. normalise symmetrically, ``D~^-1/2 A~ D~^-1/2``; the row
    normalisation here keeps propagated features on the scale of ``X``. A
    :class:`ConvergenceWarning` is emitted when L-BFGS stops on ``max_iter``
    far from the optimum.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import SGC
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> model = SGC(n_neighbors=10).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    def __init__(self, n_neighbors=30, *, depth=2, l2=1e-4, max_iter=300, unlabeled=-1):
        self.n_neighbors = n_neighbors
        self.depth = depth
        self.l2 = l2
        self.max_iter = max_iter
        self.unlabeled = unlabeled

    def _check_params(self):
        depth = check_depth("depth", self.depth)
        return {"depth": depth, **check_linear_params(self.l2, self.max_iter)}

    def _scores(self, problem, *, depth, l2, max_iter):
        features = sgc_features(problem.features, problem.graph, depth)
        return seed_classifier_proba(features, problem, l2=l2, max_iter=max_iter, name="SGC")
