"""Values past what a machine integer, float64 or the machine's memory holds, and inputs of the wrong kind.

Found by fuzzing the public API: each used to fail deep inside (an
OverflowError from Numba or NumPy, a tokenizer's error from a crafted
``.npy`` header, an AttributeError, a ZeroDivisionError, a silent NaN or a
hang); each is now a ValueError that says what was wrong, or the right
answer.
"""

import io
import struct

import numpy as np
import pytest
import scipy.sparse as sp

from fastprop import FastProp, build_knn_graph, load_graph, refine_confidence
from fastprop._files import read_npy
from fastprop._validation import check_graph
from fastprop.evaluation.benchmark import load_benchmark_data, make_method, run_table
from fastprop.evaluation.datasets import load_embeddings, make_noisy_mixture
from fastprop.evaluation.protocol import NoisyTask, calibration_error, evaluate, make_noisy_task, outlier_auroc
from fastprop.threshold import (accuracy_with_rejection, automatic_threshold, choose_threshold, otsu_threshold,
                                smoothed_threshold, smoothing_bandwidth)
from test_protocol import _hand_task

BEYOND_INT64 = 2**63


@pytest.fixture(scope="module")
def problem(two_clusters):
    return two_clusters


@pytest.fixture(scope="module")
def fitted(problem):
    X, y, graph = problem
    return FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph)


def _npy_with_header(header):
    """The bytes of a version 1.0 ``.npy`` file whose header text is ``header`` (and no data)."""
    text = header.encode("latin1")
    padding = -(10 + len(text) + 1) % 64
    text += b" " * padding + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


# ------------------------------------------------ integers beyond int64


@pytest.mark.parametrize("setting", ["max_patch_size", "exclusion_hops", "n_neighbors", "pseudo_labels"])
def test_integer_settings_beyond_int64_are_refused(problem, setting):
    X, y, graph = problem
    with pytest.raises(ValueError, match=rf"{setting}={BEYOND_INT64} is out of range; allowed: \[\d+, 2\*\*63 - 1\]"):
        FastProp(**{setting: BEYOND_INT64}).fit(X, y, graph=graph, validation=([10, 110], [0, 1]))


def test_an_unlabeled_marker_beyond_int64_is_refused(problem):
    X, y, _ = problem
    with pytest.raises(ValueError, match=r"unlabeled=18446744073709551616 is outside int64"):
        FastProp(unlabeled=2**64).fit(X, y)


def test_object_labels_beyond_int64_are_refused(problem):
    X, y, _ = problem
    labels = y.astype(object)
    labels[0] = 10**30
    with pytest.raises(ValueError, match=r"y has label 10{30}, outside int64"):
        FastProp().fit(X, labels)


def test_object_features_beyond_float64_are_refused(problem):
    X, y, _ = problem
    features = X.astype(object)
    features[0, 0] = 10**400
    with pytest.raises(ValueError, match=r"X holds integers too large for float64"):
        FastProp().fit(features, y)


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max, reason="longdouble is float64 here")
@pytest.mark.parametrize("scale", ["1e4000", "1e-4000"])
def test_extended_precision_rows_beyond_float64_are_named_as_such(problem, scale):
    X, y, _ = problem
    features = X.astype(np.longdouble)
    features[3] *= np.longdouble(scale)
    with pytest.raises(ValueError, match=r"1 row\(s\) with values beyond float64's range, the first is row 3"):
        FastProp().fit(features, y)


def test_extended_precision_rows_within_float64_are_fitted_as_float64(problem):
    X, y, graph = problem
    ours = FastProp(n_neighbors=10, random_state=0).fit(X.astype(np.longdouble), y, graph=graph)
    reference = FastProp(n_neighbors=10, random_state=0).fit(X.astype(np.float64), y, graph=graph)
    np.testing.assert_array_equal(ours.confidence_, reference.confidence_)


def test_more_graph_threads_than_cores_count_as_all_cores(problem):
    X, _, _ = problem
    many = build_knn_graph(X, 10, method="hnsw", random_state=0, n_jobs=BEYOND_INT64 - 1)
    assert many.shape == (200, 200) and np.isfinite(many.data).all() and many.nnz >= 200 * 10


