import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop import build_knn_graph
from fastprop._kernels.poisson import transition_rows
from fastprop.baselines import ConvergenceWarning, LabelPropagation
from fastprop.baselines.poisson import MIN_MIXING_ITER, SHARPNESS, PoissonLearning, poisson_potentials

MNIST = "/work/shared/data/mnist_test.npz"

# ---------------------------------------------------------------- helpers


def random_graph(n_samples, seed, density=0.2):
    """A connected, non-bipartite random symmetric graph: a weighted ring plus random chords."""
    rng = np.random.default_rng(seed)
    shape = (n_samples, n_samples)
    weights = np.triu(rng.uniform(0.1, 1.0, shape) * (rng.random(shape) < density), 1)
    ring = np.arange(n_samples)
    weights[ring, (ring + 1) % n_samples] += 0.5
    weights[0, 2] += 0.5  # a triangle
    weights = np.triu(weights + weights.T, 1)
    return sp.csr_matrix((weights + weights.T).astype(np.float32))


def one_hot(labels, seeds, n_samples, n_classes):
    targets = np.zeros((n_samples, n_classes))
    targets[seeds, labels] = 1.0
    return targets


def dense_poisson(graph, seeds, targets):
    """Least-squares solution of L u = b (pseudo-inverse), normalised to sum_i d_i u_i = 0."""
    weights = graph.toarray().astype(np.float64)
    degree = weights.sum(axis=1)
    laplacian = np.diag(degree) - weights
    source = np.zeros_like(targets)
    source[seeds] = targets[seeds] - targets[seeds].mean(axis=0)
    solution = np.linalg.pinv(laplacian) @ source
    return solution - degree @ solution / degree.sum()


def dense_algorithm_one(graph, seeds, targets, n_iter):
    """The paper's Algorithm 1 with dense matrices: u <- u + D^-1 (b - L u), n_iter times."""
    weights = graph.toarray().astype(np.float64)
    degree = weights.sum(axis=1)
    source = np.zeros_like(targets)
    source[seeds] = targets[seeds] - targets[seeds].mean(axis=0)
    potentials = np.zeros_like(targets)
    for _ in range(n_iter):
        potentials = potentials + (source - (np.diag(degree) - weights) @ potentials) / degree[:, None]
    return potentials


def softmax_distributions(potentials, seeds, targets, weights=1.0):
    """The documented distributions: weights * softmax(SHARPNESS u / sigma), seeds one-hot."""
    unlabeled = np.ones(potentials.shape[0], dtype=bool)
    unlabeled[seeds] = False
    sigma = np.sqrt(np.mean(potentials[unlabeled] ** 2))
    scores = weights * np.exp(SHARPNESS * potentials / sigma)
    distributions = scores / scores.sum(axis=1, keepdims=True)
    distributions[seeds] = targets[seeds]
    return distributions


def ladder(n_layers):
    """Layers of two vertices, joined inside a layer and to both of the next layer's (unit weights).

    Seeds: class 0 at both vertices of the first layer, class 1 at the last.
    By symmetry the class-0 potential is ``(n_layers - 1) / 8 - layer / 4``
    (4 edges between layers carry a flux of 1, the degree-weighted mean is 0).
    """
    n_samples = 2 * n_layers
    weights = np.zeros((n_samples, n_samples), dtype=np.float32)
    for layer in range(n_layers):
        a, b = 2 * layer, 2 * layer + 1
        weights[a, b] = weights[b, a] = 1
        if layer + 1 < n_layers:
            weights[a : b + 1, a + 2 : b + 3] = 1
            weights[a + 2 : b + 3, a : b + 1] = 1
    y = np.full(n_samples, -1)
    y[[0, 1]] = 0
    y[[-2, -1]] = 1
    return sp.csr_matrix(weights), y


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 6)) * 3
    labels = np.repeat(np.arange(3), 40)
    X = (centres[labels] + 0.3 * rng.normal(size=(120, 6))).astype(np.float32)
    y = np.full(120, -1)
    y[[0, 1, 40, 41, 80, 81]] = labels[[0, 1, 40, 41, 80, 81]]
    return X, labels, build_knn_graph(X, 8), y


