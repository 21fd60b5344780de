"""Where a new point is labelled: its neighbourhood among the fitted samples, the fitted predictor.

A fitted FastProp labels its own samples with the local predictor applied to
each sample's whole-graph neighbourhood, ``softmax(S^depth L + b)`` with
``S = D~^-1 (W + I)`` the random walk with self loops and ``L = (X / |X|) W``
its logits. A new point ``x`` joins that graph as a vertex with edges to its
``n_neighbors`` nearest fitted samples (weight ``max(cos, 0)``, as the graph's
own edges; on a graph of other weights, put on their scale:
:func:`graph_weight_map`) and no edge pointing back, so no fitted sample's neighbourhood
changes. Its smoothed logits then follow from the fitted samples' levels
``S^k L`` (``k < depth``), which the fit keeps:

``l_0 = L_x``, ``l_{k+1} = (l_k + sum_j w_j (S^k L)_j) / (1 + sum_j w_j)``.

For a fitted sample given its own graph row this is exactly the label
``fit`` gave it (``labels="graph"``). That is :class:`LinearScorer`; the
two-layer local predictors (``local_predictor="gcn"`` or ``"gat"``) label a
new point the same way, as a vertex of the fitted graph with no edge back,
from what their first layer computed at each fitted sample
(:mod:`fastprop.local_networks`).

Its confidence starts as the similarity-weighted share of neighbour
confidence that agrees with it, ``a_x = sum_j w_j c_j [class_j == class_x] /
sum_j w_j``, with ``c_j`` the fitted final confidence and ``class_j`` the
fitted class (before rejection): a point among confident samples of its own
class scores high; a point among outliers, or among samples that disagree
with it, low. An average is narrower than what it averages, so ``a_x`` is
then mapped onto the scale of ``confidence_`` by quantiles: the fit computes
``a_i`` of every unlabeled fitted sample from its graph row, and a new point
whose ``a_x`` is the q-quantile of those gets the q-quantile of their
confidence. The mapping keeps the order (and so the outlier AUROC) and makes
the fitted outlier threshold reject new points at the rate it rejects fitted
samples like them (bench/RESULTS.md, issue #14: on HWU64 at 30% outliers,
one seed, accuracy with rejection 62.9% without the mapping, 65.2% with it).
Agreement is a share, blind to how far the neighbours are: a point at right
angles to every fitted sample would keep the confidence of the samples it
is nearest to. So a point whose local density (the mean of its edge
weights) is below that of every fitted sample with an edge
(:func:`fastprop.graph_signals.local_density`) has its confidence scaled by
the ratio: it lies further out than anything the fit saw, and reaches 0 as
its similarities do.

When the fit calibrated its confidence on a validation set
(:func:`fastprop.calibration.calibrate_on_validation`), ``a_x`` is mapped
onto the scale of the confidence *before* calibration instead, and the
fitted calibration then takes it with the new point's own graph signals
(:class:`NewPointCalibration`): its reaches from the in-class sources and
the validation outliers, read off the fitted graph through its edges, and
its local density, the mean of its edge weights. Its neighbours' agreeing
confidence says what the graph around it looks like; its signals say where
it lies (bench/RESULTS.md: new points' outlier AUROC +1.1 to +2.4 points, and
+0.9 to +5.6 on MNIST and with 50 intents).

That view of a sample helps the fitted samples too: a calibrated fit gives
each the mean of its own calibrated confidence and of what a new point at
its place gets (:func:`rescored_as_new_points`, from its graph row;
:data:`NEIGHBOURHOOD_SHARE`). New points get the latter alone, from the
calibrated confidence before that mean.

Neighbours are found exactly (blocked products) up to
:data:`fastprop.graph.EXACT_SEARCH_MAX_SAMPLES` fitted samples; above, in an
hnswlib index built on first use (and kept, also when pickled); threads that
ask for it together wait for one build (a lock per model, which a forked child
makes anew: an import-time ``os.register_at_fork`` hook).
"""

import os
import threading
import weakref

import numpy as np
from scipy.special import softmax

