"""Benchmark the kNN graph: exact vs hnsw build time, recall@k, and the auto crossover.

Usage::

    python bench/graph.py                      # full run: ~12 min on 2 idle cores, ~20 loaded
    python bench/graph.py --sizes 10000 100000 # the synthetic sizes of the main table
    python bench/graph.py --quick              # small smoke run (writes graph_quick.*)
    python bench/graph.py --no-grid --hnsw 32,100,64 --output graph_crossover
                                               # crossover only, with an extra hnsw setting

Three parts, all written to ``bench/results/graph.md`` and ``graph.json``:

1. **Grid.** For each dataset (synthetic clustered at each ``--sizes``, d=128,
   and Banking77 MiniLM when present): exact search (the reference) and hnsw
   over a small (M, ef_construction, ef) grid, always including the current
   defaults of :func:`fastprop.knn_search`. Time is split into ``knn_search``
   and the CSR symmetrisation (``knn_graph_from_lists``); recall@k is the
   fraction of the exact neighbour ids that hnsw also returns; speedup is
   exact total / hnsw total, measured in the same run.
2. **Recommendation.** The hnsw setting with recall >= 0.98 on every dataset
   at the lowest time (geometric mean over datasets of its knn_search CPU
   time relative to the current defaults; see :func:`recommend`).
3. **Crossover.** ``knn_search`` time of exact vs hnsw (current defaults, and
   the recommendation when it differs) at several N and d, to place
   ``fastprop.graph.EXACT_SEARCH_MAX_SAMPLES``: the N above which hnsw is
   faster while keeping recall >= 0.95.

Timings are best of 3 up to N=10k, of 2 up to 20k, a single run above. The
machine may be shared, so compare the ratios, which come from the same run,
and read wall time next to process CPU time (all threads), which is much less
sensitive to other processes.
hnsw runs multi-threaded (``n_jobs=None``: all cores) with ``random_state=0``.
"""

import argparse
import inspect
import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import clustered_sphere, load_npz, log, timed, timed_cpu, write_tables  # noqa: E402

import fastprop.graph as fg  # noqa: E402

N_NEIGHBORS = 30
BANKING = "banking77_minilm.npz"
RECALL_TARGET = 0.98  # for the recommended hnsw defaults
CROSSOVER_RECALL = 0.95  # hnsw must reach this to count as "faster" in the crossover
SMALL = 10_000  # timed best of 3 up to this size, best of 2 up to MEDIUM, once above
MEDIUM = 20_000

FULL_GRID = list(itertools.product((8, 16, 32), (100, 200), (64, 128)))
# 100k: each build costs ~10x the 10k one; keep the settings that can reach 0.98.
LARGE_GRID = [(16, 100, 64), (16, 100, 128), (16, 200, 64), (32, 100, 64)]
LARGE_N = 50_000  # datasets above this size use LARGE_GRID
QUICK_GRID = [(8, 100, 64), (16, 100, 64), (16, 200, 128)]


def current_defaults(n_neighbors):
    """(M, ef_construction, ef) that ``knn_search`` uses when given none."""
    params = inspect.signature(fg.knn_search).parameters
    ef = params["ef"].default
    ef = max(2 * n_neighbors, 64) if ef is None else ef  # mirrors knn_search's rule
    return params["M"].default, params["ef_construction"].default, ef


def repeats_for(n_samples, quick):
    if quick:
        return 1
    return 3 if n_samples <= SMALL else 2 if n_samples <= MEDIUM else 1


def recall_at_k(exact, approx):
    """Mean over rows of |exact_i ∩ approx_i| / k (neighbour ids only)."""
    n_samples = exact.shape[0]
    offsets = np.arange(n_samples, dtype=np.int64)[:, None] * n_samples
    return float(np.isin(approx + offsets, exact + offsets).sum() / exact.size)


def warmup():
    """Compile the Numba kernels and load hnswlib outside any timed region."""
    X = np.random.default_rng(0).normal(size=(64, 8))
    fg.build_knn_graph(X, 5, method="exact")
    fg.build_knn_graph(X, 5, method="hnsw", random_state=0)


