"""GraphSAGE (Hamilton et al., 2017) in NumPy/SciPy: sampled neighbourhoods, mini-batches of seeds.

Two layers, each of which computes a vertex from ``sample_size`` of its
neighbours, drawn uniformly with replacement from its neighbours in the kNN
graph (edge weights ignored, as GraphSAGE's uniform sampler ignores them):

- ``"mean"``: ``[h_v, mean(h_u for the sampled u)] @ W + b`` (concatenation, then W);
- ``"gcn"``: ``mean(h_v and the sampled h_u) @ W + b``.

A sampled layer is a sparse operator (one row per vertex computed, one column
per vertex read, the weights of the mean; a neighbour drawn twice counts
twice), so a layer costs a sparse product and a dense one. The first layer is
followed by ReLU and, by default, a row-wise L2 normalisation; the second gives
the class logits. Training draws, for every mini-batch of seeds, the batch's
sampled neighbours and theirs; the final prediction draws a sampled
neighbourhood for every vertex in the same way. Gradients are written out by
hand.
"""

import functools
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import log_softmax, softmax

from .._validation import check_bool, check_choice, check_integer, check_memory
from ._common import GraphBaseline, check_training
from ._sampling import train_on_batches
from .gcn import _dropout_mask, _flush_tiny, _glorot, _seed_cross_entropy, _squared_norm

AGGREGATORS = ("mean", "gcn")
#: Squared norms are clamped at this value before an L2 normalisation (TensorFlow's
#: ``l2_normalize`` default, which GraphSAGE uses), so an all-zero row stays zero.
_NORM_EPS = 1e-12


class SampledLayer(NamedTuple):
    """One sampled layer, computing ``n_rows`` vertices from ``n_sources`` rows of the layer below.

    Attributes
    ----------
    operator : scipy.sparse.csr_matrix of shape (n_rows, n_sources)
        Weights of the mean over the sampled neighbours (and the vertex itself
        for the ``"gcn"`` aggregator).
    own : ndarray of shape (n_rows,) or None
        Position of each vertex among the sources, for the ``"mean"``
        aggregator's concatenation; None for ``"gcn"``.
    """

    operator: sp.csr_matrix
    own: np.ndarray | None


def sample_neighbors(graph, vertices, sample_size, rng):
    """``sample_size`` neighbours of each vertex, drawn uniformly with replacement.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        The kNN graph (no self loops); its weights are ignored.
    vertices : ndarray of int
    sample_size : int
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (len(vertices), sample_size), int64
        Row ``i`` holds neighbours of ``vertices[i]``; ``-1`` fills the rows of
        vertices without neighbours.
    """
    start = graph.indptr[vertices].astype(np.int64)
    degree = graph.indptr[vertices + 1] - start
    offsets = rng.integers(0, np.maximum(degree, 1)[:, None], size=(vertices.size, sample_size))
    samples = np.full(offsets.shape, -1, dtype=np.int64)
    linked = degree > 0
    samples[linked] = graph.indices[start[linked, None] + offsets[linked]]
    return samples


def sampled_layer(vertices, samples, aggregator, dtype):
    """The sparse operator that computes ``vertices`` from their sampled neighbours.

    A vertex without neighbours gets a zero neighbour mean (``"mean"``) or its
    own row (``"gcn"``, the mean over itself alone).

    Parameters
    ----------
    vertices : ndarray of int, distinct
    samples : ndarray of shape (len(vertices), sample_size)
        From :func:`sample_neighbors`.
    aggregator : {"mean", "gcn"}
    dtype : numpy dtype
        Of the operator's weights.

    Returns
    -------
    sources : ndarray of int64
        The vertices the layer reads (``vertices`` and their samples), sorted.
    layer : SampledLayer
    """
    n_rows, sample_size = samples.shape
    linked = samples >= 0
    sources, inverse = np.unique(np.concatenate([vertices, samples[linked]]), return_inverse=True)
    own = inverse[:n_rows]
    rows = np.nonzero(linked)[0]
    columns = inverse[n_rows:]
    if aggregator == "mean":
        weights = np.full(rows.size, 1.0 / sample_size)
    else:
        n_terms = linked.sum(axis=1) + 1
        rows = np.concatenate([rows, np.arange(n_rows)])
        columns = np.concatenate([columns, own])
        weights = 1.0 / n_terms[rows]
    operator = sp.csr_matrix((weights.astype(dtype), (rows, columns)), shape=(n_rows, sources.size))
    return sources, SampledLayer(operator, own if aggregator == "mean" else None)


