"""Figures of the command line, drawn with matplotlib's Agg canvas (the optional ``plot`` extra).

Nothing here touches pyplot or the global backend: each figure is a
``matplotlib.figure.Figure`` on its own ``FigureCanvasAgg``.
"""

from pathlib import Path

import numpy as np

from ._io import write_atomically

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


def save(figure, path):
    """Write ``figure`` to ``path`` atomically, in the format of its suffix."""
    image_format = Path(path).suffix.lower().lstrip(".")
    write_atomically([(path, lambda stream: figure.savefig(stream, format=image_format, dpi=120))])


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