from ._kernels.agreement import agreement_rows
from ._kernels.copies import spread_to_copies
from ._kernels.topk import top_k_rows
from .adjacency import BLOCK_ROWS
from .copies import RowSubset, copy_groups
from .graph_signals import density_from_neighbours, local_density, reach_from_neighbours
from .graph import EXACT_SEARCH_MAX_SAMPLES, _hnsw_index, _resolve_n_jobs
from .locality import insertion_order, spatial_order
from .rows import SIMILARITY_BLOCK_BYTES, float64_scaled_rows, unit_rows

#: New points labelled at a time (bounds the (rows, n_neighbors, n_classes) gathers).
ROWS_PER_BLOCK = 2048
#: Quantiles of the fitted samples' agreement and confidence kept for the mapping between them.
N_QUANTILES = 1025
#: With a calibrated confidence, the share of a fitted sample's final confidence that is its rescoring as a new
#: point at its place (:func:`rescored_as_new_points`); the rest is its calibrated confidence. Measured 0 / 0.5 /
#: 1 (bench/RESULTS.md): points a cell with outliers, 0.5 / 1 / 5% seeds, +0.44 / +0.74 / +0.33 at 0.5 and
#: +0.69 / +0.80 / +0.25 at 1 over 0, HWU64 at 0.5% seeds losing up to 0.8 points at 1.
NEIGHBOURHOOD_SHARE = 0.5
#: Edges of the fitted graph :func:`graph_weight_map` compares with their cosine similarities, at most,
#: and how many it takes at a time (float32 pairs of rows: 6 MB at 384 features).
WEIGHT_SAMPLE_EDGES = 8192
WEIGHT_SAMPLE_BLOCK = 2048
#: A graph whose sampled weights are all within this of ``max(cos, 0)`` has cosine weights (float32
#: products, these and hnswlib's distances, round at ~1e-6), and new points' weights stay as they are.
COSINE_WEIGHT_TOLERANCE = 1e-4
#: hnswlib settings of the index built for new points (as :func:`fastprop.build_knn_graph`'s).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 100
#: Each predictor's lock, held while its index for new points is built (once a model), so that threads
#: predicting at once build it once and one model's build does not hold up another model's.
_INDEX_BUILDS = weakref.WeakKeyDictionary()
_INDEX_BUILDS_GUARD = threading.Lock()


def _index_build_lock(predictor):
    """The lock of ``predictor``'s index build, made on first use (a lock cannot be pickled with it)."""
    with _INDEX_BUILDS_GUARD:
        return _INDEX_BUILDS.setdefault(predictor, threading.Lock())


