"""How FastProp's cost grows with N, per phase, on two cores.

    python bench/scale.py                 # N = 10k, 100k, 1M
    python bench/scale.py --max-n 100000  # quicker

Each size runs in a fresh subprocess (steps up to 100k samples: best of 3
runs), on a synthetic mixture
(``make_noisy_mixture``: 128 dims, 20 classes, 50% outliers, 1% of the
in-class samples as seeds). Phases are timed separately after a Numba
warm-up. Peak RSS is measured for the graph build and for the fit
separately (``VmHWM``, reset before each, so the data generation's own peak
does not count) and set against the issue's budget of 2 x (X + graph). The
graph of the phase table is built on all cores (``n_jobs=-1``: hnswlib's
parallel insertion, not bit-reproducible); "reproducible" columns time,
last, the graph ``FastProp(random_state=0).fit(X, y)`` builds itself (hnsw
index built on one thread) and the end-to-end total with it. The
fit is also run with 1 Numba thread to measure the parallel speed-up and
check the result is identical. References
measured in the same run: fastprop's global SGC baseline on the same graph,
and scikit-learn's ``LabelSpreading(kernel="knn")`` where N is small enough
for it to finish in a few minutes. A last pair of subprocesses measures Numba
compilation: cold (empty cache) and from the on-disk cache.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import log, write_tables  # noqa: E402

SKLEARN_MAX_N = 20_000
#: Up to this N, each timed step is the best of ``SMALL_REPEATS`` runs (a
#: one-second run is at the mercy of one scheduler hiccup); above, one run.
SMALL_MAX_N = 100_000
SMALL_REPEATS = 3
#: "graph" is the kNN build; "prepare" is FastProp's own work on the graph before
#: training (checking it, the random walk's degrees, the patch buffers).
PHASES = ("graph", "prepare", "training", "propagation", "confnet", "self_training", "threshold", "provisional")
#: What issue #6 calls propagation: everything between the graph and the threshold
#: ("provisional", the provisional classes after the first threshold, is timed apart).
PROPAGATION_PHASES = ("prepare", "training", "propagation", "confnet")


def memory_mb(field):
    """``VmRSS`` (current) or ``VmHWM`` (peak since the last reset) of this process, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def reset_peak_memory():
    """Make ``VmHWM`` restart from the current RSS (Linux >= 4.0: ``clear_refs`` 5)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def make_problem(n_samples, seed=0):
    from fastprop.evaluation.datasets import make_noisy_mixture

    X, y = make_noisy_mixture(
        n_samples=n_samples, n_classes=20, n_features=128, outlier_fraction=0.5, random_state=seed
    )
    rng = np.random.default_rng(seed)
    in_class = np.flatnonzero(y >= 0)
    seeds = rng.choice(in_class, size=max(100, int(round(0.01 * in_class.size))), replace=False)
    labels = np.full(n_samples, -1)
    labels[seeds] = y[seeds]
    return X, y, labels


def accuracy(transduction, truth, labeled):
    return float(np.mean(transduction[~labeled] == truth[~labeled]))


def worker(n_samples, with_sklearn):
    """Measure one size; print a JSON line."""
    import numba

    from fastprop import FastProp, build_knn_graph
    from fastprop.baselines import SGC

    small_X, _, small_labels = make_problem(2000, seed=1)
    FastProp(random_state=0).fit(small_X, small_labels)  # Numba warm-up, not timed
    build_knn_graph(small_X, 30, method="hnsw", n_jobs=-1)  # hnswlib's import, not timed
    del small_X, small_labels
    base_mb = memory_mb("VmRSS")
    X, truth, labels = make_problem(n_samples)
    labeled = labels >= 0

    repeats = SMALL_REPEATS if n_samples <= SMALL_MAX_N else 1
    # Peak memory is read after the first build and the first fit, before a repeat holds two at once.
    reset_peak_memory()  # the data generation's own peak is not fastprop's
    graph_seconds = np.inf
    for attempt in range(repeats):
        graph = None  # the previous repeat's graph is freed before the next is built
        clock = time.perf_counter()
        graph = build_knn_graph(X, 30, random_state=0, n_jobs=-1)  # all cores, not bit-reproducible
        graph_seconds = min(graph_seconds, time.perf_counter() - clock)
        if attempt == 0:
            graph_peak_mb = memory_mb("VmHWM")

    reset_peak_memory()
    model = None
    for attempt in range(repeats):
        fit = FastProp(random_state=0).fit(X, labels, graph=graph)
        if attempt == 0:
            fit_peak_mb = memory_mb("VmHWM")
        if model is None or sum(fit.timings_.values()) < sum(model.timings_.values()):
            model = fit
        del fit
    timings = dict(model.timings_, prepare=model.timings_["graph"], graph=graph_seconds)
    row = {
        "n": n_samples,
        "edges": int(graph.nnz),
        **{f"{phase}_s": timings[phase] for phase in PHASES},
        "total_s": sum(timings.values()),
        "propagation_phases_s": sum(timings[phase] for phase in PROPAGATION_PHASES),
        "patches": model.n_iter_,
        "patches_per_s": model.n_iter_ / timings["propagation"],
        "vertices_per_s": n_samples / timings["propagation"],
        "accuracy": accuracy(model.transduction_, truth, labeled),
    }

    numba.set_num_threads(1)
    serial = min((FastProp(random_state=0).fit(X, labels, graph=graph) for _ in range(repeats)),
                 key=lambda fit: sum(fit.timings_.values()))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    serial_phases = sum(serial.timings_["graph" if phase == "prepare" else phase] for phase in PROPAGATION_PHASES)
    row["propagation_phases_1thread_s"] = serial_phases
    row["thread_speedup"] = serial_phases / row["propagation_phases_s"]
    row["patch_loop_thread_speedup"] = serial.timings_["propagation"] / timings["propagation"]
    row["identical_1_vs_2_threads"] = bool(
        np.array_equal(serial.label_distributions_, model.label_distributions_)
        and np.array_equal(serial.confidence_, model.confidence_)
    )

    clock = time.perf_counter()
    sgc = SGC().fit(X, labels, graph=graph)
    row["sgc_s"] = time.perf_counter() - clock
    row["sgc_accuracy"] = accuracy(sgc.transduction_, truth, labeled)
    if with_sklearn:
        try:
            from sklearn.semi_supervised import LabelSpreading
        except ImportError:
            row["sklearn_s"] = None
        else:
            clock = time.perf_counter()
            LabelSpreading(kernel="knn", n_neighbors=30, max_iter=100).fit(X, labels)
            row["sklearn_s"] = time.perf_counter() - clock
    row["feature_mb"] = X.nbytes / 2**20
    row["graph_mb"] = (graph.data.nbytes + graph.indices.nbytes + graph.indptr.nbytes) / 2**20
    row["base_rss_mb"] = base_mb
    row["graph_peak_rss_mb"] = graph_peak_mb
    row["fit_peak_rss_mb"] = fit_peak_mb
    row["peak_rss_mb"] = max(graph_peak_mb, fit_peak_mb)
    row["peak_over_base_mb"] = row["peak_rss_mb"] - base_mb
    row["memory_budget_mb"] = 2 * (row["feature_mb"] + row["graph_mb"])

    # The graph FastProp(random_state=0).fit(X, y) builds itself: reproducible, so its
    # hnsw index is built on one thread (queries on all cores). Timed last, with the
    # other graph freed, so that it changes none of the measurements above.
    del graph, model, serial, sgc
    graph_seconds = np.inf
    for _ in range(repeats):
        clock = time.perf_counter()
        build_knn_graph(X, 30, random_state=0)
        graph_seconds = min(graph_seconds, time.perf_counter() - clock)
    row["graph_reproducible_s"] = graph_seconds
    row["total_reproducible_s"] = row["total_s"] - row["graph_s"] + graph_seconds
    print(json.dumps(row), flush=True)


def compile_worker():
    """Time the first FastProp fit of a process (Numba compile or cache load included)."""
    clock = time.perf_counter()
    from fastprop import FastProp

    X, _, labels = make_problem(2000, seed=1)
    import_seconds = time.perf_counter() - clock
    clock = time.perf_counter()
    FastProp(random_state=0).fit(X, labels)
    first = time.perf_counter() - clock
    clock = time.perf_counter()
    FastProp(random_state=0).fit(X, labels)
    second = time.perf_counter() - clock
    print(json.dumps({"import_s": import_seconds, "first_fit_s": first, "warm_fit_s": second}), flush=True)


def run_subprocess(args, env=None):
    result = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def log_log_slope(sizes, seconds):
    sizes, seconds = np.asarray(sizes, float), np.asarray(seconds, float)
    keep = seconds > 0
    if keep.sum() < 2:
        return None
    return float(np.polyfit(np.log(sizes[keep]), np.log(seconds[keep]), 1)[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--max-n", type=int, default=None, help="drop sizes above this")
    parser.add_argument("--name", default="scale", help="output name in bench/results (default: scale)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sklearn", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compile-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.sklearn)
    if args.compile_worker:
        return compile_worker()

    sizes = [n for n in args.sizes if args.max_n is None or n <= args.max_n]
    rows = []
    for n in sizes:
        log(f"N = {n:,}")
        row = run_subprocess(["--worker", str(n)] + (["--sklearn"] if n <= SKLEARN_MAX_N else []))
        row["sgc_ratio"] = row["sgc_s"] / (row["total_s"] - row["graph_s"])
        if row.get("sklearn_s"):
            row["sklearn_ratio"] = row["sklearn_s"] / row["total_s"]
        rows.append(row)
        log(json.dumps(row))

    with tempfile.TemporaryDirectory() as cache:
        cold = run_subprocess(["--compile-worker"], env={"NUMBA_CACHE_DIR": cache})
        cached = run_subprocess(["--compile-worker"], env={"NUMBA_CACHE_DIR": cache})
    compile_row = {
        "cold_compile_s": cold["first_fit_s"] - cold["warm_fit_s"],
        "cached_compile_s": cached["first_fit_s"] - cached["warm_fit_s"],
        "warm_fit_2k_s": cached["warm_fit_s"],
    }
    slopes = {phase: log_log_slope([r["n"] for r in rows], [r[f"{phase}_s"] for r in rows])
              for phase in (*PHASES, "propagation_phases", "total", "graph_reproducible", "total_reproducible")}

    columns = [
        ("n", "N", ",d"), ("graph_s", "graph s", ".2f"), ("prepare_s", "prepare s", ".2f"),
        ("training_s", "training s", ".2f"), ("propagation_s", "patch loop s", ".2f"),
        ("confnet_s", "ConfNet s", ".2f"), ("self_training_s", "self-training s", ".2f"),
        ("propagation_phases_s", "prepare..ConfNet s", ".2f"),
        ("threshold_s", "threshold s", ".3f"), ("total_s", "total s", ".2f"),
        ("graph_reproducible_s", "graph s, reproducible", ".2f"),
        ("total_reproducible_s", "total s, reproducible", ".2f"),
        ("patches", "patches", "d"), ("patches_per_s", "patches/s", ".0f"),
        ("vertices_per_s", "vertices/s", ",.0f"), ("thread_speedup", "2 vs 1 thread", ".2f"),
        ("patch_loop_thread_speedup", "2 vs 1 thread, patch loop", ".2f"),
        ("identical_1_vs_2_threads", "identical", ""), ("base_rss_mb", "RSS before data MB", ".0f"),
        ("graph_peak_rss_mb", "peak RSS graph MB", ".0f"), ("fit_peak_rss_mb", "peak RSS fit MB", ".0f"),
        ("memory_budget_mb", "2 (X + graph) MB", ".0f"),
        ("feature_mb", "X MB", ".0f"), ("graph_mb", "graph MB", ".0f"), ("accuracy", "accuracy", ".3f"),
        ("sgc_s", "SGC s", ".2f"), ("sgc_ratio", "SGC/FastProp (no graph)", ".2f"),
        ("sgc_accuracy", "SGC accuracy", ".3f"), ("sklearn_s", "sklearn LS s", ".2f"),
        ("sklearn_ratio", "sklearn LS/FastProp", ".2f"),
    ]
    slope_line = ", ".join(f"{phase} {value:.2f}" for phase, value in slopes.items() if value is not None)
    notes = "\n".join([
        f"Log-log slope of time vs N: {slope_line or 'n/a (one size)'}.",
        "",
        f"Numba compile: cold {compile_row['cold_compile_s']:.1f} s, from the on-disk cache "
        f"{compile_row['cached_compile_s']:.2f} s (first fit of a process minus its second, on 2k "
        f"samples; a warm 2k fit takes {compile_row['warm_fit_2k_s']:.2f} s).",
    ])
    report = write_tables(
        args.name, [("FastProp per phase", rows, columns)],
        meta={"slopes": slopes, "compile": compile_row}, title="FastProp scale", notes=notes,
    )
    print(report)


if __name__ == "__main__":
    main()
