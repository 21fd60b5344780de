"""Issue #16's levers that were tried on the way and did not become FastProp's default.

Usage (from the repository root)::

    OPENBLAS_NUM_THREADS=1 python bench/levers_tried.py

Same protocol and tasks as ``bench/levers.py`` (validation threshold, 1% seeds,
seeds 0..4, 10/30/50% outliers). Every lever is a *confidence*: the labels are
FastProp's (``labels="graph"``) for every row, so only the outlier ranking and
the threshold chosen on it differ. FastProp's first pass is the default with
``provisional_classes=False``; "provisional" is the default.

- ``sgc max-prob``: the global predictor's largest probability (what the SGC
  baseline reports; FastProp's local predictor is that SGC).
- ``reach``: how much of a walk from a vertex reaches a seed,
  ``h = s + 0.9 P h`` with ``P`` the random walk and ``s`` the seeds' indicator;
  ``first pass + reach``: the mean of the two ranks.
- ``pseudo-classes, fixed count``: as many provisional seeds as seeds, farthest-first
  in SGC space among all dense unlabeled vertices (no first threshold), the
  largest known-class probability.
- ``PU linear``: a logistic regression seeds vs unlabeled on the SGC rows
  (balanced), mean of its rank and the SGC max-prob rank.
- ``ConfNet + known-class descriptors``: the provisional known-class probability
  and share as two more ConfNet inputs, instead of averaging them in.
- ``known-class only``: the provisional known-class probability alone, not its
  mean with the first pass.
- ``two rounds``: provisional classes placed again from what the provisional
  confidence rejects.
- ``select on validation``: first pass or provisional, whichever scores better
  on the validation set.
- ``k-means provisional classes``: the provisional seeds start a spherical
  k-means of the identified samples' SGC rows (10 rounds); every member is a
  training row of its cluster's class, each class weighing as much as one seed.
- ``competition in patches``: the provisional seeds as seeds of extra classes in
  a second full propagation; the largest known-class mean of the views.

Writes ``bench/results/levers_tried.md`` and ``.json``.
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import log, write_table  # noqa: E402
from levers import DATA_SETS, load  # noqa: E402

from fastprop import FastProp, build_knn_graph  # noqa: E402
from fastprop.adjacency import RandomWalk  # noqa: E402
from fastprop.confnet import confnet_confidence, structural_features  # noqa: E402
from fastprop.feature_rows import FeatureRows  # noqa: E402
from fastprop.linear import fit_logistic_regression, fit_softmax_regression, softmax_proba  # noqa: E402
from fastprop.column_scores import known_class_confidence  # noqa: E402
from fastprop.novelty import farthest_first, provisional_class_confidence  # noqa: E402
from fastprop.evaluation.protocol import evaluate, make_noisy_task  # noqa: E402
from fastprop.rows import inverse_norms  # noqa: E402
from fastprop.threshold import accuracy_with_rejection, choose_threshold  # noqa: E402

DEPTH, L2 = 2, 3e-5  # FastProp's local predictor


def ranks(values):
    return (rankdata(values) - 1) / max(len(values) - 1, 1)


def seed_reach(graph, labeled, alpha=0.9, steps=40):
    walk = sp.diags(1 / (np.asarray(graph.sum(axis=1)).ravel() + 1)) @ (graph + sp.identity(graph.shape[0]))
    reach = labeled.astype(np.float64)
    for _ in range(steps):
        reach = labeled + alpha * (walk @ reach)
    return reach


def validation_threshold(confidence, predicted, task):
    indices, truth = task.validation
    return max(choose_threshold(confidence[indices], predicted[indices], truth), 0.0)


def validation_accuracy(confidence, predicted, task):
    indices, truth = task.validation
    threshold = validation_threshold(confidence, predicted, task)
    return accuracy_with_rejection(confidence[indices], predicted[indices], truth, threshold)


def mean_with(first, other, labeled):
    combined = 0.5 * (first + other)
    combined[labeled] = 1.0
    return combined


class Task:
    """One task's graph, first pass and the pieces every lever reads."""

    def __init__(self, X, task, seed):
        self.task, self.seed = task, seed
        self.X = task.subset(X)
        self.graph = build_knn_graph(self.X, min(30, task.n_samples - 1), random_state=seed)
        self.y = np.asarray(task.y)
        self.labeled = self.y >= 0
        self.n_classes = int(self.y.max()) + 1
        self.walk = RandomWalk(self.graph)
        self.scale = inverse_norms(self.X)
        self.first = FastProp(random_state=seed, provisional_classes=False, confidence="both").fit(  # the paper's
            self.X, self.y, graph=self.graph, validation=task.validation)
        self.default = FastProp(random_state=seed).fit(self.X, self.y, graph=self.graph, validation=task.validation)
        self.distributions = self.first.label_distributions_
        self.predicted = self.distributions.argmax(axis=1)
        self.smoothed = self.walk.smooth(self.X, None, DEPTH, row_scale=self.scale)

    def rejected(self, confidence):
        threshold = validation_threshold(confidence, self.predicted, self.task)
        return np.flatnonzero((confidence < threshold) & ~self.labeled)

    def known(self, identified):
        confidence, _ = provisional_class_confidence(
            self.feature_rows(), self.y, self.n_classes, identified, depth=DEPTH, l2=L2,
            rng=np.random.default_rng(self.seed))
        return np.ones(self.y.size) if confidence is None else confidence

    def feature_rows(self):
        """A fresh FeatureRows of the task's features: it keeps no level until asked for many rows."""
        return FeatureRows(self.walk, self.X, self.scale)

    def sgc_max(self):
        seeds = np.flatnonzero(self.labeled)
        coef, intercept = fit_softmax_regression(self.smoothed[seeds], np.eye(self.n_classes)[self.y[seeds]], l2=L2)
        return softmax_proba(self.smoothed, coef, intercept).max(axis=1)


