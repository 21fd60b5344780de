"""Two-layer graph convolutional network (Kipf & Welling, 2017) in NumPy/SciPy.

Full-batch training, exact gradients written out by hand, Adam, Glorot
initialisation. The network is ``softmax(Â relu(Â X W1 + b1) W2 + b2)`` with
``Â = D~^-1/2 (A + I) D~^-1/2``.

Only the seeds enter the loss, so only the rows of the hidden layer that some
seed aggregates (the seeds and their neighbours, the *receptive field*) take
part in training; :func:`_training_problem` restricts the computation to them.
Loss and gradients are exactly those of the full-batch network: the rows left
out never reach the loss.
"""

import numpy as np
from scipy.special import log_softmax, softmax

from .._validation import check_integer, check_memory
from ..adjacency import normalised_adjacency
from ._common import GraphBaseline, check_training

_ADAM_BETAS = (0.9, 0.999)
_ADAM_EPS = 1e-8
#: Output-side gradient entries below this magnitude are set to zero. Once the
#: seeds are fitted, ``softmax - targets`` shrinks towards float32's subnormal
#: range, and subnormal operands slow the first layer's gradient product (the
#: bulk of the work) several times over on x86. Flushing the two narrow
#: (n_classes wide) arrays keeps everything downstream normal; entries this
#: small move Adam's parameters by far less than its ``eps`` anyway.
_FLUSH_BELOW = 1e-20


def _flush_tiny(array):
    """Zero, in place, the entries of ``array`` smaller than ``_FLUSH_BELOW`` in magnitude."""
    array[np.abs(array) < _FLUSH_BELOW] = 0
    return array


def _seed_cross_entropy(log_proba, targets):
    """The seeds' cross-entropy, a mean weighted by their counts, and its gradient with respect to the logits.

    Parameters
    ----------
    log_proba : ndarray of shape (n_seeds, n_classes)
        The seeds' log-probabilities.
    targets : ndarray of shape (n_seeds, n_classes)
        Each seed's one-hot label times how many times it counts: 1 in the
        baselines, more for a seed of a training patch that repeats
        (:func:`fastprop.local_networks.training_problem`), which weighs it
        as that many copies would.

    Returns
    -------
    loss : float
    grad_logits : ndarray of the shape of ``log_proba``
    """
    counts = targets.sum(axis=1, keepdims=True)
    total = float(counts.sum())
    loss = -float(np.sum(targets * log_proba)) / total
    return loss, _flush_tiny((np.exp(log_proba) * counts - targets) / total)


def _squared_norm(weights):
    """``||weights||^2`` summed in float64: a float32 square overflows from ``|w|`` ~ 1.8e19 (a huge learning rate)."""
    return float(np.sum(np.square(weights, dtype=np.float64)))


def _forward(params, inputs, propagation, masks):
    """Logits and the intermediates the backward pass needs."""
    w1, b1, w2, b2 = params
    input_mask, hidden_mask = masks
    dropped_inputs = inputs if input_mask is None else inputs * input_mask
    pre_activation = dropped_inputs @ w1 + b1
    hidden = np.maximum(pre_activation, 0)
    if hidden_mask is not None:
        hidden = hidden * hidden_mask
    logits = propagation @ (hidden @ w2) + b2
    return logits, (dropped_inputs, pre_activation, hidden)


