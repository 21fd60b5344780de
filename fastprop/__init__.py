"""fastprop: reliable label propagation on noisy kNN affinity graphs, on the CPU."""

from .estimator import FastProp, warmup
from .graph import build_knn_graph, knn_graph_from_lists, knn_search, load_graph, save_graph

__all__ = [
    "FastProp",
    "build_knn_graph",
    "knn_graph_from_lists",
    "knn_search",
    "load_graph",
    "save_graph",
    "warmup",
]
