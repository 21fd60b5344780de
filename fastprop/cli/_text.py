"""Plain-text reports of the command line: the demo's result table and confidence histogram."""

import math

import numpy as np


def _percent(value):
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def _number(value, digits=3):
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def result_table(results):
    """Aligned table: accuracy, in-class accuracy, outlier AUROC, threshold and seconds per method.

    Parameters
    ----------
    results : list of dict
        ``method``, ``accuracy``, ``in_class_accuracy``, ``outlier_auroc``,
        ``outlier_threshold`` and ``seconds`` of each method.

    Returns
    -------
    list of str
    """
    header = ("method", "accuracy", "in-class acc", "outlier AUROC", "threshold", "seconds")
    rows = [
        (
            result["method"],
            _percent(result["accuracy"]),
            _percent(result["in_class_accuracy"]),
            _number(result["outlier_auroc"]),
            _number(max(result["outlier_threshold"], 0.0)),
            f"{result['seconds']:.2f}",
        )
        for result in results
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
    lines.insert(1, "-" * len(lines[0]))
    return lines


def confidence_histogram(confidence, truth, threshold=None, *, n_bins=10, width=24):
    """Text histogram of ``confidence`` for in-class samples (``truth >= 0``) vs outliers (-1).

    Each bar is the share of its group that falls in the bin, so groups of
    different sizes compare; the bin holding ``threshold`` is marked.

    Returns
    -------
    list of str

    Examples
    --------
    >>> lines = confidence_histogram([0.95, 0.9, 0.1], [0, 1, -1], n_bins=2, width=4)
    >>> print("\\n".join(lines))
    confidence  in-class (2)     outliers (1)
    0.0-0.5     |        0.0%    |####  100.0%
    0.5-1.0     |####  100.0%    |        0.0%
    """
    confidence = np.clip(np.asarray(confidence, dtype=np.float64), 0.0, 1.0)
    outlier = np.asarray(truth) == -1
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    groups = []
    for mask in (~outlier, outlier):
        counts, _ = np.histogram(confidence[mask], bins=edges)
        groups.append(counts / max(int(mask.sum()), 1))
    top = max(float(np.max(share)) for share in groups) or 1.0
    marked = None
    if threshold is not None and math.isfinite(threshold) and 0.0 < threshold <= 1.0:
        marked = min(int(threshold * n_bins), n_bins - 1)
    cell = width + 9
    names = (f"in-class ({int((~outlier).sum()):,})", f"outliers ({int(outlier.sum()):,})")
    lines = [f"{'confidence':<12}{names[0]:<{cell + 4}}{names[1]}".rstrip()]
    for index in range(n_bins):
        bars = []
        for share in groups:
            bar = "#" * int(round(width * share[index] / top))
            bars.append(f"|{bar:<{width}} {100 * share[index]:>6.1f}%")
        line = f"{edges[index]:.1f}-{edges[index + 1]:.1f}     {bars[0]}    {bars[1]}"
        if index == marked:
            line += f"  <- threshold {threshold:.3f}"
        lines.append(line)
    return lines
