"""The calibration's graph signals: reaches from chosen samples and the local density.

FastProp's confidence judges a sample by itself; these say where it lies in
the graph, and :func:`fastprop.calibration.calibrate_on_validation` lets the
validation set weigh them (bench/RESULTS.md):

- the in-class reach (:func:`in_class_reach`): how much of a short random
  walk from a sample ends on a seed or on one of the validation set's
  in-class samples; a region none of them reaches is an unseeded cluster
  more often than not;
- the validation outliers' reach (:func:`left_out_reach`): outliers come in
  clusters of classes nobody seeded, and a known one marks its cluster;
- the local density (:func:`local_density`): the mean similarity to the
  nearest neighbours; a sample far from every other is an outlier more often
  than not.

A new point (:mod:`fastprop.prediction`) joins the graph as a vertex with
edges to its nearest fitted samples and none back; its reaches follow from
what a walk collects from each fitted sample on (:func:`onward_reach`,
:func:`reach_from_neighbours`) and its density from its own edge weights
(:func:`density_from_neighbours`).
"""

import numpy as np

from ._kernels.density import top_weight_means

#: The seeds' reach of a sample, ``sum_k REACH_DECAY^k (S^k 1_seeds)`` for ``k = 1..REACH_STEPS``
#: (``S`` the fit's random walk): how much of a short walk from it ends on a seed.
REACH_STEPS = 10
REACH_DECAY = 0.9
#: At most this many of the validation set's outliers, and as many of its in-class samples, are the sources
#: of :func:`left_out_reach` (a random choice of each beyond): each costs a walk of its own, to leave its
#: walks back to itself out.
MAX_VALIDATION_SOURCES = 64
#: Sources walked at once by :func:`left_out_reach` (an (n_samples, SOURCE_BLOCK) float64 level).
SOURCE_BLOCK = 16


def seed_reach(walk, seeds):
    """Every sample's reach from the seeds, ``sum_k REACH_DECAY^k (S^k 1_seeds)[i]``, k = 1..REACH_STEPS.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
        ``S``, the fit's random walk ``D~^-1 (W + I)``.
    seeds : ndarray of bool, shape (n_samples,)

    Returns
    -------
    ndarray of shape (n_samples,)
        In [0, REACH_DECAY / (1 - REACH_DECAY)].
    """
    walked = seeds.astype(np.float64)
    reach = np.zeros(walked.size)
    for step in range(1, REACH_STEPS + 1):
        walked = walk.smooth(walked, None, 1)
        reach += REACH_DECAY**step * walked
    return reach


def left_out_reach(walk, sources):
    """Every sample's reach from the validation samples ``sources``, each source's from the *other* sources.

    ``sum_k REACH_DECAY^k (S^k 1_sources)[i]`` as :func:`seed_reach` takes
    it, minus, for a source ``i``, its own walks back to itself
    ``sum_k REACH_DECAY^k (S^k)_ii``: a validation sample then reads what a
    sample the validation set did not hold would read, and a ranking fit on
    the validation set learns what the signal is worth on the others. From
    the validation set's outliers: they come in clusters of classes nobody
    seeded, and a sample they reach is likelier one of them. From its
    in-class samples: :func:`in_class_reach`.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
        ``S``, the fit's random walk.
    sources : ndarray of int
        Distinct samples.

    Returns
    -------
    ndarray of shape (n_samples,)
        In [0, REACH_DECAY / (1 - REACH_DECAY)].
    """
    sources = np.asarray(sources, dtype=np.int64)
    marked = np.zeros(walk.graph.shape[0], dtype=bool)
    marked[sources] = True
    reach = seed_reach(walk, marked)
    reach[sources] -= _returns(walk, sources)
    return np.maximum(reach, 0.0)  # rounding only: each source's own part is one of the terms of its sum


def _returns(walk, sources):
    """Each source's walks back to itself, ``sum_k REACH_DECAY^k (S^k)_ii`` for ``k = 1..REACH_STEPS``.

    The sources' columns of ``S^k`` are walked a block of
    :data:`SOURCE_BLOCK` at a time. On a graph with symmetric weights
    ``S^T = D~ S D~^-1`` (``D~`` the closed degrees), so ``(S^(a+b))_ii =
    sum_l d_l (S^a e_i)_l (S^b e_i)_l / d_i``: walks of ``REACH_STEPS / 2``
    steps give every term, half the steps of reading the diagonal off
    walks of ``REACH_STEPS``, which a graph with asymmetric weights takes.
    """
    n_samples = walk.graph.shape[0]
    returns = np.zeros(sources.size)
    halves = walk.symmetric
    n_steps = (REACH_STEPS + 1) // 2 if halves else REACH_STEPS
    degree = 1.0 / walk.inverse_degree
    for begin in range(0, sources.size, SOURCE_BLOCK):
        block = sources[begin : begin + SOURCE_BLOCK]
        columns = np.arange(block.size)
        own = returns[begin : begin + block.size]
        walked = np.zeros((n_samples, block.size))
        walked[block, columns] = 1.0
        for step in range(1, n_steps + 1):
            previous, walked = walked, walk.smooth(walked, None, 1)
            if not halves:
                own += REACH_DECAY**step * walked[block, columns]
                continue
            # the terms k = 2 step - 1 (S^(step-1) e_i against S^step e_i) and k = 2 step (S^step e_i twice)
            for power, earlier in ((2 * step - 1, previous), (2 * step, walked)):
                if power <= REACH_STEPS:
                    products = np.einsum("ij,ij,i->j", earlier, walked, degree)
                    own += REACH_DECAY**power * products * walk.inverse_degree[block]
    return returns


