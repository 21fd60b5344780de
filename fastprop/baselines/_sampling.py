"""What the two sampled networks (GraphSAGE, FastGCN) share: mini-batches of seeds and Adam.

Both train on shuffled mini-batches of the seeds, drawing a new sample of the
graph for every batch, and step with :class:`fastprop.baselines.gcn.Adam`,
the optimiser of every neural baseline.
"""

from .gcn import Adam


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
