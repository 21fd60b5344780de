"""Two-layer graph attention network (Veličković et al., 2018) in NumPy/SciPy/Numba.

Full-batch training, exact gradients written out by hand, Adam, Glorot
initialisation. Each layer projects its inputs (``W h``), scores every edge
of the closed kNN neighbourhoods (self loops included) with
``LeakyReLU(a^T [W h_i || W h_j])``, normalises the scores over each vertex's
neighbours and averages the projected neighbours with these weights. The
attention lives on the graph's CSR edges (:mod:`fastprop._kernels.attention`),
so nothing of size N x N is ever formed.

Only the seeds enter the loss, so training is restricted to their *receptive
field*: the second layer's rows are the seeds, its inputs the hidden rows of
the seeds' closed neighbourhoods; the first layer's rows are those hidden
rows, its inputs their neighbourhoods (two hops from the seeds).
:func:`_training_problem` builds the two edge sets; loss and gradients are
exactly those of the full-batch network. The final prediction runs on the
whole graph.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import log_softmax, softmax

from .._kernels.attention import attend, attend_backward_columns, attend_backward_rows
from .._validation import check_integer, check_memory
from ..sharing import ThreadSharingBySize
from ._common import GraphBaseline, check_training
from .gcn import Adam, _dropout_mask, _flush_tiny, _glorot, _seed_cross_entropy, _squared_norm

#: Negative slope of the LeakyReLU of the attention logits, as in the GAT paper.
_NEGATIVE_SLOPE = 0.2
#: Whether each attention kernel shares its rows among the threads, learnt for each size of
#: layer from every call this process makes (see :mod:`fastprop.sharing`: on a machine whose
#: cores other processes keep busy, one thread is faster). It changes the time, never the result.
KERNEL_SHARING = {kernel: ThreadSharingBySize() for kernel in (attend, attend_backward_rows, attend_backward_columns)}


class _Edges(NamedTuple):
    """The edges of one attention layer: row ``i`` attends to the input rows ``indices[indptr[i]:indptr[i + 1]]``.

    Attributes
    ----------
    indptr, indices : ndarray
        CSR structure, columns numbered among the layer's input rows.
    targets : ndarray or None
        Position of each row among the input rows (None: row ``i`` is input row ``i``).
    column_indptr, column_entries, entry_rows : ndarray or None
        The same edges grouped by input row, for the backward pass (None when
        only the forward pass is needed): input row ``j`` owns the edges
        ``column_entries[column_indptr[j]:column_indptr[j + 1]]``, edge ``e``
        belongs to row ``entry_rows[e]``.
    """

    indptr: np.ndarray
    indices: np.ndarray
    targets: np.ndarray | None = None
    column_indptr: np.ndarray | None = None
    column_entries: np.ndarray | None = None
    entry_rows: np.ndarray | None = None


def _closed_neighbourhoods(graph):
    """The sparsity pattern of ``graph + I`` as a CSR matrix with sorted indices (weights are not used)."""
    n_samples = graph.shape[0]
    pattern = sp.csr_matrix((np.ones(graph.nnz, dtype=np.int8), graph.indices, graph.indptr), shape=graph.shape)
    closed = (pattern + sp.identity(n_samples, dtype=np.int8, format="csr")).tocsr()
    closed.sort_indices()
    return closed


def _layer_edges(closed, rows, columns):
    """The edges from the input rows ``columns`` (sorted) into ``rows`` (sorted), with their transpose.

    Every index array has the graph's index dtype, so the kernels compile once per dtype.
    """
    block = closed[rows]
    index_dtype = block.indices.dtype
    indices = np.searchsorted(columns, block.indices).astype(index_dtype)
    entry_rows = np.repeat(np.arange(rows.size, dtype=index_dtype), np.diff(block.indptr))
    column_entries = np.argsort(indices, kind="stable").astype(index_dtype)
    column_indptr = np.zeros(columns.size + 1, dtype=block.indptr.dtype)
    np.cumsum(np.bincount(indices, minlength=columns.size), out=column_indptr[1:])
    return _Edges(block.indptr, indices, np.searchsorted(columns, rows), column_indptr, column_entries, entry_rows)


def _training_problem(closed, features, seeds):
    """Restrict the network to the seeds' receptive field.

    Returns
    -------
    inputs : ndarray of shape (n_inputs, n_features)
        ``X`` at the vertices within two hops of a seed.
    edges : (_Edges, _Edges)
        The first layer's (hidden rows within one hop of a seed, from the
        inputs) and the second's (the seeds, from the hidden rows).
    """
    hidden_rows = np.unique(closed[seeds].indices)
    input_rows = np.unique(closed[hidden_rows].indices)
    edges = (_layer_edges(closed, hidden_rows, input_rows), _layer_edges(closed, seeds, hidden_rows))
    return features[input_rows], edges


def _run(kernel, *arguments, work):
    """``kernel(*arguments, in_parallel)``, shared among the threads as :data:`KERNEL_SHARING` finds faster."""
    KERNEL_SHARING[kernel].timed(lambda shared: kernel(*arguments, shared), work)


def _attention_layer(inputs, weight, vectors, edges, mask, store):
    """One multi-head attention layer: ``(n_rows, n_heads, width)`` outputs and what the backward pass needs.

    ``vectors`` are the source and target halves of the attention vectors,
    ``(n_heads, width)`` each; ``store`` keeps the attention for the backward pass.
    """
    source_vector, target_vector = vectors
    n_heads, width = source_vector.shape
    projected = (inputs @ weight).reshape(inputs.shape[0], n_heads, width)
    source_scores = np.einsum("nhf,hf->nh", projected, source_vector)
    target_rows = projected if edges.targets is None else projected[edges.targets]
    target_scores = np.einsum("nhf,hf->nh", target_rows, target_vector)
    n_rows, n_edges = edges.indptr.size - 1, edges.indices.size
    dtype = projected.dtype
    weights = np.empty((n_edges if store else 0, n_heads), dtype=dtype)
    out = np.empty((n_rows, n_heads, width), dtype=dtype)
    mask = np.empty((0, n_heads), dtype=dtype) if mask is None else mask
    slope = dtype.type(_NEGATIVE_SLOPE)
    _run(attend, edges.indptr, edges.indices, target_scores, source_scores, projected, slope, mask, weights, out,
         work=n_edges * projected[0].size)
    return out, (projected, source_scores, target_scores, weights, mask)


def _attention_layer_backward(grad_out, inputs, weight, vectors, edges, cache, need_inputs):
    """Gradients of one layer's inputs (None unless ``need_inputs``), weight and attention vectors."""
    source_vector, target_vector = vectors
    projected, source_scores, target_scores, weights, mask = cache
    n_columns, n_heads, _ = projected.shape
    grad_logits = np.empty_like(weights)
    grad_target = np.empty_like(target_scores)
    slope = projected.dtype.type(_NEGATIVE_SLOPE)
    work = edges.indices.size * projected[0].size
    _run(attend_backward_rows, edges.indptr, edges.indices, target_scores, source_scores, projected, slope, mask,
         weights, grad_out, grad_logits, grad_target, work=work)
    grad_projected = np.empty_like(projected)
    grad_source = np.empty((n_columns, n_heads), dtype=projected.dtype)
    _run(attend_backward_columns, edges.column_indptr, edges.column_entries, edges.entry_rows, mask, weights,
         grad_out, grad_logits, grad_projected, grad_source, work=work)
    grad_projected += grad_source[:, :, None] * source_vector
    grad_projected[edges.targets] += grad_target[:, :, None] * target_vector  # targets are distinct
    grad_source_vector = np.einsum("nh,nhf->hf", grad_source, projected)
    grad_target_vector = np.einsum("nh,nhf->hf", grad_target, projected[edges.targets])
    flat = _flush_tiny(grad_projected.reshape(n_columns, -1))
    grad_inputs = flat @ weight.T if need_inputs else None
    return grad_inputs, inputs.T @ flat, grad_source_vector, grad_target_vector


