"""FastGCN (Chen et al., 2018) in NumPy/SciPy: a two-layer GCN trained on layer-wise importance samples.

The network is GCN's, ``softmax(Â relu(Â X W1 + b1) W2 + b2)`` with
``Â = D~^-1/2 (A + I) D~^-1/2``. For every mini-batch of seeds, each layer's
aggregation ``Â H`` is replaced by the unbiased estimate
``Â[:, S] diag(1 / (t q(S))) H[S]`` over ``t`` vertices ``S`` drawn i.i.d.
from ``q(u) ∝ ||Â[:, u]||^2``: the batch reads the hidden rows of ``t1``
drawn vertices, which read the features of ``t0`` others. The loss and its
hand-written gradients are GCN's (:func:`fastprop.baselines.gcn._gcn_loss_and_gradients`)
on these sampled operators. The final prediction uses the full ``Â``, as
FastGCN does at test time.
"""

import numpy as np
from scipy.special import softmax

from .._validation import check_integer, check_memory
from ..adjacency import normalised_adjacency
from ._common import GraphBaseline, check_training
from ._sampling import train_on_batches
from .gcn import _dropout_mask, _forward, _gcn_loss_and_gradients, _glorot


class ImportanceSampler:
    """Layer-wise importance sampling of FastGCN: vertices drawn i.i.d. from ``q(u) ∝ ||Â[:, u]||^2``.

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        The normalised adjacency ``Â``.

    Attributes
    ----------
    probabilities : ndarray of shape (n_samples,), float64
        ``q``, summing to 1 (positive everywhere when ``Â`` has its self loops).
    """

    def __init__(self, adjacency):
        squares = np.bincount(adjacency.indices, weights=np.square(adjacency.data, dtype=np.float64),
                              minlength=adjacency.shape[1])
        self.probabilities = squares / squares.sum()
        self._cumulative = np.cumsum(self.probabilities)

    def draw(self, n_draws, rng):
        """``n_draws`` vertices drawn i.i.d. from ``q``: the distinct ones (sorted) and how often each came."""
        targets = rng.random(n_draws) * self._cumulative[-1]
        draws = np.searchsorted(self._cumulative, targets, side="right")
        return np.unique(draws, return_counts=True)

    def sample(self, rows, n_draws, rng):
        """Estimate the product ``rows @ H`` from ``n_draws`` sampled rows of ``H``.

        Parameters
        ----------
        rows : scipy.sparse.csr_matrix of shape (n_rows, n_samples)
            Rows of ``Â``.
        n_draws : int
            ``t``, the vertices drawn.
        rng : numpy.random.Generator

        Returns
        -------
        vertices : ndarray of int
            The distinct drawn vertices that some row reads (the others would
            only contribute zero columns), sorted.
        block : scipy.sparse.csr_matrix of shape (n_rows, len(vertices))
            ``rows[:, vertices]``, column ``u`` scaled by ``count(u) / (t q(u))``,
            so that ``block @ H[vertices]`` is an unbiased estimate of ``rows @ H``
            (a vertex drawn ``c`` times stands for ``c`` equal columns).
        """
        vertices, counts = self.draw(n_draws, rng)
        read = np.isin(vertices, rows.indices)
        vertices, counts = vertices[read], counts[read]
        block = rows[:, vertices].tocsr()
        scale = counts / (n_draws * self.probabilities[vertices])
        block.data *= scale[block.indices].astype(block.dtype)
        return vertices, block


def sample_batch(adjacency, features, batch, sampler, sample_sizes, rng):
    """The sampled network of one mini-batch, as the operands of GCN's loss.

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix
        ``Â``.
    features : ndarray of shape (n_samples, n_features)
    batch : ndarray of int
        The seeds of the batch.
    sampler : ImportanceSampler
    sample_sizes : (int, int)
        Vertices drawn for the hidden layer (read by the batch), then for the
        input layer (read by those).
    rng : numpy.random.Generator

    Returns
    -------
    inputs : ndarray of shape (n_hidden, n_features)
        The sampled estimate of ``(Â X)`` at the hidden layer's vertices.
    propagation : scipy.sparse.csr_matrix of shape (len(batch), n_hidden)
        The sampled, rescaled columns of ``Â[batch]``.
    """
    hidden_rows, propagation = sampler.sample(adjacency[batch], sample_sizes[0], rng)
    input_rows, first = sampler.sample(adjacency[hidden_rows], sample_sizes[1], rng)
    return first @ features[input_rows], propagation


