"""Two-layer local predictors: the paper's GCN (its Eq. 2) and GAT, inside patches (its Table 2).

``FastProp(local_predictor="gcn")`` labels a patch ``P`` with

``softmax(S_P relu(S_P X_P W1 + b1) W2 + b2)``, ``S_P = D~^-1 (A_P + I)``,

the paper's Eq. 2 with two blocks on the patch's induced affinity (the
random walk of the SGC predictor, whose two steps it interleaves with a
hidden layer of ``GCN_HIDDEN`` units). ``local_predictor="gat"`` uses the
two attention layers of :class:`fastprop.baselines.GAT` on the patch's
induced closed neighbourhoods (``GAT_HEADS`` heads of ``GAT_HIDDEN`` units,
one output head; attention replaces the affinities). Both are trained as the
baselines of the same name (initialisation, dropout, weight decay, Adam,
``max_epochs`` full-batch steps, float32) on the seeds of the training
problem: the training patches as disjoint blocks of one graph
(``predictor_training="patches"``, the paper's) or the whole graph
(``"graph"``). ``X`` is the unit rows.

A patch goes through the network with SciPy (and, for GAT, the attention
kernel of :mod:`fastprop._kernels.attention`), one patch at a time, in
float64 from the float32 weights. The whole-graph prediction is the same
network on the whole graph; what it computes at every sample is kept so
that a new point, joining the graph with no edge back, is labelled by the
same network (:meth:`LocalGCN.logits_of_rows`, :meth:`LocalGAT.logits_of_rows`).
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax

from ._kernels.views import update_patch_views
from .baselines import gat, gcn
from .linear import one_hot

#: Hidden units of the GCN local predictor (the GCN baseline has 256; 64 keeps a patch ~4x cheaper).
GCN_HIDDEN = 64
#: Heads and units per head of the GAT local predictor's first layer (the GAT baseline's defaults).
GAT_HEADS = 8
GAT_HIDDEN = 8
#: Training settings, as the baselines' defaults (``fastprop.baselines.GCN`` and ``GAT``).
GCN_TRAINING = {"weight_decay": 5e-4, "dropout": 0.5, "learning_rate": 0.01, "max_epochs": 200}
GAT_TRAINING = {"weight_decay": 5e-4, "dropout": 0.6, "learning_rate": 0.005, "max_epochs": 200}


def random_walk_matrix(adjacency, dtype=np.float64):
    """``D~^-1 (A + I)`` of a non-negative sparse ``adjacency``, as CSR of ``dtype``."""
    closed = (sp.csr_matrix(adjacency, dtype=dtype) + sp.identity(adjacency.shape[0], dtype=dtype, format="csr"))
    closed = closed.tocsr()
    inverse_degree = 1.0 / np.asarray(closed.sum(axis=1), dtype=np.float64).ravel()
    return (sp.diags(inverse_degree.astype(dtype)) @ closed).tocsr()


def training_problem(graph, seed_class, patches):
    """The graph, the rows and the seeds a local network is trained on.

    Training patches with the same members make one block, whose seeds
    count once for each of them: the loss and gradients of a block each
    (only the dropout masks, drawn per block, are fewer), without a copy of
    the block per patch. Patches repeat where one takes its whole connected
    component before reaching ``max_patch_size`` or ``min_gain`` (a small
    component, or a small data set: with 30% of 600 samples as seeds, 31
    patches of every sample, 18,600 training rows instead of 600).

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
    seed_class : ndarray of shape (n_samples,)
        Class index of the seeds, -1 elsewhere.
    patches : list of ndarray of int or None
        The training patches' members; None trains on the whole graph.

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix
        The whole graph, or the distinct patches' induced subgraphs as diagonal blocks.
    rows : ndarray of int
        The sample of each of its vertices.
    seeds : ndarray of int
        Its vertices that are seeds (a seed in several distinct patches is a training row in each).
    counts : ndarray of shape (len(seeds),), float32
        How many training patches each seed row stands for (1 on the whole graph).
    """
    if patches is None:
        seeds = np.flatnonzero(seed_class >= 0)
        return graph, np.arange(graph.shape[0]), seeds, np.ones(seeds.size, dtype=np.float32)
    first_of, distinct, repeats = {}, [], []
    for members in patches:
        key = np.sort(members).tobytes()
        if key in first_of:
            repeats[first_of[key]] += 1
        else:
            first_of[key] = len(distinct)
            distinct.append(members)
            repeats.append(1)
    rows = np.concatenate(distinct)
    block = np.repeat(np.arange(len(distinct)), [members.size for members in distinct])
    adjacency = sp.block_diag([_induced(graph, members) for members in distinct], format="csr")
    seeds = np.flatnonzero(seed_class[rows] >= 0)
    return adjacency, rows, seeds, np.asarray(repeats, dtype=np.float32)[block[seeds]]


def _induced(graph, members):
    return graph[members][:, members]


class LocalGCN:
    """The GCN local predictor (see the module notes).

    Attributes
    ----------
    params : list of ndarray, float32
        ``W1 (n_features, GCN_HIDDEN), b1, W2 (GCN_HIDDEN, n_classes), b2``.
    projected : ndarray of shape (n_samples, GCN_HIDDEN), float32
        ``X W1`` of the fitted samples (set by :meth:`prepare`).
    output_inputs : ndarray of shape (n_samples, n_classes), float32
        ``relu(S X W1 + b1) W2`` on the whole graph (set by :meth:`whole_graph_logits`):
        what each fitted sample gives a new neighbour's second layer.
    """

    def __init__(self, params):
        self.params = params
        self.projected = None
        self.output_inputs = None

    @classmethod
    def train(cls, graph, unit, seed_class, n_classes, patches, rng):
        """Train on the seeds of :func:`training_problem` (``unit``: the unit rows, float32)."""
        adjacency, rows, seeds, counts = training_problem(graph, seed_class, patches)
        walk = random_walk_matrix(adjacency, np.float32)
        inputs, propagation = gcn._training_problem(walk, unit[rows], seeds)
        params = [
            gcn._glorot(rng, unit.shape[1], GCN_HIDDEN, np.float32),
            np.zeros(GCN_HIDDEN, dtype=np.float32),
            gcn._glorot(rng, GCN_HIDDEN, n_classes, np.float32),
            np.zeros(n_classes, dtype=np.float32),
        ]
        targets = one_hot(seed_class[rows[seeds]], n_classes, np.float32) * counts[:, None]
        return cls(gcn._train(params, inputs, propagation, targets, rng=rng, **GCN_TRAINING))

    @property
    def bias(self):
        """``b2``, float64."""
        return self.params[3].astype(np.float64)

    def prepare(self, unit):
        """Project the fitted samples' unit rows once: ``X W1``."""
        self.projected = unit @ self.params[0]

    def patch_logits(self, graph, members):
        """``S_P relu(S_P X_P W1 + b1) W2`` of the patch ``members`` (without ``b2``), float64."""
        walk = random_walk_matrix(_induced(graph, members))
        w1, b1, w2, _ = (p.astype(np.float64) for p in self.params)
        hidden = np.maximum(walk @ self.projected[members].astype(np.float64) + b1, 0.0)
        return walk @ (hidden @ w2)

    def whole_graph_logits(self, walk):
        """The network on the whole graph (``walk``: its :class:`~fastprop.adjacency.RandomWalk`), without ``b2``."""
        _, b1, w2, _ = (p.astype(np.float64) for p in self.params)
        hidden = np.maximum(walk.smooth(self.projected) + b1, 0.0)
        second = hidden @ w2
        self.output_inputs = second.astype(np.float32)
        return walk.smooth(second)

    def logits_of_rows(self, unit, indices, weights):
        """Logits (with ``b2``) of new points: unit rows, graph rows ``(indices, weights)`` into the fitted samples."""
        w1, b1, w2, b2 = (p.astype(np.float64) for p in self.params)
        closed_degree = 1.0 + weights.sum(axis=1, keepdims=True)
        first = unit.astype(np.float64) @ w1
        first += np.einsum("rk,rkh->rh", weights, self.projected[indices].astype(np.float64))
        hidden = np.maximum(first / closed_degree + b1, 0.0)
        second = hidden @ w2 + np.einsum("rk,rkc->rc", weights, self.output_inputs[indices].astype(np.float64))
        return second / closed_degree + b2

    @property
    def arrays(self):
        """What is held for new points."""
        return [*self.params, self.projected, self.output_inputs]


