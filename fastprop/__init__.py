"""fastprop: reliable label propagation on noisy kNN affinity graphs, on the CPU.

The public names are imported on first use (PEP 562), so that ``import
fastprop.cli`` stays light: the command line imports NumPy, SciPy and Numba
itself, where a Ctrl-C during start-up is one line instead of a traceback.
"""

import importlib
from importlib import metadata

try:
    __version__ = metadata.version("fastprop-graph")
except metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "unknown"

#: Where each public name lives.
_MODULES = {
    "FastProp": "estimator",
    "OutlierThresholdWarning": "threshold",
    "warmup": "_warmup",
    "build_knn_graph": "graph",
    "knn_graph_from_lists": "graph",
    "knn_search": "graph",
    "load_graph": "graph",
    "refine_confidence": "confnet",
    "save_graph": "graph",
}

__all__ = [
    "FastProp",
    "OutlierThresholdWarning",
    "build_knn_graph",
    "knn_graph_from_lists",
    "knn_search",
    "load_graph",
    "refine_confidence",
    "save_graph",
    "warmup",
]


def __getattr__(name):
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