# ------------------------------------------------ crafted files


@pytest.mark.parametrize("header, message", [
    ("{{{{", ": cannot be read (tokenize.TokenError"),
    ("(" * 3000, ": cannot be read (tokenize.TokenError"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 4000 + ",)}",
     f" declares an array of shape ({'9' * 59} ...) of float32 (about 2**13289 bytes)"),
])
def test_a_crafted_npy_header_is_one_value_error(tmp_path, header, message):
    path = tmp_path / "crafted.npy"
    path.write_bytes(_npy_with_header(header))
    with pytest.raises(ValueError) as raised:
        read_npy(path)
    assert str(raised.value).startswith(f"{path}{message}")


def test_a_graph_file_with_a_crafted_member_header_is_one_value_error(tmp_path):
    import zipfile

    path = tmp_path / "g.npz"
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in (("indptr", np.zeros(3, np.int64)), ("indices", np.zeros(0, np.int64)),
                            ("data", np.zeros(0, np.float32))):
            buffer = io.BytesIO()
            np.save(buffer, array)
            archive.writestr(f"{name}.npy", buffer.getvalue())
        archive.writestr("shape.npy", _npy_with_header("{'descr': '<i8', 'shape': (2,"))
    with pytest.raises(ValueError) as raised:
        load_graph(path)
    assert str(raised.value).startswith(f"{path}: array 'shape' cannot be read (tokenize.TokenError")


def test_cli_reports_a_crafted_header_in_one_line(problem, tmp_path, capsys):
    from fastprop.cli import main

    path = tmp_path / "X.npy"
    path.write_bytes(_npy_with_header("{'descr': '<f4', 'shape': (2,"))
    status = main(["graph", "--features", str(path), "--out", str(tmp_path / "g.npz")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"fastprop: error: --features {path}: cannot be read (tokenize.TokenError")


@pytest.mark.parametrize("n_samples, message", [
    ("200", "n_samples must be an integer, got '200'"),
    ([200], r"n_samples must be an integer, got \[200\]"),
    (True, "n_samples must be an integer, got True"),
    (-1, r"n_samples=-1 is out of range; allowed: \[0, "),
])
def test_load_graph_checks_n_samples(problem, tmp_path, n_samples, message):
    from fastprop import save_graph

    path = tmp_path / "g.npz"
    save_graph(path, problem[2])
    with pytest.raises(ValueError, match=message):
        load_graph(path, n_samples=n_samples)


# ------------------------------------------------ score and suggest_annotations


def test_score_of_an_unfitted_model_says_fit_first(problem):
    from fastprop._estimator_protocol import NotFittedError, with_scikit_learn_twin

    X, y, _ = problem
    with pytest.raises(with_scikit_learn_twin(NotFittedError), match="not fitted yet"):
        FastProp().score(X, y)


@pytest.mark.parametrize("weights, message", [
    (np.zeros(200), "sample_weight sums to 0"),
    (np.r_[1.0, -1.0, np.zeros(198)], "sample_weight has negative values"),
    (np.r_[np.nan, np.ones(199)], "sample_weight has NaN or infinite values"),
    (np.r_[np.inf, np.ones(199)], "sample_weight has NaN or infinite values"),
    (np.ones(199), r"sample_weight must have shape \(200,\)"),
    (np.array(["a"] * 200), "sample_weight must hold real numbers"),
])
def test_score_checks_its_weights(problem, fitted, weights, message):
    X, y, _ = problem
    with pytest.raises(ValueError, match=message):
        fitted.score(X, np.where(np.arange(200) < 100, 0, 1), sample_weight=weights)


def test_score_with_weights_is_the_weighted_share_right(problem, fitted):
    X, _, _ = problem
    truth = np.where(np.arange(200) < 100, 0, 1)
    right = (fitted.predict(X) == truth).astype(float)
    weights = np.linspace(0.0, 2.0, 200)
    assert fitted.score(X, truth, sample_weight=weights) == pytest.approx((weights * right).sum() / weights.sum())


def test_suggestions_after_the_graph_was_freed_say_so(problem):
    X, y, graph = problem
    model = FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph)
    del model.graph_
    with pytest.raises(ValueError, match="graph_ was deleted; fit again"):
        model.suggest_annotations(3)