def _gcn_loss_and_gradients(params, inputs, propagation, targets, weight_decay, masks=(None, None)):
    """Mean cross-entropy on the seeds and its gradients.

    Parameters
    ----------
    params : tuple of ndarray
        ``(W1 (n_features, hidden), b1 (hidden,), W2 (hidden, n_classes), b2 (n_classes,))``.
    inputs : ndarray of shape (n_rows, n_features)
        Rows of ``Â X`` of the receptive field.
    propagation : sparse matrix of shape (n_seeds, n_rows)
        Rows of ``Â`` for the seeds, columns restricted to the receptive field.
    targets : ndarray of shape (n_seeds, n_classes)
        One-hot seed labels (times a seed's count, see :func:`_seed_cross_entropy`).
    weight_decay : float
        The loss includes ``weight_decay / 2 * ||W1||^2`` (first layer only, as
        Kipf & Welling).
    masks : (ndarray or None, ndarray or None)
        Inverted-dropout masks (entries 0 or ``1 / keep``) for the inputs and the
        hidden layer; None disables that dropout.

    Returns
    -------
    loss : float
    gradients : tuple of ndarray
        Same shapes and order as ``params``.
    """
    w1, _, w2, _ = params
    logits, (dropped_inputs, pre_activation, hidden) = _forward(params, inputs, propagation, masks)
    log_proba = log_softmax(logits, axis=1)
    loss, grad_logits = _seed_cross_entropy(log_proba, targets)
    loss += 0.5 * weight_decay * _squared_norm(w1)
    grad_b2 = grad_logits.sum(axis=0)
    grad_hidden_w2 = _flush_tiny(propagation.T @ grad_logits)
    grad_w2 = hidden.T @ grad_hidden_w2
    grad_hidden = grad_hidden_w2 @ w2.T
    if masks[1] is not None:
        grad_hidden *= masks[1]
    grad_hidden *= pre_activation > 0
    grad_w1 = dropped_inputs.T @ grad_hidden + weight_decay * w1
    grad_b1 = grad_hidden.sum(axis=0)
    return loss, (grad_w1, grad_b1, grad_w2, grad_b2)


def _glorot(rng, fan_in, fan_out, dtype):
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(dtype)


def _dropout_mask(rng, shape, rate, dtype):
    """Inverted-dropout mask: ``1 / keep`` with probability ``keep``, else 0.

    The keep probability is rounded to a multiple of 2^-16 (16-bit draws are
    twice as fast as float draws and the rounding is immaterial).
    """
    if rate == 0.0:
        return None
    keep = 1.0 - rate
    threshold = round(keep * 65536)
    return (rng.integers(0, 65536, size=shape, dtype=np.uint16) < threshold) * dtype(1.0 / keep)


def _training_problem(adjacency, features, seeds):
    """Restrict the network to the seeds' receptive field.

    Returns
    -------
    inputs : ndarray of shape (n_rows, n_features)
        ``(Â X)[field]``.
    propagation : csr_matrix of shape (n_seeds, n_rows)
        ``Â[seeds][:, field]``.
    """
    seed_rows = adjacency[seeds]
    field = np.unique(seed_rows.indices)
    return adjacency[field] @ features, seed_rows[:, field].tocsr()


class Adam:
    """Adam (Kingma & Ba, 2015) over a list of arrays, updated in place; every neural baseline's optimiser.

    Parameters
    ----------
    params : list of ndarray
        Updated in place by :meth:`step`.
    learning_rate : float
    """

    def __init__(self, params, learning_rate):
        self.params = params
        self.learning_rate = learning_rate
        self.first = [np.zeros_like(p) for p in params]
        self.second = [np.zeros_like(p) for p in params]
        self.n_steps = 0

    def step(self, gradients):
        """Move every parameter against its gradient (same order as ``params``), with bias correction."""
        beta1, beta2 = _ADAM_BETAS
        self.n_steps += 1
        size = self.learning_rate * np.sqrt(1 - beta2**self.n_steps) / (1 - beta1**self.n_steps)
        for param, grad, m, v in zip(self.params, gradients, self.first, self.second):
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            param -= size * m / (np.sqrt(v) + _ADAM_EPS)


def _train(params, inputs, propagation, targets, *, weight_decay, dropout, learning_rate, max_epochs, rng):
    """Adam on :func:`_gcn_loss_and_gradients` for ``max_epochs`` full-batch steps."""
    optimiser = Adam(params, learning_rate)
    dtype = inputs.dtype.type
    for _ in range(max_epochs):
        masks = (
            _dropout_mask(rng, inputs.shape, dropout, dtype),
            _dropout_mask(rng, (inputs.shape[0], params[0].shape[1]), dropout, dtype),
        )
        _, gradients = _gcn_loss_and_gradients(params, inputs, propagation, targets, weight_decay, masks)
        optimiser.step(gradients)
    return params


