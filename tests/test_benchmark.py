"""Tests of the benchmark layer: run_table's bookkeeping, the Markdown table, the method factory."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose

from fastprop.evaluation.benchmark import (
    GRAPH_ROW,
    METHOD_NAMES,
    format_markdown,
    load_benchmark_data,
    make_method,
    run_method,
    run_table,
)
from fastprop.evaluation.datasets import make_noisy_mixture
from fastprop.graph import build_knn_graph
from fastprop.evaluation.protocol import calibration_error, make_noisy_task

NOISE = (0.0, 0.3)
SEEDS = 2
METHODS = ("FastProp", "SGC", "LabelPropagation")
SETTING = dict(label_ratio=0.05, n_neighbors=10)


@pytest.fixture(scope="module")
def pool():
    return make_noisy_mixture(600, 6, n_features=16, random_state=0)


@pytest.fixture(scope="module")
def rows(pool):
    X, y = pool
    return run_table(X, y, 4, noise_ratios=NOISE, n_seeds=SEEDS, methods=METHODS, warm_up=False, **SETTING)


def _independent_runs(X, y, noise_ratio, name):
    """Per-seed results of ``name``, computed without run_table."""
    results = []
    for seed in range(SEEDS):
        task = make_noisy_task(y, 4, label_ratio=SETTING["label_ratio"], noise_ratio=noise_ratio, random_state=seed)
        graph = build_knn_graph(task.subset(X), SETTING["n_neighbors"], random_state=seed)
        results.append(run_method(name, X, task, graph, seed))
    return results


def test_run_table_rows_and_keys(rows):
    assert len(rows) == len(NOISE) * (len(METHODS) + 1)
    assert [(r["noise_ratio"], r["method"]) for r in rows] == [
        (ratio, name) for ratio in NOISE for name in (*METHODS, GRAPH_ROW)
    ]
    required = {"method", "noise_ratio", "accuracy_mean", "accuracy_std", "in_class_accuracy_mean",
                "outlier_auroc_mean", "seconds_mean", "n_seeds"}
    for row in rows:
        assert required <= set(row)
        assert row["n_seeds"] == SEEDS
        assert row["seconds_mean"] >= 0
    graph_rows = [r for r in rows if r["method"] == GRAPH_ROW]
    assert all(math.isnan(r["accuracy_mean"]) and r["seconds_mean"] > 0 for r in graph_rows)
    # No outlier at 0% noise: the AUROC is undefined, not zero.
    assert all(math.isnan(r["outlier_auroc_mean"]) for r in rows if r["noise_ratio"] == 0.0)


@pytest.mark.parametrize("name", ["FastProp", "SGC"])
def test_run_table_means_and_stds_match_independent_runs(pool, rows, name):
    X, y = pool
    for ratio in NOISE:
        runs = _independent_runs(X, y, ratio, name)
        row = next(r for r in rows if r["method"] == name and r["noise_ratio"] == ratio)
        accuracies = np.array([run["accuracy"] for run in runs])
        assert_allclose(row["accuracy_runs"], accuracies)
        assert_allclose(row["accuracy_mean"], accuracies.mean())
        assert_allclose(row["accuracy_std"], accuracies.std(ddof=1))
        assert_allclose(row["in_class_accuracy_mean"], np.mean([run["in_class_accuracy"] for run in runs]))
        if ratio > 0:
            assert_allclose(row["outlier_auroc_mean"], np.mean([run["outlier_auroc"] for run in runs]))
        assert_allclose(row["calibration_error_mean"], np.mean([run["calibration_error"] for run in runs]))
        assert_allclose(row["best_threshold_accuracy_mean"],
                        np.mean([run["best_threshold_accuracy"] for run in runs]))
        assert all(run["best_threshold_accuracy"] >= run["accuracy"] for run in runs)


def test_run_table_is_deterministic(pool, rows):
    X, y = pool
    again = run_table(X, y, 4, noise_ratios=NOISE, n_seeds=SEEDS, methods=METHODS, warm_up=False, **SETTING)
    for first, second in zip(rows, again):
        assert first["method"] == second["method"]
        assert_allclose(first["accuracy_runs"], second["accuracy_runs"])
        for key in ("accuracy_mean", "in_class_accuracy_mean", "outlier_auroc_mean"):
            assert_allclose(first[key], second[key], equal_nan=True)


def test_run_table_reports_progress(pool):
    X, y = pool
    calls = []
    run_table(X, y, 3, noise_ratios=(0.1,), n_seeds=1, methods=("SGC",), warm_up=False,
              progress=lambda done, total, message: calls.append((done, total, message)), **SETTING)
    assert [c[:2] for c in calls] == [(1, 2), (2, 2)]
    assert "SGC" in calls[-1][2]


def test_run_method_returns_evaluation_arrays(pool):
    X, y = pool
    task = make_noisy_task(y, 4, label_ratio=0.05, noise_ratio=0.3, random_state=0)
    graph = build_knn_graph(task.subset(X), 10)
    result = run_method("FastProp", X, task, graph, 0)
    n = task.evaluation.size
    assert result["method"] == "FastProp" and result["n_evaluated"] == n
    assert result["confidence"].shape == result["truth"].shape == result["predicted"].shape == (n,)
    assert_allclose(result["truth"], task.truth[task.evaluation])
    assert result["seconds"] > 0 and "propagation" in result["timings"]
    right = result["predicted"] == result["truth"]
    assert result["calibration_error"] == calibration_error(result["confidence"], right)


def _row(method, ratio, mean, std=0.01, seconds=1.0):
    return {"method": method, "noise_ratio": ratio, "accuracy_mean": mean, "accuracy_std": std,
            "in_class_accuracy_mean": mean, "outlier_auroc_mean": math.nan, "seconds_mean": seconds,
            "n_seeds": 2}


def test_format_markdown_layout_and_bold_best():
    rows = [
        _row("A", 0.0, 0.90), _row("B", 0.0, 0.80), _row(GRAPH_ROW, 0.0, math.nan, math.nan, 0.5),
        _row("A", 0.5, 0.60, seconds=3.0), _row("B", 0.5, 0.65, 0.0234, 2.0),
        _row(GRAPH_ROW, 0.5, math.nan, math.nan, 0.7),
    ]
    table = format_markdown(rows)
    lines = table.splitlines()
    assert lines[0] == "| Method | 0% | 50% | seconds |"
    assert lines[2] == "| A | **90.00 ± 1.00** | 60.00 ± 1.00 | 2.00 |"
    assert lines[3] == "| B | 80.00 ± 1.00 | **65.00 ± 2.34** | 1.50 |"
    assert lines[4].startswith("| kNN graph (shared) | — | — | 0.60")
    assert table.count("**") == 4
    with pytest.raises(ValueError, match="metric='seconds'"):
        format_markdown(rows, metric="seconds")


def test_format_markdown_bolds_the_lowest_calibration_error():
    rows = [dict(_row("A", 0.3, 0.7), calibration_error_mean=0.12, calibration_error_std=0.01),
            dict(_row("B", 0.3, 0.6), calibration_error_mean=0.05, calibration_error_std=0.02)]
    lines = format_markdown(rows, metric="calibration_error").splitlines()
    assert lines[2] == "| A | 12.00 ± 1.00 | 1.00 |" and lines[3] == "| B | **5.00 ± 2.00** | 1.00 |"


def test_format_markdown_bolds_ties():
    rows = [_row("A", 0.1, 0.7), _row("B", 0.1, 0.7)]
    assert format_markdown(rows).count("**70.00 ± 1.00**") == 2


def test_make_method_names():
    for name in METHOD_NAMES:
        model = make_method(name, 0)
        assert hasattr(model, "fit")
    assert make_method("FastProp", 3, eta=0.1).eta == 0.1
    with pytest.raises(ValueError, match="'NoSuchMethod' is unknown; allowed: 'FastProp'"):
        make_method("NoSuchMethod", 0)
    with pytest.raises(ValueError, match="unknown"):
        run_table(np.zeros((4, 2)), np.zeros(4), 1, methods=("FastProp", "nope"), warm_up=False)


def test_load_benchmark_data_normalises_rows(tmp_path):
    path = tmp_path / "pool.npz"
    X = np.array([[3, 4, 0], [0, 0, 255]], dtype=np.uint8)
    np.savez(path, X=X, y=np.array([0, -1]))
    features, labels = load_benchmark_data(path)
    assert features.dtype == np.float32
    assert_allclose(features, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], rtol=1e-6)
    assert labels.tolist() == [0, -1]
    raw, _ = load_benchmark_data(path, normalise=False)
    assert_allclose(raw, X)
    np.savez(tmp_path / "nolabels.npz", X=X)
    with pytest.raises(ValueError, match="no labels"):
        load_benchmark_data(tmp_path / "nolabels.npz")


def test_a_confnet_variant_is_the_method_then_refine_confidence(pool):
    from fastprop.confnet import refine_confidence
    from fastprop.evaluation.protocol import evaluate

    X, y = pool
    task = make_noisy_task(y, 4, label_ratio=0.05, noise_ratio=0.3, random_state=1)
    graph = build_knn_graph(task.subset(X), 10)
    result = run_method("LabelSpreading + ConfNet", X, task, graph, 1, return_model=True)
    model = result["model"]
    refined = refine_confidence(graph, model.label_distributions_, model.confidence_, labeled=task.y >= 0,
                                random_state=1)
    assert result["method"] == "LabelSpreading + ConfNet"
    assert_allclose(result["confidence"], refined[task.evaluation])
    assert result["outlier_auroc"] == evaluate(task, model.label_distributions_, refined)["outlier_auroc"]


def test_run_table_refines_the_fitted_method_for_its_confnet_row(pool):
    X, y = pool
    rows = run_table(X, y, 4, noise_ratios=(0.3,), n_seeds=1, methods=("SGC", "SGC + ConfNet"), warm_up=False,
                     **SETTING)
    task = make_noisy_task(y, 4, label_ratio=SETTING["label_ratio"], noise_ratio=0.3, random_state=0)
    graph = build_knn_graph(task.subset(X), SETTING["n_neighbors"], random_state=0)
    alone = run_method("SGC + ConfNet", X, task, graph, 0)
    row = next(row for row in rows if row["method"] == "SGC + ConfNet")
    assert row["outlier_auroc_mean"] == alone["outlier_auroc"] and row["accuracy_mean"] == alone["accuracy"]
    sgc = next(row for row in rows if row["method"] == "SGC")
    assert row["seconds_mean"] >= sgc["seconds_mean"]


def test_format_markdown_shows_a_numpy_nan_as_missing():
    rows = [dict(_row("A", 0.3, np.float32("nan"), std=np.float32(0.01))), _row("B", 0.3, 0.6)]
    line_a = next(line for line in format_markdown(rows).splitlines() if line.startswith("| A "))
    assert line_a.split("|")[2].strip() == "—"
