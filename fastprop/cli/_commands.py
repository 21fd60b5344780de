"""The four commands: ``demo``, ``graph``, ``propagate`` and ``bench``.

Each takes the parsed arguments and a :class:`~fastprop.cli._progress.Progress`,
checks every input and output before the long work starts, writes results
atomically, prints its report on stdout and returns the exit status.
"""

import time
from pathlib import Path

import numpy as np

from ..evaluation import benchmark
from ..baselines import SGC, LabelSpreading
from ..evaluation.datasets import make_noisy_mixture
from ..estimator import FastProp
from ..graph import EXACT_SEARCH_MAX_SAMPLES, build_knn_graph, load_graph, save_graph
from ..evaluation.protocol import evaluate, make_noisy_task
from . import _plots
from ._io import (
    check_label_array,
    check_output,
    load_features,
    load_labels,
    load_validation,
    require_file,
    result_writers,
    write_atomically,
    write_text,
)
from ._text import confidence_histogram, result_table

DEMO_OUTLIER_FRACTION = 0.5
DEMO_LABEL_RATIO = 0.01


_STAGE_TEXT = {
    "graph": "building the kNN graph",
    "training": "training the local predictor",
    "confnet": "training ConfNet",
}


class _StageReporter:
    """Drive a CLI progress line from FastProp's ``progress(stage, done, total)`` calls."""

    def __init__(self, progress, label):
        self._progress = progress
        self._label = label
        self._stage = None

    def __call__(self, stage, done, total):
        if stage == "done":
            self._progress.finish()
        elif stage == "propagation":
            if self._stage != stage:
                # The scheduler stops when no viable start is left, usually well short of
                # n_vertices confident: show the count and rate, but no time left.
                self._progress.start(f"{self._label}propagating", total, unit="confident",
                                     initial=done, time_left=False)
            self._progress.update(done)
        elif self._stage != stage:
            self._progress.start(f"{self._label}{_STAGE_TEXT[stage]}")
        self._stage = stage


def _fastprop(progress, label="", **params):
    reporter = _StageReporter(progress, label) if progress.enabled else None
    return FastProp(progress=reporter, **params)


def _build_graph(X, n_neighbors, method, seed, progress, parallel_insert=False):
    """The graph of ``X``; hnsw inserts on one thread (reproducible) unless ``parallel_insert``."""
    n_samples, n_features = X.shape
    if n_samples < 2:
        raise ValueError(f"a kNN graph needs at least 2 samples, got {n_samples}.")
    if n_neighbors > n_samples - 1:
        progress.message(f"note: --neighbors {n_neighbors} lowered to {n_samples - 1} (n_samples - 1)")
        n_neighbors = n_samples - 1
    resolved = method
    if method == "auto":
        resolved = "exact" if n_samples <= EXACT_SEARCH_MAX_SAMPLES else "hnsw"
    progress.start(f"building the kNN graph ({resolved}, {n_samples:,} x {n_features}, K={n_neighbors})")
    graph = build_knn_graph(X, n_neighbors, method=method, random_state=seed, n_jobs=-1 if parallel_insert else None)
    progress.finish(f"{graph.nnz:,} edges")
    return graph, n_neighbors, resolved


def _plot_path(path, option, progress):
    """``path`` if a plot can be drawn there; None (after a note) when matplotlib is missing."""
    if path is None:
        return None
    if not _plots.available():
        progress.message(f"note: {option} skipped: {_plots.INSTALL_HINT}")
        return None
    _plots.check_plot_path(path, option)
    check_output(path, option)
    return path


def _score(name, task, model, seconds):
    scores = evaluate(task, model.label_distributions_, model.confidence_)
    evaluation = task.evaluation
    scores.update(
        method=name,
        seconds=seconds,
        confidence=np.asarray(model.confidence_, dtype=np.float64)[evaluation],
        truth=np.asarray(task.truth)[evaluation],
    )
    return scores


# ------------------------------------------------------------------- demo