def in_class_reach(walk, seeds, sources):
    """Every sample's reach from the known in-class samples: the seeds and the validation set's ``sources``.

    :func:`seed_reach` plus :func:`left_out_reach` from ``sources`` (each
    validation sample's own walks back to itself left out; validation
    samples are unlabeled, so none is a seed too). With 0.5-1% seeds a class
    has one to a few seeds, and the validation set holds about as many
    in-class samples again: a part of a seeded class that its seeds alone
    barely reach is told from an unseeded cluster more often
    (bench/RESULTS.md).

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
        ``S``, the fit's random walk.
    seeds : ndarray of bool, shape (n_samples,)
    sources : ndarray of int
        The validation set's in-class samples walked from (:func:`validation_sources`).

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    reach = seed_reach(walk, seeds)
    if sources.size:
        reach += left_out_reach(walk, sources)
    return reach


def local_density(graph, n_neighbors):
    """Every sample's mean affinity to its ``n_neighbors`` most similar graph neighbours.

    On the cosine kNN graph, the mean cosine similarity to its own nearest
    neighbours (the symmetrised graph's other edges are weaker): low where
    samples lie apart from the rest, the classic kNN outlier score.

    Parameters
    ----------
    graph : scipy.sparse.csr_matrix of shape (n_samples, n_samples)
        Non-negative weights (the output of ``check_graph``).
    n_neighbors : int
        How many of each row's largest weights (all of them in a shorter row; 0 in an empty one).

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    density = np.empty(graph.shape[0])
    top_weight_means(graph.indptr, graph.data, int(n_neighbors), density)
    return density


def validation_sources(validation, rng):
    """The validation samples :func:`left_out_reach` walks from: its in-class samples, and its outliers.

    All of each kind, or :data:`MAX_VALIDATION_SOURCES` drawn by ``rng``
    (sorted) when there are more, the outliers first; the others read their
    reach from these as any sample does. The outliers given to ``fit`` as
    ``outliers`` are not sources: they seed provisional classes of their
    own already, and as sources they were not measured.

    Returns
    -------
    in_class, outliers : ndarray of int
    """
    indices, truth = validation
    indices = np.asarray(indices, dtype=np.int64)
    in_class = np.asarray(truth) >= 0
    chosen = []
    for members in (indices[~in_class], indices[in_class]):
        if members.size > MAX_VALIDATION_SOURCES:
            members = np.sort(rng.choice(members, size=MAX_VALIDATION_SOURCES, replace=False))
        chosen.append(members)
    outliers, in_class_sources = chosen
    return in_class_sources, outliers


def onward_reach(walk, sources):
    """What a walk collects from each sample on: ``sum_m REACH_DECAY^m (S^m 1_sources)``, m = 0..REACH_STEPS-1.

    A sample's reach is one step of it, ``REACH_DECAY * S @ onward_reach``
    (:func:`seed_reach` of the same sources, none left out); a vertex
    outside the graph with edges into it reads its reach off it
    (:func:`reach_from_neighbours`).

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
        ``S``, the fit's random walk.
    sources : ndarray of int
        Distinct samples (the seeds and the validation samples walked from).

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    level = np.zeros(walk.graph.shape[0])
    level[np.asarray(sources, dtype=np.int64)] = 1.0
    collected = level.copy()
    for step in range(1, REACH_STEPS):
        level = walk.smooth(level, None, 1)
        collected += REACH_DECAY**step * level
    return collected


def reach_from_neighbours(onward, indices, weights):
    """The reach of vertices with edges ``(indices, weights)`` into the graph and none back.

    Such a vertex's walk ``D~^-1 (W + I)`` stays with probability ``s = 1 /
    (1 + sum_j w_j)`` and steps to ``j`` with ``p_j = w_j / (1 + sum_j w_j)``;
    its reach ``sum_k REACH_DECAY^k (S^k 1_sources)`` is then
    ``REACH_DECAY / (1 - REACH_DECAY s) * sum_j p_j onward_j`` with the
    geometric sum of its stays taken to infinity instead of to
    ``REACH_STEPS`` steps: between the reach of the walk with the vertex added
    and that over ``1 - REACH_DECAY s`` (tested; the terms left in weigh
    ``(REACH_DECAY s)^(REACH_STEPS - m)`` of the ``m``-th step's): within 3%
    on the tests' clusters; read the same way through fitted samples' own
    rows, 0.2% at the median and 1.5% at most on a Banking77 task.

    Parameters
    ----------
    onward : ndarray of shape (n_samples,)
        :func:`onward_reach` of the sources.
    indices, weights : ndarray of shape (n_rows, n_neighbors)
        Each vertex's fitted neighbours and non-negative edge weights.

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    closed_degree = 1.0 + weights.sum(axis=1)
    stay = 1.0 / closed_degree
    stepped = np.einsum("rk,rk->r", weights, onward[indices]) / closed_degree
    return REACH_DECAY / (1.0 - REACH_DECAY * stay) * stepped


def density_from_neighbours(weights):
    """:func:`local_density` of vertices whose edge weights are the rows of ``weights``: their mean."""
    return weights.mean(axis=1)
