import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from fastprop import FastProp, build_knn_graph
from fastprop.threshold import REJECT_ALL, choose_threshold, smoothed_threshold
from reference import many_small_clusters
from threads import run_on_threads


def two_clusters_and_outliers(seed=0, n_cluster=60, n_outlier=25):
    """Two tight clusters with one seed each, plus a far-away group of no class."""
    rng = np.random.default_rng(seed)
    a = np.array([5.0, 0, 0, 0, 0, 0]) + 0.4 * rng.normal(size=(n_cluster, 6))
    b = np.array([0, 5.0, 0, 0, 0, 0]) + 0.4 * rng.normal(size=(n_cluster, 6))
    far = np.array([0, 0, 0, 0, -5.0, -5.0]) + 0.4 * rng.normal(size=(n_outlier, 6))
    X = np.vstack([a, b, far]).astype(np.float32)
    y = np.full(len(X), -1)
    y[0], y[n_cluster] = 3, 8  # non-contiguous labels
    truth = np.r_[np.full(n_cluster, 3), np.full(n_cluster, 8), np.full(n_outlier, -1)]
    return X, y, truth


@pytest.fixture(scope="module")
def fitted():
    """The paper's patch loop (``confidence="both"``), whose parts these tests check."""
    X, y, truth = two_clusters_and_outliers()
    model = FastProp(n_neighbors=8, random_state=0, confidence="both").fit(X, y)
    return X, y, truth, model


def test_clusters_get_their_seed_label_and_outliers_minus_one(fitted):
    _, _, truth, model = fitted
    assert_array_equal(model.classes_, [3, 8])
    assert_array_equal(model.transduction_, truth)
    assert 0 < model.outlier_threshold_ < 1
    assert model.n_iter_ >= 2


def test_the_default_labels_the_clusters_and_rejects_the_far_group_without_a_patch():
    X, y, truth = two_clusters_and_outliers()
    model = FastProp(n_neighbors=8, random_state=0).fit(X, y)
    assert_array_equal(model.transduction_, truth)
    assert model.n_iter_ == 0 and np.all(model.view_count_[y < 0] <= 1)


def test_invariants(fitted):
    X, y, _, model = fitted
    n = len(X)
    assert model.label_distributions_.shape == (n, 2)
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0)
    assert np.all(model.label_distributions_ >= 0)
    seeds = y >= 0
    assert_array_equal(model.transduction_[seeds], y[seeds])
    assert np.all(model.confidence_[seeds] == 1.0)
    assert np.all((model.confidence_ >= 0) & (model.confidence_ <= 1))
    assert np.all(np.isfinite(model.multiview_confidence_))
    assert model.view_count_.shape == (n,) and model.view_count_[seeds].sum() == 0
    assert set(model.timings_) == {"graph", "training", "propagation", "confnet", "self_training", "threshold",
                                   "provisional"}


def test_confidence_combines_multiview_and_confnet(fitted):
    _, y, _, model = fitted
    unlabeled = y < 0
    expected = 0.5 * (model.multiview_confidence_ + model.confnet_confidence_)
    assert_allclose(model.confidence_[unlabeled], np.clip(expected[unlabeled], 0, 1))


def test_inputs_unchanged_and_bit_identical_repeats():
    X, y, _ = two_clusters_and_outliers(seed=1)
    graph = build_knn_graph(X, 8)
    X_copy, y_copy, graph_copy = X.copy(), y.copy(), graph.copy()
    first = FastProp(random_state=7).fit(X, y, graph=graph)
    second = FastProp(random_state=7).fit(X, y, graph=graph)
    assert_array_equal(X, X_copy)
    assert_array_equal(y, y_copy)
    assert (graph != graph_copy).nnz == 0
    for name in ("transduction_", "label_distributions_", "confidence_", "view_count_"):
        assert_array_equal(getattr(first, name), getattr(second, name))


@pytest.mark.parametrize(("confnet_features", "confidence"),
                         [("structure", "both"), ("embedding", "both"), ("structure", "auto")])
