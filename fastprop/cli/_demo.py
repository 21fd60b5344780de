"""``fastprop demo``: FastProp against two baselines on a synthetic noisy set, explained.

Six steps, numbered on the progress line: draw the data, compile the kernels
(shown apart, so that no timing includes it), build the graph, fit FastProp,
SGC and LabelSpreading on it. The report says what was done, what each
column means and which method wins each, from the numbers of the run.
"""

import itertools
import time

import numpy as np

from ..baselines import SGC, LabelSpreading
from .._warmup import warmup
from ..evaluation.datasets import make_noisy_mixture
from ..evaluation.protocol import evaluate, make_noisy_task
from . import _plots
from ._running import build_graph, fastprop_model, optional_plot
from ._text import comparison, confidence_histogram, metric_meanings, paragraph, result_table

DEMO_OUTLIER_FRACTION = 0.5
DEMO_LABEL_RATIO = 0.01
METHODS = ("FastProp", "SGC", "LabelSpreading")
_N_STEPS = 3 + len(METHODS)  # data, kernels, graph, then one per method


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


def _fit(name, X, task, graph, n_neighbors, seed, progress, step):
    """Fit method ``name`` on the task's graph (of ``n_neighbors``); its scores, with the seconds of the fit."""
    start = time.perf_counter()
    if name == "FastProp":
        model = fastprop_model(progress, f"{step}FastProp: ", n_neighbors=n_neighbors, random_state=seed)
        model.fit(X, task.y, graph=graph, validation=task.validation)
    else:
        progress.start(f"{step}{name}")
        model = (SGC if name == "SGC" else LabelSpreading)().fit(X, task.y, graph=graph)
        progress.finish()
    return _score(name, task, model, time.perf_counter() - start)


def _what_it_did(args, task, n_features):
    evaluated_outliers = int((task.truth[task.evaluation] == -1).sum())
    n_seeds = int(task.seed_mask.sum())
    # the protocol adds a seed for every class its draw missed: with many classes and few samples that is
    # far more than DEMO_LABEL_RATIO of them
    n_missed = n_seeds - round(DEMO_LABEL_RATIO * int((task.truth >= 0).sum()))
    seed_share = f"{DEMO_LABEL_RATIO:.0%} of the in-class samples" + (
        f", and {n_missed} more, one for each class that draw missed" if n_missed > 0 else "")
    return paragraph(
        f"What it did: drew {args.samples:,} synthetic {n_features}-d embeddings of {args.classes} "
        f"classes, {DEMO_OUTLIER_FRACTION:.0%} of them outliers that belong to no class "
        f"(make_noisy_mixture, seed {args.seed}), and made a task of "
        f"{task.n_samples:,} of them: {n_seeds} seeds ({seed_share}; the only labels the methods see), "
        f"{len(task.validation[0])} "
        "validation samples (their truth is used only to choose each method's outlier threshold) "
        f"and {task.evaluation.size:,} samples to evaluate, {evaluated_outliers:,} of them outliers. "
        "Each method gives every sample a class or rejects it as an outlier, on the same kNN graph."
    )


def run_demo(args, progress):
    """Synthetic noisy set, FastProp vs SGC and LabelSpreading: table, explanation, histogram."""
    plot = optional_plot(args.plot, "--plot", progress)
    steps = (f"[{number}/{_N_STEPS}] " for number in itertools.count(1))
    progress.start(f"{next(steps)}generating the data")
    X_pool, y_pool = make_noisy_mixture(
        args.samples, args.classes, outlier_fraction=DEMO_OUTLIER_FRACTION, random_state=args.seed
    )
    task = make_noisy_task(
        y_pool, args.classes, label_ratio=DEMO_LABEL_RATIO, noise_ratio=DEMO_OUTLIER_FRACTION,
        random_state=args.seed,
    )
    X = task.subset(X_pool)
    progress.finish()
    progress.start(f"{next(steps)}compiling kernels (once per environment; cached afterwards)")
    compile_seconds = warmup()
    progress.finish()
    start = time.perf_counter()
    graph, n_neighbors, method = build_graph(X, args.neighbors, "auto", args.seed, progress, label=next(steps))
    graph_seconds = time.perf_counter() - start
    results = [_fit(name, X, task, graph, n_neighbors, args.seed, progress, next(steps)) for name in METHODS]

    print(f"fastprop demo: {', '.join(METHODS[:-1])} and {METHODS[-1]} on a synthetic noisy set (seed {args.seed})")
    print(f"kernels: compiled or loaded from cache in {compile_seconds:.2f}s (once per environment; "
          "not in the seconds below)")
    print(f"graph: cosine kNN, K={n_neighbors}, {method} search, {graph.nnz:,} edges, {graph_seconds:.2f}s")
    print()
    print("\n".join(result_table(results)))
    print()
    print(_what_it_did(args, task, X.shape[1]))
    print()
    print("\n".join(metric_meanings(task.evaluation.size, len(task.validation[0]))))
    print()
    print("\n".join(comparison(results, focus="FastProp")))
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
