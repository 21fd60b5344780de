"""Baselines that share FastProp's interface: transductive classifiers on a kNN graph.

Each estimator's ``fit(X, y, graph=None)`` takes labels as FastProp does
(integers or class names, the ``unlabeled`` parameter, default ``-1``, marking
an unlabeled sample) and an optional precomputed affinity graph (else it builds
``build_knn_graph(X, n_neighbors)``), and sets ``classes_``,
``label_distributions_``, ``confidence_`` and ``transduction_``.

- :class:`LabelPropagation`: harmonic functions (Zhu & Ghahramani, 2002).
- :class:`LabelSpreading`: local and global consistency (Zhou et al., 2004).
- :class:`SGC`: simple graph convolution (Wu et al., 2019).
- :class:`GCN`: graph convolutional network (Kipf & Welling, 2017).
- :class:`CorrectAndSmooth`: Correct and Smooth (Huang et al., 2021).
- :class:`GAT`: graph attention network (Veličković et al., 2018).
- :class:`GraphSAGE`: sampled neighbourhood aggregation (Hamilton et al., 2017).
- :class:`FastGCN`: GCN trained on layer-wise importance samples (Chen et al., 2018).
- :class:`PoissonLearning`: Poisson learning (Calder et al., 2020).
"""

from ._common import ConvergenceWarning
from .correct_smooth import CorrectAndSmooth
from .fastgcn import FastGCN
from .gat import GAT
from .gcn import GCN
from .graphsage import GraphSAGE
from .poisson import PoissonLearning
from .propagation import LabelPropagation, LabelSpreading
from .sgc import SGC

__all__ = [
    "GAT",
    "GCN",
    "SGC",
    "ConvergenceWarning",
    "CorrectAndSmooth",
    "FastGCN",
    "GraphSAGE",
    "LabelPropagation",
    "LabelSpreading",
    "PoissonLearning",
]