def test_a_far_off_cluster_of_junk_leaves_auto_as_it_was(confnet_features, confidence):
    """Junk no patch reaches is rejected, and counts for nothing in what "auto" decides about the rest.

    Fuzzing round 9: 2,000 unlabeled near-copies of one far direction (a separate component of the
    graph) made "auto" reject 18.9% of the in-class samples instead of 2.4% (the share the provisional
    classes claimed, ConfNet's negatives and self-training's candidates all took the junk in). ConfNet
    on embeddings, no longer trained on the junk, scored it ~0.98 by extrapolation (a review): it has
    no views, so its ConfNet confidence is 0 too.
    """
    from fastprop.evaluation.datasets import make_noisy_mixture

    X, pool = make_noisy_mixture(2000, 10, n_features=32, random_state=0)
    X, truth = X[pool >= 0], pool[pool >= 0]
    rng = np.random.default_rng(0)
    y = np.full(truth.size, -1)
    for c in range(10):
        y[rng.choice(np.flatnonzero(truth == c), 2, replace=False)] = c
    direction = rng.normal(size=X.shape[1])
    junk = (direction / np.linalg.norm(direction) + 0.01 * rng.normal(size=(2000, X.shape[1]))).astype(np.float32)
    alone = FastProp(random_state=0, confnet_features=confnet_features, confidence=confidence).fit(X, y)
    with_junk = np.vstack([X, junk]), np.r_[y, np.full(2000, -1)]
    mixed = FastProp(random_state=0, confnet_features=confnet_features, confidence=confidence).fit(*with_junk)
    assert not mixed.view_count_[truth.size:].any()
    assert np.all(mixed.transduction_[truth.size:] == -1)
    assert np.all(mixed.confidence_[truth.size:] == 0)
    assert np.all(mixed.confnet_confidence_[truth.size:] == 0) or mixed.n_iter_ == 0  # no ConfNet: NaN
    fixed = FastProp(random_state=0, confnet_features=confnet_features, outlier_threshold=0.1,
                     provisional_classes=False, confidence=confidence).fit(*with_junk)
    assert np.all(fixed.transduction_[truth.size:] == -1)  # 0 confidence: below any threshold given
    unlabeled = np.flatnonzero(y < 0)

    def rejected(model):
        return np.mean(model.transduction_[unlabeled] == -1)

    def accuracy(model):
        return np.mean(model.transduction_[unlabeled] == truth[unlabeled])

    assert 0 < rejected(alone) < 0.05
    assert abs(rejected(mixed) - rejected(alone)) < 0.01
    assert abs(accuracy(mixed) - accuracy(alone)) < 0.01


def test_with_a_validation_set_samples_no_patch_reaches_keep_confidence_zero():
    """A contract audit: the calibration mapped the junk's 0 to ~0.03 (and its neighbourhood rescoring kept it),
    so a threshold of 0.01 given with a validation set accepted a whole seedless cluster, with classes."""
    from fastprop.evaluation.datasets import make_noisy_mixture

    X, truth = make_noisy_mixture(1500, 5, random_state=0)
    y = np.full(1500, -1)
    for c in range(5):
        y[np.flatnonzero(truth == c)[:5]] = c
    rng = np.random.default_rng(7)
    direction = rng.normal(size=X.shape[1])
    junk = direction + 0.02 * rng.normal(size=(200, X.shape[1]))  # a component of its own, no seed
    with_junk = np.vstack([X, junk]).astype(np.float32), np.r_[y, np.full(200, -1)]
    candidates = np.flatnonzero(y == -1)
    shown = np.sort(rng.choice(candidates, 40, replace=False))
    for threshold in ("auto", 0.01):
        model = FastProp(random_state=0, outlier_threshold=threshold).fit(*with_junk, validation=(shown, truth[shown]))
        assert model.confidence_calibration_ is not None  # calibrated
        assert not model.view_count_[1500:].any()
        assert np.all(model.confidence_[1500:] == 0.0) and np.all(model.transduction_[1500:] == -1)


def test_auto_rejects_every_sample_no_patch_reaches():
    """The seeds in a component of their own: no unlabeled sample has a view, "auto" rejects them all.

    (A review: "auto" then read no sample, chose 0 and accepted all 200 with confidence 0.)
    """
    rng = np.random.default_rng(0)
    centres = 5 * np.eye(8)[:2]
    seeds = np.repeat(centres, 4, axis=0) + 0.1 * rng.normal(size=(8, 8))
    others = np.repeat(centres, 100, axis=0) + rng.normal(size=(200, 8))
    X = np.vstack([seeds, others]).astype(np.float32)
    y = np.r_[np.repeat([0, 1], 4), np.full(200, -1)]
    graph = sp.block_diag([build_knn_graph(seeds.astype(np.float32), 3),
                           build_knn_graph(others.astype(np.float32), 8)], format="csr")
    for settings in ({}, {"provisional_classes": False}, {"outlier_share": 0.2}):
        model = FastProp(random_state=0, n_neighbors=8, **settings).fit(X, y, graph=graph)
        assert not model.view_count_[8:].any()
        assert np.all(model.transduction_[8:] == -1) and np.all(model.confidence_[8:] == 0)
    kept = FastProp(random_state=0, n_neighbors=8, outlier_share=0).fit(X, y, graph=graph)  # 0: reject none
    assert np.all(kept.transduction_[8:] >= 0)


