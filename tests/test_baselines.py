import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop.baselines import (
    GCN,
    SGC,
    ConvergenceWarning,
    CorrectAndSmooth,
    GAT,
    FastGCN,
    GraphSAGE,
    LabelPropagation,
    LabelSpreading,
    PoissonLearning,
)
from fastprop import FastProp, build_knn_graph
from fastprop.adjacency import normalised_adjacency
from fastprop.baselines._common import Problem, prepare_fit
from fastprop.baselines.correct_smooth import _correct, _smooth
from fastprop.baselines.gcn import _gcn_loss_and_gradients, _training_problem
from fastprop.baselines.sgc import sgc_features
from reference import numeric_gradients

# ---------------------------------------------------------------- helpers


def clusters(n_per_cluster, n_features, n_clusters, seed, spread=0.3):
    """Points around random centres; returns (X float32, true labels)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, n_features))
    labels = np.repeat(np.arange(n_clusters), n_per_cluster)
    X = centres[labels] + spread * rng.normal(size=(labels.size, n_features))
    return X.astype(np.float32), labels


def dense_knn_graph(X, k):
    """The obvious symmetric cosine kNN graph: max-weight union of the kNN lists, clipped at 0."""
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    cosine = unit.astype(np.float64) @ unit.T
    np.fill_diagonal(cosine, -np.inf)
    nearest = np.argsort(-cosine, axis=1, kind="stable")[:, :k]
    weights = np.zeros_like(cosine)
    rows = np.repeat(np.arange(X.shape[0]), k)
    weights[rows, nearest.ravel()] = np.maximum(cosine[rows, nearest.ravel()], 0)
    return sp.csr_matrix(np.maximum(weights, weights.T).astype(np.float32))


def random_graph(n_samples, seed, density=0.15):
    """A connected random symmetric graph: a weighted ring plus random chords."""
    rng = np.random.default_rng(seed)
    shape = (n_samples, n_samples)
    weights = np.triu(rng.uniform(0.1, 1.0, shape) * (rng.random(shape) < density), 1)
    ring = np.arange(n_samples)
    weights[ring, (ring + 1) % n_samples] += 0.5
    weights = np.triu(weights + weights.T, 1)
    return sp.csr_matrix((weights + weights.T).astype(np.float32))


def seed_labels(true_labels, per_class, seed, label_values=None):
    """``per_class`` seeds per class, everything else -1; optionally relabel classes."""
    rng = np.random.default_rng(seed)
    y = np.full(true_labels.size, -1)
    for c in np.unique(true_labels):
        chosen = rng.choice(np.flatnonzero(true_labels == c), per_class, replace=False)
        y[chosen] = c if label_values is None else label_values[c]
    return y


FACTORIES = {
    "LabelPropagation": lambda **kw: LabelPropagation(**kw),
    "LabelSpreading": lambda **kw: LabelSpreading(**kw),
    "SGC": lambda **kw: SGC(**kw),
    "GCN": lambda **kw: GCN(hidden=16, max_epochs=60, random_state=0, **kw),
    "CorrectAndSmooth": lambda **kw: CorrectAndSmooth(**kw),
    "GAT": lambda **kw: GAT(heads=2, hidden=8, max_epochs=100, random_state=0, **kw),
    "GraphSAGE": lambda **kw: GraphSAGE(hidden=16, max_epochs=20, random_state=0, **kw),
    "FastGCN": lambda **kw: FastGCN(hidden=16, max_epochs=60, random_state=0, **kw),
    "PoissonLearning": lambda **kw: PoissonLearning(**kw),
}
ALL = pytest.mark.parametrize("name", sorted(FACTORIES))
WITH_MAX_ITER = pytest.mark.parametrize(
    "name", ["CorrectAndSmooth", "LabelPropagation", "LabelSpreading", "SGC"]
)


@pytest.fixture(scope="module")
def toy():
    """Three clusters of 40 points in 10-D, a 6-NN graph, 3 seeds per class."""
    X, labels = clusters(40, 10, 3, seed=0)
    return X, labels, dense_knn_graph(X, 6), seed_labels(labels, 3, seed=1)


# ---------------------------------------------------------------- references


@pytest.mark.parametrize("alpha", [0.5, 0.9, 0.99])
def test_label_spreading_matches_closed_form(alpha):
    rng = np.random.default_rng(3)
    W = random_graph(40, seed=3)
    labels = rng.integers(0, 3, 40)
    y = np.full(40, -1)
    y[:9] = labels[:9]
    y[:3] = [0, 1, 2]
    model = LabelSpreading(alpha=alpha, tol=1e-13, max_iter=100_000).fit(rng.normal(size=(40, 4)), y, graph=W)

    dense = W.toarray().astype(np.float64)
    inv_sqrt = 1 / np.sqrt(dense.sum(axis=1))
    S = inv_sqrt[:, None] * dense * inv_sqrt[None, :]
    Y = np.eye(3)[y[:9]]
    Y = np.vstack([Y, np.zeros((31, 3))])
    F = (1 - alpha) * np.linalg.solve(np.eye(40) - alpha * S, Y)
    F /= F.sum(axis=1, keepdims=True)
    assert_allclose(model.label_distributions_[9:], F[9:], atol=1e-9)
    assert_array_equal(model.label_distributions_[:9], Y[:9])
    assert model.n_iter_ > 1


def test_label_propagation_matches_dense_harmonic_solution():
    rng = np.random.default_rng(4)
    W = random_graph(50, seed=4)
    y = np.full(50, -1)
    seeds = rng.choice(50, 8, replace=False)
    y[seeds] = rng.integers(0, 4, 8)
    y[seeds[:4]] = [0, 1, 2, 3]
    model = LabelPropagation(tol=1e-12).fit(rng.normal(size=(50, 3)), y, graph=W)

    dense = W.toarray().astype(np.float64)
    unlabeled = np.flatnonzero(y == -1)
    laplacian = np.diag(dense.sum(axis=1)) - dense
    F_l = np.eye(4)[y[seeds]]
    F_u = np.linalg.solve(laplacian[np.ix_(unlabeled, unlabeled)], dense[np.ix_(unlabeled, seeds)] @ F_l)
    assert_allclose(model.label_distributions_[unlabeled], F_u, atol=1e-9)
    # the harmonic solution is the fixed point of the clamped iteration F <- D^-1 W F
    F = model.label_distributions_
    assert_allclose((dense @ F / dense.sum(axis=1, keepdims=True))[unlabeled], F[unlabeled], atol=1e-9)
    assert 1 <= model.n_iter_ <= 50


@pytest.mark.parametrize("self_loops", [False, True])
def test_normalised_adjacency_matches_dense(self_loops):
    W = random_graph(20, seed=5).toarray().astype(np.float64)
    W[7] = W[:, 7] = 0  # an isolated vertex
    A = W + np.eye(20) if self_loops else W
    degree = A.sum(axis=1)
    with np.errstate(divide="ignore"):
        scale = np.where(degree > 0, degree ** -0.5, 0.0)
    expected = scale[:, None] * A * scale[None, :]
    result = normalised_adjacency(sp.csr_matrix(W), self_loops=self_loops, dtype=np.float64)
    assert sp.isspmatrix_csr(result)
    assert_allclose(result.toarray(), expected, atol=1e-12)


def test_normalised_adjacency_of_weights_near_float32s_largest():
    """Degrees summed in float32 overflowed to inf (a fuzzing round: GCN and FastGCN then labelled one class)."""
    W = random_graph(20, seed=5).toarray().astype(np.float64) * 1e38
    A = W + np.eye(20)
    scale = A.sum(axis=1) ** -0.5
    result = normalised_adjacency(sp.csr_matrix(W.astype(np.float32)), self_loops=True, dtype=np.float32)
    assert_allclose(result.toarray(), scale[:, None] * A * scale[None, :], rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("method", [GCN, GAT, FastGCN])
def test_a_diverged_training_is_a_clear_error_not_uniform_rows(toy, method):
    """A learning rate of 1e20 overflowed float32 training to NaN, which came back as uniform rows."""
    X, _, graph, y = toy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's overflow on the way there
        with pytest.raises(ValueError, match=r"training diverged \(learning_rate=1e\+20, weight_decay="):
            method(learning_rate=1e20, max_epochs=20, random_state=0).fit(X, y, graph=graph)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_sgc_features_match_dense(depth):
    W = random_graph(25, seed=6).toarray().astype(np.float64)
    X = np.random.default_rng(6).normal(size=(25, 4)).astype(np.float32)
    A = W + np.eye(25)
    P = A / A.sum(axis=1, keepdims=True)
    expected = np.linalg.matrix_power(P, depth) @ X
    assert_allclose(sgc_features(X, sp.csr_matrix(W), depth), expected, atol=1e-10)


def test_sgc_separable_problem_is_perfect():
    X, labels = clusters(60, 16, 4, seed=7, spread=0.5)
    y = seed_labels(labels, 3, seed=7)
    model = SGC(n_neighbors=8).fit(X, y)
    assert_array_equal(model.transduction_, labels)


# ---------------------------------------------------------------- GCN


def _gcn_setup(seed, dropout):
    rng = np.random.default_rng(seed)
    n_rows, n_features, hidden, n_classes, n_seeds = 12, 5, 4, 3, 5
    params = (
        rng.normal(size=(n_features, hidden)),
        rng.normal(size=hidden) * 0.1,
        rng.normal(size=(hidden, n_classes)),
        rng.normal(size=n_classes) * 0.1,
    )
    inputs = rng.normal(size=(n_rows, n_features))
    propagation = sp.random(n_seeds, n_rows, density=0.4, random_state=seed, format="csr") + sp.eye(
        n_seeds, n_rows, format="csr"
    )
    targets = np.eye(n_classes)[rng.integers(0, n_classes, n_seeds)]
    masks = (None, None)
    if dropout:
        masks = tuple((rng.random(shape) < 0.6) / 0.6 for shape in [(n_rows, n_features), (n_rows, hidden)])
    return params, inputs, propagation.tocsr(), targets, masks


@pytest.mark.parametrize("dropout", [False, True])
def test_gcn_gradients_match_finite_differences(dropout):
    params, inputs, propagation, targets, masks = _gcn_setup(8, dropout)
    weight_decay = 0.05

    def loss_at(candidate):
        return _gcn_loss_and_gradients(candidate, inputs, propagation, targets, weight_decay, masks)[0]

    _, gradients = _gcn_loss_and_gradients(params, inputs, propagation, targets, weight_decay, masks)
    for k, numeric in enumerate(numeric_gradients(loss_at, params)):
        assert_allclose(gradients[k], numeric, rtol=1e-5, atol=1e-8, err_msg=f"parameter {k}")


def test_gcn_receptive_field_gives_full_batch_loss_and_gradients():
    X, labels = clusters(30, 6, 2, seed=9)
    graph = dense_knn_graph(X, 4)
    y = seed_labels(labels, 2, seed=9)
    problem = prepare_fit(X, y, graph, 4)
    adjacency = normalised_adjacency(problem.graph, self_loops=True, dtype=np.float64)
    rng = np.random.default_rng(9)
    params = (rng.normal(size=(6, 5)), rng.normal(size=5), rng.normal(size=(5, 2)), rng.normal(size=2))
    targets = problem.targets[problem.seeds]
    features = problem.features.astype(np.float64)
    full = _gcn_loss_and_gradients(params, adjacency @ features, adjacency[problem.seeds], targets, 0.01)
    inputs, propagation = _training_problem(adjacency, features, problem.seeds)
    assert inputs.shape[0] < X.shape[0]
    restricted = _gcn_loss_and_gradients(params, inputs, propagation, targets, 0.01)
    assert_allclose(restricted[0], full[0], rtol=1e-12)
    for a, b in zip(restricted[1], full[1]):
        assert_allclose(a, b, atol=1e-12)


def test_gcn_fits_two_clusters():
    X, labels = clusters(50, 12, 2, seed=10, spread=0.6)
    y = seed_labels(labels, 3, seed=10)
    model = GCN(n_neighbors=8, hidden=32, max_epochs=100, random_state=0).fit(X, y)
    assert_array_equal(model.transduction_, labels)
    assert model.n_iter_ == 100


# ---------------------------------------------------------------- Correct and Smooth


def test_correct_and_smooth_fixes_a_misled_base_model():
    # Two 10-cliques joined by one weak edge; in clique A, samples 7-9 have the
    # features of clique B, so logistic regression on X gets them wrong.
    block = np.ones((10, 10)) - np.eye(10)
    W = np.zeros((20, 20))
    W[:10, :10] = W[10:, 10:] = block
    W[9, 10] = W[10, 9] = 0.05
    rng = np.random.default_rng(11)
    truth = np.repeat([0, 1], 10)
    looks_like = truth.copy()
    looks_like[7:10] = 1
    X = np.where(looks_like[:, None] == 0, 1.0, -1.0) * np.ones((20, 4)) + 0.1 * rng.normal(size=(20, 4))
    y = np.full(20, -1)
    y[[0, 1, 15, 16]] = [0, 0, 1, 1]

    base_only = SGC(depth=0).fit(X, y, graph=sp.csr_matrix(W))
    assert_array_equal(base_only.transduction_[7:10], [1, 1, 1])
    model = CorrectAndSmooth().fit(X, y, graph=sp.csr_matrix(W))
    assert_array_equal(model.transduction_, truth)


def test_autoscaled_correction_cancels_a_uniform_bias():
    # A base model that says [0.4, 0.6] everywhere, on a connected graph whose
    # seeds are all class 0: every propagated error row is a multiple of
    # [1, -1], autoscale sets its L1 norm to the seeds' 1.2, and the corrected
    # guess is exactly [1, 0].
    W = random_graph(15, seed=12)
    targets = np.zeros((15, 2))
    targets[[2, 9], 0] = 1
    problem = Problem(np.ones((15, 2), np.float32), W, np.array([0, 1]), np.array([2, 9]), targets)
    base = np.tile([0.4, 0.6], (15, 1))
    operator = normalised_adjacency(problem.graph, self_loops=False, dtype=np.float64)
    corrected = _correct(base, problem, operator, alpha=0.9, n_propagation=50, autoscale=True, scale=1.0)
    assert_allclose(corrected, np.tile([1.0, 0.0], (15, 1)), atol=1e-12)


def test_correct_and_smooth_options(toy):
    X, labels, graph, y = toy
    unlabeled = y == -1
    for params in [{"base": "sgc"}, {"autoscale": False, "scale": 5.0}, {"correction_alpha": 1.0}]:
        model = CorrectAndSmooth(**params).fit(X, y, graph=graph)
        assert (model.transduction_[unlabeled] == labels[unlabeled]).mean() > 0.95, params


def dense_correct_and_smooth(base, W, seeds, Y, a1, a2, steps, autoscale, scale):
    """Slow reference: the two propagations of Huang et al. with dense matrices and loops."""
    inv_sqrt = 1 / np.sqrt(W.sum(axis=1))
    S = inv_sqrt[:, None] * W * inv_sqrt[None, :]
    E0 = np.zeros_like(base)
    E0[seeds] = Y[seeds] - base[seeds]
    E = E0.copy()
    for _ in range(steps):
        E = a1 * S @ E + (1 - a1) * E0
        if autoscale:
            E = np.clip(E, -1, 1)
        else:
            E[seeds] = E0[seeds]
    if autoscale:
        sigma = np.mean([np.abs(E0[i]).sum() for i in seeds])
        corrected = base.copy()
        for i in range(base.shape[0]):
            norm = np.abs(E[i]).sum()
            factor = sigma / norm if norm > 0 and sigma / norm <= 1000 else 1.0
            corrected[i] += factor * E[i]
    else:
        corrected = base + scale * E
    G0 = corrected.copy()
    G0[seeds] = Y[seeds]
    G = G0.copy()
    for _ in range(steps):
        G = np.clip(a2 * S @ G + (1 - a2) * G0, 0, 1)
    return corrected, G


@pytest.mark.parametrize("autoscale", [True, False])
def test_correct_and_smooth_match_dense_reference(autoscale):
    rng = np.random.default_rng(14)
    W = random_graph(30, seed=14)
    y = np.full(30, -1)
    y[rng.choice(30, 6, replace=False)] = [0, 1, 2, 0, 1, 2]
    problem = prepare_fit(np.ones((30, 2)), y, W, 5)
    base = rng.dirichlet(np.ones(3), size=30)
    operator = normalised_adjacency(problem.graph, self_loops=False, dtype=np.float64)
    corrected = _correct(base, problem, operator, alpha=0.7, n_propagation=20, autoscale=autoscale, scale=3.0)
    smoothed = _smooth(corrected, problem, operator, alpha=0.6, n_propagation=20)
    dense = problem.graph.toarray().astype(np.float64)
    expected = dense_correct_and_smooth(
        base, dense, problem.seeds, problem.targets, 0.7, 0.6, 20, autoscale, 3.0
    )
    assert_allclose(corrected, expected[0], atol=1e-12)
    assert_allclose(smoothed, expected[1], atol=1e-12)


# ---------------------------------------------------------------- invariants of all five


@ALL
def test_distributions_seeds_and_attributes(name, toy):
    X, labels, graph, y = toy
    model = FACTORIES[name]().fit(X, y, graph=graph)
    D = model.label_distributions_
    assert D.shape == (X.shape[0], 3) and D.dtype == np.float64
    assert np.isfinite(D).all() and (D >= 0).all()
    assert_allclose(D.sum(axis=1), 1.0, atol=1e-12)
    seeds = y != -1
    assert_array_equal(model.transduction_[seeds], y[seeds])
    assert_array_equal(D[seeds], np.eye(3)[y[seeds]])
    assert_array_equal(model.confidence_, D.max(axis=1))
    assert_array_equal(model.transduction_, model.classes_[D.argmax(axis=1)])
    assert_array_equal(model.classes_, [0, 1, 2])
    assert (model.transduction_[~seeds] == labels[~seeds]).mean() > 0.95


@ALL
def test_non_contiguous_labels(name, toy):
    X, labels, graph, _ = toy
    y = seed_labels(labels, 3, seed=1, label_values=[7, 3, 12])
    model = FACTORIES[name]().fit(X, y, graph=graph)
    assert_array_equal(model.classes_, [3, 7, 12])
    expected = np.array([7, 3, 12])[labels]
    assert (model.transduction_ == expected).mean() > 0.95
    assert_array_equal(model.transduction_[y != -1], y[y != -1])


@ALL
def test_inputs_and_parameters_unchanged(name, toy):
    X, _, graph, y = toy
    X_before, y_before, graph_before = X.copy(), y.copy(), graph.copy()
    model = FACTORIES[name]()
    params_before = model.get_params()
    model.fit(X, y, graph=graph)
    assert_array_equal(X, X_before)
    assert_array_equal(y, y_before)
    for attribute in ("data", "indices", "indptr"):
        assert_array_equal(getattr(graph, attribute), getattr(graph_before, attribute))
    assert model.get_params() == params_before


@ALL
def test_same_random_state_same_output(name, toy):
    X, _, graph, y = toy
    first = FACTORIES[name]().fit(X, y, graph=graph).label_distributions_
    second = FACTORIES[name]().fit(X, y, graph=graph).label_distributions_
    assert_array_equal(first, second)


def test_gcn_random_state_matters(toy):
    X, _, graph, y = toy
    a = GCN(hidden=8, max_epochs=5, random_state=0).fit(X, y, graph=graph).label_distributions_
    b = GCN(hidden=8, max_epochs=5, random_state=1).fit(X, y, graph=graph).label_distributions_
    assert not np.array_equal(a, b)


@ALL
def test_isolated_vertices_and_seedless_component(name, toy):
    X, labels, graph, y = toy
    dense = graph.toarray()
    dense[5] = dense[:, 5] = 0  # an isolated unlabeled vertex
    assert y[5] == -1
    X = np.vstack([X, X[:1] * 2, X[:1] * 3])  # and a seedless two-vertex component
    padded = np.zeros((X.shape[0], X.shape[0]), dtype=np.float32)
    padded[: dense.shape[0], : dense.shape[0]] = dense
    padded[-1, -2] = padded[-2, -1] = 0.9
    y = np.concatenate([y, [-1, -1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = FACTORIES[name]().fit(X, y, graph=sp.csr_matrix(padded))
    D = model.label_distributions_
    assert np.isfinite(D).all()
    assert_allclose(D.sum(axis=1), 1.0, atol=1e-12)
    rest = np.setdiff1d(np.flatnonzero(y[:-2] == -1), [5])
    assert (model.transduction_[rest] == labels[rest]).mean() > 0.95
    if name in ("LabelPropagation", "LabelSpreading"):
        assert_allclose(D[[5, -2, -1]], 1 / 3)


@pytest.mark.parametrize("name", ["LabelPropagation", "PoissonLearning"])
def test_a_graph_with_asymmetric_weights_is_refused_where_the_equations_need_symmetric_ones(name, toy):
    X, labels, graph, y = toy
    directed = sp.csr_matrix(sp.triu(graph) + 0.5 * sp.tril(graph))  # every edge kept, its weights unequal
    with pytest.raises(ValueError, match=f"{name} needs a graph with symmetric weights .*graph.maximum\\(graph.T\\)"):
        FACTORIES[name]().fit(X, y, graph=directed)
    symmetrised = FACTORIES[name]().fit(X, y, graph=directed.maximum(directed.T))
    assert_array_equal(symmetrised.transduction_, FACTORIES[name]().fit(X, y, graph=graph).transduction_)
    for other in ("LabelSpreading", "SGC"):  # not refused: their iterations are defined for any weights
        FACTORIES[other]().fit(X, y, graph=directed)
    # symmetric up to float32 rounding (as a cosine matrix computed as X @ X.T / |x_i| / |x_j| is), accepted
    rounded = sp.csr_matrix(sp.triu(graph) * (1 + 2e-7) + sp.tril(graph), dtype=np.float32)
    assert (rounded != rounded.T).nnz  # not bit for bit
    model = FACTORIES[name]().fit(X, y, graph=rounded)
    assert_array_equal(model.transduction_, FACTORIES[name]().fit(X, y, graph=graph).transduction_)


@pytest.mark.parametrize("scale, message", [(1e30, r"1 row\(s\) with a magnitude above 2\*\*40"),
                                            (1e-20, r"no magnitude above 2\*\*-40")])
def test_features_far_out_of_range_are_refused_by_the_methods_that_compute_on_them(scale, message, toy):
    # Finite float32 features at 1e30 made GCN, GAT, FastGCN, GraphSAGE and SGC return near-chance labels with
    # overflow warnings or none (found by fuzzing); the graph-only methods use the rows' directions alone.
    X, labels, graph, y = toy
    far = X.copy()
    if scale > 1:
        far[7] *= np.float32(scale)  # one row is enough to overflow
    else:
        far *= np.float32(scale)  # all of them: a single small row is fine (below)
    for name in sorted(FACTORIES):
        model = FACTORIES[name]()
        if model._reads_features:
            with pytest.raises(ValueError, match=f"{message}.*{name} computes on the features as they are.*Scale X"):
                model.fit(far, y, graph=graph)
        else:
            assert (model.fit(far, y, graph=graph).transduction_[y == -1] == labels[y == -1]).mean() > 0.95, name
    small_row = X.copy()
    small_row[7] *= np.float32(1e-13)  # e.g. a sample at the mean, once centred
    SGC().fit(small_row, y, graph=graph)


def test_graph_is_built_when_not_given(toy):
    X, labels, _, y = toy
    for name in sorted(FACTORIES):
        model = FACTORIES[name](n_neighbors=6).fit(X, y)
        assert (model.transduction_[y == -1] == labels[y == -1]).mean() > 0.95, name


@WITH_MAX_ITER
def test_convergence_warning_at_max_iter_one(name, toy):
    X, _, graph, y = toy
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1 "):
        model = FACTORIES[name](max_iter=1).fit(X, y, graph=graph)
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0, atol=1e-12)


@ALL
def test_no_warning_with_defaults(name, toy):
    X, _, graph, y = toy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FACTORIES[name]().fit(X, y, graph=graph)


def test_convergence_warning_is_a_user_warning():
    assert issubclass(ConvergenceWarning, UserWarning)


def test_single_class():
    X, _ = clusters(20, 5, 1, seed=13)
    y = np.full(20, -1)
    y[[0, 4]] = 6
    for name in sorted(FACTORIES):
        model = FACTORIES[name](n_neighbors=4).fit(X, y)
        assert_array_equal(model.classes_, [6])
        assert_array_equal(model.transduction_, 6)
        assert_allclose(model.label_distributions_, 1.0)


# ---------------------------------------------------------------- bad input


@ALL
def test_bad_data(name, toy):
    X, _, graph, y = toy
    model = FACTORIES[name]()
    with pytest.raises(ValueError, match="y has 119 labels but X has 120 samples"):
        model.fit(X, y[:-1], graph=graph)
    with pytest.raises(ValueError, match="no labeled sample"):
        model.fit(X, np.full_like(y, -1), graph=graph)
    with pytest.raises(ValueError, match=r"graph has shape \(119, 119\) but X has 120 samples"):
        model.fit(X, y, graph=graph[:-1, :-1])
    with pytest.raises(ValueError, match="negative edge weight"):
        model.fit(X, y, graph=-graph)
    with pytest.raises(ValueError, match="n_neighbors=0 is out of range"):
        FACTORIES[name](n_neighbors=0).fit(X, y, graph=graph)


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: LabelSpreading(alpha=1.0), r"alpha=1.0 is out of range; allowed: \(0.0, 1.0\)"),
        (lambda: LabelSpreading(alpha=0), r"alpha=0 is out of range"),
        (lambda: LabelSpreading(alpha=-0.5), r"alpha=-0.5 is out of range"),
        (lambda: LabelSpreading(tol=-1e-3), r"tol=-0.001 is out of range"),
        (lambda: LabelPropagation(max_iter=0), r"max_iter=0 is out of range"),
        (lambda: LabelPropagation(max_iter=2.5), r"max_iter must be an integer, got 2.5"),
        (lambda: SGC(depth=-1), r"depth=-1 is out of range"),
        (lambda: SGC(l2=-1.0), r"l2=-1.0 is out of range"),
        (lambda: GCN(hidden=0), r"hidden=0 is out of range"),
        (lambda: GCN(dropout=1.0), r"dropout=1.0 is out of range; allowed: \[0.0, 1.0\)"),
        (lambda: GCN(learning_rate=0.0), r"learning_rate=0.0 is out of range"),
        (lambda: GCN(weight_decay=-1.0), r"weight_decay=-1.0 is out of range"),
        (lambda: GCN(max_epochs=0), r"max_epochs=0 is out of range"),
        (lambda: GCN(random_state=-3), r"random_state=-3 must be a non-negative integer"),
        (lambda: CorrectAndSmooth(base="mlp"), r"base='mlp' is not supported; choose one of 'linear', 'sgc'"),
        (
            lambda: CorrectAndSmooth(correction_alpha=0.0),
            r"correction_alpha=0.0 is out of range; allowed: \(0.0, 1.0\]",
        ),
        (lambda: CorrectAndSmooth(smoothing_alpha=1.0), r"smoothing_alpha=1.0 is out of range"),
        (lambda: CorrectAndSmooth(n_propagation=0), r"n_propagation=0 is out of range"),
        (lambda: CorrectAndSmooth(autoscale="yes"), r"autoscale must be True or False, got 'yes'"),
        (lambda: CorrectAndSmooth(scale=-1.0), r"scale=-1.0 is out of range"),
    ],
)
def test_bad_parameters(factory, match, toy):
    X, _, graph, y = toy
    with pytest.raises(ValueError, match=match):
        factory().fit(X, y, graph=graph)


def test_repr_shows_the_changed_parameters():
    assert repr(LabelSpreading(alpha=0.5, tol=1e-8)) == "LabelSpreading(alpha=0.5, tol=1e-08)"


@ALL
def test_tiny_inputs_clamp_n_neighbors_as_fastprop_does(name):
    """Fewer samples than n_neighbors + 1: every other sample is a neighbour, not an error."""
    X = np.random.default_rng(0).normal(size=(10, 3))
    y = np.full(10, -1)
    y[[0, 5]] = [0, 1]
    clamped = FACTORIES[name]().fit(X, y)  # n_neighbors=30 on 10 samples
    explicit = FACTORIES[name]().fit(X, y, graph=build_knn_graph(X, 9))
    assert_array_equal(clamped.label_distributions_, explicit.label_distributions_)
    with pytest.warns(UserWarning, match="every sample is a seed"):
        single = FACTORIES[name]().fit(X[:1], np.array([7]))
    assert single.transduction_.tolist() == [7]


# ---------------------------------------------------------------- labels as users have them: the unlabeled marker

NAMES = np.array(["ant", "bee", "cat"])  # sorted as the classes 0, 1, 2 are: the same columns in the same order
MARKED = ('names, "" unlabeled', "names, 'unknown' unlabeled", "names, None/NaN/NA unlabeled",
          "integers, 99 unlabeled")


class NAType:
    """Stands for pandas' ``NA`` (known by its type's name; pandas is no test dependency)."""

    def __bool__(self):
        raise TypeError("boolean value of NA is ambiguous")


def marked(y, kind):
    """``y`` (classes 0..2, -1 unlabeled) as a user may hold it, one of ``MARKED``: (labels, unlabeled, classes)."""
    unlabeled = y < 0
    if kind == "integers, 99 unlabeled":
        return np.where(unlabeled, 99, y), 99, np.arange(3)
    labels = NAMES[np.maximum(y, 0)].astype(object)
    if kind == "names, None/NaN/NA unlabeled":
        missing = (None, float("nan"), NAType())
        labels[unlabeled] = [missing[i % 3] for i in range(unlabeled.sum())]
        return labels, None, NAMES
    marker = "" if kind.startswith('names, ""') else "unknown"
    labels[unlabeled] = marker
    return labels.astype(str), marker, NAMES


@ALL
@pytest.mark.parametrize("kind", MARKED)
def test_names_and_a_marker_give_the_fit_of_integers_and_minus_one(name, kind, toy):
    """The same y with class names (or another integer) and FastProp's unlabeled marker is the same fit, bit for
    bit: the baselines read -1 alone, so a y of names could not be compared with FastProp's fit of it."""
    X, _, graph, y = toy
    labels, unlabeled, classes = marked(y, kind)
    reference = FACTORIES[name]().fit(X, y, graph=graph)
    model = FACTORIES[name](unlabeled=unlabeled).fit(X, labels, graph=graph)
    assert model.classes_.tolist() == classes.tolist()  # the marker is no class
    assert_array_equal(model.label_distributions_, reference.label_distributions_)
    assert_array_equal(model.confidence_, reference.confidence_)
    assert model.transduction_.dtype == model.classes_.dtype  # a class for every sample, never the marker
    assert model.transduction_.tolist() == classes[reference.transduction_].tolist()
    assert model.get_params()["unlabeled"] is unlabeled


