"""Compare FastProp with the baselines under the noisy protocol (Yang et al., Table 1).

For each noise ratio and seed, :func:`run_table` draws one task with
:func:`fastprop.evaluation.protocol.make_noisy_task`, builds **one** kNN graph for it,
shared by every method (its build time is reported on a ``"graph"`` row of its
own), fits each method on ``task.subset(X)``, and scores it with
:func:`fastprop.evaluation.protocol.evaluate`: the same outlier threshold rule, chosen on
the validation set, for every method. :func:`format_markdown` lays the result
out as the paper's Table 1.

Only NumPy and SciPy are needed; the optional scikit-learn reference row
(:data:`SKLEARN_REFERENCE`) imports scikit-learn when it is asked for.
"""

import gc
import math
import numbers
import time

import numpy as np

from ..baselines import (
    GCN,
    SGC,
    CorrectAndSmooth,
    GAT,
    FastGCN,
    GraphSAGE,
    LabelPropagation,
    LabelSpreading,
    PoissonLearning,
)
from ..confnet import refine_confidence
from ..estimator import FastProp
from ..graph import build_knn_graph
from .._validation import check_features, check_integer
from .datasets import load_embeddings, make_noisy_mixture
from .protocol import NoisyTask, calibration_error, evaluate, make_noisy_task

__all__ = [
    "METHOD_NAMES",
    "SKLEARN_REFERENCE",
    "CONFNET_SUFFIX",
    "GRAPH_ROW",
    "make_method",
    "run_method",
    "run_table",
    "format_markdown",
    "load_benchmark_data",
    "sklearn_available",
    "warmup",
]

METHOD_NAMES = ("FastProp", "LabelPropagation", "LabelSpreading", "SGC", "GCN", "CorrectAndSmooth", "GAT",
                "GraphSAGE", "FastGCN", "PoissonLearning")
SKLEARN_REFERENCE = "sklearn_label_spreading"
"""``sklearn.semi_supervised.LabelSpreading(kernel="knn", n_neighbors=30)``, other
parameters at scikit-learn's defaults (``alpha=0.2``, ``max_iter=30``). It builds
its own graph (unweighted, Euclidean kNN, not symmetrised), so its seconds
include the graph and it does not use the shared one."""
CONFNET_SUFFIX = " + ConfNet"
"""A method name ending so (e.g. ``"SGC + ConfNet"``) is that method followed by
:func:`fastprop.confnet.refine_confidence` (the paper's Fig. 6); its seconds include it."""
GRAPH_ROW = "graph"
"""``method`` of the pseudo-row that reports the shared graph's build time."""

_METRICS = ("accuracy", "in_class_accuracy", "outlier_auroc", "calibration_error", "best_threshold_accuracy",
            "seconds", "cpu_seconds", "n_iter")
#: The metrics :func:`format_markdown` lays out, and those of them where less is better.
_TABLE_METRICS = _METRICS[:5]
_LOWER_IS_BETTER = ("calibration_error",)
_SEEDED = {"FastProp": FastProp, "GCN": GCN, "GAT": GAT, "GraphSAGE": GraphSAGE, "FastGCN": FastGCN}
_UNSEEDED = {
    "LabelPropagation": LabelPropagation,
    "LabelSpreading": LabelSpreading,
    "SGC": SGC,
    "CorrectAndSmooth": CorrectAndSmooth,
    "PoissonLearning": PoissonLearning,
}


def sklearn_available():
    """Whether scikit-learn can be imported (for the :data:`SKLEARN_REFERENCE` row)."""
    try:
        import sklearn.semi_supervised  # noqa: F401
    except ImportError:
        return False
    return True


