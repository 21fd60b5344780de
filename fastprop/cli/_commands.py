"""The commands ``graph``, ``propagate`` and ``bench`` (``demo`` lives in :mod:`._demo`).

Each takes the parsed arguments and a :class:`~fastprop.cli._progress.Progress`,
checks every input and output before the long work starts, writes results
atomically, prints its report on stdout and returns the exit status.
"""

import time
from pathlib import Path

import numpy as np

from ..evaluation import benchmark
from ..evaluation.protocol import make_noisy_task
from ..graph import build_knn_graph, load_graph, save_graph
from . import _plots
from ._io import check_output, load_features, require_file, result_writers, write_atomically, write_text
from ._label_files import labels_from_array, labels_from_texts, load_labels, load_validation, seed_labels
from ._running import build_graph, checked_plot, fastprop_model, optional_plot
from ._tables import LabelColumn

# ------------------------------------------------------------------ graph


def run_graph(args, progress):
    """Build the cosine kNN affinity graph of ``--features`` and save it."""
    check_output(args.out, "--out", [("--features", args.features)])
    X, _ = load_features(args.features, label_column=args.label_column)
    graph, n_neighbors, method = build_graph(X, args.neighbors, args.method, args.seed, progress,
                                             parallel_insert=args.parallel_insert)
    save_graph(args.out, graph)
    print(
        f"wrote {args.out}: cosine kNN graph of {X.shape[0]:,} samples, K={n_neighbors} "
        f"({method} search), {graph.nnz:,} edges"
    )
    return 0


# -------------------------------------------------------------- propagate


def _load_graph(path, n_samples):
    require_file(path, "--graph")
    try:
        return load_graph(path, n_samples)
    except ValueError as error:
        raise ValueError(f"--graph {error}") from None


def _check_outputs(args):
    """Fail before any work unless every output can be written (and none is an input)."""
    inputs = [(option, getattr(args, name)) for option, name in (
        ("--features", "features"), ("--labels", "labels"), ("--graph", "graph"),
        ("--validation", "validation"),
    )]
    outputs = [(option, path) for option, path in (("--out", args.out), ("--csv", args.csv)) if path is not None]
    for option, path in outputs:
        check_output(path, option, inputs)
    if args.csv is not None and Path(args.csv).resolve() == Path(args.out).resolve():
        raise ValueError(f"--csv {args.csv}: is also --out; give two different files.")
    if args.plot is not None:
        checked_plot(args.plot, "--plot", inputs)
        for option, path in outputs:
            if Path(args.plot).resolve() == Path(path).resolve():
                raise ValueError(f"--plot {args.plot}: is also {option}; give two different files.")


def _seed_labels(args, n_samples, stored):
    """The seeds: from --labels, else the --label-column of a .csv or array y of a .npz of --features."""
    if args.labels is not None:
        return load_labels(args.labels, n_samples, args.unlabeled)
    if stored is None:
        raise ValueError(
            "no labels: give --labels, --label-column NAME for a column of a .csv --features, or "
            "store them as array y next to X in a --features .npz."
        )
    if isinstance(stored, LabelColumn):
        where = f"--features {args.features} (column {stored.name!r})"
        y, unlabeled = labels_from_texts(stored.texts, args.unlabeled, where, stored.lines)
    else:
        where = f"--features {args.features} (array y)"
        y, unlabeled = labels_from_array(stored, args.unlabeled, f"{where}: ")
    return seed_labels(y, unlabeled, n_samples, f"{where}: ")


def _summary(model, labels, seconds, rule):
    """The line that says what ``propagate`` found."""
    n_samples = labels.y.size
    outliers = int(np.count_nonzero(model.transduction_ == model.unlabeled))
    if model.outlier_threshold_ > 1.0:  # from a validation set or an outlier share (a given threshold is <= 1)
        cause = ("on the validation samples, rejecting all of them scored best (e.g. all are known outliers)"
                 if rule == "validation" else f"--outlier-share {_exactly(model.outlier_share)} rounds to all of them")
        why = f"every unlabeled sample rejected: {cause}"
    else:
        why = f"confidence below {model.outlier_threshold_:.3f}, threshold rule: {rule}"
    kind = "class name" if isinstance(model.unlabeled, str) else "class"
    return (
        f"propagated {_counted(labels.n_seeds, 'seed label')} ({_counted(model.classes_.size, kind)}) to "
        f"{_counted(n_samples - labels.n_seeds, 'sample')} in {seconds:.2f}s: {n_samples - outliers:,} labeled, "
        f"{_counted(outliers, 'outlier')} ({why}); an outlier's label is {model.unlabeled!r}"
    )


def _counted(count, noun):
    """``count`` and ``noun``, in the plural unless there is one (``class`` -> ``classes``)."""
    plural = noun if count == 1 else noun + ("es" if noun.endswith("s") else "s")
    return f"{count:,} {plural}"


