"""Issue #16's levers: FastProp settings on every real data set, with and without a validation set.

Usage (from the repository root)::

    OPENBLAS_NUM_THREADS=1 python bench/levers.py
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --no-validation --name levers_auto
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --label-ratio 0.05 --name levers_5pct
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --own-threshold --name levers_rule
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --no-validation --all-classes --noise 0 --name levers_auto_whole
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --fit-seed-offset 1000 --name levers_draw_1000
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --sgc --variants 'default={}' 'no self-training={"pseudo_labels": 0}'
    python bench/heldout_data.py --out /tmp/heldout
    OPENBLAS_NUM_THREADS=1 python bench/levers.py --heldout /tmp/heldout --data hwu64_lsa --name levers_lsa

Each variant is a set of FastProp parameters (``--variants`` takes
``label=JSON`` pairs; the default compares the paper's confidence with the
provisional classes). Every data set of ``../shared/data`` present is used with
the protocol of ``bench/table1.py`` (Banking77 30 classes, HWU64 32, MNIST
digits 0-4 with 5-9 as outliers), the same task and graph for every variant,
seeds 0..--seeds-1 (``--all-classes``: every class of the set, MNIST's ten
digits too, so that only ``--noise 0`` is possible: no sample is an outlier).
With a validation set the threshold is chosen on it (the
paper's protocol); with ``--no-validation`` every variant uses its own
``outlier_threshold_`` (``"auto"``), and the table also reports the share of
in-class samples it rejected; with ``--own-threshold`` the validation set goes
to ``fit`` and each variant is scored at the threshold it chose from it.
Every row also gives the confidence's expected calibration error as the
probability that a sample's most probable class is right
(:func:`fastprop.evaluation.protocol.calibration_error`, evaluation samples),
and the accuracy at the threshold best for the evaluation samples, known only
in hindsight (``best threshold %``: how much of a cell the threshold's choice
cost, and how much the ranking). With ``--sgc`` each task is also fitted by
the global SGC baseline on the same graph (``fastprop.baselines.SGC``,
scored by the protocol's validation rule; with ``--no-validation`` it rejects
nothing, having no rule of its own), timed in the same run, and every row
gets its fit time as a multiple of SGC's (``x SGC``: the cost issue #17 asks
to keep in proportion).

Writes ``bench/results/<name>.md`` and ``.json``.
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED_DATA_DIR, log, write_table  # noqa: E402

from fastprop import FastProp, build_knn_graph  # noqa: E402
from fastprop.baselines import SGC  # noqa: E402
from fastprop.evaluation import benchmark as fb  # noqa: E402
from fastprop.evaluation.protocol import calibration_error, evaluate, make_noisy_task  # noqa: E402
from fastprop.threshold import accuracy_with_rejection  # noqa: E402

#: name -> (file, classes per task, digits 5-9 become outliers)
DATA_SETS = {
    "banking77": ("banking77_minilm.npz", 30, False),
    "hwu64": ("hwu64_minilm.npz", 32, False),
    "mnist": ("mnist_test.npz", 5, True),
}
#: The same for the files ``bench/heldout_data.py`` writes (``--heldout DIR``): sets never tuned on.
HELDOUT_SETS = {
    "banking77_lsa": ("banking77_lsa.npz", 30, False),
    "hwu64_lsa": ("hwu64_lsa.npz", 32, False),
    "digits": ("digits.npz", 5, True),
}
DEFAULT_VARIANTS = ('paper confidence={"provisional_classes": false}', "provisional classes (default)={}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.5])
    parser.add_argument("--label-ratio", type=float, default=0.01)
    parser.add_argument("--data", nargs="+", choices=list(DATA_SETS) + list(HELDOUT_SETS), default=list(DATA_SETS),
                        help="the shared sets, or (with --heldout) the files bench/heldout_data.py writes")
    parser.add_argument("--heldout", type=Path, metavar="DIR",
                        help="where bench/heldout_data.py wrote its files (for --data banking77_lsa hwu64_lsa digits)")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                        help="label=JSON of FastProp parameters")
    parser.add_argument("--no-validation", action="store_true", help="no validation set: the threshold is 'auto'")
    parser.add_argument("--own-threshold", action="store_true",
                        help="score at the model's own outlier_threshold_ (chosen by its validation_rule) rather "
                             "than the protocol's rule")
    parser.add_argument("--all-classes", action="store_true",
                        help="every class of each set is a task class (no outliers exist: use --noise 0)")
    parser.add_argument("--classes", type=int,
                        help="classes per task instead of each set's own (Banking77 30, HWU64 32); not with mnist, "
                             "whose split fixes digits 0-4")
    parser.add_argument("--fit-seed-offset", type=int, default=0,
                        help="FastProp's random_state is the task seed plus this (the task and graph stay the "
                             "same): results at other offsets show how much of a difference is the fit's own draw")
    parser.add_argument("--sgc", action="store_true",
                        help="also fit the global SGC baseline on each task's graph: a reference row, and every "
                             "row's fit time as a multiple of SGC's")
    parser.add_argument("--name", default="levers")
    args = parser.parse_args(argv)
    if args.all_classes and any(args.noise):
        parser.error("--all-classes leaves no sample outside the task's classes: pass --noise 0")
    if args.classes is not None and ({"mnist", "digits"} & set(args.data) or args.all_classes):
        parser.error("--classes applies to the sentence sets only: pass --data banking77 hwu64, without --all-classes")
    if set(HELDOUT_SETS) & set(args.data) and args.heldout is None:
        parser.error("--data " + " ".join(sorted(set(HELDOUT_SETS) & set(args.data))) + " needs --heldout DIR "
                     "(run python bench/heldout_data.py --out DIR first)")
    return args


def variants(texts):
    parsed = []
    for text in texts:
        label, brace, params = text.partition("={")  # labels may hold "=", the JSON starts with "{"
        parsed.append((label, json.loads(brace[1:] + params)))
    return parsed


def load(name, all_classes=False, heldout=None):
    file, n_classes, mnist_split = DATA_SETS[name] if name in DATA_SETS else HELDOUT_SETS[name]
    path = (SHARED_DATA_DIR if name in DATA_SETS else heldout) / file
    if not path.exists():
        return None
    X, y = fb.load_benchmark_data(path)
    if all_classes:
        return X, y, np.unique(y[y >= 0]).size
    if mnist_split:
        y = np.where(y >= 5, -1, y)
    return X, y, n_classes


def score(task, model, own_threshold):
    result = evaluate(task, model.label_distributions_, model.confidence_)
    evaluation, truth = task.evaluation, np.asarray(task.truth)
    predicted = model.label_distributions_.argmax(axis=1)
    if own_threshold:  # the model's own threshold, not the protocol's rule on the validation set
        result["accuracy"] = accuracy_with_rejection(
            model.confidence_[evaluation], predicted[evaluation], truth[evaluation], model.outlier_threshold_
        )
    right = predicted[evaluation] == truth[evaluation]
    result["calibration_error"] = calibration_error(model.confidence_[evaluation], right)
    in_class = evaluation[truth[evaluation] >= 0]
    result["rejected_in_class"] = float(np.mean(model.transduction_[in_class] == -1))
    return result


def sgc_reference(task, features, graph, no_validation):
    """The global SGC baseline on the task's graph: the protocol's scores, its fit seconds."""
    start = time.perf_counter()
    model = SGC().fit(features, task.y, graph=graph)
    seconds = time.perf_counter() - start
    distributions = model.label_distributions_
    predicted, confidence = distributions.argmax(axis=1), distributions.max(axis=1)
    result = evaluate(task, distributions, confidence)
    evaluation, truth = task.evaluation, np.asarray(task.truth)
    threshold = -np.inf if no_validation else result["outlier_threshold"]  # no rule of its own: it rejects nothing
    if no_validation:
        result["accuracy"] = float(np.mean(predicted[evaluation] == truth[evaluation]))
    result["calibration_error"] = calibration_error(confidence[evaluation], predicted[evaluation] == truth[evaluation])
    in_class = evaluation[truth[evaluation] >= 0]
    result["rejected_in_class"] = float(np.mean(confidence[in_class] < threshold))
    result.update(seconds=seconds, n_provisional=0)
    return result


def summary(label, name, noise, results, reference_seconds=None):
    row = {"variant": label, "data": name, "noise": noise}
    for key in ("accuracy", "best_threshold_accuracy", "in_class_accuracy", "outlier_auroc", "rejected_in_class",
                "calibration_error", "seconds"):
        values = np.array([r[key] for r in results], dtype=np.float64)
        scale = 1 if key == "seconds" else 100
        undefined = key == "outlier_auroc" and not noise  # no outliers to rank
        row[key] = "—" if undefined else f"{scale * values.mean():.2f} ± {scale * values.std(ddof=1):.2f}"
    row["provisional"] = f"{np.mean([r['n_provisional'] for r in results]):.0f}"
    if reference_seconds is not None:  # the ratio of the means, both measured in this run
        row["versus_sgc"] = f"{np.mean([r['seconds'] for r in results]) / np.mean(reference_seconds):.1f}"
    row["accuracy_runs"] = [r["accuracy"] for r in results]  # per seed, for paired differences
    row["best_threshold_runs"] = [r["best_threshold_accuracy"] for r in results]  # what each seed's threshold cost
    return row


def main(argv=None):
    args = parse_args(argv)
    chosen = variants(args.variants)
    fb.warmup()
    rows = []
    for name in args.data:
        pool = load(name, args.all_classes, args.heldout)
        if pool is None:
            log(f"{name}: not in {SHARED_DATA_DIR if name in DATA_SETS else args.heldout}, skipped")
            continue
        X, y, n_classes = pool
        n_classes = n_classes if args.classes is None else args.classes
        for noise in args.noise:
            results = {label: [] for label, _ in chosen}
            reference = []
            for seed in range(args.seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # MNIST's 50% reaches 48.9%: table1 reports it
                    task = make_noisy_task(y, n_classes, label_ratio=args.label_ratio, noise_ratio=noise,
                                           random_state=seed)
                features = task.subset(X)
                graph = build_knn_graph(features, min(30, task.n_samples - 1), random_state=seed)
                for label, params in chosen:
                    start = time.perf_counter()
                    model = FastProp(random_state=seed + args.fit_seed_offset, **params).fit(
                        features, task.y, graph=graph, validation=None if args.no_validation else task.validation
                    )
                    seconds = time.perf_counter() - start
                    result = score(task, model, args.no_validation or args.own_threshold)
                    result.update(seconds=seconds, n_provisional=model.n_provisional_classes_)
                    results[label].append(result)
                if args.sgc:
                    reference.append(sgc_reference(task, features, graph, args.no_validation))
            reference_seconds = [r["seconds"] for r in reference] if args.sgc else None
            labelled = [(label, results[label]) for label, _ in chosen] + ([("SGC (reference)", reference)]
                                                                           if args.sgc else [])
            for label, runs in labelled:
                rows.append(summary(label, name, noise, runs, reference_seconds))
                log(" | ".join(str(v) for v in rows[-1].values()))
    columns = [("data", "data", None), ("noise", "outliers", "g"), ("variant", "variant", None),
               ("accuracy", "accuracy %", None), ("best_threshold_accuracy", "best threshold %", None),
               ("in_class_accuracy", "in-class %", None),
               ("outlier_auroc", "AUROC %", None), ("rejected_in_class", "in-class rejected %", None),
               ("calibration_error", "calibration error %", None), ("provisional", "provisional classes", None),
               ("seconds", "fit s", None)] + ([("versus_sgc", "x SGC", None)] if args.sgc else [])
    rule = ("'auto' (no validation)" if args.no_validation else
            "the model's own, from the validation set" if args.own_threshold else
            "chosen on the validation set by the protocol's rule")
    classes = ("every class of each set, " if args.all_classes else
               f"{args.classes} classes a task, " if args.classes is not None else "")
    offset = f", FastProp's random_state the seed + {args.fit_seed_offset}" if args.fit_seed_offset else ""
    meta = {"protocol": f"{classes}{args.label_ratio:g} labels, seeds 0..{args.seeds - 1}, threshold {rule}{offset}"}
    print(write_table(args.name, rows, columns, meta, title=f"Levers of issue #16: {args.name}"))


if __name__ == "__main__":
    main()