# ------------------------------------------------ indices of the wrong kind


@pytest.mark.parametrize("outliers, message", [
    (np.zeros(200, dtype=bool), r"outliers must be sample indices, got a boolean mask; pass numpy.flatnonzero"),
    (np.array([10.5]), r"outliers must be integer sample indices in \[0, 199\], got dtype float64 with non-integral"),
    (np.array(["10"]), r"outliers must be integer sample indices in \[0, 199\], got dtype <U2"),
])
def test_outlier_indices_of_the_wrong_kind_are_named_as_indices(problem, outliers, message):
    X, y, _ = problem
    with pytest.raises(ValueError, match=message):
        FastProp().fit(X, y, outliers=outliers)


def test_integral_float_indices_are_indices(problem):
    X, y, graph = problem
    as_floats = FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph, outliers=np.array([150.0]))
    as_ints = FastProp(n_neighbors=10, random_state=0).fit(X, y, graph=graph, outliers=np.array([150]))
    np.testing.assert_array_equal(as_floats.confidence_, as_ints.confidence_)


def test_validation_indices_as_a_mask_are_named_as_indices(problem):
    X, y, _ = problem
    with pytest.raises(ValueError, match="validation indices must be sample indices, got a boolean mask"):
        FastProp().fit(X, y, validation=(np.arange(200) == 10, np.zeros(200, dtype=int)))


# ------------------------------------------------ graphs


def test_a_dense_boolean_graph_is_named_by_its_dtype():
    with pytest.raises(ValueError, match="2-D numeric array of edge weights, got ndarray with shape .* and dtype bool"):
        check_graph(np.eye(4, dtype=bool))


def test_coo_duplicates_whose_sum_overflows_get_their_own_message():
    row, col = np.array([0, 0, 1, 1]), np.array([1, 1, 0, 0])
    graph = sp.coo_matrix((np.full(4, 3e38, dtype=np.float32), (row, col)), shape=(3, 3))
    with pytest.raises(ValueError, match="duplicate entries whose summed weight overflows float32"):
        check_graph(graph)


def test_a_bsr_index_out_of_range_counts_block_columns():
    graph = sp.bsr_matrix(np.eye(4, dtype=np.float32), blocksize=(2, 2))
    graph.indices[0] = 5
    with pytest.raises(ValueError, match=r"holds 5 at position 0, outside \[0, 1\]: .* the graph's 2 block columns"):
        check_graph(graph)


def test_refine_confidence_with_row_sums_beyond_float64(problem):
    _, _, graph = problem
    scores = np.ones((200, 2))
    scores[0] = [1.7e308, 1.7e308]
    reference = refine_confidence(graph, np.full((200, 2), 0.5), random_state=0)
    with np.errstate(all="raise"):
        refined = refine_confidence(graph, scores, random_state=0)
    np.testing.assert_array_equal(refined, reference)  # every row is (1/2, 1/2) either way


# ------------------------------------------------ the evaluation helpers


@pytest.mark.parametrize("arguments, message", [
    (dict(n_samples=300, n_outlier_classes=10**9), r"n_outlier_classes=1000000000 is out of range; allowed: \[0, 300\]"),
    (dict(n_samples=300, overlap=1e300), r"overlap=1e\+300 is out of range"),
    (dict(n_samples=10**12), r"make_noisy_mixture\(n_samples=1000000000000, .* needs about .* GiB of memory"),
    (dict(n_samples=300, modes_per_class=10**9), r"modes_per_class=1000000000\) needs about .* GiB of memory"),
])
def test_make_noisy_mixture_refuses_what_it_could_not_make(arguments, message):
    with pytest.raises(ValueError, match=message):
        make_noisy_mixture(**arguments)