class LocalGAT:
    """The GAT local predictor (see the module notes).

    Attributes
    ----------
    params : list of ndarray, float32
        As :func:`fastprop.baselines.gat._gat_loss_and_gradients` takes them.
    projected, source_scores : ndarray, float32
        The first layer's ``W1 x`` of the fitted samples, ``(n_samples, heads, hidden)``,
        and their source attention scores ``(n_samples, heads)`` (set by :meth:`prepare`).
    output_inputs, output_scores : ndarray, float32
        The second layer's ``W2 h`` of the fitted samples on the whole graph,
        ``(n_samples, 1, n_classes)``, and their source scores (set by
        :meth:`whole_graph_logits`).
    """

    def __init__(self, params):
        self.params = params
        self.projected = self.source_scores = None
        self.output_inputs = self.output_scores = None

    @classmethod
    def train(cls, graph, unit, seed_class, n_classes, patches, rng):
        """Train on the seeds of :func:`training_problem` (``unit``: the unit rows, float32)."""
        adjacency, rows, seeds, counts = training_problem(graph, seed_class, patches)
        inputs, edges = gat._training_problem(gat._closed_neighbourhoods(adjacency), unit[rows], seeds)
        params = gat._initial_params(rng, unit.shape[1], GAT_HEADS, GAT_HIDDEN, 1, n_classes, np.float32)
        targets = one_hot(seed_class[rows[seeds]], n_classes, np.float32) * counts[:, None]
        return cls(gat._train(params, inputs, edges, targets, rng=rng, **GAT_TRAINING))

    @property
    def bias(self):
        """Zeros: the network's logits include its bias."""
        return np.zeros(self.params[7].size)

    def prepare(self, unit):
        """Project the fitted samples' unit rows once: the first layer's ``W1 x`` and source scores."""
        self.projected = (unit @ self.params[0]).reshape(unit.shape[0], GAT_HEADS, GAT_HIDDEN)
        self.source_scores = np.einsum("nhf,hf->nh", self.projected, self.params[1])

    def patch_logits(self, graph, members):
        """The network's logits (with its bias) on the patch ``members``, float64."""
        edges = gat._Edges(*_closed_structure(_induced(graph, members)))
        _, logits = self._layers(self.projected[members].reshape(members.size, -1), edges)
        return logits.astype(np.float64)

    def whole_graph_logits(self, walk):
        """The network on the whole graph (``walk.graph`` gives its neighbourhoods), with its bias."""
        edges = gat._Edges(*_closed_structure(walk.graph))
        hidden, logits = self._layers(self.projected.reshape(self.projected.shape[0], -1), edges)
        self.output_inputs = (hidden @ self.params[4]).reshape(hidden.shape[0], 1, -1)
        self.output_scores = np.einsum("nhf,hf->nh", self.output_inputs, self.params[5])
        return logits.astype(np.float64)

    def _layers(self, projected, edges):
        """The hidden layer and the logits, from the first layer's ``W1 x`` (rows, heads * hidden).

        :func:`fastprop.baselines.gat._forward` without dropout, the first
        layer's weight applied already (an identity in its place, an exact product).
        """
        _, source1, target1, b1, w2, source2, target2, b2 = self.params
        identity = np.identity(projected.shape[1], dtype=projected.dtype)
        first, _ = gat._attention_layer(projected, identity, (source1, target1), edges, None, False)
        hidden = gat._elu(first.reshape(first.shape[0], -1) + b1)
        second, _ = gat._attention_layer(hidden, w2, (source2, target2), edges, None, False)
        return hidden, second.mean(axis=1) + b2

    def logits_of_rows(self, unit, indices, weights):
        """Logits of new points: unit rows, graph rows ``(indices, weights)``; neighbours of weight 0 are no edge."""
        w1, source1, target1, b1, w2, source2, target2, b2 = (p.astype(np.float64) for p in self.params)
        edge = weights > 0
        projected = (unit.astype(np.float64) @ w1).reshape(unit.shape[0], GAT_HEADS, GAT_HIDDEN)
        hidden = _attend_new(projected, source1, target1, self.projected[indices], self.source_scores[indices], edge)
        hidden = gat._elu(hidden.reshape(unit.shape[0], -1) + b1)
        output = (hidden @ w2).reshape(unit.shape[0], 1, -1)
        logits = _attend_new(output, source2, target2, self.output_inputs[indices], self.output_scores[indices], edge)
        return logits.mean(axis=1) + b2

    @property
    def arrays(self):
        """What is held for new points."""
        return [*self.params, self.projected, self.source_scores, self.output_inputs, self.output_scores]


