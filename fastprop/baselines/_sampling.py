"""What the two sampled networks (GraphSAGE, FastGCN) share: mini-batches of seeds and Adam.

Both train on shuffled mini-batches of the seeds, drawing a new sample of the
graph for every batch, and step with the Adam update of
:mod:`fastprop.baselines.gcn` (same constants, same bias correction).
"""

import numpy as np

from .gcn import _ADAM_BETAS, _ADAM_EPS


def seed_batches(seeds, batch_size, rng):
    """The seeds, shuffled, cut into consecutive batches of ``batch_size`` (the last one may be smaller).

    Parameters
    ----------
    seeds : ndarray of int
    batch_size : int
        At least 1.
    rng : numpy.random.Generator

    Returns
    -------
    list of ndarray
    """
    order = rng.permutation(seeds)
    return [order[begin : begin + batch_size] for begin in range(0, order.size, batch_size)]


class Adam:
    """Adam (Kingma & Ba, 2015) over a list of arrays, updated in place.

    Parameters
    ----------
    params : list of ndarray
        Updated in place by :meth:`step`.
    learning_rate : float
    """

    def __init__(self, params, learning_rate):
        self.params = params
        self.learning_rate = learning_rate
        self.first = [np.zeros_like(p) for p in params]
        self.second = [np.zeros_like(p) for p in params]
        self.n_steps = 0

    def step(self, gradients):
        """Move every parameter against its gradient (same order as ``params``)."""
        beta1, beta2 = _ADAM_BETAS
        self.n_steps += 1
        size = self.learning_rate * np.sqrt(1 - beta2**self.n_steps) / (1 - beta1**self.n_steps)
        for param, grad, m, v in zip(self.params, gradients, self.first, self.second):
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            param -= size * m / (np.sqrt(v) + _ADAM_EPS)


def train_on_batches(params, seeds, gradients_of, *, batch_size, max_epochs, learning_rate, rng):
    """Adam on mini-batches of seeds: ``max_epochs`` passes, each over every seed once.

    Parameters
    ----------
    params : list of ndarray
        Updated in place.
    seeds : ndarray of int
    gradients_of : callable
        ``gradients_of(batch) -> gradients`` at the current ``params``, same
        order as ``params``; it draws its own sample of the graph from ``rng``.
    batch_size, max_epochs : int
    learning_rate : float
    rng : numpy.random.Generator
        Shuffles the seeds at every epoch.

    Returns
    -------
    list of ndarray
        ``params``.
    """
    optimiser = Adam(params, learning_rate)
    for _ in range(max_epochs):
        for batch in seed_batches(seeds, batch_size, rng):
            optimiser.step(gradients_of(batch))
    return params
