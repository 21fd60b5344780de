"""Table 1 of Yang et al. (ECCV 2020): accuracy of every method under 0-50% outliers.

Usage (from the repository root)::

    python bench/table1.py                                    # synthetic mixture, 10 of 20 classes
    python bench/table1.py --data ../shared/data/banking77_minilm.npz --classes 30
    python bench/table1.py --data ../shared/data/mnist_test.npz --mnist-split --classes 5

For each noise ratio and seed (0 .. --seeds-1) one task is drawn with
``make_noisy_task`` and one kNN graph (K=30) is built and shared by every
method; see :func:`fastprop.evaluation.benchmark.run_table`. ``--mnist-split`` keeps
digits 0-4 as the classes and turns digits 5-9 into outliers (y = -1).
Every baseline also runs as ``"<name> + ConfNet"``: its output refined by
:func:`fastprop.confnet.refine_confidence` (the paper's Fig. 6; ``--no-confnet``
leaves them out). Rows are L2-normalised (MNIST is raw pixels). When scikit-learn is installed,
``sklearn.semi_supervised.LabelSpreading(kernel="knn", n_neighbors=30)`` is
added as a reference; it builds its own graph.

Writes ``bench/results/table1_<dataset>.md`` and ``.json``. Set
``OPENBLAS_NUM_THREADS=1`` on a loaded machine: BLAS threads fighting over
two cores make the many small matrix products slower, not faster.
"""

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS_DIR, _jsonable, environment, log  # noqa: E402

from fastprop.evaluation import benchmark as fb  # noqa: E402
from fastprop.evaluation.datasets import make_noisy_mixture  # noqa: E402
from fastprop.evaluation.protocol import make_noisy_task  # noqa: E402