class GCN(GraphBaseline):
    """Two-layer graph convolutional network (Kipf & Welling, 2017).

    ``softmax(Â relu(Â X W1 + b1) W2 + b2)`` with ``Â = D~^-1/2 (A + I) D~^-1/2``,
    trained full batch with Adam on the mean cross-entropy of the seeds, in
    float32, entirely in NumPy/SciPy.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    hidden : int, default=256
        Width of the hidden layer, at least 1. A width whose arrays (about
        ``16 * hidden * (n_samples + n_features)`` bytes) exceed the machine's
        memory is a ValueError before anything is allocated.
    dropout : float, default=0.5
        Dropout rate in [0, 1), applied to ``Â X`` and to the hidden layer during training.
    weight_decay : float, default=5e-4
        L2 penalty ``weight_decay / 2 * ||W1||^2`` on the first layer, ``>= 0``.
    learning_rate : float, default=0.01
        Adam step size, ``> 0``.
    max_epochs : int, default=200
        Training epochs (full-batch Adam steps), in [1, 100_000].
    random_state : int, numpy.random.Generator or None, default=None
        Seeds the Glorot initialisation and the dropout masks; a fixed value
        gives identical results (for a given graph).
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
        Softmax outputs; seeds get their one-hot row. An isolated vertex,
        whose only neighbour is its self loop, is predicted from its own features.
    confidence_ : ndarray of shape (n_samples,)
    transduction_ : ndarray of shape (n_samples,)
    n_iter_ : int
        Epochs run (always ``max_epochs``).

    Notes
    -----
    Kipf & Welling drop input features *before* ``Â``; here ``Â X`` is computed
    once and dropout acts on its entries. They also stop early on a validation
    set; none is available here, so training runs ``max_epochs`` epochs and no
    convergence warning applies. Only the seeds' receptive field enters the
    training steps (see the module notes), the final prediction uses all rows.
    With ``graph=None`` and more than ``fastprop.graph.EXACT_SEARCH_MAX_SAMPLES``
    samples the graph comes from multi-threaded hnswlib, which is not
    deterministic: pass ``graph`` for reproducible results at that scale.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import GCN
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> model = GCN(n_neighbors=10, hidden=16, random_state=0).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    def __init__(
        self,
        n_neighbors=30,
        *,
        hidden=256,
        dropout=0.5,
        weight_decay=5e-4,
        learning_rate=0.01,
        max_epochs=200,
        random_state=None,
        unlabeled=-1,
    ):
        self.n_neighbors = n_neighbors
        self.hidden = hidden
        self.dropout = dropout
        self.weight_decay = weight_decay
        self.learning_rate = learning_rate
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.unlabeled = unlabeled

    def _check_params(self):
        return {
            "hidden": check_integer("hidden", self.hidden, low=1),
            **check_training(self),
        }

    def _scores(self, problem, *, hidden, max_epochs, rng, **training):
        dtype = np.float32
        n_samples, n_features = problem.features.shape
        # float32: W1 with its gradient and Adam's two moments, and the hidden layer's rows (training
        # and the final forward pass hold up to four (n, hidden) arrays)
        check_memory(16 * hidden * (n_samples + n_features), f"GCN(hidden={hidden}) on {n_samples:,} samples "
                     f"x {n_features} features", "use a smaller hidden layer.")
        adjacency = normalised_adjacency(problem.graph, self_loops=True, dtype=dtype)
        inputs, propagation = _training_problem(adjacency, problem.features, problem.seeds)
        n_classes = problem.classes.size
        params = [
            _glorot(rng, n_features, hidden, dtype),
            np.zeros(hidden, dtype=dtype),
            _glorot(rng, hidden, n_classes, dtype),
            np.zeros(n_classes, dtype=dtype),
        ]
        targets = problem.targets[problem.seeds].astype(dtype)
        params = _train(params, inputs, propagation, targets, max_epochs=max_epochs, rng=rng, **training)
        self.n_iter_ = max_epochs
        logits, _ = _forward(params, adjacency @ problem.features, adjacency, (None, None))
        return softmax(logits.astype(np.float64), axis=1)