# ---------------------------------------------------------------- the solver against dense references


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_potentials_match_the_dense_poisson_solution(index_dtype):
    graph = random_graph(40, seed=1)
    graph.indices, graph.indptr = graph.indices.astype(index_dtype), graph.indptr.astype(index_dtype)
    seeds = np.array([3, 11, 17, 25, 30])
    targets = one_hot([0, 1, 2, 0, 2], seeds, 40, 3)
    potentials, n_iter = poisson_potentials(graph, seeds, targets, max_iter=100_000, tol=1e-13)
    expected = dense_poisson(graph, seeds, targets)
    assert n_iter < 100_000
    assert_allclose(potentials, expected, atol=1e-10 * np.abs(expected).max())
    degree = graph.toarray().astype(np.float64).sum(axis=1)
    assert_allclose(degree @ potentials, 0.0, atol=1e-10)  # the paper's normalisation
    assert_allclose(potentials.sum(axis=1), 0.0, atol=1e-10)  # each sample's potentials sum to 0


def test_fixed_iteration_count_is_algorithm_one():
    graph = random_graph(30, seed=2)
    seeds = np.array([0, 9, 20])
    targets = one_hot([0, 1, 1], seeds, 30, 2)
    potentials, n_iter = poisson_potentials(graph, seeds, targets, max_iter=7, tol=None)
    assert n_iter == 7
    assert_allclose(potentials, dense_algorithm_one(graph, seeds, targets, 7), rtol=1e-12, atol=1e-15)


def test_mixing_rule_stops_when_the_walk_from_the_seeds_has_mixed():
    n_samples = 60
    graph = random_graph(n_samples, seed=3, density=0.0)  # a ring with one chord: slow to mix
    weights = graph.toarray().astype(np.float64)
    degree = weights.sum(axis=1)
    seeds = np.array([0, 30])
    walk = np.zeros(n_samples)
    walk[seeds] = 0.5
    expected = 0
    while expected < MIN_MIXING_ITER or np.abs(walk - degree / degree.sum()).max() > 1 / n_samples:
        walk = weights @ (walk / degree)
        expected += 1
    assert expected > MIN_MIXING_ITER  # the rule, not the minimum, decides
    y = np.full(n_samples, -1)
    y[seeds] = [0, 1]
    model = PoissonLearning().fit(np.ones((n_samples, 1)), y, graph=graph)
    assert model.n_iter_ == expected



def test_mixing_rule_on_a_graph_of_two_components_mixes_each_apart():
    """The limit is per connected component: the mass that started there, spread in proportion to degree."""
    import scipy.sparse as sp

    ring = random_graph(30, seed=3, density=0.0)
    graph = sp.block_diag([ring, random_graph(20, seed=5, density=0.0)], format="csr")
    n_samples = graph.shape[0]
    weights = graph.toarray().astype(np.float64)
    degree = weights.sum(axis=1)
    seeds = np.array([0, 15, 40])  # two in the first component, one in the second
    walk = np.zeros(n_samples)
    walk[seeds] = 1 / 3
    first = np.arange(n_samples) < 30
    limit = np.where(first, 2 / 3 * degree / degree[first].sum(), 1 / 3 * degree / degree[~first].sum())
    expected = 0
    while expected < MIN_MIXING_ITER or np.abs(walk - limit).max() > 1 / n_samples:
        walk = weights @ (walk / degree)
        expected += 1
    y = np.full(n_samples, -1)
    y[seeds] = [0, 1, 0]
    model = PoissonLearning().fit(np.ones((n_samples, 1)), y, graph=graph)
    assert model.n_iter_ == expected