def search_and_graph(X, method, params, repeat, seed=0):
    """Time knn_search and knn_graph_from_lists; return (row, indices)."""
    options = {} if method == "exact" else dict(zip(("M", "ef_construction", "ef"), params))
    if method == "hnsw":
        options["random_state"] = seed
    t_search, cpu_search, (indices, sims) = timed_cpu(
        lambda: fg.knn_search(X, N_NEIGHBORS, method=method, **options), repeat
    )
    t_csr, graph = timed(lambda: fg.knn_graph_from_lists(indices, sims), repeat)
    row = {
        "method": method,
        "search_s": t_search,
        "search_cpu_s": cpu_search,
        "csr_s": t_csr,
        "total_s": t_search + t_csr,
        "edges_per_node": graph.nnz / X.shape[0],
    }
    if method == "hnsw":
        row.update(M=params[0], ef_construction=params[1], ef=params[2])
    return row, indices


# -------------------------------------------------------------------- grid


def run_grid(name, X, grid, defaults, quick):
    n_samples, n_features = X.shape
    repeat = repeats_for(n_samples, quick)
    base = {"dataset": name, "n": n_samples, "d": n_features}
    log(f"{name}: exact, {n_samples} x {n_features} (best of {repeat})")
    exact_row, exact_idx = search_and_graph(X, "exact", None, repeat)
    exact_row.update(base, recall=1.0, speedup=1.0, speedup_cpu=1.0)
    log(f"  exact search {exact_row['search_s']:.2f}s + csr {exact_row['csr_s']:.3f}s")
    rows = [exact_row]
    settings = list(dict.fromkeys([defaults, *grid]))
    for params in settings:
        row, idx = search_and_graph(X, "hnsw", params, repeat)
        row.update(base)
        row["recall"] = recall_at_k(exact_idx, idx)
        row["speedup"] = exact_row["total_s"] / row["total_s"]
        row["speedup_cpu"] = exact_row["search_cpu_s"] / row["search_cpu_s"]
        row["default"] = "yes" if params == defaults else ""
        rows.append(row)
        log(
            f"  hnsw M={params[0]} efc={params[1]} ef={params[2]}: search {row['search_s']:.2f}s "
            f"(cpu {row['search_cpu_s']:.2f}s) + csr {row['csr_s']:.3f}s, "
            f"recall {row['recall']:.4f}, exact/hnsw x{row['speedup']:.2f} (cpu x{row['speedup_cpu']:.2f})"
        )
    return rows


def _geomean(values):
    return float(np.exp(np.mean(np.log(values)))) if values else math.nan


def recommend(rows, defaults, target=RECALL_TARGET):
    """Cheapest hnsw setting with recall >= target on every dataset it was run on.

    Cost is the geometric mean over datasets of knn_search CPU time relative
    to the current defaults on the same dataset (so big and small datasets
    weigh alike). CPU time, because on a shared machine wall time of the
    2-thread hnsw build swings by 2x from run to run; all hnsw settings run
    with the same threads, so their CPU times compare fairly. The wall-time
    ratio is reported next to it.
    Settings not run on every dataset are ranked only if they were run on the
    largest one, and the summary says on which datasets each was measured.
    """
    hnsw = [r for r in rows if r["method"] == "hnsw"]
    datasets = list(dict.fromkeys(r["dataset"] for r in hnsw))
    reference = {
        r["dataset"]: r for r in hnsw if (r["M"], r["ef_construction"], r["ef"]) == defaults
    }
    largest = max(datasets, key=lambda d: next(r["n"] for r in hnsw if r["dataset"] == d))
    summary = []
    for key in dict.fromkeys((r["M"], r["ef_construction"], r["ef"]) for r in hnsw):
        mine = [r for r in hnsw if (r["M"], r["ef_construction"], r["ef"]) == key]
        seen = {r["dataset"] for r in mine}
        rel = [r["search_cpu_s"] / reference[r["dataset"]]["search_cpu_s"]
               for r in mine if r["dataset"] in reference]
        rel_wall = [r["total_s"] / reference[r["dataset"]]["total_s"]
                    for r in mine if r["dataset"] in reference]
        summary.append(
            {
                "M": key[0],
                "ef_construction": key[1],
                "ef": key[2],
                "min_recall": min(r["recall"] for r in mine),
                "relative_time": _geomean(rel),
                "relative_wall": _geomean(rel_wall),
                "datasets": len(seen),
                "on_largest": "yes" if largest in seen else "",
                "default": "yes" if key == defaults else "",
            }
        )
    summary.sort(key=lambda s: s["relative_time"])
    eligible = [s for s in summary if s["min_recall"] >= target and s["on_largest"]]
    best = eligible[0] if eligible else None
    return summary, best