def test_calibration_error_with_more_bins_than_memory_would_hold():
    # With 2**40 bins each confidence is alone in its bin: (|0.5 - 1| + |0.7 - 0|) / 2.
    assert calibration_error([0.5, 0.7], [True, False], n_bins=2**40) == pytest.approx(0.6)
    with pytest.raises(ValueError, match=r"n_bins=9223372036854775808 is out of range; allowed: \[1, 1099511627776\]"):
        calibration_error([0.5], [True], n_bins=BEYOND_INT64)


def test_calibration_error_matches_a_reference_with_every_bin():
    rng = np.random.default_rng(0)
    confidence = rng.random(1000)
    right = rng.random(1000) < confidence
    for n_bins in (1, 7, 10, 1000):
        bins = np.minimum((confidence * n_bins).astype(int), n_bins - 1)
        expected = sum(abs(confidence[bins == b].sum() - right[bins == b].sum()) for b in range(n_bins)) / 1000
        assert calibration_error(confidence, right, n_bins=n_bins) == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------ the command line


def test_cli_names_a_file_that_is_not_utf8_once(tmp_path, capsys):
    from fastprop.cli import main

    path = tmp_path / "X.csv"
    path.write_bytes(b"\xff\xfe\x00 not text")
    status = main(["propagate", "--features", str(path), "--out", str(tmp_path / "r.npz")])
    err = capsys.readouterr().err
    assert status == 2 and err.count(f"--features {path}") == 1
    assert err.strip().endswith("save it as UTF-8 text or give a .npy/.npz file.")


def test_cli_validation_that_is_not_utf8_asks_for_text_only(problem, tmp_path, capsys):
    from fastprop.cli import main

    X, y, _ = problem
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    path = tmp_path / "val.csv"
    path.write_bytes(b"\xff\xfe\x00 not text")
    status = main(["propagate", "--features", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                   "--validation", str(path), "--out", str(tmp_path / "r.npz")])
    err = capsys.readouterr().err
    assert status == 2 and err.strip().endswith(f"--validation {path}: not a text file (it is not UTF-8); save it "
                                                "as UTF-8 text.")


def test_cli_integers_beyond_int64_are_named_as_such(capsys):
    from fastprop.cli import main

    status = main(["propagate", "--features", "X.npy", "--out", "r.npz", "--seed", str(2**64)])
    err = capsys.readouterr().err
    assert status == 2 and f"argument --seed: {2**64} is outside int64" in err


# ------------------------------------------------ the threshold rules and the evaluation package's arguments


@pytest.mark.parametrize("call, message", [
    (lambda: accuracy_with_rejection([0.9, 0.2, 0.3], None, [1, -1, 0], 0.5), "predicted is None"),
    (lambda: choose_threshold([0.1], [0], None), "truth is None"),
    (lambda: outlier_auroc([0.2, 0.1], None), "truth is None"),
    (lambda: smoothing_bandwidth([np.nan, 0.5, 0.2]), "confidence has 1 NaN or infinite value"),
    (lambda: automatic_threshold([np.nan, 0.5]), "confidence has 1 NaN or infinite value"),
    (lambda: otsu_threshold(None), "confidence is None"),
    (lambda: otsu_threshold(["a", "b"]), "confidence must hold real numbers"),
    (lambda: otsu_threshold([0.1, 0.9], n_bins=1.5), "n_bins must be an integer"),
    (lambda: smoothed_threshold([1.7e308, 0.0, 0.5], [0, 0, 0], [0, -1, 0]), "reads the confidence on \\[0, 1\\]"),
    (lambda: calibration_error([1.0, 1.0], ["False", "False"]), "correct must hold booleans"),
    (lambda: calibration_error([1.0, 1.0], [2, 5]), "correct must hold booleans"),
    (lambda: calibration_error([1 + 1j], [True]), "confidence must hold real numbers"),
    (lambda: calibration_error(["0.5", "1"], [True, True]), "confidence must hold real numbers"),
    (lambda: calibration_error([np.nan, 0.5], [True, True]), "confidence has 1 NaN or infinite value"),
    (lambda: make_method(None, 0), "method name must be a string"),
    (lambda: make_method("SGC", 0, bogus=1), "SGC has no parameter 'bogus'; its parameters: depth"),
    (lambda: load_embeddings(None), "path must be a str or os.PathLike"),
    (lambda: make_noisy_mixture(50, 2, class_imbalance=1e308), r"class_imbalance=1e\+308 is out of range"),
    (lambda: make_noisy_mixture(50, n_classes=10**12), "n_samples=50 leaves 40 in-class samples"),
])
def test_evaluation_helpers_say_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_scikit_learn_reference_row_names_an_unknown_parameter():
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match="sklearn_label_spreading has no parameter 'bogus'; its parameters: alpha"):
        make_method("sklearn_label_spreading", 0, bogus=1)
    assert make_method("sklearn_label_spreading", 0, alpha=0.5).get_params()["alpha"] == 0.5


