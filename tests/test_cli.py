"""The ``fastprop`` command line, run in-process through ``main(argv)`` (one real subprocess)."""

import csv
import io
import subprocess
import sys
import warnings

import numpy as np
import pytest
from cli_support import run, seeded_pool
from reference import many_small_clusters

from fastprop import load_graph
from fastprop.evaluation import benchmark
from fastprop.cli import main
from fastprop._files import write_atomically
from fastprop.cli._progress import Progress, format_progress
from fastprop.evaluation.datasets import make_noisy_mixture

RESULT_ARRAYS = {"labels", "confidence", "label_distributions", "classes", "outlier_threshold"}
PLOT_HINT = 'pip install "fastprop-graph[plot]"'


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(scope="module")
def pool():
    return seeded_pool(400, 16, 5, 0)


@pytest.fixture
def files(tmp_path, pool):
    """Inputs in tmp_path/in, an empty tmp_path/out for the outputs."""
    X, y, seeds = pool
    inputs = tmp_path / "in"
    inputs.mkdir()
    (tmp_path / "out").mkdir()
    np.save(inputs / "X.npy", X)
    np.save(inputs / "y.npy", seeds)
    np.savez(inputs / "Xy.npz", X=X, y=seeds)
    return {"X": inputs / "X.npy", "y": inputs / "y.npy", "Xy": inputs / "Xy.npz", "in": inputs,
            "out": tmp_path / "out", "truth": y, "seeds": seeds}


def propagate_args(files, *extra):
    return ["propagate", "--features", files["X"], "--labels", files["y"],
            "--out", files["out"] / "result.npz", *extra]


# ----------------------------------------------------------------- help


