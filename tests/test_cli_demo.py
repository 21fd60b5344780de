"""``fastprop demo`` explains itself: the compile step, honest progress, who wins each column."""

import io
import re
import sys

import pytest

from fastprop.cli import _demo, main
from fastprop.cli._progress import Progress
from fastprop.cli._running import StageReporter
from fastprop.cli._text import RANKED_COLUMNS, comparison


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(scope="module")
def demo_run():
    """One small demo on a fake terminal, with the order of warmup and fits recorded."""
    calls = []
    warmup, fit = _demo.warmup, _demo._fit
    terminal = FakeTerminal()
    out = io.StringIO()
    patch = pytest.MonkeyPatch()
    patch.setattr(_demo, "warmup", lambda: calls.append("warmup") or warmup())
    patch.setattr(_demo, "_fit", lambda name, *args: calls.append(name) or fit(name, *args))
    patch.setattr(sys, "stderr", terminal)
    patch.setattr(sys, "stdout", out)
    try:
        status = main(["demo", "--samples", "1200", "--classes", "4", "--neighbors", "12", "--seed", "1"])
    finally:
        patch.undo()
    return status, out.getvalue(), terminal.getvalue(), calls


def _table(out):
    """``{method: {column: value}}`` read back from the printed table."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("method"))
    table = {}
    for line in lines[header + 2: header + 5]:
        method, accuracy, in_class, auroc, _, seconds = line.split()
        table[method] = {"accuracy": float(accuracy.rstrip("%")) / 100,
                         "in_class_accuracy": float(in_class.rstrip("%")) / 100,
                         "outlier_auroc": float(auroc), "seconds": float(seconds)}
    return table


def test_compilation_is_its_own_step_before_any_timed_fit(demo_run):
    status, out, progress, calls = demo_run
    assert status == 0
    assert calls == ["warmup", "FastProp", "SGC", "LabelSpreading"]
    assert re.search(r"\[2/6\] compiling kernels \(once per environment; cached afterwards\): done in", progress)
    assert re.search(r"^kernels: compiled or loaded from cache in \d+\.\d\ds .*not in the seconds below",
                     out, re.MULTILINE)


def test_progress_counts_to_an_end_it_reaches(demo_run):
    _, _, progress, _ = demo_run
    finished = re.findall(r"fastprop: (\[\d/6\]) [^\r\n]*: done in", progress)
    assert finished[0] == "[1/6]" and finished[-1] == "[6/6]"
    assert sorted(set(finished)) == [f"[{k}/6]" for k in range(1, 7)]
    # with the protocol's validation set FastProp's confidence is the whole graph's ("auto"): no patch loop
    # runs, so no propagating line (test_stage_reporter_closes_the_patch_loop_with_how_far_it_got has it)
    assert "propagating" not in progress
    assert re.search(r"FastProp: training the local predictor: done in", progress)
    assert re.search(r"FastProp: provisional classes and threshold: done in", progress)


def test_the_report_says_what_it_did_and_what_the_columns_mean(demo_run):
    _, out, _, _ = demo_run
    text = " ".join(out.split())
    assert "What it did: drew 1,200 synthetic 64-d embeddings of 4 classes, 50% of them outliers" in text
    assert "What the numbers mean" in text
    for column in ("accuracy", "in-class acc", "outlier AUROC", "threshold", "seconds"):
        assert re.search(rf"^  {column} +\S", out, re.MULTILINE), column
    assert "0.5 is a coin toss" in text and "kernel compilation excluded" in text


def test_the_winner_of_each_column_is_the_best_number_of_the_table(demo_run):
    _, out, _, _ = demo_run
    table = _table(out)
    for column in RANKED_COLUMNS:
        values = {method: column.rounded(row[column.key]) for method, row in table.items()}
        best = (max if column.higher_is_better else min)(values.values())
        winners = [method for method, value in values.items() if value == best]
        section = out[out.index("How the methods compare"):]
        line = next(line for line in section.splitlines() if line.startswith(f"  {column.name} "))
        verdict = line[len(column.name) + 2:].strip()
        if len(winners) == 1:
            assert verdict.startswith(f"{winners[0]} is {'first' if column.higher_is_better else 'fastest'}")
        else:
            assert "tie" in verdict and all(method in verdict for method in winners)


def _results(accuracy, in_class, auroc, seconds):
    methods = ("FastProp", "SGC", "LabelSpreading")
    return [dict(method=method, accuracy=a, in_class_accuracy=i, outlier_auroc=o, seconds=s)
            for method, a, i, o, s in zip(methods, accuracy, in_class, auroc, seconds)]


def test_comparison_is_computed_from_the_numbers():
    lines = comparison(_results([0.50, 0.62, 0.55], [0.70, 0.70, 0.60], [0.60, float("nan"), 0.80],
                                [0.9, 0.1, 0.3]), "FastProp")
    verdicts = dict(line.strip().split("  ", 1) for line in lines[1:5])
    assert verdicts["accuracy"].strip() == "SGC is first (62.0%); FastProp is third (50.0%), 12.0 points behind"
    assert verdicts["in-class acc"].strip() == ("FastProp and SGC tie for first at 70.0%, 10.0 points ahead "
                                                "of LabelSpreading (60.0%)")
    assert verdicts["outlier AUROC"].strip() == ("LabelSpreading is first (0.800); FastProp is second "
                                                 "(0.600), 0.200 behind")
    assert verdicts["seconds"].strip() == "SGC is fastest (0.10s); FastProp takes 0.90s, 9.0x as long"
    summary = " ".join(lines[5:])
    assert summary.startswith("In short: SGC is best on accuracy and seconds; LabelSpreading on outlier AUROC.")
    assert "below 0.5" not in summary
    inverted = comparison(_results([0.5, 0.4, 0.3], [0.5, 0.4, 0.3], [0.45, 0.6, 0.3], [1, 2, 3]), "FastProp")
    assert "An outlier AUROC below 0.5 (FastProp and LabelSpreading) means the confidence ranks outliers" \
        in " ".join(inverted)


def test_stage_reporter_closes_the_patch_loop_with_how_far_it_got():
    now = [0.0]
    terminal = FakeTerminal()
    with Progress.for_stream(terminal, interval=0, clock=lambda: now[0]) as progress:
        report = StageReporter(progress, "FastProp: ")
        report("training", None, None)
        for done in (10, 40, 55):
            now[0] += 1.0
            report("propagation", done, 100)
        report("confnet", None, None)
        report("provisional", None, None)
        report("done", None, None)
    text = terminal.getvalue()
    assert "FastProp: propagating: 55 samples confident" in text
    assert "FastProp: propagating: done in 2.0s, 55 of 100 confident, no patch left" in text
    assert "55/100" not in text and "%" not in text
    assert "FastProp: training ConfNet: done in" in text
    assert "FastProp: provisional classes and threshold: done in" in text


def test_the_demo_fits_fastprop_with_the_k_of_its_graph(monkeypatch, capsys):
    # the graph had --neighbors K, FastProp kept n_neighbors=30 (its calibration's local density reads it)
    made = []
    fastprop_model = _demo.fastprop_model
    monkeypatch.setattr(_demo, "fastprop_model",
                        lambda *args, **params: made.append(params["n_neighbors"]) or fastprop_model(*args, **params))
    assert main(["demo", "--samples", "300", "--classes", "3", "--neighbors", "9", "--seed", "1"]) == 0
    capsys.readouterr()
    assert made == [9]
