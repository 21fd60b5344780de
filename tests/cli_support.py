"""What the command-line tests share: running ``main`` in process, and a small seeded pool."""

import numpy as np

from fastprop.cli import main
from fastprop.evaluation.datasets import make_noisy_mixture


def run(argv, capsys):
    """``(status, stdout, stderr)`` of ``fastprop argv``, run in this process."""
    status = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def seeded_pool(n_samples, n_features, seeds_per_class, random_state):
    """``(X, truth, seeds)``: a 4-class mixture with 20% outliers, the first samples of each class seeded."""
    X, truth = make_noisy_mixture(n_samples, 4, n_features=n_features, outlier_fraction=0.2,
                                  random_state=random_state)
    seeds = np.full(truth.size, -1)
    for label in range(4):
        seeds[np.flatnonzero(truth == label)[:seeds_per_class]] = label
    return X, truth, seeds