def sample_network(graph, outputs, sample_size, aggregator, rng, dtype):
    """Both layers' operators for computing the network at ``outputs``.

    Returns
    -------
    inputs : ndarray of int64
        The vertices whose features the first layer reads.
    layers : (SampledLayer, SampledLayer)
        The first layer (inputs -> hidden rows) and the second (hidden rows -> ``outputs``).
    """

    def layer_computing(rows):
        return sampled_layer(rows, sample_neighbors(graph, rows, sample_size, rng), aggregator, dtype)

    hidden_rows, second = layer_computing(outputs)
    inputs, first = layer_computing(hidden_rows)
    return inputs, (first, second)


def _aggregate(values, layer):
    """A layer's input: ``[values[own], operator @ values]`` ("mean") or ``operator @ values`` ("gcn")."""
    neighbours = layer.operator @ values
    if layer.own is None:
        return neighbours
    return np.hstack([values[layer.own], neighbours])


def _aggregate_backward(gradient, layer):
    """The gradient with respect to ``values`` of :func:`_aggregate`, given that of its output."""
    if layer.own is None:
        return layer.operator.T @ gradient
    width = gradient.shape[1] // 2
    result = layer.operator.T @ gradient[:, width:]
    result[layer.own] += gradient[:, :width]  # own positions are distinct
    return result


def _l2_normalise(rows):
    """``rows / sqrt(max(||row||^2, eps))``, the divisors (n_rows, 1) and which rows were clamped.

    A row whose squares overflow (float32 entries past ~1e19, after a huge
    learning rate) has its norm taken from the row scaled by its largest entry.
    """
    with np.errstate(over="ignore"):
        squares = np.einsum("ij,ij->i", rows, rows)
    clamped = squares <= _NORM_EPS
    norms = np.sqrt(np.maximum(squares, _NORM_EPS))[:, None]
    overflowed = np.flatnonzero(np.isinf(squares))
    if overflowed.size:
        largest = np.abs(rows[overflowed]).max(axis=1)
        scaled = rows[overflowed] / largest[:, None]
        norms[overflowed, 0] = largest * np.sqrt(np.einsum("ij,ij->i", scaled, scaled))
    return rows / norms, (norms, clamped)


def _l2_normalise_backward(gradient, normalised, scale):
    """The gradient before :func:`_l2_normalise`, given the one after; ``scale`` is its second output.

    A clamped row was only divided by a constant, so its gradient is too.
    """
    norms, clamped = scale
    projected = np.einsum("ij,ij->i", normalised, gradient)[:, None]
    projected[clamped] = 0
    return (gradient - normalised * projected) / norms


def _forward(params, inputs, layers, normalize, masks):
    """Logits of the layers' output rows and the intermediates the backward pass needs."""
    w1, b1, w2, b2 = params
    input_mask, hidden_mask = masks
    dropped_inputs = inputs if input_mask is None else inputs * input_mask
    first_in = _aggregate(dropped_inputs, layers[0])
    pre_activation = first_in @ w1 + b1
    hidden = np.maximum(pre_activation, 0)
    scale = None
    if normalize:
        hidden, scale = _l2_normalise(hidden)
    dropped_hidden = hidden if hidden_mask is None else hidden * hidden_mask
    second_in = _aggregate(dropped_hidden, layers[1])
    logits = second_in @ w2 + b2
    return logits, (first_in, pre_activation, hidden, scale, second_in)