METRIC_TITLES = {
    "accuracy": "Accuracy with rejection (the paper's metric), % mean ± std over seeds",
    "in_class_accuracy": "In-class accuracy (argmax on in-class evaluation samples, no rejection), %",
    "outlier_auroc": "Outlier AUROC of the confidence (in-class vs outlier), %; undefined at 0% noise",
    "calibration_error": "Calibration error of the confidence as the probability that the argmax is right "
                         "(expected, 10 bins), %; lower is better",
    "best_threshold_accuracy": "Accuracy with rejection at the threshold best for the evaluation samples, known "
                               "only in hindsight (what the validation set's choice could reach at most), %",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="npz with X and y (default: synthetic make_noisy_mixture)")
    parser.add_argument("--classes", type=int,
                        help="classes per task (default 10 synthetic, 5 with --mnist-split, else 30)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5])
    parser.add_argument("--label-ratio", type=float, default=0.01)
    parser.add_argument("--neighbors", type=int, default=30)
    parser.add_argument("--mnist-split", action="store_true", help="digits 0-4 in-class, 5-9 outliers")
    parser.add_argument("--methods", nargs="+", default=list(fb.METHOD_NAMES))
    parser.add_argument("--no-sklearn", action="store_true", help="leave out the scikit-learn reference row")
    parser.add_argument("--no-confnet", action="store_true",
                        help="leave out the '+ ConfNet' variant of every baseline (the paper's Fig. 6)")
    parser.add_argument("--samples", type=int, default=10000, help="pool size of the synthetic mixture")
    parser.add_argument("--pool-classes", type=int, default=20,
                        help="classes of the synthetic mixture (a task draws --classes of them)")
    parser.add_argument("--overlap", type=float, default=1.0,
                        help="the synthetic mixture's overlap (lower: classes further apart)")
    parser.add_argument("--name", help="dataset name in the output file (default from --data)")
    return parser.parse_args(argv)


def load_pool(args):
    """Return (name, X, y, description)."""
    if args.data is None:
        X, y = make_noisy_mixture(args.samples, args.pool_classes, overlap=args.overlap, random_state=0)
        return "synthetic", X, y, (f"make_noisy_mixture({args.samples}, {args.pool_classes}, overlap={args.overlap:g}, "
                                   "random_state=0)")
    X, y = fb.load_benchmark_data(args.data)
    name = Path(args.data).stem.split("_")[0]
    description = f"{args.data}: {X.shape[0]} x {X.shape[1]}, rows L2-normalised"
    if args.mnist_split:
        y = np.where(y >= 5, -1, y)
        description += "; digits 0-4 are the classes, digits 5-9 (y := -1) supply the outliers"
    return name, X, y, description


def task_sizes(y, n_classes, noise_ratios, n_seeds, label_ratio):
    """Mean task size, evaluation size and reached noise ratio per requested ratio."""
    out = []
    for ratio in noise_ratios:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tasks = [make_noisy_task(y, n_classes, label_ratio=label_ratio, noise_ratio=ratio, random_state=s)
                     for s in range(n_seeds)]
        out.append({
            "noise_ratio": ratio,
            "n_samples": float(np.mean([t.n_samples for t in tasks])),
            "n_seeds_labelled": float(np.mean([t.seed_mask.sum() for t in tasks])),
            "n_evaluated": float(np.mean([t.evaluation.size for t in tasks])),
            "actual_noise_ratio": float(np.mean([t.actual_noise_ratio for t in tasks])),
        })
    return out


def seconds_table(rows):
    noise = sorted({r["noise_ratio"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cell = {(r["method"], r["noise_ratio"]): r for r in rows}
    lines = ["| Method | " + " | ".join(f"{100 * r:g}%" for r in noise) + " |",
             "| --- |" + " ---: |" * len(noise)]
    for m in methods:
        label = "kNN graph (shared)" if m == fb.GRAPH_ROW else m
        lines.append(f"| {label} | " + " | ".join(
            f"{cell[(m, r)]['seconds_mean']:.2f} ± {cell[(m, r)]['seconds_std']:.2f} "
            f"({cell[(m, r)]['cpu_seconds_mean']:.2f})" for r in noise) + " |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    name, X, y, description = load_pool(args)
    n_classes = args.classes or (10 if args.data is None else 5 if args.mnist_split else 30)
    methods = list(args.methods)
    if not args.no_confnet:
        methods += [m + fb.CONFNET_SUFFIX for m in args.methods
                    if m != "FastProp" and not m.endswith(fb.CONFNET_SUFFIX)]
    if not args.no_sklearn and fb.sklearn_available() and fb.SKLEARN_REFERENCE not in methods:
        methods.append(fb.SKLEARN_REFERENCE)
    log(f"{name}: pool {X.shape}, {n_classes} classes per task, methods {methods}")

    sizes = task_sizes(y, n_classes, args.noise, args.seeds, args.label_ratio)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = fb.run_table(
            X, y, n_classes, noise_ratios=tuple(args.noise), n_seeds=args.seeds, methods=tuple(methods),
            label_ratio=args.label_ratio, n_neighbors=args.neighbors,
            progress=lambda done, total, message: log(f"[{done}/{total}] {message}"),
        )
    warning_texts = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    for text in warning_texts:
        log(f"warning: {text}")

    info = environment()
    threads = {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                              "NUMBA_NUM_THREADS")}
    setting = {
        "dataset": description,
        "classes_per_task": n_classes,
        "label_ratio": args.label_ratio,
        "n_neighbors": args.neighbors,
        "seeds": list(range(args.seeds)),
        "noise_ratios": args.noise,
        "threads": threads,
    }
    parts = [f"# Table 1: {name}", "",
             f"- command: `{info['command']}`",
             f"- date: {info['date']}; git: {info.get('git_commit')}",
             f"- machine: {info['machine']['platform']}, {info['machine']['cpu_count']} CPUs; "
             f"load average at start {info['machine']['load_average_at_start']}",
             "- versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()),
             f"- threads: {threads}",
             f"- data: {description}",
             f"- protocol: {n_classes} classes per task, {100 * args.label_ratio:g}% labels, "
             f"K={args.neighbors} cosine kNN graph shared by every method, seeds 0..{args.seeds - 1}",
             "- task sizes (mean over seeds): " + "; ".join(
                 f"{100 * s['noise_ratio']:g}% noise: {s['n_samples']:.0f} samples, "
                 f"{s['n_evaluated']:.0f} evaluated, reached noise {100 * s['actual_noise_ratio']:.1f}%"
                 for s in sizes)]
    if fb.SKLEARN_REFERENCE in methods:
        parts.append(f"- `{fb.SKLEARN_REFERENCE}`: scikit-learn LabelSpreading(kernel='knn', n_neighbors=30), "
                     "alpha=0.2, max_iter=30 (its defaults), on its own unweighted Euclidean kNN graph; "
                     "its seconds include that graph")
    if warning_texts:
        parts.append("- warnings: " + "; ".join(f"`{t}`" for t in warning_texts))
    for metric, title in METRIC_TITLES.items():
        parts += ["", f"## {title}", "", fb.format_markdown(rows, metric)]
    parts += ["", "## Fit seconds per noise ratio",
              "", "Wall-clock mean ± std over seeds, (mean CPU seconds of the process, all threads). The graph "
              "is built once per task and is not in the methods' times.",
              "", seconds_table(rows)]
    patches = [r for r in rows if r["method"] == "FastProp"]
    if patches:
        parts += ["", "FastProp patches processed (n_iter_, mean): " + ", ".join(
            f"{100 * r['noise_ratio']:g}%: {r['n_iter_mean']:.0f}" for r in patches)]
    parts.append("")
    text = "\n".join(parts)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = f"table1_{args.name or name}"
    (RESULTS_DIR / f"{stem}.md").write_text(text)
    payload = {"meta": {**info, "setting": setting, "task_sizes": sizes, "warnings": warning_texts},
               "rows": rows}
    (RESULTS_DIR / f"{stem}.json").write_text(json.dumps(_jsonable(payload), indent=2) + "\n")
    print(text)
    log(f"wrote {RESULTS_DIR / stem}.md and .json")


if __name__ == "__main__":
    main()
