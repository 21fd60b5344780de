"""What to annotate next: the paper's Table 4a on Banking77 and HWU64 at 50% outliers.

    python bench/active.py
    python bench/active.py --seeds 0 1 2 --noise 0.5

A task is drawn with the paper's protocol (``--classes`` classes, 1% seeds,
``--noise`` outliers among the unlabeled, a validation set for the
threshold). FastProp is fitted (*before*). Then as many samples as there are
seeds are chosen by each indicator and annotated from the truth: in-class
ones get their class (they join ``y``), outliers are passed as
``outliers=``. FastProp is fitted again with the same validation.

Indicators: ``random`` (unlabeled, non-validation samples);
``SGC entropy`` (the largest entropy of the global SGC baseline's
distributions, the paper's "GCN" column); FastProp's
``suggest_annotations`` with ``boundary`` and ``lowest`` (the paper's
"ours"); and ``boundary, outliers ignored``: the same picks, but the
annotated outliers are not given to the refit (only the in-class ones), to
see whether known outliers help.

Scores: accuracy with rejection (``transduction_`` against the truth, -1 for
outliers) and outlier AUROC of ``confidence_`` on the evaluation samples
that no indicator picked (the same samples for every row); mean ± std over
``--seeds``, and the gain over *before* per seed.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_npz, log, write_tables  # noqa: E402

SETS = {"Banking77": ("banking77_minilm.npz", 30), "HWU64": ("hwu64_minilm.npz", 32)}
INDICATORS = ["random", "SGC entropy", "boundary", "lowest", "boundary, outliers ignored"]


def picks(indicator, model, task, n, rng, X_task):
    from fastprop.baselines import SGC

    candidates = np.setdiff1d(np.flatnonzero(~task.seed_mask), task.validation[0])
    if indicator == "random":
        return rng.choice(candidates, size=n, replace=False)
    if indicator == "SGC entropy":
        distributions = SGC().fit(X_task, task.y, graph=model.graph_).label_distributions_[candidates]
        entropy = -np.sum(distributions * np.log(np.maximum(distributions, 1e-300)), axis=1)
        return candidates[np.argsort(-entropy, kind="stable")[:n]]
    return model.suggest_annotations(n, strategy=indicator.split(",")[0])  # never a validation sample


def refit(X_task, task, chosen, graph, seed, give_outliers):
    from fastprop import FastProp

    y = task.y.copy()
    in_class = chosen[task.truth[chosen] >= 0]
    y[in_class] = task.truth[in_class]
    outliers = chosen[task.truth[chosen] < 0] if give_outliers else None
    return FastProp(random_state=seed).fit(X_task, y, graph=graph, validation=task.validation, outliers=outliers)


def scores(model, task, positions):
    from fastprop.evaluation.protocol import outlier_auroc

    truth = task.truth[positions]
    return {"accuracy": 100 * float(np.mean(model.transduction_[positions] == truth)),
            "auroc": 100 * outlier_auroc(model.confidence_[positions], truth)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--name", default="active")
    args = parser.parse_args()
    import fastprop
    from fastprop import FastProp
    from fastprop.evaluation.protocol import make_noisy_task

    log(f"warm-up {fastprop.warmup():.1f} s")
    rows = []
    for name, (file_name, n_classes) in SETS.items():
        arrays = load_npz(file_name)
        if arrays is None:
            log(f"{name}: {file_name} absent, skipped")
            continue
        X, y = arrays["X"], arrays["y"]
        results = {key: [] for key in ["before"] + INDICATORS}
        outlier_share = {key: [] for key in INDICATORS}
        for seed in args.seeds:
            task = make_noisy_task(y, n_classes, label_ratio=0.01, noise_ratio=args.noise, random_state=seed)
            X_task = task.subset(X)
            before = FastProp(random_state=seed).fit(X_task, task.y, validation=task.validation)
            n = int(task.seed_mask.sum())
            rng = np.random.default_rng(seed)
            chosen = {key: picks(key, before, task, n, rng, X_task) for key in INDICATORS}
            positions = np.setdiff1d(task.evaluation, np.concatenate(list(chosen.values())))
            results["before"].append(scores(before, task, positions))
            for key in INDICATORS:
                model = refit(X_task, task, chosen[key], before.graph_, seed, give_outliers="ignored" not in key)
                results[key].append(scores(model, task, positions))
                outlier_share[key].append(100 * float(np.mean(task.truth[chosen[key]] < 0)))
            log(f"{name} seed {seed}: " + ", ".join(f"{k} {v[-1]['accuracy']:.2f}" for k, v in results.items()))
        for key, runs in results.items():
            accuracy = np.array([r["accuracy"] for r in runs])
            auroc = np.array([r["auroc"] for r in runs])
            gain = accuracy - np.array([r["accuracy"] for r in results["before"]])
            rows.append({"data": name, "indicator": key, "accuracy": f"{accuracy.mean():.2f} ± {accuracy.std():.2f}",
                         "gain": f"{gain.mean():+.2f} ± {gain.std():.2f}",
                         "auroc": f"{auroc.mean():.2f} ± {auroc.std():.2f}",
                         "outliers_picked": (f"{np.mean(outlier_share[key]):.0f}%" if key in outlier_share else "")})
    columns = ["data", "indicator", ("accuracy", "accuracy %"), ("gain", "gain over before"),
               ("auroc", "outlier AUROC %"), ("outliers_picked", "outliers among picks")]
    print(write_tables(args.name, [(f"One round of annotation ({args.noise:.0%} outliers, 1% seeds, as many "
                                    "annotations as seeds)", rows, columns)],
                       {"seeds": args.seeds, "noise": args.noise}, title="bench/active.py: what to annotate next"))


if __name__ == "__main__":
    main()
