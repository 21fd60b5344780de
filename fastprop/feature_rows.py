"""SGC rows of the features, with the whole graph's first steps kept once many rows are asked for.

A fit smooths the features at many sets of rows: the seeds, self-training's
pseudo-labels (thousands), and each provisional build's training and refit
rows (:mod:`fastprop.novelty`). :meth:`fastprop.adjacency.RandomWalk.smooth`
takes each set's first ``depth - 1`` steps over its rows' neighbourhood,
which for thousands of rows is most of the graph, again for every set. Once a
set that large is asked for, :class:`FeatureRows` takes those steps for the
whole graph once and keeps the result, so that every later row costs one
step. Every row is bit for bit the one ``RandomWalk.smooth`` gives (each
step's row is the same sum in the same order, whatever other rows are
taken).
"""

import numpy as np

__all__ = ["LEVEL_BYTES", "FeatureRows"]

#: The kept level is one float64 (n_samples, n_features) array of at most this
#: many bytes (13k x 384 is 40 MB, 100k x 128 is 102 MB); beyond, every set of
#: rows takes its own steps, as without a :class:`FeatureRows`.
LEVEL_BYTES = 128 * 2**20


class FeatureRows:
    """Rows of ``(D~^-1 (W + I))^depth diag(row_scale) X`` for one fit's features.

    Parameters
    ----------
    walk : fastprop.adjacency.RandomWalk
    features : ndarray of shape (n_samples, n_features)
    row_scale : ndarray of shape (n_samples,) or None
        As for :meth:`fastprop.adjacency.RandomWalk.smooth`.
    level_bytes : int, default=LEVEL_BYTES
        The most bytes the kept level may take.
    """

    def __init__(self, walk, features, row_scale, level_bytes=LEVEL_BYTES):
        self.walk, self.features, self.row_scale = walk, features, row_scale
        n_samples, n_features = features.shape
        self._affordable = 8 * n_samples * n_features <= level_bytes
        self._level = None  # S^(depth - 1) diag(row_scale) X for every row, float64, once kept
        self._level_depth = None

    def smooth(self, rows, depth):
        """Rows ``rows`` at ``depth`` steps: ``walk.smooth(features, rows, depth, row_scale=row_scale)``.

        Parameters
        ----------
        rows : ndarray of int
        depth : int

        Returns
        -------
        ndarray of shape (len(rows), n_features), float64
        """
        rows = np.asarray(rows, dtype=np.int64)
        if self._level_depth != depth and depth > 1 and self._affordable and self._covers(rows):
            self._level = None  # another depth's level is freed before this one is made
            self._level = self.walk.smooth(self.features, None, depth - 1, row_scale=self.row_scale)
            self._level_depth = depth
        if self._level_depth == depth:
            return self.walk.smooth(self._level, rows, 1)
        return self.walk.smooth(self.features, rows, depth, row_scale=self.row_scale)

    def keeps(self, depth):
        """Whether the level for ``depth`` is kept: then every row at ``depth`` is one step from it."""
        return self._level_depth == depth

    def smooth_in_blocks(self, depth):
        """Every row at ``depth`` from the kept level, a block of rows at a time (:meth:`keeps` must hold).

        Yields
        ------
        begin : int
            The first row of the block.
        smoothed : ndarray of shape (n_block_rows, n_features), float64
        """
        if not self.keeps(depth):
            raise ValueError(f"no level is kept for depth {depth}")
        yield from self.walk.smooth_in_blocks(self._level, 1)

    def _covers(self, rows):
        """Whether the rows' neighbourhoods hold as many vertices as the graph: then a level costs no more."""
        graph = self.walk.graph
        return rows.size * (graph.nnz / max(graph.shape[0], 1) + 1) >= graph.shape[0]
