"""New points: accuracy against the transductive fit, and speed at 100k fitted samples.

    python bench/predict.py                       # both parts
    python bench/predict.py --part accuracy --seeds 0 1 2
    python bench/predict.py --part accuracy --data Banking77 HWU64 --classes 50
    python bench/predict.py --part speed --n-fitted 100000 --n-new 20000

**Accuracy** (``--data``: Banking77 and HWU64, which carry their original
train/test ``split``, and MNIST, split 70 / 30 at random with seed 0, digits
5-9 the outliers as in Table 1): a task is drawn from the train split with
the paper's protocol (``--classes`` classes of a sentence set, 30 / 32 by
default; MNIST's digits 0-4; 1% seeds, ``--noise`` outliers among the unlabeled,
validation set for the threshold, ``"auto"`` with ``--no-validation``); the test split adds points of the same
classes and, in the same ratio, outliers of the other classes. *Inductive*:
fit on the train task, ``predict`` / ``predict_confidence`` the test points.
*Transductive*: fit on the train task and the test points together (unlabeled),
read ``transduction_`` / ``confidence_`` of the test points. Same seeds, same
validation, same threshold rule. Scores on the test points: accuracy with
rejection, in-class accuracy, outlier AUROC; mean ± std over ``--seeds``.

**Speed**: the synthetic mixture of ``bench/scale.py`` (128 dims, 20 classes,
50% outliers) at ``--n-fitted`` samples; after the fit, one warm-up predict
(it builds the hnswlib index above 30k samples; timed separately), then
``predict`` of ``--n-new`` new points of the same mixture, best of
``--repeats``. Reference in the same run: hnswlib's own ``knn_query`` of
the same points on the same index (the search alone), so the ratio is what
labelling adds to finding the neighbours.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_npz, log, timed, write_tables  # noqa: E402

#: name: (file, classes a task draws, whether digits 5-9 are the outliers as in Table 1's MNIST)
SETS = {"Banking77": ("banking77_minilm.npz", 30, False), "HWU64": ("hwu64_minilm.npz", 32, False),
        "MNIST": ("mnist_test.npz", 5, True)}
#: MNIST's file has no train/test split: this share of it, drawn with seed 0, is the train split.
MNIST_TRAIN_SHARE = 0.7


def train_test_split_of(arrays):
    """The file's own ``split``, or a seeded random one (MNIST: :data:`MNIST_TRAIN_SHARE` train)."""
    if "split" in arrays:
        return arrays["split"]
    train = np.random.default_rng(0).random(arrays["y"].size) < MNIST_TRAIN_SHARE
    return np.where(train, "train", "test")


def test_points(y, split, classes, noise, rng):
    """Test-split points of ``classes`` plus outliers of the other classes, ``noise`` of the total."""
    test = np.flatnonzero(split == "test")
    chosen = np.isin(y[test], classes)
    in_class = test[chosen]
    others = test[~chosen]
    n_outliers = min(others.size, round(noise / (1 - noise) * in_class.size)) if noise > 0 else 0
    outliers = rng.choice(others, size=n_outliers, replace=False)
    points = np.concatenate([in_class, outliers])
    truth = np.concatenate([np.searchsorted(classes, y[in_class]), np.full(n_outliers, -1)])
    return points, truth


def scores(predicted, distributions, confidence, truth):
    """Accuracy with rejection of ``predicted``; in-class accuracy of the argmax (no rejection); AUROC."""
    from fastprop.evaluation.protocol import outlier_auroc

    in_class = truth >= 0
    return {
        "accuracy": float(np.mean(predicted == truth)),
        "in_class": float(np.mean(distributions.argmax(axis=1)[in_class] == truth[in_class])),
        "auroc": outlier_auroc(confidence, truth) if (~in_class).any() else float("nan"),
    }


def accuracy_runs(args):
    from fastprop import FastProp
    from fastprop.evaluation.protocol import make_noisy_task

    rows = []
    for name in args.data:
        file_name, n_classes, digit_outliers = SETS[name]
        arrays = load_npz(file_name)
        if arrays is None:
            log(f"{name}: {file_name} absent, skipped")
            continue
        X, y, split = arrays["X"], arrays["y"], train_test_split_of(arrays)
        if digit_outliers:
            y = np.where(y >= 5, -1, y)
        elif args.classes is not None:
            n_classes = args.classes
        train = np.flatnonzero(split == "train")
        for noise in args.noise:
            runs = {"inductive": [], "transductive": []}
            for seed in args.seeds:
                task = make_noisy_task(y[train], n_classes, label_ratio=0.01, noise_ratio=noise, random_state=seed)
                X_task = X[train][task.indices]
                points, truth = test_points(y, split, task.classes, noise, np.random.default_rng(seed))
                validation = None if args.no_validation else task.validation
                model = FastProp(random_state=seed).fit(X_task, task.y, validation=validation)
                runs["inductive"].append(scores(model.predict(X[points]), model.predict_proba(X[points]),
                                                model.predict_confidence(X[points]), truth))
                both = FastProp(random_state=seed).fit(
                    np.vstack([X_task, X[points]]), np.r_[task.y, np.full(points.size, -1)], validation=validation)
                tail = slice(X_task.shape[0], None)
                runs["transductive"].append(scores(both.transduction_[tail], both.label_distributions_[tail],
                                                   both.confidence_[tail], truth))
                log(f"{name} noise {noise} seed {seed}: inductive {runs['inductive'][-1]}, "
                    f"transductive {runs['transductive'][-1]}")
            row = {"data": name, "noise": noise, "n_test": int(points.size)}
            for metric in ("accuracy", "in_class", "auroc"):
                for mode, results in runs.items():
                    values = np.array([100 * r[metric] for r in results])
                    row[f"{mode}_{metric}"] = f"{values.mean():.2f} ± {values.std():.2f}"
                differences = np.array([100 * (a[metric] - b[metric])
                                        for a, b in zip(runs["inductive"], runs["transductive"])])
                row[f"diff_{metric}"] = f"{differences.mean():+.2f} ± {differences.std():.2f}"
            rows.append(row)
    columns = ["data", "noise", "n_test"]
    for metric in ("accuracy", "in_class", "auroc"):
        columns += [(f"inductive_{metric}", f"predict {metric}"), (f"transductive_{metric}", f"fit {metric}"),
                    (f"diff_{metric}", f"Δ {metric}")]
    return rows, columns