def test_a_threshold_beyond_float64_rejects_everything_or_nothing():
    args = ([0.9, 0.2, 0.3], [1, 0, 0], [1, -1, 0])
    assert accuracy_with_rejection(*args, 10**400) == accuracy_with_rejection(*args, np.inf) == pytest.approx(1 / 3)
    assert accuracy_with_rejection(*args, -(10**400)) == accuracy_with_rejection(*args, -np.inf) == pytest.approx(2 / 3)


def test_calibration_error_reads_zero_one_integers_as_booleans():
    assert calibration_error([0.9, 0.1], [1, 0]) == calibration_error([0.9, 0.1], [True, False])


@pytest.mark.parametrize("arguments, message", [
    (dict(n_seeds=0), r"n_seeds=0 is out of range"),
    (dict(methods=("SGC", "SGC")), "methods has a value twice"),
    (dict(noise_ratios=(0.1, 0.1)), "noise_ratios has a value twice"),
    (dict(methods="SGC"), "methods and noise_ratios must be sequences"),
    (dict(noise_ratios=0.1), "methods and noise_ratios must be sequences"),
])
def test_run_table_checks_its_arguments_before_any_work(arguments, message):
    X, y = make_noisy_mixture(300, 3, random_state=0)
    with pytest.raises(ValueError, match=message):
        run_table(X, y, 3, **{"methods": ("SGC",), **arguments})


@pytest.mark.parametrize("scale", [1e20, 1e-25])
def test_benchmark_rows_of_extreme_scale_are_normalised_exactly(tmp_path, scale):
    path = tmp_path / "pool.npz"
    np.savez(path, X=np.array([[scale, scale], [1.0, 2.0]], dtype=np.float32), y=[0, 1])
    X, _ = load_benchmark_data(path)
    np.testing.assert_allclose(X, [[2**-0.5, 2**-0.5], [5**-0.5, 2 * 5**-0.5]], rtol=1e-6)


def test_a_task_subset_of_a_sparse_matrix_says_so():
    _, y = make_noisy_mixture(300, 3, random_state=0)
    task = make_noisy_task(y, 3, label_ratio=0.05, noise_ratio=0.2, random_state=0)
    with pytest.raises(ValueError, match="X is a scipy.sparse matrix; pass a dense array"):
        task.subset(sp.csr_matrix(np.ones((300, 2))))