def test_console_entry_point_runs_in_a_subprocess():
    completed = subprocess.run(
        [sys.executable, "-m", "fastprop", "--help"], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    for command in ("demo", "graph", "propagate", "bench"):
        assert command in completed.stdout


@pytest.mark.parametrize("command, defaults", [
    ("demo", ["--samples N", "(default: 10000)", "(default: 20)", "fastprop-graph[plot]"]),
    ("graph", ["--neighbors K", "(default: 30)", "(default: auto)", "--parallel-insert"]),
    ("propagate", ["--outlier-threshold", "(default: auto)", "--validation", "--csv", "-1"]),
    ("bench", ["(default: 5)", "(default: 0.0 0.1 0.3 0.5)", "(default: 0.01)", "--mnist-split"]),
])
def test_every_command_documents_its_options_and_defaults(capsys, command, defaults):
    status, out, _ = run([command, "--help"], capsys)
    assert status == 0
    text = " ".join(out.split())
    for fragment in defaults:
        assert fragment in text
    assert "(default: None)" not in text


def test_no_command_is_a_usage_error(capsys):
    status, out, err = run([], capsys)
    assert status == 2 and out == ""
    assert err.startswith("fastprop: error:") and err.count("\n") == 1


# ------------------------------------------------------------ graph, propagate


def test_graph_then_propagate_with_it_and_the_csv_round_trip(capsys, files):
    graph_path, csv_path = files["out"] / "graph.npz", files["out"] / "result.csv"
    status, out, err = run(["graph", "--features", files["X"], "--out", graph_path,
                            "--neighbors", 10], capsys)
    assert status == 0 and err == ""
    graph = load_graph(graph_path)
    assert graph.shape == (400, 400) and f"{graph.nnz:,} edges" in out

    status, out, err = run(propagate_args(files, "--graph", graph_path, "--csv", csv_path), capsys)
    assert status == 0 and err == ""  # stderr is no terminal: no progress
    assert "wrote" in out
    with np.load(files["out"] / "result.npz", allow_pickle=False) as archive:
        result = {name: archive[name] for name in archive.files}
    assert set(result) == RESULT_ARRAYS
    assert result["labels"].shape == (400,) and result["label_distributions"].shape == (400, 4)
    np.testing.assert_array_equal(result["classes"], np.arange(4))
    seeded = files["seeds"] != -1
    np.testing.assert_array_equal(result["labels"][seeded], files["seeds"][seeded])

    with open(csv_path, newline="") as stream:
        rows = list(csv.reader(stream))
    assert rows[0] == ["index", "label", "confidence", "is_outlier"]
    table = np.array(rows[1:], dtype=np.float64)
    np.testing.assert_array_equal(table[:, 0], np.arange(400))
    np.testing.assert_array_equal(table[:, 1], result["labels"])
    np.testing.assert_array_equal(table[:, 2], result["confidence"])  # repr round-trips
    np.testing.assert_array_equal(table[:, 3], result["labels"] == -1)


def test_parallel_insert_builds_on_all_cores_and_default_is_reproducible(capsys, files, monkeypatch):
    from fastprop import build_knn_graph
    from fastprop.cli import _running

    calls = []

    def spy(*args, **options):
        calls.append(options)
        return build_knn_graph(*args, **options)

    monkeypatch.setattr(_running, "build_knn_graph", spy)
    paths = [files["out"] / f"graph{run}.npz" for run in range(3)]
    for path, extra in zip(paths, ([], [], ["--parallel-insert"])):
        status, _, err = run(["graph", "--features", files["X"], "--out", path, "--neighbors", 10,
                              "--method", "hnsw", *extra], capsys)
        assert status == 0 and err == ""
    assert [call["n_jobs"] for call in calls] == [None, None, -1]
    assert all(call["random_state"] == 0 for call in calls)
    first, second, parallel = (load_graph(path) for path in paths)
    assert (first != second).nnz == 0  # one-thread insertion: the same graph bit for bit
    # the all-cores graph is still the kNN graph: nearly all of the exact graph's edges
    exact = build_knn_graph(np.load(files["X"]), 10, method="exact")
    assert parallel.shape == exact.shape
    assert exact.multiply(parallel).nnz >= 0.98 * exact.nnz
    # propagate builds its graph the same way when --graph is not given
    status, _, err = run(propagate_args(files, "--method", "hnsw", "--parallel-insert"), capsys)
    assert status == 0 and err == ""
    assert calls[-1]["n_jobs"] == -1 and len(calls) == 4
    # a flag: a value is a usage error, one line naming it
    status, out, err = run(["graph", "--features", files["X"], "--out", paths[0], "--parallel-insert=yes"], capsys)
    assert status == 2 and out == "" and "--parallel-insert" in err and err.count("\n") == 1


def test_propagate_fits_with_the_k_of_its_graph(capsys, files):
    # --neighbors built a K=7 graph, but FastProp kept n_neighbors=30, which its calibration's local density
    # reads: with a validation set the confidence differed from the Python API's (found by fuzzing)
    from fastprop import FastProp, build_knn_graph

    seeds, truth, X = files["seeds"], files["truth"], np.load(files["X"])
    unlabeled = np.flatnonzero(seeds == -1)[:40]
    validation = files["in"] / "val_k.csv"
    validation.write_text("index,label\n" + "".join(f"{i},{truth[i]}\n" for i in unlabeled))
    status, _, err = run(["propagate", "--features", files["X"], "--labels", files["y"], "--validation",
                          validation, "--neighbors", 7, "--seed", 3, "--out", files["out"] / "k7.npz"], capsys)
    assert status == 0, err
    expected = FastProp(n_neighbors=7, random_state=3).fit(X, seeds, validation=(unlabeled, truth[unlabeled]))
    with np.load(files["out"] / "k7.npz", allow_pickle=False) as result:
        np.testing.assert_array_equal(result["confidence"], expected.confidence_)
        np.testing.assert_array_equal(result["labels"], expected.transduction_)
    graph_only = FastProp(random_state=3).fit(X, seeds, graph=build_knn_graph(X, 7, random_state=3),
                                              validation=(unlabeled, truth[unlabeled]))
    assert not np.array_equal(graph_only.confidence_, expected.confidence_)  # what it gave before
    # a graph file does not keep its K: with --graph, --neighbors gives it
    status, _, err = run(["graph", "--features", files["X"], "--out", files["out"] / "g7.npz", "--neighbors", 7,
                          "--seed", 3], capsys)
    assert status == 0, err
    status, _, err = run(["propagate", "--features", files["X"], "--labels", files["y"], "--validation", validation,
                          "--graph", files["out"] / "g7.npz", "--neighbors", 7, "--seed", 3,
                          "--out", files["out"] / "g7k7.npz"], capsys)
    assert status == 0, err
    with np.load(files["out"] / "g7k7.npz", allow_pickle=False) as result:
        np.testing.assert_array_equal(result["confidence"], expected.confidence_)


def test_text_labels_validation_and_threshold_options(capsys, files):
    seeds = files["seeds"]
    text = files["in"] / "labels.csv"
    text.write_text("label\n" + "\n".join("" if s == -1 else str(s) for s in seeds) + "\n")
    unlabeled = np.flatnonzero(seeds == -1)[:20]
    validation = files["in"] / "val.csv"
    validation.write_text("index,label\n" + "".join(f"{i},{files['truth'][i]}\n" for i in unlabeled))

    status, out, err = run(["propagate", "--features", files["X"], "--labels", text, "--validation",
                            validation, "--out", files["out"] / "a.npz"], capsys)
    assert status == 0, err
    assert "threshold rule: validation" in out
    # a threshold given is kept, the validation set only calibrates (it used to be ignored)
    status, out, err = run(["propagate", "--features", files["X"], "--labels", text, "--validation",
                            validation, "--outlier-threshold", "none", "--out", files["out"] / "kept.npz"], capsys)
    assert status == 0, err
    assert "0 outliers" in out and "threshold rule: none" in out
    with np.load(files["out"] / "a.npz", allow_pickle=False) as a, \
            np.load(files["out"] / "kept.npz", allow_pickle=False) as kept:
        np.testing.assert_array_equal(a["confidence"], kept["confidence"])
        assert float(kept["outlier_threshold"]) == 0.0

    # a header naming the columns the other way round is read by name, not by position
    swapped = files["in"] / "val_swapped.csv"
    swapped.write_text("Label,Index\n" + "".join(f"{files['truth'][i]},{i}\n" for i in unlabeled))
    status, _, err = run(["propagate", "--features", files["X"], "--labels", text, "--validation",
                          swapped, "--out", files["out"] / "swapped.npz"], capsys)
    assert status == 0, err
    with np.load(files["out"] / "a.npz", allow_pickle=False) as a, \
            np.load(files["out"] / "swapped.npz", allow_pickle=False) as b:
        np.testing.assert_array_equal(a["labels"], b["labels"])
        np.testing.assert_array_equal(a["confidence"], b["confidence"])
    pairs = "".join(f"{i},{files['truth'][i]}\n" for i in unlabeled)
    both_labels = _text(files, "val_two.csv", "label,class\n" + pairs)
    status, out, err = run(["propagate", "--features", files["X"], "--labels", text, "--validation", both_labels,
                            "--out", files["out"] / "c.npz"], capsys)
    assert status == 2 and "names two label columns" in err and err.count("\n") == 1

    status, out, err = run(["propagate", "--features", files["Xy"], "--outlier-threshold", "none",
                            "--out", files["out"] / "b.npz"], capsys)  # labels: y of the .npz
    assert status == 0, err
    with np.load(files["out"] / "b.npz", allow_pickle=False) as result:
        assert (result["labels"] != -1).all() and result["outlier_threshold"] == 0.0

    status, _, err = run(propagate_args(files, "--outlier-threshold", "1"), capsys)
    assert status == 0, err
    with np.load(files["out"] / "result.npz", allow_pickle=False) as result:
        assert (result["labels"][seeds == -1] == -1).all()

    for share in ("0", "0.25"):  # that share of the unlabeled samples are the outliers
        status, out, err = run(propagate_args(files, "--outlier-share", share), capsys)
        assert status == 0, err
        assert f"threshold rule: the {float(share):g} least confident" in out
        with np.load(files["out"] / "result.npz", allow_pickle=False) as result:
            assert np.count_nonzero(result["labels"][seeds == -1] == -1) == round(float(share) * np.sum(seeds == -1))


# ------------------------------------------------------------- bad input


def _garbage(path):
    path.write_bytes(np.random.default_rng(0).bytes(300))
    return path


BAD_INPUTS = {
    "missing features": (lambda f: ["--features", f["in"] / "nope.npy"], "no such file"),
    "garbage features": (lambda f: ["--features", _garbage(f["in"] / "bad.npy")], "NumPy"),
    "features not .npy": (lambda f: ["--features", _garbage(f["in"] / "bad.txt")], "suffix"),
    "1-D features": (lambda f: ["--features", _save(f, "flat.npy", np.ones(400))], "2-D"),
    "NaN features": (lambda f: ["--features", _save(f, "nan.npy", _with_nan(f))], "NaN"),
    "length mismatch": (lambda f: ["--labels", _save(f, "short.npy", f["seeds"][:-3])],
                        "397 labels but X has 400"),
    "garbage labels": (lambda f: ["--labels", _garbage(f["in"] / "bad.csv")], "--labels"),
    "two labels on a line": (lambda f: ["--labels", _text(f, "l.txt", "0\n1\n2,3\n")], "line 3"),
    "no seed": (lambda f: ["--labels", _save(f, "none.npy", np.full(400, -1))], "no labeled sample"),
    "graph mismatch": (lambda f: ["--graph", _graph(f)], "vertices"),
    "bad validation": (lambda f: ["--validation", _text(f, "v.csv", "5000,1\n")], "--validation"),
    "missing out dir": (lambda f: ["--out", f["out"] / "no" / "r.npz"], "does not exist"),
    "unknown option": (lambda f: ["--frobnicate"], "unrecognized arguments: --frobnicate"),
    "threshold 2": (lambda f: ["--outlier-threshold", "2"], "--outlier-threshold"),
    "threshold word": (lambda f: ["--outlier-threshold", "high"], "'high' is not 'auto'"),
    "share 1": (lambda f: ["--outlier-share", "1"], "--outlier-share: 1 is outside [0, 1)"),
}


def _save(files, name, array):
    np.save(files["in"] / name, array)
    return files["in"] / name


def _text(files, name, text):
    (files["in"] / name).write_text(text)
    return files["in"] / name


def _with_nan(files):
    X = np.load(files["X"])
    X[7, 3] = np.nan
    return X


def _graph(files):
    from fastprop import build_knn_graph, save_graph

    path = files["in"] / "small_graph.npz"
    save_graph(path, build_knn_graph(np.load(files["X"])[:50], 5))
    return path


def _override(argv, extra):
    """``argv`` with the options of ``extra`` replacing their defaults."""
    argv = list(argv)
    for position in range(0, len(extra), 2):
        if extra[position] in argv and position + 1 < len(extra):
            argv[argv.index(extra[position]) + 1] = extra[position + 1]
        else:
            argv.extend(extra[position:position + 2])
    return argv


def test_auto_on_many_classes_warns_once_and_says_the_command_line_remedies(capsys, tmp_path):
    from fastprop.threshold import MANY_CLASSES

    X, seeds, _ = many_small_clusters(MANY_CLASSES, 5, 8)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", seeds)
    argv = ["propagate", "--features", tmp_path / "X.npy", "--labels", tmp_path / "y.npy",
            "--out", tmp_path / "result.npz", "--neighbors", "4", "--seed", "0"]
    status, _, err = run(argv, capsys)
    assert status == 0
    warned = [line for line in err.splitlines() if line.startswith("fastprop: warning:")]
    assert len(warned) == 1 and f"on {MANY_CLASSES} classes" in warned[0]
    assert "--validation" in warned[0] and "--outlier-share" in warned[0]
    status, _, err = run(argv + ["--outlier-share", "0"], capsys)
    assert status == 0 and "warning" not in err


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_error_line_exit_2_and_no_output(capsys, files, case):
    make_options, message = BAD_INPUTS[case]
    argv = _override(propagate_args(files, "--csv", files["out"] / "result.csv"), make_options(files))
    status, out, err = run(argv, capsys)
    assert status == 2
    assert err.startswith("fastprop: error: ") and err.count("\n") == 1, err
    assert message in err
    assert "Traceback" not in err and out == ""
    assert list(files["out"].iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["graph", "--features", "{in}/nope.npy", "--out", "{out}/g.npz"], "no such file"),
    (["graph", "--features", "{in}/y.npy", "--out", "{out}/g.npz"], "2-D"),
    (["graph", "--features", "{in}/X.npy", "--out", "{out}/g.npz", "--neighbors", "0"], "too small"),
    (["graph", "--features", "{in}/X.npy", "--out", "{out}/g.npz", "--method", "ball"], "invalid choice"),
    (["demo", "--samples", "many"], "--samples: 'many' is not an integer"),
    (["demo", "--samples", "100", "--classes", "200"], "n_classes=200"),
    (["bench", "--data", "{in}/X.npy", "--classes", "2", "--out", "{out}/t.md"], "no labels"),
])
def test_bad_input_of_the_other_commands(capsys, files, argv, message):
    argv = [arg.format(**{"in": files["in"], "out": files["out"]}) for arg in argv]
    status, out, err = run(argv, capsys)
    assert status == 2 and out == ""
    assert err.startswith("fastprop: error: ") and err.count("\n") == 1, err
    assert message in err
    assert list(files["out"].iterdir()) == []