def speed_run(args):
    from fastprop import FastProp
    from fastprop.evaluation.datasets import make_noisy_mixture

    n_total = args.n_fitted + args.n_new
    X, y = make_noisy_mixture(n_samples=n_total, n_classes=20, n_features=128, outlier_fraction=0.5, random_state=0)
    rng = np.random.default_rng(0)
    order = rng.permutation(n_total)
    fitted, new = order[: args.n_fitted], order[args.n_fitted :]
    labels = np.full(args.n_fitted, -1)
    in_class = np.flatnonzero(y[fitted] >= 0)
    seeds = rng.choice(in_class, size=max(100, round(0.01 * in_class.size)), replace=False)
    labels[seeds] = y[fitted][seeds]
    X_fit, X_new = np.ascontiguousarray(X[fitted]), np.ascontiguousarray(X[new])
    model = FastProp(random_state=0)
    fit_seconds, _ = timed(lambda: model.fit(X_fit, labels))
    log(f"fit {args.n_fitted:,}: {fit_seconds:.1f} s")
    first_seconds, _ = timed(lambda: model.predict(X_new[:10]))
    log(f"first predict (builds the search index when there is one): {first_seconds:.1f} s")
    predict_seconds, predicted = timed(lambda: model.predict(X_new), repeat=args.repeats)
    index = model.predictor_.index
    k = model.predictor_.n_neighbors
    if index is not None:
        index.set_ef(max(2 * k, 64))
        search_seconds, _ = timed(lambda: index.knn_query(X_new, k=k), repeat=args.repeats)
    else:
        search_seconds = float("nan")
    truth = y[new]
    accuracy = float(np.mean(predicted == truth))
    row = {
        "n_fitted": args.n_fitted, "n_new": args.n_new, "fit_s": fit_seconds, "first_predict_s": first_seconds,
        "predict_s": predict_seconds, "points_per_s": args.n_new / predict_seconds,
        "search_s": search_seconds, "predict_over_search": predict_seconds / search_seconds,
        "accuracy_new": accuracy, "accuracy_fitted": float(np.mean(model.transduction_ == y[fitted])),
        "held_mb": model.predictor_.nbytes / 2**20, "embeddings_mb": X_fit.nbytes / 2**20,
        "graph_mb": (model.graph_.data.nbytes + model.graph_.indices.nbytes + model.graph_.indptr.nbytes) / 2**20,
    }
    columns = [("n_fitted", "fitted", ","), ("n_new", "new points", ","), ("fit_s", "fit s", ".1f"),
               ("first_predict_s", "first predict s (index build)", ".1f"), ("predict_s", "predict s", ".2f"),
               ("points_per_s", "points / s", ",.0f"), ("search_s", "hnswlib knn_query s", ".2f"),
               ("predict_over_search", "predict / search", ".2f"), ("accuracy_new", "accuracy new", ".3f"),
               ("accuracy_fitted", "accuracy fitted", ".3f"), ("held_mb", "held for predict MB", ".0f"),
               ("embeddings_mb", "fitted X MB (referenced)", ".0f"), ("graph_mb", "graph_ MB (not needed)", ".0f")]
    return [row], columns


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["accuracy", "speed", "both"], default="both")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.3, 0.5])
    parser.add_argument("--data", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--classes", type=int, help="classes a sentence-set task draws (default 30 / 32)")
    parser.add_argument("--no-validation", action="store_true",
                        help="fit without the validation set: the threshold is 'auto' (accuracy part)")
    parser.add_argument("--n-fitted", type=int, default=100_000)
    parser.add_argument("--n-new", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="predict")
    args = parser.parse_args()
    import fastprop

    log(f"warm-up {fastprop.warmup():.1f} s")
    tables = []
    if args.part in ("accuracy", "both"):
        rows, columns = accuracy_runs(args)
        tables.append(("New points vs the same points in the fit (percent; Δ = predict - fit, per seed)",
                       rows, columns))
    if args.part in ("speed", "both"):
        rows, columns = speed_run(args)
        tables.append(("Speed of predict after the fit (2 cores)", rows, columns))
    print(write_tables(args.name, tables, {"seeds": args.seeds, "noise": args.noise},
                       title="bench/predict.py: labelling new points"))


if __name__ == "__main__":
    main()