def _closed_structure(adjacency):
    closed = gat._closed_neighbourhoods(adjacency)
    return closed.indptr, closed.indices


def _attend_new(own, source_vector, target_vector, neighbours, neighbour_scores, edge):
    """One attention layer at new points over themselves and their neighbours (``edge``: which count).

    ``own`` (rows, heads, width) are the points' projected inputs, ``neighbours``
    (rows, k, heads, width) and ``neighbour_scores`` (rows, k, heads) their
    neighbours'. Returns (rows, heads, width).
    """
    slope = gat._NEGATIVE_SLOPE
    target = np.einsum("rhf,hf->rh", own, target_vector)
    logits = np.concatenate([(target + np.einsum("rhf,hf->rh", own, source_vector))[:, None],
                             target[:, None] + neighbour_scores.astype(np.float64)], axis=1)
    logits = np.where(logits > 0, logits, slope * logits)
    logits[:, 1:][~edge] = -np.inf
    attention = softmax(logits, axis=1)
    values = np.concatenate([own[:, None], neighbours.astype(np.float64)], axis=1)
    return np.einsum("rkh,rkhf->rhf", attention, values)


class NetworkPatchPredictor:
    """A local network on the patches of the scheduler (see :func:`fastprop.scheduler.propagate`).

    The patches of a batch are disjoint: they are labelled one after the
    other on the calling thread (the network's products are SciPy's and
    BLAS's), which gives the result of any order.
    """

    def __init__(self, network, graph):
        self.network = network
        self.graph = graph
        self.bias = network.bias

    def process_batch(self, workspace, n_batch, state, single_view_confidence, confident_threshold):
        """Update the views of the batch's patches; returns ``(newly_confident, n_newly_confident)`` per slot."""
        for slot in range(n_batch):
            members = workspace.patches[slot, : workspace.sizes[slot]]
            scores = np.ascontiguousarray(self.network.patch_logits(self.graph, members), dtype=np.float64)
            workspace.n_newly_confident[slot] = update_patch_views(
                members, scores, self.bias, state.frozen, state.probability_sum, state.view_count, state.confidence,
                single_view_confidence, confident_threshold, workspace.newly_confident[slot],
            )
        return workspace.newly_confident, workspace.n_newly_confident


#: The local predictors :class:`fastprop.FastProp` offers besides its linear SGC.
LOCAL_NETWORKS = {"gcn": LocalGCN, "gat": LocalGAT}