def run_propagate(args, progress):
    """Label every sample of ``--features`` from the seeds of ``--labels`` (or of its labels column)."""
    if args.labels is not None and args.label_column is not None:
        raise ValueError(
            f"--labels {args.labels} and --label-column {args.label_column!r}: give the labels once, "
            "in a file or in a column of the --features CSV."
        )
    _check_outputs(args)
    X, stored = load_features(args.features, label_column=args.label_column)
    n_samples = X.shape[0]
    labels = _seed_labels(args, n_samples, stored)
    validation = load_validation(args.validation, labels) if args.validation is not None else None
    n_neighbors = args.neighbors
    if args.graph is not None:
        graph = _load_graph(args.graph, n_samples)
    else:
        graph, n_neighbors, _ = build_graph(X, args.neighbors, args.method, args.seed, progress,
                                            parallel_insert=args.parallel_insert)
    # K is the model's too: the calibration's local density and new points' neighbours read it
    model = fastprop_model(progress, n_neighbors=n_neighbors, outlier_threshold=args.outlier_threshold,
                           outlier_share=args.outlier_share, random_state=args.seed, unlabeled=labels.unlabeled)
    start = time.perf_counter()
    model.fit(X, labels.y, graph=graph, validation=validation)
    seconds = time.perf_counter() - start
    outputs = result_writers(model, args.out, args.csv)
    if args.plot is not None:
        title = f"fastprop propagate: {n_samples:,} samples of {args.features}"
        outputs.append(_plots.writer(_plots.result_figure(model, labels.encoded >= 0, title), args.plot))
    write_atomically(outputs)  # every output, or none
    rule = str(args.outlier_threshold).lower()
    if rule == "auto" and validation is not None:
        rule = "validation"
    if rule == "auto" and args.outlier_share is not None:
        rule = f"the {_exactly(args.outlier_share)} least confident"
    print(_summary(model, labels, seconds, rule))
    print(f"wrote {', '.join(str(path) for path, _ in outputs)}")
    return 0


# ------------------------------------------------------------------ bench


def _load_pool(args):
    require_file(args.data, "--data")
    try:
        X, y = benchmark.load_benchmark_data(args.data)
    except ValueError as error:
        raise ValueError(f"--data {args.data}: {error}") from None
    present = np.unique(y[y >= 0])
    if args.classes > present.size:
        raise ValueError(
            f"--classes {args.classes}: {args.data} has only {present.size} classes; "
            f"allowed: 1 to {present.size}."
        )
    if args.mnist_split:
        if args.classes == present.size:
            raise ValueError(
                f"--mnist-split with --classes {args.classes} leaves no class for the outliers; "
                f"use fewer than {present.size} classes."
            )
        y = np.where(np.isin(y, present[: args.classes]), y, -1)
    return X, y


def _confidence_rerun(X, y, args, progress):
    """Every method on seed 0 at the largest noise ratio, for the confidence plot."""
    noise = max(args.noise)
    task = make_noisy_task(y, args.classes, label_ratio=args.label_ratio, noise_ratio=noise, random_state=0)
    features = task.subset(X)
    progress.start(f"confidence plot: seed 0 at noise {noise:g}", len(args.methods), unit="methods")
    graph = build_knn_graph(features, min(args.neighbors, task.n_samples - 1), random_state=0)
    results = []
    for done, name in enumerate(args.methods, start=1):
        results.append(benchmark.run_method(name, X, task, graph, 0))
        progress.update(done, detail=name)
    progress.finish()
    return results, noise


def run_bench(args, progress):
    """The paper's Table 1 on a labelled pool: every method under the noisy protocol."""
    if args.out is not None:
        check_output(args.out, "--out", [("--data", args.data)])
    plot = optional_plot(args.plot, "--plot", progress)
    confidence_plot = optional_plot(args.confidence_plot, "--confidence-plot", progress)
    X, y = _load_pool(args)
    if not args.no_warmup:
        progress.start("warming up (compiling the kernels, untimed)")
        benchmark.warmup()
        progress.finish()
    total = len(args.noise) * args.seeds * (len(args.methods) + 1)
    progress.start("bench", total, unit="fits")
    rows = benchmark.run_table(
        X, y, args.classes, noise_ratios=args.noise, n_seeds=args.seeds, methods=args.methods,
        label_ratio=args.label_ratio, n_neighbors=args.neighbors, warm_up=False,
        progress=lambda done, total, message: progress.update(done, total, detail=message),
    )
    progress.finish()
    caption = (
        f"{args.metric.replace('_', ' ')} (%), mean ± std over {args.seeds} seed(s): "
        f"{args.classes} classes of {args.data}{' (fixed split)' if args.mnist_split else ''}, "
        f"{args.label_ratio:g} label ratio, K={args.neighbors} (at most a task's samples - 1)"
    )
    table = benchmark.format_markdown(rows, metric=args.metric)
    print(caption)
    print()
    print(table)
    if args.out is not None:
        write_text(args.out, f"{caption}\n\n{table}\n")
        print(f"\nwrote {args.out}")
    if plot is not None:
        _plots.save(_plots.accuracy_figure(rows, caption.split(":")[0], metric=args.metric), plot)
        print(f"wrote {plot}")
    if confidence_plot is not None:
        results, noise = _confidence_rerun(X, y, args, progress)
        title = f"Confidence of in-class samples vs outliers (seed 0, noise {noise:g})"
        _plots.save(_plots.confidence_figure(results, title), confidence_plot)
        print(f"wrote {confidence_plot}")
    return 0


def _exactly(share):
    """A share with every digit it has (its shortest exact form; ``:g`` showed 0.99999999999 as 1)."""
    return np.format_float_positional(share, trim="-")