def check_sample_sizes(value):
    """A pair of positive integers."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(
            f"sample_sizes must be a pair of integers (vertices sampled for the hidden layer, then for the "
            f"input layer), got {value!r}."
        )
    return tuple(check_integer(f"sample_sizes[{layer}]", size, low=1) for layer, size in enumerate(value))


def _train(params, problem, adjacency, *, sample_sizes, dropout, weight_decay, rng, **schedule):
    """Adam on GCN's loss over mini-batches of seeds, each on a new sample of both layers.

    ``schedule`` holds ``batch_size``, ``max_epochs`` and ``learning_rate``.
    """
    sampler = ImportanceSampler(adjacency)
    dtype = params[0].dtype.type
    hidden = params[1].size

    def gradients_of(batch):
        inputs, propagation = sample_batch(adjacency, problem.features, batch, sampler, sample_sizes, rng)
        masks = (
            _dropout_mask(rng, inputs.shape, dropout, dtype),
            _dropout_mask(rng, (inputs.shape[0], hidden), dropout, dtype),
        )
        targets = problem.targets[batch].astype(dtype)
        return _gcn_loss_and_gradients(params, inputs, propagation, targets, weight_decay, masks)[1]

    return train_on_batches(params, problem.seeds, gradients_of, rng=rng, **schedule)


class FastGCN(GraphBaseline):
    """FastGCN (Chen et al., 2018): a two-layer GCN trained on layer-wise importance samples.

    ``softmax(Â relu(Â X W1 + b1) W2 + b2)`` with ``Â = D~^-1/2 (A + I) D~^-1/2``,
    trained with Adam on mini-batches of seeds; in each batch both products
    with ``Â`` are Monte Carlo estimates over vertices drawn from
    ``q(u) ∝ ||Â[:, u]||^2``. Prediction uses the full ``Â``. In float32,
    entirely in NumPy/SciPy.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    hidden : int, default=256
        Width of the hidden layer, at least 1. A width whose arrays (about
        ``16 * hidden * (n_samples + n_features)`` bytes) exceed the machine's
        memory is a ValueError before anything is allocated.
    sample_sizes : (int, int), default=(6000, 1000)
        Vertices drawn (with replacement) per batch: first for the hidden layer,
        which the batch reads (one hop), then for the input layer, which those
        read (two hops); each at least 1, clamped to ``n_samples``.
    batch_size : int, default=256
        Seeds per mini-batch, at least 1.
    dropout : float, default=0.0
        Dropout rate in [0, 1), applied during training to the sampled ``Â X``
        rows and to the hidden layer.
    weight_decay : float, default=5e-4
        L2 penalty ``weight_decay / 2 * ||W1||^2`` on the first layer, ``>= 0``.
    learning_rate : float, default=0.01
        Adam step size, ``> 0``.
    max_epochs : int, default=200
        Passes over the seeds, in [1, 100_000]; each pass takes
        ``ceil(n_seeds / batch_size)`` Adam steps.
    random_state : int, numpy.random.Generator or None, default=None
        Seeds the Glorot initialisation, the batches, the vertex samples and the
        dropout masks; a fixed value gives identical results (for a given graph).
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
        Softmax outputs; seeds get their one-hot row.
    confidence_ : ndarray of shape (n_samples,)
    transduction_ : ndarray of shape (n_samples,)
    n_iter_ : int
        Epochs run (always ``max_epochs``).

    Notes
    -----
    The sample sizes are those of Yang et al.'s supplement ("6,000 one-hop
    neighbors and 1,000 two-hop neighbors"), the hidden width that of their GCN;
    the batch size is FastGCN's for Cora and Pubmed, dropout, weight decay and
    learning rate those of FastGCN's code, the 200 epochs GCN's (FastGCN stops
    early on a validation set, which is not available here). ``q`` is the
    paper's squared column norm (FastGCN's code samples by the plain norm).
    Drawn vertices that no row of the layer above reads contribute nothing and
    are skipped, which saves work and changes no result. A vertex with zero
    ``q`` is never drawn (with the self loops of ``Â`` there is none). With
    ``graph=None`` and more than ``fastprop.graph.EXACT_SEARCH_MAX_SAMPLES``
    samples the graph comes from multi-threaded hnswlib, which is not
    deterministic: pass ``graph`` for reproducible results at that scale.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import FastGCN
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> model = FastGCN(n_neighbors=10, hidden=16, random_state=0).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    def __init__(
        self,
        n_neighbors=30,
        *,
        hidden=256,
        sample_sizes=(6000, 1000),
        batch_size=256,
        dropout=0.0,
        weight_decay=5e-4,
        learning_rate=0.01,
        max_epochs=200,
        random_state=None,
        unlabeled=-1,
    ):
        self.n_neighbors = n_neighbors
        self.hidden = hidden
        self.sample_sizes = sample_sizes
        self.batch_size = batch_size
        self.dropout = dropout
        self.weight_decay = weight_decay
        self.learning_rate = learning_rate
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.unlabeled = unlabeled

    def _check_params(self):
        return {
            "hidden": check_integer("hidden", self.hidden, low=1),
            "sample_sizes": check_sample_sizes(self.sample_sizes),
            "batch_size": check_integer("batch_size", self.batch_size, low=1),
            **check_training(self),
        }

    def _scores(self, problem, *, hidden, sample_sizes, rng, **training):
        dtype = np.float32
        n_samples, n_features = problem.features.shape
        # as GCN: W1 with its gradient and Adam's two moments, and up to four (n, hidden) arrays
        check_memory(16 * hidden * (n_samples + n_features), f"FastGCN(hidden={hidden}) on {n_samples:,} samples "
                     f"x {n_features} features", "use a smaller hidden layer.")
        adjacency = normalised_adjacency(problem.graph, self_loops=True, dtype=dtype)
        n_classes = problem.classes.size
        params = [
            _glorot(rng, n_features, hidden, dtype),
            np.zeros(hidden, dtype=dtype),
            _glorot(rng, hidden, n_classes, dtype),
            np.zeros(n_classes, dtype=dtype),
        ]
        sample_sizes = tuple(min(size, n_samples) for size in sample_sizes)
        _train(params, problem, adjacency, sample_sizes=sample_sizes, rng=rng, **training)
        self.n_iter_ = training["max_epochs"]
        logits, _ = _forward(params, adjacency @ problem.features, adjacency, (None, None))
        return softmax(logits.astype(np.float64), axis=1)