def make_method(name, random_state, **params):
    """Return an unfitted estimator ``name`` with default parameters.

    Parameters
    ----------
    name : str
        One of :data:`METHOD_NAMES`, or :data:`SKLEARN_REFERENCE`.
    random_state : None, int or numpy.random.Generator
        Passed to the methods that take one (FastProp, GCN); ignored otherwise.
    **params
        Parameters that override the defaults, e.g. ``confidence="multiview"``.

    Returns
    -------
    estimator
    """
    if not isinstance(name, str):
        raise ValueError(f"method name must be a string, got {name!r}.")
    if name.endswith(CONFNET_SUFFIX) and name[: -len(CONFNET_SUFFIX)] != SKLEARN_REFERENCE:
        name = name[: -len(CONFNET_SUFFIX)]
    if name in _SEEDED or name in _UNSEEDED:
        method = _SEEDED.get(name, _UNSEEDED.get(name))
        _check_parameters(name, method, params)
        return method(random_state=random_state, **params) if name in _SEEDED else method(**params)
    if name == SKLEARN_REFERENCE:
        from sklearn.semi_supervised import LabelSpreading as SklearnLabelSpreading

        _check_parameters(name, SklearnLabelSpreading, params)
        return SklearnLabelSpreading(**{"kernel": "knn", "n_neighbors": 30, **params})
    allowed = ", ".join(repr(n) for n in METHOD_NAMES)
    raise ValueError(f"method name={name!r} is unknown; allowed: {allowed}, each optionally followed by "
                     f"{CONFNET_SUFFIX!r}, and {SKLEARN_REFERENCE!r}.")


def _check_parameters(name, method, params):
    """A ValueError naming the first of ``params`` that ``method`` does not take, and the ones it does."""
    known = method().get_params()
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"{name} has no parameter {unknown[0]!r}; its parameters: {', '.join(sorted(known))}.")


def _check_fitted(name, fitted, task):
    """A ValueError unless ``fitted`` is run_method's result (with its model) for the method ``name`` refines, on
    ``task``."""
    if not isinstance(name, str) or not name.endswith(CONFNET_SUFFIX):
        raise ValueError(f"fitted is for a {CONFNET_SUFFIX.strip()!r} name, which refines a fit; {name!r} is none.")
    base = name[: -len(CONFNET_SUFFIX)]
    keys = {"model", "seconds", "cpu_seconds", "method", "truth"}
    if not (isinstance(fitted, dict) and keys <= set(fitted)) or fitted["method"] != base:
        got = fitted.get("method", "no method") if isinstance(fitted, dict) else type(fitted).__name__
        raise ValueError(
            f"fitted must be what run_method({base!r}, ..., return_model=True) returned, for {name!r} to refine; "
            f"got {got!r}."
        )
    rows = np.shape(getattr(fitted["model"], "label_distributions_", None))
    truth = np.asarray(task.truth)[task.evaluation]
    if rows[:1] != (task.n_samples,) or not np.array_equal(np.asarray(fitted["truth"]), truth):
        raise ValueError(f"fitted is a {base} fit of another task; refine a fit of this one.")


