"""Figures of the command line, drawn with matplotlib's Agg canvas (the optional ``plot`` extra).

Nothing here touches pyplot or the global backend: each figure is a
``matplotlib.figure.Figure`` on its own ``FigureCanvasAgg``.
"""

from pathlib import Path

import numpy as np

from ._io import write_atomically

MAX_CLASS_BARS = 25

INSTALL_HINT = 'plots need matplotlib; enable them with: pip install "fastprop-graph[plot]"'


def available():
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def check_plot_path(path, option):
    """Fail early unless matplotlib can write ``path``'s format (from its suffix)."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        allowed = ", ".join(f".{name}" for name in sorted(formats))
        raise ValueError(
            f"{option} {path}: cannot tell the image format from the suffix {Path(path).suffix!r}; "
            f"use one of {allowed}."
        )


def _figure(width, height):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def writer(figure, path):
    """The ``(path, write)`` pair of :func:`fastprop._files.write_atomically` for ``figure``."""
    image_format = Path(path).suffix.lower().lstrip(".")
    return path, lambda stream: figure.savefig(stream, format=image_format, dpi=120)


def save(figure, path):
    """Write ``figure`` to ``path`` atomically, in the format of its suffix."""
    write_atomically([writer(figure, path)])


def confidence_figure(results, title):
    """The paper's Fig. 6: confidence of in-class samples vs outliers, one panel per method.

    Parameters
    ----------
    results : list of dict
        ``method``, ``confidence`` and ``truth`` (evaluation samples, -1 for an
        outlier) and ``outlier_threshold`` of each method.
    title : str
    """
    figure = _figure(3.6 * len(results), 3.2)
    axes = figure.subplots(1, len(results), sharey=True, squeeze=False)[0]
    bins = np.linspace(0.0, 1.0, 21)
    for ax, result in zip(axes, results):
        confidence = np.clip(np.asarray(result["confidence"], dtype=np.float64), 0.0, 1.0)
        outlier = np.asarray(result["truth"]) == -1
        for mask, name, colour in ((~outlier, "in-class", "tab:blue"), (outlier, "outliers", "tab:red")):
            if mask.any():
                weights = np.full(int(mask.sum()), 100.0 / mask.sum())
                ax.hist(confidence[mask], bins=bins, weights=weights, alpha=0.55, color=colour,
                        label=f"{name} ({int(mask.sum()):,})")
        threshold = result.get("outlier_threshold")
        if threshold is not None and np.isfinite(threshold):
            ax.axvline(threshold, color="black", linestyle="--", linewidth=1,
                       label=f"threshold {threshold:.2f}")
        ax.set_title(result["method"])
        ax.set_xlabel("confidence")
        ax.set_xlim(0, 1)
        ax.legend(fontsize="small")
    axes[0].set_ylabel("% of the group")
    figure.suptitle(title)
    return figure


def _confidence_panel(ax, confidence, outlier, threshold):
    """Stacked histogram of the unlabeled samples' confidence, labeled vs outliers, with the threshold."""
    bins = np.linspace(0.0, 1.0, 21)
    groups = [(~outlier, "given a class", "tab:blue"), (outlier, "outliers", "tab:red")]
    ax.hist([confidence[mask] for mask, _, _ in groups], bins=bins, stacked=True,
            color=[colour for _, _, colour in groups],
            label=[f"{name} ({int(mask.sum()):,})" for mask, name, _ in groups])
    if 0.0 < threshold <= 1.0:
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1, label=f"threshold {threshold:.3f}")
    ax.set_xlim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("unlabeled samples")
    ax.set_title("confidence of the unlabeled samples")
    ax.legend(fontsize="small")


def class_counts(classes, labels, seeds, max_classes=MAX_CLASS_BARS):
    """Seeds and propagated labels of the largest classes, for the bars of :func:`result_figure`.

    Parameters
    ----------
    classes : ndarray of shape (n_classes,)
        Sorted, as ``FastProp.classes_``.
    labels : ndarray of shape (n_samples,)
        The labels of the samples that got a class (outliers left out).
    seeds : ndarray of shape (n_samples,), bool
        Which of them are seeds.
    max_classes : int
        Keep the classes with the most samples, this many at most.

    Returns
    -------
    names : list of str
    n_seeds, n_propagated : ndarray of int
        Per kept class, largest first.

    Examples
    --------
    >>> names, n_seeds, n_propagated = class_counts(
    ...     np.array(["a", "b"]), np.array(["a", "b", "b"]), np.array([True, True, False]))
    >>> names, n_seeds.tolist(), n_propagated.tolist()
    (['b', 'a'], [1, 1], [1, 0])
    """
    encoded = np.searchsorted(classes, labels)
    n_seeds = np.bincount(encoded[seeds], minlength=classes.size)
    n_propagated = np.bincount(encoded[~seeds], minlength=classes.size)
    order = np.argsort(-(n_seeds + n_propagated), kind="stable")[:max_classes]
    return [str(classes[k]) for k in order], n_seeds[order], n_propagated[order]


def result_figure(model, seeds, title):
    """What ``fastprop propagate`` found: confidence against the threshold, samples per class.

    Parameters
    ----------
    model : fastprop.FastProp
        Fitted.
    seeds : ndarray of shape (n_samples,), bool
        The labeled samples.
    title : str
    """
    labels = np.asarray(model.transduction_)
    outlier = labels == model.unlabeled
    confidence = np.clip(np.asarray(model.confidence_, dtype=np.float64), 0.0, 1.0)
    figure = _figure(11.0, 4.2)
    left, right = figure.subplots(1, 2, width_ratios=(3, 2))
    _confidence_panel(left, confidence[~seeds], outlier[~seeds], model.outlier_threshold_)
    names, n_seeds, n_propagated = class_counts(np.asarray(model.classes_), labels[~outlier], seeds[~outlier])
    rows = np.arange(len(names) + 1)
    right.barh(rows[1:], n_seeds, color="tab:green", label="seeds")
    right.barh(rows[1:], n_propagated, left=n_seeds, color="tab:blue", label="propagated")
    right.barh(rows[:1], [int(outlier.sum())], color="tab:red", label="outliers")
    right.set_yticks(rows, [f"outliers ({model.unlabeled!r})", *names], fontsize="small")
    right.invert_yaxis()
    right.set_xlabel("samples")
    shown = "" if len(names) == model.classes_.size else f", the {len(names)} largest of {model.classes_.size}"
    right.set_title(f"samples per class{shown}")
    right.legend(fontsize="small")
    figure.suptitle(title)
    return figure


def accuracy_figure(rows, title, metric="accuracy"):
    """Mean ``metric`` (with its std over seeds) against the noise ratio, one line per method."""
    from ..evaluation.benchmark import GRAPH_ROW

    figure = _figure(6.0, 4.0)
    ax = figure.subplots()
    methods = list(dict.fromkeys(row["method"] for row in rows if row["method"] != GRAPH_ROW))
    for method in methods:
        own = sorted((row for row in rows if row["method"] == method), key=lambda row: row["noise_ratio"])
        ratios = np.array([100 * row["noise_ratio"] for row in own])
        means = np.array([100 * row[f"{metric}_mean"] for row in own])
        stds = np.nan_to_num(np.array([100 * row[f"{metric}_std"] for row in own]))
        ax.errorbar(ratios, means, yerr=stds, marker="o", capsize=3, label=method)
    ax.set_xlabel("noise ratio (% outliers among the unlabeled samples)")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title)
    return figure