# --------------------------------------------------------------- crossover


def crossover_datasets(sizes, dims, banking):
    for d in dims:
        for n in sizes:
            yield f"clustered d={d}", n, (lambda n=n, d=d: clustered_sphere(n, d, seed=1))
    if banking is not None:
        order = np.random.default_rng(0).permutation(len(banking))
        for n in [s for s in sizes if s < len(banking)] + [len(banking)]:
            yield "banking77", n, (lambda n=n: banking[order[:n]])


def run_crossover(datasets, configs, quick):
    """knn_search wall and CPU time, exact vs each hnsw config, in interleaved rounds.

    Each round times exact then every hnsw config once, so all methods sample
    the same background load; each keeps its best round.
    """
    rows = []
    for name, n, make in datasets:
        X = make()
        repeat = repeats_for(n, quick)
        runs = {"exact": {"method": "exact"}}
        for label, params in configs:
            runs[label] = dict(zip(("M", "ef_construction", "ef"), params),
                               method="hnsw", random_state=0)
        best = {label: [math.inf, math.inf, None] for label in runs}
        for _ in range(repeat):
            for label, options in runs.items():
                wall, cpu, (idx, _) = timed_cpu(lambda: fg.knn_search(X, N_NEIGHBORS, **options))
                best[label] = [min(best[label][0], wall), min(best[label][1], cpu), idx]
        exact_wall, exact_cpu, exact_idx = best["exact"]
        row = {"dataset": name, "n": n, "d": X.shape[1], "repeat": repeat,
               "exact_s": exact_wall, "exact_cpu_s": exact_cpu}
        message = f"crossover {name} n={n}: exact {exact_wall:.2f}s (cpu {exact_cpu:.2f}s)"
        for label, _ in configs:
            wall, cpu, idx = best[label]
            row[f"{label}_s"] = wall
            row[f"{label}_ratio"] = exact_wall / wall
            row[f"{label}_cpu_ratio"] = exact_cpu / cpu
            row[f"{label}_recall"] = recall_at_k(exact_idx, idx)
            message += (f", {label} {wall:.2f}s (x{exact_wall / wall:.2f}, cpu x{exact_cpu / cpu:.2f}, "
                        f"recall {row[f'{label}_recall']:.4f})")
        log(message)
        rows.append(row)
    return rows


def crossover_points(rows, configs):
    """Per dataset family, hnsw setting and clock: where exact/hnsw crosses 1.

    hnsw counts as winning at a size when it is faster and its recall@k is at
    least ``CROSSOVER_RECALL``. The crossover is the first size from which hnsw
    wins at every larger size; between the two bracketing sizes it is
    interpolated linearly in log(ratio) vs log(N).
    """
    out = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = sorted((r for r in rows if r["dataset"] == name), key=lambda r: r["n"])
        for (label, params), clock in itertools.product(configs, ("wall", "CPU")):
            key = f"{label}_ratio" if clock == "wall" else f"{label}_cpu_ratio"
            wins = [r[key] > 1 and r[f"{label}_recall"] >= CROSSOVER_RECALL for r in mine]
            first = next((i for i in range(len(mine)) if all(wins[i:])), None)
            if first is None:
                where, estimate = f"hnsw never wins up to N={mine[-1]['n']}", None
            elif first == 0:
                where, estimate = f"hnsw already wins at N={mine[0]['n']}", mine[0]["n"]
            else:
                lo, hi = mine[first - 1], mine[first]
                r_lo, r_hi = math.log(lo[key]), math.log(hi[key])
                if r_lo < 0 < r_hi:
                    t = -r_lo / (r_hi - r_lo)
                    estimate = int(round(lo["n"] * (hi["n"] / lo["n"]) ** t))
                else:  # lost at lo on recall, not on time
                    estimate = hi["n"]
                where = f"between N={lo['n']} and N={hi['n']} (~{estimate})"
            out.append(
                {
                    "dataset": name,
                    "hnsw": f"{label} M={params[0]} efc={params[1]} ef={params[2]}",
                    "clock": clock,
                    "crossover": where,
                    "estimate": estimate,
                    "min_recall": min(r[f"{label}_recall"] for r in mine),
                }
            )
    return out


