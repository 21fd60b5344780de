"""FastProp on a busy machine: quiet vs busy, default vs one Numba thread, against global SGC.

    python bench/contention.py                  # 2 competing processes; synthetic 10k, 100k; real sets
    python bench/contention.py --busy 1 --sizes 10000 1000000 --repeats 2

For each problem the graph is built once (all cores), Numba is warmed up,
then the same ``FastProp(random_state=0).fit(X, y, graph=G)`` and
``SGC().fit(X, y, graph=G)`` are timed on a quiet machine and with
``--busy`` CPU-bound competing processes (``python -c "while True: pass"``,
started and stopped here), each with the default Numba thread count and
with one thread, alternating, ``--repeats`` times; each figure is the median.
Problems: the synthetic mixture of ``bench/scale.py`` (128 dims, 20 classes,
50% outliers, 1% of the in-class samples as seeds) at ``--sizes``, and the
real sets of ``shared/data`` whole (all classes, 1% of the samples as
seeds, at least 2 per class where the set has them). Every fit of a problem
must give the same result, bit for bit, quiet or busy, on any thread count:
the bench stops if not. ``shared %`` is the share of patch batches that
FastProp ran shared among the threads (:mod:`fastprop.sharing`).
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_npz, log, write_tables  # noqa: E402

REAL_SETS = {"Banking77": "banking77_minilm.npz", "HWU64": "hwu64_minilm.npz", "MNIST": "mnist_test.npz"}


def synthetic(n_samples):
    from fastprop.evaluation.datasets import make_noisy_mixture

    X, y = make_noisy_mixture(n_samples=n_samples, n_classes=20, n_features=128, outlier_fraction=0.5,
                              random_state=0)
    rng = np.random.default_rng(0)
    in_class = np.flatnonzero(y >= 0)
    labels = np.full(n_samples, -1)
    seeds = rng.choice(in_class, size=max(100, round(0.01 * in_class.size)), replace=False)
    labels[seeds] = y[seeds]
    return X, labels


def real(file_name):
    arrays = load_npz(file_name)
    if arrays is None:
        return None
    X, y = arrays["X"], arrays["y"]
    rng = np.random.default_rng(0)
    labels = np.full(y.size, -1)
    seeds = list(rng.choice(y.size, size=round(0.01 * y.size), replace=False))
    for label in np.unique(y):  # every class seeded twice at least
        members = np.flatnonzero(y == label)
        seeds += list(rng.choice(members, size=min(2, members.size), replace=False))
    seeds = np.unique(seeds)
    labels[seeds] = y[seeds]
    return X.astype(np.float32), labels


class CompetingProcesses:
    """``n`` CPU-bound Python processes for the length of a ``with`` block."""

    def __init__(self, n):
        self.n = n
        self.processes = []

    def __enter__(self):
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        time.sleep(0.5)  # let them get going
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()


def batch_counts():
    """Patch batches FastProp has run shared and alone in this process so far, or None.

    Code from before :mod:`fastprop.sharing` (to measure it with this bench)
    has no such counts: the shares are then left empty.
    """
    import fastprop.scheduler as scheduler

    sharing = getattr(scheduler, "BATCH_SHARING", None)
    if sharing is None:
        return None
    choosers = list(sharing.by_size.values())
    return sum(c.n_shared for c in choosers), sum(c.n_alone for c in choosers)


def measure(X, labels, graph, repeats, n_busy, default_threads):
    """Median fit and SGC seconds per (condition, threads); checks every fit gives the same result."""
    import numba

    from fastprop import FastProp
    from fastprop.baselines import SGC

    seconds = {}
    reference = None
    for condition in ("quiet", "busy"):
        with CompetingProcesses(n_busy if condition == "busy" else 0):
            for _ in range(repeats):
                for threads in (default_threads, 1):
                    numba.set_num_threads(threads)
                    before = batch_counts()
                    clock = time.perf_counter()
                    model = FastProp(random_state=0).fit(X, labels, graph=graph)
                    fit_seconds = time.perf_counter() - clock
                    after = batch_counts()
                    clock = time.perf_counter()
                    SGC().fit(X, labels, graph=graph)
                    sgc_seconds = time.perf_counter() - clock
                    numba.set_num_threads(default_threads)
                    entry = seconds.setdefault((condition, threads), {"fit": [], "sgc": [], "shared": []})
                    entry["fit"].append(fit_seconds)
                    entry["sgc"].append(sgc_seconds)
                    if after is not None:
                        shared, alone = after[0] - before[0], after[1] - before[1]
                        entry["shared"].append(shared / max(shared + alone, 1))
                    outcome = (model.transduction_, model.confidence_, model.label_distributions_)
                    if reference is None:
                        reference = outcome
                    elif not all(np.array_equal(a, b) for a, b in zip(reference, outcome)):
                        raise SystemExit(f"{condition}, {threads} thread(s): the result differs from the first fit")
    return {key: {name: statistics.median(values) if values else None for name, values in entry.items()}
            for key, entry in seconds.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=2, help="competing CPU-bound processes (default: 2)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000],
                        help="synthetic mixture sizes (default: 10000 100000)")
    parser.add_argument("--real", nargs="*", default=list(REAL_SETS), choices=list(REAL_SETS),
                        help="real sets from shared/data (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="contention", help="results file name under bench/results/")
    args = parser.parse_args()

    import numba

    from fastprop import FastProp, build_knn_graph

    default_threads = numba.get_num_threads()
    X, labels = synthetic(2000)
    FastProp(random_state=0).fit(X, labels)  # Numba warm-up, not timed
    problems = [(f"synthetic {n:,}", lambda n=n: synthetic(n)) for n in args.sizes]
    problems += [(name, lambda name=name: real(REAL_SETS[name])) for name in args.real]
    rows = []
    for name, make in problems:
        data = make()
        if data is None:
            log(f"{name}: not in shared/data, skipped")
            continue
        X, labels = data
        graph = build_knn_graph(X, 30, random_state=0, n_jobs=-1)
        log(f"{name}: {X.shape[0]:,} x {X.shape[1]}, {int((labels >= 0).sum())} seeds")
        medians = measure(X, labels, graph, args.repeats, args.busy, default_threads)
        quiet, busy = medians[("quiet", default_threads)], medians[("busy", default_threads)]
        quiet_one, busy_one = medians[("quiet", 1)], medians[("busy", 1)]
        row = {
            "problem": name,
            "n": X.shape[0],
            "quiet_s": quiet["fit"],
            "quiet_1_s": quiet_one["fit"],
            "busy_s": busy["fit"],
            "busy_1_s": busy_one["fit"],
            "busy_over_quiet": busy["fit"] / quiet["fit"],
            "threads_busy": busy["fit"] / busy_one["fit"],
            "threads_quiet": quiet["fit"] / quiet_one["fit"],
            "sgc_quiet_s": quiet["sgc"],
            "sgc_busy_s": busy["sgc"],
            "over_sgc_quiet": quiet["fit"] / quiet["sgc"],
            "over_sgc_busy": busy["fit"] / busy["sgc"],
            "shared_quiet": None if quiet["shared"] is None else 100 * quiet["shared"],
            "shared_busy": None if busy["shared"] is None else 100 * busy["shared"],
        }
        rows.append(row)
        log(" ".join(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
                     for key, value in row.items()))
    columns = [
        "problem", ("n", "N", ","),
        ("quiet_s", "quiet s", ".2f"), ("busy_s", "busy s", ".2f"),
        ("busy_over_quiet", "busy / quiet", ".2f"),
        ("quiet_1_s", "quiet 1 thread s", ".2f"), ("busy_1_s", "busy 1 thread s", ".2f"),
        ("threads_quiet", f"{default_threads} / 1 threads quiet", ".2f"),
        ("threads_busy", f"{default_threads} / 1 threads busy", ".2f"),
        ("sgc_quiet_s", "SGC quiet s", ".2f"), ("sgc_busy_s", "SGC busy s", ".2f"),
        ("over_sgc_quiet", "/ SGC quiet", ".1f"), ("over_sgc_busy", "/ SGC busy", ".1f"),
        ("shared_quiet", "shared % quiet", ".0f"), ("shared_busy", "shared % busy", ".0f"),
    ]
    meta = {"competing processes": args.busy, "repeats (median)": args.repeats,
            "numba threads (default)": default_threads}
    print(write_tables(args.name, [("FastProp fit, quiet vs busy", rows, columns)], meta,
                       title="FastProp under CPU contention"))


if __name__ == "__main__":
    main()
