"""What the commands share: the progress of a FastProp fit, the graph step, the plot options."""

from ..estimator import FastProp
from ..graph import EXACT_SEARCH_MAX_SAMPLES, build_knn_graph
from . import _plots
from ._io import check_output

_STAGE_TEXT = {
    "graph": "building the kNN graph",
    "training": "training the local predictor",
    "confnet": "training ConfNet",
    "provisional": "provisional classes and threshold",
}


class StageReporter:
    """Drive a CLI progress line from FastProp's ``progress(stage, done, total)`` calls.

    The patch loop stops when no viable start is left, usually well short of
    every sample being confident, so its stage counts the confident samples
    without a total to reach, and its closing line says how many of all it
    reached.

    Parameters
    ----------
    progress : fastprop.cli._progress.Progress
    label : str
        Put before every stage's name (e.g. ``"FastProp: "``).
    """

    def __init__(self, progress, label):
        self._progress = progress
        self._label = label
        self._stage = None
        self._confident = None

    def __call__(self, stage, done, total):
        if self._stage == "propagation" and stage != "propagation":
            n_confident, n_samples = self._confident
            self._progress.finish(f"{n_confident:,} of {n_samples:,} confident, no patch left")
        if stage == "done":
            self._progress.finish()
        elif stage == "propagation":
            if self._stage != stage:
                self._progress.start(f"{self._label}propagating", unit="samples confident", initial=done)
            self._confident = (done, total)
            self._progress.update(done)
        elif self._stage != stage:
            self._progress.start(f"{self._label}{_STAGE_TEXT[stage]}")
        self._stage = stage


def fastprop_model(progress, label="", **params):
    """A :class:`~fastprop.FastProp` whose fit shows its stages on ``progress``."""
    reporter = StageReporter(progress, label) if progress.enabled else None
    return FastProp(progress=reporter, **params)


def build_graph(X, n_neighbors, method, seed, progress, parallel_insert=False, label=""):
    """The graph of ``X``; hnsw inserts on one thread (reproducible) unless ``parallel_insert``.

    Returns
    -------
    graph : scipy.sparse.csr_matrix
    n_neighbors : int
        K, lowered to ``n_samples - 1`` on tiny inputs.
    method : str
        The search used, ``"exact"`` or ``"hnsw"``.
    """
    n_samples, n_features = X.shape
    if n_samples < 2:
        raise ValueError(f"a kNN graph needs at least 2 samples, got {n_samples}.")
    if n_neighbors > n_samples - 1:
        progress.message(f"note: --neighbors {n_neighbors} lowered to {n_samples - 1} (n_samples - 1)")
        n_neighbors = n_samples - 1
    resolved = method
    if method == "auto":
        resolved = "exact" if n_samples <= EXACT_SEARCH_MAX_SAMPLES else "hnsw"
    progress.start(f"{label}building the kNN graph ({resolved}, {n_samples:,} x {n_features}, K={n_neighbors})")
    graph = build_knn_graph(X, n_neighbors, method=method, random_state=seed, n_jobs=-1 if parallel_insert else None)
    progress.finish(f"{graph.nnz:,} edges")
    return graph, n_neighbors, resolved


def optional_plot(path, option, progress):
    """``path`` if a plot can be drawn there; None (after a note) when matplotlib is missing."""
    if path is None:
        return None
    if not _plots.available():
        progress.message(f"note: {option} skipped: {_plots.INSTALL_HINT}")
        return None
    return checked_plot(path, option)


def checked_plot(path, option, inputs=()):
    """``path`` once matplotlib, the image format and the directory are known to work; else ValueError.

    ``inputs`` are ``(option, path)`` pairs the plot must not overwrite.
    """
    if not _plots.available():
        raise ValueError(f"{option} {path}: {_plots.INSTALL_HINT}.")
    _plots.check_plot_path(path, option)
    check_output(path, option, inputs)
    return path