# -------------------------------------------------------------------- main

GRID_COLUMNS = [
    ("dataset", "dataset"),
    ("n", "N", "d"),
    ("d", "d", "d"),
    ("method", "method"),
    ("M", "M", "d"),
    ("ef_construction", "ef_c", "d"),
    ("ef", "ef", "d"),
    ("default", "default"),
    ("search_s", "knn_search s", ".2f"),
    ("search_cpu_s", "knn_search CPU s", ".2f"),
    ("csr_s", "CSR s", ".3f"),
    ("total_s", "total s", ".2f"),
    ("speedup", "exact/hnsw (total wall)", ".2f"),
    ("speedup_cpu", "exact/hnsw (search CPU)", ".2f"),
    ("recall", "recall@30", ".4f"),
    ("edges_per_node", "edges/node", ".1f"),
]
SUMMARY_COLUMNS = [
    ("M", "M", "d"),
    ("ef_construction", "ef_c", "d"),
    ("ef", "ef", "d"),
    ("default", "default"),
    ("min_recall", "min recall@30", ".4f"),
    ("relative_time", "CPU time / default (geo. mean)", ".2f"),
    ("relative_wall", "wall time / default (geo. mean)", ".2f"),
    ("datasets", "datasets", "d"),
    ("on_largest", "run on largest"),
]


def crossover_columns(configs):
    columns = [("dataset", "dataset"), ("n", "N", "d"), ("d", "d", "d"), ("repeat", "runs", "d"),
               ("exact_s", "exact s", ".2f"), ("exact_cpu_s", "exact CPU s", ".2f")]
    for label, _ in configs:
        columns += [
            (f"{label}_s", f"{label} s", ".2f"),
            (f"{label}_ratio", f"exact/{label} (wall)", ".2f"),
            (f"{label}_cpu_ratio", f"exact/{label} (CPU)", ".2f"),
            (f"{label}_recall", f"{label} recall@30", ".4f"),
        ]
    return columns