def test_converged_fit_gives_the_documented_distributions():
    graph = random_graph(40, seed=4)
    y = np.full(40, -1)
    y[[2, 14, 33]] = [5, 8, 5]
    model = PoissonLearning(tol=1e-13, max_iter=100_000).fit(np.ones((40, 2)), y, graph=graph)
    seeds = np.flatnonzero(y != -1)
    targets = one_hot([0, 1, 0], seeds, 40, 2)
    expected = softmax_distributions(dense_poisson(graph, seeds, targets), seeds, targets)
    assert_allclose(model.label_distributions_, expected, atol=1e-9)
    assert_array_equal(model.classes_, [5, 8])
    assert_array_equal(model.class_weights_, [1.0, 1.0])


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_transition_kernel_matches_dense(index_dtype):
    graph = random_graph(25, seed=5).tolil()
    graph[7, :] = 0
    graph[:, 7] = 0  # an isolated vertex
    graph = sp.csr_matrix(graph)
    graph.indices, graph.indptr = graph.indices.astype(index_dtype), graph.indptr.astype(index_dtype)
    weights = graph.toarray().astype(np.float64)
    degree = weights.sum(axis=1)
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    values = np.random.default_rng(6).normal(size=(25, 4))
    results = []
    for in_parallel in (False, True):
        out = np.full((25, 4), np.nan)
        transition_rows(graph.indptr, graph.indices, graph.data, inverse, values, out, in_parallel)
        results.append(out)
    assert_allclose(results[0], inverse[:, None] * (weights @ values), rtol=1e-12)
    assert_array_equal(results[0][7], 0.0)
    assert_array_equal(results[0], results[1])


# ---------------------------------------------------------------- the published trend


@pytest.mark.skipif(not os.path.exists(MNIST), reason="MNIST test set not available")
def test_poisson_far_above_laplace_at_one_label_per_class_on_mnist():
    """Calder et al.: at one label per class Laplace learning collapses, Poisson learning does not.

    Measured (MNIST test pixels, cosine K=10, three draws): Poisson 0.84/0.80/0.83,
    with the volume constraint 0.83/0.78/0.85, Laplace (LabelPropagation) 0.13/0.21/0.18.
    """
    data = np.load(MNIST)
    X, truth = data["X"], data["y"]
    graph = build_knn_graph(X, n_neighbors=10)
    rng = np.random.default_rng(0)
    for _ in range(3):
        y = np.full(truth.size, -1)
        seeds = [rng.choice(np.flatnonzero(truth == digit)) for digit in range(10)]
        y[seeds] = truth[seeds]
        unlabeled = y == -1

        def accuracy(model):
            labels = model.fit(X, y, graph=graph).transduction_
            return (labels[unlabeled] == truth[unlabeled]).mean()

        poisson = accuracy(PoissonLearning())
        volume = accuracy(PoissonLearning(volume_constraint=True))
        laplace = accuracy(LabelPropagation())
        assert poisson > 0.72 and volume > 0.72, (poisson, volume)
        assert laplace < 0.35, laplace
        assert poisson - laplace > 0.45


# ---------------------------------------------------------------- class prior and volume constraint


def test_prior_and_volume_constraint_move_the_class_proportions_by_hand():
    """Ladder of 10 layers, 16 unlabeled samples: potentials 1.125 - layer/4 for class 0.

    ``sigma`` (RMS over layers 1-8) = sqrt(0.328125); class 0 wins where
    ``4 u / sigma > log(s_1 / s_0)``. Plain: layers 1-4 (8 of 16). Prior (0.75, 0.25):
    ``s = b / ybar = (1.5, 0.5)``, class 0 down to u > -0.157, layers 1-5 (10 of 16).
    Volume constraint: one step from w = 1 (proportions 10/16 against 12/16) gives
    w = (2.25, 0.1), ``s_0 / s_1 = 67.5``; class 0 down to u > -0.60: layers 1-6, 12 of 16.
    """
    graph, y = ladder(10)
    X = np.ones((20, 1))
    unlabeled = y == -1
    layers = np.arange(20) // 2
    exact = dict(tol=1e-13, max_iter=100_000)

    seeds = np.flatnonzero(~unlabeled)
    potentials, _ = poisson_potentials(graph, seeds, one_hot(y[seeds], seeds, 20, 2), **exact)
    assert_allclose(potentials[:, 0], 1.125 - layers / 4, atol=1e-10)
    assert_allclose(potentials[:, 1], -potentials[:, 0], atol=1e-10)

    def class_zero_share(model):
        return (model.transduction_[unlabeled] == 0).mean()

    plain = PoissonLearning(**exact).fit(X, y, graph=graph)
    assert class_zero_share(plain) == 8 / 16
    prior = PoissonLearning(class_prior=[3, 1], **exact).fit(X, y, graph=graph)
    assert_allclose(prior.class_weights_, [1.5, 0.5])
    assert class_zero_share(prior) == 10 / 16
    volume = PoissonLearning(class_prior=[0.75, 0.25], volume_constraint=True, **exact).fit(X, y, graph=graph)
    assert_allclose(volume.class_weights_, [1.5 * 2.25, 0.5 * 0.1])
    assert class_zero_share(volume) == 12 / 16
    assert_array_equal(volume.transduction_[unlabeled], (layers[unlabeled] > 6).astype(int))
    balanced = PoissonLearning(volume_constraint=True, **exact).fit(X, y, graph=graph)
    assert_array_equal(balanced.class_weights_, [1.0, 1.0])  # the seeds' proportions are met already
    assert_array_equal(balanced.label_distributions_, plain.label_distributions_)