@pytest.mark.parametrize("predictor_depth", [1, 2])
def test_whole_graph_products_in_blocks_of_rows_change_nothing(predictor_depth, monkeypatch):
    import fastprop.adjacency
    import fastprop.prediction
    import fastprop.propagation

    X, y, _ = two_clusters_and_outliers(seed=2, n_cluster=200, n_outlier=120)
    graph = build_knn_graph(X, 8)
    # 520 rows: one block. The far group is no patch's, so only an annotated outlier gives it a provisional class.
    at_once = FastProp(predictor_depth=predictor_depth, random_state=0).fit(X, y, graph=graph, outliers=[400])
    assert at_once.n_provisional_classes_ > 0  # the known-class confidence of every row is smoothed too
    for module in (fastprop.adjacency, fastprop.propagation, fastprop.prediction):
        monkeypatch.setattr(module, "BLOCK_ROWS", 64)
    in_blocks = FastProp(predictor_depth=predictor_depth, random_state=0).fit(X, y, graph=graph, outliers=[400])
    for name in ("transduction_", "label_distributions_", "confidence_"):
        assert_array_equal(getattr(in_blocks, name), getattr(at_once, name))
    assert_array_equal(in_blocks.predict_confidence(X[::7] + 0.01), at_once.predict_confidence(X[::7] + 0.01))


