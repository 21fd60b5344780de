"""FastProp's L-BFGS against SciPy's L-BFGS-B on the softmax regressions of real fits.

    python bench/solver.py

Every softmax regression a default ``FastProp`` fit (no validation) solves is
captured, on each set of ``../shared/data`` present: the whole set (every
class known, 1% seeds) and the levers protocol's 50%-outlier task (1% seeds,
task seed 0). Each captured problem (rows, targets, weights, ridge, iteration
cap, tolerance, start) is then solved again by both solvers on the same loss
(:class:`fastprop.linear.SoftmaxLoss`), SciPy's then fastprop's, each the
best of ``--repeat`` runs, BLAS on the calling thread as in a fit. Printed per
problem: loss evaluations, final loss, largest gradient entry, seconds, and
the ratio fastprop / SciPy; then the sums. A fit's own solver time with the
old loss is not measured here (see ``bench/RESULTS.md``).
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import log, timed, write_table  # noqa: E402
from levers import load  # noqa: E402

import fastprop.linear as linear  # noqa: E402
from fastprop import FastProp, build_knn_graph  # noqa: E402
from fastprop._blas import blas_on_calling_thread  # noqa: E402
from fastprop.evaluation import benchmark as fb  # noqa: E402
from fastprop.evaluation.protocol import make_noisy_task  # noqa: E402
from fastprop.lbfgs import minimise  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", default=["banking77", "hwu64", "mnist"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--name", default="solver")
    return parser.parse_args(argv)


def captured_problems(features, y, graph):
    """The softmax regressions of one default fit: dicts of the loss, start, cap and tolerance."""
    problems = []
    original = linear._minimise

    def capture(objective, n_params, max_iter, tol, initial=None):
        if isinstance(objective, linear.SoftmaxLoss):
            start = np.zeros(n_params) if initial is None else np.array(initial)
            problems.append({"loss": objective, "start": start, "max_iter": max_iter, "tol": tol})
        return original(objective, n_params, max_iter, tol, initial)

    linear._minimise = capture
    try:
        FastProp(random_state=0).fit(features, y, graph=graph)
    finally:
        linear._minimise = original
    return problems


def solve_scipy(problem):
    result = minimize(problem["loss"], problem["start"], jac=True, method="L-BFGS-B",
                      options={"maxiter": problem["max_iter"], "gtol": problem["tol"], "ftol": problem["tol"] * 1e-3})
    return result.x


def solve_fastprop(problem):
    params, _ = minimise(problem["loss"], problem["start"], max_iter=problem["max_iter"], gtol=problem["tol"],
                         ftol=problem["tol"] * 1e-3)
    return params


def measure(problem, solve, repeat):
    """Best seconds of ``repeat`` solves, and the evaluations, loss and largest gradient entry of the last."""
    loss = problem["loss"]
    evaluations = []

    def counting(params):
        evaluations[-1] += 1
        return loss(params)

    def solve_once():
        evaluations.append(0)
        return solve({**problem, "loss": counting})

    best, params = timed(solve_once, repeat)
    value, gradient = loss(params)
    return best, evaluations[-1], value, float(np.abs(gradient).max())


def main(argv=None):
    args = parse_args(argv)
    fb.warmup()
    rows = []
    totals = {"fastprop": 0.0, "scipy": 0.0}
    for name in args.data:
        for whole, noise in ((True, 0.0), (False, 0.5)):
            pool = load(name, whole)
            if pool is None:
                log(f"{name}: absent, skipped")
                break
            X, y, n_classes = pool
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                task = make_noisy_task(y, n_classes, label_ratio=0.01, noise_ratio=noise, random_state=0)
            features = task.subset(X)
            graph = build_knn_graph(features, 30, random_state=0)
            with blas_on_calling_thread():
                problems = captured_problems(features, task.y, graph)
                for index, problem in enumerate(problems):
                    measured = {}
                    for solver, solve in (("scipy", solve_scipy), ("fastprop", solve_fastprop)):
                        measured[solver] = measure(problem, solve, args.repeat)
                        totals[solver] += measured[solver][0]
                    n_rows, n_features = problem["loss"].features.shape
                    n_columns = problem["loss"].weighted_targets.shape[1]
                    row = {"data": f"{name} {'whole' if whole else f'{noise:.0%} outliers'}", "problem": index,
                           "rows x features x classes": f"{n_rows} x {n_features} x {n_columns}",
                           "cap, tol": f"{problem['max_iter']}, {problem['tol']:g}"}
                    for solver in ("scipy", "fastprop"):
                        seconds, evaluations, value, gradient = measured[solver]
                        row[f"{solver} evaluations"] = evaluations
                        row[f"{solver} loss"] = f"{value:.8f}"
                        row[f"{solver} max |gradient|"] = f"{gradient:.1e}"
                        row[f"{solver} s"] = f"{seconds:.4f}"
                    row["fastprop / scipy"] = f"{measured['fastprop'][0] / measured['scipy'][0]:.2f}"
                    rows.append(row)
                    log(" | ".join(str(value) for value in row.values()))
    columns = list(rows[0]) if rows else []
    notes = (f"Sum of the best times: fastprop {totals['fastprop']:.3f} s, SciPy L-BFGS-B {totals['scipy']:.3f} s, "
             f"ratio {totals['fastprop'] / max(totals['scipy'], 1e-12):.2f}.")
    log(notes)
    print(write_table(args.name, rows, columns, {"repeat": args.repeat}, notes=notes))


if __name__ == "__main__":
    main()