def test_volume_constraint_moves_proportions_towards_the_prior(toy):
    X, labels, graph, _ = toy
    y = np.full(120, -1)
    y[[0, 40, 80]] = [0, 1, 2]
    target = np.array([0.6, 0.2, 0.2])
    share = []
    for volume_constraint in (False, True):
        model = PoissonLearning(volume_constraint=volume_constraint, class_prior=target).fit(X, y, graph=graph)
        share.append(np.bincount(model.transduction_[y == -1], minlength=3) / 117)
    assert np.abs(share[1] - target).max() < np.abs(share[0] - target).max()


# ---------------------------------------------------------------- invariants


def test_distributions_seeds_and_attributes(toy):
    X, labels, graph, y = toy
    model = PoissonLearning().fit(X, y, graph=graph)
    D = model.label_distributions_
    assert D.shape == (120, 3) and np.isfinite(D).all() and (D >= 0).all()
    assert_allclose(D.sum(axis=1), 1.0, atol=1e-12)
    seeds = y != -1
    assert_array_equal(D[seeds], np.eye(3)[y[seeds]])
    assert_array_equal(model.confidence_, D.max(axis=1))
    assert_array_equal(model.transduction_, model.classes_[D.argmax(axis=1)])
    assert (model.transduction_ == labels).mean() > 0.95
    assert MIN_MIXING_ITER <= model.n_iter_ < 1000


def test_confidence_is_lower_between_classes_than_inside_them():
    graph, y = ladder(10)
    model = PoissonLearning(tol=1e-13, max_iter=100_000).fit(np.ones((20, 1)), y, graph=graph)
    confidence = model.confidence_.reshape(10, 2)[1:-1, 0]  # layers 1-8
    assert (np.diff(confidence[:4]) < 0).all() and (np.diff(confidence[4:]) > 0).all()
    assert confidence[[0, -1]].min() > 0.99 and confidence[[3, 4]].max() < 0.75


def test_graph_weight_scale_changes_nothing(toy):
    X, _, graph, y = toy
    first = PoissonLearning().fit(X, y, graph=graph)
    second = PoissonLearning().fit(X, y, graph=graph * 8)  # exact in float32
    assert first.n_iter_ == second.n_iter_
    assert_allclose(first.label_distributions_, second.label_distributions_, rtol=1e-12, atol=1e-15)


def test_same_input_same_output_and_inputs_unchanged(toy):
    X, _, graph, y = toy
    before = X.copy(), y.copy(), graph.copy()
    prior = np.array([1.0, 2.0, 3.0])
    model = PoissonLearning(volume_constraint=True, class_prior=prior)
    params = model.get_params()
    first = model.fit(X, y, graph=graph).label_distributions_
    second = PoissonLearning(volume_constraint=True, class_prior=prior).fit(X, y, graph=graph).label_distributions_
    assert_array_equal(first, second)
    assert_array_equal(X, before[0])
    assert_array_equal(y, before[1])
    assert (graph != before[2]).nnz == 0
    assert model.get_params() == params and model.class_prior is prior
    assert_array_equal(prior, [1.0, 2.0, 3.0])