def _sage_loss_and_gradients(params, inputs, layers, targets, weight_decay, normalize, masks=(None, None)):
    """Mean cross-entropy of the output rows and its gradients.

    Parameters
    ----------
    params : tuple of ndarray
        ``(W1, b1 (hidden,), W2, b2 (n_classes,))``; W1 is (2 n_features, hidden)
        and W2 (2 hidden, n_classes) for the ``"mean"`` aggregator (self rows
        first), (n_features, hidden) and (hidden, n_classes) for ``"gcn"``.
    inputs : ndarray of shape (n_inputs, n_features)
        Features of the first layer's sources.
    layers : (SampledLayer, SampledLayer)
        From :func:`sample_network`.
    targets : ndarray of shape (n_outputs, n_classes)
        One-hot labels of the second layer's rows.
    weight_decay : float
        The loss includes ``weight_decay / 2 * (||W1||^2 + ||W2||^2)`` (GraphSAGE
        decays every weight matrix).
    normalize : bool
        L2-normalise the rows of the hidden layer.
    masks : (ndarray or None, ndarray or None)
        Inverted-dropout masks of the inputs (n_inputs, n_features) and of the
        hidden rows (n_hidden, hidden); None disables that dropout.

    Returns
    -------
    loss : float
    gradients : tuple of ndarray
        Same shapes and order as ``params``.
    """
    w1, _, w2, _ = params
    logits, cache = _forward(params, inputs, layers, normalize, masks)
    first_in, pre_activation, hidden, scale, second_in = cache
    log_proba = log_softmax(logits, axis=1)
    loss, grad_logits = _seed_cross_entropy(log_proba, targets)
    loss += 0.5 * weight_decay * (_squared_norm(w1) + _squared_norm(w2))
    grad_b2 = grad_logits.sum(axis=0)
    grad_w2 = second_in.T @ grad_logits + weight_decay * w2
    grad_hidden = _flush_tiny(_aggregate_backward(grad_logits @ w2.T, layers[1]))
    if masks[1] is not None:
        grad_hidden *= masks[1]
    if normalize:
        grad_hidden = _l2_normalise_backward(grad_hidden, hidden, scale)
    grad_hidden *= pre_activation > 0
    grad_w1 = first_in.T @ grad_hidden + weight_decay * w1
    grad_b1 = grad_hidden.sum(axis=0)
    return loss, (grad_w1, grad_b1, grad_w2, grad_b2)


def _initial_params(rng, n_features, hidden, n_classes, aggregator, dtype):
    """Glorot weights (over the concatenated width for "mean"), zero biases."""
    width = 2 if aggregator == "mean" else 1
    return [
        _glorot(rng, width * n_features, hidden, dtype),
        np.zeros(hidden, dtype=dtype),
        _glorot(rng, width * hidden, n_classes, dtype),
        np.zeros(n_classes, dtype=dtype),
    ]


def _check_memory(n_samples, n_features, n_classes, hidden, sample_size):
    """Refuse up front a network whose final pass over every vertex would not fit in memory.

    That pass holds float32 layer inputs (2 n_features and 2 hidden wide), three
    (n_samples, hidden) arrays and the sampled operators with their construction
    (about 40 bytes a sample); the weights are held with their gradients and
    Adam's two moments.
    """
    n_bytes = (4 * n_samples * (2 * n_features + 5 * hidden) + 40 * n_samples * sample_size
               + 32 * hidden * (n_features + n_classes))
    check_memory(n_bytes, f"GraphSAGE(hidden={hidden}, sample_size={sample_size}) on {n_samples:,} samples x "
                 f"{n_features} features", "use a smaller hidden layer or sample size.")


def _train(params, problem, network, *, normalize, dropout, weight_decay, rng, **schedule):
    """Adam on :func:`_sage_loss_and_gradients` over mini-batches of seeds, a new sample for each.

    ``network(batch)`` returns the sampled ``(inputs, layers)`` of a batch;
    ``schedule`` holds ``batch_size``, ``max_epochs`` and ``learning_rate``.
    """
    features = problem.features
    dtype = params[0].dtype.type
    hidden = params[1].size

    def gradients_of(batch):
        inputs, layers = network(batch)
        masks = (
            _dropout_mask(rng, (inputs.size, features.shape[1]), dropout, dtype),
            _dropout_mask(rng, (layers[0].operator.shape[0], hidden), dropout, dtype),
        )
        targets = problem.targets[batch].astype(dtype)
        return _sage_loss_and_gradients(params, features[inputs], layers, targets, weight_decay, normalize, masks)[1]

    return train_on_batches(params, problem.seeds, gradients_of, rng=rng, **schedule)