def test_same_output_with_one_and_two_numba_threads():
    script = textwrap.dedent(
        """
        import sys, numpy as np, numba
        sys.path.insert(0, {tests!r})
        from test_estimator import two_clusters_and_outliers
        from fastprop import FastProp
        X, y, _ = two_clusters_and_outliers(seed=2)
        out = []
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            m = FastProp(random_state=3, n_neighbors=8).fit(X, y)
            out.append(np.concatenate([m.label_distributions_.ravel(), m.confidence_]).tobytes())
        print(out[0] == out[1])
        """
    ).format(tests=str(__import__("pathlib").Path(__file__).parent))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={**__import__("os").environ, "NUMBA_NUM_THREADS": "2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_validation_chooses_the_threshold():
    X, y, truth = two_clusters_and_outliers(seed=3)
    candidates = np.flatnonzero(y < 0)[::6]
    model = FastProp(n_neighbors=8, random_state=0).fit(X, y, validation=(candidates, truth[candidates]))
    rejected = model.confidence_[candidates] < model.outlier_threshold_
    accuracy = np.mean(np.where(rejected, -1, model.transduction_[candidates]) == truth[candidates])
    assert accuracy == 1.0


@pytest.mark.parametrize("rule, choose", [("smoothed", smoothed_threshold), ("max", choose_threshold)])
def test_validation_rule_chooses_on_the_final_confidence(rule, choose):
    X, y, truth = two_clusters_and_outliers(seed=5)
    validation = np.flatnonzero(y < 0)[::4]
    model = FastProp(n_neighbors=8, random_state=0, validation_rule=rule, calibrate_confidence=False).fit(
        X, y, validation=(validation, truth[validation]))
    fitted_class = model.label_distributions_.argmax(axis=1)
    encoded = np.where(truth < 0, -1, np.searchsorted(model.classes_, truth))  # labels 3 and 8 are classes 0 and 1
    expected = choose(model.confidence_[validation], fitted_class[validation], encoded[validation])
    assert model.outlier_threshold_ == min(max(expected, 0.0), REJECT_ALL)


@pytest.mark.parametrize("given", [None, 0.5])
def test_a_given_threshold_is_kept_with_a_validation_set(given):
    """A number or None is the threshold; the validation set still calibrates the same confidence.

    Fuzzing round 9: with a validation set every setting was replaced by the validation set's choice, so
    a calibrated fit that rejects nothing (or rejects where a wrong label is likelier) was impossible.
    """
    from fastprop.evaluation.datasets import make_noisy_mixture

    X, truth = make_noisy_mixture(3000, 10, n_features=32, random_state=1)  # truth -1: outliers
    rng = np.random.default_rng(1)
    y = np.full(truth.size, -1)
    for c in range(10):
        y[rng.choice(np.flatnonzero(truth == c), 3, replace=False)] = c
    validation = np.flatnonzero(y < 0)[::8]
    chosen = FastProp(random_state=0).fit(X, y, validation=(validation, truth[validation]))
    kept = FastProp(random_state=0, outlier_threshold=given).fit(X, y, validation=(validation, truth[validation]))
    # the validation set also chose the samples first given provisional classes: the same confidence
    assert chosen.n_provisional_classes_ == kept.n_provisional_classes_
    assert_array_equal(kept.confidence_, chosen.confidence_)
    assert kept.confidence_calibration_ == chosen.confidence_calibration_ is not None
    expected = 0.0 if given is None else given
    assert kept.outlier_threshold_ == expected != chosen.outlier_threshold_
    unlabeled = y < 0
    assert_array_equal(kept.transduction_[unlabeled] == -1, kept.confidence_[unlabeled] < expected)


def test_fixed_and_disabled_threshold():
    X, y, _ = two_clusters_and_outliers(seed=4)
    never = FastProp(n_neighbors=8, random_state=0, outlier_threshold=None).fit(X, y)
    assert never.outlier_threshold_ == 0.0 and np.all(never.transduction_ >= 0)
    always = FastProp(n_neighbors=8, random_state=0, outlier_threshold=1.0).fit(X, y)
    assert np.all(always.transduction_[y < 0] == -1)


@pytest.mark.parametrize("confidence", ["both", "multiview", "confnet", "random"])
@pytest.mark.parametrize("confnet_features, training", [("structure", "graph"), ("embedding", "patches")])
def test_ablation_switches_run(confidence, confnet_features, training):
    X, y, _ = two_clusters_and_outliers(seed=5)
    model = FastProp(n_neighbors=8, random_state=0, confidence=confidence, confnet_features=confnet_features,
                     predictor_training=training, predictor_depth=1, eta=0.1, max_patch_size=50).fit(X, y)
    assert_allclose(model.label_distributions_.sum(axis=1), 1.0)
    if confidence == "multiview":
        assert np.all(np.isnan(model.confnet_confidence_))
    assert (model.n_training_patches_ > 0) == (training == "patches")


def test_single_class_all_labeled_and_duplicates():
    X, _, _ = two_clusters_and_outliers(seed=6)
    y = np.full(len(X), -1)
    y[0] = 1
    single = FastProp(n_neighbors=8, random_state=0).fit(X, y)
    assert set(np.unique(single.transduction_)) <= {-1, 1}
    assert_allclose(single.label_distributions_, 1.0)
    with pytest.warns(UserWarning, match="every sample is a seed"):
        every = FastProp(random_state=0).fit(X[:10], np.arange(10) % 2)
    assert_array_equal(every.transduction_, np.arange(10) % 2)
    assert np.all(every.confidence_ == 1.0) and every.n_iter_ == 0
    doubled = np.vstack([X, X])
    y2 = np.full(len(doubled), -1)
    y2[[0, 60]] = [0, 1]
    twice = FastProp(n_neighbors=8, random_state=0).fit(doubled, y2)
    assert_allclose(twice.label_distributions_.sum(axis=1), 1.0)


def test_isolated_vertices_and_components():
    import scipy.sparse as sp

    X, y, _ = two_clusters_and_outliers(seed=7)
    graph = build_knn_graph(X, 8).tolil()
    graph[5, :] = 0
    graph[:, 5] = 0
    graph = graph.tocsr()
    model = FastProp(random_state=0).fit(X, y, graph=graph)
    assert np.all(np.isfinite(model.label_distributions_))
    assert model.view_count_[5] == 0 and model.multiview_confidence_[5] == 0
    empty = FastProp(random_state=0, outlier_threshold=None).fit(X, y, graph=sp.csr_matrix((len(X), len(X))))
    assert_allclose(empty.label_distributions_.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"min_gain": 0}, r"min_gain=0 is out of range"),
        ({"max_patch_size": 1}, r"max_patch_size=1 is out of range; allowed: \[2, 2\*\*63 - 1\]"),
        ({"confident_threshold": 1.5}, r"confident_threshold=1.5 is out of range"),
        ({"eta": 0.7}, r"eta=0.7 is out of range"),
        ({"confidence": "gt"}, "confidence='gt' is not supported"),
        ({"outlier_threshold": "otsu"}, "outlier_threshold='otsu' is not supported"),
        ({"outlier_threshold": 2.0}, r"outlier_threshold=2.0 is out of range"),
        ({"validation_rule": "best"}, "validation_rule='best' is not supported"),
        ({"outlier_share": 1.0}, r"outlier_share=1.0 is out of range"),
        ({"outlier_share": -0.1}, r"outlier_share=-0.1 is out of range"),
        ({"outlier_share": float("nan")}, r"outlier_share must be finite"),
        ({"outlier_share": "half"}, r"outlier_share must be"),
        ({"predictor_depth": -1}, "predictor_depth=-1 is out of range"),
        ({"random_state": "x"}, "random_state must be"),
        ({"predictor_training": "seeds"}, "predictor_training='seeds' is not supported"),
        ({"process_capped_patches": 1}, "process_capped_patches must be True or False"),
        ({"single_view_restarts": "no"}, "single_view_restarts must be True or False"),
        ({"calibrate_confidence": "yes"}, "calibrate_confidence must be True or False"),
        ({"patch_batch_size": 0}, r"patch_batch_size=0 is out of range"),
        ({"patch_batch_size": 256}, r"patch_batch_size=256 is out of range"),
        ({"patch_batch_size": "big"},
         r"patch_batch_size='big' is not supported; use 'auto' or an integer in \[1, 255\]"),
        ({"pseudo_labels": -1}, r"pseudo_labels=-1 is out of range"),
        ({"pseudo_labels": 2.5}, "pseudo_labels must be an integer"),
        ({"pseudo_labels": "many"}, r"pseudo_labels='many' is not supported; use 'auto' or an integer >= 0"),
    ],
)
def test_bad_parameters(params, message):
    X, y, _ = two_clusters_and_outliers()
    with pytest.raises(ValueError, match=message):
        FastProp(**params).fit(X, y)