@pytest.mark.parametrize("change, message", [
    (dict(validation=(np.array([2, 30]), np.array([0, -1]))), r"validation positions must be task-local positions"),
    (dict(evaluation=np.array([4, 99])), r"evaluation must be task-local positions in \[0, 9\]"),
    (dict(validation=None), "a NoisyTask's arrays must be integer"),
    (dict(validation=(np.array([2, 3]), np.array([0, 1]))), "validation's truth must be NoisyTask.truth"),
    (dict(classes=np.array([], dtype=int)), "classes at least one class"),
    (dict(truth=np.array([0, 1, 0, -1, 0, 0, 7, 1, -1, -1])), "truth must hold task classes"),
    (dict(n_pool=5), r"indices must be pool indices in \[0, n_pool - 1 = 4\]"),
    # found by fuzzing: each was accepted and scored
    (dict(indices=np.arange(10) + 0.5), r"must be integer .*got float64 values, e.g. 0.5"),
    (dict(seed_mask=np.r_[1, 1, np.zeros(8)]), r"must be integer \(seed_mask: bool\) .*got float64"),
    (dict(y=np.r_[0, 0, np.full(8, -1)]), "y must be the truth of the seeds"),
    (dict(y=np.r_[0, 1, 1, np.full(7, -1)]), "y must be the truth of the seeds"),
    (dict(evaluation=np.arange(3, 10)), "validation and evaluation sets must not share a sample"),
    (dict(evaluation=np.arange(1, 10)[[0, 3, 4, 5, 6, 7, 8]]), "seeds and evaluation sets must not share"),
    (dict(evaluation=np.array([4, 4, 5, 6, 7, 8, 9])), "evaluation must increase strictly"),
    (dict(indices=np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 8]), n_pool=10), "indices must increase strictly"),
    (dict(noise_ratio="lots"), r"noise_ratio must be a number in \[0, 1\], got 'lots'"),
    (dict(label_ratio=1.5), r"label_ratio must be a number in \[0, 1\], got 1.5"),
    (dict(n_pool=10.5), r"n_pool must be an integer, got 10.5"),
    (dict(classes=np.array([8, 3])), "classes must increase strictly"),
    (dict(indices=np.array([0, None, 2, 3, 4, 5, 6, 7, 8, 9], dtype=object)), r"got object values, e.g. 0"),
])
def test_a_hand_built_task_is_checked(change, message):
    import dataclasses

    task = _hand_task()
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(task, **change)


def test_a_hand_built_task_of_lists_is_frozen_arrays():
    fields = {name: (value.tolist() if isinstance(value, np.ndarray) else value)
              for name, value in vars(_hand_task()).items()}
    fields["validation"] = tuple(part.tolist() for part in _hand_task().validation)
    task = NoisyTask(**fields)
    assert task.n_samples == 10 and task.indices.dtype == np.int64 and not task.truth.flags.writeable


def test_evaluate_refuses_an_empty_validation_set():
    import dataclasses

    task = dataclasses.replace(_hand_task(), validation=(np.array([], dtype=int), np.array([], dtype=int)))
    with pytest.raises(ValueError, match="the task's validation or evaluation set is empty"):
        evaluate(task, np.full((10, 2), 0.5))


def test_the_exact_rule_at_the_ends_of_float64_warns_of_nothing():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert choose_threshold([1e308, -1e308, 0.0], [0, 0, 0], [0, -1, 0]) == -5e307


def test_run_table_and_format_markdown_check_their_arguments():
    X, y = make_noisy_mixture(300, 3, random_state=0)
    with pytest.raises(ValueError, match="progress must be a function"):
        run_table(X, y, 3, methods=("SGC",), progress=5)
    from fastprop.evaluation.benchmark import format_markdown

    with pytest.raises(ValueError, match="every row needs 'seconds_mean'"):
        format_markdown([{"method": "A", "noise_ratio": 0.1, "accuracy_mean": 0.5}])


# ------------------------------------------------ round four: float64 rows below float32's range, the CLI's causes


def _two_tiny_clusters(scale):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(centre, 0.3, (40, 8)) for centre in (-1.0, 1.0)]) * scale
    y = np.full(80, -1)
    y[[0, 1, 40, 41]] = [0, 0, 1, 1]
    return X, y


def test_float64_rows_below_float32s_range_are_refused_where_values_matter_and_rescaled_where_only_directions():
    """The baselines turned rows of ~1e-300 into zeros: a degenerate fit with a graph, 'all-zero rows' without."""
    from fastprop.baselines import SGC, LabelSpreading

    X, y = _two_tiny_clusters(1e-300)
    graph = build_knn_graph(X * 1e300, 10)
    for fit in (lambda: SGC().fit(X, y, graph=graph), lambda: SGC().fit(X, y)):  # SGC computes on X's values
        with pytest.raises(ValueError, match=r"80 row\(s\) too small for float32 \(below 5\.74e-42 .*\), the first is "
                                             r"row 0 \(largest magnitude 1\.\d+e-300\)\..*scale X up first"):
            fit()
    # ~1e-38 fits in float32, but SGC learns nothing at that scale (chance from ~1e-8 on): refused as out of range
    with pytest.raises(ValueError, match=r"no magnitude above 2\*\*-40 .*SGC computes on the features as they are"):
        SGC().fit(X * 1e262, y, graph=graph)
    # what reads the rows' directions alone rescales them: the same fit as at scale 1
    for make in (lambda: FastProp(random_state=0), LabelSpreading):
        np.testing.assert_array_equal(make().fit(X, y).transduction_, make().fit(X * 1e300, y).transduction_)
    np.testing.assert_array_equal(LabelSpreading().fit(X, y, graph=graph).label_distributions_,
                                  LabelSpreading().fit(X * 1e300, y, graph=graph).label_distributions_)