def kmeans_known(t, seeds, identified, rounds=10):
    """Known-class probability with k-means clusters of ``identified`` as provisional classes."""
    count = int(t.default.n_provisional_classes_)
    if count == 0 or identified.size == 0:
        return np.ones(t.y.size)
    rows = t.walk.smooth(t.X, np.concatenate([seeds, identified]), DEPTH, row_scale=t.scale)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    centres = unit[seeds.size:][farthest_first(unit[: seeds.size], unit[seeds.size:], count)]
    for _ in range(rounds):
        cluster = (unit[seeds.size:] @ centres.T).argmax(axis=1)
        for j in range(count):
            members = unit[seeds.size:][cluster == j]
            if members.size:
                centres[j] = members.sum(axis=0) / np.linalg.norm(members.sum(axis=0))
    weight = np.concatenate([np.ones(seeds.size), 1.0 / np.bincount(cluster, minlength=count)[cluster]])
    targets = np.eye(t.n_classes + count)[np.concatenate([t.y[seeds], t.n_classes + cluster])]
    coef, intercept = fit_softmax_regression(rows, targets, l2=L2, sample_weight=weight)
    return known_class_confidence(t.feature_rows(), coef, intercept, t.n_classes, DEPTH)


def levers(t):
    """Name -> confidence of every lever on task ``t``."""
    first, labeled = t.first.confidence_, t.labeled
    sgc = t.sgc_max()
    reach = seed_reach(t.graph, labeled.astype(np.float64))
    known = t.known(t.rejected(first))
    provisional = t.default.confidence_
    out = {"first pass (paper's confidence)": first, "provisional (default)": provisional, "sgc max-prob": sgc,
           "reach": reach, "first pass + reach": 0.5 * (ranks(first) + ranks(reach))}

    seeds = np.flatnonzero(labeled)
    degree = np.asarray(t.graph.sum(axis=1)).ravel()
    dense = np.flatnonzero(~labeled & (degree >= np.median(degree)))
    unit = t.smoothed / np.linalg.norm(t.smoothed, axis=1, keepdims=True)
    pseudo = dense[farthest_first(unit[seeds], unit[dense], min(seeds.size, dense.size))]
    rows = np.concatenate([seeds, pseudo])
    targets = np.concatenate([t.y[seeds], t.n_classes + np.arange(pseudo.size)])
    coef, intercept = fit_softmax_regression(t.smoothed[rows], np.eye(t.n_classes + pseudo.size)[targets], l2=L2)
    out["pseudo-classes, fixed count"] = known_class_confidence(t.feature_rows(), coef, intercept, t.n_classes, DEPTH)

    spread = t.smoothed.std(axis=0)
    spread[spread == 0] = 1
    weight = np.where(labeled, 0.5 / labeled.sum(), 0.5 / (~labeled).sum())
    coef, intercept = fit_logistic_regression(t.smoothed / spread, labeled.astype(np.float64), l2=1e-2,
                                              sample_weight=weight)
    out["PU linear"] = 0.5 * (ranks((t.smoothed / spread) @ coef + intercept) + ranks(sgc))

    descriptors = structural_features(t.walk, t.first.label_distributions_, t.first.view_count_)
    inputs = np.column_stack([descriptors, known])
    confnet = confnet_confidence(t.walk, inputs, t.first.multiview_confidence_, np.flatnonzero(~labeled),
                                 eta=0.05, depth=1, l2=1e-3, tie_rank=np.random.default_rng(t.seed).permutation(
                                     labeled.size))
    out["ConfNet + known-class descriptor"] = mean_with(t.first.multiview_confidence_, confnet, labeled)
    out["known-class only"] = np.where(labeled, 1.0, known)
    out["two rounds"] = mean_with(first, t.known(t.rejected(provisional)), labeled)
    better = validation_accuracy(provisional, t.predicted, t.task) > validation_accuracy(first, t.predicted, t.task)
    out["select on validation"] = provisional if better else first

    out["k-means provisional classes"] = mean_with(first, kmeans_known(t, seeds, t.rejected(first)), labeled)

    identified = t.rejected(first)
    y_extended = t.y.copy()
    if identified.size:
        rows = t.walk.smooth(t.X, np.concatenate([seeds, identified]), DEPTH, row_scale=t.scale)
        unit_rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        count = int(t.default.n_provisional_classes_)
        chosen = identified[farthest_first(unit_rows[: seeds.size], unit_rows[seeds.size:], count)]
        y_extended[chosen] = t.n_classes + np.arange(count)
    views = FastProp(random_state=t.seed, provisional_classes=False, labels="views", outlier_threshold=None).fit(
        t.X, y_extended, graph=t.graph).label_distributions_
    out["competition in patches"] = mean_with(first, views[:, : t.n_classes].max(axis=1), labeled)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    parser.add_argument("--data", nargs="+", choices=list(DATA_SETS), default=list(DATA_SETS))
    args = parser.parse_args(argv)
    rows = []
    for name in args.data:
        pool = load(name)
        if pool is None:
            continue
        X, y, n_classes = pool
        for noise in args.noise:
            scores = {}
            for seed in range(args.seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    task = make_noisy_task(y, n_classes, label_ratio=0.01, noise_ratio=noise, random_state=seed)
                t = Task(X, task, seed)
                for lever, confidence in levers(t).items():
                    result = evaluate(task, t.distributions, confidence)
                    scores.setdefault(lever, []).append((result["accuracy"], result["outlier_auroc"]))
            for lever, values in scores.items():
                values = 100 * np.array(values)
                rows.append({"data": name, "noise": noise, "lever": lever,
                             "accuracy": f"{values[:, 0].mean():.2f} ± {values[:, 0].std(ddof=1):.2f}",
                             "auroc": f"{values[:, 1].mean():.2f} ± {values[:, 1].std(ddof=1):.2f}"})
                log(" | ".join(map(str, rows[-1].values())))
    columns = [("data", "data", None), ("noise", "outliers", "g"), ("lever", "confidence", None),
               ("accuracy", "accuracy %", None), ("auroc", "AUROC %", None)]
    print(write_table("levers_tried", rows, columns, {"protocol": "1% seeds, seeds 0..4, validation threshold"},
                      title="Levers of issue #16 that were tried and dropped"))


if __name__ == "__main__":
    main()
