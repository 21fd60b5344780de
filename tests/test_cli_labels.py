"""``fastprop propagate`` with class names, a labels column in a features CSV, and ``--plot``."""

import csv
import sys

import numpy as np
import pytest
from cli_support import run, seeded_pool

from fastprop import FastProp
from fastprop.cli import _plots
from fastprop.cli._label_files import labels_from_texts, load_labels

NAMES = np.array(["ant", "bee", "cat", "dog"])
PLOT_HINT = 'pip install "fastprop-graph[plot]"'


@pytest.fixture(scope="module")
def pool():
    return seeded_pool(300, 12, 4, 3)


@pytest.fixture
def files(tmp_path, pool):
    """Every input form of the same task in tmp_path/in; tmp_path/out for the outputs."""
    X, truth, seeds = pool
    inputs, outputs = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    outputs.mkdir()
    np.save(inputs / "X.npy", X)
    np.save(inputs / "y.npy", seeds)
    # unlabeled as an empty line and as "-1" alike, after a header line
    lines = [("" if k % 2 else "-1") if seed < 0 else str(NAMES[seed]) for k, seed in enumerate(seeds)]
    (inputs / "names.txt").write_text("label\n" + "\n".join(lines) + "\n")
    with open(inputs / "data.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow([f"x{j}" for j in range(6)] + ["species"] + [f"x{j}" for j in range(6, 12)])
        for row, seed in zip(X, seeds):
            cells = [repr(float(value)) for value in row]
            writer.writerow(cells[:6] + ["" if seed < 0 else NAMES[seed]] + cells[6:])
    unlabeled = np.flatnonzero(seeds == -1)[:24]
    (inputs / "val_int.csv").write_text(
        "index,label\n" + "".join(f"{i},{truth[i]}\n" for i in unlabeled))
    (inputs / "val_names.csv").write_text(
        "index,label\n" + "".join(f"{i},{NAMES[truth[i]] if truth[i] >= 0 else ''}\n" for i in unlabeled))
    return {"in": inputs, "out": outputs, "seeds": seeds, "truth": truth}


def propagate(capsys, files, name, *options):
    """Run ``propagate`` writing ``name``.npz and ``name``.csv; the arrays and CSV rows."""
    out, table = files["out"] / f"{name}.npz", files["out"] / f"{name}.csv"
    status, stdout, err = run(["propagate", *options, "--out", out, "--csv", table, "--neighbors", 10], capsys)
    assert status == 0, err
    with np.load(out, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    with open(table, newline="") as stream:
        rows = list(csv.reader(stream))[1:]
    return arrays, rows, stdout


def as_names(labels):
    return np.where(labels == -1, "-1", NAMES[labels])


def test_names_file_gives_the_integer_assignments_mapped_through_the_names(capsys, files):
    X = files["in"] / "X.npy"
    numbers, number_rows, _ = propagate(capsys, files, "int", "--features", X, "--labels", files["in"] / "y.npy",
                                        "--validation", files["in"] / "val_int.csv")
    names, name_rows, out = propagate(capsys, files, "names", "--features", X, "--labels",
                                      files["in"] / "names.txt", "--validation", files["in"] / "val_names.csv")
    assert numbers["labels"].dtype == np.int64 and numbers["classes"].dtype == np.int64
    assert names["labels"].dtype.kind == "U" and names["classes"].dtype.kind == "U"
    np.testing.assert_array_equal(names["classes"], NAMES)
    np.testing.assert_array_equal(names["labels"], as_names(numbers["labels"]))
    for key in ("confidence", "label_distributions", "outlier_threshold"):
        np.testing.assert_array_equal(names[key], numbers[key])
    assert (numbers["labels"] == -1).sum() > 0  # outliers are there, carrying the marker
    assert [row[1] for row in name_rows] == as_names(numbers["labels"]).tolist()
    assert [row[3] for row in name_rows] == [row[3] for row in number_rows]
    assert [row[1] for row in number_rows] == [str(label) for label in numbers["labels"]]
    assert "4 class names" in out and "threshold rule: validation" in out


def test_empty_marker_npy_of_names_and_npz_features_with_names(capsys, files, pool):
    X, _, seeds = pool
    reference, _, _ = propagate(capsys, files, "int", "--features", files["in"] / "X.npy",
                                "--labels", files["in"] / "y.npy")
    expected = np.where(reference["labels"] == -1, "", NAMES[reference["labels"]])
    named = np.where(seeds == -1, "", NAMES[seeds])
    np.save(files["in"] / "names.npy", named)
    np.savez(files["in"] / "Xy.npz", X=X, y=named)
    for options in (["--features", files["in"] / "X.npy", "--labels", files["in"] / "names.npy"],
                    ["--features", files["in"] / "Xy.npz"]):
        result, rows, _ = propagate(capsys, files, "empty", *options, "--unlabeled", "")
        np.testing.assert_array_equal(result["labels"], expected)
        np.testing.assert_array_equal(result["confidence"], reference["confidence"])
        outliers = [row for row in rows if row[3] == "1"]
        assert outliers and all(row[1] == "" for row in outliers)


def test_csv_label_column_equals_separate_labels_file(capsys, files):
    separate, _, _ = propagate(capsys, files, "separate", "--features", files["in"] / "X.npy",
                               "--labels", files["in"] / "names.txt")
    column, _, _ = propagate(capsys, files, "column", "--features", files["in"] / "data.csv",
                             "--label-column", "species")
    for key in separate:
        np.testing.assert_array_equal(column[key], separate[key])
    # the same CSV builds the same graph once the labels column is left out
    status, _, err = run(["graph", "--features", files["in"] / "data.csv", "--label-column", "species",
                          "--out", files["out"] / "g.npz", "--neighbors", 10], capsys)
    assert status == 0, err
    graph_fed, _, _ = propagate(capsys, files, "graph", "--features", files["in"] / "X.npy",
                                "--labels", files["in"] / "names.txt", "--graph", files["out"] / "g.npz")
    np.testing.assert_array_equal(graph_fed["labels"], separate["labels"])


def test_integer_marker_other_than_minus_one(capsys, files):
    reference, _, _ = propagate(capsys, files, "int", "--features", files["in"] / "X.npy",
                                "--labels", files["in"] / "y.npy")
    np.save(files["in"] / "shifted.npy", files["seeds"] + 1)  # 0 = unlabeled, classes 1..4
    shifted, rows, _ = propagate(capsys, files, "shifted", "--features", files["in"] / "X.npy",
                                 "--labels", files["in"] / "shifted.npy", "--unlabeled", "0")
    assert shifted["labels"].dtype == np.int64
    np.testing.assert_array_equal(shifted["classes"], [1, 2, 3, 4])
    np.testing.assert_array_equal(shifted["labels"], reference["labels"] + 1)
    assert all((row[1] == "0") == (row[3] == "1") for row in rows)


@pytest.mark.parametrize("texts, marker, expected, unlabeled", [
    (["0", "", "2", "-1"], "-1", [0, -1, 2, -1], -1),
    (["0", "", "2"], "", ["0", "", "2"], ""),  # a marker that is no integer: names
    (["cat", "-1", "", "dog"], "-1", ["cat", "-1", "-1", "dog"], "-1"),
    (["1", "unknown", "cat"], "unknown", ["1", "unknown", "cat"], "unknown"),  # digits among names
])
def test_labels_from_texts(texts, marker, expected, unlabeled):
    y, marker_value = labels_from_texts(texts, marker)
    assert y.tolist() == expected and marker_value == unlabeled
    assert y.dtype.kind == ("i" if isinstance(unlabeled, int) else "U")


@pytest.mark.parametrize("texts", [["0", "cat", "1"], ["1.0", "", "2.0"], ["0", "1", "1_0"]])
def test_integers_mixed_with_other_labels_are_refused_at_the_odd_line(texts):
    odd = next(text for text in texts if text not in ("", "0", "1"))
    with pytest.raises(ValueError, match=rf"^y.txt, line {11 + texts.index(odd)}: '{odd}' is not an integer"):
        labels_from_texts(texts, "-1", "y.txt", range(11, 11 + len(texts)))


@pytest.mark.parametrize("text, n_samples, expected", [
    ("label\ncat\n\ndog\n", 3, ["cat", "-1", "dog"]),  # one line too many: a header
    ("cat\n\ndog\n", 3, ["cat", "-1", "dog"]),  # as many lines as samples: no header
    ("label\n0\n\n1\n", 3, [0, -1, 1]),  # integers under a word
    ('"New York, NY"\nParis\n\n', 3, ["New York, NY", "Paris", "-1"]),  # CSV quoting
])
def test_label_file_headers(tmp_path, text, n_samples, expected):
    path = tmp_path / "labels.txt"
    path.write_text(text)
    assert load_labels(path, n_samples, "-1").y.tolist() == expected


def _table(files, name, text):
    path = files["in"] / name
    path.write_text(text)
    return path


def _unknown_name(files):
    return _table(files, "v.csv", f"{np.flatnonzero(files['seeds'] == -1)[0]},cow\n")


BAD = {
    "unknown column": (lambda f: ["--features", f["in"] / "data.csv", "--label-column", "kind"],
                       "has no column 'kind' (its columns: 'x0'"),
    "no header": (lambda f: ["--features", _table(f, "plain.csv", "1,2,a\n3,4,b\n"), "--label-column", "c"],
                  "has no header line"),
    "labels as features": (lambda f: ["--features", f["in"] / "data.csv", "--labels", f["in"] / "y.npy"],
                           "column 'species': '' is not a number"),
    "non-numeric feature": (lambda f: ["--features", _table(f, "t.csv", "a,b,c\n1,x,p\n"), "--label-column", "c"],
                            "line 2, column 'b': 'x' is not a number"),
    "ragged row": (lambda f: ["--features", _table(f, "r.csv", "a,b,c\n1,2,p\n1,q\n"), "--label-column", "c"],
                   "line 3 has 2 field(s) but line 1 has 3"),
    "pandas' unnamed index": (lambda f: ["--features", _table(f, "p.csv", ",0,1,c\n0,0.5,1,p\n"),
                                         "--label-column", "c"], "column 1 has no name"),
    "unnamed column": (lambda f: ["--features", _table(f, "u.csv", ",a,c\n0,1,p\n"), "--label-column", "c"],
                       "column 1 has no name"),
    "only labels": (lambda f: ["--features", _table(f, "o.csv", "c\n1\n2\n"), "--label-column", "c"],
                    "no feature column"),
    "column of an npy": (lambda f: ["--features", f["in"] / "X.npy", "--label-column", "species"],
                         "is not a .csv file"),
    "labels twice": (lambda f: ["--features", f["in"] / "data.csv", "--label-column", "species",
                                "--labels", f["in"] / "y.npy"], "give the labels once"),
    "numbers with a word marker": (lambda f: ["--features", f["in"] / "X.npy", "--labels", f["in"] / "y.npy",
                                              "--unlabeled", "none"], "--unlabeled 'none' is not an integer"),
    "unknown validation name": (lambda f: ["--features", f["in"] / "X.npy", "--labels", f["in"] / "names.txt",
                                           "--validation", _unknown_name(f)], "'cow'"),
    # a first line "name,index" with no header was skipped as a header, and line 2 blamed
    "validation names first, no header": (lambda f: ["--features", f["in"] / "X.npy", "--labels",
                                                     f["in"] / "names.txt", "--validation",
                                                     _table(f, "v1.csv", f"{NAMES[0]},5\n{NAMES[1]},6\n")],
                                          "v1.csv, line 1: expected 'index,label'"),
    "validation name, integer seeds": (lambda f: ["--features", f["in"] / "X.npy", "--labels", f["in"] / "y.npy",
                                                  "--validation", f["in"] / "val_names.csv"],
                                       "an integer label like the seeds'"),
    "labels saved as floats": (lambda f: ["--features", f["in"] / "X.npy", "--labels",
                                          _table(f, "f.txt", "\n".join(["1.000e+00"] * 299 + ["-1.0"]))],
                               "line 1: '1.000e+00' is not an integer label"),
    "digits among names": (lambda f: ["--features", _table(f, "m.csv", "a,b,c\n1,2,cat\n3,4,7\n"),
                                      "--label-column", "c"], "(column 'c'), line 2: 'cat' is not an integer"),
    "two labels on a line": (lambda f: ["--features", f["in"] / "X.npy",
                                        "--labels", _table(f, "two.txt", "cat\ndog,cat\n")], "line 2: holds 2"),
    "no labels in a csv": (lambda f: ["--features", _table(f, "n.csv", "a,b\n1,2\n3,4\n")], "--label-column NAME"),
    "plot format": (lambda f: ["--features", f["in"] / "X.npy", "--labels", f["in"] / "y.npy",
                               "--plot", f["out"] / "r.xyz"], "--plot"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_labels_and_tables_are_one_line_naming_the_option(capsys, files, case):
    if case == "plot format":
        pytest.importorskip("matplotlib")
    options, message = BAD[case]
    status, out, err = run(["propagate", *options(files), "--out", files["out"] / "r.npz"], capsys)
    assert status == 2 and out == ""
    assert err.startswith("fastprop: error: ") and err.count("\n") == 1, err
    assert message in err
    assert list(files["out"].iterdir()) == []


def test_propagate_without_matplotlib_fails_before_any_work(capsys, files, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    status, out, err = run(["propagate", "--features", files["in"] / "X.npy", "--labels", files["in"] / "y.npy",
                            "--out", files["out"] / "r.npz", "--plot", files["out"] / "r.png"], capsys)
    assert status == 2 and out == "" and PLOT_HINT in err and "--plot" in err
    assert list(files["out"].iterdir()) == []


def test_propagate_plot_draws_the_result(capsys, files, pool):
    pytest.importorskip("matplotlib")
    path = files["out"] / "result.png"
    status, out, err = run(["propagate", "--features", files["in"] / "X.npy", "--labels",
                            files["in"] / "names.txt", "--out", files["out"] / "r.npz", "--plot", path], capsys)
    assert status == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(path) in out

    X, _, seeds = pool
    y = np.where(seeds == -1, "-1", NAMES[seeds])
    model = FastProp(n_neighbors=10, random_state=0, unlabeled="-1").fit(X, y)  # as the command line does
    seed_mask = seeds != -1
    figure = _plots.result_figure(model, seed_mask, "title")
    histogram, bars = figure.axes
    outlier = model.transduction_ == "-1"
    assert sum(patch.get_height() for patch in histogram.patches) == (~seed_mask).sum()
    threshold = [line.get_xdata()[0] for line in histogram.lines]
    assert threshold == [model.outlier_threshold_]
    widths = [patch.get_width() for patch in bars.patches]  # seeds, propagated per class, outliers
    names, n_seeds, n_propagated = _plots.class_counts(model.classes_, model.transduction_[~outlier],
                                                       seed_mask[~outlier])
    assert widths == [*n_seeds, *n_propagated, outlier.sum()]
    assert sum(widths) == len(X)
    for name, count in zip(names, n_seeds + n_propagated):
        assert count == (model.transduction_ == name).sum()


def test_class_counts_keeps_the_largest_classes():
    classes = np.arange(5)
    labels = np.array([0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4])
    seeds = np.zeros(labels.size, dtype=bool)
    seeds[[0, 6]] = True
    names, n_seeds, n_propagated = _plots.class_counts(classes, labels, seeds, max_classes=3)
    assert names == ["3", "2", "1"]
    assert n_seeds.tolist() == [1, 0, 0] and n_propagated.tolist() == [3, 3, 2]