def test_new_points_fall_back_to_the_exact_search_where_hnswlib_cannot_find_every_neighbour(monkeypatch):
    """Above 30,000 fitted samples predict queried hnswlib once: its RuntimeError reached the user."""
    import fastprop.prediction as prediction

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(centre, 0.3, (100, 4)) for centre in (-1.0, 1.0)]).astype(np.float32)[:, :1]
    y = np.full(200, -1)
    y[[0, 100]] = [0, 1]  # one feature: every unit row is +1 or -1, 100 duplicates each, 199 neighbours asked
    exact = FastProp(n_neighbors=199, random_state=0).fit(X, y)
    monkeypatch.setattr(prediction, "EXACT_SEARCH_MAX_SAMPLES", 0)  # the approximate path, as at scale
    approximate = FastProp(n_neighbors=199, random_state=0).fit(X, y)
    np.testing.assert_array_equal(approximate.predict_proba(X[:5]), exact.predict_proba(X[:5]))
    np.testing.assert_array_equal(approximate.predict_confidence(X[:5]), exact.predict_confidence(X[:5]))
    one_at_a_time = np.vstack([approximate.predict_proba(X[row : row + 1]) for row in range(5)])
    np.testing.assert_array_equal(approximate.predict_proba(X[:5]), one_at_a_time)  # no row depends on the others


def test_run_method_names_a_wrong_task_or_fitted_result():
    from fastprop.evaluation.benchmark import run_method

    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="task must be a NoisyTask"):
        run_method("SGC", X, None, None, 0)
    task = make_noisy_task(np.repeat([0, 1, 2, 3], 5), 2, label_ratio=0.2, noise_ratio=0.2, random_state=0)
    with pytest.raises(ValueError, match="fitted must be what run_method"):
        run_method("SGC + ConfNet", X, task, None, 0, fitted={})


@pytest.mark.parametrize("stored", ["csc", "coo"])
def test_a_graph_file_of_another_sparse_format_is_named_plainly(tmp_path, stored):
    # a coo file has no indptr: it was "not a fastprop graph file: arrays ['indices', 'indptr'] are missing"
    sp.save_npz(tmp_path / "g.npz", sp.random(5, 5, density=0.5, format=stored, random_state=0))
    with pytest.raises(ValueError, match=rf"holds a '{stored}' matrix; fastprop graph files hold CSR .*\.tocsr\(\)"):
        load_graph(tmp_path / "g.npz")


def test_build_knn_graph_names_an_unknown_option_as_its_own():
    with pytest.raises(TypeError, match=r"build_knn_graph\(\) got an unexpected keyword argument 'bogus'"):
        build_knn_graph(np.eye(6), 2, bogus=1)


def test_the_command_line_reads_rows_far_below_float32s_range_by_their_directions(tmp_path, capsys):
    from fastprop.cli import main

    X, y = _two_tiny_clusters(1.0)
    for name, scale in (("X.npy", 1.0), ("X_tiny.npy", 1e-300)):
        np.save(tmp_path / name, X * scale)
    np.save(tmp_path / "y.npy", y)
    for name in ("X.npy", "X_tiny.npy"):
        status = main(["propagate", "--features", str(tmp_path / name), "--labels", str(tmp_path / "y.npy"),
                       "--out", str(tmp_path / f"{name}.npz")])
        assert status == 0, capsys.readouterr().err
    with np.load(tmp_path / "X.npy.npz") as plain, np.load(tmp_path / "X_tiny.npy.npz") as tiny:
        np.testing.assert_array_equal(plain["labels"], tiny["labels"])
