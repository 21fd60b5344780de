"""Plain-text reports of the command line: the demo's result table, what it means, who wins, the histogram."""

import math
import textwrap
from dataclasses import dataclass

import numpy as np

WIDTH = 79


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


def paragraph(text, width=WIDTH):
    """``text`` filled to ``width`` columns."""
    return textwrap.fill(text, width)


def metric_meanings(n_evaluated, n_validation):
    """What each column of :func:`result_table` means, in plain words.

    Returns
    -------
    list of str
    """
    meanings = (
        ("accuracy", "share of them labeled right: an in-class sample must get its class, an outlier "
                     "must be rejected (its confidence below the threshold)"),
        ("in-class acc", "share of the in-class samples whose most likely class is theirs, rejection "
                         "aside: how well the labels spread"),
        ("outlier AUROC", "chance that a random in-class sample is more confident than a random "
                          "outlier: 0.5 is a coin toss, 1.0 a perfect ranking"),
        ("threshold", "the confidence below which a method rejects a sample, chosen to maximise "
                      f"accuracy on the {n_validation:,} validation samples ('-': it rejects none)"),
        ("seconds", "each method's fit on the shared graph, kernel compilation excluded"),
    )
    lines = [f"What the numbers mean, on the {n_evaluated:,} evaluated samples (never seen labeled):"]
    indent = 2 + max(len(name) for name, _ in meanings) + 2
    for name, meaning in meanings:
        lines.extend(textwrap.wrap(meaning, WIDTH, initial_indent=f"  {name:<{indent - 2}}",
                                   subsequent_indent=" " * indent))
    return lines


@dataclass(frozen=True)
class _Column:
    """A column of :func:`result_table` that ranks the methods, as it is shown."""

    key: str
    name: str
    scale: float
    digits: int
    unit: str
    higher_is_better: bool = True

    def rounded(self, value):
        return round(self.scale * value, self.digits)

    def shown(self, value):
        return f"{self.scale * value:.{self.digits}f}{self.unit}"

    def gap(self, first, other):
        """How far ``other`` is from ``first`` (the better one), in words."""
        if not self.higher_is_better:
            ratio = other / first if first > 0 else math.inf
            if not math.isfinite(ratio):
                return "longer"
            return f"{ratio:.{1 if ratio < 10 else 0}f}x as long"
        points = abs(self.rounded(first) - self.rounded(other))
        return f"{points:.{self.digits}f}{' points' if self.unit == '%' else ''}"


RANKED_COLUMNS = (
    _Column("accuracy", "accuracy", 100.0, 1, "%"),
    _Column("in_class_accuracy", "in-class acc", 100.0, 1, "%"),
    _Column("outlier_auroc", "outlier AUROC", 1.0, 3, ""),
    _Column("seconds", "seconds", 1.0, 2, "s", higher_is_better=False),
)

_ORDINALS = ("first", "second", "third")


def _ordinal(rank):
    return _ORDINALS[rank] if rank < len(_ORDINALS) else f"{rank + 1}th"


def _join(names):
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _winners(results, column):
    """``(methods sorted best first, the best ones)`` of ``column``, on the values as shown; NaN left out."""
    measured = [result for result in results if math.isfinite(result[column.key])]
    sign = -1 if column.higher_is_better else 1
    ranked = sorted(measured, key=lambda result: sign * column.rounded(result[column.key]))
    best = [result for result in ranked if _same(column, result, ranked[0])]
    return ranked, best


def _same(column, result, other):
    """Whether two results show the same value in ``column``."""
    return column.rounded(result[column.key]) == column.rounded(other[column.key])


def _column_verdict(results, column, focus):
    """One sentence: who is best on ``column`` and where ``focus`` stands."""
    ranked, best = _winners(results, column)
    if not ranked:
        return "not measured on this run (e.g. no outlier among the evaluated samples)"
    leader = "fastest" if not column.higher_is_better else "first"
    top = column.shown(best[0][column.key])
    if len(best) == len(ranked):
        return f"all tie at {top}"
    if len(best) > 1:
        verdict = f"{_join(result['method'] for result in best)} tie for {leader} at {top}"
    else:
        verdict = f"{best[0]['method']} is {leader} ({top})"
    mine = next((result for result in ranked if result["method"] == focus), None)
    if mine is None:
        return f"{verdict}; {focus} not measured"
    if mine in best:
        runner = ranked[len(best)]
        return (f"{verdict}, {column.gap(mine[column.key], runner[column.key])} ahead of "
                f"{runner['method']} ({column.shown(runner[column.key])})")
    gap = column.gap(best[0][column.key], mine[column.key])
    if not column.higher_is_better:
        return f"{verdict}; {focus} takes {column.shown(mine[column.key])}, {gap}"
    rank = next(position for position, result in enumerate(ranked) if _same(column, result, mine))
    return f"{verdict}; {focus} is {_ordinal(rank)} ({column.shown(mine[column.key])}), {gap} behind"


def comparison(results, focus):
    """Who wins each column of :func:`result_table`, and where ``focus`` stands, from the numbers.

    Values are compared as the table shows them, so that equal cells tie.

    Parameters
    ----------
    results : list of dict
        As for :func:`result_table`.
    focus : str
        The method whose standing is described.

    Returns
    -------
    list of str

    Examples
    --------
    >>> rows = [dict(method="A", accuracy=0.61, in_class_accuracy=0.70, outlier_auroc=0.74, seconds=1.0),
    ...         dict(method="B", accuracy=0.60, in_class_accuracy=0.70, outlier_auroc=0.63, seconds=0.1)]
    >>> print("\\n".join(comparison(rows, "A")))
    How the methods compare on this run:
      accuracy       A is first (61.0%), 1.0 points ahead of B (60.0%)
      in-class acc   all tie at 70.0%
      outlier AUROC  A is first (0.740), 0.110 ahead of B (0.630)
      seconds        B is fastest (0.10s); A takes 1.00s, 10x as long
    In short: A is best on accuracy and outlier AUROC; B on seconds. One task drawn
    with one seed: gaps of a point or two can change with --seed ('fastprop bench'
    averages over seeds).
    """
    indent = max(len(column.name) for column in RANKED_COLUMNS) + 2
    lines = ["How the methods compare on this run:"]
    lines.extend(f"  {column.name:<{indent}}{_column_verdict(results, column, focus)}"
                 for column in RANKED_COLUMNS)
    return lines + textwrap.wrap(_in_short(results, focus) + _inverted_ranking(results), WIDTH)


def _inverted_ranking(results):
    """A warning for the methods whose confidence ranks outliers above in-class samples, if any."""
    inverted = [result["method"] for result in results if result["outlier_auroc"] < 0.5]
    if not inverted:
        return ""
    return (f" An outlier AUROC below 0.5 ({_join(inverted)}) means the confidence ranks outliers "
            "above in-class samples on this task.")


def _in_short(results, focus):
    """The columns each method wins alone, ``focus`` first."""
    won = {}
    for column in RANKED_COLUMNS:
        ranked, best = _winners(results, column)
        if len(best) == 1 and len(ranked) > 1:
            won.setdefault(best[0]["method"], []).append(column.name)
    methods = sorted(won, key=lambda method: method != focus)
    if methods:
        parts = [f"{methods[0]} is best on {_join(won[methods[0]])}"]
        parts += [f"{method} on {_join(won[method])}" for method in methods[1:]]
        summary = "; ".join(parts) + "."
    else:
        summary = "no method is best alone on any column."
    return (f"In short: {summary} One task drawn with one seed: gaps of a point or two can change "
            "with --seed ('fastprop bench' averages over seeds).")
