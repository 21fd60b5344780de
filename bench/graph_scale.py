"""hnsw settings at scale: build and query time, recall@30, and what recall does to FastProp.

    python bench/graph_scale.py                   # 200k samples, ~15 min on 2 idle cores
    python bench/graph_scale.py --n 50000 --no-exact-graph   # quicker

Results go to ``bench/results/graph_scale_<n>.{md,json}``.

At the sizes where ``method="auto"`` uses hnswlib, the graph dominates
FastProp's cost (bench/scale.py), so its settings are worth choosing with
care. For each dataset -- ``clustered_sphere`` (1000 clusters on the unit
sphere: embedding-like, low intrinsic dimension) and the ``make_noisy_mixture``
of the scale bench (20 classes + 50% outliers in 128 isotropic dimensions: a
hard case for any approximate search) -- and each (M, ef_construction, ef):

- hnswlib's build (``add_items``) and the all-points kNN query are timed
  separately, on all cores, the way ``knn_search`` runs them, twice: with
  the samples inserted and queried in their own (random) order, and in
  fastprop's spatial order (``fastprop.locality``; its k-means is timed too);
- recall@30 is measured on 2000 random samples against their exact
  neighbours;
- on the mixture, FastProp is fitted on the resulting graph (1% seeds, the
  scale bench's task) and its accuracy (outliers count, automatic threshold)
  is set against FastProp on the exact graph (``--no-exact-graph`` skips that
  reference, which costs a blocked exact search over all samples).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import clustered_sphere, log, write_tables  # noqa: E402
from scale import accuracy, make_problem  # noqa: E402

N_NEIGHBORS = 30
N_RECALL_QUERIES = 2000
DEFAULT_CONFIGS = ["32/100/64", "16/100/64", "16/64/64", "16/64/48", "24/64/48", "16/40/48"]


def exact_neighbours(X, queries, k, block=200):
    """The ``k`` most cosine-similar other samples of each query row (X has unit rows)."""
    found = np.empty((queries.size, k), dtype=np.int64)
    for start in range(0, queries.size, block):
        rows = queries[start : start + block]
        similarities = X[rows] @ X.T
        similarities[np.arange(rows.size), rows] = -np.inf
        found[start : start + rows.size] = np.argpartition(-similarities, k, axis=1)[:, :k]
    return found


def hnsw_lists(X, M, ef_construction, ef, spatial, seed=0):
    """kNN lists from fastprop's hnsw search, each step timed apart on all cores.

    With ``spatial``, samples are inserted and queried in fastprop's spatial
    order (what ``knn_search`` does), else in their own (random) order.
    Returns ``(indices, similarities, order_s, build_s, query_s)``.
    """
    from fastprop.graph import _hnsw_index, _hnsw_query
    from fastprop.locality import insertion_order, spatial_order

    rng = np.random.default_rng(seed)
    clock = time.perf_counter()
    if spatial:
        query_order = spatial_order(X, rng)
        build_order = insertion_order(query_order, rng)
    else:
        query_order = build_order = np.arange(X.shape[0])
    order_seconds = time.perf_counter() - clock
    clock = time.perf_counter()
    index = _hnsw_index(X, build_order, M=M, ef_construction=ef_construction, seed=seed, build_jobs=-1)
    build_seconds = time.perf_counter() - clock
    indices = np.empty((X.shape[0], N_NEIGHBORS), dtype=np.int32)
    similarities = np.empty((X.shape[0], N_NEIGHBORS), dtype=np.float32)
    clock = time.perf_counter()
    _hnsw_query(index, X, query_order, N_NEIGHBORS, indices, similarities, ef=ef, n_jobs=-1)
    query_seconds = time.perf_counter() - clock
    return indices, similarities, order_seconds, build_seconds, query_seconds


def fastprop_accuracy(X, truth, labels, indices, similarities):
    from fastprop import FastProp, knn_graph_from_lists

    model = FastProp(random_state=0).fit(X, labels, graph=knn_graph_from_lists(indices, similarities))
    return accuracy(model.transduction_, truth, labels >= 0)


def run_dataset(name, X, configs, problem=None, exact_graph=True):
    rng = np.random.default_rng(0)
    queries = rng.choice(X.shape[0], size=min(N_RECALL_QUERIES, X.shape[0]), replace=False)
    truth_lists = exact_neighbours(X, queries, N_NEIGHBORS)
    rows = []
    if problem is not None and exact_graph:
        from fastprop import knn_search

        clock = time.perf_counter()
        indices, similarities = knn_search(X, N_NEIGHBORS, method="exact")
        seconds = time.perf_counter() - clock
        row = {"dataset": name, "setting": "exact", "total_s": seconds, "recall": 1.0,
               "accuracy": fastprop_accuracy(X, *problem, indices, similarities)}
        log(str(row))
        rows.append(row)
    for config in configs:
        M, ef_construction, ef = (int(part) for part in config.split("/"))
        for spatial in (False, True):
            indices, similarities, order_seconds, build_seconds, query_seconds = hnsw_lists(
                X, M, ef_construction, ef, spatial)
            hits = sum(np.intersect1d(found, true).size for found, true in zip(indices[queries], truth_lists))
            row = {"dataset": name, "setting": f"hnsw {config}", "order": "spatial" if spatial else "random",
                   "order_s": order_seconds, "build_s": build_seconds, "query_s": query_seconds,
                   "total_s": order_seconds + build_seconds + query_seconds, "recall": hits / truth_lists.size}
            if problem is not None:
                row["accuracy"] = fastprop_accuracy(X, *problem, indices, similarities)
            log(str(row))
            rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="M/ef_construction/ef settings")
    parser.add_argument("--no-exact-graph", action="store_true", help="skip FastProp on the exact graph")
    args = parser.parse_args()

    from fastprop import FastProp

    small_X, _, small_labels = make_problem(2000, seed=1)
    FastProp(random_state=0).fit(small_X, small_labels)  # Numba warm-up
    rows = run_dataset(f"clustered sphere {args.n:,} x 128", clustered_sphere(args.n, 128, seed=0), args.configs)
    X, truth, labels = make_problem(args.n)
    rows += run_dataset(f"noisy mixture {args.n:,} x 128", X, args.configs, problem=(truth, labels),
                        exact_graph=not args.no_exact_graph)
    columns = [
        ("dataset", "data", ""), ("setting", "M / ef_construction / ef", ""),
        ("order", "insertion and query order", ""), ("order_s", "ordering s", ".1f"), ("build_s", "build s", ".1f"),
        ("query_s", "query s", ".1f"), ("total_s", "total s", ".1f"), ("recall", "recall@30", ".4f"),
        ("accuracy", "FastProp accuracy", ".4f"),
    ]
    report = write_tables(
        f"graph_scale_{args.n}", [("hnsw settings at scale", rows, columns)],
        meta={"n_neighbors": N_NEIGHBORS, "recall_queries": N_RECALL_QUERIES},
        title="hnsw settings at scale",
        notes="Build and query run on all cores; `exact` is the blocked exact search (its total is the "
              "whole search). Order `random`: the samples' own order (the data sets are shuffled); `spatial`: "
              "fastprop's (a random tenth first, then k-means cluster by cluster; queries cluster by cluster), "
              "which `knn_search` uses. FastProp accuracy counts outliers (automatic threshold), as in "
              "bench/scale.py.",
    )
    print(report)


if __name__ == "__main__":
    main()
