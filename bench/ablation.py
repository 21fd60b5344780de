"""Ablations of FastProp at 50% outliers, after Yang et al. (ECCV 2020), Tables 2, 3 and supp.

Usage (from the repository root)::

    OPENBLAS_NUM_THREADS=1 python bench/ablation.py                  # Banking77, 30 classes, 3 seeds
    python bench/ablation.py --data PATH --classes M --seeds 3 --parts confidence eta

Setting: one task per seed (``make_noisy_task``, ``noise_ratio=0.5``, 1%
labels, ``random_state=seed``), one K=30 graph per task shared by every
configuration, every FastProp fit with ``random_state=seed`` and the task's
validation set for the outlier threshold. Parts:

- ``confidence`` (Table 2): the final confidence source, ``random`` /
  ``multiview`` / ``confnet`` / ``both`` (the paper's ConfNet-dagger), with
  ConfNet on the paper's input (``confnet_features="embedding"``) or on ours
  (``"structure"``); and "GT": the default at 0% noise, same classes and seeds.
- ``eta`` (Table 3): ConfNet's positive/negative share ``eta`` in 0.01, 0.05,
  0.1, 0.2, for both inputs, with the paper's Num (positives), FNR (outliers
  among the positives) and TNR (outliers among the negatives).
- ``depth``: SGC depth of the local predictor, 1, 2, 3.
- ``predictor`` (Table 2's columns): the local predictor, SGC / GCN / GAT
  (``local_predictor``), under the paper's confidence sources (random,
  multi-view, ConfNet, ConfNet-dagger; ConfNet on our structural input, no
  provisional classes), with our default settings, and trained on patches
  (the paper's ``predictor_training``).
- ``design``: our departures from the paper (those of ``PAPER_SETTINGS`` that
  FastProp still has), one at a time and together.
- ``patch`` (supplement, "Influence of maximum patch size"): ``max_patch_size``
  s in 100 .. 10000 with accuracy, peak memory and runtime, at the paper's
  ``min_gain`` (Delta c_tau) 500, once skipping patches cut at s (Sec. 3.2:
  not viable, so s <= 500 admits no patch at all) and once processing them
  (``process_capped_patches=True``, the supplement's extraction algorithm). Runtime and the
  RSS peak come from one untraced fit; the traced peak (``tracemalloc``: every
  NumPy/Python allocation, not Numba's internal ones) from a second fit.

``eta``, ``depth`` and ``patch`` run the paper's loop (``confidence="both"``):
with a validation set the default ``confidence="auto"`` grows no patch and
runs no ConfNet.

Writes ``bench/results/ablation_<dataset>.md`` and ``.json``.
"""

import argparse
import os
import sys
import threading
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA_DIR, log, write_tables  # noqa: E402

from fastprop.evaluation import benchmark as fb  # noqa: E402
from fastprop.confnet import extreme_vertices  # noqa: E402
from fastprop.graph import build_knn_graph  # noqa: E402
from fastprop.evaluation.protocol import make_noisy_task  # noqa: E402

