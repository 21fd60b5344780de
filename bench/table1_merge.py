"""Merge ``bench/table1.py`` runs of the same tasks (e.g. methods added later) into one table.

    python bench/table1_merge.py banking77_v15 banking77_v15b banking77_v15c --name table1_banking77_all

Every run must use the same data, classes, seeds and noise ratios (the tasks
and graphs are drawn from the seed, so rows of different runs are of the
same tasks); this is checked on the recorded protocol. Writes
``bench/results/<name>.md`` with the accuracy, in-class accuracy and outlier
AUROC tables of :func:`fastprop.evaluation.benchmark.format_markdown`, each
run's commit and date listed.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR  # noqa: E402

from fastprop.evaluation import benchmark as fb  # noqa: E402

TITLES = {
    "accuracy": "Accuracy with rejection (the paper's metric), % mean ± std over seeds",
    "in_class_accuracy": "In-class accuracy (argmax, no rejection), %",
    "outlier_auroc": "Outlier AUROC of the confidence, %",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="result names, as bench/results/table1_<run>.json")
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    rows, sources, protocol = [], [], None
    for run in args.runs:
        payload = json.loads((RESULTS_DIR / f"table1_{run}.json").read_text())
        meta = payload["meta"]
        setting = {k: v for k, v in meta["setting"].items() if k != "threads"}
        key = json.dumps(setting, sort_keys=True)
        if protocol is None:
            protocol = key
        elif key != protocol:
            raise SystemExit(f"{run}: another setting ({key}) than {args.runs[0]} ({protocol}); not merged.")
        graph_seen = any(row["method"] == fb.GRAPH_ROW for row in rows)
        rows += [row for row in payload["rows"] if not (graph_seen and row["method"] == fb.GRAPH_ROW)]
        sources.append(f"- `{meta.get('command')}` ({meta.get('date')}, git {meta.get('git_commit')})")
    # the methods, then their " + ConfNet" rows, the scikit-learn reference, the graph
    first_seen = {}
    for row in rows:
        first_seen.setdefault(row["method"], len(first_seen))

    def place(row):
        method = row["method"]
        return (method == fb.GRAPH_ROW, method == fb.SKLEARN_REFERENCE, method.endswith(fb.CONFNET_SUFFIX),
                first_seen[method])

    rows.sort(key=place)
    parts = [f"# Table 1, merged: {args.name}", "", f"- setting: {protocol}", "- runs:", *sources]
    for metric, title in TITLES.items():
        parts += ["", f"## {title}", "", fb.format_markdown(rows, metric=metric)]
    text = "\n".join(parts) + "\n"
    (RESULTS_DIR / f"{args.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