def test_isolated_vertices_seedless_component_and_isolated_seed(toy):
    X, labels, graph, y = toy
    dense = graph.toarray()
    dense[5] = dense[:, 5] = 0  # an isolated unlabeled vertex
    dense[40] = dense[:, 40] = 0  # an isolated seed
    padded = np.zeros((122, 122), dtype=np.float32)
    padded[:120, :120] = dense
    padded[120, 121] = padded[121, 120] = 0.9  # a seedless two-vertex component
    y = np.concatenate([y, [-1, -1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PoissonLearning().fit(np.vstack([X, X[:2]]), y, graph=sp.csr_matrix(padded))
    D = model.label_distributions_
    assert_allclose(D[[5, 120, 121]], 1 / 3)
    assert_array_equal(D[40], [0, 1, 0])
    rest = np.setdiff1d(np.flatnonzero(y[:120] == -1), [5])
    assert (model.transduction_[rest] == labels[rest]).mean() > 0.95


def test_single_class_and_tiny_inputs_clamp_n_neighbors():
    X = np.random.default_rng(7).normal(size=(10, 3))
    y = np.full(10, -1)
    y[[0, 4]] = 6
    single = PoissonLearning().fit(X, y)
    assert_array_equal(single.transduction_, 6)
    assert_allclose(single.label_distributions_, 1.0)
    y[5] = 2
    clamped = PoissonLearning().fit(X, y)  # n_neighbors=30 on 10 samples
    explicit = PoissonLearning().fit(X, y, graph=build_knn_graph(X, 9))
    assert_array_equal(clamped.label_distributions_, explicit.label_distributions_)
    with pytest.warns(UserWarning, match="every sample is a seed"):
        assert PoissonLearning().fit(X[:1], np.array([7])).transduction_.tolist() == [7]


def test_no_warning_with_defaults_and_warnings_at_max_iter_one(toy):
    X, _, graph, y = toy
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PoissonLearning().fit(X, y, graph=graph)
        PoissonLearning(tol=None, max_iter=3).fit(X, y, graph=graph)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1 .*random walk"):
        PoissonLearning(max_iter=1).fit(X, y, graph=graph)
    with pytest.warns(ConvergenceWarning, match=r"did not converge in max_iter=1 .*> tol=1e-06"):
        PoissonLearning(max_iter=1, tol=1e-6).fit(X, y, graph=graph)


def test_repr_shows_the_changed_parameters():
    model = PoissonLearning(tol=None, volume_constraint=True)
    assert repr(model) == "PoissonLearning(tol=None, volume_constraint=True)"


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(max_iter=0), r"max_iter=0 is out of range"),
        (dict(max_iter=2.5), r"max_iter must be an integer, got 2.5"),
        (dict(tol=-1e-3), r"tol=-0.001 is out of range"),
        (dict(tol="auto"), r"tol='auto' is not supported; choose 'mixing', None or a real number >= 0"),
        (dict(tol=True), r"tol must be a real number, got True"),
        (dict(volume_constraint="yes"), r"volume_constraint must be True or False, got 'yes'"),
        (dict(class_prior=[0.5, -0.5, 1.0]), r"class_prior must be None or a 1-D array of positive finite"),
        (dict(class_prior="uniform"), r"class_prior must be None or a 1-D array .* got 'uniform'"),
        (dict(class_prior=[[1, 1, 1]]), r"class_prior must be None or a 1-D array"),
        (dict(class_prior=[1, np.nan, 1]), r"class_prior must be None or a 1-D array"),
        (dict(class_prior=[1, 1]), r"class_prior has 2 entries but y has 3 classes"),
        (dict(n_neighbors=0), r"n_neighbors=0 is out of range"),
    ],
)
def test_bad_parameters(params, match, toy):
    X, _, graph, y = toy
    with pytest.raises(ValueError, match=match):
        PoissonLearning(**params).fit(X, y, graph=graph)