def _elu(values):
    """``x`` where ``x > 0``, else ``exp(x) - 1``."""
    return np.where(values > 0, values, np.expm1(np.minimum(values, 0)))


def _forward(params, inputs, edges, masks, store=False):
    """Logits of the second layer's rows and the intermediates the backward pass needs."""
    w1, source1, target1, b1, w2, source2, target2, b2 = params
    input_mask, first_attention_mask, hidden_mask, second_attention_mask = masks
    dropped_inputs = inputs if input_mask is None else inputs * input_mask
    first, first_cache = _attention_layer(dropped_inputs, w1, (source1, target1), edges[0], first_attention_mask, store)
    pre_activation = first.reshape(first.shape[0], -1) + b1
    hidden = _elu(pre_activation)
    if hidden_mask is not None:
        hidden *= hidden_mask
    second, second_cache = _attention_layer(hidden, w2, (source2, target2), edges[1], second_attention_mask, store)
    logits = second.mean(axis=1) + b2
    return logits, (dropped_inputs, first_cache, pre_activation, hidden, second_cache)


def _gat_loss_and_gradients(params, inputs, edges, targets, weight_decay, masks=(None,) * 4):
    """Mean cross-entropy on the seeds and its gradients.

    Parameters
    ----------
    params : list of ndarray
        ``W1 (n_features, heads * hidden)``, the first layer's source and target
        attention vectors ``(heads, hidden)`` and bias ``(heads * hidden,)``, then
        ``W2 (heads * hidden, output_heads * n_classes)``, the second layer's
        attention vectors ``(output_heads, n_classes)`` and bias ``(n_classes,)``.
    inputs : ndarray of shape (n_inputs, n_features)
        Features of the first layer's input rows.
    edges : (_Edges, _Edges)
        Of the two layers (see :func:`_training_problem`), with their transposes.
    targets : ndarray of shape (n_seeds, n_classes)
        One-hot labels of the second layer's rows (times a seed's count, see
        :func:`fastprop.baselines.gcn._seed_cross_entropy`).
    weight_decay : float
        The loss includes ``weight_decay / 2`` times the squared norm of every
        weight and attention vector (not the biases).
    masks : tuple of four ndarray or None
        Inverted-dropout masks (entries 0 or ``1 / keep``) of the inputs, the first
        layer's attention, the hidden layer and the second layer's attention; None
        disables that dropout.

    Returns
    -------
    loss : float
    gradients : list of ndarray
        Same shapes and order as ``params``.
    """
    w1, source1, target1, _, w2, source2, target2, _ = params
    logits, (dropped_inputs, first_cache, pre_activation, hidden, second_cache) = _forward(
        params, inputs, edges, masks, store=True
    )
    log_proba = log_softmax(logits, axis=1)
    decayed = (w1, source1, target1, w2, source2, target2)
    penalty = 0.5 * weight_decay * sum(_squared_norm(p) for p in decayed)
    loss, grad_logits = _seed_cross_entropy(log_proba, targets)
    loss += penalty
    output_heads = source2.shape[0]
    grad_second = np.repeat(grad_logits[:, None, :] / output_heads, output_heads, axis=1)
    grad_hidden, grad_w2, grad_source2, grad_target2 = _attention_layer_backward(
        grad_second, hidden, w2, (source2, target2), edges[1], second_cache, need_inputs=True
    )
    if masks[2] is not None:
        grad_hidden *= masks[2]
    grad_pre = grad_hidden * np.where(pre_activation > 0, 1, np.exp(np.minimum(pre_activation, 0)))
    grad_first = grad_pre.reshape(grad_pre.shape[0], *source1.shape)
    _, grad_w1, grad_source1, grad_target1 = _attention_layer_backward(
        grad_first, dropped_inputs, w1, (source1, target1), edges[0], first_cache, need_inputs=False
    )
    gradients = [grad_w1, grad_source1, grad_target1, grad_pre.sum(axis=0),
                 grad_w2, grad_source2, grad_target2, grad_logits.sum(axis=0)]
    for index in (0, 1, 2, 4, 5, 6):
        gradients[index] += weight_decay * params[index]
    return loss, gradients