def test_bad_inputs():
    X, y, _ = two_clusters_and_outliers()
    with pytest.raises(ValueError, match="y has 10 labels but X has 145 samples"):
        FastProp().fit(X, y[:10])
    with pytest.raises(ValueError, match="no labeled sample"):
        FastProp().fit(X, np.full(len(X), -1))
    with pytest.raises(ValueError, match="Unknown label type: y holds non-integral numbers"):
        FastProp().fit(X, y + 0.5)
    with pytest.raises(ValueError, match="graph has shape"):
        FastProp().fit(X, y, graph=build_knn_graph(X[:50], 5))
    with pytest.raises(ValueError, match="validation indices must be in"):
        FastProp().fit(X, y, validation=([1, 500], [3, 3]))
    with pytest.raises(ValueError, match="labeled seeds"):
        FastProp().fit(X, y, validation=([0, 1], [3, 3]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        bad = X.copy()
        bad[3, 0] = np.nan
        FastProp().fit(bad, y)


def test_parameters_are_not_modified_by_fit():
    X, y, _ = two_clusters_and_outliers()
    model = FastProp(n_neighbors=500, max_patch_size=10_000, random_state=0)
    model.fit(X, y)
    assert model.n_neighbors == 500 and model.max_patch_size == 10_000


def test_automatic_threshold_is_half_of_otsus_split():
    from fastprop.threshold import automatic_threshold, otsu_threshold

    rng = np.random.default_rng(0)
    confidence = np.r_[rng.uniform(0.0, 0.2, 300), rng.uniform(0.8, 1.0, 700)]
    split = otsu_threshold(confidence)
    assert 0.2 <= split <= 0.8
    # brute force: the split maximising between-group variance over all bin edges
    edges = np.linspace(0, 1, 257)[1:]
    scores = [np.mean(confidence < t) * np.mean(confidence >= t)
              * (confidence[confidence < t].mean() - confidence[confidence >= t].mean()) ** 2
              if 0 < np.mean(confidence < t) < 1 else 0 for t in edges]
    low = confidence < split
    best = max(scores)
    assert np.mean(low) * np.mean(~low) * (confidence[low].mean() - confidence[~low].mean()) ** 2 == pytest.approx(best)
    assert automatic_threshold(confidence) == pytest.approx(split / 2)


def test_graph_training_predictor_matches_an_independent_sgc_fit():
    """With predictor_training="graph" (and no self-training) the local predictor is softmax regression on
    (D~^-1 A~)^2 X at the seeds."""
    from fastprop.linear import fit_softmax_regression

    X, y, _ = two_clusters_and_outliers(seed=8)
    graph = build_knn_graph(X, 8)
    model = FastProp(random_state=0, outlier_threshold=None, pseudo_labels=0).fit(X, y, graph=graph)
    dense = graph.toarray().astype(np.float64) + np.eye(len(X))
    operator = dense / dense.sum(axis=1, keepdims=True)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    smoothed = operator @ operator @ unit
    seeds = np.flatnonzero(y >= 0)
    coef, intercept = fit_softmax_regression(smoothed[seeds], np.eye(2)[[0, 1]], l2=3e-5)
    logits = smoothed @ coef + intercept
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    # vertices no patch reached get the predictor on their whole-graph neighbourhood
    only_global = (model.view_count_ == 0) & (y < 0)
    assert only_global.sum() == 25  # the far group: no seed, no patch reaches it
    assert_allclose(model.label_distributions_[only_global], expected[only_global], atol=1e-4)


def test_row_norms_do_not_matter():
    """The graph is cosine and the predictor reads unit rows: rescaling samples changes nothing."""
    X, y, truth = two_clusters_and_outliers(seed=15)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    rescaled = unit * np.random.default_rng(15).uniform(0.2, 5.0, size=(len(X), 1))
    graph = build_knn_graph(unit, 8)
    for training in ("graph", "patches"):
        a = FastProp(random_state=0, predictor_training=training).fit(unit, y, graph=graph)
        b = FastProp(random_state=0, predictor_training=training).fit(rescaled, y, graph=graph)
        assert_allclose(a.label_distributions_, b.label_distributions_, atol=1e-5)
        assert_allclose(a.confidence_, b.confidence_, atol=1e-5)
        assert_array_equal(a.transduction_, b.transduction_)


def test_progress_callback_and_silence(capsys):
    X, y, _ = two_clusters_and_outliers(seed=9)
    calls = []
    FastProp(n_neighbors=8, random_state=0, confidence="both", progress=lambda *args: calls.append(args)).fit(X, y)
    stages = [stage for stage, _, _ in calls]
    assert stages[0] == "graph" and stages[1] == "training" and stages[-1] == "done"
    assert stages.index("confnet") < stages.index("provisional") < stages.index("done")
    counts = [(done, total) for stage, done, total in calls if stage == "propagation"]
    assert counts and all(total == len(X) for _, total in counts)
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    FastProp(n_neighbors=8, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
    FastProp(n_neighbors=8, random_state=0, verbose=True).fit(X, y)
    assert "fastprop: training the local predictor" in capsys.readouterr().err
    with pytest.raises(ValueError, match="progress must be a callable"):
        FastProp(progress=3).fit(X, y)


@pytest.mark.parametrize("n_classes", [1, 2, 5])
def test_structural_features_match_a_dense_reference_with_empty_rows(n_classes):
    import scipy.sparse as sp

    from fastprop.adjacency import RandomWalk
    from fastprop.confnet import structural_features

    from reference import slow_structural_features

    rng = np.random.default_rng(20 + n_classes)
    dense = rng.uniform(size=(2100, 2100)).astype(np.float32)  # > one task of rows
    dense[dense < 0.995] = 0
    dense = np.triu(dense, 1)
    dense = dense + dense.T
    dense[[0, 7, 2099]] = 0
    dense[:, [0, 7, 2099]] = 0  # isolated, among them the last row
    distributions = rng.dirichlet(np.ones(n_classes), size=2100)
    distributions[3] = np.eye(n_classes)[0]  # exact zeros in the entropy
    distributions[4] = 1.0 / n_classes  # a tie for the top
    view_count = rng.integers(0, 5, size=2100)
    features = structural_features(RandomWalk(sp.csr_matrix(dense)), distributions, view_count)
    assert_allclose(features, slow_structural_features(dense, distributions, view_count), rtol=1e-6, atol=1e-9)


def test_structural_features_hand_worked():
    import scipy.sparse as sp

    from fastprop.adjacency import RandomWalk
    from fastprop.confnet import structural_features

    dense = np.array([[0, 0.5, 0.2, 0], [0.5, 0, 0, 0], [0.2, 0, 0, 0], [0, 0, 0, 0]], dtype=np.float32)
    distributions = np.array([[0.7, 0.3], [0.5, 0.5], [0.1, 0.9], [1.0, 0.0]])
    features = structural_features(RandomWalk(sp.csr_matrix(dense)), distributions, np.array([2, 1, 3, 0]))
    assert_allclose(features[:, 0], [0.7, 0.5, 0.9, 1.0])          # top probability
    assert_allclose(features[:, 1], [0.4, 0.0, 0.8, 1.0])          # margin
    assert_allclose(features[:, 6], [0.5, 0.5, 0.2, 0.0])          # max edge weight, 0 when isolated
    assert_allclose(features[:, 5], [0.35, 0.5, 0.2, 0.0])         # mean edge weight
    # vertex 1: (1 * [0.5, 0.5] + 0.5 * [0.7, 0.3]) / 1.5 = [0.5667, 0.4333]
    assert_allclose(features[1, 3], 0.85 / 1.5)
    assert_allclose(features[:, 8], np.log1p([2, 1, 3, 0]))


def test_tiny_inputs_with_isolated_last_vertex():
    rng = np.random.default_rng(0)
    for n, y in ((2, [0, -1]), (3, [5, -1, -1])):
        model = FastProp(random_state=0).fit(rng.normal(size=(n, 3)), np.array(y))
        assert np.all(np.isfinite(model.confidence_))
        assert_allclose(model.label_distributions_.sum(axis=1), 1.0)


def test_a_patch_that_is_the_whole_small_graph_is_processed():
    X = np.array([[1.0, 0.1], [0.9, 0.2]])
    model = FastProp(random_state=0, outlier_threshold=None).fit(X, np.array([0, -1]))
    assert model.n_iter_ == 1 and model.view_count_[1] == 1
    assert model.transduction_.tolist() == [0, 0]


def test_capped_patches_are_processed_only_when_asked():
    X, y, _ = two_clusters_and_outliers(seed=10)
    loop = dict(n_neighbors=8, random_state=0, max_patch_size=10, min_gain=50.0, confidence="both")
    skipped = FastProp(**loop).fit(X, y)
    processed = FastProp(**loop, process_capped_patches=True).fit(X, y)
    assert skipped.n_iter_ == 0 and np.all(skipped.view_count_ == 0)
    assert processed.n_iter_ == 2 and processed.view_count_.max() == 1  # one patch per seed


def test_warmup_runs_both_training_paths():
    from fastprop import warmup

    seconds = warmup()
    assert isinstance(seconds, float) and seconds >= 0.0


def test_warmup_compiles_the_hnsw_path_too():
    """A contract audit: the hnsw search's copy hashes (every fit above 30,000 samples) were compiled by the first
    real fit. Checked in a fresh process, where nothing else has called them."""
    import subprocess
    import sys

    code = ("import fastprop; from fastprop._kernels import copies; fastprop.warmup(); "
            "assert copies.row_hashes.signatures")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_batched_patches_give_the_same_result_with_one_and_two_threads_in_process():
    import numba

    X, y, _ = two_clusters_and_outliers(seed=13, n_cluster=150)
    results = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        model = run_on_threads(threads, lambda: FastProp(n_neighbors=8, random_state=0, patch_batch_size=4,
                                                         min_gain=20.0, confidence="both").fit(X, y))
        results.append(np.concatenate([model.label_distributions_.ravel(), model.confidence_]))
    assert_array_equal(results[0], results[1])
    assert model.n_iter_ >= 2
    assert numba.get_parallel_chunksize() == 0  # the batches' one-at-a-time schedule does not leak out


def test_patch_buffers_larger_than_memory_are_refused_up_front(monkeypatch):
    import fastprop._validation.memory
    from fastprop.estimator import PEAK_CLASS_ARRAYS

    X, y, _ = two_clusters_and_outliers()
    graph = build_knn_graph(X, 8, method="exact")
    enough_for_the_class_arrays = PEAK_CLASS_ARRAYS * 8 * X.shape[0] * 2
    monkeypatch.setattr(fastprop._validation.memory, "physical_memory", lambda: enough_for_the_class_arrays)
    with pytest.raises(ValueError, match=r"patch buffers \(max_patch_size=3000.*lower max_patch_size"):
        FastProp(n_neighbors=8, random_state=0, confidence="both").fit(X, y, graph=graph)


def test_class_arrays_larger_than_memory_are_refused_up_front(monkeypatch):
    """Fuzzing round 14: 100k samples and 10k classes grew past 15 GB before the patch loop, to be
    needing about 40 GB; the fit's peak is about five samples x classes float64 arrays."""
    import fastprop._validation.memory
    from fastprop.estimator import PEAK_CLASS_ARRAYS

    X, y, _ = two_clusters_and_outliers()
    graph = build_knn_graph(X, 8, method="exact")
    needed = PEAK_CLASS_ARRAYS * 8 * X.shape[0] * 2
    monkeypatch.setattr(fastprop._validation.memory, "physical_memory", lambda: needed - 1)
    with pytest.raises(ValueError, match=rf"FastProp on {X.shape[0]} samples and 2 classes .* predict the rest"):
        FastProp(n_neighbors=8, random_state=0, max_patch_size=20).fit(X, y, graph=graph)


def test_auto_without_validation_warns_from_many_classes_up():
    import warnings

    from fastprop.threshold import MANY_CLASSES, OutlierThresholdWarning

    X, y, truth = many_small_clusters(MANY_CLASSES, 6, 16)
    with pytest.warns(OutlierThresholdWarning, match=rf"on {MANY_CLASSES} classes.*outlier_share") as record:
        FastProp(n_neighbors=5, random_state=0).fit(X, y)
    assert [w.filename for w in record] == [__file__]  # points at the caller's fit
    validation = np.flatnonzero(y < 0)[::3]
    quiet = [({}, {"validation": (validation, truth[validation])}),  # a validation set chooses the threshold
             ({"outlier_share": 0.0}, {}), ({"outlier_threshold": 0.3}, {}), ({"outlier_threshold": None}, {})]
    X_fewer, y_fewer, _ = many_small_clusters(MANY_CLASSES - 1, 6, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for kwargs, fit_kwargs in quiet:
            FastProp(n_neighbors=5, random_state=0, **kwargs).fit(X, y, **fit_kwargs)
        FastProp(n_neighbors=5, random_state=0).fit(X_fewer, y_fewer)


def test_a_validation_set_of_known_outliers_only_warns_that_everything_is_rejected():
    """Fuzzing round 14: one known outlier as the whole validation set rejected 99% of the samples, silently."""
    import warnings

    from fastprop.threshold import OutlierThresholdWarning

    X, y, truth = two_clusters_and_outliers()
    outliers, in_class = np.flatnonzero(truth < 0)[:3], np.flatnonzero((truth >= 0) & (y < 0))[:3]
    with pytest.warns(OutlierThresholdWarning, match=r"only known outliers \(3 of them\).*outliers=") as record:
        model = FastProp(n_neighbors=8, random_state=0).fit(X, y, validation=(outliers, truth[outliers]))
    assert [w.filename for w in record] == [__file__]
    assert np.all(model.transduction_[y < 0] == -1)  # what it warned of
    mixed = np.r_[outliers, in_class]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FastProp(n_neighbors=8, random_state=0).fit(X, y, validation=(mixed, truth[mixed]))
        FastProp(n_neighbors=8, random_state=0, outlier_threshold=0.3).fit(X, y, validation=(outliers, truth[outliers]))


def test_rows_that_nearly_all_point_one_way_are_labelled_not_rejected():
    """Fuzzing round 14: embeddings with a large common offset (mean cosine 0.9999) left the predictor's
    probabilities near uniform under its fixed penalty, and every unlabeled sample was rejected."""
    from fastprop._settings import PARALLEL_SPREAD, predictor_penalty
    from fastprop.evaluation.datasets import make_noisy_mixture

    X, truth = make_noisy_mixture(1200, 4, n_features=16, overlap=0.3, outlier_fraction=0.0, random_state=0)
    y = np.full(truth.size, -1)
    for label in range(4):
        y[np.flatnonzero(truth == label)[:3]] = label
    model = FastProp(random_state=0).fit(X + 10.0, y)
    assert np.mean(model.transduction_[y < 0] == -1) < 0.1  # all of them before
    assert np.mean(model.transduction_ == truth) > 0.9
    # the penalty used, on the spread of the rows' directions (1 - ||mean unit row||^2)
    unit = (X + 10.0) / np.linalg.norm(X + 10.0, axis=1, keepdims=True)
    spread = 1.0 - np.sum(unit.mean(axis=0) ** 2)
    assert spread < PARALLEL_SPREAD / 10
    assert model.predictor_l2_ == pytest.approx(model.predictor_l2 * spread / PARALLEL_SPREAD, rel=1e-2)  # float32 rows
    assert FastProp(random_state=0).fit(X, y).predictor_l2_ == model.predictor_l2  # spread as embeddings do
    # the penalty is the setting wherever rows spread as the data sets measured (0.31-0.96), smaller below
    assert predictor_penalty(3e-5, PARALLEL_SPREAD) == predictor_penalty(3e-5, 0.9) == 3e-5
    assert predictor_penalty(3e-5, PARALLEL_SPREAD / 100) == pytest.approx(3e-7)
    assert predictor_penalty(3e-5, 0.0) > 0.0  # rows of one direction: still strictly convex


def test_the_threshold_warning_is_public():
    import fastprop
    from fastprop.threshold import OutlierThresholdWarning

    assert fastprop.OutlierThresholdWarning is OutlierThresholdWarning
    assert issubclass(OutlierThresholdWarning, UserWarning)


def test_a_cluster_with_a_single_seed_is_propagated_through_not_rejected():
    # Three separated clusters (a component each), two of them with one seed: the seed's patch is the only one
    # there, its vertices keep the single-view confidence and the paper's loop stopped; the outlier threshold
    # then rejected both clusters whole (found by fuzzing).
    rng = np.random.default_rng(7)
    truth = np.arange(900) % 3
    X = (rng.normal(size=(3, 16)) * 3)[truth] + rng.normal(size=(900, 16))
    y = np.full(900, -1)
    for k, n_seeds in enumerate((80, 1, 1)):
        y[np.flatnonzero(truth == k)[:n_seeds]] = k
    # a patch covers half a cluster, as 500 does in 1,000 samples
    settings = dict(min_gain=150, random_state=0, confidence="both")
    paper = FastProp(single_view_restarts=False, **settings).fit(X, y)
    assert np.mean(paper.transduction_[truth > 0] == -1) > 0.9
    model = FastProp(**settings).fit(X, y)
    assert_array_equal(model.transduction_, truth)
    assert np.all(model.view_count_[(truth > 0) & (y < 0)] >= 2)
    # The default's global confidence is 0.999 everywhere here: its first identification (the lowest 15%,
    # but none at 0.9 or above) gives no sample a provisional class; the lowest 15% alone gave two clusters away.
    default = FastProp(min_gain=150, random_state=0).fit(X, y)
    assert_array_equal(default.transduction_, truth)
    assert default.n_provisional_classes_ == 0 and default.n_iter_ == 0