def test_failing_run_keeps_an_existing_good_output(capsys, files):
    out, csv_path = files["out"] / "result.npz", files["out"] / "result.csv"
    out.write_bytes(b"a good result")
    csv_path.write_bytes(b"index,label,confidence,is_outlier\n")
    before = out.read_bytes(), csv_path.read_bytes()
    bad = _save(files, "nan.npy", _with_nan(files))
    argv = _override(propagate_args(files, "--csv", csv_path), ["--features", bad])
    status, _, err = run(argv, capsys)
    assert status == 2 and "NaN" in err
    assert (out.read_bytes(), csv_path.read_bytes()) == before
    assert sorted(p.name for p in files["out"].iterdir()) == ["result.csv", "result.npz"]


def test_interrupted_write_leaves_old_files_and_no_temporary(capsys, files, monkeypatch):
    out = files["out"] / "result.npz"
    out.write_bytes(b"a good result")

    def interrupted(stream, **arrays):
        stream.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    status, _, err = run(propagate_args(files), capsys)
    assert status == 130 and "interrupted" in err
    assert out.read_bytes() == b"a good result"
    assert [p.name for p in files["out"].iterdir()] == ["result.npz"]


def test_write_atomically_replaces_every_file_or_none(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("old")

    def fail(stream):
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomically([(first, lambda s: s.write(b"new")), (second, fail)])
    assert first.read_text() == "old" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    write_atomically([(first, lambda s: s.write(b"new")), (second, lambda s: s.write(b"2"))])
    assert (first.read_text(), second.read_text()) == ("new", "2")


# ------------------------------------------------------------------ demo


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_demo_prints_table_histogram_progress_and_plot(capsys, monkeypatch, tmp_path):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    plot = tmp_path / "fig6.png"
    status = main(["demo", "--samples", "1500", "--classes", "5", "--neighbors", "15",
                   *(["--plot", str(plot)] if _has_matplotlib() else [])])
    out = capsys.readouterr().out
    assert status == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("method"))
    assert [lines[header + k].split()[0] for k in (2, 3, 4)] == ["FastProp", "SGC", "LabelSpreading"]
    assert "outlier AUROC" in lines[header]
    assert any(line.startswith("0.9-1.0") for line in lines)
    assert "in-class" in out and "outliers" in out and "<- threshold" in out
    progress = terminal.getvalue()
    assert "building the kNN graph (exact, " in progress
    assert "FastProp: training the local predictor: done in" in progress
    assert "\r" in progress
    if _has_matplotlib():
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_without_matplotlib_still_run_and_say_how(capsys, tmp_path, bench_pool, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.setattr(benchmark, "run_table", lambda *args, **options: [])
    path = tmp_path / "acc.png"
    status, out, err = run(["bench", "--data", bench_pool, "--classes", 2, "--no-warmup",
                            "--plot", path], capsys)
    assert status == 0
    assert PLOT_HINT in err and "| Method |" in out
    assert not path.exists()


def test_bad_plot_suffix_fails_before_work(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    status, out, err = run(["demo", "--plot", tmp_path / "fig.xyz"], capsys)
    assert status == 2 and "--plot" in err and out == ""


# ----------------------------------------------------------------- bench


@pytest.fixture
def bench_pool(tmp_path):
    X, y = make_noisy_mixture(500, 6, n_features=16, outlier_fraction=0.1, random_state=1)
    path = tmp_path / "pool.npz"
    np.savez(path, X=X, y=y)
    return path


def test_bench_table_markdown_and_plots(capsys, tmp_path, bench_pool):
    plots = ["--plot", tmp_path / "acc.png", "--confidence-plot", tmp_path / "conf.png"]
    plots = plots if _has_matplotlib() else []
    status, out, err = run(["bench", "--data", bench_pool, "--classes", 3, "--seeds", 1, "--noise", 0, 0.3,
                            "--methods", "FastProp", "SGC", "--neighbors", 10, "--no-warmup",
                            "--out", tmp_path / "table.md", *plots], capsys)
    assert status == 0, err
    table = (tmp_path / "table.md").read_text()
    assert "| Method | 0% | 30% | seconds |" in table and "| FastProp |" in table
    assert "| SGC |" in out
    for path in plots[1::2]:
        assert path.read_bytes()[:4] == b"\x89PNG"


def test_bench_tables_the_calibration_error(capsys, bench_pool):
    status, out, err = run(["bench", "--data", bench_pool, "--classes", 3, "--seeds", 1, "--noise", 0.3,
                            "--methods", "FastProp", "SGC", "--neighbors", 10, "--no-warmup",
                            "--metric", "calibration_error"], capsys)
    assert status == 0, err
    assert "calibration error (%)" in out
    cells = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.splitlines()
             if line.startswith(("| FastProp |", "| SGC |"))}
    assert set(cells) == {"FastProp", "SGC"}
    assert all(0 <= float(cell.strip("*").split()[0]) <= 100 for cell in cells.values())
    assert sum(cell.startswith("**") for cell in cells.values()) == 1  # the lower one


def test_bench_runs_a_confnet_variant_on_the_baseline_fit(capsys, tmp_path, bench_pool):
    status, out, err = run(["bench", "--data", bench_pool, "--classes", 3, "--seeds", 1, "--noise", 0.3,
                            "--methods", "SGC", "SGC + ConfNet", "--neighbors", 10, "--no-warmup",
                            "--metric", "outlier_auroc"], capsys)
    assert status == 0, err
    sgc = next(line for line in out.splitlines() if line.startswith("| SGC |"))
    refined = next(line for line in out.splitlines() if line.startswith("| SGC + ConfNet |"))
    assert sgc != refined.replace("SGC + ConfNet", "SGC")  # the refinement changed the AUROC
    status, _, err = run(["bench", "--data", bench_pool, "--classes", 2, "--methods", "FastProp + ConfNet"],
                         capsys)
    assert status == 2 and "invalid choice: 'FastProp + ConfNet'" in err


def test_bench_mnist_split_and_warnings(capsys, bench_pool, monkeypatch):
    seen = {}

    def fake_run_table(X, y, n_classes, **options):
        seen.update(y=y, n_classes=n_classes, options=options)
        warnings.warn("noise_ratio=0.5 needs more outliers", UserWarning)
        warnings.warn("noise_ratio=0.5 needs more outliers", UserWarning)
        return []

    monkeypatch.setattr(benchmark, "run_table", fake_run_table)
    status, _, err = run(["bench", "--data", bench_pool, "--classes", 2, "--mnist-split", "--no-warmup"],
                         capsys)
    assert status == 0
    assert set(np.unique(seen["y"])) == {-1, 0, 1} and seen["n_classes"] == 2
    assert seen["options"]["noise_ratios"] == [0.0, 0.1, 0.3, 0.5]
    assert err == "fastprop: warning: noise_ratio=0.5 needs more outliers\n"


@pytest.mark.parametrize("argv, message", [
    (["--classes", 99], "has only 6 classes"),
    (["--classes", 2, "--methods", "Nope"], "invalid choice: 'Nope'"),
    (["--classes", 2, "--noise", 1.0], "outside [0, 1)"),
])
def test_bench_bad_input(capsys, bench_pool, argv, message):
    status, out, err = run(["bench", "--data", bench_pool, *argv], capsys)
    assert status == 2 and message in err and out == ""


# -------------------------------------------------------------- progress


def test_format_progress():
    assert format_progress("graph", 1.25) == "graph [1.2s]"
    line = format_progress("bench", 75, 3, 12, unit="fits", rate=0.04, detail="SGC done")
    assert line == "bench: 3/12 fits (25%), 0.04/s, ~3m45s left [1m15s] - SGC done"
    assert format_progress("propagating", 2, 5, unit="confident", rate=1.0) == "propagating: 5 confident, 1/s [2.0s]"


def test_progress_draws_only_on_a_terminal():
    now = [0.0]
    terminal = FakeTerminal()
    with Progress.for_stream(terminal, interval=60, clock=lambda: now[0]) as progress:
        progress.start("propagating", 100, unit="confident")
        now[0] = 2.0
        progress.update(50)  # throttled: drawn at most once per interval
        progress.message("warning: something")
        now[0] = 4.0
        progress.finish()
    text = terminal.getvalue()
    assert "\rfastprop: propagating [0.0s]" in text
    assert "fastprop: warning: something\n" in text
    assert "50/100 confident (50%), 25/s, ~2.0s left" in text
    assert "propagating: done in 4.0s, 50/100 confident\x1b[K\n" in text

    for stream, quiet in ((io.StringIO(), False), (FakeTerminal(), True)):
        with Progress.for_stream(stream, quiet=quiet) as progress:
            progress.start("graph")
            progress.finish()
            progress.message("note: shown anyway")
        assert stream.getvalue() == "fastprop: note: shown anyway\n"


def test_the_summary_counts_in_the_singular_and_the_plural():
    from fastprop.cli._commands import _counted

    assert [_counted(1, "class"), _counted(2, "class"), _counted(1, "seed label"), _counted(1000, "sample"),
            _counted(0, "outlier")] == ["1 class", "2 classes", "1 seed label", "1,000 samples", "0 outliers"]