def _after_fork_in_child():
    """A forked child builds its own indexes: a build on another thread at the fork held a lock no thread here frees."""
    global _INDEX_BUILDS, _INDEX_BUILDS_GUARD
    _INDEX_BUILDS = weakref.WeakKeyDictionary()
    _INDEX_BUILDS_GUARD = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class NeighbourhoodPredictor:
    """What a fitted FastProp keeps to label new points.

    Parameters
    ----------
    features : ndarray of shape (n_samples, n_features), float32
        The fitted embeddings as checked by ``fit`` (not copied: ``X`` itself
        when it already was C-contiguous float32, so do not modify it).
    row_scale : ndarray of shape (n_samples,) or None
        Their inverse norms (None: unit rows).
    scorer : LinearScorer, fastprop.local_networks.LocalGCN or LocalGAT
        The fitted local predictor: its ``logits_of_rows(unit, indices,
        weights)`` gives the logits of points from their unit rows and their
        graph rows into the fitted samples.
    n_neighbors : int
    confidence : ndarray of shape (n_samples,)
        The fitted confidence new points' agreement reads: the final one, or,
        with ``calibration``, the calibrated one before the neighbourhood's
        share (:data:`NEIGHBOURHOOD_SHARE`).
    fitted_class : ndarray of shape (n_samples,), int64
        The fitted class index of each sample, before rejection (seeds: their own).
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        The fitted graph, read once for the confidence mapping and, without
        ``calibration``, the least local density of its samples (not kept).
    unlabeled : ndarray of int
        The fitted samples whose confidence was estimated (not seeds).
    seed : int
        Seeds the hnswlib index, when one is built.
    build_jobs : int or None
        Threads building it (1 keeps it reproducible; None: every core of
        the machine that builds it).
    calibration : NewPointCalibration or None, default=None
        The fit's calibration, when it made one (its quantile map then puts new
        points' agreement on the scale of the confidence before calibration).
    owns_features : bool, default=False
        ``features`` is a copy ``fit`` made (``X`` was not C-contiguous
        float32): :attr:`nbytes` counts it.
    """

    #: The rows of each group of identical fitted rows (:class:`fastprop.copies.GroupLists`) once the index
    #: holds one row of each group (None: every row, and pickles made before it existed).
    copies = None

    def __init__(self, features, row_scale, scorer, n_neighbors, confidence, fitted_class, graph, unlabeled, seed,
                 build_jobs, calibration=None, owns_features=False):
        self.features = features
        self.owns_features = bool(owns_features)
        self.row_scale = row_scale
        self.scorer = scorer
        self.n_neighbors = int(min(n_neighbors, features.shape[0]))
        self.confidence = confidence
        self.fitted_class = fitted_class
        self.seed = int(seed)
        self.build_jobs = build_jobs
        self.index = None
        self.calibration = calibration
        self.to_graph_weights = graph_weight_map(graph, features, row_scale)
        self.density_floor = 0.0
        if calibration is None:
            agreement_values = graph_agreement(graph, confidence, fitted_class)[unlabeled]
            self.to_confidence_scale = QuantileMap(agreement_values, confidence[unlabeled])
            density = local_density(graph, self.n_neighbors)
            positive = density[density > 0]  # an isolated vertex has none: it sets no floor
            self.density_floor = float(positive.min()) if positive.size else 0.0
        else:  # the fit made this map for its own samples already
            self.to_confidence_scale = calibration.to_method_scale

    @property
    def nbytes(self):
        """Bytes held for prediction: the fitted embeddings too when they are ``fit``'s own copy, not its ``X``."""
        arrays = [*self.scorer.arrays, self.confidence, self.fitted_class, *self.to_confidence_scale.arrays]
        if self.owns_features:
            arrays.append(self.features)
        if self.to_graph_weights is not None:
            arrays += self.to_graph_weights.arrays
        if self.calibration is not None:
            arrays += self.calibration.arrays
        if self.row_scale is not None:
            arrays.append(self.row_scale)
        if self.copies is not None:
            arrays += list(vars(self.copies).values())  # a GroupLists (a CopyGroups in older pickles)
        held = sum(array.nbytes for array in arrays)
        if self.index is not None:
            # hnswlib keeps a copy of the vectors and, per element, a level-0 list of 2 * M links
            held += self.index.get_current_count() * (4 * self.features.shape[1] + 4 * (2 * HNSW_M + 1) + 8)
        return held

    def neighbours(self, unit):
        """The ``n_neighbors`` nearest fitted samples of each row of ``unit`` and their edge weights.

        Returns
        -------
        indices : ndarray of shape (n_rows, n_neighbors), int64
        weights : ndarray of shape (n_rows, n_neighbors), float64
            ``max(cos, 0)``, on the fitted graph's scale when its weights are
            not cosine similarities (:func:`graph_weight_map`).
        """
        if self.features.shape[0] > EXACT_SEARCH_MAX_SAMPLES:
            indices, similarities = self._approximate_neighbours(unit)
        else:
            indices, similarities = self._exact_neighbours(unit)
        weights = np.maximum(similarities.astype(np.float64), 0.0)
        if self.to_graph_weights is not None:
            weights = np.where(weights > 0, self.to_graph_weights(weights), 0.0)
        return indices, weights

    def _approximate_neighbours(self, unit):
        """:meth:`neighbours`' indices and cosine similarities from hnswlib, the exact search's where it fails.

        hnswlib cannot return ``n_neighbors`` for some points of some indexes
        (many duplicates of a few directions): then each row is queried on
        its own, with the same ``ef``, and a row hnswlib fails on gets the
        exact search's neighbours. A row's neighbours thus never depend on
        the other rows queried with it. Where fitted rows have identical
        copies the index holds one row of each group (:mod:`fastprop.copies`),
        and the nearest groups' rows are listed, each group's in row order.
        """
        index = self._hnsw()
        k = self.n_neighbors if self.copies is None else min(self.n_neighbors, self.copies.n_groups)
        index.set_ef(max(2 * k, 64))
        try:
            labels, distances = index.knn_query(unit, k=k)
            return self._spread(labels.astype(np.int64), 1.0 - distances)
        except RuntimeError:
            pass
        found = np.empty((unit.shape[0], k), dtype=np.int64)  # the index's labels: rows, or groups of copies
        found_similarities = np.empty((unit.shape[0], k), dtype=np.float32)
        answered = np.zeros(unit.shape[0], dtype=bool)
        for row in range(unit.shape[0]):
            try:
                labels, distances = index.knn_query(unit[row : row + 1], k=k)
                found[row], found_similarities[row] = labels[0], 1.0 - distances[0]
                answered[row] = True
            except RuntimeError:
                pass
        indices = np.empty((unit.shape[0], self.n_neighbors), dtype=np.int64)
        similarities = np.empty((unit.shape[0], self.n_neighbors), dtype=np.float32)
        indices[answered], similarities[answered] = self._spread(found[answered], found_similarities[answered])
        for row in np.flatnonzero(~answered):  # one at a time: a row's answer never depends on the others
            exact = self._exact_neighbours(unit[row : row + 1])
            indices[row], similarities[row] = exact[0][0], exact[1][0]
        return indices, similarities

    def _spread(self, groups, similarities):
        """Rows' neighbours from their nearest groups' (the index's labels): the groups' rows, nearest first."""
        if self.copies is None:
            return groups, similarities
        n_rows = groups.shape[0]
        indices = np.empty((n_rows, self.n_neighbors), dtype=np.int64)
        spread = np.empty((n_rows, self.n_neighbors), dtype=np.float32)
        spread_to_copies(np.full(n_rows, -1, dtype=np.int64), np.arange(n_rows, dtype=np.int64),
                         self.copies.group_start, self.copies.group_rows, groups,
                         np.ascontiguousarray(similarities, dtype=np.float32), indices, spread)
        return indices, spread

    def _exact_neighbours(self, unit):
        """:meth:`neighbours`' indices and cosine similarities by an exact search, a block of rows at a time."""
        n_rows, k = unit.shape[0], self.n_neighbors
        indices = np.empty((n_rows, k), dtype=np.int64)
        similarities = np.empty((n_rows, k), dtype=np.float32)
        block = max(1, SIMILARITY_BLOCK_BYTES // (4 * self.features.shape[0]))
        for start in range(0, n_rows, block):
            stop = min(start + block, n_rows)
            scores = unit[start:stop] @ self.features.T
            if self.row_scale is not None:
                scores *= self.row_scale.astype(np.float32)
            # first_row below zero: no column is skipped as the row's own
            top_k_rows(scores, k, -(stop - start) - 1, indices[start:stop], similarities[start:stop])
        return indices, similarities

    def _hnsw(self):
        if self.index is None:
            with _index_build_lock(self):  # threads predicting at once for the first time: one build, not one each
                if self.index is None:
                    copies = copy_groups(self.features)
                    indexed = self.features if copies is None else RowSubset(self.features, copies.representatives)
                    rng = np.random.default_rng(self.seed)
                    order = insertion_order(spatial_order(indexed, rng), rng)
                    self.copies = None if copies is None else copies.group_lists()
                    self.index = _hnsw_index(indexed, order, M=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION,
                                             seed=self.seed, build_jobs=_resolve_n_jobs(self.build_jobs))
        return self.index

    def predict(self, features):
        """Class distributions and confidences of new points.

        Parameters
        ----------
        features : ndarray of shape (n_rows, n_features), float32
            Checked rows (any non-zero norm).

        Returns
        -------
        distributions : ndarray of shape (n_rows, n_classes)
        confidence : ndarray of shape (n_rows,)
        """
        n_rows = features.shape[0]
        distributions = None
        confidence = np.empty(n_rows)
        for start in range(0, n_rows, ROWS_PER_BLOCK):
            stop = min(start + ROWS_PER_BLOCK, n_rows)
            unit = unit_rows(features[start:stop])
            indices, weights = self.neighbours(unit)
            block = softmax(self.scorer.logits_of_rows(unit, indices, weights), axis=1)
            if distributions is None:
                distributions = np.empty((n_rows, block.shape[1]))
            distributions[start:stop] = block
            confidence[start:stop] = self.confidence_of_rows(distributions[start:stop].argmax(axis=1),
                                                             indices, weights)
        return distributions, confidence

    def confidence_of_rows(self, predicted, indices, weights):
        """Confidence of points of class ``predicted`` with graph rows ``(indices, weights)``.

        Their agreement (:func:`agreement`) mapped onto the fitted confidence by
        quantiles, then calibrated with their graph signals when the fit was
        (:class:`NewPointCalibration`), or else scaled by their local density
        over ``density_floor`` where that is below 1 (the mean of ``n_neighbors``
        edge weights against the least fitted mean of up to as many: on a
        given graph sparser than ``n_neighbors`` the floor is set by fewer,
        larger weights); 0 for a point without any neighbour of positive
        similarity.
        """
        on_scale = self.on_confidence_scale(agreement(predicted, indices, weights, self.confidence, self.fitted_class))
        if self.calibration is not None:
            on_scale = self.calibration(on_scale, indices, weights)
        elif self.density_floor > 0:  # a point further from the data than every fitted sample is
            on_scale = on_scale * np.minimum(density_from_neighbours(weights) / self.density_floor, 1.0)
        return np.where(weights.sum(axis=1) > 0, on_scale, 0.0)

    def on_confidence_scale(self, agreement_values):
        """The fitted confidence at the quantile of ``agreement_values`` among the fitted samples' agreement.

        The confidence before calibration when the fit calibrated it.

        Piecewise linear between the ``N_QUANTILES`` quantiles, constant beyond the extremes.
        """
        return self.to_confidence_scale(agreement_values)

    @property
    def confidence_quantiles(self):
        """The quantiles of the fitted confidence new points' agreement is mapped onto."""
        return self.to_confidence_scale.target_quantiles


def graph_weight_map(graph, features, row_scale):
    """The map from a new point's cosine similarities to the fitted graph's weights; None for a cosine graph.

    A graph given to ``fit`` may weigh its edges otherwise than
    :func:`fastprop.build_knn_graph` (``max(cos, 0)``): scaled, a kernel of
    the distance, binary. A new point's edges must be on the same scale, or
    its local density, its walk's stay and its neighbours' weights are read
    against the wrong ones. Up to :data:`WEIGHT_SAMPLE_EDGES` edges of the
    graph, evenly spaced in its storage, give pairs of cosine similarity and
    weight; the quantiles of the first are mapped onto the quantiles of the
    second (:class:`QuantileMap`: exact for an increasing function of the
    cosine, the best increasing guess otherwise). When every sampled weight is
    within :data:`COSINE_WEIGHT_TOLERANCE` of ``max(cos, 0)``, new points'
    weights stay as they are (None).

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
    features : ndarray of shape (n_samples, n_features), float32
    row_scale : ndarray of shape (n_samples,) or None
        Inverse row norms (None: unit rows).

    Returns
    -------
    QuantileMap or None
    """
    if graph.nnz == 0:
        return None
    positions = np.arange(0, graph.nnz, max(1, graph.nnz // WEIGHT_SAMPLE_EDGES))
    rows = np.searchsorted(graph.indptr, positions, side="right") - 1
    columns = graph.indices[positions]
    cosine = np.empty(positions.size)
    for begin in range(0, positions.size, WEIGHT_SAMPLE_BLOCK):
        block = slice(begin, begin + WEIGHT_SAMPLE_BLOCK)
        cosine[block] = np.einsum("ij,ij->i", features[rows[block]], features[columns[block]])
    if row_scale is not None:
        cosine *= row_scale[rows] * row_scale[columns]
    cosine = np.maximum(cosine, 0.0)
    weights = graph.data[positions].astype(np.float64)
    if np.abs(weights - cosine).max() <= COSINE_WEIGHT_TOLERANCE:
        return None
    return QuantileMap(cosine, weights)


class QuantileMap:
    """The increasing map sending the q-quantile of ``source`` to the q-quantile of ``target``.

    Piecewise linear between their :data:`N_QUANTILES` quantiles, constant
    beyond the extremes; a run of tied quantiles of ``source`` (e.g. many
    samples of agreement 0) stands at the middle of its run. With no sample
    at all, the identity on [0, 1].

    Parameters
    ----------
    source, target : ndarray of shape (n,)
    """

    def __init__(self, source, target):
        levels = np.linspace(0.0, 1.0, N_QUANTILES)
        if source.size:
            quantiles = np.quantile(source, levels)
            self.target_quantiles = np.quantile(target, levels)
        else:
            quantiles = self.target_quantiles = levels
        self.knots, first, counts = np.unique(quantiles, return_index=True, return_counts=True)
        self.positions = first + (counts - 1) / 2.0

    def __call__(self, values):
        position = np.interp(values, self.knots, self.positions)
        return np.interp(position, np.arange(N_QUANTILES, dtype=np.float64), self.target_quantiles)

    @property
    def arrays(self):
        """What is held."""
        return [self.knots, self.positions, self.target_quantiles]


def rescored_as_new_points(graph, calibrated_confidence, method_confidence, fitted_class, unlabeled, confidence_map,
                           signal_values):
    """The ``unlabeled`` fitted samples' confidence as new points at their places get it.

    Each sample's neighbours' agreeing calibrated confidence (its graph
    row's :func:`agreement`), put on the scale of the confidence before
    calibration by quantiles and calibrated with the sample's own graph
    signals: what :class:`NeighbourhoodPredictor` gives a new point, from the
    fitted graph row instead of a new point's edges.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
    calibrated_confidence, method_confidence : ndarray of shape (n_samples,)
        The fitted confidence after and before :func:`fastprop.calibration.calibrate_on_validation`.
    fitted_class : ndarray of shape (n_samples,)
    unlabeled : ndarray of int
    confidence_map : fastprop.calibration.ConfidenceMap
        The calibration fitted.
    signal_values : sequence of ndarray of shape (n_samples,)
        The fitted samples' graph signals, in the calibration's order.

    Returns
    -------
    rescored : ndarray of shape (unlabeled.size,)
    to_method_scale : QuantileMap
        The map from the agreement to the scale of the confidence before
        calibration (new points' too: :class:`NewPointCalibration`).
    """
    agreeing = graph_agreement(graph, calibrated_confidence, fitted_class)[unlabeled]
    to_method_scale = QuantileMap(agreeing, method_confidence[unlabeled])
    return confidence_map(to_method_scale(agreeing), [values[unlabeled] for values in signal_values]), to_method_scale


class NewPointCalibration:
    """The fit's calibration of its confidence, for new points: their graph signals from their edges.

    A new point is a vertex with edges ``(indices, weights)`` into the fitted
    graph and none back: its in-class reach and the validation outliers'
    (:func:`fastprop.graph_signals.reach_from_neighbours`) and its local
    density (:func:`fastprop.graph_signals.density_from_neighbours`) are those
    such a vertex has, and the fitted map takes them as it took the fitted
    samples' (in :func:`fastprop.calibration.calibrate_on_validation`'s order).

    Parameters
    ----------
    confidence_map : fastprop.calibration.ConfidenceMap
    to_method_scale : QuantileMap
        From new points' agreement to the scale of the confidence before calibration
        (:func:`rescored_as_new_points`).
    in_class_onward : ndarray of shape (n_samples,)
        :func:`fastprop.graph_signals.onward_reach` from the seeds and the validation set's in-class sources.
    outlier_onward : ndarray of shape (n_samples,) or None, default=None
        The same from its outlier sources (None when the fit had none).
    """

    def __init__(self, confidence_map, to_method_scale, in_class_onward, outlier_onward=None):
        self.confidence_map = confidence_map
        self.to_method_scale = to_method_scale
        self.in_class_onward = in_class_onward
        self.outlier_onward = outlier_onward

    def __call__(self, confidence, indices, weights):
        """The calibrated confidence of points with ``confidence`` (uncalibrated) and edges ``(indices, weights)``."""
        signals = [reach_from_neighbours(self.in_class_onward, indices, weights), density_from_neighbours(weights)]
        if self.outlier_onward is not None:
            signals.append(reach_from_neighbours(self.outlier_onward, indices, weights))
        return self.confidence_map(confidence, signals)

    @property
    def arrays(self):
        """What is held for new points."""
        return [self.in_class_onward] + ([] if self.outlier_onward is None else [self.outlier_onward])


class LinearScorer:
    """The SGC local predictor for new points: ``softmax(S^depth L + b)`` from the levels ``S^k L``.

    Parameters
    ----------
    logit_levels : sequence of ndarray of shape (n_samples, n_classes)
        ``S^k L`` for ``k = 0 .. depth - 1``, ``L = (X / |X|) W``.
    coef : ndarray of shape (n_features, n_classes)
        ``W``.
    intercept : ndarray of shape (n_classes,)
        ``b``.
    """

    def __init__(self, logit_levels, coef, intercept):
        self.logit_levels = tuple(logit_levels)
        self.coef = np.asarray(coef, dtype=np.float32)
        self.intercept = np.asarray(intercept, dtype=np.float64)

    @classmethod
    def from_later_levels(cls, features, row_scale, coef, intercept, later_levels, directions=None):
        """The scorer of the fitted SGC predictor ``(coef, intercept)``, given its levels but the first.

        Level 0, ``(X / |X|) W``, is made here, in the buffer of the float32
        ``X W`` a block of rows at a time (the float32 copy of the float64
        level the fit smooths, bit for bit): ``fit`` calls this last, so that
        this level is not held through its larger temporaries.

        Parameters
        ----------
        features : ndarray of shape (n_samples, n_features), float32
            The fitted embeddings as the predictor read them: ``X``, or ``X P``
            (``directions``).
        row_scale : ndarray of shape (n_samples,) or None
            The inverse norms of ``X`` (None: unit rows).
        coef, intercept
            See the class; ``coef`` of shape (n_kept, n_classes) with ``directions``.
        later_levels : sequence of ndarray of shape (n_samples, n_classes), float32, or None
            ``S^k L`` for ``k = 1 .. depth - 1`` (empty for depth 1); None for depth 0.
        directions : ndarray of shape (n_features, n_kept) or None
            The orthonormal directions ``P`` the predictor's features were
            projected on (:mod:`fastprop.principal`): a new point's unit row
            ``u`` then takes ``u (P W)``.

        Returns
        -------
        LinearScorer
        """
        coef_of_rows = coef if directions is None else directions @ np.asarray(coef, dtype=np.float64)
        if later_levels is None:
            return cls([], coef_of_rows, intercept)
        logits = features @ np.asarray(coef).astype(np.float32)
        for begin in range(0, logits.shape[0], BLOCK_ROWS):
            rows = slice(begin, begin + BLOCK_ROWS)
            logits[rows] = float64_scaled_rows(logits[rows], None if row_scale is None else row_scale[rows])
        levels = [logits, *later_levels]
        return cls(levels, coef_of_rows, intercept)

    def logits_of_rows(self, unit, indices, weights):
        """Logits (with ``b``) of points with unit rows ``unit`` and graph rows ``(indices, weights)``."""
        logits = unit.astype(np.float64) @ self.coef.astype(np.float64)
        closed_degree = 1.0 + weights.sum(axis=1, keepdims=True)
        for level in self.logit_levels:
            neighbourhood = np.einsum("rk,rkc->rc", weights, level[indices].astype(np.float64))
            logits = (logits + neighbourhood) / closed_degree
        return logits + self.intercept

    @property
    def arrays(self):
        """What is held for new points."""
        return [*self.logit_levels, self.coef, self.intercept]


def agreement(predicted, indices, weights, confidence, fitted_class):
    """``sum_j w_j c_j [class_j == predicted] / sum_j w_j`` of each row (0 without neighbours).

    Parameters
    ----------
    predicted : ndarray of shape (n_rows,)
    indices, weights : ndarray of shape (n_rows, n_neighbors)
    confidence, fitted_class : ndarray of shape (n_samples,)
    """
    agreeing = np.where(fitted_class[indices] == predicted[:, None], confidence[indices], 0.0)
    total = weights.sum(axis=1)
    return np.divide((weights * agreeing).sum(axis=1), total, out=np.zeros_like(total), where=total > 0)


def graph_agreement(graph, confidence, fitted_class):
    """:func:`agreement` of every fitted sample with its own graph row (a parallel kernel)."""
    result = np.empty(graph.shape[0])
    agreement_rows(graph.indptr, graph.indices, graph.data, np.ascontiguousarray(confidence, dtype=np.float64),
                   np.ascontiguousarray(fitted_class, dtype=np.int64), result)
    return result