PARTS = ("confidence", "eta", "depth", "patch", "design", "predictor")
PAPER_SETTINGS = {  # our departures from the paper: the paper's value of each
    "confidence": "both",  # the default "auto" skips the patch loop with a validation set
    "predictor_training": "patches",
    "confnet_features": "embedding",
    "labels": "views",
    "provisional_classes": False,
    "calibrate_confidence": False,
    "single_view_restarts": False,
    "feature_energy": None,  # every column for the SGC models
}
#: Table 2 compares the paper's confidence sources, so its rows leave out the provisional
#: classes (issue #16) that refine any of them; the last row is the default with them.
_PAPER_CONFIDENCE = {"provisional_classes": False}
#: The parts that study the patch loop and ConfNet run them: with a validation set the default
#: ``confidence="auto"`` runs neither (``"global"``), and their settings would be inert.
_PAPER_LOOP = {"confidence": "both"}
CONFIDENCE_ROWS = [  # (label, params)
    ("Random", {"confidence": "random"}),
    ("Multi-view", {"confidence": "multiview", **_PAPER_CONFIDENCE}),
    ("ConfNet (embedding, paper)", {"confidence": "confnet", "confnet_features": "embedding", **_PAPER_CONFIDENCE}),
    ("ConfNet (structure, ours)", {"confidence": "confnet", "confnet_features": "structure", **_PAPER_CONFIDENCE}),
    ("ConfNet† (embedding, paper)", {"confidence": "both", "confnet_features": "embedding", **_PAPER_CONFIDENCE}),
    ("ConfNet† (structure, ours)", {"confidence": "both", "confnet_features": "structure", **_PAPER_CONFIDENCE}),
    ("ConfNet† (structure) + provisional classes", _PAPER_LOOP),
    ("whole-graph confidence + provisional classes (default)", {}),
]
LOCAL_PREDICTORS = ("sgc", "gcn", "gat")
PREDICTOR_ROWS = [  # (label, params), each with every local predictor
    ("Random", {"confidence": "random"}),
    ("Multi-view", {"confidence": "multiview", **_PAPER_CONFIDENCE}),
    ("ConfNet", {"confidence": "confnet", **_PAPER_CONFIDENCE}),
    ("ConfNet†", {"confidence": "both", **_PAPER_CONFIDENCE}),
    ("ConfNet† + provisional classes", _PAPER_LOOP),
    ("ConfNet† + provisional classes, trained on patches (paper)", {**_PAPER_LOOP, "predictor_training": "patches"}),
    ("default (whole-graph confidence + provisional classes)", {}),
]
ETAS = (0.01, 0.05, 0.1, 0.2)
DEPTHS = (1, 2, 3)
PATCH_SIZES = (100, 500, 1000, 3000, 5000, 10000)
DEFAULT_GAIN = 500.0  # FastProp's min_gain, the paper's Delta c_tau


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(SHARED_DATA_DIR / "banking77_minilm.npz"))
    parser.add_argument("--classes", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--label-ratio", type=float, default=0.01)
    parser.add_argument("--neighbors", type=int, default=30)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--mnist-split", action="store_true", help="digits 0-4 in-class, 5-9 outliers")
    parser.add_argument("--name", help="dataset name in the output file (default from --data)")
    return parser.parse_args(argv)


class RssPeak:
    """Sample this process's resident set size every few ms; ``delta`` is peak minus start, bytes."""

    def __init__(self, interval=0.002):
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")

    def _rss(self):
        with open("/proc/self/statm") as stream:
            return int(stream.read().split()[1]) * self.page

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(self.interval)

    def __enter__(self):
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())
        self.delta = self.peak - self.start