def run_demo(args, progress):
    """Synthetic noisy set, FastProp vs SGC and LabelSpreading, table and histogram."""
    plot = _plot_path(args.plot, "--plot", progress)
    progress.start("generating the data")
    X_pool, y_pool = make_noisy_mixture(
        args.samples, args.classes, outlier_fraction=DEMO_OUTLIER_FRACTION, random_state=args.seed
    )
    task = make_noisy_task(
        y_pool, args.classes, label_ratio=DEMO_LABEL_RATIO, noise_ratio=DEMO_OUTLIER_FRACTION,
        random_state=args.seed,
    )
    X = task.subset(X_pool)
    progress.finish()
    start = time.perf_counter()
    graph, n_neighbors, method = _build_graph(X, args.neighbors, "auto", args.seed, progress)
    graph_seconds = time.perf_counter() - start

    results = []
    for name in ("FastProp", "SGC", "LabelSpreading"):
        start = time.perf_counter()
        if name == "FastProp":
            model = _fastprop(progress, "FastProp: ", random_state=args.seed)
            model.fit(X, task.y, graph=graph, validation=task.validation)
        else:
            progress.start(name)
            model = (SGC if name == "SGC" else LabelSpreading)().fit(X, task.y, graph=graph)
            progress.finish()
        results.append(_score(name, task, model, time.perf_counter() - start))

    n_outliers = int((task.truth == -1).sum())
    n_seeds = int(task.seed_mask.sum())
    print(
        f"fastprop demo: make_noisy_mixture({args.samples:,} samples, {args.classes} classes, "
        f"{DEMO_OUTLIER_FRACTION:.0%} outliers, seed {args.seed})"
    )
    print(
        f"task: {task.n_samples:,} samples, {n_seeds} seeds (label ratio {DEMO_LABEL_RATIO:.0%}), "
        f"{n_outliers:,} outliers ({task.actual_noise_ratio:.0%} of the unlabeled);\n"
        f"      {len(task.validation[0])} samples for validation, {task.evaluation.size:,} evaluated"
    )
    print(f"graph: cosine kNN, K={n_neighbors}, {method} search, {graph.nnz:,} edges, {graph_seconds:.2f}s")
    print()
    print("\n".join(result_table(results)))
    print()
    print(
        "accuracy: top-1 on the evaluation samples, an outlier's truth being -1 and a sample whose\n"
        "confidence is below the threshold predicted -1; every method's threshold is chosen on the\n"
        "validation set. outlier AUROC: how well confidence ranks in-class samples above outliers."
    )
    print()
    fastprop = results[0]
    print("FastProp confidence on the evaluation samples (share of each group per bin):")
    print("\n".join(confidence_histogram(
        fastprop["confidence"], fastprop["truth"], fastprop["outlier_threshold"]
    )))
    if plot is not None:
        figure = _plots.confidence_figure(
            results, f"Confidence on the evaluation samples: in-class vs outliers "
            f"({task.actual_noise_ratio:.0%} of the unlabeled samples are outliers)"
        )
        _plots.save(figure, plot)
        print(f"\nwrote {plot}")
    return 0


# ------------------------------------------------------------------ graph


def run_graph(args, progress):
    """Build the cosine kNN affinity graph of ``--features`` and save it."""
    check_output(args.out, "--out", [("--features", args.features)])
    X, _ = load_features(args.features)
    graph, n_neighbors, method = _build_graph(X, args.neighbors, args.method, args.seed, progress,
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


def run_propagate(args, progress):
    """Label every sample of ``--features`` from the seeds of ``--labels``."""
    inputs = [(option, getattr(args, name)) for option, name in (
        ("--features", "features"), ("--labels", "labels"), ("--graph", "graph"),
        ("--validation", "validation"),
    )]
    check_output(args.out, "--out", inputs)
    if args.csv is not None:
        check_output(args.csv, "--csv", inputs)
        if Path(args.csv).resolve() == Path(args.out).resolve():
            raise ValueError(f"--csv {args.csv}: is also --out; give two different files.")
    X, stored_labels = load_features(args.features)
    n_samples = X.shape[0]
    if args.labels is not None:
        y = load_labels(args.labels, n_samples)
    elif stored_labels is not None:
        y = check_label_array(stored_labels, n_samples, f"--features {args.features} (array y): ")
    else:
        raise ValueError(
            "no labels: give --labels, or store them as array y next to X in the --features .npz."
        )
    validation = load_validation(args.validation, y) if args.validation is not None else None
    if args.graph is not None:
        graph = _load_graph(args.graph, n_samples)
    else:
        graph, _, _ = _build_graph(X, args.neighbors, args.method, args.seed, progress,
                                   parallel_insert=args.parallel_insert)

    model = _fastprop(progress, outlier_threshold=args.outlier_threshold, random_state=args.seed)
    start = time.perf_counter()
    model.fit(X, y, graph=graph, validation=validation)
    seconds = time.perf_counter() - start
    write_atomically(result_writers(model, args.out, args.csv))

    labels = model.transduction_
    seeds = int((y != -1).sum())
    outliers = int((labels == -1).sum())
    rule = "validation" if validation is not None else str(args.outlier_threshold).lower()
    if model.outlier_threshold_ > 1.0:
        why = "every unlabeled sample rejected: the validation samples are all known outliers"
    else:
        why = f"confidence below {model.outlier_threshold_:.3f}, threshold rule: {rule}"
    print(
        f"propagated {seeds:,} seed labels ({model.classes_.size} classes) to {n_samples - seeds:,} "
        f"samples in {seconds:.2f}s: {n_samples - outliers:,} labeled, {outliers:,} outliers ({why})"
    )
    written = [path for path in (args.out, args.csv) if path is not None]
    print(f"wrote {', '.join(map(str, written))}")
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
    plot = _plot_path(args.plot, "--plot", progress)
    confidence_plot = _plot_path(args.confidence_plot, "--confidence-plot", progress)
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
        f"{args.label_ratio:g} label ratio, K={args.neighbors}"
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