@ALL
@pytest.mark.parametrize("unlabeled, labels", [(1.5, "integers"), (True, "integers"), (2**63, "integers"),
                                               ("", "integers"), ("", "names with NaN")])
def test_a_wrong_marker_is_fastprops_error(name, unlabeled, labels, toy):
    X, _, graph, y = toy
    if labels == "names with NaN":  # a NaN of a pandas column of names left as it is: a label of another kind
        y = np.where(y < 0, float("nan"), NAMES[np.maximum(y, 0)].astype(object))
    with pytest.raises(ValueError) as fastprops:
        FastProp(unlabeled=unlabeled).fit(X, y, graph=graph)
    with pytest.raises(ValueError) as raised:
        FACTORIES[name](unlabeled=unlabeled).fit(X, y, graph=graph)
    assert str(raised.value) == str(fastprops.value)
    assert "unlabeled" in str(raised.value)


@pytest.fixture(scope="module")
def absent_marker(toy):
    """Names with "" unlabeled, fitted with unlabeled="unknown": FastProp's warning that "" is then a class."""
    X, _, graph, y = toy
    labels, _, _ = marked(y, 'names, "" unlabeled')
    with pytest.warns(UserWarning, match="no sample marked unlabeled='unknown'") as caught:
        FastProp(unlabeled="unknown", random_state=0).fit(X, labels, graph=graph)
    return labels, [str(w.message) for w in caught if "no sample marked" in str(w.message)]


@ALL
def test_a_marker_absent_from_y_warns_as_fastprop_does(name, toy, absent_marker):
    X, _, graph, _ = toy
    labels, fastprops = absent_marker
    with pytest.warns(UserWarning, match="every sample is a seed") as caught:
        model = FACTORIES[name](unlabeled="unknown").fit(X, labels, graph=graph)
    about_the_marker = [w for w in caught if "no sample marked" in str(w.message)]
    assert [str(w.message) for w in about_the_marker] == fastprops
    assert [w.filename for w in about_the_marker] == [__file__]  # the user's line
    assert model.classes_.tolist() == ["", *NAMES]
    assert_array_equal(model.transduction_, labels)


def test_the_marker_is_a_parameter_as_fastprops():
    assert repr(SGC(unlabeled="")) == "SGC(unlabeled='')"
    assert repr(SGC(unlabeled=-1)) == "SGC()"
    model = GCN(unlabeled=None, random_state=0)
    assert model.get_params()["unlabeled"] is None
    assert model.set_params(unlabeled="?").unlabeled == "?"
