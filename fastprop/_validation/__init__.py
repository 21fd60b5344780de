"""Validation of everything that crosses fastprop's public boundary.

Every public function routes its inputs through the helpers here, once, and
the kernels behind it trust what they receive. Each helper raises a
``ValueError`` whose message names the argument, shows the bad value and says
how to fix it. The checks live in parts with one job each, re-exported here:

- :mod:`~fastprop._validation.features`: feature matrices (:func:`check_features`).
- :mod:`~fastprop._validation.graphs`: affinity graphs, as sparse matrices, CSR arrays read from a file
  or kNN lists (:func:`check_graph`, :func:`check_graph_arrays`, :func:`check_knn_lists`).
- :mod:`~fastprop._validation.scalars`: scalar parameters (:func:`check_integer`, :func:`check_real`,
  :func:`check_random_state`, ...).
- :mod:`~fastprop._validation.labels`: per-sample arrays: labels, weights, class distributions and
  confidences (:func:`as_integer_labels`, :func:`check_scores`, ...).
- :mod:`~fastprop._validation.memory`: requests for more memory than the machine, or its container, has
  (:func:`check_memory`).
"""

from .features import NonNumericInputError, check_features
from .graphs import SYMMETRY_TOLERANCE, check_graph, check_graph_arrays, check_knn_lists, check_symmetric_graph
from .labels import (as_integer_labels, check_confidence, check_distributions, check_pool_labels, check_sample_weight,
                     check_scores)
from .memory import check_memory
from .scalars import (check_bool, check_choice, check_integer, check_n_neighbors, check_random_state, check_real,
                      fits_int64)

__all__ = [
    "NonNumericInputError",
    "SYMMETRY_TOLERANCE",
    "as_integer_labels",
    "check_bool",
    "check_choice",
    "check_confidence",
    "check_distributions",
    "check_features",
    "check_graph",
    "check_graph_arrays",
    "check_integer",
    "check_knn_lists",
    "check_memory",
    "check_n_neighbors",
    "check_pool_labels",
    "check_random_state",
    "check_real",
    "check_sample_weight",
    "check_scores",
    "check_symmetric_graph",
    "fits_int64",
]
