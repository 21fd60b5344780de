"""Hostile input (issue #13): every defect is a clear ValueError or correct behaviour.

Cases that used to kill the interpreter (SIGSEGV, SIGABRT) run in a
subprocess, so that a regression fails one test instead of the whole suite;
the subprocesses load the kernels from Numba's on-disk cache.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import fastprop
from fastprop import FastProp, baselines, build_knn_graph, load_graph, save_graph
from fastprop._validation import check_graph

ROOT = Path(__file__).resolve().parents[1]
BASELINES = [baselines.LabelPropagation, baselines.LabelSpreading, baselines.SGC, baselines.GCN,
             baselines.CorrectAndSmooth]
#: The issue's prefix, for the scripts run in a subprocess.
PREFIX = """
import numpy as np, fastprop, fastprop.baselines
X = np.random.default_rng(0).normal(size=(200, 8)).astype(np.float32)
y = np.full(200, -1); y[:2] = [0, 1]
G = fastprop.build_knn_graph(X, 10, random_state=0)
"""


def run_python(script, *, env=None, timeout=120):
    """Run the issue's prefix and ``script`` in a fresh interpreter that imports this checkout's fastprop."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", PREFIX + textwrap.dedent(script)], capture_output=True,
                          text=True, env=environment, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def issue():
    """The issue's X, y and graph."""
    X = np.random.default_rng(0).normal(size=(200, 8)).astype(np.float32)
    y = np.full(200, -1)
    y[:2] = [0, 1]
    return X, y, build_knn_graph(X, 10, random_state=0)


# ------------------------------------------------ 1. CSR structure of graphs


def test_out_of_range_column_is_a_value_error_not_a_crash(tmp_path):
    """Was SIGSEGV (exit 139) in FastProp.fit, SGC and ``fastprop propagate --graph``."""
    script = f"""
    import fastprop.cli
    G.indices[5] = 10**6
    for fit in (lambda: fastprop.FastProp(random_state=0).fit(X, y, graph=G),
                lambda: fastprop.baselines.SGC().fit(X, y, graph=G)):
        try:
            fit()
        except ValueError as error:
            print("ValueError:", error)
    np.save({str(tmp_path / "X.npy")!r}, X)
    np.save({str(tmp_path / "y.npy")!r}, y)
    np.savez({str(tmp_path / "bad.npz")!r}, format=np.array("csr"), shape=np.array(G.shape), indptr=G.indptr,
             indices=G.indices, data=G.data)
    status = fastprop.cli.main(["propagate", "--features", {str(tmp_path / "X.npy")!r}, "--labels",
                                {str(tmp_path / "y.npy")!r}, "--graph", {str(tmp_path / "bad.npz")!r},
                                "--out", {str(tmp_path / "r.npz")!r}])
    print("status", status)
    """
    result = run_python(script)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[:2] == [lines[0]] * 2 and "holds 1000000 at position 5, outside [0, 199]" in lines[0]
    assert lines[2] == "status 2"
    assert result.stderr.count("\n") == 1 and "outside [0, 199]" in result.stderr
    assert not (tmp_path / "r.npz").exists()


def _corrupt(graph, how):
    graph = graph.copy()
    if how == "index too large":
        graph.indices[5] = 250
    elif how == "negative index":
        graph.indices[5] = -3
    elif how == "decreasing indptr":
        graph.indptr[3] = graph.indptr[4] + 5
    elif how == "indptr not from 0":
        graph.indptr[0] = 1
    elif how == "indptr past the data":
        graph.indptr[-1] += 1
    elif how == "indptr too short":
        graph.indptr = graph.indptr[:-1]
    return graph


CORRUPTIONS = {
    "index too large": r"graph.indices holds 250 at position 5, outside \[0, 199\]",
    "negative index": r"graph.indices holds -3 at position 5, outside \[0, 199\]",
    "decreasing indptr": r"graph.indptr decreases from \d+ to \d+ at row 3",
    "indptr not from 0": "graph.indptr must start at 0, got 1",
    "indptr past the data": r"graph.indptr ends at \d+ stored entries, but indices has",
    "indptr too short": "graph.indptr has 200 entries, but a graph of 200 rows needs 201",
}


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_corrupt_csr_structure_is_refused_by_fastprop(issue, how):
    """Negative indices were accepted silently, a decreasing indptr failed in scipy's C++."""
    X, y, graph = issue
    with pytest.raises(ValueError, match=CORRUPTIONS[how]):
        FastProp(random_state=0).fit(X, y, graph=_corrupt(graph, how))


@pytest.mark.parametrize("estimator", BASELINES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("how", ["negative index", "decreasing indptr"])
def test_corrupt_csr_structure_is_refused_by_every_baseline(issue, estimator, how):
    X, y, graph = issue
    with pytest.raises(ValueError, match=CORRUPTIONS[how]):
        estimator().fit(X, y, graph=_corrupt(graph, how))


@pytest.mark.parametrize("fmt, message", [
    ("coo", r"COO row array holds 500 at position 3"),
    ("csc", r"graph.indices holds 500 at position 3"),
    ("bsr", r"graph.indices holds 500 at position 3"),
    ("lil", r"graph is not a valid lil matrix"),
])
def test_other_sparse_formats_are_checked_before_conversion(issue, fmt, message):
    graph = issue[2].asformat(fmt)
    if fmt == "coo":
        graph.row[3] = 500
    elif fmt == "lil":
        graph.rows[0], graph.data[0] = [900], [1.0]
    else:
        graph.indices[3] = 500
    with pytest.raises(ValueError, match=message):
        check_graph(graph, 200)


def test_a_stale_canonical_flag_is_not_trusted(issue):
    graph = issue[2].copy()
    assert graph.has_canonical_format  # scipy caches the answer
    row = slice(graph.indptr[0], graph.indptr[1])
    graph.indices[row] = graph.indices[row][::-1].copy()
    graph.data[row] = graph.data[row][::-1].copy()
    checked = check_graph(graph)
    assert checked is not graph and checked.has_sorted_indices
    assert np.all(np.diff(checked.indices[checked.indptr[0] : checked.indptr[1]]) > 0)
    assert (checked != issue[2]).nnz == 0


def test_weights_that_float32_cannot_hold_are_refused(issue):
    """float64 weights below float32's range used to become 0: every edge dropped, no warning."""
    graph = issue[2].astype(np.float64)
    tiny = graph.copy()
    tiny.data *= 1e-300
    with pytest.raises(ValueError, match=r"positive weight\(s\) below float32's smallest positive value"):
        FastProp().fit(issue[0], issue[1], graph=tiny)
    huge = graph.copy()
    huge.data[0] = 1e39
    with pytest.raises(ValueError, match=r"1 weight\(s\) above float32's largest value"):
        check_graph(huge)
    with pytest.raises(ValueError, match=r"1 NaN or infinite edge weight\(s\), e.g. nan"):
        check_graph(sp.csr_matrix(np.array([[0, np.nan], [1.0, 0]])))


def test_checked_graph_keeps_the_weights(issue):
    graph = issue[2].astype(np.float64)
    graph.data *= 1e-40  # float32 subnormals: kept, not dropped
    checked = check_graph(graph)
    assert checked.nnz == graph.nnz and checked.data.min() > 0