def _attention_vectors(rng, n_heads, width, dtype):
    """Glorot initialisation of ``n_heads`` attention vectors of length ``width`` (fan-out 1 each)."""
    limit = np.sqrt(6.0 / (width + 1))
    return rng.uniform(-limit, limit, size=(n_heads, width)).astype(dtype)


def _initial_params(rng, n_features, heads, hidden, output_heads, n_classes, dtype):
    """Glorot weights and attention vectors, zero biases, in the order of :func:`_gat_loss_and_gradients`."""
    width = heads * hidden
    return [
        _glorot(rng, n_features, width, dtype),
        _attention_vectors(rng, heads, hidden, dtype),
        _attention_vectors(rng, heads, hidden, dtype),
        np.zeros(width, dtype=dtype),
        _glorot(rng, width, output_heads * n_classes, dtype),
        _attention_vectors(rng, output_heads, n_classes, dtype),
        _attention_vectors(rng, output_heads, n_classes, dtype),
        np.zeros(n_classes, dtype=dtype),
    ]


def _dropout_masks(rng, inputs, edges, params, rate):
    """One epoch's masks: inputs, first attention, hidden layer, second attention."""
    dtype = inputs.dtype.type
    heads, output_heads = params[1].shape[0], params[5].shape[0]
    n_hidden_rows = edges[0].indptr.size - 1
    return (
        _dropout_mask(rng, inputs.shape, rate, dtype),
        _dropout_mask(rng, (edges[0].indices.size, heads), rate, dtype),
        _dropout_mask(rng, (n_hidden_rows, params[3].size), rate, dtype),
        _dropout_mask(rng, (edges[1].indices.size, output_heads), rate, dtype),
    )


