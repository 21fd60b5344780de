"""The README's quickstart and command-line examples run as written.

The Python blocks of "Python quickstart" run in order in one namespace; the
command lines of "Command line" run on tiny inputs made under their names in a
temporary directory. Not run: "Set up" (it installs the package and runs the
whole suite), the ``bench`` line (its data, ``../shared/data``, is outside
the repository and the benchmark takes minutes: only its options are
parsed), and ``bench/*.py`` (a section of its own).
"""

import csv
import re
import shlex
import warnings
from pathlib import Path

import numpy as np

from fastprop.cli import build_parser, main
from fastprop.evaluation.datasets import make_noisy_mixture

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title):
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start: end if end >= 0 else None]


def _blocks(section, language):
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


def _command_lines():
    """The ``fastprop`` commands of the "Command line" block, continuation lines joined."""
    (block,) = _blocks(_section("Command line"), "bash")
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.startswith("fastprop ")]


def test_python_quickstart_runs_as_written(tmp_path, monkeypatch):
    blocks = _blocks(_section("Python quickstart"), "python")
    assert len(blocks) == 6
    monkeypatch.chdir(tmp_path)  # the graph block writes graph.npz
    namespace = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)
    assert not [w for w in caught if "GridSearchCV" in str(w.message)]  # model selection scores seeds only
    model, named, y = namespace["model"], namespace["named"], namespace["y"]
    seeds = namespace["labeled_indices"]
    np.testing.assert_array_equal(model.transduction_[seeds], y[seeds])
    assert model.label_distributions_.shape == (len(y), model.classes_.size) == (2000, 5)
    # the names block labels every sample as the integer model does, through the names
    names = namespace["names"]
    np.testing.assert_array_equal(named.transduction_,
                                  np.where(model.transduction_ == -1, "", names[model.transduction_]))
    assert (tmp_path / "graph.npz").is_file()
    # new points: labels in the classes or -1, and the score of those labels
    X_new, truth_new = namespace["X_new"], namespace["truth_new"]
    predicted = model.predict(X_new)
    assert set(np.unique(predicted)) <= set(model.classes_) | {-1}
    assert model.score(X_new, truth_new) == np.mean(predicted == truth_new) > 0.5
    # annotations: the refit knows the asked samples
    asked, refit = namespace["asked"], namespace["refit"]
    truth = namespace["truth"]
    np.testing.assert_array_equal(refit.transduction_[asked], truth[asked])
    # model selection: every seed tested once, the unlabeled samples never
    fold, search = namespace["fold"], namespace["search"]
    assert np.array_equal(np.flatnonzero(fold >= 0), np.sort(seeds)) and np.all(fold[y == -1] == -1)
    assert search.best_score_ > 0.8 and search.cv_results_["mean_test_score"].min() > 0.8


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _make_inputs(directory):
    """X.npy, y.txt, val.csv and data.csv (features and a 'label' column of names), all tiny."""
    X, truth = make_noisy_mixture(300, 3, n_features=8, outlier_fraction=0.2, random_state=0)
    seeds = np.full(truth.size, -1)
    for label in range(3):
        seeds[np.flatnonzero(truth == label)[:4]] = label
    np.save(directory / "X.npy", X)
    (directory / "y.txt").write_text("\n".join(map(str, seeds)) + "\n")
    unlabeled = np.flatnonzero(seeds == -1)[:15]
    (directory / "val.csv").write_text("index,label\n" + "".join(f"{i},{truth[i]}\n" for i in unlabeled))
    names = np.array(["red", "green", "blue"])
    with open(directory / "data.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow([f"f{j}" for j in range(X.shape[1])] + ["label"])
        writer.writerows([*map(repr, row.tolist()), "" if seed < 0 else names[seed]] for row, seed in zip(X, seeds))
    return seeds, names


def test_command_line_examples_run_on_tiny_inputs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    seeds, names = _make_inputs(tmp_path)
    commands = _command_lines()
    assert [argv[1] for argv in commands] == ["graph", "propagate", "propagate", "bench", "demo"]
    for argv in commands:
        arguments = argv[1:]
        if not _has_matplotlib() and "--plot" in arguments:  # plots need the optional extra
            position = arguments.index("--plot")
            del arguments[position: position + 2]
        if arguments[0] == "bench":
            assert build_parser().parse_args(arguments).classes == 30
            continue
        if arguments[0] == "demo":
            arguments += ["--samples", "800", "--classes", "4"]  # as written but smaller, to stay fast
        assert main(arguments) == 0, capsys.readouterr().err

    with np.load("result.npz", allow_pickle=False) as result:
        labels = result["labels"]
        np.testing.assert_array_equal(labels[seeds >= 0], seeds[seeds >= 0])
    with np.load("named.npz", allow_pickle=False) as named:
        np.testing.assert_array_equal(named["classes"], sorted(names))
        assert named["labels"].dtype.kind == "U"
        assert set(named["labels"][seeds >= 0]) <= set(names)
        assert ((named["labels"] == "") == (named["confidence"] < named["outlier_threshold"])).all()
    assert Path("graph.npz").is_file() and Path("result.csv").is_file()
    if _has_matplotlib():
        for image in ("result.png", "confidence.png"):
            assert Path(image).read_bytes()[:4] == b"\x89PNG"