class Runner:
    """FastProp fits on one seed's task and graph, cached by parameters."""

    def __init__(self, X, task, graph, seed):
        self.X, self.task, self.graph, self.seed = X, task, graph, seed
        self.cache = {}
        self.tie_rank = np.random.default_rng(seed).permutation(task.n_samples)  # as FastProp.fit draws it
        self.candidates = np.flatnonzero(np.asarray(task.y) == -1)

    def fit(self, params, *, measure_memory=False):
        key = (tuple(sorted(params.items())), measure_memory)
        if key in self.cache:
            return self.cache[key]
        with RssPeak() as rss:
            result = fb.run_method("FastProp", self.X, self.task, self.graph, self.seed, params=params,
                                   return_model=True)
        model = result.pop("model")
        out = {k: result[k] for k in ("accuracy", "in_class_accuracy", "outlier_auroc", "seconds", "cpu_seconds")}
        out["n_iter"] = model.n_iter_
        out["timings"] = result["timings"]
        out["rss_mib"] = rss.delta / 2**20
        eta = params.get("eta", model.eta)
        positives, negatives = extreme_vertices(model.multiview_confidence_, self.candidates, eta, self.tie_rank)
        truth = np.asarray(self.task.truth)
        out.update(num=positives.size, fnr=float(np.mean(truth[positives] == -1)),
                   tnr=float(np.mean(truth[negatives] == -1)))
        if measure_memory:
            del model
            tracemalloc.start()
            fb.run_method("FastProp", self.X, self.task, self.graph, self.seed, params=params)
            out["traced_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        self.cache[key] = out
        return out


def make_runner(X, y, args, seed, noise_ratio):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = make_noisy_task(y, args.classes, label_ratio=args.label_ratio, noise_ratio=noise_ratio,
                               random_state=seed)
    start = time.perf_counter()
    graph = build_knn_graph(task.subset(X), args.neighbors, random_state=seed)
    log(f"seed {seed}, noise {noise_ratio:g}: {task.n_samples} samples, graph {time.perf_counter() - start:.1f}s")
    return Runner(X, task, graph, seed)


def summarise(label, results, extra=None):
    """Means, sample stds (ddof=1) and display strings of a configuration's per-seed results."""
    row = {"configuration": label, **(extra or {}), "n_seeds": len(results)}
    for key in ("accuracy", "in_class_accuracy", "outlier_auroc", "seconds", "cpu_seconds", "n_iter",
                "num", "fnr", "tnr", "rss_mib", "traced_mib"):
        values = np.array([r[key] for r in results if key in r], dtype=np.float64)
        if values.size and np.isnan(values).all():
            row[f"{key}_mean"] = row[f"{key}_std"] = float("nan")
        elif values.size:
            row[f"{key}_mean"] = float(np.nanmean(values))
            row[f"{key}_std"] = float(np.nanstd(values, ddof=1)) if values.size > 1 else 0.0
    for key in ("accuracy", "in_class_accuracy", "outlier_auroc", "fnr", "tnr"):
        if f"{key}_mean" in row:
            mean, std = row[f"{key}_mean"], row[f"{key}_std"]
            row[key] = "—" if np.isnan(mean) else f"{100 * mean:.2f} ± {100 * std:.2f}"
    row["seconds"] = f"{row['seconds_mean']:.2f} ({row['cpu_seconds_mean']:.2f})"
    row["accuracy_runs"] = [r["accuracy"] for r in results]
    return row


METRIC_COLUMNS = [("accuracy", "accuracy %"), ("in_class_accuracy", "in-class acc. %"),
                  ("outlier_auroc", "outlier AUROC %"), ("seconds", "fit s (CPU s)")]


def main(argv=None):
    args = parse_args(argv)
    name = args.name or Path(args.data).stem.split("_")[0]
    X, y = fb.load_benchmark_data(args.data)
    if args.mnist_split:
        y = np.where(y >= 5, -1, y)
    log(f"{name}: pool {X.shape}, {args.classes} classes, noise {args.noise}, seeds {args.seeds}, parts {args.parts}")
    fb.warmup()

    collected = {}  # (part, label) -> list of per-seed results
    extras = {}
    for seed in range(args.seeds):
        runner = make_runner(X, y, args, seed, args.noise)

        def record(part, label, params, extra=None, **options):
            result = runner.fit(params, **options)
            collected.setdefault((part, label), []).append(result)
            extras[(part, label)] = extra or {}
            log(f"  seed {seed} {part} {label}: acc {result['accuracy']:.4f} auroc {result['outlier_auroc']:.4f} "
                f"{result['seconds']:.2f}s")

        if "confidence" in args.parts:
            for label, params in CONFIDENCE_ROWS:
                record("confidence", label, params)
        if "eta" in args.parts:
            for features in ("embedding", "structure"):
                for eta in ETAS:
                    record("eta", f"Multi-view (η={eta:g}), ConfNet on {features}",
                           {**_PAPER_LOOP, "eta": eta, "confnet_features": features},
                           {"eta": eta, "features": features})
        if "depth" in args.parts:
            for depth in DEPTHS:
                record("depth", f"SGC depth {depth}", {**_PAPER_LOOP, "predictor_depth": depth}, {"depth": depth})
        if "patch" in args.parts:
            for size in PATCH_SIZES:
                record("patch", f"s={size}", {**_PAPER_LOOP, "max_patch_size": size},
                       {"s": size, "min_gain": DEFAULT_GAIN, "capped": "skipped"}, measure_memory=True)
            for size in PATCH_SIZES:  # the supplement's algorithm: a patch cut at s is still used
                record("patch", f"s={size}, capped patches processed",
                       {**_PAPER_LOOP, "max_patch_size": size, "process_capped_patches": True},
                       {"s": size, "min_gain": DEFAULT_GAIN, "capped": "processed"}, measure_memory=True)
        if "design" in args.parts:
            paper = PAPER_SETTINGS
            record("design", "ours (default)", {})
            for key, value in paper.items():
                record("design", f"{key}={value!r} (paper's)", {key: value})
            if len(paper) > 1:
                record("design", "all of the above as in the paper", paper)
        if "predictor" in args.parts:
            for label, params in PREDICTOR_ROWS:
                for predictor in LOCAL_PREDICTORS:
                    record("predictor", f"{label}, {predictor.upper()}", {**params, "local_predictor": predictor},
                           {"confidence": label, "predictor": predictor.upper()})
        if "confidence" in args.parts and args.noise > 0:
            runner = make_runner(X, y, args, seed, 0.0)  # same classes and seeds: drawn first
            record("confidence", "GT (0% noise: no outliers)", {})
        runner = None  # this seed's graph and task are freed before the next seed's are built

    rows = {part: [summarise(label, results, extras[(p, label)])
                   for (p, label), results in collected.items() if p == part] for part in args.parts}
    tables = []
    if "confidence" in rows:
        tables.append(("Confidence source (Table 2, SGC local predictor)", rows["confidence"],
                       [("configuration", "confidence")] + METRIC_COLUMNS))
    if "eta" in rows:
        tables.append(("ConfNet training share η (Table 3)", rows["eta"],
                       [("configuration", "initial confidence"), ("num_mean", "Num", ".0f"), ("fnr", "FNR %"),
                        ("tnr", "TNR %")] + METRIC_COLUMNS))
    if "depth" in rows:
        tables.append(("Local predictor SGC depth", rows["depth"], [("configuration", "predictor")] + METRIC_COLUMNS))
    if "patch" in rows:
        tables.append(("Maximum patch size s (supplement)", rows["patch"],
                       [("s", "s"), ("min_gain", "Δc_τ", ".0f"), ("capped", "patches cut at s"),
                        ("accuracy", "accuracy %"),
                        ("outlier_auroc", "outlier AUROC %"),
                        ("traced_mib_mean", "peak traced MiB", ".1f"), ("rss_mib_mean", "peak RSS Δ MiB", ".1f"),
                        ("seconds", "fit s (CPU s)"), ("n_iter_mean", "patches", ".0f")]))
    if "design" in rows:
        tables.append(("Our departures from the paper", rows["design"],
                       [("configuration", "FastProp")] + METRIC_COLUMNS))
    if "predictor" in rows:
        tables.append(("Local predictor (Table 2's columns)", rows["predictor"],
                       [("confidence", "confidence"), ("predictor", "local predictor")] + METRIC_COLUMNS))
    notes = (
        "Means ± sample std over seeds. FNR: share of outliers among ConfNet's positives (the top-η "
        "multi-view confident unlabelled vertices); TNR: share of outliers among its negatives (the "
        "bottom η); Num: positives per task. Peak traced MiB: tracemalloc peak of a second, traced fit "
        "(NumPy and Python allocations; Numba's internal allocations are not seen). Peak RSS Δ: resident "
        "set sampled every 2 ms during the timed fit, minus its value at the start (allocator reuse can "
        "hide allocations). Seconds exclude the graph; a configuration that repeats another (e.g. the "
        "default) is fitted once and reported in each table. With patches cut at s skipped (Sec. 3.2: not "
        "viable), Δc_τ=500 and s <= 500 admit no patch at all (patches = 0): every prediction then comes from "
        "the local predictor on the whole graph, with no multi-view confidence to reject outliers by; with "
        "them processed (process_capped_patches=True, the supplement's extraction algorithm) every s works."
    )
    meta = {"setting": f"{args.data}; {args.classes} classes per task, noise {args.noise:g}, "
                       f"{100 * args.label_ratio:g}% labels, K={args.neighbors}, seeds 0..{args.seeds - 1}",
            "threads": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}}
    text = write_tables(f"ablation_{name}", tables, meta, title=f"FastProp ablations: {name}", notes=notes)
    print(text)


if __name__ == "__main__":
    main()