def _train(params, inputs, edges, targets, *, weight_decay, dropout, learning_rate, max_epochs, rng):
    """Adam on :func:`_gat_loss_and_gradients` for ``max_epochs`` full-batch steps."""
    optimiser = Adam(params, learning_rate)
    for _ in range(max_epochs):
        masks = _dropout_masks(rng, inputs, edges, params, dropout)
        _, gradients = _gat_loss_and_gradients(params, inputs, edges, targets, weight_decay, masks)
        optimiser.step(gradients)
    return params


def _check_size(n_samples, n_features, n_edges, n_classes, heads, hidden, output_heads):
    """Refuse up front a network whose float32 arrays exceed the machine's memory."""
    width = heads * hidden
    n_bytes = 4 * (
        n_samples * (2 * n_features + 4 * width)  # the dropped inputs and their mask, hidden layers
        + 3 * n_edges * (heads + output_heads)  # attention, its gradient and its mask
        + 4 * width * (n_features + output_heads * n_classes)  # weights, gradients and Adam's moments
    )
    check_memory(n_bytes, f"GAT(heads={heads}, hidden={hidden}, output_heads={output_heads}) on {n_samples:,} "
                 f"samples x {n_features} features", "use fewer heads or a smaller hidden layer.")


class GAT(GraphBaseline):
    """Two-layer graph attention network (Veličković et al., 2018).

    The first layer has ``heads`` attention heads of ``hidden`` units each, an
    ELU and concatenation; the second gives the class logits from
    ``output_heads`` heads, averaged. Each head weighs a vertex's closed kNN
    neighbourhood (itself included) by ``softmax_j LeakyReLU(a^T [W h_i || W h_j])``
    (slope 0.2). Trained full batch with Adam on the mean cross-entropy of the
    seeds, in float32, without a deep-learning framework and without any
    N x N array.

    Parameters
    ----------
    n_neighbors : int, default=30
        Neighbours of the cosine kNN graph built when ``fit`` gets no ``graph``.
    heads : int, default=8
        Attention heads of the first layer, at least 1.
    hidden : int, default=8
        Units of each first-layer head (the hidden layer has ``heads * hidden``), at least 1.
        Sizes whose arrays (about ``16 * heads * hidden`` bytes a sample) exceed the
        machine's memory are a ValueError before anything is allocated.
    output_heads : int, default=1
        Attention heads of the second layer, whose logits are averaged, at least 1.
    dropout : float, default=0.6
        Dropout rate in [0, 1), applied during training to both layers' inputs
        and to both layers' attention coefficients.
    weight_decay : float, default=5e-4
        L2 penalty ``weight_decay / 2 * ||w||^2`` on every weight matrix and
        attention vector (not the biases), ``>= 0``.
    learning_rate : float, default=0.005
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
        Softmax outputs; seeds get their one-hot row. An isolated vertex
        attends to itself only.
    confidence_ : ndarray of shape (n_samples,)
    transduction_ : ndarray of shape (n_samples,)
    n_iter_ : int
        Epochs run (always ``max_epochs``).

    Notes
    -----
    The graph's weights are not used: as in the paper, attention replaces
    them and only the neighbourhoods count. The paper stops early on a
    validation set; none is available here, so training runs ``max_epochs``
    epochs. Only the seeds' two-hop receptive field enters the training steps
    (see the module notes), the final prediction uses all rows. With
    ``graph=None`` and more than ``fastprop.graph.EXACT_SEARCH_MAX_SAMPLES``
    samples the graph comes from multi-threaded hnswlib, which is not
    deterministic: pass ``graph`` for reproducible results at that scale.

    Examples
    --------
    >>> import numpy as np
    >>> from fastprop.baselines import GAT
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(3, 1, (50, 8)), rng.normal(-3, 1, (50, 8))])
    >>> y = np.full(100, -1); y[:5], y[50:55] = 0, 1
    >>> model = GAT(n_neighbors=10, random_state=0).fit(X, y)
    >>> print((model.transduction_ == np.repeat([0, 1], 50)).mean())
    1.0
    """

    def __init__(
        self,
        n_neighbors=30,
        *,
        heads=8,
        hidden=8,
        output_heads=1,
        dropout=0.6,
        weight_decay=5e-4,
        learning_rate=0.005,
        max_epochs=200,
        random_state=None,
        unlabeled=-1,
    ):
        self.n_neighbors = n_neighbors
        self.heads = heads
        self.hidden = hidden
        self.output_heads = output_heads
        self.dropout = dropout
        self.weight_decay = weight_decay
        self.learning_rate = learning_rate
        self.max_epochs = max_epochs
        self.random_state = random_state
        self.unlabeled = unlabeled

    def _check_params(self):
        return {
            "heads": check_integer("heads", self.heads, low=1),
            "hidden": check_integer("hidden", self.hidden, low=1),
            "output_heads": check_integer("output_heads", self.output_heads, low=1),
            **check_training(self),
        }

    def _scores(self, problem, *, heads, hidden, output_heads, max_epochs, rng, **training):
        dtype = np.float32
        n_samples, n_features = problem.features.shape
        n_classes = problem.classes.size
        closed = _closed_neighbourhoods(problem.graph)
        _check_size(n_samples, n_features, closed.nnz, n_classes, heads, hidden, output_heads)
        inputs, edges = _training_problem(closed, problem.features, problem.seeds)
        params = _initial_params(rng, n_features, heads, hidden, output_heads, n_classes, dtype)
        targets = problem.targets[problem.seeds].astype(dtype)
        params = _train(params, inputs, edges, targets, max_epochs=max_epochs, rng=rng, **training)
        self.n_iter_ = max_epochs
        whole_graph = (_Edges(closed.indptr, closed.indices),) * 2
        logits, _ = _forward(params, problem.features, whole_graph, (None,) * 4)
        return softmax(logits.astype(np.float64), axis=1)