class GraphSAGE(GraphBaseline):
    """GraphSAGE (Hamilton et al., 2017) with the mean or the GCN aggregator.

    Two layers on sampled neighbourhoods: ``h_v = normalise(relu(agg(x, v) @ W1 + b1))``,
    then ``logits_v = agg(h, v) @ W2 + b2``, where ``agg`` reads ``sample_size``
    neighbours of ``v`` drawn uniformly with replacement from its neighbours in
    the kNN graph. Trained with Adam on mini-batches of seeds (the mean
    cross-entropy of each batch), a new sample for every batch, in float32,
    entirely in NumPy/SciPy.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    aggregator : {"mean", "gcn"}, default="mean"
        ``"mean"``: concatenate the vertex's own row and the mean of its sampled
        neighbours' rows, then apply the layer's weights. ``"gcn"``: the mean over
        the vertex and its sampled neighbours, then the weights (GraphSAGE-GCN).
    hidden : int, default=256
        Width of the hidden layer, at least 1.
    sample_size : int, default=15
        Neighbours sampled per vertex in each layer, at least 1.
    batch_size : int, default=32
        Seeds per mini-batch, at least 1.
    normalize : bool, default=True
        L2-normalise each vertex's hidden row, as GraphSAGE does after every layer.
    dropout : float, default=0.0
        Dropout rate in [0, 1) of the rows each layer reads, during training.
    weight_decay : float, default=0.0
        L2 penalty ``weight_decay / 2 * (||W1||^2 + ||W2||^2)``, ``>= 0``.
    learning_rate : float, default=0.01
        Adam step size, ``> 0``.
    max_epochs : int, default=50
        Passes over the seeds, in [1, 100_000]; each pass takes
        ``ceil(n_seeds / batch_size)`` Adam steps.
    random_state : int, numpy.random.Generator or None, default=None
        Seeds the initialisation, the batches, the neighbour samples and the
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
    The settings of Yang et al.'s supplement: two layers, 15 neighbours sampled
    per layer, batches of 32 seeds; the hidden width of their GCN. The rest
    follows GraphSAGE's supervised code (learning rate 0.01, no dropout, no
    weight decay), except that the second layer gives the class logits directly
    (GraphSAGE adds a linear classifier on a second embedding layer), both
    layers have a bias, and training runs 50 epochs instead of 10 (with 1% seeds
    an epoch is only a few steps). Within a batch, a vertex reached along two
    paths is computed once, from one sample of its neighbours (GraphSAGE's
    tensors sample it once per path). The final prediction also uses sampled
    neighbourhoods, one per vertex and layer, as GraphSAGE's evaluation does; it
    is therefore random, but fixed by ``random_state``. The uniform sampler
    ignores the edge weights. A vertex without neighbours is computed from its
    own features (``"gcn"``) or from its own features and a zero neighbour mean
    (``"mean"``). With ``graph=None`` and more than
    ``fastprop.graph.EXACT_SEARCH_MAX_SAMPLES`` samples the graph comes from
    multi-threaded hnswlib, which is not deterministic: pass ``graph`` for
    reproducible results at that scale.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import GraphSAGE
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> model = GraphSAGE(n_neighbors=10, hidden=16, random_state=0).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    def __init__(
        self,
        n_neighbors=30,
        *,
        aggregator="mean",
        hidden=256,
        sample_size=15,
        batch_size=32,
        normalize=True,
        dropout=0.0,
        weight_decay=0.0,
        learning_rate=0.01,
        max_epochs=50,
        random_state=None,
        unlabeled=-1,
    ):
        self.n_neighbors = n_neighbors
        self.aggregator = aggregator
        self.hidden = hidden
        self.sample_size = sample_size
        self.batch_size = batch_size
        self.normalize = normalize
        self.dropout = dropout
        self.weight_decay = weight_decay
        self.learning_rate = learning_rate
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.unlabeled = unlabeled

    def _check_params(self):
        return {
            "aggregator": check_choice("aggregator", self.aggregator, AGGREGATORS),
            "hidden": check_integer("hidden", self.hidden, low=1),
            "sample_size": check_integer("sample_size", self.sample_size, low=1),
            "batch_size": check_integer("batch_size", self.batch_size, low=1),
            "normalize": check_bool("normalize", self.normalize),
            **check_training(self),
        }

    def _scores(self, problem, *, aggregator, hidden, sample_size, normalize, rng, **training):
        dtype = np.float32
        n_samples, n_features = problem.features.shape
        n_classes = problem.classes.size
        _check_memory(n_samples, n_features, n_classes, hidden, sample_size)
        params = _initial_params(rng, n_features, hidden, n_classes, aggregator, dtype)
        network = functools.partial(sample_network, problem.graph, sample_size=sample_size, aggregator=aggregator,
                                    rng=rng, dtype=dtype)
        _train(params, problem, network, normalize=normalize, rng=rng, **training)
        self.n_iter_ = training["max_epochs"]
        inputs, layers = network(np.arange(n_samples))
        logits, _ = _forward(params, problem.features[inputs], layers, normalize, (None, None))
        return softmax(logits.astype(np.float64), axis=1)