def run_method(name, X, task, graph, random_state, *, params=None, return_model=False, fitted=None):
    """Fit method ``name`` on one task and score it.

    Parameters
    ----------
    name : str
        See :func:`make_method`.
    X : array_like of shape (task.n_pool, n_features)
        Features of the whole pool; the method sees ``task.subset(X)``.
    task : NoisyTask
    graph : sparse matrix of shape (task.n_samples, task.n_samples)
        The shared affinity graph of ``task.subset(X)`` (ignored by
        :data:`SKLEARN_REFERENCE`, which builds its own).
    random_state : None, int or numpy.random.Generator
    params : dict, optional
        Overrides of the method's defaults.
    return_model : bool, default=False
        Also return the fitted estimator, as ``"model"``.
    fitted : dict, optional
        For a ``" + ConfNet"`` name: the result (with ``"model"``) of the
        method it refines on the same task; its model is refined instead of
        fitted again, and its seconds are added to the refinement's.

    Returns
    -------
    dict
        :func:`fastprop.evaluation.protocol.evaluate`'s keys, plus ``"method"``,
        ``"calibration_error"`` (:func:`~fastprop.evaluation.protocol.calibration_error`
        of the confidence as the probability that the argmax is right, on the
        evaluation samples; NaN for a confidence outside [0, 1]),
        ``"seconds"`` (wall-clock time of ``fit`` alone), ``"cpu_seconds"``
        (process CPU time of ``fit``, summed over threads: steadier than wall
        time on a loaded machine), ``"n_iter"`` (or None), and arrays over the evaluation samples, for plots:
        ``"confidence"``, ``"predicted"`` (task class, argmax) and ``"truth"``
        (task class, -1 for an outlier). FastProp also gets
        ``validation=task.validation`` and returns its ``"timings"``.
    """
    if not isinstance(task, NoisyTask):
        raise ValueError(f"task must be a NoisyTask (from make_noisy_task), got {type(task).__name__}.")
    if fitted is not None:
        _check_fitted(name, fitted, task)
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"params must be a dict of parameter values, got {params!r}.")
    if params is not None and "random_state" in params:
        raise ValueError("params must not hold 'random_state': pass it as run_method's random_state.")
    gc.collect()
    if fitted is not None:
        model = fitted["model"]
        start = time.perf_counter() - fitted["seconds"]
        cpu_start = time.process_time() - fitted["cpu_seconds"]
    else:
        model = make_method(name, random_state, **(params or {}))
        features = task.subset(X)
        start, cpu_start = time.perf_counter(), time.process_time()
        if isinstance(model, FastProp):
            model.fit(features, task.y, graph=graph, validation=task.validation)
        elif name == SKLEARN_REFERENCE:
            model.fit(features, task.y)
        else:
            model.fit(features, task.y, graph=graph)
    distributions = np.asarray(model.label_distributions_, dtype=np.float64)
    confidence = getattr(model, "confidence_", None)
    if confidence is None:
        confidence = distributions.max(axis=1)
    if name.endswith(CONFNET_SUFFIX):
        confidence = refine_confidence(graph, distributions, confidence, labeled=task.y >= 0,
                                       random_state=random_state)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    result = evaluate(task, distributions, confidence)
    evaluation = task.evaluation
    scores = np.asarray(confidence, dtype=np.float64)[evaluation]
    right = distributions.argmax(axis=1)[evaluation] == np.asarray(task.truth)[evaluation]
    probabilities = bool(np.all((scores >= 0) & (scores <= 1)))  # a score outside [0, 1] is no probability
    result["calibration_error"] = calibration_error(scores, right) if probabilities else math.nan
    result.update(
        method=name,
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        n_iter=getattr(model, "n_iter_", None),
        confidence=np.asarray(confidence, dtype=np.float64)[evaluation],
        predicted=distributions.argmax(axis=1)[evaluation],
        truth=np.asarray(task.truth)[evaluation],
    )
    if isinstance(model, FastProp):
        result["timings"] = dict(model.timings_)
    if return_model:
        result["model"] = model
    return result


def warmup():
    """Compile the Numba kernels and touch every code path on a tiny problem, untimed."""
    X, y_pool = make_noisy_mixture(300, 4, n_features=16, random_state=0)
    task = make_noisy_task(y_pool, 3, label_ratio=0.05, noise_ratio=0.1, random_state=0)
    graph = build_knn_graph(task.subset(X), 10, method="exact")
    for name in (*METHOD_NAMES, "SGC" + CONFNET_SUFFIX):
        run_method(name, X, task, graph, 0)


def _mean(values):
    values = np.asarray(values, dtype=np.float64)
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else math.nan


