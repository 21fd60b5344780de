"""Evaluation apart from the engine: the paper's noisy protocol, the benchmark runner, data sets.

``protocol`` draws tasks and scores outputs (Yang et al., Sec. 4.1),
``benchmark`` runs every method on one shared graph per task, and
``datasets`` draws synthetic pools and loads labelled embeddings. Users who
only label their data never import this package.
"""