def run_grid_part(args, sizes, defaults, banking, tables, notes):
    """Parts 1 and 2: fill ``tables`` and ``notes``; return the recommended (M, efc, ef)."""
    quick = args.quick
    grid_rows = []
    for n in sizes:
        X = clustered_sphere(n, 128, seed=0)
        grid = QUICK_GRID if quick else (LARGE_GRID if n > LARGE_N else FULL_GRID)
        grid_rows += run_grid(f"clustered {n // 1000}k", X, grid, defaults, quick)
    if banking is not None:
        X = banking[np.random.default_rng(0).permutation(len(banking))[:2000]] if quick else banking
        grid_rows += run_grid("banking77", X, QUICK_GRID if quick else FULL_GRID, defaults, quick)

    summary, best = recommend(grid_rows, defaults)
    best_params = (best["M"], best["ef_construction"], best["ef"]) if best else None
    tables += [
        ("Exact vs hnsw: build time and recall@30 (k=30)", grid_rows, GRID_COLUMNS),
        (f"hnsw settings ranked by time (recall target {RECALL_TARGET})", summary, SUMMARY_COLUMNS),
    ]
    if best:
        notes.append(
            f"**Recommended hnsw setting:** M={best['M']}, ef_construction={best['ef_construction']}, "
            f"ef={best['ef']}: min recall@30 {best['min_recall']:.4f} over {best['datasets']} "
            f"datasets, {best['relative_time']:.2f}x the CPU time ({best['relative_wall']:.2f}x the wall "
            f"time) of the current defaults {defaults}."
        )
    else:
        notes.append(f"No hnsw setting reached recall@30 >= {RECALL_TARGET} on every dataset.")
    return best_params


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="synthetic sizes of the grid table (default: 10000 100000)")
    parser.add_argument("--crossover-sizes", type=int, nargs="+", default=None,
                        help="N for the crossover (default: 5000 10000 20000 40000 60000)")
    parser.add_argument("--crossover-dims", type=int, nargs="+", default=[384, 128])
    parser.add_argument("--no-crossover", action="store_true", help="skip the crossover part")
    parser.add_argument("--no-grid", action="store_true",
                        help="skip the grid and the recommendation (crossover only)")
    parser.add_argument("--hnsw", metavar="M,EFC,EF", action="append", default=[],
                        type=lambda text: tuple(int(v) for v in text.split(",")),
                        help="extra hnsw setting for the crossover (repeatable)")
    parser.add_argument("--output", default=None,
                        help="result name under bench/results (default: graph, or graph_quick)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, 3-point grid, single runs; writes graph_quick.*")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    quick = args.quick
    sizes = args.sizes or ([2000, 5000] if quick else [10_000, 100_000])
    cross_sizes = args.crossover_sizes or (
        [2000, 5000] if quick else [5000, 10_000, 20_000, 40_000, 60_000]
    )
    defaults = current_defaults(N_NEIGHBORS)
    log(f"hnsw defaults (M, ef_construction, ef) = {defaults}; "
        f"EXACT_SEARCH_MAX_SAMPLES = {fg.EXACT_SEARCH_MAX_SAMPLES}")
    warmup()

    tables, notes, best_params = [], [], None
    data = load_npz(BANKING)
    banking = None
    if data is None:
        print(f"NOTE: {BANKING} not found under shared/data; skipping the Banking77 rows.", flush=True)
    else:
        banking = np.ascontiguousarray(data["X"], dtype=np.float32)
    if not args.no_grid:
        best_params = run_grid_part(args, sizes, defaults, banking, tables, notes)

    if not args.no_crossover:
        configs = [("default", defaults)]
        if best_params and best_params != defaults:
            configs.append(("recommended", best_params))
        for params in args.hnsw:
            if params not in [c for _, c in configs]:
                configs.append((f"M{params[0]}_efc{params[1]}_ef{params[2]}", params))
        cross_rows = run_crossover(crossover_datasets(cross_sizes, args.crossover_dims, banking),
                                   configs, quick)
        points = crossover_points(cross_rows, configs)
        tables += [
            ("Crossover: knn_search time, exact vs hnsw", cross_rows, crossover_columns(configs)),
            (f"Where hnsw becomes faster at recall@30 >= {CROSSOVER_RECALL}", points,
             [("dataset", "dataset"), ("hnsw", "hnsw"), ("clock", "clock"), ("crossover", "crossover"),
              ("min_recall", "min recall@30", ".4f")]),
        ]

    meta = {
        "n_neighbors": N_NEIGHBORS,
        "hnsw_defaults": dict(zip(("M", "ef_construction", "ef"), defaults)),
        "EXACT_SEARCH_MAX_SAMPLES": fg.EXACT_SEARCH_MAX_SAMPLES,
        "synthetic_data": "clustered_sphere: 1000 Gaussian clusters, Dirichlet(2) sizes, spread "
                          "log-uniform in [0.3, 1.5], on the unit sphere; seed 0 (grid), 1 (crossover)",
        "timing": f"best of 3 up to N={SMALL}, of 2 up to N={MEDIUM}, single run above; "
                  "hnsw n_jobs=all cores, random_state=0",
    }
    name = args.output or ("graph_quick" if quick else "graph")
    text = write_tables(name, tables, meta, title="fastprop kNN graph benchmark",
                        notes="\n\n".join(notes))
    print()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