def _std(values):
    """Sample standard deviation (ddof=1) of the non-NaN values; 0 for one value."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        return math.nan
    return float(finite.std(ddof=1)) if finite.size > 1 else 0.0


def _summary(method, noise_ratio, runs):
    row = {"method": method, "noise_ratio": float(noise_ratio), "n_seeds": len(runs)}
    for metric in _METRICS:
        values = [run.get(metric) for run in runs]
        values = [math.nan if value is None else value for value in values]
        row[f"{metric}_mean"] = _mean(values)
        row[f"{metric}_std"] = _std(values)
    row["accuracy_runs"] = [float(run.get("accuracy", math.nan)) for run in runs]
    return row


def run_table(
    X,
    y_pool,
    n_classes,
    *,
    noise_ratios=(0.0, 0.1, 0.3, 0.5),
    n_seeds=5,
    methods=METHOD_NAMES,
    label_ratio=0.01,
    n_neighbors=30,
    progress=None,
    warm_up=True,
):
    """Run every method on ``n_seeds`` tasks per noise ratio and summarise.

    Task ``s`` (``s = 0 .. n_seeds-1``) of each noise ratio is
    ``make_noisy_task(y_pool, n_classes, label_ratio=label_ratio,
    noise_ratio=r, random_state=s)``; every method fitted on it gets
    ``random_state=s`` and the same graph ``build_knn_graph(task.subset(X),
    n_neighbors, random_state=s)`` (exact search up to 30,000 samples).

    Parameters
    ----------
    X : array_like of shape (n_pool, n_features)
    y_pool : array_like of shape (n_pool,)
        Class ids, -1 for samples of no class (see ``make_noisy_task``).
    n_classes : int
        Classes per task.
    noise_ratios : sequence of float
    n_seeds : int
    methods : sequence of str
        Names accepted by :func:`make_method`. A ``" + ConfNet"`` name listed
        after its method refines that method's fit (no second fit).
    label_ratio : float
    n_neighbors : int
        K of the shared graph (clamped to ``n_samples - 1``).
    progress : callable, optional
        Called as ``progress(done, total, message)`` after each graph and each fit.
    warm_up : bool, default=True
        Call :func:`warmup` first, so that no timing includes compilation.

    Returns
    -------
    list of dict
        One row per noise ratio and method, in the order of ``noise_ratios``
        then ``methods``, each followed by a :data:`GRAPH_ROW` row (whose
        metric means are NaN): ``method``, ``noise_ratio``, ``n_seeds``,
        ``<m>_mean`` and ``<m>_std`` for ``m`` in accuracy,
        in_class_accuracy, outlier_auroc, calibration_error,
        best_threshold_accuracy, seconds, cpu_seconds and n_iter
        (NaN runs are left out
        of a mean; std is the sample std, 0 for one seed), and
        ``accuracy_runs``, the per-seed accuracies.
    """
    if isinstance(methods, str) or isinstance(noise_ratios, (str, numbers.Real)):
        raise ValueError("methods and noise_ratios must be sequences, e.g. methods=('SGC',), noise_ratios=(0.3,).")
    methods, noise_ratios = tuple(methods), tuple(noise_ratios)  # a generator is read once
    if not methods or not noise_ratios:
        raise ValueError("methods and noise_ratios must each hold at least one value.")
    n_seeds = check_integer("n_seeds", n_seeds, low=1)
    if progress is not None and not callable(progress):
        raise ValueError(f"progress must be a function progress(done, total, message) or None, got {progress!r}.")
    for what, values in (("methods", methods), ("noise_ratios", noise_ratios)):
        if len(set(values)) != len(values):
            raise ValueError(f"{what} has a value twice ({list(values)!r}); each row would mix both runs.")
    for name in methods:
        make_method(name, 0)  # unknown names fail before any work
    if warm_up:
        warmup()
    total = len(noise_ratios) * n_seeds * (len(methods) + 1)
    done = 0
    rows = []
    for noise_ratio in noise_ratios:
        runs = {name: [] for name in (*methods, GRAPH_ROW)}
        for seed in range(n_seeds):
            task = make_noisy_task(
                y_pool, n_classes, label_ratio=label_ratio, noise_ratio=noise_ratio, random_state=seed
            )
            features = task.subset(X)
            start, cpu_start = time.perf_counter(), time.process_time()
            graph = build_knn_graph(features, min(n_neighbors, task.n_samples - 1), random_state=seed)
            runs[GRAPH_ROW].append({"seconds": time.perf_counter() - start,
                                    "cpu_seconds": time.process_time() - cpu_start})
            done += 1
            if progress is not None:
                progress(done, total, f"noise {noise_ratio:g} seed {seed}: graph of {task.n_samples} samples")
            models = {}  # fitted models that a " + ConfNet" row refines
            for name in methods:
                base = name[: -len(CONFNET_SUFFIX)] if name.endswith(CONFNET_SUFFIX) else None
                result = run_method(name, X, task, graph, seed, fitted=models.get(base),
                                    return_model=name + CONFNET_SUFFIX in methods)
                model = result.pop("model", None)
                if model is not None:
                    models[name] = {"model": model, **{key: result[key] for key in
                                                       ("seconds", "cpu_seconds", "method", "truth")}}
                runs[name].append(result)
                done += 1
                if progress is not None:
                    progress(
                        done, total,
                        f"noise {noise_ratio:g} seed {seed}: {name} accuracy {result['accuracy']:.4f} "
                        f"in {result['seconds']:.2f}s",
                    )
        rows.extend(_summary(name, noise_ratio, runs[name]) for name in (*methods, GRAPH_ROW))
    return rows


def _percent(mean, std):
    if mean is None or math.isnan(mean):  # a NumPy float too, e.g. float32
        return "—"
    if std is None or math.isnan(std):
        return f"{100 * mean:.2f}"
    return f"{100 * mean:.2f} ± {100 * std:.2f}"


def format_markdown(rows, metric="accuracy"):
    """Lay ``rows`` of :func:`run_table` out as the paper's Table 1.

    One line per method (first-appearance order, the :data:`GRAPH_ROW` last),
    one column per noise ratio with ``mean ± std`` of ``metric`` in percent,
    the best mean of each column in bold (every method that ties it; the
    lowest for ``"calibration_error"``), and a last column with the fit
    seconds averaged over the noise ratios.

    Parameters
    ----------
    rows : list of dict
    metric : {"accuracy", "in_class_accuracy", "outlier_auroc", "calibration_error", "best_threshold_accuracy"}

    Returns
    -------
    str
        A GitHub Markdown table.
    """
    if metric not in _TABLE_METRICS:
        raise ValueError(f"metric={metric!r} is not supported; allowed: {', '.join(map(repr, _TABLE_METRICS))}.")
    rows = rows if isinstance(rows, dict) else list(rows)  # a generator is read more than once below
    if isinstance(rows, dict) or not all(isinstance(row, dict) for row in rows):
        raise ValueError("rows must be a list of dicts, as run_table returns them.")
    missing = [key for key in ("method", "noise_ratio", "seconds_mean") if any(key not in row for row in rows)]
    if missing:
        raise ValueError(f"every row needs {missing[0]!r} (rows as run_table returns them).")

    def is_number(value):
        return isinstance(value, numbers.Real) and not isinstance(value, bool)

    for row in rows:
        optional = [row.get(f"{metric}_mean"), row.get(f"{metric}_std")]
        if not (isinstance(row["method"], str) and is_number(row["noise_ratio"]) and is_number(row["seconds_mean"])
                and all(value is None or is_number(value) for value in optional)):
            raise ValueError(f"row {row['method']!r} holds a method that is no name or a value that is no number "
                             "(rows as run_table returns them).")
    noise_ratios = sorted({row["noise_ratio"] for row in rows})
    methods = list(dict.fromkeys(row["method"] for row in rows if row["method"] != GRAPH_ROW))
    has_graph = any(row["method"] == GRAPH_ROW for row in rows)
    cell = {(row["method"], row["noise_ratio"]): row for row in rows}
    best = {}
    for ratio in noise_ratios:
        means = [cell[(m, ratio)].get(f"{metric}_mean", math.nan) for m in methods if (m, ratio) in cell]
        means = [v for v in means if v is not None and not math.isnan(v)]
        best[ratio] = (min if metric in _LOWER_IS_BETTER else max)(means) if means else None

    header = ["Method", *(f"{100 * r:g}%" for r in noise_ratios), "seconds"]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for method in methods + ([GRAPH_ROW] if has_graph else []):
        cells = ["kNN graph (shared)" if method == GRAPH_ROW else method]
        for ratio in noise_ratios:
            row = cell.get((method, ratio), {})
            mean = row.get(f"{metric}_mean")
            text = _percent(mean, row.get(f"{metric}_std"))
            if method != GRAPH_ROW and best[ratio] is not None and mean == best[ratio]:
                text = f"**{text}**"
            cells.append(text)
        seconds = _mean([cell[(method, r)]["seconds_mean"] for r in noise_ratios if (method, r) in cell])
        cells.append("—" if math.isnan(seconds) else f"{seconds:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load_benchmark_data(path, *, normalise=True):
    """Load a labelled pool with :func:`fastprop.evaluation.datasets.load_embeddings`.

    Parameters
    ----------
    path : str or os.PathLike
        ``.npz`` with ``X`` and ``y``.
    normalise : bool, default=True
        L2-normalise the rows (needed for raw pixels such as MNIST; harmless
        for embeddings that already are unit length).

    Returns
    -------
    X : ndarray of shape (n_pool, n_features), float32
    y : ndarray of shape (n_pool,), int64
        As stored: -1 marks no class. A pool with no -1 (MNIST) can still
        give outliers from the classes a task does not draw; to fix which
        classes are in-class, set the others to -1 and draw all of the rest.
    """
    X, y = load_embeddings(path)
    if y is None:
        raise ValueError(f"path={str(path)!r} holds no labels 'y'; a benchmark pool needs them.")
    if normalise:
        X = check_features(X, name=f"path={str(path)!r}: X", rescale_rows=True)  # no row whose norm overflows
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    return np.ascontiguousarray(X, dtype=np.float32), y
